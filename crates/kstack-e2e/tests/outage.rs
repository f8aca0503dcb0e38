//! A deploy rides out an API server outage: the local control plane's kube-apiserver is killed
//! (SIGKILL) in the middle of a deploy and started again 30 s later by `kstack dev up`, which
//! restarts only what is down, on the data etcd kept. The deploy finishes, each Job was
//! created once, every service is healthy and a second deploy has nothing to write.
//!
//! A test binary of its own: while the API server is down every other test would fail.
//! Needs `KSTACK_DEV_DIR` (and `KSTACK_DEV_PORT_BASE` if the cluster is not on the default
//! ports), as hack/test.sh exports them.
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use kstack_e2e::cloud::{Cloud, NO_HOST_NETWORK, job_task};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

const OUTAGE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_deploy_rides_out_the_api_server_killed_for_30_seconds() -> anyhow::Result<()> {
    let dev_dir = std::env::var("KSTACK_DEV_DIR").context(
        "KSTACK_DEV_DIR is not set: this test kills and restarts the local control plane's API \
         server, so it must know which cluster that is (hack/test.sh exports it)",
    )?;
    let pid_file = format!("{dev_dir}/pids/kube-apiserver");
    let extra = format!(
        "{NO_HOST_NETWORK}kstack_pod_labels:\n  keystone: {{kstack.io/dev-complete-delay: 3s, kstack.io/dev-ready-delay: 3s}}\n  glance-api: {{kstack.io/dev-ready-delay: 3s}}\n"
    );
    let cloud = Cloud::new("kstack-outage", &extra).await?;
    let mut child = cloud
        .command(&["deploy", "-o", "json"])?
        .env("KSTACK_LOG", "warn")
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdout = child.stdout.take().context("stdout")?;
    let report = tokio::spawn(async move {
        let mut s = String::new();
        stdout.read_to_string(&mut s).await.map(|_| s)
    });
    let mut lines = BufReader::new(child.stderr.take().context("stderr")?).lines();
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await? {
        seen.push(line.clone());
        if line.contains("start keystone: job") {
            break;
        }
    }
    anyhow::ensure!(
        seen.iter().any(|l| l.contains("start keystone: job")),
        "the deploy ended before keystone's Job:\n{}",
        seen.join("\n")
    );
    let rest = tokio::spawn(async move {
        let mut rest = Vec::new();
        while let Ok(Some(l)) = lines.next_line().await {
            rest.push(l);
        }
        rest
    });

    // The API server dies in the middle of the deploy, and stays away for 30 s.
    let pid = std::fs::read_to_string(&pid_file)
        .with_context(|| format!("reading {pid_file}"))?
        .trim()
        .to_owned();
    let killed = tokio::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .await?;
    anyhow::ensure!(killed.success(), "kill -9 {pid} failed");
    let down_at = tokio::time::Instant::now();
    tokio::time::sleep(OUTAGE).await;
    let up = tokio::process::Command::new("bash")
        .arg(kstack_e2e::hack_script("devcluster.sh"))
        .arg("up")
        .stdout(Stdio::null())
        .output()
        .await?;
    let up_err = String::from_utf8_lossy(&up.stderr);
    anyhow::ensure!(up.status.success(), "kstack dev up failed:\n{up_err}");
    assert!(
        up_err.contains("starting again what did not answer: kube-apiserver"),
        "{up_err}"
    );
    let outage = down_at.elapsed();

    let status = child.wait().await?;
    let stderr = rest.await?.join("\n");
    let report: Value = serde_json::from_str(&report.await??)
        .with_context(|| format!("no report on stdout; stderr:\n{stderr}"))?;
    assert_eq!(status.code(), Some(0), "deploy failed:\n{stderr}\n{report}");
    assert_eq!(report["succeeded"], true, "{report}");
    assert!(report["retries"].as_u64().unwrap_or(0) > 0, "{report}");
    eprintln!(
        "API server away for {:.0}s; the deploy retried {} calls and finished: {} steps, {} writes",
        outage.as_secs_f64(),
        report["retries"],
        report["steps"],
        report["writes"]
    );

    // Nothing lost, nothing twice: every workload healthy, one Job per task, each complete.
    // (Kubernetes runs a Job's pod at least once, not exactly once: a pod whose create the API
    // server stored just before it was killed, the reply lost, is created again by the Job
    // controller, and both may succeed; kstack's tasks are idempotent for that reason. What
    // kstack controls is that it makes one Job per task and waits for it to complete.)
    let objects = cloud.objects().await?;
    let mut per_task: BTreeMap<(String, String), u32> = BTreeMap::new();
    for o in objects.iter().filter(|o| o["kind"] == "Job") {
        *per_task.entry(job_task(o)).or_default() += 1;
        let name = &o["metadata"]["name"];
        assert!(
            o["status"]["succeeded"].as_u64().unwrap_or(0) >= 1,
            "{name}: {}",
            o["status"]
        );
        let complete = o["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Complete" && c["status"] == "True");
        assert!(complete, "{name} is not complete: {}", o["status"]);
    }
    assert!(!per_task.is_empty());
    assert!(per_task.values().all(|n| *n == 1), "{per_task:?}");
    // Every service healthy, within a bound: the controllers catch up once the API server is
    // back (the dev cluster's node grace period outlasts the outage, so no node is marked
    // NotReady for it).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let status = cloud.status().await?;
        if status.iter().all(|s| s["health"] == "healthy") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every service is healthy 180 s after the deploy: {status:?}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (code, again, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(again["api_requests"]["writes"], 0, "not converged: {again}");
    Ok(())
}
