//! The service catalog: what each OpenStack service is made of (Kolla images, config files,
//! ports, privileges, volumes, health checks, bootstrap tasks) and what it depends on.
//!
//! The built-in catalog is `catalog/services.yaml`, embedded in the binary. An operator catalog
//! file has the same shape; [`Catalog::merge`] lays it over the built-in one by service name.
//! Everything here is bytes in, values or errors out: no IO.
//!
//! A container's `command` and config file destinations may name a fact of the image
//! distribution as `{fact}` (see [`crate::distro`]); validation rejects unknown facts.
//! Its `permissions` become config.json's: the ownership `kolla_set_configs` gives the data
//! directories on volumes before the service starts.
//!
//! # HAProxy and keepalived are replaced by Kubernetes Services
//!
//! kolla-ansible puts every API behind an HAProxy frontend on a keepalived VIP. kstack runs
//! neither: each port marked `expose: true` gets a ClusterIP Service named after the kstack
//! service, and the Service's virtual IP plays the role of the internal VIP.
//!
//! | HAProxy frontend (kolla-ansible)      | Kubernetes Service     | port  |
//! |---------------------------------------|------------------------|-------|
//! | `mariadb` (database_address)          | `mariadb`              | 3306  |
//! | `keystone_internal`, `keystone_external` | `keystone`          | 5000  |
//! | `glance_api`, `glance_api_external`   | `glance-api`           | 9292  |
//! | `placement_api`, `placement_api_external` | `placement-api`    | 8780  |
//! | `nova_api`, `nova_api_external`       | `nova-api`             | 8774  |
//! | `nova_metadata`, `nova_metadata_external` | `nova-api` (port `metadata`) | 8775 |
//! | `nova_novncproxy`                     | `nova-novncproxy`      | 6080  |
//! | `neutron_server`, `neutron_server_external` | `neutron-server` | 9696  |
//! | `horizon`, `horizon_redirect`         | `horizon`              | 80    |
//! | `heat_api`, `heat_api_external`       | `heat-api`             | 8004  |
//! | `cinder_api`, `cinder_api_external`   | `cinder-api`           | 8776  |
//!
//! RabbitMQ and memcached have no HAProxy frontend in kolla-ansible either: clients list every
//! host. They get a headless Service (stable per-pod names from the StatefulSet) instead.
//! The keepalived VIP itself (VRRP) has no counterpart; an external address, where needed, is
//! a LoadBalancer or NodePort Service chosen at render time, not in the catalog.
//! Not in the catalog yet: `heat_api_cfn` (8000), `mariadb_clustercheck`, `keystone_fernet`
//! rotation between peers.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// The built-in catalog file, as shipped.
pub const BUILTIN_YAML: &str = include_str!("../catalog/services.yaml");

/// A whole catalog: services by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    pub services: BTreeMap<String, Service>,
}

/// One container set: a logical service managed as a unit (one Kubernetes workload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// OpenStack project (keystone, nova, ...); operator config overrides are looked up by it.
    pub project: String,
    /// The globals.yml flag that turns the service on (`enable_nova`, ...).
    pub enable_flag: String,
    pub role: Role,
    pub kind: WorkloadKind,
    pub containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    #[serde(default, skip_serializing_if = "Privileges::is_none")]
    pub privileges: Privileges,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bootstrap: Vec<BootstrapTask>,
    /// Services that must be healthy before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Set when the service exists on Kubernetes only: why it has no single-node (Compose)
    /// form, and what to use there instead. Rendering it for Compose is an error that says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_kubernetes: Option<String>,
}

/// Which group of nodes a service runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Control,
    Compute,
    Network,
    Storage,
    /// Every node that carries any role (a per-node agent such as the log collector).
    Every,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Control => "control",
            Role::Compute => "compute",
            Role::Network => "network",
            Role::Storage => "storage",
            Role::Every => "every",
        })
    }
}

/// The Kubernetes workload kind the service becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
        })
    }
}

/// One container of a service, started by `kolla_start` from config.json.
///
/// `command` and every config file's `dest` may name a fact of the image distribution as
/// `{fact}` (`{apache_command} -DFOREGROUND`); see [`crate::distro`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Container {
    pub name: String,
    /// Kolla image name without registry or tag (`nova-api`).
    pub image: String,
    /// The config.json `command`: split on whitespace by kolla_start, no shell.
    pub command: String,
    /// The user that owns the copied config files (the image's `USER`, or root).
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_files: Vec<ConfigFile>,
    /// config.json `permissions`: ownership `kolla_set_configs` (as root) gives paths before
    /// the command starts, typically the data directories mounted from volumes, which arrive
    /// owned by root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<Permission>,
    /// Plain environment of the container (never a secret).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Environment from passwords.yml: env name → passwords.yml key. The value reaches the
    /// container only through a Secret (Kubernetes) or a mode 0600 env file (Compose), and is
    /// seen by its health check too.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_env: BTreeMap<String, String>,
    /// Env set from a field of the pod on Kubernetes (the downward API), e.g.
    /// `NODE_NAME: spec.nodeName`. Kubernetes only: a single node has no pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_field_env: BTreeMap<String, String>,
    /// Plain env set only when a globals variable has a given value (the vswitchd container
    /// skips Kolla's `modprobe openvswitch` when `ovs_datapath` is `netdev`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_when: Vec<EnvWhen>,
    /// A command run in the container right after it starts (each start), e.g. setting up
    /// what the process serves; the container restarts when it fails. Config files are at
    /// `/var/lib/kolla/config_files/<template>` by then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_start: Vec<String>,
    /// A command run before the container is stopped (Kubernetes' `preStop`), e.g. draining
    /// clients; the pod's grace period bounds it. Compose has no such hook: there the
    /// container stops at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_stop: Vec<String>,
    /// The signal that stops the container's process gracefully: it stops accepting, finishes
    /// the requests it is serving, then exits (Apache: `WINCH`). Without it the process gets
    /// SIGTERM, which stops Apache at once. On Kubernetes the pod's `preStop` hook sends it to
    /// the image's init (which passes it on) after the drain sleep and waits for the exit;
    /// Compose gets `stop_signal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
    /// Which processes get `stop_signal`. `main`: the service's process. `workers`: the
    /// children of a pre-forking server whose parent reads that signal otherwise (glance-api's
    /// workers finish their requests and exit on HUP, while its parent reloads on HUP and kills
    /// its workers at once on TERM). Compose stops such a container with plain SIGTERM, as
    /// `docker stop` signals only the container's first process.
    #[serde(default, skip_serializing_if = "StopTarget::is_main")]
    pub stop_signal_to: StopTarget,
    /// Whether the process serves a WSGI application from a web server
    /// ([`Container::serves_wsgi`]); when absent, a command that starts Apache or uWSGI does.
    /// Set it for a start script that runs one (keystone's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wsgi: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<Healthcheck>,
}

/// The processes a container's `stop_signal` goes to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopTarget {
    #[default]
    Main,
    Workers,
}

impl StopTarget {
    pub fn is_main(&self) -> bool {
        *self == StopTarget::Main
    }
}

/// Signals a catalog's `stop_signal` may name.
pub const STOP_SIGNALS: &[&str] = &["TERM", "INT", "QUIT", "HUP", "USR1", "USR2", "WINCH"];

/// Env that a container gets when the globals variable `var` equals `equals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvWhen {
    pub var: String,
    pub equals: String,
    pub env: BTreeMap<String, String>,
}

impl Container {
    /// The container's plain env for these globals variables: `env`, then every `env_when`
    /// whose variable has the given value (a string, compared as written).
    pub fn plain_env(
        &self,
        vars: &BTreeMap<String, serde_json::Value>,
    ) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        for w in &self.env_when {
            if vars.get(&w.var).and_then(|v| v.as_str()) == Some(w.equals.as_str()) {
                env.extend(w.env.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        env
    }

    /// Whether the container's process is a web server running a Python WSGI application
    /// (Apache's mod_wsgi or uWSGI) rather than an eventlet service: such a process has no
    /// eventlet hub to send the message bus heartbeats, so oslo.messaging needs a thread of
    /// its own for them, and names its queues after the service instead of the server binary.
    pub fn serves_wsgi(&self) -> bool {
        let program = self.command.split_whitespace().next().unwrap_or_default();
        self.wsgi
            .unwrap_or(program == "uwsgi" || program == "{apache_command}")
    }
}

/// A config.json `permissions` entry (kolla 2025.1 `kolla_set_configs`; a missing path is
/// only a warning there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permission {
    /// A path in the container (a shell glob is allowed).
    pub path: String,
    /// `user:group`, names as in the image.
    pub owner: String,
    /// Octal mode as a string (`"0770"`); the mode is left alone when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perm: Option<String>,
    /// Also everything below `path`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recurse: bool,
}

/// A config.json `config_files` entry rendered from a template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub template: String,
    /// Where `kolla_set_configs` copies the file; may name a `{fact}` of the distribution.
    pub dest: String,
    pub owner: String,
    /// Octal mode as a string, `"0600"`.
    pub perm: String,
    /// An INI file that operator overrides (`/etc/kolla/config/<project>/<file>`) merge into.
    #[serde(default)]
    pub merge_ini: bool,
    /// A boolean variable of globals.yml: the container gets this file only when it is true
    /// (Kolla's optional files, e.g. Ceph's client files with `cinder_backend_ceph`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    pub name: String,
    pub port: u16,
    #[serde(default = "tcp")]
    pub protocol: Protocol,
    /// Exposed through the service's Kubernetes Service (replaces an HAProxy frontend).
    #[serde(default)]
    pub expose: bool,
}

fn tcp() -> Protocol {
    Protocol::Tcp
}

/// Host access. Only set where the Kolla reference says the service needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Privileges {
    #[serde(default)]
    pub host_network: bool,
    #[serde(default)]
    pub privileged: bool,
    #[serde(default)]
    pub host_pid: bool,
    #[serde(default)]
    pub host_ipc: bool,
}

impl Privileges {
    pub fn is_none(&self) -> bool {
        *self == Privileges::default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Volume {
    pub name: String,
    pub mount_path: String,
    pub kind: VolumeKind,
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum VolumeKind {
    /// A PersistentVolumeClaim (per pod for a StatefulSet).
    PersistentClaim { size: String },
    /// A directory of the node.
    HostPath { path: String },
    /// An emptyDir shared by the containers of one pod.
    SharedEmptyDir,
    /// A repository of Fernet keys every replica must share (Keystone's token and credential
    /// keys). On Kubernetes: a Secret named like the volume, which the engine creates once
    /// with a staged key `0` and a primary key `1` (what `keystone-manage fernet_setup` makes)
    /// and never changes, prunes or rolls back; it is mounted read-only, its files readable
    /// by the group `fs_group` (the pod's `fsGroup`), and only the key rotation writes it. On
    /// Compose: a named volume, filled by the service's setup tasks. With `rotate`, a
    /// CronJob rotates the keys (`keystone-manage fernet_rotate`) every
    /// `fernet_key_rotation_interval`.
    KeyRepository {
        fs_group: i64,
        #[serde(default)]
        rotate: bool,
    },
}

/// A container health check from the Kolla healthcheck table, with kolla-ansible timings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Healthcheck {
    pub test: HealthTest,
    #[serde(default = "thirty")]
    pub interval_secs: u32,
    #[serde(default = "thirty")]
    pub timeout_secs: u32,
    #[serde(default = "three")]
    pub retries: u32,
    #[serde(default = "five")]
    pub start_period_secs: u32,
    /// Seconds between checks while the container starts (Docker's `start_interval`), until
    /// the first success: how soon a started service is seen ready, which every service that
    /// waits for it pays. Absent: [`Healthcheck::start_interval`]'s default by kind of check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_interval_secs: Option<u32>,
}

impl Healthcheck {
    /// The interval of checks while the container starts: `start_interval_secs`, else 2 s for
    /// an HTTP check (a request the service answers at once) and 5 s for a command run in the
    /// container (some start a runtime each time: RabbitMQ's runs Erlang's CLI).
    pub fn start_interval(&self) -> u32 {
        self.start_interval_secs.unwrap_or(match self.test {
            HealthTest::Http { .. } => 2,
            HealthTest::Exec { .. } => 5,
        })
    }
}

fn thirty() -> u32 {
    30
}
fn three() -> u32 {
    3
}
fn five() -> u32 {
    5
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum HealthTest {
    /// `healthcheck_curl` becomes an HTTP GET probe.
    Http { port: u16, path: String },
    /// Any other check runs inside the container.
    Exec { command: Vec<String> },
}

/// A one-shot step before the service starts (a Kubernetes Job).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootstrapTask {
    pub name: String,
    pub task: BootstrapKind,
    /// Bootstrap tasks of the same service that must finish first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Services that must be healthy before the task runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// When the task runs: on every deploy that changes it (default), on the first install
    /// only, or as a migration phase of an upgrade.
    #[serde(default, skip_serializing_if = "Phase::is_always")]
    pub phase: Phase,
    /// The one target the task runs on; absent: both. A task the other target does another
    /// way (Keystone's key setup: a Secret the engine creates on Kubernetes) names its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_on: Option<TaskTarget>,
    /// A boolean variable of globals.yml: the task exists only when it is true (the
    /// external network kstack makes with `kstack_external_network`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

/// A deployment target, as a bootstrap task names it in `only_on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskTarget {
    Kubernetes,
    Compose,
}

impl BootstrapTask {
    /// Whether the task runs on `target`.
    pub fn runs_on(&self, target: TaskTarget) -> bool {
        self.only_on.is_none_or(|t| t == target)
    }
}

/// When a bootstrap task runs. An upgrade is a deploy that changes a service's workload
/// images (`openstack_release`, `openstack_tag`, `<service>_tag`) from its last healthy
/// generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Every deploy whose version of the task differs from the one that ran (content-named
    /// Jobs): idempotent tasks (create a database, register endpoints).
    #[default]
    Always,
    /// Only while the service is installed (it has never been healthy): first-boot tasks that
    /// must not run on existing data (initialise a database, full schema sync).
    Install,
    /// During an upgrade, before the new pods start: additive schema migrations the old code
    /// still runs on (`KOLLA_UPGRADE`, `*_DB_EXPAND`, `*_DB_MIGRATE`).
    Expand,
    /// After the service itself is healthy, whenever its Job changes; its dependents do not
    /// wait for it (nova's `discover_hosts` once the computes run).
    Post,
    /// After an upgrade of every service succeeded: migrations the old code cannot run on
    /// (`KOLLA_FINISH_UPGRADE`, `*_DB_CONTRACT`) and online data migrations (`KOLLA_OSM`).
    /// A rollback to a generation older than a finished contract phase is refused.
    Contract,
}

impl Phase {
    pub fn is_always(&self) -> bool {
        *self == Phase::Always
    }

    /// Whether the task is a migration phase of an upgrade (not run on install).
    pub fn is_upgrade(&self) -> bool {
        matches!(self, Phase::Expand | Phase::Contract)
    }
}

/// Whether a task of phase `task` may run after one of phase `after`: always and install
/// tasks first, then expand tasks, then post tasks, contract tasks last. (A task whose predecessor does not run
/// in a deploy waits for that predecessor's own predecessors.)
fn phase_may_follow(task: Phase, after: Phase) -> bool {
    let rank = |p: Phase| match p {
        Phase::Always | Phase::Install => 0,
        Phase::Expand => 1,
        Phase::Post => 2,
        Phase::Contract => 3,
    };
    rank(after) <= rank(task)
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Always => "always",
            Phase::Install => "install",
            Phase::Expand => "expand",
            Phase::Post => "post",
            Phase::Contract => "contract",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BootstrapKind {
    /// Create databases and grant users on them (kolla-toolbox `mysql_db` / `mysql_user`).
    DbCreate {
        databases: Vec<String>,
        users: Vec<DbUser>,
    },
    /// Run the service image once with `KOLLA_BOOTSTRAP` set (db sync in extend_start).
    KollaBootstrap {
        /// The container whose image and config run; the first one when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        container: Option<String>,
    },
    /// Register the service, its endpoints and its user in Keystone.
    KeystoneRegister {
        service_name: String,
        service_type: String,
        endpoints: Vec<Endpoint>,
        /// `false` when the service runs as the user another registration of the same project
        /// creates (heat-cfn runs as heat): this one then leaves the user alone.
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        register_user: bool,
        /// Roles the project needs to exist in Keystone (Heat gives its stack users
        /// `heat_stack_user`), created when missing.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        roles: Vec<String>,
    },
    /// Make the external (provider) network of `kstack_external_network*` when it does not
    /// exist yet (kolla-toolbox's `openstack` client, as the admin).
    ExternalNetwork {},
    /// Run a command in an image (the service's first image when absent).
    Command {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image: Option<String>,
        command: Vec<String>,
        /// Extra environment (`KOLLA_UPGRADE: ""`); values are not secrets.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
}

/// Whether `var` may be a `when` condition: a boolean setting kstack knows.
fn known_condition(var: &str) -> bool {
    crate::globals::BOOL_SETTINGS.contains(&var) || var.starts_with("enable_")
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbUser {
    pub user: String,
    pub databases: Vec<String>,
}

/// A Keystone endpoint: registered for the internal and public interfaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub port: u16,
    #[serde(default)]
    pub path: String,
}

/// An operator catalog file: the same shape, every field optional. A service not in the
/// built-in catalog must give every required field.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogOverlay {
    pub services: BTreeMap<String, ServiceOverlay>,
}

/// Fields given here replace the built-in ones whole (lists are not merged element-wise).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceOverlay {
    pub project: Option<String>,
    pub enable_flag: Option<String>,
    pub role: Option<Role>,
    pub kind: Option<WorkloadKind>,
    pub containers: Option<Vec<Container>>,
    pub ports: Option<Vec<Port>>,
    pub privileges: Option<Privileges>,
    pub volumes: Option<Vec<Volume>>,
    pub bootstrap: Option<Vec<BootstrapTask>>,
    pub depends_on: Option<Vec<String>>,
    pub only_kubernetes: Option<String>,
}

/// One problem found in a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogIssue {
    #[error("service `{service}` depends on unknown service `{unknown}`")]
    UnknownDependency { service: String, unknown: String },
    #[error("service `{service}`: bootstrap task `{task}` needs unknown service `{unknown}`")]
    UnknownBootstrapNeed {
        service: String,
        task: String,
        unknown: String,
    },
    #[error("service `{service}`: bootstrap task `{task}` runs after unknown task `{unknown}`")]
    UnknownBootstrapTask {
        service: String,
        task: String,
        unknown: String,
    },
    #[error(
        "service `{service}`: bootstrap task `{task}` (phase {phase}) runs after `{after}` (phase {after_phase}), which does not run before it: a task may follow tasks of its own phase or earlier ones (always/install, then expand, then contract)"
    )]
    PhaseOrder {
        service: String,
        task: String,
        phase: Phase,
        after: String,
        after_phase: Phase,
    },
    #[error("service `{service}` has no containers")]
    NoContainers { service: String },
    #[error("service `{service}`, container `{container}`: {field}: {message}")]
    UnknownFact {
        service: String,
        container: String,
        field: String,
        message: String,
    },
    #[error(
        "service `{service}`, container `{container}`: permissions owner `{owner}` for `{path}` is not `user:group`"
    )]
    BadOwner {
        service: String,
        container: String,
        path: String,
        owner: String,
    },
    #[error(
        "service `{service}`, container `{container}`: `stop_signal: {signal}` is not one of TERM, INT, QUIT, HUP, USR1, USR2, WINCH (without `SIG`)"
    )]
    BadStopSignal {
        service: String,
        container: String,
        signal: String,
    },
    #[error(
        "service `{service}`, container `{container}`: `stop_signal_to: workers` needs a `stop_signal` to send them"
    )]
    StopTargetWithoutSignal { service: String, container: String },
    #[error(
        "service `{service}`, container `{container}`: config file `{template}` has `when: {var}`, which is not a boolean setting kstack knows"
    )]
    UnknownCondition {
        service: String,
        container: String,
        template: String,
        var: String,
    },
    #[error(
        "service `{service}`: bootstrap task `{task}` has `when: {var}`, which is not a boolean setting kstack knows"
    )]
    UnknownTaskCondition {
        service: String,
        task: String,
        var: String,
    },
    #[error("service `{service}` is new in the operator catalog and lacks field `{field}`")]
    MissingField {
        service: String,
        field: &'static str,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{name}: {message}")]
    Parse { name: String, message: String },
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<CatalogIssue>),
}

impl Catalog {
    /// Drops every config file and bootstrap task whose `when` setting is not true in `vars`
    /// (globals.yml after defaults), so every consumer of the catalog sees the files the
    /// containers get and the tasks that run.
    pub fn apply_conditions(&mut self, vars: &BTreeMap<String, serde_json::Value>) {
        for s in self.services.values_mut() {
            let holds = |when: &Option<String>| {
                when.as_ref().is_none_or(|var| {
                    vars.get(var)
                        .and_then(crate::globals::parse_bool)
                        .unwrap_or(false)
                })
            };
            for c in &mut s.containers {
                c.config_files.retain(|f| holds(&f.when));
            }
            s.bootstrap.retain(|t| holds(&t.when));
        }
    }

    /// The built-in catalog, validated.
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::from_yaml("built-in catalog", BUILTIN_YAML)
    }

    /// Parse and validate a full catalog; `name` labels errors (a file name).
    pub fn from_yaml(name: &str, text: &str) -> Result<Catalog, CatalogError> {
        let catalog: Catalog = serde_saphyr::from_str(text).map_err(|e| CatalogError::Parse {
            name: name.to_owned(),
            message: e.to_string(),
        })?;
        catalog.validate()?;
        Ok(catalog)
    }

    /// Parse an operator catalog file (not validated until merged).
    pub fn overlay_from_yaml(name: &str, text: &str) -> Result<CatalogOverlay, CatalogError> {
        serde_saphyr::from_str(text).map_err(|e| CatalogError::Parse {
            name: name.to_owned(),
            message: e.to_string(),
        })
    }

    /// Lay `overlay` over `builtin` by service name: a known service gets the given fields
    /// replaced, an unknown one is added. The result is validated; all problems are reported.
    pub fn merge(builtin: Catalog, overlay: CatalogOverlay) -> Result<Catalog, CatalogError> {
        let mut services = builtin.services;
        let mut issues = Vec::new();
        for (name, o) in overlay.services {
            if let Some(s) = services.get_mut(&name) {
                apply(s, o);
                continue;
            }
            let required = [
                ("project", o.project.is_none()),
                ("enable_flag", o.enable_flag.is_none()),
                ("role", o.role.is_none()),
                ("kind", o.kind.is_none()),
                ("containers", o.containers.is_none()),
            ];
            let (Some(project), Some(enable_flag), Some(role), Some(kind), Some(containers)) =
                (o.project, o.enable_flag, o.role, o.kind, o.containers)
            else {
                for (field, missing) in required {
                    if missing {
                        issues.push(CatalogIssue::MissingField {
                            service: name.clone(),
                            field,
                        });
                    }
                }
                continue;
            };
            services.insert(
                name,
                Service {
                    project,
                    enable_flag,
                    role,
                    kind,
                    containers,
                    ports: o.ports.unwrap_or_default(),
                    privileges: o.privileges.unwrap_or_default(),
                    volumes: o.volumes.unwrap_or_default(),
                    bootstrap: o.bootstrap.unwrap_or_default(),
                    depends_on: o.depends_on.unwrap_or_default(),
                    only_kubernetes: o.only_kubernetes,
                },
            );
        }
        let catalog = Catalog { services };
        if let Err(CatalogError::Invalid(more)) = catalog.validate() {
            issues.extend(more);
        }
        if issues.is_empty() {
            Ok(catalog)
        } else {
            Err(CatalogError::Invalid(issues))
        }
    }

    /// Check references between services and bootstrap tasks; collects every problem.
    pub fn validate(&self) -> Result<(), CatalogError> {
        let mut issues = Vec::new();
        for (name, s) in &self.services {
            if s.containers.is_empty() {
                issues.push(CatalogIssue::NoContainers {
                    service: name.clone(),
                });
            }
            for c in &s.containers {
                let fields = std::iter::once(("command".to_owned(), &c.command)).chain(
                    c.config_files
                        .iter()
                        .map(|f| (format!("config file `{}` dest", f.template), &f.dest)),
                );
                for (field, text) in fields {
                    if let Err(e) = crate::distro::check(text) {
                        issues.push(CatalogIssue::UnknownFact {
                            service: name.clone(),
                            container: c.name.clone(),
                            field,
                            message: e.to_string(),
                        });
                    }
                }
                for f in &c.config_files {
                    if let Some(var) = &f.when
                        && !known_condition(var)
                    {
                        issues.push(CatalogIssue::UnknownCondition {
                            service: name.clone(),
                            container: c.name.clone(),
                            template: f.template.clone(),
                            var: var.clone(),
                        });
                    }
                }
                if c.stop_signal.is_none() && !c.stop_signal_to.is_main() {
                    issues.push(CatalogIssue::StopTargetWithoutSignal {
                        service: name.clone(),
                        container: c.name.clone(),
                    });
                }
                if let Some(sig) = &c.stop_signal
                    && !STOP_SIGNALS.contains(&sig.as_str())
                {
                    issues.push(CatalogIssue::BadStopSignal {
                        service: name.clone(),
                        container: c.name.clone(),
                        signal: sig.clone(),
                    });
                }
                for p in &c.permissions {
                    let ok = p
                        .owner
                        .split_once(':')
                        .is_some_and(|(u, g)| !u.is_empty() && !g.is_empty() && !g.contains(':'));
                    if !ok {
                        issues.push(CatalogIssue::BadOwner {
                            service: name.clone(),
                            container: c.name.clone(),
                            path: p.path.clone(),
                            owner: p.owner.clone(),
                        });
                    }
                }
            }
            for dep in &s.depends_on {
                if !self.services.contains_key(dep) {
                    issues.push(CatalogIssue::UnknownDependency {
                        service: name.clone(),
                        unknown: dep.clone(),
                    });
                }
            }
            let tasks: BTreeSet<&str> = s.bootstrap.iter().map(|t| t.name.as_str()).collect();
            for t in &s.bootstrap {
                if let Some(var) = &t.when
                    && !known_condition(var)
                {
                    issues.push(CatalogIssue::UnknownTaskCondition {
                        service: name.clone(),
                        task: t.name.clone(),
                        var: var.clone(),
                    });
                }
                for need in &t.needs {
                    if !self.services.contains_key(need) {
                        issues.push(CatalogIssue::UnknownBootstrapNeed {
                            service: name.clone(),
                            task: t.name.clone(),
                            unknown: need.clone(),
                        });
                    }
                }
                for after in &t.after {
                    if !tasks.contains(after.as_str()) {
                        issues.push(CatalogIssue::UnknownBootstrapTask {
                            service: name.clone(),
                            task: t.name.clone(),
                            unknown: after.clone(),
                        });
                    } else if let Some(a) = s.bootstrap.iter().find(|a| &a.name == after)
                        && !phase_may_follow(t.phase, a.phase)
                    {
                        issues.push(CatalogIssue::PhaseOrder {
                            service: name.clone(),
                            task: t.name.clone(),
                            phase: t.phase,
                            after: after.clone(),
                            after_phase: a.phase,
                        });
                    }
                }
            }
        }
        if issues.is_empty() {
            Ok(())
        } else {
            Err(CatalogError::Invalid(issues))
        }
    }

    /// The catalog as YAML (the same shape it is read from).
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).unwrap_or_default()
    }
}

fn apply(s: &mut Service, o: ServiceOverlay) {
    if let Some(v) = o.project {
        s.project = v;
    }
    if let Some(v) = o.enable_flag {
        s.enable_flag = v;
    }
    if let Some(v) = o.role {
        s.role = v;
    }
    if let Some(v) = o.kind {
        s.kind = v;
    }
    if let Some(v) = o.containers {
        s.containers = v;
    }
    if let Some(v) = o.ports {
        s.ports = v;
    }
    if let Some(v) = o.privileges {
        s.privileges = v;
    }
    if let Some(v) = o.volumes {
        s.volumes = v;
    }
    if let Some(v) = o.bootstrap {
        s.bootstrap = v;
    }
    if let Some(v) = o.depends_on {
        s.depends_on = v;
    }
    if let Some(v) = o.only_kubernetes {
        s.only_kubernetes = Some(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;

    const EXPECTED: [&str; 28] = [
        "mariadb",
        "rabbitmq",
        "memcached",
        "keystone",
        "glance-api",
        "placement-api",
        "nova-api",
        "nova-scheduler",
        "nova-conductor",
        "nova-novncproxy",
        "nova-compute",
        "nova-libvirt",
        "neutron-server",
        "neutron-openvswitch-agent",
        "neutron-dhcp-agent",
        "neutron-l3-agent",
        "neutron-metadata-agent",
        "openvswitch-db-server",
        "openvswitch-vswitchd",
        "horizon",
        "heat-api",
        "heat-api-cfn",
        "heat-engine",
        "cinder-api",
        "cinder-scheduler",
        "cinder-volume",
        "victoria-logs",
        "vlagent",
    ];

    fn builtin() -> Catalog {
        Catalog::builtin().unwrap_or_else(|e| panic!("built-in catalog: {e}"))
    }

    #[test]
    fn wsgi_servers_are_the_apache_and_uwsgi_containers() {
        let c = builtin();
        let mut wsgi: Vec<&str> = c
            .services
            .values()
            .flat_map(|s| &s.containers)
            .filter(|c| c.serves_wsgi())
            .map(|c| c.name.as_str())
            .collect();
        wsgi.sort_unstable();
        assert_eq!(
            wsgi,
            [
                "cinder-api",
                "heat-api",
                "heat-api-cfn",
                "horizon",
                "keystone",
                "nova-api",
                "nova-metadata",
                "placement-api"
            ]
        );
    }

    #[test]
    fn builtin_has_exactly_the_expected_services() {
        let c = builtin();
        let names: BTreeSet<&str> = c.services.keys().map(String::as_str).collect();
        let expected: BTreeSet<&str> = EXPECTED.into_iter().collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn every_dependency_names_a_real_service() {
        let c = builtin();
        for (name, s) in &c.services {
            for d in s
                .depends_on
                .iter()
                .chain(s.bootstrap.iter().flat_map(|t| &t.needs))
            {
                assert!(c.services.contains_key(d), "{name} depends on unknown {d}");
                assert_ne!(d, name, "{name} depends on itself");
            }
        }
    }

    #[test]
    fn builtin_graph_is_acyclic_and_starts_with_infrastructure() {
        let g = Graph::from_catalog(&builtin(), |_| true);
        assert_eq!(g.find_cycle(), None);
        let levels = g.levels().unwrap();
        assert_eq!(
            levels[0],
            [
                "mariadb",
                "memcached",
                "nova-libvirt",
                "openvswitch-db-server",
                "rabbitmq",
                "victoria-logs"
            ]
        );
        assert_eq!(levels[1], ["keystone", "openvswitch-vswitchd", "vlagent"]);
    }

    #[test]
    fn workload_kinds_follow_the_rules() {
        let c = builtin();
        for (name, s) in &c.services {
            let want = match name.as_str() {
                // Stores, each pod with its own data and name.
                "mariadb" | "rabbitmq" | "memcached" | "victoria-logs" => WorkloadKind::StatefulSet,
                // One per node.
                n if n.starts_with("openvswitch")
                    || n.ends_with("-agent")
                    || n == "vlagent"
                    || n == "nova-compute"
                    || n == "nova-libvirt"
                    || n == "cinder-volume" =>
                {
                    WorkloadKind::DaemonSet
                }
                _ => WorkloadKind::Deployment,
            };
            assert_eq!(s.kind, want, "{name}");
        }
    }

    #[test]
    fn healthchecks_use_kolla_ansible_default_timings() {
        let c = builtin();
        for (name, s) in &c.services {
            for ct in &s.containers {
                let h = ct
                    .healthcheck
                    .as_ref()
                    .unwrap_or_else(|| panic!("{name}/{}", ct.name));
                // One exception, said in the catalog: RabbitMQ's check (six Erlang CLI runs)
                // gets 90 s, as an operator sets rabbitmq_healthcheck_timeout.
                let timeout = if name == "rabbitmq" { 90 } else { 30 };
                assert_eq!(
                    (
                        h.interval_secs,
                        h.timeout_secs,
                        h.retries,
                        h.start_period_secs
                    ),
                    (30, timeout, 3, 5),
                    "{name}"
                );
            }
        }
        let keystone = &c.services["keystone"].containers[0];
        assert_eq!(
            keystone.healthcheck.as_ref().unwrap().test,
            HealthTest::Http {
                port: 5000,
                path: "/".into()
            }
        );
    }

    #[test]
    fn start_intervals_are_short_for_http_checks_and_longer_for_commands() {
        let c = Catalog::builtin().unwrap();
        let check = |s: &str| c.services[s].containers[0].healthcheck.clone().unwrap();
        assert_eq!(check("keystone").start_interval(), 2);
        assert_eq!(check("rabbitmq").start_interval(), 5);
        let mut h = check("keystone");
        h.start_interval_secs = Some(7);
        assert_eq!(h.start_interval(), 7);
        let parsed: Healthcheck = serde_saphyr::from_str(
            "test: { http: { port: 1, path: / } }\nstart_interval_secs: 3\n",
        )
        .unwrap();
        assert_eq!(parsed.start_interval(), 3);
    }

    #[test]
    fn privileges_only_where_the_reference_needs_them() {
        let c = builtin();
        let privileged: BTreeSet<&str> = c
            .services
            .iter()
            .filter(|(_, s)| s.privileges.privileged)
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(
            privileged,
            BTreeSet::from([
                "cinder-volume",
                "neutron-dhcp-agent",
                "neutron-l3-agent",
                "neutron-metadata-agent",
                "neutron-openvswitch-agent",
                "nova-api",
                "nova-compute",
                "nova-libvirt",
                "openvswitch-vswitchd",
            ])
        );
        assert!(c.services["nova-libvirt"].privileges.host_pid);
        assert!(c.services["nova-compute"].privileges.host_ipc);
        assert!(!c.services["keystone"].privileges.host_network);
    }

    #[test]
    fn every_data_volume_a_non_root_container_writes_is_chowned_to_its_user() {
        let c = builtin();
        let mut checked = 0;
        for (name, s) in &c.services {
            for ct in s.containers.iter().filter(|ct| ct.user != "root") {
                for v in &s.volumes {
                    // Claims, and host directories kstack keeps state in; not the host's own
                    // /dev, /run, /lib/modules, /etc/iscsi.
                    let data = match &v.kind {
                        VolumeKind::PersistentClaim { .. }
                        | VolumeKind::SharedEmptyDir
                        | VolumeKind::KeyRepository { .. } => true,
                        VolumeKind::HostPath { path } => path.starts_with("/var/lib/kstack/"),
                    };
                    // libvirtd's state, written by nova-libvirt (root); nova-compute reads it.
                    let other_owner = (name.as_str(), v.mount_path.as_str())
                        == ("nova-compute", "/var/lib/libvirt");
                    if !data || v.read_only || other_owner {
                        continue;
                    }
                    let p = ct
                        .permissions
                        .iter()
                        .find(|p| p.path == v.mount_path)
                        .unwrap_or_else(|| {
                            panic!("{name}/{}: nothing chowns {}", ct.name, v.mount_path)
                        });
                    assert_eq!(
                        p.owner.split(':').next(),
                        Some(ct.user.as_str()),
                        "{name}/{}",
                        ct.name
                    );
                    checked += 1;
                }
            }
        }
        // Keystone's two key repositories and the log store's claim among them.
        assert_eq!(checked, 11);
    }

    #[test]
    fn distribution_facts_and_owners_are_checked() {
        let text = BUILTIN_YAML
            .replace(
                "{apache_conf_dir}/wsgi-keystone.conf",
                "{apache_dir}/wsgi-keystone.conf",
            )
            .replace("owner: \"glance:glance\"", "owner: glance");
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "service `glance-api`, container `glance-api`: permissions owner `glance` for `/var/lib/glance` is not `user:group`\n\
                 service `keystone`, container `keystone`: config file `wsgi-keystone.conf` dest: unknown fact `{{apache_dir}}`; known: {}, {}",
                crate::distro::FACTS.join(", "),
                crate::distro::TARGET_FACTS.join(", ")
            )
        );
    }

    #[test]
    fn yaml_round_trips() {
        let c = builtin();
        let again = Catalog::from_yaml("round trip", &c.to_yaml()).unwrap();
        assert_eq!(c, again);
    }

    #[test]
    fn overlay_replaces_fields_and_adds_services() {
        let overlay = Catalog::overlay_from_yaml(
            "ops.yaml",
            r#"
services:
  horizon:
    depends_on: [keystone]
  barbican-api:
    project: barbican
    enable_flag: enable_barbican
    role: control
    kind: Deployment
    containers:
      - { name: barbican-api, image: barbican-api, command: uwsgi /etc/barbican/barbican-api-uwsgi.ini, user: barbican }
    depends_on: [keystone]
"#,
        )
        .unwrap();
        let merged = Catalog::merge(builtin(), overlay).unwrap();
        assert_eq!(merged.services["horizon"].depends_on, ["keystone"]);
        assert_eq!(
            merged.services["horizon"].ports[0].port, 80,
            "other fields kept"
        );
        assert_eq!(merged.services["barbican-api"].role, Role::Control);
        assert_eq!(merged.services.len(), 29);
    }

    #[test]
    fn overlay_with_unknown_dependency_names_both() {
        let overlay = Catalog::overlay_from_yaml(
            "ops.yaml",
            "services:\n  heat-engine:\n    depends_on: [heat-api, nova-cells]\n",
        )
        .unwrap();
        let err = Catalog::merge(builtin(), overlay).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service `heat-engine` depends on unknown service `nova-cells`"
        );
    }

    #[test]
    fn new_service_must_give_required_fields() {
        let overlay = Catalog::overlay_from_yaml(
            "ops.yaml",
            "services:\n  octavia-api:\n    project: octavia\n    role: control\n",
        )
        .unwrap();
        let err = Catalog::merge(builtin(), overlay).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service `octavia-api` is new in the operator catalog and lacks field `enable_flag`\n\
             service `octavia-api` is new in the operator catalog and lacks field `kind`\n\
             service `octavia-api` is new in the operator catalog and lacks field `containers`"
        );
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err =
            Catalog::overlay_from_yaml("ops.yaml", "services:\n  horizon:\n    replicas: 3\n")
                .unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("ops.yaml: "), "{msg}");
        assert!(msg.contains("replicas"), "{msg}");
        let err = Catalog::from_yaml("x", &BUILTIN_YAML.replace("user: mysql", "usr: mysql"))
            .unwrap_err();
        assert!(err.to_string().contains("usr"), "{err}");
    }

    #[test]
    fn unknown_bootstrap_task_is_reported() {
        let text = BUILTIN_YAML.replace(
            "after: [db-create]\n        phase: install\n      - name: db-expand\n        task: { command: { command: [kolla_start], env: { KOLLA_UPGRADE: \"\", GLANCE",
            "after: [db-creat]\n        phase: install\n      - name: db-expand\n        task: { command: { command: [kolla_start], env: { KOLLA_UPGRADE: \"\", GLANCE",
        );
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service `glance-api`: bootstrap task `db-sync` runs after unknown task `db-creat`"
        );
    }

    #[test]
    fn a_task_after_one_of_a_later_phase_is_reported() {
        // glance's register (phase always) after its contract migration would never run on
        // install.
        let text = BUILTIN_YAML.replace(
            "service_type: image, endpoints: [{ port: 9292 }] } }\n        needs: [keystone]",
            "service_type: image, endpoints: [{ port: 9292 }] } }\n        needs: [keystone]\n        after: [db-contract]",
        );
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert!(
            err.contains(
                "bootstrap task `register` (phase always) runs after `db-contract` (phase contract)"
            ),
            "{err}"
        );
        // The built-in catalog has every phase, in order.
        let c = Catalog::builtin().unwrap();
        let phases: BTreeSet<Phase> = c
            .services
            .values()
            .flat_map(|s| s.bootstrap.iter().map(|t| t.phase))
            .collect();
        assert_eq!(phases.len(), 5, "{phases:?}");
    }

    #[test]
    fn a_config_file_only_some_clouds_get_names_a_boolean_setting() {
        let text = BUILTIN_YAML.replace("when: cinder_backend_ceph", "when: cinder_backend_cepf");
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert!(
            err.contains("config file `ceph.conf` has `when: cinder_backend_cepf`, which is not a boolean setting kstack knows"),
            "{err}"
        );

        let files = |c: &Catalog| -> Vec<String> {
            c.services["cinder-volume"].containers[0]
                .config_files
                .iter()
                .map(|f| f.template.clone())
                .collect()
        };
        let mut c = Catalog::builtin().unwrap();
        assert_eq!(files(&c), ["cinder.conf", "ceph.conf", "ceph.keyring"]);
        let mut vars = crate::globals::defaults();
        c.apply_conditions(&vars);
        assert_eq!(files(&c), ["cinder.conf"]);
        let mut c = Catalog::builtin().unwrap();
        vars.insert("cinder_backend_ceph".into(), serde_json::json!("yes"));
        c.apply_conditions(&vars);
        assert_eq!(files(&c), ["cinder.conf", "ceph.conf", "ceph.keyring"]);
    }
}
