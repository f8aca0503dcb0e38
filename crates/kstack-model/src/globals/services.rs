//! The OpenStack services: which ones run (the `enable_*` flags, derived as kolla-ansible
//! derives them) and the settings kstack gives them (Keystone's admin and tokens, Nova's
//! hypervisor, oslo.messaging, Cinder in Ceph, logging).
use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::kolla::{self, Issues, Read, describe, quoted, shown};

/// Services kstack knows an `enable_<service>` flag for, with their kolla-ansible default.
///
/// `None` means the default is derived from other flags (see [`super::Globals::from_vars`]).
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
    // kolla-ansible's default; it runs only when there is a public address to publish on
    // (kstack_config::catalog::enabled_services).
    ("haproxy", Some(true)),
];

/// The boolean settings kstack types, besides the `enable_*` flags: the ones a catalog config
/// file may name in `when`.
pub const BOOL_SETTINGS: &[&str] = &[
    "cinder_backend_ceph",
    "kolla_enable_tls_external",
    "kstack_external_network",
    "om_enable_rabbitmq_stream_fanout",
    "openstack_logging_debug",
];

/// Values of `config_strategy` the images understand (`KOLLA_CONFIG_STRATEGY`).
pub const CONFIG_STRATEGIES: &[&str] = &["COPY_ALWAYS", "COPY_ONCE"];

/// Values of `nova_compute_virt_type` kstack renders: `kvm` needs hardware virtualization on
/// the compute hosts; `qemu` emulates (TCG) and runs anywhere, slowly.
pub const VIRT_TYPES: &[&str] = &["kvm", "qemu"];

/// The longest token lifetime or rotation interval accepted: a year.
const MAX_FERNET_SECS: u64 = 366 * 86_400;

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

/// The service variables of globals.yml (the `enable_<service>` flags of [`SERVICE_FLAGS`]
/// are read from the table, see [`ServiceSettings::enabled`]).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ServiceSettings {
    #[serde(deserialize_with = "kolla::text")]
    openstack_region_name: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    keystone_admin_user: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    keystone_admin_project: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    config_strategy: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    nova_compute_virt_type: Read<String>,
    #[serde(deserialize_with = "kolla::boolean")]
    om_enable_rabbitmq_stream_fanout: Read<bool>,
    #[serde(deserialize_with = "kolla::count")]
    om_rabbitmq_qos_prefetch_count: Read<u64>,
    #[serde(deserialize_with = "kolla::count")]
    qemu_max_files: Read<u64>,
    #[serde(deserialize_with = "kolla::count")]
    qemu_max_processes: Read<u64>,
    #[serde(deserialize_with = "kolla::count")]
    fernet_token_expiry: Read<u64>,
    #[serde(deserialize_with = "kolla::count")]
    fernet_token_allow_expired_window: Read<u64>,
    /// Expiry + window when not set.
    #[serde(deserialize_with = "kolla::count")]
    fernet_key_rotation_interval: Read<u64>,
    #[serde(deserialize_with = "kolla::boolean")]
    cinder_backend_ceph: Read<bool>,
    #[serde(deserialize_with = "kolla::text")]
    ceph_cluster: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    ceph_cinder_user: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    ceph_cinder_pool_name: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    cinder_backend_ceph_name: Read<String>,
    #[serde(deserialize_with = "retention")]
    victoria_logs_retention_period: Read<String>,
    #[serde(deserialize_with = "kolla::boolean")]
    openstack_logging_debug: Read<bool>,
    #[serde(deserialize_with = "kolla::boolean")]
    enable_openstack_core: Read<bool>,
}

/// `victoria_logs_retention_period`, how long the central log store keeps lines: a whole
/// number of hours, days, weeks or years (`12h`, `30d`, `4w`, `1y`), as the store reads it.
fn retention<'de, D: Deserializer<'de>>(d: D) -> Result<Read<String>, D::Error> {
    let period = |v: &Value| {
        let s = v.as_str()?;
        let ok = s.len() > 1
            && s[..s.len() - 1].bytes().all(|b| b.is_ascii_digit())
            && s[..s.len() - 1].parse::<u32>().is_ok_and(|n| n > 0)
            && matches!(s.as_bytes()[s.len() - 1], b'h' | b'd' | b'w' | b'y');
        ok.then(|| s.to_owned())
    };
    Ok(Read::of(&Value::deserialize(d)?, period))
}

/// What the service variables give the deployment.
#[derive(Debug)]
pub(super) struct Services {
    pub openstack_region_name: String,
    pub keystone_admin_user: String,
    pub keystone_admin_project: String,
    pub config_strategy: String,
    pub fernet: FernetTiming,
    /// Cinder's Ceph backend when `cinder_backend_ceph` is on (whether Cinder is or not).
    pub cinder_ceph: Option<CephBackend>,
}

impl ServiceSettings {
    /// Types and checks the settings of the services, from the region to Cinder's backend.
    pub fn check(&self, t: &mut Issues) -> Services {
        let openstack_region_name = t.text("openstack_region_name", &self.openstack_region_name);
        let keystone_admin_user = t.text("keystone_admin_user", &self.keystone_admin_user);
        let keystone_admin_project = t.text("keystone_admin_project", &self.keystone_admin_project);
        let config_strategy = t.choice("config_strategy", &self.config_strategy, CONFIG_STRATEGIES);
        t.choice(
            "nova_compute_virt_type",
            &self.nova_compute_virt_type,
            VIRT_TYPES,
        );
        t.flag(
            "om_enable_rabbitmq_stream_fanout",
            &self.om_enable_rabbitmq_stream_fanout,
        );
        let prefetch = &self.om_rabbitmq_qos_prefetch_count;
        if prefetch
            .typed
            .is_none_or(|n| n == 0 || n > u64::from(u16::MAX))
        {
            t.push(
                "om_rabbitmq_qos_prefetch_count",
                None,
                format!(
                    "expected a whole number from 1 to 65535, found {}",
                    describe(prefetch.raw())
                ),
                "write e.g. `om_rabbitmq_qos_prefetch_count: 1` (the messages a consumer of a stream takes ahead; a stream needs at least 1)".into(),
            );
        }
        for (key, r) in [
            ("qemu_max_files", &self.qemu_max_files),
            ("qemu_max_processes", &self.qemu_max_processes),
        ] {
            if r.typed.is_none_or(|n| n > u64::from(u32::MAX)) {
                t.push(
                    key,
                    None,
                    format!("expected a whole number, found {}", describe(r.raw())),
                    format!(
                        "write e.g. `{key}: 0` (0 leaves the limit QEMU inherits; a host that cannot raise limits needs 0 or a value within its own)"
                    ),
                );
            }
        }
        let fernet = self.fernet_timing(t);
        let cinder_ceph = self.ceph_backend(t);
        Services {
            openstack_region_name,
            keystone_admin_user,
            keystone_admin_project,
            config_strategy,
            fernet,
            cinder_ceph,
        }
    }

    /// The `fernet_*` settings, checked: a rotation interval of whole minutes (the rotation
    /// CronJob checks every minute at most) that is no longer than a token's expiry plus its
    /// window, since with a longer one Keystone keeps too few keys and a rotation would purge
    /// the key of tokens still valid.
    fn fernet_timing(&self, t: &mut Issues) -> FernetTiming {
        let mut get = |key: &str, r: &Read<u64>, min: u64, default: u64| -> u64 {
            match r.typed.filter(|n| (min..=MAX_FERNET_SECS).contains(n)) {
                Some(n) => n,
                None => {
                    t.push(
                        key,
                        None,
                        format!(
                            "expected a whole number of seconds from {min} to {MAX_FERNET_SECS}, found {}",
                            shown(r.raw())
                        ),
                        format!("write e.g. `{key}: {default}`"),
                    );
                    default
                }
            }
        };
        let token_expiry = get("fernet_token_expiry", &self.fernet_token_expiry, 60, 86_400);
        let allow_expired_window = get(
            "fernet_token_allow_expired_window",
            &self.fernet_token_allow_expired_window,
            0,
            172_800,
        );
        let lifetime = token_expiry + allow_expired_window;
        let key = "fernet_key_rotation_interval";
        let r = &self.fernet_key_rotation_interval;
        let rotation_interval = match (&r.raw, r.typed) {
            (None, _) => lifetime,
            (Some(_), Some(n)) if n >= 60 && n % 60 == 0 && n <= lifetime => n,
            (Some(v), _) => {
                t.push(
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
        };
        FernetTiming {
            token_expiry,
            allow_expired_window,
            rotation_interval,
        }
    }

    /// The Ceph backend of Cinder when `cinder_backend_ceph` is on. Its names become file
    /// names and cinder.conf values, so they are checked as Ceph names: letters, digits, `.`,
    /// `_`, `-`.
    fn ceph_backend(&self, t: &mut Issues) -> Option<CephBackend> {
        let on = t
            .flag("cinder_backend_ceph", &self.cinder_backend_ceph)
            .unwrap_or(false);
        let mut name = |key: &str, r: &Read<String>| {
            let v = t.text(key, r);
            let ok = !v.is_empty()
                && v.len() <= 63
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                && !v.starts_with('.');
            if !ok {
                t.push(
                    key,
                    None,
                    format!("{} is not a Ceph name", quoted(&v)),
                    format!("write the name as it is in your Ceph cluster: 1 to 63 letters, digits, `.`, `_` or `-`, e.g. `{key}: {}`", super::defaults()[key].as_str().unwrap_or_default()),
                );
            }
            v
        };
        let backend = CephBackend {
            cluster: name("ceph_cluster", &self.ceph_cluster),
            user: name("ceph_cinder_user", &self.ceph_cinder_user),
            pool: name("ceph_cinder_pool_name", &self.ceph_cinder_pool_name),
            backend_name: name("cinder_backend_ceph_name", &self.cinder_backend_ceph_name),
        };
        on.then_some(backend)
    }

    /// `victoria_logs_retention_period`, when set: a period the log store reads.
    pub fn log_retention(&self, t: &mut Issues) {
        let key = "victoria_logs_retention_period";
        let r = &self.victoria_logs_retention_period;
        if let (Some(v), None) = (&r.raw, &r.typed) {
            t.push(
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

    /// `openstack_logging_debug`: a boolean.
    pub fn logging_debug(&self, t: &mut Issues) {
        t.flag("openstack_logging_debug", &self.openstack_logging_debug);
    }

    /// `enable_<service>` for every service of [`SERVICE_FLAGS`], derived as in kolla-ansible's
    /// `group_vars/all.yml`: a flag without a default follows `enable_openstack_core`, and
    /// placement and openvswitch follow nova and neutron. A flag set to something that is no
    /// boolean is off (and reported).
    pub fn enabled(
        &self,
        t: &mut Issues,
        vars: &BTreeMap<String, Value>,
    ) -> BTreeMap<String, bool> {
        let core = t
            .flag("enable_openstack_core", &self.enable_openstack_core)
            .unwrap_or(true);
        let mut enabled = BTreeMap::new();
        for (svc, default) in SERVICE_FLAGS {
            let key = format!("enable_{svc}");
            let flag = vars
                .get(&key)
                .map(|v| Read::of(v, kolla::parse_bool))
                .unwrap_or_default();
            let value = match t.flag(&key, &flag) {
                Some(b) => b,
                None if flag.is_set() => false,
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
        enabled
    }
}
