//! The default cloud on the single-node Compose target: snapshot, determinism, no secrets, and
//! equivalence with the Kubernetes target (same services, images, config, dependencies).

use std::collections::{BTreeMap, BTreeSet};

use kstack_config::Config;
use kstack_config::passwords::{self, Passwords, Secret};
use kstack_k8s::api::core::v1::{Container, PodSpec, Volume};
use kstack_model::catalog::{self, Catalog, Phase};
use kstack_model::globals::Globals;
use kstack_render::compose::{
    self, ComposeBundle, ComposeError, ComposeFile, ComposeService, Condition, MountKind,
};
use kstack_render::{Object, RenderError, Rendered, Target, kubernetes};

/// Every known plain password set to a distinct value (no SSH keys: generating RSA keys would
/// dominate the test time, and the Compose target uses none).
fn test_passwords() -> Passwords {
    let entries = passwords::KNOWN_KEYS
        .iter()
        .flat_map(|(_, keys)| keys.iter())
        .enumerate()
        .map(|(i, k)| {
            (
                (*k).to_owned(),
                Secret::Value(format!("Pw{i:03}x8mQ2rT5vK9wZ1nB4cD7")),
            )
        })
        .collect();
    Passwords { entries }
}

fn config_with(catalog: Catalog, globals: Globals) -> Config {
    Config::from_parts(globals, test_passwords(), Default::default(), catalog)
}

fn default_config() -> Config {
    config_with(Catalog::builtin().unwrap(), Globals::default())
}

fn service<'a>(b: &'a ComposeBundle, name: &str) -> &'a ComposeService {
    b.file
        .services
        .get(name)
        .unwrap_or_else(|| panic!("no Compose service {name}"))
}

fn condition(s: &ComposeService, on: &str) -> Option<Condition> {
    s.depends_on.get(on).map(|d| d.condition)
}

#[test]
fn default_cloud_snapshot() {
    let b = compose::render(&default_config()).unwrap();
    insta::assert_snapshot!("default_cloud_compose", b.to_yaml());
}

#[test]
fn rendering_twice_gives_the_same_bytes_and_the_yaml_reads_back() {
    let config = default_config();
    let a = compose::render(&config).unwrap();
    let b = compose::render(&config).unwrap();
    assert_eq!(a.to_yaml(), b.to_yaml());
    assert_eq!(a.config_dirs, b.config_dirs);
    let back: ComposeFile = serde_saphyr::from_str(&a.to_yaml()).unwrap();
    assert_eq!(back, a.file, "e.g. `restart: \"no\"` stays a string");
    assert!(a.to_yaml().contains("restart: \"no\"") || a.to_yaml().contains("restart: 'no'"));
}

#[test]
fn no_password_is_in_the_compose_file_and_every_file_holding_one_is_secret() {
    let config = default_config();
    let secrets: Vec<&str> = config
        .passwords
        .entries
        .keys()
        .filter_map(|k| config.passwords.get(k))
        .collect();
    assert!(secrets.len() > 20);
    let b = compose::render(&config).unwrap();
    let yaml = b.to_yaml();
    for s in &secrets {
        assert!(!yaml.contains(s), "a password is in compose.yaml");
        assert!(!b.to_json().contains(s), "a password is in the JSON form");
    }
    let mut found = BTreeSet::new();
    for d in &b.config_dirs {
        for f in &d.files {
            for s in &secrets {
                if f.content.contains(s) {
                    assert!(
                        f.secret,
                        "{}/{} holds a password but is not secret",
                        d.path, f.name
                    );
                    found.insert(*s);
                }
            }
        }
    }
    let pw = |k: &str| config.passwords.get(k).unwrap();
    for key in [
        "database_password",
        "keystone_database_password",
        "nova_api_database_password",
        "keystone_admin_password",
        "glance_keystone_password",
    ] {
        assert!(
            found.contains(pw(key)),
            "{key} reaches its task through a secret file"
        );
    }
}

#[test]
fn a_missing_task_password_is_an_error_naming_the_key_not_a_value() {
    // `keystone_admin_password` is needed by bootstrap tasks only (no config file holds it), so
    // the error comes from the first task that needs it, not from a template.
    let mut config = default_config();
    let value = config
        .passwords
        .get("keystone_admin_password")
        .unwrap()
        .to_owned();
    config.passwords.entries.remove("keystone_admin_password");
    let err = compose::render(&config).unwrap_err();
    assert_eq!(
        err,
        ComposeError::Render(RenderError::MissingPassword {
            service: "glance-api".into(),
            task: "register".into(),
            key: "keystone_admin_password".into(),
        })
    );
    let msg = err.to_string();
    assert!(msg.contains("`keystone_admin_password`"), "{msg}");
    assert!(msg.contains("kstack genpwd"), "{msg}");
    assert!(!msg.contains(&value), "{msg}");
    for v in config
        .passwords
        .entries
        .keys()
        .filter_map(|k| config.passwords.get(k))
    {
        assert!(!msg.contains(v), "a password value in: {msg}");
    }
}

#[test]
fn privileges_only_where_the_catalog_says_and_every_container_on_the_host_network() {
    let config = default_config();
    let b = compose::render(&config).unwrap();
    for (name, s) in &b.file.services {
        assert_eq!(s.network_mode, "host", "{name}");
        // The service whose config (and data) the container runs with: a one-shot task of
        // another service's image (nova-compute's discover-hosts in nova-conductor's) gets
        // that service's host access, not more.
        let config_source = s.volumes[0].source.trim_start_matches("./config/");
        let owner = config_source.split('/').next().unwrap().to_owned();
        assert!(config.catalog.services.contains_key(&owner), "{name}");
        let generated = s.volumes.len() == 1 && s.volumes[0].source.contains("/tasks/");
        let p = if generated {
            Default::default()
        } else {
            config.catalog.services[&owner].privileges.clone()
        };
        assert_eq!(s.privileged, p.privileged, "{name}");
        assert_eq!(s.pid.as_deref() == Some("host"), p.host_pid, "{name}");
        assert_eq!(s.ipc.as_deref() == Some("host"), p.host_ipc, "{name}");
    }
    assert!(service(&b, "nova-libvirt").privileged);
    assert_eq!(service(&b, "nova-libvirt").pid.as_deref(), Some("host"));
    assert!(!service(&b, "keystone").privileged);
}

#[test]
fn health_checks_use_the_kolla_scripts_with_kolla_ansible_timings() {
    let b = compose::render(&default_config()).unwrap();
    let k = service(&b, "keystone").healthcheck.clone().unwrap();
    assert_eq!(
        k.test,
        [
            "CMD",
            "healthcheck_curl",
            "http://127.0.0.1:5000/healthcheck"
        ]
    );
    assert_eq!(
        (
            k.interval.as_str(),
            k.timeout.as_str(),
            k.retries,
            k.start_period.as_str()
        ),
        ("30s", "30s", 3, "5s")
    );
    let m = service(&b, "memcached").healthcheck.clone().unwrap();
    assert_eq!(m.test, ["CMD", "healthcheck_listen", "memcached", "11211"]);

    // The node address comes from kolla_internal_vip_address when set.
    let g = Globals::from_vars(
        &[(
            "kolla_internal_vip_address".to_owned(),
            serde_json::json!("10.0.0.5"),
        )]
        .into_iter()
        .collect(),
    )
    .unwrap();
    let b = compose::render(&config_with(Catalog::builtin().unwrap(), g)).unwrap();
    let test = &service(&b, "glance-api").healthcheck.as_ref().unwrap().test;
    assert_eq!(test[2], "http://10.0.0.5:9292/healthcheck");
}

#[test]
fn bootstrap_tasks_are_one_shot_services_the_service_waits_for() {
    let b = compose::render(&default_config()).unwrap();
    let keystone = service(&b, "keystone");
    assert_eq!(keystone.restart, "always");
    for task in ["db-create", "db-sync", "fernet-setup", "keystone-bootstrap"] {
        let name = format!("keystone-{task}");
        assert_eq!(
            condition(keystone, &name),
            Some(Condition::ServiceCompletedSuccessfully),
            "{name}"
        );
        assert_eq!(service(&b, &name).restart, "no");
    }
    for dep in ["mariadb", "memcached"] {
        assert_eq!(condition(keystone, dep), Some(Condition::ServiceHealthy));
    }
    // Keystone sends nothing over RabbitMQ (no RPC, notifications off): it does not wait for it.
    assert_eq!(condition(keystone, "rabbitmq"), None);
    // Task order (`after`) and `needs`.
    let sync = service(&b, "keystone-db-sync");
    assert_eq!(
        condition(sync, "keystone-db-create"),
        Some(Condition::ServiceCompletedSuccessfully)
    );
    assert_eq!(
        sync.environment.get("KOLLA_BOOTSTRAP").map(String::as_str),
        Some("")
    );
    assert_eq!(sync.image, keystone.image);
    assert_eq!(
        sync.volumes, keystone.volumes,
        "same config and data as the service"
    );
    let create = service(&b, "keystone-db-create");
    assert_eq!(
        condition(create, "mariadb"),
        Some(Condition::ServiceHealthy)
    );
    assert!(create.image.ends_with("/mariadb-server:2025.1-rocky-9"));
    let heat_sync = service(&b, "heat-api-db-sync");
    assert_eq!(
        condition(heat_sync, "keystone"),
        Some(Condition::ServiceHealthy)
    );
    // It makes heat's domain as the admin, so it needs Keystone, not heat's registration.
    assert_eq!(
        condition(heat_sync, "heat-api-db-create"),
        Some(Condition::ServiceCompletedSuccessfully)
    );
    assert_eq!(condition(heat_sync, "heat-api-register"), None);
    // A command task replaces the image's CMD and keeps the task's environment.
    let fernet = service(&b, "keystone-fernet-setup");
    assert!(fernet.image.contains("/keystone-fernet:"));
    assert_eq!(fernet.command.as_ref().unwrap()[0], "bash");
    assert!(
        fernet
            .volumes
            .iter()
            .any(|m| m.target == "/etc/keystone/fernet-keys")
    );
    // nova's cells steps, a script of the catalog's: it copies the config files itself first.
    let api_sync = service(&b, "nova-api-cells");
    let script = &api_sync.command.as_deref().unwrap()[2];
    let copy = script.find("sudo -E kolla_set_configs").unwrap();
    assert!(
        copy < script.find("nova-manage api_db sync").unwrap(),
        "{script}"
    );
    assert_eq!(
        api_sync
            .environment
            .get("KOLLA_CONFIG_STRATEGY")
            .map(String::as_str),
        Some("COPY_ALWAYS")
    );
    // Registration runs in kolla-toolbox, from its own config directory.
    let reg = service(&b, "glance-api-register");
    assert!(reg.image.contains("/kolla-toolbox:"));
    assert_eq!(reg.volumes[0].source, "./config/glance-api/tasks/register");
    assert!(reg.volumes[0].read_only);
    let dir = b
        .config_dirs
        .iter()
        .find(|d| d.path == "glance-api/tasks/register")
        .unwrap();
    let names: Vec<&str> = dir.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "admin.json",
            "config.json",
            "register.json",
            "register.py",
            "run.sh",
            "service-password"
        ]
    );
}

#[test]
fn disabled_dependencies_are_dropped_and_persistent_claims_are_named_volumes() {
    let b = compose::render(&default_config()).unwrap();
    assert!(
        !b.file.services.contains_key("cinder-api"),
        "cinder is off by default"
    );
    for s in b.file.services.values() {
        for dep in s.depends_on.keys() {
            assert!(b.file.services.contains_key(dep), "{dep} is not rendered");
        }
    }
    let maria = service(&b, "mariadb");
    let data = maria
        .volumes
        .iter()
        .find(|m| m.target == "/var/lib/mysql")
        .unwrap();
    assert_eq!(data.kind, MountKind::Volume);
    assert_eq!(data.source, "mariadb-mariadb");
    assert!(b.file.volumes.contains_key("mariadb-mariadb"));
    let libvirt = service(&b, "nova-libvirt");
    let modules = libvirt
        .volumes
        .iter()
        .find(|m| m.target == "/lib/modules")
        .unwrap();
    assert_eq!(
        (modules.kind, modules.source.as_str(), modules.read_only),
        (MountKind::Bind, "/lib/modules", true)
    );
}

#[test]
fn clashing_names_and_unknown_task_containers_are_errors() {
    let mut catalog = Catalog::builtin().unwrap();
    // A container named like another service's bootstrap task.
    catalog.services.get_mut("horizon").unwrap().containers[0].name = "keystone-db-sync".into();
    let err = compose::render(&config_with(catalog, Globals::default())).unwrap_err();
    assert!(
        matches!(err, ComposeError::NameClash { ref name, .. } if name == "keystone-db-sync"),
        "{err}"
    );

    let mut catalog = Catalog::builtin().unwrap();
    let t = &mut catalog.services.get_mut("glance-api").unwrap().bootstrap[1];
    t.task = kstack_model::catalog::BootstrapKind::KollaBootstrap {
        container: Some("glance-apy".into()),
        env: Default::default(),
        secret_env: Default::default(),
    };
    let err = compose::render(&config_with(catalog, Globals::default())).unwrap_err();
    assert!(
        err.to_string().contains("`glance-apy` is not a container"),
        "{err}"
    );
}

// ---- Equivalence with the Kubernetes target -------------------------------------------------

fn pod(o: &Object) -> Option<&PodSpec> {
    match o {
        Object::Deployment(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::StatefulSet(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::DaemonSet(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::Job(d) => d.spec.as_ref()?.template.spec.as_ref(),
        _ => None,
    }
}

/// File name → content of what a container finds in /var/lib/kolla/config_files on Kubernetes.
fn k8s_config_files(r: &Rendered, spec: &PodSpec, c: &Container) -> BTreeMap<String, String> {
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == kstack_render::kolla::KOLLA_CONFIG_DIR)
        .expect("config mount");
    let vol: &Volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("config volume");
    let mut out = BTreeMap::new();
    for p in vol.projected.as_ref().unwrap().sources.iter().flatten() {
        let (kind, name, items) = if let Some(cm) = &p.config_map {
            ("ConfigMap", &cm.name, &cm.items)
        } else if let Some(s) = &p.secret {
            ("Secret", &s.name, &s.items)
        } else {
            continue;
        };
        let data: BTreeMap<String, String> = match r
            .objects
            .iter()
            .find(|o| o.kind() == kind && o.name() == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
        {
            Object::ConfigMap(cm) => cm.data.clone().unwrap_or_default(),
            Object::Secret(s) => {
                let mut d: BTreeMap<String, String> = s.string_data.clone().unwrap_or_default();
                for (k, v) in s.data.iter().flatten() {
                    d.insert(k.clone(), String::from_utf8_lossy(&v.0).into_owned());
                }
                d
            }
            _ => unreachable!(),
        };
        match items {
            Some(items) => {
                for i in items {
                    out.insert(i.path.clone(), data[&i.key].clone());
                }
            }
            None => out.extend(data),
        }
    }
    out
}

/// Kubernetes file contents with every Service and replica address replaced by the address
/// the same service has on the Compose target.
/// `files` with the `permissions` entries of key repositories taken out of `config.json` (and
/// the key left out once empty, as the renderer leaves it out).
fn without_key_repository_permissions(
    config: &Config,
    mut files: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let keys: Vec<&str> = config
        .catalog
        .services
        .values()
        .flat_map(|s| &s.volumes)
        .filter(|v| matches!(v.kind, catalog::VolumeKind::KeyRepository { .. }))
        .map(|v| v.mount_path.as_str())
        .collect();
    if let Some(text) = files.get_mut("config.json") {
        let mut json: serde_json::Value = serde_json::from_str(text).unwrap();
        if let Some(p) = json["permissions"].as_array_mut() {
            p.retain(|e| !keys.contains(&e["path"].as_str().unwrap_or_default()));
            if p.is_empty() {
                json.as_object_mut().unwrap().remove("permissions");
            }
            *text = format!("{}\n", serde_json::to_string_pretty(&json).unwrap());
        }
    }
    files
}

/// The settings only a single node has: on Kubernetes every listener takes the pod's every
/// address by default, on one node each is put on the node's address (with the comment
/// before it).
fn without_single_node_listeners(mut files: BTreeMap<String, String>) -> BTreeMap<String, String> {
    const ONLY_ON_ONE_NODE: [&str; 6] = [
        "gmcast.listen_addr=",
        "management.tcp.ip = ",
        "prometheus.tcp.ip = ",
        "{inet_dist_use_interface, ",
        "export ERL_EPMD_ADDRESS=",
        "# Group communication on the node's address",
    ];
    for text in files.values_mut() {
        let kept: Vec<&str> = text
            .split_inclusive('\n')
            .filter(|l| !ONLY_ON_ONE_NODE.iter().any(|m| l.contains(m)))
            .filter(|l| !l.starts_with("# epmd on the node's address"))
            .collect();
        *text = kept.concat();
    }
    files
}

fn on_one_node(config: &Config, files: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(n, c)| (n.clone(), address_on_one_node(config, c)))
        .collect()
}

/// `text` with every Kubernetes Service and replica address replaced by the Compose address.
fn address_on_one_node(config: &Config, text: &str) -> String {
    let g = &config.globals;
    let mut pairs: Vec<(String, String)> = Vec::new();
    for name in config.catalog.services.keys() {
        let compose = Target::Compose.host(g, name, None);
        for h in Target::Kubernetes.hosts(g, name) {
            pairs.push((h, compose.clone()));
        }
        // A pod naming itself (rabbitmq's node name): its own replica's address.
        pairs.push((
            format!(
                "$(hostname -s).{}.{}.svc",
                kstack_render::names::peers_service(name),
                g.kubernetes_namespace
            ),
            compose.clone(),
        ));
        pairs.push((Target::Kubernetes.host(g, name, None), compose));
    }
    // Where services listen: every address of a pod, the node's address on one node.
    pairs.push(("0.0.0.0".to_owned(), Target::Compose.bind_address(g)));
    // Longest first: `rabbitmq-0.rabbitmq-peers.openstack.svc` before `rabbitmq.openstack.svc`.
    pairs.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
    let mut t = text.to_owned();
    for (k, v) in &pairs {
        t = t.replace(k.as_str(), v);
    }
    t
}

/// Command words as the container gets them: Compose reads `$$` as `$`.
fn compose_words(words: Vec<String>) -> Vec<String> {
    words.iter().map(|w| w.replace("$$", "$")).collect()
}

/// The value of `key` in the Secret `name`.
fn secret_value(r: &Rendered, name: &str, key: &str) -> String {
    match r
        .objects
        .iter()
        .find(|o| o.kind() == "Secret" && o.name() == name)
        .unwrap_or_else(|| panic!("Secret {name}"))
    {
        Object::Secret(s) => {
            if let Some(v) = s.string_data.as_ref().and_then(|d| d.get(key)) {
                return v.clone();
            }
            let v = s
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .unwrap_or_else(|| panic!("Secret {name} has no {key}"));
            String::from_utf8_lossy(&v.0).into_owned()
        }
        _ => unreachable!(),
    }
}

/// The literal env of a container (not the env from Secrets).
fn env_of(c: &Container) -> BTreeMap<String, String> {
    c.env
        .iter()
        .flatten()
        .filter(|e| e.value_from.is_none())
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn every_service_enabled_for_kubernetes_is_in_the_compose_output_the_same_way() {
    let config = default_config();
    let r = kubernetes::render(&config).unwrap();
    let b = compose::render(&config).unwrap();
    let dirs: BTreeMap<&str, BTreeMap<&str, &str>> = b
        .config_dirs
        .iter()
        .map(|d| {
            (
                d.path.as_str(),
                d.files
                    .iter()
                    .map(|f| (f.name.as_str(), f.content.as_str()))
                    .collect(),
            )
        })
        .collect();
    let mut seen_containers = 0;
    let mut seen_jobs = 0;
    for o in &r.objects {
        let (Some(svc_name), Some(spec)) = (o.service(), pod(o)) else {
            continue;
        };
        let catalog_svc = &config.catalog.services[svc_name];
        for c in &spec.containers {
            let k8s_files = k8s_config_files(&r, spec, c);
            if o.kind() == "Job" {
                // `<service>-<task>-<hash>` (or the task label, where the Job carries one).
                let task = o
                    .metadata()
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kstack.io/task").cloned())
                    .unwrap_or_else(|| {
                        let rest = &o.name()[svc_name.len() + 1..];
                        rest[..rest.rfind('-').unwrap()].to_owned()
                    });
                let phase = o
                    .metadata()
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(kstack_model::labels::PHASE_LABEL).cloned());
                if matches!(phase.as_deref(), Some("expand" | "contract")) {
                    // Upgrade migrations: a Compose project is installed, never upgraded in
                    // place, so they have no one-shot service.
                    assert!(
                        !b.file
                            .services
                            .contains_key(&compose::task_service_name(svc_name, &task)),
                        "{}",
                        o.name()
                    );
                    continue;
                }
                let s = service(&b, &compose::task_service_name(svc_name, &task));
                assert_eq!(Some(&s.image), c.image.as_ref(), "{}", o.name());
                // Literal env: the same values. Secret env: on Kubernetes a `secretKeyRef`, on
                // Compose a file of the env directory, never an environment literal; both
                // resolve to the same value.
                let env_dir = s
                    .volumes
                    .iter()
                    .find(|m| m.target == compose::TASK_ENV_DIR)
                    .map(|m| m.source.trim_start_matches("./config/").to_owned());
                let mut secret_env = 0;
                for e in c.env.iter().flatten() {
                    match e
                        .value_from
                        .as_ref()
                        .and_then(|f| f.secret_key_ref.as_ref())
                    {
                        Some(sk) => {
                            let k8s_value = secret_value(&r, &sk.name, &sk.key);
                            assert!(
                                !s.environment.contains_key(&e.name),
                                "{}: secret env {} is a Compose literal",
                                o.name(),
                                e.name
                            );
                            let dir = env_dir.as_deref().unwrap_or_else(|| {
                                panic!("{}: no env directory for {}", o.name(), e.name)
                            });
                            assert_eq!(
                                dirs[dir].get(e.name.as_str()).copied(),
                                Some(k8s_value.as_str()),
                                "{}: secret env {}",
                                o.name(),
                                e.name
                            );
                            secret_env += 1;
                        }
                        None => assert_eq!(
                            s.environment
                                .get(&e.name)
                                .map(|v| v.replace("$$", "$"))
                                .as_ref(),
                            Some(&address_on_one_node(
                                &config,
                                &e.value.clone().unwrap_or_default()
                            )),
                            "{}: env {}",
                            o.name(),
                            e.name
                        ),
                    }
                }
                // Both targets escape `$` as `$$` (the kubelet's and Compose's escape): the
                // same words once unescaped.
                let k8s_command = c.args.clone().or(c.command.clone()).map(|a| {
                    a.iter()
                        .map(|w| address_on_one_node(&config, &w.replace("$$", "$")))
                        .collect::<Vec<_>>()
                });
                // A first-boot task with a data volume runs once per volume on Compose, through
                // a guard that then runs the same command (the image's CMD when it had none).
                let mut command = s.command.clone().map(compose_words);
                if let Some(c) = command.clone()
                    && c.get(3).map(String::as_str) == Some("kstack-install-once")
                {
                    assert!(c[2].contains("/.kstack-installed-"), "{}: {c:?}", o.name());
                    command = Some(c[4..].to_vec()).filter(|inner| inner != &["kolla_start"]);
                }
                if secret_env > 0 {
                    // The wrapper exports the env files, then runs the same command.
                    assert_eq!(
                        env_dir.map(|d| dirs[d.as_str()].len()),
                        Some(secret_env),
                        "{}",
                        o.name()
                    );
                    let user = s.user.as_deref().unwrap_or_default();
                    assert_eq!(user, "root", "{}", o.name());
                    let cmd = command.unwrap_or_else(|| vec!["kolla_start".to_owned()]);
                    let inner = k8s_command.unwrap_or_else(|| vec!["kolla_start".to_owned()]);
                    assert!(cmd.ends_with(&inner), "{}: {cmd:?}", o.name());
                    assert!(cmd[2].contains(compose::TASK_ENV_DIR), "{}", o.name());
                } else {
                    assert_eq!(command, k8s_command, "{}", o.name());
                    assert_eq!(s.user, None, "{}", o.name());
                }
                let mount = s
                    .volumes
                    .iter()
                    .find(|m| m.target == kstack_render::kolla::KOLLA_CONFIG_DIR)
                    .unwrap();
                let path = mount.source.trim_start_matches("./config/");
                let files: BTreeMap<String, String> = dirs[path]
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                // The same files once the addresses are resolved for one node: a task's own
                // files (client.cnf, clouds.yaml, scripts) name services by address. The one
                // intended difference: key repositories are named volumes the setup tasks
                // chown here, read-only Secrets on Kubernetes.
                assert_eq!(
                    without_single_node_listeners(without_key_repository_permissions(
                        &config, files
                    )),
                    on_one_node(&config, &k8s_files),
                    "{}: config files",
                    o.name()
                );
                seen_jobs += 1;
                continue;
            }
            seen_containers += 1;
            let s = service(&b, &compose::container_service_name(&c.name));
            assert_eq!(Some(&s.image), c.image.as_ref(), "{}", c.name);
            assert_eq!(
                s.command, None,
                "{}: the image's own entrypoint and CMD",
                c.name
            );
            assert_eq!(env_of(c), s.environment, "{}", c.name);
            // Env from passwords.yml: a `secretKeyRef` there, an env file here, same values.
            let env_files: String = s
                .env_file
                .iter()
                .map(|f| {
                    let (dir, name) = f.trim_start_matches("./config/").rsplit_once('/').unwrap();
                    dirs[dir][name].to_owned()
                })
                .collect();
            let mut secret_env = 0;
            for e in c.env.iter().flatten() {
                if let Some(sk) = e
                    .value_from
                    .as_ref()
                    .and_then(|f| f.secret_key_ref.as_ref())
                {
                    let line = format!("{}=\"{}\"", e.name, secret_value(&r, &sk.name, &sk.key));
                    assert!(
                        env_files.lines().any(|l| l == line),
                        "{}: {}",
                        c.name,
                        e.name
                    );
                    secret_env += 1;
                }
            }
            assert_eq!(env_files.lines().count(), secret_env, "{}", c.name);
            // The same config files, byte for byte once addresses are resolved for one node
            // (config.json carries the command), but for key repositories' permissions.
            let path = format!("{svc_name}/{}", c.name);
            let files: BTreeMap<String, String> = dirs[path.as_str()]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(
                without_single_node_listeners(without_key_repository_permissions(
                    &config,
                    files.clone()
                )),
                on_one_node(&config, &k8s_files),
                "{}: config files",
                c.name
            );
            assert!(files.contains_key("config.json"));
            // Health check: the probe's endpoint or command.
            let probe = c.readiness_probe.as_ref();
            let hc = s.healthcheck.as_ref();
            assert_eq!(probe.is_some(), hc.is_some(), "{}", c.name);
            if let (Some(p), Some(h)) = (probe, hc) {
                if let Some(get) = &p.http_get {
                    let port = match &get.port {
                        kstack_k8s::apimachinery::pkg::util::intstr::IntOrString::Int(n) => {
                            n.to_string()
                        }
                        kstack_k8s::apimachinery::pkg::util::intstr::IntOrString::String(s) => {
                            s.clone()
                        }
                    };
                    let url = &h.test[2];
                    assert!(
                        url.ends_with(&format!(":{port}{}", get.path.clone().unwrap_or_default())),
                        "{url}"
                    );
                } else {
                    let cmd = p.exec.as_ref().unwrap().command.clone().unwrap();
                    assert_eq!(h.test[1..], cmd[..], "{}", c.name);
                }
                assert_eq!(Some(h.retries as i32), p.failure_threshold);
            }
            // Data volumes at the same paths; claims become named volumes, hostPaths binds.
            for m in c.volume_mounts.iter().flatten() {
                if m.mount_path == kstack_render::kolla::KOLLA_CONFIG_DIR {
                    continue;
                }
                let cm = s
                    .volumes
                    .iter()
                    .find(|x| x.target == m.mount_path)
                    .unwrap_or_else(|| panic!("{}: {}", c.name, m.mount_path));
                let v = spec.volumes.iter().flatten().find(|v| v.name == m.name);
                match v.and_then(|v| v.host_path.as_ref()) {
                    Some(hp) => assert_eq!(
                        (cm.kind, cm.source.as_str()),
                        (MountKind::Bind, hp.path.as_str())
                    ),
                    None => assert_eq!(cm.kind, MountKind::Volume, "{}: {}", c.name, m.mount_path),
                }
                // A key repository: a read-only Secret there, a volume its setup tasks write here.
                let key_repository = v.is_some_and(|v| v.secret.is_some());
                assert_eq!(
                    cm.read_only,
                    m.read_only.unwrap_or(false) && !key_repository
                );
            }
            // Dependencies: every enabled catalog dependency, healthy; every task, completed.
            for dep in catalog_svc
                .depends_on
                .iter()
                .filter(|d| config.enabled.contains(*d))
            {
                for dc in &config.catalog.services[dep].containers {
                    assert_eq!(
                        condition(s, &dc.name),
                        Some(Condition::ServiceHealthy),
                        "{} on {}",
                        c.name,
                        dc.name
                    );
                }
            }
            for t in &catalog_svc.bootstrap {
                let name = compose::task_service_name(svc_name, &t.name);
                let want = (!t.phase.is_upgrade() && t.phase != Phase::Post)
                    .then_some(Condition::ServiceCompletedSuccessfully);
                assert_eq!(condition(s, &name), want, "{} on {name}", c.name);
            }
        }
    }
    assert!(
        seen_containers >= 20 && seen_jobs >= 5,
        "{seen_containers} containers, {seen_jobs} jobs"
    );
    // And nothing more: every long-running Compose service is a Kubernetes container.
    let k8s_containers: BTreeSet<String> = r
        .objects
        .iter()
        .filter(|o| o.kind() != "Job")
        .filter_map(pod)
        .flat_map(|p| p.containers.iter().map(|c| c.name.clone()))
        .collect();
    let compose_servers: BTreeSet<String> = b
        .file
        .services
        .iter()
        .filter(|(_, s)| s.labels[kstack_model::labels::COMPONENT_LABEL] == "server")
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(k8s_containers, compose_servers);
    // Every catalog bootstrap task of an enabled service that runs on install is a one-shot
    // service; the migrations of an upgrade are not.
    for name in &config.enabled {
        for t in &config.catalog.services[name].bootstrap {
            let task = compose::task_service_name(name, &t.name);
            if t.phase.is_upgrade() {
                assert!(!b.file.services.contains_key(&task), "{task}");
            } else {
                service(&b, &task);
            }
        }
    }
}

#[test]
fn a_first_boot_task_runs_once_per_data_volume() {
    let b = compose::render(&default_config()).unwrap();
    // MariaDB's bootstrap initialises /var/lib/mysql: guarded by a marker on that volume.
    // Its inner command is the secret env wrapper (the root password is a file, not env).
    let bootstrap = service(&b, "mariadb-bootstrap");
    let cmd = bootstrap.command.clone().unwrap();
    let inner = cmd[4..].iter().map(|w| w.replace("$$", "$")).collect();
    let want: Vec<String> =
        compose::install_once_command("mariadb", "bootstrap", "/var/lib/mysql", inner)
            .iter()
            .map(|w| compose::literal(w))
            .collect();
    assert_eq!(cmd, want);
    assert!(
        cmd[4..].iter().any(|w| w.contains(compose::TASK_ENV_DIR)),
        "{cmd:?}"
    );
    // Innermost, Kolla's bootstrap with the root password filtered out of its trace.
    let redacted: Vec<String> =
        kstack_render::tasks::redacted_kolla_start(["DB_ROOT_PASSWORD"].into_iter())
            .iter()
            .map(|w| compose::literal(w))
            .collect();
    assert_eq!(cmd[cmd.len() - 3..], redacted[..]);
    // A schema sync without a data volume of its own runs at every `up` (it is idempotent).
    assert_eq!(service(&b, "keystone-db-sync").command, None);

    // The command itself: the task runs, then not again; a failed task leaves no marker.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let log = dir.path().join("runs");
    let run = |inner: &str| {
        let cmd = compose::install_once_command(
            "svc",
            "init",
            data,
            vec!["bash".to_owned(), "-c".to_owned(), inner.to_owned()],
        );
        std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .output()
            .unwrap()
    };
    let failed = run("exit 3");
    assert_eq!(failed.status.code(), Some(3), "the task's exit code");
    assert!(!std::path::Path::new(&compose::install_marker(data, "init")).exists());
    let append = format!("echo ran >> {}", log.display());
    assert!(run(&append).status.success());
    let again = run(&append);
    assert!(again.status.success());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "ran\n", "ran once");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("svc/init ran on this volume before"),
        "{again:?}"
    );
}

#[test]
fn central_logging_is_refused_on_a_single_node_with_the_flag_and_what_to_use() {
    let mut vars = serde_json::Map::new();
    vars.insert("enable_central_logging".into(), "yes".into());
    let globals = Globals::from_vars(&vars.into_iter().collect()).unwrap();
    let err = compose::render(&config_with(Catalog::builtin().unwrap(), globals)).unwrap_err();
    assert!(
        matches!(err, ComposeError::OnlyKubernetes { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("`enable_central_logging`"), "{msg}");
    assert!(msg.contains("`enable_central_logging: no`"), "{msg}");
    assert!(msg.contains("kstack logs"), "{msg}");
}

#[test]
fn on_one_node_haproxy_publishes_on_the_external_address_which_must_be_another_one() {
    let globals = |vars: serde_json::Value| {
        let serde_json::Value::Object(m) = vars else {
            unreachable!()
        };
        Globals::from_vars(&m.into_iter().collect()).unwrap()
    };
    let b = compose::render(&config_with(
        Catalog::builtin().unwrap(),
        globals(serde_json::json!({
            "kolla_internal_vip_address": "192.0.2.10",
            "kolla_external_vip_address": "192.0.2.20",
        })),
    ))
    .unwrap();
    assert!(b.file.services.contains_key("haproxy"));
    let cfg = b
        .config_dirs
        .iter()
        .flat_map(|d| &d.files)
        .find(|f| f.name == "haproxy.cfg")
        .map(|f| f.content.clone())
        .expect("haproxy.cfg");
    assert!(
        cfg.contains("bind 192.0.2.20:5000\n")
            && cfg.contains("server keystone-api 192.0.2.10:5000\n"),
        "{cfg}"
    );
    // Its health check looks where every service's does: on the node's address.
    assert!(cfg.contains("bind 192.0.2.10:61313\n"), "{cfg}");
    assert_eq!(
        service(&b, "haproxy")
            .healthcheck
            .as_ref()
            .map(|h| h.test[2].clone()),
        Some("http://192.0.2.10:61313/".to_owned())
    );
    // Both on one address (the services already listen there on the same ports), or a name
    // alone: nowhere to listen.
    for (key, external) in [
        ("kolla_external_vip_address", "192.0.2.10"),
        ("kolla_external_fqdn", "cloud.example.com"),
    ] {
        let err = compose::render(&config_with(
            Catalog::builtin().unwrap(),
            globals(serde_json::json!({"kolla_internal_vip_address": "192.0.2.10", key: external})),
        ))
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("kolla_external_vip_address") && msg.contains("enable_haproxy: no"),
            "{key}: {msg}"
        );
    }
}
