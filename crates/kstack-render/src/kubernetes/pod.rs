//! The pod of a workload or a Job: containers with the catalog's env, probes from the Kolla
//! health checks, lifecycle hooks (the drain and graceful stop of a serving pod, the catalog's
//! `pre_stop` and `post_start`), data volumes and claims, resources, privileges, and where the
//! pods run (the role's nodes, spread over nodes, pinned per host).
use std::collections::BTreeMap;

use kstack_k8s::api::core::v1::{
    Affinity, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, ExecAction,
    HTTPGetAction, HostPathVolumeSource, Lifecycle, LifecycleHandler, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, ObjectFieldSelector,
    PersistentVolumeClaimVolumeSource, PodAffinityTerm, PodAntiAffinity, PodSecurityContext,
    PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SecretVolumeSource, SecurityContext,
    SleepAction, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use kstack_k8s::apimachinery::pkg::api::resource::Quantity;
use kstack_k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstack_k8s::apimachinery::pkg::util::intstr::IntOrString;
use kstack_model::catalog::{self, HealthTest, VolumeKind, WorkloadKind};
use kstack_model::globals::Globals;
use kstack_model::labels::{HOSTNAME_LABEL, SERVER, VARIANT_LABEL};

use super::{ContainerParts, Renderer, keys, label_selector, labels, pod_labels, selector};
use crate::files::DRAIN_SECS;

impl Renderer<'_> {
    pub(super) fn pod_template(
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
            // A Deployment's serving pod drains before it stops (see DRAIN_SECS): a sleep
            // before the kubelet's SIGTERM.
            let drains = ports.is_some() && service.kind == WorkloadKind::Deployment;
            // A graceful stop signal for the service's process: the image's init (dumb-init, as
            // the Kolla images' entrypoint) turns the kubelet's SIGTERM into it, so the process
            // finishes what it serves and exits within the pod's grace period. (A hook that
            // sent the signal and waited for the exit failed whenever the process exited first,
            // a FailedPreStopHook event each time; Kubernetes' own `stopSignal` is not GA.)
            // The signal for workers of a pre-forking parent is sent by the hook, after the
            // drain, which waits for those workers (the container outlives them).
            let (command, args) = match (&c.stop_signal, c.stop_signal_to) {
                (Some(sig), catalog::StopTarget::Main) => stop_signal_init(sig),
                _ => (None, None),
            };
            let pre_stop = match (&c.stop_signal, c.stop_signal_to, drains) {
                _ if !c.pre_stop.is_empty() => Some(LifecycleHandler {
                    exec: Some(ExecAction {
                        command: Some(c.pre_stop.clone()),
                    }),
                    ..Default::default()
                }),
                (Some(sig), catalog::StopTarget::Workers, _) => Some(LifecycleHandler {
                    exec: Some(ExecAction {
                        command: Some(vec![
                            "/bin/sh".into(),
                            "-c".into(),
                            stop_workers(sig, if drains { DRAIN_SECS } else { 0 }),
                        ]),
                    }),
                    ..Default::default()
                }),
                (_, _, true) => Some(LifecycleHandler {
                    sleep: Some(SleepAction {
                        seconds: DRAIN_SECS,
                    }),
                    ..Default::default()
                }),
                (_, _, false) => None,
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
                command,
                args,
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
            spec: Some(PodSpec {
                termination_grace_period_seconds: service
                    .containers
                    .iter()
                    .filter_map(|c| c.stop_grace_secs)
                    .max(),
                ..pod_spec(globals, service, containers, volumes)
            }),
        }
    }
}

/// Startup probe: wait up to `STARTUP_SECS` (10 min) for the first success, because a first
/// start may run migrations or wait for the database, checking every
/// [`catalog::Healthcheck::start_interval`] seconds from the start.
const STARTUP_SECS: u32 = 600;

/// How much longer than readiness the liveness probe waits (timeout and failures) before a
/// restart: with Kolla's timings, 60 s per check and 6 failures, 3 min of a failing check.
const LIVENESS_SLACK: i32 = 2;

/// A container's arguments as written: the kubelet expands `$(VAR)` in `command` and `args`
/// from the container's env (a globals value such as `RegionOne$(OS_BOOTSTRAP_PASSWORD)` would
/// put a password in a public field), and `$$` is its escape for `$`.
pub(super) fn literal_args(args: &[String]) -> Vec<String> {
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
pub(super) fn data_volumes(
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
            mount_propagation: v.shared.then(|| "Bidirectional".to_owned()),
            ..Default::default()
        });
    }
    (volumes, mounts)
}

pub(super) fn pod_spec(
    globals: &Globals,
    service: &catalog::Service,
    containers: Vec<Container>,
    volumes: Vec<Volume>,
) -> PodSpec {
    let p = &service.privileges;
    let (node_selector, affinity) = placement(globals, service);
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

pub(super) fn security_context(service: &catalog::Service) -> Option<SecurityContext> {
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

/// The command and arguments of a container whose process stops gracefully on `sig` (a
/// catalog name without `SIG`): the image's entrypoint, dumb-init with `--single-child`
/// (Kolla's image contract), rewriting SIGTERM to `sig`, and Kolla's `kolla_start`. `None` for
/// TERM itself: the image's own entrypoint and command do.
fn stop_signal_init(sig: &str) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let Some(number) = catalog::stop_signal_number(sig).filter(|n| *n != 15) else {
        return (None, None);
    };
    (
        Some(vec![
            "dumb-init".into(),
            "--single-child".into(),
            "--rewrite".into(),
            format!("15:{number}"),
            "--".into(),
        ]),
        Some(vec!["kolla_start".into()]),
    )
}

/// The preStop script for a pre-forking server's workers: after the drain, `sig` to the
/// children of the service's process (the oldest child of PID 1, the image's init), then a
/// wait until they exited. The parent, and so the container, stays until the kubelet's
/// SIGTERM; it respawns a worker that exits, but those new workers get no connection after
/// the drain and stop with it.
fn stop_workers(sig: &str, drain: i64) -> String {
    format!(
        "sleep {drain}; w=$(pgrep -P \"$(pgrep -o -P 1)\"); [ -n \"$w\" ] || exit 0; \
         kill -{sig} $w; for p in $w; do while kill -0 $p 2>/dev/null; do sleep 1; done; done"
    )
}

pub(super) fn protocol(p: catalog::Protocol) -> String {
    match p {
        catalog::Protocol::Tcp => "TCP".into(),
        catalog::Protocol::Udp => "UDP".into(),
    }
}

/// Where a service's pods may run: the nodes of its role (a node selector on the role label);
/// with `also_on`, the nodes of any of its roles, and for [`catalog::Role::Every`] the nodes
/// carrying any role (a required node affinity with one term per role; the terms are
/// alternatives).
fn placement(
    globals: &Globals,
    service: &catalog::Service,
) -> (Option<BTreeMap<String, String>>, Option<Affinity>) {
    let roles: Vec<String> = if service.role == catalog::Role::Every {
        kstack_model::globals::ROLES
            .iter()
            .map(|r| (*r).to_owned())
            .collect()
    } else {
        service.roles().iter().map(ToString::to_string).collect()
    };
    if let [role] = roles.as_slice() {
        let (key, value) = globals.role_label(role);
        return (Some(BTreeMap::from([(key, value)])), None);
    }
    let terms = roles
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
pub(super) fn spread(template: &mut PodTemplateSpec, name: &str) {
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

/// Adds a required node affinity on `kubernetes.io/hostname` (`In` or `NotIn` `hosts`): to
/// every term of a required node affinity the pod has already (its role's alternatives), or as
/// the only term.
pub(super) fn pin(template: &mut PodTemplateSpec, operator: &str, hosts: Vec<String>) {
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

/// An env var set from a literal (never a secret).
pub(super) fn literal(name: &str, value: impl Into<String>) -> EnvVar {
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

pub(super) fn claim_name(service: &str, is_sts: bool, v: &catalog::Volume) -> String {
    if is_sts {
        format!("{}-{service}-0", v.name)
    } else {
        format!("{service}-{}", v.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_rewrites_sigterm_to_the_stop_signal_and_leaves_term_alone() {
        // SIGTERM needs no rewrite: the image's entrypoint and command stay.
        assert_eq!(stop_signal_init("TERM"), (None, None));
        let (command, args) = stop_signal_init("QUIT");
        assert_eq!(command.unwrap()[3], "15:3");
        assert_eq!(args.unwrap(), ["kolla_start"]);
    }
}
