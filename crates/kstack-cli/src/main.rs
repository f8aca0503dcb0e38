//! The `kstack` binary: parses the command line and hands each command to its module.
//!
//! Exit codes, for every command: [`exit::Exit`] (0 success, 1 failed, 2 bad usage or bad
//! input, 3 a deploy or rollback step failed, 4 a verify check failed, 75 the deploy lock is
//! held, 130 interrupted), listed in README.md and at the end of `kstack --help`. Commands
//! return [`cmd::InputError`] (or [`exit::Exit::BadInput`] directly) for bad input files:
//! globals.yml, passwords.yml, catalog.yml, a `--catalog` file; for `kstack inventory serve`,
//! a tokens file it refuses (mode, short or duplicate token), TLS files that do not load, or
//! plain HTTP on a non-loopback address.
use std::process::ExitCode;

use clap::Parser;

mod cmd;
mod exit;

/// Deploy and run the lifecycle of containerized OpenStack (Kolla images) on Kubernetes.
#[derive(Debug, Parser)]
#[command(
    name = "kstack",
    version,
    propagate_version = true,
    after_help = exit::short_help(),
    after_long_help = exit::long_help()
)]
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
                exit::Exit::BadInput.into()
            } else {
                exit::Exit::Failed.into()
            }
        }
    }
}
