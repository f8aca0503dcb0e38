//! `kstack deploy`, `kstack plan`, `kstack status`: the cloud of a config directory against a
//! cluster. The engine plans and executes; this module loads the config, renders, prints
//! progress (a live view on a terminal, plain lines otherwise) and picks exit codes.
//!
//! Exit codes ([`Exit`]): success (deploy: every service healthy), failed (cluster or IO),
//! bad input, a deploy or rollback step failed (the report says which service, which
//! condition, what the pods say, and which steps were not started), locked (`--no-wait` and
//! another writer holds the deploy lock), interrupted.
//!
//! `deploy` and `rollback` hold the cloud's deploy lock (a Lease, see `kstack_kube::lock`)
//! while they write; `plan`, `status` and `history` only read and never take it.
use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kstack_config::Config;
use kstack_engine::certs::Access;
use kstack_engine::plan::{Action, Observed, Plan};
use kstack_engine::status::ServiceStatus;
use kstack_engine::{Event, Limits, ObjectRef, Options, Report};
use kstack_kube::{KubeCluster, RequestCounts};
use kstack_render::{Rendered, kubernetes};
use serde::Serialize;

use super::writer::{Writer, under_lock};
use crate::exit::Exit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Yaml,
    Json,
}

/// Options every cluster command shares.
#[derive(Debug, clap::Args)]
pub struct Target {
    #[command(flatten)]
    pub config: super::config::ConfigDir,
    /// The global `--kubeconfig` ([`super::config::GlobalArgs`]), given before or after the
    /// sub-command.
    #[arg(skip)]
    pub kubeconfig: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum DeployCommand {
    /// Deploy the cloud: apply config, run bootstrap Jobs and roll out every enabled service in
    /// dependency order, each step gated on real health; prune disabled services.
    #[command(
        after_help = "Examples:\n  kstack deploy --config-dir ./mycloud\n  kstack deploy --serial --timeout 300\n  kstack deploy -o json > report.json\n  kstack deploy --target compose --compose-dir /srv/cloud   # one node, Docker Compose\n\nServices run in parallel as far as the dependency graph allows; a service starts once\neverything it depends on is healthy. A second deploy of unchanged input changes nothing.\nOne deploy or rollback writes to a cloud at a time: a second one waits for the deploy lock\n(a Lease in the cloud's namespace), or with --no-wait fails at once. An API server that\ngoes away is waited for (--api-outage, default 120s). Before an upgrade (new images of a\ndeployed service) the databases are backed up into backups/ of the config directory\n(--backup-dir DIR; --no-backup skips it; a failed backup stops the deploy before it changes anything).\nExit codes: 0 every service healthy, 1 cluster or IO failure, 2 invalid config,\n3 a step failed (which service, which condition, what the pods say, what did not start),\n75 --no-wait and another writer holds the lock, 130 interrupted;\n--target compose: 3 no Docker engine answered or an image is missing (nothing started),\nor a container did not become healthy in time or a task failed."
    )]
    Deploy(DeployArgs),
    /// Show what `kstack deploy` would create, change, leave and prune (changes nothing).
    #[command(
        after_help = "Examples:\n  kstack plan --config-dir ./mycloud\n  kstack plan --all          # unchanged objects too\n  kstack plan -o json\n\nExit codes: 0 planned, 1 cluster or IO failure, 2 invalid config."
    )]
    Plan(PlanArgs),
    /// Every service: desired and ready pods, recorded generation and health.
    #[command(
        after_help = "Examples:\n  kstack status\n  kstack status -o json | jq '.[] | select(.health != \"healthy\")'\n\nWith TLS on the public endpoints it also says until when their certificate is valid.\nExit codes: 0 shown, 1 cluster or IO failure, 2 invalid config, 4 the public endpoints'\ncertificate has expired or does not name the public host (clients refuse it)."
    )]
    Status(StatusArgs),
    /// The recorded generations of every service (or one): time, state, config hash, images.
    #[command(
        after_help = "Examples:\n  kstack history\n  kstack history keystone -o json\n\nGenerations are stored in the cluster (ConfigMaps kstack-release-<service>-<gen>), so the\nhistory survives the machine that ran kstack.\nExit codes: 0 shown, 1 cluster or IO failure, 2 invalid config."
    )]
    History(HistoryArgs),
    /// Restore one service to an earlier generation (default: the newest healthy generation
    /// before the one it runs), wait until it is healthy, and record it as a new generation.
    #[command(
        after_help = "Examples:\n  kstack rollback keystone\n  kstack rollback glance-api --to 3\n  kstack history glance-api   # the generations to pick from\n\nA rollback re-applies the recorded workload, Service and config objects of that generation.\nIt does not undo database schema changes: expand-phase migrations leave a schema the older\nrelease still runs on, so rolling back an upgrade whose contract phase has not run is safe;\nafter a contract phase a rollback to older code is refused. The next `kstack deploy` applies\nglobals.yml again: change it too if the rollback should stay.\nExit codes: 0 healthy again, 1 cluster or IO failure, 2 invalid config or a refused rollback,\n3 the restored generation did not become healthy, 75 --no-wait and another writer holds the\nlock, 130 interrupted."
    )]
    Rollback(RollbackArgs),
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub target: Target,
    /// The service (see `kstack status`).
    pub service: String,
    /// The generation to restore (see `kstack history SERVICE`).
    #[arg(long, value_name = "GENERATION")]
    pub to: Option<u64>,
    /// Time limit in seconds for the restored pods to become healthy (default: the service's
    /// `kstack_timeouts`).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: Option<u64>,
    /// Fail at once (exit 75) if a deploy or another rollback holds the cloud's deploy lock,
    /// instead of waiting for it.
    #[arg(long)]
    pub no_wait: bool,
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Output,
}

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub target: Target,
    /// Only this service.
    pub service: Option<String>,
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Output,
}

#[derive(Debug, clap::Args)]
pub struct DeployArgs {
    #[command(flatten)]
    pub target: Target,
    /// Where to deploy: the Kubernetes cluster, or this node with Docker Compose.
    #[arg(long = "target", value_enum, default_value_t)]
    pub to: super::compose::TargetArg,
    /// Compose target: the directory for compose.yaml and config/ (default: <config-dir>/compose).
    #[arg(long, value_name = "DIR")]
    pub compose_dir: Option<std::path::PathBuf>,
    /// Run one step at a time (for comparison with the parallel run).
    #[arg(long)]
    pub serial: bool,
    /// Leave a service whose new pods do not become healthy as it is, for inspection (default:
    /// restore its last healthy generation).
    #[arg(long)]
    pub no_rollback: bool,
    /// Default time limit in seconds for each Job and health wait (overrides
    /// `kstack_timeouts.default`; per-service values in `kstack_timeouts` still apply).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: Option<u64>,
    /// How long, in seconds, each call to the API server keeps being retried while the API
    /// server is unreachable or answers with a transient error (a control plane restarting).
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub api_outage: u64,
    /// Fail at once (exit 75) if another deploy or rollback holds the cloud's deploy lock,
    /// instead of waiting for it.
    #[arg(long)]
    pub no_wait: bool,
    /// With TLS on the public endpoints and kstack's own CA: issue a new certificate for them
    /// now, even if the current one is still good (HAProxy then rolls, one pod at a time).
    /// Without this flag a deploy renews it 30 days before it expires.
    #[arg(long)]
    pub renew_certificate: bool,
    /// Upgrade without the backup of the databases a deploy takes first when it upgrades a
    /// service.
    #[arg(long)]
    pub no_backup: bool,
    /// Where the backup before an upgrade goes (default: `backups/` in the config directory).
    #[arg(long, value_name = "DIR", conflicts_with = "no_backup")]
    pub backup_dir: Option<std::path::PathBuf>,
    /// Report format on stdout.
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Output,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub target: Target,
    /// List unchanged objects too.
    #[arg(long)]
    pub all: bool,
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Output,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: Target,
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Output,
}

pub fn run(command: DeployCommand) -> anyhow::Result<Exit> {
    if let DeployCommand::Deploy(a) = &command
        && a.to == super::compose::TargetArg::Compose
    {
        return super::compose::deploy(
            &a.target.config.config_dir,
            a.compose_dir.as_deref(),
            a.timeout,
        );
    }
    let target = match &command {
        DeployCommand::Deploy(a) => &a.target,
        DeployCommand::Plan(a) => &a.target,
        DeployCommand::Status(a) => &a.target,
        DeployCommand::History(a) => &a.target,
        DeployCommand::Rollback(a) => &a.target,
    };
    let dir = &target.config.config_dir;
    let Some(mut config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing done"));
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let kubeconfig = target.kubeconfig.clone();
    if let DeployCommand::Deploy(args) = command {
        // Checked before the cluster is touched: a config that loads but cannot be rendered is
        // bad input (exit 2). The certificate kstack makes is made under the deploy lock, so
        // the check renders with a throw-away one.
        let mut check = config.clone();
        super::tls::fill_example(&mut check, false)?;
        kubernetes::render(&check).map_err(|e| super::InputError(e.to_string()))?;
        return runtime.block_on(deploy(args, &config));
    }
    let mut made_certificate = None;
    // With TLS on the public endpoints and no operator certificate, the certificate kstack
    // made is part of what is rendered: the read-only commands read it.
    if super::tls::needs_made_certificate(&config) {
        made_certificate = runtime.block_on(async {
            let (client, _) = kstack_kube::counted_client(kubeconfig.as_deref()).await?;
            let cluster = KubeCluster::new(client);
            super::tls::fill_from_cluster(&mut config, &cluster, Access::Read, false).await
        })?;
    }
    // A config that loads but cannot be rendered is bad input, as in every command (exit 2).
    let rendered = kubernetes::render(&config).map_err(|e| super::InputError(e.to_string()))?;
    runtime.block_on(async {
        match command {
            DeployCommand::Deploy(_) => unreachable!("handled above"),
            DeployCommand::Plan(args) => plan(args, &config, &rendered).await,
            DeployCommand::Status(args) => {
                let cert = super::tls::certificate_status(&config, made_certificate.as_ref());
                status(args, &config, &rendered, cert).await
            }
            DeployCommand::History(args) => history(args, &config, &rendered).await,
            DeployCommand::Rollback(args) => rollback(args, &config, &rendered).await,
        }
    })
}

fn timeouts(config: &Config, default: Option<u64>) -> Limits {
    let g = &config.globals;
    let default = default.unwrap_or_else(|| g.timeout_secs("default"));
    Limits {
        default: Duration::from_secs(default),
        per_service: g
            .timeouts
            .iter()
            .filter(|(k, _)| *k != "default")
            .map(|(k, v)| (k.clone(), Duration::from_secs(*v)))
            .collect(),
        history: g.history_limit,
    }
}

/// Why a deploy of `config` would take the cloud back to an older OpenStack release than the
/// one its databases were migrated to by the last deploy that succeeded (the release index),
/// naming globals.yml's line; `None` when it would not.
fn older_release(
    config_dir: &std::path::Path,
    config: &Config,
    observed: &kstack_engine::Observed,
) -> Option<String> {
    let index = observed.history.index.as_ref()?;
    let recorded = index.openstack_release.as_deref()?;
    let wanted = config.globals.images.openstack_release.as_str();
    let order = |name: &str| {
        kstack_model::release::ALL
            .iter()
            .position(|r| r.name == name)
    };
    if order(wanted)? >= order(recorded)? {
        return None;
    }
    let path = config_dir.join("globals.yml");
    let line = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.lines().position(|l| l.starts_with("openstack_release:")))
        .map(|i| format!(":{}", i + 1))
        .unwrap_or_default();
    Some(format!(
        "{}{line}: openstack_release: {wanted} is older than {recorded}, the release the cloud's databases were migrated to (deploy generation {}); OpenStack does not go back a release. Set openstack_release: \"{recorded}\" again, or restore a backup taken at {wanted} into a fresh cloud (`kstack restore`); nothing deployed",
        path.display(),
        index.generation
    ))
}

struct Connected {
    cluster: KubeCluster,
    counter: std::sync::Arc<kstack_kube::RequestCounter>,
    observed: Observed,
    plan: Plan,
}

async fn connect(
    target: &Target,
    config: &Config,
    rendered: &Rendered,
    timeouts: &Limits,
) -> anyhow::Result<Connected> {
    let (client, counter) = kstack_kube::counted_client(target.kubeconfig.as_deref()).await?;
    let cluster = KubeCluster::new(client);
    let namespace = config.globals.kubernetes_namespace.clone();
    let cluster_scoped: Vec<ObjectRef> = rendered
        .objects
        .iter()
        .map(|o| ObjectRef::of(&o.to_json_value()))
        .filter(|r| r.namespace.is_none())
        .collect();
    let observed = kstack_engine::observe(&cluster, &namespace, &cluster_scoped)
        .await
        .with_context(|| format!("reading the state of namespace {namespace}"))?;
    let plan = kstack_engine::plan(rendered, &config.catalog, &observed, timeouts)?;
    Ok(Connected {
        cluster,
        counter,
        observed,
        plan,
    })
}

fn print_data<T: Serialize>(output: Output, value: &T) -> anyhow::Result<()> {
    let text = match output {
        Output::Json => serde_json::to_string_pretty(value)? + "\n",
        Output::Yaml => serde_saphyr::to_string(value)?,
        Output::Table => unreachable!("tables are printed by each command"),
    };
    print!("{text}");
    Ok(())
}

#[derive(Serialize)]
struct DeployOutput<'a> {
    succeeded: bool,
    generation: u64,
    seconds: f64,
    /// Time spent waiting for another writer's deploy lock before the deploy began.
    lock_waited_seconds: f64,
    serial: bool,
    steps: usize,
    objects: usize,
    #[serde(flatten)]
    report: &'a Report,
    api_requests: RequestCounts,
    /// The backup of the databases taken before an upgrade.
    #[serde(skip_serializing_if = "Option::is_none")]
    backup: Option<String>,
    /// The chain of steps that decided when the deploy ended, each with its start, end and
    /// the wait before it.
    critical_path: Vec<super::critical::Link>,
}

async fn deploy(args: DeployArgs, config: &Config) -> anyhow::Result<Exit> {
    let (target, no_wait) = (&args.target, args.no_wait);
    under_lock(Writer::Deploy, target, config, no_wait, |waited| {
        deploy_locked(&args, config, waited.as_secs_f64())
    })
    .await
}

/// The deploy, holding the deploy lock (which made the namespace on a first deploy): makes or
/// renews the public endpoints' certificate when kstack makes it, renders, applies.
async fn deploy_locked(
    args: &DeployArgs,
    config: &Config,
    lock_waited: f64,
) -> anyhow::Result<Exit> {
    let mut config = config.clone();
    if super::tls::needs_made_certificate(&config) {
        // A client of its own: the certificate's requests are not the deploy's.
        let client = kstack_kube::client(args.target.kubeconfig.as_deref()).await?;
        let made = super::tls::fill_from_cluster(
            &mut config,
            &KubeCluster::new(client),
            Access::Store,
            args.renew_certificate,
        )
        .await?;
        if let Some(why) = made.as_ref().and_then(|m| m.renewed.as_deref()) {
            eprintln!("public certificate: a new one from kstack's CA ({why})");
        }
    }
    let config = &config;
    let rendered = &kubernetes::render(config).map_err(|e| super::InputError(e.to_string()))?;
    let timeouts = timeouts(config, args.timeout);
    let mut c = connect(&args.target, config, rendered, &timeouts).await?;
    if let Some(why) = older_release(&args.target.config.config_dir, config, &c.observed) {
        return Err(super::InputError(why).into());
    }
    c.plan.openstack_release = Some(config.globals.images.openstack_release.clone());
    let backup = match super::backup::before_upgrade(
        (args.no_backup, args.backup_dir.as_deref()),
        &args.target,
        config,
        &c.plan,
    )
    .await
    {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "error: the backup before the upgrade failed: {e:#}\nnothing deployed; `kstack deploy --no-backup` upgrades without one"
            );
            return Ok(Exit::Failed);
        }
    };
    let started = Instant::now();
    let progress = Progress::new(&c.plan, std::io::stderr().is_terminal());
    let options = Options {
        serial: args.serial,
        now: chrono_now(),
        no_rollback: args.no_rollback,
        outage: Some(Duration::from_secs(args.api_outage)),
    };
    let report = kstack_engine::deploy(&c.cluster, &c.plan, &c.observed, &options, &|e: &Event| {
        progress.event(e)
    })
    .await?;
    progress.finish();
    let seconds = started.elapsed().as_secs_f64();
    let critical_path = progress.critical_path();
    if !critical_path.is_empty() {
        eprintln!("{}", super::critical::line(&critical_path));
    }
    for f in &report.failures {
        eprintln!("error: {f}");
    }
    if !report.not_started.is_empty() {
        eprintln!(
            "not started ({}): {}",
            report.not_started.len(),
            report.not_started.join(", ")
        );
    }
    let out = DeployOutput {
        succeeded: report.succeeded(),
        generation: report.generation,
        seconds,
        lock_waited_seconds: lock_waited,
        serial: args.serial,
        steps: c.plan.steps.len(),
        objects: c.plan.objects.len(),
        report: &report,
        api_requests: c.counter.counts(),
        backup: backup.as_ref().map(|p| p.display().to_string()),
        critical_path,
    };
    match args.output {
        Output::Table => {
            let outcome = if report.succeeded() {
                "deployed"
            } else {
                "FAILED"
            };
            println!(
                "{outcome}: generation {}, {} of {} steps done, {} not started, {} failed, {} API writes, {} pruned, {seconds:.1}s",
                report.generation,
                report.done.len(),
                c.plan.steps.len(),
                report.not_started.len(),
                report.failures.len(),
                report.writes,
                report.pruned.len(),
            );
        }
        other => print_data(other, &out)?,
    }
    Ok(if report.succeeded() {
        Exit::Success
    } else {
        Exit::StepFailed
    })
}

/// The caller's clock for release records (the engine reads none).
fn chrono_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[derive(Serialize)]
struct PlanRow {
    action: String,
    kind: String,
    name: String,
    service: String,
    /// What was changed in the cluster outside kstack (the action is then `change`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    drift: Vec<String>,
}

async fn plan(args: PlanArgs, config: &Config, rendered: &Rendered) -> anyhow::Result<Exit> {
    let c = connect(&args.target, config, rendered, &timeouts(config, None)).await?;
    let mut rows: Vec<PlanRow> = c
        .plan
        .objects
        .iter()
        .filter(|o| args.all || o.action != Action::Unchanged)
        .map(|o| PlanRow {
            action: match o.action {
                Action::Create => "create",
                Action::Change => "change",
                Action::Replace => "replace",
                Action::Unchanged => "unchanged",
            }
            .into(),
            kind: o.desired.reference.kind.clone(),
            name: o.desired.reference.name.clone(),
            service: o.desired.service.clone().unwrap_or_default(),
            drift: o.drift.clone(),
        })
        .collect();
    for r in &c.plan.prune {
        let service = c.observed.objects.get(r).and_then(|o| {
            o["metadata"]["labels"][kstack_model::labels::NAME_LABEL]
                .as_str()
                .map(str::to_owned)
        });
        rows.push(PlanRow {
            action: "prune".into(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            service: service.unwrap_or_default(),
            drift: Vec::new(),
        });
    }
    let count = |a: Action| c.plan.objects.iter().filter(|o| o.action == a).count();
    match args.output {
        Output::Table => {
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::NOTHING);
            t.set_header(["ACTION", "KIND", "NAME", "SERVICE"]);
            for r in &rows {
                t.add_row([&r.action, &r.kind, &r.name, &r.service]);
            }
            if !rows.is_empty() {
                println!("{t}");
            }
            let replace = match count(Action::Replace) {
                0 => String::new(),
                n => format!(", {n} to replace (pods kept)"),
            };
            println!(
                "{} to create, {} to change{replace}, {} unchanged, {} to prune",
                count(Action::Create),
                count(Action::Change),
                count(Action::Unchanged),
                c.plan.prune.len()
            );
            for line in mode_lines(&c.plan) {
                println!("{line}");
            }
            for r in rows.iter().filter(|r| !r.drift.is_empty()) {
                println!(
                    "{} {} was changed outside kstack ({}); deploy applies kstack's version again",
                    r.kind,
                    r.name,
                    r.drift.join("; ")
                );
            }
        }
        other => print_data(other, &rows)?,
    }
    Ok(Exit::Success)
}

/// What the deploy does per service beyond applying objects: upgrades (with the migration
/// phases they run) and pending contract phases.
fn mode_lines(plan: &Plan) -> Vec<String> {
    let tasks = |service: &str, phase: &str| -> Vec<String> {
        plan.steps
            .iter()
            .filter(|s| s.service.as_deref() == Some(service))
            .filter_map(|s| match &s.kind {
                kstack_engine::StepKind::Job { task, .. }
                    if plan.objects[s.objects[0]].desired.manifest["metadata"]["labels"]
                        [kstack_model::labels::PHASE_LABEL]
                        == phase =>
                {
                    Some(task.clone())
                }
                _ => None,
            })
            .collect()
    };
    let mut out = Vec::new();
    for (service, m) in &plan.modes {
        let expand = tasks(service, "expand");
        let contract = tasks(service, "contract");
        let phases = |out: &mut String| {
            if !expand.is_empty() {
                out.push_str(&format!("; before the new pods: {}", expand.join(", ")));
            }
            if !contract.is_empty() {
                out.push_str(&format!(
                    "; after every service is healthy: {}",
                    contract.join(", ")
                ));
            }
        };
        match &m.mode {
            kstack_engine::Mode::Upgrade { from, from_release } => {
                let mut line = format!("upgrade {service} from generation {from} ({from_release})");
                phases(&mut line);
                out.push(line);
            }
            _ if !contract.is_empty() => {
                let mut line = format!("{service}: contract phase of an earlier upgrade");
                phases(&mut line);
                out.push(line);
            }
            _ => {}
        }
    }
    out
}

async fn status(
    args: StatusArgs,
    config: &Config,
    rendered: &Rendered,
    certificate: Option<super::tls::CertificateStatus>,
) -> anyhow::Result<Exit> {
    let c = connect(&args.target, config, rendered, &timeouts(config, None)).await?;
    let rows: Vec<ServiceStatus> = kstack_engine::status::status(&c.plan, &c.observed);
    match args.output {
        Output::Table => {
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::NOTHING);
            t.set_header([
                "SERVICE",
                "KIND",
                "READY",
                "GENERATION",
                "RECORDED",
                "HEALTH",
            ]);
            for r in &rows {
                t.add_row([
                    r.service.clone(),
                    r.kind.clone(),
                    format!("{}/{}", r.ready, r.desired),
                    r.generation.map(|g| g.to_string()).unwrap_or("-".into()),
                    r.recorded.map(|s| s.to_string()).unwrap_or("-".into()),
                    r.health.to_string(),
                ]);
            }
            println!("{t}");
            let generation = c
                .observed
                .history
                .index
                .as_ref()
                .map_or(0, |i| i.generation);
            let healthy = rows
                .iter()
                .filter(|r| r.health == kstack_engine::status::Health::Healthy)
                .count();
            println!(
                "deploy generation {generation}; {healthy} of {} services healthy",
                c.plan.services.len()
            );
            if let Some(cert) = &certificate {
                println!("{}", cert.line);
            }
        }
        other => print_data(other, &rows)?,
    }
    // A certificate users would be refused with is an error to act on now, in every format.
    if let Some(cert) = certificate.filter(|c| c.problem) {
        eprintln!("error: {}", cert.line);
        return Ok(Exit::CheckFailed);
    }
    Ok(Exit::Success)
}

async fn history(args: HistoryArgs, config: &Config, rendered: &Rendered) -> anyhow::Result<Exit> {
    let c = connect(&args.target, config, rendered, &timeouts(config, None)).await?;
    let mut records: Vec<&kstack_engine::ServiceRecord> = c
        .observed
        .history
        .services
        .iter()
        .filter(|(s, _)| args.service.as_ref().is_none_or(|want| want == *s))
        .flat_map(|(_, gens)| gens.values())
        .collect();
    records.sort_by(|a, b| (&a.service, a.generation).cmp(&(&b.service, b.generation)));
    if let Some(s) = &args.service
        && records.is_empty()
    {
        eprintln!(
            "no recorded generation of `{s}` in namespace {}",
            c.plan.namespace
        );
    }
    match args.output {
        Output::Table => {
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::NOTHING);
            t.set_header([
                "SERVICE",
                "GENERATION",
                "DEPLOY",
                "TIME",
                "RELEASE",
                "OUTCOME",
                "CONFIG HASH",
                "CURRENT",
            ]);
            let index = c.observed.history.index.as_ref();
            for r in &records {
                let current = index
                    .and_then(|i| i.services.get(&r.service))
                    .is_some_and(|e| e.generation == r.generation);
                t.add_row([
                    r.service.clone(),
                    r.generation.to_string(),
                    r.deploy_generation.to_string(),
                    r.time.clone(),
                    r.release.clone(),
                    r.outcome(),
                    r.config_hash.clone(),
                    if current { "*".into() } else { String::new() },
                ]);
            }
            println!("{t}");
        }
        other => {
            // The manifests are for rollback, not for reading.
            let rows: Vec<kstack_engine::ServiceRecord> = records
                .into_iter()
                .map(|r| kstack_engine::ServiceRecord {
                    manifests: Vec::new(),
                    ..r.clone()
                })
                .collect();
            print_data(other, &rows)?
        }
    }
    Ok(Exit::Success)
}

async fn rollback(
    args: RollbackArgs,
    config: &Config,
    rendered: &Rendered,
) -> anyhow::Result<Exit> {
    let (target, no_wait) = (&args.target, args.no_wait);
    under_lock(Writer::Rollback, target, config, no_wait, |_| {
        rollback_locked(&args, config, rendered)
    })
    .await
}

async fn rollback_locked(
    args: &RollbackArgs,
    config: &Config,
    rendered: &Rendered,
) -> anyhow::Result<Exit> {
    let timeouts = timeouts(config, None);
    let c = connect(&args.target, config, rendered, &timeouts).await?;
    let existing = c
        .observed
        .objects
        .keys()
        .filter(|r| r.kind == "ConfigMap" || r.kind == "Secret")
        .cloned()
        .collect();
    let namespace = &c.plan.namespace;
    if !c.plan.services.contains(&args.service)
        && c.observed.history.services.contains_key(&args.service)
    {
        eprintln!(
            "kstack rollback: service `{}` is disabled in {}/globals.yml; a rollback would run it again behind the config's back: enable it and run `kstack deploy` instead",
            args.service,
            args.target.config.config_dir.display()
        );
        return Ok(Exit::BadInput);
    }
    let plan = match kstack_engine::plan_rollback(
        &c.observed.history,
        namespace,
        &args.service,
        args.to,
        &existing,
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kstack rollback: {e}");
            return Ok(Exit::BadInput);
        }
    };
    let timeout = args
        .timeout
        .map_or_else(|| timeouts.for_service(&args.service), Duration::from_secs);
    eprintln!(
        "{}: restoring generation {} ({}) over generation {}, waiting up to {}s",
        plan.service,
        plan.target.generation,
        plan.target.release,
        plan.current,
        timeout.as_secs()
    );
    let report = kstack_engine::rollback(
        &c.cluster,
        namespace,
        &c.observed.history,
        &plan,
        timeout,
        &chrono_now(),
    )
    .await
    .with_context(|| format!("recording the rollback of {}", plan.service))?;
    match args.output {
        Output::Table => println!("{}", report.message),
        other => print_data(other, &report)?,
    }
    if report.healthy {
        eprintln!(
            "note: the next `kstack deploy` applies the config directory again; change it too if {} should stay at generation {}",
            plan.service, plan.target.generation
        );
        Ok(Exit::Success)
    } else {
        Ok(Exit::StepFailed)
    }
}

/// Deploy progress: a live view of running, done and waiting steps on a terminal; one line per
/// event otherwise. Everything goes to stderr.
struct Progress<'a> {
    plan: &'a Plan,
    started: Instant,
    bar: Option<indicatif::ProgressBar>,
    /// Each step's state, by step id.
    steps: Mutex<Vec<StepTimes>>,
}

/// When a step started and ended, in seconds from the deploy's start; running is started and not
/// ended, done is ended.
#[derive(Clone, Copy, Default)]
struct StepTimes {
    start: Option<f64>,
    end: Option<f64>,
    failed: bool,
}

impl StepTimes {
    fn running(&self) -> bool {
        self.start.is_some() && self.end.is_none() && !self.failed
    }
    fn done(&self) -> bool {
        self.end.is_some()
    }
}

impl<'a> Progress<'a> {
    fn new(plan: &'a Plan, tty: bool) -> Progress<'a> {
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(plan.steps.len() as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {pos}/{len} steps {wide_msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Progress {
            plan,
            started: Instant::now(),
            bar,
            steps: Mutex::new(vec![StepTimes::default(); plan.steps.len()]),
        }
    }

    fn line(&self, text: String) {
        let line = format!("[{:7.1}s] {text}", self.started.elapsed().as_secs_f64());
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn event(&self, e: &Event) {
        let now = self.started.elapsed().as_secs_f64();
        let mut steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        match e {
            Event::Started { step } => {
                steps[*step].start = Some(now);
                if self.bar.is_none() {
                    self.line(format!("start {}", self.plan.steps[*step].name()));
                }
            }
            Event::Done { step, writes } => {
                steps[*step].end = Some(now);
                let s = &self.plan.steps[*step];
                let what = if *writes > 0 {
                    format!("{writes} writes")
                } else {
                    "unchanged".to_owned()
                };
                self.line(format!("done  {} ({what})", s.name()));
                if let Some(b) = &self.bar {
                    b.inc(1);
                }
            }
            Event::Failed { step, .. } => {
                steps[*step].failed = true;
                self.line(format!("FAIL  {}", self.plan.steps[*step].name()));
            }
            Event::Pruned { object } => self.line(format!("pruned {object}")),
        }
        if let Some(b) = &self.bar {
            let names: Vec<String> = self
                .plan
                .steps
                .iter()
                .filter(|s| steps[s.id].running())
                .map(|s| s.name())
                .collect();
            // The first waiting step and what it waits on.
            let done: Vec<bool> = steps.iter().map(StepTimes::done).collect();
            let waiting = self
                .plan
                .steps
                .iter()
                .find(|s| steps[s.id].start.is_none())
                .map(|s| {
                    let on: Vec<String> = self
                        .plan
                        .waiting_on(s.id, &done)
                        .into_iter()
                        .map(|d| self.plan.steps[d].name())
                        .collect();
                    format!("; next {} waits on {}", s.name(), on.join(", "))
                })
                .unwrap_or_default();
            b.set_message(format!("running: {}{waiting}", names.join(", ")));
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }

    /// The measured critical path of the steps done ([`super::critical`]).
    fn critical_path(&self) -> Vec<super::critical::Link> {
        let steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        let names: Vec<String> = self.plan.steps.iter().map(|s| s.name()).collect();
        let deps: Vec<Vec<usize>> = self.plan.steps.iter().map(|s| s.deps.clone()).collect();
        let spans: Vec<Option<(f64, f64)>> = steps
            .iter()
            .map(|t| match (t.start, t.end) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            })
            .collect();
        super::critical::measured(&names, &deps, &spans)
    }
}
