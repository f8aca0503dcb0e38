//! `kstack verify`: checks a deployed cloud over its public APIs, as a user would (the checks
//! are `kstack_verify`'s). This module turns the config directory into the checks' settings
//! (admin credentials from passwords.yml and globals.yml, Keystone's Service URL, which
//! services are enabled), stops the checks on Ctrl-C so they clean up, prints the report and,
//! for a failed step, the last log lines of the responsible service's pods (through
//! `kstack_kube`), and picks the exit code.
//!
//! Exit codes ([`Exit`]): success when every step passed (skipped counts as passed) and
//! everything created was deleted; failed (IO); bad input (invalid config); check failed when
//! a step failed or something it created could not be deleted; interrupted by Ctrl-C (after
//! cleanup).
use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kstack_config::Config;
use kstack_model::catalog::BootstrapKind;
use kstack_model::labels::{COMPONENT_LABEL, NAME_LABEL, SERVER};
use kstack_render::Target;
use kstack_verify::{Event, Outcome, Password, Redactor, Report, ServiceInfo, Settings, Step};
use serde::Serialize;

use crate::exit::Exit;

/// Log lines shown per container of the responsible service.
const LOG_LINES: i64 = 20;

pub const AFTER_HELP: &str = "\
Examples:
  kstack verify --config-dir ./mycloud
  kstack verify --os-auth-url http://10.96.12.34:5000 --horizon-url http://10.96.80.1 -o json
  kstack verify --interface internal --timeout 600
  kstack verify --resolve keystone.openstack.svc=10.96.0.20 --resolve glance-api.openstack.svc=10.96.0.21
  kstack verify --guest-image DIR --keep      (leave the guest running; prints how to log in)
  kstack verify --delete kstack-verify-1a2b3c4d   (delete what that kept run left)

Steps, in order: token (POST /v3/auth/tokens as the admin); endpoints (every catalog endpoint
of an enabled service answers, anything but 5xx); project-user (a project and a user with the
member role, a token as that user); image (upload a 4 MiB raw image, wait until active,
download it, compare SHA-256; with --guest-image, the guest's kernel, initramfs and disk);
network (network, subnet 10.99.0.0/24, router, subnet attached, the router's gateway on the
external network if there is one); flavor (1 vCPU, 128 MiB, 1 GiB); server (boot, wait for
ACTIVE; with --guest-image, the guest's console must report its DHCP lease, its metadata
(instance id and hostname of this server, through the router) and its SSH server; with an
external network, a floating IP and an SSH login as cirros with the run's key, `hostname` the
server's name, and the attached volume written and read back as /dev/vdb; a failure names the
layer that is missing: no boot, no lease, no metadata, no floating IP, no SSH; delete, wait
until gone);
stack (a one-resource Heat stack, CREATE_COMPLETE, deleted); horizon (/auth/login/ shows a
login form). A step whose service is disabled in globals.yml is skipped; the first failure
stops the rest. Everything created is named kstack-verify-<random> and deleted in reverse
order at the end, also after a failure or Ctrl-C (Ctrl-C twice stops the cleanup too), unless
--keep leaves it: then <config-dir>/verify/<prefix>/ holds what was kept (kept.json, with the
scratch user's password, mode 0600) and the run's SSH key (id_ed25519), and --delete <prefix>
deletes it later.

Keystone is reached at its Service, http://keystone.<namespace>.svc:5000, unless
--os-auth-url says otherwise (from a host that does not resolve cluster DNS: the ClusterIP, a
port-forward or an ingress). The other services are reached at the endpoints in the token's
catalog. Those name the cloud's Services: when a kubeconfig works, verify reaches them at their
ClusterIPs (a host on the cluster network needs no cluster DNS); --resolve NAME=ADDR wins. When a step fails, the report names the call (method, URL, HTTP status, the
service's message) and, when a kubeconfig works, shows the last 20 log lines of the pods of
the service behind it.

Exit codes: 0 every step passed (skipped counts as passed) and everything was cleaned up,
1 IO failure, 2 invalid config, 4 a step failed or something created could not be deleted,
130 interrupted by Ctrl-C (after cleanup).";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InterfaceArg {
    Public,
    Internal,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub target: super::deploy::Target,
    /// Where the cloud runs: the Kubernetes cluster, or this node with Docker Compose (its
    /// services on the node's address, `kolla_internal_vip_address`; the logs of a failed
    /// step from its containers).
    #[arg(long = "target", value_enum, default_value_t)]
    pub to: super::compose::TargetArg,
    /// Keystone's URL (default: its public endpoint, on kolla_external_fqdn or
    /// kolla_external_vip_address when set; else the keystone Service of the namespace,
    /// http://keystone.<namespace>.svc:5000, or on Compose the node's address).
    #[arg(long, value_name = "URL")]
    pub os_auth_url: Option<String>,
    /// Which catalog endpoints to use after the token.
    #[arg(long, value_enum, default_value = "public")]
    pub interface: InterfaceArg,
    /// Horizon's base URL when the catalog has no dashboard endpoint (default: on the public
    /// address when the cloud has one, else the horizon Service of the namespace,
    /// http://horizon.<namespace>.svc:80).
    #[arg(long, value_name = "URL")]
    pub horizon_url: Option<String>,
    /// Reach HOST at ADDR instead of asking DNS, e.g. a Service name at its ClusterIP from a
    /// host that does not use the cluster's DNS (repeat for each host in the catalog).
    #[arg(long, value_name = "HOST=ADDR", value_parser = parse_resolve)]
    pub resolve: Vec<(String, std::net::IpAddr)>,
    /// Time limit in seconds of each wait: image active, server ACTIVE and gone, stack
    /// complete and gone.
    #[arg(long, value_name = "SECS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    /// Report format on stdout.
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Format,
    /// A guest image directory (`hack/guest.sh` prints one): the server boots its `disk.raw`,
    /// a whole disk with its boot loader, and the server step checks on its console
    /// that it got its DHCP lease and its metadata through the router and started SSH.
    /// Without it the server boots a disk whose boot sector halts the CPU.
    #[arg(long, value_name = "DIR", env = "KSTACK_GUEST_IMAGE")]
    pub guest_image: Option<std::path::PathBuf>,
    /// The external (provider) network, by name or id, for the router's gateway and the
    /// guest's floating IP (default: the cloud's only `router:external` network, if it has
    /// exactly one). With a guest image, verify logs in to the guest over SSH at its floating
    /// IP, and writes and reads back the attached volume there.
    #[arg(long, value_name = "NETWORK")]
    pub external_network: Option<String>,
    /// When the cloud has no external network: make a scratch one for the run, as the admin,
    /// with this subnet (a flat provider network on physnet1, the bridge of the first
    /// `neutron_external_interface`; the subnet's first address is the gateway, the machine
    /// reaching the floating IPs), and delete it at the end. The dev cluster's real node has
    /// 172.24.4.1/24 on the other end of its external interface: `--external-subnet 172.24.4.0/24`.
    #[arg(long, value_name = "CIDR", value_parser = parse_cidr)]
    pub external_subnet: Option<String>,
    /// Leave what the run made in the cloud instead of deleting it: the server running (with
    /// its floating IP, volume, network and router) and the scratch project and user, also
    /// when a step failed, to look at. What was kept, and the run's SSH key that logs in to
    /// the guest, go to <config-dir>/verify/<prefix>/; `kstack verify --delete <prefix>`
    /// deletes it all.
    #[arg(long, conflicts_with = "delete")]
    pub keep: bool,
    /// Delete what the kept run <prefix> left (`--keep`), then its directory under
    /// <config-dir>/verify/; runs no step.
    #[arg(long, value_name = "PREFIX", value_parser = parse_prefix)]
    pub delete: Option<String>,
}

/// The prefix of a kept run, `kstack-verify-<8 hex digits>`, as `--delete` names it.
fn parse_prefix(v: &str) -> Result<String, String> {
    let ok = v
        .strip_prefix("kstack-verify-")
        .is_some_and(|h| h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    if ok {
        Ok(v.to_owned())
    } else {
        Err(format!(
            "expected the prefix of a kept run, kstack-verify-<8 hex digits> (a directory under <config-dir>/verify/); got {v:?}"
        ))
    }
}

/// What `--keep` writes under <config-dir>/verify/<prefix>/ beside the SSH key: what the run
/// left, and the scratch user's password that deletes the user's part of it.
#[derive(Serialize, serde::Deserialize)]
struct KeptFile {
    #[serde(flatten)]
    kept: kstack_verify::Kept,
    user_password: String,
}

/// The kept file's name in a kept run's directory.
const KEPT_FILE: &str = "kept.json";
/// The run's SSH private key in a kept run's directory.
const KEY_FILE: &str = "id_ed25519";

/// <config-dir>/verify/<prefix>.
fn kept_dir(config_dir: &std::path::Path, prefix: &str) -> std::path::PathBuf {
    config_dir.join("verify").join(prefix)
}

/// Writes a kept run's directory, readable by its owner only; its path.
fn write_kept(
    config_dir: &std::path::Path,
    kept: &kstack_verify::Kept,
    secrets: &kstack_verify::KeptSecrets,
) -> anyhow::Result<std::path::PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let dir = kept_dir(config_dir, &kept.prefix);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, text: &str| -> anyhow::Result<()> {
        let path = dir.join(name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("writing {}", path.display()))?;
        f.write_all(text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    };
    let file = KeptFile {
        kept: kept.clone(),
        user_password: secrets.user_password.expose().to_owned(),
    };
    write(KEPT_FILE, &serde_json::to_string_pretty(&file)?)?;
    if let Some(key) = &secrets.ssh_private_key {
        write(KEY_FILE, key.expose())?;
    }
    Ok(dir)
}

/// Reads a guest image directory's disk.
fn guest_image(dir: &std::path::Path) -> anyhow::Result<kstack_verify::GuestImage> {
    let path = dir.join("disk.raw");
    let disk = std::fs::read(&path).with_context(|| {
        format!(
            "reading the guest image's disk.raw ({}): --guest-image names a directory that hack/guest.sh made",
            path.display()
        )
    })?;
    Ok(kstack_verify::GuestImage { disk })
}

pub fn run(args: Args) -> anyhow::Result<Exit> {
    let dir = &args.target.config.config_dir;
    let Some(config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing done"));
    };
    let Some(password) = config.passwords.get("keystone_admin_password") else {
        eprintln!(
            "{}/passwords.yml: keystone_admin_password is empty; run `kstack genpwd` (and deploy) first",
            args.target.config.config_dir.display()
        );
        return Ok(Exit::BadInput);
    };
    // A service may echo, and a pod log may carry, any value of passwords.yml or the Ceph key.
    let secrets: Vec<Password> = kstack_render::files::cloud_secret_values(&config)
        .into_iter()
        .map(Password::new)
        .collect();
    let redactor = Redactor::new(secrets.iter().cloned());
    let mut settings = settings(&args, &config, Password::new(password))?;
    settings.secrets = secrets;
    settings.keep = args.keep;
    if let Some(dir) = &args.guest_image {
        match guest_image(dir) {
            Ok(g) => settings.guest = Some(g),
            Err(e) => {
                eprintln!("error: {e:#}");
                return Ok(Exit::Failed);
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // HTTPS public endpoints: trust kstack's CA (or the operator's) as a user's client would.
    let cas = runtime.block_on(super::tls::trusted_cas(
        &config,
        args.target.kubeconfig.as_deref(),
    ));
    for (origin, pem) in cas? {
        let certs = kstack_verify::ca_bundle(&pem)
            .map_err(|e| super::InputError(format!("the CA of {origin}: {e}")))?;
        settings.ca_certificates.extend(certs);
    }
    runtime.block_on(async {
        resolve_services(&args, &config, &mut settings).await;
        match &args.delete {
            Some(prefix) => delete(&args, &settings, prefix).await,
            None => verify(args, config, settings, redactor).await,
        }
    })
}

/// The catalog names the cloud's Services (`<service>.<namespace>.svc`): with a cluster at
/// hand, they are reached at their ClusterIPs, so verify runs from any machine on the
/// cluster's network without its DNS. `--resolve` wins.
async fn resolve_services(args: &Args, config: &Config, settings: &mut Settings) {
    if args.to == super::compose::TargetArg::Kubernetes
        && let Ok(client) = kstack_kube::client(args.target.kubeconfig.as_deref()).await
    {
        let ns = &config.globals.kubernetes_namespace;
        // A kubeconfig of a cluster that does not answer must not hold up the checks.
        let lookup = tokio::time::timeout(
            Duration::from_secs(10),
            kstack_kube::service_addresses(&client, ns),
        );
        match lookup.await {
            Err(_) => tracing::debug!("no Service addresses: the cluster did not answer in 10 s"),
            Ok(Err(e)) => tracing::debug!("no Service addresses from the cluster: {e}"),
            Ok(Ok(found)) => {
                for (name, ip) in found {
                    for host in [
                        format!("{name}.{ns}.svc"),
                        format!("{name}.{ns}.svc.{CLUSTER_DOMAIN}"),
                    ] {
                        settings.resolve.entry(host).or_insert(ip);
                    }
                }
            }
        }
    }
}

/// The checks' settings from the config directory and the flags.
fn settings(args: &Args, config: &Config, password: Password) -> anyhow::Result<Settings> {
    let g = &config.globals;
    let target = match args.to {
        super::compose::TargetArg::Kubernetes => Target::Kubernetes,
        super::compose::TargetArg::Compose => Target::Compose,
    };
    let auth_url = match &args.os_auth_url {
        Some(url) => url.clone(),
        None => kstack_render::tasks::keystone_public_url(config, target)?,
    };
    let mut s = Settings::new(
        auth_url,
        g.keystone_admin_user.clone(),
        password,
        g.keystone_admin_project.clone(),
        g.openstack_region_name.clone(),
    );
    s.interface = match args.interface {
        InterfaceArg::Public => kstack_verify::Interface::Public,
        InterfaceArg::Internal => kstack_verify::Interface::Internal,
    };
    s.services = services(config);
    s.horizon_url = Some(match &args.horizon_url {
        Some(url) => url.clone(),
        None => kstack_render::tasks::service_public_url(config, target, "horizon", "http")?,
    });
    s.timeout = Duration::from_secs(args.timeout);
    s.resolve = args.resolve.iter().cloned().collect();
    s.external_network = args.external_network.clone();
    s.external_subnet = args.external_subnet.clone();
    s.heat_cfn_signed_requests = g.release().heat_cfn_signed_requests;
    Ok(s)
}

/// The cluster's DNS domain, under which Service names also resolve.
const CLUSTER_DOMAIN: &str = "cluster.local";

/// An IPv4 subnet, `ADDR/PREFIX`, of `--external-subnet`.
fn parse_cidr(v: &str) -> Result<String, String> {
    let ok = v.split_once('/').is_some_and(|(addr, prefix)| {
        addr.parse::<std::net::Ipv4Addr>().is_ok() && prefix.parse::<u8>().is_ok_and(|p| p <= 30)
    });
    if ok {
        Ok(v.to_owned())
    } else {
        Err(format!(
            "expected an IPv4 subnet ADDR/PREFIX with a prefix of at most 30, e.g. 172.24.4.0/24; got {v:?}"
        ))
    }
}

/// `HOST=ADDR` of `--resolve`.
fn parse_resolve(v: &str) -> Result<(String, std::net::IpAddr), String> {
    let (host, addr) = v
        .split_once('=')
        .ok_or_else(|| format!("`{v}`: want HOST=ADDR, e.g. keystone.openstack.svc=10.96.0.20"))?;
    let addr = addr
        .parse()
        .map_err(|_| format!("`{addr}` is not an IP address"))?;
    if host.is_empty() {
        return Err(format!("`{v}`: the host is empty"));
    }
    Ok((host.to_owned(), addr))
}

/// Every catalog service: its project, whether globals.yml enables it, and the service type
/// its Keystone registration task registers.
fn services(config: &Config) -> BTreeMap<String, ServiceInfo> {
    config
        .catalog
        .services
        .iter()
        .map(|(name, svc)| {
            let service_type = svc.bootstrap.iter().find_map(|t| match &t.task {
                BootstrapKind::KeystoneRegister { service_type, .. } => Some(service_type.clone()),
                _ => None,
            });
            let info = ServiceInfo {
                project: svc.project.clone(),
                enabled: config.enabled.contains(name),
                service_type,
            };
            (name.clone(), info)
        })
        .collect()
}

/// The tail of one container's log, in the JSON report.
#[derive(Serialize)]
struct ServiceLog {
    service: String,
    pod: String,
    container: String,
    lines: Vec<String>,
}

#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    report: &'a Report,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pod_logs: Vec<ServiceLog>,
    /// Why no pod logs could be read for a failed step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pod_logs_error: Option<String>,
    /// Where a kept run's directory is (`--keep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    kept_dir: Option<std::path::PathBuf>,
}

async fn verify(
    args: Args,
    config: Config,
    settings: Settings,
    redactor: Redactor,
) -> anyhow::Result<Exit> {
    let tty = std::io::stderr().is_terminal();
    eprintln!(
        "kstack verify: {} as {} in project {}, region {}, {} endpoints; resources named {}",
        settings.auth_url,
        settings.username,
        settings.project,
        settings.region,
        settings.interface.as_str(),
        settings.prefix
    );
    let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel::<()>();
    let prefix = settings.prefix.clone();
    let signals = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!("interrupted: deleting what was created (Ctrl-C again to stop at once)");
        let _ = cancel_tx.send(());
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("cleanup interrupted: resources named {prefix} may be left in the cloud");
            crate::exit::exit_now(Exit::Interrupted);
        }
    });
    let cancel = async {
        // A dropped sender (no signal handler) is not a cancellation.
        if cancel_rx.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let started = Instant::now();
    let on_event = |e: Event<'_>| {
        let at = started.elapsed().as_secs_f64();
        match e {
            Event::Started(step) if tty => eprintln!("[{at:7.1}s] {step} ..."),
            Event::Started(_) => {}
            Event::Finished(r) if r.result == Outcome::Ok || r.result == Outcome::Failed => {
                eprintln!(
                    "[{at:7.1}s] {} {} ({:.1}s)",
                    r.step,
                    r.result.as_str(),
                    r.seconds
                );
            }
            Event::Finished(_) => {}
            Event::Cleaned(c) if c.result == Outcome::Failed => {
                eprintln!(
                    "[{at:7.1}s] cleanup: could not delete {}: {}",
                    c.resource, c.detail
                );
            }
            Event::Cleaned(c) => eprintln!("[{at:7.1}s] deleted {}", c.resource),
        }
    };
    let report = kstack_verify::run(&settings, cancel, &on_event).await;
    signals.abort();
    let config_dir = &args.target.config.config_dir;
    let kept_dir = match (&report.kept, &report.kept_secrets) {
        (Some(kept), Some(secrets)) => match write_kept(config_dir, kept, secrets) {
            Ok(dir) => Some(dir),
            Err(e) => {
                eprintln!(
                    "error: {e:#}; what the run kept (named {}) is left in the cloud",
                    kept.prefix
                );
                return Ok(Exit::Failed);
            }
        },
        _ => None,
    };

    let failed = report.failed_step().filter(|_| !report.interrupted);
    let mut pod_logs = Vec::new();
    let mut pod_logs_error = None;
    if let Some(step) = failed
        && !step.services.is_empty()
    {
        let found = match args.to {
            super::compose::TargetArg::Kubernetes => {
                logs(&args, &config, &step.services, &redactor).await
            }
            super::compose::TargetArg::Compose => {
                let services = step.services.clone();
                let redactor = redactor.clone();
                tokio::task::spawn_blocking(move || compose_logs(&services, &redactor))
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()))
            }
        };
        match found {
            Ok(l) => pod_logs = l,
            Err(e) => pod_logs_error = Some(redactor.redact(&e)),
        }
    }
    match args.output {
        Format::Json => {
            let out = Output {
                report: &report,
                pod_logs,
                pod_logs_error,
                kept_dir: kept_dir.clone(),
            };
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Format::Table => {
            print_table(&report);
            if let Some(step) = failed {
                print_failure(step, &report, args.os_auth_url.is_none());
                for l in &pod_logs {
                    eprintln!(
                        "--- {} pod {} container {} (last {LOG_LINES} lines) ---",
                        l.service, l.pod, l.container
                    );
                    for line in &l.lines {
                        eprintln!("{line}");
                    }
                }
                if let Some(e) = &pod_logs_error {
                    eprintln!("pod logs: not read ({e})");
                } else if pod_logs.is_empty() && !step.services.is_empty() {
                    eprintln!(
                        "pod logs: no pods of {} in namespace {}",
                        step.services.join(", "),
                        config.globals.kubernetes_namespace
                    );
                }
            }
            let left: Vec<_> = report.leftovers().collect();
            if !left.is_empty() {
                eprintln!("left in the cloud, delete by hand:");
                for c in left {
                    eprintln!("  {}: {}", c.resource, c.detail);
                }
            }
            if let (Some(kept), Some(dir)) = (&report.kept, &kept_dir) {
                print_kept(kept, dir, config_dir);
            }
        }
    }
    Ok(if report.interrupted {
        Exit::Interrupted
    } else if report.passed {
        Exit::Success
    } else {
        Exit::CheckFailed
    })
}

/// What a kept run left and how to reach and delete it.
fn print_kept(kept: &kstack_verify::Kept, dir: &std::path::Path, config_dir: &std::path::Path) {
    println!(
        "kept in the cloud: {} resources named {} (listed in {})",
        kept.resources.len(),
        kept.prefix,
        dir.join(KEPT_FILE).display()
    );
    if let (Some(ip), Some(user)) = (&kept.floating_ip, &kept.login_user) {
        println!(
            "log in to the guest: ssh -i {} {user}@{ip}",
            dir.join(KEY_FILE).display()
        );
    }
    println!(
        "delete it: kstack --config-dir {} verify --delete {}",
        config_dir.display(),
        kept.prefix
    );
}

/// `--delete`: deletes what the kept run left, then its directory.
async fn delete(args: &Args, settings: &Settings, prefix: &str) -> anyhow::Result<Exit> {
    let config_dir = &args.target.config.config_dir;
    let dir = kept_dir(config_dir, prefix);
    let path = dir.join(KEPT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "{}: no kept run {prefix} (its directory is made by `kstack verify --keep`); nothing deleted",
                path.display()
            );
            return Ok(Exit::BadInput);
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let file: KeptFile = match serde_json::from_str(&text) {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "{}:{}:{}: not a kept run's file ({e}); nothing deleted",
                path.display(),
                e.line(),
                e.column()
            );
            return Ok(Exit::BadInput);
        }
    };
    let secrets = kstack_verify::KeptSecrets {
        user_password: Password::new(file.user_password),
        ssh_private_key: None,
    };
    let on_event = |e: Event<'_>| {
        if let Event::Cleaned(c) = e {
            match c.result {
                Outcome::Failed => eprintln!("could not delete {}: {}", c.resource, c.detail),
                _ => eprintln!("deleted {}", c.resource),
            }
        }
    };
    let reports = match kstack_verify::delete_kept(settings, &file.kept, &secrets, &on_event).await
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: deleting the kept run {prefix}: {e}; nothing deleted");
            return Ok(Exit::CheckFailed);
        }
    };
    let left = reports
        .iter()
        .filter(|c| c.result == Outcome::Failed)
        .count();
    if args.output == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "prefix": prefix, "cleanup": reports, "passed": left == 0,
            }))?
        );
    }
    if left > 0 {
        eprintln!(
            "{left} of {} resources of {prefix} are still in the cloud; {} is kept, run --delete again",
            reports.len(),
            dir.display()
        );
        return Ok(Exit::CheckFailed);
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    eprintln!("deleted the {} resources of {prefix}", reports.len());
    Ok(Exit::Success)
}

fn print_table(report: &Report) {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header(["STEP", "RESULT", "SECONDS", "DETAIL"]);
    for s in &report.steps {
        t.add_row([
            s.step.name().to_owned(),
            s.result.as_str().to_owned(),
            format!("{:.1}", s.seconds),
            s.detail.clone(),
        ]);
    }
    let left = report.leftovers().count();
    let cleanup_secs = report.cleanup.iter().fold(0.0, |a, c| a + c.seconds);
    let (result, detail) = match (report.cleanup.len(), left) {
        (0, _) => ("ok", "nothing to delete".to_owned()),
        (n, 0) => ("ok", format!("deleted {n} resources")),
        (n, l) => (
            "failed",
            format!("{l} of {n} resources could not be deleted"),
        ),
    };
    t.add_row([
        "cleanup".to_owned(),
        result.to_owned(),
        format!("{cleanup_secs:.1}"),
        detail,
    ]);
    println!("{t}");
    let count = |o: Outcome| report.steps.iter().filter(|s| s.result == o).count();
    let verdict = if report.interrupted {
        "INTERRUPTED"
    } else if report.passed {
        "passed"
    } else {
        "FAILED"
    };
    println!(
        "{verdict}: {} ok, {} skipped, {} failed, {} not run; total {:.1}s",
        count(Outcome::Ok),
        count(Outcome::Skipped),
        count(Outcome::Failed),
        count(Outcome::NotRun),
        report.seconds
    );
}

/// The failing step on stderr: the call, its status and message, whose pods to look at.
fn print_failure(step: &kstack_verify::StepReport, report: &Report, default_auth_url: bool) {
    eprintln!("error: step `{}` failed", step.step);
    match &step.call {
        Some(c) => {
            let base = c.url.strip_suffix(c.path()).unwrap_or(&c.url);
            eprintln!("  call:     {} {} (at {base})", c.method, c.path());
            match c.status {
                Some(s) => eprintln!("  status:   HTTP {s}"),
                None => eprintln!("  status:   no answer"),
            }
            eprintln!("  message:  {}", c.message);
            if step.detail != c.to_string() {
                eprintln!("  detail:   {}", step.detail);
            }
        }
        None => eprintln!("  reason:   {}", step.detail),
    }
    if step.step == Step::Token
        && default_auth_url
        && step.call.as_ref().is_some_and(|c| c.status.is_none())
    {
        eprintln!(
            "  hint:     {} is the keystone Service of the namespace; from a host outside the cluster pass --os-auth-url (its ClusterIP, a port-forward or an ingress)",
            report.auth_url
        );
    }
    if !step.services.is_empty() {
        eprintln!("  services: {}", step.services.join(", "));
    }
}

/// The last lines of every pod of the services, through the kubeconfig (or none found).
async fn logs(
    args: &Args,
    config: &Config,
    services: &[String],
    redactor: &Redactor,
) -> Result<Vec<ServiceLog>, String> {
    let namespace = &config.globals.kubernetes_namespace;
    let work = async {
        let client = kstack_kube::client(args.target.kubeconfig.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for service in services {
            let selector = format!("{NAME_LABEL}={service},{COMPONENT_LABEL}={SERVER}");
            let logs = kstack_kube::pod_logs(&client, namespace, &selector, LOG_LINES)
                .await
                .map_err(|e| e.to_string())?;
            for l in logs {
                out.push(ServiceLog {
                    service: service.clone(),
                    pod: l.pod,
                    container: l.container,
                    lines: redactor
                        .redact(&l.text)
                        .lines()
                        .map(str::to_owned)
                        .collect(),
                });
            }
        }
        Ok(out)
    };
    tokio::time::timeout(Duration::from_secs(20), work)
        .await
        .unwrap_or_else(|_| Err("the Kubernetes API did not answer within 20 s".to_owned()))
}

/// The last lines of every server container of the services on this node's Docker engine
/// ([`kstack_compose::service_logs`], by kstack's labels).
fn compose_logs(services: &[String], redactor: &Redactor) -> Result<Vec<ServiceLog>, String> {
    let logs = kstack_compose::service_logs(
        &kstack_compose::DockerCompose,
        services,
        LOG_LINES as u32,
        &|text| redactor.redact(text),
    )
    .map_err(|e| e.to_string())?;
    Ok(logs
        .into_iter()
        .map(|l| ServiceLog {
            pod: l.container,
            container: l.service.clone(),
            service: l.service,
            lines: l.lines,
        })
        .collect())
}
