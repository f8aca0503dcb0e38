//! The steps a deploy keeps in each service record it writes (what each step did, when it
//! started, how long it took, how it ended), against the in-memory cluster with tokio's clock
//! paused so the recorded durations are exact.
use std::collections::BTreeSet;
use std::time::Duration;

use kstack_engine::fake::{Behaviour, FakeCluster};
use kstack_engine::release::{DeployStep, StepOutcome};
use kstack_engine::{Limits, ObjectRef, ReleaseHistory, ServiceState};
use kstack_model::globals::Globals;

mod common;
use common::{config, globals, run};

async fn history(fake: &FakeCluster) -> ReleaseHistory {
    kstack_engine::observe(fake, "openstack", &[])
        .await
        .unwrap()
        .history
}

fn names(steps: &[DeployStep]) -> Vec<&str> {
    steps.iter().map(|s| s.step.as_str()).collect()
}

fn step<'a>(steps: &'a [DeployStep], name: &str) -> &'a DeployStep {
    steps
        .iter()
        .find(|s| s.step == name)
        .unwrap_or_else(|| panic!("no step {name} in {steps:#?}"))
}

#[tokio::test(start_paused = true)]
async fn a_deploy_records_each_services_steps_with_times_and_outcomes() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    for s in cfg.enabled.iter() {
        fake.set_behaviour(s, Behaviour::ReadyAfter(Duration::from_secs(2)));
    }
    fake.set_behaviour("keystone", Behaviour::ReadyAfter(Duration::from_secs(5)));
    let (_, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(report.succeeded(), "{:#?}", report.failures);
    let h = history(&fake).await;

    let k = h.latest("keystone").unwrap();
    let steps = &k.steps;
    // Config first, the install-phase Jobs, then the workload and its health, by start time.
    assert_eq!(names(steps).first(), Some(&"config"), "{steps:#?}");
    assert_eq!(names(steps).last(), Some(&"healthy"), "{steps:#?}");
    for job in ["job db-create", "job db-sync"] {
        let j = step(steps, job);
        assert_eq!(j.action, "create", "{j:?}");
        assert_eq!(j.duration_ms, 5000, "the fake Job takes 5 s: {j:?}");
        assert!(
            j.started_ms + j.duration_ms <= step(steps, "workload").started_ms,
            "{steps:#?}"
        );
    }
    assert!(
        !names(steps).contains(&"job db-expand"),
        "expand runs in upgrades only: {steps:#?}"
    );
    assert!(steps.windows(2).all(|w| w[0].started_ms <= w[1].started_ms));
    assert!(
        steps
            .iter()
            .all(|s| s.outcome == StepOutcome::Done && s.reason.is_none())
    );
    assert_eq!(step(steps, "config").action, "create");
    assert_eq!(step(steps, "workload").action, "create");
    let healthy = step(steps, "healthy");
    assert_eq!(healthy.action, "wait");
    assert_eq!(healthy.duration_ms, 5000, "{healthy:?}");

    // Keystone's database Job (its task needs mariadb) and its workload started once MariaDB
    // was healthy; its config objects went in at once.
    let m = h.latest("mariadb").unwrap();
    let m_healthy = step(&m.steps, "healthy");
    assert_eq!(m_healthy.duration_ms, 2000, "{m_healthy:?}");
    let m_done = m_healthy.started_ms + m_healthy.duration_ms;
    for after_mariadb in ["job db-create", "workload"] {
        assert!(
            m_done <= step(steps, after_mariadb).started_ms,
            "{after_mariadb}: mariadb {:#?}, keystone {steps:#?}",
            m.steps
        );
    }
    assert_eq!(step(steps, "config").started_ms, 0, "{steps:#?}");
    // Times are offsets from the deploy's start, the record's time.
    assert_eq!(k.time, "2026-01-01T00:00:00Z");
    let at = healthy.started_ms / 1000;
    assert_eq!(
        healthy.started_at(&k.time).unwrap(),
        format!("2026-01-01T00:{:02}:{:02}Z", at / 60, at % 60)
    );
    assert!(healthy.finished_at(&k.time).unwrap() > healthy.started_at(&k.time).unwrap());

    // The steps are in the ConfigMap's record.json, which the status page reads.
    let cm = fake
        .object(&ObjectRef::new(
            "ConfigMap",
            Some("openstack"),
            "kstack-release-keystone-1",
        ))
        .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(cm["data"]["record.json"].as_str().unwrap()).unwrap();
    assert_eq!(json["steps"].as_array().unwrap().len(), steps.len());
    assert_eq!(json["steps"][0]["step"], "config");
    assert_eq!(json["steps"][0]["outcome"], "done");
}

#[tokio::test(start_paused = true)]
async fn a_changed_service_records_the_new_deploys_steps_and_the_others_keep_theirs() {
    let fake = FakeCluster::new();
    run(
        &fake,
        &config(Globals::default()),
        false,
        &Limits::default(),
    )
    .await;
    let before = history(&fake).await;
    let mut g = Globals::default();
    g.replicas.insert("keystone".into(), 2);
    let (_, report) = run(&fake, &config(g), false, &Limits::default()).await;
    assert!(report.succeeded(), "{:#?}", report.failures);
    let h = history(&fake).await;

    let k = h.latest("keystone").unwrap();
    assert_eq!((k.generation, k.deploy_generation), (2, 2));
    let steps = &k.steps;
    // A second replica: a disruption budget is created with the config objects, the
    // Deployment changes.
    assert_eq!(step(steps, "config").action, "create", "{steps:#?}");
    assert_eq!(step(steps, "workload").action, "change", "{steps:#?}");
    // The Jobs had succeeded: not run again; the install-phase one is not part of it.
    let jobs: Vec<&DeployStep> = steps
        .iter()
        .filter(|s| s.step.starts_with("job "))
        .collect();
    assert!(!jobs.is_empty());
    for j in jobs {
        assert_eq!(j.action, "unchanged", "{j:?}");
    }
    assert!(!names(steps).contains(&"job db-sync"), "{steps:#?}");
    // Glance did not change: its record, and the steps of the deploy that wrote it, stay.
    assert_eq!(h.latest("glance-api"), before.latest("glance-api"));
    assert_eq!(h.latest("glance-api").unwrap().deploy_generation, 1);
    assert!(!h.latest("glance-api").unwrap().steps.is_empty());

    // A manual rollback records its one step.
    let configs: BTreeSet<ObjectRef> = fake
        .objects()
        .into_iter()
        .filter(|r| r.kind == "ConfigMap" || r.kind == "Secret")
        .collect();
    let plan =
        kstack_engine::plan_rollback(&h, "openstack", "keystone", Some(1), &configs).unwrap();
    let report = kstack_engine::rollback(
        &fake,
        "openstack",
        &h,
        &plan,
        Duration::from_secs(60),
        "2026-01-03T00:00:00Z",
    )
    .await
    .unwrap();
    assert!(report.healthy, "{}", report.message);
    let h = history(&fake).await;
    let manual = h.latest("keystone").unwrap();
    assert_eq!(manual.generation, 3);
    assert_eq!(names(&manual.steps), ["rollback"]);
    assert_eq!(manual.steps[0].action, "restore generation 1");
    assert_eq!(manual.steps[0].outcome, StepOutcome::Done);
}

#[tokio::test(start_paused = true)]
async fn a_failed_upgrade_records_the_failed_step_and_the_rollback() {
    let fake = FakeCluster::new();
    run(
        &fake,
        &config(globals(&[("openstack_release", "2024.2")])),
        false,
        &Limits::default(),
    )
    .await;
    fake.set_image_behaviour("keystone:2025.1", Behaviour::NeverReady);
    let timeouts = Limits {
        default: Duration::from_secs(60),
        ..Default::default()
    };
    let new = config(globals(&[("openstack_release", "2025.1")]));
    let (_, report) = run(&fake, &new, false, &timeouts).await;
    assert!(!report.succeeded());
    let h = history(&fake).await;
    let recs = &h.services["keystone"];

    // Generation 2 failed at its health step, after the expand Job ran.
    let failed = &recs[&2];
    assert_eq!(failed.state, ServiceState::Failed);
    assert_eq!(
        step(&failed.steps, "job db-expand").outcome,
        StepOutcome::Done
    );
    let last = failed.steps.last().unwrap();
    assert_eq!(
        (last.step.as_str(), last.outcome),
        ("healthy", StepOutcome::Failed)
    );
    assert_eq!(last.duration_ms, 60_000, "{last:?}");
    assert_eq!(last.reason.as_deref(), Some("timed out after 60s"));

    // Generation 3 restored generation 1: the same steps, then the rollback.
    let restored = &recs[&3];
    assert_eq!(restored.rollback_of, Some(1));
    assert_eq!(
        names(&restored.steps[..failed.steps.len()]),
        names(&failed.steps)
    );
    let rb = restored.steps.last().unwrap();
    assert_eq!(rb.step, "rollback");
    assert_eq!(rb.action, "restore generation 1");
    assert_eq!(rb.outcome, StepOutcome::Done);
    assert!(
        rb.started_ms >= last.started_ms + last.duration_ms,
        "{rb:?}"
    );
    // Generation 1's own steps are not copied into the record restoring it.
    assert_ne!(restored.steps, recs[&1].steps);
}

#[tokio::test(start_paused = true)]
async fn a_failed_job_is_recorded_with_its_reason_and_then_as_run_again() {
    let fake = FakeCluster::new();
    let cfg = config(Globals::default());
    fake.set_behaviour("mariadb", Behaviour::JobFails);
    let (_, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(!report.succeeded());
    let h = history(&fake).await;
    let m = h.latest("mariadb").unwrap();
    assert_eq!(m.state, ServiceState::Failed);
    let last = m.steps.last().unwrap();
    assert!(last.step.starts_with("job "), "{:#?}", m.steps);
    assert_eq!(last.outcome, StepOutcome::Failed);
    assert!(
        last.reason
            .as_deref()
            .is_some_and(|r| r.contains("BackoffLimitExceeded")),
        "{last:?}"
    );
    assert!(!names(&m.steps).contains(&"workload"), "{:#?}", m.steps);

    fake.set_behaviour("mariadb", Behaviour::ReadyAfter(Duration::ZERO));
    let (_, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(report.succeeded(), "{:#?}", report.failures);
    let h = history(&fake).await;
    let m = h.latest("mariadb").unwrap();
    assert_eq!(m.state, ServiceState::Healthy);
    let again = step(&m.steps, &last.step);
    assert_eq!(again.action, "run again", "{:#?}", m.steps);
    assert_eq!(again.outcome, StepOutcome::Done);
}
