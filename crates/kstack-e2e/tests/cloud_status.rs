//! The status page's Kubernetes view of the cloud (`kstack_kube::cloud::KubeCloudStatus`) on the
//! real local control plane: release records as the engine writes them and a kstack workload in
//! a temporary namespace; the watches must report a service healthy, then failing when its pods
//! stop being ready, then failed when a failed generation is recorded, each within seconds.
//! At each stage the inventory service serving that view is scraped at `/metrics` over a real
//! socket: the per-service health, generation and replica series say the same as the page.
//! Then the default cloud deployed by the `kstack` binary on the kwok nodes: every service
//! healthy in the metrics, and each one's last deploy steps as the engine recorded them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kstack_e2e::{TempNamespace, WAIT, client};
use kstack_engine::release::{
    IndexEntry, ReleaseIndex, ServiceRecord, ServiceState, index_config_map, record_config_map,
};
use kstack_inventory::{Role, ServeConfig, Tokens};
use kstack_ports::cloud::{Health, Snapshot};
use kstack_ports::{CloudStatus, RecordingSync};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

fn record(service: &str, generation: u64, state: ServiceState, kind: &str) -> ServiceRecord {
    ServiceRecord {
        deploy_generation: generation,
        time: "2026-11-25T22:00:00Z".into(),
        images: vec![format!("kolla/{service}:2025.1")],
        steps: kstack_engine::fake::deploy_steps("create", 400, 30_000, 30, state),
        ..kstack_engine::fake::service_record(service, generation, state, kind)
    }
}

async fn apply_cm(api: &Api<ConfigMap>, v: serde_json::Value) -> anyhow::Result<()> {
    let name = v["metadata"]["name"].as_str().unwrap().to_string();
    api.patch(&name, &PatchParams::apply("kstack"), &Patch::Apply(&v))
        .await?;
    Ok(())
}

async fn index(
    api: &Api<ConfigMap>,
    ns: &str,
    generation: u64,
    services: &[(&str, u64, ServiceState)],
) -> anyhow::Result<()> {
    let index = ReleaseIndex {
        generation,
        input_hash: "x".into(),
        time: "t".into(),
        services: services
            .iter()
            .map(|(s, g, st)| {
                (
                    s.to_string(),
                    IndexEntry {
                        generation: *g,
                        state: *st,
                    },
                )
            })
            .collect(),
        openstack_release: None,
    };
    apply_cm(api, index_config_map(ns, &index)).await
}

/// Waits (on the change stream, no polling) until the snapshot satisfies `ok`.
async fn until(
    status: &kstack_kube::cloud::KubeCloudStatus,
    what: &str,
    ok: impl Fn(&Snapshot) -> bool,
) -> anyhow::Result<Snapshot> {
    let mut changes = status.changes();
    let r = tokio::time::timeout(WAIT, async {
        loop {
            let s = status.snapshot().await;
            if ok(&s) {
                return s;
            }
            changes.next().await;
        }
    })
    .await;
    match r {
        Ok(s) => Ok(s),
        Err(_) => anyhow::bail!(
            "{what}: not seen within {WAIT:?}; last snapshot {:#?}",
            status.snapshot().await
        ),
    }
}

const READER: &str = "e2e-reader-token-0123456789abcdef0123";

/// The inventory service showing `cloud`, on plain HTTP on a free loopback port; stopped when
/// the task is aborted.
async fn serve_inventory(
    cloud: Arc<dyn CloudStatus>,
    dir: &std::path::Path,
) -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config = ServeConfig {
        listen: ([127, 0, 0, 1], port).into(),
        database_url: dir.join("inventory.db").display().to_string(),
        tokens: Tokens::new(BTreeMap::from([(READER.to_string(), Role::Reader)]))?,
        keystone: None,
        tls: None,
        insecure_http: false,
        audit_interval: Duration::from_secs(3600),
        sync: Arc::new(RecordingSync::default()),
        joins: None,
        cloud,
        max_connections: None,
        compute: None,
    };
    let task = tokio::spawn(async move {
        if let Err(e) = kstack_inventory::serve(config).await {
            eprintln!("inventory service stopped: {e}");
        }
    });
    let base = format!("http://127.0.0.1:{port}");
    // Our own server starting on a port we chose: nothing to watch, so try until it answers.
    for _ in 0..200 {
        if reqwest::get(format!("{base}/openapi.json")).await.is_ok() {
            return Ok((base, task));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    anyhow::bail!("the inventory service did not start")
}

/// `GET /metrics` as Prometheus scrapes it: every sample, `name{labels}` → value.
async fn scrape(base: &str) -> anyhow::Result<BTreeMap<String, f64>> {
    let resp = reqwest::Client::new()
        .get(format!("{base}/metrics"))
        .bearer_auth(READER)
        .send()
        .await?;
    anyhow::ensure!(resp.status() == 200, "/metrics: {}", resp.status());
    let text = resp.text().await?;
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line
            .rsplit_once(' ')
            .with_context(|| format!("sample line {line:?}"))?;
        out.insert(series.to_owned(), value.parse()?);
    }
    Ok(out)
}

/// The states whose `kstack_service_health` series is 1 for `service`, and how many series
/// it has.
fn health_series(m: &BTreeMap<String, f64>, service: &str) -> (Vec<String>, usize) {
    let prefix = format!("kstack_service_health{{service=\"{service}\",state=\"");
    let series: Vec<(&str, f64)> = m
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(&prefix)
                .and_then(|s| s.strip_suffix("\"}"))
                .map(|s| (s, *v))
        })
        .collect();
    let current = series
        .iter()
        .filter(|(_, v)| *v == 1.0)
        .map(|(s, _)| s.to_string())
        .collect();
    (current, series.len())
}

fn gauge(m: &BTreeMap<String, f64>, name: &str, service: &str) -> Option<f64> {
    m.get(&format!("{name}{{service=\"{service}\"}}")).copied()
}

fn service<'a>(s: &'a Snapshot, name: &str) -> Option<&'a kstack_ports::cloud::Service> {
    s.services.iter().find(|x| x.name == name)
}

#[tokio::test]
async fn release_records_and_workloads_become_the_status_page_view() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "cloud-status").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);

    let deployment = |replicas: i64| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "keystone", "labels": {"app.kubernetes.io/managed-by": "kstack"}},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "keystone"}},
                        "template": {"metadata": {"labels": {"app": "keystone"}},
                                     "spec": {"nodeSelector": {"kstack.io/no-such-node": "true"},
                                              "containers": [{"name": "keystone", "image": "kolla/keystone:2025.1"}]}}}})
    };
    deploys
        .patch(
            "keystone",
            &PatchParams::apply("kstack"),
            &Patch::Apply(&deployment(0)),
        )
        .await?;
    apply_cm(
        &cms,
        record_config_map(
            &ns.name,
            &record("keystone", 1, ServiceState::Healthy, "Deployment"),
        ),
    )
    .await?;
    apply_cm(
        &cms,
        record_config_map(
            &ns.name,
            &record("mariadb", 1, ServiceState::Healthy, "StatefulSet"),
        ),
    )
    .await?;
    index(
        &cms,
        &ns.name,
        1,
        &[
            ("keystone", 1, ServiceState::Healthy),
            ("mariadb", 1, ServiceState::Healthy),
        ],
    )
    .await?;

    let deps = BTreeMap::from([("keystone".to_string(), vec!["mariadb".to_string()])]);
    let status = kstack_kube::cloud::KubeCloudStatus::start(client.clone(), &ns.name, deps);
    let dir = tempfile::tempdir()?;
    let (base, server) = serve_inventory(status.clone(), dir.path()).await?;
    let _stop = AbortOnDrop(server);
    let s = until(&status, "keystone healthy", |s| {
        service(s, "keystone").is_some_and(|k| k.health == Health::Healthy)
    })
    .await?;
    assert_eq!(s.namespace, ns.name);
    assert_eq!(s.deploy_generation, Some(1));
    let k = service(&s, "keystone").unwrap();
    assert_eq!(k.depends_on, ["mariadb"]);
    assert_eq!(k.history.len(), 1);
    assert_eq!(k.history[0].images, ["kolla/keystone:2025.1"]);
    let m = service(&s, "mariadb").context("mariadb")?;
    assert_eq!(m.health, Health::Missing, "{m:?}");
    let metrics = scrape(&base).await?;
    assert_eq!(
        health_series(&metrics, "keystone"),
        (vec!["healthy".to_string()], 5),
        "{metrics:#?}"
    );
    assert_eq!(
        health_series(&metrics, "mariadb"),
        (vec!["missing".to_string()], 5),
        "{metrics:#?}"
    );
    assert_eq!(
        gauge(&metrics, "kstack_service_generation", "keystone"),
        Some(1.0)
    );
    assert_eq!(
        gauge(&metrics, "kstack_service_desired_replicas", "keystone"),
        Some(0.0)
    );
    assert_eq!(
        metrics
            .get(&format!(
                "kstack_cloud_deploy_generation{{namespace=\"{}\"}}",
                ns.name
            ))
            .copied(),
        Some(1.0),
        "{metrics:#?}"
    );

    // Its pod can never be scheduled: rolled out, not ready, so failing.
    let t = Instant::now();
    deploys
        .patch(
            "keystone",
            &PatchParams::apply("kstack"),
            &Patch::Apply(&deployment(1)),
        )
        .await?;
    let s = until(&status, "keystone failing", |s| {
        service(s, "keystone").is_some_and(|k| k.health == Health::Failed)
    })
    .await?;
    let k = service(&s, "keystone").unwrap();
    assert_eq!(k.reason.as_deref(), Some("only 0 of 1 pods ready"));
    assert_eq!((k.ready, k.desired), (0, 1));
    let took = t.elapsed();
    eprintln!("a workload whose pods are not ready showed as failed after {took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    let metrics = scrape(&base).await?;
    assert_eq!(
        health_series(&metrics, "keystone"),
        (vec!["failed".to_string()], 5),
        "{metrics:#?}"
    );
    assert_eq!(
        gauge(&metrics, "kstack_service_ready_replicas", "keystone"),
        Some(0.0)
    );
    assert_eq!(
        gauge(&metrics, "kstack_service_desired_replicas", "keystone"),
        Some(1.0)
    );

    // A deploy records a failed generation 2.
    let t = Instant::now();
    apply_cm(
        &cms,
        record_config_map(
            &ns.name,
            &record("keystone", 2, ServiceState::Failed, "Deployment"),
        ),
    )
    .await?;
    index(
        &cms,
        &ns.name,
        2,
        &[
            ("keystone", 2, ServiceState::Failed),
            ("mariadb", 1, ServiceState::Healthy),
        ],
    )
    .await?;
    let s = until(&status, "generation 2 failed", |s| {
        service(s, "keystone").is_some_and(|k| k.generation == Some(2))
            && s.deploy_generation == Some(2)
    })
    .await?;
    let k = service(&s, "keystone").unwrap();
    assert_eq!(k.health, Health::Failed);
    assert_eq!(
        k.reason.as_deref(),
        Some("generation 2 was recorded failed")
    );
    assert_eq!(
        k.history.iter().map(|g| g.generation).collect::<Vec<_>>(),
        [2, 1]
    );
    // The last deploy's steps are generation 2's, its health step failed.
    let steps: Vec<(&str, &str, Option<&str>)> = k
        .last_deploy
        .iter()
        .map(|st| (st.step.as_str(), st.outcome.as_str(), st.reason.as_deref()))
        .collect();
    assert_eq!(
        steps,
        [
            ("config", "done", None),
            ("healthy", "failed", Some("timed out after 30s"))
        ]
    );
    assert_eq!(k.last_deploy[1].started, "2026-11-25T22:00:00Z");
    assert_eq!(k.last_deploy[1].finished, "2026-11-25T22:00:30Z");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    let metrics = scrape(&base).await?;
    assert_eq!(
        gauge(&metrics, "kstack_service_generation", "keystone"),
        Some(2.0),
        "{metrics:#?}"
    );
    assert_eq!(
        health_series(&metrics, "keystone"),
        (vec!["failed".to_string()], 5)
    );
    assert_eq!(
        metrics
            .get(&format!(
                "kstack_cloud_status_problem{{namespace=\"{}\"}}",
                ns.name
            ))
            .copied(),
        Some(0.0),
        "{metrics:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_deployed_cloud_shows_every_service_healthy_in_the_metrics_with_its_deploy_steps()
-> anyhow::Result<()> {
    let cloud = kstack_e2e::cloud::Cloud::new("cloud-metrics", "").await?;
    let (code, report, stderr) = cloud.deploy().await?;
    anyhow::ensure!(code == 0, "deploy failed:\n{stderr}\n{report}");
    let client = client().await?;
    let status =
        kstack_kube::cloud::KubeCloudStatus::start(client.clone(), &cloud.ns.name, BTreeMap::new());
    let s = until(&status, "every service healthy", |s| {
        s.problem.is_none()
            && s.services.len() >= 20
            && s.services.iter().all(|x| x.health == Health::Healthy)
    })
    .await?;
    let dir = tempfile::tempdir()?;
    let (base, server) = serve_inventory(status.clone(), dir.path()).await?;
    let _stop = AbortOnDrop(server);
    let metrics = scrape(&base).await?;
    for svc in &s.services {
        let name = svc.name.as_str();
        assert_eq!(
            health_series(&metrics, name),
            (vec!["healthy".to_string()], 5),
            "{name}: {metrics:#?}"
        );
        assert_eq!(
            gauge(&metrics, "kstack_service_generation", name),
            Some(1.0)
        );
        let ready = gauge(&metrics, "kstack_service_ready_replicas", name);
        assert!(ready.is_some_and(|r| r >= 1.0), "{name}: {ready:?}");
        assert_eq!(
            gauge(&metrics, "kstack_service_desired_replicas", name),
            ready,
            "{name}"
        );
        // What the deploy did for it: config first, its health last, every step done, with
        // times from the deploy's start.
        let steps: Vec<&str> = svc.last_deploy.iter().map(|x| x.step.as_str()).collect();
        assert_eq!(steps.first(), Some(&"config"), "{name}: {steps:?}");
        assert_eq!(steps.last(), Some(&"healthy"), "{name}: {steps:?}");
        assert!(steps.contains(&"workload"), "{name}: {steps:?}");
        for st in &svc.last_deploy {
            assert_eq!(st.outcome, "done", "{name}: {st:?}");
            assert!(
                !st.started.is_empty() && st.started <= st.finished,
                "{name}: {st:?}"
            );
            assert!(st.started >= svc.history[0].time, "{name}: {st:?}");
        }
    }
    let keystone = service(&s, "keystone").context("keystone")?;
    let jobs: Vec<&str> = keystone
        .last_deploy
        .iter()
        .filter(|x| x.step.starts_with("job "))
        .map(|x| x.action.as_str())
        .collect();
    assert!(
        !jobs.is_empty() && jobs.iter().all(|a| *a == "create"),
        "keystone's bootstrap Jobs ran in its first deploy: {:#?}",
        keystone.last_deploy
    );
    assert_eq!(
        metrics
            .get(&format!(
                "kstack_cloud_deploy_generation{{namespace=\"{}\"}}",
                cloud.ns.name
            ))
            .copied(),
        Some(1.0)
    );
    Ok(())
}

/// Stops the inventory service when the test ends, passed or not.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
