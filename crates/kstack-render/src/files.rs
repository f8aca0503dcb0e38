//! The files each container finds in `/var/lib/kolla/config_files`: Kolla's `config.json` and
//! the service config files it names, rendered for one target.
//!
//! Both targets (Kubernetes and the single-node Compose file) mount the same files; only the
//! addresses services use to reach each other differ, and [`Target`] is where that difference
//! lives: [`Target::host`] is the one function that says how a service (or one replica of it)
//! is reached, and the template context is built from it.
//!
//! Templates are minijinja with strict undefined, embedded in the binary
//! (`templates/<project>/<file>.j2`). Their context holds every globals.yml variable, every
//! non-empty passwords.yml value, and the computed addresses (`database_address`,
//! `transport_url`, `memcached_servers`, `keystone_internal_url`, ...; see [`template_context`]).
//! Passwords, and values made from them, are secret values ([`crate::secrets`]): a file whose
//! template writes one, in whatever form, is marked [`RenderedFile::secret`] by its render.
//! Operator overrides (`config/`) are merged over the mergeable INI files afterwards (see
//! [`kstack_config::overrides`]).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use kstack_config::Config;
use kstack_config::overrides::{self, HostIndex, Ini};
use kstack_config::passwords::{Passwords, Secret};
use kstack_model::catalog::{ADDRESSED_PORTS, Catalog, Container, VolumeKind, WorkloadKind};
use kstack_model::globals::Globals;
use minijinja::{Environment, UndefinedBehavior, Value, context};

use crate::escape;
use crate::kolla::KollaConfig;
use crate::names::peers_service;
use crate::secrets::{SecretUse, Secrets};

/// Where the rendered cloud runs. The target decides how one service reaches another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// A Kubernetes cluster: services reach each other through Kubernetes Service names.
    Kubernetes,
    /// One node without Kubernetes (Compose, host network): every service on the node's address.
    Compose,
}

impl Target {
    /// The address clients use to reach `service`: with `replica`, one pod of a StatefulSet
    /// (`<sts>-<i>.<sts>-peers.<namespace>.svc`, through the headless Service that governs it,
    /// [`peers_service`]), else its Service (`<service>.<namespace>.svc`, which has only ready
    /// pods behind it). On Compose every service is on the node's own address,
    /// `kolla_internal_vip_address` or `127.0.0.1`.
    pub fn host(&self, globals: &Globals, service: &str, replica: Option<u32>) -> String {
        match self {
            Target::Kubernetes => {
                let ns = &globals.kubernetes_namespace;
                match replica {
                    Some(i) => format!("{service}-{i}.{}.{ns}.svc", peers_service(service)),
                    None => format!("{service}.{ns}.svc"),
                }
            }
            Target::Compose => globals
                .kolla_internal_vip_address
                .clone()
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| "127.0.0.1".to_owned()),
        }
    }

    /// Where services listen: every address of the pod on Kubernetes (`0.0.0.0`: a pod's
    /// network is its own); on Compose, whose containers share the node's network, the node's
    /// address that clients use ([`Target::host`]), never every address of the node.
    pub fn bind_address(&self, globals: &Globals) -> String {
        match self {
            Target::Kubernetes => "0.0.0.0".to_owned(),
            Target::Compose => self.host(globals, "", None),
        }
    }

    /// The internal base URL of `service` on `port`: `http://<host>:<port>`.
    pub fn url(&self, globals: &Globals, service: &str, port: u16) -> String {
        format!("http://{}:{port}", self.host(globals, service, None))
    }

    /// The public base URL of `service` on `port`: on `kolla_external_fqdn` /
    /// `kolla_external_vip_address` when set ([`Globals::public_host`]), else the internal one.
    pub fn public_url(&self, globals: &Globals, service: &str, port: u16) -> String {
        match globals.public_host() {
            Some(h) => format!("http://{h}:{port}"),
            None => self.url(globals, service, port),
        }
    }

    /// How many replicas of `service` run: `kstack_replicas` on Kubernetes, 1 on Compose.
    pub fn replicas(&self, globals: &Globals, service: &str) -> u32 {
        match self {
            Target::Kubernetes => globals.replicas_for(service).max(1),
            Target::Compose => 1,
        }
    }

    /// The address of every replica of `service`, in replica order.
    pub fn hosts(&self, globals: &Globals, service: &str) -> Vec<String> {
        (0..self.replicas(globals, service))
            .map(|i| self.host(globals, service, Some(i)))
            .collect()
    }
}

/// One file of a container's config directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFile {
    /// File name inside `/var/lib/kolla/config_files` (the `source` in config.json).
    pub name: String,
    pub content: String,
    /// Whether the file carries a value from passwords.yml (in any form: raw, escaped, quoted,
    /// URL-encoded): a Secret, never a ConfigMap, and mode 0600 on disk. Known from what the
    /// file was made of (its template wrote a secret value, or the code that generated it put a
    /// password in), never by searching the content.
    pub secret: bool,
}

/// Every file one container of one service mounts, `config.json` included, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerFiles {
    pub service: String,
    pub container: String,
    /// `Some(node)` for the variant of a DaemonSet service with per-host overrides
    /// (`config/<project>/<node>/<file>`); `None` for the files every other node gets.
    pub host: Option<String>,
    pub files: Vec<RenderedFile>,
}

/// Why rendering failed. Never carries a value from passwords.yml.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A template that failed to render: names the template, the line and what went wrong.
    #[error("template {template}, line {line}: {message}")]
    Template {
        template: String,
        line: usize,
        message: String,
    },
    /// A catalog string names a distribution fact kstack does not know.
    #[error("service {service}, container {container}: {message}")]
    UnknownFact {
        service: String,
        container: String,
        message: String,
    },
    /// The catalog names a config file kstack has no template for.
    #[error(
        "service {service}, container {container}: no template `{project}/{template}.j2` for config file `{template}`; kstack ships templates only for the files of its built-in catalog"
    )]
    UnknownTemplate {
        service: String,
        container: String,
        project: String,
        template: String,
    },
    /// A passwords.yml value a bootstrap task needs is missing or empty.
    #[error(
        "service {service}, bootstrap task {task}: passwords.yml has no value for `{key}`; run `kstack genpwd`"
    )]
    MissingPassword {
        service: String,
        task: String,
        key: String,
    },
    /// passwords.yml has no key for the names of the Secrets ([`crate::names::SecretNames`]).
    #[error(
        "passwords.yml has no value for `{key}`, the key that names the Secrets carrying passwords; run `kstack genpwd`"
    )]
    MissingNameKey { key: &'static str },
    /// A passwords.yml value a container's env needs is missing or empty.
    #[error(
        "service {service}, container {container}: passwords.yml has no value for `{key}`; run `kstack genpwd`"
    )]
    MissingEnvPassword {
        service: String,
        container: String,
        key: String,
    },
    /// A bootstrap task names a container its service does not have.
    #[error(
        "service {service}, bootstrap task {task}: `{container}` is not a container of the service; fix the task's `container` in catalog.yml"
    )]
    UnknownTaskContainer {
        service: String,
        task: String,
        container: String,
    },
    /// A task that needs a setting that is off (an operator catalog's task without its `when`).
    #[error(
        "service {service}, bootstrap task {task}: it needs `{setting}: yes` in globals.yml; give the task `when: {setting}` in catalog.yml, or turn the setting on"
    )]
    TaskNeedsSetting {
        service: String,
        task: String,
        setting: &'static str,
    },
    /// The catalog lacks a port kstack addresses a service by
    /// ([`kstack_model::catalog::ADDRESSED_PORTS`]); the catalog's validation refuses such a
    /// catalog, so only one built without it gets here.
    #[error(
        "service {service}: the catalog has no port named `{port}`, which kstack addresses the service by; add `{{ name: {port}, port: <number> }}` to `services.{service}.ports` in catalog.yml"
    )]
    MissingPort { service: String, port: String },
    /// A bootstrap task's env names a placeholder kstack does not fill (a catalog built
    /// without validation, which refuses it).
    #[error("service {service}, bootstrap task {task}, env `{env}`: {message}")]
    UnknownPlaceholder {
        service: String,
        task: String,
        env: String,
        message: String,
    },
    /// An override file under `config/` that cannot be used (`line` 0: the whole file).
    #[error("{file}{}: {message}", if *line > 0 { format!(":{line}") } else { String::new() })]
    Override {
        file: String,
        line: usize,
        message: String,
    },
}

/// How long a terminating Deployment pod that serves a port keeps running after it is marked
/// for deletion (a `preStop` sleep), so kube-proxy stops sending it new connections before the
/// service gets SIGTERM: a rolling update then drops no request. MariaDB's drain
/// (`mariadb-drain.sh`) waits as long before it closes idle connections.
pub const DRAIN_SECS: i64 = 5;

/// How long MariaDB's drain closes idle client connections before the server stops (within
/// the pod's 30 s grace period, after the drain sleep, leaving the server time to shut down).
pub const MARIADB_DRAIN_CLOSE_SECS: u64 = 15;

/// The embedded templates, by name (`<project>/<file>.j2`).
const TEMPLATES: &[(&str, &str)] = &[
    (
        "common/macros.j2",
        include_str!("../templates/common/macros.j2"),
    ),
    (
        "common/uwsgi.j2",
        include_str!("../templates/common/uwsgi.j2"),
    ),
    (
        "mariadb/galera.cnf.j2",
        include_str!("../templates/mariadb/galera.cnf.j2"),
    ),
    (
        "mariadb/mariadb-drain.sh.j2",
        include_str!("../templates/mariadb/mariadb-drain.sh.j2"),
    ),
    (
        "mariadb/mariadb-monitor.sql.j2",
        include_str!("../templates/mariadb/mariadb-monitor.sql.j2"),
    ),
    (
        "mariadb/mariadb-start.sh.j2",
        include_str!("../templates/mariadb/mariadb-start.sh.j2"),
    ),
    (
        "rabbitmq/rabbitmq-env.conf.j2",
        include_str!("../templates/rabbitmq/rabbitmq-env.conf.j2"),
    ),
    (
        "rabbitmq/rabbitmq.conf.j2",
        include_str!("../templates/rabbitmq/rabbitmq.conf.j2"),
    ),
    (
        "rabbitmq/erl_inetrc.j2",
        include_str!("../templates/rabbitmq/erl_inetrc.j2"),
    ),
    (
        "rabbitmq/advanced.config.j2",
        include_str!("../templates/rabbitmq/advanced.config.j2"),
    ),
    (
        "rabbitmq/definitions.json.j2",
        include_str!("../templates/rabbitmq/definitions.json.j2"),
    ),
    (
        "rabbitmq/enabled_plugins.j2",
        include_str!("../templates/rabbitmq/enabled_plugins.j2"),
    ),
    (
        "rabbitmq/erlang.cookie.j2",
        include_str!("../templates/rabbitmq/erlang.cookie.j2"),
    ),
    (
        "rabbitmq/rabbitmq-start.sh.j2",
        include_str!("../templates/rabbitmq/rabbitmq-start.sh.j2"),
    ),
    (
        "keystone/keystone.conf.j2",
        include_str!("../templates/keystone/keystone.conf.j2"),
    ),
    (
        "keystone/wsgi-keystone.conf.j2",
        include_str!("../templates/keystone/wsgi-keystone.conf.j2"),
    ),
    (
        "keystone/keystone-startup.sh.j2",
        include_str!("../templates/keystone/keystone-startup.sh.j2"),
    ),
    (
        "glance/glance-api.conf.j2",
        include_str!("../templates/glance/glance-api.conf.j2"),
    ),
    (
        "placement/placement.conf.j2",
        include_str!("../templates/placement/placement.conf.j2"),
    ),
    (
        "placement/placement-api-uwsgi.ini.j2",
        include_str!("../templates/placement/placement-api-uwsgi.ini.j2"),
    ),
    (
        "nova/nova.conf.j2",
        include_str!("../templates/nova/nova.conf.j2"),
    ),
    (
        "nova/nova-api-uwsgi.ini.j2",
        include_str!("../templates/nova/nova-api-uwsgi.ini.j2"),
    ),
    (
        "nova/nova-metadata-uwsgi.ini.j2",
        include_str!("../templates/nova/nova-metadata-uwsgi.ini.j2"),
    ),
    (
        "nova/libvirtd.conf.j2",
        include_str!("../templates/nova/libvirtd.conf.j2"),
    ),
    (
        "nova/qemu.conf.j2",
        include_str!("../templates/nova/qemu.conf.j2"),
    ),
    (
        "nova/sasl.conf.j2",
        include_str!("../templates/nova/sasl.conf.j2"),
    ),
    (
        "nova/auth.conf.j2",
        include_str!("../templates/nova/auth.conf.j2"),
    ),
    (
        "neutron/neutron.conf.j2",
        include_str!("../templates/neutron/neutron.conf.j2"),
    ),
    (
        "neutron/ml2_conf.ini.j2",
        include_str!("../templates/neutron/ml2_conf.ini.j2"),
    ),
    (
        "neutron/openvswitch_agent.ini.j2",
        include_str!("../templates/neutron/openvswitch_agent.ini.j2"),
    ),
    (
        "neutron/dhcp_agent.ini.j2",
        include_str!("../templates/neutron/dhcp_agent.ini.j2"),
    ),
    (
        "neutron/dnsmasq.conf.j2",
        include_str!("../templates/neutron/dnsmasq.conf.j2"),
    ),
    (
        "neutron/neutron-l3-agent-wrapper.sh.j2",
        include_str!("../templates/neutron/neutron-l3-agent-wrapper.sh.j2"),
    ),
    (
        "neutron/l3_agent.ini.j2",
        include_str!("../templates/neutron/l3_agent.ini.j2"),
    ),
    (
        "neutron/metadata_agent.ini.j2",
        include_str!("../templates/neutron/metadata_agent.ini.j2"),
    ),
    (
        "nova/libvirt-sasl-user.sh.j2",
        include_str!("../templates/nova/libvirt-sasl-user.sh.j2"),
    ),
    (
        "nova/libvirt-ceph-secret.xml.j2",
        include_str!("../templates/nova/libvirt-ceph-secret.xml.j2"),
    ),
    (
        "nova/libvirt-ceph-secret.key.j2",
        include_str!("../templates/nova/libvirt-ceph-secret.key.j2"),
    ),
    (
        "openvswitch/ovs-bridges.sh.j2",
        include_str!("../templates/openvswitch/ovs-bridges.sh.j2"),
    ),
    (
        "openvswitch/ovs-db-settings.sh.j2",
        include_str!("../templates/openvswitch/ovs-db-settings.sh.j2"),
    ),
    (
        "horizon/horizon.conf.j2",
        include_str!("../templates/horizon/horizon.conf.j2"),
    ),
    (
        "horizon/_9998-kolla-settings.py.j2",
        include_str!("../templates/horizon/_9998-kolla-settings.py.j2"),
    ),
    (
        "horizon/_9999-custom-settings.py.j2",
        include_str!("../templates/horizon/_9999-custom-settings.py.j2"),
    ),
    (
        "heat/heat.conf.j2",
        include_str!("../templates/heat/heat.conf.j2"),
    ),
    (
        "heat/wsgi-heat-api.conf.j2",
        include_str!("../templates/heat/wsgi-heat-api.conf.j2"),
    ),
    (
        "heat/wsgi-heat-api-cfn.conf.j2",
        include_str!("../templates/heat/wsgi-heat-api-cfn.conf.j2"),
    ),
    (
        "victoria-logs/victoria-logs-start.sh.j2",
        include_str!("../templates/victoria-logs/victoria-logs-start.sh.j2"),
    ),
    (
        "vlagent/vlagent-start.sh.j2",
        include_str!("../templates/vlagent/vlagent-start.sh.j2"),
    ),
    (
        "cinder/cinder.conf.j2",
        include_str!("../templates/cinder/cinder.conf.j2"),
    ),
    (
        "cinder/cinder-api-uwsgi.ini.j2",
        include_str!("../templates/cinder/cinder-api-uwsgi.ini.j2"),
    ),
    // The operator's Ceph client files, written as they are (a keyring holds a key: secret).
    (
        "cinder/ceph.conf.j2",
        include_str!("../templates/cinder/ceph.conf.j2"),
    ),
    (
        "cinder/ceph.keyring.j2",
        include_str!("../templates/cinder/ceph.keyring.j2"),
    ),
];

/// The auto-escape mode of every template (see [`Templates::new`]).
const LINE_VALUES: &str = "kstack-line-values";

/// Names of the embedded templates, sorted.
pub fn template_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = TEMPLATES.iter().map(|(n, _)| *n).collect();
    v.sort_unstable();
    v
}

/// An environment with kstack's settings (strict undefined, the `oslo` filter) and the given
/// templates. Syntax errors are kept per template and reported when it is rendered.
pub(crate) struct Templates {
    env: Environment<'static>,
    broken: BTreeMap<&'static str, minijinja::Error>,
}

impl Templates {
    pub(crate) fn new(sources: &[(&'static str, &'static str)]) -> Templates {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // Config files are not HTML or JSON documents: no HTML or JSON escaping, even for
        // `definitions.json` (its values go through `tojson`). The custom mode only makes macro
        // output template text (a safe string), so the formatter below tells it from values.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Custom(LINE_VALUES.into()));
        // Every value a `{{ }}` writes stays on its line: a line break (or any other control
        // character) in a globals.yml or passwords.yml value would start new lines, i.e. new
        // options, in the INI files. Refused, naming the template line, never the value.
        // Template text and macro output (safe strings) are written as they are.
        env.set_formatter(|out, _state, value| {
            if value.is_safe() {
                return write!(out, "{value}").map_err(minijinja::Error::from);
            }
            let text = value.to_string();
            if text.contains(char::is_control) {
                return Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    "the value written here holds a line break or another control character, \
                     which would start a new line in the file; kstack refuses to write it (check \
                     the globals.yml or passwords.yml value this line writes)",
                ));
            }
            out.write_str(&text).map_err(minijinja::Error::from)
        });
        if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()
        {
            env.set_syntax(syntax);
        }
        // How a value is written in each format (see `crate::escape`): an oslo.config value,
        // a MariaDB string literal, a MySQL option file value, a GLib key file value, a URL's
        // user or password.
        env.add_filter("oslo", |s: String| escape::oslo(&s));
        env.add_filter("sql", |s: String| escape::sql(&s));
        env.add_filter("option_file", |s: String| escape::option_file(&s));
        env.add_filter("keyfile", |s: String| escape::keyfile(&s));
        env.add_filter("userinfo", |s: String| escape::url_userinfo(&s));
        // `password("key")`: a passwords.yml value, or an error naming the key at the line of
        // the template that asks for it (macro arguments are not checked where they are passed).
        env.add_function(
            "password",
            |state: &minijinja::State, key: String| -> Result<Value, minijinja::Error> {
                match state.lookup(&key) {
                    Some(v) if !v.is_undefined() => Ok(v),
                    _ => Err(minijinja::Error::new(
                        minijinja::ErrorKind::UndefinedError,
                        format!("passwords.yml has no value for `{key}`; run `kstack genpwd`"),
                    )),
                }
            },
        );
        let mut broken = BTreeMap::new();
        for (name, source) in sources {
            if let Err(e) = env.add_template(name, source) {
                broken.insert(*name, e);
            }
        }
        Templates { env, broken }
    }

    fn builtin() -> &'static Templates {
        static T: OnceLock<Templates> = OnceLock::new();
        T.get_or_init(|| Templates::new(TEMPLATES))
    }

    fn has(&self, name: &str) -> bool {
        self.broken.contains_key(name) || self.env.get_template(name).is_ok()
    }

    /// Renders one template with `ctx` and the `secrets`; errors carry the template name (of
    /// the macro file, when the error is inside a macro) and line. The output is secret when
    /// the template wrote any of the secrets.
    pub(crate) fn render(
        &self,
        name: &str,
        ctx: &Value,
        secrets: &Secrets,
    ) -> Result<Output, RenderError> {
        if let Some(e) = self.broken.get(name) {
            return Err(template_error(name, e));
        }
        let t = self
            .env
            .get_template(name)
            .map_err(|e| template_error(name, &e))?;
        let used = Arc::new(SecretUse::default());
        // Names in `ctx` win; the context never has a name in both (see `TemplateContext`).
        let ctx = minijinja::value::merge_maps([secrets.vars(&used), ctx.clone()]);
        let content = t.render(ctx).map_err(|e| template_error(name, &e))?;
        Ok(Output {
            content,
            secret: used.used(),
        })
    }
}

/// One rendered template.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) content: String,
    /// The template wrote a secret value.
    pub(crate) secret: bool,
}

/// An IP address as Erlang writes it: `{10,0,0,1}`, or eight 16-bit groups for IPv6.
fn erlang_ip_tuple(ip: std::net::IpAddr) -> String {
    let parts: Vec<String> = match ip {
        std::net::IpAddr::V4(v4) => v4.octets().iter().map(u8::to_string).collect(),
        std::net::IpAddr::V6(v6) => v6.segments().iter().map(u16::to_string).collect(),
    };
    format!("{{{}}}", parts.join(","))
}

/// Seconds between two looks of the RabbitMQ boot watchdog at a booting node.
pub const RABBITMQ_BOOT_CHECK_SECS: u64 = 10;
/// Seconds a RabbitMQ boot may wait for a peer in a wait without a timeout of its own.
pub const RABBITMQ_BOOT_HANG_SECS: u64 = 60;

fn template_error(name: &str, e: &minijinja::Error) -> RenderError {
    let mut message = e
        .detail()
        .map_or_else(|| e.kind().to_string(), str::to_owned);
    if e.kind() == minijinja::ErrorKind::UndefinedError && !message.contains("passwords.yml") {
        message.push_str(
            " (a globals.yml variable or a passwords.yml value the template needs is missing)",
        );
    }
    RenderError::Template {
        template: e.name().unwrap_or(name).to_owned(),
        line: e.line().unwrap_or(0),
        message,
    }
}

/// Every non-empty value of passwords.yml (SSH keys: both halves): what must never appear in
/// a ConfigMap, an env literal or a message (`kstack verify` redacts them from what it
/// reports). Rendering never uses this list to decide what is secret: see [`crate::secrets`].
pub fn secret_values(passwords: &Passwords) -> Vec<&str> {
    let mut v = Vec::new();
    for s in passwords.entries.values() {
        match s {
            Secret::Empty => {}
            Secret::Value(x) => v.push(x.as_str()),
            Secret::SshKey {
                private_key,
                public_key,
            } => {
                v.push(private_key.as_str());
                v.push(public_key.as_str());
            }
        }
    }
    v.retain(|x| !x.is_empty());
    v.sort_unstable();
    v.dedup();
    v
}

/// Every secret kstack knows of the cloud: the [`secret_values`] of passwords.yml, and the
/// cephx key of the Ceph client's keyring when Cinder stores volumes in Ceph. What `kstack logs`,
/// `kstack verify` and the single node's reports redact from what services print.
pub fn cloud_secret_values(config: &Config) -> Vec<String> {
    let mut v: Vec<String> = secret_values(&config.passwords)
        .into_iter()
        .map(str::to_owned)
        .collect();
    if let Some(ceph) = &config.globals.cinder_ceph {
        let key = config
            .overrides
            .get(&ceph.keyring_file())
            .and_then(|b| kstack_config::overrides::keyring_key(&String::from_utf8_lossy(b)));
        v.extend(key);
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The values of a container's env from passwords.yml (its `secret_env`), by env name: what
/// both targets hand to the container only through a secret (a Secret, a 0600 env file).
pub fn container_secret_env<'a>(
    config: &'a Config,
    service: &str,
    c: &Container,
) -> Result<BTreeMap<String, &'a str>, RenderError> {
    c.secret_env
        .iter()
        .map(|(env, key)| {
            let v = config
                .passwords
                .get(key)
                .ok_or_else(|| RenderError::MissingEnvPassword {
                    service: service.to_owned(),
                    container: c.name.clone(),
                    key: key.clone(),
                })?;
            Ok((env.clone(), v))
        })
        .collect()
}

/// The number of `service`'s port named `name` in the catalog: the one lookup of a port by
/// name, for the config files, the bootstrap tasks and both targets. The numbers live only in
/// the catalog, with no fallback here: a port it lacks is [`RenderError::MissingPort`]. Every
/// port looked up is one of [`ADDRESSED_PORTS`], which the catalog's validation requires.
pub fn port(catalog: &Catalog, service: &str, name: &str) -> Result<u16, RenderError> {
    debug_assert!(
        ADDRESSED_PORTS.contains(&(service, name)),
        "{service}/{name} is not in ADDRESSED_PORTS"
    );
    catalog
        .port(service, name)
        .ok_or_else(|| RenderError::MissingPort {
            service: service.to_owned(),
            port: name.to_owned(),
        })
}

/// The template context shared by every file of a cloud: plain values (globals.yml variables
/// and the addresses computed for a target) and secret values (non-empty passwords and values
/// made from them). A name is in one of the two, never both: computed names win over
/// passwords.yml keys, which win over globals.yml variables.
#[derive(Debug, Clone)]
pub struct TemplateContext {
    pub plain: BTreeMap<String, Value>,
    secrets: Secrets,
}

impl TemplateContext {
    /// Whether `name` is a secret value (a password, or a value made from one).
    pub fn is_secret(&self, name: &str) -> bool {
        self.secrets.contains(name)
    }
}

/// How long the central log store keeps lines unless `victoria_logs_retention_period` says
/// otherwise (kolla-ansible keeps OpenSearch's logs 30 days before it starts deleting them).
pub const VICTORIA_LOGS_RETENTION: &str = "30d";

/// The [`TemplateContext`] of `config` for `target`; an error when the catalog lacks a port
/// it addresses a service by.
pub fn template_context(config: &Config, target: Target) -> Result<TemplateContext, RenderError> {
    let g = &config.globals;
    let c = &config.catalog;
    let mut m: BTreeMap<String, Value> = BTreeMap::new();
    let mut secret: BTreeMap<String, Arc<str>> = BTreeMap::new();
    for (k, v) in &g.vars {
        m.insert(k.clone(), kstack_config::jinja::to_jinja(v));
    }
    for k in config.passwords.entries.keys() {
        if let Some(v) = config.passwords.get(k) {
            m.remove(k);
            secret.insert(k.clone(), Arc::from(v));
        }
    }
    let mut set = |k: &str, v: Value| {
        secret.remove(k);
        m.insert(k.to_owned(), v);
    };
    let url = |service: &str, port: u16| target.url(g, service, port);
    let public_url = |service: &str, port: u16| target.public_url(g, service, port);

    let bind = target.bind_address(g);
    // The bind address as an Erlang IP tuple, for the Erlang distribution's listener; none when
    // services listen on every address (Kubernetes) or the address is not an IP.
    let erlang_ip = match bind.parse::<std::net::IpAddr>() {
        Ok(ip) if !ip.is_unspecified() => Some(erlang_ip_tuple(ip)),
        _ => None,
    };
    set("api_bind_address_erlang", Value::from(erlang_ip));
    set("api_bind_address", Value::from(bind));
    let workers = g
        .vars
        .get("openstack_service_workers")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(2);
    set("api_workers", Value::from(workers));
    // `openstack_logging_debug` (typed when globals.yml was loaded).
    let debug = g
        .vars
        .get("openstack_logging_debug")
        .and_then(kstack_model::globals::parse_bool)
        .unwrap_or(false);
    set("debug", Value::from(if debug { "true" } else { "false" }));
    // oslo.messaging's fanout on RabbitMQ streams (kolla-ansible's default) and the prefetch
    // it needs (typed when globals.yml was loaded).
    let stream_fanout = g
        .vars
        .get("om_enable_rabbitmq_stream_fanout")
        .and_then(kstack_model::globals::parse_bool)
        .unwrap_or(true);
    set("rabbitmq_stream_fanout", Value::from(stream_fanout));
    let prefetch = g
        .vars
        .get("om_rabbitmq_qos_prefetch_count")
        .and_then(|v| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()))
        .unwrap_or(1);
    set("rabbitmq_qos_prefetch_count", Value::from(prefetch));
    // MariaDB's drain before it stops: kube-proxy's delay, then closing idle connections.
    set("drain_secs", Value::from(DRAIN_SECS));
    set("drain_close_secs", Value::from(MARIADB_DRAIN_CLOSE_SECS));
    set("fernet_token_expiry", Value::from(g.fernet.token_expiry));
    set(
        "fernet_token_allow_expired_window",
        Value::from(g.fernet.allow_expired_window),
    );
    set(
        "fernet_max_active_keys",
        Value::from(g.fernet.max_active_keys()),
    );
    set(
        "enabled_services",
        Value::from(config.enabled.iter().cloned().collect::<Vec<String>>()),
    );
    // What differs per image distribution (Apache, MariaDB paths), see kstack_model::distro.
    let distro = g.distro();
    let mut facts: BTreeMap<&str, &str> = kstack_model::distro::FACTS
        .iter()
        .filter_map(|f| Some((*f, distro.fact(f)?)))
        .collect();
    facts.insert("name", distro.name);
    set("distro", Value::from(facts));

    let db_port = port(c, "mariadb", "mysql")?;
    set(
        "database_address",
        Value::from(target.host(g, "mariadb", None)),
    );
    set("database_port", Value::from(db_port));
    set("mariadb_hosts", Value::from(target.hosts(g, "mariadb")));
    set(
        "position_port",
        Value::from(port(c, "mariadb", "position")?),
    );

    let rmq_port = port(c, "rabbitmq", "amqp")?;
    let rmq_user = match g.vars.get("rabbitmq_user") {
        Some(serde_json::Value::String(u)) if !u.is_empty() => u.clone(),
        _ => "openstack".to_owned(),
    };
    let rmq_hosts = target.hosts(g, "rabbitmq");
    set("rabbitmq_port", Value::from(rmq_port));
    set("rabbitmq_user", Value::from(rmq_user.clone()));
    set(
        "rabbitmq_nodes",
        Value::from(
            rmq_hosts
                .iter()
                .map(|h| format!("rabbit@{h}"))
                .collect::<Vec<_>>(),
        ),
    );
    // Each pod names itself after its own host name; the peers use the same long names.
    let nodename = match target {
        Target::Kubernetes => format!(
            "rabbit@$(hostname -s).{}.{}.svc",
            peers_service("rabbitmq"),
            g.kubernetes_namespace
        ),
        Target::Compose => format!("rabbit@{}", target.host(g, "rabbitmq", Some(0))),
    };
    set("rabbitmq_nodename", Value::from(nodename));
    // Holds the RabbitMQ password: a secret value.
    let transport_url = config.passwords.get("rabbitmq_password").map(|pw| {
        let auth = format!(
            "{}:{}",
            escape::url_userinfo(&rmq_user),
            escape::url_userinfo(pw)
        );
        let hosts: Vec<String> = rmq_hosts
            .iter()
            .map(|h| format!("{auth}@{h}:{rmq_port}"))
            .collect();
        format!("rabbit://{}//", hosts.join(","))
    });
    set("rabbitmq_hosts", Value::from(rmq_hosts));
    // The RabbitMQ boot watchdog (kstack-rabbitmq-start): how often it looks at a booting node,
    // and how long the boot may wait for a peer's answer in a wait without a timeout before the
    // node is restarted. A healthy exchange takes milliseconds; RabbitMQ's own fix for the
    // `global` hang acts after 10 s.
    set(
        "rabbitmq_boot_check_secs",
        Value::from(RABBITMQ_BOOT_CHECK_SECS),
    );
    set(
        "rabbitmq_boot_hang_secs",
        Value::from(RABBITMQ_BOOT_HANG_SECS),
    );

    let mc_port = port(c, "memcached", "memcached")?;
    set(
        "memcached_servers",
        Value::from(
            target
                .hosts(g, "memcached")
                .iter()
                .map(|h| format!("{h}:{mc_port}"))
                .collect::<Vec<_>>(),
        ),
    );

    // Central logging: the store's URL, and the files a node's collector reads: the log of
    // every container of the cloud's pods, as the kubelet keeps them
    // (`/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log`).
    let vl_port = port(c, "victoria-logs", "http")?;
    set("victoria_logs_port", Value::from(vl_port));
    set(
        "victoria_logs_url",
        Value::from(url("victoria-logs", vl_port)),
    );
    set(
        "pod_log_glob",
        Value::from(format!(
            "/var/log/pods/{}_*/*/*.log",
            g.kubernetes_namespace
        )),
    );
    let retention = match g.vars.get("victoria_logs_retention_period") {
        Some(serde_json::Value::String(r)) if !r.is_empty() => r.clone(),
        _ => VICTORIA_LOGS_RETENTION.to_owned(),
    };
    set("victoria_logs_retention_period", Value::from(retention));

    let ks_port = port(c, "keystone", "api")?;
    set("keystone_port", Value::from(ks_port));
    set(
        "keystone_internal_url",
        Value::from(url("keystone", ks_port)),
    );
    set(
        "keystone_public_url",
        Value::from(public_url("keystone", ks_port)),
    );
    let glance_port = port(c, "glance-api", "api")?;
    set("glance_port", Value::from(glance_port));
    set(
        "glance_internal_url",
        Value::from(url("glance-api", glance_port)),
    );
    set(
        "placement_port",
        Value::from(port(c, "placement-api", "api")?),
    );
    set("nova_api_port", Value::from(port(c, "nova-api", "api")?));
    let md_port = port(c, "nova-api", "metadata")?;
    set("nova_metadata_port", Value::from(md_port));
    set(
        "nova_metadata_host",
        Value::from(target.host(g, "nova-api", None)),
    );
    let vnc_port = port(c, "nova-novncproxy", "novnc")?;
    set("nova_novncproxy_port", Value::from(vnc_port));
    set(
        "nova_novncproxy_base_url",
        Value::from(format!(
            "{}/vnc_lite.html",
            public_url("nova-novncproxy", vnc_port)
        )),
    );
    set(
        "neutron_port",
        Value::from(port(c, "neutron-server", "api")?),
    );
    set("heat_port", Value::from(port(c, "heat-api", "api")?));
    let cfn_port = port(c, "heat-api-cfn", "api")?;
    set("heat_cfn_port", Value::from(cfn_port));
    set(
        "heat_cfn_public_url",
        Value::from(public_url("heat-api-cfn", cfn_port)),
    );
    set("cinder_port", Value::from(port(c, "cinder-api", "api")?));
    set("horizon_port", Value::from(port(c, "horizon", "http")?));

    // kolla-ansible: one physical network and bridge per external interface.
    let interfaces: Vec<String> = g
        .neutron_external_interface
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let physnets = kstack_model::globals::physical_networks(&g.neutron_external_interface);
    let n = physnets.len();
    set("neutron_external_interfaces", Value::from(interfaces));
    set("neutron_physical_networks", Value::from(physnets));
    set(
        "neutron_bridges",
        Value::from(
            (1..=n)
                .map(|i| {
                    if i == 1 {
                        "br-ex".to_owned()
                    } else {
                        format!("br-ex{i}")
                    }
                })
                .collect::<Vec<_>>(),
        ),
    );
    // Cinder's volumes in Ceph: the cluster's configuration as the operator copied it into
    // the config directory, and the client's keyring, which is secret.
    let ceph = g.cinder_ceph.as_ref();
    let verbatim = |path: String| {
        config
            .overrides
            .get(&path)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    set("cinder_ceph", Value::from(ceph.is_some()));
    if let Some(ceph) = ceph {
        set("cinder_ceph_conf", Value::from(verbatim(ceph.conf_file())));
    }
    if let Some(url) = transport_url {
        m.remove("transport_url");
        secret.insert("transport_url".to_owned(), Arc::from(url));
    }
    if let Some(ceph) = ceph {
        let keyring = verbatim(ceph.keyring_file());
        // The client's cephx key, which libvirt holds as the secret nova's rbd_secret_uuid
        // names, so QEMU can open the volumes nova attaches.
        let key = kstack_config::overrides::keyring_key(&keyring).unwrap_or_default();
        for (name, value) in [("cinder_ceph_keyring", keyring), ("cinder_ceph_key", key)] {
            m.remove(name);
            secret.insert(name.to_owned(), Arc::from(value));
        }
    }
    Ok(TemplateContext {
        plain: m,
        secrets: Secrets::new(secret),
    })
}

/// Parsed override files, parsed once per render.
struct OverrideSet<'a> {
    raw: &'a BTreeMap<String, Vec<u8>>,
    parsed: BTreeMap<&'a str, Ini>,
}

impl<'a> OverrideSet<'a> {
    fn new(raw: &'a BTreeMap<String, Vec<u8>>) -> OverrideSet<'a> {
        OverrideSet {
            raw,
            parsed: BTreeMap::new(),
        }
    }

    fn get(&mut self, path: &str) -> Result<Option<&Ini>, RenderError> {
        let Some((key, bytes)) = self.raw.get_key_value(path) else {
            return Ok(None);
        };
        if !self.parsed.contains_key(key.as_str()) {
            let file = format!("{}/{path}", overrides::DIR);
            let text = std::str::from_utf8(bytes).map_err(|_| RenderError::Override {
                file: file.clone(),
                line: 0,
                message: "the file is not UTF-8 text".into(),
            })?;
            let ini = Ini::parse_override(text).map_err(|e| RenderError::Override {
                file,
                line: e.line,
                message: e.message,
            })?;
            self.parsed.insert(key.as_str(), ini);
        }
        Ok(self.parsed.get(key.as_str()))
    }

    /// `content` with the existing files of `sources` merged over it, in order; unchanged
    /// (byte for byte) when none exists. The flag says whether an override sets what looks
    /// like a credential ([`Ini::credentials`]): the merged file is then secret too.
    fn apply(
        &mut self,
        template: &str,
        content: String,
        sources: &[String],
    ) -> Result<(String, bool), RenderError> {
        let mut layers = Vec::new();
        for s in sources {
            if let Some(ini) = self.get(s)? {
                layers.push(ini.clone());
            }
        }
        if layers.is_empty() {
            return Ok((content, false));
        }
        let credentials = layers.iter().any(|l| !l.credentials().is_empty());
        let mut base = Ini::parse(&content).map_err(|e| RenderError::Template {
            template: template.to_owned(),
            line: e.line,
            message: format!(
                "the rendered file is not INI, so overrides cannot merge: {}",
                e.message
            ),
        })?;
        for l in &layers {
            base.merge(l);
        }
        Ok((base.to_text(), credentials))
    }
}

/// The first error among the override checks (layout, per-host overrides of services that are
/// not DaemonSets, INI syntax), as a [`RenderError`].
fn check_overrides(config: &Config) -> Result<(), RenderError> {
    let verbatim = overrides::verbatim_files(&config.globals);
    let diags = overrides::check(&config.catalog, &config.overrides, &verbatim);
    match diags.into_iter().find(kstack_config::Diag::is_error) {
        Some(d) => Err(RenderError::Override {
            file: d.file,
            line: usize::try_from(d.line).unwrap_or(0),
            message: d.message,
        }),
        None => Ok(()),
    }
}

/// Renders the config directory of every container of every enabled service, in service and
/// container order. On Kubernetes, a DaemonSet service with per-host overrides also gets one
/// [`ContainerFiles`] per container and host (`host: Some(..)`), right after its own.
pub fn render_files(config: &Config, target: Target) -> Result<Vec<ContainerFiles>, RenderError> {
    check_overrides(config)?;
    let templates = Templates::builtin();
    let tc = template_context(config, target)?;
    let base = Value::from(tc.plain);
    let secrets = tc.secrets;
    let host_index = HostIndex::new(config.overrides.keys());
    let mut ov = OverrideSet::new(&config.overrides);
    let mut out = Vec::new();
    for name in &config.enabled {
        let Some(service) = config.catalog.services.get(name) else {
            continue;
        };
        let hosts = if target == Target::Kubernetes && service.kind == WorkloadKind::DaemonSet {
            host_index.hosts_for(service)
        } else {
            Vec::new()
        };
        let mut variants: Vec<ContainerFiles> = Vec::new();
        for c in &service.containers {
            let bind = target.bind_address(&config.globals);
            let mut kolla = KollaConfig::for_container(c, &config.globals.distro(), &bind)
                .map_err(|e| RenderError::UnknownFact {
                    service: name.clone(),
                    container: c.name.clone(),
                    message: e.to_string(),
                })?;
            // A key repository is a read-only Secret on Kubernetes: nothing to chown there.
            if target == Target::Kubernetes {
                kolla.permissions.retain(|p| {
                    !service.volumes.iter().any(|v| {
                        matches!(v.kind, VolumeKind::KeyRepository { .. }) && v.mount_path == p.path
                    })
                });
            }
            // Where each of the container's files lands, by template name (a file may name
            // another one's path, as galera.cnf names the monitor user's SQL).
            let dests: BTreeMap<String, String> = c
                .config_files
                .iter()
                .zip(&kolla.config_files)
                .map(|(f, k)| (f.template.clone(), k.dest.clone()))
                .collect();
            let ctx = context! {
                service => name.as_str(),
                container => c.name.as_str(),
                wsgi => c.serves_wsgi(),
                project => service.project.as_str(),
                container_env => c.plain_env(&config.globals.vars),
                container_secret_env => &c.secret_env,
                config_file_dests => dests,
                ..base.clone()
            };
            let mut files = vec![RenderedFile {
                name: "config.json".into(),
                content: kolla.to_json(),
                secret: false,
            }];
            // (file, rendered content before overrides) for the per-host variants.
            let mut rendered = Vec::new();
            for f in &c.config_files {
                let tname = format!("{}/{}.j2", service.project, f.template);
                if !templates.has(&tname) {
                    return Err(RenderError::UnknownTemplate {
                        service: name.clone(),
                        container: c.name.clone(),
                        project: service.project.clone(),
                        template: f.template.clone(),
                    });
                }
                let out = templates.render(&tname, &ctx, &secrets)?;
                let sources = overrides::sources_for(name, service, c, &f.template);
                let (merged, credentials) = ov.apply(&tname, out.content.clone(), &sources)?;
                files.push(RenderedFile {
                    name: f.template.clone(),
                    secret: out.secret || credentials,
                    content: merged,
                });
                rendered.push((f, tname, out.content, sources));
            }
            files.sort_by(|a, b| a.name.cmp(&b.name));
            for host in &hosts {
                let mut hfiles = files.clone();
                for (f, tname, content, sources) in &rendered {
                    if !f.merge_ini {
                        continue;
                    }
                    let mut s = sources.clone();
                    s.push(overrides::host_source(&service.project, host, &f.template));
                    let (merged, credentials) = ov.apply(tname, content.clone(), &s)?;
                    // Secret when the template wrote a secret (set above) or an override sets
                    // a credential.
                    if let Some(file) = hfiles.iter_mut().find(|x| x.name == f.template) {
                        file.content = merged;
                        file.secret |= credentials;
                    }
                }
                variants.push(ContainerFiles {
                    service: name.clone(),
                    container: c.name.clone(),
                    host: Some((*host).to_owned()),
                    files: hfiles,
                });
            }
            out.push(ContainerFiles {
                service: name.clone(),
                container: c.name.clone(),
                host: None,
                files,
            });
        }
        // Host variants after the service's own files, by host then container.
        variants.sort_by(|a, b| a.host.cmp(&b.host));
        out.extend(variants);
    }
    Ok(out)
}

/// Services of `catalog` that are DaemonSets with per-host overrides in `config`, with their
/// hosts (what the Kubernetes renderer turns into pinned DaemonSet variants).
pub fn host_variants(config: &Config) -> BTreeMap<String, BTreeSet<String>> {
    let ix = HostIndex::new(config.overrides.keys());
    let mut m = BTreeMap::new();
    for name in &config.enabled {
        if let Some(s) = config.catalog.services.get(name)
            && s.kind == WorkloadKind::DaemonSet
        {
            let hosts: BTreeSet<String> = ix.hosts_for(s).into_iter().map(str::to_owned).collect();
            if !hosts.is_empty() {
                m.insert(name.clone(), hosts);
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_errors_name_template_and_line() {
        let t = Templates::new(&[
            ("t/ok.j2", "a\n{{ defined }}\nc {{ missing }}\n"),
            ("t/syntax.j2", "a\nb {% if %}\n"),
        ]);
        let ctx = Value::from(BTreeMap::from([("defined".to_owned(), Value::from(1))]));
        let e = t.render("t/ok.j2", &ctx, &Secrets::default()).unwrap_err();
        assert_eq!(
            e,
            RenderError::Template {
                template: "t/ok.j2".into(),
                line: 3,
                message: "`missing` is undefined (a globals.yml variable or a passwords.yml value the template needs is missing)".into(),
            }
        );
        let RenderError::Template { template, line, .. } = t
            .render("t/syntax.j2", &ctx, &Secrets::default())
            .unwrap_err()
        else {
            panic!("a template error")
        };
        assert_eq!((template.as_str(), line), ("t/syntax.j2", 2));
    }

    #[test]
    fn every_builtin_template_compiles() {
        let t = Templates::builtin();
        assert!(
            t.broken.is_empty(),
            "{:?}",
            t.broken.keys().collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_value_never_starts_a_new_line() {
        let t = Templates::new(&[
            (
                "t/m.j2",
                "{% macro block(v) %}[a]\nk = {{ v }}\n{% endmacro %}",
            ),
            (
                "t/t.j2",
                "{% from 't/m.j2' import block %}[DEFAULT]\nregion = {{ v }}\n{{ block('ok') }}",
            ),
            ("t/s.j2", "[DEFAULT]\n\npassword = {{ pw|oslo }}\n"),
        ]);
        let ctx = |v: &str| Value::from(BTreeMap::from([("v".to_owned(), Value::from(v))]));
        // Template text and macro output span lines; a value stays on its own.
        let out = t
            .render("t/t.j2", &ctx("RegionOne"), &Secrets::default())
            .unwrap();
        assert_eq!(out.content, "[DEFAULT]\nregion = RegionOne\n[a]\nk = ok\n");
        for bad in [
            "One\n[DEFAULT]\ndebug = True",
            "One\r",
            "One\tTwo",
            "One\u{7f}",
        ] {
            let e = t
                .render("t/t.j2", &ctx(bad), &Secrets::default())
                .unwrap_err();
            let RenderError::Template {
                template,
                line,
                message,
            } = &e
            else {
                panic!("{e:?}")
            };
            assert_eq!((template.as_str(), *line), ("t/t.j2", 2), "{bad:?}");
            assert!(
                message.contains("line break") && !message.contains("One"),
                "{message}"
            );
        }
        // A password too, and the error does not show it.
        let secrets = Secrets::new(BTreeMap::from([(
            "pw".to_owned(),
            Arc::from("Sup3rSecret\n[DEFAULT]\ndebug = True"),
        )]));
        let e = t.render("t/s.j2", &ctx(""), &secrets).unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(
            text.contains("line 3") && !text.contains("Sup3rSecret"),
            "{text}"
        );
    }

    #[test]
    fn oslo_filter_escapes_dollars() {
        let t = Templates::new(&[("t.j2", "{{ v|oslo }}")]);
        let ctx = Value::from(BTreeMap::from([("v".to_owned(), Value::from("a$b"))]));
        assert_eq!(
            t.render("t.j2", &ctx, &Secrets::default()).unwrap().content,
            "a$$b"
        );
    }

    #[test]
    fn addresses_per_target() {
        let g = Globals::default();
        let k = Target::Kubernetes;
        assert_eq!(k.host(&g, "keystone", None), "keystone.openstack.svc");
        assert_eq!(
            k.host(&g, "rabbitmq", Some(2)),
            "rabbitmq-2.rabbitmq-peers.openstack.svc"
        );
        let c = Target::Compose;
        assert_eq!(c.host(&g, "keystone", None), "127.0.0.1");
        let g2 = Globals {
            kolla_internal_vip_address: Some("10.0.0.5".into()),
            replicas: BTreeMap::from([("rabbitmq".to_owned(), 3)]),
            ..Globals::default()
        };
        assert_eq!(c.hosts(&g2, "rabbitmq"), vec!["10.0.0.5"]);
        assert_eq!(k.hosts(&g2, "rabbitmq").len(), 3);
    }
}
