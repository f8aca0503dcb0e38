//! The network step: a router and a tenant network behind it (with a guest, a second one that
//! joins the router later), the router's gateway on an external network, and the Neutron
//! helpers the server step uses too.
use reqwest::Method;
use serde_json::json;

use super::{Failure, Run, SecondNetwork};
use crate::cleanup::{Created, Kind, Owner};
use crate::http::Body;

impl Run<'_> {
    pub(super) async fn network(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let token = user.token.clone();
        let neutron = self.endpoint(user, "network")?;
        let name = self.s.prefix.clone();
        let v2 = format!("{neutron}/v2.0");
        // Before the router, so that the cleanup (newest first) deletes the router first.
        let external = self.external_network(&token, &v2).await?;
        let (router, _) = self
            .create(
                &token,
                &format!("{v2}/routers"),
                Kind::Router,
                Owner::User,
                json!({ "name": name }),
            )
            .await?;
        let cidr = self.s.cidr.clone();
        let net = self
            .routed_network(&token, &v2, &router, &name, &cidr)
            .await?;
        self.network_id = Some(net);
        // With a guest, a second network behind the same router: a server there must answer
        // the first one's ping (routing between tenant networks).
        let second = match (&self.s.guest, next_subnet(&cidr)) {
            (Some(_), Some(cidr_b)) => {
                let name_b = format!("{name}-b");
                let (network, subnet) = self.tenant_network(&token, &v2, &name_b, &cidr_b).await?;
                self.second_network = Some(SecondNetwork {
                    network,
                    subnet,
                    name: name_b.clone(),
                    router: router.clone(),
                });
                format!(
                    ", a second network {name_b} ({cidr_b}), without a router until its server has its metadata"
                )
            }
            _ => String::new(),
        };
        let gateway = match external {
            Some((ext, ext_name)) => {
                self.api
                    .call(
                        Method::PUT,
                        &format!("{v2}/routers/{router}"),
                        Some(&token),
                        Body::Json(&json!({ "router": {
                            "external_gateway_info": { "network_id": ext },
                        }})),
                    )
                    .await?;
                self.external_id = Some(ext);
                format!(", gateway on the external network {ext_name}")
            }
            None => ", no external network for a gateway".to_owned(),
        };
        Ok(format!(
            "network, subnet {cidr} and router {name}, subnet attached{second}{gateway}"
        ))
    }

    /// A network named `name` with the IPv4 subnet `cidr`, attached to `router` (each recorded
    /// for the cleanup, which removes the interface before the subnet); its id.
    async fn routed_network(
        &mut self,
        token: &str,
        v2: &str,
        router: &str,
        name: &str,
        cidr: &str,
    ) -> Result<String, Failure> {
        let (net, subnet) = self.tenant_network(token, v2, name, cidr).await?;
        self.attach(token, v2, router, name, &subnet).await?;
        Ok(net)
    }

    /// A network named `name` with the IPv4 subnet `cidr` (both recorded for the cleanup): the
    /// network's and the subnet's ids.
    async fn tenant_network(
        &mut self,
        token: &str,
        v2: &str,
        name: &str,
        cidr: &str,
    ) -> Result<(String, String), Failure> {
        let (net, _) = self
            .create(
                token,
                &format!("{v2}/networks"),
                Kind::Network,
                Owner::User,
                json!({ "name": name }),
            )
            .await?;
        let (subnet, _) = self
            .create(
                token,
                &format!("{v2}/subnets"),
                Kind::Subnet,
                Owner::User,
                json!({ "name": name, "network_id": net, "ip_version": 4, "cidr": cidr }),
            )
            .await?;
        Ok((net, subnet))
    }

    /// Attaches `subnet` (of the network `name`) to `router`, recorded for the cleanup, which
    /// removes the interface before the subnet.
    pub(super) async fn attach(
        &mut self,
        token: &str,
        v2: &str,
        router: &str,
        name: &str,
        subnet: &str,
    ) -> Result<(), Failure> {
        let attach = json!({ "subnet_id": subnet });
        self.api
            .call(
                Method::PUT,
                &format!("{v2}/routers/{router}/add_router_interface"),
                Some(token),
                Body::Json(&attach),
            )
            .await?;
        self.created.push(Created {
            kind: Kind::RouterInterface,
            name: name.to_owned(),
            id: subnet.to_owned(),
            url: format!("{v2}/routers/{router}/remove_router_interface"),
            owner: Owner::User,
            body: Some(attach),
        });
        Ok(())
    }

    /// The external network to put the router's gateway on: the one `--external-network`
    /// names, else the only one the cloud has (`router:external`), else, with
    /// `--external-subnet`, a scratch one the run makes as the admin, else none.
    async fn external_network(
        &mut self,
        token: &str,
        v2: &str,
    ) -> Result<Option<(String, String)>, Failure> {
        let (_, v) = self
            .api
            .call(
                Method::GET,
                &format!("{v2}/networks?router:external=true"),
                Some(token),
                Body::None,
            )
            .await?;
        let nets: Vec<(String, String)> = v["networks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| Some((n["id"].as_str()?.to_owned(), n["name"].as_str()?.to_owned())))
            .collect();
        match &self.s.external_network {
            Some(want) => nets
                .into_iter()
                .find(|(id, name)| id == want || name == want)
                .map(Some)
                .ok_or_else(|| {
                    Failure::check(format!(
                        "no external network named {want} (router:external networks visible to the user)"
                    ))
                }),
            None if nets.len() == 1 => Ok(nets.into_iter().next()),
            None if nets.is_empty() && self.s.external_subnet.is_some() => {
                self.scratch_external_network().await.map(Some)
            }
            None => Ok(None),
        }
    }

    /// A flat provider network on `physnet1` (the bridge of the first
    /// `neutron_external_interface`) with `--external-subnet`, its first address the gateway,
    /// made and later deleted by the admin; returns its id and name.
    async fn scratch_external_network(&mut self) -> Result<(String, String), Failure> {
        let admin = self.admin()?;
        let token = admin.token.clone();
        let neutron = self.endpoint(admin, "network")?;
        let v2 = format!("{neutron}/v2.0");
        let cidr = self.s.external_subnet.clone().unwrap_or_default();
        let name = format!("{}-external", self.s.prefix);
        let (net, _) = self
            .create(
                &token,
                &format!("{v2}/networks"),
                Kind::Network,
                Owner::Admin,
                json!({
                    "name": name, "router:external": true,
                    "provider:network_type": "flat", "provider:physical_network": "physnet1",
                }),
            )
            .await?;
        self.create(
            &token,
            &format!("{v2}/subnets"),
            Kind::Subnet,
            Owner::Admin,
            json!({
                "name": name, "network_id": net, "ip_version": 4, "cidr": cidr,
                "enable_dhcp": false,
            }),
        )
        .await?;
        Ok((net, name))
    }
}

/// The IPv4 block of the same size right after `cidr` (`10.99.0.0/24` → `10.99.1.0/24`);
/// `None` when it is not an IPv4 block or none follows.
fn next_subnet(cidr: &str) -> Option<String> {
    let (addr, len) = cidr.split_once('/')?;
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok().filter(|l| (1..=30).contains(l))?;
    let size = 1u32 << (32 - len);
    let base = u32::from(addr) & !(size - 1);
    let next = base.checked_add(size)?;
    Some(format!("{}/{len}", std::net::Ipv4Addr::from(next)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_network_is_the_next_block_of_the_same_size() {
        assert_eq!(next_subnet("10.99.0.0/24").as_deref(), Some("10.99.1.0/24"));
        assert_eq!(next_subnet("10.99.0.7/24").as_deref(), Some("10.99.1.0/24"));
        assert_eq!(
            next_subnet("192.168.0.0/28").as_deref(),
            Some("192.168.0.16/28")
        );
        assert_eq!(next_subnet("255.255.255.0/24"), None);
        assert_eq!(next_subnet("fd00::/64"), None);
        assert_eq!(next_subnet("10.0.0.0/31"), None);
    }
}
