//! The catalog's loading and checks, case by case.
use super::*;
use crate::graph::Graph;

const EXPECTED: [&str; 29] = [
    "mariadb",
    "rabbitmq",
    "memcached",
    "haproxy",
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
    // An API whose `/` answers 300 (its versions) is checked at oslo.middleware's
    // /healthcheck (200): the kubelet takes a 3xx for a success, with a ProbeWarning event at
    // every probe.
    for (service, port) in [
        ("keystone", 5000),
        ("glance-api", 9292),
        ("heat-api", 8004),
        ("heat-api-cfn", 8000),
        ("cinder-api", 8776),
    ] {
        assert_eq!(
            c.services[service].containers[0]
                .healthcheck
                .as_ref()
                .unwrap()
                .test,
            HealthTest::Http {
                port,
                path: "/healthcheck".into()
            },
            "{service}"
        );
    }
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
    let parsed: Healthcheck =
        serde_saphyr::from_str("test: { http: { port: 1, path: / } }\nstart_interval_secs: 3\n")
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
                let other_owner =
                    (name.as_str(), v.mount_path.as_str()) == ("nova-compute", "/var/lib/libvirt");
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
    assert_eq!(merged.services.len(), 30);
}

#[test]
fn a_public_port_must_be_exposed_and_one_service_is_the_gateway() {
    let overlay = Catalog::overlay_from_yaml(
        "ops.yaml",
        r#"
services:
  horizon:
    ports:
      - { name: http, port: 80, public: true }
  memcached:
    public_gateway: true
"#,
    )
    .unwrap();
    let Err(CatalogError::Invalid(issues)) = Catalog::merge(builtin(), overlay) else {
        panic!("accepted")
    };
    let text: Vec<String> = issues.iter().map(ToString::to_string).collect();
    assert!(
        issues.contains(&CatalogIssue::PublicNotExposed {
            service: "horizon".into(),
            port: "http".into()
        }),
        "{text:?}"
    );
    assert!(
        issues.contains(&CatalogIssue::SeveralGateways {
            service: "memcached".into(),
            other: "haproxy".into()
        }),
        "{text:?}"
    );
}

#[test]
fn an_overlay_dropping_a_port_kstack_addresses_is_refused() {
    // The operator lists keystone's ports without `api`: no number is assumed for it.
    let overlay = Catalog::overlay_from_yaml(
        "ops.yaml",
        "services:\n  keystone:\n    ports: [{ name: public, port: 5000 }]\n",
    )
    .unwrap();
    let err = Catalog::merge(builtin(), overlay).unwrap_err();
    assert_eq!(
        err.to_string(),
        "service `keystone` has no port named `api`, which kstack addresses it by: add `{ name: api, port: <number> }` to `services.keystone.ports` (an operator catalog's `ports` replaces the whole built-in list)"
    );
    // Every port in the table is declared by the built-in catalog.
    let c = builtin();
    for (service, port) in ADDRESSED_PORTS {
        assert!(c.port(service, port).is_some(), "{service}/{port}");
    }
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
    let err = Catalog::overlay_from_yaml("ops.yaml", "services:\n  horizon:\n    replicas: 3\n")
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("ops.yaml: "), "{msg}");
    assert!(msg.contains("replicas"), "{msg}");
    let err =
        Catalog::from_yaml("x", &BUILTIN_YAML.replace("user: mysql", "usr: mysql")).unwrap_err();
    assert!(err.to_string().contains("usr"), "{err}");
}

#[test]
fn install_after_names_only_dependencies_and_their_tasks() {
    for (bad, says) in [
        (
            "install_after: [nova-api/cell, rabbitmq]",
            "service `nova-conductor`: install_after entry `nova-api/cell` names task `cell`, which `nova-api` does not have",
        ),
        (
            "install_after: [nova-api/cells, keystone]",
            "service `nova-conductor`: install_after entry `keystone` names `keystone`, which is not in depends_on",
        ),
    ] {
        let text = BUILTIN_YAML.replace(
            "install_after: [nova-api/cells, nova-api/register, placement-api, mariadb, rabbitmq]",
            bad,
        );
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert!(err.starts_with(says), "{err}");
    }
    let text = BUILTIN_YAML.replace(
            "phase: post\n        # It polls for the computes' service records, so it starts with their pods.\n        with_workload: true",
            "with_workload: true",
        );
    assert_ne!(text, BUILTIN_YAML);
    let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
    assert!(
            err.starts_with("service `nova-compute`: bootstrap task `discover-hosts` has with_workload but is not a `post` task"),
            "{err}"
        );
}

#[test]
fn an_overlay_changing_depends_on_keeps_the_install_after_entries_it_still_names() {
    let overlay = Catalog::overlay_from_yaml(
        "ops.yaml",
        "services:\n  nova-conductor:\n    depends_on: [nova-api, rabbitmq]\n",
    )
    .unwrap();
    let c = Catalog::merge(builtin(), overlay).unwrap();
    assert_eq!(
        c.services["nova-conductor"].install_after,
        ["nova-api/cells", "nova-api/register", "rabbitmq"]
    );
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
fn a_bootstrap_env_placeholder_kstack_does_not_fill_is_reported() {
    let text = BUILTIN_YAML.replace("{keystone_admin_project}", "{keystone_admin_tenant}");
    assert_ne!(text, BUILTIN_YAML);
    let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "service `heat-api`: bootstrap task `db-sync`, env `OS_PROJECT_NAME`: `{{keystone_admin_tenant}}` is not a value kstack fills; known: {}",
            TASK_ENV_PLACEHOLDERS.join(", ")
        )
    );
    assert_eq!(
        task_env_pieces("{keystone_internal_url}/v3 in {openstack_region_name}").unwrap(),
        [
            EnvPiece::Placeholder("keystone_internal_url"),
            EnvPiece::Text("/v3 in "),
            EnvPiece::Placeholder("openstack_region_name"),
        ]
    );
    assert_eq!(task_env_pieces("60").unwrap(), [EnvPiece::Text("60")]);
    assert_eq!(
        task_env_pieces("{keystone_admin_user").unwrap_err().name,
        "keystone_admin_user"
    );
    // Every placeholder is used by the built-in catalog.
    let c = builtin();
    for p in TASK_ENV_PLACEHOLDERS {
        let used = c.services.values().flat_map(|s| &s.bootstrap).any(|t| {
            matches!(&t.task, BootstrapKind::KollaBootstrap { env, .. }
                    if env.values().any(|v| v.contains(&format!("{{{p}}}"))))
        });
        assert!(used, "{p}");
    }
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

#[test]
fn also_on_lists_other_roles_than_the_services_own_and_never_every() {
    let overlay = Catalog::overlay_from_yaml(
        "ops.yaml",
        r#"
services:
  nova-compute:
    also_on: [network, network]
  keystone:
    also_on: [control]
  vlagent:
    also_on: [compute]
  horizon:
    also_on: [every]
"#,
    )
    .unwrap();
    let Err(CatalogError::Invalid(issues)) = Catalog::merge(builtin(), overlay) else {
        panic!("accepted")
    };
    let bad = |service: &str, role, problem| CatalogIssue::BadAlsoOn {
        service: service.into(),
        role,
        problem,
    };
    for want in [
        bad("nova-compute", Role::Network, "twice"),
        bad("keystone", Role::Control, "the service's own role"),
        bad("vlagent", Role::Compute, "which `every` covers"),
        bad("horizon", Role::Every, "which `every` covers"),
    ] {
        assert!(issues.contains(&want), "{want:?} not in {issues:?}");
    }
    assert_eq!(issues.len(), 4, "{issues:?}");
    // The built-in catalog puts Open vSwitch on compute nodes too.
    assert_eq!(
        builtin().services["openvswitch-vswitchd"].roles(),
        [Role::Network, Role::Compute]
    );
}
