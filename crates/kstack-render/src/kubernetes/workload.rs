//! The objects of one catalog service: its claims and key repositories, config objects, the
//! workload (Deployment, StatefulSet, or DaemonSet with its per-host variants), Services,
//! PodDisruptionBudget, key rotation and bootstrap Jobs.
use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_k8s::api::apps::v1::{
    DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, DeploymentStrategy,
    RollingUpdateDeployment, StatefulSet, StatefulSetSpec,
};
use kstack_k8s::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodTemplateSpec, VolumeResourceRequirements,
};
use kstack_k8s::apimachinery::pkg::api::resource::Quantity;
use kstack_k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstack_k8s::apimachinery::pkg::util::intstr::IntOrString;
use kstack_model::catalog::{self, TaskTarget, VolumeKind, WorkloadKind};
use kstack_model::globals::Globals;
use kstack_model::labels::{SERVER, VARIANT_LABEL};

use super::config::secret_env;
use super::pod::{claim_name, pin, spread};
use super::services::{disruption_budget, service_objects};
use super::{Renderer, keys, label_selector, labels, meta, selector};
use crate::Object;
use crate::files::RenderError;
use crate::names::{peers_service, short_hash};

impl Renderer<'_> {
    pub(super) fn service(
        &self,
        name: &str,
        service: &catalog::Service,
    ) -> Result<Vec<Object>, RenderError> {
        let globals = self.globals;
        let mut out = Vec::new();
        let is_sts = service.kind == WorkloadKind::StatefulSet;

        // Persistent volumes outside a StatefulSet: one claim each, named <service>-<volume>.
        // For a StatefulSet the claim of replica 0 (`<volume>-<service>-0`, the name the
        // StatefulSet controller would give it, so it adopts it) is rendered too: the bootstrap
        // Job runs before the StatefulSet exists and must find the claim to write the data volume.
        for v in &service.volumes {
            match &v.kind {
                VolumeKind::PersistentClaim { size } => {
                    out.push(Object::PersistentVolumeClaim(PersistentVolumeClaim {
                        metadata: meta(globals, &claim_name(name, is_sts, v), labels(name, "data")),
                        spec: Some(pvc_spec(globals, size)),
                        ..Default::default()
                    }))
                }
                VolumeKind::KeyRepository { .. } => out.push(Object::Secret(
                    keys::repository_secret(globals, name, &v.name),
                )),
                VolumeKind::HostPath { .. } | VolumeKind::SharedEmptyDir => {}
            }
        }

        let parts = self.parts(name, service, None);
        for p in parts.values() {
            out.extend(p.objects.iter().cloned());
        }
        // Containers' env from passwords.yml: a Secret per container, `secretKeyRef`s to it.
        let mut secret_vars = BTreeMap::new();
        for c in &service.containers {
            let values = crate::files::container_secret_env(self.config, name, c)?;
            if values.is_empty() {
                continue;
            }
            let pairs: Vec<(&str, &str)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            let (secret, vars) = secret_env(
                globals,
                &self.names,
                &format!("{name}-{}", c.name),
                labels(name, "config"),
                &pairs,
            );
            out.push(secret);
            secret_vars.insert(c.name.clone(), vars);
        }
        let hosts = host_variants_of(self.config, name);
        let replicas = i32::try_from(globals.replicas_for(name)).unwrap_or(i32::MAX);

        match service.kind {
            WorkloadKind::Deployment => {
                let mut template = self.pod_template(name, service, &parts, &secret_vars, None);
                if replicas > 1 {
                    spread(&mut template, name);
                }
                out.push(Object::Deployment(Deployment {
                    metadata: meta(globals, name, labels(name, SERVER)),
                    spec: Some(DeploymentSpec {
                        replicas: Some(replicas),
                        selector: label_selector(selector(name)),
                        template,
                        // Never take an API replica away before its successor is ready.
                        strategy: Some(DeploymentStrategy {
                            type_: Some("RollingUpdate".into()),
                            rolling_update: Some(RollingUpdateDeployment {
                                max_unavailable: Some(IntOrString::Int(0)),
                                max_surge: Some(IntOrString::Int(1)),
                            }),
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }))
            }
            WorkloadKind::StatefulSet => {
                let mut template = self.pod_template(name, service, &parts, &secret_vars, None);
                if replicas > 1 {
                    spread(&mut template, name);
                }
                let claims = service
                    .volumes
                    .iter()
                    .filter_map(|v| match &v.kind {
                        VolumeKind::PersistentClaim { size } => Some(PersistentVolumeClaim {
                            metadata: ObjectMeta {
                                name: Some(v.name.clone()),
                                labels: Some(labels(name, "data")),
                                ..Default::default()
                            },
                            spec: Some(pvc_spec(globals, size)),
                            ..Default::default()
                        }),
                        _ => None,
                    })
                    .collect::<Vec<_>>();
                out.push(Object::StatefulSet(StatefulSet {
                    metadata: meta(globals, name, labels(name, SERVER)),
                    spec: Some(StatefulSetSpec {
                        replicas: Some(replicas),
                        selector: label_selector(selector(name)),
                        service_name: Some(peers_service(name)),
                        // Every pod starts at once, not one after another's readiness: after a
                        // stop of the whole cluster, the member that must start it first (the
                        // most advanced Galera position, the last RabbitMQ node to stop) may be
                        // any of them. Rolling updates still replace one pod at a time.
                        pod_management_policy: Some("Parallel".to_owned()),
                        template,
                        volume_claim_templates: (!claims.is_empty()).then_some(claims),
                        ..Default::default()
                    }),
                    ..Default::default()
                }))
            }
            WorkloadKind::DaemonSet => {
                // The main DaemonSet keeps off the hosts that have a variant of their own.
                let mut template =
                    self.pod_template(name, service, &parts, &secret_vars, Some("all"));
                if !hosts.is_empty() {
                    pin(&mut template, "NotIn", hosts.to_vec());
                }
                out.push(Object::DaemonSet(daemon_set(
                    globals, name, name, "all", template,
                )));
                for host in &hosts {
                    let variant = short_hash(host.as_bytes());
                    let hparts = self.parts(name, service, Some(host));
                    for p in hparts.values() {
                        out.extend(p.objects.iter().cloned());
                    }
                    let mut template =
                        self.pod_template(name, service, &hparts, &secret_vars, Some(&variant));
                    pin(&mut template, "In", vec![host.clone()]);
                    out.push(Object::DaemonSet(daemon_set(
                        globals,
                        name,
                        &format!("{name}-{variant}"),
                        &variant,
                        template,
                    )));
                }
            }
        }

        out.extend(
            service_objects(self.config, name, service)
                .into_iter()
                .map(Object::Service),
        );
        if replicas > 1 && service.kind != WorkloadKind::DaemonSet {
            out.push(Object::PodDisruptionBudget(disruption_budget(
                globals, name,
            )));
        }

        out.extend(keys::rotation(globals, name, service));

        for task in service
            .bootstrap
            .iter()
            .filter(|t| t.runs_on(TaskTarget::Kubernetes))
        {
            out.extend(self.task(name, service, &parts, task)?);
        }
        Ok(out)
    }
}

pub(super) fn pvc_spec(globals: &Globals, size: &str) -> PersistentVolumeClaimSpec {
    PersistentVolumeClaimSpec {
        access_modes: Some(vec!["ReadWriteOnce".into()]),
        storage_class_name: globals.storage_class.clone(),
        resources: Some(VolumeResourceRequirements {
            requests: Some(BTreeMap::from([(
                "storage".to_owned(),
                Quantity(size.to_owned()),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Hosts with a per-host variant of a DaemonSet service.
fn host_variants_of(config: &Config, service: &str) -> Vec<String> {
    crate::files::host_variants(config)
        .remove(service)
        .map(|h| h.into_iter().collect())
        .unwrap_or_default()
}

fn daemon_set(
    globals: &Globals,
    service: &str,
    name: &str,
    variant: &str,
    template: PodTemplateSpec,
) -> DaemonSet {
    let mut sel = selector(service);
    sel.insert(VARIANT_LABEL.to_owned(), variant.to_owned());
    DaemonSet {
        metadata: meta(globals, name, labels(service, SERVER)),
        spec: Some(DaemonSetSpec {
            selector: label_selector(sel),
            template,
            ..Default::default()
        }),
        ..Default::default()
    }
}
