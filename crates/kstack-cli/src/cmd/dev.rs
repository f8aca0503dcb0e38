//! `kstack dev up|down|status|kubeconfig`: the local control plane (real etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler; kwok nodes). The building and process management
//! live in `hack/devcluster.sh`, which this command runs; its stdout (the kubeconfig path) is
//! passed through and its diagnostics go to stderr.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack dev up\n  kstack dev up --nodes control=3,compute=100\n  export KUBECONFIG=$(kstack dev kubeconfig)\n  kstack dev down"
)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Build (first run only) and start the control plane and simulated nodes; prints the kubeconfig path.
    Up {
        /// Simulated nodes per role, e.g. control=3,compute=3,network=1,storage=1 (at most 1000 in all).
        #[arg(long, default_value = "control=3,compute=3,network=1,storage=1")]
        nodes: String,
    },
    /// Stop every process of the control plane and drop its data.
    Down,
    /// Show which processes run (exit code 3 when any is stopped).
    Status,
    /// Print the kubeconfig path of the running control plane.
    Kubeconfig,
}

fn script() -> PathBuf {
    match std::env::var_os("KSTACK_HACK_DIR") {
        Some(dir) => PathBuf::from(dir).join("devcluster.sh"),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../hack/devcluster.sh"
        )),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let script = script();
    anyhow::ensure!(
        script.exists(),
        "{} is missing: run kstack from its source checkout or set KSTACK_HACK_DIR to the folder holding devcluster.sh",
        script.display()
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&script);
    match args.action {
        Action::Up { nodes } => cmd.args(["up", "--nodes", &nodes]),
        Action::Down => cmd.arg("down"),
        Action::Status => cmd.arg("status"),
        Action::Kubeconfig => cmd.arg("kubeconfig"),
    };
    let status = cmd
        .status()
        .with_context(|| format!("could not run {}", script.display()))?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}
