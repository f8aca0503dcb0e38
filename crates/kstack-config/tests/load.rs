//! Loading config directories from bytes; the diagnostics are snapshot-tested like normal output.
use kstack_config::{Sources, load, load_globals, render_plain};

const KOLLA_GLOBALS: &str = include_str!("fixtures/kolla-ansible-globals.yml");

fn sources(globals: &str, passwords: &str) -> Sources {
    Sources {
        globals: Some(globals.as_bytes().to_vec()),
        passwords: Some(passwords.as_bytes().to_vec()),
        ..Sources::default()
    }
}

#[test]
fn unmodified_kolla_ansible_globals_loads_with_warnings_only() {
    let (globals, diags) = load_globals(KOLLA_GLOBALS);
    let g = globals.expect("an unmodified kolla-ansible globals.yml must load");
    assert!(diags.iter().all(|d| !d.is_error()));
    let warned: Vec<_> = diags.iter().map(|d| d.field.clone().unwrap()).collect();
    // `neutron_plugin_agent: openvswitch` is what kstack builds; `enable_haproxy: "no"` (the
    // file's own) leaves publishing the public endpoints to the operator.
    assert!(warned.is_empty(), "{warned:?}");
    assert!(!g.is_enabled("haproxy"));
    assert_eq!(
        g.image_ref("keystone", "keystone"),
        "quay.io/openstack.kolla/keystone:2025.1-ubuntu-noble"
    );
    assert!(g.is_enabled("cinder"));
    assert_eq!(
        g.kolla_internal_vip_address.as_deref(),
        Some("10.10.10.254")
    );
    // The hypervisor setting reaches the templates.
    assert_eq!(g.vars["nova_compute_virt_type"], "qemu");
    insta::assert_snapshot!(render_plain(&diags));
}

#[test]
fn every_kstack_setting_is_known_and_draws_no_warning() {
    // Each `kstack_*` variable docs/SETTINGS.md lists, with a valid value.
    let text = "---\nkubernetes_namespace: openstack\nkstack_role_label_prefix: kstack.io/role-\n\
        kstack_storage_class: local\nkstack_replicas: {keystone: 1}\n\
        kstack_resources: {}\nkstack_timeouts: {default: 600}\nkstack_history_limit: 5\n\
        kstack_pod_labels: {keystone: {team: identity}}\n";
    let (globals, diags) = load_globals(text);
    assert!(globals.is_some(), "{}", render_plain(&diags));
    assert!(diags.is_empty(), "{}", render_plain(&diags));
}

#[test]
fn wrong_types_are_all_reported_with_lines() {
    let text = "---\nopenstack_release: [1]\nenable_nova: maybe\nkolla_base_distro: gentoo\nkstack_replicas:\n  nova: three\nenable_keystone: yes\n";
    let (globals, diags) = load_globals(text);
    assert!(globals.is_none());
    let lines: Vec<_> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.field.clone().unwrap(), d.line))
        .collect();
    assert_eq!(
        lines,
        [
            ("openstack_release".to_string(), 2),
            ("enable_nova".to_string(), 3),
            ("kolla_base_distro".to_string(), 4),
            ("kstack_replicas.nova".to_string(), 6),
        ]
    );
    insta::assert_snapshot!(render_plain(&diags));
}

#[test]
fn an_even_galera_or_rabbitmq_cluster_is_refused_at_its_line_and_an_odd_one_is_not() {
    let text =
        "---\nkstack_replicas:\n  keystone: 2\n  mariadb: 2\n  rabbitmq: 4\n  memcached: 2\n";
    let (globals, diags) = load_globals(text);
    assert!(globals.is_none());
    let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
    let lines: Vec<_> = errors
        .iter()
        .map(|d| (d.field.clone().unwrap(), d.line))
        .collect();
    assert_eq!(
        lines,
        [
            ("kstack_replicas.mariadb".to_string(), 4),
            ("kstack_replicas.rabbitmq".to_string(), 5),
        ]
    );
    let text = render_plain(&diags);
    assert!(
        text.contains("when 1 of them stop") && text.contains("use an odd number: 1, or 3"),
        "{text}"
    );
    let (globals, diags) =
        load_globals("---\nkstack_replicas: {mariadb: 3, rabbitmq: 5, keystone: 2}\n");
    let globals = globals.unwrap_or_else(|| panic!("{}", render_plain(&diags)));
    assert_eq!(globals.replicas_for("mariadb"), 3);
    assert_eq!(globals.replicas_for("rabbitmq"), 5);
}

#[test]
fn yaml_syntax_error_in_globals_names_line() {
    let (_, diags) = load_globals("---\nenable_nova: yes\n  bad_indent: [\n");
    assert_eq!(diags.len(), 1);
    assert!(diags[0].line >= 3, "{:?}", diags[0].line);
    insta::assert_snapshot!(render_plain(&diags));
}

#[test]
fn missing_passwords_are_listed_and_genpwd_suggested() {
    let loaded = load(&sources(
        "enable_openstack_core: no\nenable_keystone: yes\n",
        "database_password: x\nkeystone_admin_password: \"\"\n",
    ));
    assert!(loaded.config.is_none());
    insta::assert_snapshot!(render_plain(&loaded.diagnostics));
}

#[test]
fn missing_files_are_errors() {
    let loaded = load(&Sources::default());
    assert!(loaded.has_errors());
    insta::assert_snapshot!(render_plain(&loaded.diagnostics));
}

#[test]
fn secrets_never_appear_in_errors() {
    let passwords = "database_password: [Sup3rSecretList]\nrabbitmq_password: \"Sup3rSecretQuote\nkeystone_admin_password: x\n";
    let loaded = load(&sources("", passwords));
    let out = render_plain(&loaded.diagnostics);
    assert!(loaded.has_errors());
    assert!(!out.contains("Sup3rSecret"), "{out}");
    assert!(out.contains("passwords.yml"), "{out}");
    // A type error on a line holding a secret.
    let loaded = load(&sources(
        "",
        "database_password: [Sup3rSecretList]\nnova_ssh_key: Sup3rSecretKey\n",
    ));
    let out = render_plain(&loaded.diagnostics);
    assert!(
        out.contains("`database_password`") && out.contains("`nova_ssh_key`"),
        "{out}"
    );
    assert!(!out.contains("Sup3rSecret"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn valid_directory_loads() {
    // Every plain key of the starter template set (ssh keys stay empty: no service requires them).
    let pw: String = kstack_config::templates::passwords_yml()
        .lines()
        .map(|l| match l.strip_suffix(':') {
            Some(key) if !l.starts_with(' ') && !key.ends_with("_ssh_key") => {
                format!("{key}: pw-{key}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    let loaded = load(&sources(kstack_config::templates::GLOBALS_YML, &pw));
    assert!(
        loaded.diagnostics.is_empty(),
        "{}",
        render_plain(&loaded.diagnostics)
    );
    let config = loaded.config.unwrap();
    assert_eq!(
        config.passwords.get("database_password"),
        Some("pw-database_password")
    );
}

#[test]
fn overrides_are_kept_and_must_be_text() {
    let mut s = sources(
        "enable_openstack_core: no\nenable_mariadb: no\nenable_rabbitmq: no\nenable_memcached: no\n",
        "",
    );
    s.overrides
        .insert("nova.conf".into(), b"[DEFAULT]\ndebug = True\n".to_vec());
    let loaded = load(&s);
    assert!(
        loaded.diagnostics.is_empty(),
        "{}",
        render_plain(&loaded.diagnostics)
    );
    assert_eq!(
        loaded.config.unwrap().overrides["nova.conf"],
        b"[DEFAULT]\ndebug = True\n"
    );
    s.overrides
        .insert("neutron/ml2_conf.ini".into(), vec![0xff, 0xfe]);
    let loaded = load(&s);
    let out = render_plain(&loaded.diagnostics);
    assert!(
        loaded.has_errors() && out.contains("config/neutron/ml2_conf.ini: the file is not UTF-8"),
        "{out}"
    );
}

#[test]
fn a_line_break_in_a_password_is_refused_with_file_key_and_line() {
    let passwords = "database_password: ok\nkeystone_admin_password: \"Sup3rSecret\\n[DEFAULT]\\ndebug = True\"\nrabbitmq_password: |\n  Sup3rSecretBlock\n";
    let loaded = load(&sources("", passwords));
    assert!(loaded.config.is_none());
    let out = render_plain(&loaded.diagnostics);
    assert!(
        !out.contains("Sup3rSecret") && !out.contains("DEFAULT"),
        "{out}"
    );
    insta::assert_snapshot!(out);
}

#[test]
fn namespace_and_image_references_name_file_line_and_field() {
    let text = "---\nkubernetes_namespace: \"{{ x }}\"\ndocker_registry: quay.io\ndocker_namespace: ../../etc\nopenstack_tag: \"2025.1 rocky\"\nopenstack_region_name: \"RegionOne\\n[DEFAULT]\\ndebug = True\"\n";
    let (globals, diags) = load_globals(text);
    assert!(globals.is_none());
    let found: Vec<_> = diags
        .iter()
        .map(|d| (d.field.clone().unwrap(), d.line))
        .collect();
    assert_eq!(
        found,
        [
            ("kubernetes_namespace".to_string(), 2),
            ("docker_namespace".to_string(), 4),
            ("openstack_tag".to_string(), 5),
            ("openstack_region_name".to_string(), 6),
        ]
    );
    insta::assert_snapshot!(render_plain(&diags));
}

#[test]
fn kubernetes_own_namespaces_are_refused_with_file_line_and_field() {
    for ns in ["kube-system", "default", "kube-public", "kube-node-lease"] {
        let (globals, diags) = load_globals(&format!(
            "---\nenable_cinder: no\nkubernetes_namespace: {ns}\n"
        ));
        assert!(globals.is_none(), "{ns} accepted");
        let d = diags.iter().find(|d| d.is_error()).expect("an error");
        assert_eq!(d.field.as_deref(), Some("kubernetes_namespace"), "{ns}");
        assert_eq!(d.line, 3, "{ns}");
        let out = render_plain(&diags);
        assert!(out.contains("Kubernetes' own namespaces"), "{out}");
    }
    // A namespace of the operator's own is fine.
    let (globals, diags) = load_globals("---\nkubernetes_namespace: cloud-a\n");
    assert!(globals.is_some(), "{}", render_plain(&diags));
}

#[test]
fn the_external_network_settings_are_checked_only_when_it_is_on() {
    // Off (the default): nothing is checked, no network.
    let (g, diags) = load_globals("---\nkstack_external_network_cidr: nonsense\n");
    assert!(
        g.is_some_and(|g| g.external_network.is_none()),
        "{}",
        render_plain(&diags)
    );
    // On, with defaults for the rest: gateway the first address, physnet1, public1.
    let (g, diags) = load_globals(
        "---\nkstack_external_network: \"yes\"\nkstack_external_network_cidr: 172.24.4.0/24\n",
    );
    let net = g
        .and_then(|g| g.external_network)
        .unwrap_or_else(|| panic!("{}", render_plain(&diags)));
    assert_eq!(
        (
            net.name.as_str(),
            net.physnet.as_str(),
            net.gateway.as_str(),
            net.pool
        ),
        ("public1", "physnet1", "172.24.4.1", None)
    );
    // Each wrong value is named with its line.
    for (text, field, line) in [
        (
            "kstack_external_network_cidr: 172.24.4.1/24\n",
            "kstack_external_network_cidr",
            3,
        ),
        (
            "kstack_external_network_cidr: \"\"\n",
            "kstack_external_network_cidr",
            3,
        ),
        (
            "kstack_external_network_cidr: fd00::/64\n",
            "kstack_external_network_cidr",
            3,
        ),
        (
            "kstack_external_network_cidr: 172.24.4.0/24\nkstack_external_network_gateway: 172.24.5.1\n",
            "kstack_external_network_gateway",
            4,
        ),
        (
            "kstack_external_network_cidr: 172.24.4.0/24\nkstack_external_network_pool: 172.24.4.200-172.24.4.100\n",
            "kstack_external_network_pool",
            4,
        ),
        (
            "kstack_external_network_cidr: 172.24.4.0/24\nkstack_external_network_pool: 172.24.4.100-172.24.4.255\n",
            "kstack_external_network_pool",
            4,
        ),
        (
            "kstack_external_network_cidr: 172.24.4.0/24\nkstack_external_network_physnet: physnet2\n",
            "kstack_external_network_physnet",
            4,
        ),
    ] {
        let (g, diags) = load_globals(&format!("---\nkstack_external_network: \"yes\"\n{text}"));
        assert!(g.is_none(), "accepted: {text}");
        let d = diags.iter().find(|d| d.is_error()).expect("an error");
        assert_eq!((d.field.as_deref(), d.line), (Some(field), line), "{text}");
    }
    // Two external interfaces: physnet2 is the second one's.
    let (g, diags) = load_globals(
        "---\nneutron_external_interface: eth1,eth2\nkstack_external_network: \"yes\"\nkstack_external_network_cidr: 10.0.0.0/24\nkstack_external_network_physnet: physnet2\n",
    );
    assert!(g.is_some(), "{}", render_plain(&diags));
}

#[test]
fn a_jinja_value_asking_for_gigabytes_or_endless_work_fails_fast_naming_its_line() {
    for (expr, what) in [
        ("{{ '%999999999s' | format('x') }}", "a format width"),
        (
            "{{ '%99999999999999999999s' | format('x') }}",
            "a width past usize",
        ),
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
            "nested loops",
        ),
    ] {
        let started = std::time::Instant::now();
        let (globals, diags) = load_globals(&format!("---\nenable_cinder: no\nbomb: \"{expr}\"\n"));
        let took = started.elapsed();
        assert!(globals.is_none(), "{what}: accepted");
        let d = diags.iter().find(|d| d.is_error()).expect("an error");
        assert_eq!(
            (d.field.as_deref(), d.line),
            (Some("bomb"), 3),
            "{what}: {d}"
        );
        // Not a timing test: a bound far above the milliseconds it takes, far below the
        // tens of seconds (and gigabytes) it took unbounded.
        assert!(took < std::time::Duration::from_secs(5), "{what}: {took:?}");
    }
    // An ordinary format is fine.
    let (globals, diags) = load_globals("---\nregion: \"{{ '%-8s|' | format('a') }}\"\n");
    assert!(globals.is_some(), "{}", render_plain(&diags));
}

#[test]
fn a_key_set_twice_is_named_with_both_lines() {
    let (globals, diags) = load_globals(
        "---\nenable_cinder: \"no\"\nkolla_base_distro: debian\n\"enable_cinder\": \"yes\"\n",
    );
    assert!(globals.is_none());
    let d = diags.iter().find(|d| d.is_error()).expect("an error");
    assert_eq!(
        (d.field.as_deref(), d.line),
        (Some("enable_cinder"), 4),
        "{d}"
    );
    assert!(d.message.contains("set twice: on line 2"), "{d}");
    assert!(!d.message.contains("DuplicateKeyPolicy"), "{d}");
    // passwords.yml too: the key is named, no value shown.
    let diags = kstack_config::passwords::parse(
        "database_password: one-secret\nrabbitmq_password: x\ndatabase_password: other-secret\n",
    )
    .unwrap_err();
    assert_eq!(diags[0].field.as_deref(), Some("database_password"));
    assert_eq!(diags[0].line, 3);
    let out = render_plain(&diags);
    assert!(out.contains("set twice: on line 1"), "{out}");
    assert!(!out.contains("secret"), "{out}");
}

#[test]
fn unquoted_values_yaml_1_1_reads_otherwise_are_refused_with_their_line() {
    for raw in [
        "010", "0755", "1e3", "1.5e-3", "0o17", "1_000", "1:30", "-010",
    ] {
        let (globals, diags) = load_globals(&format!(
            "---\nenable_cinder: no\nqemu_max_files: {raw} # comment\n"
        ));
        assert!(globals.is_none(), "{raw}: accepted");
        let d = diags.iter().find(|d| d.is_error()).expect("an error");
        assert_eq!(
            (d.field.as_deref(), d.line),
            (Some("qemu_max_files"), 3),
            "{raw}: {d}"
        );
        assert!(d.message.contains("YAML 1.1"), "{raw}: {d}");
    }
    // Quoted, or plain numbers both read alike, are fine.
    for raw in ["\"010\"", "'1e3'", "10", "0", "8", "0x1F", "1.5", "yes"] {
        let (_, diags) = load_globals(&format!("---\nsome_setting: {raw}\n"));
        assert!(
            !diags.iter().any(|d| d.is_error()),
            "{raw}: {}",
            render_plain(&diags)
        );
    }
    // At any depth: a mapping's value, a sequence's item, a flow collection's; each named by
    // its path and line.
    let (globals, diags) = load_globals(
        "---\nkstack_timeouts:\n  keystone: 010\n  nova: '010'\nsome_list:\n  - ok\n  - 1e3\nsome_flow: {a: [x, 1_000]}\n",
    );
    assert!(globals.is_none(), "nested values accepted");
    let found: Vec<(Option<&str>, u64)> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.field.as_deref(), d.line))
        .collect();
    assert_eq!(
        found,
        [
            (Some("kstack_timeouts.keystone"), 3),
            (Some("some_list[1]"), 7),
            (Some("some_flow.a[1]"), 8)
        ],
        "{}",
        render_plain(&diags)
    );
    // Explicitly tagged values mean the same to both.
    let (_, diags) = load_globals("---\nsome_setting: !!str 010\n");
    assert!(
        !diags.iter().any(|d| d.is_error()),
        "{}",
        render_plain(&diags)
    );
    // In passwords.yml, the value is not shown.
    let diags = kstack_config::passwords::parse("database_password: 0123\n").unwrap_err();
    assert_eq!(diags[0].field.as_deref(), Some("database_password"));
    let out = render_plain(&diags);
    assert!(out.contains("YAML 1.1") && !out.contains("0123"), "{out}");
    let diags =
        kstack_config::passwords::parse("nova_ssh_key:\n  private_key: 0123\n  public_key: x\n")
            .unwrap_err();
    assert_eq!(diags[0].field.as_deref(), Some("nova_ssh_key.private_key"));
    assert!(!render_plain(&diags).contains("0123"));
}

#[test]
fn a_credential_in_an_override_is_warned_about_without_its_value() {
    let mut s = sources(
        "enable_openstack_core: no\nenable_mariadb: no\nenable_rabbitmq: no\nenable_memcached: no\n",
        "",
    );
    s.overrides.insert(
        "nova.conf".into(),
        b"[database]\nconnection = mysql+pymysql://nova:Sup3rSecret@db/nova\n".to_vec(),
    );
    let loaded = load(&s);
    assert!(loaded.config.is_some(), "a warning only");
    let out = render_plain(&loaded.diagnostics);
    assert!(!out.contains("Sup3rSecret"), "{out}");
    insta::assert_snapshot!(out);
}

const JINJA_GLOBALS: &str = include_str!("fixtures/kolla-ansible-globals-jinja.yml");

#[test]
fn a_kolla_ansible_globals_with_jinja_values_loads() {
    let mut passwords: String = kstack_config::testing::passwords_yml(1)
        .lines()
        .filter(|l| {
            !l.starts_with("database_password:") && !l.starts_with("keystone_admin_password:")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    passwords.push_str("database_password: \"db-{{ openstack_region_name | lower }}\"\nkeystone_admin_password: \"{{ database_password }}x\"\n");
    let loaded = load(&sources(JINJA_GLOBALS, &passwords));
    let out = render_plain(&loaded.diagnostics);
    assert!(!loaded.diagnostics.iter().any(|d| d.is_error()), "{out}");
    let c = loaded.config.expect("loads");
    let g = &c.globals;
    assert_eq!(g.kolla_internal_vip_address.as_deref(), Some("192.0.2.10"));
    assert_eq!(g.public_host().as_deref(), Some("cloud.example.com"));
    assert_eq!(g.openstack_region_name, "lab-1");
    assert_eq!(g.images.openstack_tag, "2025.1-debian-bookworm");
    assert!(g.is_enabled("keystone") && g.is_enabled("nova") && !g.is_enabled("cinder"));
    assert_eq!(g.vars["openstack_logging_debug"], true);
    assert_eq!(c.passwords.get("database_password"), Some("db-lab-1"));
    assert_eq!(
        c.passwords.get("keystone_admin_password"),
        Some("db-lab-1x")
    );
    // Warnings only for what has no effect on Kubernetes.
    let warned: Vec<_> = loaded
        .diagnostics
        .iter()
        .map(|d| d.field.clone().unwrap())
        .collect();
    assert_eq!(
        warned,
        [
            "kolla_internal_fqdn",
            "kolla_external_vip_interface",
            "api_interface",
            "enable_fluentd"
        ]
    );
    // The tunnel interface is honoured, with its Jinja value evaluated.
    assert_eq!(g.tunnel_interface.as_deref(), Some("ens3"));
}

#[test]
fn jinja_errors_name_file_line_variable_and_chain() {
    let text = "---\nopenstack_region_name: \"{{ region_base }}-1\"\npublic: \"{{ kolla_external_fqdn }}\"\na: \"{{ b }}\"\nb: \"{{ a }}\"\nleak: \"{{ database_password }}\"\n";
    let loaded = load(&sources(
        text,
        "database_password: Sup3rSecret\nrabbitmq_password: \"{{ hidden_name }}\"\n",
    ));
    assert!(loaded.config.is_none());
    let found: Vec<_> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.file.clone(), d.field.clone().unwrap(), d.line))
        .collect();
    let want = [
        ("globals.yml", "openstack_region_name", 2),
        ("globals.yml", "public", 3),
        ("globals.yml", "a", 4),
        ("globals.yml", "leak", 6),
        ("passwords.yml", "rabbitmq_password", 2),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(f, k, l)| (f.to_string(), k.to_string(), *l))
        .collect();
    assert_eq!(found, want);
    let out = render_plain(&loaded.diagnostics);
    assert!(
        !out.contains("Sup3rSecret") && !out.contains("hidden_name"),
        "{out}"
    );
    insta::assert_snapshot!(out);
}

#[test]
fn refused_settings_are_errors_naming_the_setting_and_why() {
    let text = "---\nneutron_plugin_agent: ovn\nkolla_enable_tls_internal: \"yes\"\nglance_backend_ceph: \"{{ 'yes' }}\"\nenable_octavia: true\nenable_cinder: \"yes\"\nenable_haproxy: \"yes\"\n";
    let (globals, diags) = load_globals(text);
    assert!(globals.is_none());
    let errors: Vec<_> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.field.clone().unwrap(), d.line))
        .collect();
    let want: Vec<(String, u64)> = [
        ("neutron_plugin_agent", 2),
        ("kolla_enable_tls_internal", 3),
        ("glance_backend_ceph", 4),
        ("enable_octavia", 5),
    ]
    .iter()
    .map(|(k, l)| (k.to_string(), *l))
    .collect();
    assert_eq!(errors, want);
    insta::assert_snapshot!(render_plain(&diags));
}

#[test]
fn tls_on_the_public_endpoints_needs_a_public_address() {
    let (globals, diags) = load_globals("---\nkolla_enable_tls_external: \"yes\"\n");
    assert!(globals.is_none());
    let error = diags.iter().find(|d| d.is_error()).expect("an error");
    assert_eq!(error.field.as_deref(), Some("kolla_enable_tls_external"));
    assert_eq!(error.line, 2);
    assert!(
        error.message.contains("public address"),
        "{}",
        error.message
    );

    let (globals, diags) = load_globals(
        "---\nkolla_enable_tls_external: \"yes\"\nkolla_external_vip_address: 172.24.4.1\nkolla_admin_openrc_cacert: /etc/ssl/our-ca.pem\n",
    );
    assert!(!diags.iter().any(|d| d.is_error()), "{diags:?}");
    let g = globals.expect("valid");
    assert!(g.tls.external);
    assert_eq!(g.public_scheme(), "https");
    assert_eq!(
        g.tls.admin_openrc_cacert.as_deref(),
        Some("/etc/ssl/our-ca.pem")
    );
}

#[test]
fn a_lone_carriage_return_is_refused_at_its_line_in_every_file() {
    // YAML reads a lone CR as a line break; line numbers counted by line feeds would be off
    // after it, so the file is refused where the CR is.
    let globals = "---\nenable_cinder: \"no\"\nopenstack_region_name: [\r\rRegionOne]\nkolla_base_distro: bad\n";
    let loaded = load(&sources(globals, "database_password: x\n"));
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.file == "globals.yml")
        .expect("a globals.yml error");
    assert!(d.is_error());
    assert_eq!((d.line, d.column), (3, 25), "{d}");
    assert!(d.message.contains("carriage return"), "{d}");

    let catalog = "services:\n  nova-api:\n    depends_on: [\r\r\rkeystone]\n";
    let loaded = load(&Sources {
        catalog: Some(catalog.as_bytes().to_vec()),
        ..sources("---\n", "database_password: x\n")
    });
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.file == "catalog.yml")
        .expect("a catalog.yml error");
    assert_eq!(d.line, 3, "{d}");

    // A password file: the position only, never the text around it.
    let loaded = load(&sources(
        "---\n",
        "database_password: \"Sup3rSecret\rmore\"\n",
    ));
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.file == "passwords.yml")
        .expect("a passwords.yml error");
    assert_eq!(d.line, 1, "{d}");
    assert!(!render_plain(&loaded.diagnostics).contains("Sup3rSecret"));

    // CRLF line endings are fine.
    let loaded = load(&sources(
        "---\r\nenable_cinder: \"no\"\r\n",
        "database_password: x\r\n",
    ));
    assert!(
        loaded
            .diagnostics
            .iter()
            .all(|d| !d.message.contains("carriage return")),
        "{}",
        render_plain(&loaded.diagnostics)
    );
}

/// Cinder in Ceph with the operator's two files present (`with_files`) or not.
fn ceph_sources(globals: &str, with_files: bool) -> Sources {
    let mut s = sources(globals, &kstack_config::testing::passwords_yml(1));
    if with_files {
        s.overrides.insert(
            "cinder/ceph.conf".into(),
            b"[global]\nfsid = 5cc463da-cd3f-447c-bc3a-cd1e8720331a\nmon_host = 10.0.0.1\n"
                .to_vec(),
        );
        s.overrides.insert(
            "cinder/cinder-volume/ceph.client.cinder.keyring".into(),
            b"[client.cinder]\n\tkey = AQBxTbRdvsG3JxAA+mYGYlnJrHd64fc5Yx1tuQ==\n".to_vec(),
        );
    }
    s
}

#[test]
fn cinder_in_ceph_needs_the_operators_ceph_files_and_names_each_missing_one() {
    let globals = "enable_cinder: \"yes\"\ncinder_backend_ceph: \"yes\"\n";
    let loaded = load(&ceph_sources(globals, false));
    assert!(loaded.config.is_none());
    let missing: Vec<&str> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.file.as_str())
        .collect();
    assert_eq!(
        missing,
        [
            "config/cinder/ceph.conf",
            "config/cinder/cinder-volume/ceph.client.cinder.keyring"
        ]
    );
    let text = render_plain(&loaded.diagnostics);
    assert!(text.contains("`cinder_backend_ceph` is on"), "{text}");
    assert!(text.contains("client.cinder"), "{text}");

    // Present, they load with no warning that kstack does not use them.
    let loaded = load(&ceph_sources(globals, true));
    assert!(
        loaded.config.is_some(),
        "{}",
        render_plain(&loaded.diagnostics)
    );
    assert!(
        loaded.diagnostics.is_empty(),
        "{}",
        render_plain(&loaded.diagnostics)
    );

    // Other names for the cluster and the user name other files.
    let loaded = load(&ceph_sources(
        &format!("{globals}ceph_cluster: backup\nceph_cinder_user: cinder2\n"),
        false,
    ));
    let files: Vec<&str> = loaded.diagnostics.iter().map(|d| d.file.as_str()).collect();
    assert_eq!(
        files,
        [
            "config/cinder/backup.conf",
            "config/cinder/cinder-volume/backup.client.cinder2.keyring"
        ]
    );
}

#[test]
fn a_keyring_without_a_key_is_an_error_naming_it() {
    let mut s = ceph_sources(
        "enable_cinder: \"yes\"\ncinder_backend_ceph: \"yes\"\n",
        true,
    );
    s.overrides.insert(
        "cinder/cinder-volume/ceph.client.cinder.keyring".into(),
        b"[client.cinder]\n\tcaps mon = \"profile rbd\"\n".to_vec(),
    );
    let loaded = load(&s);
    assert!(loaded.config.is_none());
    let d = loaded.diagnostics.iter().find(|d| d.is_error()).unwrap();
    assert_eq!(
        d.file,
        "config/cinder/cinder-volume/ceph.client.cinder.keyring"
    );
    assert!(d.message.contains("no `key = ...` line"), "{d}");
}

#[test]
fn ceph_files_without_the_setting_are_unused_and_warned_about() {
    let loaded = load(&ceph_sources("enable_cinder: \"yes\"\n", true));
    let config = loaded.config.expect("loads");
    assert!(config.globals.cinder_ceph.is_none());
    let warned: Vec<&str> = loaded
        .diagnostics
        .iter()
        .filter(|d| !d.is_error() && d.message.contains("kstack does not use this file"))
        .map(|d| d.file.as_str())
        .collect();
    assert_eq!(warned.len(), 2, "{}", render_plain(&loaded.diagnostics));
}

#[test]
fn a_ceph_name_that_cannot_name_a_file_is_refused_at_its_line() {
    let loaded = load(&ceph_sources(
        "enable_cinder: \"yes\"\ncinder_backend_ceph: \"yes\"\nceph_cinder_user: \"../cinder\"\n",
        true,
    ));
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.is_error())
        .expect("an error");
    assert_eq!((d.file.as_str(), d.line), ("globals.yml", 3), "{d}");
    assert!(d.message.contains("is not a Ceph name"), "{d}");
}
