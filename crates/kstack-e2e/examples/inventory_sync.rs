//! Times the inventory's label sync to real Kubernetes nodes: N hosts, each with labels, pushed
//! to N kwok nodes by one audit pass (the same path a committed change and the periodic audit
//! take), then checks on the API server that every node carries its labels.
//!
//! ```sh
//! KSTACK_DEV_DIR=/tmp/k1000 kstack dev up --nodes compute=1000
//! KSTACK_E2E_KUBECONFIG=/tmp/k1000/kubeconfig cargo run --release -p kstack-e2e --example inventory_sync -- 1000
//! ```
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use kstack_inventory::model::HostCreate;
use kstack_k8s::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let client = kstack_e2e::client().await?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("inventory.db");
    let sync = Arc::new(kstack_kube::nodes::Nodes::new(client.clone()));
    let state =
        kstack_inventory::state(db.to_str().context("path")?, Default::default(), sync).await?;
    for i in 1..=n {
        let new: HostCreate = serde_json::from_value(serde_json::json!({
            "hostname": format!("compute-{i}"), "personality": "compute", "administrative": "unlocked"
        }))?;
        let host = state.store.create_host(&new).await?;
        let labels = BTreeMap::from([
            ("rack".to_string(), format!("r{}", i % 40)),
            ("kstack.io/bench".to_string(), "synced".to_string()),
        ]);
        state.store.assign_labels(&host.uuid, &labels, true).await?;
    }
    let start = Instant::now();
    let synced = kstack_inventory::audit_once(&state).await?;
    let elapsed = start.elapsed();
    let nodes: Api<Node> = Api::all(client);
    let labelled = nodes
        .list(&ListParams::default().labels("kstack.io/bench=synced"))
        .await?
        .items
        .len();
    println!(
        "inventory sync of {synced} hosts to {labelled} Kubernetes nodes (labels + lock state): {:.2} s, {:.1} ms/host",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / synced.max(1) as f64
    );
    anyhow::ensure!(
        labelled == n,
        "only {labelled} of {n} nodes carry the synced label"
    );
    Ok(())
}
