//! The bootstrap tasks of the catalog as target-neutral one-shot containers.
//!
//! Each task of an enabled service (`kolla_bootstrap`, `command`, `db_create`,
//! `keystone_register`, Keystone's own `keystone-manage bootstrap`) is described once here, as a
//! [`TaskSpec`]: image, arguments, literal env, env from passwords.yml (by key, never by value)
//! and the files it finds in Kolla's config directory ([`KOLLA_CONFIG_DIR`]). The Kubernetes
//! renderer turns a spec into a Job (files → projected ConfigMaps/Secrets, secret env →
//! `secretKeyRef`), the Compose renderer into a one-shot service (files → a read-only config
//! directory, secret env → files it exports at start). Addresses come from [`Target::host`];
//! that and the per-target config files are the only inputs that differ between targets.
//!
//! Tasks with generated files (`db_create`, `keystone_register`, Keystone's bootstrap) get a
//! `config.json` of their own: `kolla_set_configs` copies the script and the files holding
//! passwords to [`TASK_DIR`] with the image user as owner (mode 0600, the script 0700) and the
//! image's `kolla_start` runs the script, so the same files work from a Secret projection and
//! from a 0600 bind mount.

use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_model::catalog::{self, BootstrapKind, EnvPiece};

use crate::escape;
use crate::files::{self, ContainerFiles, RenderError, RenderedFile, Target};
use crate::kolla::KOLLA_CONFIG_DIR;

/// Where `kolla_set_configs` copies a task's generated files inside the container.
pub const TASK_DIR: &str = "/etc/kstack";

/// One bootstrap task, for one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    /// The catalog service the task belongs to.
    pub service: String,
    /// The catalog task name.
    pub task: String,
    /// The container name (a Kolla container of the service, or `task`).
    pub container: String,
    pub image: String,
    /// The image user (owner of the copied files).
    pub user: String,
    /// Replaces the image's `CMD` (`kolla_start`); `None` keeps it.
    pub args: Option<Vec<String>>,
    /// Literal env (never a secret).
    pub env: BTreeMap<String, String>,
    /// Env from passwords.yml: env name → passwords.yml key.
    pub secret_env: BTreeMap<String, String>,
    /// What the task finds in [`KOLLA_CONFIG_DIR`], sorted by name.
    pub files: Vec<RenderedFile>,
    /// Where the files come from: a container's own config directory (shared with it), or
    /// generated for this task.
    pub files_of: FilesOf,
    /// The service whose data volumes and host privileges the task gets; `None`: neither.
    pub data_of: Option<String>,
}

/// Where a task's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilesOf {
    /// The config directory of `container` of `service`, unchanged.
    Container { service: String, container: String },
    /// Generated for this task.
    Task,
}

impl TaskSpec {
    /// The value of every secret env var, by env name. Errors name the missing key.
    pub fn secret_env_values<'a>(
        &self,
        config: &'a Config,
    ) -> Result<BTreeMap<String, &'a str>, RenderError> {
        self.secret_env
            .iter()
            .map(|(env, key)| {
                Ok((
                    env.clone(),
                    password(config, &self.service, &self.task, key)?,
                ))
            })
            .collect()
    }
}

fn password<'a>(
    config: &'a Config,
    service: &str,
    task: &str,
    key: &str,
) -> Result<&'a str, RenderError> {
    config
        .passwords
        .get(key)
        .ok_or_else(|| RenderError::MissingPassword {
            service: service.to_owned(),
            task: task.to_owned(),
            key: key.to_owned(),
        })
}

/// Kolla's own env for a container: config strategy and service name.
pub fn kolla_env(config: &Config, container: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "KOLLA_CONFIG_STRATEGY".to_owned(),
            config.globals.config_strategy.clone(),
        ),
        ("KOLLA_SERVICE_NAME".to_owned(), container.replace('_', "-")),
    ])
}

/// `http://<host>:<port>` of a service's Service (Kubernetes) or node address (Compose), with
/// the port named `port` in the catalog ([`files::port`]: no number of its own).
pub fn service_url(
    config: &Config,
    target: Target,
    service: &str,
    port: &str,
) -> Result<String, RenderError> {
    Ok(target.url(
        &config.globals,
        service,
        files::port(&config.catalog, service, port)?,
    ))
}

/// Keystone's URL for `target`: what bootstrap tasks and `kstack verify` authenticate against.
pub fn keystone_url(config: &Config, target: Target) -> Result<String, RenderError> {
    service_url(config, target, "keystone", "api")
}

/// Keystone's public URL: on the public address when the cloud has one (through the public
/// gateway), else the internal one. What a user outside the cloud logs in at.
pub fn keystone_public_url(config: &Config, target: Target) -> Result<String, RenderError> {
    service_public_url(config, target, "keystone", "api")
}

/// The public URL of a service's port ([`Target::public_url`]): on the public address when
/// the cloud has one (its `public_tls_port` with TLS), else the internal one.
pub fn service_public_url(
    config: &Config,
    target: Target,
    service: &str,
    port: &str,
) -> Result<String, RenderError> {
    let g = &config.globals;
    let mut number = files::port(&config.catalog, service, port)?;
    if g.public_host().is_some() {
        number = config
            .catalog
            .public_port(service, port, g.tls.external)
            .unwrap_or(number);
    }
    Ok(target.public_url(g, service, number))
}

/// The task of `service` (named `name`) for `target`. `files` are the rendered config files
/// of that target ([`crate::files::render_files`]).
pub fn task_spec(
    config: &Config,
    target: Target,
    files: &[ContainerFiles],
    name: &str,
    service: &catalog::Service,
    t: &catalog::BootstrapTask,
) -> Result<TaskSpec, RenderError> {
    let g = &config.globals;
    let unknown = |container: &str| RenderError::UnknownTaskContainer {
        service: name.to_owned(),
        task: t.name.clone(),
        container: container.to_owned(),
    };
    let first = service
        .containers
        .first()
        .ok_or_else(|| unknown("(none)"))?;
    let container_files = |svc: &str, c: &str| -> Vec<RenderedFile> {
        files
            .iter()
            .find(|f| f.service == svc && f.container == c && f.host.is_none())
            .map(|f| f.files.clone())
            .unwrap_or_default()
    };
    // A generated file is secret when it was made with a password, whatever its escaping.
    let plain = |n: &str, content: String| RenderedFile {
        name: n.to_owned(),
        content,
        secret: false,
    };
    let secret = |n: &str, content: String| RenderedFile {
        name: n.to_owned(),
        content,
        secret: true,
    };
    match &t.task {
        BootstrapKind::KollaBootstrap {
            container,
            env: task_env,
            secret_env,
        } => {
            let c = match container {
                Some(n) => service
                    .containers
                    .iter()
                    .find(|c| &c.name == n)
                    .ok_or_else(|| unknown(n))?,
                None => first,
            };
            let mut env = kolla_env(config, &c.name);
            // Present but empty: the image's extend_start runs its bootstrap branch, exits 0.
            env.insert("KOLLA_BOOTSTRAP".into(), String::new());
            for (var, value) in task_env {
                env.insert(
                    var.clone(),
                    fill_task_env(config, target, name, &t.name, var, value)?,
                );
            }
            let secret_env = secret_env.clone();
            Ok(TaskSpec {
                service: name.to_owned(),
                task: t.name.clone(),
                container: c.name.clone(),
                image: g.image_ref(&service.project, &c.image),
                user: c.user.clone(),
                args: (!secret_env.is_empty())
                    .then(|| redacted_kolla_start(secret_env.keys().map(String::as_str))),
                env,
                secret_env,
                files: container_files(name, &c.name),
                files_of: FilesOf::Container {
                    service: name.to_owned(),
                    container: c.name.clone(),
                },
                data_of: Some(name.to_owned()),
            })
        }
        BootstrapKind::Command {
            image,
            command,
            env: extra_env,
        } => {
            // The container running the image: one of the service's own, else one of another
            // enabled service of the project (e.g. nova-conductor's for discover_hosts), whose
            // config and data then come along.
            let own = image
                .as_ref()
                .and_then(|i| service.containers.iter().find(|c| &c.image == i));
            let (src_name, src, c) = match (own, image) {
                (Some(c), _) => (name, service, c),
                (None, Some(i)) => config
                    .catalog
                    .services
                    .iter()
                    .filter(|(n, s)| s.project == service.project && config.enabled.contains(*n))
                    .find_map(|(n, s)| {
                        s.containers
                            .iter()
                            .find(|c| &c.image == i)
                            .map(|c| (n.as_str(), s, c))
                    })
                    .unwrap_or((name, service, first)),
                (None, None) => (name, service, first),
            };
            let mut env = kolla_env(config, &c.name);
            env.extend(extra_env.iter().map(|(k, v)| (k.clone(), v.clone())));
            let image = image.clone().unwrap_or_else(|| c.image.clone());
            Ok(TaskSpec {
                service: name.to_owned(),
                task: t.name.clone(),
                container: c.name.clone(),
                image: g.image_ref(&src.project, &image),
                user: c.user.clone(),
                args: Some(one_off_args(command)),
                env,
                secret_env: BTreeMap::new(),
                files: container_files(src_name, &c.name),
                files_of: FilesOf::Container {
                    service: src_name.to_owned(),
                    container: c.name.clone(),
                },
                data_of: Some(src_name.to_owned()),
            })
        }
        BootstrapKind::DbCreate { databases, users } => {
            let root = password(config, name, &t.name, "database_password")?;
            let mut sql = String::from(
                "-- Databases and users of one service, rendered by kstack. Idempotent.\n",
            );
            for db in databases {
                sql.push_str(&format!(
                    "CREATE DATABASE IF NOT EXISTS {};\n",
                    sql_ident(db)
                ));
            }
            for u in users {
                let key = format!("{}_database_password", u.user);
                let pw = escape::sql(password(config, name, &t.name, &key)?);
                let account = format!("{}@'%'", escape::sql(&u.user));
                sql.push_str(&format!(
                    "CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {pw};\n"
                ));
                // A changed password in passwords.yml takes effect on the next run.
                sql.push_str(&format!("ALTER USER {account} IDENTIFIED BY {pw};\n"));
                for db in &u.databases {
                    sql.push_str(&format!(
                        "GRANT ALL PRIVILEGES ON {}.* TO {account};\n",
                        sql_ident(db)
                    ));
                }
            }
            let cnf = format!(
                "[client]\nhost = {}\nport = {}\nuser = root\npassword = {}\nconnect-timeout = 10\n",
                target.host(g, "mariadb", None),
                files::port(&config.catalog, "mariadb", "mysql")?,
                escape::option_file(root)
            );
            let script = format!(
                "#!/bin/bash\n# Creates the databases and users of {name}, rendered by kstack.\nset -o errexit -o nounset -o pipefail\nexec mysql --defaults-file={TASK_DIR}/client.cnf < {TASK_DIR}/db-create.sql\n"
            );
            let project = config
                .catalog
                .services
                .get("mariadb")
                .map_or("mariadb", |s| s.project.as_str());
            Ok(generated(
                config,
                name,
                t,
                g.image_ref(project, "mariadb-server"),
                "mysql",
                vec![
                    secret("client.cnf", cnf),
                    if users.is_empty() {
                        plain("db-create.sql", sql)
                    } else {
                        secret("db-create.sql", sql)
                    },
                    plain("run.sh", script),
                ],
            ))
        }
        BootstrapKind::KeystoneRegister { service_name, .. } if service.project == "keystone" => {
            // Keystone registers itself: `keystone-manage bootstrap` in its own image with the
            // keystone container's config; the admin password is env from passwords.yml.
            password(config, name, &t.name, "keystone_admin_password")?;
            let url = keystone_url(config, target)?;
            let public = keystone_public_url(config, target)?;
            let command: Vec<String> = [
                "keystone-manage",
                "bootstrap",
                "--bootstrap-username",
                &g.keystone_admin_user,
                "--bootstrap-project-name",
                &g.keystone_admin_project,
                "--bootstrap-role-name",
                "admin",
                "--bootstrap-service-name",
                service_name,
                "--bootstrap-region-id",
                &g.openstack_region_name,
                "--bootstrap-internal-url",
                &url,
                "--bootstrap-public-url",
                &public,
            ]
            .iter()
            .map(|w| (*w).to_owned())
            .collect();
            Ok(TaskSpec {
                service: name.to_owned(),
                task: t.name.clone(),
                container: first.name.clone(),
                image: g.image_ref(&service.project, &first.image),
                user: first.user.clone(),
                args: Some(one_off_args(&command)),
                env: kolla_env(config, &first.name),
                secret_env: BTreeMap::from([(
                    "OS_BOOTSTRAP_PASSWORD".to_owned(),
                    "keystone_admin_password".to_owned(),
                )]),
                files: container_files(name, &first.name),
                files_of: FilesOf::Container {
                    service: name.to_owned(),
                    container: first.name.clone(),
                },
                data_of: Some(name.to_owned()),
            })
        }
        BootstrapKind::ExternalNetwork {} => {
            let net = g
                .external_network
                .as_ref()
                .ok_or_else(|| RenderError::TaskNeedsSetting {
                    service: name.to_owned(),
                    task: t.name.clone(),
                    setting: "kstack_external_network",
                })?;
            let admin = password(config, name, &t.name, "keystone_admin_password")?;
            let pool = match &net.pool {
                Some((start, end)) => format!(
                    " --allocation-pool {}",
                    shell_word(&format!("start={start},end={end}"))
                ),
                None => String::new(),
            };
            let script = format!(
                "#!/bin/bash\n\
                 # Makes the external network {name_w} when it does not exist, rendered by kstack. An\n\
                 # existing network or subnet of that name is left as it is.\n\
                 set -o errexit -o nounset -o pipefail\n\
                 export PATH=/opt/ansible/bin:$PATH\n\
                 export OS_CLIENT_CONFIG_FILE={TASK_DIR}/clouds.yaml OS_CLOUD=kstack\n\
                 name={name_w}\n\
                 openstack network show \"$name\" >/dev/null 2>&1 || openstack network create --external --no-share \\\n\
                 \x20   --provider-network-type flat --provider-physical-network {physnet} \"$name\"\n\
                 openstack subnet show \"$name-subnet\" >/dev/null 2>&1 || openstack subnet create --network \"$name\" \\\n\
                 \x20   --ip-version 4 --subnet-range {cidr} --gateway {gateway}{pool} --no-dhcp \"$name-subnet\"\n\
                 openstack network show -f value -c id -c router:external \"$name\"\n",
                name_w = shell_word(&net.name),
                physnet = shell_word(&net.physnet),
                cidr = shell_word(&net.cidr),
                gateway = shell_word(&net.gateway),
            );
            Ok(generated(
                config,
                name,
                t,
                g.image_ref("kolla_toolbox", "kolla-toolbox"),
                "ansible",
                vec![
                    secret("clouds.yaml", admin_clouds_yaml(config, target, admin)?),
                    plain("run.sh", script),
                ],
            ))
        }
        BootstrapKind::KeystoneRegister {
            service_name,
            service_type,
            endpoints,
            register_user,
            roles,
        } => {
            let admin = password(config, name, &t.name, "keystone_admin_password")?;
            let user_pw = if *register_user {
                let key = format!("{service_name}_keystone_password");
                Some(password(config, name, &t.name, &key)?)
            } else {
                None
            };
            // One Python process, on the standard library only, does the whole registration:
            // a dozen `openstack` commands each paid Python's start and a token; one process
            // with openstacksdk still paid its import and two calls per lookup.
            let mut eps = Vec::new();
            for e in endpoints {
                let url = format!("{}{}", target.url(g, name, e.port), e.path);
                let public = format!("{}{}", target.public_url(g, name, e.port), e.path);
                eps.push(serde_json::json!({ "interface": "internal", "url": url }));
                eps.push(serde_json::json!({ "interface": "public", "url": public }));
            }
            let mut spec = serde_json::json!({
                "name": service_name,
                "type": service_type,
                "region": g.openstack_region_name,
                "endpoints": eps,
                "roles": roles,
            });
            let mut files = vec![secret("admin.json", admin_json(config, target, admin)?)];
            if let Some(user_pw) = user_pw {
                spec["password_file"] = serde_json::json!(format!("{TASK_DIR}/service-password"));
                let mode = if service_project_maker(config) == Some(name) {
                    "create"
                } else {
                    "wait"
                };
                spec["service_project"] = serde_json::json!(mode);
                files.push(secret("service-password", user_pw.to_owned()));
            }
            let mut spec = serde_json::to_string_pretty(&spec).expect("the spec serializes");
            spec.push('\n');
            let script = format!(
                "#!/bin/bash\n\
                 # Registers {service_name} ({service_type}) in Keystone, rendered by kstack. Safe to run again.\n\
                 exec /opt/ansible/bin/python3 {TASK_DIR}/register.py {TASK_DIR}/register.json {TASK_DIR}/admin.json\n"
            );
            files.push(plain("register.json", spec));
            files.push(plain("register.py", REGISTER_PY.to_owned()));
            files.push(plain("run.sh", script));
            Ok(generated(
                config,
                name,
                t,
                g.image_ref("kolla_toolbox", "kolla-toolbox"),
                "ansible",
                files,
            ))
        }
    }
}

/// The enabled service whose registration makes Keystone project `service`, which every
/// service user joins: the first by name that registers a user. The registrations run in
/// parallel; the others wait for the project, so no two create it at once (Keystone would log
/// the loser's conflict as an error).
fn service_project_maker(config: &Config) -> Option<&str> {
    config
        .catalog
        .services
        .iter()
        .filter(|(n, s)| config.enabled.contains(*n) && s.project != "keystone")
        .find(|(_, s)| {
            s.bootstrap.iter().any(|t| {
                matches!(
                    t.task,
                    BootstrapKind::KeystoneRegister {
                        register_user: true,
                        ..
                    }
                )
            })
        })
        .map(|(n, _)| n.as_str())
}

/// The registration a `keystone_register` task runs (kolla-toolbox's Python, standard library
/// only).
const REGISTER_PY: &str = include_str!("../tasks/register.py");

/// The `clouds.yaml` of a task that calls the APIs as the admin (kolla-toolbox's `openstack`
/// client), at Keystone's internal endpoint.
fn admin_clouds_yaml(config: &Config, target: Target, admin: &str) -> Result<String, RenderError> {
    let g = &config.globals;
    let q = |s: &str| serde_json::to_string(s).expect("strings serialize");
    Ok(format!(
        "clouds:\n  kstack:\n    auth:\n      auth_url: {}\n      username: {}\n      password: {}\n      project_name: {}\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: {}\n    interface: internal\n    identity_api_version: 3\n",
        q(&keystone_url(config, target)?),
        q(&g.keystone_admin_user),
        q(admin),
        q(&g.keystone_admin_project),
        q(&g.openstack_region_name),
    ))
}

/// The admin's credentials for `register.py`: Keystone's internal endpoint, the admin user and
/// project (a Secret: it holds the admin password).
fn admin_json(config: &Config, target: Target, admin: &str) -> Result<String, RenderError> {
    let g = &config.globals;
    let mut json = serde_json::to_string_pretty(&serde_json::json!({
        "auth_url": keystone_url(config, target)?,
        "username": g.keystone_admin_user,
        "password": admin,
        "project_name": g.keystone_admin_project,
        "user_domain_name": "Default",
        "project_domain_name": "Default",
    }))
    .expect("the admin's credentials serialize");
    json.push('\n');
    Ok(json)
}

/// A task with generated files: its `config.json` copies `own` to [`TASK_DIR`] (owned by
/// `owner`; `run.sh`, the command, 0700, the rest 0600). The image's extend_start is skipped:
/// the task is not the service.
fn generated(
    config: &Config,
    service: &str,
    t: &catalog::BootstrapTask,
    image: String,
    owner: &str,
    own: Vec<RenderedFile>,
) -> TaskSpec {
    let entries: Vec<serde_json::Value> = own
        .iter()
        .map(|f| {
            let perm = if f.name == "run.sh" { "0700" } else { "0600" };
            serde_json::json!({
                "source": format!("{KOLLA_CONFIG_DIR}/{}", f.name),
                "dest": format!("{TASK_DIR}/{}", f.name),
                "owner": owner,
                "perm": perm,
            })
        })
        .collect();
    let mut files = own;
    let mut json = serde_json::to_string_pretty(&serde_json::json!({
        "command": format!("{TASK_DIR}/run.sh"),
        "config_files": entries,
    }))
    .expect("config.json serializes");
    json.push('\n');
    files.push(RenderedFile {
        name: "config.json".into(),
        content: json,
        secret: false,
    });
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let container = "task".to_owned();
    let mut env = kolla_env(config, &format!("{service}-{}", t.name));
    env.insert("KOLLA_SKIP_EXTEND_START".into(), String::new());
    TaskSpec {
        service: service.to_owned(),
        task: t.name.clone(),
        container,
        image,
        user: owner.to_owned(),
        args: None,
        env,
        secret_env: BTreeMap::new(),
        files,
        files_of: FilesOf::Task,
        data_of: None,
    }
}

/// Replaces each value of the env variables named on its command line by `***` in every line
/// it passes from stdin to stdout (Python: every Kolla image has it; no single quote inside).
const REDACT_FILTER: &str = "import os, sys
values = sorted({os.environ[k].encode() for k in sys.argv[1:] if os.environ.get(k)}, key=len, reverse=True)
for line in sys.stdin.buffer:
    for v in values:
        line = line.replace(v, b\"***\")
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
";

/// The command of a Kolla bootstrap that has passwords in its env. Kolla's start script
/// traces every command it runs (`set -o xtrace`), and some images' bootstrap puts a password
/// on a command line (heat's `openstack user create --password`, mariadb's
/// `mysql --password=`, rabbitmq's `echo` of the Erlang cookie): the trace would carry it into
/// the container's log, where `kubectl logs`, `docker logs` and central logging keep it.
/// `kolla_start` runs as ever, with its output (stderr too) through [`REDACT_FILTER`] for the
/// values of `env_names`, inside the container, before anything reaches the log; its exit
/// status is the task's.
pub fn redacted_kolla_start<'a>(env_names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let names: Vec<String> = env_names.map(shell_word).collect();
    vec![
        "bash".to_owned(),
        "-c".to_owned(),
        format!(
            "set -o pipefail; kolla_start 2>&1 | python3 -u -c '{REDACT_FILTER}' {}",
            names.join(" ")
        ),
    ]
}

/// A `kolla_bootstrap` task's env value from the catalog with its placeholders
/// ([`catalog::TASK_ENV_PLACEHOLDERS`]) filled for the cloud and `target`.
fn fill_task_env(
    config: &Config,
    target: Target,
    service: &str,
    task: &str,
    var: &str,
    value: &str,
) -> Result<String, RenderError> {
    let g = &config.globals;
    let unknown = |message: String| RenderError::UnknownPlaceholder {
        service: service.to_owned(),
        task: task.to_owned(),
        env: var.to_owned(),
        message,
    };
    let mut out = String::new();
    for piece in catalog::task_env_pieces(value).map_err(|e| unknown(e.to_string()))? {
        match piece {
            EnvPiece::Text(text) => out.push_str(text),
            EnvPiece::Placeholder("keystone_internal_url") => {
                out.push_str(&keystone_url(config, target)?);
            }
            EnvPiece::Placeholder("keystone_admin_user") => out.push_str(&g.keystone_admin_user),
            EnvPiece::Placeholder("keystone_admin_project") => {
                out.push_str(&g.keystone_admin_project);
            }
            EnvPiece::Placeholder("openstack_region_name") => {
                out.push_str(&g.openstack_region_name);
            }
            EnvPiece::Placeholder(other) => {
                return Err(unknown(format!(
                    "`{{{other}}}` has no value in the renderer"
                )));
            }
        }
    }
    Ok(out)
}

/// Quotes a word for bash when it holds anything but plain characters.
pub(crate) fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// A one-off command in a Kolla image: the config files are copied first (`kolla_set_configs`),
/// as kolla-ansible does for its one-off containers. Commands that are already `kolla_start`
/// or a shell are kept as they are.
pub(crate) fn one_off_args(command: &[String]) -> Vec<String> {
    match command.first().map(String::as_str) {
        Some("kolla_start" | "bash" | "sh") | None => command.to_vec(),
        Some(_) => {
            let words: Vec<String> = command.iter().map(|w| shell_word(w)).collect();
            vec![
                "bash".into(),
                "-c".into(),
                format!("sudo -E kolla_set_configs && exec {}", words.join(" ")),
            ]
        }
    }
}

/// A SQL identifier.
fn sql_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}
