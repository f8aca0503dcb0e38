//! The model (catalog + typed globals) to typed Kubernetes objects.
//!
//! Pure: no IO, no client. The same input gives the same objects in the same order
//! (`BTreeMap` everywhere, objects sorted by [`crate::Rendered`]).
//!
//! What is rendered, per enabled service:
//! - a workload of the catalog's kind (Deployment, StatefulSet or DaemonSet) running the Kolla
//!   image with its own `dumb-init`/`kolla_start` entrypoint (no `command`), env
//!   `KOLLA_CONFIG_STRATEGY`, `KOLLA_SERVICE_NAME` and the container's catalog env (its
//!   `secret_env` by `secretKeyRef` on an immutable Secret `<service>-<container>-env-<hash>`,
//!   so the health check sees it too), probes from the catalog health check;
//!   a DaemonSet with per-host overrides also gets one variant per host (`<service>-<hash of
//!   the host>`), pinned to that node, while the main DaemonSet keeps off those nodes;
//! - a Service with the exposed ports and only ready pods behind it, plus for a StatefulSet
//!   the headless `<service>-peers` that governs it (stable pod names, peers found before
//!   they are ready);
//! - for a service with more than one replica (not a DaemonSet), a PodDisruptionBudget
//!   allowing one replica down, and a preferred anti-affinity spreading its pods over nodes;
//! - a PersistentVolumeClaim per persistent volume (StatefulSets also get
//!   `volumeClaimTemplates`; their rendered claim is replica 0's, for the bootstrap Job);
//! - per rendered config file (see [`crate::files`]) one immutable, content-hash named object:
//!   a Secret when the file carries a passwords.yml value, else a ConfigMap; each container
//!   mounts its `config.json` and files as one projected volume at `/var/lib/kolla/config_files`;
//! - a Job per bootstrap task, named `<service>-<task>-<hash of the Job spec>` and labelled
//!   with [`NAME_LABEL`] and [`TASK_LABEL`]. What the task runs (image, arguments, env, files)
//!   is defined once for both targets in [`crate::tasks`]; here its files become ConfigMaps and
//!   Secrets projected at [`KOLLA_CONFIG_DIR`](crate::kolla::KOLLA_CONFIG_DIR) and its secret env a `secretKeyRef` on an
//!   immutable Secret.
//!
//! No secret is ever an env literal: passwords reach env only through `secretKeyRef`. The hash
//! in a Secret's name is keyed ([`SecretNames`]), so the name tells nothing of what it holds.
//!
//! Three kinds of objects have a module of their own: [`keys`], a key repository's Secret and the
//! CronJob that rotates its keys, [`backup`], the scheduled backup of the databases, and [`rbac`], the access kstack itself needs to deploy
//! (`kstack template --rbac`). The rest is rendered by private submodules: `workload` (the
//! objects of one service, in order), `pod` (the pod of a workload or Job), `config` (config
//! files and env from passwords.yml as ConfigMaps and Secrets), `services` (Services and the
//! PodDisruptionBudget) and `job` (a bootstrap task's Job); this module holds what they share
//! (labels, metadata, the `Renderer` of one cloud).

use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_k8s::api::core::v1::{Namespace, Volume, VolumeMount};
use kstack_k8s::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kstack_model::globals::Globals;
use kstack_model::labels::{
    BOOTSTRAP, COMPONENT_LABEL, MANAGED_BY, NAME_LABEL, PART_OF, SERVER, TASK_LABEL,
};

use crate::files::{ContainerFiles, RenderError, Target, render_files};
use crate::names::SecretNames;
use crate::{Object, Rendered};

pub mod backup;
pub mod keys;
pub mod rbac;

mod config;
mod job;
mod pod;
mod services;
mod workload;

pub(crate) fn labels(service: &str, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_owned(), service.to_owned()),
        (PART_OF.0.to_owned(), PART_OF.1.to_owned()),
        (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
        (COMPONENT_LABEL.to_owned(), component.to_owned()),
    ])
}

fn selector(service: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_owned(), service.to_owned()),
        (COMPONENT_LABEL.to_owned(), SERVER.to_owned()),
    ])
}

pub(crate) fn meta(globals: &Globals, name: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(globals.kubernetes_namespace.clone()),
        labels: Some(labels),
        ..Default::default()
    }
}

/// The cloud's namespace (`kubernetes_namespace`), as every deploy applies it first.
pub fn namespace(globals: &Globals) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(globals.kubernetes_namespace.clone()),
            labels: Some(BTreeMap::from([
                (PART_OF.0.to_owned(), PART_OF.1.to_owned()),
                (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
            ])),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Renders every enabled service of a loaded config directory, plus the namespace.
pub fn render(config: &Config) -> Result<Rendered, RenderError> {
    let globals = &config.globals;
    let files = render_files(config, Target::Kubernetes)?;
    let r = Renderer {
        config,
        globals,
        files: &files,
        names: SecretNames::of(config)?,
    };
    let mut objects = vec![Object::Namespace(namespace(globals))];
    for (name, service) in &config.catalog.services {
        if config.enabled.contains(name) {
            objects.extend(r.service(name, service)?);
        }
    }
    objects.extend(backup::scheduled(config, &r.names)?);
    // Objects shared by containers (the same file content) are rendered once.
    let mut seen = std::collections::BTreeSet::new();
    objects.retain(|o| seen.insert((o.kind(), o.name().to_owned())));
    Ok(Rendered::new(objects))
}

/// Everything rendering one service needs.
struct Renderer<'a> {
    config: &'a Config,
    globals: &'a Globals,
    files: &'a [ContainerFiles],
    names: SecretNames,
}

/// One container's config files as objects and the projected volume that mounts them.
#[derive(Clone)]
struct ContainerParts {
    objects: Vec<Object>,
    volume: Volume,
    mount: VolumeMount,
}

/// Labels of a service's pods: the operator's `kstack_pod_labels` for the service, then
/// kstack's own (globals validation rejects keys under [`kstack_model::labels::APP_PREFIX`], so
/// the operator's labels never override a selector).
pub(crate) fn pod_labels(
    globals: &Globals,
    service: &str,
    own: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut l = globals.pod_labels.get(service).cloned().unwrap_or_default();
    l.extend(own);
    l
}

fn task_labels(service: &str, task: &str) -> BTreeMap<String, String> {
    let mut l = labels(service, BOOTSTRAP);
    l.insert(TASK_LABEL.to_owned(), task.to_owned());
    l
}

fn label_selector(labels: BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels),
        ..Default::default()
    }
}
