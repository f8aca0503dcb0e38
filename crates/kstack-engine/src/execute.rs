//! The executor: runs every step whose dependencies are done, in parallel (or one at a time),
//! each wait bounded by the step's timeout; records each service's generation once it is
//! healthy (or failed), with the steps this deploy took for it (what each did, when, how it
//! ended); prunes only after everything succeeded.
//!
//! On a failure, steps that depend on the failed one (directly or not) are not started; steps
//! that do not depend on it still run to the end, so the rest of the cloud is left converged.
//! What the pods of a failed step say is read by the `diagnose` submodule.
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kstack_model::labels::{COMPONENT_LABEL, MANAGED_BY, NAME_LABEL, RELEASE_LABEL, SERVER};
use serde_json::Value;

use crate::cluster::{
    CLUSTER_KINDS, Cluster, ClusterError, Condition, NAMESPACED_KINDS, ObjectRef, WaitOutcome,
};
use crate::plan::{Action, Observed, Plan, Step, StepKind};
use crate::release::{
    DeployStep, IndexEntry, Migration, ReleaseHistory, ReleaseIndex, ServiceRecord, ServiceState,
    StepOutcome, index_config_map, record_config_map, service_record, short_reason,
};
use crate::rollback::millis;

mod diagnose;

pub use diagnose::{PodReport, diagnose};

/// Reads what the cluster holds of kstack's objects: one list per namespaced kind (managed-by
/// kstack), one get per desired cluster-scoped object, and the release records.
pub async fn observe(
    cluster: &dyn Cluster,
    namespace: &str,
    cluster_scoped: &[ObjectRef],
) -> Result<Observed, ObserveError> {
    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let mut objects = BTreeMap::new();
    let retries = AtomicU64::new(0);
    for kind in NAMESPACED_KINDS {
        for o in retry(&retries, DEFAULT_OUTAGE, || {
            cluster.list(kind, namespace, &selector)
        })
        .await?
        {
            let mut r = ObjectRef::of(&o);
            r.kind = (*kind).to_owned();
            objects.insert(r, o);
        }
    }
    for r in cluster_scoped {
        if CLUSTER_KINDS.contains(&r.kind.as_str())
            && let Some(o) = retry(&retries, DEFAULT_OUTAGE, || cluster.get(r)).await?
        {
            objects.insert(r.clone(), o);
        }
    }
    let history = ReleaseHistory::from_config_maps(
        objects
            .iter()
            .filter(|(r, o)| {
                r.kind == "ConfigMap" && !o["metadata"]["labels"][RELEASE_LABEL].is_null()
            })
            .map(|(_, o)| o),
    )?;
    Ok(Observed { objects, history })
}

/// Reading the cluster's state failed.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Record(#[from] crate::release::RecordError),
}

/// How to run a plan.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// One step at a time.
    pub serial: bool,
    /// RFC 3339 time written into release records (the caller's clock: the engine reads none).
    pub now: String,
    /// Leave a service whose new pods do not become healthy as it is, for inspection, instead
    /// of restoring its last healthy generation.
    pub no_rollback: bool,
    /// How long one cluster call keeps being retried while the API server is unreachable or
    /// answers with a transient error (`None`: [`DEFAULT_OUTAGE`]).
    pub outage: Option<Duration>,
}

/// How long a deploy rides out an API server outage by default: control planes restart during
/// upgrades, and a deploy that takes minutes will meet one.
pub const DEFAULT_OUTAGE: Duration = Duration::from_secs(120);

impl Options {
    fn outage(&self) -> Duration {
        self.outage.unwrap_or(DEFAULT_OUTAGE)
    }
}

/// Progress, reported as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Started {
        step: usize,
    },
    /// `writes` API writes were made by the step.
    Done {
        step: usize,
        writes: u64,
    },
    Failed {
        step: usize,
        message: String,
    },
    Pruned {
        object: ObjectRef,
    },
}

/// A step that did not succeed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepFailure {
    pub step: String,
    pub service: Option<String>,
    /// The condition waited for, if the step waited.
    pub condition: Option<Condition>,
    pub reason: String,
    pub pods: Vec<PodReport>,
    /// What the automatic rollback of the service did, if one was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RolledBack>,
}

/// An automatic rollback after a failed health step.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RolledBack {
    /// The generation that failed.
    pub failed: u64,
    /// The last healthy generation, restored.
    pub restored: u64,
    /// The generation recording the restored state.
    pub generation: u64,
    /// Whether the restored pods became healthy again.
    pub healthy: bool,
    pub message: String,
}

impl fmt::Display for StepFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let service = self.service.as_deref().unwrap_or("namespace");
        match &self.condition {
            Some(c) => write!(
                f,
                "service {service}: step `{}` failed waiting for \"{c}\": {}",
                self.step, self.reason
            )?,
            None => write!(
                f,
                "service {service}: step `{}` failed: {}",
                self.step, self.reason
            )?,
        }
        if self.condition.is_some() && self.pods.is_empty() {
            write!(f, "\n  no pods found")?;
        }
        for p in &self.pods {
            write!(f, "\n  pod {}: {}", p.name, p.phase)?;
            for c in &p.conditions {
                write!(f, "; {c}")?;
            }
            for c in &p.containers {
                write!(f, "\n    container {c}")?;
            }
            for e in &p.events {
                write!(f, "\n    event {e}")?;
            }
        }
        if let Some(r) = &self.rollback {
            write!(f, "\n  {}", r.message)?;
        }
        Ok(())
    }
}

/// The result of a deploy.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Report {
    /// Names of the steps that finished.
    pub done: Vec<String>,
    pub failures: Vec<StepFailure>,
    /// Steps never started because a step they depend on failed.
    pub not_started: Vec<String>,
    pub pruned: Vec<ObjectRef>,
    /// API writes the deploy made (applies and deletes, release records included).
    pub writes: u64,
    /// The deploy generation now recorded in the cluster.
    pub generation: u64,
    /// Cluster calls repeated after a transient error (an API server outage is ridden out for
    /// [`Options::outage`]).
    pub retries: u64,
}

impl Report {
    pub fn succeeded(&self) -> bool {
        self.failures.is_empty()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Done,
    Failed,
}

struct Ctx<'a> {
    cluster: &'a dyn Cluster,
    plan: &'a Plan,
    observed: &'a Observed,
    options: &'a Options,
    writes: AtomicU64,
    /// Cluster calls repeated after a transient error.
    retries: AtomicU64,
    /// A call failed for longer than the outage bound: no further step starts.
    unreachable: std::sync::atomic::AtomicBool,
    /// Service → (record written, or the one already there) as the deploy goes.
    records: std::sync::Mutex<BTreeMap<String, IndexEntry>>,
    /// When the deploy started: step times in records count from here.
    started: tokio::time::Instant,
    /// Step id → when it started.
    begun: std::sync::Mutex<BTreeMap<usize, tokio::time::Instant>>,
    /// Jobs that had failed before and were run again (step ids).
    rerun: std::sync::Mutex<std::collections::BTreeSet<usize>>,
    /// Service → its finished steps, for the record it writes.
    steps: std::sync::Mutex<BTreeMap<String, Vec<DeployStep>>>,
}

/// The pause before the first retry of a cluster call that failed with a transient error
/// (conflict, throttling, an API server restarting), doubled after each retry up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Runs `op` again while it fails with a transient error, until `outage` has passed since its
/// first failure; counts the retries in `retries`. The error that ends it says how long the
/// cluster was unreachable.
pub(crate) async fn retry<T, F, Fut>(
    retries: &AtomicU64,
    outage: Duration,
    mut op: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClusterError>>,
{
    let mut pause = FIRST_BACKOFF;
    let mut first_failure = None;
    loop {
        match op().await {
            Err(e) if e.transient => {
                let since = *first_failure.get_or_insert_with(tokio::time::Instant::now);
                let failing = since.elapsed();
                if failing >= outage {
                    return Err(ClusterError {
                        message: format!(
                            "{} (still failing after {}s of retries; the limit is --api-outage {}s)",
                            e.message,
                            failing.as_secs(),
                            outage.as_secs()
                        ),
                        transient: true,
                    });
                }
                tracing::warn!(error = %e, failing_for = ?failing, "transient cluster error; retrying");
                retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(pause.min(outage - failing)).await;
                pause = (pause * 2).min(MAX_BACKOFF);
            }
            other => return other,
        }
    }
}

impl Ctx<'_> {
    async fn retry<T, F, Fut>(&self, op: F) -> Result<T, ClusterError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ClusterError>>,
    {
        let result = retry(&self.retries, self.options.outage(), op).await;
        if result.as_ref().is_err_and(|e| e.transient) {
            self.unreachable.store(true, Ordering::Relaxed);
        }
        result
    }

    async fn apply(&self, manifest: &Value) -> Result<(), ClusterError> {
        self.retry(|| self.cluster.apply(manifest)).await?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Waits for `condition` within `timeout` in all, watching again after a transient error.
    async fn wait(
        &self,
        object: &ObjectRef,
        condition: Condition,
        timeout: Duration,
    ) -> Result<WaitOutcome, ClusterError> {
        let deadline = tokio::time::Instant::now() + timeout;
        self.retry(|| {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            self.cluster.wait(object, condition, left)
        })
        .await
    }

    /// Applies the step's objects that are not unchanged; returns the writes made.
    async fn apply_objects(&self, step: &Step) -> Result<u64, ClusterError> {
        let mut n = 0;
        for &i in &step.objects {
            let o = &self.plan.objects[i];
            if o.action == Action::Replace {
                let r = &o.desired.reference;
                tracing::info!(object = %r, "replacing; its pods keep running");
                self.retry(|| self.cluster.delete_keeping_pods(r)).await?;
                n += 1;
            }
            if o.action == Action::Create && o.desired.generated() {
                let manifest = crate::keys::with_fresh_keys(&o.desired.manifest);
                if self.retry(|| self.cluster.create(&manifest)).await? {
                    tracing::info!(object = %o.desired.reference, "created with new keys");
                    self.writes.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            } else if !o.drift.is_empty() {
                tracing::warn!(
                    object = %o.desired.reference,
                    drift = %o.drift.join("; "),
                    "changed outside kstack; applying kstack's version again"
                );
                self.retry(|| self.cluster.apply_force(&o.desired.manifest))
                    .await?;
                self.writes.fetch_add(1, Ordering::Relaxed);
                n += 1;
            } else if o.action != Action::Unchanged {
                self.apply(&o.desired.manifest).await?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// What `step` did, for a step record: the actions on its objects (`create, change`), or
    /// what a Job or wait step does.
    fn action(&self, step: &Step) -> String {
        let on_objects = || {
            let (mut create, mut change, mut replace) = (false, false, false);
            for &i in &step.objects {
                let o = &self.plan.objects[i];
                match o.action {
                    Action::Create => create = true,
                    Action::Change => change = true,
                    Action::Replace => replace = true,
                    // Drift is applied again: a change.
                    Action::Unchanged => change |= !o.drift.is_empty(),
                }
            }
            let done: Vec<&str> = [(replace, "replace"), (create, "create"), (change, "change")]
                .into_iter()
                .filter_map(|(did, what)| did.then_some(what))
                .collect();
            if done.is_empty() {
                "unchanged".to_owned()
            } else {
                done.join(", ")
            }
        };
        match step.kind {
            StepKind::Job { .. }
                if self
                    .rerun
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&step.id) =>
            {
                "run again".into()
            }
            StepKind::Namespace | StepKind::Config | StepKind::Workload | StepKind::Job { .. } => {
                on_objects()
            }
            StepKind::Healthy { .. } => "wait".into(),
            StepKind::Contracted => "record".into(),
        }
    }

    /// The record entry of `step`, ending now with `outcome` (and why, when it failed).
    fn step_entry(&self, step: &Step, outcome: StepOutcome, reason: Option<&str>) -> DeployStep {
        let now = tokio::time::Instant::now();
        let begun = self
            .begun
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&step.id)
            .copied()
            .unwrap_or(now);
        let what = step.name();
        DeployStep {
            step: match &step.service {
                Some(s) => what
                    .strip_prefix(&format!("{s}: "))
                    .unwrap_or(&what)
                    .to_owned(),
                None => what.clone(),
            },
            action: self.action(step),
            started_ms: millis(begun.saturating_duration_since(self.started)),
            duration_ms: millis(now.saturating_duration_since(begun)),
            outcome,
            reason: reason.map(short_reason),
        }
    }

    /// The service's finished steps, by start time, plus `current` (the step writing the record).
    fn steps_with(&self, service: &str, current: DeployStep) -> Vec<DeployStep> {
        let mut steps = self
            .steps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(service)
            .cloned()
            .unwrap_or_default();
        steps.push(current);
        steps.sort_by_key(|s| s.started_ms);
        steps
    }

    /// Runs a step, keeping its times and outcome for its service's record.
    async fn run_timed(&self, step: &Step) -> Result<u64, StepFailure> {
        self.begun
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(step.id, tokio::time::Instant::now());
        let result = self.run(step).await;
        if let Some(service) = &step.service {
            let entry = match &result {
                Ok(_) => self.step_entry(step, StepOutcome::Done, None),
                Err(f) => self.step_entry(step, StepOutcome::Failed, Some(&f.reason)),
            };
            self.steps
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(service.clone())
                .or_default()
                .push(entry);
        }
        result
    }

    /// Records the service's generation in `state`, unless that exact record exists, with the
    /// steps the deploy took for it so far and `current`, the step recording it. The
    /// migration state is `migration`, else the one recorded for the generation.
    async fn record(
        &self,
        service: &str,
        state: ServiceState,
        migration: Option<Migration>,
        current: DeployStep,
    ) -> Result<u64, ClusterError> {
        let history = &self.observed.history;
        let mut record = service_record(self.plan, history, service, state, &self.options.now);
        record.steps = self.steps_with(service, current);
        let existing = history
            .services
            .get(service)
            .and_then(|m| m.get(&record.generation));
        record.migration = migration.or(existing.and_then(|r| r.migration));
        let entry = IndexEntry {
            generation: record.generation,
            state,
        };
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(service.to_owned(), entry);
        let exists = history
            .services
            .get(service)
            .and_then(|m| m.get(&record.generation))
            .is_some_and(|r| r.same_as(&record));
        if exists {
            return Ok(0);
        }
        self.apply(&record_config_map(&self.plan.namespace, &record))
            .await?;
        Ok(1)
    }

    async fn run(&self, step: &Step) -> Result<u64, StepFailure> {
        let fail = |reason: String| StepFailure {
            step: step.name(),
            service: step.service.clone(),
            condition: step.condition(),
            reason,
            pods: Vec::new(),
            rollback: None,
        };
        let cluster_err = |e: ClusterError| fail(e.message);
        match &step.kind {
            StepKind::Namespace | StepKind::Config | StepKind::Workload => {
                self.apply_objects(step).await.map_err(cluster_err)
            }
            StepKind::Job { job, .. } => {
                // A Job that succeeded or still runs is never re-created. One that failed is
                // deleted and run again: its spec is the same, so without this every later
                // deploy would fail on it until someone deleted it by hand.
                let mut writes = 0;
                if let Some(existing) = self
                    .retry(|| self.cluster.get(job))
                    .await
                    .map_err(cluster_err)?
                    && let Some(Err(reason)) = crate::status::job_finished(&existing)
                {
                    tracing::info!(job = %job, %reason, "running a failed Job again");
                    self.rerun
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(step.id);
                    self.retry(|| self.cluster.delete(job))
                        .await
                        .map_err(cluster_err)?;
                    let again = step
                        .objects
                        .iter()
                        .map(|&i| &self.plan.objects[i])
                        .filter(|o| o.action == Action::Unchanged)
                        .filter(|o| crate::cluster::ObjectRef::of(&o.desired.manifest) == *job);
                    for o in again {
                        self.apply(&o.desired.manifest).await.map_err(cluster_err)?;
                        writes += 1;
                    }
                    writes += 1;
                }
                writes += self.apply_objects(step).await.map_err(cluster_err)?;
                let outcome = self
                    .wait(job, Condition::JobSucceeded, step.timeout)
                    .await
                    .map_err(cluster_err)?;
                self.finish(step, outcome, &format!("job-name={}", job.name), writes)
                    .await
            }
            StepKind::Healthy { workload } => {
                let outcome = self
                    .wait(workload, Condition::RolloutComplete, step.timeout)
                    .await
                    .map_err(cluster_err)?;
                let service = step.service.as_deref().unwrap_or_default();
                let selector = format!("{NAME_LABEL}={service},{COMPONENT_LABEL}={SERVER}");
                let writes = self.finish(step, outcome, &selector, 0).await?;
                // An upgrade whose contract phase is still to run leaves the schema expanded.
                let migration = self
                    .plan
                    .modes
                    .get(service)
                    .filter(|m| m.contract && self.plan.has_contract_steps(service))
                    .map(|_| Migration::Expanded);
                let current = self.step_entry(step, StepOutcome::Done, None);
                let recorded = self
                    .record(service, ServiceState::Healthy, migration, current)
                    .await
                    .map_err(cluster_err)?;
                Ok(writes + recorded)
            }
            StepKind::Contracted => {
                let service = step.service.as_deref().unwrap_or_default();
                let current = self.step_entry(step, StepOutcome::Done, None);
                self.record(
                    service,
                    ServiceState::Healthy,
                    Some(Migration::Contracted),
                    current,
                )
                .await
                .map_err(cluster_err)
            }
        }
    }

    /// Restores the last healthy generation of a service whose new pods (generation `failed`)
    /// did not become healthy, and records it as a new generation (`rollback_of`).
    async fn roll_back(
        &self,
        service: &str,
        good: &ServiceRecord,
        failed: u64,
        step: &Step,
        failed_step: DeployStep,
    ) -> RolledBack {
        let generation = failed + 1;
        let mut out = RolledBack {
            failed,
            restored: good.generation,
            generation,
            healthy: false,
            message: String::new(),
        };
        let begun = tokio::time::Instant::now();
        match crate::rollback::restore(self.cluster, good, step.timeout).await {
            Ok(writes) => {
                self.writes.fetch_add(writes, Ordering::Relaxed);
                let mut record = crate::rollback::restored_record(
                    good,
                    generation,
                    self.observed.history.next_deploy_generation(),
                    &self.options.now,
                );
                let mut steps = self.steps_with(service, failed_step);
                steps.push(DeployStep {
                    step: "rollback".into(),
                    action: format!("restore generation {}", good.generation),
                    started_ms: millis(begun.saturating_duration_since(self.started)),
                    duration_ms: millis(begun.elapsed()),
                    outcome: StepOutcome::Done,
                    reason: None,
                });
                record.steps = steps;
                match self
                    .apply(&record_config_map(&self.plan.namespace, &record))
                    .await
                {
                    Ok(()) => {
                        self.records
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(
                                service.to_owned(),
                                IndexEntry {
                                    generation,
                                    state: ServiceState::Healthy,
                                },
                            );
                        out.healthy = true;
                        out.message = format!(
                            "rolled back automatically to generation {} (recorded as generation {generation}): healthy again; generation {failed} is recorded as failed (run with --no-rollback to leave it for inspection)",
                            good.generation
                        );
                    }
                    Err(e) => {
                        out.message = format!(
                            "rolled back to generation {}, healthy again, but recording it failed: {e}",
                            good.generation
                        );
                    }
                }
            }
            Err(reason) => {
                out.message = format!(
                    "automatic rollback to generation {} failed: {reason}",
                    good.generation
                );
            }
        }
        out
    }

    /// Turns a wait outcome into the step's result, with what the pods say on failure.
    async fn finish(
        &self,
        step: &Step,
        outcome: WaitOutcome,
        pod_selector: &str,
        writes: u64,
    ) -> Result<u64, StepFailure> {
        let reason = match outcome {
            WaitOutcome::Met => return Ok(writes),
            WaitOutcome::Failed(r) => r,
            WaitOutcome::TimedOut => format!("timed out after {}s", step.timeout.as_secs()),
        };
        let pods = diagnose(self.cluster, &self.plan.namespace, pod_selector).await;
        let failed_step = self.step_entry(step, StepOutcome::Failed, Some(&reason));
        if let Some(service) = &step.service {
            // Best effort: the failure itself is what the caller must see.
            let _ = self
                .record(service, ServiceState::Failed, None, failed_step.clone())
                .await;
        }
        let mut failure = StepFailure {
            step: step.name(),
            service: step.service.clone(),
            condition: step.condition(),
            reason,
            pods,
            rollback: None,
        };
        if let (StepKind::Healthy { .. }, Some(service)) = (&step.kind, &step.service)
            && !self.options.no_rollback
            && let Some(good) = self.observed.history.last_healthy(service)
        {
            let failed = service_record(
                self.plan,
                &self.observed.history,
                service,
                ServiceState::Failed,
                &self.options.now,
            );
            // The same objects as the good generation did not become healthy: nothing to
            // roll back to.
            if failed.objects != good.objects {
                let rolled = self
                    .roll_back(service, good, failed.generation, step, failed_step)
                    .await;
                failure.rollback = Some(rolled);
            }
        }
        Err(failure)
    }
}

/// Runs the plan against the cluster. Cluster errors inside steps, pruning and the final
/// bookkeeping become failures in the report, so the caller always has a report to print. A
/// call that keeps failing with transient errors for longer than [`Options::outage`] marks the
/// cluster unreachable: no further step starts, and the report lists them as not started.
pub async fn deploy(
    cluster: &dyn Cluster,
    plan: &Plan,
    observed: &Observed,
    options: &Options,
    progress: &(dyn Fn(&Event) + Sync),
) -> Result<Report, ClusterError> {
    let ctx = Ctx {
        cluster,
        plan,
        observed,
        options,
        writes: AtomicU64::new(0),
        retries: AtomicU64::new(0),
        unreachable: Default::default(),
        records: Default::default(),
        started: tokio::time::Instant::now(),
        begun: Default::default(),
        rerun: Default::default(),
        steps: Default::default(),
    };
    let n = plan.steps.len();
    let mut state = vec![State::Pending; n];
    let mut report = Report::default();
    let mut running = FuturesUnordered::new();
    loop {
        for step in &plan.steps {
            if (options.serial && !running.is_empty()) || ctx.unreachable.load(Ordering::Relaxed) {
                break;
            }
            if state[step.id] == State::Pending
                && step.deps.iter().all(|d| state[*d] == State::Done)
            {
                state[step.id] = State::Running;
                progress(&Event::Started { step: step.id });
                let ctx = &ctx;
                running.push(async move { (step.id, ctx.run_timed(step).await) });
            }
        }
        let Some((id, result)) = running.next().await else {
            break;
        };
        match result {
            Ok(writes) => {
                state[id] = State::Done;
                report.done.push(plan.steps[id].name());
                progress(&Event::Done { step: id, writes });
            }
            Err(failure) => {
                state[id] = State::Failed;
                progress(&Event::Failed {
                    step: id,
                    message: failure.to_string(),
                });
                report.failures.push(failure);
            }
        }
    }
    drop(running);
    report.not_started = plan
        .steps
        .iter()
        .filter(|s| state[s.id] == State::Pending)
        .map(Step::name)
        .collect();

    let bookkeeping = |reason: String| StepFailure {
        step: "record the deploy".into(),
        service: None,
        condition: None,
        reason,
        pods: Vec::new(),
        rollback: None,
    };
    if report.succeeded() {
        for r in &plan.prune {
            if let Err(e) = ctx.retry(|| cluster.delete(r)).await {
                report.failures.push(StepFailure {
                    step: format!("prune {r}"),
                    ..bookkeeping(e.message)
                });
                break;
            }
            ctx.writes.fetch_add(1, Ordering::Relaxed);
            progress(&Event::Pruned { object: r.clone() });
            report.pruned.push(r.clone());
        }
    }

    // The index: written only when something in it changed, so a no-op deploy writes nothing.
    let old = observed.history.index.clone().unwrap_or_default();
    let mut services = std::mem::take(&mut *ctx.records.lock().unwrap_or_else(|e| e.into_inner()));
    for (service, entry) in &old.services {
        if plan.services.contains(service) {
            services.entry(service.clone()).or_insert(entry.clone());
        } else if report.succeeded() {
            // Its objects were pruned above.
            let removed = IndexEntry {
                generation: entry.generation,
                state: ServiceState::Removed,
            };
            services.insert(service.clone(), removed);
        } else {
            services.insert(service.clone(), entry.clone());
        }
    }
    let input_hash = if report.succeeded() {
        plan.input_hash.clone()
    } else {
        old.input_hash.clone()
    };
    // The release the databases now have: the new one once the whole deploy succeeded (its
    // migrations, contract included, ran), the recorded one otherwise.
    let openstack_release = if report.succeeded() {
        plan.openstack_release
            .clone()
            .or_else(|| old.openstack_release.clone())
    } else {
        old.openstack_release.clone()
    };
    let writes = ctx.writes.load(Ordering::Relaxed);
    report.generation = old.generation;
    if ctx.unreachable.load(Ordering::Relaxed) {
        report.failures.push(bookkeeping(format!(
            "the API server is unreachable: deploy generation {} is not recorded; run `kstack deploy` again once it answers",
            observed.history.next_deploy_generation()
        )));
    } else if writes > 0 || services != old.services || input_hash != old.input_hash {
        // (A deploy that changes nothing writes nothing: the release is recorded with the next
        // change, which an upgrade always is.)
        let index = ReleaseIndex {
            generation: observed.history.next_deploy_generation(),
            input_hash,
            time: options.now.clone(),
            services,
            openstack_release,
        };
        match ctx.apply(&index_config_map(&plan.namespace, &index)).await {
            Ok(()) => report.generation = index.generation,
            Err(e) => report.failures.push(bookkeeping(format!(
                "recording deploy generation {}: {e}",
                index.generation
            ))),
        }
    }
    report.writes = ctx.writes.load(Ordering::Relaxed);
    report.retries = ctx.retries.load(Ordering::Relaxed);
    Ok(report)
}
