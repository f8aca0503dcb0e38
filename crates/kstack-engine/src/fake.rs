//! An in-memory [`Cluster`] for tests of the planner and executor: stores applied manifests,
//! counts writes, logs every call with the (tokio) time it happened, and makes workloads and
//! Jobs ready after a per-service delay, never, or fail, as a test sets up.
//!
//! Time is tokio's, so tests run with a paused clock (`start_paused = true`): a 30-second
//! readiness delay costs no real time and elapsed virtual time measures parallelism exactly.
//!
//! [`service_record`] is a release record, and [`deploy_steps`] the steps it records, for the
//! tests of what reads the release history (the engine's cloud snapshot, `kstack-kube`'s watch
//! of the records, the status page's end-to-end test).
//!
//! Behind the `testing` feature: dependents turn it on in their `[dev-dependencies]`.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use kstack_model::labels::NAME_LABEL;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::cluster::{Cluster, ClusterError, Condition, ObjectRef, WaitOutcome};
use crate::release::{DeployStep, ServiceRecord, ServiceState, StepOutcome};

/// How a service's workload and Jobs behave once applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Ready (Jobs: complete) this long after the wait starts.
    ReadyAfter(Duration),
    /// The workload's pods run but never become ready; its wait times out. (Jobs complete:
    /// a Job pod finishes without a readiness probe, as on the local control plane.)
    NeverReady,
    /// Jobs fail (backoff limit exceeded).
    JobFails,
}

/// One logged call: when, and what (`apply ConfigMap/x`, `ready Deployment/y`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub at: Duration,
    pub what: String,
}

#[derive(Default)]
struct Inner {
    objects: BTreeMap<ObjectRef, Value>,
    writes: u64,
    log: Vec<LogEntry>,
    behaviour: BTreeMap<String, Behaviour>,
    /// Behaviour of objects with an image containing the key (wins over `behaviour`).
    image_behaviour: BTreeMap<String, Behaviour>,
    ready: BTreeSet<ObjectRef>,
    waiting: usize,
    max_waiting: usize,
    /// Calls fail once this many writes were made (a deploy killed at that point).
    crash_after_writes: Option<u64>,
    /// The next this many calls fail with a transient error.
    transient_failures: u64,
    /// Once this many writes were made, the API server goes away for this long.
    outage_at_writes: Option<(u64, Duration)>,
    /// Every call fails with a transient error until then.
    outage_until: Option<Instant>,
    /// Calls that failed during an outage.
    refused: u64,
}

/// See the module documentation.
pub struct FakeCluster {
    inner: Mutex<Inner>,
    start: Instant,
}

impl Default for FakeCluster {
    fn default() -> Self {
        FakeCluster {
            inner: Mutex::new(Inner::default()),
            start: Instant::now(),
        }
    }
}

fn matches(labels: &Value, selector: &str) -> bool {
    selector
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|kv| match kv.split_once('=') {
            Some((k, v)) => labels[k].as_str() == Some(v),
            None => !labels[kv].is_null(),
        })
}

impl FakeCluster {
    pub fn new() -> FakeCluster {
        FakeCluster::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_behaviour(&self, service: &str, b: Behaviour) {
        self.lock().behaviour.insert(service.to_owned(), b);
    }

    /// The behaviour of workloads and Jobs with an image whose reference contains `image`
    /// (a new release that never becomes ready), whatever their service.
    pub fn set_image_behaviour(&self, image: &str, b: Behaviour) {
        self.lock().image_behaviour.insert(image.to_owned(), b);
    }

    /// The next `n` calls (applies, gets, lists, deletes, waits) fail with a transient error,
    /// as while an API server restarts.
    pub fn fail_transiently(&self, n: u64) {
        self.lock().transient_failures = n;
    }

    /// Once `n` more writes were made, every call fails with a transient error (connection
    /// refused) for `length` of tokio time: an API server killed and started again.
    pub fn outage_after_writes(&self, n: u64, length: Duration) {
        let mut i = self.lock();
        i.outage_at_writes = Some((i.writes + n, length));
    }

    /// Calls refused during outages so far.
    pub fn refused(&self) -> u64 {
        self.lock().refused
    }

    /// From now on every call fails once `n` more writes were made.
    pub fn crash_after_writes(&self, n: Option<u64>) {
        let mut i = self.lock();
        i.crash_after_writes = n.map(|n| i.writes + n);
    }

    pub fn writes(&self) -> u64 {
        self.lock().writes
    }

    pub fn log(&self) -> Vec<LogEntry> {
        self.lock().log.clone()
    }

    /// Most waits that were in progress at the same time.
    pub fn max_concurrent_waits(&self) -> usize {
        self.lock().max_waiting
    }

    pub fn object(&self, r: &ObjectRef) -> Option<Value> {
        self.lock().objects.get(r).cloned()
    }

    pub fn objects(&self) -> Vec<ObjectRef> {
        self.lock().objects.keys().cloned().collect()
    }

    /// Stores an object as if someone else had created it (no write counted).
    pub fn insert(&self, manifest: Value) {
        self.lock()
            .objects
            .insert(ObjectRef::of(&manifest), manifest);
    }

    fn check(&self, i: &mut Inner) -> Result<(), ClusterError> {
        if let Some((n, length)) = i.outage_at_writes
            && i.writes >= n
        {
            i.outage_at_writes = None;
            i.outage_until = Some(Instant::now() + length);
        }
        if i.outage_until.is_some_and(|t| Instant::now() < t) {
            i.refused += 1;
            return Err(ClusterError {
                message: "connecting to the API server: Connection refused (os error 111)".into(),
                transient: true,
            });
        }
        if i.transient_failures > 0 {
            i.transient_failures -= 1;
            return Err(ClusterError {
                message: "the server is currently unable to handle the request (HTTP 503)".into(),
                transient: true,
            });
        }
        match i.crash_after_writes {
            Some(n) if i.writes >= n => Err(ClusterError::permanent("connection refused")),
            _ => Ok(()),
        }
    }

    fn note(&self, i: &mut Inner, what: String) {
        let at = self.start.elapsed();
        i.log.push(LogEntry { at, what });
    }
}

#[async_trait]
impl Cluster for FakeCluster {
    async fn apply(&self, manifest: &Value) -> Result<Value, ClusterError> {
        let mut i = self.lock();
        self.check(&mut i)?;
        let r = ObjectRef::of(manifest);
        if let Some(old) = i.objects.get(&r)
            && r.kind == "Job"
            && old["spec"] != manifest["spec"]
        {
            return Err(ClusterError::permanent(format!(
                "{r}: field is immutable: spec.template"
            )));
        }
        if let Some(old) = i.objects.get(&r)
            && crate::status::needs_replacement(manifest, old)
        {
            return Err(ClusterError::permanent(format!(
                "{r}: Forbidden: updates to statefulset spec for fields other than 'replicas', \
                 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' \
                 and 'minReadySeconds' are forbidden"
            )));
        }
        i.writes += 1;
        self.note(&mut i, format!("apply {r}"));
        i.ready.remove(&r);
        i.objects.insert(r, manifest.clone());
        Ok(manifest.clone())
    }

    async fn apply_force(&self, manifest: &Value) -> Result<Value, ClusterError> {
        self.apply(manifest).await
    }

    async fn create(&self, manifest: &Value) -> Result<bool, ClusterError> {
        let mut i = self.lock();
        self.check(&mut i)?;
        let r = ObjectRef::of(manifest);
        if i.objects.contains_key(&r) {
            return Ok(false);
        }
        i.writes += 1;
        self.note(&mut i, format!("create {r}"));
        i.objects.insert(r, manifest.clone());
        Ok(true)
    }

    async fn get(&self, r: &ObjectRef) -> Result<Option<Value>, ClusterError> {
        let mut i = self.lock();
        self.check(&mut i)?;
        Ok(i.objects.get(r).cloned())
    }

    async fn list(
        &self,
        kind: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Value>, ClusterError> {
        let mut i = self.lock();
        self.check(&mut i)?;
        Ok(i.objects
            .iter()
            .filter(|(r, o)| {
                r.kind == kind
                    && r.namespace.as_deref() == Some(namespace)
                    && matches(&o["metadata"]["labels"], selector)
            })
            .map(|(_, o)| o.clone())
            .collect())
    }

    async fn delete(&self, r: &ObjectRef) -> Result<(), ClusterError> {
        let mut i = self.lock();
        self.check(&mut i)?;
        i.writes += 1;
        self.note(&mut i, format!("delete {r}"));
        i.objects.remove(r);
        Ok(())
    }

    async fn delete_keeping_pods(&self, r: &ObjectRef) -> Result<(), ClusterError> {
        let mut i = self.lock();
        self.check(&mut i)?;
        i.writes += 1;
        self.note(&mut i, format!("delete {r} (keeping its pods)"));
        i.objects.remove(r);
        Ok(())
    }

    async fn wait(
        &self,
        r: &ObjectRef,
        condition: Condition,
        timeout: Duration,
    ) -> Result<WaitOutcome, ClusterError> {
        let behaviour = {
            let mut i = self.lock();
            self.check(&mut i)?;
            let Some(o) = i.objects.get(r) else {
                return Err(ClusterError::permanent(format!("{r} not found")));
            };
            if i.ready.contains(r) {
                return Ok(WaitOutcome::Met);
            }
            let service = o["metadata"]["labels"][NAME_LABEL]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let mut images = BTreeSet::new();
            crate::release::collect_images(o, &mut images);
            let b = i
                .image_behaviour
                .iter()
                .find(|(k, _)| images.iter().any(|im| im.contains(k.as_str())))
                .map(|(_, b)| *b)
                .or_else(|| i.behaviour.get(&service).copied())
                .unwrap_or(Behaviour::ReadyAfter(Duration::ZERO));
            i.waiting += 1;
            i.max_waiting = i.max_waiting.max(i.waiting);
            self.note(&mut i, format!("wait {r}"));
            b
        };
        let outcome = match (behaviour, condition) {
            (Behaviour::ReadyAfter(d), _) if d <= timeout => {
                tokio::time::sleep(d).await;
                WaitOutcome::Met
            }
            (Behaviour::JobFails, Condition::JobSucceeded) => WaitOutcome::Failed(
                "BackoffLimitExceeded: Job has reached the specified backoff limit".into(),
            ),
            (Behaviour::JobFails, Condition::RolloutComplete)
            | (Behaviour::NeverReady, Condition::JobSucceeded) => WaitOutcome::Met,
            _ => {
                tokio::time::sleep(timeout).await;
                WaitOutcome::TimedOut
            }
        };
        let mut i = self.lock();
        i.waiting -= 1;
        // A failed Job carries its Failed condition, as the Job controller writes it.
        if let (WaitOutcome::Failed(reason), Condition::JobSucceeded) = (&outcome, condition)
            && let Some(o) = i.objects.get_mut(r)
        {
            let (kind, message) = reason.split_once(": ").unwrap_or((reason.as_str(), ""));
            o["status"] = json!({
                "failed": 1,
                "conditions": [{"type": "Failed", "status": "True", "reason": kind, "message": message}],
            });
        }
        if outcome == WaitOutcome::Met {
            self.note(&mut i, format!("ready {r}"));
            i.ready.insert(r.clone());
            if let Some(o) = i.objects.get_mut(r) {
                let n = o["spec"]["replicas"].as_i64().unwrap_or(1);
                o["status"] = match condition {
                    Condition::JobSucceeded => json!({
                        "succeeded": 1,
                        "conditions": [{"type": "Complete", "status": "True"}],
                    }),
                    Condition::RolloutComplete => json!({
                        "replicas": n, "readyReplicas": n, "updatedReplicas": n,
                        "availableReplicas": n, "desiredNumberScheduled": n, "numberReady": n,
                        "updatedNumberScheduled": n, "numberAvailable": n,
                    }),
                };
            }
        }
        Ok(outcome)
    }

    async fn pods(&self, namespace: &str, selector: &str) -> Result<Vec<Value>, ClusterError> {
        let i = self.lock();
        let never_ready = i
            .behaviour
            .iter()
            .filter(|(_, b)| **b == Behaviour::NeverReady)
            .map(|(s, _)| s.clone())
            .find(|s| {
                matches(
                    &json!({ NAME_LABEL: s }),
                    selector.split(',').next().unwrap_or_default(),
                )
            });
        Ok(never_ready
            .map(|s| {
                vec![json!({
                    "metadata": {"name": format!("{s}-0"), "namespace": namespace},
                    "status": {
                        "phase": "Running",
                        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "containers with unready status: [main]"}],
                        "containerStatuses": [{"name": "main", "ready": false, "restartCount": 0, "state": {"running": {}}}],
                    }
                })]
            })
            .unwrap_or_default())
    }

    async fn events(&self, _namespace: &str, _name: &str) -> Result<Vec<Value>, ClusterError> {
        Ok(vec![
            json!({"reason": "Unhealthy", "message": "Readiness probe failed: connection refused"}),
        ])
    }
}

/// Generation `generation` of `service`'s record in `state`: recorded by deploy generation
/// `generation + 10` at a time that sorts by generation, release `2025.1`, one image tagged
/// `g<generation>`, one manifest of `kind` named like the service, and no steps.
pub fn service_record(
    service: &str,
    generation: u64,
    state: ServiceState,
    kind: &str,
) -> ServiceRecord {
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
        steps: vec![],
    }
}

/// The steps of a service's deploy as the engine records them: its config (`config_action`,
/// `config_ms`), then the wait until healthy (`wait_ms`), which failed with "timed out after
/// `timeout_secs`s" when `state` is [`ServiceState::Failed`].
pub fn deploy_steps(
    config_action: &str,
    config_ms: u64,
    wait_ms: u64,
    timeout_secs: u64,
    state: ServiceState,
) -> Vec<DeployStep> {
    let failed = state == ServiceState::Failed;
    vec![
        DeployStep {
            step: "config".into(),
            action: config_action.into(),
            started_ms: 0,
            duration_ms: config_ms,
            outcome: StepOutcome::Done,
            reason: None,
        },
        DeployStep {
            step: "healthy".into(),
            action: "wait".into(),
            started_ms: config_ms,
            duration_ms: wait_ms,
            outcome: if failed {
                StepOutcome::Failed
            } else {
                StepOutcome::Done
            },
            reason: failed.then(|| format!("timed out after {timeout_secs}s")),
        },
    ]
}
