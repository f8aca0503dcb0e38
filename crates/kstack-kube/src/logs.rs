//! The last lines each container of a set of pods wrote, for diagnosing a service from outside
//! (`kstack verify` shows them for the service behind a failing API call).
use kstack_k8s::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};

use crate::Error;

/// The tail of one container's log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodLog {
    pub pod: String,
    pub container: String,
    /// The last lines, or why they could not be read (`(no log: ...)`), e.g. a container that
    /// has not started.
    pub text: String,
}

/// The last `tail_lines` lines of every container (init containers included) of the pods in
/// `namespace` matching the label `selector`, by pod name then container order. A container
/// whose log cannot be read gets a note instead of failing the whole call.
pub async fn pod_logs(
    client: &Client,
    namespace: &str,
    selector: &str,
    tail_lines: i64,
) -> Result<Vec<PodLog>, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut pods = api
        .list(&ListParams::default().labels(selector))
        .await?
        .items;
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out = Vec::new();
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let containers = pod.spec.iter().flat_map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
                .map(|c| c.name.clone())
        });
        for container in containers {
            let params = LogParams {
                container: Some(container.clone()),
                tail_lines: Some(tail_lines),
                ..LogParams::default()
            };
            let text = match api.logs(&name, &params).await {
                Ok(t) => t,
                Err(e) => format!("(no log: {e})"),
            };
            out.push(PodLog {
                pod: name.clone(),
                container,
                text,
            });
        }
    }
    Ok(out)
}
