//! Neutron's view of a guest that booted and got no lease or no metadata, read with the admin
//! token and added to the failure: the server's ports (status, host, VIF type), which DHCP
//! agents serve their networks and the state of those networks' DHCP ports, and the agents
//! Neutron counts as down. It says which of Neutron's layers to look at first: a network no
//! DHCP agent serves, a port never bound or still DOWN, an agent that stopped reporting.
use reqwest::Method;
use serde_json::Value;

use super::{Failure, Run};
use crate::http::Body;

/// One network of the server's ports: its id, the DHCP agents serving it, its DHCP ports.
struct Network {
    id: String,
    dhcp_agents: Vec<Value>,
    dhcp_ports: Vec<Value>,
}

impl Run<'_> {
    /// Neutron's view of the server's ports ([`describe`]), or why it could not be read.
    pub(super) async fn neutron_view(&self, server_id: &str) -> String {
        match self.read_neutron_view(server_id).await {
            Ok(view) => view,
            Err(e) => format!("Neutron's view could not be read: {}", e.message),
        }
    }

    async fn read_neutron_view(&self, server_id: &str) -> Result<String, Failure> {
        let admin = self.admin()?;
        let token = admin.token.as_str();
        let v2 = format!("{}/v2.0", self.endpoint(admin, "network")?);
        let list = |url: String, key: &'static str| async move {
            let (_, v) = self
                .api
                .call(Method::GET, &url, Some(token), Body::None)
                .await?;
            Ok::<_, Failure>(v[key].as_array().cloned().unwrap_or_default())
        };
        let ports = list(format!("{v2}/ports?device_id={server_id}"), "ports").await?;
        let agents = list(format!("{v2}/agents"), "agents").await?;
        let mut ids: Vec<String> = ports
            .iter()
            .filter_map(|p| p["network_id"].as_str().map(str::to_owned))
            .collect();
        ids.sort();
        ids.dedup();
        let mut networks = Vec::new();
        for id in ids {
            networks.push(Network {
                dhcp_agents: list(format!("{v2}/networks/{id}/dhcp-agents"), "agents").await?,
                dhcp_ports: list(
                    format!("{v2}/ports?network_id={id}&device_owner=network:dhcp"),
                    "ports",
                )
                .await?,
                id,
            });
        }
        Ok(describe(&ports, &networks, &agents))
    }
}

/// The first 8 characters of an id, as the messages name resources.
fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn fixed_ips(port: &Value) -> String {
    let ips: Vec<&str> = port["fixed_ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["ip_address"].as_str())
        .collect();
    if ips.is_empty() {
        "no address".to_owned()
    } else {
        ips.join(",")
    }
}

fn agent(a: &Value) -> String {
    format!(
        "{} on {} ({})",
        a["agent_type"].as_str().unwrap_or("agent"),
        a["host"].as_str().unwrap_or("?"),
        match (a["alive"].as_bool(), a["admin_state_up"].as_bool()) {
            (Some(true), Some(false)) => "alive, administratively down",
            (Some(true), _) => "alive",
            _ => "DOWN: no report within agent_down_time",
        }
    )
}

/// Neutron's view as one line.
fn describe(ports: &[Value], networks: &[Network], agents: &[Value]) -> String {
    let mut parts = Vec::new();
    if ports.is_empty() {
        parts.push("the server has no port".to_owned());
    }
    for p in ports {
        let host = p["binding:host_id"].as_str().filter(|h| !h.is_empty());
        parts.push(format!(
            "port {} ({}, {}) {} {}, VIF {}",
            short(p["id"].as_str().unwrap_or("?")),
            p["mac_address"].as_str().unwrap_or("?"),
            fixed_ips(p),
            p["status"].as_str().unwrap_or("?"),
            host.map_or("bound to no host".to_owned(), |h| format!("on {h}")),
            p["binding:vif_type"].as_str().unwrap_or("?"),
        ));
    }
    for n in networks {
        let served = if n.dhcp_agents.is_empty() {
            "served by no DHCP agent".to_owned()
        } else {
            let by: Vec<String> = n.dhcp_agents.iter().map(agent).collect();
            format!("served by {}", by.join(", "))
        };
        let dhcp_ports = if n.dhcp_ports.is_empty() {
            "no DHCP port".to_owned()
        } else {
            let each: Vec<String> = n
                .dhcp_ports
                .iter()
                .map(|p| format!("{} {}", fixed_ips(p), p["status"].as_str().unwrap_or("?")))
                .collect();
            format!("DHCP port {}", each.join(", "))
        };
        parts.push(format!("network {} {served}, {dhcp_ports}", short(&n.id)));
    }
    let down: Vec<String> = agents
        .iter()
        .filter(|a| a["alive"].as_bool() != Some(true) || a["admin_state_up"] == false)
        .map(agent)
        .collect();
    if down.is_empty() {
        parts.push(format!("all {} agents alive and up", agents.len()));
    } else {
        parts.push(format!("agents not serving: {}", down.join(", ")));
    }
    format!("Neutron: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn agent_row(kind: &str, alive: bool) -> Value {
        json!({ "agent_type": kind, "host": "node-1", "alive": alive, "admin_state_up": true })
    }

    #[test]
    fn a_network_no_dhcp_agent_serves_and_an_agent_down_are_named() {
        let ports = [json!({
            "id": "510b327e-15b7-4a79-b703-c4c0fc846389", "mac_address": "fa:16:3e:00:00:01",
            "fixed_ips": [{ "ip_address": "10.99.0.12" }], "status": "ACTIVE",
            "binding:host_id": "node-1", "binding:vif_type": "ovs", "network_id": "a5257ee7-x",
        })];
        let networks = [Network {
            id: "a5257ee7-1e5d-4921-af5f-d66b4f20d93c".to_owned(),
            dhcp_agents: vec![],
            dhcp_ports: vec![],
        }];
        let agents = [
            agent_row("DHCP agent", false),
            agent_row("Open vSwitch agent", true),
        ];
        assert_eq!(
            describe(&ports, &networks, &agents),
            "Neutron: port 510b327e (fa:16:3e:00:00:01, 10.99.0.12) ACTIVE on node-1, VIF ovs; \
             network a5257ee7 served by no DHCP agent, no DHCP port; \
             agents not serving: DHCP agent on node-1 (DOWN: no report within agent_down_time)"
        );
    }

    #[test]
    fn a_served_network_shows_its_agent_and_dhcp_port() {
        let ports = [json!({
            "id": "510b327e-15b7", "mac_address": "fa:16:3e:00:00:01", "fixed_ips": [],
            "status": "DOWN", "binding:host_id": "", "binding:vif_type": "unbound",
        })];
        let networks = [Network {
            id: "a5257ee7-1e5d".to_owned(),
            dhcp_agents: vec![agent_row("DHCP agent", true)],
            dhcp_ports: vec![
                json!({ "fixed_ips": [{ "ip_address": "10.99.0.2" }], "status": "ACTIVE" }),
            ],
        }];
        let mut disabled = agent_row("L3 agent", true);
        disabled["admin_state_up"] = json!(false);
        let agents = [agent_row("DHCP agent", true), disabled];
        assert_eq!(
            describe(&ports, &networks, &agents),
            "Neutron: port 510b327e (fa:16:3e:00:00:01, no address) DOWN bound to no host, VIF unbound; \
             network a5257ee7 served by DHCP agent on node-1 (alive), DHCP port 10.99.0.2 ACTIVE; \
             agents not serving: L3 agent on node-1 (alive, administratively down)"
        );
        assert_eq!(
            describe(&[], &[], &[]),
            "Neutron: the server has no port; all 0 agents alive and up"
        );
    }
}
