//! A bootstrap task as a Job named by the hash of its spec, with the ConfigMaps and Secrets it
//! mounts (at Kolla's config directory) and its env from passwords.yml through `secretKeyRef`.
use std::collections::BTreeMap;

use kstack_k8s::api::batch::v1::{Job, JobSpec};
use kstack_k8s::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use kstack_k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstack_model::catalog::{self, WorkloadKind};
use kstack_model::globals::Globals;
use kstack_model::labels::PHASE_LABEL;

use super::config::{config_parts, files_volume, secret_env, slug};
use super::pod::{claim_name, data_volumes, literal, literal_args, pod_spec, security_context};
use super::{ContainerParts, Renderer, meta, pod_labels, task_labels};
use crate::Object;
use crate::files::{RenderError, Target};
use crate::kolla::KOLLA_CONFIG_DIR;
use crate::names::short_hash;
use crate::tasks::{self, FilesOf};

const JOB_BACKOFF_LIMIT: i32 = 6;

impl Renderer<'_> {
    /// The objects of one bootstrap task ([`crate::tasks::task_spec`]): its Job and the
    /// Secrets/ConfigMaps it mounts; files at [`KOLLA_CONFIG_DIR`], secret env through
    /// `secretKeyRef`.
    pub(super) fn task(
        &self,
        name: &str,
        service: &catalog::Service,
        parts: &BTreeMap<String, ContainerParts>,
        task: &catalog::BootstrapTask,
    ) -> Result<Vec<Object>, RenderError> {
        let globals = self.globals;
        let spec = tasks::task_spec(
            self.config,
            Target::Kubernetes,
            self.files,
            name,
            service,
            task,
        )?;
        let mut out = Vec::new();
        let cparts = match &spec.files_of {
            FilesOf::Container {
                service: src,
                container,
            } if src == name => parts.get(container).cloned(),
            FilesOf::Container {
                service: src,
                container,
            } => self
                .container_files(src, container, None)
                .map(|f| config_parts(globals, &self.names, name, f)),
            FilesOf::Task => Some(files_volume(
                globals,
                &self.names,
                name,
                |f| format!("{name}-{}-{}", task.name, slug(&f.name)),
                &task_labels(name, &task.name),
                &spec.files,
                ("kolla-config-task", KOLLA_CONFIG_DIR),
            )),
        };
        let mut env: Vec<EnvVar> = spec
            .env
            .iter()
            .map(|(k, v)| literal(k, v.clone()))
            .collect();
        let values = spec.secret_env_values(self.config)?;
        if !values.is_empty() {
            let pairs: Vec<(&str, &str)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            let (secret, vars) = secret_env(
                globals,
                &self.names,
                &format!("{name}-{}", task.name),
                task_labels(name, &task.name),
                &pairs,
            );
            out.push(secret);
            env.extend(vars);
        }
        let src = spec
            .data_of
            .as_ref()
            .and_then(|s| self.config.catalog.services.get_key_value(s));
        let mut mounts = Vec::new();
        let mut volumes = Vec::new();
        if let Some(p) = &cparts {
            out.extend(p.objects.iter().cloned());
            mounts.push(p.mount.clone());
            volumes.push(p.volume.clone());
        }
        // StatefulSet data lives in the first replica's claim (`<volume>-<service>-0`).
        if let Some((src_name, s)) = src {
            let is_sts = s.kind == WorkloadKind::StatefulSet;
            let (v, m) = data_volumes(s, |v| Some(claim_name(src_name, is_sts, v)));
            volumes.extend(v);
            mounts.extend(m);
        }
        let container = Container {
            name: spec.container.clone(),
            image: Some(spec.image.clone()),
            args: spec.args.as_deref().map(literal_args),
            env: Some(env),
            volume_mounts: Some(mounts),
            security_context: src.and_then(|(_, s)| security_context(s)),
            ..Default::default()
        };
        // A task without the service's data runs without its host access too.
        let plain;
        let placed = match src {
            Some((_, s)) => s,
            None => {
                plain = catalog::Service {
                    privileges: Default::default(),
                    ..service.clone()
                };
                &plain
            }
        };
        let mut pod = pod_spec(globals, placed, vec![container], volumes);
        pod.restart_policy = Some("OnFailure".into());
        out.push(Object::Job(job(globals, name, task, pod)));
        Ok(out)
    }
}

/// A bootstrap Job named `<service>-<task>-<hash of its spec>`; a task of an upgrade phase is
/// labelled with it ([`PHASE_LABEL`]).
fn job(globals: &Globals, service: &str, t: &catalog::BootstrapTask, pod: PodSpec) -> Job {
    let task = t.name.as_str();
    let spec = JobSpec {
        backoff_limit: Some(JOB_BACKOFF_LIMIT),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(pod_labels(globals, service, task_labels(service, task))),
                ..Default::default()
            }),
            spec: Some(pod),
        },
        ..Default::default()
    };
    // A Job's pod template is immutable: a changed spec is a new Job, named by its hash.
    let hash = short_hash(&serde_json::to_vec(&spec).expect("job spec serializes"));
    let mut labels = task_labels(service, task);
    if !t.phase.is_always() {
        labels.insert(PHASE_LABEL.to_owned(), t.phase.to_string());
    }
    Job {
        metadata: meta(globals, &format!("{service}-{task}-{hash}"), labels),
        spec: Some(spec),
        ..Default::default()
    }
}
