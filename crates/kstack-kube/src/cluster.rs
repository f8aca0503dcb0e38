//! `impl Cluster` for a real API server: server-side apply (field manager `kstack`, no force)
//! over `DynamicObject`, waits through watches (`kube::runtime::wait::await_condition`), and a
//! request counter so tests and benchmarks can report API requests per object.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use kstack_engine::cluster::{Cluster, ClusterError, Condition, ObjectRef, WaitOutcome};
use kstack_engine::status::{job_finished, rollout_complete};
use kstack_k8s::api::core::v1::{Event, Pod};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use serde_json::Value;

use crate::Error;

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "kstack";

/// API requests made through a counted client, by kind of request.
#[derive(Debug, Default)]
pub struct RequestCounter {
    reads: AtomicU64,
    writes: AtomicU64,
    watches: AtomicU64,
}

/// A snapshot of a [`RequestCounter`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RequestCounts {
    /// GET and LIST requests (watches not included).
    pub reads: u64,
    /// POST, PUT, PATCH and DELETE requests.
    pub writes: u64,
    /// Watch requests (each opens a stream; reconnects count again).
    pub watches: u64,
}

impl RequestCounts {
    pub fn total(&self) -> u64 {
        self.reads + self.writes + self.watches
    }
}

impl RequestCounter {
    pub fn counts(&self) -> RequestCounts {
        RequestCounts {
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            watches: self.watches.load(Ordering::Relaxed),
        }
    }

    fn count<B>(&self, req: &http::Request<B>) {
        let slot = match *req.method() {
            http::Method::GET | http::Method::HEAD => {
                if req.uri().query().is_some_and(|q| q.contains("watch=true")) {
                    &self.watches
                } else {
                    &self.reads
                }
            }
            _ => &self.writes,
        };
        slot.fetch_add(1, Ordering::Relaxed);
    }
}

/// A client like [`crate::client`] whose every request is counted.
pub async fn counted_client(
    kubeconfig: Option<&str>,
) -> Result<(Client, Arc<RequestCounter>), Error> {
    let config = crate::config(kubeconfig).await?;
    let counter = Arc::new(RequestCounter::default());
    let c = counter.clone();
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        c.count(&req);
        req
    });
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build();
    Ok((client, counter))
}

/// The kinds kstack applies: API group, version, plural, namespaced.
fn resource(kind: &str) -> Option<(ApiResource, bool)> {
    let (group, version, plural, namespaced) = match kind {
        "Namespace" => ("", "v1", "namespaces", false),
        "ServiceAccount" => ("", "v1", "serviceaccounts", true),
        "ConfigMap" => ("", "v1", "configmaps", true),
        "Secret" => ("", "v1", "secrets", true),
        "PersistentVolumeClaim" => ("", "v1", "persistentvolumeclaims", true),
        "Service" => ("", "v1", "services", true),
        "Role" => ("rbac.authorization.k8s.io", "v1", "roles", true),
        "RoleBinding" => ("rbac.authorization.k8s.io", "v1", "rolebindings", true),
        "ClusterRole" => ("rbac.authorization.k8s.io", "v1", "clusterroles", false),
        "ClusterRoleBinding" => (
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            false,
        ),
        "Pod" => ("", "v1", "pods", true),
        "PodDisruptionBudget" => ("policy", "v1", "poddisruptionbudgets", true),
        "Job" => ("batch", "v1", "jobs", true),
        "CronJob" => ("batch", "v1", "cronjobs", true),
        "Deployment" => ("apps", "v1", "deployments", true),
        "StatefulSet" => ("apps", "v1", "statefulsets", true),
        "DaemonSet" => ("apps", "v1", "daemonsets", true),
        _ => return None,
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Some((ApiResource::from_gvk_with_plural(&gvk, plural), namespaced))
}

fn cluster_error(what: &str, e: kube::Error) -> ClusterError {
    let transient = match &e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    };
    let message = match &e {
        kube::Error::Api(s) => format!("{what}: {} ({}, HTTP {})", s.message, s.reason, s.code),
        other => format!("{what}: {other}"),
    };
    ClusterError { message, transient }
}

/// A Kubernetes cluster reached through kube-rs.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
}

impl KubeCluster {
    pub fn new(client: Client) -> KubeCluster {
        KubeCluster { client }
    }

    fn api(&self, kind: &str, namespace: Option<&str>) -> Result<Api<DynamicObject>, ClusterError> {
        let (ar, namespaced) = resource(kind).ok_or_else(|| {
            ClusterError::permanent(format!("kstack does not manage kind {kind}"))
        })?;
        Ok(match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            (true, None) => {
                return Err(ClusterError::permanent(format!(
                    "{kind} is namespaced but no namespace was given"
                )));
            }
            (false, _) => Api::all_with(self.client.clone(), &ar),
        })
    }
}

fn to_value(kind: &str, o: &impl serde::Serialize) -> Value {
    let mut v = serde_json::to_value(o).unwrap_or_default();
    // List items come without apiVersion/kind.
    if v["kind"].is_null() {
        v["kind"] = Value::String(kind.to_owned());
    }
    v
}

impl KubeCluster {
    async fn server_side_apply(
        &self,
        manifest: &Value,
        params: PatchParams,
    ) -> Result<Value, ClusterError> {
        let r = ObjectRef::of(manifest);
        let api = self.api(&r.kind, r.namespace.as_deref())?;
        let o = api
            .patch(&r.name, &params, &Patch::Apply(manifest))
            .await
            .map_err(|e| cluster_error(&format!("applying {r}"), e))?;
        Ok(to_value(&r.kind, &o))
    }
}

#[async_trait]
impl Cluster for KubeCluster {
    async fn apply(&self, manifest: &Value) -> Result<Value, ClusterError> {
        self.server_side_apply(manifest, PatchParams::apply(FIELD_MANAGER))
            .await
    }

    async fn apply_force(&self, manifest: &Value) -> Result<Value, ClusterError> {
        self.server_side_apply(manifest, PatchParams::apply(FIELD_MANAGER).force())
            .await
    }

    async fn create(&self, manifest: &Value) -> Result<bool, ClusterError> {
        let r = ObjectRef::of(manifest);
        let api = self.api(&r.kind, r.namespace.as_deref())?;
        let object: DynamicObject = serde_json::from_value(manifest.clone())
            .map_err(|e| ClusterError::permanent(format!("{r} is not a Kubernetes object: {e}")))?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        };
        match api.create(&params, &object).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(cluster_error(&format!("creating {r}"), e)),
        }
    }

    async fn get(&self, r: &ObjectRef) -> Result<Option<Value>, ClusterError> {
        let api = self.api(&r.kind, r.namespace.as_deref())?;
        let o = api
            .get_opt(&r.name)
            .await
            .map_err(|e| cluster_error(&format!("reading {r}"), e))?;
        Ok(o.map(|o| to_value(&r.kind, &o)))
    }

    async fn list(
        &self,
        kind: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Value>, ClusterError> {
        let api = self.api(kind, Some(namespace))?;
        let lp = ListParams::default().labels(selector);
        let what = format!("listing {kind} in {namespace}");
        if kind == "Secret" {
            // Metadata only: kstack never needs to read a Secret's content back.
            let list = api
                .list_metadata(&lp)
                .await
                .map_err(|e| cluster_error(&what, e))?;
            return Ok(list.items.iter().map(|o| to_value(kind, o)).collect());
        }
        let list = api.list(&lp).await.map_err(|e| cluster_error(&what, e))?;
        Ok(list.items.iter().map(|o| to_value(kind, o)).collect())
    }

    async fn delete(&self, r: &ObjectRef) -> Result<(), ClusterError> {
        let api = self.api(&r.kind, r.namespace.as_deref())?;
        match api.delete(&r.name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(cluster_error(&format!("deleting {r}"), e)),
        }
    }

    async fn delete_keeping_pods(&self, r: &ObjectRef) -> Result<(), ClusterError> {
        let api = self.api(&r.kind, r.namespace.as_deref())?;
        match api.delete(&r.name, &DeleteParams::orphan()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(cluster_error(&format!("deleting {r}"), e)),
        }
        // The garbage collector removes the orphan finalizer once it has released the pods.
        let gone = await_condition(api, &r.name, |o: Option<&DynamicObject>| o.is_none());
        match tokio::time::timeout(Duration::from_secs(120), gone).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(ClusterError {
                message: format!("waiting for {r} to be deleted: {e}"),
                transient: true,
            }),
            Err(_) => Err(ClusterError::permanent(format!(
                "{r} was still there 120 s after it was deleted (is the garbage collector of \
                 kube-controller-manager running?)"
            ))),
        }
    }

    async fn wait(
        &self,
        r: &ObjectRef,
        condition: Condition,
        timeout: Duration,
    ) -> Result<WaitOutcome, ClusterError> {
        let api = self.api(&r.kind, r.namespace.as_deref())?;
        let kind = r.kind.clone();
        let done = move |o: Option<&DynamicObject>| {
            let Some(o) = o else { return false };
            let v = to_value(&kind, o);
            match condition {
                Condition::RolloutComplete => rollout_complete(&kind, &v),
                Condition::JobSucceeded => job_finished(&v).is_some(),
            }
        };
        let outcome = match tokio::time::timeout(timeout, await_condition(api, &r.name, done)).await
        {
            Err(_) => return Ok(WaitOutcome::TimedOut),
            Ok(Err(e)) => {
                return Err(ClusterError {
                    message: format!("watching {r}: {e}"),
                    transient: true,
                });
            }
            Ok(Ok(o)) => o,
        };
        let Some(o) = outcome else {
            return Ok(WaitOutcome::Failed(format!("{r} was deleted")));
        };
        Ok(match condition {
            Condition::JobSucceeded => match job_finished(&to_value(&r.kind, &o)) {
                Some(Err(reason)) => WaitOutcome::Failed(reason),
                _ => WaitOutcome::Met,
            },
            Condition::RolloutComplete => WaitOutcome::Met,
        })
    }

    async fn pods(&self, namespace: &str, selector: &str) -> Result<Vec<Value>, ClusterError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| cluster_error(&format!("listing pods in {namespace}"), e))?;
        Ok(list.items.iter().map(|p| to_value("Pod", p)).collect())
    }

    async fn events(&self, namespace: &str, name: &str) -> Result<Vec<Value>, ClusterError> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .map_err(|e| cluster_error(&format!("listing events of {name}"), e))?;
        let mut events: Vec<Value> = list.items.iter().map(|e| to_value("Event", e)).collect();
        let time = |e: &Value| {
            e["lastTimestamp"]
                .as_str()
                .or(e["eventTime"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        events.sort_by_key(time);
        Ok(events)
    }
}
