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
    assert_eq!(warned, ["neutron_plugin_agent", "enable_haproxy"]);
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
