//! The `NodeSync` trait: how committed inventory changes reach Kubernetes nodes.
//!
//! The Kubernetes implementation lives in another crate; this crate only depends on the trait.

use std::collections::BTreeMap;
use std::sync::Mutex;

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
    /// Kubernetes reserves ([`crate::validate::is_reserved_label_key`]).
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
