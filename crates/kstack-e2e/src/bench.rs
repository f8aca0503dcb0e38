//! What the deploy and upgrade benchmarks (`examples/`) share: the whole default cloud with
//! per-service readiness delays, and one deploy of it through the engine.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use kstack_config::Config;
use kstack_engine::{Cluster, Limits, Options, Plan, Report};
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_model::labels::{DEV_COMPLETE_DELAY_LABEL, DEV_READY_DELAY_LABEL};
use kstack_render::kubernetes;
use serde_json::json;

/// Readiness delay of a service's pods: 3 to 6 s, fixed per service so runs compare.
pub fn ready_delay(service: &str) -> Duration {
    let n: u32 = service.bytes().map(u32::from).sum();
    Duration::from_secs(3 + u64::from(n % 4))
}

/// Completion delay of a bootstrap Job's pod (after it became ready).
pub const COMPLETE_DELAY: Duration = Duration::from_secs(2);

/// The whole default cloud in namespace `ns`, every pod with its kwok delays (through
/// `kstack_pod_labels`), with `vars` set over the defaults.
pub fn config(ns: &str, vars: &[(&str, &str)]) -> anyhow::Result<Config> {
    let catalog = Catalog::builtin()?;
    let mut labels = serde_json::Map::new();
    for name in catalog.services.keys() {
        labels.insert(
            name.clone(),
            json!({
                DEV_READY_DELAY_LABEL: format!("{}s", ready_delay(name).as_secs()),
                DEV_COMPLETE_DELAY_LABEL: format!("{}s", COMPLETE_DELAY.as_secs()),
            }),
        );
    }
    let mut all: BTreeMap<String, serde_json::Value> = BTreeMap::from([
        ("kubernetes_namespace".into(), json!(ns)),
        (
            "kstack_pod_labels".into(),
            serde_json::Value::Object(labels),
        ),
    ]);
    for (k, v) in vars {
        all.insert((*k).to_owned(), json!(v));
    }
    let globals = Globals::from_vars(&all).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(Config::from_parts(
        globals,
        kstack_config::testing::passwords(1),
        Default::default(),
        catalog,
    ))
}

/// Observes, plans and deploys `config`; fails unless every step succeeded. Returns the plan,
/// the report and the wall time.
pub async fn deploy(
    cluster: &dyn Cluster,
    config: &Config,
    serial: bool,
) -> anyhow::Result<(Plan, Report, Duration)> {
    let ns = &config.globals.kubernetes_namespace;
    let rendered = kubernetes::render(config)?;
    let start = Instant::now();
    let cluster_scoped = vec![kstack_engine::ObjectRef::new("Namespace", None, ns)];
    let observed = kstack_engine::observe(cluster, ns, &cluster_scoped).await?;
    let plan = kstack_engine::plan(&rendered, &config.catalog, &observed, &Limits::default())?;
    let options = Options {
        serial,
        now: "bench".into(),
        no_rollback: false,
        outage: None,
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

/// The kubeconfig of the benchmark's cluster.
pub fn kubeconfig() -> anyhow::Result<String> {
    std::env::var("KSTACK_E2E_KUBECONFIG")
        .context("set KSTACK_E2E_KUBECONFIG to the kubeconfig `kstack dev up` printed")
}
