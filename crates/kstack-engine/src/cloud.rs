//! The deployed cloud as the inventory's status page shows it ([`Snapshot`]): each service's
//! health, replicas, recorded generations and the steps of its last deploy, judged from the
//! release records ([`ReleaseHistory`]) and kstack's workloads as the cluster reports them.
//!
//! A service's health comes from the same status code as the waits and `kstack status`
//! ([`replica_counts`], [`rollout_complete`]) plus the recorded outcome: a generation recorded
//! failed, or a rolled-out workload whose pods stopped being ready, is `failed`.
//!
//! Pure: `kstack-kube::cloud` keeps the records and workloads current with watches and calls
//! [`snapshot`] after each change; the types are the inventory's, from `kstack-ports`.

use std::collections::BTreeMap;

use kstack_ports::cloud::{DeployStep, Generation, Health, Service, Snapshot};
use serde_json::Value;

use crate::release::{ReleaseHistory, ServiceState, WORKLOAD_KINDS};
use crate::status::{replica_counts, rollout_complete};

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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::release::{
        IndexEntry, ReleaseIndex, ServiceRecord, ServiceState, index_config_map, record_config_map,
    };
    use serde_json::{Value, json};

    use super::*;

    /// The record [`crate::fake::service_record`] makes, with the steps of its deploy.
    fn record(service: &str, generation: u64, state: ServiceState, kind: &str) -> ServiceRecord {
        ServiceRecord {
            // What the deploy of each generation did: its config, then a wait that ended
            // as the generation is recorded.
            steps: crate::fake::deploy_steps(
                &format!("g{generation} create"),
                1500,
                61_000,
                60,
                state,
            ),
            ..crate::fake::service_record(service, generation, state, kind)
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
            openstack_release: None,
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
}
