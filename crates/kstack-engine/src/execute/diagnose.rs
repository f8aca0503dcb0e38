//! What the pods of a failed step say, for its report: phase, the conditions that are not
//! true, each container's state (an image the node cannot get named with how to provide it)
//! and the pods' last events.
use serde_json::Value;

use crate::cluster::Cluster;

/// What one pod says, for a failure report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodReport {
    pub name: String,
    pub phase: String,
    /// Conditions that are not `True`, as `Ready=False (ContainersNotReady: message)`.
    pub conditions: Vec<String>,
    /// Per container: `name: waiting CrashLoopBackOff (message), restarts 5`.
    pub containers: Vec<String>,
    /// The last events about the pod, `Reason: message`.
    pub events: Vec<String>,
}

/// What the pods matching `selector` say: phase, failing conditions, container states and
/// their last events. Errors reading them become part of the report rather than hiding the
/// failure being reported.
pub async fn diagnose(cluster: &dyn Cluster, namespace: &str, selector: &str) -> Vec<PodReport> {
    let pods = match cluster.pods(namespace, selector).await {
        Ok(p) => p,
        Err(e) => {
            return vec![PodReport {
                name: "?".into(),
                phase: format!("could not list pods: {e}"),
                conditions: vec![],
                containers: vec![],
                events: vec![],
            }];
        }
    };
    let mut out = Vec::new();
    for p in pods.iter().take(5) {
        let name = p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let status = &p["status"];
        let conditions = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["status"] != "True")
            .map(|c| {
                let mut s = format!(
                    "{}={}",
                    c["type"].as_str().unwrap_or("?"),
                    c["status"].as_str().unwrap_or("?")
                );
                if let Some(r) = c["reason"].as_str() {
                    s.push_str(&format!(" ({r}"));
                    if let Some(m) = c["message"].as_str() {
                        s.push_str(&format!(": {m}"));
                    }
                    s.push(')');
                }
                s
            })
            .collect();
        let containers = status["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .map(container_line)
            .collect();
        let events = match cluster.events(namespace, &name).await {
            Ok(ev) => ev
                .iter()
                .rev()
                .take(3)
                .rev()
                .map(|e| {
                    format!(
                        "{}: {}",
                        e["reason"].as_str().unwrap_or("?"),
                        e["message"].as_str().unwrap_or_default()
                    )
                })
                .collect(),
            Err(e) => vec![format!("could not read events: {e}")],
        };
        out.push(PodReport {
            name,
            phase: status["phase"].as_str().unwrap_or("Unknown").to_owned(),
            conditions,
            containers,
            events,
        });
    }
    out
}

/// Waiting reasons of a container whose image the node does not have and cannot get.
const IMAGE_MISSING: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
];

fn container_line(c: &Value) -> String {
    let name = c["name"].as_str().unwrap_or("?");
    let state = &c["state"];
    let mut s = if let Some(w) = state.get("waiting") {
        let reason = w["reason"].as_str().unwrap_or("?");
        let mut line = format!("{name}: waiting {reason}")
            + &w["message"]
                .as_str()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
        if IMAGE_MISSING.contains(&reason) {
            line.push_str(&format!(
                "; the image {} is neither on the node nor pullable: on the dev cluster build \
                 and import it (`kstack dev images`, then `kstack dev import DIR`), elsewhere \
                 push it to the registry globals.yml names (docker_registry, docker_namespace)",
                c["image"].as_str().unwrap_or("?")
            ));
        }
        line
    } else if let Some(t) = state.get("terminated") {
        format!(
            "{name}: terminated {} (exit code {})",
            t["reason"].as_str().unwrap_or("?"),
            t["exitCode"]
        )
    } else if state.get("running").is_some() {
        format!(
            "{name}: running, {}",
            if c["ready"] == Value::Bool(true) {
                "ready"
            } else {
                "not ready"
            }
        )
    } else {
        format!("{name}: no state")
    };
    if let Some(n) = c["restartCount"].as_u64().filter(|n| *n > 0) {
        s.push_str(&format!(", restarts {n}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_missing_image_is_named_with_the_command_that_builds_it() {
        let c = json!({
            "name": "keystone",
            "image": "kstack.local/kolla/keystone:2025.1-debian-bookworm",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
        });
        let line = super::container_line(&c);
        assert!(
            line.contains("kstack.local/kolla/keystone:2025.1-debian-bookworm")
                && line.contains("kstack dev images"),
            "{line}"
        );
        let running = json!({"name": "keystone", "image": "x", "state": {"waiting": {"reason": "ContainerCreating"}}});
        assert!(!super::container_line(&running).contains("kstack dev images"));
    }
}
