//! The inventory's [`kstack_ports::CloudStatus`] for a cloud on Kubernetes: watches of the
//! release records (`kstack-release`, `kstack-release-<service>-<generation>` ConfigMaps, read
//! by the engine's [`ReleaseHistory`]) and of kstack's workloads in the cloud's namespace keep
//! a current snapshot; each change that alters it is announced to the status page.
//!
//! What a service's health is comes from the engine's status code ([`replica_counts`],
//! [`rollout_complete`], what `kstack status` shows) plus the recorded outcome: a generation
//! recorded failed, or a rolled-out workload whose pods stopped being ready, is `failed`.
//! [`snapshot`] is that judgement as a pure function (tested without a cluster).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::ConfigMap;
use kstack_engine::release::{ReleaseHistory, ServiceState, WORKLOAD_KINDS};
use kstack_engine::status::{replica_counts, rollout_complete};
use kstack_model::labels::{MANAGED_BY, RELEASE_LABEL};
use kstack_ports::cloud::{DeployStep, Generation, Health, Service, Snapshot};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde_json::Value;

/// `(kind, name)` → the workload as JSON.
pub type Workloads = BTreeMap<(String, String), Value>;

/// The first workload a record's manifests hold: `(kind, name)`.
fn workload_of(manifests: &[Value]) -> Option<(String, String)> {
    manifests.iter().find_map(|m| {
        let kind = m["kind"].as_str()?;
        WORKLOAD_KINDS.contains(&kind).then(|| {
            Some((
                kind.to_string(),
                m["metadata"]["name"].as_str()?.to_string(),
            ))
        })?
    })
}

/// Whether the controller rolled out the workload's current spec to every desired pod (they
/// may not all be ready).
fn rolled_out(kind: &str, o: &Value) -> bool {
    let s = &o["status"];
    let int = |v: &Value| v.as_i64().unwrap_or(0);
    if int(&s["observedGeneration"]) < int(&o["metadata"]["generation"]) {
        return false;
    }
    let (desired, _) = replica_counts(kind, o);
    match kind {
        "DaemonSet" => int(&s["updatedNumberScheduled"]) == desired,
        _ => int(&s["updatedReplicas"]) == desired,
    }
}

/// The cloud as the status page shows it, from the release records, the workloads and each
/// service's dependencies (`deps`, from the catalog).
pub fn snapshot(
    namespace: &str,
    history: &ReleaseHistory,
    workloads: &Workloads,
    deps: &BTreeMap<String, Vec<String>>,
) -> Snapshot {
    let index = history.index.clone().unwrap_or_default();
    let mut names: Vec<&String> = index.services.keys().collect();
    for s in history.services.keys() {
        if !index.services.contains_key(s) {
            names.push(s);
        }
    }
    names.sort();
    let mut services = Vec::new();
    for name in names {
        let entry = index.services.get(name);
        let records = history.services.get(name);
        let latest = records.and_then(|r| r.values().next_back());
        let state = entry.map(|e| e.state).or(latest.map(|l| l.state));
        let generation = entry.map(|e| e.generation).or(latest.map(|l| l.generation));
        // The workload of the newest record that names one (a removed generation has none).
        let wl = records.and_then(|r| r.values().rev().find_map(|r| workload_of(&r.manifests)));
        let obj = wl.as_ref().and_then(|k| workloads.get(k));
        let (desired, ready) = match (&wl, obj) {
            (Some((kind, _)), Some(o)) => replica_counts(kind, o),
            _ => (0, 0),
        };
        let (health, reason) = match (state, &wl, obj) {
            (Some(ServiceState::Removed), _, _) => (Health::Removed, None),
            (_, Some((kind, name)), None) => (
                Health::Missing,
                Some(format!("its {kind} {name} does not exist")),
            ),
            (_, None, _) => (
                Health::Missing,
                Some("no recorded generation names its workload".to_string()),
            ),
            (Some(ServiceState::Failed), _, _) => (
                Health::Failed,
                Some(format!(
                    "generation {} was recorded failed",
                    generation.unwrap_or_default()
                )),
            ),
            (_, Some((kind, _)), Some(o)) if rollout_complete(kind, o) => (Health::Healthy, None),
            // Every pod runs the current spec, yet some are not ready: failing now. (Old
            // pods still being replaced while enough are ready is a rollout.)
            (_, Some((kind, _)), Some(o)) if rolled_out(kind, o) && ready < desired => (
                Health::Failed,
                Some(format!("only {ready} of {desired} pods ready")),
            ),
            (_, Some(_), Some(_)) => (
                Health::Progressing,
                Some(format!("rolling out: {ready} of {desired} pods ready")),
            ),
        };
        let history: Vec<Generation> = records
            .into_iter()
            .flat_map(|r| r.values().rev())
            .map(|r| Generation {
                generation: r.generation,
                deploy_generation: r.deploy_generation,
                time: r.time.clone(),
                outcome: r.outcome(),
                images: r.images.clone(),
            })
            .collect();
        // What the deploy that wrote the newest record did (times from the record's start).
        let last_deploy = latest
            .map(|r| {
                r.steps
                    .iter()
                    .map(|st| DeployStep {
                        step: st.step.clone(),
                        action: st.action.clone(),
                        started: st.started_at(&r.time).unwrap_or_default(),
                        finished: st.finished_at(&r.time).unwrap_or_default(),
                        duration_ms: st.duration_ms,
                        outcome: st.outcome.to_string(),
                        reason: st.reason.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let depends_on = deps.get(name).cloned().unwrap_or_default();
        services.push(Service {
            name: name.clone(),
            kind: wl.map(|(k, _)| k).unwrap_or_default(),
            ready,
            desired,
            generation,
            health,
            reason,
            depends_on,
            history,
            last_deploy,
        });
    }
    // A dependency is kept only when that service is shown.
    let shown: std::collections::BTreeSet<String> =
        services.iter().map(|s| s.name.clone()).collect();
    for s in &mut services {
        s.depends_on.retain(|d| shown.contains(d));
    }
    Snapshot {
        namespace: namespace.to_string(),
        deploy_generation: history.index.as_ref().map(|i| i.generation),
        services,
        problem: None,
    }
}

/// What the watches have seen so far.
#[derive(Default)]
struct Seen {
    config_maps: BTreeMap<String, Value>,
    workloads: Workloads,
    /// Per watch, the objects of a relist in progress (replaced at its end).
    relist: BTreeMap<&'static str, BTreeMap<(String, String), Value>>,
    /// The last watch error, per watch, until it recovers.
    errors: BTreeMap<&'static str, String>,
}

enum Change {
    /// A watch started listing again.
    Init(&'static str),
    /// An object of a listing.
    Listed(&'static str, (String, String), Value),
    /// The listing is complete.
    ListDone(&'static str),
    Apply(&'static str, (String, String), Value),
    Delete(&'static str, (String, String)),
    Error(&'static str, String),
}

fn changes<K>(api: Api<K>, what: &'static str, labels: &str) -> BoxStream<'static, Change>
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    K: Send + Sync + 'static,
{
    let key = move |o: &K| -> (String, String) {
        (
            kind_of(what).to_string(),
            o.meta().name.clone().unwrap_or_default(),
        )
    };
    watcher(api, watcher::Config::default().labels(labels))
        .default_backoff()
        .map(move |e| match e {
            Ok(watcher::Event::Init) => Change::Init(what),
            Ok(watcher::Event::InitApply(o)) => {
                Change::Listed(what, key(&o), serde_json::to_value(&o).unwrap_or_default())
            }
            Ok(watcher::Event::InitDone) => Change::ListDone(what),
            Ok(watcher::Event::Apply(o)) => {
                Change::Apply(what, key(&o), serde_json::to_value(&o).unwrap_or_default())
            }
            Ok(watcher::Event::Delete(o)) => Change::Delete(what, key(&o)),
            Err(e) => Change::Error(what, e.to_string()),
        })
        .boxed()
}

impl Seen {
    /// Applies one change; true when what the snapshot is made of may have changed.
    fn apply(&mut self, change: Change) -> bool {
        match change {
            Change::Init(what) => {
                self.relist.insert(what, BTreeMap::new());
                false
            }
            Change::Listed(what, k, v) => {
                self.relist.entry(what).or_default().insert(k, v);
                false
            }
            Change::ListDone(what) => {
                let listed = self.relist.remove(what).unwrap_or_default();
                self.errors.remove(what);
                if what == "configmaps" {
                    self.config_maps = listed.into_iter().map(|((_, n), v)| (n, v)).collect();
                } else {
                    let kind = kind_of(what);
                    self.workloads.retain(|(k, _), _| k != kind);
                    self.workloads.extend(listed);
                }
                true
            }
            Change::Apply(what, k, v) => {
                self.errors.remove(what);
                if what == "configmaps" {
                    self.config_maps.insert(k.1, v);
                } else {
                    self.workloads.insert(k, v);
                }
                true
            }
            Change::Delete(what, k) => {
                if what == "configmaps" {
                    self.config_maps.remove(&k.1);
                } else {
                    self.workloads.remove(&k);
                }
                true
            }
            Change::Error(what, e) => {
                tracing::warn!(watch = what, error = %e, "cloud status watch failed; retrying");
                self.errors.insert(what, e);
                true
            }
        }
    }

    fn snapshot(&self, namespace: &str, deps: &BTreeMap<String, Vec<String>>) -> Snapshot {
        let (history, problem) = match ReleaseHistory::from_config_maps(self.config_maps.values()) {
            Ok(h) => (h, None),
            Err(e) => (ReleaseHistory::default(), Some(e.to_string())),
        };
        let mut s = snapshot(namespace, &history, &self.workloads, deps);
        let mut problems: Vec<String> = problem.into_iter().collect();
        for (what, e) in &self.errors {
            problems.push(format!(
                "watching {what} in namespace {namespace} failed (retrying): {e}"
            ));
        }
        if s.services.is_empty() && problems.is_empty() {
            problems.push(format!(
                "no release record in namespace {namespace}: nothing deployed there yet"
            ));
        }
        if !problems.is_empty() {
            s.problem = Some(problems.join("; "));
        }
        s
    }
}

fn kind_of(what: &str) -> &'static str {
    match what {
        "deployments" => "Deployment",
        "statefulsets" => "StatefulSet",
        "daemonsets" => "DaemonSet",
        _ => "ConfigMap",
    }
}

/// The cloud in one namespace, kept current by watches; see the module docs.
pub struct KubeCloudStatus {
    current: tokio::sync::watch::Receiver<Snapshot>,
    _task: AbortOnDrop,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl KubeCloudStatus {
    /// Starts watching `namespace`. `deps` are the services' dependencies (the catalog's
    /// `depends_on`); a service missing from it is shown without edges.
    pub fn start(
        client: Client,
        namespace: &str,
        deps: BTreeMap<String, Vec<String>>,
    ) -> Arc<KubeCloudStatus> {
        let ns = namespace.to_string();
        let (tx, rx) = tokio::sync::watch::channel(Snapshot {
            namespace: ns.clone(),
            problem: Some("reading the release records...".into()),
            ..Snapshot::default()
        });
        let managed = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
        let streams = vec![
            changes(
                Api::<ConfigMap>::namespaced(client.clone(), &ns),
                "configmaps",
                RELEASE_LABEL,
            ),
            changes(
                Api::<Deployment>::namespaced(client.clone(), &ns),
                "deployments",
                &managed,
            ),
            changes(
                Api::<StatefulSet>::namespaced(client.clone(), &ns),
                "statefulsets",
                &managed,
            ),
            changes(
                Api::<DaemonSet>::namespaced(client, &ns),
                "daemonsets",
                &managed,
            ),
        ];
        let task = tokio::spawn(async move {
            let mut all = futures::stream::select_all(streams);
            let mut seen = Seen::default();
            while let Some(change) = all.next().await {
                let mut dirty = seen.apply(change);
                // Take whatever else is ready before judging again (a relist, a rollout).
                while let Some(Some(change)) = all.next().now_or_never() {
                    dirty |= seen.apply(change);
                }
                if dirty {
                    let next = seen.snapshot(&ns, &deps);
                    tx.send_if_modified(|cur| {
                        let changed = *cur != next;
                        *cur = next;
                        changed
                    });
                }
            }
        });
        Arc::new(KubeCloudStatus {
            current: rx,
            _task: AbortOnDrop(task),
        })
    }
}

#[async_trait::async_trait]
impl kstack_ports::CloudStatus for KubeCloudStatus {
    async fn snapshot(&self) -> Snapshot {
        self.current.borrow().clone()
    }

    fn changes(&self) -> BoxStream<'static, ()> {
        let mut rx = self.current.clone();
        rx.mark_unchanged();
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kstack_engine::release::{
        DeployStep as RecordedStep, IndexEntry, ReleaseIndex, ServiceRecord, ServiceState,
        StepOutcome, index_config_map, record_config_map,
    };
    use serde_json::{Value, json};

    use super::*;

    fn record(service: &str, generation: u64, state: ServiceState, kind: &str) -> ServiceRecord {
        ServiceRecord {
            service: service.into(),
            generation,
            deploy_generation: generation + 10,
            time: format!("2026-11-25T20:0{generation}:00Z"),
            state,
            config_hash: "h".into(),
            objects: BTreeMap::new(),
            images: vec![format!("kolla/{service}:g{generation}")],
            release: "2025.1".into(),
            migration: None,
            rollback_of: None,
            config_refs: vec![],
            manifests: vec![json!({"kind": kind, "metadata": {"name": service}})],
            // What the deploy of each generation did: its config, then a wait that ended
            // as the generation is recorded.
            steps: vec![
                RecordedStep {
                    step: "config".into(),
                    action: format!("g{generation} create"),
                    started_ms: 0,
                    duration_ms: 1500,
                    outcome: StepOutcome::Done,
                    reason: None,
                },
                RecordedStep {
                    step: "healthy".into(),
                    action: "wait".into(),
                    started_ms: 1500,
                    duration_ms: 61_000,
                    outcome: if state == ServiceState::Failed {
                        StepOutcome::Failed
                    } else {
                        StepOutcome::Done
                    },
                    reason: (state == ServiceState::Failed).then(|| "timed out after 60s".into()),
                },
            ],
        }
    }

    /// The records as the engine writes them, read back as the watch sees them.
    fn history(records: &[ServiceRecord], current: &[(&str, u64, ServiceState)]) -> ReleaseHistory {
        let index = ReleaseIndex {
            generation: 7,
            input_hash: "x".into(),
            time: "t".into(),
            services: current
                .iter()
                .map(|(s, g, st)| {
                    (
                        s.to_string(),
                        IndexEntry {
                            generation: *g,
                            state: *st,
                        },
                    )
                })
                .collect(),
        };
        let mut maps: Vec<Value> = records
            .iter()
            .map(|r| record_config_map("openstack", r))
            .collect();
        maps.push(index_config_map("openstack", &index));
        ReleaseHistory::from_config_maps(&maps).unwrap()
    }

    fn deployment(name: &str, gen_: i64, observed: i64, updated: i64, ready: i64) -> Value {
        json!({"kind": "Deployment", "metadata": {"name": name, "generation": gen_},
               "spec": {"replicas": 2},
               "status": {"observedGeneration": observed, "replicas": 2, "updatedReplicas": updated,
                          "readyReplicas": ready, "availableReplicas": ready}})
    }

    fn workloads(list: &[Value]) -> Workloads {
        list.iter()
            .map(|o| {
                (
                    (
                        o["kind"].as_str().unwrap().to_string(),
                        o["metadata"]["name"].as_str().unwrap().to_string(),
                    ),
                    o.clone(),
                )
            })
            .collect()
    }

    fn deps() -> BTreeMap<String, Vec<String>> {
        BTreeMap::from([
            (
                "keystone".into(),
                vec!["mariadb".into(), "memcached".into()],
            ),
            ("glance".into(), vec!["keystone".into()]),
        ])
    }

    #[test]
    fn health_from_records_and_workloads() {
        use ServiceState::*;
        let h = history(
            &[
                record("keystone", 1, Healthy, "Deployment"),
                record("keystone", 2, Healthy, "Deployment"),
                record("glance", 1, Failed, "Deployment"),
                record("mariadb", 1, Healthy, "StatefulSet"),
                record("nova", 1, Healthy, "Deployment"),
                record("horizon", 1, Healthy, "Deployment"),
                record("placement", 1, Healthy, "Deployment"),
                record("heat", 3, Removed, "Deployment"),
            ],
            &[
                ("keystone", 2, Healthy),
                ("glance", 1, Failed),
                ("mariadb", 1, Healthy),
                ("nova", 1, Healthy),
                ("horizon", 1, Healthy),
                ("placement", 1, Healthy),
                ("heat", 3, Removed),
            ],
        );
        let w = workloads(&[
            deployment("keystone", 4, 4, 2, 2),
            deployment("glance", 1, 1, 2, 2),
            // Rolled out, then a pod stopped being ready: failing now.
            deployment("nova", 2, 2, 2, 1),
            // Rolling out.
            deployment("horizon", 3, 2, 1, 1),
            // Every pod updated and ready, an old one not gone yet: still rolling out.
            json!({"kind": "Deployment", "metadata": {"name": "placement", "generation": 2},
                   "spec": {"replicas": 2},
                   "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2,
                              "readyReplicas": 2, "availableReplicas": 2}}),
        ]);
        let s = snapshot("openstack", &h, &w, &deps());
        assert_eq!(s.deploy_generation, Some(7));
        let by: BTreeMap<&str, &Service> =
            s.services.iter().map(|x| (x.name.as_str(), x)).collect();
        assert_eq!(
            s.services
                .iter()
                .map(|x| x.name.as_str())
                .collect::<Vec<_>>(),
            [
                "glance",
                "heat",
                "horizon",
                "keystone",
                "mariadb",
                "nova",
                "placement"
            ]
        );
        let k = by["keystone"];
        assert_eq!(
            (k.health, k.ready, k.desired, k.generation),
            (Health::Healthy, 2, 2, Some(2))
        );
        assert_eq!(k.kind, "Deployment");
        // memcached is not deployed: no edge to it.
        assert_eq!(k.depends_on, ["mariadb"]);
        assert_eq!(
            k.history.iter().map(|g| g.generation).collect::<Vec<_>>(),
            [2, 1],
            "newest first"
        );
        assert_eq!(k.history[0].images, ["kolla/keystone:g2"]);
        assert_eq!(k.history[0].deploy_generation, 12);
        // The last deploy's steps are the newest record's, with times from its start.
        assert_eq!(
            k.last_deploy,
            [
                DeployStep {
                    step: "config".into(),
                    action: "g2 create".into(),
                    started: "2026-11-25T20:02:00Z".into(),
                    finished: "2026-11-25T20:02:01Z".into(),
                    duration_ms: 1500,
                    outcome: "done".into(),
                    reason: None,
                },
                DeployStep {
                    step: "healthy".into(),
                    action: "wait".into(),
                    started: "2026-11-25T20:02:01Z".into(),
                    finished: "2026-11-25T20:03:02Z".into(),
                    duration_ms: 61_000,
                    outcome: "done".into(),
                    reason: None,
                },
            ]
        );
        let g = &by["glance"].last_deploy[1];
        assert_eq!(
            (g.outcome.as_str(), g.reason.as_deref()),
            ("failed", Some("timed out after 60s"))
        );
        assert_eq!(by["glance"].health, Health::Failed);
        assert_eq!(
            by["glance"].reason.as_deref(),
            Some("generation 1 was recorded failed")
        );
        assert_eq!(by["nova"].health, Health::Failed);
        assert_eq!(by["nova"].reason.as_deref(), Some("only 1 of 2 pods ready"));
        assert_eq!(by["horizon"].health, Health::Progressing);
        assert_eq!(by["placement"].health, Health::Progressing);
        assert_eq!(by["mariadb"].health, Health::Missing);
        assert_eq!(
            by["mariadb"].reason.as_deref(),
            Some("its StatefulSet mariadb does not exist")
        );
        assert_eq!(by["heat"].health, Health::Removed);
    }

    #[test]
    fn watch_changes_build_the_snapshot_and_say_what_is_missing() {
        let mut seen = Seen::default();
        let s = seen.snapshot("openstack", &deps());
        assert!(
            s.problem.as_deref().unwrap().contains("no release record"),
            "{s:?}"
        );
        let h = [record("keystone", 1, ServiceState::Healthy, "Deployment")];
        seen.apply(Change::Init("configmaps"));
        for r in &h {
            let cm = record_config_map("openstack", r);
            let name = cm["metadata"]["name"].as_str().unwrap().to_string();
            seen.apply(Change::Listed("configmaps", ("ConfigMap".into(), name), cm));
        }
        assert!(seen.apply(Change::ListDone("configmaps")));
        seen.apply(Change::Apply(
            "deployments",
            ("Deployment".into(), "keystone".into()),
            deployment("keystone", 1, 1, 2, 2),
        ));
        let s = seen.snapshot("openstack", &deps());
        assert_eq!(s.problem, None);
        assert_eq!(s.services[0].health, Health::Healthy);
        seen.apply(Change::Delete(
            "deployments",
            ("Deployment".into(), "keystone".into()),
        ));
        seen.apply(Change::Error("deployments", "connection refused".into()));
        let s = seen.snapshot("openstack", &deps());
        assert_eq!(s.services[0].health, Health::Missing);
        assert!(
            s.problem.as_deref().unwrap().contains(
                "watching deployments in namespace openstack failed (retrying): connection refused"
            ),
            "{s:?}"
        );
        // A record that cannot be read is said, not hidden.
        seen.apply(Change::Apply(
            "configmaps",
            ("ConfigMap".into(), "kstack-release-bad-1".into()),
            json!({"metadata": {"name": "kstack-release-bad-1",
                   "labels": {"kstack.io/release": "service"}}, "data": {}}),
        ));
        let s = seen.snapshot("openstack", &deps());
        assert!(
            s.problem
                .as_deref()
                .unwrap()
                .contains("kstack-release-bad-1: no record.json"),
            "{s:?}"
        );
    }
}
