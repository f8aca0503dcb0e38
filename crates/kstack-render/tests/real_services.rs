//! What the real 2025.1 services need from kstack's files, learnt by running them on the
//! rendered default cloud: a WSGI script Apache may serve, data directories owned by the
//! service user, nova's cell0 mapped and migrated, the Apache and MariaDB paths of the image's
//! distribution, and a MariaDB health check that can log in.

use std::collections::{BTreeMap, BTreeSet};

use kstack_config::Config;
use kstack_model::catalog::{Phase, VolumeKind};
use kstack_model::globals::Globals;
use kstack_render::{ContainerFiles, Object, Target, compose, kubernetes, render_files, tasks};

fn globals_with(vars: serde_json::Value) -> Globals {
    let serde_json::Value::Object(m) = vars else {
        unreachable!()
    };
    Globals::from_vars(&m.into_iter().collect()).unwrap()
}

fn config(globals: Globals) -> Config {
    kstack_config::testing::config(globals, &[])
}

fn file<'a>(files: &'a [ContainerFiles], container: &str, name: &str) -> &'a str {
    &files
        .iter()
        .find(|c| c.container == container && c.host.is_none())
        .and_then(|c| c.files.iter().find(|f| f.name == name))
        .unwrap_or_else(|| panic!("no {container}/{name}"))
        .content
}

fn config_json(files: &[ContainerFiles], container: &str) -> serde_json::Value {
    serde_json::from_str(file(files, container, "config.json")).unwrap()
}

/// The `dest` of the config.json entry copying `source_name`.
fn dest_of(json: &serde_json::Value, source_name: &str) -> String {
    json["config_files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["source"]
                .as_str()
                .is_some_and(|s| s.ends_with(&format!("/{source_name}")))
        })
        .unwrap_or_else(|| panic!("no config file {source_name} in {json}"))["dest"]
        .as_str()
        .unwrap()
        .to_owned()
}

// ---- Apache: the WSGI script must be servable -------------------------------------------------

/// The 2025.1 WSGI entry points (checked against the 2025.1 wheels: keystone 27.1.0 and
/// openstack-heat 24.1.2 install these `wsgi_scripts` into the venv's `bin`; Kolla's images
/// link `lib/python3` to the distribution's Python, so horizon's module has a fixed path).
const WSGI_SCRIPTS: &[(&str, &str)] = &[
    (
        "wsgi-keystone.conf",
        "/var/lib/kolla/venv/bin/keystone-wsgi-public",
    ),
    (
        "wsgi-heat-api.conf",
        "/var/lib/kolla/venv/bin/heat-wsgi-api",
    ),
    (
        "wsgi-heat-api-cfn.conf",
        "/var/lib/kolla/venv/bin/heat-wsgi-api-cfn",
    ),
    (
        "horizon.conf",
        "/var/lib/kolla/venv/lib/python3/site-packages/openstack_dashboard/wsgi.py",
    ),
];

/// Whether Apache grants access to `script` in `conf`: a `<Location "/">` granting all, or a
/// `<Directory>` holding the script's directory whose grant (inside a `<FilesMatch>` naming
/// the script, if any) is `Require all granted`.
fn grants(conf: &str, script: &str) -> bool {
    let (dir, name) = script.rsplit_once('/').unwrap();
    let mut blocks: Vec<(String, String)> = Vec::new(); // (opening line, body)
    let mut open: Vec<(String, String)> = Vec::new();
    for line in conf.lines().map(str::trim) {
        if line.starts_with("</") {
            if let Some((head, body)) = open.pop() {
                if let Some(parent) = open.last_mut() {
                    parent.1.push_str(&format!("{head}\n{body}\n{line}\n"));
                }
                blocks.push((head, body));
            }
        } else if line.starts_with('<') {
            open.push((line.to_owned(), String::new()));
        } else if let Some(cur) = open.last_mut() {
            cur.1.push_str(line);
            cur.1.push('\n');
        }
    }
    let arg = |head: &str| {
        head.trim_start_matches('<')
            .trim_end_matches('>')
            .split_once(' ')
            .map(|(_, a)| a.trim().trim_matches('"').to_owned())
            .unwrap_or_default()
    };
    blocks.iter().any(|(head, body)| {
        let granted = body.contains("Require all granted");
        if head.starts_with("<Location ") {
            return arg(head) == "/" && granted;
        }
        if !head.starts_with("<Directory ") {
            return false;
        }
        let d = arg(head);
        if !(dir == d || dir.starts_with(&format!("{}/", d.trim_end_matches('/')))) {
            return false;
        }
        if body.contains("<FilesMatch") {
            // `<FilesMatch "^name$">`: the grant must be inside one naming the script.
            body.lines()
                .filter(|l| l.starts_with("<FilesMatch"))
                .any(|l| arg(l).trim_start_matches('^').trim_end_matches('$') == name)
                && granted
        } else {
            granted
        }
    })
}

#[test]
fn every_apache_vhost_serves_a_2025_1_wsgi_script_it_grants_access_to() {
    let files = render_files(&config(Globals::default()), Target::Kubernetes).unwrap();
    let mut seen = BTreeSet::new();
    let mut denied = Vec::new();
    for cf in &files {
        for f in &cf.files {
            let Some(script) = f
                .content
                .lines()
                .find_map(|l| l.trim().strip_prefix("WSGIScriptAlias / "))
            else {
                continue;
            };
            let script = script.trim().trim_matches('"');
            let want = WSGI_SCRIPTS
                .iter()
                .find(|(n, _)| *n == f.name)
                .unwrap_or_else(|| panic!("{}: an Apache vhost this test does not know", f.name));
            if script != want.1 {
                denied.push(format!(
                    "{}: {script} is not the 2025.1 entry point {}",
                    f.name, want.1
                ));
            } else if !grants(&f.content, script) {
                denied.push(format!(
                    "{}/{}: Apache answers 403: nothing grants access to {script}",
                    cf.container, f.name
                ));
            }
            seen.insert(f.name.clone());
        }
    }
    assert!(denied.is_empty(), "{}", denied.join("\n"));
    assert_eq!(seen.len(), WSGI_SCRIPTS.len(), "{seen:?}");
}

#[test]
fn the_grant_check_can_fail() {
    let script = "/var/lib/kolla/venv/bin/keystone-wsgi-public";
    let bare = "<VirtualHost *:5000>\n    WSGIScriptAlias / /var/lib/kolla/venv/bin/keystone-wsgi-public\n</VirtualHost>\n";
    assert!(!grants(bare, script));
    let other = "<Directory \"/var/lib/kolla/venv/bin\">\n    <FilesMatch \"^heat-wsgi-api$\">\n        Require all granted\n    </FilesMatch>\n</Directory>\n";
    assert!(!grants(other, script));
    let ok = other.replace("heat-wsgi-api", "keystone-wsgi-public");
    assert!(grants(&ok, script));
}

// ---- Data directories on volumes belong to the service's user ---------------------------------

#[test]
fn data_volumes_are_chowned_to_the_service_user_by_kolla_set_configs() {
    let config = config(Globals::default());
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let permissions = |container: &str| -> Vec<serde_json::Value> {
        config_json(&files, container)["permissions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let entry = |container: &str, path: &str| -> serde_json::Value {
        permissions(container)
            .into_iter()
            .find(|p| p["path"] == path)
            .unwrap_or_else(|| panic!("{container}: no permissions entry for {path}"))
    };
    // On Compose, keystone-manage fernet_setup and credential_setup (one-shot services with
    // keystone's config) and the WSGI processes (user keystone) write and read the keys.
    let compose = render_files(&config, Target::Compose).unwrap();
    let keystone = config_json(&compose, "keystone");
    for (path, perm) in [
        ("/etc/keystone/fernet-keys", "0770"),
        ("/etc/keystone/credential-keys", "0700"),
    ] {
        let p = keystone["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["path"] == path)
            .unwrap_or_else(|| panic!("compose: no permissions entry for {path}"));
        assert_eq!(
            (&p["owner"], &p["perm"]),
            (&"keystone:keystone".into(), &perm.into())
        );
    }
    // On Kubernetes they are Secrets mounted read-only: a chown there would fail the start.
    for path in ["/etc/keystone/fernet-keys", "/etc/keystone/credential-keys"] {
        assert!(
            !permissions("keystone").iter().any(|p| p["path"] == path),
            "kubernetes: {path} must not be chowned"
        );
    }
    // mysql_install_db (the bootstrap Job, same config.json) runs as mysql on a fresh volume.
    let mysql = entry("mariadb", "/var/lib/mysql");
    assert_eq!(
        (&mysql["owner"], &mysql["recurse"]),
        (&"mysql:mysql".into(), &true.into())
    );
    assert_eq!(
        entry("rabbitmq", "/var/lib/rabbitmq")["owner"],
        "rabbitmq:rabbitmq"
    );
    assert_eq!(
        entry("glance-api", "/var/lib/glance")["owner"],
        "glance:glance"
    );
    assert_eq!(
        entry("nova-compute", "/var/lib/nova/instances")["owner"],
        "nova:nova"
    );

    // Every data volume (a claim, or a host directory kstack keeps state in) of a container
    // that does not run as root is chowned to that container's user.
    let mut checked = 0;
    for name in &config.enabled {
        let s = &config.catalog.services[name];
        for c in s.containers.iter().filter(|c| c.user != "root") {
            for v in &s.volumes {
                let data = match &v.kind {
                    VolumeKind::PersistentClaim { .. } => true,
                    VolumeKind::HostPath { path } => path.starts_with("/var/lib/kstack/"),
                    VolumeKind::SharedEmptyDir => true,
                    // Read-only Secrets here (checked above).
                    VolumeKind::KeyRepository { .. } => false,
                };
                // libvirtd's state, written by nova-libvirt (root); nova-compute reads it.
                let other_owner =
                    (name.as_str(), v.mount_path.as_str()) == ("nova-compute", "/var/lib/libvirt");
                if !data || v.read_only || other_owner {
                    continue;
                }
                let p = entry(&c.name, &v.mount_path);
                let owner = p["owner"].as_str().unwrap();
                assert_eq!(
                    owner.split(':').next(),
                    Some(c.user.as_str()),
                    "{name}/{}: {}",
                    c.name,
                    v.mount_path
                );
                checked += 1;
            }
        }
    }
    // Keystone's key repositories are not among them here (see above).
    assert!(checked >= 7, "{checked}");
}

// ---- nova: cell0 mapped and migrated ----------------------------------------------------------

/// What a task runs, as one line: its arguments, or `kolla_start` with its Kolla env.
fn runs(spec: &tasks::TaskSpec) -> String {
    match &spec.args {
        Some(a) if a.as_slice() != ["kolla_start"] => a.join(" "),
        _ => {
            let kolla: Vec<&str> = spec
                .env
                .keys()
                .filter(|k| {
                    k.starts_with("KOLLA_")
                        && !k.starts_with("KOLLA_CONFIG")
                        && *k != "KOLLA_SERVICE_NAME"
                })
                .map(String::as_str)
                .collect();
            format!("kolla_start {} ({})", kolla.join(" "), spec.image)
        }
    }
}

/// The install-time tasks of `services` in an order the engine may run them: `after` within a
/// service, and every task of a service a task `needs` first.
fn install_order(config: &Config, services: &[&str]) -> Vec<(String, String, tasks::TaskSpec)> {
    let files = render_files(config, Target::Kubernetes).unwrap();
    let mut out: Vec<(String, String, tasks::TaskSpec)> = Vec::new();
    for name in services {
        let s = &config.catalog.services[*name];
        for need in s.bootstrap.iter().flat_map(|t| &t.needs) {
            assert!(
                !services[services.iter().position(|n| n == name).unwrap()..]
                    .contains(&need.as_str()),
                "{name} needs {need}, listed after it"
            );
        }
        let mut done: BTreeSet<&str> = BTreeSet::new();
        let todo: Vec<_> = s
            .bootstrap
            .iter()
            .filter(|t| !t.phase.is_upgrade())
            .collect();
        while done.len() < todo.len() {
            let next = todo
                .iter()
                .find(|t| {
                    !done.contains(t.name.as_str())
                        && t.after.iter().all(|a| {
                            done.contains(a.as_str()) || !todo.iter().any(|x| &x.name == a)
                        })
                })
                .unwrap_or_else(|| panic!("{name}: tasks in a cycle"));
            done.insert(&next.name);
            let spec = tasks::task_spec(config, Target::Kubernetes, &files, name, s, next).unwrap();
            out.push(((*name).to_owned(), next.name.clone(), spec));
        }
    }
    out
}

#[test]
fn nova_maps_cell0_then_migrates_it_and_the_conductor_has_nothing_left_to_install() {
    let config = config(Globals::default());
    let order = install_order(&config, &["nova-api", "nova-conductor"]);
    let lines: Vec<String> = order
        .iter()
        .map(|(s, t, spec)| format!("{s}/{t}: {}", runs(spec)))
        .collect();
    let text = lines.join("\n");
    let cells_at = order
        .iter()
        .position(|(s, t, _)| s == "nova-api" && t == "cells")
        .unwrap_or_else(|| panic!("no nova-api/cells task:\n{text}"));
    let (_, _, cells) = &order[cells_at];
    let script = runs(cells);
    // In one pod, in this order: the API database, cell0's mapping, cell1 (created or brought
    // up to date), then a plain `db sync`, which migrates the local cell and cell0 (now
    // mapped); `--local_cell` would migrate only the local cell and leave cell0 empty.
    let at = |what: &str| {
        script
            .find(what)
            .unwrap_or_else(|| panic!("`{what}` not in the cells task: {script}"))
    };
    let copy = at("sudo -E kolla_set_configs");
    let api_db = at("nova-manage api_db sync");
    let map_cell0 = at("nova-manage cell_v2 map_cell0");
    let list = at("nova-manage cell_v2 list_cells");
    let create_cell = at("nova-manage cell_v2 create_cell --name cell1");
    let full_sync = at("exec nova-manage db sync");
    assert!(!script.contains("--local_cell"), "{script}");
    assert!(copy < api_db && api_db < map_cell0, "{script}");
    assert!(map_cell0 < list && list < create_cell, "{script}");
    assert!(create_cell < full_sync, "{script}");
    // The script stops at the first failing step.
    assert!(script.contains("set -o errexit -o pipefail"), "{script}");
    // The conductor's image bootstrap (db sync --local_cell, online data migrations) would
    // repeat what `cells` did: the conductor has no install task.
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("nova-conductor/") && l.contains("KOLLA_BOOTSTRAP")),
        "{text}"
    );

    // map_cell0 without --database_connection derives cell0's URL from [database] connection
    // (`<db>` → `<db>_cell0`): the config it runs with must point at `nova`, whose `_cell0`
    // database db-create makes and grants to the same user.
    let nova_conf = &cells
        .files
        .iter()
        .find(|f| f.name == "nova.conf")
        .unwrap()
        .content;
    let db = nova_conf
        .split("[database]")
        .nth(1)
        .and_then(|s| s.lines().find(|l| l.starts_with("connection = ")))
        .unwrap();
    assert!(db.starts_with("connection = mysql+pymysql://nova:"), "{db}");
    assert!(db.ends_with("/nova"), "{db}");
    let create = order
        .iter()
        .find(|(s, t, _)| s == "nova-api" && t == "db-create")
        .map(|(_, _, spec)| {
            spec.files
                .iter()
                .find(|f| f.name == "db-create.sql")
                .unwrap()
                .content
                .clone()
        })
        .unwrap();
    assert!(
        create.contains("CREATE DATABASE IF NOT EXISTS `nova_cell0`;"),
        "{create}"
    );
    assert!(
        create.contains("GRANT ALL PRIVILEGES ON `nova_cell0`.* TO 'nova'@'%';"),
        "{create}"
    );

    // Re-runs on an existing cloud: every step either is idempotent in nova-manage or checks
    // first (an existing cell1 is updated, not created again); none is left to the first
    // install only.
    let task = config.catalog.services["nova-api"]
        .bootstrap
        .iter()
        .find(|x| x.name == "cells")
        .unwrap();
    assert_eq!(
        task.phase,
        Phase::Always,
        "cells runs again on every change"
    );
    assert!(script.contains("update_cell --cell_uuid"), "{script}");
}

// ---- What differs per distribution ------------------------------------------------------------

#[test]
fn each_distribution_gets_its_apache_and_mariadb_paths() {
    for (distro, rpm) in [
        ("rocky", true),
        ("centos", true),
        ("debian", false),
        ("ubuntu", false),
    ] {
        let g = globals_with(serde_json::json!({ "kolla_base_distro": distro }));
        let files = render_files(&config(g), Target::Kubernetes).unwrap();
        let (conf_dir, apache) = if rpm {
            ("/etc/httpd/conf.d", "/usr/sbin/httpd")
        } else {
            ("/etc/apache2/conf-enabled", "/usr/sbin/apache2")
        };
        let keystone = config_json(&files, "keystone");
        assert_eq!(
            dest_of(&keystone, "wsgi-keystone.conf"),
            format!("{conf_dir}/wsgi-keystone.conf"),
            "{distro}"
        );
        let startup = file(&files, "keystone", "keystone-startup.sh");
        assert!(
            startup.contains(&format!("exec {apache} -DFOREGROUND")),
            "{distro}: {startup}"
        );
        for (container, conf) in [
            ("heat-api", "wsgi-heat-api.conf"),
            ("horizon", "horizon.conf"),
        ] {
            let json = config_json(&files, container);
            assert_eq!(
                json["command"],
                format!("{apache} -DFOREGROUND"),
                "{distro} {container}"
            );
            assert!(
                dest_of(&json, conf).starts_with(&format!("{conf_dir}/")),
                "{distro} {container}"
            );
        }
        // Horizon's site takes the name of Debian's default site there, as in Kolla's
        // deployment.
        let horizon_site = if rpm {
            "horizon.conf"
        } else {
            "000-default.conf"
        };
        assert_eq!(
            dest_of(&config_json(&files, "horizon"), "horizon.conf"),
            format!("{conf_dir}/{horizon_site}"),
            "{distro}"
        );
        let mariadb = config_json(&files, "mariadb");
        let my_cnf = if rpm {
            "/etc/my.cnf"
        } else {
            "/etc/mysql/my.cnf"
        };
        assert_eq!(dest_of(&mariadb, "galera.cnf"), my_cnf, "{distro}");
        let galera = file(&files, "mariadb", "galera.cnf");
        let provider = if rpm {
            "/usr/lib64/galera/libgalera_smm.so"
        } else {
            "/usr/lib/galera/libgalera_smm.so"
        };
        assert!(
            galera.contains(&format!("wsrep_provider = {provider}\n")),
            "{distro}"
        );
        // Nothing of the other family anywhere.
        let foreign: &[&str] = if rpm {
            &["apache2", "/usr/lib/galera/", "/etc/mysql/"]
        } else {
            &["/etc/httpd", "/usr/sbin/httpd", "/usr/lib64/"]
        };
        for cf in &files {
            for f in &cf.files {
                for x in foreign {
                    assert!(
                        !f.content.contains(x),
                        "{distro}: {}/{} names {x}",
                        cf.container,
                        f.name
                    );
                }
            }
        }
    }
}

// ---- MariaDB's backup user: read privileges only, made by every server -----------------------

/// The file every MariaDB server runs at its start, making kstack's own users.
fn mariadb_init_file(files: &[ContainerFiles]) -> &kstack_render::RenderedFile {
    files
        .iter()
        .find(|c| c.container == "mariadb")
        .expect("the mariadb container's files")
        .files
        .iter()
        .find(|f| f.content.contains("CREATE USER IF NOT EXISTS"))
        .expect("a file creating kstack's MariaDB users")
}

#[test]
fn every_mariadb_server_makes_the_backup_user_with_read_privileges_only() {
    let config = config(Globals::default());
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let sql = mariadb_init_file(&files);
    assert!(sql.secret, "the init file carries passwords: a Secret");
    let user = format!("'{}'@'%'", kstack_model::backup::USER);
    let password = config
        .passwords
        .get(kstack_model::backup::PASSWORD)
        .unwrap();
    assert!(
        sql.content.contains(&format!(
            "CREATE USER IF NOT EXISTS {user} IDENTIFIED BY '{password}';"
        )),
        "{}",
        sql.content
    );
    let grants: Vec<&str> = sql
        .content
        .lines()
        .filter(|l| l.starts_with("GRANT") && l.contains(&user))
        .collect();
    assert_eq!(
        grants,
        [format!("GRANT SELECT, SHOW VIEW, TRIGGER, EVENT ON *.* TO {user};").as_str()]
    );
}

#[test]
fn a_passwords_yml_without_the_backup_users_password_is_refused_with_what_to_run() {
    let mut config = config(Globals::default());
    config
        .passwords
        .entries
        .remove(kstack_model::backup::PASSWORD);
    let err = render_files(&config, Target::Kubernetes)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("mariadb/mariadb-monitor.sql.j2")
            && err.contains("line ")
            && err.contains(&format!(
                "passwords.yml has no value for `{}`; run `kstack genpwd`",
                kstack_model::backup::PASSWORD
            )),
        "{err}"
    );
}

// ---- MariaDB health check: a monitor user and its password from a secret ----------------------

#[test]
fn mariadb_health_check_logs_in_as_the_monitor_user_with_a_password_from_a_secret() {
    let config = config(Globals::default());
    let password = config
        .passwords
        .get("mariadb_monitor_password")
        .unwrap()
        .to_owned();

    // Kubernetes: the password only by secretKeyRef; the user the server creates at start.
    let r = kubernetes::render(&config).unwrap();
    let Some(Object::StatefulSet(sts)) = r
        .objects
        .iter()
        .find(|o| o.kind() == "StatefulSet" && o.name() == "mariadb")
    else {
        panic!("no mariadb StatefulSet")
    };
    let c = &sts
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    let probe = c.readiness_probe.as_ref().unwrap().exec.as_ref().unwrap();
    assert_eq!(
        probe.command.as_deref(),
        Some(&["/usr/bin/clustercheck".to_owned()][..])
    );
    let env: BTreeMap<&str, &kstack_k8s::api::core::v1::EnvVar> = c
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e))
        .collect();
    let user = env
        .get("MYSQL_USERNAME")
        .and_then(|e| e.value.clone())
        .expect("MYSQL_USERNAME");
    let pw = env.get("MYSQL_PASSWORD").expect("MYSQL_PASSWORD");
    assert_eq!(pw.value, None, "the password is no env literal");
    let key_ref = pw
        .value_from
        .as_ref()
        .and_then(|v| v.secret_key_ref.as_ref())
        .expect("a secretKeyRef");
    let Some(Object::Secret(secret)) = r
        .objects
        .iter()
        .find(|o| o.kind() == "Secret" && o.name() == key_ref.name)
    else {
        panic!("no Secret {}", key_ref.name)
    };
    let value = &secret.data.as_ref().unwrap()[&key_ref.key];
    assert_eq!(String::from_utf8_lossy(&value.0), password);
    for e in c.env.iter().flatten() {
        assert!(!e.value.as_deref().unwrap_or_default().contains(&password));
    }

    // The server creates that user with that password: a secret file it runs at start.
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let sql = mariadb_init_file(&files);
    assert!(sql.secret);
    assert!(
        sql.content.contains(&format!("'{user}'@'%'")),
        "{}",
        sql.content
    );
    assert!(sql.content.contains(&password));
    let dest = dest_of(&config_json(&files, "mariadb"), &sql.name);
    let galera = file(&files, "mariadb", "galera.cnf");
    assert!(
        galera.contains(&format!("init_file = {dest}\n")),
        "{galera}"
    );

    // Compose: the same env, the password from a 0600 env file, never in compose.yaml.
    let b = compose::render(&config).unwrap();
    assert!(!b.to_yaml().contains(&password));
    let doc: serde_json::Value = serde_json::from_str(&b.to_json()).unwrap();
    let svc = &doc["services"]["mariadb"];
    assert_eq!(svc["environment"]["MYSQL_USERNAME"], user.as_str());
    assert!(svc["environment"].get("MYSQL_PASSWORD").is_none());
    let env_file = svc["env_file"][0].as_str().expect("an env_file");
    let path = env_file.trim_start_matches("./config/");
    let (dir, name) = path.rsplit_once('/').unwrap();
    let f = b
        .config_dirs
        .iter()
        .find(|d| d.path == dir)
        .and_then(|d| d.files.iter().find(|f| f.name == name))
        .unwrap_or_else(|| panic!("no {env_file} among the config files"));
    assert!(f.secret, "mode 0600");
    assert_eq!(f.content, format!("MYSQL_PASSWORD=\"{password}\"\n"));
}

// ---- Hosts without KVM or the OVS kernel module ----------------------------------------------

/// The long-running container `container` of the Kubernetes workload `name`.
fn workload_container(
    r: &kstack_render::Rendered,
    name: &str,
    container: &str,
) -> kstack_k8s::api::core::v1::Container {
    let template = r
        .objects
        .iter()
        .find_map(|o| match o {
            Object::DaemonSet(d) if d.metadata.name.as_deref() == Some(name) => {
                Some(d.spec.as_ref().unwrap().template.clone())
            }
            Object::Deployment(d) if d.metadata.name.as_deref() == Some(name) => {
                Some(d.spec.as_ref().unwrap().template.clone())
            }
            Object::StatefulSet(d) if d.metadata.name.as_deref() == Some(name) => {
                Some(d.spec.as_ref().unwrap().template.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no workload {name}"));
    template
        .spec
        .unwrap()
        .containers
        .into_iter()
        .find(|c| c.name == container)
        .unwrap_or_else(|| panic!("no container {container} in {name}"))
}

/// The plain env of the long-running container `container` of the Kubernetes workload `name`.
fn workload_env(
    r: &kstack_render::Rendered,
    name: &str,
    container: &str,
) -> BTreeMap<String, String> {
    workload_container(r, name, container)
        .env
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e.name, e.value?)))
        .collect()
}

/// The command of a container's postStart exec hook, if any.
fn post_start(c: &kstack_k8s::api::core::v1::Container) -> Option<Vec<String>> {
    c.lifecycle
        .as_ref()?
        .post_start
        .as_ref()?
        .exec
        .as_ref()?
        .command
        .clone()
}

/// An INI file's `key = value` lines under `[section]`.
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = s.to_owned();
        } else if current == section
            && let Some((k, v)) = line.split_once('=')
            && k.trim() == key
        {
            return Some(v.trim().to_owned());
        }
    }
    None
}

#[test]
fn the_userspace_datapath_and_qemu_are_settings_that_reach_every_file_they_change() {
    // The default: the kernel datapath, KVM, and Kolla's start script loading the module.
    let config = config(Globals::default());
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let agent = file(&files, "neutron-openvswitch-agent", "openvswitch_agent.ini");
    assert_eq!(
        ini_value(agent, "ovs", "datapath_type").as_deref(),
        Some("system")
    );
    for (c, f) in [
        ("neutron-dhcp-agent", "dhcp_agent.ini"),
        ("neutron-l3-agent", "l3_agent.ini"),
    ] {
        assert_eq!(
            ini_value(file(&files, c, f), "DEFAULT", "ovs_use_veth"),
            None,
            "{c}"
        );
    }
    let nova = file(&files, "nova-compute", "nova.conf");
    assert_eq!(
        ini_value(nova, "libvirt", "virt_type").as_deref(),
        Some("kvm")
    );
    let r = kubernetes::render(&config).unwrap();
    let env = workload_env(&r, "openvswitch-vswitchd", "openvswitch-vswitchd");
    assert!(!env.contains_key("KOLLA_SKIP_EXTEND_START"), "{env:?}");

    // A host without the module and without KVM: what an operator writes in globals.yml.
    let config = self::config(globals_with(serde_json::json!({
        "ovs_datapath": "netdev", "nova_compute_virt_type": "qemu",
    })));
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let agent = file(&files, "neutron-openvswitch-agent", "openvswitch_agent.ini");
    assert_eq!(
        ini_value(agent, "ovs", "datapath_type").as_deref(),
        Some("netdev")
    );
    for (c, f) in [
        ("neutron-dhcp-agent", "dhcp_agent.ini"),
        ("neutron-l3-agent", "l3_agent.ini"),
    ] {
        let text = file(&files, c, f);
        assert_eq!(
            ini_value(text, "DEFAULT", "ovs_use_veth").as_deref(),
            Some("true"),
            "{c}: {text}"
        );
        assert_eq!(
            ini_value(text, "DEFAULT", "interface_driver").as_deref(),
            Some("openvswitch"),
            "{c}: {text}"
        );
    }
    let nova = file(&files, "nova-compute", "nova.conf");
    assert_eq!(
        ini_value(nova, "libvirt", "virt_type").as_deref(),
        Some("qemu")
    );
    let r = kubernetes::render(&config).unwrap();
    let env = workload_env(&r, "openvswitch-vswitchd", "openvswitch-vswitchd");
    assert_eq!(
        env.get("KOLLA_SKIP_EXTEND_START").map(String::as_str),
        Some("true")
    );
    // What the skipped script would have made: the log directory the command writes to.
    assert!(
        config.catalog.services["openvswitch-vswitchd"]
            .volumes
            .iter()
            .any(|v| v.mount_path == "/var/log/kolla/openvswitch"),
        "ovs-vswitchd exits when its --log-file directory is missing"
    );
    // The OVS agent exits when a mapped bridge is missing: vswitchd makes them after it
    // starts, on the same datapath, each with its external interface.
    let bridges = file(&files, "openvswitch-vswitchd", "ovs-bridges.sh");
    assert!(
        bridges.contains(
            "--may-exist add-br br-ex -- set Bridge br-ex datapath_type=netdev fail_mode=standalone\n"
        ),
        "{bridges}"
    );
    assert!(
        bridges.contains("--may-exist add-port br-ex eth1\n"),
        "{bridges}"
    );
    let vswitchd = config.catalog.services["openvswitch-vswitchd"].containers[0].clone();
    assert_eq!(
        vswitchd.post_start,
        ["/bin/bash", "/var/lib/kolla/config_files/ovs-bridges.sh"]
    );
    let hook = post_start(&workload_container(
        &r,
        "openvswitch-vswitchd",
        "openvswitch-vswitchd",
    ))
    .expect("a postStart hook on vswitchd");
    assert_eq!(hook, vswitchd.post_start);
    // The userspace datapath must know which checksums a guest or a namespace left to
    // offload, or its security groups drop every TCP packet: the database says so before
    // vswitchd starts (a postStart hook of the database server, which vswitchd waits for).
    let settings = file(&files, "openvswitch-db-server", "ovs-db-settings.sh");
    assert!(
        settings.contains(
            "ovs-vsctl --retry --timeout=60 --no-wait set Open_vSwitch . other_config:userspace-tso-enable=true\n"
        ),
        "{settings}"
    );
    let db = config.catalog.services["openvswitch-db-server"].containers[0].clone();
    assert_eq!(
        db.post_start,
        [
            "/bin/bash",
            "/var/lib/kolla/config_files/ovs-db-settings.sh"
        ]
    );
    assert_eq!(
        post_start(&workload_container(
            &r,
            "openvswitch-db-server",
            "openvswitch-db-server"
        )),
        Some(db.post_start.clone())
    );
    assert!(
        config.catalog.services["openvswitch-vswitchd"]
            .depends_on
            .iter()
            .any(|d| d == "openvswitch-db-server"),
        "vswitchd must start after the database has its settings"
    );
    // Only vswitchd skips its start script.
    let env = workload_env(&r, "openvswitch-db-server", "openvswitch-db-server");
    assert!(!env.contains_key("KOLLA_SKIP_EXTEND_START"), "{env:?}");
    // The single node gets the same env.
    let b = compose::render(&config).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&b.to_json()).unwrap();
    assert_eq!(
        doc["services"]["openvswitch-vswitchd"]["environment"]["KOLLA_SKIP_EXTEND_START"],
        "true"
    );
    assert_eq!(
        doc["services"]["openvswitch-vswitchd"]["post_start"][0]["command"],
        serde_json::json!(vswitchd.post_start)
    );

    // Two external interfaces: two bridges, each with its port; the kernel datapath.
    let config = self::config(globals_with(serde_json::json!({
        "neutron_external_interface": "eth1, bond0.100",
    })));
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let bridges = file(&files, "openvswitch-vswitchd", "ovs-bridges.sh");
    // The kernel datapath needs no such setting, and an earlier one is removed.
    let settings = file(&files, "openvswitch-db-server", "ovs-db-settings.sh");
    assert!(
        settings.contains("remove Open_vSwitch . other_config userspace-tso-enable\n")
            && !settings.contains("userspace-tso-enable=true"),
        "{settings}"
    );
    for line in [
        "--may-exist add-br br-ex -- set Bridge br-ex datapath_type=system fail_mode=standalone\n",
        "--may-exist add-port br-ex eth1\n",
        "--may-exist add-br br-ex2 -- set Bridge br-ex2 datapath_type=system fail_mode=standalone\n",
        "--may-exist add-port br-ex2 bond0.100\n",
    ] {
        assert!(bridges.contains(line), "{line} in {bridges}");
    }
    let agent = file(&files, "neutron-openvswitch-agent", "openvswitch_agent.ini");
    assert_eq!(
        ini_value(agent, "ovs", "bridge_mappings").as_deref(),
        Some("physnet1:br-ex,physnet2:br-ex2")
    );
}

#[test]
fn an_interface_name_that_is_not_one_is_refused() {
    for (key, value) in [
        ("neutron_external_interface", "eth1; reboot"),
        ("neutron_external_interface", "eth1,$(id)"),
        ("network_interface", "a-name-longer-than-15"),
        ("network_interface", ""),
    ] {
        let vars = serde_json::json!({ key: value });
        let serde_json::Value::Object(m) = vars else {
            unreachable!()
        };
        let issues = Globals::from_vars(&m.into_iter().collect()).unwrap_err();
        assert_eq!(issues.len(), 1, "{key}: {value}: {issues:?}");
        assert_eq!(issues[0].key, key);
        assert!(issues[0].help.contains("network interface"), "{issues:?}");
    }
}

#[test]
fn a_datapath_or_virt_type_kstack_does_not_render_is_refused() {
    let vars = serde_json::json!({ "ovs_datapath": "dpdk", "nova_compute_virt_type": "xen" });
    let serde_json::Value::Object(m) = vars else {
        unreachable!()
    };
    let issues = Globals::from_vars(&m.into_iter().collect()).unwrap_err();
    let keys: BTreeSet<&str> = issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["nova_compute_virt_type", "ovs_datapath"])
    );
    for i in &issues {
        assert!(
            i.help.contains("qemu") || i.help.contains("netdev"),
            "{i:?}"
        );
    }
}

#[test]
fn libvirtd_gets_the_sasl_user_nova_compute_logs_in_as() {
    let config = config(Globals::default());
    let password = config
        .passwords
        .get("libvirt_sasl_password")
        .unwrap()
        .to_owned();
    let files = render_files(&config, Target::Kubernetes).unwrap();
    // libvirtd takes only SASL logins for writing: over TCP (other hosts, as `nova`), and on
    // its UNIX socket, which nova-compute beside it uses (SCRAM gives no security layer, and
    // libvirtd offers no mechanism without one on plain TCP: "no SASL mechanisms are
    // available" on the real node). Reading (`virsh -r`) needs no login.
    let libvirtd = file(&files, "nova-libvirt", "libvirtd.conf");
    assert!(libvirtd.contains("auth_tcp = \"sasl\""), "{libvirtd}");
    assert!(libvirtd.contains("auth_unix_rw = \"sasl\""), "{libvirtd}");
    assert!(libvirtd.contains("auth_unix_ro = \"none\""), "{libvirtd}");
    let nova = file(&files, "nova-compute", "nova.conf");
    assert_eq!(
        ini_value(nova, "libvirt", "connection_uri").as_deref(),
        Some("qemu:///system"),
        "{nova}"
    );
    let auth = file(&files, "nova-compute", "auth.conf");
    assert!(auth.contains("authname=nova\n"), "{auth}");
    // The libvirt container creates that user after it starts, with the password from its env.
    let script = file(&files, "nova-libvirt", "libvirt-sasl-user.sh");
    assert!(
        script.contains("\"$LIBVIRT_SASL_PASSWORD\" | saslpasswd2 -p -a libvirt -f /etc/libvirt/passwd.db nova\n"),
        "{script}"
    );
    assert!(!script.contains(&password));
    let sasl = file(&files, "nova-libvirt", "sasl.conf");
    assert!(
        sasl.contains("sasldb_path: /etc/libvirt/passwd.db"),
        "{sasl}"
    );
    let r = kubernetes::render(&config).unwrap();
    let c = &workload_container(&r, "nova-libvirt", "nova-libvirt");
    assert_eq!(
        post_start(c).unwrap_or_default(),
        [
            "/bin/bash",
            "/var/lib/kolla/config_files/libvirt-sasl-user.sh"
        ]
    );
    let env = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "LIBVIRT_SASL_PASSWORD")
        .expect("the password env");
    assert_eq!(env.value, None, "the password is no env literal");
    assert!(
        env.value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
            .is_some()
    );
}

#[test]
fn compute_hosts_are_mapped_to_their_cell_once_they_register_and_whenever_they_join() {
    let config = config(Globals::default());
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let scheduler = file(&files, "nova-scheduler", "nova.conf");
    assert_eq!(
        ini_value(scheduler, "scheduler", "discover_hosts_in_cells_interval").as_deref(),
        Some("20")
    );
    // The deploy's discovery waits for a compute's service record instead of mapping nothing,
    // maps it, and fails when it is still not mapped; then it waits until no live compute is
    // disabled by nova itself (libvirtd restarted under it), and fails naming the hosts.
    let task = config.catalog.services["nova-compute"]
        .bootstrap
        .iter()
        .find(|t| t.name == "discover-hosts")
        .expect("a discover-hosts task");
    assert!(
        task.with_workload,
        "it polls, so it starts with the computes"
    );
    let kstack_model::catalog::BootstrapKind::Command { command, .. } = &task.task else {
        panic!("{task:?}")
    };
    assert_eq!(command[..2], ["bash", "-c"]);
    let script = &command[2];
    let order = [
        "sudo -E kolla_set_configs\n",
        "SELECT host FROM services WHERE `binary` = 'nova-compute' AND deleted = 0",
        "SELECT host FROM host_mappings",
        "rc=0; computes_mapped 600 || rc=$?\n",
        "if [ \"$rc\" != 0 ] && [ \"$rc\" != 3 ]; then exit \"$rc\"; fi\n",
        "if [ \"$rc\" = 3 ]; then\n",
        "nova-manage cell_v2 discover_hosts --by-service\n",
        "computes_mapped 1 || {",
        "exit 1; }",
        "python3 - 300 <<'PY'",
        "AND deleted = 0 AND disabled = 1 AND disabled_reason LIKE 'AUTO:%'",
        "> UTC_TIMESTAMP() - INTERVAL :down SECOND",
        "{\"down\": conf.service_down_time}",
        "if not disabled:\n        sys.exit(0)",
        "sys.exit(\"nova-compute still disabled by nova after %s s: %s;",
    ];
    let mut at = 0;
    for piece in order {
        let found = script[at..]
            .find(piece)
            .unwrap_or_else(|| panic!("{piece:?} not after byte {at} of:\n{script}"));
        at += found + piece.len();
    }
}

#[test]
fn qemu_limits_are_settings_a_host_that_cannot_raise_limits_sets_to_zero() {
    // kolla-ansible's defaults.
    let files = render_files(&config(Globals::default()), Target::Kubernetes).unwrap();
    let qemu = file(&files, "nova-libvirt", "qemu.conf");
    assert!(
        qemu.contains("max_files = 32768\n") && qemu.contains("max_processes = 131072\n"),
        "{qemu}"
    );
    // A host without CAP_SYS_RESOURCE (libvirtd: "cannot limit number of subprocesses").
    let config = config(globals_with(serde_json::json!({
        "qemu_max_files": 0, "qemu_max_processes": "0",
    })));
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let qemu = file(&files, "nova-libvirt", "qemu.conf");
    assert!(
        qemu.contains("max_files = 0\n") && qemu.contains("max_processes = 0\n"),
        "{qemu}"
    );
    let serde_json::Value::Object(m) =
        serde_json::json!({ "qemu_max_files": "many", "qemu_max_processes": -1 })
    else {
        unreachable!()
    };
    let issues = Globals::from_vars(&m.into_iter().collect()).unwrap_err();
    let keys: BTreeSet<&str> = issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["qemu_max_files", "qemu_max_processes"])
    );
}

#[test]
fn a_slow_health_check_on_a_busy_node_restarts_nothing_before_it_is_unready_for_minutes() {
    let r = kubernetes::render(&config(Globals::default())).unwrap();
    let c = &workload_container(&r, "rabbitmq", "rabbitmq");
    let ready = c.readiness_probe.as_ref().unwrap();
    let live = c.liveness_probe.as_ref().unwrap();
    // On the real node under load, healthcheck_rabbitmq (six Erlang CLI runs) took up to
    // 2 min: the broker went unready and was restarted again and again. Readiness gives it
    // 90 s, 3 tries every 30 s; liveness twice the time and the tries.
    assert_eq!(
        (ready.timeout_seconds, ready.failure_threshold),
        (Some(90), Some(3))
    );
    assert_eq!(
        (live.timeout_seconds, live.failure_threshold),
        (Some(180), Some(6))
    );
    assert_eq!(live.exec, ready.exec);
}

/// The command of a container's preStop exec hook, if any.
fn pre_stop(c: &kstack_k8s::api::core::v1::Container) -> Option<Vec<String>> {
    c.lifecycle
        .as_ref()?
        .pre_stop
        .as_ref()?
        .exec
        .as_ref()?
        .command
        .clone()
}

/// The drain sleep of a container's preStop hook, if any.
fn drain_sleep(c: &kstack_k8s::api::core::v1::Container) -> Option<i64> {
    Some(
        c.lifecycle
            .as_ref()?
            .pre_stop
            .as_ref()?
            .sleep
            .as_ref()?
            .seconds,
    )
}

#[test]
fn apache_and_glance_stop_gracefully_after_the_drain_and_others_only_drain() {
    // A public address, so HAProxy is deployed too.
    let config = config(globals_with(
        serde_json::json!({ "kolla_external_vip_address": "198.51.100.10" }),
    ));
    let r = kubernetes::render(&config).unwrap();
    let b = compose::render(&config).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&b.to_json()).unwrap();
    // Apache (WINCH) and HAProxy (USR1): the drain sleeps, then the kubelet's SIGTERM reaches
    // the image's init, which turns it into the graceful signal; no hook waits on the process
    // (it failed, a FailedPreStopHook event, whenever the process exited first).
    for (service, container, number, name) in [
        ("keystone", "keystone", 28, "SIGWINCH"),
        ("horizon", "horizon", 28, "SIGWINCH"),
        ("heat-api", "heat-api", 28, "SIGWINCH"),
        ("haproxy", "haproxy", 10, "SIGUSR1"),
    ] {
        let c = workload_container(&r, service, container);
        assert_eq!(pre_stop(&c), None, "{service}");
        assert_eq!(drain_sleep(&c), Some(5), "{service}");
        assert_eq!(
            c.command.as_deref().unwrap_or_default(),
            [
                "dumb-init",
                "--single-child",
                "--rewrite",
                &format!("15:{number}"),
                "--"
            ],
            "{service}"
        );
        assert_eq!(
            c.args.as_deref().unwrap_or_default(),
            ["kolla_start"],
            "{service}"
        );
        assert_eq!(doc["services"][service]["stop_signal"], name, "{service}");
    }
    // glance-api's workers get HUP (its parent would reload on it); Compose can signal only
    // the first process, so it keeps SIGTERM there.
    let c = workload_container(&r, "glance-api", "glance-api");
    assert_eq!((c.command.as_ref(), c.args.as_ref()), (None, None));
    let hook = pre_stop(&c).expect("glance-api: no preStop exec");
    let script = hook.last().unwrap();
    let drain = script.find("sleep 5").expect("drains");
    let workers = script
        .find("w=$(pgrep -P \"$(pgrep -o -P 1)\")")
        .expect("finds the workers");
    let signal = script.find("kill -HUP $w").expect("graceful stop");
    let wait = script.find("while kill -0 $p").expect("waits");
    assert!(
        drain < workers && workers < signal && signal < wait,
        "{script}"
    );
    assert!(!script.contains("kill -HUP 1"), "{script}");
    assert!(doc["services"]["glance-api"].get("stop_signal").is_none());
    // uWSGI and other eventlet services keep the plain drain.
    let c = workload_container(&r, "nova-api", "nova-api");
    assert_eq!(pre_stop(&c), None);
    assert_eq!(drain_sleep(&c), Some(5));
    assert_eq!((c.command.as_ref(), c.args.as_ref()), (None, None));
    assert!(doc["services"]["nova-api"].get("stop_signal").is_none());
}

#[test]
fn stopping_workers_without_a_signal_is_refused_by_the_catalog() {
    let mut catalog = kstack_model::catalog::Catalog::builtin().unwrap();
    let nova = catalog.services.get_mut("nova-scheduler").unwrap();
    nova.containers[0].stop_signal_to = kstack_model::catalog::StopTarget::Workers;
    let err = catalog.validate().unwrap_err().to_string();
    assert!(
        err.contains("nova-scheduler")
            && err.contains("`stop_signal_to: workers` needs a `stop_signal`"),
        "{err}"
    );
}

#[test]
fn a_stop_signal_that_is_not_one_is_refused_by_the_catalog() {
    let mut catalog = kstack_model::catalog::Catalog::builtin().unwrap();
    let keystone = catalog.services.get_mut("keystone").unwrap();
    keystone.containers[0].stop_signal = Some("SIGWINCH".into());
    let err = catalog.validate().unwrap_err().to_string();
    assert!(
        err.contains("stop_signal: SIGWINCH") && err.contains("without `SIG`"),
        "{err}"
    );
}

#[test]
fn public_endpoints_follow_the_external_fqdn_and_debug_follows_the_logging_setting() {
    // Default: public endpoints are the internal Service URLs; debug off.
    let config = config(Globals::default());
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let nova = file(&files, "nova-compute", "nova.conf");
    assert_eq!(
        ini_value(nova, "vnc", "novncproxy_base_url").as_deref(),
        Some("http://nova-novncproxy.openstack.svc:6080/vnc_lite.html")
    );
    assert_eq!(
        ini_value(nova, "DEFAULT", "debug").as_deref(),
        Some("false")
    );

    let config = self::config(globals_with(serde_json::json!({
        "kolla_external_fqdn": "cloud.example.com",
        "openstack_logging_debug": "yes",
    })));
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let nova = file(&files, "nova-compute", "nova.conf");
    assert_eq!(
        ini_value(nova, "vnc", "novncproxy_base_url").as_deref(),
        Some("http://cloud.example.com:6080/vnc_lite.html")
    );
    for (c, f) in [
        ("nova-compute", "nova.conf"),
        ("keystone", "keystone.conf"),
        ("glance-api", "glance-api.conf"),
        ("neutron-server", "neutron.conf"),
    ] {
        assert_eq!(
            ini_value(file(&files, c, f), "DEFAULT", "debug").as_deref(),
            Some("true"),
            "{c}"
        );
    }
    // Services still authenticate inside the cluster.
    assert_eq!(
        ini_value(
            file(&files, "glance-api", "glance-api.conf"),
            "keystone_authtoken",
            "www_authenticate_uri"
        )
        .as_deref(),
        Some("http://keystone.openstack.svc:5000")
    );
    // Keystone's own endpoints and every registered service's public endpoint.
    let tasks = install_order(&config, &["keystone", "glance-api"]);
    let bootstrap = tasks
        .iter()
        .filter_map(|(_, _, spec)| spec.args.as_ref().map(|a| a.join(" ")))
        .find(|a| a.contains("--bootstrap-public-url"))
        .expect("a keystone task runs keystone-manage bootstrap");
    assert!(
        bootstrap.contains("--bootstrap-public-url http://cloud.example.com:5000")
            && bootstrap.contains("--bootstrap-internal-url http://keystone.openstack.svc:5000"),
        "{bootstrap}"
    );
    let register = tasks
        .iter()
        .filter(|(s, _, _)| s == "glance-api")
        .flat_map(|(_, _, spec)| spec.files.iter())
        .find(|f| f.name == "register.json")
        .expect("glance registers its endpoints");
    let spec: serde_json::Value = serde_json::from_str(&register.content).unwrap();
    assert_eq!(
        spec["endpoints"],
        serde_json::json!([
            { "interface": "internal", "url": "http://glance-api.openstack.svc:9292" },
            { "interface": "public", "url": "http://cloud.example.com:9292" },
        ]),
        "{}",
        register.content
    );
}

/// Every Kolla bootstrap with a password in its env (mariadb, rabbitmq, heat) runs
/// `kolla_start` through the filter that hides those values: Kolla's start script traces each
/// command, and heat's bootstrap passes the domain admin's password on `openstack user
/// create`'s command line (found in the central log store on the real node).
#[test]
fn bootstraps_with_passwords_in_their_env_hide_them_from_the_log() {
    let config = config(Globals::default());
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let mut seen = BTreeSet::new();
    for (name, s) in &config.catalog.services {
        if !config.enabled.contains(name) {
            continue;
        }
        for t in &s.bootstrap {
            let spec = tasks::task_spec(&config, Target::Kubernetes, &files, name, s, t).unwrap();
            if !matches!(
                t.task,
                kstack_model::catalog::BootstrapKind::KollaBootstrap { .. }
            ) || spec.secret_env.is_empty()
            {
                continue;
            }
            let args = spec.args.clone().expect("a command that filters");
            let script = &args[2];
            assert!(
                script.starts_with("set -o pipefail; kolla_start 2>&1 | python3"),
                "{script}"
            );
            let names: Vec<&str> = spec.secret_env.keys().map(String::as_str).collect();
            assert!(
                script.ends_with(&format!(" {}", names.join(" "))),
                "{name}/{}: not every password env is filtered: {script}",
                t.name
            );
            seen.insert(name.clone());
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from(["heat-api", "mariadb", "rabbitmq"].map(String::from))
    );
}

/// The filter itself, run as the Job runs it: a `kolla_start` that traces a command line with
/// the password (as Kolla's does) and fails; the log gets `***`, and the Job fails with it.
#[test]
fn the_bootstrap_filter_hides_the_values_and_keeps_the_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("kolla_start");
    std::fs::write(
        &fake,
        "#!/bin/bash\nset -o xtrace\necho openstack user create --password \"$HEAT_DOMAIN_ADMIN_PASSWORD\"\necho \"cookie $RABBITMQ_CLUSTER_COOKIE done\" >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let args = tasks::redacted_kolla_start(
        [
            "HEAT_DOMAIN_ADMIN_PASSWORD",
            "RABBITMQ_CLUSTER_COOKIE",
            "UNSET_ONE",
        ]
        .into_iter(),
    );
    let out = std::process::Command::new(&args[0])
        .args(&args[1..])
        .env(
            "PATH",
            format!(
                "{}:{}",
                dir.path().display(),
                std::env::var("PATH").unwrap()
            ),
        )
        .env("HEAT_DOMAIN_ADMIN_PASSWORD", "s3cr3tPassw0rdValue")
        .env("RABBITMQ_CLUSTER_COOKIE", "C00kieValueXYZ")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{log}");
    assert!(!log.contains("s3cr3tPassw0rdValue"), "{log}");
    assert!(!log.contains("C00kieValueXYZ"), "{log}");
    assert!(
        log.contains("+ echo openstack user create --password ***"),
        "{log}"
    );
    assert!(log.contains("cookie *** done"), "{log}");
}
