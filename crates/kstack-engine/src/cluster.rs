//! What the engine needs from a cluster, as a trait: the engine itself does no IO.
//!
//! Objects cross this boundary as JSON values (the `Object::to_json_value` form, with
//! `apiVersion`, `kind` and `metadata`), so one generic implementation serves every kind.
//! `kstack-kube` implements it with kube-rs; [`crate::fake::FakeCluster`] in memory for tests.
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Names one object: kind, namespace (`None` for cluster-scoped kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    /// The reference of a manifest (`kind`, `metadata.namespace`, `metadata.name`).
    pub fn of(manifest: &Value) -> ObjectRef {
        ObjectRef {
            kind: manifest["kind"].as_str().unwrap_or_default().to_owned(),
            namespace: manifest["metadata"]["namespace"]
                .as_str()
                .map(str::to_owned),
            name: manifest["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// The condition a wait step waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// A Deployment, StatefulSet or DaemonSet has rolled out its current spec and every
    /// desired pod is ready.
    RolloutComplete,
    /// A Job has the `Complete` condition (or `Failed`, which ends the wait as a failure).
    JobSucceeded,
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Condition::RolloutComplete => "rollout complete, every pod ready",
            Condition::JobSucceeded => "Job succeeded",
        })
    }
}

/// How a wait ended (errors talking to the cluster are [`ClusterError`]s instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    Met,
    /// The object reached a state the condition can no longer follow from (a failed Job).
    Failed(String),
    TimedOut,
}

/// Errors from a [`Cluster`]. `transient` ones (conflicts, timeouts, unavailable API server)
/// may succeed when retried; the others will not.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ClusterError {
    pub message: String,
    pub transient: bool,
}

impl ClusterError {
    pub fn permanent(message: impl Into<String>) -> ClusterError {
        ClusterError {
            message: message.into(),
            transient: false,
        }
    }
}

/// Every kind kstack applies inside its namespace, in the order `list` calls go out. Cluster-
/// scoped kinds (Namespace, ClusterRole, ClusterRoleBinding) are read one by one instead.
pub const NAMESPACED_KINDS: &[&str] = &[
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "PersistentVolumeClaim",
    "Service",
    "PodDisruptionBudget",
    "Job",
    "CronJob",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
];

/// Cluster-scoped kinds kstack may apply.
pub const CLUSTER_KINDS: &[&str] = &["Namespace", "ClusterRole", "ClusterRoleBinding"];

/// What deploy, plan and status need from a cluster.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// Server-side apply with field manager `kstack`, without force; returns the object as
    /// stored.
    async fn apply(&self, manifest: &Value) -> Result<Value, ClusterError>;

    /// Server-side apply with force: also takes back the fields another manager changed
    /// (a workload scaled or edited by hand, [`crate::status::drift`]).
    async fn apply_force(&self, manifest: &Value) -> Result<Value, ClusterError>;

    /// The object, or `None` if it does not exist.
    async fn get(&self, object: &ObjectRef) -> Result<Option<Value>, ClusterError>;

    /// Objects of one kind in a namespace matching a label selector (`a=b,c=d`). Secrets are
    /// returned without `data`: the engine needs their metadata only.
    async fn list(
        &self,
        kind: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Value>, ClusterError>;

    /// Deletes the object (background propagation); deleting a missing object is not an error.
    async fn delete(&self, object: &ObjectRef) -> Result<(), ClusterError>;

    /// Creates the object unless one of its name exists; returns whether it created it. What
    /// exists is left as it is (a key repository's Secret is made once, never overwritten).
    async fn create(&self, manifest: &Value) -> Result<bool, ClusterError>;

    /// Deletes the object but not what it owns (orphan propagation: a StatefulSet's pods keep
    /// running) and returns once the object is gone; a missing object is not an error.
    async fn delete_keeping_pods(&self, object: &ObjectRef) -> Result<(), ClusterError>;

    /// Waits through a watch until `condition` holds for the object, it can no longer hold,
    /// or `timeout` passes.
    async fn wait(
        &self,
        object: &ObjectRef,
        condition: Condition,
        timeout: Duration,
    ) -> Result<WaitOutcome, ClusterError>;

    /// Pods in a namespace matching a label selector, for diagnosis.
    async fn pods(&self, namespace: &str, selector: &str) -> Result<Vec<Value>, ClusterError>;

    /// Events about one object (by name) in a namespace, oldest first.
    async fn events(&self, namespace: &str, name: &str) -> Result<Vec<Value>, ClusterError>;
}
