//! The inventory's [`kstack_ports::CloudStatus`] for a cloud on Kubernetes: watches of the
//! release records (`kstack-release`, `kstack-release-<service>-<generation>` ConfigMaps, read
//! by the engine's [`ReleaseHistory`]) and of kstack's workloads in the cloud's namespace keep
//! a current snapshot; each change that alters it is announced to the status page.
//!
//! A service's health is judged by the engine ([`kstack_engine::cloud::snapshot`], a pure
//! function tested without a cluster); this module keeps its inputs current and says when a
//! watch fails or a record cannot be read.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::ConfigMap;
use kstack_engine::cloud::{Workloads, snapshot};
use kstack_engine::release::ReleaseHistory;
use kstack_model::labels::{MANAGED_BY, RELEASE_LABEL};
use kstack_ports::cloud::Snapshot;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde_json::Value;

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

    use kstack_engine::fake::service_record;
    use kstack_engine::release::{ServiceState, record_config_map};
    use kstack_ports::cloud::Health;
    use serde_json::{Value, json};

    use super::*;

    fn deployment(name: &str, gen_: i64, observed: i64, updated: i64, ready: i64) -> Value {
        json!({"kind": "Deployment", "metadata": {"name": name, "generation": gen_},
               "spec": {"replicas": 2},
               "status": {"observedGeneration": observed, "replicas": 2, "updatedReplicas": updated,
                          "readyReplicas": ready, "availableReplicas": ready}})
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
    fn watch_changes_build_the_snapshot_and_say_what_is_missing() {
        let mut seen = Seen::default();
        let s = seen.snapshot("openstack", &deps());
        assert!(
            s.problem.as_deref().unwrap().contains("no release record"),
            "{s:?}"
        );
        let h = [service_record(
            "keystone",
            1,
            ServiceState::Healthy,
            "Deployment",
        )];
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
