//! The Services of a catalog service (the one clients use, and a StatefulSet's headless
//! `<service>-peers`) and the PodDisruptionBudget of a replicated service. The public
//! gateway's Service carries every public frontend's port and answers on the public address.
use kstack_config::Config;
use kstack_k8s::api::core::v1::{Service, ServicePort, ServiceSpec};
use kstack_k8s::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use kstack_k8s::apimachinery::pkg::util::intstr::IntOrString;
use kstack_model::catalog::{self, Protocol, WorkloadKind};
use kstack_model::globals::Globals;
use kstack_model::labels::SERVER;

use super::pod::protocol;
use super::{label_selector, labels, meta, selector};
use crate::names::peers_service;

/// The Services of a catalog service: `<service>`, what clients use, with the ports the catalog
/// exposes and only ready pods behind it; and for a StatefulSet its governing headless Service
/// ([`peers_service`]). The public gateway's Service also has the public frontends' ports
/// ([`crate::files::public_frontends`]) and `kolla_external_vip_address` as an external IP,
/// which kube-proxy answers on every node.
pub(super) fn service_objects(
    config: &Config,
    name: &str,
    service: &catalog::Service,
) -> Vec<Service> {
    let globals = &config.globals;
    let ports = |all: bool| -> Vec<ServicePort> {
        service
            .ports
            .iter()
            .filter(|p| all || p.expose)
            .map(|p| service_port(p.name.clone(), p.port, p.protocol))
            .collect()
    };
    let mut out = Vec::new();
    let mut exposed = ports(false);
    let mut external_ips = None;
    if service.public_gateway {
        exposed.extend(
            crate::files::public_frontends(config, crate::files::Target::Kubernetes)
                .into_iter()
                .flat_map(|f| std::iter::once(f.port).chain(f.redirect_from))
                // Port names are at most 15 characters: the number names it.
                .map(|port| service_port(format!("public-{port}"), port, Protocol::Tcp)),
        );
        external_ips = globals.external_vip().map(|ip| vec![ip.to_string()]);
    }
    if !exposed.is_empty() {
        out.push(Service {
            metadata: meta(globals, name, labels(name, SERVER)),
            spec: Some(ServiceSpec {
                selector: Some(selector(name)),
                ports: Some(exposed),
                external_ips,
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if service.kind == WorkloadKind::StatefulSet {
        let all = ports(true);
        out.push(Service {
            metadata: meta(globals, &peers_service(name), labels(name, "peers")),
            spec: Some(ServiceSpec {
                selector: Some(selector(name)),
                ports: (!all.is_empty()).then_some(all),
                cluster_ip: Some("None".to_owned()),
                publish_not_ready_addresses: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    out
}

/// A port of a Service, passed on to the same port of its pods.
fn service_port(name: String, port: u16, proto: Protocol) -> ServicePort {
    ServicePort {
        name: Some(name),
        port: i32::from(port),
        target_port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some(protocol(proto)),
        ..Default::default()
    }
}

/// Keeps all but one replica of a replicated service running through voluntary disruptions
/// (node drains, evictions): a Galera or RabbitMQ cluster of three keeps its quorum.
pub(super) fn disruption_budget(globals: &Globals, name: &str) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(globals, name, labels(name, SERVER)),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(label_selector(selector(name))),
            ..Default::default()
        }),
        ..Default::default()
    }
}
