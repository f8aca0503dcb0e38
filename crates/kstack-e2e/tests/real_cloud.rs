//! The cloud on the dev cluster's real node: real containers of the images `hack/images.sh`
//! built to Kolla's contract, every bootstrap Job doing its real work and every probe running
//! the image's own check, then `kstack verify` (a user's scenario against the deployed APIs)
//! passes. Needs a cluster started by `kstack dev up` with its real node and the images
//! imported (hack/test.sh does both).
//!
//! `REAL_CLOUD` lists what is enabled; what it leaves out is said in docs/REAL-NODE.md.
use anyhow::Context;
use kstack_e2e::client;
use kstack_e2e::cloud::{Cloud, real_node_globals};
use kstack_k8s::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

/// The services of the real-node cloud, on top of the node globals.
const REAL_CLOUD: &str = "enable_openstack_core: \"no\"\nenable_mariadb: \"yes\"\nenable_memcached: \"yes\"\nenable_rabbitmq: \"yes\"\nenable_keystone: \"yes\"\nenable_glance: \"yes\"\nenable_placement: \"yes\"\nenable_heat: \"yes\"\nenable_horizon: \"yes\"\nkstack_timeouts: {default: 900}\n";

#[tokio::test]
async fn the_cloud_runs_in_real_containers_and_passes_verify() -> anyhow::Result<()> {
    let client = client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let real = nodes
        .list(&ListParams::default().labels("kstack.io/real-node=true"))
        .await?;
    anyhow::ensure!(
        real.items.len() == 1,
        "the cluster has no real node (labelled kstack.io/real-node=true): start it with `kstack dev up` (not --real-nodes 0)"
    );
    let node = real.items[0].metadata.name.clone().context("node name")?;

    let cloud = Cloud::new(
        "kstack-real",
        &format!("{}{REAL_CLOUD}", real_node_globals()),
    )
    .await?;
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "deploy failed: {report}\n{stderr}");

    // Every pod of the cloud ran on the real node, in containerd.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &cloud.ns.name);
    let list = pods.list(&ListParams::default()).await?;
    assert!(!list.items.is_empty());
    for p in &list.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let spec = p.spec.as_ref().context("pod spec")?;
        assert_eq!(spec.node_name.as_deref(), Some(node.as_str()), "pod {name}");
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        assert!(!statuses.is_empty(), "pod {name} has no container status");
        for c in statuses {
            let id = c.container_id.unwrap_or_default();
            assert!(
                id.starts_with("containerd://"),
                "pod {name} container {}: {id}",
                c.name
            );
        }
    }

    let out = cloud.run(&["verify", "-o", "json"]).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kstack verify failed:\n{stdout}\n{stderr}"
    );
    let verdict: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("verify printed no JSON: {stdout}"))?;
    let steps = verdict["steps"].as_array().context("steps")?;
    let result = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .map(|s| s["result"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    // What the enabled services can show: a token, every endpoint answering, a project and
    // user of their own, an image round trip with the same checksum, a Heat stack created and
    // deleted, Horizon's login form.
    for step in [
        "token",
        "endpoints",
        "project-user",
        "image",
        "stack",
        "horizon",
    ] {
        assert_eq!(result(step), "ok", "step {step}: {verdict}");
    }
    assert_eq!(verdict["passed"], true, "{verdict}");
    Ok(())
}
