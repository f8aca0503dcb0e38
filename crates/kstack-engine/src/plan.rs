//! The planner: desired objects (a [`Rendered`] bundle and the catalog's dependency graph)
//! against what the cluster holds, giving per-object actions, a graph of steps and the objects
//! to prune. Pure: the observed state is read by [`crate::observe`] beforehand.
//!
//! Steps per service, in order: apply its config objects (ConfigMaps, Secrets, claims, Services,
//! access control) → its bootstrap Jobs (in `after` order within the service) → apply its
//! workload → wait until it is healthy. The config objects go in at once (they run nothing). A
//! Job waits for the services its task `needs` and the tasks it comes `after`, so a database
//! Job runs as soon as the database works, beside the services the workload still waits for; a
//! task that names neither waits for every service in the service's `depends_on`. The workload
//! waits for its Jobs and for every service in `depends_on`: no pod of a service starts before
//! what it depends on works; or, where the catalog gives a service `install_after`, for just
//! what that names (services healthy, other services' bootstrap tasks done), since the pods
//! need less to start than the service's place in an upgrade implies. Only while a service is
//! first installed: in an upgrade or a reconfigure its first step waits for every service in
//! `depends_on`, as a whole, so a failed step leaves its dependents untouched. The exception is
//! the catalog's `upgrade_before`: in an upgrade of a service, those of its dependencies count as
//! ready once their Jobs are done (their schema migrations), and their workloads wait until the
//! service is healthy (nova-conductor before nova-api and everything after it).
//!
//! Which Jobs a deploy runs depends on each service's [`Mode`] (install, steady, upgrade) and
//! its tasks' phases: `post` tasks run once their own service is healthy, or once its workload
//! is applied for a task `with_workload` (nothing waits for them); `contract` tasks run once every service of the deploy is healthy, followed by a
//! `Contracted` step that records it.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kstack_model::catalog::Catalog;
use kstack_model::graph::Graph;
use kstack_render::{Object, Rendered};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use kstack_model::catalog::Phase;
use kstack_model::labels::{
    APPLIED_HASH_ANNOTATION, GENERATED_ANNOTATION, MANAGED_BY, NAME_LABEL, RELEASE_LABEL,
    TASK_LABEL,
};

use crate::cluster::{Condition, ObjectRef};
use crate::release::{Migration, ReleaseHistory, ServiceState, collect_images};

/// First 16 hex digits of the SHA-256 of `bytes`.
pub fn hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The [`APPLIED_HASH_ANNOTATION`] of an object: the hash of its manifest, but of a Secret's
/// manifest without its data. The hash lands where more people may read it than the Secret (the
/// release record is a ConfigMap, `kstack plan -o json` prints it), and an unkeyed hash of a
/// Secret's data would let them test guesses of a password offline. Leaving the data out loses
/// nothing: a Secret's name carries the keyed hash of its content and Secrets are immutable, so
/// other data is another Secret.
fn applied_hash(object: &Object, manifest: &Value) -> String {
    if matches!(object, Object::Secret(_)) {
        let mut m = manifest.clone();
        if let Some(o) = m.as_object_mut() {
            o.remove("data");
            o.remove("stringData");
        }
        return hash(&serde_json::to_vec(&m).unwrap_or_default());
    }
    hash(&serde_json::to_vec(manifest).unwrap_or_default())
}

/// What an object is for in the step graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Namespace,
    /// Applied before the service's Jobs and workload.
    Config,
    /// A bootstrap Job of the named task.
    Job {
        task: String,
    },
    Workload,
}

/// One object kstack wants in the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredObject {
    pub reference: ObjectRef,
    pub service: Option<String>,
    pub role: Role,
    /// Hash of the rendered manifest (before the hash annotation is added).
    pub hash: String,
    /// The manifest to apply, carrying [`APPLIED_HASH_ANNOTATION`].
    pub manifest: Value,
}

impl DesiredObject {
    fn new(object: &Object) -> DesiredObject {
        let mut manifest = object.to_json_value();
        let hash = applied_hash(object, &manifest);
        if let Some(meta) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(a) = annotations.as_object_mut() {
                a.insert(
                    APPLIED_HASH_ANNOTATION.to_owned(),
                    Value::String(hash.clone()),
                );
            }
        }
        let role = match object {
            Object::Namespace(_) => Role::Namespace,
            Object::Job(j) => Role::Job {
                task: j
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(TASK_LABEL))
                    .cloned()
                    .unwrap_or_else(|| object.name().to_owned()),
            },
            Object::Deployment(_) | Object::StatefulSet(_) | Object::DaemonSet(_) => Role::Workload,
            _ => Role::Config,
        };
        DesiredObject {
            reference: ObjectRef::of(&manifest),
            service: object.service().map(str::to_owned),
            role,
            hash,
            manifest,
        }
    }

    /// ConfigMaps and Secrets marked immutable, and Jobs, are named by their content: if one
    /// exists it is the right one, and it can never be changed in place.
    pub fn immutable(&self) -> bool {
        self.reference.kind == "Job" || self.manifest["immutable"] == Value::Bool(true)
    }

    /// A Secret whose content the engine generates when it creates it (a key repository):
    /// created once, never changed, pruned or restored by kstack.
    pub fn generated(&self) -> bool {
        is_generated(&self.manifest)
    }
}

/// Whether an object (desired or observed) carries [`GENERATED_ANNOTATION`].
pub fn is_generated(manifest: &Value) -> bool {
    manifest["kind"] == "Secret"
        && !manifest["metadata"]["annotations"][GENERATED_ANNOTATION].is_null()
}

/// Per-step time limits (a default plus per-service values, `kstack_timeouts`) and how many
/// generations of each service the release record keeps (`kstack_history_limit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub default: Duration,
    pub per_service: BTreeMap<String, Duration>,
    pub history: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            default: Duration::from_secs(600),
            per_service: BTreeMap::new(),
            history: kstack_model::globals::DEFAULT_HISTORY_LIMIT,
        }
    }
}

impl Limits {
    pub fn for_service(&self, service: &str) -> Duration {
        self.per_service
            .get(service)
            .copied()
            .unwrap_or(self.default)
    }
}

/// What a deploy does to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Create,
    Change,
    /// A change Kubernetes refuses in place (a StatefulSet's pod management, governing Service
    /// or claim templates): the object is deleted with its pods left running, then created.
    Replace,
    Unchanged,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum StepKind {
    /// Apply the namespace.
    Namespace,
    /// Apply a service's config objects.
    Config,
    /// Create a bootstrap Job (unless it exists) and wait until it succeeded.
    Job { task: String, job: ObjectRef },
    /// Apply the workload.
    Workload,
    /// Wait until the workload's rollout is complete.
    Healthy { workload: ObjectRef },
    /// Record that the service's contract phase finished (after its contract Jobs).
    Contracted,
}

/// One node of the step graph.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub id: usize,
    pub kind: StepKind,
    pub service: Option<String>,
    /// Steps that must be done first (indices into [`Plan::steps`]).
    pub deps: Vec<usize>,
    /// Objects the step applies (indices into [`Plan::objects`]).
    pub objects: Vec<usize>,
    /// Limit for the wait of this step (Job and health steps).
    #[serde(skip)]
    pub timeout: Duration,
}

impl Step {
    /// `keystone: job db-sync`, `nova-api: healthy`, ...
    pub fn name(&self) -> String {
        let what = match &self.kind {
            StepKind::Namespace => "namespace".to_owned(),
            StepKind::Config => "config".to_owned(),
            StepKind::Job { task, .. } => format!("job {task}"),
            StepKind::Workload => "workload".to_owned(),
            StepKind::Healthy { .. } => "healthy".to_owned(),
            StepKind::Contracted => "contracted".to_owned(),
        };
        match &self.service {
            Some(s) => format!("{s}: {what}"),
            None => what,
        }
    }

    /// The condition the step waits for, if it waits.
    pub fn condition(&self) -> Option<Condition> {
        match self.kind {
            StepKind::Job { .. } => Some(Condition::JobSucceeded),
            StepKind::Healthy { .. } => Some(Condition::RolloutComplete),
            _ => None,
        }
    }
}

/// One desired object and what deploy does to it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedObject {
    pub desired: DesiredObject,
    pub action: Action,
    /// For an object kstack applied as it still wants it but that was changed in the cluster
    /// since ([`crate::status::drift`]): what changed. Such an object is planned as a change
    /// and applied with force, taking its fields back from whoever changed them.
    pub drift: Vec<String>,
}

/// Everything a deploy will do, computed without touching the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub namespace: String,
    pub objects: Vec<PlannedObject>,
    pub steps: Vec<Step>,
    /// Objects kstack owns that are no longer wanted; deleted after every step succeeded.
    pub prune: Vec<ObjectRef>,
    /// Hash of every desired manifest: the deploy's input.
    pub input_hash: String,
    /// Enabled services in start order.
    pub services: Vec<String>,
    /// What the deploy does to each enabled service.
    pub modes: BTreeMap<String, ServiceMode>,
    /// The OpenStack release deployed (`openstack_release`), recorded in the index when the
    /// deploy succeeds; set by the caller ([`plan`] leaves it empty).
    pub openstack_release: Option<String>,
}

/// How a deploy treats one service, from its recorded history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Mode {
    /// Never healthy before: install-phase tasks run (first-boot tasks, full schema sync).
    Install,
    /// Same workload images as its last healthy generation: a reconfigure (or nothing).
    Steady,
    /// The workload images differ from its last healthy generation `from`: expand-phase
    /// migrations run before the new pods, contract-phase ones after the whole upgrade.
    Upgrade { from: u64, from_release: String },
}

/// A service's [`Mode`] and whether its contract phase is part of this deploy (an upgrade, or
/// an earlier upgrade whose contract phase has not run yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceMode {
    #[serde(flatten)]
    pub mode: Mode,
    pub contract: bool,
}

impl ServiceMode {
    /// Whether a bootstrap task of `phase` runs in this deploy.
    pub fn runs(&self, phase: Phase) -> bool {
        match phase {
            Phase::Always | Phase::Post => true,
            Phase::Install => self.mode == Mode::Install,
            Phase::Expand => matches!(self.mode, Mode::Upgrade { .. }),
            Phase::Contract => self.contract,
        }
    }
}

/// The mode of every service with objects in `desired`.
fn modes(desired: &[DesiredObject], history: &ReleaseHistory) -> BTreeMap<String, ServiceMode> {
    let mut images: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for d in desired {
        if let Some(s) = &d.service {
            let set = images.entry(s).or_default();
            if d.role == Role::Workload {
                collect_images(&d.manifest, set);
            }
        }
    }
    images
        .into_iter()
        .map(|(service, want)| {
            let m = match history.last_healthy(service) {
                None => ServiceMode {
                    mode: Mode::Install,
                    contract: false,
                },
                Some(r) if r.workload_images() != want => ServiceMode {
                    mode: Mode::Upgrade {
                        from: r.generation,
                        from_release: r.release.clone(),
                    },
                    contract: true,
                },
                Some(r) => ServiceMode {
                    mode: Mode::Steady,
                    contract: r.migration == Some(Migration::Expanded),
                },
            };
            (service.to_owned(), m)
        })
        .collect()
}

/// Errors in the input of the planner.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("the rendered objects have no Namespace")]
    NoNamespace,
    #[error("service `{0}` has no workload among the rendered objects")]
    NoWorkload(String),
    #[error(transparent)]
    Graph(#[from] kstack_model::graph::GraphError),
}

/// The objects of a rendered cloud as the engine sees them, in stream order.
pub fn desired(rendered: &Rendered) -> Vec<DesiredObject> {
    rendered.objects.iter().map(DesiredObject::new).collect()
}

/// What the cluster holds of kstack's objects in the namespace (see [`crate::observe`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub objects: BTreeMap<ObjectRef, Value>,
    pub history: ReleaseHistory,
}

impl Observed {
    /// The hash kstack applied to an existing object; `Some("")` for an object without one.
    fn applied_hash(&self, r: &ObjectRef) -> Option<&str> {
        let o = self.objects.get(r)?;
        Some(
            o["metadata"]["annotations"][APPLIED_HASH_ANNOTATION]
                .as_str()
                .unwrap_or_default(),
        )
    }
}

/// Builds the plan. `catalog` gives the dependency graph; services are the ones with objects
/// in `rendered`.
pub fn plan(
    rendered: &Rendered,
    catalog: &Catalog,
    observed: &Observed,
    timeouts: &Limits,
) -> Result<Plan, PlanError> {
    let desired = desired(rendered);
    let namespace = desired
        .iter()
        .find(|d| d.role == Role::Namespace)
        .map(|d| d.reference.name.clone())
        .ok_or(PlanError::NoNamespace)?;

    let modes = modes(&desired, &observed.history);
    // The input: every rendered object, whichever of them this deploy applies.
    let mut all = Vec::new();
    for d in &desired {
        all.extend_from_slice(d.hash.as_bytes());
    }
    let phase_of = |service: &str, task: &str| {
        catalog
            .services
            .get(service)
            .and_then(|s| s.bootstrap.iter().find(|t| t.name == task))
            .map_or(Phase::Always, |t| t.phase)
    };
    let objects: Vec<PlannedObject> = desired
        .into_iter()
        // Only the Jobs of the phases this deploy runs for their service.
        .filter(|d| match (&d.role, &d.service) {
            (Role::Job { task }, Some(service)) => modes
                .get(service)
                .is_none_or(|m| m.runs(phase_of(service, task))),
            _ => true,
        })
        .map(|d| {
            let current = observed.objects.get(&d.reference);
            let drift = match (observed.applied_hash(&d.reference), current) {
                (Some(h), Some(current)) if h == d.hash => {
                    crate::status::drift(&d.manifest, current)
                }
                _ => Vec::new(),
            };
            let action = match observed.applied_hash(&d.reference) {
                None => Action::Create,
                Some(_) if d.immutable() || d.generated() => Action::Unchanged,
                Some(h) if h == d.hash && drift.is_empty() => Action::Unchanged,
                Some(h) if h == d.hash => Action::Change,
                Some(_)
                    if observed.objects.get(&d.reference).is_some_and(|current| {
                        crate::status::needs_replacement(&d.manifest, current)
                    }) =>
                {
                    Action::Replace
                }
                Some(_) => Action::Change,
            };
            PlannedObject {
                desired: d,
                action,
                drift,
            }
        })
        .collect();

    let enabled: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| o.desired.service.clone())
        .collect();
    let graph = Graph::from_catalog(catalog, |s| enabled.contains(s));
    let order = graph.topological_order()?;

    let mut steps: Vec<Step> = Vec::new();
    let mut push = |kind, service: Option<&str>, deps: Vec<usize>, objects, timeout| {
        let id = steps.len();
        steps.push(Step {
            id,
            kind,
            service: service.map(str::to_owned),
            deps,
            objects,
            timeout,
        });
        id
    };
    let ns_objects: Vec<usize> = objects
        .iter()
        .enumerate()
        .filter(|(_, o)| o.desired.role == Role::Namespace)
        .map(|(i, _)| i)
        .collect();
    let ns_step = push(
        StepKind::Namespace,
        None,
        vec![],
        ns_objects,
        timeouts.default,
    );

    // A service's catalog tasks, and its rendered Jobs by task.
    let tasks_of = |service: &str| -> &[kstack_model::catalog::BootstrapTask] {
        catalog
            .services
            .get(service)
            .map_or(&[], |s| s.bootstrap.as_slice())
    };
    let jobs_of = |service: &str| -> BTreeMap<String, usize> {
        objects
            .iter()
            .enumerate()
            .filter(|(_, o)| o.desired.service.as_deref() == Some(service))
            .filter_map(|(i, o)| match &o.desired.role {
                Role::Job { task } => Some((task.clone(), i)),
                _ => None,
            })
            .collect()
    };
    let job = |task: &str, i: usize| StepKind::Job {
        task: task.to_owned(),
        job: objects[i].desired.reference.clone(),
    };

    // Services in dependency order, so the health steps of dependencies already exist.
    let mut healthy: BTreeMap<String, usize> = BTreeMap::new();
    // Every service's bootstrap task by (service, task): the steps that end it.
    let mut all_task_steps: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    // Every service's config step and Jobs before its workload, and its workload step.
    let mut before_workload: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut workload_steps: BTreeMap<String, usize> = BTreeMap::new();
    // (workload step, step it must also wait for): a service of `upgrade_before` waits for the
    // health of the service that upgrades first, which is planned after it.
    let mut upgrade_first: Vec<(usize, usize)> = Vec::new();
    for service in &order {
        let timeout = timeouts.for_service(service);
        let idx = |pred: &dyn Fn(&DesiredObject) -> bool| -> Vec<usize> {
            objects
                .iter()
                .enumerate()
                .filter(|(_, o)| o.desired.service.as_deref() == Some(service) && pred(&o.desired))
                .map(|(i, _)| i)
                .collect()
        };
        // Only a service's first install starts before its dependencies are healthy (its config
        // objects, and the Jobs whose tasks need less): in an upgrade or a reconfigure nothing
        // of a service changes before what it depends on works, so a failed upgrade of keystone
        // leaves glance, its schema included, as it was. In an upgrade, a dependency the
        // catalog upgrades after this service (`upgrade_before`) counts as ready once its Jobs
        // (its schema migrations) are done.
        let installing = modes.get(service).is_some_and(|m| m.mode == Mode::Install);
        let upgrading = modes
            .get(service)
            .is_some_and(|m| matches!(m.mode, Mode::Upgrade { .. }));
        let first_of: &[String] = match catalog.services.get(service) {
            Some(s) if upgrading => &s.upgrade_before,
            _ => &[],
        };
        let ready = |d: &str| -> Vec<usize> {
            match before_workload.get(d) {
                Some(steps) if first_of.iter().any(|f| f == d) => steps.clone(),
                _ => healthy.get(d).copied().into_iter().collect(),
            }
        };
        let dependencies: Vec<usize> = graph.dependencies(service).flat_map(ready).collect();
        let mut config_deps = vec![ns_step];
        if !installing {
            config_deps.extend(&dependencies);
        }
        let config = push(
            StepKind::Config,
            Some(service),
            config_deps,
            idx(&|d| d.role == Role::Config),
            timeout,
        );

        // Bootstrap Jobs: a task waits for its `after` tasks and for the services it `needs`;
        // one with neither waits for every service the service depends on. A task without a
        // rendered Job passes its own predecessors on, so the order holds through it.
        let tasks = tasks_of(service);
        let jobs = jobs_of(service);
        let mut task_steps: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut job_steps = Vec::new();
        for task in tasks
            .iter()
            .filter(|t| !matches!(t.phase, Phase::Contract | Phase::Post))
        {
            let mut deps = vec![config];
            for a in &task.after {
                deps.extend(task_steps.get(a).into_iter().flatten().copied());
            }
            for n in &task.needs {
                deps.extend(ready(n));
            }
            if task.after.is_empty() && task.needs.is_empty() {
                deps.extend(&dependencies);
            }
            deps.sort_unstable();
            deps.dedup();
            let ends = match jobs.get(&task.name) {
                Some(&i) => {
                    let id = push(job(&task.name, i), Some(service), deps, vec![i], timeout);
                    job_steps.push(id);
                    vec![id]
                }
                None => deps.into_iter().filter(|d| *d != config).collect(),
            };
            all_task_steps.insert((service.clone(), task.name.clone()), ends.clone());
            task_steps.insert(task.name.clone(), ends);
        }
        // Jobs whose task the catalog does not name still run before the workload.
        for (task, &i) in &jobs {
            if !tasks.iter().any(|t| &t.name == task) {
                let mut deps = vec![config];
                deps.extend(&dependencies);
                let id = push(job(task, i), Some(service), deps, vec![i], timeout);
                job_steps.push(id);
            }
        }

        // The workload waits for its Jobs and for every service it depends on; on a first
        // install, for what its `install_after` names instead, when it names anything.
        let workloads = idx(&|d| d.role == Role::Workload);
        let Some(&wl) = workloads.first() else {
            return Err(PlanError::NoWorkload(service.clone()));
        };
        let mut deps = vec![config];
        deps.extend(job_steps);
        before_workload.insert(service.clone(), deps.clone());
        let install_after = catalog
            .services
            .get(service)
            .map_or(&[][..], |s| s.install_after.as_slice());
        if installing && !install_after.is_empty() {
            for entry in install_after {
                match entry.split_once('/') {
                    Some((dep, task)) => deps.extend(
                        all_task_steps
                            .get(&(dep.to_owned(), task.to_owned()))
                            .into_iter()
                            .flatten()
                            .copied(),
                    ),
                    None => deps.extend(healthy.get(entry)),
                }
            }
        } else {
            deps.extend(&dependencies);
        }
        deps.sort_unstable();
        deps.dedup();
        let apply = push(StepKind::Workload, Some(service), deps, workloads, timeout);
        let health = push(
            StepKind::Healthy {
                workload: objects[wl].desired.reference.clone(),
            },
            Some(service),
            vec![apply],
            vec![],
            timeout,
        );
        healthy.insert(service.clone(), health);
        workload_steps.insert(service.clone(), apply);
        for f in first_of {
            if let Some(&wl) = workload_steps.get(f) {
                upgrade_first.push((wl, health));
            }
        }

        // Post tasks: once the service is healthy (or, `with_workload`, once it is applied);
        // its dependents do not wait for them.
        let mut post_steps: BTreeMap<String, usize> = BTreeMap::new();
        for task in tasks.iter().filter(|t| t.phase == Phase::Post) {
            let Some(&i) = jobs.get(&task.name) else {
                continue;
            };
            let mut deps = vec![if task.with_workload { apply } else { health }];
            deps.extend(task.after.iter().filter_map(|a| post_steps.get(a)));
            deps.extend(task.needs.iter().filter_map(|n| healthy.get(n)));
            deps.sort_unstable();
            deps.dedup();
            let id = push(job(&task.name, i), Some(service), deps, vec![i], timeout);
            post_steps.insert(task.name.clone(), id);
        }
    }

    // Contract phases: once every service of the deploy is healthy (the whole upgrade
    // succeeded), in `after` order within a service, then recorded.
    let all_healthy: Vec<usize> = healthy.values().copied().collect();
    for service in &order {
        let timeout = timeouts.for_service(service);
        let jobs = jobs_of(service);
        let mut contract_steps: BTreeMap<&str, usize> = BTreeMap::new();
        for task in tasks_of(service)
            .iter()
            .filter(|t| t.phase == Phase::Contract)
        {
            let Some(&i) = jobs.get(&task.name) else {
                continue;
            };
            let mut deps = all_healthy.clone();
            deps.extend(
                task.after
                    .iter()
                    .filter_map(|a| contract_steps.get(a.as_str())),
            );
            deps.sort_unstable();
            deps.dedup();
            let id = push(job(&task.name, i), Some(service), deps, vec![i], timeout);
            contract_steps.insert(&task.name, id);
        }
        if !contract_steps.is_empty() {
            let ends = contract_steps.into_values().collect();
            push(StepKind::Contracted, Some(service), ends, vec![], timeout);
        }
    }

    for (workload, first) in upgrade_first {
        let deps = &mut steps[workload].deps;
        deps.push(first);
        deps.sort_unstable();
        deps.dedup();
    }

    let mut plan = Plan {
        namespace,
        input_hash: hash(&all),
        objects,
        steps,
        prune: Vec::new(),
        services: order,
        modes,
        openstack_release: None,
    };
    let trimmed = trimmed_records(&plan, &observed.history, timeouts.history);
    plan.prune = prune_candidates(&plan.objects, &enabled, observed, &trimmed);
    for (service, generation) in &trimmed {
        plan.prune.push(ObjectRef::new(
            "ConfigMap",
            Some(&plan.namespace),
            &format!("kstack-release-{service}-{generation}"),
        ));
    }
    Ok(plan)
}

/// The generations whose records go once the deploy succeeded: all but the newest `limit`
/// (counting the one this deploy records), the current one and the last healthy one.
fn trimmed_records(plan: &Plan, history: &ReleaseHistory, limit: usize) -> BTreeSet<(String, u64)> {
    let mut out = BTreeSet::new();
    for (service, gens) in &history.services {
        let latest = gens.keys().next_back().copied().unwrap_or(0);
        let adds = plan.services.contains(service)
            && crate::release::service_record(plan, history, service, ServiceState::Healthy, "")
                .generation
                > latest;
        let keep_old = limit.saturating_sub(usize::from(adds)).max(1);
        let mut keep: BTreeSet<u64> = gens.keys().rev().take(keep_old).copied().collect();
        if let Some(e) = history.index.as_ref().and_then(|i| i.services.get(service)) {
            keep.insert(e.generation);
        }
        if let Some(r) = history.last_healthy(service) {
            keep.insert(r.generation);
        }
        out.extend(
            gens.keys()
                .filter(|g| !keep.contains(g))
                .map(|g| (service.clone(), *g)),
        );
    }
    out
}

/// Owned objects in the namespace that are not desired. For an enabled service, objects that a
/// recorded generation still points at (older content-named ConfigMaps, Secrets, Jobs) are
/// kept for rollback. Claims are never pruned, even of a disabled service: they hold the
/// service's data (databases, images, keys), and disabling a service must not destroy it;
/// enabling it again finds its data where it was. Deleting a claim is the operator's decision.
/// Release records and objects without a service label are never pruned here; the records of
/// trimmed generations are added by the caller, and what only they point at is pruned.
fn prune_candidates(
    objects: &[PlannedObject],
    enabled: &BTreeSet<String>,
    observed: &Observed,
    trimmed: &BTreeSet<(String, u64)>,
) -> Vec<ObjectRef> {
    let wanted: BTreeSet<&ObjectRef> = objects.iter().map(|o| &o.desired.reference).collect();
    let referenced = observed.history.referenced_objects_except(trimmed);
    let released = observed.history.referenced_only_by(trimmed);
    let mut out = Vec::new();
    for (r, o) in &observed.objects {
        let labels = &o["metadata"]["labels"];
        if labels[MANAGED_BY.0] != MANAGED_BY.1 || !labels[RELEASE_LABEL].is_null() {
            continue;
        }
        let Some(service) = labels[NAME_LABEL].as_str() else {
            continue;
        };
        if wanted.contains(r) {
            continue;
        }
        // Generated keys are data too: a keystone disabled and enabled again keeps its keys.
        if r.kind == "PersistentVolumeClaim" || is_generated(o) {
            continue;
        }
        // A Job is kept while it may still matter (a finished Job is never run again); one
        // that only trimmed generations ran goes with them.
        let job_kept = r.kind == "Job" && !released.contains(r);
        if enabled.contains(service) && (job_kept || referenced.contains(r)) {
            continue;
        }
        out.push(r.clone());
    }
    out
}

impl Plan {
    /// The steps `step` still waits on, given which steps are done.
    pub fn waiting_on(&self, step: usize, done: &[bool]) -> Vec<usize> {
        self.steps[step]
            .deps
            .iter()
            .copied()
            .filter(|d| !done.get(*d).copied().unwrap_or(false))
            .collect()
    }

    /// Whether a deploy would change nothing (no object created or changed, nothing pruned).
    pub fn is_noop(&self) -> bool {
        self.prune.is_empty() && self.objects.iter().all(|o| o.action == Action::Unchanged)
    }

    /// Whether the plan runs a contract phase for the service.
    pub fn has_contract_steps(&self, service: &str) -> bool {
        self.steps
            .iter()
            .any(|s| s.kind == StepKind::Contracted && s.service.as_deref() == Some(service))
    }

    /// Indices of the planned objects of a service.
    pub fn service_objects(&self, service: &str) -> impl Iterator<Item = &PlannedObject> {
        self.objects
            .iter()
            .filter(move |o| o.desired.service.as_deref() == Some(service))
    }
}
