//! Templates to service config files; the model to typed Kubernetes objects and to a Compose file.
//!
//! Two layers. The shared layer renders what both targets have in common: each container's
//! config files, with the addresses of a [`Target`] ([`files`]), Kolla's config directory and
//! `config.json` ([`kolla`]), the bootstrap tasks ([`tasks`]), how a value is written in each
//! format ([`escape`]), which values are secret, and how rendered things are named
//! ([`names`]). Two leaves translate it, one per target: [`kubernetes`] into typed Kubernetes
//! objects (a [`Rendered`] bundle of [`Object`]s, defined here for the engine), [`compose`]
//! into a Compose file and config directories. No module of the shared layer names a leaf, and
//! no leaf the other (`tests/layers.rs`).
//!
//! Architecture invariant: rendering does no IO and needs no cluster. The Kubernetes target's
//! `render` turns the catalog and typed globals into a [`Rendered`] bundle; the same input
//! always gives the same bytes from [`Rendered::to_yaml`] / [`Rendered::to_json`].

use std::collections::BTreeMap;

use kstack_k8s::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kstack_k8s::api::batch::v1::{CronJob, Job};
use kstack_k8s::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use kstack_k8s::api::policy::v1::PodDisruptionBudget;
use kstack_k8s::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kstack_k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

pub mod compose;
pub mod escape;
pub mod files;
pub mod kolla;
pub mod kubernetes;
pub mod names;
mod secrets;
pub mod tasks;

pub use files::{ContainerFiles, RenderError, RenderedFile, Target, render_files};

/// One rendered Kubernetes object. Serializes as the object itself (with `apiVersion`/`kind`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Object {
    Namespace(Namespace),
    ServiceAccount(ServiceAccount),
    ClusterRole(ClusterRole),
    ClusterRoleBinding(ClusterRoleBinding),
    Role(Role),
    RoleBinding(RoleBinding),
    ConfigMap(ConfigMap),
    Secret(Secret),
    PersistentVolumeClaim(PersistentVolumeClaim),
    Service(Service),
    PodDisruptionBudget(PodDisruptionBudget),
    Job(Job),
    /// Boxed: its spec is inline, far larger than the other variants.
    CronJob(Box<CronJob>),
    Deployment(Deployment),
    StatefulSet(StatefulSet),
    DaemonSet(DaemonSet),
}

impl Object {
    /// The object's metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::Namespace(o) => &o.metadata,
            Object::ServiceAccount(o) => &o.metadata,
            Object::ClusterRole(o) => &o.metadata,
            Object::ClusterRoleBinding(o) => &o.metadata,
            Object::Role(o) => &o.metadata,
            Object::RoleBinding(o) => &o.metadata,
            Object::ConfigMap(o) => &o.metadata,
            Object::Secret(o) => &o.metadata,
            Object::PersistentVolumeClaim(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::PodDisruptionBudget(o) => &o.metadata,
            Object::Job(o) => &o.metadata,
            Object::CronJob(o) => &o.metadata,
            Object::Deployment(o) => &o.metadata,
            Object::StatefulSet(o) => &o.metadata,
            Object::DaemonSet(o) => &o.metadata,
        }
    }

    /// The Kubernetes kind, e.g. `ConfigMap`.
    pub fn kind(&self) -> &'static str {
        match self {
            Object::Namespace(_) => "Namespace",
            Object::ServiceAccount(_) => "ServiceAccount",
            Object::ClusterRole(_) => "ClusterRole",
            Object::ClusterRoleBinding(_) => "ClusterRoleBinding",
            Object::Role(_) => "Role",
            Object::RoleBinding(_) => "RoleBinding",
            Object::ConfigMap(_) => "ConfigMap",
            Object::Secret(_) => "Secret",
            Object::PersistentVolumeClaim(_) => "PersistentVolumeClaim",
            Object::Service(_) => "Service",
            Object::PodDisruptionBudget(_) => "PodDisruptionBudget",
            Object::Job(_) => "Job",
            Object::CronJob(_) => "CronJob",
            Object::Deployment(_) => "Deployment",
            Object::StatefulSet(_) => "StatefulSet",
            Object::DaemonSet(_) => "DaemonSet",
        }
    }

    /// `metadata.name` (always set by the renderer).
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    /// The catalog service the object belongs to (its `app.kubernetes.io/name` label); `None`
    /// for cluster-wide objects such as the namespace.
    pub fn service(&self) -> Option<&str> {
        self.metadata()
            .labels
            .as_ref()?
            .get(kstack_model::labels::NAME_LABEL)
            .map(String::as_str)
    }

    /// Stream position: namespace, access control, config, claims, Services, Jobs, workloads.
    fn rank(&self) -> u8 {
        match self {
            Object::Namespace(_) => 0,
            Object::ServiceAccount(_)
            | Object::ClusterRole(_)
            | Object::ClusterRoleBinding(_)
            | Object::Role(_)
            | Object::RoleBinding(_) => 1,
            Object::ConfigMap(_) | Object::Secret(_) => 2,
            Object::PersistentVolumeClaim(_) => 3,
            Object::Service(_) | Object::PodDisruptionBudget(_) => 4,
            Object::Job(_) => 5,
            Object::Deployment(_)
            | Object::StatefulSet(_)
            | Object::DaemonSet(_)
            | Object::CronJob(_) => 6,
        }
    }

    /// The object as a JSON value.
    pub fn to_json_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("Kubernetes objects serialize")
    }

    /// The object as one YAML document (no `---`).
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).expect("Kubernetes objects serialize")
    }

    /// A file name for the object: `<kind>-<name>.yaml`, lower-case kind.
    pub fn file_name(&self, ext: &str) -> String {
        format!("{}-{}.{ext}", self.kind().to_ascii_lowercase(), self.name())
    }
}

/// Every object rendered for a cloud, in apply order.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub objects: Vec<Object>,
}

impl Rendered {
    /// Sorts into the stable stream order: namespace first, then access control, ConfigMaps and
    /// Secrets, claims, Services, Jobs and workloads, each group sorted by name (then kind).
    pub fn new(mut objects: Vec<Object>) -> Rendered {
        objects.sort_by(|a, b| (a.rank(), a.name(), a.kind()).cmp(&(b.rank(), b.name(), b.kind())));
        Rendered { objects }
    }

    /// Objects grouped by catalog service, each group in stream order. Objects without a
    /// service (the namespace) are left out.
    pub fn by_service(&self) -> BTreeMap<&str, Vec<&Object>> {
        let mut map: BTreeMap<&str, Vec<&Object>> = BTreeMap::new();
        for o in &self.objects {
            if let Some(s) = o.service() {
                map.entry(s).or_default().push(o);
            }
        }
        map
    }

    /// Keeps only the objects of one service.
    pub fn only_service(self, service: &str) -> Rendered {
        Rendered {
            objects: self
                .objects
                .into_iter()
                .filter(|o| o.service() == Some(service))
                .collect(),
        }
    }

    /// A multi-document YAML stream, each document starting with `---`.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        for o in &self.objects {
            out.push_str("---\n");
            out.push_str(&o.to_yaml());
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }

    /// A Kubernetes `List` of all objects as pretty JSON.
    pub fn to_json(&self) -> String {
        let list = serde_json::json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": self.objects.iter().map(Object::to_json_value).collect::<Vec<_>>(),
        });
        let mut s = serde_json::to_string_pretty(&list).expect("JSON serializes");
        s.push('\n');
        s
    }
}
