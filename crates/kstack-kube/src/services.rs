//! The ClusterIP of each Service of a namespace: how a host on the cluster network that does
//! not use the cluster's DNS reaches a Service by name (e.g. `kstack verify --resolve
//! <service>.<namespace>.svc=<ClusterIP>`).
use std::collections::BTreeMap;
use std::net::IpAddr;

use kstack_k8s::api::core::v1::Service;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::Error;

/// Service name → ClusterIP, for every Service of `namespace` that has one (headless Services
/// have none).
pub async fn service_addresses(
    client: &Client,
    namespace: &str,
) -> Result<BTreeMap<String, IpAddr>, Error> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let list = api.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter_map(|s| {
            let name = s.metadata.name.clone()?;
            let ip = s.spec.as_ref()?.cluster_ip.as_deref()?.parse().ok()?;
            Some((name, ip))
        })
        .collect())
}
