//! `kstack dev up|down|status|kubeconfig|images|import`: the local cluster (real etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler; kwok nodes; one real node with
//! containerd, kubelet, kube-proxy and CoreDNS) and the cloud's images. The building and process
//! management live in `hack/devcluster.sh`, `hack/realnode.sh` and `hack/images.sh`, which this
//! command runs; their stdout (the kubeconfig path, the image directory) is passed through and
//! their diagnostics go to stderr. `kstack dev` exits with the script's status
//! ([`crate::exit::script_status`]): it is the one command outside kstack's exit code table.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack dev up\n  kstack dev up --nodes control=3,compute=100 --real-nodes 0\n  kstack dev up --nodes none     # the real node only, carrying every role\n  kstack dev up --nodes none --real-nodes 2   # two real nodes, two compute hosts\n  kstack dev import \"$(kstack dev images | tail -n 1)\"\n  export KUBECONFIG=$(kstack dev kubeconfig)\n  kstack dev down            # keeps the cluster's data for the next `up`\n  kstack dev down --purge    # deletes it"
)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Build (first run only) and start the control plane, simulated nodes and the real node;
    /// prints the kubeconfig path. Components that answer their health check are left alone;
    /// the cluster's data from an earlier run is reused.
    Up {
        /// Simulated nodes per role, e.g. control=3,compute=3,network=1,storage=1 (at most 1000
        /// in all), or `none`. Default: what the cluster had when its data is kept, else
        /// control=3,compute=3,network=1,storage=1.
        #[arg(long)]
        nodes: Option<String>,
        /// Real nodes (0 to 3): containerd, kubelet and kube-proxy on this machine (needs root),
        /// each node after the first in network and mount namespaces of its own. Alone, node 1
        /// carries every role; with 2, node 2 is a second compute node; with 3, node 1 is
        /// control and storage, node 2 network and compute, node 3 compute. Beside simulated
        /// nodes their role labels are `kstack.io/real-role-*`; alone, the usual role labels.
        /// A running cluster grows or shrinks to the count given. Default: what the cluster had
        /// when its data is kept, else 1.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
        real_nodes: Option<u8>,
    },
    /// Build the cloud's images to Kolla's contract from Debian packages and PyPI (cached by a
    /// hash of their inputs); prints the directory holding the image archive.
    Images {
        /// The OpenStack release of the images: 2025.1 (the default) or 2024.2.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(kstack_model::release::names()))]
        release: Option<String>,
        /// Tag of the images (default <release>-debian-bookworm).
        #[arg(long)]
        tag: Option<String>,
    },
    /// Import image archives (directories made by `kstack dev images`) into every real node.
    Import {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
    /// Stop every process of the control plane and the real node. The cluster's data (etcd,
    /// the real node's volumes) is kept for the next `up` unless `--purge` is given.
    Down {
        /// Delete the cluster's data too: the next `up` starts an empty cluster.
        #[arg(long)]
        purge: bool,
    },
    /// Show which processes run and answer their health check (exit code 3 when any does not).
    Status,
    /// Print the kubeconfig path of the running control plane.
    Kubeconfig,
}

/// The `hack/` script `name`: from `KSTACK_HACK_DIR`, else from the checkout `cargo run` runs
/// in (its `CARGO_MANIFEST_DIR` at run time: a shared target directory's binary may have been
/// compiled in another checkout, since gone), else from the checkout it was compiled in.
fn script(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("KSTACK_HACK_DIR") {
        return PathBuf::from(dir).join(name);
    }
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    crate_dir.join("../../hack").join(name)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let script = script(match args.action {
        Action::Images { .. } => "images.sh",
        _ => "devcluster.sh",
    });
    anyhow::ensure!(
        script.exists(),
        "{} is missing: run kstack from its source checkout or set KSTACK_HACK_DIR to its hack/ folder",
        script.display()
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&script);
    match args.action {
        Action::Up { nodes, real_nodes } => {
            // Only what was given: a cluster whose data is kept comes back with the nodes it had.
            cmd.arg("up");
            if let Some(nodes) = nodes {
                cmd.args(["--nodes", &nodes]);
            }
            if let Some(n) = real_nodes {
                cmd.args(["--real-nodes", &n.to_string()]);
            }
            &mut cmd
        }
        Action::Images { release, tag } => {
            if let Some(release) = release {
                cmd.args(["--release", &release]);
            }
            if let Some(tag) = tag {
                cmd.args(["--tag", &tag]);
            }
            &mut cmd
        }
        Action::Import { dirs } => cmd.arg("import").args(dirs),
        Action::Down { purge: false } => cmd.arg("down"),
        Action::Down { purge: true } => cmd.args(["down", "--purge"]),
        Action::Status => cmd.arg("status"),
        Action::Kubeconfig => cmd.arg("kubeconfig"),
    };
    let status = cmd
        .status()
        .with_context(|| format!("could not run {}", script.display()))?;
    Ok(crate::exit::script_status(status))
}
