//! Helpers for end-to-end tests against the real local control plane.
//!
//! Tests need `KSTACK_E2E_KUBECONFIG` (set by `.ci/run` to the kubeconfig `kstack dev up`
//! printed). Without it they fail with a message saying so: a skipped end-to-end test must
//! never look like a passed one.
use std::time::Duration;

pub mod bench;
pub mod cloud;
pub mod endpoints;
pub mod logscan;

use anyhow::Context;
use kstack_k8s::api::core::v1::{Namespace, Node, Pod};
use kstack_model::labels::HOSTNAME_LABEL;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, Config};
use serde_json::json;

/// A script of the checkout's `hack/` folder. The checkout is the one `cargo test` runs in (its
/// `CARGO_MANIFEST_DIR` at run time), not the one the test binary was compiled in: cargo reuses
/// a shared target directory's binaries across checkouts at other paths, and a path fixed at
/// compile time would name a checkout that may be gone.
pub fn hack_script(name: &str) -> std::path::PathBuf {
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    crate_dir.join("../../hack").join(name)
}

/// A client for the cluster named by `KSTACK_E2E_KUBECONFIG`.
pub async fn client() -> anyhow::Result<Client> {
    let path = std::env::var("KSTACK_E2E_KUBECONFIG").context(
        "KSTACK_E2E_KUBECONFIG is not set: start the local control plane with `kstack dev up` \
         and export KSTACK_E2E_KUBECONFIG=$(kstack dev kubeconfig)",
    )?;
    let kubeconfig = Kubeconfig::read_from(&path).with_context(|| format!("reading {path}"))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// A namespace that exists for one test and is deleted when dropped.
pub struct TempNamespace {
    pub name: String,
}

impl TempNamespace {
    pub async fn new(client: &Client, prefix: &str) -> anyhow::Result<Self> {
        let api: Api<Namespace> = Api::all(client.clone());
        let mut ns = Namespace::default();
        ns.metadata.generate_name = Some(format!("{prefix}-"));
        let created = api.create(&PostParams::default(), &ns).await?;
        Ok(Self {
            name: created.metadata.name.context("namespace without name")?,
        })
    }
}

impl Drop for TempNamespace {
    fn drop(&mut self) {
        // The test's runtime is ending (a task spawned on it would never run), and its client
        // belongs to it: the delete goes out from a thread with a runtime and a client of its
        // own, and the drop waits for it. Best effort: a failed delete leaves the namespace.
        let name = self.name.clone();
        let deleted = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let api: Api<Namespace> = Api::all(client().await.ok()?);
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Some(()),
                    // Already gone (a test deleted it itself).
                    Err(kube::Error::Api(e)) if e.code == 404 => Some(()),
                    Err(_) => None,
                }
            })
        })
        .join();
        if !matches!(deleted, Ok(Some(_))) {
            eprintln!("warning: namespace {} was not deleted", self.name);
        }
    }
}

/// How long a test waits for a condition before failing.
pub const WAIT: Duration = Duration::from_secs(60);

/// Creates (or updates) a kwok node `name` with the label `untouched=yes` (which kstack must
/// leave alone) and waits until kwok reports it Ready.
pub async fn make_node(api: &Api<Node>, name: &str) -> anyhow::Result<()> {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {HOSTNAME_LABEL: name, "type": "kwok", "untouched": "yes"}},
        "spec": {"providerID": format!("kwok://{name}")},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}, "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}}
    }))?;
    api.patch(
        name,
        &PatchParams::apply("kstack-e2e"),
        &Patch::Apply(&node),
    )
    .await?;
    let ready = |n: Option<&Node>| {
        n.and_then(|n| n.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    tokio::time::timeout(WAIT, await_condition(api.clone(), name, ready))
        .await
        .context("node never became Ready")??;
    Ok(())
}

/// Creates pod `name` bound to `node` (no scheduler involved) and waits until it runs.
pub async fn pod_on(pods: &Api<Pod>, name: &str, node: &str) -> anyhow::Result<Pod> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "quay.io/openstack.kolla/nova-compute:2025.1-rocky-9"}]}
    }))?;
    let created = pods.create(&PostParams::default(), &pod).await?;
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), name, conditions::is_pod_running()),
    )
    .await
    .context("pod never ran")??;
    Ok(created)
}
