//! The `kstack` binary: parses the command line and hands each command to its module.
//!
//! Exit codes, for every command:
//! - 0: success;
//! - 1: the command failed for another reason (IO, cluster, network; the message says why);
//! - 2: bad usage (clap) or bad input files: globals.yml, passwords.yml, catalog.yml, a
//!   `--catalog` file; for `kstack inventory serve`, a tokens file it refuses (mode, short or
//!   duplicate token), TLS files that do not load, or plain HTTP on a non-loopback address.
//!   Commands return [`cmd::InputError`] (or exit code 2 directly) for those;
//! - 3: `kstack deploy`: a step failed (a Job failed, a service did not become healthy in time);
//!   the report on stderr names the service, the condition, what the pods say and what did not
//!   start. `kstack deploy --target compose`: the files were written but no Docker engine
//!   answered or it lacks an image (nothing was started), or a container did not become
//!   healthy in time or a one-shot task failed (the report names it, with its last log lines);
//!   A deploy whose API server stayed unreachable for longer than `--api-outage` exits 3 too,
//!   its report listing what was done and what was not started;
//! - 4: `kstack verify`: a check of the cloud failed (the report names the step, the call, its
//!   HTTP status and message), or something it created could not be deleted. `kstack deploy
//!   --no-wait`, `kstack rollback --no-wait`: another writer holds the cloud's deploy lock (the
//!   message names it);
//! - 130: `kstack verify`, `kstack deploy` or `kstack rollback` was interrupted by Ctrl-C
//!   (verify after deleting what it created; deploy and rollback after releasing the lock).
use std::process::ExitCode;

use clap::Parser;

mod cmd;

/// Deploy and run the lifecycle of containerized OpenStack (Kolla images) on Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "kstack", version, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: cmd::config::GlobalArgs,
    #[command(subcommand)]
    command: cmd::Command,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KSTACK_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let mut cli = Cli::parse();
    cli.command.set_globals(&cli.global);
    match cmd::run(cli.command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("kstack: {err:#}");
            if err.downcast_ref::<cmd::InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
