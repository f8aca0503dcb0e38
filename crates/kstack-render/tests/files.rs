//! The service config files of the whole cloud: snapshot, determinism, override merge order
//! and errors.

use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::{ContainerFiles, RenderError, Target, render_files};

fn config(overrides: &[(&str, &str)]) -> Config {
    Config::from_parts(
        Globals::default(),
        kstack_config::testing::passwords(7),
        overrides
            .iter()
            .map(|(p, t)| ((*p).to_owned(), t.as_bytes().to_vec()))
            .collect(),
        Catalog::builtin().unwrap(),
    )
}

/// Every file of every container, as one text: `== service/container/file (secret) ==`.
fn dump(files: &[ContainerFiles]) -> String {
    let mut out = String::new();
    for cf in files {
        for f in &cf.files {
            let host = cf
                .host
                .as_ref()
                .map(|h| format!("@{h}"))
                .unwrap_or_default();
            let secret = if f.secret { " (secret)" } else { "" };
            out.push_str(&format!(
                "== {}{host}/{}/{}{secret} ==\n{}",
                cf.service, cf.container, f.name, f.content
            ));
            if !f.content.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}

fn file<'a>(files: &'a [ContainerFiles], service: &str, name: &str) -> &'a str {
    &files
        .iter()
        .find(|c| c.service == service && c.host.is_none())
        .and_then(|c| c.files.iter().find(|f| f.name == name))
        .unwrap_or_else(|| panic!("no {service}/{name}"))
        .content
}

#[test]
fn default_cloud_config_files_snapshot() {
    let files = render_files(&config(&[]), Target::Kubernetes).unwrap();
    insta::assert_snapshot!("default_cloud_config_files", dump(&files));
}

#[test]
fn compose_target_puts_every_service_on_the_node_address() {
    let files = render_files(&config(&[]), Target::Compose).unwrap();
    let nova = file(&files, "nova-api", "nova.conf");
    assert!(nova.contains("@127.0.0.1:3306/nova\n"), "{nova}");
    assert!(!nova.contains(".svc"), "{nova}");
}

#[test]
fn on_one_node_every_service_listens_on_the_node_address_never_on_all() {
    let mut vars = serde_json::Map::new();
    vars.insert("kolla_internal_vip_address".into(), "10.1.2.3".into());
    vars.insert("enable_cinder".into(), "yes".into());
    let globals = Globals::from_vars(&vars.into_iter().collect()).unwrap();
    let config = Config::from_parts(
        globals,
        kstack_config::testing::passwords(7),
        Default::default(),
        Catalog::builtin().unwrap(),
    );
    let files = render_files(&config, Target::Compose).unwrap();
    for c in &files {
        for f in &c.files {
            assert!(
                !f.content.contains("0.0.0.0"),
                "{}/{}/{} listens on every address:\n{}",
                c.service,
                c.container,
                f.name,
                f.content
            );
        }
    }
    // Each kind of listener on the node's address: an oslo.config option, an Apache site,
    // uWSGI, the command line (memcached), MariaDB (and its loopback for the health check),
    // RabbitMQ, libvirt.
    for (service, name, line) in [
        ("glance-api", "glance-api.conf", "bind_host = 10.1.2.3"),
        ("keystone", "wsgi-keystone.conf", "Listen 10.1.2.3:5000"),
        ("placement-api", "placement-api-uwsgi.ini", "10.1.2.3:8780"),
        ("memcached", "config.json", "-l 10.1.2.3 "),
        ("mariadb", "galera.cnf", "bind-address = 10.1.2.3,127.0.0.1"),
        (
            "rabbitmq",
            "rabbitmq.conf",
            "listeners.tcp.1 = 10.1.2.3:5672",
        ),
        (
            "nova-libvirt",
            "libvirtd.conf",
            "listen_addr = \"10.1.2.3\"",
        ),
    ] {
        let text = file(&files, service, name);
        assert!(
            text.contains(line),
            "{service}/{name} has no `{line}`:\n{text}"
        );
    }
    // On Kubernetes a pod's network is its own: every address of the pod.
    let k8s = render_files(&config, Target::Kubernetes).unwrap();
    assert!(file(&k8s, "memcached", "config.json").contains("-l 0.0.0.0 "));
    assert!(file(&k8s, "mariadb", "galera.cnf").contains("bind-address = 0.0.0.0\n"));
}

#[test]
fn rendering_twice_gives_the_same_files() {
    let c = config(&[("nova.conf", "[DEFAULT]\ndebug = true\n")]);
    let a = render_files(&c, Target::Kubernetes).unwrap();
    let b = render_files(&c, Target::Kubernetes).unwrap();
    assert_eq!(a, b);
}

#[test]
fn every_catalog_config_file_is_rendered_and_wired() {
    let config = config(&[]);
    let files = render_files(&config, Target::Kubernetes).unwrap();
    // The catalog as loaded: the files whose `when` setting is off are not in it.
    let catalog = &config.catalog;
    for cf in &files {
        let c = catalog.services[&cf.service]
            .containers
            .iter()
            .find(|c| c.name == cf.container)
            .unwrap();
        assert_eq!(cf.files.len(), c.config_files.len() + 1, "{}", cf.container);
        for f in &cf.files {
            assert!(!f.content.trim().is_empty(), "{}/{}", cf.container, f.name);
        }
    }
    let nova = file(&files, "nova-api", "nova.conf");
    assert!(nova.contains("@mariadb.openstack.svc:3306/nova_api\n"));
    assert!(nova.contains("@rabbitmq-0.rabbitmq-peers.openstack.svc:5672//"));
    assert!(nova.contains("www_authenticate_uri = http://keystone.openstack.svc:5000"));
    assert!(nova.contains("memcached-0.memcached-peers.openstack.svc:11211"));
    let compute = file(&files, "nova-compute", "nova.conf");
    assert!(
        !compute.contains("[database]"),
        "compute hosts get no DB password"
    );
}

#[test]
fn overrides_merge_in_kolla_order() {
    let c = config(&[
        (
            "global.conf",
            "[DEFAULT]\ndebug = true\nlog_dir = /g\n[oslo_concurrency]\nlock_path = /g\n",
        ),
        (
            "nova.conf",
            "[DEFAULT]\nlog_dir = /project\n[oslo_concurrency]\nlock_path = /project\n",
        ),
        (
            "nova/nova-api.conf",
            "[oslo_concurrency]\nlock_path = /service\n[new]\nk = 1\nk = 2\n",
        ),
        (
            "neutron/ml2_conf.ini",
            "[ml2]\nmechanism_drivers = openvswitch\n",
        ),
    ]);
    let files = render_files(&c, Target::Kubernetes).unwrap();
    let api = file(&files, "nova-api", "nova.conf");
    assert!(api.contains("debug = true\n"), "global.conf applies");
    assert!(
        api.contains("log_dir = /project\n"),
        "<project>.conf wins over global.conf"
    );
    assert!(
        api.contains("lock_path = /service\n"),
        "<project>/<service>.conf wins"
    );
    assert!(
        api.contains("[new]\nk = 1\nk = 2\n"),
        "repeated keys stay multi-valued"
    );
    let sched = file(&files, "nova-scheduler", "nova.conf");
    assert!(
        sched.contains("lock_path = /project\n"),
        "only nova-api gets its service file"
    );
    let ml2 = file(&files, "neutron-server", "ml2_conf.ini");
    assert!(ml2.contains("mechanism_drivers = openvswitch\n"));
    assert!(
        ml2.contains("tenant_network_types = vxlan\n"),
        "other keys are kept"
    );
    // global.conf only reaches a project's main file.
    let neutron = file(&files, "neutron-server", "neutron.conf");
    assert!(neutron.contains("debug = true\n"));
    assert!(!ml2.contains("debug"));
    // A file without overrides is exactly the template's output.
    let placement = file(&files, "placement-api", "placement-api-uwsgi.ini");
    assert!(placement.starts_with("# uWSGI for placement-api"));
}

#[test]
fn per_host_overrides_make_variants_of_daemonset_files_only() {
    let c = config(&[
        (
            "neutron/net-1/openvswitch_agent.ini",
            "[ovs]\nlocal_ip = 10.1.0.5\n",
        ),
        (
            "neutron/openvswitch_agent.ini",
            "[ovs]\nlocal_ip = 10.9.9.9\nbridge_mappings = physnet1:br-x\n",
        ),
    ]);
    let files = render_files(&c, Target::Kubernetes).unwrap();
    let variants: Vec<&ContainerFiles> = files.iter().filter(|f| f.host.is_some()).collect();
    assert_eq!(variants.len(), 1);
    assert_eq!(variants[0].service, "neutron-openvswitch-agent");
    let ovs = variants[0]
        .files
        .iter()
        .find(|f| f.name == "openvswitch_agent.ini")
        .unwrap();
    assert!(
        ovs.content.contains("local_ip = 10.1.0.5\n"),
        "the host file wins"
    );
    assert!(
        ovs.content.contains("bridge_mappings = physnet1:br-x\n"),
        "over the project file"
    );
    let main = file(&files, "neutron-openvswitch-agent", "openvswitch_agent.ini");
    assert!(main.contains("local_ip = 10.9.9.9\n"));
    // Compose has one node: no variants.
    let compose = render_files(&c, Target::Compose).unwrap();
    assert!(compose.iter().all(|f| f.host.is_none()));
}

#[test]
fn a_per_host_override_of_a_deployment_is_an_error() {
    let e = render_files(
        &config(&[("keystone/ctl-1/keystone.conf", "[DEFAULT]\ndebug = true\n")]),
        Target::Kubernetes,
    )
    .unwrap_err();
    insta::assert_snapshot!("per_host_override_of_a_deployment", e.to_string());
}

#[test]
fn a_malformed_override_names_file_and_line() {
    let e = render_files(
        &config(&[(
            "nova/nova-api.conf",
            "[DEFAULT]\ndebug = true\nthis line is wrong\n",
        )]),
        Target::Kubernetes,
    )
    .unwrap_err();
    assert_eq!(
        e,
        RenderError::Override {
            file: "config/nova/nova-api.conf".into(),
            line: 3,
            message: "expected `key = value`, a `[section]` header or a comment (`#`)".into(),
        }
    );
    insta::assert_snapshot!("malformed_override", e.to_string());
    // The same problem through the loader, as `kstack validate` shows it.
    let mut sources = kstack_config::Sources {
        globals: Some(b"---\n".to_vec()),
        passwords: Some(kstack_config::testing::passwords_yml(3).into_bytes()),
        ..Default::default()
    };
    sources.overrides = BTreeMap::from([(
        "nova/nova-api.conf".to_owned(),
        b"[DEFAULT]\ndebug = true\nthis line is wrong\n".to_vec(),
    )]);
    let loaded = kstack_config::load(&sources);
    assert!(loaded.config.is_none());
    insta::assert_snapshot!(
        "malformed_override_diagnostic",
        kstack_config::render_plain(&loaded.diagnostics)
    );
}

#[test]
fn a_missing_password_is_a_template_error_with_line() {
    let mut pw = kstack_config::testing::passwords(7);
    pw.entries.remove("glance_keystone_password");
    let c = Config::from_parts(
        Globals::default(),
        pw,
        Default::default(),
        Catalog::builtin().unwrap(),
    );
    let e = render_files(&c, Target::Kubernetes).unwrap_err();
    let RenderError::Template {
        template,
        line,
        message,
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(template, "glance/glance-api.conf.j2");
    assert!(*line > 0);
    assert!(message.contains("glance_keystone_password"), "{message}");
}

#[test]
fn an_override_setting_a_credential_keeps_its_file_secret() {
    let secret = |files: &[ContainerFiles], service: &str, name: &str| {
        files
            .iter()
            .filter(|c| c.service == service)
            .flat_map(|c| &c.files)
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no {service}/{name}"))
            .secret
    };
    let plain = render_files(
        &config(&[(
            "neutron/ml2_conf.ini",
            "[ml2]\nmechanism_drivers = openvswitch\n",
        )]),
        Target::Kubernetes,
    )
    .unwrap();
    assert!(!secret(&plain, "neutron-server", "ml2_conf.ini"));
    for over in [
        "[ml2]\nextension_password = hunter2\n",
        "[ml2]\nnotify_url = http://admin:hunter2@example.org/x\n",
    ] {
        let files = render_files(
            &config(&[("neutron/ml2_conf.ini", over)]),
            Target::Kubernetes,
        )
        .unwrap();
        assert!(secret(&files, "neutron-server", "ml2_conf.ini"), "{over}");
    }
}

/// oslo.messaging's queue manager names reply and fanout queues under a file lock: a process
/// that makes RPC calls with it fails every call without `[oslo_concurrency] lock_path`
/// (heat-api answered 400 to every stack create). Keystone only sends notifications, which
/// name no queue.
#[test]
fn each_release_runs_what_its_code_and_images_offer() {
    // 2025.1's projects have WSGI modules; 2024.2's placement and cinder only the scripts their
    // wheels install (nova has its module in both). Kolla's nova-libvirt start script came with
    // 2025.1.
    for (release, placement, cinder, libvirt) in [
        (
            "2025.1",
            "module = placement.wsgi.api:application",
            "module = cinder.wsgi.api:application",
            "/usr/local/bin/kolla_nova_libvirt_start",
        ),
        (
            "2024.2",
            "wsgi-file = /var/lib/kolla/venv/bin/placement-api",
            "wsgi-file = /var/lib/kolla/venv/bin/cinder-wsgi",
            "/usr/sbin/libvirtd --listen",
        ),
    ] {
        let serde_json::Value::Object(vars) =
            serde_json::json!({ "enable_cinder": true, "openstack_release": release })
        else {
            unreachable!()
        };
        let config = Config::from_parts(
            Globals::from_vars(&vars.into_iter().collect()).unwrap(),
            kstack_config::testing::passwords(7),
            BTreeMap::new(),
            Catalog::builtin().unwrap(),
        );
        let files = render_files(&config, Target::Kubernetes).unwrap();
        for (service, name, want) in [
            ("placement-api", "placement-api-uwsgi.ini", placement),
            ("cinder-api", "cinder-api-uwsgi.ini", cinder),
            (
                "nova-api",
                "nova-api-uwsgi.ini",
                "module = nova.wsgi.osapi_compute:application",
            ),
        ] {
            let text = file(&files, service, name);
            let apps: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("module =") || l.starts_with("wsgi-file ="))
                .collect();
            assert_eq!(apps, [want], "{release} {service}:\n{text}");
        }
        let kolla: serde_json::Value =
            serde_json::from_str(file(&files, "nova-libvirt", "config.json")).unwrap();
        // kstack's start script runs it, in a cgroup outside the pod's.
        assert_eq!(
            kolla["command"],
            format!("/usr/local/bin/kstack-libvirt-start {libvirt}"),
            "{release}"
        );
    }
}

#[test]
fn every_rpc_process_with_the_queue_manager_has_a_lock_path() {
    let serde_json::Value::Object(vars) = serde_json::json!({ "enable_cinder": true }) else {
        unreachable!()
    };
    let config = Config::from_parts(
        Globals::from_vars(&vars.into_iter().collect()).unwrap(),
        kstack_config::testing::passwords(7),
        BTreeMap::new(),
        Catalog::builtin().unwrap(),
    );
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let mut checked = Vec::new();
    for cf in &files {
        for f in &cf.files {
            if !f.content.contains("use_queue_manager = true") || cf.service == "keystone" {
                continue;
            }
            let section = f
                .content
                .split("\n[")
                .find(|s| s.starts_with("oslo_concurrency]"));
            assert!(
                section.is_some_and(|s| s.contains("\nlock_path = /var/lib/")),
                "{}/{}/{}: no [oslo_concurrency] lock_path",
                cf.service,
                cf.container,
                f.name
            );
            checked.push(cf.service.clone());
        }
    }
    for service in [
        "heat-api",
        "heat-engine",
        "nova-api",
        "neutron-server",
        "cinder-api",
    ] {
        assert!(
            checked.iter().any(|s| s == service),
            "{service} not checked: {checked:?}"
        );
    }
}

#[test]
fn the_clustered_stores_start_scripts_are_valid_bash_and_list_every_peer() {
    for n in [1u32, 3] {
        let mut globals = Globals::default();
        globals.replicas.insert("mariadb".into(), n);
        globals.replicas.insert("rabbitmq".into(), n);
        let config = Config::from_parts(
            globals,
            kstack_config::testing::passwords(1),
            Default::default(),
            Catalog::builtin().unwrap(),
        );
        for target in [Target::Kubernetes, Target::Compose] {
            let files = render_files(&config, target).unwrap();
            for (service, name, peers_line) in [
                ("mariadb", "mariadb-start.sh", "peers=("),
                ("rabbitmq", "rabbitmq-start.sh", "peers=("),
                ("mariadb", "mariadb-drain.sh", ""),
            ] {
                let script = file(&files, service, name);
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join(name);
                std::fs::write(&path, script).unwrap();
                let out = std::process::Command::new("bash")
                    .arg("-n")
                    .arg(&path)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{service} ({n} replicas, {target:?}): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                if peers_line.is_empty() {
                    continue;
                }
                let peers = script
                    .lines()
                    .find(|l| l.starts_with(peers_line))
                    .unwrap_or_else(|| panic!("{service}: no peers line"));
                let expected = target.replicas(&config.globals, service) as usize;
                assert_eq!(
                    peers.matches('"').count(),
                    2 * expected,
                    "{service} ({n} replicas, {target:?}): {peers}"
                );
                if target == Target::Kubernetes && n == 3 {
                    assert!(
                        peers.contains(&format!("\"{service}-2.{service}-peers.openstack.svc\"")),
                        "{peers}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_galera_clusters_reads_see_the_writes_any_server_committed_and_a_single_server_does_not_wait() {
    for (n, waits) in [(1u32, false), (3, true)] {
        let mut globals = Globals::default();
        globals.replicas.insert("mariadb".into(), n);
        let config = Config::from_parts(
            globals,
            kstack_config::testing::passwords(1),
            Default::default(),
            Catalog::builtin().unwrap(),
        );
        let files = render_files(&config, Target::Kubernetes).unwrap();
        let galera = file(&files, "mariadb", "galera.cnf");
        assert_eq!(
            galera.lines().any(|l| l == "wsrep_sync_wait = 1"),
            waits,
            "{n} servers:\n{galera}"
        );
        // The setting sits in the server's section, before the next one starts.
        let mysqld = galera
            .split("[mysqld]")
            .nth(1)
            .and_then(|s| s.split("\n[").next())
            .unwrap();
        assert_eq!(mysqld.contains("wsrep_sync_wait = 1\n"), waits, "{galera}");
    }
}

#[test]
fn a_catalog_without_a_port_kstack_addresses_is_an_error_not_a_default() {
    // The loader refuses such a catalog (kstack-model's validation); a catalog built without it
    // still gets no number the renderer made up, on either target.
    let mut config = config(&[]);
    config
        .catalog
        .services
        .get_mut("keystone")
        .unwrap()
        .ports
        .retain(|p| p.name != "api");
    let want = RenderError::MissingPort {
        service: "keystone".into(),
        port: "api".into(),
    };
    for target in [Target::Kubernetes, Target::Compose] {
        assert_eq!(render_files(&config, target).unwrap_err(), want);
        assert_eq!(
            kstack_render::tasks::keystone_url(&config, target).unwrap_err(),
            want
        );
    }
    assert_eq!(
        kstack_render::kubernetes::render(&config).unwrap_err(),
        want
    );
    assert_eq!(
        kstack_render::compose::render(&config).unwrap_err(),
        kstack_render::compose::ComposeError::Render(want.clone())
    );
    assert_eq!(
        want.to_string(),
        "service keystone: the catalog has no port named `api`, which kstack addresses the service by; add `{ name: api, port: <number> }` to `services.keystone.ports` in catalog.yml"
    );
}

#[test]
fn every_bootstrap_env_placeholder_is_filled_for_both_targets() {
    use kstack_model::catalog::{BootstrapKind, TASK_ENV_PLACEHOLDERS};
    let mut config = config(&[]);
    let heat = config.catalog.services.get_mut("heat-api").unwrap();
    let task = heat
        .bootstrap
        .iter_mut()
        .find(|t| t.name == "db-sync")
        .unwrap();
    let BootstrapKind::KollaBootstrap { env, .. } = &mut task.task else {
        panic!("heat-api's db-sync is a Kolla bootstrap");
    };
    env.clear();
    for p in TASK_ENV_PLACEHOLDERS {
        env.insert(format!("X_{p}"), format!("<{{{p}}}>"));
    }
    env.insert("X_BRACE".into(), "{nope}".into());
    let g = &config.globals;
    let (user, project, region) = (
        g.keystone_admin_user.clone(),
        g.keystone_admin_project.clone(),
        g.openstack_region_name.clone(),
    );
    for target in [Target::Kubernetes, Target::Compose] {
        let files = render_files(&config, target).unwrap();
        let service = &config.catalog.services["heat-api"];
        let task = service
            .bootstrap
            .iter()
            .find(|t| t.name == "db-sync")
            .unwrap();
        // A catalog built without validation: the unknown name is an error, not left as it is.
        let err =
            kstack_render::tasks::task_spec(&config, target, &files, "heat-api", service, task)
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "service heat-api, bootstrap task db-sync, env `X_BRACE`: `{{nope}}` is not a value kstack fills; known: {}",
                TASK_ENV_PLACEHOLDERS.join(", ")
            )
        );
        let mut service = service.clone();
        let mut task = task.clone();
        if let BootstrapKind::KollaBootstrap { env, .. } = &mut task.task {
            env.remove("X_BRACE");
        }
        service.bootstrap.clear();
        let spec =
            kstack_render::tasks::task_spec(&config, target, &files, "heat-api", &service, &task)
                .unwrap();
        let keystone = kstack_render::tasks::keystone_url(&config, target).unwrap();
        for (p, want) in [
            ("keystone_internal_url", keystone.as_str()),
            ("keystone_admin_user", user.as_str()),
            ("keystone_admin_project", project.as_str()),
            ("openstack_region_name", region.as_str()),
        ] {
            assert_eq!(
                spec.env[&format!("X_{p}")],
                format!("<{want}>"),
                "{target:?}"
            );
        }
        assert_eq!(
            spec.env.keys().filter(|k| k.starts_with("X_")).count(),
            TASK_ENV_PLACEHOLDERS.len()
        );
    }
}

#[test]
fn nova_computes_drain_is_python_that_waits_for_its_hosts_busy_servers() {
    let files = render_files(&config(&[]), Target::Kubernetes).unwrap();
    let text = file(&files, "nova-compute", "nova-compute-drain.py");
    let mut python = std::process::Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write as _;
    python
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(python.wait().unwrap().success(), "{text}");
    // Bounded by less than the pod's grace period, asking about this host's servers only.
    assert!(text.contains(&format!(
        "LIMIT = {}",
        kstack_render::files::NOVA_COMPUTE_DRAIN_SECS
    )));
    assert!(text.contains("host={conf.host}"), "{text}");
    let catalog = Catalog::builtin().unwrap();
    let grace = catalog.services["nova-compute"].containers[0]
        .stop_grace_secs
        .unwrap();
    assert!(
        grace > kstack_render::files::NOVA_COMPUTE_DRAIN_SECS as i64 + 30,
        "grace {grace}"
    );
}

fn config_with(vars: &[(&str, &str)]) -> Config {
    let vars: serde_json::Map<String, serde_json::Value> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).into()))
        .collect();
    Config::from_parts(
        Globals::from_vars(&vars.into_iter().collect()).unwrap(),
        kstack_config::testing::passwords(7),
        Default::default(),
        Catalog::builtin().unwrap(),
    )
}

/// `bash -n` of a rendered script: it parses.
fn parses(script: &str) {
    let out = std::process::Command::new("bash")
        .args(["-n", "-c", script])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_tunnel_interface_becomes_each_hosts_tunnel_endpoint() {
    // Userspace datapath: the interface and its address move onto br-vtep, the agent's
    // local_ip is br-vtep's address.
    let files = render_files(
        &config_with(&[
            ("tunnel_interface", "kstack-tun"),
            ("ovs_datapath", "netdev"),
        ]),
        Target::Kubernetes,
    )
    .unwrap();
    let bridges = file(&files, "openvswitch-vswitchd", "ovs-bridges.sh");
    parses(bridges);
    assert!(
        bridges.contains("--may-exist add-port br-vtep kstack-tun\n"),
        "{bridges}"
    );
    assert!(
        bridges.contains("ip addr del \"$address\" dev kstack-tun\n"),
        "{bridges}"
    );
    assert!(
        bridges.contains("ip addr replace \"$address\" dev br-vtep\n"),
        "{bridges}"
    );
    let start = file(&files, "neutron-openvswitch-agent", "ovs-agent-start.sh");
    parses(start);
    assert!(start.contains("device=br-vtep\n"), "{start}");
    assert!(
        start.contains("exec \"$@\" --config-file /var/lib/neutron/kstack-tunnel.ini\n"),
        "{start}"
    );

    // Kernel datapath: the interface keeps its address, which the agent reads.
    let files = render_files(
        &config_with(&[
            ("tunnel_interface", "kstack-tun"),
            ("ovs_datapath", "system"),
        ]),
        Target::Kubernetes,
    )
    .unwrap();
    let bridges = file(&files, "openvswitch-vswitchd", "ovs-bridges.sh");
    parses(bridges);
    assert!(!bridges.contains("add-br br-vtep"), "{bridges}");
    let start = file(&files, "neutron-openvswitch-agent", "ovs-agent-start.sh");
    parses(start);
    assert!(start.contains("device=kstack-tun\n"), "{start}");

    // Unset: each host's own address (local_ip = $my_ip), nothing moves.
    let files = render_files(
        &config_with(&[("ovs_datapath", "netdev")]),
        Target::Kubernetes,
    )
    .unwrap();
    // A br-vtep an earlier tunnel_interface made is not made, and gives its interface and
    // address back (the interface may serve as an external interface now).
    let bridges = file(&files, "openvswitch-vswitchd", "ovs-bridges.sh");
    parses(bridges);
    assert!(!bridges.contains("add-br br-vtep"), "{bridges}");
    let cleanup = bridges
        .find("del-br br-vtep")
        .expect("removes a leftover br-vtep");
    assert!(
        cleanup < bridges.find("add-br br-ex").unwrap(),
        "br-vtep goes before the external bridges take their ports: {bridges}"
    );
    assert!(
        bridges.contains("ip addr replace \"$address\" dev \"$port\""),
        "{bridges}"
    );
    let start = file(&files, "neutron-openvswitch-agent", "ovs-agent-start.sh");
    parses(start);
    assert!(!start.contains("kstack-tunnel.ini"), "{start}");
    assert!(start.trim_end().ends_with("exec \"$@\""), "{start}");
    let agent = file(&files, "neutron-openvswitch-agent", "openvswitch_agent.ini");
    assert!(agent.contains("local_ip = $my_ip\n"), "{agent}");
}

#[test]
fn a_tunnel_interface_that_is_no_interface_name_is_refused() {
    let mut vars = serde_json::Map::new();
    vars.insert("tunnel_interface".into(), "eth0; reboot".into());
    let issues = Globals::from_vars(&vars.into_iter().collect()).unwrap_err();
    assert!(
        issues
            .iter()
            .any(|i| i.key == "tunnel_interface"
                && i.message.contains("not a network interface name")),
        "{issues:?}"
    );
}

#[test]
fn tenant_networks_take_the_types_kolla_ansible_names() {
    let files = render_files(&config_with(&[]), Target::Kubernetes).unwrap();
    let ml2 = file(&files, "neutron-server", "ml2_conf.ini");
    assert!(
        ml2.contains("type_drivers = flat,vlan,vxlan\ntenant_network_types = vxlan\n"),
        "{ml2}"
    );
    let files = render_files(
        &config_with(&[("neutron_tenant_network_types", "vlan,vxlan")]),
        Target::Kubernetes,
    )
    .unwrap();
    let ml2 = file(&files, "neutron-server", "ml2_conf.ini");
    assert!(ml2.contains("tenant_network_types = vlan,vxlan\n"), "{ml2}");

    for (key, value, says) in [
        (
            "neutron_tenant_network_types",
            "geneve",
            "`geneve` is not among `neutron_type_drivers`",
        ),
        (
            "neutron_type_drivers",
            "flat,gre",
            "`gre` is not a network type kstack builds",
        ),
    ] {
        let mut vars = serde_json::Map::new();
        vars.insert(key.into(), value.into());
        let issues = Globals::from_vars(&vars.into_iter().collect()).unwrap_err();
        assert!(
            issues
                .iter()
                .any(|i| i.key == key && i.message.contains(says)),
            "{issues:?}"
        );
    }
}
