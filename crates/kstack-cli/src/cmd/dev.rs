//! `kstack dev up|down|status|kubeconfig`: drives hack/devcluster.sh.
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("kstack dev is being wired up")
}
