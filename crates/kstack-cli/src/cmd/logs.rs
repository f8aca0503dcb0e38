//! `kstack logs SERVICE`: what every pod and container of a service writes, through the
//! Kubernetes API, each line prefixed with its pod and container and with every passwords.yml
//! value replaced by `***` (a service may log a connection URL).
//!
//! The services write their logs to the container's output (oslo's `use_stderr`, Apache's
//! `ErrorLog` to stderr), so that is where everything is; `kubectl logs` sees the same lines.
//!
//! Exit codes: 0 done (or interrupted with Ctrl-C while following); 1 the cluster cannot be
//! reached; 2 invalid config or a service the catalog does not have.
use std::io::Write as _;

use anyhow::Context as _;
use futures::StreamExt as _;
use kstack_model::labels::{BOOTSTRAP, COMPONENT_LABEL, NAME_LABEL, SERVER};
use kstack_verify::{Password, Redactor};

use crate::exit::Exit;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack logs keystone\n  kstack logs nova-compute -f\n  kstack logs glance-api --since 10m --tail 100\n  kstack logs keystone --jobs   # the bootstrap Jobs' pods (db sync, fernet setup, ...)\n  kstack logs keystone --central --since 1d   # from the central log store, replaced pods too\n\nEach line is `POD/CONTAINER: LINE`; passwords.yml values are shown as ***.\nFollowing also reads the pods that start later (a rollout, a replaced pod) and containers that restart, each from its first line, until Ctrl-C.\n\nExit codes: 0 done, 1 the cluster cannot be reached, 2 invalid config or unknown service."
)]
pub struct Args {
    #[command(flatten)]
    pub target: super::deploy::Target,
    /// The service (see `kstack services`).
    pub service: String,
    /// Keep printing lines as they are written, also of pods and containers that start later
    /// (Ctrl-C stops).
    #[arg(short, long)]
    pub follow: bool,
    /// Only lines newer than this: seconds, or a number with s, m, h or d (e.g. 10m).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub since: Option<i64>,
    /// Only the last N lines of each container.
    #[arg(long, value_name = "N")]
    pub tail: Option<i64>,
    /// The pods of the service's bootstrap Jobs instead of its running pods.
    #[arg(long)]
    pub jobs: bool,
    /// Read the central log store (`enable_central_logging`) instead of the running pods: the
    /// lines of every pod the service has had, those gone included, oldest first (the newest
    /// `--tail` lines, 1000 unless given).
    #[arg(long, conflicts_with_all = ["follow", "jobs"])]
    pub central: bool,
}

/// `90`, `90s`, `10m`, `2h`, `1d` as seconds.
fn parse_age(s: &str) -> Result<i64, String> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, "s"),
    };
    let n: i64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not an age: write seconds or e.g. 30s, 10m, 2h, 1d"))?;
    let unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{s}`: the unit is s, m, h or d")),
    };
    Ok(n.saturating_mul(unit).max(1))
}

pub fn run(args: Args) -> anyhow::Result<Exit> {
    let dir = &args.target.config.config_dir;
    let Some(config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing done"));
    };
    if !config.catalog.services.contains_key(&args.service) {
        eprintln!(
            "error: `{}` is not a service of the catalog (see `kstack services`)",
            args.service
        );
        return Ok(Exit::BadInput);
    }
    let redactor = Redactor::new(
        kstack_render::files::cloud_secret_values(&config)
            .into_iter()
            .map(Password::new),
    );
    let namespace = config.globals.kubernetes_namespace.clone();
    let component = if args.jobs { BOOTSTRAP } else { SERVER };
    let selector = format!(
        "{NAME_LABEL}={},{COMPONENT_LABEL}={component}",
        args.service
    );
    let selection = kstack_kube::LogSelection {
        follow: args.follow,
        since_seconds: args.since,
        tail_lines: args.tail,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    if args.central {
        let store_port =
            kstack_render::files::port(&config.catalog, kstack_kube::logs::STORE_SERVICE, "http")?;
        return runtime.block_on(async {
            let client = kstack_kube::client(args.target.kubeconfig.as_deref()).await?;
            let lines = kstack_kube::stored_lines(
                &client,
                &namespace,
                store_port,
                &args.service,
                args.since,
                args.tail.unwrap_or(1000),
            )
            .await?;
            let mut out = std::io::stdout().lock();
            for l in lines {
                let text = redactor.redact(&l.line);
                match writeln!(out, "{} {}/{}: {text}", l.time, l.pod, l.container) {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
                    other => other.context("writing to stdout")?,
                }
            }
            Ok(Exit::Success)
        });
    }
    runtime.block_on(async {
        let client = kstack_kube::client(args.target.kubeconfig.as_deref()).await?;
        let (containers, mut lines) =
            kstack_kube::log_lines(&client, &namespace, &selector, &selection).await?;
        if containers == 0 {
            eprintln!(
                "no {} pods of {} in namespace {namespace}{}",
                if args.jobs {
                    "bootstrap Job"
                } else {
                    "running"
                },
                args.service,
                if config.enabled.contains(&args.service) {
                    ""
                } else {
                    " (it is not enabled in globals.yml)"
                }
            );
            return Ok(Exit::Success);
        }
        let mut out = std::io::stdout().lock();
        loop {
            let next = tokio::select! {
                l = lines.next() => l,
                _ = tokio::signal::ctrl_c() => None,
            };
            let Some(l) = next else { break };
            let text = redactor.redact(&l.line);
            match writeln!(out, "{}/{}: {text}", l.pod, l.container) {
                // `| head` closed the pipe: done.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
                other => other.context("writing to stdout")?,
            }
            if args.follow {
                out.flush().ok();
            }
        }
        Ok(Exit::Success)
    })
}

#[cfg(test)]
mod tests {
    use super::parse_age;

    #[test]
    fn ages_in_seconds_minutes_hours_and_days() {
        assert_eq!(parse_age("90"), Ok(90));
        assert_eq!(parse_age("30s"), Ok(30));
        assert_eq!(parse_age("10m"), Ok(600));
        assert_eq!(parse_age("2h"), Ok(7200));
        assert_eq!(parse_age("1d"), Ok(86_400));
        assert!(parse_age("10 minutes").is_err());
        assert!(parse_age("m").is_err());
        assert!(parse_age("").is_err());
    }
}
