//! The `NodeSync` trait: how committed inventory changes reach Kubernetes nodes, and which
//! node labels they never touch ([`is_reserved_label_key`]).
//!
//! The inventory calls it; the Kubernetes implementation lives in `kstack-kube::nodes`. Both
//! depend on this module, not on each other.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Label key prefixes (DNS domains) that Kubernetes reserves for its own components, as the
/// kubelet and the NodeRestriction admission plugin define them: a key whose prefix is one of
/// these domains or a subdomain of one (`kubernetes.io/hostname`, `node.kubernetes.io/...`,
/// `node-role.kubernetes.io/...`, `topology.kubernetes.io/...`, `k8s.io/...`) is theirs.
pub const RESERVED_DOMAINS: [&str; 2] = ["kubernetes.io", "k8s.io"];

/// The one part of [`RESERVED_DOMAINS`] Kubernetes hands to administrators: NodeRestriction
/// forbids kubelets to set `node-restriction.kubernetes.io/` labels (and its subdomains) so
/// that an administrator can use them to steer workloads to trusted nodes. The inventory is
/// such an administrator, so these keys are accepted.
pub const ADMIN_DOMAIN: &str = "node-restriction.kubernetes.io";

fn in_domain(prefix: &str, domain: &str) -> bool {
    prefix == domain
        || prefix
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// True when `key`'s prefix belongs to Kubernetes ([`RESERVED_DOMAINS`], except
/// [`ADMIN_DOMAIN`]): the inventory must neither set nor remove such a label, because the
/// kubelet or another Kubernetes component owns it.
pub fn is_reserved_label_key(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    // Label key prefixes are lowercase DNS subdomains; compare rows stored before the syntax
    // check existed case-insensitively too.
    let prefix = prefix.to_ascii_lowercase();
    RESERVED_DOMAINS.iter().any(|d| in_domain(&prefix, d)) && !in_domain(&prefix, ADMIN_DOMAIN)
}

/// Why a node could not be brought to its host's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// There is no node of that name (yet): normal for a host registered before its node
    /// joins; the node gets the host's state when it joins.
    #[error("no Kubernetes node named {0:?}")]
    NodeNotFound(String),
    /// Anything else (the API server refused or could not be reached), for people.
    #[error("{0}")]
    Failed(String),
}

/// Pushes inventory state to the nodes. Called after a write has been committed,
/// and by the periodic audit to repair drift, so implementations must be idempotent.
#[async_trait::async_trait]
pub trait NodeSync: Send + Sync + 'static {
    /// Sets `labels` on the node. Keys in `managed_keys` that are not in `labels`
    /// were removed from the inventory and must be removed from the node; other keys
    /// on the node are not ours and must be left alone. The caller never passes a key
    /// Kubernetes reserves ([`is_reserved_label_key`]).
    async fn apply_labels(
        &self,
        hostname: &str,
        labels: &BTreeMap<String, String>,
        managed_keys: &[String],
    ) -> Result<(), SyncError>;

    /// Locks (cordons and taints) or unlocks the node.
    async fn set_locked(&self, hostname: &str, locked: bool) -> Result<(), SyncError>;

    /// Deletes the node and what is bound to it.
    async fn delete_node(&self, hostname: &str) -> Result<(), SyncError>;

    /// False when nothing reaches any node ([`NoNodeSync`]): hosts then show as pending, saying
    /// why, rather than as synced.
    fn enabled(&self) -> bool {
        true
    }
}

/// One call received by [`RecordingSync`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncCall {
    ApplyLabels {
        hostname: String,
        labels: BTreeMap<String, String>,
        managed_keys: Vec<String>,
    },
    SetLocked {
        hostname: String,
        locked: bool,
    },
    DeleteNode {
        hostname: String,
    },
}

/// A `NodeSync` that does nothing but remember the calls; for tests and dry runs. It answers
/// every call with the error set by [`RecordingSync::fail_with`], if any.
#[derive(Debug, Default)]
pub struct RecordingSync {
    calls: Mutex<Vec<SyncCall>>,
    failure: Mutex<Option<SyncError>>,
}

impl RecordingSync {
    /// From now on every call (still recorded) fails with `error`; `None` makes them succeed.
    pub fn fail_with(&self, error: Option<SyncError>) {
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = error;
    }

    fn outcome(&self) -> Result<(), SyncError> {
        match &*self.failure.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// All calls so far, oldest first.
    pub fn calls(&self) -> Vec<SyncCall> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forgets the calls so far.
    pub fn clear(&self) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn push(&self, call: SyncCall) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(call);
    }
}

#[async_trait::async_trait]
impl NodeSync for RecordingSync {
    async fn apply_labels(
        &self,
        hostname: &str,
        labels: &BTreeMap<String, String>,
        managed_keys: &[String],
    ) -> Result<(), SyncError> {
        self.push(SyncCall::ApplyLabels {
            hostname: hostname.to_string(),
            labels: labels.clone(),
            managed_keys: managed_keys.to_vec(),
        });
        self.outcome()
    }

    async fn set_locked(&self, hostname: &str, locked: bool) -> Result<(), SyncError> {
        self.push(SyncCall::SetLocked {
            hostname: hostname.to_string(),
            locked,
        });
        self.outcome()
    }

    async fn delete_node(&self, hostname: &str) -> Result<(), SyncError> {
        self.push(SyncCall::DeleteNode {
            hostname: hostname.to_string(),
        });
        self.outcome()
    }
}

/// A `NodeSync` that does nothing: the inventory without a cluster (`kstack inventory serve
/// --no-node-sync`), e.g. to measure the service alone.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNodeSync;

#[async_trait::async_trait]
impl NodeSync for NoNodeSync {
    async fn apply_labels(
        &self,
        _hostname: &str,
        _labels: &BTreeMap<String, String>,
        _managed_keys: &[String],
    ) -> Result<(), SyncError> {
        Ok(())
    }

    async fn set_locked(&self, _hostname: &str, _locked: bool) -> Result<(), SyncError> {
        Ok(())
    }

    async fn delete_node(&self, _hostname: &str) -> Result<(), SyncError> {
        Ok(())
    }

    fn enabled(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_prefixes_are_kubernetes_own() {
        for key in [
            "kubernetes.io/hostname",
            "k8s.io/x",
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "node-role.kubernetes.io/control-plane",
            "topology.kubernetes.io/zone",
            "beta.kubernetes.io/arch",
            "a.b.k8s.io/x",
            "Kubernetes.IO/hostname",
        ] {
            assert!(is_reserved_label_key(key), "{key}");
        }
        for key in [
            "hostname",
            "example.com/kubernetes.io",
            "notkubernetes.io/x",
            "x-k8s.io/x",
            "kubernetes.io.example.com/x",
            "node-restriction.kubernetes.io/trusted",
            "team.node-restriction.kubernetes.io/x",
            "kstack.io/role-nova",
        ] {
            assert!(!is_reserved_label_key(key), "{key}");
        }
    }
}
