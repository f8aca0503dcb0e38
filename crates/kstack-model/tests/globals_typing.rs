//! Every globals.yml variable kstack types, given every kind of value an operator (or a Jinja
//! expression) can produce: what `Globals::from_vars` makes of it, reviewed as a snapshot.
//!
//! Each case is one line of input, then either the problems it reports (variable, path below
//! it, message, help) in the order they are reported, or how the typed globals differ from
//! the defaults. The messages here are the ones `kstack` shows with the file and line.
use std::collections::BTreeMap;
use std::fmt::Write;

use kstack_model::globals::{Globals, SERVICE_FLAGS};
use serde_json::{Value, json};

/// The typed fields of `Globals` (not `vars`), one line each.
fn fields(g: &Globals) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = [
        (
            "openstack_release",
            format!("{:?}", g.images.openstack_release),
        ),
        (
            "kolla_base_distro",
            format!("{:?}", g.images.kolla_base_distro),
        ),
        (
            "kolla_base_distro_version",
            format!("{:?}", g.images.kolla_base_distro_version),
        ),
        (
            "openstack_tag_suffix",
            format!("{:?}", g.images.openstack_tag_suffix),
        ),
        ("openstack_tag", format!("{:?}", g.images.openstack_tag)),
        ("docker_registry", format!("{:?}", g.images.docker_registry)),
        (
            "docker_namespace",
            format!("{:?}", g.images.docker_namespace),
        ),
        (
            "docker_image_name_prefix",
            format!("{:?}", g.images.docker_image_name_prefix),
        ),
        ("network_interface", format!("{:?}", g.network_interface)),
        (
            "neutron_external_interface",
            format!("{:?}", g.neutron_external_interface),
        ),
        (
            "openstack_region_name",
            format!("{:?}", g.openstack_region_name),
        ),
        (
            "keystone_admin_user",
            format!("{:?}", g.keystone_admin_user),
        ),
        (
            "keystone_admin_project",
            format!("{:?}", g.keystone_admin_project),
        ),
        ("config_strategy", format!("{:?}", g.config_strategy)),
        (
            "kolla_internal_vip_address",
            format!("{:?}", g.kolla_internal_vip_address),
        ),
        ("enabled", format!("{:?}", g.enabled)),
        (
            "kubernetes_namespace",
            format!("{:?}", g.kubernetes_namespace),
        ),
        ("replicas", format!("{:?}", g.replicas)),
        ("role_label_prefix", format!("{:?}", g.role_label_prefix)),
        ("storage_class", format!("{:?}", g.storage_class)),
        ("resources", format!("{:?}", g.resources)),
        ("timeouts", format!("{:?}", g.timeouts)),
        ("history_limit", format!("{:?}", g.history_limit)),
        ("pod_labels", format!("{:?}", g.pod_labels)),
        ("fernet", format!("{:?}", g.fernet)),
        ("backup", format!("{:?}", g.backup)),
        ("cinder_ceph", format!("{:?}", g.cinder_ceph)),
        ("external_network", format!("{:?}", g.external_network)),
        ("distro", g.distro().name.to_owned()),
        ("public_host", format!("{:?}", g.public_host())),
        ("image_ref", g.image_ref("keystone", "keystone")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for (k, v) in &g.vars {
        out.push((format!("vars.{k}"), v.to_string()));
    }
    out
}

fn outcome(input: &Value, default: &BTreeMap<String, String>) -> String {
    let vars: BTreeMap<String, Value> = input
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut out = format!("{input}\n");
    match Globals::from_vars(&vars) {
        Ok(g) => {
            let mut same = true;
            for (k, v) in fields(&g) {
                if default.get(&k) != Some(&v) {
                    same = false;
                    writeln!(out, "  = {k}: {v}").unwrap();
                }
            }
            let now: BTreeMap<String, String> = fields(&g).into_iter().collect();
            for k in default.keys().filter(|k| !now.contains_key(*k)) {
                same = false;
                writeln!(out, "  = {k}: (gone)").unwrap();
            }
            if same {
                out.push_str("  = the defaults\n");
            }
        }
        Err(issues) => {
            for i in issues {
                writeln!(
                    out,
                    "  ! {}{}: {}\n    help: {}",
                    i.key,
                    i.subpath.map(|s| format!(" [{s}]")).unwrap_or_default(),
                    i.message,
                    i.help
                )
                .unwrap();
            }
        }
    }
    out
}

/// Values of every kind: YAML's scalars, numbers as strings, Ansible's booleans, nesting.
fn probes() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(false),
        json!("yes"),
        json!("No"),
        json!("maybe"),
        json!(0),
        json!(1),
        json!(2),
        json!(-1),
        json!(3.5),
        json!(2025.1),
        json!(1e20),
        json!(70000),
        json!(5_000_000_000u64),
        json!("42"),
        json!(" 120 "),
        json!(""),
        json!("ubuntu"),
        json!("a b"),
        json!("tab\there"),
        json!("{{ x }}"),
        json!([]),
        json!(["x"]),
        json!({}),
        json!({"nova": 3}),
    ]
}

/// The variables kstack types, each given every probe.
const TYPED: &[&str] = &[
    "openstack_release",
    "kolla_base_distro",
    "kolla_base_distro_version",
    "openstack_tag_suffix",
    "openstack_tag",
    "docker_registry",
    "docker_namespace",
    "docker_image_name_prefix",
    "keystone_tag",
    "network_interface",
    "neutron_external_interface",
    "openstack_region_name",
    "keystone_admin_user",
    "keystone_admin_project",
    "config_strategy",
    "nova_compute_virt_type",
    "ovs_datapath",
    "om_enable_rabbitmq_stream_fanout",
    "om_rabbitmq_qos_prefetch_count",
    "qemu_max_files",
    "qemu_max_processes",
    "fernet_token_expiry",
    "fernet_token_allow_expired_window",
    "fernet_key_rotation_interval",
    "cinder_backend_ceph",
    "ceph_cluster",
    "kstack_external_network",
    "kstack_external_network_name",
    "victoria_logs_retention_period",
    "openstack_logging_debug",
    "kolla_external_fqdn",
    "kolla_external_vip_address",
    "kolla_internal_vip_address",
    "kubernetes_namespace",
    "kstack_role_label_prefix",
    "kstack_storage_class",
    "enable_openstack_core",
    "kstack_replicas",
    "kstack_resources",
    "kstack_timeouts",
    "kstack_history_limit",
    "kstack_pod_labels",
    "kstack_backup_schedule",
    "kstack_backup_keep",
    "kstack_backup_volume_size",
    "my_own_setting",
];

/// Cases that combine variables, or reach below the top level.
fn combinations() -> Vec<Value> {
    let ext = |more: Value| {
        let mut m = json!({
            "kstack_external_network": "yes",
            "kstack_external_network_cidr": "172.24.4.0/24",
        });
        m.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        m
    };
    let ceph = |more: Value| {
        let mut m = json!({"cinder_backend_ceph": "yes", "enable_cinder": "yes"});
        m.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        m
    };
    vec![
        json!({}),
        json!({"enable_openstack_core": "no", "enable_nova": "yes", "enable_neutron": true}),
        json!({"enable_openstack_core": "no", "enable_keystone": "maybe", "enable_placement": 1}),
        json!({"enable_nova": false, "enable_neutron": "off"}),
        json!({"enable_cinder": "yes", "enable_central_logging": "on", "enable_mariadb": null}),
        json!({"enable_horizon": []}),
        json!({"kolla_base_distro": "debian", "openstack_tag_suffix": "-aarch64"}),
        json!({"kolla_base_distro": "gentoo"}),
        json!({"kolla_base_distro": 5}),
        json!({"kolla_base_distro": "ubuntu", "kolla_base_distro_version": ""}),
        json!({"openstack_release": "2025.1/../x"}),
        json!({"openstack_release": "x y", "openstack_tag_suffix": "$"}),
        json!({"openstack_tag_suffix": "{{ suffix }}"}),
        json!({"kolla_base_distro_version": "9 stream"}),
        json!({"openstack_tag": "", "openstack_release": "2024.2"}),
        json!({"docker_registry": "https://quay.io", "docker_namespace": "../../etc", "docker_image_name_prefix": "My-"}),
        json!({"docker_registry": "localhost:4000", "docker_namespace": "kolla", "docker_image_name_prefix": "centos-source-"}),
        json!({"nova_tag": 2025.1, "glance_tag": "", "heat_tag": "bad tag", "cinder_tag": true}),
        json!({"kubernetes_namespace": "kube-system"}),
        json!({"kubernetes_namespace": "openstack\n"}),
        json!({"openstack_region_name": "RegionOne\n[DEFAULT]", "another": "bell\u{7}", "my_own": {"list": ["ok", "tab\there"]}}),
        json!({"block": "two lines\n"}),
        json!({"network_interface": "eth0.100", "neutron_external_interface": "eth1, eth2,,"}),
        json!({"neutron_external_interface": "eth1; reboot,$(id)"}),
        json!({"network_interface": "a-name-longer-than-15"}),
        json!({"kolla_external_fqdn": "cloud.example.com"}),
        json!({"kolla_external_vip_address": "fd00::10"}),
        json!({"kolla_external_vip_address": "10.0.0.10", "kolla_external_fqdn": ""}),
        json!({"kolla_external_fqdn": "bad host!", "kolla_external_vip_address": "http://x"}),
        json!({"fernet_token_expiry": "1800", "fernet_token_allow_expired_window": 0, "fernet_key_rotation_interval": 60}),
        json!({"fernet_key_rotation_interval": 90}),
        json!({"fernet_key_rotation_interval": 259_260}),
        json!({"fernet_key_rotation_interval": "daily"}),
        json!({"fernet_key_rotation_interval": null}),
        json!({"fernet_token_expiry": 30, "fernet_key_rotation_interval": 60}),
        json!({"fernet_token_expiry": 40_000_000}),
        json!({"fernet_token_allow_expired_window": -1}),
        json!({"om_rabbitmq_qos_prefetch_count": 65_535}),
        json!({"om_rabbitmq_qos_prefetch_count": 65_536}),
        json!({"qemu_max_files": 4_294_967_295u64}),
        json!({"qemu_max_files": 4_294_967_296u64}),
        json!({"qemu_max_files": "many", "qemu_max_processes": -1}),
        json!({"victoria_logs_retention_period": "30d"}),
        json!({"victoria_logs_retention_period": "1y"}),
        json!({"victoria_logs_retention_period": "0d"}),
        json!({"victoria_logs_retention_period": "-1d"}),
        json!({"victoria_logs_retention_period": "30 days"}),
        json!({"victoria_logs_retention_period": "99999999999d"}),
        ceph(json!({})),
        ceph(
            json!({"ceph_cluster": "prod", "ceph_cinder_user": "vol", "ceph_cinder_pool_name": "rbd", "cinder_backend_ceph_name": "ceph-1"}),
        ),
        ceph(
            json!({"ceph_cluster": "", "ceph_cinder_user": "a/b", "ceph_cinder_pool_name": ".hidden", "cinder_backend_ceph_name": "two words"}),
        ),
        ceph(json!({"ceph_cluster": "..", "ceph_cinder_user": 7, "ceph_cinder_pool_name": true})),
        ceph(json!({"ceph_cluster": "x".repeat(64)})),
        json!({"cinder_backend_ceph": "yes"}),
        json!({"cinder_backend_ceph": "yes", "ceph_cluster": "a/b"}),
        json!({"cinder_backend_ceph": "sometimes", "enable_cinder": "yes"}),
        ext(json!({})),
        ext(
            json!({"kstack_external_network_gateway": "172.24.4.254", "kstack_external_network_pool": "172.24.4.100 - 172.24.4.200"}),
        ),
        ext(
            json!({"kstack_external_network_name": "", "kstack_external_network_physnet": "physnet2", "kstack_external_network_gateway": "172.24.5.1", "kstack_external_network_pool": "172.24.4.200-172.24.4.100"}),
        ),
        ext(json!({"kstack_external_network_name": "x".repeat(256)})),
        ext(json!({"kstack_external_network_pool": "172.24.4.100-172.24.4.255"})),
        ext(json!({"kstack_external_network_pool": "172.24.4.0-172.24.4.10"})),
        ext(json!({"kstack_external_network_pool": "nonsense"})),
        ext(json!({"kstack_external_network_gateway": "172.24.4.0"})),
        ext(
            json!({"kstack_external_network_cidr": "172.24.4.1/24", "kstack_external_network_name": ""}),
        ),
        ext(json!({"kstack_external_network_cidr": "", "kstack_external_network_gateway": "x"})),
        ext(json!({"kstack_external_network_cidr": "fd00::/64"})),
        ext(json!({"kstack_external_network_cidr": "10.0.0.0/31"})),
        ext(json!({"kstack_external_network_cidr": "10.0.0.0/8"})),
        ext(json!({"kstack_external_network_cidr": "10.0.0.0/7"})),
        ext(json!({"kstack_external_network_cidr": "10.0.0.0/abc"})),
        ext(
            json!({"neutron_external_interface": "eth1,eth2", "kstack_external_network_physnet": "physnet2"}),
        ),
        ext(
            json!({"neutron_external_interface": "", "kstack_external_network_physnet": "physnet1"}),
        ),
        ext(json!({"neutron_external_interface": 7})),
        ext(json!({"kstack_external_network_name": ["x"], "kstack_external_network_cidr": 5})),
        json!({"kstack_external_network": "no", "kstack_external_network_cidr": "nonsense"}),
        json!({"kstack_replicas": {"keystone": 3, "mariadb": 3, "rabbitmq": 5, "memcached": 2}}),
        json!({"kstack_replicas": {"mariadb": 2, "rabbitmq": 4, "keystone": 2}}),
        json!({"kstack_replicas": {"mariadb": 6}}),
        json!({"kstack_replicas": {"nova": "three", "glance": -1, "heat": 2.0, "cinder": 4_294_967_296u64, "neutron": 0}}),
        json!({"kstack_replicas": null}),
        json!({"kstack_resources": {"nova": {"cpu": "500m", "memory": "1Gi"}, "glance": {"cpu": 2}}}),
        json!({"kstack_resources": {"nova": {"cpu": true, "memory": ["1Gi"], "disk": "1Gi"}, "glance": "big", "heat": {}}}),
        json!({"kstack_resources": null}),
        json!({"kstack_timeouts": {"default": 300, "nova-api": 900}}),
        json!({"kstack_timeouts": {"default": 0, "keystone": "soon", "glance-api": 10, "nova": 86_401, "heat": 1.5}}),
        json!({"kstack_timeouts": null}),
        json!({"kstack_history_limit": 2}),
        json!({"kstack_history_limit": 1000}),
        json!({"kstack_history_limit": 1001}),
        json!({"kstack_history_limit": "5"}),
        json!({"kstack_backup_schedule": "30 2 * * *"}),
        json!({"kstack_backup_schedule": "@daily", "kstack_backup_keep": 30, "kstack_backup_volume_size": "50Gi"}),
        json!({"kstack_backup_schedule": "61 2 * * *", "kstack_backup_keep": 0, "kstack_backup_volume_size": "big"}),
        json!({"kstack_backup_keep": "7", "kstack_backup_volume_size": 10}),
        json!({"kstack_backup_schedule": "", "kstack_backup_keep": 1001}),
        json!({"kstack_backup_schedule": "@daily", "enable_mariadb": "no"}),
        json!({"kstack_pod_labels": {"keystone": {"kstack.io/dev-ready": "never", "tier": 1, "on": true, "empty": ""}}}),
        json!({"kstack_pod_labels": {"keystone": {"app.kubernetes.io/name": "x", "bad key!": "v", "ok": "bad value!", "n": null, "l": []}, "nova-api": "ready"}}),
        json!({"kstack_pod_labels": {"a": {"example.com/team": "x", "Example_com/team": "x", "/team": "x", "x/": "y", "-a": "b"}}}),
        json!({"kstack_pod_labels": null}),
        json!({"enable_nova": "maybe", "openstack_release": [1], "kolla_base_distro": "gentoo", "kstack_replicas": {"nova": "three"}}),
        json!({"config_strategy": "COPY_ONCE", "nova_compute_virt_type": "qemu", "ovs_datapath": "netdev"}),
        json!({"ovs_datapath": "dpdk", "nova_compute_virt_type": "xen", "config_strategy": "copy_always"}),
        json!({"kubernetes_namespace": "{{ x }}", "docker_registry": "https://quay.io", "openstack_tag": "2025.1 rocky", "keystone_tag": "{{ v }}", "openstack_release": 7}),
        json!({"kubernetes_namespace": ["x"], "docker_registry": {"a": 1}, "kstack_role_label_prefix": "Bad Prefix/"}),
    ]
}

#[test]
fn every_typed_variable_with_every_kind_of_value() {
    let default: BTreeMap<String, String> = fields(&Globals::default()).into_iter().collect();
    let mut out = String::new();
    out.push_str("# the defaults\n");
    for (k, v) in &default {
        writeln!(out, "  {k}: {v}").unwrap();
    }
    let mut keys: Vec<String> = TYPED.iter().map(|k| (*k).to_owned()).collect();
    keys.extend(SERVICE_FLAGS.iter().map(|(s, _)| format!("enable_{s}")));
    for key in keys {
        writeln!(out, "\n# {key}").unwrap();
        for probe in probes() {
            out.push_str(&outcome(&json!({ key.clone(): probe }), &default));
        }
    }
    out.push_str("\n# combinations\n");
    for case in combinations() {
        out.push_str(&outcome(&case, &default));
    }
    insta::assert_snapshot!(out);
}
