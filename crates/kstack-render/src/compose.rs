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
//! | `privileged`, `hostPID`, `hostIPC`           | `privileged`, `pid: host`, `ipc: host`, only where the catalog says |
//! | Deployment / StatefulSet / DaemonSet         | one Compose service per container, `restart: always`               |
//! | role `nodeSelector`, DaemonSet placement     | ignored: every role is this node                                   |
//! | readiness/liveness/startup probe             | `healthcheck` running the image's Kolla check script               |
//! | Job per bootstrap task                       | one-shot service `<service>-<task>`, `restart: "no"`               |
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
//! Bootstrap tasks become one-shot services the long-running containers wait for:
//! - `kolla_bootstrap`: the container's image and config with `KOLLA_BOOTSTRAP=""` (as the
//!   Kubernetes Job);
//! - `command`: the task's image (the service's first image by default) with the task's
//!   command replacing the image's `CMD` (the entrypoint, dumb-init, stays), the first
//!   container's config and data volumes, and the task's environment;
//! - `db_create`: the mariadb-server image's `mysql` client runs a generated SQL file
//!   (`CREATE DATABASE/USER IF NOT EXISTS`, the password set again, `GRANT ALL` on each
//!   database), reading the root password from a client option file;
//! - `keystone_register`: for Keystone itself `keystone-manage bootstrap` in the keystone image
//!   (admin user, project, role, identity endpoints); for other services the `openstack` client
//!   in the kolla-toolbox image creates what is missing (service, internal and public
//!   endpoints, project `service`, the service user with the admin role there) and sets the
//!   user's password again.
//!
//! The last two get a config directory of their own (`config/<service>/tasks/<task>/`) whose
//! `config.json` copies a script and the files holding passwords into the container with the
//! image user as owner; the password files are written with mode 0600 and no password is ever
//! in `compose.yaml` (no environment literal, no command argument). Every task is safe to run
//! again: `docker compose up` starts completed one-shot services again.
//!
//! Architecture invariant: no IO here; writing the files and running `docker compose` is the
//! CLI's job.

use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_model::catalog::{self, BootstrapKind, HealthTest, VolumeKind};
use kstack_model::globals::Globals;
use serde::{Deserialize, Serialize};

use crate::files::{ContainerFiles, RenderError, RenderedFile, Target, render_files};
use crate::kubernetes::{COMPONENT_LABEL, KOLLA_CONFIG_DIR, NAME_LABEL};

/// The file name of the Compose file inside the output directory.
pub const COMPOSE_FILE: &str = "compose.yaml";
/// The directory, next to [`COMPOSE_FILE`], holding every container's config directory.
pub const CONFIG_DIR: &str = "config";
/// The first line of every generated Compose file.
pub const HEADER: &str = "# Generated by kstack (kstack template --target compose). Do not edit: change the config directory and render again.\n";

/// Where generated task files land inside a one-shot container (copied there by
/// `kolla_set_configs` from the read-only config mount).
const TASK_DIR: &str = "/etc/kstack";

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
    /// Replaces the image's `CMD` (never its entrypoint); only one-shot `command` tasks set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    pub environment: BTreeMap<String, String>,
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
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub depends_on: BTreeMap<String, Dependency>,
    pub labels: BTreeMap<String, String>,
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
        "service `{service}`, bootstrap task `{task}`: `{container}` is not a container of the service; fix the task's `container` in catalog.yml"
    )]
    UnknownContainer {
        service: String,
        task: String,
        container: String,
    },
    #[error(
        "service `{service}`, bootstrap task `{task}` needs `{key}` from passwords.yml, which is empty; run `kstack genpwd`"
    )]
    MissingPassword {
        service: String,
        task: String,
        key: String,
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
            VolumeKind::PersistentClaim { .. } | VolumeKind::SharedEmptyDir => {
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

    /// `KOLLA_CONFIG_STRATEGY` and `KOLLA_SERVICE_NAME`, as on the Kubernetes target.
    pub fn environment(&self, container: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "KOLLA_CONFIG_STRATEGY".to_owned(),
                self.globals.config_strategy.clone(),
            ),
            ("KOLLA_SERVICE_NAME".to_owned(), container.replace('_', "-")),
        ])
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
            ("app.kubernetes.io/part-of".to_owned(), "kstack".to_owned()),
        ])
    }
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
    let mut files: BTreeMap<(String, String), Vec<RenderedFile>> =
        render_files(config, Target::Compose)?
            .into_iter()
            // Per-host variants exist only for Kubernetes DaemonSets; one node has no others.
            .filter(|cf| cf.host.is_none())
            .map(
                |ContainerFiles {
                     service,
                     container,
                     files,
                     ..
                 }| ((service, container), files),
            )
            .collect();

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
        for t in &service.bootstrap {
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
            let mut s = ComposeService {
                image: globals.image_ref(&service.project, &c.image),
                environment: node.environment(&c.name),
                restart: SingleNode::RESTART_SERVICE.to_owned(),
                volumes: std::iter::once(SingleNode::config_mount(&dir))
                    .chain(data.iter().cloned())
                    .collect(),
                healthcheck: c.healthcheck.as_ref().map(|h| node.healthcheck(name, h)),
                depends_on: waits.clone(),
                labels: SingleNode::labels(name, "server"),
                ..Default::default()
            };
            SingleNode::apply_privileges(&mut s, &service.privileges);
            out.add(
                container_service_name(&c.name),
                format!("container {name}/{}", c.name),
                s,
            )?;
            let container_files = files
                .remove(&(name.clone(), c.name.clone()))
                .unwrap_or_default();
            out.config_dirs.push(ConfigDir {
                path: dir,
                files: container_files.clone(),
            });
            out.container_files
                .insert((name.clone(), c.name.clone()), container_files);
        }

        for t in &service.bootstrap {
            let (mut s, dir) = task(config, &node, name, service, t, &data, &out.container_files)?;
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
            s.restart = SingleNode::RESTART_TASK.to_owned();
            s.labels = SingleNode::labels(name, "bootstrap");
            s.labels.insert("kstack.io/task".into(), t.name.clone());
            if let Some(dir) = dir {
                out.config_dirs.push(dir);
            }
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
    container_files: BTreeMap<(String, String), Vec<RenderedFile>>,
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

/// One bootstrap task as a one-shot service (without its ordering), plus its own config
/// directory when it needs one.
fn task(
    config: &Config,
    node: &SingleNode<'_>,
    name: &str,
    service: &catalog::Service,
    t: &catalog::BootstrapTask,
    data: &[Mount],
    container_files: &BTreeMap<(String, String), Vec<RenderedFile>>,
) -> Result<(ComposeService, Option<ConfigDir>), ComposeError> {
    let globals = node.globals;
    let unknown = |container: &str| ComposeError::UnknownContainer {
        service: name.to_owned(),
        task: t.name.clone(),
        container: container.to_owned(),
    };
    let password = |key: String| {
        config
            .passwords
            .get(&key)
            .map(str::to_owned)
            .ok_or_else(|| ComposeError::MissingPassword {
                service: name.to_owned(),
                task: t.name.clone(),
                key,
            })
    };
    let first = service
        .containers
        .first()
        .ok_or_else(|| unknown("(none)"))?;
    let mut s = ComposeService::default();
    match &t.task {
        BootstrapKind::KollaBootstrap { container } => {
            let c = match container {
                Some(n) => service
                    .containers
                    .iter()
                    .find(|c| &c.name == n)
                    .ok_or_else(|| unknown(n))?,
                None => first,
            };
            s.image = globals.image_ref(&service.project, &c.image);
            s.environment = node.environment(&c.name);
            // Present but empty: the image's extend_start runs its bootstrap branch, exits 0.
            s.environment
                .insert("KOLLA_BOOTSTRAP".into(), String::new());
            s.volumes = std::iter::once(SingleNode::config_mount(&format!("{name}/{}", c.name)))
                .chain(data.iter().cloned())
                .collect();
            SingleNode::apply_privileges(&mut s, &service.privileges);
            Ok((s, None))
        }
        BootstrapKind::Command {
            image,
            command,
            env,
        } => {
            s.image = globals.image_ref(&service.project, image.as_deref().unwrap_or(&first.image));
            s.command = Some(command.clone());
            s.environment = node.environment(&first.name);
            s.environment.extend(env.clone());
            s.volumes =
                std::iter::once(SingleNode::config_mount(&format!("{name}/{}", first.name)))
                    .chain(data.iter().cloned())
                    .collect();
            SingleNode::apply_privileges(&mut s, &service.privileges);
            Ok((s, None))
        }
        BootstrapKind::DbCreate { databases, users } => {
            let root = password("database_password".into())?;
            let mut sql = String::from(
                "-- Generated by kstack: the databases and users of one service; safe to run again.\n",
            );
            for db in databases {
                sql.push_str(&format!(
                    "CREATE DATABASE IF NOT EXISTS {};\n",
                    sql_ident(db)
                ));
            }
            for u in users {
                let pw = sql_string(&password(format!("{}_database_password", u.user))?);
                let who = format!("{}@'%'", sql_string(&u.user));
                sql.push_str(&format!(
                    "CREATE USER IF NOT EXISTS {who} IDENTIFIED BY {pw};\n"
                ));
                sql.push_str(&format!("ALTER USER {who} IDENTIFIED BY {pw};\n"));
                for db in &u.databases {
                    sql.push_str(&format!(
                        "GRANT ALL PRIVILEGES ON {}.* TO {who};\n",
                        sql_ident(db)
                    ));
                }
            }
            let db_port = port_of(config, "mariadb", "mysql").unwrap_or(3306);
            let cnf = format!(
                "[client]\nuser = root\npassword = {}\nhost = {}\nport = {db_port}\n",
                option_value(&root),
                node.address("mariadb"),
            );
            let script = format!(
                "#!/bin/bash\n# Generated by kstack: create the databases and users of {name}.\nset -euo pipefail\nexec mysql --defaults-extra-file={TASK_DIR}/client.cnf < {TASK_DIR}/db-create.sql\n"
            );
            let own = vec![
                task_file("client.cnf", cnf, true),
                task_file("db-create.sql", sql, true),
                task_file("run.sh", script, false),
            ];
            let image = mariadb_image(config);
            Ok(generated_task(node, name, t, image, "mysql", own, &[]))
        }
        BootstrapKind::KeystoneRegister {
            service_name,
            service_type,
            endpoints,
        } => {
            let admin = password("keystone_admin_password".into())?;
            let region = &globals.openstack_region_name;
            let url = |e: &catalog::Endpoint| {
                format!("http://{}:{}{}", node.address(name), e.port, e.path)
            };
            let keystone_url = format!(
                "http://{}:{}",
                node.address("keystone"),
                port_of(config, "keystone", "api").unwrap_or(5000)
            );
            if service_type == "identity" {
                // Keystone registers itself: keystone-manage bootstrap in its own image, with
                // the keystone container's config (keystone.conf names the database).
                let public = endpoints
                    .first()
                    .map(url)
                    .unwrap_or_else(|| keystone_url.clone());
                let script = format!(
                    "#!/bin/bash\n# Generated by kstack: Keystone's admin user, project, role and identity endpoints; safe to run again.\nset -euo pipefail\nOS_BOOTSTRAP_PASSWORD=$(cat {TASK_DIR}/admin-password)\nexport OS_BOOTSTRAP_PASSWORD\nexec keystone-manage bootstrap --bootstrap-username {user} --bootstrap-project-name {project} --bootstrap-role-name admin --bootstrap-service-name {svc} --bootstrap-internal-url {public} --bootstrap-public-url {public} --bootstrap-region-id {region}\n",
                    user = shell_word(&globals.keystone_admin_user),
                    project = shell_word(&globals.keystone_admin_project),
                    svc = shell_word(service_name),
                    public = shell_word(&public),
                    region = shell_word(region),
                );
                let own = vec![
                    task_file("admin-password", admin, true),
                    task_file("run.sh", script, false),
                ];
                let carried = container_files
                    .get(&(name.to_owned(), first.name.clone()))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let image = globals.image_ref(&service.project, &first.image);
                return Ok(generated_task(
                    node,
                    name,
                    t,
                    image,
                    &first.user,
                    own,
                    carried,
                ));
            }
            let service_password = password(format!("{service_name}_keystone_password"))?;
            let clouds = format!(
                "clouds:\n  kstack:\n    auth:\n      auth_url: {keystone_url}/v3\n      username: {user}\n      password: {admin}\n      project_name: {project}\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: {region}\n    interface: internal\n    identity_api_version: 3\n",
                user = yaml_string(&globals.keystone_admin_user),
                admin = yaml_string(&admin),
                project = yaml_string(&globals.keystone_admin_project),
                region = yaml_string(region),
            );
            let svc = shell_word(service_name);
            let mut endpoint_lines = String::new();
            for e in endpoints {
                for iface in ["internal", "public"] {
                    endpoint_lines.push_str(&format!(
                        "[ -n \"$(openstack endpoint list --service {svc} --interface {iface} --region {region} -f value -c ID)\" ] \\\n  || openstack endpoint create --region {region} {svc} {iface} {url}\n",
                        region = shell_word(region),
                        url = shell_word(&url(e)),
                    ));
                }
            }
            let script = format!(
                "#!/bin/bash\n# Generated by kstack: register {svc} in Keystone; creates only what is missing.\nset -euo pipefail\nexport PATH=/opt/ansible/bin:$PATH OS_CLIENT_CONFIG_FILE={TASK_DIR}/clouds.yaml OS_CLOUD=kstack\nopenstack service show {svc} >/dev/null 2>&1 || openstack service create --name {svc} {ty}\n{endpoint_lines}openstack project show service >/dev/null 2>&1 || openstack project create --domain default service\nopenstack user show --domain default {svc} >/dev/null 2>&1 \\\n  || openstack user create --domain default --project service --password \"$(cat {TASK_DIR}/service-password)\" {svc}\nopenstack user set --password \"$(cat {TASK_DIR}/service-password)\" {svc}\nopenstack role add --project service --user {svc} admin\n",
                ty = shell_word(service_type),
            );
            let own = vec![
                task_file("clouds.yaml", clouds, true),
                task_file("service-password", service_password, true),
                task_file("run.sh", script, false),
            ];
            let image = globals.image_ref("kolla-toolbox", "kolla-toolbox");
            Ok(generated_task(node, name, t, image, "ansible", own, &[]))
        }
    }
}

fn task_file(name: &str, content: String, secret: bool) -> RenderedFile {
    RenderedFile {
        name: name.to_owned(),
        content,
        secret,
    }
}

/// A task with a config directory of its own. Its `config.json` copies the task's `own` files
/// under [`TASK_DIR`] (owned by `owner`; `run.sh`, the command, 0700, the rest 0600) and
/// everything a container's `config.json` in `carried` copies, so the task sees the
/// container's config files where the container sees them. The image's extend_start is
/// skipped: the task is not the service.
fn generated_task(
    node: &SingleNode<'_>,
    service: &str,
    t: &catalog::BootstrapTask,
    image: String,
    owner: &str,
    own: Vec<RenderedFile>,
    carried: &[RenderedFile],
) -> (ComposeService, Option<ConfigDir>) {
    let mut entries: Vec<serde_json::Value> = own
        .iter()
        .map(|f| {
            let perm = if f.name == "run.sh" { "0700" } else { "0600" };
            serde_json::json!({
                "source": format!("{KOLLA_CONFIG_DIR}/{}", f.name),
                "dest": format!("{TASK_DIR}/{}", f.name),
                "owner": owner,
                "perm": perm,
            })
        })
        .collect();
    let mut files = own;
    for f in carried {
        if f.name == "config.json" {
            let parsed: serde_json::Value = serde_json::from_str(&f.content).unwrap_or_default();
            if let Some(list) = parsed.get("config_files").and_then(|l| l.as_array()) {
                entries.extend(list.iter().cloned());
            }
        } else {
            files.push(f.clone());
        }
    }
    let mut json = serde_json::to_string_pretty(&serde_json::json!({
        "command": format!("{TASK_DIR}/run.sh"),
        "config_files": entries,
    }))
    .expect("config.json serializes");
    json.push('\n');
    files.push(task_file("config.json", json, false));
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let path = format!("{service}/tasks/{}", t.name);
    let mut environment = node.environment(&task_service_name(service, &t.name));
    environment.insert("KOLLA_SKIP_EXTEND_START".into(), String::new());
    let mut s = ComposeService {
        image,
        environment,
        volumes: vec![SingleNode::config_mount(&path)],
        ..Default::default()
    };
    SingleNode::apply_privileges(&mut s, &catalog::Privileges::default());
    (s, Some(ConfigDir { path, files }))
}

fn port_of(config: &Config, service: &str, port: &str) -> Option<u16> {
    config
        .catalog
        .services
        .get(service)?
        .ports
        .iter()
        .find(|p| p.name == port)
        .map(|p| p.port)
}

fn mariadb_image(config: &Config) -> String {
    let project = config
        .catalog
        .services
        .get("mariadb")
        .map_or("mariadb", |s| s.project.as_str());
    config.globals.image_ref(project, "mariadb-server")
}

/// A MariaDB identifier in backticks.
fn sql_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// A MariaDB string literal.
fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A value in a MySQL option file (quoted so `#` and spaces survive).
fn option_value(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A word for bash, single-quoted unless it is plain.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:%=,".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A YAML double-quoted scalar.
fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}
