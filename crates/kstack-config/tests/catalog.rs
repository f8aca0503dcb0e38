//! catalog.yml in the config directory: merge, enabled services, the checks that need both.
use kstack_config::{Sources, load, render_plain};

fn passwords() -> String {
    kstack_config::templates::passwords_yml()
        .lines()
        .map(|l| match l.strip_suffix(':') {
            Some(key) if !l.starts_with(' ') && !key.ends_with("_ssh_key") => {
                format!("{key}: pw-{key}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect()
}

fn sources(globals: &str, catalog: Option<&str>) -> Sources {
    Sources {
        globals: Some(globals.as_bytes().to_vec()),
        passwords: Some(passwords().into_bytes()),
        catalog: catalog.map(|c| c.as_bytes().to_vec()),
        ..Sources::default()
    }
}

const GLOBALS: &str = kstack_config::templates::GLOBALS_YML;

#[test]
fn no_catalog_file_gives_builtin_and_enabled_services() {
    let loaded = load(&sources(GLOBALS, None));
    assert!(
        !loaded.has_errors(),
        "{}",
        render_plain(&loaded.diagnostics)
    );
    let c = loaded.config.unwrap();
    assert_eq!(c.catalog.services.len(), 29);
    assert!(c.enabled.contains("nova-api"));
    assert!(
        !c.enabled.contains("haproxy"),
        "no public address, so no public gateway"
    );
    assert!(
        !c.enabled.contains("cinder-api"),
        "cinder is off by default"
    );
    assert!(
        !c.enabled.contains("vlagent") && !c.enabled.contains("victoria-logs"),
        "central logging is off by default"
    );
}

#[test]
fn catalog_file_is_merged() {
    let cat = "services:\n  nova-api:\n    depends_on: [keystone]\n";
    let loaded = load(&sources(GLOBALS, Some(cat)));
    assert!(
        !loaded.has_errors(),
        "{}",
        render_plain(&loaded.diagnostics)
    );
    let c = loaded.config.unwrap();
    assert_eq!(c.catalog.services["nova-api"].depends_on, ["keystone"]);
}

#[test]
fn dependency_cycle_names_the_cycle_and_the_file() {
    let cat = "services:\n  openvswitch-vswitchd:\n    depends_on:\n      - openvswitch-db-server\n      - neutron-openvswitch-agent\n";
    let loaded = load(&sources(GLOBALS, Some(cat)));
    assert!(loaded.config.is_none());
    insta::assert_snapshot!(render_plain(&loaded.diagnostics));
}

#[test]
fn unknown_dependency_names_file_line_and_field() {
    let cat = "# operator additions\nservices:\n  nova-api:\n    depends_on:\n      - keystone\n      - nova-condutor\n";
    let loaded = load(&sources(GLOBALS, Some(cat)));
    let errors: Vec<_> = loaded.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, 6);
    insta::assert_snapshot!(render_plain(&loaded.diagnostics));
}

#[test]
fn a_catalog_dropping_a_port_kstack_addresses_names_it_and_what_to_add() {
    // The operator's `ports` replaces the built-in list whole: this one lost mariadb's `mysql`.
    let cat = "services:\n  mariadb:\n    ports:\n      - { name: wsrep, port: 4567 }\n      - { name: position, port: 4569 }\n";
    let loaded = load(&sources(GLOBALS, Some(cat)));
    assert!(loaded.config.is_none());
    let errors: Vec<_> = loaded.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{}", render_plain(&loaded.diagnostics));
    let e = errors[0];
    assert_eq!(
        (e.file.as_str(), e.line, e.field.as_deref()),
        ("catalog.yml", 3, Some("services.mariadb.ports"))
    );
    assert_eq!(
        e.message,
        "service `mariadb` has no port named `mysql`, which kstack addresses it by: add `{ name: mysql, port: <number> }` to `services.mariadb.ports` (an operator catalog's `ports` replaces the whole built-in list)"
    );
}

#[test]
fn bad_label_prefix_and_bad_catalog_are_all_reported() {
    let globals = format!("{GLOBALS}\nkstack_role_label_prefix: \"Kstack io/role-\"\n");
    let cat = "services:\n  nova-api:\n    depends_on: [nope]\n  extra:\n    role: control\n";
    let loaded = load(&sources(&globals, Some(cat)));
    let errors: Vec<String> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("kstack_role_label_prefix")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("unknown service `nope`")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("lacks field `project`")),
        "{errors:?}"
    );
}

#[test]
fn catalog_syntax_error_has_a_line() {
    let loaded = load(&sources(
        GLOBALS,
        Some("services:\n  nova-api:\n    depends_on: [\n"),
    ));
    let e = loaded.diagnostics.iter().find(|d| d.is_error()).unwrap();
    assert_eq!(e.file, "catalog.yml");
    assert!(e.line > 0, "{e}");
}

#[test]
fn a_bad_install_after_entry_names_file_line_field_and_what_to_write() {
    // nova-api may start on what it depends on; `rabbitmq/db-sync` names a task rabbitmq
    // does not have.
    let cat =
        "services:\n  nova-api:\n    install_after:\n      - keystone\n      - rabbitmq/db-sync\n";
    let loaded = load(&sources(GLOBALS, Some(cat)));
    assert!(loaded.config.is_none());
    let errors: Vec<_> = loaded.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{}", render_plain(&loaded.diagnostics));
    let e = errors[0];
    assert_eq!(
        (e.file.as_str(), e.line, e.field.as_deref()),
        ("catalog.yml", 3, Some("services.nova-api.install_after"))
    );
    assert!(e.message.contains("rabbitmq/db-sync"), "{}", e.message);
    insta::assert_snapshot!(render_plain(&loaded.diagnostics));
}

#[test]
fn a_bad_upgrade_before_entry_names_file_line_field_and_what_to_write() {
    // nova-scheduler does not depend on nova-conductor; nova-compute depends on nova-libvirt
    // and on nova-conductor, which itself depends on nova-api: nova-api's pods cannot wait for
    // nova-compute while nova-conductor, which nova-compute waits for, waits for nova-api.
    let cat = "services:\n  nova-scheduler:\n    upgrade_before: [nova-conductor]\n  nova-compute:\n    depends_on: [nova-conductor, nova-api]\n    upgrade_before:\n      - nova-api\n";
    let loaded = load(&sources(GLOBALS, Some(cat)));
    assert!(loaded.config.is_none());
    let errors: Vec<_> = loaded.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 2, "{}", render_plain(&loaded.diagnostics));
    let where_: Vec<_> = errors
        .iter()
        .map(|e| (e.file.as_str(), e.line, e.field.as_deref()))
        .collect();
    assert!(
        where_.contains(&(
            "catalog.yml",
            3,
            Some("services.nova-scheduler.upgrade_before")
        )),
        "{where_:?}"
    );
    assert!(
        where_.contains(&(
            "catalog.yml",
            6,
            Some("services.nova-compute.upgrade_before")
        )),
        "{where_:?}"
    );
    insta::assert_snapshot!(render_plain(&loaded.diagnostics));
}
