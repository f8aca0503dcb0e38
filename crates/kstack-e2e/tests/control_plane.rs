//! The local control plane behaves like a real cluster: scheduling, controllers, kwok stages.
use std::collections::BTreeMap;

use anyhow::Context;
use kstack_e2e::{TempNamespace, WAIT, client};
use kstack_k8s::api::apps::v1::{DaemonSet, Deployment};
use kstack_k8s::api::batch::v1::Job;
use kstack_k8s::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition, conditions};
use kube::{Api, Client};
use serde_json::json;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A pod on the control nodes. `noexecute_taint_evicts_pods` taints a storage node while the
/// other tests run in parallel; their pods must not land there and be evicted mid-test.
fn pod_spec(extra_labels: &[(&str, &str)], app: &str) -> serde_json::Value {
    let mut l = labels(extra_labels);
    l.insert("app".into(), app.into());
    json!({"metadata": {"labels": l}, "spec": {
        "nodeSelector": {"kstack.io/role-control": "true"},
        "containers": [{"name": "c", "image": "quay.io/openstack.kolla/memcached:2025.1-rocky-9"}]}})
}

async fn wait<K>(api: &Api<K>, name: &str, cond: impl Condition<K>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond))
        .await
        .with_context(|| format!("timed out waiting for {name}"))??;
    Ok(())
}

#[tokio::test]
async fn nodes_are_listed_with_role_labels() -> anyhow::Result<()> {
    let client = client().await?;
    let nodes: Api<Node> = Api::all(client);
    let list = nodes
        .list(&ListParams::default().labels("kstack.io/role-compute=true"))
        .await?;
    assert!(
        list.items.len() >= 3,
        "expected at least 3 compute nodes, got {}",
        list.items.len()
    );
    for role in ["control", "network", "storage"] {
        let l = nodes
            .list(&ListParams::default().labels(&format!("kstack.io/role-{role}=true")))
            .await?;
        assert!(
            !l.items.is_empty(),
            "no node carries kstack.io/role-{role}=true"
        );
    }
    Ok(())
}

#[tokio::test]
async fn deployment_rolls_out_to_ready_pods() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-deploy").await?;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": pod_spec(&[], "web")}
    }))?;
    api.create(&PostParams::default(), &d).await?;
    wait(&api, "web", conditions::is_deployment_completed()).await?;
    let pods: Api<Pod> = Api::namespaced(client, &ns.name);
    let ready = pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items
        .iter()
        .filter(|p| is_ready(p))
        .count();
    assert_eq!(ready, 3);
    Ok(())
}

#[tokio::test]
async fn job_completes() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-job").await?;
    let api: Api<Job> = Api::namespaced(client, &ns.name);
    let mut spec = pod_spec(&[("kstack.io/dev-complete-delay", "500ms")], "job");
    spec["spec"]["restartPolicy"] = json!("Never");
    let job: Job = serde_json::from_value(
        json!({"metadata": {"name": "sync"}, "spec": {"backoffLimit": 0, "template": spec}}),
    )?;
    api.create(&PostParams::default(), &job).await?;
    wait(&api, "sync", conditions::is_job_completed()).await?;
    let job = api.get("sync").await?;
    assert_eq!(job.status.and_then(|s| s.succeeded), Some(1));
    Ok(())
}

#[tokio::test]
async fn daemonset_lands_only_on_matching_nodes() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-ds").await?;
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), &ns.name);
    let mut spec = pod_spec(&[], "agent");
    spec["spec"]["nodeSelector"] = json!({"kstack.io/role-compute": "true"});
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": spec}
    }))?;
    api.create(&PostParams::default(), &ds).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let computes = nodes
        .list(&ListParams::default().labels("kstack.io/role-compute=true"))
        .await?
        .items
        .len() as i32;
    let ready = |ds: Option<&DaemonSet>| {
        ds.and_then(|d| d.status.as_ref())
            .is_some_and(|s| s.desired_number_scheduled == computes && s.number_ready == computes)
    };
    wait(&api, "agent", ready).await?;
    let pods: Api<Pod> = Api::namespaced(client, &ns.name);
    for pod in pods
        .list(&ListParams::default().labels("app=agent"))
        .await?
    {
        let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
        assert!(
            node.starts_with("compute-"),
            "daemonset pod landed on {node}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn never_ready_label_keeps_pod_unready() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-never").await?;
    let pods: Api<Pod> = Api::namespaced(client, &ns.name);
    let mut pod: Pod =
        serde_json::from_value(pod_spec(&[("kstack.io/dev-ready", "never")], "stuck"))?;
    pod.metadata.name = Some("stuck".into());
    pods.create(&PostParams::default(), &pod).await?;
    let running = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Running")
    };
    wait(&pods, "stuck", running).await?;
    // Give kwok time to (wrongly) flip it; it must stay unready.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let pod = pods.get("stuck").await?;
    assert!(!is_ready(&pod), "a never-ready pod became Ready");
    Ok(())
}

#[tokio::test]
async fn noexecute_taint_evicts_pods() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-taint").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let nodes: Api<Node> = Api::all(client.clone());
    let node = "storage-1";
    let mut pod: Pod = serde_json::from_value(pod_spec(&[], "victim"))?;
    pod.metadata.name = Some("victim".into());
    pod.spec.as_mut().context("spec")?.node_selector =
        Some(labels(&[("kubernetes.io/hostname", node)]));
    pods.create(&PostParams::default(), &pod).await?;
    wait(&pods, "victim", conditions::is_pod_running()).await?;
    let taint = json!({"spec": {"taints": [{"key": "services", "value": "disabled", "effect": "NoExecute"}]}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&taint))
        .await?;
    let result = wait(
        &pods,
        "victim",
        conditions::is_deleted(&pods.get("victim").await?.metadata.uid.unwrap_or_default()),
    )
    .await;
    untaint(&client, node).await?;
    result.context("the controller manager did not evict the pod from the NoExecute-tainted node")
}

async fn untaint(client: &Client, node: &str) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": null}})),
        )
        .await?;
    Ok(())
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn crash_label_makes_pod_crash_loop() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-crash").await?;
    let pods: Api<Pod> = Api::namespaced(client, &ns.name);
    let mut pod: Pod =
        serde_json::from_value(pod_spec(&[("kstack.io/dev-ready", "crash")], "crashy"))?;
    pod.metadata.name = Some("crashy".into());
    pods.create(&PostParams::default(), &pod).await?;
    let crashing = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
            == Some("CrashLoopBackOff")
    };
    wait(&pods, "crashy", crashing).await?;
    assert!(!is_ready(&pods.get("crashy").await?));
    Ok(())
}

#[tokio::test]
async fn ready_delay_label_delays_readiness() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-delay").await?;
    let pods: Api<Pod> = Api::namespaced(client, &ns.name);
    let mut pod: Pod =
        serde_json::from_value(pod_spec(&[("kstack.io/dev-ready-delay", "3s")], "slow"))?;
    pod.metadata.name = Some("slow".into());
    let start = std::time::Instant::now();
    pods.create(&PostParams::default(), &pod).await?;
    wait(&pods, "slow", conditions::is_pod_running()).await?;
    let elapsed = start.elapsed();
    assert!(
        elapsed >= std::time::Duration::from_millis(2500),
        "pod became ready after {elapsed:?}, before its 3s delay"
    );
    Ok(())
}
