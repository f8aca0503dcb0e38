//! Upgrade benchmark on the local control plane: the whole default cloud, with per-service
//! readiness delays (kwok stage delays set through `kstack_pod_labels`), deployed, then
//! upgraded to a new release tag while a watch of the namespace's EndpointSlices records what
//! clients of each Service saw. Prints the upgrade's wall time, the migration Jobs it ran, and
//! per Service the fewest ready endpoints and the time with none.
//!
//! ```sh
//! KSTACK_E2E_KUBECONFIG=$(KSTACK_DEV_DIR=/tmp/dev-bench KSTACK_DEV_PORT_BASE=17440 bash hack/devcluster.sh up) \
//!   cargo run -p kstack-e2e --example upgrade_bench
//! ```
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use kstack_config::Config;
use kstack_e2e::TempNamespace;
use kstack_e2e::endpoints::watch_endpoints;
use kstack_engine::{Limits, Options, StepKind};
use kstack_kube::KubeCluster;
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::kubernetes;
use serde_json::json;

/// Readiness delay of a service's pods: 3 to 6 s, fixed per service (as deploy_bench).
fn ready_delay(service: &str) -> Duration {
    let n: u32 = service.bytes().map(u32::from).sum();
    Duration::from_secs(3 + u64::from(n % 4))
}

fn config(ns: &str, release: &str) -> anyhow::Result<Config> {
    let catalog = Catalog::builtin()?;
    let mut labels = serde_json::Map::new();
    for name in catalog.services.keys() {
        labels.insert(
            name.clone(),
            json!({
                "kstack.io/dev-ready-delay": format!("{}s", ready_delay(name).as_secs()),
                "kstack.io/dev-complete-delay": "2s",
            }),
        );
    }
    let vars = json!({
        "kubernetes_namespace": ns,
        "kstack_pod_labels": labels,
        "openstack_release": release,
    });
    let vars: BTreeMap<String, serde_json::Value> = vars
        .as_object()
        .context("object")?
        .clone()
        .into_iter()
        .collect();
    let globals = Globals::from_vars(&vars).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(Config::from_parts(
        globals,
        kstack_config::testing::passwords(1),
        Default::default(),
        catalog,
    ))
}

/// One deploy of `config`; returns its plan, report and wall time.
async fn deploy(
    cluster: &KubeCluster,
    config: &Config,
) -> anyhow::Result<(kstack_engine::Plan, kstack_engine::Report, Duration)> {
    let ns = &config.globals.kubernetes_namespace;
    let rendered = kubernetes::render(config)?;
    let start = Instant::now();
    let cluster_scoped = vec![kstack_engine::ObjectRef::new("Namespace", None, ns)];
    let observed = kstack_engine::observe(cluster, ns, &cluster_scoped).await?;
    let plan = kstack_engine::plan(&rendered, &config.catalog, &observed, &Limits::default())?;
    let options = Options {
        serial: false,
        now: "bench".into(),
        no_rollback: false,
    };
    let report = kstack_engine::deploy(
        cluster,
        &plan,
        &observed,
        &options,
        &|_: &kstack_engine::Event| {},
    )
    .await?;
    let wall = start.elapsed();
    anyhow::ensure!(
        report.succeeded(),
        "deploy failed: {}",
        report
            .failures
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok((plan, report, wall))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let kubeconfig = std::env::var("KSTACK_E2E_KUBECONFIG")
        .context("set KSTACK_E2E_KUBECONFIG to the kubeconfig `kstack dev up` printed")?;
    let admin = kstack_e2e::client().await?;
    let ns = TempNamespace::new(&admin, "upgrade-bench").await?;
    let client = kstack_kube::client(Some(&kubeconfig)).await?;
    let cluster = KubeCluster::new(client);

    let (_, _, install) = deploy(&cluster, &config(&ns.name, "2025.1")?).await?;
    println!(
        "install of the default cloud: {:.1} s",
        install.as_secs_f64()
    );

    let watch = watch_endpoints(&ns.name).await?;
    let (plan, _, upgrade) = deploy(&cluster, &config(&ns.name, "2025.2")?).await?;
    let seen = watch.snapshot();
    drop(watch);

    let upgraded = plan
        .modes
        .values()
        .filter(|m| matches!(m.mode, kstack_engine::Mode::Upgrade { .. }))
        .count();
    let phase_jobs = |phase: &str| {
        plan.steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Job { .. }))
            .filter(|s| {
                plan.objects[s.objects[0]].desired.manifest["metadata"]["labels"]
                    [kubernetes::PHASE_LABEL]
                    == phase
            })
            .count()
    };
    println!(
        "upgrade 2025.1 -> 2025.2: {:.1} s, {upgraded} services upgraded, {} expand and {} contract migration Jobs",
        upgrade.as_secs_f64(),
        phase_jobs("expand"),
        phase_jobs("contract"),
    );
    println!(
        "{:<26} {:>6} {:>9} {:>12}",
        "service", "events", "min ready", "time at zero"
    );
    let mut worst = Duration::ZERO;
    for (service, counts) in &seen.counts {
        let zero = seen.zero_time(service);
        worst = worst.max(zero);
        println!(
            "{service:<26} {:>6} {:>9} {:>10.3} s",
            counts.len(),
            seen.min_after_first(service)
                .map_or("-".into(), |n| n.to_string()),
            zero.as_secs_f64()
        );
    }
    println!(
        "longest time any Service had no ready endpoint: {:.3} s (seed 004's anchor: 10 s)",
        worst.as_secs_f64()
    );
    Ok(())
}
