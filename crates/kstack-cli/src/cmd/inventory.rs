//! The host inventory: `kstack inventory serve` runs the service; the `host-*` commands talk to it.
//!
//! Client commands find the service at `--url` (default `$KSTACK_INVENTORY_URL`, else
//! http://127.0.0.1:6385), trust the CA in `--ca-file` (default `$KSTACK_INVENTORY_CA_FILE`)
//! for an https URL, and authenticate with `--token` (default `$KSTACK_INVENTORY_TOKEN`).
//! A host is named by hostname or UUID.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use kstack_inventory::client::Client as InventoryClient;
use kstack_inventory::model::{Host, Label, SyncState};
use kstack_inventory::{ServeConfig, TlsConfig, Tokens};

use super::InputError;
use crate::exit::Exit;

/// What locking does to a node, said wherever a command locks one.
const LOCK_EFFECT: &str = "its Kubernetes node is cordoned and tainted \
     services=disabled:NoExecute: every pod there that does not tolerate the taint is evicted";

#[derive(Debug, clap::Args)]
pub struct Client {
    /// Inventory service URL.
    #[arg(
        long,
        env = "KSTACK_INVENTORY_URL",
        default_value = "http://127.0.0.1:6385",
        global = true
    )]
    url: String,
    /// Bearer token.
    #[arg(
        long,
        env = "KSTACK_INVENTORY_TOKEN",
        hide_env_values = true,
        global = true
    )]
    token: Option<String>,
    /// PEM file of the CA that signed the service's certificate (for an https --url whose
    /// certificate the system does not already trust).
    #[arg(long, env = "KSTACK_INVENTORY_CA_FILE", global = true)]
    ca_file: Option<PathBuf>,
}

impl Client {
    fn connect(&self) -> anyhow::Result<InventoryClient> {
        Ok(InventoryClient::new(
            &self.url,
            self.token.as_deref(),
            self.ca_file.as_deref(),
        )?)
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum InventoryCommand {
    /// The host inventory service.
    Inventory {
        #[command(subcommand)]
        action: Serve,
    },
    /// Add a host. It is unlocked, so the pods already running on its node stay; with
    /// --locked its node is cordoned and tainted services=disabled:NoExecute, which evicts
    /// every pod there that does not tolerate the taint.
    #[command(
        after_help = "Examples:\n  kstack host-add compute-4 --personality compute\n  kstack host-add compute-5 --personality compute --locked   # a node that runs nothing yet"
    )]
    HostAdd {
        hostname: String,
        #[arg(long, value_parser = ["controller", "compute", "storage"])]
        personality: String,
        /// Register the host locked (evicts the pods on its node, see above).
        #[arg(long)]
        locked: bool,
        #[command(flatten)]
        client: Client,
    },
    /// List hosts, with whether each one's node has its labels and lock state (SYNC: synced,
    /// pending, failed) and why not (REASON).
    #[command(after_help = "Example:\n  kstack host-list")]
    HostList {
        #[command(flatten)]
        client: Client,
    },
    /// Lock a host: its node is cordoned and gets the NoExecute taint services=disabled, which
    /// evicts every pod there that does not tolerate it. When the service knows the cloud's
    /// compute service (serve --compute-from-env), a compute host's instances move off first:
    /// its nova-compute is disabled, each instance live-migrates (cold when stopped or when live
    /// fails), then the host is locked; this command waits for that and shows each step.
    /// Refused (409, exit 1) when the host has instances and no other compute host can take
    /// them, naming them.
    #[command(
        after_help = "Examples:\n  kstack host-lock compute-4\n  kstack host-lock compute-4 --force   # taint at once: its instances stop"
    )]
    HostLock {
        host: String,
        /// Lock at once without moving the instances off (they stop with the host's
        /// nova-compute and libvirt).
        #[arg(long)]
        force: bool,
        /// Return as soon as the service accepted the lock, without waiting for the
        /// instances to move (`kstack host-list` shows the TASK).
        #[arg(long)]
        no_wait: bool,
        #[command(flatten)]
        client: Client,
    },
    /// Unlock a host (a compute host's nova-compute service is enabled again).
    #[command(after_help = "Example:\n  kstack host-unlock compute-4")]
    HostUnlock {
        host: String,
        #[command(flatten)]
        client: Client,
    },
    /// Delete a host; its node and everything bound to it are deleted.
    #[command(after_help = "Example:\n  kstack host-delete compute-4")]
    HostDelete {
        host: String,
        #[command(flatten)]
        client: Client,
    },
    /// Assign labels (KEY=VALUE ...) to a host.
    #[command(
        after_help = "Example:\n  kstack host-label-assign compute-4 rack=r12 kstack.io/role-compute=true --overwrite"
    )]
    HostLabelAssign {
        host: String,
        #[arg(required = true, value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// Replace the value of a key the host already has.
        #[arg(long)]
        overwrite: bool,
        #[command(flatten)]
        client: Client,
    },
    /// List a host's labels.
    #[command(after_help = "Example:\n  kstack host-label-list compute-4")]
    HostLabelList {
        host: String,
        #[command(flatten)]
        client: Client,
    },
    /// Remove labels (by key) from a host.
    #[command(after_help = "Example:\n  kstack host-label-remove compute-4 rack")]
    HostLabelRemove {
        host: String,
        #[arg(required = true)]
        keys: Vec<String>,
        #[command(flatten)]
        client: Client,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum Serve {
    /// Run the inventory service. It serves HTTPS with --tls-cert and --tls-key (reloaded when
    /// the files change), else plain HTTP, which it allows only on a loopback address unless
    /// --insecure-http is given.
    #[command(
        after_help = "Examples:\n  kstack inventory serve --tokens /etc/kstack/inventory-tokens.yml --database sqlite:/var/lib/kstack/inventory.db\n  kstack inventory serve --tokens /etc/kstack/inventory-tokens.yml --listen 0.0.0.0:6385 --tls-cert /etc/kstack/tls.crt --tls-key /etc/kstack/tls.key\n\nThe tokens file (mode 0600 or stricter) has one `TOKEN: ROLE` per line, ROLE admin or reader,\neach TOKEN at least 32 characters (`openssl rand -hex 32`). With --keystone-url, tokens issued by\nthe cloud's Keystone are accepted too: a role of --keystone-admin-roles reads and writes, one of\n--keystone-reader-roles reads.\n\nExit codes: 2 for a bad tokens file, TLS files or listen address, 1 for other failures."
    )]
    Serve {
        #[arg(long, default_value = "127.0.0.1:6385")]
        listen: SocketAddr,
        /// postgres://... or a SQLite file (created if missing).
        #[arg(
            long,
            env = "KSTACK_INVENTORY_DATABASE",
            default_value = "kstack-inventory.db"
        )]
        database: String,
        /// YAML map of bearer token to role (admin or reader); readable by its owner only.
        #[arg(long)]
        tokens: std::path::PathBuf,
        /// PEM certificate (then intermediates) to serve HTTPS with.
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key of --tls-cert.
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Allow plain HTTP on a non-loopback address: bearer tokens then cross the network in
        /// clear. Only behind a proxy that terminates TLS.
        #[arg(long, conflicts_with = "tls_cert")]
        insecure_http: bool,
        /// The global `--kubeconfig`: the cluster whose nodes follow the inventory (default:
        /// like kubectl).
        #[arg(skip)]
        kubeconfig: Option<String>,
        /// Seconds between audits that repair drift between the inventory and the nodes.
        #[arg(long, default_value_t = 60)]
        audit_interval: u64,
        /// The most client connections open at once (default: as many as the open files
        /// limit allows, less 64). When full, the connection idle longest is closed for a new
        /// one.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: Option<u32>,
        /// The namespace of the cloud the status page (/status) shows: its release records and
        /// workloads are watched there (globals.yml's kubernetes_namespace).
        #[arg(long, default_value = "openstack", value_name = "NAMESPACE")]
        cloud_namespace: String,
        /// Keep hosts and labels only, without touching any cluster (no kubeconfig needed):
        /// for trying the API or measuring the service alone.
        #[arg(long)]
        no_node_sync: bool,
        /// Also accept tokens issued by this Keystone (e.g. http://keystone.openstack.svc:5000),
        /// validated against it and cached until they expire (at most --keystone-cache-secs).
        #[arg(long, value_name = "URL")]
        keystone_url: Option<String>,
        /// Keystone roles that may read and write (comma-separated).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "admin",
            requires = "keystone_url"
        )]
        keystone_admin_roles: Vec<String>,
        /// Keystone roles that may read (comma-separated).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "reader,member",
            requires = "keystone_url"
        )]
        keystone_reader_roles: Vec<String>,
        /// Longest time a validated Keystone token is trusted without asking again: a revoked
        /// token is refused at most this late.
        #[arg(long, default_value_t = 300, requires = "keystone_url")]
        keystone_cache_secs: u64,
        /// Move a compute host's instances off before it is locked, through the cloud's
        /// compute service (nova), logging in as the OpenStack variables of the environment
        /// say: OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME, OS_USER_DOMAIN_NAME
        /// and OS_PROJECT_DOMAIN_NAME (default Default), OS_REGION_NAME (default RegionOne),
        /// OS_INTERFACE (default internal), OS_CACERT (a CA to trust besides the public roots):
        /// an admin's openrc, e.g. `kstack openrc`'s.
        #[arg(long)]
        compute_from_env: bool,
    },
}

impl InventoryCommand {
    /// Gives `inventory serve` the global `--kubeconfig`.
    pub(super) fn set_kubeconfig(&mut self, file: Option<String>) {
        if let InventoryCommand::Inventory {
            action: Serve::Serve { kubeconfig, .. },
        } = self
        {
            *kubeconfig = file;
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

pub fn run(command: InventoryCommand) -> anyhow::Result<Exit> {
    runtime()?.block_on(run_async(command))?;
    Ok(Exit::Success)
}

async fn run_async(command: InventoryCommand) -> anyhow::Result<()> {
    match command {
        InventoryCommand::Inventory {
            action:
                Serve::Serve {
                    listen,
                    database,
                    tokens,
                    tls_cert,
                    tls_key,
                    insecure_http,
                    kubeconfig,
                    audit_interval,
                    max_connections,
                    cloud_namespace,
                    no_node_sync,
                    keystone_url,
                    keystone_admin_roles,
                    keystone_reader_roles,
                    keystone_cache_secs,
                    compute_from_env,
                },
        } => {
            let compute: Option<Arc<dyn kstack_ports::ComputeHosts>> = if compute_from_env {
                let nova = kstack_verify::compute::Nova::new(
                    compute_credentials(|k| std::env::var(k).ok())?,
                    Duration::from_secs(90),
                )
                .map_err(|e| InputError(format!("--compute-from-env: OS_CACERT: {e}")))?;
                Some(Arc::new(nova))
            } else {
                None
            };
            let keystone = match keystone_url {
                Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                    return Err(InputError(format!(
                        "--keystone-url {url}: give Keystone's http:// or https:// URL, e.g. http://keystone.openstack.svc:5000"
                    ))
                    .into());
                }
                Some(url) => Some(kstack_inventory::KeystoneAuth {
                    admin_roles: keystone_admin_roles,
                    reader_roles: keystone_reader_roles,
                    cache_ttl: Duration::from_secs(keystone_cache_secs),
                    ..kstack_inventory::KeystoneAuth::new(url)
                }),
                None => None,
            };
            if no_node_sync && let Some(file) = &kubeconfig {
                return Err(InputError(format!(
                    "--no-node-sync touches no cluster, so --kubeconfig {file} has no use: give one or the other"
                ))
                .into());
            }
            if let Err(e) = kstack_model::names::dns1123_label(&cloud_namespace) {
                return Err(InputError(format!(
                    "--cloud-namespace {cloud_namespace:?} is not a namespace name: {e}"
                ))
                .into());
            }
            let tokens = Tokens::load(&tokens).map_err(|e| InputError(e.to_string()))?;
            let tls = tls_cert
                .zip(tls_key)
                .map(|(cert, key)| TlsConfig::new(cert, key));
            let scheme = if tls.is_some() { "https" } else { "http" };
            let (sync, joins, cloud): (
                Arc<dyn kstack_ports::NodeSync>,
                _,
                Arc<dyn kstack_ports::CloudStatus>,
            ) = if no_node_sync {
                eprintln!("kstack inventory: node sync disabled; no cluster is changed or watched");
                (
                    Arc::new(kstack_ports::NoNodeSync),
                    None,
                    Arc::new(kstack_ports::NoCloudStatus),
                )
            } else {
                let client = kstack_kube::client(kubeconfig.as_deref()).await?;
                // A node that joins gets its host's labels and lock state at once, not at the
                // next audit.
                let (joined, joins) = tokio::sync::mpsc::channel(256);
                tokio::spawn(kstack_kube::nodes::watch_joins(client.clone(), joined));
                // The status page's view of the cloud: the built-in catalog's dependencies (an
                // operator's catalog file is not read here; its extra edges are not drawn).
                let deps = kstack_model::catalog::Catalog::builtin()
                    .map(|c| {
                        c.services
                            .into_iter()
                            .map(|(name, s)| (name, s.depends_on))
                            .collect()
                    })
                    .unwrap_or_default();
                let cloud = kstack_kube::cloud::KubeCloudStatus::start(
                    client.clone(),
                    &cloud_namespace,
                    deps,
                );
                (
                    Arc::new(kstack_kube::nodes::Nodes::new(client)),
                    Some(joins),
                    cloud,
                )
            };
            let config = ServeConfig {
                listen,
                database_url: database,
                tokens,
                keystone,
                tls,
                insecure_http,
                audit_interval: Duration::from_secs(audit_interval),
                sync,
                joins,
                cloud,
                max_connections: max_connections.map(|n| n as usize),
                compute,
            };
            eprintln!("kstack inventory: listening on {scheme}://{listen}");
            match kstack_inventory::serve(config).await {
                // Bad settings or files: exit 2, like other bad input.
                Err(e @ kstack_inventory::Error::Config(_)) => {
                    Err(InputError(e.to_string()).into())
                }
                other => Ok(other?),
            }
        }
        InventoryCommand::HostAdd {
            hostname,
            personality,
            locked,
            client,
        } => {
            let client = client.connect()?;
            if locked {
                eprintln!("registering {hostname} locked: {LOCK_EFFECT}");
            }
            let host = client.add_host(&hostname, &personality, locked).await?;
            warn_unsynced(&host);
            print_hosts(&[host]);
            Ok(())
        }
        InventoryCommand::HostList { client } => {
            print_hosts(&client.connect()?.hosts().await?);
            Ok(())
        }
        InventoryCommand::HostLock {
            host,
            force,
            no_wait,
            client,
        } => lock(&client.connect()?, &host, true, force, !no_wait).await,
        InventoryCommand::HostUnlock { host, client } => {
            lock(&client.connect()?, &host, false, false, false).await
        }
        InventoryCommand::HostDelete { host, client } => {
            let client = client.connect()?;
            let uuid = client.resolve(&host).await?;
            client.delete_host(&uuid).await?;
            eprintln!("deleted host {host}");
            Ok(())
        }
        InventoryCommand::HostLabelAssign {
            host,
            labels,
            overwrite,
            client,
        } => {
            let client = client.connect()?;
            let uuid = client.resolve(&host).await?;
            let mut pairs = Vec::new();
            for l in &labels {
                let Some((k, v)) = l.split_once('=') else {
                    bail!("label '{l}' is not KEY=VALUE")
                };
                pairs.push((k.to_owned(), v.to_owned()));
            }
            let labels = client.assign_labels(&uuid, &pairs, overwrite).await?;
            print_labels(&labels);
            warn_unsynced(&client.host(&uuid).await?);
            Ok(())
        }
        InventoryCommand::HostLabelList { host, client } => {
            let client = client.connect()?;
            let uuid = client.resolve(&host).await?;
            print_labels(&client.labels(&uuid).await?);
            Ok(())
        }
        InventoryCommand::HostLabelRemove { host, keys, client } => {
            let client = client.connect()?;
            let uuid = client.resolve(&host).await?;
            let labels = client.labels(&uuid).await?;
            for key in &keys {
                let Some(label) = labels.iter().find(|l| &l.label_key == key) else {
                    bail!("host {host} has no label {key}")
                };
                client.delete_label(&label.uuid).await?;
            }
            warn_unsynced(&client.host(&uuid).await?);
            Ok(())
        }
    }
}

/// Says on stderr when the host's node does not have its state (the write itself stands).
fn warn_unsynced(host: &Host) {
    let reason = host.sync_reason.as_deref().unwrap_or("no reason given");
    match host.sync_state {
        SyncState::Synced => {}
        SyncState::Pending => eprintln!("note: {}: node not updated yet: {reason}", host.hostname),
        SyncState::Failed => eprintln!(
            "warning: {}: updating its node failed (the service retries): {reason}",
            host.hostname
        ),
    }
}

async fn lock(
    client: &InventoryClient,
    host: &str,
    locked: bool,
    force: bool,
    wait: bool,
) -> anyhow::Result<()> {
    let uuid = client.resolve(host).await?;
    if locked {
        eprintln!("locking {host}: {LOCK_EFFECT}");
    }
    let mut h = client.set_locked(&uuid, locked, force).await?;
    // A compute host whose instances move off first: its task says how far that is.
    let mut shown = None;
    while wait && h.task.as_deref().is_some_and(|t| t.starts_with("locking")) {
        if shown != h.task {
            eprintln!("{host}: {}", h.task.as_deref().unwrap_or_default());
            shown = h.task.clone();
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        h = client.host(&uuid).await?;
    }
    warn_unsynced(&h);
    print_hosts(std::slice::from_ref(&h));
    if let Some(task) = h.task.as_deref().filter(|t| t.starts_with("lock failed")) {
        bail!("{host}: {task}");
    }
    Ok(())
}

/// The compute service's credentials from OpenStack's environment variables (`get` reads one).
fn compute_credentials(
    get: impl Fn(&str) -> Option<String>,
) -> Result<kstack_verify::compute::Credentials, InputError> {
    let need = |k: &str| {
        get(k).filter(|v| !v.is_empty()).ok_or_else(|| {
            InputError(format!(
                "--compute-from-env: {k} is not set; source an admin openrc (kstack openrc) first"
            ))
        })
    };
    let or = |k: &str, default: &str| {
        get(k)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    let interface = match or("OS_INTERFACE", "internal").as_str() {
        "public" | "publicURL" => kstack_verify::Interface::Public,
        "internal" | "internalURL" => kstack_verify::Interface::Internal,
        "admin" | "adminURL" => kstack_verify::Interface::Admin,
        other => {
            return Err(InputError(format!(
                "--compute-from-env: OS_INTERFACE={other} is not public, internal or admin"
            )));
        }
    };
    let ca_pem = match get("OS_CACERT").filter(|v| !v.is_empty()) {
        Some(file) => Some(
            std::fs::read(&file)
                .map_err(|e| InputError(format!("--compute-from-env: OS_CACERT={file}: {e}")))?,
        ),
        None => None,
    };
    Ok(kstack_verify::compute::Credentials {
        ca_pem,
        auth_url: need("OS_AUTH_URL")?,
        username: need("OS_USERNAME")?,
        password: kstack_verify::Password::new(need("OS_PASSWORD")?),
        project_name: need("OS_PROJECT_NAME")?,
        user_domain: or("OS_USER_DOMAIN_NAME", "Default"),
        project_domain: or("OS_PROJECT_DOMAIN_NAME", "Default"),
        region: or("OS_REGION_NAME", "RegionOne"),
        interface,
    })
}

fn print_hosts(hosts: &[Host]) {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING).set_header([
        "UUID",
        "HOSTNAME",
        "PERSONALITY",
        "ADMINISTRATIVE",
        "OPERATIONAL",
        "SYNC",
        "REASON",
        "TASK",
    ]);
    for h in hosts {
        t.add_row([
            h.uuid.clone(),
            h.hostname.clone(),
            wire_name(&h.personality),
            wire_name(&h.administrative),
            wire_name(&h.operational),
            wire_name(&h.sync_state),
            h.sync_reason.clone().unwrap_or_default(),
            h.task.clone().unwrap_or_default(),
        ]);
    }
    println!("{t}");
}

fn print_labels(labels: &[Label]) {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING)
        .set_header(["UUID", "KEY", "VALUE"]);
    for l in labels {
        t.add_row([l.uuid.clone(), l.label_key.clone(), l.label_value.clone()]);
    }
    println!("{t}");
}

/// The lowercase wire name of an enum value, as the API spells it.
fn wire_name(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
