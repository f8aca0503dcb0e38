//! The `CloudStatus` trait: what the status page shows of the deployed cloud (services,
//! replicas, generations, history, dependencies) and when that changes.
//!
//! Like [`crate::sync::NodeSync`], the inventory calls it and the Kubernetes implementation
//! lives in another crate (`kstack-kube::cloud`, fed by watches of the release records and the
//! workloads, judged by `kstack_engine::cloud::snapshot`). [`NoCloudStatus`] is for a
//! standalone inventory and [`FakeCloudStatus`] for tests.

use std::sync::Mutex;

use futures::stream::BoxStream;
use serde::Serialize;
use tokio::sync::broadcast;

/// How a service looks right now, for people: the colour of its node on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Rolled out and ready, and its last generation was recorded healthy.
    Healthy,
    /// Rolling out or pods not ready yet.
    Progressing,
    /// Its last generation was recorded failed, or its pods are not ready after a rollout.
    Failed,
    /// Recorded, but its workload does not exist.
    Missing,
    /// Disabled and pruned.
    Removed,
}

impl Health {
    /// Every state, in the order of the enum.
    pub const ALL: [Health; 5] = [
        Health::Healthy,
        Health::Progressing,
        Health::Failed,
        Health::Missing,
        Health::Removed,
    ];

    /// The word shown, also the CSS class.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Progressing => "progressing",
            Health::Failed => "failed",
            Health::Missing => "missing",
            Health::Removed => "removed",
        }
    }
}

/// One recorded generation of a service (a `kstack-release-<service>-<generation>` record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Generation {
    pub generation: u64,
    /// The deploy generation that recorded it.
    pub deploy_generation: u64,
    /// RFC 3339, UTC.
    pub time: String,
    /// `healthy`, `failed`, `healthy, rollback of 3`, ...
    pub outcome: String,
    pub images: Vec<String>,
}

/// One step a deploy took for a service (kept in the release record it wrote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeployStep {
    /// `config`, `job db-sync`, `workload`, `healthy`, `rollback`, ...
    pub step: String,
    /// What it did: `create`, `change`, `unchanged`, `run again`, `wait`,
    /// `restore generation 3`, ...
    pub action: String,
    /// RFC 3339, UTC; empty when unknown.
    pub started: String,
    /// RFC 3339, UTC; empty when unknown.
    pub finished: String,
    pub duration_ms: u64,
    /// `done` or `failed`.
    pub outcome: String,
    /// Why it failed, one line.
    pub reason: Option<String>,
}

/// One service of the cloud.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Service {
    pub name: String,
    /// The workload's kind (`Deployment`, `StatefulSet`, `DaemonSet`), empty when unknown.
    pub kind: String,
    pub ready: i64,
    pub desired: i64,
    /// The current generation from the release index.
    pub generation: Option<u64>,
    pub health: Health,
    /// Why it is not healthy, when known (a recorded failure, pods not ready).
    pub reason: Option<String>,
    /// The services it starts after (enabled ones only).
    pub depends_on: Vec<String>,
    /// Newest first.
    pub history: Vec<Generation>,
    /// The steps of the deploy (or rollback) that wrote the newest generation in `history`,
    /// by start time; empty when its record holds none.
    pub last_deploy: Vec<DeployStep>,
}

/// The whole cloud at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// The cloud's namespace, empty when no cloud is watched.
    pub namespace: String,
    /// The last deploy generation of the release index.
    pub deploy_generation: Option<u64>,
    /// Sorted by name.
    pub services: Vec<Service>,
    /// Why the snapshot may be incomplete (the API server cannot be reached, a record cannot
    /// be read), for people.
    pub problem: Option<String>,
}

impl Snapshot {
    /// Each service's topological level: 0 for one without dependencies, else one more than
    /// the highest level of its dependencies. A dependency not in the snapshot is ignored; a
    /// cycle (which the catalog refuses) is broken by placing its members at the level reached.
    pub fn levels(&self) -> std::collections::BTreeMap<&str, usize> {
        use std::collections::BTreeMap;
        let by_name: BTreeMap<&str, &Service> =
            self.services.iter().map(|s| (s.name.as_str(), s)).collect();
        let mut levels: BTreeMap<&str, usize> = BTreeMap::new();
        fn level<'a>(
            name: &'a str,
            by_name: &BTreeMap<&'a str, &'a Service>,
            levels: &mut BTreeMap<&'a str, usize>,
            visiting: &mut Vec<&'a str>,
        ) -> usize {
            if let Some(l) = levels.get(name) {
                return *l;
            }
            if visiting.contains(&name) {
                return 0;
            }
            visiting.push(name);
            let mut l = 0;
            if let Some(s) = by_name.get(name) {
                for d in &s.depends_on {
                    if let Some((d, _)) = by_name.get_key_value(d.as_str()) {
                        l = l.max(level(d, by_name, levels, visiting) + 1);
                    }
                }
            }
            visiting.pop();
            levels.insert(name, l);
            l
        }
        for name in by_name.keys() {
            level(name, &by_name, &mut levels, &mut Vec::new());
        }
        levels
    }
}

/// The deployed cloud's state, for the status page. Implementations watch the cluster and
/// keep a current snapshot, so [`CloudStatus::snapshot`] is cheap.
#[async_trait::async_trait]
pub trait CloudStatus: Send + Sync + 'static {
    /// The cloud now.
    async fn snapshot(&self) -> Snapshot;

    /// Yields an item after each change of the snapshot (several changes may come as one).
    /// The stream ends when the provider stops.
    fn changes(&self) -> BoxStream<'static, ()>;
}

/// No cloud is watched (`kstack inventory serve --no-node-sync`, tests of the hosts only):
/// an empty snapshot that says so, and no changes.
#[derive(Debug, Default)]
pub struct NoCloudStatus;

#[async_trait::async_trait]
impl CloudStatus for NoCloudStatus {
    async fn snapshot(&self) -> Snapshot {
        Snapshot {
            problem: Some("no cloud is watched: this inventory runs without a cluster".into()),
            ..Snapshot::default()
        }
    }

    fn changes(&self) -> BoxStream<'static, ()> {
        Box::pin(futures::stream::pending())
    }
}

/// A stream of one item per message of `rx`; a lag counts as a change (something changed),
/// and the stream ends when the sender is gone.
pub fn broadcast_changes<T: Clone + Send + 'static>(
    rx: broadcast::Receiver<T>,
) -> BoxStream<'static, ()> {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => Some(((), rx)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }))
}

/// A deploy of one service as its release record keeps it (config, a db-sync Job, the workload,
/// the wait for health), for tests and the page benchmark.
pub fn sample_deploy_steps() -> Vec<DeployStep> {
    let step = |step: &str, action: &str, started: &str, finished: &str, ms: u64| DeployStep {
        step: step.into(),
        action: action.into(),
        started: started.into(),
        finished: finished.into(),
        duration_ms: ms,
        outcome: "done".into(),
        reason: None,
    };
    vec![
        step(
            "config",
            "create",
            "2026-11-25T20:00:00Z",
            "2026-11-25T20:00:00Z",
            300,
        ),
        step(
            "job db-sync",
            "create",
            "2026-11-25T20:00:00Z",
            "2026-11-25T20:00:12Z",
            12_400,
        ),
        step(
            "workload",
            "change",
            "2026-11-25T20:00:12Z",
            "2026-11-25T20:00:12Z",
            200,
        ),
        step(
            "healthy",
            "wait",
            "2026-11-25T20:00:12Z",
            "2026-11-25T20:01:40Z",
            88_000,
        ),
    ]
}

/// A `CloudStatus` whose snapshot the test sets ([`FakeCloudStatus::set`]); every set is a
/// change. Counts the change streams handed out, so a test can wait for a page to listen.
#[derive(Debug)]
pub struct FakeCloudStatus {
    snapshot: Mutex<Snapshot>,
    tx: broadcast::Sender<()>,
    subscribers: std::sync::atomic::AtomicUsize,
    subscribed: tokio::sync::Notify,
}

impl FakeCloudStatus {
    pub fn new(snapshot: Snapshot) -> Self {
        FakeCloudStatus {
            snapshot: Mutex::new(snapshot),
            tx: broadcast::channel(16).0,
            subscribers: Default::default(),
            subscribed: Default::default(),
        }
    }

    /// Replaces the snapshot and announces the change.
    pub fn set(&self, snapshot: Snapshot) {
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = snapshot;
        let _ = self.tx.send(());
    }

    /// Changes one service with `f` and announces the change.
    pub fn update(&self, service: &str, f: impl FnOnce(&mut Service)) {
        let mut s = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(svc) = s.services.iter_mut().find(|x| x.name == service) {
            f(svc);
        }
        drop(s);
        let _ = self.tx.send(());
    }

    /// How many change streams were handed out so far (one per page listening).
    pub fn subscribers(&self) -> usize {
        self.subscribers.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until at least `n` change streams were handed out (pages listening).
    pub async fn wait_subscribers(&self, n: usize) {
        loop {
            let notified = self.subscribed.notified();
            if self.subscribers() >= n {
                return;
            }
            notified.await;
        }
    }
}

#[async_trait::async_trait]
impl CloudStatus for FakeCloudStatus {
    async fn snapshot(&self) -> Snapshot {
        self.snapshot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn changes(&self) -> BoxStream<'static, ()> {
        self.subscribers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.subscribed.notify_waiters();
        broadcast_changes(self.tx.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, deps: &[&str]) -> Service {
        Service {
            name: name.into(),
            kind: "Deployment".into(),
            ready: 1,
            desired: 1,
            generation: Some(1),
            health: Health::Healthy,
            reason: None,
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            history: vec![],
            last_deploy: vec![],
        }
    }

    #[test]
    fn levels_follow_dependencies_and_ignore_unknown_ones() {
        let s = Snapshot {
            services: vec![
                svc("mariadb", &[]),
                svc("keystone", &["mariadb", "memcached"]),
                svc("glance", &["keystone", "mariadb"]),
                svc("nova", &["glance", "not-enabled"]),
            ],
            ..Snapshot::default()
        };
        let l = s.levels();
        assert_eq!(l["mariadb"], 0);
        assert_eq!(l["keystone"], 1);
        assert_eq!(l["glance"], 2);
        assert_eq!(l["nova"], 3);
    }

    #[test]
    fn a_cycle_does_not_hang() {
        let s = Snapshot {
            services: vec![svc("a", &["b"]), svc("b", &["a"])],
            ..Snapshot::default()
        };
        let l = s.levels();
        assert_eq!(l.len(), 2);
    }
}
