//! What the server step checks on a guest image (`Settings::guest`): its console (lease,
//! metadata, SSH server), the run's key pair and a security group that lets SSH and ping in,
//! a login over a floating IP, a ping between the tenant networks and a write to the attached
//! volume, each failure naming the first layer that did not work.
use std::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};

use super::{Failure, Run};
use crate::cleanup::{Kind, Owner};
use crate::guest::Console;
use crate::http::Body;
use crate::secs;
use crate::ssh::{self, Key};

/// The guest's user (`hack/guest.sh`'s image has CirrOS' user name, as tempest expects).
pub(super) const GUEST_USER: &str = "cirros";
/// Time limit of one command on the guest.
const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

impl Run<'_> {
    /// From the first guest (over SSH), the second server's fixed address on the other
    /// network answers ping: the router routes between the two tenant networks. Says whether
    /// the two servers ran on different compute hosts (their `hostId`s, which a project sees).
    pub(super) async fn ping_across(
        &self,
        session: &ssh::Session,
        token: &str,
        url_a: &str,
        id_b: &str,
        url_b: &str,
    ) -> Result<String, Failure> {
        let (_, a) = self
            .api
            .call(Method::GET, url_a, Some(token), Body::None)
            .await?;
        let (_, v) = self
            .api
            .call(Method::GET, url_b, Some(token), Body::None)
            .await?;
        // Empty while a server has no host yet.
        let host_id = |v: &Value| {
            v["server"]["hostId"]
                .as_str()
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
        };
        let hosts = match (host_id(&a), host_id(&v)) {
            (Some(x), Some(y)) if x != y => "on another compute host than the first",
            (Some(_), Some(_)) => "on the first one's compute host (no other took it)",
            _ => "on a compute host nova did not name",
        };
        let address = addresses(&v["server"])
            .into_iter()
            .next()
            .ok_or_else(|| Failure::check(format!("server {id_b} has no address")))?;
        let started = Instant::now();
        // The router's new port may take a few seconds to pass traffic: a ping every second or
        // two until the first reply, for up to 40 s (the guest's busybox ping stops after its
        // count of pings, replied or not); the last one's statistics for the report.
        let (status, out) = session
            .run(
                &format!(
                    "i=0; while [ $i -lt 20 ]; do ping -c 1 -W 1 {address} >/dev/null 2>&1 && exit 0; sleep 1; i=$((i+1)); done; ping -c 1 -W 1 {address}"
                ),
                COMMAND_TIMEOUT * 4,
            )
            .await
            .map_err(|e| Failure::check(format!("no SSH: {e}")))?;
        if status != 0 {
            let last: Vec<&str> = out.lines().rev().take(2).collect();
            return Err(Failure::check(format!(
                "no route between the tenant networks: no reply to `ping {address}` in 40 s (server {id_b}, the second network) from the first guest, exit {status}: {}",
                last.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )));
        }
        Ok(format!(
            "; the second server, {hosts} and on a network without a router, got its lease and its metadata through the network's DHCP port, and once that network was attached to the same router answered the first one's ping at {address} ({:.1} s)",
            secs(started)
        ))
    }

    /// Reads the guest's console until it has reported its lease, its metadata and its SSH
    /// server, or given up on one of them; a failure names the first layer it did not reach.
    /// `via` says what the metadata came through (the router, or the DHCP port of a network
    /// without one).
    pub(super) async fn guest(
        &self,
        token: &str,
        url: &str,
        id: &str,
        name: &str,
        via: &str,
    ) -> Result<String, Failure> {
        let started = Instant::now();
        let deadline = started + self.s.timeout;
        let action = format!("{url}/action");
        let (console, log) = loop {
            let (_, v) = self
                .api
                .call(
                    Method::POST,
                    &action,
                    Some(token),
                    Body::Json(&json!({ "os-getConsoleOutput": {} })),
                )
                .await?;
            let log = v["output"].as_str().unwrap_or_default().to_owned();
            let console = Console::read(&log);
            if console.settled() || Instant::now() >= deadline {
                break (console, log);
            }
            tokio::time::sleep(self.s.poll_interval).await;
        };
        let (_, v) = self
            .api
            .call(Method::GET, url, Some(token), Body::None)
            .await?;
        let addresses = addresses(&v["server"]);
        if let Some(why) = console.failure(id, name, &addresses) {
            // What the guest's init reported, or, when it reported nothing, the console's end.
            let lines: Vec<&str> = log.lines().map(str::trim_end).collect();
            let mut shown: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l.contains("kstack-guest: "))
                .collect();
            if shown.is_empty() {
                shown = lines[lines.len().saturating_sub(12)..].to_vec();
            }
            // A guest that booted and reached no network service: what Neutron says of its
            // ports, their networks' DHCP agents and the agents down.
            let neutron = if console.booted {
                format!("; {}", self.neutron_view(id).await)
            } else {
                String::new()
            };
            return Err(Failure {
                message: format!(
                    "server {id}: {why} (after {:.1} s; its console: {}){neutron}",
                    secs(started),
                    shown.join(" | ")
                ),
                call: None,
                // A guest that booted and got no lease or no metadata: the logs to read are
                // Neutron's agents' (DHCP, Open vSwitch, L3, metadata), then Nova's.
                services: console.booted.then(|| {
                    let mut s = self.s.services_of(&["neutron"]);
                    if console.lease.is_some() {
                        s.extend(self.s.services_of(&["nova"]));
                    }
                    s
                }),
            });
        }
        let lease = console.lease.map(|l| l.address).unwrap_or_default();
        Ok(format!(
            "the guest got its lease {lease} and its metadata (its instance id, hostname) through {via} and started SSH {:.1} s after ACTIVE",
            secs(started)
        ))
    }

    /// Registers the run's public key with nova as a key pair named like the run.
    pub(super) async fn register_key(
        &mut self,
        token: &str,
        nova: &str,
        key: &Key,
    ) -> Result<(), Failure> {
        let name = self.s.prefix.clone();
        self.api
            .call(
                Method::POST,
                &format!("{nova}/os-keypairs"),
                Some(token),
                Body::Json(&json!({ "keypair": { "name": name, "public_key": key.public } })),
            )
            .await?;
        self.record(
            Kind::Keypair,
            &name,
            format!("{nova}/os-keypairs/{name}"),
            Owner::User,
        );
        Ok(())
    }

    /// A security group that lets SSH and ping in (the default group lets nothing in); returns
    /// its id.
    pub(super) async fn login_access(&mut self, token: &str) -> Result<String, Failure> {
        let neutron = self.endpoint(self.user()?, "network")?;
        let v2 = format!("{neutron}/v2.0");
        let name = self.s.prefix.clone();
        let (sg, _) = self
            .create(
                token,
                &format!("{v2}/security-groups"),
                Kind::SecurityGroup,
                Owner::User,
                json!({ "name": name }),
            )
            .await?;
        for (protocol, port) in [("tcp", Some(22)), ("icmp", None)] {
            let mut rule = json!({
                "security_group_id": sg, "direction": "ingress", "ethertype": "IPv4",
                "protocol": protocol,
            });
            if let Some(port) = port {
                rule["port_range_min"] = json!(port);
                rule["port_range_max"] = json!(port);
            }
            self.api
                .call(
                    Method::POST,
                    &format!("{v2}/security-group-rules"),
                    Some(token),
                    Body::Json(&json!({ "security_group_rule": rule })),
                )
                .await?;
        }
        Ok(sg)
    }

    /// A floating IP on the external network for the server's port, then an SSH login to it
    /// with the run's key: the hostname the guest reports must be the server's name.
    pub(super) async fn login(
        &mut self,
        token: &str,
        server_id: &str,
        ext: &str,
        key: &Key,
    ) -> Result<(String, ssh::Session), Failure> {
        let neutron = self.endpoint(self.user()?, "network")?;
        let v2 = format!("{neutron}/v2.0");
        let (_, v) = self
            .api
            .call(
                Method::GET,
                &format!("{v2}/ports?device_id={server_id}"),
                Some(token),
                Body::None,
            )
            .await?;
        let port = v["ports"][0]["id"]
            .as_str()
            .ok_or_else(|| Failure::check(format!("server {server_id} has no port")))?
            .to_owned();
        let (fip, v) = self
            .create(
                token,
                &format!("{v2}/floatingips"),
                Kind::FloatingIp,
                Owner::User,
                json!({ "floating_network_id": ext, "port_id": port }),
            )
            .await?;
        let address: std::net::IpAddr = v["floating_ip_address"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| Failure::check(format!("floating IP {fip} has no address")))?;
        self.floating_ip = Some(address.to_string());
        let started = Instant::now();
        let deadline = started + self.s.timeout;
        let addr = std::net::SocketAddr::new(address, 22);
        // The router's NAT for a new floating IP takes a moment; until then nothing answers.
        let session = loop {
            let attempt = std::time::Duration::from_secs(10);
            match ssh::Session::login(addr, GUEST_USER, key, attempt).await {
                Ok(s) => break s,
                Err(e) => {
                    if Instant::now() >= deadline {
                        let layer = match e {
                            ssh::SshError::Connect(_) => "no floating IP",
                            _ => "no SSH",
                        };
                        return Err(Failure::check(format!(
                            "{layer}: server {server_id} at its floating IP {address}: {e} (after {:.1} s)",
                            secs(started)
                        )));
                    }
                    tokio::time::sleep(self.s.poll_interval).await;
                }
            }
        };
        let login = secs(started);
        let (status, out) = session
            .run("hostname", COMMAND_TIMEOUT)
            .await
            .map_err(|e| Failure::check(format!("no SSH: {e}")))?;
        let hostname = out.trim();
        if status != 0 || hostname != self.s.prefix {
            return Err(Failure::check(format!(
                "SSH to {address}: `hostname` exited {status} with {hostname:?}, the server is named {}",
                self.s.prefix
            )));
        }
        Ok((
            format!(
                "logged in over SSH as {GUEST_USER} with the run's key at the floating IP {address} after {login:.1} s, hostname {hostname}"
            ),
            session,
        ))
    }

    /// On the guest, the attached volume is a block device: bytes written to it (past the
    /// page cache) read back the same.
    pub(super) async fn write_volume(&self, session: &ssh::Session) -> Result<String, Failure> {
        let token = format!("kstack-verify-{:016x}", rand::random::<u64>());
        let command = format!(
            "i=0; while [ ! -b /dev/vdb ] && [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done; \
             printf %s {token} | dd of=/dev/vdb conv=fsync 2>/dev/null && \
             echo 3 > /proc/sys/vm/drop_caches && head -c {} /dev/vdb",
            token.len()
        );
        let (status, out) = session
            .run(&command, COMMAND_TIMEOUT * 8)
            .await
            .map_err(|e| Failure::check(format!("no SSH: {e}")))?;
        if status != 0 || out != token {
            return Err(Failure::check(format!(
                "the attached volume on the guest: writing and reading back /dev/vdb exited {status} with {:?}, wrote {token:?}",
                out.chars().take(200).collect::<String>()
            )));
        }
        Ok(", written and read back on the guest as /dev/vdb".to_owned())
    }
}

/// Every address of a server (nova's `addresses`, over all its networks).
fn addresses(server: &Value) -> Vec<String> {
    server["addresses"]
        .as_object()
        .into_iter()
        .flat_map(|nets| nets.values())
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|a| a["addr"].as_str().map(str::to_owned))
        .collect()
}
