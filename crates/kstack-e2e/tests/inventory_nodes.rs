//! The inventory's node operations on the real control plane: labels reach the Node, a lock
//! evicts pods through the real taint-eviction controller, delete removes the Node and its pods.
use std::collections::BTreeMap;

use anyhow::Context;
use kstack_e2e::{TempNamespace, WAIT, client, make_node, pod_on};
use kstack_k8s::api::core::v1::{Node, Pod};
use kstack_kube::nodes::Nodes;
use kube::Api;
use kube::runtime::wait::{await_condition, conditions};

#[tokio::test]
async fn labels_reach_the_node_and_removed_ones_go() -> anyhow::Result<()> {
    let client = client().await?;
    let api: Api<Node> = Api::all(client.clone());
    make_node(&api, "inv-labels").await?;
    let nodes = Nodes::new(client.clone());
    let mut labels = BTreeMap::from([
        ("kstack.io/role-compute".to_string(), "true".to_string()),
        ("rack".to_string(), "r1".to_string()),
    ]);
    nodes.apply_labels("inv-labels", &labels, &[]).await?;
    let got = api
        .get("inv-labels")
        .await?
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(got.get("rack").map(String::as_str), Some("r1"));
    assert_eq!(
        got.get("kstack.io/role-compute").map(String::as_str),
        Some("true")
    );

    labels.remove("rack");
    nodes
        .apply_labels(
            "inv-labels",
            &labels,
            &["rack".to_string(), "kstack.io/role-compute".to_string()],
        )
        .await?;
    let got = api
        .get("inv-labels")
        .await?
        .metadata
        .labels
        .unwrap_or_default();
    assert!(
        !got.contains_key("rack"),
        "a removed inventory label stayed on the node"
    );
    assert_eq!(
        got.get("untouched").map(String::as_str),
        Some("yes"),
        "a label kstack does not manage was changed"
    );
    nodes.delete("inv-labels").await?;
    Ok(())
}

#[tokio::test]
async fn lock_evicts_pods_and_unlock_allows_them_back() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-lock").await?;
    let api: Api<Node> = Api::all(client.clone());
    make_node(&api, "inv-lock").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let pod = pod_on(&pods, "workload", "inv-lock").await?;
    let nodes = Nodes::new(client.clone());
    nodes.set_locked("inv-lock", true).await?;
    let node = api.get("inv-lock").await?;
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    assert!(taints.iter().any(|t| t.key == "services"
        && t.value.as_deref() == Some("disabled")
        && t.effect == "NoExecute"));
    let uid = pod.metadata.uid.unwrap_or_default();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "workload", conditions::is_deleted(&uid)),
    )
    .await
    .context("the lock taint did not evict the pod")??;

    nodes.set_locked("inv-lock", false).await?;
    let node = api.get("inv-lock").await?;
    assert!(
        node.spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .iter()
            .all(|t| t.key != "services")
    );
    pod_on(&pods, "workload2", "inv-lock").await?;
    nodes.delete("inv-lock").await?;
    Ok(())
}

#[tokio::test]
async fn delete_removes_the_node_and_its_pods() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-del").await?;
    let api: Api<Node> = Api::all(client.clone());
    make_node(&api, "inv-del").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let pod = pod_on(&pods, "bound", "inv-del").await?;
    Nodes::new(client.clone()).delete("inv-del").await?;
    let uid = pod.metadata.uid.unwrap_or_default();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "bound", conditions::is_deleted(&uid)),
    )
    .await
    .context("pod stayed")??;
    assert!(
        api.get_opt("inv-del").await?.is_none(),
        "the node still exists"
    );
    // Deleting again is not an error.
    Nodes::new(client).delete("inv-del").await?;
    Ok(())
}
