//! Planner and executor against the in-memory cluster, with tokio's clock paused so delays
//! cost no real time and elapsed time measures parallelism exactly.
use std::collections::BTreeMap;
use std::time::Duration;

use kstack_engine::fake::{Behaviour, FakeCluster};
use kstack_engine::{Cluster, Limits, ObjectRef, Options, ServiceState, StepKind};
use kstack_model::globals::Globals;
use kstack_model::labels::{MANAGED_BY, NAME_LABEL, TASK_LABEL};
use serde_json::json;
use tokio::time::Instant;

mod common;
use common::{config, rendered, run};

fn first(log: &[kstack_engine::fake::LogEntry], what: &str) -> Option<Duration> {
    log.iter().find(|e| e.what == what).map(|e| e.at)
}

#[tokio::test(start_paused = true)]
async fn the_default_cloud_deploys_in_dependency_order() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    for s in cfg.enabled.iter() {
        fake.set_behaviour(s, Behaviour::ReadyAfter(Duration::from_secs(5)));
    }
    let (plan, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(report.succeeded(), "{:#?}", report.failures);
    assert!(report.not_started.is_empty());
    let log = fake.log();
    // No pod of a service starts before each of its dependencies became ready; each Job waits
    // for the services its task needs (a task that names neither `needs` nor `after`: for the
    // service's dependencies), and every Job is done before its workload is applied.
    let ready_of = |d: &str| {
        let wl = plan
            .service_objects(d)
            .find(|o| o.desired.role == kstack_engine::plan::Role::Workload)
            .unwrap();
        first(&log, &format!("ready {}", wl.desired.reference)).unwrap()
    };
    // The catalog's bootstrap task a Job runs, by the Job's task label.
    let task_of = |service: &str, o: &kstack_engine::plan::PlannedObject| {
        let name = o.desired.manifest["metadata"]["labels"][TASK_LABEL]
            .as_str()
            .unwrap()
            .to_owned();
        cfg.catalog.services[service]
            .bootstrap
            .iter()
            .find(|t| t.name == name)
            .unwrap()
    };
    let mut early_jobs = 0;
    let mut early_workloads = Vec::new();
    for service in &plan.services {
        let deps = &cfg.catalog.services[service].depends_on;
        let objects: Vec<_> = plan.service_objects(service).collect();
        let workload = objects
            .iter()
            .find(|o| o.desired.role == kstack_engine::plan::Role::Workload)
            .unwrap();
        let workload_apply = first(&log, &format!("apply {}", workload.desired.reference)).unwrap();
        // A first install: the workload waits for what `install_after` names when it names
        // anything (services ready, other services' Jobs done), else for every dependency.
        let install_after = &cfg.catalog.services[service].install_after;
        if install_after.is_empty() {
            for d in deps.iter().filter(|d| cfg.enabled.contains(*d)) {
                assert!(
                    ready_of(d) <= workload_apply,
                    "{service}'s workload started before {d} was ready"
                );
            }
        }
        for entry in install_after {
            let done = match entry.split_once('/') {
                None => ready_of(entry),
                Some((dep, task)) => {
                    let job = plan
                        .service_objects(dep)
                        .find(|o| {
                            o.desired.reference.kind == "Job"
                                && o.desired.manifest["metadata"]["labels"][TASK_LABEL] == task
                        })
                        .unwrap_or_else(|| panic!("{service}: no Job for {entry}"));
                    first(&log, &format!("ready {}", job.desired.reference)).unwrap()
                }
            };
            assert!(
                done <= workload_apply,
                "{service}'s workload started before {entry} was done"
            );
        }
        if deps
            .iter()
            .filter(|d| cfg.enabled.contains(*d))
            .any(|d| workload_apply < ready_of(d))
        {
            early_workloads.push(service.clone());
        }
        for o in objects.iter().filter(|o| o.desired.reference.kind == "Job") {
            let task = task_of(service, o);
            let task_name = task.name.as_str();
            let start = first(&log, &format!("apply {}", o.desired.reference)).unwrap();
            let waits_for: Vec<&String> = if task.needs.is_empty() && task.after.is_empty() {
                deps.iter().collect()
            } else {
                task.needs.iter().collect()
            };
            for d in waits_for.into_iter().filter(|d| cfg.enabled.contains(*d)) {
                assert!(
                    ready_of(d) <= start,
                    "{service}: Job {task_name} started before {d} was ready"
                );
            }
            if deps
                .iter()
                .filter(|d| cfg.enabled.contains(*d))
                .any(|d| start < ready_of(d))
            {
                early_jobs += 1;
            }
        }
    }
    // Database Jobs ran beside the services their service's workload waited for.
    assert!(
        early_jobs > 0,
        "no Job ran before its service's dependencies were ready"
    );
    // Workloads whose install_after names less than depends_on started before all of it was
    // ready: nova-api and neutron-server before placement, heat-engine before heat-api.
    for service in ["nova-api", "neutron-server", "heat-engine"] {
        assert!(
            early_workloads.iter().any(|s| s == service),
            "{service} waited for all of depends_on: {early_workloads:?}"
        );
    }
    for service in &plan.services {
        let objects: Vec<_> = plan.service_objects(service).collect();
        let wl = objects
            .iter()
            .find(|o| o.desired.role == kstack_engine::plan::Role::Workload)
            .unwrap();
        let wl_apply = first(&log, &format!("apply {}", wl.desired.reference)).unwrap();
        for o in objects.iter().filter(|o| o.desired.reference.kind == "Job") {
            let done = first(&log, &format!("ready {}", o.desired.reference)).unwrap();
            if o.desired.manifest["metadata"]["labels"]["kstack.io/phase"] == "post" {
                // A post task runs once its service is healthy, or, `with_workload`, once its
                // workload is applied and what it needs is ready.
                let task = task_of(service, o);
                let task_name = task.name.as_str();
                let ready = first(&log, &format!("ready {}", wl.desired.reference)).unwrap();
                let start = first(&log, &format!("apply {}", o.desired.reference)).unwrap();
                if task.with_workload {
                    assert!(
                        wl_apply <= start,
                        "{service}: {task_name} before its workload"
                    );
                    assert!(
                        start < ready,
                        "{service}: {task_name} waited for the service to be ready"
                    );
                    for n in &task.needs {
                        assert!(ready_of(n) <= start, "{service}: {task_name} before {n}");
                    }
                } else {
                    assert!(
                        ready <= start,
                        "{service}: post task before the service was ready"
                    );
                }
                continue;
            }
            assert!(
                done <= wl_apply,
                "{service}: workload applied before its Job finished"
            );
        }
    }
    // Records: one generation per service, healthy, and the index at generation 1.
    let h = kstack_engine::observe(&fake, "openstack", &[])
        .await
        .unwrap()
        .history;
    assert_eq!(h.index.as_ref().unwrap().generation, 1);
    for s in &plan.services {
        let r = h.latest(s).unwrap();
        assert_eq!((r.generation, r.state), (1, ServiceState::Healthy), "{s}");
        assert!(!r.images.is_empty());
    }
    assert_eq!(report.generation, 1);
}

/// Longest path through the step graph when every wait of a service takes `delay[service]`.
fn step_critical_path(plan: &kstack_engine::Plan, delay: &BTreeMap<String, Duration>) -> Duration {
    let mut finish = vec![Duration::ZERO; plan.steps.len()];
    for s in &plan.steps {
        // Steps are numbered in a topological order by construction.
        let start = s.deps.iter().map(|d| finish[*d]).max().unwrap_or_default();
        let own = match s.kind {
            StepKind::Job { .. } | StepKind::Healthy { .. } => delay[s.service.as_ref().unwrap()],
            _ => Duration::ZERO,
        };
        finish[s.id] = start + own;
    }
    finish.into_iter().max().unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn parallel_deploy_takes_the_critical_path_and_serial_the_sum() {
    let cfg = config(Globals::default());
    let mut delay = BTreeMap::new();
    for (i, s) in cfg.enabled.iter().enumerate() {
        delay.insert(s.clone(), Duration::from_secs(2 + (i as u64 % 5)));
    }
    let mut elapsed = Vec::new();
    let mut plan = None;
    for serial in [false, true] {
        let fake = FakeCluster::new();
        for (s, d) in &delay {
            fake.set_behaviour(s, Behaviour::ReadyAfter(*d));
        }
        let start = Instant::now();
        let (p, report) = run(&fake, &cfg, serial, &Limits::default()).await;
        assert!(report.succeeded());
        elapsed.push(start.elapsed());
        if serial {
            assert_eq!(fake.max_concurrent_waits(), 1);
        } else {
            assert!(fake.max_concurrent_waits() > 1);
        }
        plan = Some(p);
    }
    let plan = plan.unwrap();
    let critical = step_critical_path(&plan, &delay);
    let sum: Duration = plan
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::Job { .. } | StepKind::Healthy { .. }))
        .map(|s| delay[s.service.as_ref().unwrap()])
        .sum();
    assert_eq!(
        elapsed[0], critical,
        "parallel deploy is as fast as the graph allows"
    );
    assert_eq!(elapsed[1], sum, "serial deploy runs one wait at a time");
    assert!(elapsed[0] < elapsed[1]);
}

#[tokio::test(start_paused = true)]
async fn a_second_deploy_of_unchanged_input_writes_nothing() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    let (_, first) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(first.succeeded() && first.writes > 0);
    let writes = fake.writes();
    let (plan, second) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(
        plan.is_noop(),
        "plan: {:?}",
        plan.objects
            .iter()
            .filter(|o| o.action != kstack_engine::Action::Unchanged)
            .map(|o| o.desired.reference.to_string())
            .collect::<Vec<_>>()
    );
    assert!(second.succeeded());
    assert_eq!(second.writes, 0);
    assert_eq!(fake.writes(), writes);
    assert_eq!(second.generation, 1);
}

#[tokio::test(start_paused = true)]
async fn a_workload_changed_by_hand_is_planned_as_drift_and_put_back() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    run(&fake, &cfg, false, &Limits::default()).await;
    let keystone = ObjectRef::new("Deployment", Some("openstack"), "keystone");
    let applied = fake.object(&keystone).unwrap();
    // `kubectl scale --replicas 3` and `kubectl set image`: the hash annotation stays.
    let mut edited = applied.clone();
    edited["spec"]["replicas"] = json!(3);
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("example/keystone:hacked");
    fake.insert(edited);

    let (plan, report) = run(&fake, &cfg, false, &Limits::default()).await;
    let o = plan
        .objects
        .iter()
        .find(|o| o.desired.reference == keystone)
        .unwrap();
    assert_eq!(o.action, kstack_engine::Action::Change);
    assert_eq!(o.drift.len(), 2, "{:?}", o.drift);
    assert_eq!(o.drift[0], "replicas: 3 in the cluster, 1 wanted");
    assert!(
        o.drift[1]
            .starts_with("image of container keystone: example/keystone:hacked in the cluster, "),
        "{}",
        o.drift[1]
    );
    // Nothing else drifted.
    assert_eq!(
        plan.objects
            .iter()
            .filter(|o| o.action != kstack_engine::Action::Unchanged)
            .count(),
        1
    );
    assert!(report.succeeded());
    assert_eq!(
        fake.object(&keystone).unwrap(),
        applied,
        "kstack's version again"
    );
    let (plan, _) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(plan.is_noop());
}

#[tokio::test(start_paused = true)]
async fn a_service_that_never_becomes_ready_fails_and_its_dependents_never_start() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    fake.set_behaviour("keystone", Behaviour::NeverReady);
    let mut timeouts = Limits::default();
    timeouts
        .per_service
        .insert("keystone".into(), Duration::from_secs(30));
    let start = Instant::now();
    let (plan, report) = run(&fake, &cfg, false, &timeouts).await;
    assert!(!report.succeeded());
    assert_eq!(report.failures.len(), 1);
    let f = &report.failures[0];
    assert_eq!(f.service.as_deref(), Some("keystone"));
    let message = f.to_string();
    assert!(message.contains("keystone: healthy"), "{message}");
    assert!(message.contains("rollout complete"), "{message}");
    assert!(message.contains("timed out after 30s"), "{message}");
    assert!(message.contains("ContainersNotReady"), "{message}");
    assert!(message.contains("Readiness probe failed"), "{message}");
    // The per-service timeout applied, not the default.
    assert!(start.elapsed() < Duration::from_secs(600));
    // Every service depending on keystone, directly or not, was not started: no workload of
    // it and no Job of a task needing keystone exists in the cluster (a database Job, which
    // needs only MariaDB, may have run).
    for dependent in [
        "glance-api",
        "nova-api",
        "nova-compute",
        "neutron-server",
        "horizon",
    ] {
        assert!(
            report
                .not_started
                .iter()
                .any(|s| s == &format!("{dependent}: workload")),
            "{dependent} not listed: {:?}",
            report.not_started
        );
        let present: Vec<String> = fake
            .objects()
            .into_iter()
            .filter(|r| matches!(r.kind.as_str(), "Deployment" | "StatefulSet" | "DaemonSet"))
            .filter(|r| fake.object(r).unwrap()["metadata"]["labels"][NAME_LABEL] == dependent)
            .map(|r| format!("{} {}", r.kind, r.name))
            .collect();
        assert!(
            present.is_empty(),
            "{dependent} runs in the cluster: {present:?}"
        );
        let register = fake.objects().into_iter().any(|r| {
            let o = fake.object(&r).unwrap();
            r.kind == "Job"
                && o["metadata"]["labels"][NAME_LABEL] == dependent
                && o["metadata"]["labels"][TASK_LABEL] == "register"
        });
        assert!(!register, "{dependent}'s registration ran without keystone");
    }
    // Services that do not depend on keystone were deployed all the same.
    assert!(
        report
            .done
            .iter()
            .any(|s| s == "openvswitch-db-server: healthy")
    );
    // Keystone's generation is recorded as failed; nothing was pruned.
    let h = kstack_engine::observe(&fake, "openstack", &[])
        .await
        .unwrap()
        .history;
    assert_eq!(h.latest("keystone").unwrap().state, ServiceState::Failed);
    assert!(report.pruned.is_empty());
    assert!(plan.services.contains(&"keystone".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_failed_job_names_the_reason() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    fake.set_behaviour("mariadb", Behaviour::JobFails);
    let (_, report) = run(&fake, &cfg, false, &Limits::default()).await;
    let f = &report.failures[0];
    assert_eq!(f.service.as_deref(), Some("mariadb"));
    assert!(f.to_string().contains("BackoffLimitExceeded"), "{f}");
    assert!(report.not_started.iter().any(|s| s == "mariadb: workload"));
}

#[tokio::test(start_paused = true)]
async fn a_deploy_interrupted_at_any_write_converges_and_runs_each_job_once() {
    let cfg = config(Globals::default());
    let total = {
        let fake = FakeCluster::new();
        run(&fake, &cfg, false, &Limits::default()).await;
        fake.writes()
    };
    for crash_at in (1..total).step_by(7) {
        let fake = FakeCluster::new();
        for s in cfg.enabled.iter() {
            fake.set_behaviour(s, Behaviour::ReadyAfter(Duration::from_secs(1)));
        }
        fake.crash_after_writes(Some(crash_at));
        let rendered = rendered(&cfg);
        let observed = kstack_engine::observe(&fake, "openstack", &[])
            .await
            .unwrap();
        let plan =
            kstack_engine::plan(&rendered, &cfg.catalog, &observed, &Limits::default()).unwrap();
        let crashed = kstack_engine::deploy(
            &fake,
            &plan,
            &observed,
            &Options::default(),
            &|_: &kstack_engine::Event| {},
        )
        .await;
        assert!(crashed.is_err() || !crashed.unwrap().succeeded());
        fake.crash_after_writes(None);
        let (_, report) = run(&fake, &cfg, false, &Limits::default()).await;
        assert!(
            report.succeeded(),
            "crash at {crash_at}: {:#?}",
            report.failures
        );
        let (again, noop) = run(&fake, &cfg, false, &Limits::default()).await;
        assert!(
            again.is_noop() && noop.writes == 0,
            "crash at {crash_at}: not converged"
        );
        let mut job_creates: BTreeMap<String, u32> = BTreeMap::new();
        for e in fake.log() {
            if let Some(job) = e.what.strip_prefix("apply Job/") {
                *job_creates.entry(job.to_owned()).or_default() += 1;
            }
        }
        assert!(!job_creates.is_empty());
        assert!(
            job_creates.values().all(|n| *n == 1),
            "crash at {crash_at}: {job_creates:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_changed_service_gets_a_new_generation_and_only_it_is_written() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    run(&fake, &cfg, false, &Limits::default()).await;
    let mut globals = Globals::default();
    globals.replicas.insert("keystone".into(), 2);
    let changed = config(globals);
    let before = fake.log().len();
    let (plan, report) = run(&fake, &changed, false, &Limits::default()).await;
    assert!(report.succeeded());
    let writes: Vec<String> = fake.log()[before..]
        .iter()
        .filter(|e| e.what.starts_with("apply ") || e.what.starts_with("delete "))
        .map(|e| e.what.clone())
        .collect();
    assert_eq!(
        writes,
        [
            // Two replicas: a disruption budget keeps one of them up.
            "apply PodDisruptionBudget/keystone",
            "apply Deployment/keystone",
            "apply ConfigMap/kstack-release-keystone-2",
            "apply ConfigMap/kstack-release"
        ],
        "only keystone's workload and its records are written"
    );
    let h = kstack_engine::observe(&fake, "openstack", &[])
        .await
        .unwrap()
        .history;
    assert_eq!(h.latest("keystone").unwrap().generation, 2);
    assert_eq!(h.latest("glance-api").unwrap().generation, 1);
    assert_eq!(h.index.unwrap().generation, 2);
    assert_eq!(report.generation, 2);
    assert!(plan.prune.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_disabled_service_is_pruned_and_nothing_kstack_does_not_own() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    run(&fake, &cfg, false, &Limits::default()).await;
    // Someone else's object that happens to carry horizon's name label.
    fake.insert(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "not-ours", "namespace": "openstack", "labels": {NAME_LABEL: "horizon"}},
    }));
    let horizon: Vec<ObjectRef> = fake
        .objects()
        .into_iter()
        .filter(|r| fake.object(r).unwrap()["metadata"]["labels"][MANAGED_BY.0] == MANAGED_BY.1)
        .filter(|r| fake.object(r).unwrap()["metadata"]["labels"][NAME_LABEL] == "horizon")
        .collect();
    assert!(horizon.iter().any(|r| r.kind == "Deployment"));
    let vars = json!({"enable_horizon": "no"}).as_object().unwrap().clone();
    let globals = Globals::from_vars(&vars.into_iter().collect()).unwrap();
    let cfg2 = config(globals);
    assert!(!cfg2.enabled.contains("horizon"));
    let (plan, report) = run(&fake, &cfg2, false, &Limits::default()).await;
    assert!(report.succeeded());
    let mut pruned = report.pruned.clone();
    pruned.sort();
    let mut expected = horizon.clone();
    expected.sort();
    assert_eq!(pruned, expected);
    assert_eq!(plan.prune.len(), expected.len());
    for r in &horizon {
        assert!(fake.object(r).is_none(), "{r} still exists");
    }
    assert!(
        fake.object(&ObjectRef::new("ConfigMap", Some("openstack"), "not-ours"))
            .is_some()
    );
    let h = kstack_engine::observe(&fake, "openstack", &[])
        .await
        .unwrap()
        .history;
    assert_eq!(
        h.index.unwrap().services["horizon"].state,
        ServiceState::Removed
    );
    // Horizon's history stays.
    assert!(h.services.contains_key("horizon"));
    let _ = fake
        .get(&ObjectRef::new("Namespace", None, "openstack"))
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_disabled_service_keeps_its_claims() {
    let fake = FakeCluster::new();
    run(
        &fake,
        &config(Globals::default()),
        false,
        &Limits::default(),
    )
    .await;
    let owned = |kind: &str| -> Vec<ObjectRef> {
        fake.objects()
            .into_iter()
            .filter(|r| r.kind == kind)
            .filter(|r| fake.object(r).unwrap()["metadata"]["labels"][NAME_LABEL] == "glance-api")
            .collect()
    };
    let claims = owned("PersistentVolumeClaim");
    assert!(!claims.is_empty(), "glance-api has a claim for its images");
    let vars = json!({"enable_glance": "no"}).as_object().unwrap().clone();
    let cfg = config(Globals::from_vars(&vars.into_iter().collect()).unwrap());
    let (plan, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(report.succeeded());
    assert!(owned("Deployment").is_empty(), "the workload is pruned");
    assert_eq!(owned("PersistentVolumeClaim"), claims, "the data is kept");
    assert!(plan.prune.iter().all(|r| r.kind != "PersistentVolumeClaim"));
}

#[tokio::test(start_paused = true)]
async fn transient_cluster_errors_are_retried() {
    // Failures in a row while reading the cluster (before the deploy) are retried there.
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    fake.fail_transiently(6);
    let (_, report) = run(&fake, &cfg, true, &Limits::default()).await;
    assert!(report.succeeded(), "{:?}", report.failures);
    assert!(fake.writes() > 0);

    // Failures in the middle of the deploy are retried there, and counted.
    let mid = FakeCluster::new();
    let (_, first) = run(&mid, &cfg, true, &Limits::default()).await;
    assert!(first.succeeded());
    let (plan, observed) = keystone_scaled(&mid).await;
    mid.fail_transiently(3);
    let options = Options {
        serial: true,
        now: "2026-01-02T00:00:00Z".into(),
        ..Options::default()
    };
    let report = deploy(&mid, &plan, &observed, &options).await;
    assert!(report.succeeded(), "{:?}", report.failures);
    assert_eq!(report.retries, 3);
}

/// A plan that changes keystone's replicas on a cluster where the default cloud runs.
async fn keystone_scaled(fake: &FakeCluster) -> (kstack_engine::Plan, kstack_engine::Observed) {
    let mut changed = Globals::default();
    changed.replicas.insert("keystone".into(), 2);
    let changed = config(changed);
    let rendered = rendered(&changed);
    let observed = kstack_engine::observe(fake, "openstack", &[])
        .await
        .unwrap();
    let plan =
        kstack_engine::plan(&rendered, &changed.catalog, &observed, &Limits::default()).unwrap();
    (plan, observed)
}

async fn deploy(
    fake: &FakeCluster,
    plan: &kstack_engine::Plan,
    observed: &kstack_engine::Observed,
    options: &Options,
) -> kstack_engine::Report {
    kstack_engine::deploy(
        fake,
        plan,
        observed,
        options,
        &|_: &kstack_engine::Event| {},
    )
    .await
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_deploy_rides_out_an_api_server_outage_of_30_seconds() {
    // The API server goes away for 30 s after the deploy's third write, while the steps of
    // the whole default cloud are under way: every call in that time is refused.
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    for s in cfg.enabled.iter() {
        fake.set_behaviour(s, Behaviour::ReadyAfter(Duration::from_secs(2)));
    }
    fake.outage_after_writes(3, Duration::from_secs(30));
    let started = Instant::now();
    let (plan, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(report.succeeded(), "{:#?}", report.failures);
    assert!(fake.refused() > 0, "the outage never happened");
    assert!(
        report.retries >= fake.refused(),
        "{} < {}",
        report.retries,
        fake.refused()
    );
    assert!(started.elapsed() >= Duration::from_secs(30));
    // Nothing was lost and nothing was written twice: each object once, one Job per task.
    let mut applied = BTreeMap::new();
    for e in fake.log().iter().filter(|e| e.what.starts_with("apply ")) {
        *applied.entry(e.what.clone()).or_insert(0) += 1;
    }
    for o in &plan.objects {
        let key = format!("apply {}", o.desired.reference);
        assert!(
            fake.object(&o.desired.reference).is_some(),
            "{key} is missing"
        );
        if o.desired.reference.kind == "Job" {
            assert_eq!(applied.get(&key), Some(&1), "{key}");
        }
    }
    // Converged: a second deploy writes nothing.
    let (_, again) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(again.succeeded());
    assert_eq!(again.writes, 0);
}

#[tokio::test(start_paused = true)]
async fn an_outage_longer_than_the_bound_fails_the_step_and_says_how_long() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    let (_, first) = run(&fake, &cfg, true, &Limits::default()).await;
    assert!(first.succeeded());
    let (plan, observed) = keystone_scaled(&fake).await;
    fake.outage_after_writes(0, Duration::from_secs(600));
    let options = Options {
        serial: true,
        now: "2026-01-02T00:00:00Z".into(),
        outage: Some(Duration::from_secs(45)),
        ..Options::default()
    };
    let started = Instant::now();
    let report = deploy(&fake, &plan, &observed, &options).await;
    assert!(!report.succeeded());
    let reason = &report.failures[0].reason;
    assert!(reason.contains("Connection refused"), "{reason}");
    assert!(reason.contains("after 45s"), "{reason}");
    // It gave up at the bound, not before and not much after.
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(45) && took < Duration::from_secs(60),
        "{took:?}"
    );
    // No step starts once the cluster is known to be unreachable; they are reported as not
    // started, and the deploy generation is not recorded (it says so).
    assert!(!report.not_started.is_empty());
    assert!(
        report
            .failures
            .iter()
            .any(|f| f.step == "record the deploy" && f.reason.contains("unreachable")),
        "{:#?}",
        report.failures
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_job_runs_again_on_the_next_deploy() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    fake.set_behaviour("mariadb", Behaviour::JobFails);
    let (_, failed) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(!failed.succeeded());
    // The cause is fixed (say, a network route); the Job's spec is the same, so only running
    // it again can succeed.
    fake.set_behaviour("mariadb", Behaviour::ReadyAfter(Duration::ZERO));
    let before = fake.log().len();
    let (_, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(report.succeeded(), "{:?}", report.failures);
    let log: Vec<String> = fake.log()[before..]
        .iter()
        .map(|e| e.what.clone())
        .collect();
    let deleted = log
        .iter()
        .position(|w| w.starts_with("delete Job/") && w.contains("mariadb-bootstrap"));
    let created = log
        .iter()
        .rposition(|w| w.starts_with("apply Job/") && w.contains("mariadb-bootstrap"));
    assert!(
        matches!((deleted, created), (Some(d), Some(c)) if d < c),
        "the failed Job was not deleted and created again: {log:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_statefulset_with_a_field_that_cannot_change_in_place_is_replaced_keeping_its_pods() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    run(&fake, &cfg, false, &Limits::default()).await;
    // A cloud deployed before StatefulSets started their pods in parallel, behind a governing
    // Service of another name.
    let r = ObjectRef {
        kind: "StatefulSet".into(),
        namespace: Some("openstack".into()),
        name: "mariadb".into(),
    };
    let mut old = fake.object(&r).unwrap();
    old["spec"]["podManagementPolicy"] = json!("OrderedReady");
    old["spec"]["serviceName"] = json!("mariadb");
    old["metadata"]["annotations"][kstack_model::labels::APPLIED_HASH_ANNOTATION] = json!("old");
    fake.insert(old);
    let before = fake.log().len();
    let (plan, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(report.succeeded(), "{:#?}", report.failures);
    let action = plan
        .objects
        .iter()
        .find(|o| o.desired.reference == r)
        .map(|o| o.action);
    assert_eq!(action, Some(kstack_engine::Action::Replace));
    let writes: Vec<String> = fake.log()[before..]
        .iter()
        .filter(|e| e.what.contains("StatefulSet/"))
        .map(|e| e.what.clone())
        .collect();
    assert_eq!(
        writes,
        [
            "delete StatefulSet/mariadb (keeping its pods)",
            "apply StatefulSet/mariadb",
            "wait StatefulSet/mariadb",
            "ready StatefulSet/mariadb"
        ]
    );
    let now = fake.object(&r).unwrap();
    assert_eq!(now["spec"]["podManagementPolicy"], "Parallel");
    assert_eq!(now["spec"]["serviceName"], "mariadb-peers");
    // Every other StatefulSet was already right: none of them is replaced.
    assert!(
        plan.objects
            .iter()
            .filter(|o| o.desired.reference != r)
            .all(|o| o.action != kstack_engine::Action::Replace)
    );
}
