//! The whole default cloud rendered to Kubernetes objects: snapshot, determinism, no secrets.

use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_k8s::apimachinery::pkg::util::intstr::IntOrString;
use kstack_model::catalog::{self, Catalog};
use kstack_model::globals::Globals;
use kstack_render::{Object, kubernetes};

fn render(catalog: Catalog, globals: Globals) -> kstack_render::Rendered {
    let config = Config::from_parts(
        globals,
        kstack_config::testing::passwords(1),
        Default::default(),
        catalog,
    );
    kubernetes::render(&config).unwrap()
}

fn default_cloud() -> kstack_render::Rendered {
    render(Catalog::builtin().unwrap(), Globals::default())
}

#[test]
fn default_cloud_snapshot() {
    insta::assert_snapshot!("default_cloud", default_cloud().to_yaml());
}

#[test]
fn rendering_twice_gives_the_same_bytes() {
    let a = default_cloud();
    let b = default_cloud();
    assert_eq!(a.to_yaml(), b.to_yaml());
    assert_eq!(a.to_json(), b.to_json());
}

#[test]
fn stream_order_is_namespace_configmaps_services_jobs_workloads() {
    let r = default_cloud();
    assert_eq!(r.objects[0].kind(), "Namespace");
    let kinds: Vec<&str> = r.objects.iter().map(Object::kind).collect();
    let pos = |k: &str| kinds.iter().position(|x| *x == k).unwrap();
    let last = |k: &str| kinds.iter().rposition(|x| *x == k).unwrap();
    assert!(last("ConfigMap") < pos("Service"));
    assert!(last("Service") < pos("Job"));
    assert!(
        last("Job")
            < pos("Deployment")
                .min(pos("StatefulSet"))
                .min(pos("DaemonSet"))
    );
}

#[test]
fn disabled_services_are_not_rendered() {
    let r = default_cloud();
    let groups = r.by_service();
    assert!(groups.contains_key("keystone"));
    assert!(
        !groups.contains_key("cinder-api"),
        "cinder is off by default"
    );
    for (service, objects) in &groups {
        assert!(objects.iter().all(|o| o.service() == Some(service)));
    }
}

#[test]
fn no_password_in_a_config_map_or_an_env_literal() {
    // Every service on, three replicas of the clustered ones, several password sets.
    let globals = globals_with(serde_json::json!({
        "enable_cinder": true,
        "kstack_replicas": {"mariadb": 3, "rabbitmq": 3, "memcached": 2},
    }));
    for seed in 0..4 {
        let pw = kstack_config::testing::passwords(seed);
        let secrets = kstack_render::files::secret_values(&pw);
        assert!(secrets.len() > 20, "passwords were generated");
        let config = Config::from_parts(
            globals.clone(),
            pw.clone(),
            Default::default(),
            Catalog::builtin().unwrap(),
        );
        let r = kubernetes::render(&config).unwrap();
        let value: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        let mut envs = Vec::new();
        collect_env_values(&value, &mut envs);
        assert!(envs.iter().any(|v| v == "COPY_ALWAYS"), "env was found");
        let mut config_maps = 0;
        let mut secret_objects = 0;
        for o in &r.objects {
            match o {
                Object::ConfigMap(cm) => {
                    config_maps += 1;
                    for (key, text) in cm.data.iter().flatten() {
                        for s in &secrets {
                            assert!(
                                !text.contains(s),
                                "ConfigMap {} ({key}) carries a password",
                                o.name()
                            );
                        }
                    }
                }
                Object::Secret(_) => secret_objects += 1,
                _ => {}
            }
        }
        assert!(
            config_maps > 20 && secret_objects > 10,
            "{config_maps} {secret_objects}"
        );
        for v in &envs {
            for s in &secrets {
                assert!(!v.contains(s), "an env literal carries a password");
            }
        }
    }
}

fn collect_env_values(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Array(env)) = m.get("env") {
                for e in env {
                    if let Some(s) = e.get("value").and_then(|s| s.as_str()) {
                        out.push(s.to_owned());
                    }
                }
            }
            m.values().for_each(|x| collect_env_values(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_env_values(x, out)),
        _ => {}
    }
}

fn globals_with(vars: serde_json::Value) -> Globals {
    let serde_json::Value::Object(m) = vars else {
        unreachable!()
    };
    Globals::from_vars(&m.into_iter().collect()).unwrap()
}

fn find<'a>(r: &'a kstack_render::Rendered, kind: &str, name: &str) -> &'a Object {
    r.objects
        .iter()
        .find(|o| o.kind() == kind && o.name() == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn statefulsets_get_a_client_service_a_headless_peers_service_and_claims_with_the_storage_class() {
    let g = globals_with(
        serde_json::json!({"kstack_storage_class": "fast", "kstack_replicas": {"mariadb": 3}}),
    );
    let r = render(Catalog::builtin().unwrap(), g);
    // Clients: a Service with only ready pods behind it, on the exposed port.
    let Object::Service(svc) = find(&r, "Service", "mariadb") else {
        unreachable!()
    };
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.cluster_ip, None);
    assert_eq!(spec.publish_not_ready_addresses, None);
    let ports: Vec<i32> = spec.ports.iter().flatten().map(|p| p.port).collect();
    assert_eq!(ports, [3306]);
    // Peers: the headless Service governing the StatefulSet, every port, ready or not.
    let Object::Service(peers) = find(&r, "Service", "mariadb-peers") else {
        unreachable!()
    };
    let spec = peers.spec.as_ref().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.publish_not_ready_addresses, Some(true));
    let ports: Vec<i32> = spec.ports.iter().flatten().map(|p| p.port).collect();
    assert_eq!(ports, [3306, 4567, 4568, 4444, 4569]);
    let Object::StatefulSet(sts) = find(&r, "StatefulSet", "mariadb") else {
        unreachable!()
    };
    let spec = sts.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(spec.service_name.as_deref(), Some("mariadb-peers"));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    let claims = spec.volume_claim_templates.as_ref().unwrap();
    assert_eq!(
        claims[0]
            .spec
            .as_ref()
            .unwrap()
            .storage_class_name
            .as_deref(),
        Some("fast")
    );
    // Replica 0's claim exists before the StatefulSet, for the bootstrap Job.
    find(&r, "PersistentVolumeClaim", "mariadb-mariadb-0");
}

#[test]
fn replicated_services_get_a_disruption_budget_and_spread_over_nodes_single_ones_do_not() {
    let g = globals_with(serde_json::json!({"kstack_replicas": {"mariadb": 3, "keystone": 2}}));
    let r = render(Catalog::builtin().unwrap(), g);
    for name in ["mariadb", "keystone"] {
        let Object::PodDisruptionBudget(pdb) = find(&r, "PodDisruptionBudget", name) else {
            unreachable!()
        };
        let spec = pdb.spec.as_ref().unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)), "{name}");
        let sel = spec
            .selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap();
        assert_eq!(
            sel.get(kstack_model::labels::NAME_LABEL)
                .map(String::as_str),
            Some(name)
        );
        let workload = r
            .objects
            .iter()
            .find(|o| o.name() == name && matches!(o.kind(), "Deployment" | "StatefulSet"))
            .unwrap();
        let anti = pod_spec(workload)
            .and_then(|p| p.affinity.as_ref())
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .unwrap_or_else(|| panic!("{name}: no preferred pod anti-affinity"));
        assert_eq!(
            anti[0].pod_affinity_term.topology_key,
            "kubernetes.io/hostname"
        );
        let sel = anti[0].pod_affinity_term.label_selector.as_ref().unwrap();
        assert_eq!(
            sel.match_labels
                .as_ref()
                .unwrap()
                .get(kstack_model::labels::NAME_LABEL)
                .map(String::as_str),
            Some(name)
        );
    }
    // One replica: nothing to keep up, nothing to spread.
    assert!(
        !r.objects
            .iter()
            .any(|o| o.kind() == "PodDisruptionBudget" && o.name() == "glance-api")
    );
    let glance = r
        .objects
        .iter()
        .find(|o| o.kind() == "Deployment" && o.name() == "glance-api")
        .unwrap();
    assert!(pod_spec(glance).unwrap().affinity.is_none());
    let default = default_cloud();
    assert!(
        !default
            .objects
            .iter()
            .any(|o| o.kind() == "PodDisruptionBudget")
    );
}

#[test]
fn host_namespaces_and_privileges_only_where_the_catalog_says() {
    let catalog = Catalog::builtin().unwrap();
    let r = default_cloud();
    let mut checked = 0;
    for o in &r.objects {
        let (Some(service), Some(pod)) = (o.service(), pod_spec(o)) else {
            continue;
        };
        // The image's entrypoint stays, dumb-init (Kolla's image contract): as it is, or for a
        // graceful stop signal with the same flags and one rewrite of SIGTERM, before
        // `kolla_start`, the image's command.
        for c in &pod.containers {
            if let Some(command) = &c.command {
                assert!(
                    command.len() == 5
                        && command[..3] == ["dumb-init", "--single-child", "--rewrite"]
                        && command[3].starts_with("15:")
                        && command[4] == "--",
                    "{service} keeps the image entrypoint: {command:?}"
                );
                assert_eq!(c.args.as_deref(), Some(&["kolla_start".to_owned()][..]));
            }
        }
        // Workloads and their Kolla bootstrap Jobs run as the catalog says; the other tasks
        // run in other images (mariadb client, kolla-toolbox) without host access.
        let kolla_bootstrap = o.kind() == "Job"
            && pod.containers[0]
                .env
                .iter()
                .flatten()
                .any(|e| e.name == "KOLLA_BOOTSTRAP");
        if o.kind() == "Job" && !kolla_bootstrap {
            continue;
        }
        checked += 1;
        let p = &catalog.services[service].privileges;
        assert_eq!(
            pod.host_network.unwrap_or(false),
            p.host_network,
            "{service}"
        );
        assert_eq!(pod.host_pid.unwrap_or(false), p.host_pid, "{service}");
        assert_eq!(pod.host_ipc.unwrap_or(false), p.host_ipc, "{service}");
        for c in &pod.containers {
            let privileged = c.security_context.as_ref().and_then(|s| s.privileged);
            assert_eq!(privileged.unwrap_or(false), p.privileged, "{service}");
            if o.kind() != "Job" {
                assert!(
                    c.args.is_none() || c.args.as_deref() == Some(&["kolla_start".to_owned()][..]),
                    "{service} keeps kolla_start"
                );
            }
        }
    }
    assert!(checked > 20);
}

fn pod_spec(o: &Object) -> Option<&kstack_k8s::api::core::v1::PodSpec> {
    match o {
        Object::Deployment(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::StatefulSet(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::DaemonSet(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::Job(d) => d.spec.as_ref()?.template.spec.as_ref(),
        _ => None,
    }
}

#[test]
fn config_maps_and_jobs_are_named_by_their_content() {
    let catalog = Catalog::builtin().unwrap();
    let mut changed = catalog.clone();
    changed.services.get_mut("keystone").unwrap().containers[0].command = "keystone-x".into();
    let a = default_cloud();
    let b = render(changed, Globals::default());
    let names = |r: &kstack_render::Rendered, kind: &str, prefix: &str| -> Vec<String> {
        r.objects
            .iter()
            .filter(|o| o.kind() == kind && o.name().starts_with(prefix))
            .map(|o| o.name().to_owned())
            .collect()
    };
    let (ca, cb) = (
        names(&a, "ConfigMap", "keystone-keystone-config-json-"),
        names(&b, "ConfigMap", "keystone-keystone-config-json-"),
    );
    assert_eq!(ca.len(), 1);
    assert_ne!(ca, cb, "a new config.json is a new ConfigMap");
    let (ja, jb) = (
        names(&a, "Job", "keystone-db-sync-"),
        names(&b, "Job", "keystone-db-sync-"),
    );
    assert_eq!(ja.len(), 1);
    assert_ne!(ja, jb, "a Job mounting a new ConfigMap is a new Job");
    assert_eq!(
        names(&a, "Job", "keystone-db-create-"),
        names(&b, "Job", "keystone-db-create-"),
        "a Job that does not mount config.json stays"
    );
    let Object::ConfigMap(cm) = find(&a, "ConfigMap", &ca[0]) else {
        unreachable!()
    };
    assert_eq!(cm.immutable, Some(true));
}

#[test]
fn every_bootstrap_task_is_a_labelled_job() {
    // The tasks whose `when` setting holds (the external network is off by default).
    let mut catalog = Catalog::builtin().unwrap();
    catalog.apply_conditions(&Globals::default().vars);
    let r = default_cloud();
    let enabled = kstack_config::catalog::enabled_services(&catalog, &Globals::default());
    for (name, service) in &catalog.services {
        if !enabled.contains(name) {
            continue;
        }
        for task in &service.bootstrap {
            let expected = usize::from(task.runs_on(catalog::TaskTarget::Kubernetes));
            let jobs: Vec<&Object> = r
                .objects
                .iter()
                .filter(|o| {
                    o.kind() == "Job"
                        && o.metadata().labels.as_ref().is_some_and(|l| {
                            l.get("kstack.io/task") == Some(&task.name)
                                && l.get("app.kubernetes.io/name") == Some(name)
                        })
                })
                .collect();
            assert_eq!(jobs.len(), expected, "{name}/{}", task.name);
            if expected == 0 {
                continue;
            }
            assert!(
                jobs[0]
                    .name()
                    .starts_with(&format!("{name}-{}-", task.name))
            );
        }
    }
}

#[test]
fn the_external_network_is_a_post_task_of_neutron_server_only_when_asked_for() {
    let job = |r: &kstack_render::Rendered| {
        r.objects
            .iter()
            .find(|o| o.kind() == "Job" && o.name().starts_with("neutron-server-external-network-"))
            .cloned()
    };
    assert!(job(&default_cloud()).is_none(), "off by default");
    let r = render(
        Catalog::builtin().unwrap(),
        globals_with(serde_json::json!({
            "kstack_external_network": "yes",
            "kstack_external_network_cidr": "172.24.4.0/24",
            "kstack_external_network_pool": "172.24.4.100-172.24.4.200",
        })),
    );
    let o = job(&r).expect("the external network's Job");
    let spec = pod_spec(&o).unwrap();
    assert!(
        spec.containers[0]
            .image
            .as_deref()
            .unwrap()
            .contains("/kolla-toolbox:")
    );
    // Its script, in a ConfigMap.
    let script = r
        .objects
        .iter()
        .filter_map(|o| match o {
            Object::ConfigMap(cm) => cm.data.as_ref()?.get("run.sh").cloned(),
            _ => None,
        })
        .find(|s| s.contains("openstack network create"))
        .expect("run.sh in a ConfigMap");
    for want in [
        "name=public1",
        "--provider-network-type flat --provider-physical-network physnet1",
        "--subnet-range 172.24.4.0/24 --gateway 172.24.4.1 --allocation-pool start=172.24.4.100,end=172.24.4.200 --no-dhcp",
        "openstack network show \"$name\" >/dev/null 2>&1 ||",
    ] {
        assert!(script.contains(want), "{want}:\n{script}");
    }
    // The admin's password is in its clouds.yaml (and a registration's admin.json): a
    // Secret's, never a ConfigMap's.
    let in_secrets = |name: &str| {
        r.objects.iter().any(|o| match o {
            Object::Secret(s) => s
                .string_data
                .as_ref()
                .map(|d| d.contains_key(name))
                .or_else(|| s.data.as_ref().map(|d| d.contains_key(name)))
                .unwrap_or(false),
            _ => false,
        })
    };
    for name in ["clouds.yaml", "admin.json"] {
        assert!(in_secrets(name), "{name} in a Secret");
        assert!(!r.objects.iter().any(|o| {
            match o {
                Object::ConfigMap(cm) => cm.data.as_ref().is_some_and(|d| d.contains_key(name)),
                _ => false,
            }
        }));
    }
}

#[test]
fn a_dollar_in_a_globals_value_reaches_a_container_literally_never_as_an_env_reference() {
    // The kubelet expands `$(VAR)` in args from the container's env: the bootstrap Job has the
    // admin password as OS_BOOTSTRAP_PASSWORD and the region as an argument.
    let r = render(
        Catalog::builtin().unwrap(),
        globals_with(serde_json::json!({
            "openstack_region_name": "RegionOne$(OS_BOOTSTRAP_PASSWORD)",
        })),
    );
    let mut jobs = 0;
    for o in r.objects.iter().filter(|o| o.kind() == "Job") {
        jobs += 1;
        for c in &pod_spec(o).unwrap().containers {
            for a in c.args.iter().flatten().chain(c.command.iter().flatten()) {
                // Every `$` is doubled: `$$` is the kubelet's escape for a literal `$`.
                let undoubled = a.replace("$$", "");
                assert!(!undoubled.contains('$'), "{}: {a}", o.name());
            }
        }
    }
    assert!(jobs > 0);
    let ks = r
        .objects
        .iter()
        .find(|o| o.kind() == "Job" && o.name().starts_with("keystone-keystone-bootstrap-"))
        .unwrap();
    let args = pod_spec(ks).unwrap().containers[0].args.clone().unwrap();
    assert!(
        args.iter()
            .any(|a| a.contains("--bootstrap-region-id 'RegionOne$$(OS_BOOTSTRAP_PASSWORD)'")),
        "{args:?}"
    );
}

#[test]
fn keystone_registers_itself_and_others_use_kolla_toolbox() {
    let r = default_cloud();
    let job = |prefix: &str| {
        let o = r
            .objects
            .iter()
            .find(|o| o.kind() == "Job" && o.name().starts_with(prefix))
            .unwrap_or_else(|| panic!("no job {prefix}"));
        pod_spec(o).unwrap().containers[0].clone()
    };
    let ks = job("keystone-keystone-bootstrap-");
    assert!(ks.image.as_deref().unwrap().contains("/keystone:"));
    let args = ks.args.unwrap().join(" ");
    assert!(args.contains("keystone-manage bootstrap"), "{args}");
    let env = ks.env.unwrap();
    let pw = env
        .iter()
        .find(|e| e.name == "OS_BOOTSTRAP_PASSWORD")
        .unwrap();
    assert!(
        pw.value.is_none() && pw.value_from.is_some(),
        "from a Secret"
    );
    let glance = job("glance-api-register-");
    assert!(glance.image.as_deref().unwrap().contains("/kolla-toolbox:"));
    let db = job("nova-api-db-create-");
    assert!(db.image.as_deref().unwrap().contains("/mariadb-server:"));
}

#[test]
fn one_registration_makes_the_service_project_and_the_others_wait_for_it() {
    // The registrations run in parallel; two creates of project `service` would conflict,
    // and Keystone logs the loser's conflict as an error.
    let r = default_cloud();
    let mut modes = BTreeMap::new();
    for o in &r.objects {
        let Object::ConfigMap(cm) = o else { continue };
        let Some(spec) = cm.data.as_ref().and_then(|d| d.get("register.json")) else {
            continue;
        };
        let spec: serde_json::Value = serde_json::from_str(spec).unwrap();
        let mode = spec.get("service_project").and_then(|m| m.as_str());
        assert_eq!(
            mode.is_some(),
            spec.get("password_file").is_some(),
            "{}: a registration with a user says who makes the project",
            o.name()
        );
        if let Some(mode) = mode {
            modes.insert(spec["name"].as_str().unwrap().to_owned(), mode.to_owned());
        }
    }
    assert!(modes.len() >= 4, "{modes:?}");
    let makers: Vec<_> = modes.iter().filter(|(_, m)| *m == "create").collect();
    assert_eq!(makers.len(), 1, "{modes:?}");
    assert!(
        modes.values().all(|m| m == "create" || m == "wait"),
        "{modes:?}"
    );
}

#[test]
fn a_per_host_override_pins_a_daemonset_variant() {
    let mut overrides = std::collections::BTreeMap::new();
    overrides.insert(
        "nova/compute-7/nova.conf".to_owned(),
        b"[libvirt]\nvirt_type = qemu\n".to_vec(),
    );
    let config = Config::from_parts(
        Globals::default(),
        kstack_config::testing::passwords(1),
        overrides,
        Catalog::builtin().unwrap(),
    );
    let r = kubernetes::render(&config).unwrap();
    let ds: Vec<&Object> = r
        .objects
        .iter()
        .filter(|o| o.kind() == "DaemonSet" && o.service() == Some("nova-compute"))
        .collect();
    assert_eq!(ds.len(), 2, "main and one variant");
    let affinity = |o: &Object| {
        let req = pod_spec(o)
            .unwrap()
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity
            .as_ref()
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .unwrap();
        let e = &req.node_selector_terms[0]
            .match_expressions
            .as_ref()
            .unwrap()[0];
        (e.key.clone(), e.operator.clone(), e.values.clone().unwrap())
    };
    let main = ds.iter().find(|o| o.name() == "nova-compute").unwrap();
    let variant = ds.iter().find(|o| o.name() != "nova-compute").unwrap();
    assert!(variant.name().starts_with("nova-compute-"));
    let host = vec!["compute-7".to_owned()];
    assert_eq!(
        affinity(main),
        (
            "kubernetes.io/hostname".into(),
            "NotIn".into(),
            host.clone()
        )
    );
    assert_eq!(
        affinity(variant),
        ("kubernetes.io/hostname".into(), "In".into(), host)
    );
    // nova-libvirt has no override of its files: no variant.
    assert!(
        !r.objects
            .iter()
            .any(|o| o.kind() == "DaemonSet" && o.name().starts_with("nova-libvirt-"))
    );
}

/// The required node affinity of a pod spec, as (key, operator, values) per term.
fn required_terms(o: &Object) -> Vec<Vec<(String, String, Vec<String>)>> {
    pod_spec(o)
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| {
            r.node_selector_terms
                .iter()
                .map(|t| {
                    t.match_expressions
                        .iter()
                        .flatten()
                        .map(|e| {
                            (
                                e.key.clone(),
                                e.operator.clone(),
                                e.values.clone().unwrap_or_default(),
                            )
                        })
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn central_logging_puts_a_collector_on_every_node_of_any_role_and_a_store_on_control() {
    let globals = globals_with(serde_json::json!({"enable_central_logging": "yes"}));
    assert!(
        !default_cloud()
            .objects
            .iter()
            .any(|o| o.service() == Some("vlagent"))
    );
    let r = render(Catalog::builtin().unwrap(), globals);

    let store = find(&r, "StatefulSet", "victoria-logs");
    assert_eq!(
        pod_spec(store).unwrap().node_selector,
        Some(std::collections::BTreeMap::from([(
            "kstack.io/role-control".to_owned(),
            "true".to_owned()
        )]))
    );

    // One alternative per role: a node of any role runs a collector.
    let collector = find(&r, "DaemonSet", "vlagent");
    assert_eq!(pod_spec(collector).unwrap().node_selector, None);
    let role = |r: &str| {
        (
            format!("kstack.io/role-{r}"),
            "In".to_owned(),
            vec!["true".to_owned()],
        )
    };
    assert_eq!(
        required_terms(collector),
        ["control", "compute", "network", "storage"]
            .iter()
            .map(|r| vec![role(r)])
            .collect::<Vec<_>>()
    );
    // Open vSwitch and its agent run on network and compute nodes (`also_on`); the L3 agent
    // on network nodes only.
    for ds in [
        "openvswitch-db-server",
        "openvswitch-vswitchd",
        "neutron-openvswitch-agent",
    ] {
        let ds = find(&r, "DaemonSet", ds);
        assert_eq!(pod_spec(ds).unwrap().node_selector, None);
        assert_eq!(
            required_terms(ds),
            ["network", "compute"]
                .iter()
                .map(|r| vec![role(r)])
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(
        pod_spec(find(&r, "DaemonSet", "neutron-l3-agent"))
            .unwrap()
            .node_selector,
        Some(std::collections::BTreeMap::from([(
            "kstack.io/role-network".to_owned(),
            "true".to_owned()
        )]))
    );
    // It reads the kubelet's pod logs read-only, and sends them to the store's Service.
    let spec = pod_spec(collector).unwrap();
    let mount = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == "/var/log/pods")
        .expect("/var/log/pods mounted");
    assert_eq!(mount.read_only, Some(true));
    // The node's name from the downward API, never a literal.
    let node = spec.containers[0]
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "NODE_NAME")
        .expect("NODE_NAME");
    assert_eq!(node.value, None);
    assert_eq!(
        node.value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str()),
        Some("spec.nodeName")
    );
    let config = Config::from_parts(
        globals_with(serde_json::json!({"enable_central_logging": "yes"})),
        kstack_config::testing::passwords(1),
        Default::default(),
        Catalog::builtin().unwrap(),
    );
    let files =
        kstack_render::files::render_files(&config, kstack_render::files::Target::Kubernetes)
            .unwrap();
    let start = files
        .iter()
        .filter(|cf| cf.service == "vlagent")
        .flat_map(|cf| cf.files.iter())
        .find(|f| f.name == "vlagent-start.sh")
        .expect("the collector's start script");
    let text = &start.content;
    assert!(
        text.contains("-fileCollector.glob='/var/log/pods/openstack_*/*/*.log'"),
        "{text}"
    );
    assert!(
        text.contains("-remoteWrite.url=http://victoria-logs.openstack.svc:9428/insert/native"),
        "{text}"
    );
}

#[test]
fn a_per_host_variant_of_an_every_role_daemonset_keeps_the_role_alternatives() {
    // An operator's catalog puts nova-compute on every node; compute-7 has its own nova.conf.
    let overlay = Catalog::overlay_from_yaml(
        "catalog.yml",
        "services:\n  nova-compute:\n    role: every\n",
    )
    .unwrap();
    let catalog = Catalog::merge(Catalog::builtin().unwrap(), overlay).unwrap();
    let mut overrides = std::collections::BTreeMap::new();
    overrides.insert(
        "nova/compute-7/nova.conf".to_owned(),
        b"[libvirt]\nvirt_type = qemu\n".to_vec(),
    );
    let config = Config::from_parts(
        Globals::default(),
        kstack_config::testing::passwords(1),
        overrides,
        catalog,
    );
    let r = kubernetes::render(&config).unwrap();
    let host = |op: &str| {
        (
            "kubernetes.io/hostname".to_owned(),
            op.to_owned(),
            vec!["compute-7".to_owned()],
        )
    };
    let role = |r: &str| {
        (
            format!("kstack.io/role-{r}"),
            "In".to_owned(),
            vec!["true".to_owned()],
        )
    };
    // Each alternative gets the host requirement: (a role and not compute-7) or ..., for the
    // main DaemonSet; (a role and compute-7) or ..., for the variant.
    let expect = |op: &str| {
        ["control", "compute", "network", "storage"]
            .iter()
            .map(|r| vec![role(r), host(op)])
            .collect::<Vec<_>>()
    };
    let main = find(&r, "DaemonSet", "nova-compute");
    assert_eq!(pod_spec(main).unwrap().node_selector, None);
    assert_eq!(required_terms(main), expect("NotIn"));
    let variant = r
        .objects
        .iter()
        .find(|o| o.kind() == "DaemonSet" && o.name().starts_with("nova-compute-"))
        .expect("a variant for compute-7");
    assert_eq!(required_terms(variant), expect("In"));
}

/// The haproxy.cfg of a rendered cloud, when HAProxy is in it.
fn haproxy_cfg(r: &kstack_render::Rendered) -> Option<String> {
    r.objects.iter().find_map(|o| match o {
        Object::ConfigMap(cm) => cm.data.as_ref()?.get("haproxy.cfg").cloned(),
        _ => None,
    })
}

#[test]
fn haproxy_publishes_the_enabled_services_public_ports_on_the_external_address() {
    // No public address: no gateway, whatever enable_haproxy says.
    let r = default_cloud();
    assert!(!r.by_service().contains_key("haproxy"));
    let r = render(
        Catalog::builtin().unwrap(),
        globals_with(serde_json::json!({"enable_haproxy": "yes", "kolla_external_fqdn": ""})),
    );
    assert!(!r.by_service().contains_key("haproxy"));

    let r = render(
        Catalog::builtin().unwrap(),
        globals_with(serde_json::json!({"kolla_external_vip_address": "198.51.100.10"})),
    );
    let Object::Service(svc) = find(&r, "Service", "haproxy") else {
        unreachable!()
    };
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(
        spec.external_ips.as_deref(),
        Some(&["198.51.100.10".to_owned()][..])
    );
    let ports: Vec<(String, i32)> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap(), p.port))
        .collect();
    // Every public endpoint's port of the default cloud (Cinder is off), none internal-only
    // (nova's metadata API, MariaDB, RabbitMQ), no name over Kubernetes' 15 characters.
    let mut numbers: Vec<i32> = ports.iter().map(|(_, n)| *n).collect();
    numbers.sort_unstable();
    assert_eq!(
        numbers,
        [80, 5000, 6080, 8000, 8004, 8774, 8780, 9292, 9696],
        "{ports:?}"
    );
    assert!(ports.iter().all(|(n, _)| n.len() <= 15), "{ports:?}");
    let cfg = haproxy_cfg(&r).expect("haproxy.cfg");
    for (frontend, backend) in [
        ("keystone-api", "keystone.openstack.svc:5000"),
        ("nova-api-api", "nova-api.openstack.svc:8774"),
        ("horizon-http", "horizon.openstack.svc:80"),
    ] {
        assert!(
            cfg.contains(&format!("frontend {frontend}\n    bind 0.0.0.0:"))
                && cfg.contains(&format!("server {frontend} {backend}\n")),
            "{frontend}: {cfg}"
        );
    }
    assert!(!cfg.contains("cinder"), "{cfg}");
    // The public endpoints registered in Keystone are on that address.
    let registrations: String = r
        .objects
        .iter()
        .filter_map(|o| match o {
            Object::ConfigMap(cm) => cm.data.as_ref()?.get("register.json").cloned(),
            _ => None,
        })
        .collect();
    assert!(
        registrations.contains("http://198.51.100.10:8774"),
        "{registrations}"
    );

    // With Cinder on, its API is published too; a name alone gets no external IP.
    let r = render(
        Catalog::builtin().unwrap(),
        globals_with(
            serde_json::json!({"kolla_external_fqdn": "cloud.example.com", "enable_cinder": "yes"}),
        ),
    );
    let Object::Service(svc) = find(&r, "Service", "haproxy") else {
        unreachable!()
    };
    assert_eq!(svc.spec.as_ref().unwrap().external_ips, None);
    assert!(
        haproxy_cfg(&r)
            .unwrap()
            .contains("server cinder-api-api cinder-api.openstack.svc:8776")
    );

    // Turned off: the operator publishes the endpoints.
    let r = render(
        Catalog::builtin().unwrap(),
        globals_with(
            serde_json::json!({"kolla_external_vip_address": "198.51.100.10", "enable_haproxy": "no"}),
        ),
    );
    assert!(!r.by_service().contains_key("haproxy"));
}

#[test]
fn tls_on_the_public_endpoints_serves_https_with_the_certificate_in_a_secret() {
    let globals = globals_with(serde_json::json!({
        "kolla_external_vip_address": "198.51.100.10",
        "kolla_enable_tls_external": "yes",
    }));
    let mut config = Config::from_parts(
        globals,
        kstack_config::testing::passwords(1),
        Default::default(),
        Catalog::builtin().unwrap(),
    );
    // Without a certificate (the operator's or one kstack made) nothing renders.
    let err = kubernetes::render(&config).unwrap_err().to_string();
    assert!(err.contains("certificates/haproxy.pem"), "{err}");

    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nMIIC\n-----END PRIVATE KEY-----\n";
    config.public_certificate = Some(kstack_config::PublicCertificate {
        pem: pem.to_owned(),
    });
    let r = kubernetes::render(&config).unwrap();
    // The chain and key are in a Secret, never a ConfigMap.
    let secret_has_it = r.objects.iter().any(|o| match o {
        Object::Secret(s) => s
            .data
            .as_ref()
            .and_then(|d| d.get("haproxy.pem"))
            .is_some_and(|b| String::from_utf8_lossy(&b.0).contains("BEGIN PRIVATE KEY")),
        _ => false,
    });
    assert!(secret_has_it);
    assert!(secret_in_configmap_free(&r));
    let cfg = haproxy_cfg(&r).expect("haproxy.cfg");
    assert!(
        cfg.contains(
            "frontend keystone-api\n    bind 0.0.0.0:5000 ssl crt /etc/haproxy/haproxy.pem\n    http-request set-header X-Forwarded-Proto https"
        ),
        "{cfg}"
    );
    assert!(cfg.contains("ssl-min-ver TLSv1.2"), "{cfg}");
    // Horizon on 443, its plain port redirecting there.
    assert!(
        cfg.contains("frontend horizon-http\n    bind 0.0.0.0:443 ssl crt"),
        "{cfg}"
    );
    assert!(
        cfg.contains(
            "frontend horizon-http-redirect\n    bind 0.0.0.0:80\n    http-request redirect scheme https code 301"
        ),
        "{cfg}"
    );
    let Object::Service(svc) = find(&r, "Service", "haproxy") else {
        unreachable!()
    };
    let mut numbers: Vec<i32> = svc
        .spec
        .as_ref()
        .unwrap()
        .ports
        .iter()
        .flatten()
        .map(|p| p.port)
        .collect();
    numbers.sort_unstable();
    assert_eq!(
        numbers,
        [80, 443, 5000, 6080, 8000, 8004, 8774, 8780, 9292, 9696]
    );
    // The public endpoints are https://; Horizon knows requests come through HTTPS.
    let files: String = r
        .objects
        .iter()
        .filter_map(|o| match o {
            Object::ConfigMap(cm) => Some(cm.data.as_ref()?.values().cloned().collect::<String>()),
            Object::Secret(s) => Some(
                s.data
                    .as_ref()?
                    .values()
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                    .collect::<String>(),
            ),
            _ => None,
        })
        .collect();
    assert!(
        files.contains("https://198.51.100.10:8774"),
        "registrations on https"
    );
    assert!(
        files.contains("https://198.51.100.10:6080/vnc_lite.html"),
        "noVNC"
    );
    assert!(files.contains("SECURE_PROXY_SSL_HEADER = (\"HTTP_X_FORWARDED_PROTO\", \"https\")"));
    assert!(
        !files.contains("http://198.51.100.10:"),
        "no plain public URL is left"
    );
}

/// Whether no ConfigMap carries the certificate's key.
fn secret_in_configmap_free(r: &kstack_render::Rendered) -> bool {
    !r.objects.iter().any(|o| match o {
        Object::ConfigMap(cm) => cm
            .data
            .iter()
            .flat_map(|d| d.values())
            .any(|v| v.contains("BEGIN PRIVATE KEY")),
        _ => false,
    })
}
