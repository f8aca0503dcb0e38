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

use anyhow::{Context, bail};
use kstack_inventory::model::{Host, HostList, Label, LabelList, SyncState};
use kstack_inventory::{ServeConfig, TlsConfig, Tokens};
use serde_json::json;

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
    /// evicts every pod there that does not tolerate it.
    #[command(after_help = "Example:\n  kstack host-lock compute-4")]
    HostLock {
        host: String,
        #[command(flatten)]
        client: Client,
    },
    /// Unlock a host.
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
                },
        } => {
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
            let administrative = if locked { "locked" } else { "unlocked" };
            if locked {
                eprintln!("registering {hostname} locked: {LOCK_EFFECT}");
            }
            let host: Host = call(
                &client,
                reqwest::Method::POST,
                "/v1/ihosts",
                Some(json!({
                    "hostname": hostname,
                    "personality": personality,
                    "administrative": administrative,
                })),
            )
            .await?;
            warn_unsynced(&host);
            print_hosts(&[host]);
            Ok(())
        }
        InventoryCommand::HostList { client } => {
            let list: HostList = call(&client, reqwest::Method::GET, "/v1/ihosts", None).await?;
            print_hosts(&list.ihosts);
            Ok(())
        }
        InventoryCommand::HostLock { host, client } => lock(&client, &host, "lock").await,
        InventoryCommand::HostUnlock { host, client } => lock(&client, &host, "unlock").await,
        InventoryCommand::HostDelete { host, client } => {
            let uuid = resolve(&client, &host).await?;
            call::<serde_json::Value>(
                &client,
                reqwest::Method::DELETE,
                &format!("/v1/ihosts/{uuid}"),
                None,
            )
            .await?;
            eprintln!("deleted host {host}");
            Ok(())
        }
        InventoryCommand::HostLabelAssign {
            host,
            labels,
            overwrite,
            client,
        } => {
            let uuid = resolve(&client, &host).await?;
            let mut body = serde_json::Map::new();
            for l in &labels {
                let Some((k, v)) = l.split_once('=') else {
                    bail!("label '{l}' is not KEY=VALUE")
                };
                body.insert(k.to_string(), json!(v));
            }
            let path = format!(
                "/v1/labels/{uuid}{}",
                if overwrite { "?overwrite=true" } else { "" }
            );
            let list: LabelList = call(
                &client,
                reqwest::Method::POST,
                &path,
                Some(serde_json::Value::Object(body)),
            )
            .await?;
            print_labels(&list.labels);
            warn_unsynced(&host_of(&client, &uuid).await?);
            Ok(())
        }
        InventoryCommand::HostLabelList { host, client } => {
            let uuid = resolve(&client, &host).await?;
            let list = labels_of(&client, &uuid).await?;
            print_labels(&list.labels);
            Ok(())
        }
        InventoryCommand::HostLabelRemove { host, keys, client } => {
            let uuid = resolve(&client, &host).await?;
            let list = labels_of(&client, &uuid).await?;
            for key in &keys {
                let Some(label) = list.labels.iter().find(|l| &l.label_key == key) else {
                    bail!("host {host} has no label {key}")
                };
                call::<serde_json::Value>(
                    &client,
                    reqwest::Method::DELETE,
                    &format!("/v1/labels/{}", label.uuid),
                    None,
                )
                .await?;
            }
            warn_unsynced(&host_of(&client, &uuid).await?);
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

async fn host_of(client: &Client, uuid: &str) -> anyhow::Result<Host> {
    call(
        client,
        reqwest::Method::GET,
        &format!("/v1/ihosts/{uuid}"),
        None,
    )
    .await
}

async fn lock(client: &Client, host: &str, action: &str) -> anyhow::Result<()> {
    let uuid = resolve(client, host).await?;
    if action == "lock" {
        eprintln!("locking {host}: {LOCK_EFFECT}");
    }
    let h: Host = call(
        client,
        reqwest::Method::POST,
        &format!("/v1/ihosts/{uuid}/{action}"),
        None,
    )
    .await?;
    warn_unsynced(&h);
    print_hosts(&[h]);
    Ok(())
}

async fn labels_of(client: &Client, host_uuid: &str) -> anyhow::Result<LabelList> {
    call(
        client,
        reqwest::Method::GET,
        &format!("/v1/ihosts/{host_uuid}/labels"),
        None,
    )
    .await
}

async fn resolve(client: &Client, host: &str) -> anyhow::Result<String> {
    let list: HostList = call(client, reqwest::Method::GET, "/v1/ihosts", None).await?;
    list.ihosts
        .into_iter()
        .find(|h| h.hostname == host || h.uuid == host)
        .map(|h| h.uuid)
        .with_context(|| format!("no host named {host} in the inventory (see kstack host-list)"))
}

async fn call<T: serde::de::DeserializeOwned>(
    client: &Client,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> anyhow::Result<T> {
    let token = client
        .token
        .as_deref()
        .context("no inventory token: pass --token or set KSTACK_INVENTORY_TOKEN")?;
    let url = format!("{}{path}", client.url.trim_end_matches('/'));
    let mut builder = reqwest::Client::builder();
    if let Some(ca) = &client.ca_file {
        let pem = std::fs::read(ca).with_context(|| format!("reading CA file {}", ca.display()))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .with_context(|| format!("{}: not a PEM certificate", ca.display()))?;
        builder = builder.add_root_certificate(cert);
    }
    let mut req = builder
        .build()
        .context("building the HTTP client")?
        .request(method, &url)
        .bearer_auth(token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.map_err(|e| {
        // reqwest's top-level message hides the cause (a TLS certificate the client does not
        // trust, a refused connection); show the whole chain.
        let mut msg = format!("could not reach the inventory service at {}", client.url);
        let mut source: Option<&dyn std::error::Error> = Some(&e);
        while let Some(s) = source {
            msg.push_str(&format!(": {s}"));
            source = s.source();
        }
        if client.url.starts_with("https://") && client.ca_file.is_none() {
            msg.push_str(
                " (if the service's certificate is signed by your own CA, pass --ca-file)",
            );
        }
        anyhow::anyhow!(msg)
    })?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        let msg = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or(text);
        bail!("inventory service answered {status}: {msg}");
    }
    let text = if text.is_empty() {
        "null".to_string()
    } else {
        text
    };
    serde_json::from_str(&text).with_context(|| format!("unexpected answer from {url}"))
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
