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
//!   Secrets projected at [`KOLLA_CONFIG_DIR`] and its secret env a `secretKeyRef` on an
//!   immutable Secret.
//!
//! No secret is ever an env literal: passwords reach env only through `secretKeyRef`. The hash
//! in a Secret's name is keyed ([`SecretNames`]), so the name tells nothing of what it holds.
//!
//! Two kinds of objects have a module of their own: [`keys`], a key repository's Secret and the
//! CronJob that rotates its keys, and [`rbac`], the access kstack itself needs to deploy
//! (`kstack template --rbac`).

use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_k8s::api::apps::v1::{
    DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, DeploymentStrategy,
    RollingUpdateDeployment, StatefulSet, StatefulSetSpec,
};
use kstack_k8s::api::batch::v1::{Job, JobSpec};
use kstack_k8s::api::core::v1::{
    Affinity, ConfigMap, ConfigMapProjection, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, ExecAction, HTTPGetAction, HostPathVolumeSource, KeyToPath, Lifecycle,
    LifecycleHandler, Namespace, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, PodAffinityTerm, PodAntiAffinity, PodSecurityContext,
    PodSpec, PodTemplateSpec, Probe, ProjectedVolumeSource, ResourceRequirements, Secret,
    SecretKeySelector, SecretProjection, SecretVolumeSource, SecurityContext, Service, ServicePort,
    ServiceSpec, SleepAction, Volume, VolumeMount, VolumeProjection, VolumeResourceRequirements,
    WeightedPodAffinityTerm,
};
use kstack_k8s::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use kstack_k8s::apimachinery::pkg::api::resource::Quantity;
use kstack_k8s::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kstack_k8s::apimachinery::pkg::util::intstr::IntOrString;
use kstack_k8s::k8s_openapi::ByteString;
use kstack_model::catalog::{self, HealthTest, TaskTarget, VolumeKind, WorkloadKind};
use kstack_model::globals::Globals;
use kstack_model::labels::{
    BOOTSTRAP, COMPONENT_LABEL, HOSTNAME_LABEL, MANAGED_BY, NAME_LABEL, PART_OF, PHASE_LABEL,
    SERVER, TASK_LABEL, VARIANT_LABEL,
};

use crate::files::{ContainerFiles, DRAIN_SECS, RenderError, RenderedFile, Target, render_files};
use crate::kolla::KOLLA_CONFIG_DIR;
use crate::names::{SecretNames, peers_service, short_hash};
use crate::tasks::{self, FilesOf};
use crate::{Object, Rendered};

pub mod keys;
pub mod rbac;

/// Startup probe: wait up to `STARTUP_SECS` (10 min) for the first success, because a first
/// start may run migrations or wait for the database, checking every
/// [`catalog::Healthcheck::start_interval`] seconds from the start.
const STARTUP_SECS: u32 = 600;
/// How much longer than readiness the liveness probe waits (timeout and failures) before a
/// restart: with Kolla's timings, 60 s per check and 6 failures, 3 min of a failing check.
const LIVENESS_SLACK: i32 = 2;
const JOB_BACKOFF_LIMIT: i32 = 6;

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

fn namespace(globals: &Globals) -> Namespace {
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

/// A container's arguments as written: the kubelet expands `$(VAR)` in `command` and `args`
/// from the container's env (a globals value such as `RegionOne$(OS_BOOTSTRAP_PASSWORD)` would
/// put a password in a public field), and `$$` is its escape for `$`.
fn literal_args(args: &[String]) -> Vec<String> {
    args.iter().map(|a| a.replace('$', "$$")).collect()
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
    // The first check as soon as the container runs and then every start interval, so that a
    // service is seen ready within that interval of being so (Kolla's start period, a grace
    // time for failures, is the threshold's 10 minutes here).
    let interval = h.start_interval().max(1);
    let startup = Probe {
        period_seconds: Some(secs(interval)),
        timeout_seconds: Some(secs(h.timeout_secs)),
        failure_threshold: Some(secs(STARTUP_SECS.div_ceil(interval))),
        ..probe(h)
    };
    // Docker only marks a container unhealthy; a failed liveness probe restarts it. A busy
    // node can make a check slow (RabbitMQ's starts an Erlang VM each time), so liveness
    // gives it LIVENESS_SLACK times the time and the tries before it restarts anything:
    // restarting a slow broker or database only makes the node busier.
    let liveness = Probe {
        timeout_seconds: Some(secs(h.timeout_secs).saturating_mul(LIVENESS_SLACK)),
        failure_threshold: Some(secs(h.retries).saturating_mul(LIVENESS_SLACK)),
        ..steady.clone()
    };
    (steady, liveness, startup)
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
            // Whole-directory mount (never subPath): the kubelet swaps the files in place when
            // the rotation updates the Secret, and the service reads the new keys.
            VolumeKind::KeyRepository { .. } => Some(Volume {
                name: v.name.clone(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(v.name.clone()),
                    default_mode: Some(keys::KEY_MODE),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        };
        volumes.extend(source);
        let read_only = v.read_only || matches!(v.kind, VolumeKind::KeyRepository { .. });
        mounts.push(VolumeMount {
            name: v.name.clone(),
            mount_path: v.mount_path.clone(),
            read_only: read_only.then_some(true),
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
    let (node_selector, affinity) = placement(globals, service.role);
    // The group that may read a key repository's Secret files (mode KEY_MODE).
    let fs_group = service.volumes.iter().find_map(|v| match v.kind {
        VolumeKind::KeyRepository { fs_group, .. } => Some(fs_group),
        _ => None,
    });
    PodSpec {
        security_context: fs_group.map(|g| PodSecurityContext {
            fs_group: Some(g),
            ..Default::default()
        }),
        containers,
        volumes: Some(volumes),
        node_selector,
        affinity,
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

/// The `preStop` script of a container with a graceful stop signal: the drain, then the signal,
/// then a wait until what got it has exited (the pod's grace period bounds the wait).
/// `main` signals PID 1, the image's init, which passes the signal on to the service's process.
/// `workers` signals the children of that process (the init's oldest child): a pre-forking
/// server's parent respawns a worker that exits, but those new workers get no connection after
/// the drain and stop with the parent on SIGTERM.
fn graceful_stop(sig: &str, to: catalog::StopTarget, drain: i64) -> String {
    match to {
        catalog::StopTarget::Main => {
            format!("sleep {drain}; kill -{sig} 1; while kill -0 1 2>/dev/null; do sleep 1; done")
        }
        catalog::StopTarget::Workers => format!(
            "sleep {drain}; w=$(pgrep -P \"$(pgrep -o -P 1)\"); [ -n \"$w\" ] || exit 0; \
             kill -{sig} $w; for p in $w; do while kill -0 $p 2>/dev/null; do sleep 1; done; done"
        ),
    }
}

fn protocol(p: catalog::Protocol) -> String {
    match p {
        catalog::Protocol::Tcp => "TCP".into(),
        catalog::Protocol::Udp => "UDP".into(),
    }
}

/// The Services of a catalog service: `<service>`, what clients use, with the ports the catalog
/// exposes and only ready pods behind it; and for a StatefulSet its governing headless Service
/// ([`peers_service`]).
fn service_objects(globals: &Globals, name: &str, service: &catalog::Service) -> Vec<Service> {
    let ports = |all: bool| -> Vec<ServicePort> {
        service
            .ports
            .iter()
            .filter(|p| all || p.expose)
            .map(|p| ServicePort {
                name: Some(p.name.clone()),
                port: i32::from(p.port),
                target_port: Some(IntOrString::Int(i32::from(p.port))),
                protocol: Some(protocol(p.protocol)),
                ..Default::default()
            })
            .collect()
    };
    let mut out = Vec::new();
    let exposed = ports(false);
    if !exposed.is_empty() {
        out.push(Service {
            metadata: meta(globals, name, labels(name, SERVER)),
            spec: Some(ServiceSpec {
                selector: Some(selector(name)),
                ports: Some(exposed),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if service.kind == WorkloadKind::StatefulSet {
        let all = ports(true);
        out.push(Service {
            metadata: meta(globals, &peers_service(name), labels(name, "peers")),
            spec: Some(ServiceSpec {
                selector: Some(selector(name)),
                ports: (!all.is_empty()).then_some(all),
                cluster_ip: Some("None".to_owned()),
                publish_not_ready_addresses: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    out
}

/// Keeps all but one replica of a replicated service running through voluntary disruptions
/// (node drains, evictions): a Galera or RabbitMQ cluster of three keeps its quorum.
fn disruption_budget(globals: &Globals, name: &str) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(globals, name, labels(name, SERVER)),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(label_selector(selector(name))),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where a service's pods may run: the nodes of its role (a node selector on the role label),
/// or for [`catalog::Role::Every`] the nodes carrying any role (a required node affinity with
/// one term per role; the terms are alternatives).
fn placement(
    globals: &Globals,
    role: catalog::Role,
) -> (Option<BTreeMap<String, String>>, Option<Affinity>) {
    if role != catalog::Role::Every {
        let (key, value) = globals.role_label(&role.to_string());
        return (Some(BTreeMap::from([(key, value)])), None);
    }
    let terms = kstack_model::globals::ROLES
        .iter()
        .map(|r| {
            let (key, value) = globals.role_label(r);
            NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key,
                    operator: "In".to_owned(),
                    values: Some(vec![value]),
                }]),
                ..Default::default()
            }
        })
        .collect();
    let affinity = Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: terms,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    (None, Some(affinity))
}

/// Spreads the replicas of a service over the nodes of its role where it can: a preferred
/// anti-affinity on `kubernetes.io/hostname` (a single node still runs them all).
fn spread(template: &mut PodTemplateSpec, name: &str) {
    if let Some(spec) = template.spec.as_mut() {
        let affinity = spec.affinity.get_or_insert_with(Default::default);
        affinity.pod_anti_affinity = Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(label_selector(selector(name))),
                        topology_key: HOSTNAME_LABEL.to_owned(),
                        ..Default::default()
                    },
                },
            ]),
            ..Default::default()
        });
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

/// A Kubernetes object name from a file name: lower case, `[a-z0-9.-]` only.
fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
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

/// One file as its own immutable object, named `<prefix>-<hash of the content>`: a Secret if
/// it carries a passwords.yml value (its hash keyed, [`SecretNames`]), else a ConfigMap.
/// Returns it with its volume projection (the file name as key and path).
fn file_object(
    globals: &Globals,
    names: &SecretNames,
    prefix: &str,
    labels: BTreeMap<String, String>,
    file: &RenderedFile,
) -> (Object, VolumeProjection) {
    let hash = if file.secret {
        names.hash(file.content.as_bytes())
    } else {
        short_hash(file.content.as_bytes())
    };
    let name = format!("{prefix}-{hash}");
    let items = Some(vec![KeyToPath {
        key: file.name.clone(),
        path: file.name.clone(),
        mode: None,
    }]);
    if file.secret {
        let object = Object::Secret(Secret {
            metadata: meta(globals, &name, labels),
            data: Some(BTreeMap::from([(
                file.name.clone(),
                ByteString(file.content.as_bytes().to_vec()),
            )])),
            immutable: Some(true),
            type_: Some("Opaque".into()),
            ..Default::default()
        });
        let projection = VolumeProjection {
            secret: Some(SecretProjection {
                name,
                items,
                ..Default::default()
            }),
            ..Default::default()
        };
        (object, projection)
    } else {
        let object = Object::ConfigMap(ConfigMap {
            metadata: meta(globals, &name, labels),
            data: Some(BTreeMap::from([(file.name.clone(), file.content.clone())])),
            immutable: Some(true),
            ..Default::default()
        });
        let projection = VolumeProjection {
            config_map: Some(ConfigMapProjection {
                name,
                items,
                ..Default::default()
            }),
            ..Default::default()
        };
        (object, projection)
    }
}

/// Files as objects, mounted together read-only at `mount_path` through one projected volume
/// named `volume_name`.
fn files_volume(
    globals: &Globals,
    names: &SecretNames,
    owner: &str,
    prefix: impl Fn(&RenderedFile) -> String,
    labels: &BTreeMap<String, String>,
    files: &[RenderedFile],
    (volume_name, mount_path): (&str, &str),
) -> ContainerParts {
    let mut objects = Vec::new();
    let mut sources = Vec::new();
    for f in files {
        let (o, p) = file_object(globals, names, &prefix(f), labels.clone(), f);
        debug_assert_eq!(o.service(), Some(owner));
        objects.push(o);
        sources.push(p);
    }
    ContainerParts {
        objects,
        volume: Volume {
            name: volume_name.to_owned(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(sources),
                ..Default::default()
            }),
            ..Default::default()
        },
        mount: VolumeMount {
            name: volume_name.to_owned(),
            mount_path: mount_path.to_owned(),
            read_only: Some(true),
            ..Default::default()
        },
    }
}

/// The objects and volume of one container's Kolla config directory, owned by `owner`.
fn config_parts(
    globals: &Globals,
    names: &SecretNames,
    owner: &str,
    files: &ContainerFiles,
) -> ContainerParts {
    let container = &files.container;
    files_volume(
        globals,
        names,
        owner,
        |f| {
            if f.name == "config.json" {
                format!("{owner}-{container}-config-json")
            } else {
                format!("{owner}-{}", slug(&f.name))
            }
        },
        &labels(owner, "config"),
        &files.files,
        (&format!("kolla-config-{container}"), KOLLA_CONFIG_DIR),
    )
}

/// An env var set from a literal (never a secret).
fn literal(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// A long-running container's env: Kolla's own, then the catalog's plain env.
fn env(globals: &Globals, c: &catalog::Container) -> Vec<EnvVar> {
    let mut env = vec![
        literal("KOLLA_CONFIG_STRATEGY", globals.config_strategy.clone()),
        literal("KOLLA_SERVICE_NAME", c.name.replace('_', "-")),
    ];
    env.extend(
        c.plain_env(&globals.vars)
            .into_iter()
            .map(|(k, v)| literal(&k, v)),
    );
    env.extend(c.pod_field_env.iter().map(|(k, path)| EnvVar {
        name: k.clone(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }));
    env
}

/// Env from passwords: the values go into one immutable Secret (`<prefix>-env-<keyed hash>`,
/// e.g. `<service>-<task>` or `<service>-<container>`) and the env vars refer to it by
/// `secretKeyRef`.
fn secret_env(
    globals: &Globals,
    names: &SecretNames,
    prefix: &str,
    labels: BTreeMap<String, String>,
    pairs: &[(&str, &str)],
) -> (Object, Vec<EnvVar>) {
    let data: BTreeMap<String, ByteString> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect();
    let hash = names.hash(&serde_json::to_vec(&data).expect("env data serializes"));
    let name = format!("{prefix}-env-{hash}");
    let vars = pairs
        .iter()
        .map(|(k, _)| EnvVar {
            name: (*k).to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: name.clone(),
                    key: (*k).to_owned(),
                    optional: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    let secret = Object::Secret(Secret {
        metadata: meta(globals, &name, labels),
        data: Some(data),
        immutable: Some(true),
        type_: Some("Opaque".into()),
        ..Default::default()
    });
    (secret, vars)
}

impl Renderer<'_> {
    /// The files of one container (`host: None`) or of its per-host variant.
    fn container_files(
        &self,
        service: &str,
        container: &str,
        host: Option<&str>,
    ) -> Option<&ContainerFiles> {
        self.files
            .iter()
            .find(|f| f.service == service && f.container == container && f.host.as_deref() == host)
    }

    fn service(&self, name: &str, service: &catalog::Service) -> Result<Vec<Object>, RenderError> {
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
            service_objects(globals, name, service)
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

    /// Config parts by container name, for the main workload or a host variant.
    fn parts(
        &self,
        name: &str,
        service: &catalog::Service,
        host: Option<&str>,
    ) -> BTreeMap<String, ContainerParts> {
        let mut m = BTreeMap::new();
        for c in &service.containers {
            if let Some(files) = self.container_files(name, &c.name, host) {
                m.insert(
                    c.name.clone(),
                    config_parts(self.globals, &self.names, name, files),
                );
            }
        }
        m
    }

    fn pod_template(
        &self,
        name: &str,
        service: &catalog::Service,
        parts: &BTreeMap<String, ContainerParts>,
        secret_vars: &BTreeMap<String, Vec<EnvVar>>,
        variant: Option<&str>,
    ) -> PodTemplateSpec {
        let globals = self.globals;
        let is_sts = service.kind == WorkloadKind::StatefulSet;
        let (data_vols, data_mounts) =
            data_volumes(service, |v| (!is_sts).then(|| claim_name(name, false, v)));
        let mut containers = Vec::new();
        let mut volumes = Vec::new();
        for (i, c) in service.containers.iter().enumerate() {
            let mut mounts = Vec::new();
            if let Some(p) = parts.get(&c.name) {
                mounts.push(p.mount.clone());
                volumes.push(p.volume.clone());
            }
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
            // A Deployment's serving pod drains before it stops (see DRAIN_SECS).
            // With a graceful stop signal, the hook sends it after the drain to PID 1 (the
            // image's dumb-init, which passes it on) and waits until the process has finished
            // what it serves and exited (the pod's grace period bounds the wait).
            let drains = ports.is_some() && service.kind == WorkloadKind::Deployment;
            let pre_stop = match (&c.stop_signal, drains) {
                _ if !c.pre_stop.is_empty() => Some(LifecycleHandler {
                    exec: Some(ExecAction {
                        command: Some(c.pre_stop.clone()),
                    }),
                    ..Default::default()
                }),
                (Some(sig), _) => Some(LifecycleHandler {
                    exec: Some(ExecAction {
                        command: Some(vec![
                            "/bin/sh".into(),
                            "-c".into(),
                            graceful_stop(
                                sig,
                                c.stop_signal_to,
                                if drains { DRAIN_SECS } else { 0 },
                            ),
                        ]),
                    }),
                    ..Default::default()
                }),
                (None, true) => Some(LifecycleHandler {
                    sleep: Some(SleepAction {
                        seconds: DRAIN_SECS,
                    }),
                    ..Default::default()
                }),
                (None, false) => None,
            };
            let post_start = (!c.post_start.is_empty()).then(|| LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(c.post_start.clone()),
                }),
                ..Default::default()
            });
            let lifecycle = (pre_stop.is_some() || post_start.is_some()).then(|| Lifecycle {
                pre_stop,
                post_start,
                ..Default::default()
            });
            containers.push(Container {
                name: c.name.clone(),
                image: Some(globals.image_ref(&service.project, &c.image)),
                lifecycle,
                env: Some({
                    let mut e = env(globals, c);
                    e.extend(secret_vars.get(&c.name).cloned().unwrap_or_default());
                    e
                }),
                ports,
                volume_mounts: Some(mounts),
                readiness_probe: readiness,
                liveness_probe: liveness,
                startup_probe: startup,
                security_context: security_context(service),
                resources: resources(globals, name),
                ..Default::default()
            });
        }
        volumes.extend(data_vols);
        let mut own = labels(name, SERVER);
        if let Some(v) = variant {
            own.insert(VARIANT_LABEL.to_owned(), v.to_owned());
        }
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(pod_labels(globals, name, own)),
                ..Default::default()
            }),
            spec: Some(pod_spec(globals, service, containers, volumes)),
        }
    }

    /// The objects of one bootstrap task ([`crate::tasks::task_spec`]): its Job and the
    /// Secrets/ConfigMaps it mounts; files at [`KOLLA_CONFIG_DIR`], secret env through
    /// `secretKeyRef`.
    fn task(
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

fn claim_name(service: &str, is_sts: bool, v: &catalog::Volume) -> String {
    if is_sts {
        format!("{}-{service}-0", v.name)
    } else {
        format!("{service}-{}", v.name)
    }
}

fn label_selector(labels: BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels),
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

/// Adds a required node affinity on `kubernetes.io/hostname` (`In` or `NotIn` `hosts`): to
/// every term of a required node affinity the pod has already (its role's alternatives), or as
/// the only term.
fn pin(template: &mut PodTemplateSpec, operator: &str, hosts: Vec<String>) {
    if let Some(spec) = template.spec.as_mut() {
        let requirement = NodeSelectorRequirement {
            key: HOSTNAME_LABEL.to_owned(),
            operator: operator.to_owned(),
            values: Some(hosts),
        };
        let required = spec
            .affinity
            .get_or_insert_with(Default::default)
            .node_affinity
            .get_or_insert_with(Default::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default);
        if required.node_selector_terms.is_empty() {
            required
                .node_selector_terms
                .push(NodeSelectorTerm::default());
        }
        for term in &mut required.node_selector_terms {
            term.match_expressions
                .get_or_insert_with(Vec::new)
                .push(requirement.clone());
        }
    }
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
