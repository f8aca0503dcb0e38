//! Node operations for the host inventory: labels, lock (a NoExecute taint) and delete.
//!
//! Lock uses the taint StarlingX uses for a locked host, `services=disabled:NoExecute`: the
//! controller manager's taint-eviction controller then evicts every pod that does not tolerate it.
//! [`watch_joins`] reports nodes that join, so the inventory can label them at once.
use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use kstack_k8s::api::core::v1::{Node, Pod, Taint};
use kube::api::{DeleteParams, ListParams, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;

use crate::Error;

/// The taint a locked host's node carries.
pub const LOCK_TAINT_KEY: &str = "services";
pub const LOCK_TAINT_VALUE: &str = "disabled";

/// Node operations on one cluster.
#[derive(Clone)]
pub struct Nodes {
    client: Client,
}

fn not_found(err: kube::Error, node: &str) -> Error {
    match err {
        kube::Error::Api(status) if status.code == 404 => Error::NodeNotFound(node.to_string()),
        other => Error::Api(other),
    }
}

impl Nodes {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn api(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Sets `labels` on the node and removes each key of `managed` that `labels` lacks. Other
    /// labels on the node are left alone, and so is every key under a prefix Kubernetes
    /// reserves (see [`label_patch`]).
    pub async fn apply_labels(
        &self,
        node: &str,
        labels: &BTreeMap<String, String>,
        managed: &[String],
    ) -> Result<(), Error> {
        let Some(body) = label_patch(labels, managed) else {
            return Ok(());
        };
        self.api()
            .patch(node, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|e| not_found(e, node))?;
        Ok(())
    }

    /// Adds (locked) or removes (unlocked) the lock taint, keeping every other taint. The
    /// read-modify-write is guarded by the node's resourceVersion, so a concurrent change to the
    /// node (kubelet heartbeats, another writer's taint) is never overwritten: on a conflict the
    /// node is read again and the change re-applied, a few times, before giving up.
    pub async fn set_locked(&self, node: &str, locked: bool) -> Result<(), Error> {
        const ATTEMPTS: usize = 8;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_set_locked(node, locked).await {
                Err(Error::Api(kube::Error::Api(status)))
                    if status.code == 409 && attempt < ATTEMPTS =>
                {
                    tracing::debug!(node, attempt, "node changed while locking; retrying");
                }
                other => return other,
            }
        }
    }

    async fn try_set_locked(&self, node: &str, locked: bool) -> Result<(), Error> {
        let current = self.api().get(node).await.map_err(|e| not_found(e, node))?;
        let mut taints: Vec<Taint> = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let has = taints
            .iter()
            .any(|t| t.key == LOCK_TAINT_KEY && t.effect == "NoExecute");
        if has == locked {
            return Ok(());
        }
        taints.retain(|t| !(t.key == LOCK_TAINT_KEY && t.effect == "NoExecute"));
        if locked {
            taints.push(Taint {
                key: LOCK_TAINT_KEY.into(),
                value: Some(LOCK_TAINT_VALUE.into()),
                effect: "NoExecute".into(),
                time_added: None,
            });
        }
        let body = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"taints": taints, "unschedulable": locked},
        });
        self.api()
            .patch(node, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|e| not_found(e, node))?;
        Ok(())
    }

    /// Deletes every pod bound to the node, then the node. A node that is already gone is fine.
    pub async fn delete(&self, node: &str) -> Result<(), Error> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let bound = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await?;
        for pod in bound {
            let (Some(ns), Some(name)) = (pod.metadata.namespace, pod.metadata.name) else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            match api
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        match self.api().delete(node, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// The merge patch that sets `labels` and removes each key of `managed` that `labels` lacks;
/// `None` when there is nothing to change. A key under a prefix Kubernetes reserves
/// (`kubernetes.io/hostname` and the like, [`kstack_ports::sync::is_reserved_label_key`])
/// is never in it, whatever the caller passes: the kubelet and other components own those
/// labels, and removing one would break the node.
pub fn label_patch(
    labels: &BTreeMap<String, String>,
    managed: &[String],
) -> Option<serde_json::Value> {
    use kstack_ports::sync::is_reserved_label_key;
    let mut patch = serde_json::Map::new();
    for key in managed {
        if !labels.contains_key(key) && !is_reserved_label_key(key) {
            patch.insert(key.clone(), serde_json::Value::Null);
        }
    }
    for (k, v) in labels {
        if !is_reserved_label_key(k) {
            patch.insert(k.clone(), json!(v));
        }
    }
    (!patch.is_empty()).then(|| json!({"metadata": {"labels": patch}}))
}

/// Sends on `joins` the name of every node this process has not seen before: all nodes of the
/// first listing, then each node that is added (or re-added under the same name with a new uid).
/// Node status heartbeats are not joins. Returns when `joins` is closed; watch errors are
/// logged and the watch is restarted with backoff, re-listing, so a node that joined while the
/// watch was down is still reported.
pub async fn watch_joins(client: Client, joins: tokio::sync::mpsc::Sender<String>) {
    // Metadata only: a join needs name and uid, not the node's status.
    let api: Api<PartialObjectMeta<Node>> = Api::all(client);
    let mut events =
        std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    // uids of the nodes that exist, as far as the watch knows.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut listing: BTreeSet<String> = BTreeSet::new();
    loop {
        let event = tokio::select! {
            () = joins.closed() => return,
            event = events.next() => event,
        };
        let Some(event) = event else { return };
        let (node, initial) = match event {
            Ok(watcher::Event::Init) => {
                listing.clear();
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                // Nodes that vanished while the watch was down are forgotten.
                seen = std::mem::take(&mut listing);
                continue;
            }
            Ok(watcher::Event::Delete(node)) => {
                if let Some(uid) = node.metadata.uid {
                    seen.remove(&uid);
                }
                continue;
            }
            Ok(watcher::Event::InitApply(node)) => (node, true),
            Ok(watcher::Event::Apply(node)) => (node, false),
            Err(e) => {
                tracing::warn!(error = %e, "node watch failed; retrying");
                continue;
            }
        };
        let (Some(name), Some(uid)) = (node.metadata.name, node.metadata.uid) else {
            continue;
        };
        if initial {
            listing.insert(uid.clone());
        }
        if seen.insert(uid) && joins.send(name).await.is_err() {
            return;
        }
    }
}

fn sync_error(e: Error) -> kstack_ports::SyncError {
    match e {
        Error::NodeNotFound(node) => kstack_ports::SyncError::NodeNotFound(node),
        other => kstack_ports::SyncError::Failed(other.to_string()),
    }
}

/// The inventory's [`kstack_ports::NodeSync`] backed by these node operations.
#[async_trait::async_trait]
impl kstack_ports::NodeSync for Nodes {
    async fn apply_labels(
        &self,
        hostname: &str,
        labels: &BTreeMap<String, String>,
        managed_keys: &[String],
    ) -> Result<(), kstack_ports::SyncError> {
        Nodes::apply_labels(self, hostname, labels, managed_keys)
            .await
            .map_err(sync_error)
    }
    async fn set_locked(
        &self,
        hostname: &str,
        locked: bool,
    ) -> Result<(), kstack_ports::SyncError> {
        Nodes::set_locked(self, hostname, locked)
            .await
            .map_err(sync_error)
    }
    async fn delete_node(&self, hostname: &str) -> Result<(), kstack_ports::SyncError> {
        self.delete(hostname).await.map_err(sync_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_patch_never_touches_a_reserved_key() {
        let labels = BTreeMap::from([
            ("rack".to_string(), "r1".to_string()),
            ("kubernetes.io/hostname".to_string(), "wrong".to_string()),
            (
                "node-restriction.kubernetes.io/trusted".to_string(),
                "yes".to_string(),
            ),
        ]);
        let managed = [
            "rack".to_string(),
            "zone".to_string(),
            "kubernetes.io/hostname".to_string(),
            "node-role.kubernetes.io/worker".to_string(),
        ];
        assert_eq!(
            label_patch(&labels, &managed),
            Some(json!({"metadata": {"labels": {
                "zone": null,
                "rack": "r1",
                "node-restriction.kubernetes.io/trusted": "yes",
            }}}))
        );
        let only_reserved = BTreeMap::from([("k8s.io/x".to_string(), "v".to_string())]);
        assert_eq!(
            label_patch(&only_reserved, &["topology.kubernetes.io/zone".to_string()]),
            None
        );
    }
}
