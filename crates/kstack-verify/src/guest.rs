//! The guest `kstack verify` boots when it has a guest image (`hack/guest.sh`): a whole raw
//! disk that boots by itself (a boot loader, the kernel and the initramfs). Its init reports each layer it reaches on the serial
//! console, one line each with the prefix `kstack-guest: `, which nova's console log returns:
//!
//! ```text
//! kstack-guest: lease eth0 10.99.0.12/24 gateway 10.99.0.1 mtu 1450
//! kstack-guest: no lease on eth0
//! kstack-guest: metadata uuid 6f1c… hostname kstack-verify-1a2b3c4d
//! kstack-guest: no metadata
//! kstack-guest: ssh ready
//! ```
//!
//! [`Console::read`] turns a console log into what the guest reached, and
//! [`Console::failure`] names the first layer that is missing, so a failed check says whether
//! the guest did not boot, got no lease, or could not reach the metadata service.

/// The guest's disk.
#[derive(Clone)]
pub struct GuestImage {
    /// A whole raw disk (boot record, boot loader, kernel and initramfs): the server's image.
    pub disk: Vec<u8>,
}

impl std::fmt::Debug for GuestImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestImage")
            .field("disk", &self.disk.len())
            .finish()
    }
}

const PREFIX: &str = "kstack-guest: ";

/// The DHCP lease the guest reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub interface: String,
    /// `address/prefix`.
    pub address: String,
    pub gateway: String,
}

/// What the guest reported on its console, so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Console {
    /// Any line of the guest's init: it booted into its init.
    pub booted: bool,
    pub lease: Option<Lease>,
    /// Interfaces that got no lease.
    pub no_lease: Vec<String>,
    /// The metadata service's instance id and hostname.
    pub metadata: Option<(String, String)>,
    /// The guest gave up reaching the metadata service.
    pub no_metadata: bool,
    pub ssh_ready: bool,
}

impl Console {
    /// Reads a console log. Lines may carry a carriage return; anything before the prefix on
    /// a line (kernel messages interleaved on the serial port) is ignored.
    pub fn read(log: &str) -> Console {
        let mut c = Console::default();
        for line in log.lines() {
            let Some(at) = line.find(PREFIX) else {
                continue;
            };
            c.booted = true;
            let words: Vec<&str> = line[at + PREFIX.len()..].split_whitespace().collect();
            match words.as_slice() {
                ["lease", iface, address, "gateway", gateway, ..] if c.lease.is_none() => {
                    c.lease = Some(Lease {
                        interface: (*iface).to_owned(),
                        address: (*address).to_owned(),
                        gateway: (*gateway).to_owned(),
                    });
                }
                ["no", "lease", "on", iface] => c.no_lease.push((*iface).to_owned()),
                ["metadata", "uuid", uuid, "hostname", hostname, ..] => {
                    c.metadata = Some(((*uuid).to_owned(), (*hostname).to_owned()));
                }
                ["no", "metadata", ..] => c.no_metadata = true,
                ["ssh", "ready", ..] => c.ssh_ready = true,
                _ => {}
            }
        }
        c
    }

    /// Whether the guest has reported everything the check waits for, or given up on a layer.
    pub fn settled(&self) -> bool {
        (self.metadata.is_some() && self.ssh_ready)
            || self.no_metadata
            || (self.lease.is_none() && !self.no_lease.is_empty())
    }

    /// The first layer the guest did not reach, checked against the server it runs as:
    /// `server_id` must be the metadata's instance id, `name` the first label of its
    /// hostname, and `addresses` (the server's fixed addresses) must hold the lease's address.
    pub fn failure(&self, server_id: &str, name: &str, addresses: &[String]) -> Option<String> {
        if !self.booted {
            return Some(
                "the guest did not boot: no line of its init on the console log".to_owned(),
            );
        }
        let Some(lease) = &self.lease else {
            return Some(if self.no_lease.is_empty() {
                "no lease: the guest's init has not reported a DHCP lease".to_owned()
            } else {
                format!(
                    "no lease: the guest's DHCP client got no answer on {} (neutron's DHCP agent, the port's wiring in Open vSwitch)",
                    self.no_lease.join(", ")
                )
            });
        };
        let ip = lease.address.split('/').next().unwrap_or_default();
        if !addresses.iter().any(|a| a == ip) {
            return Some(format!(
                "wrong lease: the guest got {} on {}, the server's port has {}",
                lease.address,
                lease.interface,
                addresses.join(", ")
            ));
        }
        let Some((uuid, hostname)) = &self.metadata else {
            return Some(if self.no_metadata {
                format!(
                    "no metadata: the guest has its lease ({} gateway {}) but http://169.254.169.254 did not answer (the router's metadata proxy, neutron's metadata agent, nova-metadata)",
                    lease.address, lease.gateway
                )
            } else {
                "no metadata: the guest has not reported the metadata service's answer".to_owned()
            });
        };
        if uuid != server_id {
            return Some(format!(
                "wrong metadata: the guest's instance id is {uuid}, the server is {server_id}"
            ));
        }
        let label = hostname.split('.').next().unwrap_or_default();
        if label != name {
            return Some(format!(
                "wrong metadata: the guest's hostname is {hostname}, the server is named {name}"
            ));
        }
        if !self.ssh_ready {
            return Some(
                "no SSH: the guest's SSH server did not report that it started".to_owned(),
            );
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "6f1c2a8e-0d3b-4c4e-9d51-3f2f6f0c9a10";

    fn log(lines: &[&str]) -> String {
        let mut s = String::from("[    0.000000] Linux version 6.1.0-27-cloud-amd64\r\n");
        for l in lines {
            s.push_str(l);
            s.push_str("\r\n");
        }
        s
    }

    fn addrs() -> Vec<String> {
        vec!["10.99.0.12".to_owned()]
    }

    #[test]
    fn a_guest_that_reached_everything_passes() {
        let c = Console::read(&log(&[
            "kstack-guest: lease eth0 10.99.0.12/24 gateway 10.99.0.1 mtu 1450",
            "[    5.1] random: crng init done",
            &format!("kstack-guest: metadata uuid {ID} hostname kstack-verify-1a2b3c4d.novalocal"),
            "kstack-guest: ssh ready",
        ]));
        assert!(c.settled());
        assert_eq!(
            c.lease.as_ref().map(|l| l.gateway.as_str()),
            Some("10.99.0.1")
        );
        assert_eq!(c.failure(ID, "kstack-verify-1a2b3c4d", &addrs()), None);
    }

    #[test]
    fn each_missing_layer_is_named() {
        let none = Console::read("SeaBIOS (version 1.16.2)\r\nBooting from ROM..\r\n");
        assert!(!none.settled());
        assert!(
            none.failure(ID, "n", &addrs())
                .unwrap()
                .starts_with("the guest did not boot")
        );

        let no_lease = Console::read(&log(&["kstack-guest: no lease on eth0"]));
        assert!(no_lease.settled());
        let f = no_lease.failure(ID, "n", &addrs()).unwrap();
        assert!(f.starts_with("no lease") && f.contains("eth0"), "{f}");

        let no_md = Console::read(&log(&[
            "kstack-guest: lease eth0 10.99.0.12/24 gateway 10.99.0.1 mtu 1450",
            "kstack-guest: no metadata",
        ]));
        assert!(no_md.settled());
        let f = no_md.failure(ID, "n", &addrs()).unwrap();
        assert!(
            f.starts_with("no metadata") && f.contains("10.99.0.1"),
            "{f}"
        );

        let no_ssh = Console::read(&log(&[
            "kstack-guest: lease eth0 10.99.0.12/24 gateway 10.99.0.1 mtu 1450",
            &format!("kstack-guest: metadata uuid {ID} hostname n"),
        ]));
        assert!(!no_ssh.settled());
        assert!(
            no_ssh
                .failure(ID, "n", &addrs())
                .unwrap()
                .starts_with("no SSH")
        );
    }

    #[test]
    fn metadata_of_another_server_or_a_wrong_lease_fails() {
        let c = Console::read(&log(&[
            "kstack-guest: lease eth0 10.99.0.12/24 gateway 10.99.0.1 mtu 1450",
            "kstack-guest: metadata uuid 00000000-0000-0000-0000-000000000000 hostname n",
            "kstack-guest: ssh ready",
        ]));
        assert!(
            c.failure(ID, "n", &addrs())
                .unwrap()
                .starts_with("wrong metadata")
        );
        let f = c.failure(ID, "n", &["10.99.0.13".to_owned()]).unwrap();
        assert!(f.starts_with("wrong lease"), "{f}");
    }

    #[test]
    fn kernel_text_before_the_prefix_is_ignored() {
        let c = Console::read("[ 3.2] foo kstack-guest: ssh ready\n");
        assert!(c.booted && c.ssh_ready);
    }
}
