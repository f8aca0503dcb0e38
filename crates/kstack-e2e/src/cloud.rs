//! [`Cloud`]: a cloud's config directory deployed with the `kstack` binary into a namespace
//! of its own, for the deploy and lifecycle tests.
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, bail};
use kstack_engine::Cluster;
use kstack_engine::cluster::NAMESPACED_KINDS;
use kstack_kube::KubeCluster;
use kstack_model::labels;
use serde_json::Value;
use tokio::process::Command;

use crate::{TempNamespace, client};

/// Host-network services (Nova, Neutron, Open vSwitch agents) bind node ports, so only one
/// cloud per cluster can run them: only the whole-cloud test deploys them, the others leave
/// them out and can run in parallel.
pub const NO_HOST_NETWORK: &str = "enable_nova: \"no\"\nenable_neutron: \"no\"\nenable_openvswitch: \"no\"\nenable_placement: \"yes\"\n";

/// Globals that put a cloud on the dev cluster's real node, with the images `hack/images.sh`
/// built and imported there (`kstack.local/kolla/*:2025.1-debian-bookworm`): the node's role
/// label prefix (`$KSTACK_E2E_REAL_ROLE_PREFIX`, default `kstack.io/real-role-`, what
/// `kstack dev up` gives the real node beside simulated ones), its hostPath volume class, and
/// what the machine lacks: KVM (QEMU emulates), the OVS kernel module (userspace datapath)
/// and CAP_SYS_RESOURCE (QEMU keeps the limits it inherits).
pub fn real_node_globals() -> String {
    let prefix = std::env::var("KSTACK_E2E_REAL_ROLE_PREFIX")
        .unwrap_or_else(|_| labels::REAL_ROLE_LABEL_PREFIX.to_owned());
    format!(
        "kolla_base_distro: debian\ndocker_registry: kstack.local\ndocker_namespace: kolla\n\
         kstack_role_label_prefix: \"{prefix}\"\nkstack_storage_class: kstack-real-node\n\
         nova_compute_virt_type: qemu\novs_datapath: netdev\nqemu_max_files: 0\nqemu_max_processes: 0\n\
         neutron_external_interface: kstack-ext0\n"
    )
}

pub fn kstack_bin() -> anyhow::Result<PathBuf> {
    let path = match std::env::var_os("KSTACK_BIN") {
        Some(p) => PathBuf::from(p),
        // The test binary is <target>/<profile>/deps/deploy-<hash>; kstack is built into
        // <target>/<profile>/, wherever CARGO_TARGET_DIR puts <target>.
        None => std::env::current_exe()?
            .parent()
            .and_then(|deps| deps.parent())
            .map(|profile| profile.join("kstack"))
            .context("locating the target directory from the test binary")?,
    };
    if !path.exists() {
        bail!(
            "{} does not exist: run `cargo build --bin kstack` first (hack/test.sh does)",
            path.display()
        );
    }
    Ok(path)
}

/// A config directory (`kstack init` + `kstack genpwd`) deploying into a temp namespace, and
/// the `kstack` binary run on it.
pub struct Cloud {
    pub dir: tempfile::TempDir,
    pub kubeconfig: String,
    pub ns: TempNamespace,
    pub cluster: KubeCluster,
}

impl Cloud {
    /// A temp namespace and a config directory deploying into it, with `extra` globals.
    pub async fn new(prefix: &str, extra: &str) -> anyhow::Result<Cloud> {
        let client = client().await?;
        let ns = TempNamespace::new(&client, prefix).await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = std::env::var("KSTACK_E2E_KUBECONFIG")?;
        let cloud = Cloud {
            dir,
            kubeconfig,
            cluster: KubeCluster::new(client),
            ns,
        };
        cloud
            .run(&["init", cloud.dir.path().to_str().unwrap()])
            .await?;
        cloud.set_globals(extra)?;
        let out = cloud.run(&["genpwd"]).await?;
        anyhow::ensure!(
            out.status.success(),
            "genpwd: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(cloud)
    }

    pub fn set_globals(&self, extra: &str) -> anyhow::Result<()> {
        let path = self.dir.path().join("globals.yml");
        std::fs::write(
            &path,
            format!("kubernetes_namespace: \"{}\"\n{extra}\n", self.ns.name),
        )?;
        Ok(())
    }

    /// A second config directory for the same namespace (same passwords), with `extra`
    /// globals: another operator's idea of the same cloud.
    pub fn other_config(&self, extra: &str) -> anyhow::Result<tempfile::TempDir> {
        let other = tempfile::tempdir()?;
        std::fs::copy(
            self.dir.path().join("passwords.yml"),
            other.path().join("passwords.yml"),
        )?;
        std::fs::write(
            other.path().join("globals.yml"),
            format!("kubernetes_namespace: \"{}\"\n{extra}\n", self.ns.name),
        )?;
        Ok(other)
    }

    pub fn command(&self, args: &[&str]) -> anyhow::Result<Command> {
        self.command_in(self.dir.path(), args)
    }

    /// `kstack ARGS` on the config directory `dir`, against this cloud's cluster.
    pub fn command_in(&self, dir: &std::path::Path, args: &[&str]) -> anyhow::Result<Command> {
        let mut c = Command::new(kstack_bin()?);
        c.args(args)
            .env("KSTACK_CONFIG_DIR", dir)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null());
        Ok(c)
    }

    pub async fn run(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        Ok(self.command(args)?.output().await?)
    }

    /// `kstack deploy -o json`: exit code and the report.
    pub async fn deploy(&self) -> anyhow::Result<(i32, Value, String)> {
        self.deploy_with(&[]).await
    }

    /// `kstack deploy -o json EXTRA`: exit code and the report.
    pub async fn deploy_with(&self, extra: &[&str]) -> anyhow::Result<(i32, Value, String)> {
        let mut args = vec!["deploy", "-o", "json"];
        args.extend_from_slice(extra);
        let out = self.run(&args).await?;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let report: Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("deploy printed no report; stderr:\n{stderr}"))?;
        Ok((out.status.code().unwrap_or(-1), report, stderr))
    }

    /// Every kstack-owned object of the namespace, by kind.
    pub async fn objects(&self) -> anyhow::Result<Vec<Value>> {
        let mut all = Vec::new();
        let managed_by = format!("{}={}", labels::MANAGED_BY.0, labels::MANAGED_BY.1);
        for kind in NAMESPACED_KINDS {
            all.extend(self.cluster.list(kind, &self.ns.name, &managed_by).await?);
        }
        Ok(all)
    }

    pub async fn of_service(&self, service: &str) -> anyhow::Result<Vec<String>> {
        let mut out = Vec::new();
        for kind in NAMESPACED_KINDS {
            for o in self
                .cluster
                .list(
                    kind,
                    &self.ns.name,
                    &format!("{}={service}", labels::NAME_LABEL),
                )
                .await?
            {
                out.push(format!(
                    "{kind}/{}",
                    o["metadata"]["name"].as_str().unwrap_or("?")
                ));
            }
        }
        Ok(out)
    }

    pub async fn status(&self) -> anyhow::Result<Vec<Value>> {
        let out = self.run(&["status", "-o", "json"]).await?;
        anyhow::ensure!(
            out.status.success(),
            "status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(serde_json::from_slice(&out.stdout)?)
    }
}

/// The (service, task) a bootstrap Job runs, from its labels: how the tests count Jobs per task.
pub fn job_task(job: &Value) -> (String, String) {
    let l = &job["metadata"]["labels"];
    let label = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
    (label(labels::NAME_LABEL), label(labels::TASK_LABEL))
}
