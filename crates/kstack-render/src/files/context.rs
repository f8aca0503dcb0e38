//! The template context: every globals.yml variable, every non-empty passwords.yml value,
//! and the values kstack computes for a target (addresses and URLs of the services, ports,
//! RabbitMQ's nodes and transport URL, the distribution's facts, Ceph's files), each name
//! either plain or secret.
use std::collections::BTreeMap;
use std::sync::Arc;

use kstack_config::Config;
use minijinja::Value;

use super::{
    DRAIN_SECS, MARIADB_DRAIN_CLOSE_SECS, NOVA_COMPUTE_DRAIN_SECS, RenderError, Target, port,
};
use crate::escape;
use crate::names::peers_service;
use crate::secrets::Secrets;

/// The template context shared by every file of a cloud: plain values (globals.yml variables
/// and the addresses computed for a target) and secret values (non-empty passwords and values
/// made from them). A name is in one of the two, never both: computed names win over
/// passwords.yml keys, which win over globals.yml variables.
#[derive(Debug, Clone)]
pub struct TemplateContext {
    pub plain: BTreeMap<String, Value>,
    pub(super) secrets: Secrets,
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

/// One frontend of the public gateway: a public port of an enabled service.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PublicFrontend {
    /// `<service>-<port name>`, e.g. `keystone-api`.
    pub name: String,
    /// The port on the public address: the catalog port's `public_tls_port` with TLS, else its
    /// number.
    pub port: u16,
    /// With TLS, the plain port that answers with a redirect to `https://` (Horizon's 80).
    pub redirect_from: Option<u16>,
    /// Where the gateway passes requests on: the service's address for `target`.
    pub backend: String,
    /// The noVNC proxy's port carries a WebSocket for as long as a console is open.
    pub tunnel: bool,
    /// Image uploads and downloads (Glance) may take hours: 6 h instead of a minute of
    /// silence before the gateway gives up, as kolla-ansible gives Glance's frontend.
    pub long_requests: bool,
}

/// The public gateway's frontends: every `public` port of the enabled services, by service
/// name and port order; none when no gateway is enabled (no public address).
pub fn public_frontends(config: &Config, target: Target) -> Vec<PublicFrontend> {
    let g = &config.globals;
    let on = |name: &String| config.enabled.contains(name);
    let gateway_on = config
        .catalog
        .services
        .iter()
        .any(|(n, s)| s.public_gateway && on(n));
    if !gateway_on {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (name, s) in &config.catalog.services {
        if !on(name) {
            continue;
        }
        for p in s.ports.iter().filter(|p| p.public) {
            let tls_port = p.public_tls_port.filter(|_| g.tls.external);
            out.push(PublicFrontend {
                name: format!("{name}-{}", p.name),
                port: tls_port.unwrap_or(p.port),
                redirect_from: tls_port.map(|_| p.port),
                backend: format!("{}:{}", target.host(g, name, None), p.port),
                tunnel: name == "nova-novncproxy",
                long_requests: name == "glance-api",
            });
        }
    }
    out
}

/// Where the public gateway listens, when it has `frontends`: every address of its pod on
/// Kubernetes (its Service carries the public address); on Compose,
/// `kolla_external_vip_address`, an address of the node other than the internal one, where the
/// services themselves listen on the same ports.
fn public_bind_address(
    config: &Config,
    target: Target,
    frontends: &[PublicFrontend],
) -> Result<String, RenderError> {
    let g = &config.globals;
    match target {
        Target::Kubernetes => Ok("0.0.0.0".to_owned()),
        Target::Compose if frontends.is_empty() => Ok(String::new()),
        Target::Compose => match g.external_vip().map(|ip| ip.to_string()) {
            Some(a) if Some(a.as_str()) != g.kolla_internal_vip_address.as_deref() => Ok(a),
            _ => Err(RenderError::PublicAddress {
                message: "on a single node HAProxy publishes the public endpoints on `kolla_external_vip_address`, which must be an IP address of the node other than `kolla_internal_vip_address` (the services listen there on the same ports); set it, or set `enable_haproxy: no` and publish the endpoints yourself".to_owned(),
            }),
        },
    }
}

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
    set(
        "nova_compute_drain_secs",
        Value::from(NOVA_COMPUTE_DRAIN_SECS),
    );
    // The scheduled backup's MariaDB user and the passwords.yml key of its password.
    set("backup_user", Value::from(kstack_model::backup::USER));
    set(
        "backup_password_key",
        Value::from(kstack_model::backup::PASSWORD),
    );
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
    // What differs per OpenStack release, see kstack_model::release.
    set("release", release_facts(g.release()));

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
    let frontends = public_frontends(config, target);
    set(
        "public_bind_address",
        Value::from(public_bind_address(config, target, &frontends)?),
    );
    let frontends_empty = frontends.is_empty();
    set(
        "public_frontends",
        kstack_config::jinja::to_jinja(&serde_json::to_value(frontends).unwrap_or_default()),
    );

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
    set(
        "kstack_tunnel_interface",
        g.tunnel_interface
            .clone()
            .map_or(Value::from(()), Value::from),
    );
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
    // The public endpoints' certificate and key, which only the gateway's `haproxy.pem` uses.
    set("public_tls", Value::from(g.tls.external));
    if g.tls.external && !frontends_empty {
        let cert = config
            .public_certificate
            .as_ref()
            .ok_or(RenderError::PublicCertificate {
                file: kstack_config::PUBLIC_CERTIFICATE_FILE,
            })?;
        m.remove("public_certificate");
        secret.insert(
            "public_certificate".to_owned(),
            Arc::from(cert.pem.as_str()),
        );
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

/// A release's facts as the templates' `release` ([`kstack_model::release`]).
fn release_facts(r: kstack_model::release::Release) -> Value {
    // Both keys, the one not used none (templates run with strict undefined).
    let app = |a: kstack_model::release::UwsgiApp| {
        Value::from(BTreeMap::from([
            ("module", Value::from(a.module)),
            ("script", Value::from(a.script)),
        ]))
    };
    Value::from(BTreeMap::from([
        ("name", Value::from(r.name)),
        ("codename", Value::from(r.codename)),
        ("placement_wsgi", app(r.placement_wsgi)),
        ("cinder_wsgi", app(r.cinder_wsgi)),
    ]))
}
