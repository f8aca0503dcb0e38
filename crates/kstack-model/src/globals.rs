//! The typed deployment description read from `globals.yml`.
//!
//! Variable names follow kolla-ansible (`openstack_release`, `enable_nova`, ...) so that an
//! existing kolla-ansible `globals.yml` can be reused. Kubernetes-only settings use names that
//! kolla-ansible does not have (`kubernetes_namespace`, `kstack_*`).
//!
//! [`Globals::from_vars`] takes the user's variables (already parsed, no spans), merges them over
//! the defaults, derives the dependent defaults the way kolla-ansible's `group_vars/all.yml`
//! does, and checks the types of every variable kstack interprets. It reports every problem, not
//! only the first, as [`GlobalsIssue`]s keyed by variable name; the config loader attaches file
//! locations to them.
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Services kstack knows an `enable_<service>` flag for, with their kolla-ansible default.
///
/// `None` means the default is derived from other flags (see [`Globals::from_vars`]).
pub const SERVICE_FLAGS: &[(&str, Option<bool>)] = &[
    ("mariadb", Some(true)),
    ("memcached", Some(true)),
    ("rabbitmq", Some(true)),
    ("keystone", None),
    ("glance", None),
    ("nova", None),
    ("neutron", None),
    ("heat", None),
    ("horizon", None),
    ("placement", None),
    ("openvswitch", None),
    ("cinder", Some(false)),
    ("central_logging", Some(false)),
];

/// Base distributions the Kolla images are published for (each has a [`crate::distro::Distro`]).
pub const DISTROS: &[&str] = &["centos", "debian", "rocky", "ubuntu"];

/// Values of `config_strategy` the images understand (`KOLLA_CONFIG_STRATEGY`).
pub const CONFIG_STRATEGIES: &[&str] = &["COPY_ALWAYS", "COPY_ONCE"];

/// Values of `nova_compute_virt_type` kstack renders: `kvm` needs hardware virtualization on
/// the compute hosts; `qemu` emulates (TCG) and runs anywhere, slowly.
pub const VIRT_TYPES: &[&str] = &["kvm", "qemu"];

/// Values of `ovs_datapath`: `system` is the Open vSwitch kernel module; `netdev` is the
/// userspace datapath, for hosts without the module (neutron's DHCP and L3 agents then plug
/// their namespaces through veth pairs).
pub const OVS_DATAPATHS: &[&str] = &["system", "netdev"];

/// The roles a node can carry; each maps to the label `<kstack_role_label_prefix><role>=true`.
pub const ROLES: &[&str] = &["control", "compute", "network", "storage"];

/// Default image tag distro version for a base distro (kolla-ansible 2025.1 `all.yml`).
pub fn default_distro_version(distro: &str) -> Option<&'static str> {
    match distro {
        "rocky" => Some("9"),
        "ubuntu" => Some("noble"),
        "debian" => Some("bookworm"),
        "centos" => Some("stream9"),
        _ => None,
    }
}

/// Resource requests for one service's containers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Kubernetes quantity, e.g. `500m`.
    pub cpu: Option<String>,
    /// Kubernetes quantity, e.g. `1Gi`.
    pub memory: Option<String>,
}

/// A problem with one variable, found while typing the variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalsIssue {
    /// The top-level variable, e.g. `enable_nova`.
    pub key: String,
    /// Path below the variable for nested values, e.g. `nova` in `kstack_replicas.nova`.
    pub subpath: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub help: String,
}

/// Services that run as a cluster deciding by majority: an even number of replicas only adds a
/// way to lose the quorum.
pub const QUORUM_CLUSTERS: &[&str] = &["mariadb", "rabbitmq"];

/// The deployment description kstack acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Globals {
    pub openstack_release: String,
    pub kolla_base_distro: String,
    pub kolla_base_distro_version: String,
    pub openstack_tag_suffix: String,
    /// `{release}-{distro}-{distro_version}{suffix}` unless set explicitly.
    pub openstack_tag: String,
    /// Empty means no registry part in image references.
    pub docker_registry: String,
    pub docker_namespace: String,
    pub docker_image_name_prefix: String,
    pub network_interface: String,
    pub neutron_external_interface: String,
    pub openstack_region_name: String,
    pub keystone_admin_user: String,
    pub keystone_admin_project: String,
    pub config_strategy: String,
    pub kolla_internal_vip_address: Option<String>,
    /// `enable_<service>` for every service in [`SERVICE_FLAGS`], after derivation.
    pub enabled: BTreeMap<String, bool>,
    /// Kubernetes namespace the deployment lives in.
    pub kubernetes_namespace: String,
    /// Replicas per service (`kstack_replicas`); services not listed get 1.
    pub replicas: BTreeMap<String, u32>,
    /// Prefix of the node role labels (`kstack_role_label_prefix`).
    pub role_label_prefix: String,
    /// Storage class for persistent volumes (`kstack_storage_class`); `None` uses the cluster default.
    pub storage_class: Option<String>,
    /// Resource requests per service (`kstack_resources`).
    pub resources: BTreeMap<String, Resources>,
    /// Deploy step time limits in seconds (`kstack_timeouts`): key `default` and per service.
    pub timeouts: BTreeMap<String, u64>,
    /// Generations kept per service (`kstack_history_limit`); older ones, and the objects only
    /// they point at, are deleted after a successful deploy.
    pub history_limit: usize,
    /// Extra labels on the pods of a service (`kstack_pod_labels`), e.g. for policies or
    /// monitoring; never the `app.kubernetes.io/` labels kstack selects pods by.
    pub pod_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Keystone's token lifetime and key rotation (kolla-ansible's `fernet_*` settings).
    pub fernet: FernetTiming,
    /// Cinder's volumes in a Ceph cluster (`cinder_backend_ceph`), when on.
    pub cinder_ceph: Option<CephBackend>,
    /// The provider network kstack makes once Neutron runs (`kstack_external_network`), when on.
    pub external_network: Option<ExternalNetwork>,
    /// Every variable after merging defaults, user values and derived values; templates read these.
    pub vars: BTreeMap<String, Value>,
}

/// The external (provider) network of the cloud, made by kstack after Neutron is up, as an
/// operator does once after a deploy: flat on a physical network of
/// `neutron_external_interface`, shared by every project's routers for their gateways and
/// floating IPs. Settings `kstack_external_network*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalNetwork {
    /// `kstack_external_network_name` (default `public1`); its subnet is `<name>-subnet`.
    pub name: String,
    /// `kstack_external_network_physnet` (default `physnet1`, the first external interface's).
    pub physnet: String,
    /// `kstack_external_network_cidr`: the IPv4 subnet, e.g. `172.24.4.0/24`.
    pub cidr: String,
    /// `kstack_external_network_gateway`: the upstream router's address (default: the
    /// subnet's first address).
    pub gateway: String,
    /// `kstack_external_network_pool`: `START-END` of the addresses Neutron hands out (router
    /// gateways, floating IPs); default: every address of the subnet but the gateway.
    pub pool: Option<(String, String)>,
}

/// A Cinder volume backend in an external Ceph cluster, as kolla-ansible's settings name it:
/// the operator copies the cluster's `ceph.conf` and the client's keyring into the config
/// directory ([`CephBackend::conf_file`], [`CephBackend::keyring_file`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CephBackend {
    /// `ceph_cluster`: the cluster's name, which names its files.
    pub cluster: String,
    /// `ceph_cinder_user`: the Ceph client (`client.<user>`) cinder-volume logs in as.
    pub user: String,
    /// `ceph_cinder_pool_name`: the RBD pool of the volumes.
    pub pool: String,
    /// `cinder_backend_ceph_name`: the backend's section in cinder.conf and its
    /// `volume_backend_name`.
    pub backend_name: String,
}

impl CephBackend {
    /// The cluster's configuration file, relative to the config directory's `config/`.
    pub fn conf_file(&self) -> String {
        format!("cinder/{}.conf", self.cluster)
    }

    /// The client's keyring, relative to `config/` (kolla-ansible's layout).
    pub fn keyring_file(&self) -> String {
        format!(
            "cinder/cinder-volume/{}.client.{}.keyring",
            self.cluster, self.user
        )
    }
}

/// The boolean settings kstack types, besides the `enable_*` flags: the ones a catalog config
/// file may name in `when`.
pub const BOOL_SETTINGS: &[&str] = &[
    "cinder_backend_ceph",
    "kstack_external_network",
    "om_enable_rabbitmq_stream_fanout",
    "openstack_logging_debug",
];

/// Keystone's token lifetime and Fernet key rotation, in seconds, as kolla-ansible names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FernetTiming {
    /// `fernet_token_expiry`: how long a token is valid.
    pub token_expiry: u64,
    /// `fernet_token_allow_expired_window`: how long after its expiry a token may still be
    /// fetched with `allow_expired` (services finishing long operations).
    pub allow_expired_window: u64,
    /// `fernet_key_rotation_interval` (default: expiry + window): how often the keys rotate.
    pub rotation_interval: u64,
}

impl FernetTiming {
    /// The keys Keystone keeps: enough that a key is only purged once every token it signed
    /// has expired and left the allowed window (kolla-ansible's formula), plus the staged
    /// and the primary key.
    pub fn max_active_keys(&self) -> u64 {
        (self.token_expiry + self.allow_expired_window) / self.rotation_interval + 2
    }
}

/// The defaults of every variable kstack interprets (before derivation).
pub fn defaults() -> BTreeMap<String, Value> {
    let mut m = BTreeMap::new();
    let s = |v: &str| Value::String(v.to_owned());
    for (k, v) in [
        ("openstack_release", "2025.1"),
        ("kolla_base_distro", "rocky"),
        ("openstack_tag_suffix", ""),
        ("docker_registry", "quay.io"),
        ("docker_namespace", "openstack.kolla"),
        ("docker_image_name_prefix", ""),
        ("network_interface", "eth0"),
        ("neutron_external_interface", "eth1"),
        ("openstack_region_name", "RegionOne"),
        ("keystone_admin_user", "admin"),
        ("keystone_admin_project", "admin"),
        ("config_strategy", "COPY_ALWAYS"),
        ("kubernetes_namespace", "openstack"),
        ("kstack_role_label_prefix", crate::labels::ROLE_LABEL_PREFIX),
        ("nova_compute_virt_type", "kvm"),
        ("ovs_datapath", "system"),
        ("openstack_logging_debug", "False"),
        // Cinder in an external Ceph cluster (kolla-ansible's names and defaults).
        ("cinder_backend_ceph", "no"),
        ("ceph_cluster", "ceph"),
        ("ceph_cinder_user", "cinder"),
        ("ceph_cinder_pool_name", "volumes"),
        ("cinder_backend_ceph_name", "rbd-1"),
        // The provider network kstack makes after Neutron is up (off unless asked for).
        ("kstack_external_network", "no"),
        ("kstack_external_network_name", "public1"),
        ("kstack_external_network_physnet", "physnet1"),
        ("kstack_external_network_cidr", ""),
        ("kstack_external_network_gateway", ""),
        ("kstack_external_network_pool", ""),
    ] {
        m.insert(k.to_owned(), s(v));
    }
    m.insert("enable_openstack_core".into(), Value::Bool(true));
    // The limits libvirtd gives each QEMU process (0: leave the inherited ones).
    // Keystone tokens live a day, may be fetched expired for two more (kolla-ansible's values);
    // `fernet_key_rotation_interval` defaults to their sum.
    m.insert("fernet_token_expiry".into(), Value::from(86_400));
    m.insert(
        "fernet_token_allow_expired_window".into(),
        Value::from(172_800),
    );
    m.insert("qemu_max_files".into(), Value::from(32768));
    m.insert("qemu_max_processes".into(), Value::from(131_072));
    // oslo.messaging: fanout on RabbitMQ streams, with the consumer prefetch they need.
    m.insert("om_enable_rabbitmq_stream_fanout".into(), Value::Bool(true));
    m.insert("om_rabbitmq_qos_prefetch_count".into(), Value::from(1));
    for (svc, default) in SERVICE_FLAGS {
        if let Some(b) = default {
            m.insert(format!("enable_{svc}"), Value::Bool(*b));
        }
    }
    m.insert("kstack_replicas".into(), Value::Object(Default::default()));
    m.insert("kstack_resources".into(), Value::Object(Default::default()));
    m.insert("kstack_timeouts".into(), Value::Object(Default::default()));
    m.insert(
        "kstack_pod_labels".into(),
        Value::Object(Default::default()),
    );
    m
}

/// Generations kept per service when `kstack_history_limit` is not set.
pub const DEFAULT_HISTORY_LIMIT: usize = 10;
const MAX_HISTORY_LIMIT: u64 = 1000;

/// The deploy step time limit when `kstack_timeouts` sets none (seconds).
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// The longest time limit accepted (one day).
const MAX_TIMEOUT_SECS: u64 = 86_400;

/// Whether `s` is a valid label name segment or value: at most 63 characters, alphanumerics,
/// `-`, `_` and `.`, starting and ending with an alphanumeric (values may be empty).
fn label_segment(s: &str, may_be_empty: bool) -> bool {
    if s.is_empty() {
        return may_be_empty;
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    s.len() <= 63
        && s.chars().all(ok_char)
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

const IFNAME_HELP: &str =
    "write the name of a network interface of the hosts: 1 to 15 letters, digits, `-`, `_` or `.`";

/// Whether `s` can name a Linux network interface (at most 15 bytes, no `/`, `:` or space;
/// kstack takes the portable subset, so the name is safe in a rendered command).
fn interface_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Whether `key` is a valid label key: `[prefix/]name`, the prefix a DNS subdomain.
fn label_key(key: &str) -> bool {
    match key.rsplit_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty()
                && prefix.len() <= 253
                && prefix
                    .split('.')
                    .all(|p| label_segment(p, false) && !p.contains('_'))
                && label_segment(name, false)
        }
        None => label_segment(key, false),
    }
}

/// Names of the variables kstack interprets; other variables are kept for templates only.
pub fn known_keys() -> Vec<String> {
    let mut keys: Vec<String> = defaults().into_keys().collect();
    keys.extend(
        [
            "kolla_base_distro_version",
            "openstack_tag",
            "kolla_internal_vip_address",
            "kstack_storage_class",
            "fernet_key_rotation_interval",
            "victoria_logs_retention_period",
        ]
        .map(String::from),
    );
    for (svc, _) in SERVICE_FLAGS {
        keys.push(format!("enable_{svc}"));
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The Ceph backend of Cinder when `cinder_backend_ceph` is on. Its names become file names
/// and cinder.conf values, so they are checked as Ceph names: letters, digits, `.`, `_`, `-`.
fn ceph_backend(t: &mut Typer) -> Option<CephBackend> {
    let on = t.bool("cinder_backend_ceph").unwrap_or(false);
    let name = |t: &mut Typer, key: &str| {
        let v = t.string(key);
        let ok = !v.is_empty()
            && v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            && !v.starts_with('.');
        if !ok {
            t.issue(
                key,
                None,
                format!("{} is not a Ceph name", quoted(&v)),
                format!("write the name as it is in your Ceph cluster: 1 to 63 letters, digits, `.`, `_` or `-`, e.g. `{key}: {}`", defaults()[key].as_str().unwrap_or_default()),
            );
        }
        v
    };
    let backend = CephBackend {
        cluster: name(t, "ceph_cluster"),
        user: name(t, "ceph_cinder_user"),
        pool: name(t, "ceph_cinder_pool_name"),
        backend_name: name(t, "cinder_backend_ceph_name"),
    };
    on.then_some(backend)
}

/// The physical networks of `neutron_external_interface` (a comma-separated list), as
/// kolla-ansible names them: `physnet<N>` for the N-th interface, `physnet1` when none is set.
pub fn physical_networks(neutron_external_interface: &str) -> Vec<String> {
    let n = neutron_external_interface
        .split(',')
        .filter(|i| !i.trim().is_empty())
        .count()
        .max(1);
    (1..=n).map(|i| format!("physnet{i}")).collect()
}

/// The `kstack_external_network*` settings, checked when `kstack_external_network` is on: an
/// IPv4 subnet, a gateway and a pool inside it, a physical network of
/// `neutron_external_interface` (`physnet1` for its first interface, ...).
fn external_network(t: &mut Typer) -> Option<ExternalNetwork> {
    use std::net::Ipv4Addr;
    let on = t.bool("kstack_external_network").unwrap_or(false);
    let name = t.string("kstack_external_network_name");
    let physnet = t.string("kstack_external_network_physnet");
    let cidr = t.string("kstack_external_network_cidr");
    let gateway = t.string("kstack_external_network_gateway");
    let pool = t.string("kstack_external_network_pool");
    if !on {
        return None;
    }
    let mut ok = true;
    if name.is_empty() || name.len() > 255 {
        t.issue(
            "kstack_external_network_name",
            None,
            "the external network needs a name of 1 to 255 characters".into(),
            "write e.g. `kstack_external_network_name: public1`".into(),
        );
        ok = false;
    }
    let physnets = physical_networks(
        t.vars
            .get("neutron_external_interface")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    if !physnets.contains(&physnet) {
        t.issue(
            "kstack_external_network_physnet",
            None,
            format!(
                "{} is not a physical network of this cloud",
                quoted(&physnet)
            ),
            format!(
                "one physical network per `neutron_external_interface`: {}",
                physnets.join(", ")
            ),
        );
        ok = false;
    }
    let net = cidr.split_once('/').and_then(|(a, l)| {
        let a: Ipv4Addr = a.parse().ok()?;
        let l: u32 = l.parse().ok().filter(|l| (8..=30).contains(l))?;
        let mask = u32::MAX << (32 - l);
        (u32::from(a) & !mask == 0).then_some((u32::from(a), mask))
    });
    let Some((base, mask)) = net else {
        t.issue(
            "kstack_external_network_cidr",
            None,
            format!("{} is not an IPv4 subnet", quoted(&cidr)),
            "with `kstack_external_network: yes`, write the provider network's subnet as ADDRESS/PREFIX, the address its first one and the prefix 8 to 30, e.g. `kstack_external_network_cidr: 172.24.4.0/24`".into(),
        );
        return None;
    };
    let inside = |a: &str| {
        a.parse::<Ipv4Addr>()
            .ok()
            .map(u32::from)
            .filter(|a| a & mask == base && *a != base && *a != base | !mask)
    };
    let gateway = if gateway.is_empty() {
        Ipv4Addr::from(base + 1).to_string()
    } else if inside(&gateway).is_some() {
        gateway
    } else {
        t.issue(
            "kstack_external_network_gateway",
            None,
            format!("{} is not a host address of {cidr}", quoted(&gateway)),
            format!("write the upstream router's address in {cidr}, or leave it out for the first address"),
        );
        ok = false;
        gateway
    };
    let pool = if pool.is_empty() {
        None
    } else {
        let range = pool.split_once('-').and_then(|(a, b)| {
            let (x, y) = (inside(a.trim())?, inside(b.trim())?);
            (x <= y).then(|| (a.trim().to_owned(), b.trim().to_owned()))
        });
        if range.is_none() {
            t.issue(
                "kstack_external_network_pool",
                None,
                format!("{} is not a range of host addresses of {cidr}", quoted(&pool)),
                "write START-END, both in the subnet, START first, e.g. `kstack_external_network_pool: 172.24.4.100-172.24.4.200`".into(),
            );
            ok = false;
        }
        range
    };
    ok.then_some(ExternalNetwork {
        name,
        physnet,
        cidr,
        gateway,
        pool,
    })
}

/// A whole number of seconds (a YAML integer or a string holding one).
fn seconds(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// A scalar as written (`90`, `"daily"`), anything else by its kind.
fn shown(v: &Value) -> String {
    match v {
        Value::Number(n) => format!("`{n}`"),
        Value::String(s) => format!("`{s}`"),
        _ => describe(v).to_owned(),
    }
}

/// The `fernet_*` settings, checked: a rotation interval of whole minutes (the rotation
/// CronJob checks every minute at most) that is no longer than a token's expiry plus its
/// window, since with a longer one Keystone keeps too few keys and a rotation would purge the
/// key of tokens still valid.
fn fernet_timing(t: &mut Typer, vars: &BTreeMap<String, Value>) -> FernetTiming {
    let mut get = |key: &str, min: u64, default: u64| -> u64 {
        let v = &vars[key];
        match seconds(v).filter(|n| (min..=MAX_FERNET_SECS).contains(n)) {
            Some(n) => n,
            None => {
                t.issue(
                    key,
                    None,
                    format!(
                        "expected a whole number of seconds from {min} to {MAX_FERNET_SECS}, found {}",
                        shown(v)
                    ),
                    format!("write e.g. `{key}: {default}`"),
                );
                default
            }
        }
    };
    let token_expiry = get("fernet_token_expiry", 60, 86_400);
    let allow_expired_window = get("fernet_token_allow_expired_window", 0, 172_800);
    let lifetime = token_expiry + allow_expired_window;
    let key = "fernet_key_rotation_interval";
    let rotation_interval = match vars.get(key) {
        None => lifetime,
        Some(v) => match seconds(v) {
            Some(n) if n >= 60 && n % 60 == 0 && n <= lifetime => n,
            _ => {
                t.issue(
                    key,
                    None,
                    format!(
                        "expected a whole number of minutes in seconds, from 60 to fernet_token_expiry + fernet_token_allow_expired_window ({lifetime}), found {}",
                        shown(v)
                    ),
                    format!(
                        "write e.g. `{key}: {lifetime}` (the default), or leave it out; a longer interval makes Keystone keep too few keys, and a rotation would invalidate tokens that have not expired"
                    ),
                );
                lifetime
            }
        },
    };
    FernetTiming {
        token_expiry,
        allow_expired_window,
        rotation_interval,
    }
}

/// `victoria_logs_retention_period`, how long the central log store keeps lines: a whole
/// number of hours, days, weeks or years (`12h`, `30d`, `4w`, `1y`), as the store reads it.
fn check_log_retention(t: &mut Typer, vars: &BTreeMap<String, Value>) {
    let key = "victoria_logs_retention_period";
    let Some(v) = vars.get(key) else {
        return;
    };
    let ok = v.as_str().is_some_and(|s| {
        s.len() > 1
            && s[..s.len() - 1].bytes().all(|b| b.is_ascii_digit())
            && s[..s.len() - 1].parse::<u32>().is_ok_and(|n| n > 0)
            && matches!(s.as_bytes()[s.len() - 1], b'h' | b'd' | b'w' | b'y')
    });
    if !ok {
        t.issue(
            key,
            None,
            format!(
                "expected a whole number of hours, days, weeks or years such as `30d`, found {}",
                shown(v)
            ),
            format!("write e.g. `{key}: 30d` (the default), or leave it out"),
        );
    }
}

/// The longest token lifetime or rotation interval accepted: a year.
const MAX_FERNET_SECS: u64 = 366 * 86_400;

/// Reads an Ansible-style boolean: YAML booleans or the strings yes/no/true/false/on/off.
pub fn parse_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "yes" | "true" | "on" | "1" => Some(true),
            "no" | "false" | "off" | "0" => Some(false),
            _ => None,
        },
        Value::Number(n) => match n.as_u64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing (null)",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

struct Typer<'a> {
    vars: &'a BTreeMap<String, Value>,
    issues: Vec<GlobalsIssue>,
}

impl Typer<'_> {
    fn issue(&mut self, key: &str, subpath: Option<String>, message: String, help: String) {
        self.issues.push(GlobalsIssue {
            key: key.to_owned(),
            subpath,
            message,
            help,
        });
    }

    fn string(&mut self, key: &str) -> String {
        match self.vars.get(key) {
            Some(Value::String(s)) => s.clone(),
            // Ansible turns numbers into strings in templates; `openstack_release: 2025.1`
            // is a float in YAML but means the string "2025.1".
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => {
                let got = describe(other);
                self.issue(
                    key,
                    None,
                    format!("expected a string, found {got}"),
                    format!("write `{key}` as a quoted string, e.g. `{key}: \"value\"`"),
                );
                String::new()
            }
            None => String::new(),
        }
    }

    fn opt_string(&mut self, key: &str) -> Option<String> {
        match self.vars.get(key) {
            None | Some(Value::Null) => None,
            Some(_) => Some(self.string(key)).filter(|s| !s.is_empty()),
        }
    }

    fn one_of(&mut self, key: &str, allowed: &[&str]) -> String {
        let v = self.string(key);
        if self.vars.get(key).is_some_and(Value::is_string) && !allowed.contains(&v.as_str()) {
            self.issue(
                key,
                None,
                format!("`{v}` is not a supported value"),
                format!("use one of: {}", allowed.join(", ")),
            );
        }
        v
    }

    fn bool(&mut self, key: &str) -> Option<bool> {
        let v = self.vars.get(key)?;
        match parse_bool(v) {
            Some(b) => Some(b),
            None => {
                let got = match v {
                    Value::String(s) => format!("the string `{s}`"),
                    other => describe(other).to_owned(),
                };
                self.issue(
                    key,
                    None,
                    format!("expected a boolean, found {got}"),
                    format!("write `{key}: \"yes\"` or `{key}: \"no\"`"),
                );
                None
            }
        }
    }
}

/// Reports every string below `key` that holds a control character (a line break, a tab, ...);
/// returns whether there was one. Any globals.yml value can reach a rendered config file
/// (templates read every variable), where a line break would start new options.
fn control_characters(t: &mut Typer<'_>, key: &str, path: Option<String>, v: &Value) -> bool {
    match v {
        Value::String(s) => match s.chars().find(|c| c.is_control()) {
            Some(c) => {
                let what = match c {
                    '\n' | '\r' => "a line break".to_owned(),
                    '\t' => "a tab".to_owned(),
                    c => format!("the control character U+{:04X}", c as u32),
                };
                let block = s.ends_with('\n');
                t.issue(
                    key,
                    path,
                    format!("the value contains {what}"),
                    if block {
                        "a YAML block scalar (`|` or `>`) ends with a line break: write the value on one line, or use `|-` / `>-`".into()
                    } else {
                        "remove it: values are written into line-based config files, where it would start a new line".into()
                    },
                );
                true
            }
            None => false,
        },
        Value::Array(a) => {
            let mut found = false;
            for (i, x) in a.iter().enumerate() {
                let sub = match &path {
                    Some(p) => format!("{p}[{i}]"),
                    None => format!("[{i}]"),
                };
                found |= control_characters(t, key, Some(sub), x);
            }
            found
        }
        Value::Object(m) => {
            let mut found = false;
            for (k, x) in m {
                let sub = match &path {
                    Some(p) => format!("{p}.{k}"),
                    None => k.clone(),
                };
                found |= control_characters(t, key, Some(sub), x);
            }
            found
        }
        _ => false,
    }
}

/// The final values that name things in every rendered object.
struct Names<'a> {
    kubernetes_namespace: &'a str,
    docker_registry: &'a str,
    docker_namespace: &'a str,
    docker_image_name_prefix: &'a str,
    openstack_tag: &'a str,
    /// The variables `openstack_tag` is derived from when it is not set.
    tag_parts: [(&'a str, &'a str); 3],
}

/// A value in a message: control characters escaped.
fn quoted(v: &str) -> String {
    let mut s: String = v.escape_debug().collect();
    if s.chars().count() > 80 {
        s = s.chars().take(77).collect::<String>() + "...";
    }
    format!("`{s}`")
}

/// A hint for a value that still holds a Jinja expression.
fn jinja_hint(v: &str) -> &'static str {
    if v.contains("{{") || v.contains("{%") {
        " The value holds a Jinja expression that was not expanded: write the final value."
    } else {
        ""
    }
}

/// Checks the Kubernetes namespace and the parts of the image references against their
/// grammars ([`crate::names`]), skipping variables in `skip` (already reported).
fn check_names(t: &mut Typer<'_>, skip: &BTreeSet<&String>, n: &Names<'_>) {
    use crate::names;
    let set = |key: &str| t.vars.get(key).is_some_and(|v| !v.is_null());
    let check = |t: &mut Typer<'_>,
                 key: &str,
                 value: &str,
                 what: &str,
                 result: Result<(), String>,
                 help: &str| {
        if skip.iter().any(|k| k.as_str() == key) {
            return;
        }
        if let Err(why) = result {
            t.issue(
                key,
                None,
                format!("{} is not a valid {what}: {why}", quoted(value)),
                format!("{help}.{}", jinja_hint(value)),
            );
        }
    };
    check(
        t,
        "kubernetes_namespace",
        n.kubernetes_namespace,
        "Kubernetes namespace",
        names::dns1123_label(n.kubernetes_namespace)
            .and_then(|()| names::own_namespace(n.kubernetes_namespace)),
        "a namespace is a DNS-1123 label: at most 63 lower-case letters, digits and `-`, starting and ending with a letter or digit, e.g. `openstack`, and one of the cloud's own (kstack labels, prunes and manages everything in it)",
    );
    if !n.docker_registry.is_empty() {
        check(
            t,
            "docker_registry",
            n.docker_registry,
            "image registry",
            names::registry(n.docker_registry),
            "write `host[:port]`, optionally followed by a path, e.g. `quay.io` or `registry.example.com:5000/mirror`, without `https://`; an empty value means no registry part",
        );
    }
    check(
        t,
        "docker_namespace",
        n.docker_namespace,
        "image namespace",
        names::repository_path(n.docker_namespace),
        "write the repository path images live under, e.g. `openstack.kolla`: lower-case letters, digits and `.`, `_`, `-` between them, parts separated by `/`",
    );
    check(
        t,
        "docker_image_name_prefix",
        n.docker_image_name_prefix,
        "image name prefix",
        names::name_prefix(n.docker_image_name_prefix),
        "write what goes before each image name, e.g. `centos-source-`: lower-case letters, digits, `.`, `_`, `-`",
    );
    let tag_help = "an image tag is at most 128 letters, digits, `_`, `.` and `-`, not starting with `.` or `-`, e.g. `2025.1-rocky-9`";
    if set("openstack_tag") {
        check(
            t,
            "openstack_tag",
            n.openstack_tag,
            "image tag",
            names::tag(n.openstack_tag),
            tag_help,
        );
    } else if let Err(why) = names::tag(n.openstack_tag) {
        // Derived `{release}-{distro}-{version}{suffix}`: name the variable that breaks it.
        let culprit = n
            .tag_parts
            .iter()
            .find(|(_, v)| {
                v.chars()
                    .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
            })
            .or_else(|| n.tag_parts.first().filter(|(_, v)| names::tag(v).is_err()))
            .copied()
            .unwrap_or(n.tag_parts[0]);
        let (key, value) = culprit;
        if !skip.iter().any(|k| k.as_str() == key) {
            t.issue(
                key,
                None,
                format!(
                    "{} makes the image tag {} (`openstack_tag` is not set, so it is derived from `openstack_release`, `kolla_base_distro`, `kolla_base_distro_version` and `openstack_tag_suffix`) invalid: {why}",
                    quoted(value),
                    quoted(n.openstack_tag),
                ),
                format!("{tag_help}; or set `openstack_tag` itself.{}", jinja_hint(value)),
            );
        }
    }
    let per_service: Vec<(String, String)> = t
        .vars
        .iter()
        .filter(|(k, _)| k.ends_with("_tag") && k.as_str() != "openstack_tag")
        .filter_map(|(k, v)| match v {
            Value::String(s) if !s.is_empty() => Some((k.clone(), s.clone())),
            Value::Number(x) => Some((k.clone(), x.to_string())),
            _ => None,
        })
        .collect();
    for (key, value) in per_service {
        check(t, &key, &value, "image tag", names::tag(&value), tag_help);
    }
}

impl Globals {
    /// Merges `user` over the defaults, derives dependent defaults and types every variable
    /// kstack interprets. Returns every problem found.
    pub fn from_vars(user: &BTreeMap<String, Value>) -> Result<Globals, Vec<GlobalsIssue>> {
        let mut vars = defaults();
        for (k, v) in user {
            // `key:` with nothing after it means "not set" in kolla-ansible's template.
            if v.is_null() && vars.contains_key(k) {
                continue;
            }
            vars.insert(k.clone(), v.clone());
        }
        let mut t = Typer {
            vars: &vars,
            issues: Vec::new(),
        };

        let openstack_release = t.string("openstack_release");
        let kolla_base_distro = t.one_of("kolla_base_distro", DISTROS);
        let kolla_base_distro_version = match t.opt_string("kolla_base_distro_version") {
            Some(v) => v,
            None => default_distro_version(&kolla_base_distro)
                .unwrap_or_default()
                .to_owned(),
        };
        let openstack_tag_suffix = t.string("openstack_tag_suffix");
        let openstack_tag = t.opt_string("openstack_tag").unwrap_or_else(|| {
            format!(
                "{openstack_release}-{kolla_base_distro}-{kolla_base_distro_version}{openstack_tag_suffix}"
            )
        });
        let docker_registry = t.string("docker_registry");
        let docker_namespace = t.string("docker_namespace");
        let docker_image_name_prefix = t.string("docker_image_name_prefix");
        let network_interface = t.string("network_interface");
        if !interface_name(&network_interface) {
            t.issue(
                "network_interface",
                None,
                format!("`{network_interface}` is not a network interface name"),
                IFNAME_HELP.into(),
            );
        }
        let neutron_external_interface = t.string("neutron_external_interface");
        for name in neutron_external_interface.split(',').map(str::trim) {
            if !name.is_empty() && !interface_name(name) {
                t.issue(
                    "neutron_external_interface",
                    None,
                    format!("`{name}` is not a network interface name"),
                    format!("{IFNAME_HELP}; list several separated by commas (eth1,eth2)"),
                );
            }
        }
        let openstack_region_name = t.string("openstack_region_name");
        let keystone_admin_user = t.string("keystone_admin_user");
        let keystone_admin_project = t.string("keystone_admin_project");
        let config_strategy = t.one_of("config_strategy", CONFIG_STRATEGIES);
        t.one_of("nova_compute_virt_type", VIRT_TYPES);
        t.bool("om_enable_rabbitmq_stream_fanout");
        let prefetch = &vars["om_rabbitmq_qos_prefetch_count"];
        let n = prefetch
            .as_u64()
            .or_else(|| prefetch.as_str().and_then(|s| s.trim().parse().ok()));
        if n.is_none_or(|n| n == 0 || n > u64::from(u16::MAX)) {
            t.issue(
                "om_rabbitmq_qos_prefetch_count",
                None,
                format!(
                    "expected a whole number from 1 to 65535, found {}",
                    describe(prefetch)
                ),
                "write e.g. `om_rabbitmq_qos_prefetch_count: 1` (the messages a consumer of a stream takes ahead; a stream needs at least 1)".into(),
            );
        }
        for key in ["qemu_max_files", "qemu_max_processes"] {
            let v = &vars[key];
            let n = v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()));
            if n.is_none_or(|n| n > u64::from(u32::MAX)) {
                t.issue(
                    key,
                    None,
                    format!("expected a whole number, found {}", describe(v)),
                    format!(
                        "write e.g. `{key}: 0` (0 leaves the limit QEMU inherits; a host that cannot raise limits needs 0 or a value within its own)"
                    ),
                );
            }
        }
        let fernet = fernet_timing(&mut t, &vars);
        let cinder_ceph = ceph_backend(&mut t);
        let external_network = external_network(&mut t);
        check_log_retention(&mut t, &vars);
        t.one_of("ovs_datapath", OVS_DATAPATHS);
        t.bool("openstack_logging_debug");
        for key in ["kolla_external_fqdn", "kolla_external_vip_address"] {
            if let Some(h) = t.opt_string(key)
                && let Err(why) = crate::names::host(&h)
            {
                t.issue(
                    key,
                    None,
                    format!("{} is not a host name or address: {why}", quoted(&h)),
                    "write the DNS name or IP address clients use for the public endpoints, e.g. `cloud.example.com`".into(),
                );
            }
        }
        let kolla_internal_vip_address = t.opt_string("kolla_internal_vip_address");
        let kubernetes_namespace = t.string("kubernetes_namespace");
        let role_label_prefix = t.string("kstack_role_label_prefix");
        let storage_class = t.opt_string("kstack_storage_class");

        // Derivation as in kolla-ansible group_vars/all.yml.
        let core = t.bool("enable_openstack_core").unwrap_or(true);
        let mut enabled = BTreeMap::new();
        for (svc, default) in SERVICE_FLAGS {
            let key = format!("enable_{svc}");
            let value = match t.bool(&key) {
                Some(b) => b,
                None if vars.get(&key).is_some_and(|v| !v.is_null()) => false,
                None => match default {
                    Some(b) => *b,
                    None => match *svc {
                        "placement" => *enabled.get("nova").unwrap_or(&core),
                        "openvswitch" => *enabled.get("neutron").unwrap_or(&core),
                        _ => core,
                    },
                },
            };
            enabled.insert((*svc).to_owned(), value);
        }

        let mut replicas = BTreeMap::new();
        match vars.get("kstack_replicas") {
            Some(Value::Object(m)) => {
                for (svc, v) in m {
                    match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                        // A cluster that decides by majority (Galera; RabbitMQ with
                        // `pause_minority`) of an even size stops as a whole when half of it
                        // is gone: two servers lose their quorum when one of them stops.
                        Some(n) if n > 1 && n % 2 == 0 && QUORUM_CLUSTERS.contains(&svc.as_str()) => t
                            .issue(
                                "kstack_replicas",
                                Some(svc.clone()),
                                format!(
                                    "{svc} with {n} replicas is a cluster that decides by majority: \
                                     when {} of them stop, the others stop serving too",
                                    n / 2
                                ),
                                format!(
                                    "use an odd number: 1, or {} to survive the loss of {} ({} to survive {})",
                                    n + 1,
                                    n / 2,
                                    n - 1,
                                    (n - 2) / 2
                                ),
                            ),
                        Some(n) => {
                            replicas.insert(svc.clone(), n);
                        }
                        None => t.issue(
                            "kstack_replicas",
                            Some(svc.clone()),
                            format!("expected a whole number of replicas, found {}", describe(v)),
                            format!("write e.g. `{svc}: 3` under `kstack_replicas`"),
                        ),
                    }
                }
            }
            Some(Value::Null) | None => {}
            Some(other) => t.issue(
                "kstack_replicas",
                None,
                format!(
                    "expected a mapping of service to replicas, found {}",
                    describe(other)
                ),
                "write e.g. `kstack_replicas: {keystone: 3, nova: 2}`".into(),
            ),
        }

        let mut resources = BTreeMap::new();
        match vars.get("kstack_resources") {
            Some(Value::Object(m)) => {
                for (svc, v) in m {
                    let Value::Object(r) = v else {
                        t.issue(
                            "kstack_resources",
                            Some(svc.clone()),
                            format!("expected a mapping with `cpu` and `memory`, found {}", describe(v)),
                            format!("write e.g. `{svc}: {{cpu: 500m, memory: 1Gi}}` under `kstack_resources`"),
                        );
                        continue;
                    };
                    let mut res = Resources::default();
                    for (field, value) in r {
                        let q = match value {
                            Value::String(s) => Some(s.clone()),
                            Value::Number(n) => Some(n.to_string()),
                            _ => None,
                        };
                        let slot = match field.as_str() {
                            "cpu" => &mut res.cpu,
                            "memory" => &mut res.memory,
                            _ => {
                                t.issue(
                                    "kstack_resources",
                                    Some(format!("{svc}.{field}")),
                                    format!("unknown resource `{field}`"),
                                    "only `cpu` and `memory` can be requested".into(),
                                );
                                continue;
                            }
                        };
                        match q {
                            Some(q) => *slot = Some(q),
                            None => t.issue(
                                "kstack_resources",
                                Some(format!("{svc}.{field}")),
                                format!(
                                    "expected a Kubernetes quantity, found {}",
                                    describe(value)
                                ),
                                "write a quantity such as `500m` or `1Gi`".into(),
                            ),
                        }
                    }
                    resources.insert(svc.clone(), res);
                }
            }
            Some(Value::Null) | None => {}
            Some(other) => t.issue(
                "kstack_resources",
                None,
                format!(
                    "expected a mapping of service to requests, found {}",
                    describe(other)
                ),
                "write e.g. `kstack_resources: {nova: {cpu: 500m, memory: 1Gi}}`".into(),
            ),
        }

        let mut timeouts = BTreeMap::new();
        match vars.get("kstack_timeouts") {
            Some(Value::Object(m)) => {
                for (svc, v) in m {
                    match v.as_u64().filter(|n| (1..=MAX_TIMEOUT_SECS).contains(n)) {
                        Some(n) => {
                            timeouts.insert(svc.clone(), n);
                        }
                        None => t.issue(
                            "kstack_timeouts",
                            Some(svc.clone()),
                            format!(
                                "expected a whole number of seconds from 1 to {MAX_TIMEOUT_SECS}, found {}",
                                match v {
                                    Value::Number(n) => n.to_string(),
                                    other => describe(other).to_owned(),
                                }
                            ),
                            format!("write e.g. `{svc}: 900` under `kstack_timeouts`"),
                        ),
                    }
                }
            }
            Some(Value::Null) | None => {}
            Some(other) => t.issue(
                "kstack_timeouts",
                None,
                format!(
                    "expected a mapping of service (or `default`) to seconds, found {}",
                    describe(other)
                ),
                "write e.g. `kstack_timeouts: {default: 600, nova-api: 900}`".into(),
            ),
        }

        let history_limit = match vars.get("kstack_history_limit") {
            Some(Value::Null) | None => DEFAULT_HISTORY_LIMIT,
            Some(v) => match v.as_u64().filter(|n| (2..=MAX_HISTORY_LIMIT).contains(n)) {
                Some(n) => n as usize,
                None => {
                    t.issue(
                        "kstack_history_limit",
                        None,
                        format!(
                            "expected a whole number of generations from 2 to {MAX_HISTORY_LIMIT}, found {}",
                            match v {
                                Value::Number(n) => n.to_string(),
                                other => describe(other).to_owned(),
                            }
                        ),
                        "write e.g. `kstack_history_limit: 10`".into(),
                    );
                    DEFAULT_HISTORY_LIMIT
                }
            },
        };

        let mut pod_labels = BTreeMap::new();
        match vars.get("kstack_pod_labels") {
            Some(Value::Object(m)) => {
                for (svc, v) in m {
                    let Value::Object(labels) = v else {
                        t.issue(
                            "kstack_pod_labels",
                            Some(svc.clone()),
                            format!(
                                "expected a mapping of label to value, found {}",
                                describe(v)
                            ),
                            format!(
                                "write e.g. `{svc}: {{team: storage}}` under `kstack_pod_labels`"
                            ),
                        );
                        continue;
                    };
                    let mut out = BTreeMap::new();
                    for (key, value) in labels {
                        let value = match value {
                            Value::String(s) => s.clone(),
                            Value::Number(n) => n.to_string(),
                            Value::Bool(b) => b.to_string(),
                            other => {
                                t.issue(
                                    "kstack_pod_labels",
                                    Some(format!("{svc}.{key}")),
                                    format!("expected a label value, found {}", describe(other)),
                                    "write the value as a string".into(),
                                );
                                continue;
                            }
                        };
                        if key.starts_with(crate::labels::APP_PREFIX) {
                            t.issue(
                                "kstack_pod_labels",
                                Some(format!("{svc}.{key}")),
                                format!("`{key}` is set by kstack (it selects the service's pods)"),
                                "use a label outside the `app.kubernetes.io/` prefix".into(),
                            );
                        } else if !label_key(key) {
                            t.issue(
                                "kstack_pod_labels",
                                Some(format!("{svc}.{key}")),
                                format!("`{key}` is not a valid Kubernetes label key"),
                                "use `[prefix/]name`: name at most 63 characters of a-z, 0-9, `-`, `_`, `.`".into(),
                            );
                        } else if !label_segment(&value, true) {
                            t.issue(
                                "kstack_pod_labels",
                                Some(format!("{svc}.{key}")),
                                format!("`{value}` is not a valid Kubernetes label value"),
                                "use at most 63 characters of a-z, 0-9, `-`, `_`, `.`, starting and ending with a letter or digit".into(),
                            );
                        } else {
                            out.insert(key.clone(), value);
                        }
                    }
                    pod_labels.insert(svc.clone(), out);
                }
            }
            Some(Value::Null) | None => {}
            Some(other) => t.issue(
                "kstack_pod_labels",
                None,
                format!(
                    "expected a mapping of service to labels, found {}",
                    describe(other)
                ),
                "write e.g. `kstack_pod_labels: {keystone: {team: identity}}`".into(),
            ),
        }

        // The final values (after derivation, and after any evaluation that runs before this
        // function) must be safe to write: no line breaks, and names Kubernetes and the
        // registry accept.
        let typed_badly: BTreeSet<String> = t.issues.iter().map(|i| i.key.clone()).collect();
        let mut unprintable = BTreeSet::new();
        for (key, value) in &vars {
            if !typed_badly.contains(key) && control_characters(&mut t, key, None, value) {
                unprintable.insert(key.clone());
            }
        }
        let skip: BTreeSet<&String> = typed_badly.iter().chain(&unprintable).collect();
        check_names(
            &mut t,
            &skip,
            &Names {
                kubernetes_namespace: &kubernetes_namespace,
                docker_registry: &docker_registry,
                docker_namespace: &docker_namespace,
                docker_image_name_prefix: &docker_image_name_prefix,
                openstack_tag: &openstack_tag,
                tag_parts: [
                    ("openstack_release", openstack_release.as_str()),
                    (
                        "kolla_base_distro_version",
                        kolla_base_distro_version.as_str(),
                    ),
                    ("openstack_tag_suffix", openstack_tag_suffix.as_str()),
                ],
            },
        );

        let issues = std::mem::take(&mut t.issues);
        if !issues.is_empty() {
            return Err(issues);
        }

        // Publish derived values so templates see the same values kstack acts on.
        vars.insert(
            "kolla_base_distro_version".into(),
            Value::String(kolla_base_distro_version.clone()),
        );
        vars.insert("openstack_tag".into(), Value::String(openstack_tag.clone()));
        for (svc, on) in &enabled {
            vars.insert(format!("enable_{svc}"), Value::Bool(*on));
        }
        // Cinder's Ceph backend only exists with Cinder (as in kolla-ansible); what depends on
        // it (catalog `when`, templates) sees that.
        let cinder_ceph = cinder_ceph.filter(|_| enabled.get("cinder").copied().unwrap_or(false));
        vars.insert(
            "cinder_backend_ceph".into(),
            Value::Bool(cinder_ceph.is_some()),
        );

        Ok(Globals {
            openstack_release,
            kolla_base_distro,
            kolla_base_distro_version,
            openstack_tag_suffix,
            openstack_tag,
            docker_registry,
            docker_namespace,
            docker_image_name_prefix,
            network_interface,
            neutron_external_interface,
            openstack_region_name,
            keystone_admin_user,
            keystone_admin_project,
            config_strategy,
            kolla_internal_vip_address,
            enabled,
            kubernetes_namespace,
            replicas,
            role_label_prefix,
            storage_class,
            resources,
            timeouts,
            history_limit,
            pod_labels,
            fernet,
            cinder_ceph,
            external_network,
            vars,
        })
    }

    /// Whether `enable_<service>` is on. Unknown services are off.
    pub fn is_enabled(&self, service: &str) -> bool {
        self.enabled.get(service).copied().unwrap_or(false)
    }

    /// Replicas for a service (1 unless set in `kstack_replicas`).
    pub fn replicas_for(&self, service: &str) -> u32 {
        self.replicas.get(service).copied().unwrap_or(1)
    }

    /// The deploy step time limit of a service in seconds: its `kstack_timeouts` entry, else
    /// `kstack_timeouts.default`, else [`DEFAULT_TIMEOUT_SECS`].
    pub fn timeout_secs(&self, service: &str) -> u64 {
        self.timeouts
            .get(service)
            .or(self.timeouts.get("default"))
            .copied()
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
    }

    /// The node label selecting a role, e.g. `("kstack.io/role-control", "true")`.
    pub fn role_label(&self, role: &str) -> (String, String) {
        (
            format!("{}{role}", self.role_label_prefix),
            "true".to_owned(),
        )
    }

    /// The image tag for a service: `<service>_tag` if set, else `openstack_tag`.
    pub fn tag_for(&self, service: &str) -> String {
        match self.vars.get(&format!("{service}_tag")) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => self.openstack_tag.clone(),
        }
    }

    /// The host of the public endpoints: `kolla_external_fqdn`, else
    /// `kolla_external_vip_address` (IPv6 in brackets), else `None` (public endpoints are the
    /// internal ones).
    pub fn public_host(&self) -> Option<String> {
        ["kolla_external_fqdn", "kolla_external_vip_address"]
            .iter()
            .find_map(|k| {
                self.vars
                    .get(*k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            })
            .map(|h| match h.parse::<std::net::Ipv6Addr>() {
                Ok(_) => format!("[{h}]"),
                Err(_) => h.to_owned(),
            })
    }

    /// The image reference `[registry/]namespace/prefix<image>:<tag>` for an image of a service,
    /// e.g. `image_ref("nova", "nova-api")`.
    pub fn image_ref(&self, service: &str, image: &str) -> String {
        let registry = if self.docker_registry.is_empty() {
            String::new()
        } else {
            format!("{}/", self.docker_registry)
        };
        format!(
            "{registry}{}/{}{image}:{}",
            self.docker_namespace,
            self.docker_image_name_prefix,
            self.tag_for(service)
        )
    }

    /// The facts of the image distribution (`kolla_base_distro`). Validation admits only
    /// [`DISTROS`]; a `Globals` built by hand with another name gets kolla-ansible's default,
    /// Rocky Linux.
    pub fn distro(&self) -> crate::distro::Distro {
        crate::distro::Distro::named(&self.kolla_base_distro).unwrap_or(crate::distro::ALL[0])
    }
}

impl Default for Globals {
    fn default() -> Self {
        // The defaults are well-typed by construction (tested below).
        Globals::from_vars(&BTreeMap::new()).unwrap_or_else(|_| unreachable!())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_distro_name_has_its_facts() {
        let mut named: Vec<&str> = crate::distro::ALL.iter().map(|d| d.name).collect();
        named.sort_unstable();
        assert_eq!(named, DISTROS);
        for d in DISTROS {
            let g = Globals::from_vars(&BTreeMap::from([(
                "kolla_base_distro".to_owned(),
                json!(d),
            )]))
            .unwrap();
            assert_eq!(g.distro().name, *d);
        }
        assert_eq!(Globals::default().distro().name, "rocky");
    }

    fn vars(v: Value) -> BTreeMap<String, Value> {
        v.as_object().unwrap().clone().into_iter().collect()
    }

    #[test]
    fn defaults_match_kolla_ansible_2025_1() {
        let g = Globals::from_vars(&BTreeMap::new()).unwrap();
        assert_eq!(g.openstack_tag, "2025.1-rocky-9");
        assert_eq!(
            g.image_ref("nova", "nova-api"),
            "quay.io/openstack.kolla/nova-api:2025.1-rocky-9"
        );
        assert!(g.is_enabled("nova") && g.is_enabled("placement") && g.is_enabled("openvswitch"));
        assert!(!g.is_enabled("cinder"));
        assert_eq!(
            g.role_label("control"),
            ("kstack.io/role-control".into(), "true".into())
        );
        assert_eq!(g.kubernetes_namespace, "openstack");
        assert_eq!(g.vars["openstack_tag"], json!("2025.1-rocky-9"));
    }

    #[test]
    fn distro_version_is_derived_and_tag_overrides_apply() {
        let g = Globals::from_vars(&vars(json!({
            "kolla_base_distro": "ubuntu",
            "openstack_tag_suffix": "-aarch64",
            "docker_registry": "",
            "docker_image_name_prefix": "my-",
            "keystone_tag": "2025.1-ubuntu-noble-patched",
        })))
        .unwrap();
        assert_eq!(g.kolla_base_distro_version, "noble");
        assert_eq!(
            g.image_ref("nova", "nova-api"),
            "openstack.kolla/my-nova-api:2025.1-ubuntu-noble-aarch64"
        );
        assert_eq!(
            g.image_ref("keystone", "keystone"),
            "openstack.kolla/my-keystone:2025.1-ubuntu-noble-patched"
        );
    }

    #[test]
    fn ansible_booleans_and_derived_flags() {
        let g = Globals::from_vars(&vars(json!({
            "enable_openstack_core": "no",
            "enable_nova": "yes",
            "enable_cinder": true,
        })))
        .unwrap();
        assert!(g.is_enabled("nova") && g.is_enabled("placement") && g.is_enabled("cinder"));
        assert!(
            !g.is_enabled("neutron") && !g.is_enabled("openvswitch") && !g.is_enabled("keystone")
        );
    }

    #[test]
    fn timeouts_and_pod_labels() {
        let g = Globals::from_vars(&vars(json!({
            "kstack_timeouts": {"default": 300, "nova-api": 900},
            "kstack_pod_labels": {"keystone": {"kstack.io/dev-ready": "never", "tier": 1}},
        })))
        .unwrap();
        assert_eq!(g.timeout_secs("nova-api"), 900);
        assert_eq!(g.timeout_secs("keystone"), 300);
        assert_eq!(
            Globals::default().timeout_secs("keystone"),
            DEFAULT_TIMEOUT_SECS
        );
        assert_eq!(g.pod_labels["keystone"]["kstack.io/dev-ready"], "never");
        assert_eq!(g.pod_labels["keystone"]["tier"], "1");

        let issues = Globals::from_vars(&vars(json!({
            "kstack_timeouts": {"default": 0, "keystone": "soon", "glance-api": 10},
            "kstack_pod_labels": {
                "keystone": {"app.kubernetes.io/name": "x", "bad key!": "v", "ok": "bad value!"},
                "nova-api": "ready",
            },
        })))
        .unwrap_err();
        let found: Vec<_> = issues
            .iter()
            .map(|i| format!("{} {}", i.key, i.subpath.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(
            found,
            [
                "kstack_timeouts default",
                "kstack_timeouts keystone",
                "kstack_pod_labels keystone.app.kubernetes.io/name",
                "kstack_pod_labels keystone.bad key!",
                "kstack_pod_labels keystone.ok",
                "kstack_pod_labels nova-api",
            ]
        );
        assert!(
            issues[0].message.contains("found 0"),
            "{}",
            issues[0].message
        );
    }

    #[test]
    fn the_log_retention_is_a_count_of_hours_days_weeks_or_years() {
        for ok in ["12h", "30d", "4w", "1y"] {
            assert!(
                Globals::from_vars(&vars(json!({ "victoria_logs_retention_period": ok }))).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            json!("30"),
            json!("d"),
            json!("0d"),
            json!("30 days"),
            json!(30),
            json!("-1d"),
        ] {
            let issues =
                Globals::from_vars(&vars(json!({ "victoria_logs_retention_period": bad })))
                    .unwrap_err();
            assert!(
                issues
                    .iter()
                    .any(|i| i.key == "victoria_logs_retention_period"
                        && i.message.contains("hours, days, weeks or years")),
                "{bad}: {issues:?}"
            );
        }
    }

    #[test]
    fn fernet_timing_follows_kolla_ansible_and_refuses_an_interval_that_would_drop_live_keys() {
        let g = Globals::from_vars(&BTreeMap::new()).unwrap();
        assert_eq!(
            g.fernet,
            FernetTiming {
                token_expiry: 86_400,
                allow_expired_window: 172_800,
                rotation_interval: 259_200,
            }
        );
        assert_eq!(g.fernet.max_active_keys(), 3);
        let g = Globals::from_vars(&vars(json!({
            "fernet_token_expiry": "1800",
            "fernet_token_allow_expired_window": 0,
            "fernet_key_rotation_interval": 60,
        })))
        .unwrap();
        assert_eq!(g.fernet.rotation_interval, 60);
        assert_eq!(g.fernet.max_active_keys(), 32);
        // Daily rotation of day-long tokens with kolla-ansible's window: 3 + 2 keys.
        let g = Globals::from_vars(&vars(json!({"fernet_key_rotation_interval": 86_400}))).unwrap();
        assert_eq!(g.fernet.max_active_keys(), 5);

        for (vars_, key, needle) in [
            (
                json!({"fernet_key_rotation_interval": 90}),
                "fernet_key_rotation_interval",
                "whole number of minutes",
            ),
            (
                json!({"fernet_key_rotation_interval": 259_260}),
                "fernet_key_rotation_interval",
                "(259200), found `259260`",
            ),
            (
                json!({"fernet_key_rotation_interval": "daily"}),
                "fernet_key_rotation_interval",
                "found `daily`",
            ),
            (
                json!({"fernet_token_expiry": 30}),
                "fernet_token_expiry",
                "from 60 to",
            ),
            (
                json!({"fernet_token_allow_expired_window": -1}),
                "fernet_token_allow_expired_window",
                "from 0 to",
            ),
        ] {
            let issues = Globals::from_vars(&vars(vars_.clone())).unwrap_err();
            assert_eq!(issues.len(), 1, "{vars_}: {issues:?}");
            assert_eq!(issues[0].key, key, "{vars_}");
            assert!(
                issues[0].message.contains(needle),
                "{vars_}: {}",
                issues[0].message
            );
        }
    }

    #[test]
    fn namespace_and_image_references_are_checked_on_their_final_values() {
        let issues = Globals::from_vars(&vars(json!({
            "kubernetes_namespace": "{{ x }}",
            "docker_registry": "https://quay.io",
            "docker_namespace": "../../etc",
            "docker_image_name_prefix": "My-",
            "openstack_tag": "2025.1 rocky",
            "keystone_tag": "{{ keystone_version }}",
            "nova_tag": 2025.1,
        })))
        .unwrap_err();
        let found: Vec<(&str, &str)> = issues
            .iter()
            .map(|i| (i.key.as_str(), i.message.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "kubernetes_namespace",
                    "`{{ x }}` is not a valid Kubernetes namespace: it contains `{`; only lower-case letters, digits and `-` are allowed"
                ),
                (
                    "docker_registry",
                    "`https://quay.io` is not a valid image registry: it starts with a URL scheme (`https://`); a registry is named without one"
                ),
                (
                    "docker_namespace",
                    "`../../etc` is not a valid image namespace: the part `..` must start and end with a lower-case letter or digit"
                ),
                (
                    "docker_image_name_prefix",
                    "`My-` is not a valid image name prefix: it contains `M`; only lower-case letters, digits, `.`, `_`, `-` and `/` are allowed"
                ),
                (
                    "openstack_tag",
                    "`2025.1 rocky` is not a valid image tag: it contains a space; only letters, digits, `_`, `.` and `-` are allowed"
                ),
                (
                    "keystone_tag",
                    "`{{ keystone_version }}` is not a valid image tag: it contains `{`; only letters, digits, `_`, `.` and `-` are allowed"
                ),
            ]
        );
        assert!(issues[0].help.contains("DNS-1123") && issues[0].help.contains("Jinja"));
        assert!(!issues[1].help.contains("Jinja"));

        // A derived tag names the variable that breaks it.
        let issues =
            Globals::from_vars(&vars(json!({"openstack_release": "2025.1/../x"}))).unwrap_err();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, "openstack_release");
        assert!(
            issues[0].message.contains("`2025.1/../x-rocky-9`"),
            "{}",
            issues[0].message
        );
        // Registries kolla-ansible users have.
        for r in [
            "",
            "localhost:4000",
            "192.168.1.10:4000",
            "registry.example.com/mirror",
        ] {
            let g = Globals::from_vars(&vars(json!({"docker_registry": r}))).unwrap();
            assert_eq!(g.docker_registry, r);
        }
    }

    #[test]
    fn line_breaks_are_refused_in_every_value() {
        let issues = Globals::from_vars(&vars(json!({
            "openstack_region_name": "RegionOne\n[DEFAULT]\ndebug = True",
            "kubernetes_namespace": "openstack\n",
            "my_own_setting": {"list": ["ok", "tab\there"]},
            "another": "bell\u{7}",
        })))
        .unwrap_err();
        let found: Vec<(String, Option<String>, String)> = issues
            .iter()
            .map(|i| (i.key.clone(), i.subpath.clone(), i.message.clone()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "another".into(),
                    None,
                    "the value contains the control character U+0007".into()
                ),
                (
                    "kubernetes_namespace".into(),
                    None,
                    "the value contains a line break".into()
                ),
                (
                    "my_own_setting".into(),
                    Some("list[1]".into()),
                    "the value contains a tab".into()
                ),
                (
                    "openstack_region_name".into(),
                    None,
                    "the value contains a line break".into()
                ),
            ],
            "one issue per value, the namespace not reported twice"
        );
        assert!(issues[1].help.contains("block scalar"));
    }

    #[test]
    fn reports_every_wrong_type() {
        let issues = Globals::from_vars(&vars(json!({
            "enable_nova": "maybe",
            "openstack_release": [1],
            "kolla_base_distro": "gentoo",
            "kstack_replicas": {"nova": "three"},
        })))
        .unwrap_err();
        let keys: Vec<_> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "openstack_release",
                "kolla_base_distro",
                "enable_nova",
                "kstack_replicas"
            ]
        );
        assert!(issues[2].message.contains("maybe"));
    }

    #[test]
    fn cinder_in_ceph_takes_kolla_ansibles_names_and_defaults() {
        let g = Globals::from_vars(&vars(json!({}))).unwrap();
        assert_eq!(g.cinder_ceph, None);
        // Without Cinder the setting has no effect.
        let g = Globals::from_vars(&vars(json!({ "cinder_backend_ceph": "yes" }))).unwrap();
        assert_eq!(g.cinder_ceph, None);
        assert_eq!(g.vars["cinder_backend_ceph"], json!(false));
        let g = Globals::from_vars(&vars(
            json!({ "cinder_backend_ceph": "yes", "enable_cinder": "yes" }),
        ))
        .unwrap();
        assert_eq!(g.vars["cinder_backend_ceph"], json!(true));
        let ceph = g.cinder_ceph.unwrap();
        assert_eq!(
            (
                ceph.cluster.as_str(),
                ceph.user.as_str(),
                ceph.pool.as_str(),
                ceph.backend_name.as_str()
            ),
            ("ceph", "cinder", "volumes", "rbd-1")
        );
        assert_eq!(ceph.conf_file(), "cinder/ceph.conf");
        assert_eq!(
            ceph.keyring_file(),
            "cinder/cinder-volume/ceph.client.cinder.keyring"
        );
        for bad in ["", "a/b", "..", ".hidden", "two words"] {
            let issues = Globals::from_vars(&vars(
                json!({ "cinder_backend_ceph": "yes", "ceph_cluster": bad }),
            ))
            .unwrap_err();
            assert!(
                issues
                    .iter()
                    .any(|i| i.key == "ceph_cluster" && i.message.contains("not a Ceph name")),
                "{bad:?}: {issues:?}"
            );
        }
    }
}
