//! Upgrade benchmark on the local control plane: the whole default cloud, with per-service
//! readiness delays (kwok stage delays set through `kstack_pod_labels`), deployed, then
//! upgraded to a new release tag while a watch of the namespace's EndpointSlices records what
//! clients of each Service saw. Prints the upgrade's wall time, the migration Jobs it ran, and
//! per Service the fewest ready endpoints and the time with none. `KSTACK_BENCH_REPLICAS=3`
//! runs MariaDB, RabbitMQ and memcached with that many replicas.
//!
//! ```sh
//! KSTACK_E2E_KUBECONFIG=$(KSTACK_DEV_DIR=/tmp/dev-bench KSTACK_DEV_PORT_BASE=17440 bash hack/devcluster.sh up) \
//!   KSTACK_BENCH_REPLICAS=3 cargo run -p kstack-e2e --example upgrade_bench
//! ```
use kstack_e2e::TempNamespace;
use kstack_e2e::bench::{config, deploy, kubeconfig};
use kstack_e2e::endpoints::watch_endpoints;
use kstack_engine::StepKind;
use kstack_kube::KubeCluster;
use std::time::Duration;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let kubeconfig = kubeconfig()?;
    let admin = kstack_e2e::client().await?;
    let ns = TempNamespace::new(&admin, "upgrade-bench").await?;
    let client = kstack_kube::client(Some(&kubeconfig)).await?;
    let cluster = KubeCluster::new(client);

    let replicas: u32 = match std::env::var("KSTACK_BENCH_REPLICAS") {
        Ok(n) => n.parse()?,
        Err(_) => 1,
    };
    let cloud = |release: &str| -> anyhow::Result<kstack_config::Config> {
        let mut c = config(&ns.name, &[("openstack_release", release)])?;
        for infra in ["mariadb", "rabbitmq", "memcached"] {
            c.globals.replicas.insert(infra.to_owned(), replicas);
        }
        Ok(c)
    };
    println!("mariadb, rabbitmq and memcached: {replicas} replicas each");
    let (_, _, install) = deploy(&cluster, &cloud("2024.2")?, false).await?;
    println!(
        "install of the default cloud: {:.1} s",
        install.as_secs_f64()
    );

    let watch = watch_endpoints(&ns.name).await?;
    let (plan, _, upgrade) = deploy(&cluster, &cloud("2025.1")?, false).await?;
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
                    [kstack_model::labels::PHASE_LABEL]
                    == phase
            })
            .count()
    };
    println!(
        "upgrade 2024.2 -> 2025.1: {:.1} s, {upgraded} services upgraded, {} expand and {} contract migration Jobs",
        upgrade.as_secs_f64(),
        phase_jobs("expand"),
        phase_jobs("contract"),
    );
    println!(
        "{:<26} {:>6} {:>9} {:>12}",
        "service", "events", "min ready", "time at zero"
    );
    let mut worst = Duration::ZERO;
    // The StatefulSets' headless `-peers` Services publish pods that are not ready (for the
    // peers to find each other); clients use the others.
    for (service, counts) in seen.counts.iter().filter(|(s, _)| !s.ends_with("-peers")) {
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
