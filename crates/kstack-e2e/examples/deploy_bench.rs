//! Deploy benchmark on the local control plane: the whole default cloud with per-service
//! readiness delays (kwok stage delays set through `kstack_pod_labels`), deployed in parallel
//! and with `--serial`, each into a fresh namespace. Prints the wall time against the step
//! graph's critical path (the lower bound for these delays), parallel against serial, and the
//! API requests per deployed object.
//!
//! ```sh
//! KSTACK_E2E_KUBECONFIG=$(KSTACK_DEV_DIR=/tmp/dev-bench KSTACK_DEV_PORT_BASE=17440 bash hack/devcluster.sh up) \
//!   cargo run -p kstack-e2e --example deploy_bench [-- --skip-serial]
//! ```
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use kstack_config::Config;
use kstack_e2e::TempNamespace;
use kstack_engine::{Limits, Options, StepKind};
use kstack_kube::KubeCluster;
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::kubernetes;
use serde_json::json;

/// Readiness delay of a service's pods: 3 to 6 s, fixed per service so runs compare.
fn ready_delay(service: &str) -> Duration {
    let n: u32 = service.bytes().map(u32::from).sum();
    Duration::from_secs(3 + u64::from(n % 4))
}

/// Completion delay of a bootstrap Job's pod (after it became ready).
const COMPLETE_DELAY: Duration = Duration::from_secs(2);

struct Run {
    wall: Duration,
    objects: usize,
    requests: kstack_kube::RequestCounts,
    critical: Duration,
    chain: Vec<String>,
    waits: usize,
    sum_of_waits: Duration,
}

async fn run(serial: bool) -> anyhow::Result<Run> {
    let kubeconfig = std::env::var("KSTACK_E2E_KUBECONFIG")
        .context("set KSTACK_E2E_KUBECONFIG to the kubeconfig `kstack dev up` printed")?;
    let admin = kstack_e2e::client().await?;
    let ns = TempNamespace::new(&admin, if serial { "bench-serial" } else { "bench" }).await?;
    let catalog = Catalog::builtin()?;
    let mut labels = serde_json::Map::new();
    for name in catalog.services.keys() {
        labels.insert(
            name.clone(),
            json!({
                "kstack.io/dev-ready-delay": format!("{}s", ready_delay(name).as_secs()),
                "kstack.io/dev-complete-delay": format!("{}s", COMPLETE_DELAY.as_secs()),
            }),
        );
    }
    let vars = json!({ "kubernetes_namespace": ns.name, "kstack_pod_labels": labels });
    let vars: BTreeMap<String, serde_json::Value> = vars
        .as_object()
        .context("object")?
        .clone()
        .into_iter()
        .collect();
    let globals = Globals::from_vars(&vars).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let config = Config::from_parts(
        globals,
        kstack_config::testing::passwords(1),
        Default::default(),
        catalog,
    );
    let rendered = kubernetes::render(&config)?;

    let (client, counter) = kstack_kube::counted_client(Some(&kubeconfig)).await?;
    let cluster = KubeCluster::new(client);
    let start = Instant::now();
    let cluster_scoped = vec![kstack_engine::ObjectRef::new("Namespace", None, &ns.name)];
    let observed = kstack_engine::observe(&cluster, &ns.name, &cluster_scoped).await?;
    let plan = kstack_engine::plan(&rendered, &config.catalog, &observed, &Limits::default())?;
    let options = Options {
        serial,
        now: "bench".into(),
        no_rollback: false,
    };
    let report = kstack_engine::deploy(
        &cluster,
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

    // The lower bound: the longest chain through the step graph where a Job takes its pod's
    // readiness plus completion delay and a health wait its pods' readiness delay.
    let weight = |s: &kstack_engine::Step| match s.kind {
        StepKind::Job { .. } => ready_delay(s.service.as_deref().unwrap_or("")) + COMPLETE_DELAY,
        StepKind::Healthy { .. } => ready_delay(s.service.as_deref().unwrap_or("")),
        _ => Duration::ZERO,
    };
    let mut finish = vec![(Duration::ZERO, None); plan.steps.len()];
    for s in &plan.steps {
        let (start, prev) = s
            .deps
            .iter()
            .map(|d| (finish[*d].0, Some(*d)))
            .max()
            .unwrap_or((Duration::ZERO, None));
        finish[s.id] = (start + weight(s), prev);
    }
    let (mut last, critical) = finish
        .iter()
        .enumerate()
        .map(|(i, (f, _))| (i, *f))
        .max_by_key(|(_, f)| *f)
        .unwrap_or((0, Duration::ZERO));
    let mut chain = vec![];
    loop {
        if weight(&plan.steps[last]) > Duration::ZERO {
            chain.push(plan.steps[last].name());
        }
        match finish[last].1 {
            Some(p) => last = p,
            None => break,
        }
    }
    chain.reverse();
    let waits: Vec<Duration> = plan
        .steps
        .iter()
        .map(weight)
        .filter(|w| !w.is_zero())
        .collect();
    // Host-network pods hold node ports: the next run needs this cloud gone first.
    let namespaces: kube::Api<kstack_k8s::api::core::v1::Namespace> = kube::Api::all(admin);
    let uid = namespaces
        .get(&ns.name)
        .await?
        .metadata
        .uid
        .unwrap_or_default();
    namespaces
        .delete(&ns.name, &kube::api::DeleteParams::default())
        .await?;
    kube::runtime::wait::await_condition(
        namespaces,
        &ns.name,
        kube::runtime::wait::conditions::is_deleted(&uid),
    )
    .await?;
    Ok(Run {
        wall,
        objects: plan.objects.len(),
        requests: counter.counts(),
        critical,
        chain,
        waits: waits.len(),
        sum_of_waits: waits.iter().sum(),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let skip_serial = std::env::args().any(|a| a == "--skip-serial");
    let p = run(false).await?;
    println!(
        "default cloud: {} objects, {} Job/health waits",
        p.objects, p.waits
    );
    println!(
        "critical path (lower bound): {:.1} s: {}",
        p.critical.as_secs_f64(),
        p.chain.join(" -> ")
    );
    println!(
        "parallel deploy: {:.1} s, wall / critical path = {:.3}",
        p.wall.as_secs_f64(),
        p.wall.as_secs_f64() / p.critical.as_secs_f64()
    );
    let per = |n: u64| n as f64 / p.objects as f64;
    println!(
        "API requests: {} in all, {:.2} per object (reads {}, writes {}, watches {}; {:.2} writes per object)",
        p.requests.total(),
        per(p.requests.total()),
        p.requests.reads,
        p.requests.writes,
        p.requests.watches,
        per(p.requests.writes)
    );
    if !skip_serial {
        let s = run(true).await?;
        println!(
            "serial deploy: {:.1} s (sum of the waits {:.1} s), {:.2}x the parallel deploy",
            s.wall.as_secs_f64(),
            s.sum_of_waits.as_secs_f64(),
            s.wall.as_secs_f64() / p.wall.as_secs_f64()
        );
    }
    Ok(())
}
