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
use std::time::Duration;

use kstack_e2e::TempNamespace;
use kstack_e2e::bench::{COMPLETE_DELAY, config, deploy, kubeconfig, ready_delay};
use kstack_engine::StepKind;
use kstack_kube::KubeCluster;

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
    let kubeconfig = kubeconfig()?;
    let admin = kstack_e2e::client().await?;
    let ns = TempNamespace::new(&admin, if serial { "bench-serial" } else { "bench" }).await?;
    let config = config(&ns.name, &[])?;
    let (client, counter) = kstack_kube::counted_client(Some(&kubeconfig)).await?;
    let cluster = KubeCluster::new(client);
    let (plan, _, wall) = deploy(&cluster, &config, serial).await?;

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
