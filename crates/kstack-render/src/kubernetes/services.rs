//! The Services of a catalog service (the one clients use, and a StatefulSet's headless
//! `<service>-peers`) and the PodDisruptionBudget of a replicated service.
use kstack_k8s::api::core::v1::{Service, ServicePort, ServiceSpec};
use kstack_k8s::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use kstack_k8s::apimachinery::pkg::util::intstr::IntOrString;
use kstack_model::catalog::{self, WorkloadKind};
use kstack_model::globals::Globals;
use kstack_model::labels::SERVER;

use super::pod::protocol;
use super::{label_selector, labels, meta, selector};
use crate::names::peers_service;

/// The Services of a catalog service: `<service>`, what clients use, with the ports the catalog
/// exposes and only ready pods behind it; and for a StatefulSet its governing headless Service
/// ([`peers_service`]).
pub(super) fn service_objects(
    globals: &Globals,
    name: &str,
    service: &catalog::Service,
) -> Vec<Service> {
    let ports = |all: bool| -> Vec<ServicePort> {
        service
            .ports
            .iter()
            .filter(|p| all || p.expose)
            .map(|p| ServicePort {
                name: Some(p.name.clone()),
                port: i32::from(p.port),
                target_port: Some(IntOrString::Int(i32::from(p.port))),
                protocol: Some(protocol(p.protocol)),
                ..Default::default()
            })
            .collect()
    };
    let mut out = Vec::new();
    let exposed = ports(false);
    if !exposed.is_empty() {
        out.push(Service {
            metadata: meta(globals, name, labels(name, SERVER)),
            spec: Some(ServiceSpec {
                selector: Some(selector(name)),
                ports: Some(exposed),
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
