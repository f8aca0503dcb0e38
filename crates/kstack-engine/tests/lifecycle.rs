//! Upgrade, automatic rollback and manual rollback against the in-memory cluster (tokio's
//! clock paused): which migration Jobs run in which deploy and in what order relative to the
//! pods, what a failed upgrade restores, and which rollbacks are refused.
use std::collections::BTreeSet;
use std::time::Duration;

use kstack_engine::fake::{Behaviour, FakeCluster, LogEntry};
use kstack_engine::{
    Limits, Migration, Mode, ObjectRef, Options, ReleaseHistory, RollbackError, ServiceState,
};

mod common;
use common::{config, globals, run, run_with};

/// Clouds start on the older of kstack's releases; upgrades move them to the newer.
const OLD: &str = "2024.2";
const NEW: &str = "2025.1";

fn applied(log: &[LogEntry], prefix: &str) -> Vec<usize> {
    log.iter()
        .enumerate()
        .filter(|(_, e)| e.what.starts_with(prefix))
        .map(|(i, _)| i)
        .collect()
}

fn first(log: &[LogEntry], prefix: &str) -> usize {
    *applied(log, prefix)
        .first()
        .unwrap_or_else(|| panic!("no `{prefix}` in {log:#?}"))
}

async fn history(fake: &FakeCluster) -> ReleaseHistory {
    kstack_engine::observe(fake, "openstack", &[])
        .await
        .unwrap()
        .history
}

fn image(fake: &FakeCluster, kind: &str, name: &str) -> String {
    let o = fake
        .object(&ObjectRef::new(kind, Some("openstack"), name))
        .unwrap();
    o["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(start_paused = true)]
async fn an_upgrade_expands_before_the_new_pods_and_contracts_after_every_service() {
    let fake = FakeCluster::new();
    let (plan, report) = run(
        &fake,
        &config(globals(&[("openstack_release", OLD)])),
        false,
        &Limits::default(),
    )
    .await;
    assert!(report.succeeded());
    assert_eq!(plan.modes["keystone"].mode, Mode::Install);
    // An install runs the full schema sync, no migration phase.
    let log = fake.log();
    assert!(!applied(&log, "apply Job/keystone-db-sync-").is_empty());
    assert!(applied(&log, "apply Job/keystone-db-expand-").is_empty());
    assert!(applied(&log, "apply Job/keystone-db-contract-").is_empty());

    let before = fake.log().len();
    let (plan, report) = run(
        &fake,
        &config(globals(&[("openstack_release", NEW)])),
        false,
        &Limits::default(),
    )
    .await;
    assert!(report.succeeded(), "{:?}", report.failures);
    assert!(matches!(
        plan.modes["keystone"].mode,
        Mode::Upgrade { from: 1, .. }
    ));
    let log = fake.log()[before..].to_vec();
    // Install-only tasks do not run on existing data.
    assert!(applied(&log, "apply Job/keystone-db-sync-").is_empty());
    assert!(applied(&log, "apply Job/mariadb-bootstrap-").is_empty());
    // nova's cell steps are safe to repeat (api_db sync, map_cell0, create_cell or
    // update_cell, db sync): they run again with the new images, before the new nova-api pods.
    assert!(
        first(&log, "ready Job/nova-api-cells-") < first(&log, "apply Deployment/nova-api"),
        "nova-api's databases are migrated before its new pods"
    );
    // Expand (and glance's migrate) before the new pods, contract after every service.
    let last_ready = applied(&log, "ready ")
        .into_iter()
        .filter(|&i| !log[i].what.starts_with("ready Job/"))
        .max()
        .unwrap();
    for (service, expand, contract) in [
        ("keystone", vec!["db-expand"], vec!["db-contract"]),
        (
            "glance-api",
            vec!["db-expand", "db-migrate"],
            vec!["db-contract"],
        ),
        (
            "placement-api",
            vec!["db-upgrade"],
            vec!["online-migrations"],
        ),
        (
            "nova-conductor",
            vec!["cell-db-upgrade"],
            vec!["online-migrations"],
        ),
        ("neutron-server", vec!["db-expand"], vec!["db-contract"]),
    ] {
        let pods = first(&log, &format!("apply Deployment/{service}"));
        for t in expand {
            let done = first(&log, &format!("ready Job/{service}-{t}-"));
            assert!(done < pods, "{service}: {t} finished before the new pods");
        }
        for t in contract {
            let start = first(&log, &format!("apply Job/{service}-{t}-"));
            assert!(
                start > last_ready,
                "{service}: {t} after every service is healthy"
            );
        }
    }
    assert!(
        first(&log, "ready Job/glance-api-db-expand-")
            < first(&log, "apply Job/glance-api-db-migrate-")
    );
    // Nova's conductors run the new release before any other nova service (an older conductor
    // cannot read the newer objects the others send): once the databases are migrated, before
    // nova-api's new pods and so before the scheduler's and compute's.
    let conductors = first(&log, "ready Deployment/nova-conductor");
    assert!(
        first(&log, "ready Job/nova-api-cells-") < first(&log, "apply Deployment/nova-conductor"),
        "the conductors' new pods start on migrated databases"
    );
    for later in [
        "apply Deployment/nova-api",
        "apply Deployment/nova-scheduler",
        "apply DaemonSet/nova-compute",
    ] {
        assert!(
            conductors < first(&log, later),
            "{later} after the conductors"
        );
    }
    let h = history(&fake).await;
    let k = h.latest("keystone").unwrap();
    assert_eq!(k.generation, 2);
    assert_eq!(k.migration, Some(Migration::Contracted));
    assert!(k.release.starts_with(&format!("{NEW}-")), "{}", k.release);
    // Services without contract tasks record no migration state.
    assert_eq!(h.latest("memcached").unwrap().migration, None);

    // The next deploy of the same input runs nothing again and writes nothing.
    let writes = fake.writes();
    let (plan, report) = run(
        &fake,
        &config(globals(&[("openstack_release", NEW)])),
        false,
        &Limits::default(),
    )
    .await;
    assert!(report.succeeded());
    assert_eq!(plan.modes["keystone"].mode, Mode::Steady);
    assert!(!plan.modes["keystone"].contract);
    assert_eq!(fake.writes(), writes, "{:?}", &fake.log()[before..]);
}

#[tokio::test(start_paused = true)]
async fn an_upgrade_whose_pods_never_become_ready_is_rolled_back_and_stops_its_dependents() {
    let fake = FakeCluster::new();
    run(
        &fake,
        &config(globals(&[("openstack_release", OLD)])),
        false,
        &Limits::default(),
    )
    .await;
    let old = image(&fake, "Deployment", "keystone");
    let old_glance = image(&fake, "Deployment", "glance-api");
    fake.set_image_behaviour(&format!("keystone:{NEW}"), Behaviour::NeverReady);
    let timeouts = Limits {
        default: Duration::from_secs(60),
        ..Default::default()
    };
    let before = fake.log().len();
    let (_, report) = run(
        &fake,
        &config(globals(&[("openstack_release", NEW)])),
        false,
        &timeouts,
    )
    .await;
    assert!(!report.succeeded());
    let f = report
        .failures
        .iter()
        .find(|f| f.service.as_deref() == Some("keystone"))
        .expect("keystone failed");
    let rb = f.rollback.as_ref().expect("rolled back");
    assert_eq!((rb.failed, rb.restored, rb.generation), (2, 1, 3));
    assert!(rb.healthy, "{}", rb.message);
    assert!(
        f.to_string()
            .contains("rolled back automatically to generation 1"),
        "{f}"
    );
    // The restored pods run the old release again.
    assert_eq!(image(&fake, "Deployment", "keystone"), old);
    // Keystone's dependents were not touched, and no contract phase ran anywhere.
    assert_eq!(image(&fake, "Deployment", "glance-api"), old_glance);
    let log = fake.log()[before..].to_vec();
    assert!(applied(&log, "apply Deployment/glance-api").is_empty());
    assert!(applied(&log, "apply Job/glance-api-").is_empty());
    assert!(applied(&log, "apply Job/keystone-db-contract-").is_empty());
    assert!(
        report.not_started.iter().any(|s| s == "glance-api: config"),
        "{:?}",
        report.not_started
    );
    // Expand ran (the old code runs on an expanded schema); the rollback re-applied keystone.
    assert!(!applied(&log, "ready Job/keystone-db-expand-").is_empty());
    assert_eq!(applied(&log, "apply Deployment/keystone").len(), 2);

    let h = history(&fake).await;
    let recs = &h.services["keystone"];
    assert_eq!(recs[&2].state, ServiceState::Failed);
    assert_eq!(recs[&3].state, ServiceState::Healthy);
    assert_eq!(recs[&3].rollback_of, Some(1));
    assert_eq!(recs[&3].objects, recs[&1].objects);
    let index = h.index.unwrap();
    assert_eq!(index.services["keystone"].generation, 3);
    assert_eq!(index.services["keystone"].state, ServiceState::Healthy);

    // Deploying the broken release again is an upgrade from the restored generation; the
    // expand Job, already complete, is not re-run.
    let before = fake.log().len();
    let (plan, _) = run(
        &fake,
        &config(globals(&[("openstack_release", NEW)])),
        false,
        &timeouts,
    )
    .await;
    assert!(matches!(
        plan.modes["keystone"].mode,
        Mode::Upgrade { from: 3, .. }
    ));
    assert!(applied(&fake.log()[before..], "apply Job/keystone-db-expand-").is_empty());
}

#[tokio::test(start_paused = true)]
async fn no_rollback_leaves_the_failed_generation_for_inspection() {
    let fake = FakeCluster::new();
    run(
        &fake,
        &config(globals(&[("openstack_release", OLD)])),
        false,
        &Limits::default(),
    )
    .await;
    fake.set_image_behaviour(&format!("keystone:{NEW}"), Behaviour::NeverReady);
    let options = Options {
        serial: false,
        now: "2026-01-02T00:00:00Z".into(),
        no_rollback: true,
        outage: None,
    };
    let timeouts = Limits {
        default: Duration::from_secs(60),
        ..Default::default()
    };
    let (_, report) = run_with(
        &fake,
        &config(globals(&[("openstack_release", NEW)])),
        &options,
        &timeouts,
    )
    .await;
    let f = &report.failures[0];
    assert_eq!(f.service.as_deref(), Some("keystone"));
    assert_eq!(f.rollback, None);
    assert!(image(&fake, "Deployment", "keystone").contains(NEW));
    let h = history(&fake).await;
    assert_eq!(
        h.index.unwrap().services["keystone"].state,
        ServiceState::Failed
    );
}

#[tokio::test(start_paused = true)]
async fn a_manual_rollback_restores_a_generation_unless_a_contract_phase_ran_since() {
    let fake = FakeCluster::new();
    run(
        &fake,
        &config(globals(&[("openstack_release", OLD)])),
        false,
        &Limits::default(),
    )
    .await;
    let old = image(&fake, "Deployment", "keystone");
    // An upgrade in which glance fails: keystone runs the new release on an expanded schema,
    // and no contract phase runs.
    fake.set_image_behaviour(&format!("glance-api:{NEW}"), Behaviour::NeverReady);
    let timeouts = Limits {
        default: Duration::from_secs(60),
        ..Default::default()
    };
    let new_cfg = config(globals(&[("openstack_release", NEW)]));
    let (_, report) = run(&fake, &new_cfg, false, &timeouts).await;
    assert!(!report.succeeded());
    assert!(image(&fake, "Deployment", "keystone").contains(NEW));
    let h = history(&fake).await;
    assert_eq!(
        h.latest("keystone").unwrap().migration,
        Some(Migration::Expanded)
    );

    let configs: BTreeSet<ObjectRef> = fake
        .objects()
        .into_iter()
        .filter(|r| r.kind == "ConfigMap" || r.kind == "Secret")
        .collect();
    let plan = kstack_engine::plan_rollback(&h, "openstack", "keystone", None, &configs).unwrap();
    assert_eq!(
        (plan.current, plan.target.generation, plan.generation),
        (2, 1, 3)
    );
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
    assert_eq!(image(&fake, "Deployment", "keystone"), old);
    let h = history(&fake).await;
    assert_eq!(h.services["keystone"][&3].rollback_of, Some(1));
    assert_eq!(h.index.as_ref().unwrap().services["keystone"].generation, 3);
    // Generation 1 is what keystone runs now: nothing to do.
    assert!(matches!(
        kstack_engine::plan_rollback(&h, "openstack", "keystone", Some(1), &configs),
        Err(RollbackError::AlreadyThere { generation: 1, .. })
    ));
    // Rolling back again undoes the rollback: the newest healthy generation before the
    // current one with other objects is the upgraded one.
    let again = kstack_engine::plan_rollback(&h, "openstack", "keystone", None, &configs).unwrap();
    assert_eq!((again.current, again.target.generation), (3, 2));
    // A service with one generation has nothing to go back to.
    let single = FakeCluster::new();
    run(
        &single,
        &config(globals(&[("openstack_release", OLD)])),
        false,
        &Limits::default(),
    )
    .await;
    assert!(matches!(
        kstack_engine::plan_rollback(
            &history(&single).await,
            "openstack",
            "keystone",
            None,
            &configs
        ),
        Err(RollbackError::NothingEarlier { current: 1, .. })
    ));
    assert!(matches!(
        kstack_engine::plan_rollback(&h, "openstack", "keystone", Some(9), &configs),
        Err(RollbackError::UnknownGeneration { generation: 9, .. })
    ));
    assert!(matches!(
        kstack_engine::plan_rollback(&h, "openstack", "nothing", None, &configs),
        Err(RollbackError::NoHistory { .. })
    ));

    // The whole upgrade succeeds: contract phases run. Going back to the old code is refused.
    fake.set_image_behaviour(
        &format!("glance-api:{NEW}"),
        Behaviour::ReadyAfter(Duration::ZERO),
    );
    let (_, report) = run(&fake, &new_cfg, false, &timeouts).await;
    assert!(report.succeeded(), "{:?}", report.failures);
    let h = history(&fake).await;
    let k = h.latest("keystone").unwrap();
    assert_eq!(
        (k.generation, k.migration),
        (4, Some(Migration::Contracted))
    );
    let err =
        kstack_engine::plan_rollback(&h, "openstack", "keystone", Some(1), &configs).unwrap_err();
    assert!(matches!(
        err,
        RollbackError::CrossesContract {
            target: 1,
            contracted: 4,
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("refusing to roll back to generation 1"),
        "{msg}"
    );
    assert!(msg.contains("does not undo schema changes"), "{msg}");
    // A failed generation is not a rollback target.
    assert!(matches!(
        kstack_engine::plan_rollback(&h, "openstack", "glance-api", Some(2), &configs),
        Err(RollbackError::NotHealthy { generation: 2, .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn a_reconfigure_that_never_becomes_ready_is_rolled_back_too() {
    let fake = FakeCluster::new();
    run(&fake, &config(globals(&[])), false, &Limits::default()).await;
    // Same images, other config: a reconfigure; the new pods carry a label the fake never
    // makes ready (as the local control plane's stage does).
    fake.set_behaviour("memcached", Behaviour::NeverReady);
    let mut g = globals(&[]);
    g.replicas.insert("memcached".into(), 2);
    let timeouts = Limits {
        default: Duration::from_secs(30),
        ..Default::default()
    };
    let (plan, report) = run(&fake, &config(g), false, &timeouts).await;
    assert_eq!(plan.modes["memcached"].mode, Mode::Steady);
    let f = &report.failures[0];
    let rb = f.rollback.as_ref().expect("rolled back");
    // The restore waits for the same fake behaviour, so it does not become healthy either:
    // the report says so instead of claiming success.
    assert!(!rb.healthy);
    assert!(
        rb.message
            .contains("automatic rollback to generation 1 failed"),
        "{}",
        rb.message
    );
    let o = fake
        .object(&ObjectRef::new(
            "StatefulSet",
            Some("openstack"),
            "memcached",
        ))
        .unwrap();
    assert_eq!(o["spec"]["replicas"], 1, "the old spec is restored");
}

#[tokio::test(start_paused = true)]
async fn a_post_task_runs_once_its_service_is_healthy_or_with_its_pods() {
    let fake = FakeCluster::new();
    let cfg = config(globals(&[
        ("kstack_external_network", "yes"),
        ("kstack_external_network_cidr", "172.24.4.0/24"),
    ]));
    let (plan, report) = run(&fake, &cfg, false, &Limits::default()).await;
    assert!(report.succeeded(), "{:#?}", report.failures);
    let log = fake.log();
    let step = |name: &str| {
        plan.steps
            .iter()
            .find(|s| s.name() == name)
            .unwrap_or_else(|| panic!("no step {name}"))
    };
    // The external network is made through Neutron's API, so it runs once neutron-server is
    // healthy.
    let external = first(&log, "apply Job/neutron-server-external-network-");
    assert!(first(&log, "ready Deployment/neutron-server") < external);
    let made = step("neutron-server: job external-network");
    assert!(made.deps.contains(&step("neutron-server: healthy").id));
    // nova's discover_hosts polls for the computes' records, so it starts with their pods
    // (once the conductor it runs nova-manage beside works), not after they are ready.
    let discover = first(&log, "apply Job/nova-compute-discover-hosts-");
    assert!(first(&log, "apply DaemonSet/nova-compute") <= discover);
    assert!(first(&log, "ready Deployment/nova-conductor") <= discover);
    let hosts = step("nova-compute: job discover-hosts");
    assert!(hosts.deps.contains(&step("nova-compute: workload").id));
    assert!(hosts.deps.contains(&step("nova-conductor: healthy").id));
    assert!(!hosts.deps.contains(&step("nova-compute: healthy").id));
    // Nothing waits for either: dependents wait on the services' health steps.
    for post in [made.id, hosts.id] {
        assert!(plan.steps.iter().all(|s| !s.deps.contains(&post)));
    }
}

#[tokio::test(start_paused = true)]
async fn history_keeps_the_newest_generations_and_prunes_what_only_older_ones_used() {
    let fake = FakeCluster::new();
    let limits = Limits {
        history: 3,
        ..Default::default()
    };
    let keystone_configs = |fake: &FakeCluster| -> BTreeSet<String> {
        fake.objects()
            .into_iter()
            .filter(|r| r.kind == "Secret" && r.name.starts_with("keystone-keystone.conf-"))
            .map(|r| r.name)
            .collect()
    };
    let mut names = Vec::new();
    for debug in 1..=5 {
        let text = format!("[DEFAULT]\ndebug_level = {debug}\n");
        let cfg = kstack_config::testing::config(globals(&[]), &[("keystone.conf", &text)]);
        let (_, report) = run(&fake, &cfg, false, &limits).await;
        assert!(report.succeeded());
        names.push(keystone_configs(&fake));
    }
    let h = history(&fake).await;
    let gens: Vec<u64> = h.services["keystone"].keys().copied().collect();
    assert_eq!(gens, [3, 4, 5], "the newest three are kept");
    // An unchanged service keeps its one generation.
    assert_eq!(h.services["glance-api"].len(), 1);
    // The config object of generation 1 went with its record; 3 to 5 are still there.
    let now = keystone_configs(&fake);
    assert_eq!(now.len(), 3, "{now:?}");
    assert!(names[0].iter().all(|n| !now.contains(n)), "{now:?}");
    for kept in &names[2..] {
        assert!(kept.iter().any(|n| now.contains(n)));
    }
    // A rollback can still restore the oldest kept generation exactly.
    let configs: BTreeSet<ObjectRef> = fake
        .objects()
        .into_iter()
        .filter(|r| r.kind == "ConfigMap" || r.kind == "Secret")
        .collect();
    kstack_engine::plan_rollback(&h, "openstack", "keystone", Some(3), &configs).unwrap();
}
