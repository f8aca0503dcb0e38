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
//! The `*_external` frontends (the public endpoints) are HAProxy's still, when there is a public
//! address: the catalog's `haproxy` service (`public_gateway`) gets one frontend per `public`
//! port of the enabled services, and its Service answers on `kolla_external_vip_address`
//! (`externalIPs`). The keepalived VIP itself (VRRP) has no counterpart: the address is routed
//! to the nodes, where kube-proxy answers on it.
//! Not in the catalog yet: `mariadb_clustercheck`, `keystone_fernet` rotation between peers.
//!
//! This module holds the catalog's types, as the catalog files spell them; `load` reads,
//! merges and checks catalog files into them.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

mod load;
pub use load::{CatalogError, CatalogIssue};

/// The built-in catalog file, as shipped.
pub const BUILTIN_YAML: &str = include_str!("../../catalog/services.yaml");

/// The ports kstack addresses services by, as (service, port name): the config files' addresses
/// (`database_port`, `transport_url`, `keystone_internal_url`, ...), the bootstrap tasks' and
/// `kstack verify`'s URLs. Their numbers live only in the catalog; every catalog, the built-in
/// one and an operator's merged over it, must declare each of them ([`Catalog::validate`]), so
/// the renderer never falls back to a number of its own.
pub const ADDRESSED_PORTS: &[(&str, &str)] = &[
    ("mariadb", "mysql"),
    ("mariadb", "position"),
    ("rabbitmq", "amqp"),
    ("memcached", "memcached"),
    ("victoria-logs", "http"),
    ("keystone", "api"),
    ("glance-api", "api"),
    ("placement-api", "api"),
    ("nova-api", "api"),
    ("nova-api", "metadata"),
    ("nova-novncproxy", "novnc"),
    ("neutron-server", "api"),
    ("heat-api", "api"),
    ("heat-api-cfn", "api"),
    ("cinder-api", "api"),
    ("horizon", "http"),
];

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
    /// Roles whose nodes run the service too, besides its own role's: a per-node agent that
    /// several groups of hosts need (Open vSwitch and its neutron agent run on network and
    /// compute nodes, as kolla-ansible's inventory puts them). Neither `every` nor the
    /// service's own role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_on: Vec<Role>,
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
    /// What the service's pods need before they start on a first install, when that is less
    /// than every service of `depends_on` (which still orders upgrades and reconfigures): a
    /// service's name (that service healthy) or `service/task` (that bootstrap task of another
    /// service done). Each service named must be in `depends_on`. The service's own Jobs run
    /// first either way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_after: Vec<String>,
    /// Services of `depends_on` whose pods an upgrade replaces after this service's rather than
    /// before: in an upgrade of this service it waits for their Jobs (their schema migrations),
    /// not their pods, and their pods wait until this service is healthy. (Nova's conductors run
    /// the new release before any other nova service: an older conductor cannot read the newer
    /// objects the others send.) No other service of `depends_on` may depend on one named here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upgrade_before: Vec<String>,
    /// Set when the service exists on Kubernetes only: why it has no single-node (Compose)
    /// form, and what to use there instead. Rendering it for Compose is an error that says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_kubernetes: Option<String>,
    /// The service that publishes every enabled service's `public` ports on the public address
    /// (`kolla_external_vip_address`): its Service carries those ports, and its config files
    /// get them as `public_frontends`. At most one service of a catalog has it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub public_gateway: bool,
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

impl Service {
    /// Every role whose nodes run the service: its own, then `also_on`.
    pub fn roles(&self) -> Vec<Role> {
        std::iter::once(self.role)
            .chain(self.also_on.iter().copied())
            .collect()
    }
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
    /// How long the container may take to stop, its `pre_stop` included (Kubernetes: the
    /// pod's `terminationGracePeriodSeconds`, the longest of its containers'; 30 s without).
    /// Compose has no `pre_stop` and stops it with its own default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_grace_secs: Option<i64>,
    /// The signal that stops the container's process gracefully: it stops accepting, finishes
    /// the requests it is serving, then exits (Apache: `WINCH`). Without it the process gets
    /// SIGTERM, which stops Apache at once. On Kubernetes the image's init (dumb-init) turns
    /// the kubelet's SIGTERM into it, after the pod's drain sleep (for `workers`, the pod's
    /// `preStop` hook sends it and waits for them); Compose gets `stop_signal`.
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

/// Signals a catalog's `stop_signal` may name, with their Linux numbers (the same on x86-64
/// and arm64; the Kubernetes renderer has the image's init rewrite SIGTERM to that number).
pub const STOP_SIGNALS: &[(&str, u8)] = &[
    ("TERM", 15),
    ("INT", 2),
    ("QUIT", 3),
    ("HUP", 1),
    ("USR1", 10),
    ("USR2", 12),
    ("WINCH", 28),
];

/// The Linux number of a signal of [`STOP_SIGNALS`], by its name without `SIG`.
pub fn stop_signal_number(name: &str) -> Option<u8> {
    STOP_SIGNALS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, number)| *number)
}

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
    /// Published on the public address too, through the public gateway (the service with
    /// `public_gateway`), when one is enabled: the port of a public endpoint. Needs `expose`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub public: bool,
    /// The public port with TLS on the public endpoints (`kolla_enable_tls_external`), when it
    /// is not `port`: Horizon's 443, whose plain port then redirects to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_tls_port: Option<u16>,
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
    /// A host path whose mounts are shared both ways between the container and the host (and
    /// so the service's other containers, and its next container after a restart): what a
    /// container mounts under it stays on the host. Neutron's agents mount their network
    /// namespaces under `/run/netns` this way (kolla-ansible's `/run/netns:/run/netns:shared`).
    /// On Kubernetes `mountPropagation: Bidirectional` (the service must be privileged); on
    /// Compose a bind with `propagation: shared`. The host's directory must itself be a shared
    /// mount (as `ip netns` makes `/run/netns`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
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
    /// A `post` task that starts once its service's workload is applied (and what it `needs`
    /// works) instead of once the service is healthy: it waits itself for what it looks for
    /// (nova's host discovery polls for the computes' service records as they start).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub with_workload: bool,
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
        /// Plain env the image's bootstrap reads (never a secret). A value may name a value
        /// kstack computes as `{name}`, one of [`TASK_ENV_PLACEHOLDERS`] (`{keystone_internal_url}`).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        /// Env from passwords.yml the image's bootstrap reads: env name → passwords.yml key.
        /// The task's output passes a filter that hides these values (Kolla's start script
        /// traces its commands).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        secret_env: BTreeMap<String, String>,
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

/// The values a `kolla_bootstrap` task's `env` may name as `{name}`, which the renderer fills
/// for the cloud and its target: Keystone's internal URL (its Service on Kubernetes, the node's
/// address on Compose), and the admin user, its project and the region of globals.yml.
pub const TASK_ENV_PLACEHOLDERS: &[&str] = &[
    "keystone_internal_url",
    "keystone_admin_user",
    "keystone_admin_project",
    "openstack_region_name",
];

/// A piece of a task's env value: text as written, or a placeholder the renderer fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvPiece<'a> {
    Text(&'a str),
    /// One of [`TASK_ENV_PLACEHOLDERS`].
    Placeholder(&'a str),
}

/// A `{name}` in a task's env value that kstack does not fill (or a `{` without its `}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{{{name}}}` is not a value kstack fills; known: {}", TASK_ENV_PLACEHOLDERS.join(", "))]
pub struct UnknownPlaceholder {
    pub name: String,
}

/// The pieces of a `kolla_bootstrap` task's env value, in order.
pub fn task_env_pieces(text: &str) -> Result<Vec<EnvPiece<'_>>, UnknownPlaceholder> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        if start > 0 {
            pieces.push(EnvPiece::Text(&rest[..start]));
        }
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else {
            return Err(UnknownPlaceholder {
                name: after.to_owned(),
            });
        };
        let name = &after[..end];
        if !TASK_ENV_PLACEHOLDERS.contains(&name) {
            return Err(UnknownPlaceholder {
                name: name.to_owned(),
            });
        }
        pieces.push(EnvPiece::Placeholder(name));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        pieces.push(EnvPiece::Text(rest));
    }
    Ok(pieces)
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
    pub also_on: Option<Vec<Role>>,
    pub kind: Option<WorkloadKind>,
    pub containers: Option<Vec<Container>>,
    pub ports: Option<Vec<Port>>,
    pub privileges: Option<Privileges>,
    pub volumes: Option<Vec<Volume>>,
    pub bootstrap: Option<Vec<BootstrapTask>>,
    pub depends_on: Option<Vec<String>>,
    pub install_after: Option<Vec<String>>,
    pub upgrade_before: Option<Vec<String>>,
    pub only_kubernetes: Option<String>,
    pub public_gateway: Option<bool>,
}
