//! The inventory service end to end: `kstack_inventory::serve` on a real socket, driven over
//! HTTPS (its TLS mode, with a throwaway CA), with the Kubernetes node sync of kstack-kube
//! against the local control plane.
//!
//! What the user sees: labels assigned over REST appear on the Node and removed ones go; a
//! role label needs the host locked; lock puts the NoExecute taint on the Node and the real
//! controller manager evicts its pods; unlock removes it; deleting the host deletes the Node
//! and its pods; a node that joins later gets its host's labels and lock state; the periodic
//! audit puts back a label someone removed from the Node; a host registered for a node that
//! runs a pod leaves the pod alone, and the host shows its node as synced; the kubelet's own
//! labels are never touched.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use kstack_e2e::{TempNamespace, WAIT, client, make_node, pod_on};
use kstack_inventory::testing::TestPki;
use kstack_inventory::{Role, ServeConfig, Tokens};
use kstack_k8s::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use serde_json::{Value, json};

const TOKEN: &str = "e2e-admin-token-0123456789abcdef0123";

/// A running inventory service; stopped when dropped.
struct Service {
    base: String,
    http: reqwest::Client,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Service {
    /// Starts the service on a free port with a fresh SQLite database. With `follow_joins`,
    /// node joins are watched as `kstack inventory serve` does.
    async fn start(client: &Client, audit: Duration, follow_joins: bool) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut tasks = Vec::new();
        let joins = if follow_joins {
            let (tx, rx) = tokio::sync::mpsc::channel(64);
            tasks.push(tokio::spawn(kstack_kube::nodes::watch_joins(
                client.clone(),
                tx,
            )));
            Some(rx)
        } else {
            None
        };
        let pki = TestPki::new(&dir.path().join("pki"), "e2e");
        let config = ServeConfig {
            listen: ([127, 0, 0, 1], port).into(),
            database_url: dir.path().join("inventory.db").display().to_string(),
            tokens: Tokens::new(BTreeMap::from([(TOKEN.to_string(), Role::Admin)]))?,
            keystone: None,
            tls: Some(pki.tls_config()),
            insecure_http: false,
            audit_interval: audit,
            sync: Arc::new(kstack_kube::nodes::Nodes::new(client.clone())),
            joins,
            cloud: Arc::new(kstack_ports::NoCloudStatus),
            max_connections: None,
            compute: None,
        };
        tasks.push(tokio::spawn(async move {
            if let Err(e) = kstack_inventory::serve(config).await {
                eprintln!("inventory service stopped: {e}");
            }
        }));
        let http = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(&pki.ca_pem())?)
            .build()?;
        let service = Service {
            base: format!("https://127.0.0.1:{port}"),
            http,
            tasks,
            _dir: dir,
        };
        // Our own server starting on a port we chose: nothing to watch, so try until it answers.
        for _ in 0..200 {
            if service
                .http
                .get(format!("{}/openapi.json", service.base))
                .send()
                .await
                .is_ok()
            {
                return Ok(service);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        anyhow::bail!("the inventory service did not start")
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method.parse()?, format!("{}{path}", self.base))
            .bearer_auth(TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).with_context(|| format!("non-JSON answer {text:?}"))?
        };
        Ok((status, value))
    }

    /// `call` that must answer `want`; returns the body.
    async fn expect(
        &self,
        want: u16,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let (status, v) = self.call(method, path, body).await?;
        ensure!(
            status == want,
            "{method} {path}: {status} {v}, wanted {want}"
        );
        Ok(v)
    }

    async fn add_host(&self, name: &str, administrative: &str) -> anyhow::Result<String> {
        let v = self
            .expect(
                201,
                "POST",
                "/v1/ihosts",
                Some(json!({"hostname": name, "personality": "compute", "administrative": administrative})),
            )
            .await?;
        Ok(v["uuid"].as_str().context("host without uuid")?.to_string())
    }
}

fn labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

fn lock_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter().any(|t| {
                t.key == "services"
                    && t.value.as_deref() == Some("disabled")
                    && t.effect == "NoExecute"
            })
        })
}

fn unschedulable(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_over_rest_reach_the_node_and_role_labels_need_a_lock() -> anyhow::Result<()> {
    let client = client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    make_node(&nodes, "svc-labels").await?;
    // The audit cannot help within this test: whatever reaches the node is the write's own sync.
    let svc = Service::start(&client, HOUR, false).await?;
    let host = svc.add_host("svc-labels", "unlocked").await?;

    let v = svc
        .expect(
            200,
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"rack": "r1", "example.com/sriov": "enabled"})),
        )
        .await?;
    let rack = v["labels"]
        .as_array()
        .context("labels")?
        .iter()
        .find(|l| l["label_key"] == "rack")
        .and_then(|l| l["uuid"].as_str())
        .context("no rack label in the answer")?
        .to_string();
    let got = labels(&nodes.get("svc-labels").await?);
    assert_eq!(got.get("rack").map(String::as_str), Some("r1"), "{got:?}");
    assert_eq!(
        got.get("example.com/sriov").map(String::as_str),
        Some("enabled"),
        "{got:?}"
    );

    svc.expect(204, "DELETE", &format!("/v1/labels/{rack}"), None)
        .await?;
    let got = labels(&nodes.get("svc-labels").await?);
    assert!(
        !got.contains_key("rack"),
        "a removed label stayed on the node: {got:?}"
    );
    assert_eq!(
        got.get("example.com/sriov").map(String::as_str),
        Some("enabled")
    );
    assert_eq!(
        got.get("untouched").map(String::as_str),
        Some("yes"),
        "a label kstack does not own was changed"
    );

    // A label that moves OpenStack roles: refused while the host is unlocked, node unchanged.
    let (status, v) = svc
        .call(
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"kstack.io/role-compute": "true"})),
        )
        .await?;
    assert_eq!(status, 409, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or_default()
            .contains("lock the host first"),
        "{v}"
    );
    assert!(!labels(&nodes.get("svc-labels").await?).contains_key("kstack.io/role-compute"));

    svc.expect(200, "POST", &format!("/v1/ihosts/{host}/lock"), None)
        .await?;
    svc.expect(
        200,
        "POST",
        &format!("/v1/labels/{host}"),
        Some(json!({"kstack.io/role-compute": "true"})),
    )
    .await?;
    let node = nodes.get("svc-labels").await?;
    assert_eq!(
        labels(&node)
            .get("kstack.io/role-compute")
            .map(String::as_str),
        Some("true")
    );
    assert!(lock_taint(&node), "a locked host's node has no lock taint");

    svc.expect(204, "DELETE", &format!("/v1/ihosts/{host}"), None)
        .await?;
    ensure!(
        nodes.get_opt("svc-labels").await?.is_none(),
        "node outlived its host"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_evicts_pods_unlock_admits_them_delete_removes_node_and_pods() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-svc-lock").await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    make_node(&nodes, "svc-lock").await?;
    let svc = Service::start(&client, HOUR, false).await?;
    let host = svc.add_host("svc-lock", "unlocked").await?;
    let node = nodes.get("svc-lock").await?;
    assert!(!lock_taint(&node) && !unschedulable(&node));

    let pod = pod_on(&pods, "before-lock", "svc-lock").await?;
    let v = svc
        .expect(200, "POST", &format!("/v1/ihosts/{host}/lock"), None)
        .await?;
    assert_eq!(v["administrative"], "locked");
    let node = nodes.get("svc-lock").await?;
    assert!(lock_taint(&node), "lock did not taint the node");
    assert!(unschedulable(&node), "lock did not cordon the node");
    // The taint-eviction controller of the real kube-controller-manager removes the pod.
    let uid = pod.metadata.uid.unwrap_or_default();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "before-lock", conditions::is_deleted(&uid)),
    )
    .await
    .context("locking the host did not evict its pod")??;

    let v = svc
        .expect(200, "POST", &format!("/v1/ihosts/{host}/unlock"), None)
        .await?;
    assert_eq!(v["administrative"], "unlocked");
    let node = nodes.get("svc-lock").await?;
    assert!(
        !lock_taint(&node) && !unschedulable(&node),
        "unlock left the node locked"
    );
    let bound = pod_on(&pods, "after-unlock", "svc-lock").await?;

    svc.expect(204, "DELETE", &format!("/v1/ihosts/{host}"), None)
        .await?;
    ensure!(
        nodes.get_opt("svc-lock").await?.is_none(),
        "node outlived its host"
    );
    let uid = bound.metadata.uid.unwrap_or_default();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "after-unlock", conditions::is_deleted(&uid)),
    )
    .await
    .context("a pod bound to the deleted host's node stayed")??;
    svc.expect(404, "GET", &format!("/v1/ihosts/{host}"), None)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_joins_later_gets_its_labels_and_lock() -> anyhow::Result<()> {
    let client = client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    ensure!(
        nodes.get_opt("svc-late").await?.is_none(),
        "svc-late exists already"
    );
    // The audit runs once at start (no node yet) and then not within the test: only the node
    // watch can bring the labels.
    let svc = Service::start(&client, HOUR, true).await?;
    let host = svc.add_host("svc-late", "locked").await?;
    svc.expect(
        200,
        "POST",
        &format!("/v1/labels/{host}"),
        Some(json!({"zone": "late", "kstack.io/role-compute": "true"})),
    )
    .await?;
    let v = svc
        .expect(200, "GET", &format!("/v1/ihosts/{host}"), None)
        .await?;
    assert_eq!(v["sync_state"], "pending", "no node yet: {v}");
    assert!(
        v["sync_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("no Kubernetes node named \"svc-late\" yet"),
        "{v}"
    );

    make_node(&nodes, "svc-late").await?;
    let synced = |n: Option<&Node>| {
        n.is_some_and(|n| {
            let l = labels(n);
            l.get("zone").map(String::as_str) == Some("late")
                && l.get("kstack.io/role-compute").map(String::as_str) == Some("true")
                && lock_taint(n)
        })
    };
    tokio::time::timeout(WAIT, await_condition(nodes.clone(), "svc-late", synced))
        .await
        .context("the joined node never got its host's labels and lock taint")??;

    svc.expect(204, "DELETE", &format!("/v1/ihosts/{host}"), None)
        .await?;
    ensure!(
        nodes.get_opt("svc-late").await?.is_none(),
        "node outlived its host"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_repairs_a_label_removed_by_hand() -> anyhow::Result<()> {
    let client = client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    make_node(&nodes, "svc-drift").await?;
    let svc = Service::start(&client, Duration::from_secs(1), false).await?;
    let host = svc.add_host("svc-drift", "unlocked").await?;
    svc.expect(
        200,
        "POST",
        &format!("/v1/labels/{host}"),
        Some(json!({"zone": "drift"})),
    )
    .await?;
    ensure!(
        labels(&nodes.get("svc-drift").await?)
            .get("zone")
            .map(String::as_str)
            == Some("drift")
    );

    // Someone removes the label by hand: the audit must put it back.
    nodes
        .patch(
            "svc-drift",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"zone": null}}})),
        )
        .await?;
    let repaired = |n: Option<&Node>| {
        n.is_some_and(|n| labels(n).get("zone").map(String::as_str) == Some("drift"))
    };
    tokio::time::timeout(WAIT, await_condition(nodes.clone(), "svc-drift", repaired))
        .await
        .context("the audit did not put the removed label back")??;

    svc.expect(204, "DELETE", &format!("/v1/ihosts/{host}"), None)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_a_running_node_keeps_its_pods_and_the_kubelets_labels() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = TempNamespace::new(&client, "e2e-svc-running").await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    make_node(&nodes, "svc-running").await?;
    let pod = pod_on(&pods, "already-running", "svc-running").await?;
    let svc = Service::start(&client, HOUR, false).await?;

    // No administrative state in the request: the host is unlocked and its node left running.
    let v = svc
        .expect(
            201,
            "POST",
            "/v1/ihosts",
            Some(json!({"hostname": "svc-running", "personality": "compute"})),
        )
        .await?;
    assert_eq!(v["administrative"], "unlocked", "{v}");
    assert_eq!(v["sync_state"], "synced", "{v}");
    let host = v["uuid"].as_str().context("uuid")?.to_string();
    let node = nodes.get("svc-running").await?;
    assert!(
        !lock_taint(&node) && !unschedulable(&node),
        "registering the host locked its node"
    );
    let now = pods.get("already-running").await?;
    assert_eq!(now.metadata.uid, pod.metadata.uid);
    assert!(
        now.metadata.deletion_timestamp.is_none(),
        "registering the host evicted the pod"
    );

    // The kubelet's labels are not the inventory's to set or remove.
    for key in ["kubernetes.io/hostname", "node-role.kubernetes.io/worker"] {
        let (status, v) = svc
            .call(
                "POST",
                &format!("/v1/labels/{host}"),
                Some(json!({ key: "changed" })),
            )
            .await?;
        assert_eq!(status, 400, "{key}: {v}");
    }
    svc.expect(
        200,
        "POST",
        &format!("/v1/labels/{host}"),
        Some(json!({"rack": "r9"})),
    )
    .await?;
    let got = labels(&nodes.get("svc-running").await?);
    assert_eq!(
        got.get("kubernetes.io/hostname").map(String::as_str),
        Some("svc-running"),
        "{got:?}"
    );
    assert_eq!(got.get("rack").map(String::as_str), Some("r9"), "{got:?}");

    svc.expect(204, "DELETE", &format!("/v1/ihosts/{host}"), None)
        .await?;
    Ok(())
}
