//! The single-node target on a real Docker engine: the default cloud deployed with
//! `kstack deploy --target compose`, checked with `kstack verify --target compose`; then one
//! service's override file changes, a second deploy restarts only that service's containers,
//! and verify passes again.
//!
//! Runs when KSTACK_E2E_DOCKER=1, with the engine of `hack/docker.sh up` (its `env` gives
//! DOCKER_HOST, DOCKER_CONFIG and KSTACK_NODE_ADDRESS); hack/test.sh runs it beside the
//! simulated-node tests and before the real node's, since both clouds would use the node's
//! ports. The globals are
//! the real node's: QEMU's TCG and Open vSwitch's userspace datapath, and no limits on QEMU's
//! files and processes, which these VMs (without CAP_SYS_RESOURCE) cannot set.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use anyhow::Context as _;
use kstack_e2e::cloud::kstack_bin;
use tokio::process::Command;

/// The Compose project kstack renders (`name:` of compose.yaml).
const PROJECT: &str = "openstack";

#[tokio::test]
async fn the_single_node_cloud_runs_on_docker_passes_verify_and_reconfigures_one_service()
-> anyhow::Result<()> {
    if std::env::var_os("KSTACK_E2E_DOCKER").is_none() {
        eprintln!(
            "skipped: KSTACK_E2E_DOCKER is not set (hack/test.sh sets it after `hack/docker.sh up`)"
        );
        return Ok(());
    }
    let address = std::env::var("KSTACK_NODE_ADDRESS")
        .context("KSTACK_NODE_ADDRESS (from `hack/docker.sh env`)")?;
    // An empty engine: no container or volume of an earlier run.
    docker(&["compose", "-p", PROJECT, "down", "-v", "--remove-orphans"]).await?;

    let dir = tempfile::tempdir()?;
    let config = dir.path();
    kstack(config, &["init", config.to_str().context("path")?]).await?;
    std::fs::write(
        config.join("globals.yml"),
        format!(
            "kolla_base_distro: debian\ndocker_registry: kstack.local\ndocker_namespace: kolla\n\
             kolla_internal_vip_address: \"{address}\"\n\
             nova_compute_virt_type: qemu\novs_datapath: netdev\n\
             qemu_max_files: 0\nqemu_max_processes: 0\n"
        ),
    )?;
    kstack(config, &["genpwd"]).await?;
    let compose_dir = config.join("compose");
    let compose_dir_arg = compose_dir.to_str().context("path")?;
    let deploy_args = [
        "deploy",
        "--target",
        "compose",
        "--compose-dir",
        compose_dir_arg,
    ];

    // An image the engine lacks: a clear message naming it, and nothing started.
    let missing = tempfile::tempdir()?;
    std::fs::copy(
        config.join("passwords.yml"),
        missing.path().join("passwords.yml"),
    )?;
    std::fs::write(
        missing.path().join("globals.yml"),
        format!(
            "{}openstack_tag: no-such-tag\n",
            std::fs::read_to_string(config.join("globals.yml"))?
        ),
    )?;
    let out = Command::new(kstack_bin()?)
        .args(["deploy", "--target", "compose"])
        .env("KSTACK_CONFIG_DIR", missing.path())
        .stdin(Stdio::null())
        .output()
        .await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("lacks") && stderr.contains("kstack.local/kolla/keystone:no-such-tag"),
        "{stderr}"
    );
    let running = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label=com.docker.compose.project={PROJECT}"),
    ])
    .await?;
    assert_eq!(
        running.trim(),
        "",
        "containers were created for a cloud with a missing image"
    );

    let started = Instant::now();
    kstack(config, &deploy_args).await?;
    let deployed = started.elapsed().as_secs_f64();
    let memory = memory_mib().await?;
    eprintln!(
        "single node on Docker: the default cloud healthy {deployed:.1} s after `kstack deploy` on an empty engine; containers use {memory:.0} MiB"
    );

    // Every listening socket of the cloud is on the node's address (or the loopback).
    let wildcard = wildcard_listeners().await?;
    assert!(
        wildcard.is_empty(),
        "listening on every address instead of {address}: {wildcard:?}"
    );

    let started = Instant::now();
    kstack(config, &["verify", "--target", "compose"]).await?;
    eprintln!(
        "kstack verify on the single node: passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Reconfigure: one override file of glance changes; only glance-api's container restarts.
    let before = servers().await?;
    let overrides = config.join("config/glance");
    std::fs::create_dir_all(&overrides)?;
    std::fs::write(
        overrides.join("glance-api.conf"),
        "[DEFAULT]\nimage_size_cap = 2147483648\n",
    )?;
    let started = Instant::now();
    kstack(config, &deploy_args).await?;
    let reconfigured = started.elapsed().as_secs_f64();
    let after = servers().await?;
    let restarted: Vec<&String> = after
        .iter()
        .filter(|(name, started)| before.get(*name) != Some(started))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        restarted,
        [&format!("{PROJECT}-glance-api-1")],
        "the containers restarted by the reconfigure"
    );
    let conf = docker(&[
        "exec",
        &format!("{PROJECT}-glance-api-1"),
        "cat",
        "/etc/glance/glance-api.conf",
    ])
    .await?;
    assert!(
        conf.contains("image_size_cap = 2147483648"),
        "the override is not in the running glance-api's config"
    );
    eprintln!(
        "reconfigure of glance-api on the single node: {reconfigured:.1} s, {} of {} containers restarted",
        restarted.len(),
        after.len()
    );
    kstack(config, &["verify", "--target", "compose"]).await?;

    docker(&["compose", "-p", PROJECT, "down", "-v", "--remove-orphans"]).await?;
    Ok(())
}

/// `kstack ARGS` on the config directory; fails with its output unless it exits 0.
async fn kstack(config: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(kstack_bin()?)
        .args(args)
        .env("KSTACK_CONFIG_DIR", config)
        .stdin(Stdio::null())
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        out.status.success(),
        "kstack {} exited {:?}:\n{stdout}\n{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

async fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .context("running docker")?;
    anyhow::ensure!(
        out.status.success(),
        "docker {} exited {:?}: {}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The long-running containers of the project, by name, with the time each started.
async fn servers() -> anyhow::Result<BTreeMap<String, String>> {
    let names = docker(&[
        "ps",
        "--filter",
        &format!("label=com.docker.compose.project={PROJECT}"),
        "--filter",
        "label=app.kubernetes.io/component=server",
        "--format",
        "{{.Names}}",
    ])
    .await?;
    let mut out = BTreeMap::new();
    for name in names.lines().filter(|l| !l.is_empty()) {
        let started = docker(&["inspect", "-f", "{{.State.StartedAt}}", name]).await?;
        out.insert(name.to_owned(), started.trim().to_owned());
    }
    anyhow::ensure!(!out.is_empty(), "no container of project {PROJECT} runs");
    Ok(out)
}

/// The memory the project's containers use, in MiB (`docker stats`).
async fn memory_mib() -> anyhow::Result<f64> {
    let stats = docker(&["stats", "--no-stream", "--format", "{{.MemUsage}}"]).await?;
    let mut total = 0.0;
    for line in stats.lines() {
        let used = line.split('/').next().unwrap_or_default().trim();
        let (number, unit) = used.split_at(
            used.find(|c: char| c.is_ascii_alphabetic())
                .with_context(|| format!("memory usage {used:?}"))?,
        );
        let n: f64 = number
            .parse()
            .with_context(|| format!("memory usage {used:?}"))?;
        total += match unit {
            "B" => n / 1048576.0,
            "KiB" | "kB" => n / 1024.0,
            "MiB" | "MB" => n,
            "GiB" | "GB" => n * 1024.0,
            other => anyhow::bail!("memory unit {other:?} in {line:?}"),
        };
    }
    Ok(total)
}

/// TCP listeners on every address (0.0.0.0 or [::]) that belong to the cloud's containers:
/// `ss` on the host, whose network the containers share; a socket belongs to the cloud when its
/// process runs in a container of the project.
async fn wildcard_listeners() -> anyhow::Result<Vec<String>> {
    let pids: Vec<String> = {
        let ids = docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={PROJECT}"),
        ])
        .await?;
        let mut pids = Vec::new();
        for id in ids.lines().filter(|l| !l.is_empty()) {
            pids.push(docker(&["inspect", "-f", "{{.State.Pid}}", id]).await?);
        }
        pids.into_iter().map(|p| p.trim().to_owned()).collect()
    };
    // The cgroups of the containers' first processes; their children share them.
    let cgroups: Vec<String> = pids
        .iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/cgroup")).ok())
        .collect();
    let out = Command::new("ss").args(["-ltnpH"]).output().await?;
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(local) = fields.get(3) else { continue };
        if !(local.starts_with("0.0.0.0:") || local.starts_with("[::]:") || local.starts_with("*:"))
        {
            continue;
        }
        // users:(("epmd",pid=123,fd=3))
        let pid = line
            .split("pid=")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .unwrap_or_default();
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        if !cgroup.is_empty() && cgroups.contains(&cgroup) {
            found.push(line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    Ok(found)
}
