//! `kstack deploy` on the real local control plane, each test in a namespace of its own: the
//! whole default cloud becomes healthy, a second deploy writes nothing, and a workload scaled
//! and edited by hand is planned as drift and put back; a deploy killed with
//! SIGKILL converges when run again, running every Job once; a service whose pods never become
//! ready fails the deploy and none of its dependents is started; a disabled service is pruned.
//!
//! The tests run the `kstack` binary (`$KSTACK_BIN`, else `target/debug/kstack`; hack/test.sh
//! builds it first) with a config directory made by `kstack init` + `kstack genpwd`.
use std::collections::BTreeMap;
use std::process::Stdio;

use anyhow::Context;
use futures::TryStreamExt;
use kstack_e2e::client;
use kstack_e2e::cloud::{Cloud, NO_HOST_NETWORK, job_task};
use kstack_engine::Cluster;
use kstack_kube::KubeCluster;
use kube::runtime::WatchStreamExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn the_default_cloud_becomes_healthy_and_a_second_deploy_writes_nothing() -> anyhow::Result<()>
{
    let cloud = Cloud::new("kstack-deploy", "").await?;
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "deploy failed:\n{stderr}");
    assert_eq!(report["succeeded"], true);
    assert_eq!(report["generation"], 1);
    // The critical path: a chain from a step that started with the deploy to the step that
    // ended last, each link starting after the one before it ended.
    let path = report["critical_path"]
        .as_array()
        .context("critical_path")?;
    let at = |l: &Value, key: &str| l[key].as_f64().unwrap_or(f64::NAN);
    assert!(path.len() >= 4, "{path:?}");
    assert!(at(&path[0], "started") < 5.0, "{path:?}");
    for pair in path.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            at(b, "started") >= at(a, "done"),
            "{b} starts before {a} ends"
        );
    }
    let end = path.last().map_or(0.0, |l| at(l, "done"));
    assert!(
        end <= report["seconds"].as_f64().unwrap_or(0.0) && end > 0.0,
        "the path ends at {end} s: {report}"
    );
    assert!(
        stderr.contains("critical path ("),
        "no critical path printed: {stderr}"
    );
    let status = cloud.status().await?;
    assert!(status.len() >= 20, "{status:?}");
    for s in &status {
        assert_eq!(s["health"], "healthy", "{s}");
        assert!(s["desired"].as_i64().unwrap() >= 1, "{s}");
        assert_eq!(s["ready"], s["desired"], "{s}");
        assert_eq!(s["generation"], 1, "{s}");
        assert_eq!(s["recorded"], "healthy", "{s}");
    }
    // Every Job succeeded.
    let jobs = cloud
        .cluster
        .list("Job", &cloud.ns.name, "app.kubernetes.io/managed-by=kstack")
        .await?;
    assert!(!jobs.is_empty());
    for j in &jobs {
        assert_eq!(j["status"]["succeeded"], 1, "{}", j["metadata"]["name"]);
    }

    let (code, again, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "second deploy failed:\n{stderr}");
    assert_eq!(again["writes"], 0, "{again}");
    assert_eq!(
        again["api_requests"]["writes"], 0,
        "the API server saw writes: {again}"
    );
    assert_eq!(again["generation"], 1);

    let plan = cloud.run(&["plan", "-o", "json"]).await?;
    assert!(plan.status.success());
    let rows: Vec<Value> = serde_json::from_slice(&plan.stdout)?;
    assert!(rows.is_empty(), "plan after deploy: {rows:?}");

    // An operator scales keystone and changes its image by hand (as kubectl does: the scale
    // subresource and a strategic merge patch, under kubectl's field managers).
    let deployments: kube::Api<kstack_k8s::api::apps::v1::Deployment> =
        kube::Api::namespaced(client().await?, &cloud.ns.name);
    let by = |manager: &str| kube::api::PatchParams {
        field_manager: Some(manager.to_owned()),
        ..Default::default()
    };
    let before = deployments.get("keystone").await?;
    deployments
        .patch_scale(
            "keystone",
            &by("kubectl"),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 2}})),
        )
        .await?;
    deployments
        .patch(
            "keystone",
            &by("kubectl-set"),
            &kube::api::Patch::Strategic(serde_json::json!({"spec": {"template": {"spec": {
                "containers": [{"name": "keystone", "image": "example.org/keystone:by-hand"}]}}}})),
        )
        .await?;
    let plan = cloud.run(&["plan", "-o", "json"]).await?;
    assert!(plan.status.success());
    let rows: Vec<Value> = serde_json::from_slice(&plan.stdout)?;
    assert_eq!(rows.len(), 1, "plan after the edit: {rows:?}");
    assert_eq!(
        (&rows[0]["action"], &rows[0]["kind"], &rows[0]["name"]),
        (&"change".into(), &"Deployment".into(), &"keystone".into())
    );
    let drift: Vec<&str> = rows[0]["drift"]
        .as_array()
        .context("drift")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(drift.len(), 2, "{drift:?}");
    assert_eq!(drift[0], "replicas: 2 in the cluster, 1 wanted");
    assert!(
        drift[1].contains("example.org/keystone:by-hand in the cluster"),
        "{drift:?}"
    );
    // Deploy takes both fields back from kubectl's managers (no apply conflict) and the
    // rollout completes.
    let (code, fixed, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "deploy after the edit failed:\n{stderr}");
    assert_eq!(fixed["succeeded"], true);
    let after = deployments.get("keystone").await?;
    let spec = |d: &kstack_k8s::api::apps::v1::Deployment| {
        let s = d.spec.as_ref().unwrap();
        (
            s.replicas,
            s.template.spec.as_ref().unwrap().containers[0]
                .image
                .clone(),
        )
    };
    assert_eq!(spec(&after), spec(&before));
    let (code, again, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(again["writes"], 0, "{again}");
    Ok(())
}

#[tokio::test]
async fn a_deploy_killed_midway_converges_when_run_again() -> anyhow::Result<()> {
    // Delays so the deploy is killed while Jobs and rollouts are in flight.
    let extra = format!(
        "{NO_HOST_NETWORK}kstack_pod_labels:\n  keystone: {{kstack.io/dev-complete-delay: 3s, kstack.io/dev-ready-delay: 2s}}\n  mariadb: {{kstack.io/dev-complete-delay: 2s, kstack.io/dev-ready-delay: 2s}}\n  glance-api: {{kstack.io/dev-complete-delay: 2s}}\n"
    );
    let cloud = Cloud::new("kstack-kill", &extra).await?;
    let mut child = cloud
        .command(&["deploy"])?
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    let mut lines = BufReader::new(child.stderr.take().context("stderr")?).lines();
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await? {
        seen.push(line.clone());
        // Killed while keystone's bootstrap Job is running: objects applied, Job in flight.
        if line.contains("start keystone: job") {
            break;
        }
    }
    // Wait (through a watch) until keystone's Job exists, so the kill lands while it runs.
    let jobs: kube::Api<kstack_k8s::api::batch::v1::Job> =
        kube::Api::namespaced(client().await?, &cloud.ns.name);
    let created = kube::runtime::watcher(
        jobs,
        kube::runtime::watcher::Config::default().labels("app.kubernetes.io/name=keystone"),
    )
    .applied_objects();
    futures::pin_mut!(created);
    tokio::time::timeout(kstack_e2e::WAIT, created.try_next())
        .await
        .context("keystone's Job was not created")??;
    child.start_kill()?; // SIGKILL
    child.wait().await?;
    assert!(
        seen.iter().any(|l| l.contains("start keystone: job")),
        "the deploy ended before it reached keystone's Job:\n{}",
        seen.join("\n")
    );
    let jobs_before: BTreeMap<String, String> = cloud
        .cluster
        .list("Job", &cloud.ns.name, "app.kubernetes.io/managed-by=kstack")
        .await?
        .iter()
        .map(|j| {
            (
                j["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                j["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert!(
        jobs_before.keys().any(|j| j.starts_with("keystone-")),
        "{jobs_before:?}"
    );

    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "resumed deploy failed:\n{stderr}");
    assert_eq!(report["succeeded"], true);

    // No duplicates: one Job per service task, one ConfigMap per service container.
    let objects = cloud.objects().await?;
    let mut per_task: BTreeMap<(String, String), u32> = BTreeMap::new();
    for o in objects.iter().filter(|o| o["kind"] == "Job") {
        *per_task.entry(job_task(o)).or_default() += 1;
        // Ran once: one successful pod, no failed one; a Job that existed before the kill is
        // the same object (never deleted and re-created).
        assert_eq!(o["status"]["succeeded"], 1, "{}", o["metadata"]["name"]);
        assert!(o["status"]["failed"].is_null(), "{}", o["metadata"]["name"]);
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(uid) = jobs_before.get(name) {
            assert_eq!(
                o["metadata"]["uid"].as_str(),
                Some(uid.as_str()),
                "{name} was re-created"
            );
        }
    }
    assert!(per_task.values().all(|n| *n == 1), "{per_task:?}");
    let workloads = objects
        .iter()
        .filter(|o| {
            ["Deployment", "StatefulSet", "DaemonSet"]
                .contains(&o["kind"].as_str().unwrap_or_default())
        })
        .count();
    let status = cloud.status().await?;
    assert_eq!(workloads, status.len());
    assert!(
        status.iter().all(|s| s["health"] == "healthy"),
        "{status:?}"
    );

    let (_, again, _) = cloud.deploy().await?;
    assert_eq!(again["api_requests"]["writes"], 0, "not converged: {again}");
    Ok(())
}

#[tokio::test]
async fn a_service_that_never_becomes_ready_fails_the_deploy_and_starts_no_dependent()
-> anyhow::Result<()> {
    let extra = format!(
        "{NO_HOST_NETWORK}kstack_pod_labels:\n  keystone: {{kstack.io/dev-ready: never}}\nkstack_timeouts:\n  keystone: 15\n"
    );
    let cloud = Cloud::new("kstack-never", &extra).await?;
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 3, "expected exit code 3:\n{stderr}");
    assert_eq!(report["succeeded"], false);
    let failure = &report["failures"][0];
    assert_eq!(failure["service"], "keystone");
    assert_eq!(failure["condition"], "rollout_complete");
    assert!(stderr.contains("service keystone: step `keystone: healthy` failed waiting for \"rollout complete, every pod ready\": timed out after 15s"), "{stderr}");
    assert!(
        stderr.contains("ContainersNotReady"),
        "the pods' reason is shown:\n{stderr}"
    );
    assert!(
        stderr.contains("container keystone: running, not ready"),
        "{stderr}"
    );
    assert!(stderr.contains("not started"), "{stderr}");
    let not_started: Vec<&str> = report["not_started"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // A first install: no pod of a dependent started, and no Job of a task that needs keystone
    // (their database Jobs, which need only MariaDB, ran beside keystone).
    for dependent in [
        "glance-api",
        "placement-api",
        "horizon",
        "heat-api",
        "heat-engine",
    ] {
        assert!(
            not_started.contains(&format!("{dependent}: workload").as_str()),
            "{dependent}: {not_started:?}"
        );
        let objects = cloud.of_service(dependent).await?;
        let started: Vec<&String> = objects
            .iter()
            .filter(|o| {
                ["Deployment/", "StatefulSet/", "DaemonSet/"]
                    .iter()
                    .any(|k| o.starts_with(k))
                    || (o.starts_with("Job/") && o.contains("-register-"))
            })
            .collect();
        assert!(started.is_empty(), "{dependent} was started: {started:?}");
    }
    // What does not depend on keystone was deployed.
    let status = cloud.status().await?;
    let health = |s: &str| {
        status
            .iter()
            .find(|r| r["service"] == s)
            .map(|r| r["health"].clone())
    };
    assert_eq!(health("mariadb"), Some("healthy".into()));
    assert_eq!(health("memcached"), Some("healthy".into()));
    assert_eq!(health("keystone"), Some("progressing".into()));
    Ok(())
}

/// A newcomer's first deploy: the namespace does not exist yet and the public endpoints have
/// TLS with kstack's own CA (as `kstack init`'s starter globals have it): the deploy makes the
/// namespace, then the CA and the certificate in it, then the cloud.
#[tokio::test]
async fn a_first_deploy_makes_its_namespace_then_its_ca() -> anyhow::Result<()> {
    let small = "enable_openstack_core: \"no\"\nenable_keystone: \"yes\"\n\
                 kolla_external_vip_address: 172.24.4.1\nkolla_enable_tls_external: \"yes\"\n";
    let cloud = Cloud::new("kstack-first", small).await?;
    let namespaces: kube::Api<kstack_k8s::api::core::v1::Namespace> =
        kube::Api::all(client().await?);
    namespaces
        .delete(&cloud.ns.name, &Default::default())
        .await?;
    let deadline = std::time::Instant::now() + kstack_e2e::WAIT;
    while namespaces.get_opt(&cloud.ns.name).await?.is_some() {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "namespace {} still there after {:?}",
            cloud.ns.name,
            kstack_e2e::WAIT
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let (code, _, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    let secrets: kube::Api<kstack_k8s::api::core::v1::Secret> =
        kube::Api::namespaced(client().await?, &cloud.ns.name);
    for name in ["kstack-ca", "kstack-public-tls"] {
        assert!(
            secrets.get_opt(name).await?.is_some(),
            "Secret {name} in namespace {}",
            cloud.ns.name
        );
    }
    let keystone = cloud.of_service("keystone").await?;
    assert!(
        keystone.iter().any(|o| o == "Deployment/keystone"),
        "{keystone:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_disabled_service_is_pruned_and_nothing_else() -> anyhow::Result<()> {
    let small =
        "enable_openstack_core: \"no\"\nenable_keystone: \"yes\"\nenable_horizon: \"yes\"\n";
    let cloud = Cloud::new("kstack-prune", small).await?;
    let (code, _, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    let horizon = cloud.of_service("horizon").await?;
    assert!(
        horizon.iter().any(|o| o == "Deployment/horizon"),
        "{horizon:?}"
    );
    // An object kstack does not own, labelled like horizon's: it must survive.
    let foreign = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "not-kstacks", "namespace": cloud.ns.name, "labels": {"app.kubernetes.io/name": "horizon"}},
        "data": {"a": "b"},
    });
    cloud.cluster.apply(&foreign).await?;
    let keystone_before = cloud.of_service("keystone").await?;

    cloud.set_globals(&small.replace("enable_horizon: \"yes\"", "enable_horizon: \"no\""))?;
    let plan = cloud.run(&["plan", "-o", "json"]).await?;
    let rows: Vec<Value> = serde_json::from_slice(&plan.stdout)?;
    assert!(
        !rows.is_empty()
            && rows
                .iter()
                .all(|r| r["action"] == "prune" && r["service"] == "horizon"),
        "{rows:?}"
    );
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        report["pruned"].as_array().unwrap().len(),
        horizon.len(),
        "{report}"
    );
    assert_eq!(
        cloud.of_service("horizon").await?,
        ["ConfigMap/not-kstacks"]
    );
    assert_eq!(cloud.of_service("keystone").await?, keystone_before);
    let status = cloud.status().await?;
    let row = status
        .iter()
        .find(|r| r["service"] == "horizon")
        .context("horizon row")?;
    assert_eq!(row["health"], "removed");
    // The history keeps horizon's generation.
    let out = cloud.run(&["history", "horizon", "-o", "json"]).await?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let history: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0]["generation"], 1);
    assert_eq!(history[0]["state"], "healthy");
    assert!(
        history[0]["images"][0]
            .as_str()
            .unwrap_or_default()
            .contains("horizon")
    );
    Ok(())
}

#[tokio::test]
async fn kstack_deploys_as_its_own_least_privilege_account() -> anyhow::Result<()> {
    let small = "enable_openstack_core: \"no\"\nenable_keystone: \"yes\"\n";
    let cloud = Cloud::new("kstack-rbac", small).await?;
    // The account, as `kstack template --rbac` renders it, applied by the admin.
    let out = cloud.run(&["template", "--rbac", "-o", "json"]).await?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout)?;
    let items = list["items"].as_array().context("items")?;
    assert_eq!(items.len(), 5);
    for item in items {
        cloud.cluster.apply(item).await?;
    }

    // Deploy impersonating system:serviceaccount:<ns>:kstack.
    let kubeconfig = kube::config::Kubeconfig::read_from(&cloud.kubeconfig)?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{}:kstack", cloud.ns.name));
    let as_kstack_client = kube::Client::try_from(config)?;
    let as_kstack = KubeCluster::new(as_kstack_client.clone());
    let loaded = kstack_config::fs::load_dir(cloud.dir.path())?;
    let cfg = loaded.config.context("config")?;
    let rendered = kstack_render::kubernetes::render(&cfg)?;
    let ns_ref = kstack_engine::ObjectRef::new("Namespace", None, &cloud.ns.name);
    let observed = kstack_engine::observe(&as_kstack, &cloud.ns.name, &[ns_ref]).await?;
    let plan = kstack_engine::plan(&rendered, &cfg.catalog, &observed, &Default::default())?;
    let options = kstack_engine::Options {
        serial: false,
        now: "2026-01-01T00:00:00Z".into(),
        no_rollback: false,
        outage: None,
    };
    let report = kstack_engine::deploy(
        &as_kstack,
        &plan,
        &observed,
        &options,
        &|_: &kstack_engine::Event| {},
    )
    .await?;
    assert!(
        report.succeeded(),
        "{}",
        report
            .failures
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Least privilege: nothing outside its namespace.
    let outside = as_kstack.list("Secret", "kube-system", "").await;
    assert!(
        outside
            .as_ref()
            .is_err_and(|e| e.message.contains("forbidden")),
        "{outside:?}"
    );
    let other_ns = kstack_engine::ObjectRef::new("Namespace", None, "kube-system");
    assert!(as_kstack.get(&other_ns).await.is_err());

    // `kstack verify`'s failure report reads the pods' logs: the account may (the kwok node
    // has no log to give, but the API server lets the request through to it).
    let logs = kstack_kube::logs::pod_logs(
        &as_kstack_client,
        &cloud.ns.name,
        "app.kubernetes.io/name=keystone",
        5,
    )
    .await?;
    assert!(!logs.is_empty(), "no keystone pod");
    for l in &logs {
        assert!(
            !l.text.contains("forbidden"),
            "{}/{}: {}",
            l.pod,
            l.container,
            l.text
        );
    }

    // The CLI under the account, with the global --kubeconfig before the sub-command: it
    // takes the deploy lock (a Lease it may create and renew) and finds nothing to change.
    let mut kubeconfig = kube::config::Kubeconfig::read_from(&cloud.kubeconfig)?;
    for a in &mut kubeconfig.auth_infos {
        if let Some(info) = a.auth_info.as_mut() {
            info.impersonate = Some(format!("system:serviceaccount:{}:kstack", cloud.ns.name));
        }
    }
    let file = tempfile::NamedTempFile::new()?;
    // JSON is YAML: kubeconfig readers take it as it is.
    std::fs::write(file.path(), serde_json::to_string(&kubeconfig)?)?;
    let path = file.path().to_str().context("path")?;
    let out = cloud
        .command(&["--kubeconfig", path, "deploy", "-o", "json"])?
        .output()
        .await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let again: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(again["api_requests"]["writes"], 0, "{again}");
    Ok(())
}

/// Waits until the cloud's deploy lock has a holder; returns it.
async fn lock_holder(namespace: &str) -> anyhow::Result<String> {
    let leases: kube::Api<kstack_k8s::api::coordination::v1::Lease> =
        kube::Api::namespaced(client().await?, namespace);
    let deadline = tokio::time::Instant::now() + kstack_e2e::WAIT;
    loop {
        if let Some(l) = leases.get_opt(kstack_kube::lock::LEASE_NAME).await?
            && let Some(h) = l.spec.and_then(|s| s.holder_identity)
        {
            return Ok(h);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "nobody took the deploy lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn two_deploys_at_once_take_turns_and_the_last_one_wins() -> anyhow::Result<()> {
    // Slow enough that the second deploy starts while the first one runs.
    let slow = format!(
        "{NO_HOST_NETWORK}kstack_pod_labels:\n  keystone: {{kstack.io/dev-ready-delay: 4s}}\n  mariadb: {{kstack.io/dev-ready-delay: 3s}}\n"
    );
    let cloud = Cloud::new("kstack-lock", &slow).await?;
    // Another operator's config directory for the same cloud: two keystone replicas.
    let other = cloud.other_config(&format!("{slow}kstack_replicas:\n  keystone: 2\n"))?;

    let first = cloud
        .command(&["deploy", "-o", "json"])?
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let holder = lock_holder(&cloud.ns.name).await?;
    assert!(holder.starts_with("kstack deploy by "), "{holder}");

    // --no-wait: refused at once (exit 75, EX_TEMPFAIL), naming the holder; nothing written.
    let refused = cloud
        .command_in(other.path(), &["deploy", "--no-wait"])?
        .output()
        .await?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains(&holder), "{stderr}");

    // Without it: waits, saying for whom, and deploys once the first is done.
    let second = cloud
        .command_in(other.path(), &["deploy", "-o", "json"])?
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let first = first.wait_with_output().await?;
    let second = second.wait_with_output().await?;
    let (e1, e2) = (
        String::from_utf8_lossy(&first.stderr),
        String::from_utf8_lossy(&second.stderr),
    );
    assert_eq!(first.status.code(), Some(0), "first deploy:\n{e1}");
    assert_eq!(second.status.code(), Some(0), "second deploy:\n{e2}");
    assert!(
        e2.contains("waiting for the deploy lock") && e2.contains(&holder),
        "{e2}"
    );
    let r1: Value = serde_json::from_slice(&first.stdout)?;
    let r2: Value = serde_json::from_slice(&second.stdout)?;
    assert_eq!(r1["generation"], 1, "{r1}");
    assert_eq!(r2["generation"], 2, "{r2}");
    assert!(
        r2["lock_waited_seconds"].as_f64().unwrap_or(0.0) > 0.0,
        "{r2}"
    );

    // The cloud is the second one's, whole: its plan changes nothing, the first's would.
    let plan = |dir: &std::path::Path| {
        let c = cloud.command_in(dir, &["plan", "-o", "json"]);
        async move {
            let out = c?.output().await?;
            anyhow::ensure!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            Ok::<_, anyhow::Error>(serde_json::from_slice::<Vec<Value>>(&out.stdout)?)
        }
    };
    let rows = plan(other.path()).await?;
    assert!(rows.is_empty(), "the second config's plan: {rows:?}");
    let rows = plan(cloud.dir.path()).await?;
    assert!(
        rows.iter().any(|r| r["name"] == "keystone"),
        "the first config's plan: {rows:?}"
    );
    // The lock is free again.
    let leases: kube::Api<kstack_k8s::api::coordination::v1::Lease> =
        kube::Api::namespaced(client().await?, &cloud.ns.name);
    let lease = leases.get(kstack_kube::lock::LEASE_NAME).await?;
    assert!(
        lease.spec.and_then(|s| s.holder_identity).is_none(),
        "the lock was not released"
    );
    Ok(())
}

#[tokio::test]
async fn deploys_killed_at_random_points_converge_every_time() -> anyhow::Result<()> {
    let extra = format!(
        "{NO_HOST_NETWORK}kstack_pod_labels:\n  keystone: {{kstack.io/dev-complete-delay: 2s, kstack.io/dev-ready-delay: 2s}}\n  mariadb: {{kstack.io/dev-complete-delay: 1s, kstack.io/dev-ready-delay: 1s}}\n  glance-api: {{kstack.io/dev-ready-delay: 1s}}\n"
    );
    let cloud = Cloud::new("kstack-kill9", &extra).await?;
    let seed: u64 = std::env::var("KSTACK_E2E_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
    eprintln!("kill points from seed {seed} (KSTACK_E2E_SEED={seed} repeats them)");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    for round in 1..=4 {
        let after = std::time::Duration::from_millis(rand::Rng::gen_range(&mut rng, 300..9000));
        let mut child = cloud
            .command(&["deploy"])?
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        tokio::time::sleep(after).await;
        let finished = child.try_wait()?.is_some();
        child.start_kill()?; // SIGKILL
        child.wait().await?;
        eprintln!(
            "round {round}: killed after {:.1}s{}",
            after.as_secs_f64(),
            if finished { " (it had finished)" } else { "" }
        );
    }
    // The next deploy takes the dead process's lock at once and converges.
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "deploy after the kills failed:\n{stderr}");
    assert!(
        report["lock_waited_seconds"].as_f64().unwrap_or(99.0) < 5.0,
        "waited for a dead process's lock: {report}"
    );
    let objects = cloud.objects().await?;
    let mut per_task: BTreeMap<(String, String), u32> = BTreeMap::new();
    for o in objects.iter().filter(|o| o["kind"] == "Job") {
        *per_task.entry(job_task(o)).or_default() += 1;
        assert_eq!(o["status"]["succeeded"], 1, "{}", o["metadata"]["name"]);
    }
    assert!(per_task.values().all(|n| *n == 1), "{per_task:?}");
    let status = cloud.status().await?;
    assert!(
        status.iter().all(|s| s["health"] == "healthy"),
        "{status:?}"
    );
    let (_, again, _) = cloud.deploy().await?;
    assert_eq!(again["api_requests"]["writes"], 0, "not converged: {again}");
    Ok(())
}
