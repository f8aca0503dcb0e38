//! Lifecycle on the real local control plane, each test in a namespace of its own:
//! - a reconfigure of one option of one service replaces only that service's pods, and a
//!   manual rollback restores the previous generation, listed by `kstack history`;
//! - an upgrade stops before it changes anything when its backup of the databases fails (the
//!   simulated pods run no command; the other upgrades here pass `--no-backup`);
//! - an upgrade of every service to a new release tag runs the expand migrations before the
//!   new pods and the contract migrations after every service is healthy, while no API service
//!   ever has zero ready endpoints (watched on EndpointSlices); a rollback across the contract
//!   phase is then refused;
//! - an upgrade whose pods never become ready is rolled back automatically: the service is
//!   healthy again on its previous generation and its dependents were not touched;
//! - with three replicas of each infrastructure StatefulSet, an upgrade and the loss of one pod
//!   of each leave every Service with a ready endpoint.
use std::collections::BTreeMap;

use anyhow::Context;
use kstack_e2e::client;
use kstack_e2e::cloud::Cloud;
use kstack_e2e::endpoints::watch_endpoints;
use kstack_engine::Cluster;
use serde_json::Value;

/// Keystone, two API services that depend on it, and the infrastructure under them.
const SMALL: &str = "enable_openstack_core: \"no\"\nenable_keystone: \"yes\"\nenable_glance: \"yes\"\nenable_placement: \"yes\"\nenable_horizon: \"yes\"\n";
/// The API services whose endpoints must never drop to zero.
const APIS: &[&str] = &["keystone", "glance-api", "placement-api", "horizon"];
/// The upgrade tests start on the older of kstack's releases and move to the newer.
const OLD: &str = "openstack_release: \"2024.2\"\n";
const NEW: &str = "2025.1";

/// Per workload of the namespace: kind/name → (pod template, metadata.generation).
async fn workloads(cloud: &Cloud) -> anyhow::Result<BTreeMap<String, (Value, i64)>> {
    let mut out = BTreeMap::new();
    for kind in ["Deployment", "StatefulSet", "DaemonSet"] {
        for o in cloud
            .cluster
            .list(kind, &cloud.ns.name, "app.kubernetes.io/managed-by=kstack")
            .await?
        {
            out.insert(
                format!("{kind}/{}", o["metadata"]["name"].as_str().unwrap_or("?")),
                (
                    o["spec"]["template"].clone(),
                    o["metadata"]["generation"].as_i64().unwrap_or(0),
                ),
            );
        }
    }
    Ok(out)
}

/// ReplicaSets of the namespace: name → (uid, owning service, pod template image, creation).
type ReplicaSets = BTreeMap<String, (String, String, String, String)>;

async fn replica_sets(cloud: &Cloud) -> anyhow::Result<ReplicaSets> {
    let api: kube::Api<kstack_k8s::api::apps::v1::ReplicaSet> =
        kube::Api::namespaced(client().await?, &cloud.ns.name);
    let mut out = BTreeMap::new();
    for rs in api.list(&Default::default()).await? {
        let v = serde_json::to_value(&rs)?;
        out.insert(
            v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            (
                v["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
                v["metadata"]["labels"]["app.kubernetes.io/name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                v["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                v["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ),
        );
    }
    Ok(out)
}

async fn history(cloud: &Cloud, service: &str) -> anyhow::Result<Vec<Value>> {
    let out = cloud.run(&["history", service, "-o", "json"]).await?;
    anyhow::ensure!(
        out.status.success(),
        "history: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn image_of(template: &Value) -> &str {
    template["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_reconfigure_replaces_only_that_services_pods_and_a_rollback_restores_it()
-> anyhow::Result<()> {
    let cloud = Cloud::new("kstack-reconf", SMALL).await?;
    let (code, _, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    let before = workloads(&cloud).await?;
    let rs_before = replica_sets(&cloud).await?;
    assert!(before.len() >= 7, "{:?}", before.keys());

    // One option of one service: glance's debug flag, in kolla-ansible's override layout.
    let overrides = cloud.dir.path().join("config");
    std::fs::create_dir_all(&overrides)?;
    std::fs::write(overrides.join("glance.conf"), "[DEFAULT]\ndebug = True\n")?;
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["succeeded"], true);
    let after = workloads(&cloud).await?;
    for (name, (template, generation)) in &before {
        let (t, g) = &after[name];
        if name == "Deployment/glance-api" {
            assert_ne!(t, template, "glance-api's pods are replaced");
            assert_eq!(*g, generation + 1);
        } else {
            assert_eq!(t, template, "{name}'s pod template is unchanged");
            assert_eq!(g, generation, "{name} was not written");
        }
    }
    // Every ReplicaSet of the other services is the same object; glance-api has one more.
    let rs_after = replica_sets(&cloud).await?;
    for (name, (uid, ..)) in &rs_before {
        assert_eq!(rs_after.get(name).map(|r| &r.0), Some(uid), "{name}");
    }
    let new: Vec<&String> = rs_after
        .keys()
        .filter(|n| !rs_before.contains_key(*n))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(rs_after[new[0]].1, "glance-api");

    // Back to the first generation by hand; history lists all three.
    let out = cloud.run(&["rollback", "glance-api", "-o", "json"]).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rollback: {stderr}");
    let rb: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(rb["from"], 2);
    assert_eq!(rb["to"], 1);
    assert_eq!(rb["generation"], 3);
    assert_eq!(rb["healthy"], true);
    assert!(stderr.contains("the next `kstack deploy` applies the config directory again"));
    let restored = workloads(&cloud).await?;
    assert_eq!(
        restored["Deployment/glance-api"].0, before["Deployment/glance-api"].0,
        "the first generation's pod template is back"
    );
    let h = history(&cloud, "glance-api").await?;
    let gens: Vec<(u64, &str)> = h
        .iter()
        .map(|r| {
            (
                r["generation"].as_u64().unwrap_or(0),
                r["state"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(gens, [(1, "healthy"), (2, "healthy"), (3, "healthy")]);
    assert_eq!(h[2]["rollback_of"], 1);
    let status = cloud.status().await?;
    let glance = status
        .iter()
        .find(|s| s["service"] == "glance-api")
        .context("glance-api row")?;
    assert_eq!(glance["health"], "healthy", "{glance}");
    assert_eq!(glance["generation"], 3, "{glance}");

    // A generation that does not exist is refused with exit code 2 and a clear message.
    let out = cloud.run(&["rollback", "glance-api", "--to", "7"]).await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no generation 7; recorded: 1, 2, 3"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[tokio::test]
async fn an_upgrade_migrates_before_the_new_pods_and_never_leaves_an_api_without_endpoints()
-> anyhow::Result<()> {
    // A readiness delay, so each surge pod is unready for a while, as a real API is.
    let labels = "kstack_pod_labels:\n  keystone: {kstack.io/dev-ready-delay: 2s}\n  glance-api: {kstack.io/dev-ready-delay: 2s}\n  placement-api: {kstack.io/dev-ready-delay: 2s}\n  horizon: {kstack.io/dev-ready-delay: 2s}\n";
    let cloud = Cloud::new("kstack-upgrade", &format!("{SMALL}{labels}{OLD}")).await?;
    let (code, _, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    let before = workloads(&cloud).await?;

    let watch = watch_endpoints(&cloud.ns.name).await?;
    let start = watch.snapshot();
    for api in APIS {
        assert!(
            !start
                .ready_pods
                .get(*api)
                .cloned()
                .unwrap_or_default()
                .is_empty(),
            "{api} has ready endpoints before the upgrade: {start:?}"
        );
    }
    cloud.set_globals(&format!("{SMALL}{labels}openstack_release: \"{NEW}\"\n"))?;
    // An upgrade backs up the databases first; simulated pods run no command, so the backup
    // fails, and the deploy stops before it changes anything.
    let out = cloud.run(&["deploy", "-o", "json"]).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the backup before the upgrade failed")
            && stderr.contains("nothing deployed"),
        "{stderr}"
    );
    assert_eq!(
        workloads(&cloud).await?,
        before,
        "a failed backup changed workloads"
    );
    // `--no-backup` upgrades without one (the real-node test checks the backup).
    let (code, report, stderr) = cloud.deploy_with(&["--no-backup"]).await?;
    assert_eq!(code, 0, "upgrade failed:\n{stderr}");
    assert_eq!(report["succeeded"], true);
    let end = watch.snapshot();
    drop(watch);

    // Every workload runs the new release.
    let after = workloads(&cloud).await?;
    for (name, (template, _)) in &after {
        assert!(
            image_of(template).ends_with(&format!(":{NEW}-rocky-9")),
            "{name}: {template}"
        );
        assert_ne!(template, &before[name].0, "{name}");
    }
    // No API service ever had zero ready endpoints, and its pods were all replaced.
    for api in APIS {
        let counts = &end.counts[*api];
        assert!(
            counts.iter().all(|n| *n > 0),
            "{api} had no ready endpoint during the upgrade: {counts:?}"
        );
        let old = &start.ready_pods[*api];
        let new = &end.ready_pods[*api];
        assert!(old.is_disjoint(new), "{api}: {old:?} → {new:?}");
    }

    // Migrations: expand Jobs finished before the new pods were created; contract Jobs were
    // created only after every new ReplicaSet.
    let jobs = cloud
        .cluster
        .list("Job", &cloud.ns.name, "app.kubernetes.io/managed-by=kstack")
        .await?;
    let time = |v: &str| -> anyhow::Result<chrono::DateTime<chrono::FixedOffset>> {
        chrono::DateTime::parse_from_rfc3339(v).with_context(|| format!("timestamp {v:?}"))
    };
    let mut new_rs_created = BTreeMap::new();
    for (_, service, image, created) in replica_sets(&cloud).await?.values() {
        if image.contains(NEW) {
            new_rs_created.insert(service.clone(), time(created)?);
        }
    }
    let last_rs = *new_rs_created.values().max().context("new ReplicaSets")?;
    let mut expands = 0;
    let mut contracts = 0;
    for j in &jobs {
        let l = &j["metadata"]["labels"];
        let service = l["app.kubernetes.io/name"].as_str().unwrap_or_default();
        match l["kstack.io/phase"].as_str() {
            Some("expand") => {
                expands += 1;
                assert_eq!(j["status"]["succeeded"], 1, "{}", j["metadata"]["name"]);
                let done = time(j["status"]["completionTime"].as_str().unwrap_or_default())?;
                let pods = new_rs_created[service];
                assert!(
                    done <= pods,
                    "{}: expand finished {done} after the new pods {pods}",
                    j["metadata"]["name"]
                );
            }
            Some("contract") => {
                contracts += 1;
                assert_eq!(j["status"]["succeeded"], 1, "{}", j["metadata"]["name"]);
                let created = time(
                    j["metadata"]["creationTimestamp"]
                        .as_str()
                        .unwrap_or_default(),
                )?;
                assert!(created >= last_rs, "{}", j["metadata"]["name"]);
            }
            _ => {}
        }
    }
    // keystone, glance (expand + migrate), placement.
    assert_eq!(expands, 4, "{jobs:?}");
    assert_eq!(contracts, 3);
    let h = history(&cloud, "keystone").await?;
    assert_eq!(h.len(), 2);
    assert_eq!(h[1]["migration"], "contracted");
    assert!(
        h[1]["release"]
            .as_str()
            .unwrap_or_default()
            .starts_with(NEW)
    );

    // The contract phase ran: going back to the old code is refused.
    let out = cloud.run(&["rollback", "keystone"]).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("refusing to roll back to generation 1"),
        "{stderr}"
    );
    assert!(
        image_of(&workloads(&cloud).await?["Deployment/keystone"].0).contains(NEW),
        "nothing was changed"
    );

    // Nor does a deploy go back to the older release: refused before anything changes,
    // naming globals.yml's line.
    let generation = |h: &[Value]| h.last().map(|r| r["generation"].clone());
    let before = generation(&history(&cloud, "keystone").await?);
    cloud.set_globals(&format!("{SMALL}{labels}{OLD}"))?;
    let out = cloud.run(&["deploy"]).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("globals.yml:")
            && stderr.contains("openstack_release: 2024.2 is older than 2025.1")
            && stderr.contains("nothing deployed"),
        "{stderr}"
    );
    assert_eq!(generation(&history(&cloud, "keystone").await?), before);
    assert!(
        image_of(&workloads(&cloud).await?["Deployment/keystone"].0).contains(NEW),
        "nothing was changed"
    );
    Ok(())
}

#[tokio::test]
async fn an_upgrade_that_never_becomes_ready_is_rolled_back_and_its_dependents_are_untouched()
-> anyhow::Result<()> {
    let cloud = Cloud::new("kstack-rollback", &format!("{SMALL}{OLD}")).await?;
    let (code, _, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    let before = workloads(&cloud).await?;
    let watch = watch_endpoints(&cloud.ns.name).await?;

    // The new keystone pods run but never become ready.
    cloud.set_globals(&format!(
        "{SMALL}openstack_release: \"{NEW}\"\nkstack_pod_labels:\n  keystone: {{kstack.io/dev-ready: never}}\nkstack_timeouts:\n  keystone: 15\n"
    ))?;
    let (code, report, stderr) = cloud.deploy_with(&["--no-backup"]).await?;
    let seen = watch.snapshot();
    drop(watch);
    assert_eq!(code, 3, "{stderr}");
    let failure = &report["failures"][0];
    assert_eq!(failure["service"], "keystone", "{report}");
    let rb = &failure["rollback"];
    assert_eq!(rb["failed"], 2, "{report}");
    assert_eq!(rb["restored"], 1);
    assert_eq!(rb["generation"], 3);
    assert_eq!(rb["healthy"], true, "{report}");
    assert!(
        stderr.contains("rolled back automatically to generation 1"),
        "{stderr}"
    );

    // Keystone runs its previous generation again and is healthy.
    let after = workloads(&cloud).await?;
    assert_eq!(
        after["Deployment/keystone"].0, before["Deployment/keystone"].0,
        "keystone's previous pod template is back"
    );
    let status = cloud.status().await?;
    let keystone = status
        .iter()
        .find(|s| s["service"] == "keystone")
        .context("keystone row")?;
    assert_eq!(keystone["health"], "healthy", "{keystone}");
    assert_eq!(keystone["generation"], 3, "{keystone}");
    // Its dependents were not touched.
    for dependent in ["glance-api", "placement-api", "horizon"] {
        assert_eq!(
            after[&format!("Deployment/{dependent}")],
            before[&format!("Deployment/{dependent}")],
            "{dependent}"
        );
    }
    // The old keystone pods served throughout.
    let counts = &seen.counts;
    assert!(
        counts
            .get("keystone")
            .is_none_or(|c| c.iter().all(|n| *n > 0)),
        "{counts:?}"
    );
    let h = history(&cloud, "keystone").await?;
    let states: Vec<&str> = h
        .iter()
        .map(|r| r["state"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(states, ["healthy", "failed", "healthy"]);
    assert_eq!(h[2]["rollback_of"], 1);
    Ok(())
}

#[tokio::test]
async fn a_statefulset_upgrade_that_never_becomes_ready_is_rolled_back_too() -> anyhow::Result<()> {
    // A StatefulSet does not replace a pod that never became ready when its template is
    // reverted; the rollback deletes that pod so the controller recreates it.
    let small = "enable_openstack_core: \"no\"\nenable_keystone: \"yes\"\n";
    let cloud = Cloud::new("kstack-sts-rollback", small).await?;
    let (code, _, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    let before = workloads(&cloud).await?;
    cloud.set_globals(&format!(
        "{small}memcached_tag: \"{NEW}-broken\"\nkstack_pod_labels:\n  memcached: {{kstack.io/dev-ready: never}}\nkstack_timeouts:\n  memcached: 15\n"
    ))?;
    let (code, report, stderr) = cloud.deploy_with(&["--no-backup"]).await?;
    assert_eq!(code, 3, "{stderr}");
    let failure = &report["failures"][0];
    assert_eq!(failure["service"], "memcached", "{report}");
    assert_eq!(failure["rollback"]["healthy"], true, "{report}");
    let after = workloads(&cloud).await?;
    assert_eq!(
        after["StatefulSet/memcached"].0, before["StatefulSet/memcached"].0,
        "memcached's previous pod template is back"
    );
    let status = cloud.status().await?;
    let row = status
        .iter()
        .find(|s| s["service"] == "memcached")
        .context("memcached row")?;
    assert_eq!(row["health"], "healthy", "{row}");
    assert_eq!(row["ready"], 1, "{row}");
    // Keystone depends on memcached: it was not touched.
    assert_eq!(after["Deployment/keystone"], before["Deployment/keystone"]);
    Ok(())
}

#[tokio::test]
async fn replicated_infrastructure_keeps_every_service_ready_through_an_upgrade_and_the_loss_of_a_pod()
-> anyhow::Result<()> {
    // Three of each infrastructure StatefulSet, each pod unready for a while after it starts.
    let replicated = "kstack_replicas: {mariadb: 3, rabbitmq: 3, memcached: 3}\n\
        kstack_pod_labels:\n  mariadb: {kstack.io/dev-ready-delay: 3s}\n  rabbitmq: {kstack.io/dev-ready-delay: 3s}\n  memcached: {kstack.io/dev-ready-delay: 3s}\n  keystone: {kstack.io/dev-ready-delay: 2s}\n";
    let cloud = Cloud::new("kstack-ha", &format!("{SMALL}{replicated}{OLD}")).await?;
    let (code, _, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    // What clients use: every Service but the StatefulSets' headless peers Services (those
    // publish pods that are not ready, for the peers to find each other).
    let watched = |s: &String| !s.ends_with("-peers");
    let infra = ["mariadb", "rabbitmq", "memcached"];

    let watch = watch_endpoints(&cloud.ns.name).await?;
    let start = watch.snapshot();
    for svc in infra {
        assert_eq!(start.ready_pods[svc].len(), 3, "{svc}: {start:?}");
    }
    cloud.set_globals(&format!(
        "{SMALL}{replicated}openstack_release: \"{NEW}\"\n"
    ))?;
    let (code, report, stderr) = cloud.deploy_with(&["--no-backup"]).await?;
    assert_eq!(code, 0, "upgrade failed:\n{stderr}");
    assert_eq!(report["succeeded"], true);
    let end = watch.snapshot();
    for (svc, counts) in end.counts.iter().filter(|(s, _)| watched(s)) {
        assert!(
            counts.iter().all(|n| *n > 0),
            "{svc} had no ready endpoint during the upgrade: {counts:?}"
        );
    }
    for svc in infra {
        // Every pod was replaced (the new image), one at a time: never fewer than two ready.
        assert!(
            end.counts[svc].iter().all(|n| *n >= 2),
            "{svc}: {:?}",
            end.counts[svc]
        );
        let workload = &workloads(&cloud).await?[&format!("StatefulSet/{svc}")].0;
        assert!(image_of(workload).contains(NEW), "{svc}: {workload}");
    }

    // One pod of each goes away: its Service keeps its other endpoints, and the pod comes back.
    let pods: kube::Api<kstack_k8s::api::core::v1::Pod> =
        kube::Api::namespaced(kstack_e2e::client().await?, &cloud.ns.name);
    let before_loss = watch.snapshot();
    for svc in infra {
        pods.delete(&format!("{svc}-1"), &Default::default())
            .await?;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let now = watch.snapshot();
        let back = infra.iter().all(|svc| {
            now.ready_pods[*svc].len() == 3
                && now.counts[*svc].len() > before_loss.counts[*svc].len()
        });
        if back {
            break;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the deleted pods were not back and ready within 120 s: {now:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let end = watch.snapshot();
    drop(watch);
    for (svc, counts) in end.counts.iter().filter(|(s, _)| watched(s)) {
        assert!(
            counts.iter().all(|n| *n > 0),
            "{svc} had no ready endpoint: {counts:?}"
        );
    }
    for svc in infra {
        let lost = &end.counts[svc][before_loss.counts[svc].len()..];
        assert!(lost.contains(&2), "{svc} never lost its pod: {lost:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_statefulset_from_before_the_peers_layout_is_replaced_and_keeps_its_claims()
-> anyhow::Result<()> {
    let small = "enable_openstack_core: \"no\"\nenable_keystone: \"yes\"\n";
    let cloud = Cloud::new("kstack-replace", small).await?;
    let (code, _, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    // MariaDB as a cloud deployed before had it: pods started one by one behind a governing
    // Service of its own name. Those fields cannot change in place, so the StatefulSet is made
    // again that way (its pods and claims stay).
    let client = client().await?;
    let api: kube::Api<kstack_k8s::api::apps::v1::StatefulSet> =
        kube::Api::namespaced(client.clone(), &cloud.ns.name);
    let mut old = api.get("mariadb").await?;
    let uid = old.metadata.uid.clone();
    api.delete("mariadb", &kube::api::DeleteParams::orphan())
        .await?;
    kube::runtime::wait::await_condition(
        api.clone(),
        "mariadb",
        |o: Option<&kstack_k8s::api::apps::v1::StatefulSet>| o.is_none(),
    )
    .await?;
    old.metadata = kstack_k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: old.metadata.name.clone(),
        labels: old.metadata.labels.clone(),
        annotations: old.metadata.annotations.clone().map(|mut a| {
            a.insert(
                kstack_model::labels::APPLIED_HASH_ANNOTATION.to_owned(),
                "before".to_owned(),
            );
            a
        }),
        ..Default::default()
    };
    old.status = None;
    let spec = old.spec.as_mut().context("spec")?;
    spec.pod_management_policy = Some("OrderedReady".into());
    spec.service_name = Some("mariadb".into());
    api.create(&Default::default(), &old).await?;
    let claims_before = cloud.of_service("mariadb").await?;
    let pods: kube::Api<kstack_k8s::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), &cloud.ns.name);
    let pod_before = pods.get("mariadb-0").await?.metadata.uid;

    let out = cloud.run(&["plan"]).await?;
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["replace", "StatefulSet", "mariadb", "mariadb"]),
        "{plan}"
    );
    assert!(plan.contains("1 to replace (pods kept)"), "{plan}");
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{report}\n{stderr}");
    let now = api.get("mariadb").await?;
    assert_ne!(now.metadata.uid, uid);
    let spec = now.spec.context("spec")?;
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    assert_eq!(spec.service_name.as_deref(), Some("mariadb-peers"));
    let status = now.status.context("status")?;
    assert_eq!(status.ready_replicas, Some(1));
    // The pod was kept: the new StatefulSet adopted it (same template, nothing to roll).
    assert_eq!(pods.get("mariadb-0").await?.metadata.uid, pod_before);
    // Nothing of mariadb's was lost on the way: its claim is still there.
    let claims_after = cloud.of_service("mariadb").await?;
    for c in claims_before
        .iter()
        .filter(|c| c.starts_with("PersistentVolumeClaim/"))
    {
        assert!(claims_after.contains(c), "{c}: {claims_after:?}");
    }
    // A second deploy has nothing to replace.
    let out = cloud.run(&["plan"]).await?;
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(!plan.contains("replace"), "{plan}");
    Ok(())
}
