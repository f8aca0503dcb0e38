//! The model (catalog + typed globals) to typed Kubernetes objects.
//!
//! Pure: no IO, no client. The same input gives the same objects in the same order
//! (`BTreeMap` everywhere, objects sorted by [`crate::Rendered`]).
//!
//! What is rendered today, per enabled service:
//! - a workload of the catalog's kind (Deployment, StatefulSet or DaemonSet) running the Kolla
//!   image with its own `dumb-init`/`kolla_start` entrypoint (no `command`), env
//!   `KOLLA_CONFIG_STRATEGY` and `KOLLA_SERVICE_NAME`, probes from the catalog health check;
//! - a Service (headless for a StatefulSet);
//! - a PersistentVolumeClaim per persistent volume (StatefulSets also get
//!   `volumeClaimTemplates`; their rendered claim is replica 0's, for the bootstrap Job);
//! - per container an immutable, content-hash named ConfigMap holding only Kolla's
//!   `config.json`, mounted read-only at `/var/lib/kolla/config_files`;
//! - a Job per `kolla_bootstrap` bootstrap task (same image and config mount, `KOLLA_BOOTSTRAP=""`).
//!
//! Deliberately absent: the OpenStack config file *contents* (`keystone.conf`, ...). They come
//! from templates in a later step; until then `config.json` names sources that the ConfigMap
//! does not hold, and no placeholder content is invented for them. Bootstrap tasks of the other
//! kinds (db_create, keystone_register, command) are not rendered yet either.

use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_k8s::api::apps::v1::{
    DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, DeploymentStrategy,
    RollingUpdateDeployment, StatefulSet, StatefulSetSpec,
};
use kstack_k8s::api::batch::v1::{Job, JobSpec};
use kstack_k8s::api::core::v1::{
    ConfigMap, ConfigMapProjection, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    ExecAction, HTTPGetAction, HostPathVolumeSource, Namespace, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, Probe,
    ProjectedVolumeSource, ResourceRequirements, SecurityContext, Service, ServicePort,
    ServiceSpec, Volume, VolumeMount, VolumeProjection, VolumeResourceRequirements,
};
use kstack_k8s::apimachinery::pkg::api::resource::Quantity;
use kstack_k8s::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kstack_k8s::apimachinery::pkg::util::intstr::IntOrString;
use kstack_model::catalog::{self, BootstrapKind, HealthTest, VolumeKind, WorkloadKind};
use kstack_model::globals::Globals;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::files::RenderError;
use crate::{Object, Rendered};

/// Where Kolla's `kolla_set_configs` reads `config.json` and its sources.
pub const KOLLA_CONFIG_DIR: &str = "/var/lib/kolla/config_files";
/// Label carrying the catalog service name; also the grouping key of [`Rendered::by_service`].
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// Label separating long-running pods (`server`) from bootstrap Job pods (`bootstrap`), so a
/// Service or workload selector never picks up a Job pod.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

/// Label naming the catalog bootstrap task a Job runs (the deploy engine orders Jobs by it).
pub const TASK_LABEL: &str = "kstack.io/task";

/// Startup probe: wait up to `STARTUP_FAILURES * STARTUP_PERIOD` seconds (10 min) for the first
/// success, because a first start may run migrations or wait for the database.
const STARTUP_PERIOD: i32 = 10;
const STARTUP_FAILURES: i32 = 60;
const JOB_BACKOFF_LIMIT: i32 = 6;

/// Kolla's `config.json` for one container (kolla 2025.1 keys only).
#[derive(Debug, Serialize)]
pub struct KollaConfig {
    pub command: String,
    pub config_files: Vec<KollaConfigFile>,
}

/// One `config_files` entry of [`KollaConfig`].
#[derive(Debug, Serialize)]
pub struct KollaConfigFile {
    pub source: String,
    pub dest: String,
    pub owner: String,
    pub perm: String,
}

impl KollaConfig {
    /// The `config.json` of a catalog container: sources under [`KOLLA_CONFIG_DIR`].
    pub fn for_container(c: &catalog::Container) -> KollaConfig {
        KollaConfig {
            command: c.command.clone(),
            config_files: c
                .config_files
                .iter()
                .map(|f| KollaConfigFile {
                    source: format!("{KOLLA_CONFIG_DIR}/{}", f.template),
                    dest: f.dest.clone(),
                    owner: f.owner.clone(),
                    perm: f.perm.clone(),
                })
                .collect(),
        }
    }

    /// Pretty JSON with a trailing newline; field order is fixed by the struct.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("config.json serializes");
        s.push('\n');
        s
    }
}

/// First 10 hex digits of the SHA-256 of `bytes`: the suffix of content-named objects.
pub fn short_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))[..10].to_owned()
}

/// Renders every enabled service of a loaded config directory, plus the namespace.
pub fn render(config: &Config) -> Result<Rendered, RenderError> {
    let globals = &config.globals;
    let mut objects = vec![Object::Namespace(namespace(globals))];
    for (name, service) in &config.catalog.services {
        if config.enabled.contains(name) {
            objects.extend(render_service(globals, name, service));
        }
    }
    Ok(Rendered::new(objects))
}

fn labels(service: &str, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_owned(), service.to_owned()),
        ("app.kubernetes.io/part-of".to_owned(), "kstack".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "kstack".to_owned(),
        ),
        (COMPONENT_LABEL.to_owned(), component.to_owned()),
    ])
}

/// Labels of a service's pods: kstack's own plus the operator's `kstack_pod_labels` (which
/// cannot override kstack's: globals validation rejects the `app.kubernetes.io/` prefix).
fn pod_labels(globals: &Globals, service: &str, component: &str) -> BTreeMap<String, String> {
    let mut l = globals.pod_labels.get(service).cloned().unwrap_or_default();
    l.extend(labels(service, component));
    l
}

fn selector(service: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_owned(), service.to_owned()),
        (COMPONENT_LABEL.to_owned(), "server".to_owned()),
    ])
}

fn meta(globals: &Globals, name: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(globals.kubernetes_namespace.clone()),
        labels: Some(labels),
        ..Default::default()
    }
}

fn namespace(globals: &Globals) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(globals.kubernetes_namespace.clone()),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/part-of".to_owned(), "kstack".to_owned()),
                (
                    "app.kubernetes.io/managed-by".to_owned(),
                    "kstack".to_owned(),
                ),
            ])),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The per-container pieces shared by the workload and the bootstrap Jobs.
struct ContainerParts {
    config_map: ConfigMap,
    volume: Volume,
    mount: VolumeMount,
}

fn config_parts(globals: &Globals, service: &str, c: &catalog::Container) -> ContainerParts {
    let json = KollaConfig::for_container(c).to_json();
    let cm_name = format!(
        "{service}-{}-config-json-{}",
        c.name,
        short_hash(json.as_bytes())
    );
    let config_map = ConfigMap {
        metadata: meta(globals, &cm_name, labels(service, "config")),
        data: Some(BTreeMap::from([("config.json".to_owned(), json)])),
        immutable: Some(true),
        ..Default::default()
    };
    let vol_name = format!("kolla-config-{}", c.name);
    let volume = Volume {
        name: vol_name.clone(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: cm_name,
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mount = VolumeMount {
        name: vol_name,
        mount_path: KOLLA_CONFIG_DIR.to_owned(),
        read_only: Some(true),
        ..Default::default()
    };
    ContainerParts {
        config_map,
        volume,
        mount,
    }
}

fn env(globals: &Globals, container: &str, bootstrap: bool) -> Vec<EnvVar> {
    let mut env = vec![
        EnvVar {
            name: "KOLLA_CONFIG_STRATEGY".into(),
            value: Some(globals.config_strategy.clone()),
            ..Default::default()
        },
        EnvVar {
            name: "KOLLA_SERVICE_NAME".into(),
            value: Some(container.replace('_', "-")),
            ..Default::default()
        },
    ];
    if bootstrap {
        // Present but empty: the image's extend_start runs its bootstrap branch and exits 0.
        env.push(EnvVar {
            name: "KOLLA_BOOTSTRAP".into(),
            value: Some(String::new()),
            ..Default::default()
        });
    }
    env
}

fn probe(h: &catalog::Healthcheck) -> Probe {
    let mut p = Probe::default();
    match &h.test {
        HealthTest::Http { port, path } => {
            p.http_get = Some(HTTPGetAction {
                port: IntOrString::Int(i32::from(*port)),
                path: Some(path.clone()),
                ..Default::default()
            })
        }
        HealthTest::Exec { command } => {
            p.exec = Some(ExecAction {
                command: Some(command.clone()),
            })
        }
    }
    p
}

fn probes(h: &catalog::Healthcheck) -> (Probe, Probe, Probe) {
    let secs = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    let steady = Probe {
        period_seconds: Some(secs(h.interval_secs)),
        timeout_seconds: Some(secs(h.timeout_secs)),
        failure_threshold: Some(secs(h.retries)),
        ..probe(h)
    };
    let startup = Probe {
        initial_delay_seconds: Some(secs(h.start_period_secs)),
        period_seconds: Some(STARTUP_PERIOD),
        timeout_seconds: Some(secs(h.timeout_secs)),
        failure_threshold: Some(STARTUP_FAILURES),
        ..probe(h)
    };
    (steady.clone(), steady, startup)
}

/// Volumes and mounts of the catalog's data volumes. `claim` names the PVC of a persistent
/// volume when the pod does not get it from a StatefulSet template.
fn data_volumes(
    service: &catalog::Service,
    claim: impl Fn(&catalog::Volume) -> Option<String>,
) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    for v in &service.volumes {
        let source = match &v.kind {
            VolumeKind::PersistentClaim { .. } => claim(v).map(|claim_name| Volume {
                name: v.name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name,
                    read_only: None,
                }),
                ..Default::default()
            }),
            VolumeKind::HostPath { path } => Some(Volume {
                name: v.name.clone(),
                host_path: Some(HostPathVolumeSource {
                    path: path.clone(),
                    type_: Some("DirectoryOrCreate".into()),
                }),
                ..Default::default()
            }),
            VolumeKind::SharedEmptyDir => Some(Volume {
                name: v.name.clone(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            }),
        };
        volumes.extend(source);
        mounts.push(VolumeMount {
            name: v.name.clone(),
            mount_path: v.mount_path.clone(),
            read_only: v.read_only.then_some(true),
            ..Default::default()
        });
    }
    (volumes, mounts)
}

fn pvc_spec(globals: &Globals, size: &str) -> PersistentVolumeClaimSpec {
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

fn pod_spec(
    globals: &Globals,
    service: &catalog::Service,
    containers: Vec<Container>,
    volumes: Vec<Volume>,
) -> PodSpec {
    let p = &service.privileges;
    let (key, value) = globals.role_label(&service.role.to_string());
    PodSpec {
        containers,
        volumes: Some(volumes),
        node_selector: Some(BTreeMap::from([(key, value)])),
        host_network: p.host_network.then_some(true),
        host_pid: p.host_pid.then_some(true),
        host_ipc: p.host_ipc.then_some(true),
        // On the host network the pod must resolve cluster names through the cluster DNS.
        dns_policy: p.host_network.then(|| "ClusterFirstWithHostNet".to_owned()),
        ..Default::default()
    }
}

fn security_context(service: &catalog::Service) -> Option<SecurityContext> {
    service.privileges.privileged.then(|| SecurityContext {
        privileged: Some(true),
        ..Default::default()
    })
}

fn resources(globals: &Globals, service: &str) -> Option<ResourceRequirements> {
    let r = globals.resources.get(service)?;
    let mut requests = BTreeMap::new();
    if let Some(cpu) = &r.cpu {
        requests.insert("cpu".to_owned(), Quantity(cpu.clone()));
    }
    if let Some(mem) = &r.memory {
        requests.insert("memory".to_owned(), Quantity(mem.clone()));
    }
    Some(ResourceRequirements {
        requests: Some(requests),
        ..Default::default()
    })
}

fn render_service(globals: &Globals, name: &str, service: &catalog::Service) -> Vec<Object> {
    let mut out = Vec::new();
    let is_sts = service.kind == WorkloadKind::StatefulSet;

    // Persistent volumes outside a StatefulSet: one claim each, named <service>-<volume>.
    // For a StatefulSet the claim of replica 0 (`<volume>-<service>-0`, the name the
    // StatefulSet controller would give it, so it adopts it) is rendered too: the bootstrap Job
    // runs before the StatefulSet exists and must find the claim to write the data volume.
    let claim = |v: &catalog::Volume| Some(format!("{name}-{}", v.name));
    for v in &service.volumes {
        if let VolumeKind::PersistentClaim { size } = &v.kind {
            let claim_name = if is_sts {
                format!("{}-{name}-0", v.name)
            } else {
                format!("{name}-{}", v.name)
            };
            out.push(Object::PersistentVolumeClaim(PersistentVolumeClaim {
                metadata: meta(globals, &claim_name, labels(name, "data")),
                spec: Some(pvc_spec(globals, size)),
                ..Default::default()
            }));
        }
    }
    let (data_vols, data_mounts) = data_volumes(service, |v| (!is_sts).then(|| claim(v)).flatten());

    let mut containers = Vec::new();
    let mut volumes = Vec::new();
    let mut parts_by_container = BTreeMap::new();
    for (i, c) in service.containers.iter().enumerate() {
        let parts = config_parts(globals, name, c);
        let mut mounts = vec![parts.mount.clone()];
        mounts.extend(data_mounts.iter().cloned());
        let (readiness, liveness, startup) = match &c.healthcheck {
            Some(h) => {
                let (r, l, s) = probes(h);
                (Some(r), Some(l), Some(s))
            }
            None => (None, None, None),
        };
        // Ports belong to the service in the catalog; declare them on the first container.
        let ports = (i == 0 && !service.ports.is_empty()).then(|| {
            service
                .ports
                .iter()
                .map(|p| ContainerPort {
                    name: Some(p.name.clone()),
                    container_port: i32::from(p.port),
                    protocol: Some(protocol(p.protocol)),
                    ..Default::default()
                })
                .collect()
        });
        containers.push(Container {
            name: c.name.clone(),
            image: Some(globals.image_ref(&service.project, &c.image)),
            env: Some(env(globals, &c.name, false)),
            ports,
            volume_mounts: Some(mounts),
            readiness_probe: readiness,
            liveness_probe: liveness,
            startup_probe: startup,
            security_context: security_context(service),
            resources: resources(globals, name),
            ..Default::default()
        });
        volumes.push(parts.volume.clone());
        out.push(Object::ConfigMap(parts.config_map.clone()));
        parts_by_container.insert(c.name.clone(), parts);
    }
    volumes.extend(data_vols);

    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels(globals, name, "server")),
            ..Default::default()
        }),
        spec: Some(pod_spec(globals, service, containers, volumes)),
    };
    let sel = LabelSelector {
        match_labels: Some(selector(name)),
        ..Default::default()
    };
    let replicas = i32::try_from(globals.replicas_for(name)).unwrap_or(i32::MAX);
    let wl_meta = meta(globals, name, labels(name, "server"));

    match service.kind {
        WorkloadKind::Deployment => out.push(Object::Deployment(Deployment {
            metadata: wl_meta,
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                selector: sel,
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
        })),
        WorkloadKind::StatefulSet => {
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
                metadata: wl_meta,
                spec: Some(StatefulSetSpec {
                    replicas: Some(replicas),
                    selector: sel,
                    service_name: Some(name.to_owned()),
                    template,
                    volume_claim_templates: (!claims.is_empty()).then_some(claims),
                    ..Default::default()
                }),
                ..Default::default()
            }))
        }
        WorkloadKind::DaemonSet => out.push(Object::DaemonSet(DaemonSet {
            metadata: wl_meta,
            spec: Some(DaemonSetSpec {
                selector: sel,
                template,
                ..Default::default()
            }),
            ..Default::default()
        })),
    }

    if let Some(svc) = service_object(globals, name, service) {
        out.push(Object::Service(svc));
    }

    for task in &service.bootstrap {
        if let BootstrapKind::KollaBootstrap { container } = &task.task {
            let c = container
                .as_ref()
                .and_then(|n| service.containers.iter().find(|c| &c.name == n))
                .or_else(|| service.containers.first());
            let Some(c) = c else { continue };
            let Some(parts) = parts_by_container.get(&c.name) else {
                continue;
            };
            // StatefulSet data lives in the first replica's claim (`<volume>-<service>-0`).
            let (jvols, jmounts) = data_volumes(service, |v| {
                Some(if is_sts {
                    format!("{}-{name}-0", v.name)
                } else {
                    format!("{name}-{}", v.name)
                })
            });
            out.push(Object::Job(bootstrap_job(
                globals, name, service, c, &task.name, parts, jvols, jmounts,
            )));
        }
    }
    out
}

fn protocol(p: catalog::Protocol) -> String {
    match p {
        catalog::Protocol::Tcp => "TCP".into(),
        catalog::Protocol::Udp => "UDP".into(),
    }
}

fn service_object(globals: &Globals, name: &str, service: &catalog::Service) -> Option<Service> {
    let headless = service.kind == WorkloadKind::StatefulSet;
    // A StatefulSet's governing Service lists every port (peers talk on them); others only
    // the ports the catalog exposes.
    let ports: Vec<ServicePort> = service
        .ports
        .iter()
        .filter(|p| headless || p.expose)
        .map(|p| ServicePort {
            name: Some(p.name.clone()),
            port: i32::from(p.port),
            target_port: Some(IntOrString::Int(i32::from(p.port))),
            protocol: Some(protocol(p.protocol)),
            ..Default::default()
        })
        .collect();
    if ports.is_empty() && !headless {
        return None;
    }
    Some(Service {
        metadata: meta(globals, name, labels(name, "server")),
        spec: Some(ServiceSpec {
            selector: Some(selector(name)),
            ports: (!ports.is_empty()).then_some(ports),
            cluster_ip: headless.then(|| "None".to_owned()),
            // Clustered stores (galera, rabbitmq) must find peers before they are ready.
            publish_not_ready_addresses: headless.then_some(true),
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[allow(clippy::too_many_arguments)]
fn bootstrap_job(
    globals: &Globals,
    name: &str,
    service: &catalog::Service,
    c: &catalog::Container,
    task: &str,
    parts: &ContainerParts,
    data_vols: Vec<Volume>,
    data_mounts: Vec<VolumeMount>,
) -> Job {
    let mut mounts = vec![parts.mount.clone()];
    mounts.extend(data_mounts);
    let mut volumes = vec![parts.volume.clone()];
    volumes.extend(data_vols);
    let container = Container {
        name: c.name.clone(),
        image: Some(globals.image_ref(&service.project, &c.image)),
        env: Some(env(globals, &c.name, true)),
        volume_mounts: Some(mounts),
        security_context: security_context(service),
        ..Default::default()
    };
    let mut pod = pod_spec(globals, service, vec![container], volumes);
    pod.restart_policy = Some("OnFailure".into());
    let spec = JobSpec {
        backoff_limit: Some(JOB_BACKOFF_LIMIT),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(pod_labels(globals, name, "bootstrap")),
                ..Default::default()
            }),
            spec: Some(pod),
        },
        ..Default::default()
    };
    // A Job's pod template is immutable: a changed spec is a new Job, named by its hash.
    let hash = short_hash(&serde_json::to_vec(&spec).expect("job spec serializes"));
    let mut job_labels = labels(name, "bootstrap");
    job_labels.insert(TASK_LABEL.to_owned(), task.to_owned());
    Job {
        metadata: meta(globals, &format!("{name}-{task}-{hash}"), job_labels),
        spec: Some(spec),
        ..Default::default()
    }
}
