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
//!
//! The parts live in submodules, their public items re-exported here: `templates` (the
//! embedded templates and the environment they render in), `context` (the template context)
//! and `merge` (the override files merged over the rendered files).
use std::collections::{BTreeMap, BTreeSet};

use kstack_config::Config;
use kstack_config::overrides::{self, HostIndex};
use kstack_config::passwords::{Passwords, Secret};
use kstack_model::catalog::{ADDRESSED_PORTS, Catalog, Container, VolumeKind, WorkloadKind};
use kstack_model::globals::Globals;
use minijinja::{Value, context};

use crate::kolla::KollaConfig;
use crate::names::peers_service;

mod context;
mod merge;
mod templates;

pub use context::{
    PublicFrontend, RABBITMQ_BOOT_CHECK_SECS, RABBITMQ_BOOT_HANG_SECS, TemplateContext,
    VICTORIA_LOGS_RETENTION, public_frontends, template_context,
};
pub use templates::template_names;

use merge::{OverrideSet, check_overrides};
use templates::Templates;

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
    /// `kolla_external_vip_address` when set ([`Globals::public_host`]), `https` with TLS on
    /// the public endpoints; else the internal one.
    pub fn public_url(&self, globals: &Globals, service: &str, port: u16) -> String {
        match globals.public_host() {
            Some(h) => format!("{}://{h}:{port}", globals.public_scheme()),
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
    /// The public gateway cannot listen where the settings say (see the message).
    #[error("{message}")]
    PublicAddress { message: String },
    /// TLS on the public endpoints without a certificate: neither the operator's nor one
    /// kstack made (only a deploy to a cluster makes one).
    #[error(
        "`kolla_enable_tls_external` is on but there is no certificate for the public endpoints: put the certificate chain and its private key in `{file}` of the config directory (on Kubernetes, `kstack deploy` makes one from kstack's own CA when that file is absent)"
    )]
    PublicCertificate { file: &'static str },
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

/// How long nova-compute's drain (`nova-compute-drain.py`) waits at most for the servers of its
/// host that have a task under way, before the container stops (the catalog gives the pod a
/// longer grace period).
pub const NOVA_COMPUTE_DRAIN_SECS: u64 = 120;

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
            let mut kolla = KollaConfig::for_container(
                c,
                &config.globals.distro(),
                &config.globals.release(),
                &bind,
            )
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
