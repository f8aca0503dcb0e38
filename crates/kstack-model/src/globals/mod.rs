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
//!
//! The variables kstack types are the fields of four serde structs, one per concern, each
//! field read with one of kolla-ansible's value conventions (`kolla`): `images` (release,
//! distribution, registry, tags and the image references), `network` (interfaces, datapath,
//! public endpoints, the provider network), `services` (the `enable_*` flags and the
//! services' own settings), `kubernetes` (kstack's namespace, replicas, resources, timeouts,
//! history, pod labels). `validate` checks the final values of every variable.
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

mod backup;
mod images;
mod kolla;
mod kubernetes;
mod network;
mod services;
mod validate;

pub use backup::{
    DEFAULT_BACKUP_KEEP, DEFAULT_BACKUP_VOLUME_SIZE, ScheduledBackup, check_schedule, is_quantity,
};
pub use images::Images;
pub use kolla::parse_bool;
pub use kubernetes::{
    DEFAULT_HISTORY_LIMIT, DEFAULT_TIMEOUT_SECS, QUORUM_CLUSTERS, ROLES, Resources,
};
pub use network::{ExternalNetwork, OVS_DATAPATHS, PublicTls, physical_networks};
pub use services::{
    BOOL_SETTINGS, CONFIG_STRATEGIES, CephBackend, FernetTiming, SERVICE_FLAGS, VIRT_TYPES,
};

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

/// The deployment description kstack acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Globals {
    /// The release, distribution, registry and tags the image references are made of.
    pub images: Images,
    pub network_interface: String,
    pub neutron_external_interface: String,
    /// `tunnel_interface` when set: the interface whose address is each host's VXLAN tunnel
    /// endpoint (with the userspace datapath it moves onto the Open vSwitch bridge `br-vtep`).
    pub tunnel_interface: Option<String>,
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
    /// Backups of the databases on a schedule (`kstack_backup_schedule`), when on.
    pub backup: Option<ScheduledBackup>,
    /// Cinder's volumes in a Ceph cluster (`cinder_backend_ceph`), when on.
    pub cinder_ceph: Option<CephBackend>,
    /// The provider network kstack makes once Neutron runs (`kstack_external_network`), when on.
    pub external_network: Option<ExternalNetwork>,
    /// TLS of the public endpoints (`kolla_enable_tls_external`, `kolla_admin_openrc_cacert`).
    pub tls: PublicTls,
    /// Every variable after merging defaults, user values and derived values; templates read these.
    pub vars: BTreeMap<String, Value>,
}

/// The defaults of every variable kstack interprets (before derivation).
pub fn defaults() -> BTreeMap<String, Value> {
    let mut m = BTreeMap::new();
    let s = |v: &str| Value::String(v.to_owned());
    for (k, v) in [
        ("openstack_release", "2025.1"),
        ("kolla_base_distro", crate::distro::DEFAULT.name),
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
        ("neutron_type_drivers", "flat,vlan,vxlan"),
        ("neutron_tenant_network_types", "vxlan"),
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
    // Keystone tokens live a day, may be fetched expired for two more (kolla-ansible's values);
    // `fernet_key_rotation_interval` defaults to their sum.
    m.insert("fernet_token_expiry".into(), Value::from(86_400));
    m.insert(
        "fernet_token_allow_expired_window".into(),
        Value::from(172_800),
    );
    // The limits libvirtd gives each QEMU process (0: leave the inherited ones).
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

/// Names of the variables kstack interprets; other variables are kept for templates only.
pub fn known_keys() -> Vec<String> {
    let mut keys: Vec<String> = defaults().into_keys().collect();
    keys.extend(
        [
            "kolla_base_distro_version",
            "openstack_tag",
            "kolla_internal_vip_address",
            "kstack_storage_class",
            "kstack_history_limit",
            "kstack_backup_schedule",
            "kstack_backup_keep",
            "kstack_backup_volume_size",
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

/// The typed variables of globals.yml, one struct per concern.
#[derive(Debug, Deserialize)]
struct Settings {
    #[serde(flatten)]
    images: images::ImageSettings,
    #[serde(flatten)]
    network: network::NetworkSettings,
    #[serde(flatten)]
    services: services::ServiceSettings,
    #[serde(flatten)]
    kubernetes: kubernetes::KubernetesSettings,
    #[serde(flatten)]
    backup: backup::BackupSettings,
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
        let all = Value::Object(vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
        // Every field takes any value (a wrong one is kept as a problem, not a serde error),
        // so a mapping always deserializes; should it not, nothing is typed from defaults.
        let s = Settings::deserialize(&all).map_err(|e| {
            vec![GlobalsIssue {
                key: String::new(),
                subpath: None,
                message: format!("the variables could not be read: {e}"),
                help: "report this as a bug of kstack".into(),
            }]
        })?;

        // The variables are checked in this order, which is the order their problems are
        // reported in when several share a line.
        let mut t = kolla::Issues::default();
        let images = s.images.check(&mut t);
        let (network_interface, neutron_external_interface) = s.network.interfaces(&mut t);
        let tunnel_interface = s.network.tunnel(&mut t);
        let services = s.services.check(&mut t);
        let external_network = s.network.external_network(&mut t);
        s.services.log_retention(&mut t);
        s.network.datapath(&mut t);
        s.network.network_types(&mut t);
        s.services.logging_debug(&mut t);
        let kolla_internal_vip_address = s.network.endpoints(&mut t);
        let tls = s.network.tls(&mut t);
        let placement = s.kubernetes.placement(&mut t);
        let enabled = s.services.enabled(&mut t, &vars);
        let workloads = s.kubernetes.workloads(&mut t);
        let backup = s.backup.scheduled(&mut t);
        if backup.is_some() && enabled.get("mariadb") == Some(&false) {
            t.push(
                "kstack_backup_schedule",
                None,
                "scheduled backups are of MariaDB's databases, and `enable_mariadb` is no".into(),
                "remove `kstack_backup_schedule`, or enable MariaDB".into(),
            );
        }
        // The final values (after derivation, and after any evaluation that runs before this
        // function) must be safe to write: no line breaks, and names Kubernetes and the
        // registry accept.
        validate::final_values(&mut t, &vars, &placement.kubernetes_namespace, &images);
        if !t.0.is_empty() {
            return Err(t.0);
        }

        // Publish derived values so templates see the same values kstack acts on.
        vars.insert(
            "kolla_base_distro_version".into(),
            Value::String(images.kolla_base_distro_version.clone()),
        );
        vars.insert(
            "openstack_tag".into(),
            Value::String(images.openstack_tag.clone()),
        );
        for (svc, on) in &enabled {
            vars.insert(format!("enable_{svc}"), Value::Bool(*on));
        }
        // Cinder's Ceph backend only exists with Cinder (as in kolla-ansible); what depends on
        // it (catalog `when`, templates) sees that.
        let cinder_ceph = services
            .cinder_ceph
            .filter(|_| enabled.get("cinder").copied().unwrap_or(false));
        vars.insert(
            "cinder_backend_ceph".into(),
            Value::Bool(cinder_ceph.is_some()),
        );
        vars.insert(
            "kolla_enable_tls_external".into(),
            Value::Bool(tls.external),
        );

        Ok(Globals {
            images,
            network_interface,
            neutron_external_interface,
            tunnel_interface,
            openstack_region_name: services.openstack_region_name,
            keystone_admin_user: services.keystone_admin_user,
            keystone_admin_project: services.keystone_admin_project,
            config_strategy: services.config_strategy,
            kolla_internal_vip_address,
            enabled,
            kubernetes_namespace: placement.kubernetes_namespace,
            replicas: workloads.replicas,
            role_label_prefix: placement.role_label_prefix,
            storage_class: placement.storage_class,
            resources: workloads.resources,
            timeouts: workloads.timeouts,
            history_limit: workloads.history_limit,
            pod_labels: workloads.pod_labels,
            fernet: services.fernet,
            backup,
            cinder_ceph,
            external_network,
            tls,
            vars,
        })
    }

    /// Whether `enable_<service>` is on. Unknown services are off.
    pub fn is_enabled(&self, service: &str) -> bool {
        self.enabled.get(service).copied().unwrap_or(false)
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
    //! The typing of globals.yml variables, case by case (the whole table of values is the
    //! snapshot of `tests/globals_typing.rs`).
    use super::*;
    use serde_json::json;

    #[test]
    fn every_distro_name_has_its_facts() {
        for d in crate::distro::names() {
            let g = Globals::from_vars(&BTreeMap::from([(
                "kolla_base_distro".to_owned(),
                json!(d),
            )]))
            .unwrap();
            assert_eq!(g.distro().name, d);
        }
        assert_eq!(Globals::default().distro().name, "rocky");
    }

    fn vars(v: Value) -> BTreeMap<String, Value> {
        v.as_object().unwrap().clone().into_iter().collect()
    }

    #[test]
    fn defaults_match_kolla_ansible_2025_1() {
        let g = Globals::from_vars(&BTreeMap::new()).unwrap();
        assert_eq!(g.images.openstack_tag, "2025.1-rocky-9");
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
        assert_eq!(g.images.kolla_base_distro_version, "noble");
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

        // A release kstack does not deploy is refused, naming the ones it does.
        let issues =
            Globals::from_vars(&vars(json!({"openstack_release": "2025.1/../x"}))).unwrap_err();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, "openstack_release");
        assert!(
            issues[0]
                .message
                .contains("`2025.1/../x` is not a supported value")
                && issues[0].help.contains("2024.2, 2025.1"),
            "{issues:?}"
        );
        // A derived tag names the variable that breaks it.
        let issues =
            Globals::from_vars(&vars(json!({"openstack_tag_suffix": "/../x"}))).unwrap_err();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, "openstack_tag_suffix");
        assert!(
            issues[0].message.contains("`2025.1-rocky-9/../x`"),
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
            assert_eq!(g.images.docker_registry, r);
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
