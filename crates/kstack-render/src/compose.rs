//! The same cloud on one node without Kubernetes: a Compose file plus the config directory each
//! container mounts at `/var/lib/kolla/config_files`.
//!
//! There is one description of the cloud (catalog, globals, passwords, overrides) and two
//! targets. Nothing here repeats a service definition: every Compose service is computed from
//! the catalog entry the Kubernetes renderer reads, and the config files come from
//! [`render_files`] with [`Target::Compose`]. What differs between the targets is stated once,
//! in [`SingleNode`]:
//!
//! | Kubernetes                                   | Compose, one node                                                  |
//! |----------------------------------------------|--------------------------------------------------------------------|
//! | `kstack_replicas` (replicas per service)     | 1 ([`SingleNode::REPLICAS`]); the node runs one copy of everything   |
//! | Service name (`keystone.openstack.svc`)      | the node's address ([`SingleNode::address`])                         |
//! | pod network, `hostNetwork` where needed      | `network_mode: host` for every container (see below)               |
//! | listen on every pod address (`0.0.0.0`)      | listen on the node's address only ([`Target::bind_address`]), MariaDB also on the loopback for its health check |
//! | `privileged`, `hostPID`, `hostIPC`           | `privileged`, `pid: host`, `ipc: host`, only where the catalog says |
//! | Deployment / StatefulSet / DaemonSet         | one Compose service per container, `restart: always`               |
//! | role `nodeSelector`, DaemonSet placement     | ignored: every role is this node                                   |
//! | readiness/liveness/startup probe             | `healthcheck` running the image's Kolla check script               |
//! | Job per bootstrap task ([`crate::tasks`])    | one-shot service `<service>-<task>`, `restart: "no"`               |
//! | task env from a Secret (`secretKeyRef`)      | 0600 files exported by the task's command ([`secret_env_command`]) |
//! | container env from a Secret (`secretKeyRef`) | `env_file`: a 0600 file `<service>/env.d/<container>.env` ([`SingleNode::env_file`]) |
//! | the engine's order (`after`, `needs`, deps)  | `depends_on`: `service_completed_successfully` for tasks, `service_healthy` for services |
//! | PersistentVolumeClaim                        | named volume `<service>-<volume>`                                    |
//! | hostPath volume                              | bind mount (`create_host_path`)                                    |
//! | ConfigMap / Secret projected at the config dir | `config/<service>/<container>/` bind-mounted read-only; secret files mode 0600 |
//! | namespace                                    | Compose project `name`                                             |
//!
//! Every container runs on the host network, as kolla-ansible runs them and as the
//! containerisation spec (seed 004) describes: a Kubernetes Service name becomes the node's
//! address, and a service is only reachable at the node's address, by the other containers and
//! by its own health check, when it listens in the node's network namespace. The host
//! *privileges* (`privileged`, host PID and IPC namespaces) stay exactly where the catalog asks
//! for them.
//!
//! Health checks use the check scripts the Kolla images ship, as kolla-ansible does: an HTTP
//! check becomes `healthcheck_curl http://<address>:<port><path>`, any other check runs as
//! given, with the catalog's timings (kolla-ansible's defaults: interval 30 s, timeout 30 s,
//! 3 retries, start period 5 s).
//!
//! Bootstrap tasks become one-shot services the long-running containers wait for. What a task
//! runs (image, arguments, literal env, env from passwords.yml, files) is defined once, for both
//! targets, in [`crate::tasks`]; only the mechanics are Compose's:
//! - the task's files are a config directory bind-mounted read-only at Kolla's config path:
//!   the container's own (`config/<service>/<container>/`) when the task uses a container's
//!   config, else one of its own (`config/<service>/tasks/<task>/`), secret files 0600;
//! - secret env is never an environment literal: the values are 0600 files of
//!   `config/<service>/tasks/<task>-env/`, mounted at [`TASK_ENV_DIR`], and the task runs as
//!   root only to export them before it runs its command as the image user
//!   ([`secret_env_command`]).
//!
//! A long-running container's env from passwords.yml (a health check's password) must reach
//! its health check too, which a wrapper command cannot do: it is an `env_file`, mode 0600,
//! in the dotenv form docker compose reads, escaped so the value arrives unchanged.
//!
//! No password is ever in `compose.yaml` (no environment literal, no command argument). Every
//! task is safe to run again: `docker compose up` starts completed one-shot services again.
//!
//! Architecture invariant: no IO here; writing the files and running `docker compose` is the
//! CLI's job.

use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_model::catalog::{self, HealthTest, TaskTarget, VolumeKind};
use kstack_model::globals::Globals;
use kstack_model::labels::{
    BOOTSTRAP, COMPONENT_LABEL, CONFIG_HASH_LABEL, NAME_LABEL, PART_OF, SERVER, TASK_LABEL,
};
use serde::{Deserialize, Serialize};

use crate::files::{ContainerFiles, RenderError, RenderedFile, Target, render_files};
use crate::kolla::KOLLA_CONFIG_DIR;
use crate::names::SecretNames;
use crate::tasks::{self, FilesOf};

/// The directory (below a service's config directory) of its containers' env files.
pub const ENV_FILE_DIR: &str = "env.d";
/// The file name of the Compose file inside the output directory.
pub const COMPOSE_FILE: &str = "compose.yaml";
/// The directory, next to [`COMPOSE_FILE`], holding every container's config directory.
pub const CONFIG_DIR: &str = "config";
/// The first line of every generated Compose file.
pub const HEADER: &str = "# Generated by kstack (kstack template --target compose). Do not edit: change the config directory and render again.\n";

/// A whole Compose file (the subset of the Compose specification kstack emits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComposeFile {
    /// The Compose project name (the Kubernetes namespace on the other target).
    pub name: String,
    pub services: BTreeMap<String, ComposeService>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub volumes: BTreeMap<String, NamedVolume>,
}

/// One Compose service: one container.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ComposeService {
    pub image: String,
    /// Only one-shot services whose secret env is read from files run as root (see
    /// [`secret_env_command`]); every other container runs as its image's user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Replaces the image's `CMD` (never its entrypoint); only one-shot `command` tasks set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    pub environment: BTreeMap<String, String>,
    /// Env files (mode 0600, next to the Compose file) holding a long-running container's env
    /// from passwords.yml: the container and its health check see it, `compose.yaml` never
    /// holds it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_file: Vec<String>,
    pub network_mode: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub privileged: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<String>,
    pub restart: String,
    pub volumes: Vec<Mount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<Healthcheck>,
    /// Commands run in the container after it starts (the catalog's `post_start`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_start: Vec<Hook>,
    /// The graceful stop signal (the catalog's `stop_signal`, e.g. `SIGWINCH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub depends_on: BTreeMap<String, Dependency>,
    pub labels: BTreeMap<String, String>,
}

/// A lifecycle hook (`post_start`): a command run in the service's container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    pub command: Vec<String>,
}

/// A mount in the Compose long syntax.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mount {
    #[serde(rename = "type")]
    pub kind: MountKind,
    pub source: String,
    pub target: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<BindOptions>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MountKind {
    Bind,
    Volume,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindOptions {
    /// Like Kubernetes' `DirectoryOrCreate`.
    pub create_host_path: bool,
    /// `shared` for a catalog volume with `shared` (Kubernetes' `Bidirectional`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation: Option<String>,
}

/// A top-level named volume (no options: the local driver).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedVolume {
    pub labels: BTreeMap<String, String>,
}

/// A Compose health check; durations as Compose strings (`30s`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Healthcheck {
    pub test: Vec<String>,
    pub interval: String,
    pub timeout: String,
    pub retries: u32,
    pub start_period: String,
}

/// A `depends_on` entry in the long syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub condition: Condition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// A dependency without a health check can only be waited on until it started.
    ServiceStarted,
    ServiceHealthy,
    ServiceCompletedSuccessfully,
}

/// The files of one mounted config directory, `path` relative to [`CONFIG_DIR`]
/// (`keystone/keystone`, `keystone/tasks/db-create`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDir {
    pub path: String,
    pub files: Vec<RenderedFile>,
}

/// Everything the Compose target writes: the Compose file and the config directories.
#[derive(Debug, Clone, PartialEq)]
pub struct ComposeBundle {
    pub file: ComposeFile,
    /// Sorted by path.
    pub config_dirs: Vec<ConfigDir>,
}

impl ComposeBundle {
    /// `compose.yaml`: [`HEADER`] then the file as YAML. Same input, same bytes.
    pub fn to_yaml(&self) -> String {
        let mut s = String::from(HEADER);
        s.push_str(&serde_saphyr::to_string(&self.file).expect("the Compose file serializes"));
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    }

    /// The Compose file as pretty JSON (Compose reads JSON too).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.file).expect("the Compose file serializes");
        s.push('\n');
        s
    }
}

/// Why the Compose target could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComposeError {
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(
        "two Compose services would be named `{name}` ({first} and {second}); rename a container or a bootstrap task in catalog.yml"
    )]
    NameClash {
        name: String,
        first: String,
        second: String,
    },
    #[error(
        "`{flag}` enables `{service}`, which runs on Kubernetes only: {why}; set `{flag}: no` in globals.yml for the single node"
    )]
    OnlyKubernetes {
        service: String,
        flag: String,
        why: String,
    },
}

/// The remapping from the clustered deployment to one node: the only place where the two
/// targets differ (see the module docs for the table).
#[derive(Debug, Clone, Copy)]
pub struct SingleNode<'a> {
    pub globals: &'a Globals,
}

impl SingleNode<'_> {
    /// Replicas of every service on one node.
    pub const REPLICAS: u32 = 1;
    /// Every container shares the node's network namespace.
    pub const NETWORK_MODE: &'static str = "host";
    pub const RESTART_SERVICE: &'static str = "always";
    pub const RESTART_TASK: &'static str = "no";

    /// The address other containers (and the health check) use for `service`: the node's own
    /// address, `kolla_internal_vip_address`, or 127.0.0.1 when it is not set. The same rule as
    /// the Compose addresses in the rendered config files.
    pub fn address(&self, service: &str) -> String {
        Target::Compose.host(self.globals, service, None)
    }

    /// The Compose project name: the namespace the cloud lives in on Kubernetes.
    pub fn project(&self) -> String {
        self.globals.kubernetes_namespace.clone()
    }

    /// A probe of the catalog's Kolla health check, as a Compose health check.
    pub fn healthcheck(&self, service: &str, h: &catalog::Healthcheck) -> Healthcheck {
        let mut test = vec!["CMD".to_owned()];
        match &h.test {
            HealthTest::Http { port, path } => {
                test.push("healthcheck_curl".into());
                test.push(format!("http://{}:{port}{path}", self.address(service)));
            }
            HealthTest::Exec { command } => test.extend(command.iter().cloned()),
        }
        Healthcheck {
            test,
            interval: format!("{}s", h.interval_secs),
            timeout: format!("{}s", h.timeout_secs),
            retries: h.retries,
            start_period: format!("{}s", h.start_period_secs),
        }
    }

    /// The named volume a persistent claim becomes (the Deployment claim's name).
    pub fn volume_name(service: &str, volume: &str) -> String {
        format!("{service}-{volume}")
    }

    /// A catalog volume as a mount; a persistent claim (or a volume shared by a pod's
    /// containers) also returns the top-level named volume it needs.
    pub fn mount(service: &str, v: &catalog::Volume) -> (Mount, Option<String>) {
        match &v.kind {
            VolumeKind::PersistentClaim { .. }
            | VolumeKind::SharedEmptyDir
            | VolumeKind::KeyRepository { .. } => {
                let name = Self::volume_name(service, &v.name);
                let m = Mount {
                    kind: MountKind::Volume,
                    source: name.clone(),
                    target: v.mount_path.clone(),
                    read_only: v.read_only,
                    bind: None,
                };
                (m, Some(name))
            }
            VolumeKind::HostPath { path } => (
                Mount {
                    kind: MountKind::Bind,
                    source: path.clone(),
                    target: v.mount_path.clone(),
                    read_only: v.read_only,
                    bind: Some(BindOptions {
                        create_host_path: true,
                        propagation: v.shared.then(|| "shared".to_owned()),
                    }),
                },
                None,
            ),
        }
    }

    /// The read-only mount of a config directory at Kolla's config path.
    pub fn config_mount(path: &str) -> Mount {
        Mount {
            kind: MountKind::Bind,
            source: format!("./{CONFIG_DIR}/{path}"),
            target: KOLLA_CONFIG_DIR.to_owned(),
            read_only: true,
            bind: None,
        }
    }

    /// `KOLLA_CONFIG_STRATEGY`, `KOLLA_SERVICE_NAME` and the catalog's plain env, as on the
    /// Kubernetes target.
    pub fn environment(&self, c: &catalog::Container) -> BTreeMap<String, String> {
        let mut env = BTreeMap::from([
            (
                "KOLLA_CONFIG_STRATEGY".to_owned(),
                self.globals.config_strategy.clone(),
            ),
            ("KOLLA_SERVICE_NAME".to_owned(), c.name.replace('_', "-")),
        ]);
        env.extend(
            c.plain_env(&self.globals.vars)
                .into_iter()
                .map(|(k, v)| (k, literal(&v))),
        );
        env
    }

    /// Where a long-running container's env from passwords.yml is: the env file
    /// `<container>.env` of the config directory `<service>/env.d` (a `.` is never in a
    /// container name, so it cannot clash with a container's own directory).
    pub fn env_file_dir(service: &str) -> String {
        format!("{service}/{ENV_FILE_DIR}")
    }

    /// The env file holding `values` (env name → value), in the dotenv form docker compose
    /// reads: double-quoted, with `\`, `"`, `$` and newlines escaped, so the container gets
    /// each value exactly (no interpolation).
    pub fn env_file(values: &BTreeMap<String, &str>) -> String {
        let mut out = String::new();
        for (k, v) in values {
            let mut q = String::with_capacity(v.len());
            for ch in v.chars() {
                match ch {
                    '\\' => q.push_str("\\\\"),
                    '"' => q.push_str("\\\""),
                    '$' => q.push_str("\\$"),
                    '\n' => q.push_str("\\n"),
                    '\r' => q.push_str("\\r"),
                    c => q.push(c),
                }
            }
            out.push_str(&format!("{k}=\"{q}\"\n"));
        }
        out
    }

    /// Host access exactly as the catalog asks for it; the network is always the host's.
    fn apply_privileges(s: &mut ComposeService, p: &catalog::Privileges) {
        s.network_mode = Self::NETWORK_MODE.to_owned();
        s.privileged = p.privileged;
        s.pid = p.host_pid.then(|| "host".to_owned());
        s.ipc = p.host_ipc.then(|| "host".to_owned());
    }

    fn labels(service: &str, component: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (NAME_LABEL.to_owned(), service.to_owned()),
            (COMPONENT_LABEL.to_owned(), component.to_owned()),
            (PART_OF.0.to_owned(), PART_OF.1.to_owned()),
        ])
    }
}

/// The bootstrap tasks a single node runs: a Compose project is installed and reconfigured,
/// never upgraded in place, so the migration phases of an upgrade (expand, contract) have no
/// one-shot service.
fn installs(service: &catalog::Service) -> impl Iterator<Item = &catalog::BootstrapTask> {
    service
        .bootstrap
        .iter()
        .filter(|t| !t.phase.is_upgrade() && t.runs_on(TaskTarget::Compose))
}

/// The Compose service name of a bootstrap task.
pub fn task_service_name(service: &str, task: &str) -> String {
    format!("{service}-{task}")
}

/// The Compose service name of a long-running container: the container's name.
pub fn container_service_name(container: &str) -> String {
    container.to_owned()
}

/// Renders the enabled services of a loaded config directory for one node.
pub fn render(config: &Config) -> Result<ComposeBundle, ComposeError> {
    let globals = &config.globals;
    let node = SingleNode { globals };
    if let Some((name, service, why)) = config
        .catalog
        .services
        .iter()
        .filter(|(name, _)| config.enabled.contains(*name))
        .find_map(|(n, s)| s.only_kubernetes.as_ref().map(|why| (n, s, why)))
    {
        return Err(ComposeError::OnlyKubernetes {
            service: name.clone(),
            flag: service.enable_flag.clone(),
            why: why.clone(),
        });
    }
    let all_files = render_files(config, Target::Compose)?;
    let mut files: BTreeMap<(String, String), Vec<RenderedFile>> = all_files
        .iter()
        // Per-host variants exist only for Kubernetes DaemonSets; one node has no others.
        .filter(|cf| cf.host.is_none())
        .map(|cf| ((cf.service.clone(), cf.container.clone()), cf.files.clone()))
        .collect();

    let names = SecretNames::of(config)?;
    let mut out = Builder::default();
    for (name, service) in &config.catalog.services {
        if !config.enabled.contains(name) {
            continue;
        }
        let enabled =
            |s: &String| config.enabled.contains(s) && config.catalog.services.contains_key(s);

        // Data volumes: shared by the service's containers and its bootstrap tasks.
        let mut data = Vec::new();
        for v in &service.volumes {
            let (m, named) = SingleNode::mount(name, v);
            if let Some(n) = named {
                out.volumes.insert(
                    n,
                    NamedVolume {
                        labels: SingleNode::labels(name, "data"),
                    },
                );
            }
            data.push(m);
        }

        // Long-running containers: wait for every task of the service and every dependency.
        let mut waits = BTreeMap::new();
        for t in installs(service).filter(|t| t.phase != catalog::Phase::Post) {
            waits.insert(
                task_service_name(name, &t.name),
                Dependency {
                    condition: Condition::ServiceCompletedSuccessfully,
                },
            );
        }
        for dep in service.depends_on.iter().filter(|d| enabled(d)) {
            waits.extend(wait_for_service(&config.catalog.services[dep]));
        }
        for c in &service.containers {
            let dir = format!("{name}/{}", c.name);
            let container_files = files
                .remove(&(name.clone(), c.name.clone()))
                .unwrap_or_default();
            // What the container reads at start: Compose recreates a container when its
            // definition changes, and the files are mounted, not part of it.
            let mut read_at_start: Vec<&RenderedFile> = container_files.iter().collect();
            let mut env_file = Vec::new();
            let secret_env = crate::files::container_secret_env(config, name, c)?;
            let env_file_content;
            if !secret_env.is_empty() {
                let path = SingleNode::env_file_dir(name);
                let file = RenderedFile {
                    name: format!("{}.env", c.name),
                    content: SingleNode::env_file(&secret_env),
                    secret: true,
                };
                env_file_content = file.clone();
                read_at_start.push(&env_file_content);
                env_file.push(format!("./{CONFIG_DIR}/{path}/{}", file.name));
                match out.config_dirs.iter_mut().find(|d| d.path == path) {
                    Some(d) => d.files.push(file),
                    None => out.config_dirs.push(ConfigDir {
                        path,
                        files: vec![file],
                    }),
                }
            }
            let mut s = ComposeService {
                image: globals.image_ref(&service.project, &c.image),
                environment: node.environment(c),
                env_file,
                restart: SingleNode::RESTART_SERVICE.to_owned(),
                volumes: std::iter::once(SingleNode::config_mount(&dir))
                    .chain(data.iter().cloned())
                    .collect(),
                healthcheck: c.healthcheck.as_ref().map(|h| node.healthcheck(name, h)),
                post_start: if c.post_start.is_empty() {
                    Vec::new()
                } else {
                    vec![Hook {
                        command: c.post_start.iter().map(|a| literal(a)).collect(),
                    }]
                },
                stop_signal: c
                    .stop_signal
                    .as_ref()
                    .filter(|_| c.stop_signal_to.is_main())
                    .map(|s| format!("SIG{s}")),
                depends_on: waits.clone(),
                labels: SingleNode::labels(name, SERVER),
                ..Default::default()
            };
            s.labels.insert(
                CONFIG_HASH_LABEL.to_owned(),
                config_hash(&names, &read_at_start),
            );
            SingleNode::apply_privileges(&mut s, &service.privileges);
            out.add(
                container_service_name(&c.name),
                format!("container {name}/{}", c.name),
                s,
            )?;
            out.config_dirs.push(ConfigDir {
                path: dir,
                files: container_files,
            });
        }

        for t in installs(service) {
            let (mut s, task_dirs) = task(config, name, service, t, &all_files)?;
            for after in &t.after {
                s.depends_on.insert(
                    task_service_name(name, after),
                    Dependency {
                        condition: Condition::ServiceCompletedSuccessfully,
                    },
                );
            }
            for need in t.needs.iter().filter(|n| enabled(n)) {
                s.depends_on
                    .extend(wait_for_service(&config.catalog.services[need]));
            }
            if t.phase == catalog::Phase::Post {
                // After the service's own containers are healthy.
                s.depends_on.extend(wait_for_service(service));
            }
            s.restart = SingleNode::RESTART_TASK.to_owned();
            s.labels = SingleNode::labels(name, BOOTSTRAP);
            s.labels.insert(TASK_LABEL.into(), t.name.clone());
            out.config_dirs.extend(task_dirs);
            out.add(
                task_service_name(name, &t.name),
                format!("bootstrap task {name}/{}", t.name),
                s,
            )?;
        }
    }
    out.config_dirs.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ComposeBundle {
        file: ComposeFile {
            name: node.project(),
            services: out.services,
            volumes: out.volumes,
        },
        config_dirs: out.config_dirs,
    })
}

/// `service_healthy` on every container of a service (`service_started` for a container
/// without a health check, which Compose could never call healthy).
fn wait_for_service(s: &catalog::Service) -> BTreeMap<String, Dependency> {
    s.containers
        .iter()
        .map(|c| {
            let condition = if c.healthcheck.is_some() {
                Condition::ServiceHealthy
            } else {
                Condition::ServiceStarted
            };
            (container_service_name(&c.name), Dependency { condition })
        })
        .collect()
}

#[derive(Default)]
struct Builder {
    services: BTreeMap<String, ComposeService>,
    /// Who took each name, for the clash message.
    owners: BTreeMap<String, String>,
    volumes: BTreeMap<String, NamedVolume>,
    config_dirs: Vec<ConfigDir>,
}

impl Builder {
    fn add(&mut self, name: String, owner: String, s: ComposeService) -> Result<(), ComposeError> {
        if let Some(first) = self.owners.get(&name) {
            return Err(ComposeError::NameClash {
                name,
                first: first.clone(),
                second: owner,
            });
        }
        self.owners.insert(name.clone(), owner);
        self.services.insert(name, s);
        Ok(())
    }
}

/// Where a one-shot service finds the files its secret env is read from (Compose has no
/// `secretKeyRef`: the values never become environment literals in `compose.yaml`).
pub const TASK_ENV_DIR: &str = "/var/lib/kstack/env";

/// The command of a one-shot service with secret env: as root, export every file of
/// [`TASK_ENV_DIR`] as an env var of its name (the files are 0600, readable by root only),
/// then run `inner` (the image's `kolla_start` when `None`) as the image `user`, env kept.
pub fn secret_env_command(user: &str, inner: Option<&[String]>) -> Vec<String> {
    let mut cmd = vec![
        "bash".to_owned(),
        "-c".to_owned(),
        format!(
            "set -o errexit; for f in {TASK_ENV_DIR}/*; do export \"${{f##*/}}=$(cat \"$f\")\"; done; exec sudo -E -H -u {} -- \"$@\"",
            crate::tasks::shell_word(user)
        ),
        "kstack-task".to_owned(),
    ];
    match inner {
        Some(args) => cmd.extend(args.iter().cloned()),
        None => cmd.push("kolla_start".to_owned()),
    }
    cmd
}

/// One bootstrap task ([`crate::tasks::task_spec`] for [`Target::Compose`]) as a one-shot
/// service (without its ordering), plus the config directories only it mounts.
fn task(
    config: &Config,
    name: &str,
    service: &catalog::Service,
    t: &catalog::BootstrapTask,
    files: &[ContainerFiles],
) -> Result<(ComposeService, Vec<ConfigDir>), ComposeError> {
    let spec = tasks::task_spec(config, Target::Compose, files, name, service, t)?;
    let mut dirs = Vec::new();
    let path = match &spec.files_of {
        FilesOf::Container {
            service: src,
            container,
        } => format!("{src}/{container}"),
        FilesOf::Task => {
            let p = format!("{name}/tasks/{}", t.name);
            dirs.push(ConfigDir {
                path: p.clone(),
                files: spec.files.clone(),
            });
            p
        }
    };
    let mut s = ComposeService {
        image: spec.image.clone(),
        environment: spec.env.clone(),
        volumes: vec![SingleNode::config_mount(&path)],
        command: spec.args.clone(),
        ..Default::default()
    };
    let src = spec
        .data_of
        .as_ref()
        .and_then(|n| config.catalog.services.get_key_value(n));
    // Compose starts a one-shot service again at every `up`. A first-boot task that must not
    // run on existing data (a database initialised) runs once per data volume: a marker on the
    // volume records that it succeeded.
    let install_dir = (t.phase == catalog::Phase::Install)
        .then(|| src.map(|(_, src)| src))
        .flatten()
        .and_then(|src| {
            src.volumes
                .iter()
                .find(|v| matches!(v.kind, catalog::VolumeKind::PersistentClaim { .. }))
        })
        .map(|v| v.mount_path.clone());
    match src {
        Some((src_name, src)) => {
            s.volumes
                .extend(src.volumes.iter().map(|v| SingleNode::mount(src_name, v).0));
            SingleNode::apply_privileges(&mut s, &src.privileges);
        }
        None => SingleNode::apply_privileges(&mut s, &catalog::Privileges::default()),
    }
    let values = spec.secret_env_values(config)?;
    if !values.is_empty() {
        let p = format!("{name}/tasks/{}-env", t.name);
        dirs.push(ConfigDir {
            path: p.clone(),
            files: values
                .into_iter()
                .map(|(k, v)| RenderedFile {
                    name: k,
                    content: v.to_owned(),
                    secret: true,
                })
                .collect(),
        });
        s.volumes.push(Mount {
            kind: MountKind::Bind,
            source: format!("./{CONFIG_DIR}/{p}"),
            target: TASK_ENV_DIR.to_owned(),
            read_only: true,
            bind: None,
        });
        s.user = Some("root".to_owned());
        s.command = Some(secret_env_command(&spec.user, spec.args.as_deref()));
    }
    if let Some(dir) = install_dir {
        let inner = s
            .command
            .take()
            .unwrap_or_else(|| vec!["kolla_start".to_owned()]);
        s.command = Some(install_once_command(name, &t.name, &dir, inner));
    }
    // Compose interpolates `$` in the file; the container must see the words as given.
    if let Some(cmd) = s.command.as_mut() {
        for w in cmd {
            *w = literal(w);
        }
    }
    for v in s.environment.values_mut() {
        *v = literal(v);
    }
    Ok((s, dirs))
}

/// The keyed hash (as the Secrets' names are, [`SecretNames`]) of files,
/// by name and content: it changes with any of them and says nothing about a password in one.
fn config_hash(names: &SecretNames, files: &[&RenderedFile]) -> String {
    let mut sorted = files.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut bytes = Vec::new();
    for f in sorted {
        bytes.extend_from_slice(f.name.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(f.content.as_bytes());
        bytes.push(0);
    }
    names.hash(&bytes)
}

/// The marker a first-boot task leaves on its data volume once it succeeded.
pub fn install_marker(dir: &str, task: &str) -> String {
    format!("{}/.kstack-installed-{task}", dir.trim_end_matches('/'))
}

/// The command of a first-boot task on Compose: `inner`, unless its marker is on the data
/// volume at `dir` ([`install_marker`]); the marker is written when `inner` succeeds.
pub fn install_once_command(
    service: &str,
    task: &str,
    dir: &str,
    inner: Vec<String>,
) -> Vec<String> {
    let marker = crate::tasks::shell_word(&install_marker(dir, task));
    let mut cmd = vec![
        "bash".to_owned(),
        "-c".to_owned(),
        format!(
            "if [ -e {marker} ]; then echo \"kstack: {service}/{task} ran on this volume before; nothing to do\"; exit 0; fi; \"$@\" && touch {marker}"
        ),
        "kstack-install-once".to_owned(),
    ];
    cmd.extend(inner);
    cmd
}

/// A string as a Compose literal: `$` doubled, so Compose interpolation leaves it as it is.
pub fn literal(s: &str) -> String {
    s.replace('$', "$$")
}
