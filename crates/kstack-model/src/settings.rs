//! What kstack does with each kolla-ansible setting an operator may bring in globals.yml.
//!
//! Every setting is one of:
//! - **honoured**: it changes what kstack renders ([`crate::globals::known_keys`] and the
//!   settings listed here as honoured);
//! - **refused** with some values: kstack does not build what the value asks for, so loading
//!   fails (exit 2) naming the setting and why, rather than deploying another cloud than the
//!   one asked for;
//! - **meaningless on Kubernetes**: it configures something Kubernetes does itself (a VIP and
//!   its load balancer, the container engine, host interfaces); it is accepted with a warning
//!   that says what takes its place.
//!
//! Variables that are none of these are kept for templates with a warning. `docs/SETTINGS.md`
//! lists every entry of [`SETTINGS`]; a test keeps the two in step.
use serde_json::Value;

use crate::globals::{SERVICE_FLAGS, parse_bool};

/// What kstack does with a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// It changes what is rendered.
    Honoured,
    /// Accepted only with the values [`Accepts`] names; otherwise loading fails with the reason.
    RefusedUnless(Accepts),
    /// Accepted with a warning: Kubernetes (or kstack) does this itself.
    Meaningless,
}

/// The values of a refused setting that kstack accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepts {
    /// A false boolean (yes/no/true/false/...).
    False,
    /// A true boolean.
    True,
    /// Exactly this string.
    Exactly(&'static str),
}

impl Accepts {
    fn accepts(self, v: &Value) -> bool {
        match self {
            Accepts::False => parse_bool(v) == Some(false),
            Accepts::True => parse_bool(v) == Some(true),
            Accepts::Exactly(s) => v.as_str() == Some(s),
        }
    }

    /// The accepted values, for messages and docs.
    pub fn describe(self) -> String {
        match self {
            Accepts::False => "`no`".into(),
            Accepts::True => "`yes`".into(),
            Accepts::Exactly(s) => format!("`{s}`"),
        }
    }
}

/// One kolla-ansible setting and kstack's treatment of it. `name` ending in `*` matches every
/// variable with that prefix.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub name: &'static str,
    pub treatment: Treatment,
    /// Why (refused, meaningless) or what it changes (honoured).
    pub why: &'static str,
}

const fn honoured(name: &'static str, why: &'static str) -> Setting {
    Setting {
        name,
        treatment: Treatment::Honoured,
        why,
    }
}

const fn refused(name: &'static str, accepts: Accepts, why: &'static str) -> Setting {
    Setting {
        name,
        treatment: Treatment::RefusedUnless(accepts),
        why,
    }
}

const fn meaningless(name: &'static str, why: &'static str) -> Setting {
    Setting {
        name,
        treatment: Treatment::Meaningless,
        why,
    }
}

const NO_TLS: &str = "TLS inside the cluster is not built yet: every API serves plain HTTP to the other services (`kolla_enable_tls_external` encrypts the public endpoints)";
const CERT_FILE: &str = "kstack reads the public endpoints' certificate from `certificates/haproxy.pem` of its config directory (kolla-ansible's default place), and makes one from its own CA when that file is absent";
const ONE_STORE: &str = "only Glance's file store (on a persistent volume) is built";
const INTERFACE: &str = "pods use the cluster network, so services bind in their pod; the host interfaces that matter are `network_interface` and `neutron_external_interface`";

/// kolla-ansible settings with a treatment other than "kstack defaults it and interprets it"
/// ([`crate::globals::known_keys`] lists those) or "unknown".
pub const SETTINGS: &[Setting] = &[
    honoured(
        "kolla_external_vip_address",
        "public endpoints are registered on this address; HAProxy's Service answers on it (`externalIPs`: route it to the nodes)",
    ),
    honoured(
        "enable_haproxy",
        "with a public address (`kolla_external_vip_address` or `kolla_external_fqdn`), HAProxy publishes every public endpoint there; `no` leaves that to the operator (internal traffic never goes through it: Kubernetes Services balance it)",
    ),
    honoured(
        "kolla_external_fqdn",
        "public endpoints are registered on this name (default: `kolla_external_vip_address`)",
    ),
    meaningless(
        "kolla_internal_fqdn",
        "internal endpoints are the Services' cluster DNS names (`<service>.<namespace>.svc`)",
    ),
    honoured(
        "openstack_logging_debug",
        "`debug` in every OpenStack service's config file",
    ),
    refused(
        "neutron_plugin_agent",
        Accepts::Exactly("openvswitch"),
        "only the Open vSwitch agent is built; OVN (ovn-northd, its databases, ovn-controller and the ML2 ovn driver) is not built yet",
    ),
    refused("kolla_enable_tls_internal", Accepts::False, NO_TLS),
    honoured(
        "kolla_enable_tls_external",
        "HAProxy serves the public endpoints over HTTPS (TLS 1.2 or later) with the public certificate, port 80 redirects to Horizon's 443, and the public endpoints are `https://`; needs a public address",
    ),
    refused("kolla_enable_tls_backend", Accepts::False, NO_TLS),
    refused(
        "kolla_copy_ca_into_containers",
        Accepts::False,
        "the services talk to each other over plain HTTP inside the cluster (no internal TLS yet), so no container needs the CA",
    ),
    honoured(
        "kolla_admin_openrc_cacert",
        "the CA bundle `kstack openrc` names (`OS_CACERT`, `cacert`) and `kstack verify` trusts, for a certificate of a private CA; with kstack's own CA, `kstack openrc` writes that CA next to the openrc",
    ),
    meaningless("kolla_external_fqdn_cert", CERT_FILE),
    meaningless("kolla_certificates_dir", CERT_FILE),
    refused("glance_backend_file", Accepts::True, ONE_STORE),
    refused("glance_backend_ceph", Accepts::False, ONE_STORE),
    refused("glance_backend_swift", Accepts::False, ONE_STORE),
    refused("glance_backend_s3", Accepts::False, ONE_STORE),
    refused("glance_backend_vmware", Accepts::False, ONE_STORE),
    refused(
        "enable_*",
        Accepts::False,
        "kstack does not build this service (the services it builds are in `kstack catalog`)",
    ),
    meaningless(
        "enable_keepalived",
        "Kubernetes Services have stable addresses; there is no VIP to move",
    ),
    meaningless(
        "enable_proxysql",
        "clients reach MariaDB through its Kubernetes Service",
    ),
    meaningless(
        "enable_loadbalancer",
        "Kubernetes Services balance the load across pods",
    ),
    meaningless(
        "enable_fluentd",
        "containers log to Kubernetes (`kstack logs`); `enable_central_logging` adds a collector (vlagent) on every node",
    ),
    refused(
        "enable_opensearch",
        Accepts::False,
        "central logging stores logs in VictoriaLogs, not OpenSearch: set `enable_central_logging` instead",
    ),
    refused(
        "enable_opensearch_dashboards",
        Accepts::False,
        "central logging stores logs in VictoriaLogs, whose own web UI serves queries (/select/vmui): set `enable_central_logging` instead",
    ),
    meaningless(
        "enable_chrony",
        "time is the hosts' concern, not a container's",
    ),
    meaningless(
        "kolla_external_vip_interface",
        "no keepalived VIP is configured; route `kolla_external_vip_address` to the nodes",
    ),
    meaningless("api_interface", INTERFACE),
    meaningless("storage_interface", INTERFACE),
    honoured(
        "tunnel_interface",
        "when set, the address of this interface on each host is its VXLAN tunnel endpoint (the Open vSwitch agent's `local_ip`); with the userspace datapath (`ovs_datapath: netdev`) the interface and its address move onto the Open vSwitch bridge `br-vtep`, through which that datapath sends tunnel traffic. Unset: each host's own address",
    ),
    meaningless("dns_interface", INTERFACE),
    meaningless("migration_interface", INTERFACE),
    meaningless("octavia_network_interface", INTERFACE),
    meaningless("swift_storage_interface", INTERFACE),
    meaningless("swift_replication_interface", INTERFACE),
    meaningless(
        "keepalived_virtual_router_id",
        "no keepalived VIP is configured",
    ),
    meaningless("haproxy_*", "Kubernetes Services replace HAProxy"),
    meaningless(
        "kolla_container_engine",
        "Kubernetes runs the containers (the Compose target uses Docker)",
    ),
    meaningless(
        "docker_restart_policy*",
        "Kubernetes restarts containers; the Compose target uses `restart: always`",
    ),
    meaningless(
        "docker_registry_insecure",
        "image pulls are the container runtime's configuration",
    ),
    meaningless(
        "docker_registry_username",
        "image pull credentials are a Kubernetes Secret the operator adds",
    ),
    meaningless(
        "node_config",
        "kstack reads its config directory (`--config-dir`), not /etc/kolla",
    ),
    meaningless(
        "node_custom_config",
        "per-service overrides live in `config/` of the config directory",
    ),
    meaningless(
        "kolla_install_type",
        "Kolla builds only source images since 2023.1",
    ),
    meaningless(
        "workaround_ansible_issue_8743",
        "kstack does not run Ansible",
    ),
];

/// Whether `enable_<x>` is the flag of a service kstack builds.
fn flag_is_service(name: &str) -> bool {
    let svc = &name["enable_".len()..];
    SERVICE_FLAGS.iter().any(|(s, _)| *s == svc)
}

/// The treatment of `name`: the most specific entry of [`SETTINGS`] (exact names before
/// prefixes), or `None` when the table does not list it. The `enable_*` flags of the services
/// kstack builds are honoured, not refused.
pub fn lookup(name: &str) -> Option<&'static Setting> {
    if let Some(s) = SETTINGS.iter().find(|s| s.name == name) {
        return Some(s);
    }
    if name.starts_with("enable_") && (flag_is_service(name) || name == "enable_openstack_core") {
        return None;
    }
    SETTINGS
        .iter()
        .filter(|s| s.name.ends_with('*') && name.starts_with(&s.name[..s.name.len() - 1]))
        .max_by_key(|s| s.name.len())
}

/// What [`check`] found about one setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingNote {
    pub key: String,
    /// Refused (an error) or a warning.
    pub refused: bool,
    pub message: String,
    pub help: String,
}

/// Checks one user variable (after Jinja evaluation) against [`SETTINGS`]: `None` when it is
/// honoured or not listed.
pub fn check(key: &str, value: &Value) -> Option<SettingNote> {
    let s = lookup(key)?;
    match s.treatment {
        Treatment::Honoured => None,
        Treatment::RefusedUnless(accepts) if accepts.accepts(value) => None,
        Treatment::RefusedUnless(accepts) => Some(SettingNote {
            key: key.to_owned(),
            refused: true,
            message: format!(
                "kstack refuses {} for this setting: {}",
                match value {
                    Value::String(v) => format!("`{v}`"),
                    other => format!("`{other}`"),
                },
                s.why
            ),
            help: format!(
                "set it to {} or remove it (docs/SETTINGS.md lists what kstack builds)",
                accepts.describe()
            ),
        }),
        Treatment::Meaningless => Some(SettingNote {
            key: key.to_owned(),
            refused: false,
            message: format!("this setting has no effect with kstack: {}", s.why),
            help: "remove it to silence this warning (docs/SETTINGS.md)".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refused_values_fail_and_accepted_values_pass() {
        for (key, ok, bad) in [
            ("neutron_plugin_agent", json!("openvswitch"), json!("ovn")),
            ("kolla_enable_tls_internal", json!("no"), json!("yes")),
            ("kolla_enable_tls_backend", json!("False"), json!("True")),
            ("glance_backend_file", json!("yes"), json!("no")),
            ("glance_backend_ceph", json!("no"), json!("yes")),
            ("glance_backend_swift", json!("no"), json!("yes")),
            ("enable_octavia", json!("no"), json!("yes")),
            ("enable_cinder_backend_lvm", json!(false), json!("yes")),
        ] {
            assert_eq!(check(key, &ok), None, "{key}: {ok}");
            let note = check(key, &bad).unwrap_or_else(|| panic!("{key}: {bad} must be refused"));
            assert!(note.refused, "{key}");
            assert!(note.message.contains("refuses"), "{}", note.message);
        }
    }

    #[test]
    fn every_refused_setting_accepts_its_value_and_refuses_the_other() {
        for s in SETTINGS {
            let Treatment::RefusedUnless(accepts) = s.treatment else {
                continue;
            };
            let key = s.name.replace('*', "anything");
            let (ok, bad) = match accepts {
                Accepts::False => (json!("no"), json!("yes")),
                Accepts::True => (json!("yes"), json!("no")),
                Accepts::Exactly(v) => (json!(v), json!(format!("not-{v}"))),
            };
            assert_eq!(check(&key, &ok), None, "{key}: {ok}");
            let note = check(&key, &bad).unwrap_or_else(|| panic!("{key}: {bad} must be refused"));
            assert!(
                note.refused && note.message.contains(s.why),
                "{key}: {note:?}"
            );
            assert!(
                note.help.contains(&accepts.describe()),
                "{key}: {}",
                note.help
            );
        }
    }

    #[test]
    fn service_flags_kstack_builds_are_honoured_and_meaningless_ones_warn() {
        for (svc, _) in SERVICE_FLAGS {
            assert_eq!(
                check(&format!("enable_{svc}"), &json!("yes")),
                None,
                "{svc}"
            );
        }
        for key in [
            "enable_keepalived",
            "enable_fluentd",
            "api_interface",
            "haproxy_client_timeout",
            "docker_restart_policy_retry",
            "kolla_container_engine",
        ] {
            let note = check(key, &json!("yes")).unwrap_or_else(|| panic!("{key}"));
            assert!(!note.refused, "{key}");
        }
        assert_eq!(
            check("kolla_external_fqdn", &json!("cloud.example.com")),
            None
        );
        assert_eq!(check("some_variable_of_mine", &json!("x")), None);
    }

    #[test]
    fn the_settings_page_lists_every_setting() {
        let doc = include_str!("../../../docs/SETTINGS.md");
        for s in SETTINGS {
            assert!(
                doc.contains(&format!("| `{}` |", s.name)),
                "docs/SETTINGS.md misses {}",
                s.name
            );
        }
        let flags = doc
            .split("`, `")
            .find(|part| part.starts_with("enable_<service> ("))
            .expect("the page lists the service flags as `enable_<service> (a, b, ...)`");
        for key in crate::globals::known_keys() {
            let listed = match key.strip_prefix("enable_") {
                Some(svc) if key != "enable_openstack_core" => {
                    flags.split(['(', ')', ',', ' ']).any(|s| s == svc)
                }
                _ => doc.contains(&format!("`{key}`")),
            };
            assert!(listed, "docs/SETTINGS.md misses {key}");
        }
    }

    #[test]
    fn every_setting_says_why() {
        for s in SETTINGS {
            assert!(s.why.len() > 10, "{}", s.name);
        }
    }
}
