//! Networking: the hosts' interfaces, Open vSwitch's datapath, the public endpoints' host and
//! the provider network kstack makes once Neutron runs.
use std::net::Ipv4Addr;

use serde::Deserialize;
use serde_json::Value;

use super::Globals;
use super::kolla::{self, Issues, Read, quoted};

/// Values of `ovs_datapath`: `system` is the Open vSwitch kernel module; `netdev` is the
/// userspace datapath, for hosts without the module (neutron's DHCP and L3 agents then plug
/// their namespaces through veth pairs).
pub const OVS_DATAPATHS: &[&str] = &["system", "netdev"];

/// Network types of neutron's ML2 plugin with the Open vSwitch agent (`neutron_type_drivers`,
/// `neutron_tenant_network_types`).
pub const NETWORK_TYPES: &[&str] = &["flat", "vlan", "vxlan"];

/// The external (provider) network of the cloud, made by kstack after Neutron is up, as an
/// operator does once after a deploy: flat on a physical network of
/// `neutron_external_interface`, shared by every project's routers for their gateways and
/// floating IPs. Settings `kstack_external_network*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalNetwork {
    /// `kstack_external_network_name` (default `public1`); its subnet is `<name>-subnet`.
    pub name: String,
    /// `kstack_external_network_physnet` (default `physnet1`, the first external interface's).
    pub physnet: String,
    /// `kstack_external_network_cidr`: the IPv4 subnet, e.g. `172.24.4.0/24`.
    pub cidr: String,
    /// `kstack_external_network_gateway`: the upstream router's address (default: the
    /// subnet's first address).
    pub gateway: String,
    /// `kstack_external_network_pool`: `START-END` of the addresses Neutron hands out (router
    /// gateways, floating IPs); default: every address of the subnet but the gateway.
    pub pool: Option<(String, String)>,
}

/// TLS of the public endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublicTls {
    /// `kolla_enable_tls_external`: the public gateway serves HTTPS with the public
    /// certificate (the operator's `certificates/haproxy.pem`, else one kstack makes), and
    /// the public endpoints are `https://`.
    pub external: bool,
    /// `kolla_admin_openrc_cacert`: the CA bundle (a path on the operator's machine) that
    /// `kstack openrc` names and `kstack verify` trusts, for an operator certificate of a
    /// private CA.
    pub admin_openrc_cacert: Option<String>,
}

/// The network variables of globals.yml.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct NetworkSettings {
    #[serde(deserialize_with = "kolla::text")]
    network_interface: Read<String>,
    /// A comma-separated list.
    #[serde(deserialize_with = "kolla::text")]
    neutron_external_interface: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    tunnel_interface: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    ovs_datapath: Read<String>,
    /// Comma-separated lists.
    #[serde(deserialize_with = "kolla::text")]
    neutron_type_drivers: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    neutron_tenant_network_types: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kolla_external_fqdn: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kolla_external_vip_address: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kolla_internal_vip_address: Read<String>,
    #[serde(deserialize_with = "kolla::boolean")]
    kolla_enable_tls_external: Read<bool>,
    #[serde(deserialize_with = "kolla::text")]
    kolla_admin_openrc_cacert: Read<String>,
    #[serde(deserialize_with = "kolla::boolean")]
    kstack_external_network: Read<bool>,
    #[serde(deserialize_with = "kolla::text")]
    kstack_external_network_name: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kstack_external_network_physnet: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kstack_external_network_cidr: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kstack_external_network_gateway: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kstack_external_network_pool: Read<String>,
}

const IFNAME_HELP: &str =
    "write the name of a network interface of the hosts: 1 to 15 letters, digits, `-`, `_` or `.`";

/// Whether `s` can name a Linux network interface (at most 15 bytes, no `/`, `:` or space;
/// kstack takes the portable subset, so the name is safe in a rendered command).
fn interface_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The physical networks of `neutron_external_interface` (a comma-separated list), as
/// kolla-ansible names them: `physnet<N>` for the N-th interface, `physnet1` when none is set.
pub fn physical_networks(neutron_external_interface: &str) -> Vec<String> {
    let n = neutron_external_interface
        .split(',')
        .filter(|i| !i.trim().is_empty())
        .count()
        .max(1);
    (1..=n).map(|i| format!("physnet{i}")).collect()
}

impl NetworkSettings {
    /// `network_interface` and `neutron_external_interface`: Linux interface names.
    pub fn interfaces(&self, t: &mut Issues) -> (String, String) {
        let network_interface = t.text("network_interface", &self.network_interface);
        if !interface_name(&network_interface) {
            t.push(
                "network_interface",
                None,
                format!("`{network_interface}` is not a network interface name"),
                IFNAME_HELP.into(),
            );
        }
        let neutron_external_interface = t.text(
            "neutron_external_interface",
            &self.neutron_external_interface,
        );
        for name in neutron_external_interface.split(',').map(str::trim) {
            if !name.is_empty() && !interface_name(name) {
                t.push(
                    "neutron_external_interface",
                    None,
                    format!("`{name}` is not a network interface name"),
                    format!("{IFNAME_HELP}; list several separated by commas (eth1,eth2)"),
                );
            }
        }
        (network_interface, neutron_external_interface)
    }

    /// `tunnel_interface`, when set: the hosts' interface whose address is their VXLAN tunnel
    /// endpoint (unset: each host's own address, the one of its default route).
    pub fn tunnel(&self, t: &mut Issues) -> Option<String> {
        let name = t.opt_text("tunnel_interface", &self.tunnel_interface)?;
        if !interface_name(&name) {
            t.push(
                "tunnel_interface",
                None,
                format!("`{name}` is not a network interface name"),
                IFNAME_HELP.into(),
            );
        }
        Some(name)
    }

    /// `neutron_type_drivers` and `neutron_tenant_network_types`: network types of the Open
    /// vSwitch agent (flat, vlan, vxlan), the tenant ones among the drivers.
    pub fn network_types(&self, t: &mut Issues) {
        let drivers = t.text("neutron_type_drivers", &self.neutron_type_drivers);
        let drivers: Vec<&str> = drivers.split(',').map(str::trim).collect();
        for d in &drivers {
            if !NETWORK_TYPES.contains(d) {
                t.push(
                    "neutron_type_drivers",
                    None,
                    format!("`{d}` is not a network type kstack builds"),
                    format!(
                        "list some of {} separated by commas (geneve needs OVN, which is not built)",
                        NETWORK_TYPES.join(", ")
                    ),
                );
            }
        }
        let tenant = t.text(
            "neutron_tenant_network_types",
            &self.neutron_tenant_network_types,
        );
        for ty in tenant.split(',').map(str::trim) {
            if !drivers.contains(&ty) {
                t.push(
                    "neutron_tenant_network_types",
                    None,
                    format!("`{ty}` is not among `neutron_type_drivers` ({})", drivers.join(",")),
                    "list network types of neutron_type_drivers, in the order tenant networks take them (e.g. `vxlan` or `vlan,vxlan`); VLAN tenant networks also need their ranges in config/neutron/ml2_conf.ini ([ml2_type_vlan] network_vlan_ranges = physnet1:100:199)".into(),
                );
            }
        }
    }

    /// `ovs_datapath`: one kstack renders.
    pub fn datapath(&self, t: &mut Issues) {
        t.choice("ovs_datapath", &self.ovs_datapath, OVS_DATAPATHS);
    }

    /// The hosts of the endpoints: the public ones' host names or addresses, and the internal
    /// VIP (which has no effect on Kubernetes but is kept).
    pub fn endpoints(&self, t: &mut Issues) -> Option<String> {
        for (key, r) in [
            ("kolla_external_fqdn", &self.kolla_external_fqdn),
            (
                "kolla_external_vip_address",
                &self.kolla_external_vip_address,
            ),
        ] {
            if let Some(h) = t.opt_text(key, r)
                && let Err(why) = crate::names::host(&h)
            {
                t.push(
                    key,
                    None,
                    format!("{} is not a host name or address: {why}", quoted(&h)),
                    "write the DNS name or IP address clients use for the public endpoints, e.g. `cloud.example.com`".into(),
                );
            }
        }
        t.opt_text(
            "kolla_internal_vip_address",
            &self.kolla_internal_vip_address,
        )
    }

    /// TLS on the public endpoints (`kolla_enable_tls_external`), which needs a public address
    /// for the certificate to name, and `kolla_admin_openrc_cacert`, the CA file the admin's
    /// openrc names.
    pub fn tls(&self, t: &mut Issues) -> PublicTls {
        let external = t
            .flag("kolla_enable_tls_external", &self.kolla_enable_tls_external)
            .unwrap_or(false);
        let has_public_host = [&self.kolla_external_fqdn, &self.kolla_external_vip_address]
            .iter()
            .any(|r| r.typed.as_deref().is_some_and(|h| !h.is_empty()));
        if external && !has_public_host {
            t.push(
                "kolla_enable_tls_external",
                None,
                "TLS on the public endpoints needs a public address for the certificate to name".into(),
                "set `kolla_external_vip_address` (or `kolla_external_fqdn`) to the address clients use, or set `kolla_enable_tls_external: \"no\"`".into(),
            );
        }
        let admin_openrc_cacert =
            t.opt_text("kolla_admin_openrc_cacert", &self.kolla_admin_openrc_cacert);
        PublicTls {
            external,
            admin_openrc_cacert,
        }
    }

    /// The `kstack_external_network*` settings, checked when `kstack_external_network` is on:
    /// an IPv4 subnet, a gateway and a pool inside it, a physical network of
    /// `neutron_external_interface` (`physnet1` for its first interface, ...).
    pub fn external_network(&self, t: &mut Issues) -> Option<ExternalNetwork> {
        let on = t
            .flag("kstack_external_network", &self.kstack_external_network)
            .unwrap_or(false);
        let name = t.text(
            "kstack_external_network_name",
            &self.kstack_external_network_name,
        );
        let physnet = t.text(
            "kstack_external_network_physnet",
            &self.kstack_external_network_physnet,
        );
        let cidr = t.text(
            "kstack_external_network_cidr",
            &self.kstack_external_network_cidr,
        );
        let gateway = t.text(
            "kstack_external_network_gateway",
            &self.kstack_external_network_gateway,
        );
        let pool = t.text(
            "kstack_external_network_pool",
            &self.kstack_external_network_pool,
        );
        if !on {
            return None;
        }
        let mut ok = true;
        if name.is_empty() || name.len() > 255 {
            t.push(
                "kstack_external_network_name",
                None,
                "the external network needs a name of 1 to 255 characters".into(),
                "write e.g. `kstack_external_network_name: public1`".into(),
            );
            ok = false;
        }
        // A number is not an interface list: it counts as none (`physnet1`).
        let physnets = physical_networks(
            self.neutron_external_interface
                .raw()
                .as_str()
                .unwrap_or_default(),
        );
        if !physnets.contains(&physnet) {
            t.push(
                "kstack_external_network_physnet",
                None,
                format!(
                    "{} is not a physical network of this cloud",
                    quoted(&physnet)
                ),
                format!(
                    "one physical network per `neutron_external_interface`: {}",
                    physnets.join(", ")
                ),
            );
            ok = false;
        }
        let net = cidr.split_once('/').and_then(|(a, l)| {
            let a: Ipv4Addr = a.parse().ok()?;
            let l: u32 = l.parse().ok().filter(|l| (8..=30).contains(l))?;
            let mask = u32::MAX << (32 - l);
            (u32::from(a) & !mask == 0).then_some((u32::from(a), mask))
        });
        let Some((base, mask)) = net else {
            t.push(
                "kstack_external_network_cidr",
                None,
                format!("{} is not an IPv4 subnet", quoted(&cidr)),
                "with `kstack_external_network: yes`, write the provider network's subnet as ADDRESS/PREFIX, the address its first one and the prefix 8 to 30, e.g. `kstack_external_network_cidr: 172.24.4.0/24`".into(),
            );
            return None;
        };
        let inside = |a: &str| {
            a.parse::<Ipv4Addr>()
                .ok()
                .map(u32::from)
                .filter(|a| a & mask == base && *a != base && *a != base | !mask)
        };
        let gateway = if gateway.is_empty() {
            Ipv4Addr::from(base + 1).to_string()
        } else if inside(&gateway).is_some() {
            gateway
        } else {
            t.push(
                "kstack_external_network_gateway",
                None,
                format!("{} is not a host address of {cidr}", quoted(&gateway)),
                format!("write the upstream router's address in {cidr}, or leave it out for the first address"),
            );
            ok = false;
            gateway
        };
        let pool = if pool.is_empty() {
            None
        } else {
            let range = pool.split_once('-').and_then(|(a, b)| {
                let (x, y) = (inside(a.trim())?, inside(b.trim())?);
                (x <= y).then(|| (a.trim().to_owned(), b.trim().to_owned()))
            });
            if range.is_none() {
                t.push(
                    "kstack_external_network_pool",
                    None,
                    format!("{} is not a range of host addresses of {cidr}", quoted(&pool)),
                    "write START-END, both in the subnet, START first, e.g. `kstack_external_network_pool: 172.24.4.100-172.24.4.200`".into(),
                );
                ok = false;
            }
            range
        };
        ok.then_some(ExternalNetwork {
            name,
            physnet,
            cidr,
            gateway,
            pool,
        })
    }
}

impl Globals {
    /// The host of the public endpoints: `kolla_external_fqdn`, else
    /// `kolla_external_vip_address` (IPv6 in brackets), else `None` (public endpoints are the
    /// internal ones).
    /// The scheme of the public endpoints: `https` with `kolla_enable_tls_external`.
    pub fn public_scheme(&self) -> &'static str {
        if self.tls.external { "https" } else { "http" }
    }

    pub fn public_host(&self) -> Option<String> {
        ["kolla_external_fqdn", "kolla_external_vip_address"]
            .iter()
            .find_map(|k| {
                self.vars
                    .get(*k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            })
            .map(|h| match h.parse::<std::net::Ipv6Addr>() {
                Ok(_) => format!("[{h}]"),
                Err(_) => h.to_owned(),
            })
    }

    /// `kolla_external_vip_address` when it is an IP address: where the public gateway
    /// answers (a name alone is the operator's to route).
    pub fn external_vip(&self) -> Option<std::net::IpAddr> {
        self.vars
            .get("kolla_external_vip_address")
            .and_then(Value::as_str)
            .and_then(|a| a.parse().ok())
    }
}
