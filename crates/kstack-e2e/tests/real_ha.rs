//! Replicated infrastructure on the dev cluster's real node: three MariaDB servers in one
//! Galera cluster, three RabbitMQ nodes in one cluster, two memcached and two keystone, in real
//! containers of the images `hack/images.sh` built, with glance and nova. A row written through
//! one server is there at once on another. Then, while a user
//! issues tokens, creates and lists images and lists servers, one MariaDB and one RabbitMQ pod
//! are deleted: no request fails and both rejoin, and the MariaDB server, whose data
//! directory was last upgraded by an older MariaDB, upgrades its system tables. Then one
//! MariaDB server stops answering and falls behind, and every server is killed at once (a power cut): the servers find the most
//! advanced of them, it starts the cluster again, the others join, and no committed row is
//! lost. Keystone's keys rotate every minute throughout,
//! and tokens of either keystone replica validate on the other. Needs what `real_cloud.rs` needs (hack/test.sh provides it) and runs on the node's
//! own host, as that test does.
use std::time::Duration;

use anyhow::Context;
use kstack_e2e::client;
use kstack_e2e::cloud::{Cloud, real_node_globals};
use kstack_k8s::api::apps::v1::StatefulSet;
use kstack_k8s::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, LogParams};
use serde_json::Value;

mod support;
use support::{
    Apis, LoadSwitch, admin_password, admin_token, password, processes, real_node, reclaim_volumes,
    run_in_pod, user_load,
};

/// On top of the node globals: the infrastructure replicated, keystone twice, glance and nova
/// for the user's images and servers, and no network, orchestration or dashboard.
/// Keystone's keys rotate every minute (tokens live 30 min), so the whole test runs across
/// rotations.
const HA_CLOUD: &str = "kstack_timeouts: {default: 900}\n\
kstack_replicas: {mariadb: 3, rabbitmq: 3, memcached: 2, keystone: 2}\n\
fernet_token_expiry: 1800\nfernet_token_allow_expired_window: 0\nfernet_key_rotation_interval: 60\n\
enable_neutron: \"no\"\n\
enable_horizon: \"no\"\nenable_heat: \"no\"\n";

/// An older MariaDB release, as its mariadb-upgrade records itself in a data directory.
const OLDER_MARIADB: &str = "10.6.22-MariaDB";

/// The MariaDB version that last upgraded a server's system tables (its first install's own,
/// or mariadb-upgrade's since), as its data directory records it.
async fn upgrade_record(pods: &Api<Pod>, pod: &str) -> anyhow::Result<String> {
    let text = run_in_pod(
        pods,
        pod,
        "mariadbd",
        &["cat", "/var/lib/mysql/mysql_upgrade_info"],
        &[],
        "",
    )
    .await?;
    Ok(text.trim().to_owned())
}

#[tokio::test]
async fn replicated_infrastructure_forms_loses_a_member_without_a_failed_request_and_recovers_from_a_power_cut()
-> anyhow::Result<()> {
    let client = client().await?;
    real_node(&client).await?;
    reclaim_volumes(&client).await?;

    let cloud = Cloud::new("kstack-ha", &format!("{}{HA_CLOUD}", real_node_globals())).await?;
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "deploy failed: {report}\n{stderr}");
    eprintln!(
        "deploy of the replicated infrastructure on the real node: {} s",
        report["seconds"]
    );
    let ns = cloud.ns.name.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // Galera: one server started the cluster, the two others joined it, all three synced.
    let logs = service_logs(&pods, "mariadb").await?;
    let started: Vec<&String> = logs
        .iter()
        .filter(|(_, l)| l.contains("never part of a cluster: starting a new one"))
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        started,
        ["mariadb-0"],
        "exactly the initialized server starts the cluster"
    );
    for (pod, log) in &logs {
        assert!(
            log.contains("Synchronized with group, ready for connections"),
            "{pod} never synced:\n{}",
            tail(log)
        );
    }
    assert!(
        logs.values().any(|l| l.contains("members(3):")),
        "no server saw a view of three members"
    );
    for pod in ["mariadb-1", "mariadb-2"] {
        assert!(
            logs[pod].contains("joining the running cluster through"),
            "{pod} did not join:\n{}",
            tail(&logs[pod])
        );
    }

    // RabbitMQ: one cluster of three running nodes, as its management API lists them.
    let rabbit_nodes = rabbitmq_nodes(&cloud, &pods).await?;
    assert_eq!(
        rabbit_nodes,
        (0..3)
            .map(|i| format!("rabbit@rabbitmq-{i}.rabbitmq-peers.{ns}.svc"))
            .collect::<Vec<_>>(),
        "the running RabbitMQ nodes"
    );
    eprintln!("galera: 3 servers synced in one cluster; rabbitmq: 3 running nodes in one cluster");

    // Clients reach any server: a row one server committed is there at once on another (glance
    // reads back the image it has just created on a second connection of its pool).
    let (missed, rounds) = causal_reads(&cloud, &pods, 2000).await?;
    assert_eq!(
        missed, 0,
        "{missed} of {rounds} rows written through mariadb-0 were missing from mariadb-1 right after"
    );
    eprintln!(
        "galera: {rounds} rows written through mariadb-0, each read at once through mariadb-1: 0 missing"
    );

    let apis = Apis::of(&client, &ns).await?;
    anyhow::ensure!(apis.nova.is_some(), "the cloud has nova-api");
    let keystone = apis.keystone.clone();
    let password = admin_password(&cloud)?;
    // Issued now: the keys rotate every minute from here on.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let first_token = admin_token(&http, &keystone, &password).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    // kstack made keys 0 (staged) and 1 (primary) early in the deploy; rotations since then
    // promoted the staged key each time, so the ids run from 0 to the primary without a gap.
    let keys_at_deploy = key_ids(&secrets).await?;
    let primary_at_deploy = *keys_at_deploy.last().context("no key")?;
    assert_eq!(
        keys_at_deploy,
        (0..=primary_at_deploy).collect::<Vec<_>>(),
        "the keys after the deploy"
    );

    // mariadb-1's data directory as an older MariaDB left it (MariaDB's record of the version
    // that last upgraded its system tables): its new pod upgrades them, as the next release's
    // server would in a rolling upgrade, while the cluster serves.
    let installed = upgrade_record(&pods, "mariadb-0").await?;
    run_in_pod(
        &pods,
        "mariadb-1",
        "mariadbd",
        &[
            "su",
            "-s",
            "/bin/sh",
            "mysql",
            "-c",
            &format!("printf %s {OLDER_MARIADB} >/var/lib/mysql/mysql_upgrade_info"),
        ],
        &[],
        "",
    )
    .await?;

    // A member of each cluster goes away (a node drain would do the same) while a user works.
    let stop = LoadSwitch::new();
    let load = tokio::spawn(user_load(apis, password.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = std::time::Instant::now();
    let mut replaced = Vec::new();
    for pod in ["mariadb-1", "rabbitmq-1"] {
        let uid = pods.get(pod).await?.metadata.uid.context("pod UID")?;
        pods.delete(pod, &DeleteParams::default()).await?;
        replaced.push((pod, uid));
    }
    // Each pod's own time, to tell which of them a slow replacement waited for.
    let each = futures::future::try_join_all(replaced.iter().map(|(pod, uid)| {
        let pods = &pods;
        async move {
            let restarted = wait_replaced(pods, pod, uid, Duration::from_secs(600)).await?;
            let ready = started.elapsed().as_secs_f64();
            anyhow::Ok(format!("{pod} {ready:.1} s, {restarted} restarts"))
        }
    }))
    .await?
    .join(", ");
    for sts in ["mariadb", "rabbitmq"] {
        wait_ready(&client, &ns, sts, 3, Duration::from_secs(600)).await?;
    }
    let rejoined = started.elapsed().as_secs_f64();
    // The new mariadb-1 upgrades its system tables once it is in the cluster, under the load.
    let upgraded = loop {
        let log = service_logs(&pods, "mariadb")
            .await?
            .remove("mariadb-1")
            .unwrap_or_default();
        if let Some(line) = log
            .lines()
            .find(|l| l.contains("kstack-mariadb-start: mariadb-upgrade"))
        {
            break line.to_owned();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "mariadb-1 never ran or ended mariadb-upgrade:\n{}",
            tail(&log)
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let upgraded = upgraded
        .split_once("kstack-mariadb-start: ")
        .map_or(upgraded.as_str(), |(_, said)| said)
        .to_owned();
    assert!(
        upgraded.starts_with("mariadb-upgrade done in ")
            && upgraded.ends_with(&format!(" s: {installed}")),
        "mariadb-1's system tables, last upgraded by {OLDER_MARIADB}: {upgraded}"
    );
    assert_eq!(
        upgrade_record(&pods, "mariadb-1").await?,
        installed,
        "mariadb-1's record after mariadb-upgrade"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.stop();
    let load = load.await?;
    if !load.failures.is_empty() {
        // What the APIs logged about it, before the test's namespace goes away.
        for service in ["glance-api", "keystone", "nova-api"] {
            eprintln!("{}", error_report(&pods, service).await);
        }
    }
    load.assert_clean("while a MariaDB and a RabbitMQ pod were replaced");
    let logs = service_logs(&pods, "mariadb").await?;
    assert!(
        logs["mariadb-1"].contains("joining the running cluster through"),
        "the new mariadb-1 did not join the running cluster:\n{}",
        tail(&logs["mariadb-1"])
    );
    assert_eq!(rabbitmq_nodes(&cloud, &pods).await?.len(), 3);
    eprintln!(
        "a MariaDB and a RabbitMQ pod replaced: both back in {rejoined:.1} s ({each}); mariadb-1's system tables, last upgraded by {OLDER_MARIADB}: {upgraded}; {} rounds of token issue, image create and delete, image list and server list, 0 failed",
        load.rounds
    );

    // A committed row, then a power cut of every MariaDB server at once.
    let token = admin_token(&http, &keystone, &password).await?;
    let project = format!("ha-{}", std::process::id());
    let resp = http
        .post(format!("{keystone}/v3/projects"))
        .header("x-auth-token", &token)
        .json(&serde_json::json!({"project": {"name": project, "domain_id": "default"}}))
        .send()
        .await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "creating project {project}: HTTP {}",
        resp.status()
    );
    // mariadb-2 stops answering first: the other two go on without it (the services' writes
    // go on too), so at the cut it is behind them and must not be the one to start the cluster.
    let stopped = signal_servers(&pods, "mariadb", "mariadbd", "STOP", Some("mariadb-2")).await?;
    assert_eq!(
        stopped, 1,
        "stopped {stopped} mariadbd processes in mariadb-2, not 1"
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    let restarts_before = restarts(&pods, "mariadb").await?;
    let killed = signal_servers(&pods, "mariadb", "mariadbd", "KILL", None).await?;
    assert_eq!(killed, 3, "killed {killed} mariadbd processes, not 3");
    let started = std::time::Instant::now();
    // The kubelet restarts each container; ready again means synced in a primary component.
    loop {
        let now = restarts(&pods, "mariadb").await?;
        if restarts_before
            .iter()
            .all(|(pod, n)| now.get(pod).is_some_and(|m| m > n))
        {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(120),
            "not every server restarted: before {restarts_before:?}, now {now:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if let Err(e) = wait_ready(&client, &ns, "mariadb", 3, Duration::from_secs(600)).await {
        anyhow::bail!("{e}\n{}", pod_report(&pods, "mariadb").await);
    }
    let recovered = started.elapsed().as_secs_f64();
    let logs = service_logs(&pods, "mariadb").await?;
    let bootstrapped: Vec<&String> = logs
        .iter()
        .filter(|(_, l)| {
            l.contains("this one is the most advanced: starting a new cluster from it")
        })
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        bootstrapped.len(),
        1,
        "one server starts the cluster again after the power cut: {bootstrapped:?}\n{}",
        logs.iter()
            .map(|(p, l)| format!("{p}:\n{}", tail(l)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let positions = logs[bootstrapped[0].as_str()]
        .lines()
        .rfind(|l| l.contains("this one is the most advanced"))
        .unwrap_or_default()
        .to_owned();
    let seqnos = reported_seqnos(&positions);
    let best = bootstrapped[0]
        .trim_start_matches("mariadb-")
        .parse::<u32>()?;
    anyhow::ensure!(
        matches!((seqnos.get(&2), seqnos.get(&best)), (Some(behind), Some(top)) if behind < top)
            && seqnos.values().max() == seqnos.get(&best),
        "mariadb-2 was stopped before the cut, so it is behind, and {} started the cluster: it must have the highest position, and mariadb-2 a lower one ({seqnos:?}): {positions}",
        bootstrapped[0]
    );
    // The row committed before the cut is there.
    let token = admin_token(&http, &keystone, &password).await?;
    let found: Value = http
        .get(format!("{keystone}/v3/projects?name={project}"))
        .header("x-auth-token", &token)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    assert_eq!(
        found["projects"].as_array().map(Vec::len),
        Some(1),
        "project {project} after the power cut: {found}"
    );
    // A server whose transfer failed was stopped by its start script and joined again: say so.
    for pod in logs.keys() {
        let params = LogParams {
            previous: true,
            ..LogParams::default()
        };
        if let Ok(previous) = pods.logs(pod, &params).await
            && previous.contains("Galera needs a restart of this server")
        {
            eprintln!("{pod}: its transfer failed; the start script restarted it, and it joined");
        }
    }
    eprintln!(
        "every MariaDB server killed, mariadb-2 behind the others: the cluster was back in {recovered:.1} s from {}, with the project created before ({positions})",
        bootstrapped[0]
    );

    // A RabbitMQ node whose boot waits forever for its peers' `global` (the hang of RabbitMQ
    // 3.10.8 on Erlang/OTP 25) is killed by its boot watchdog and restarts. The hang is made
    // here by suspending `global` on both peers while rabbitmq-1 is replaced; once the
    // watchdog has acted, they resume, and the node joins the cluster.
    for peer in ["rabbitmq-0", "rabbitmq-2"] {
        let out = rabbitmqctl_eval(&pods, peer, "sys:suspend(global_name_server).").await?;
        assert_eq!(out.trim(), "ok", "suspending global on {peer}");
    }
    let old = pods
        .get("rabbitmq-1")
        .await?
        .metadata
        .uid
        .context("pod UID")?;
    pods.delete("rabbitmq-1", &DeleteParams::default()).await?;
    let started = std::time::Instant::now();
    let killed_after = loop {
        if let Some(p) = pods.get_opt("rabbitmq-1").await?
            && p.metadata.uid.as_deref() != Some(old.as_str())
            && restarts(&pods, "rabbitmq").await?.get("rabbitmq-1") >= Some(&1)
        {
            break started.elapsed().as_secs_f64();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(300),
            "the watchdog did not restart the hung rabbitmq-1 within 300 s"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let previous = pods
        .logs(
            "rabbitmq-1",
            &LogParams {
                previous: true,
                ..LogParams::default()
            },
        )
        .await?;
    assert!(
        previous.contains("kstack-rabbitmq-start: the boot has waited for a peer's answer"),
        "the first container of the new rabbitmq-1 did not end by the watchdog:\n{}",
        tail(&previous)
    );
    for peer in ["rabbitmq-0", "rabbitmq-2"] {
        let out = rabbitmqctl_eval(&pods, peer, "sys:resume(global_name_server).").await?;
        assert_eq!(out.trim(), "ok", "resuming global on {peer}");
    }
    wait_ready(&client, &ns, "rabbitmq", 3, Duration::from_secs(600)).await?;
    let back = started.elapsed().as_secs_f64();
    assert_eq!(rabbitmq_nodes(&cloud, &pods).await?.len(), 3);
    eprintln!(
        "a RabbitMQ node hung at boot: its watchdog restarted it after {killed_after:.1} s; back in the cluster {back:.1} s after it was replaced"
    );

    // Keystone's keys rotated every minute while all of the above ran (the user's load saw no
    // failure across those rotations). Both replicas read the same Secret: a token either of
    // them issued validates on the other, and the token issued right after the deploy, two
    // rotations or more ago, still validates on both.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let ids = loop {
        let ids = key_ids(&secrets).await?;
        if ids
            .last()
            .is_some_and(|primary| *primary >= primary_at_deploy + 2)
        {
            break ids;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the keys were not rotated twice since the deploy ({keys_at_deploy:?}): key ids {ids:?}"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    assert_eq!(ids[0], 0, "a staged key: {ids:?}");
    let replicas: Vec<String> = pods
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/name=keystone,app.kubernetes.io/component=server"),
        )
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.status?.pod_ip)
        .map(|ip| format!("http://{ip}:5000"))
        .collect();
    assert_eq!(replicas.len(), 2, "keystone replicas: {replicas:?}");
    for (i, issuer) in replicas.iter().enumerate() {
        let token = admin_token(&http, issuer, &password).await?;
        let other = &replicas[1 - i];
        for (what, t) in [("a new token", &token), ("the first token", &first_token)] {
            let status = validate(&http, other, &token, t).await?;
            assert_eq!(status, 200, "{what} on {other} (issued by {issuer})");
        }
    }
    let rotations = rotation_logs(&pods).await?;
    assert!(
        rotations
            .iter()
            .any(|l| l.contains("keystone-fernet-keys: rotated; keys")),
        "no rotation job reported a rotation: {rotations:?}"
    );
    let keys = secrets
        .get("keystone-fernet-keys")
        .await?
        .data
        .unwrap_or_default();
    for key in keys.values() {
        let key = String::from_utf8_lossy(&key.0);
        assert!(
            rotations.iter().all(|l| !l.contains(key.trim())),
            "a rotation job printed a key"
        );
    }
    eprintln!(
        "keystone's keys rotated every minute: key ids {ids:?}; tokens of either replica, and the one issued right after the deploy, validate on both"
    );
    Ok(())
}

/// The key ids of the keystone-fernet-keys Secret, sorted.
async fn key_ids(secrets: &Api<Secret>) -> anyhow::Result<Vec<u64>> {
    let s = secrets.get("keystone-fernet-keys").await?;
    let mut ids: Vec<u64> = s
        .data
        .unwrap_or_default()
        .keys()
        .map(|k| {
            k.parse()
                .with_context(|| format!("key {k} is not a number"))
        })
        .collect::<anyhow::Result<_>>()?;
    ids.sort_unstable();
    Ok(ids)
}

/// Keystone's answer (HTTP status) to validating `subject` with `token`, at `keystone`.
async fn validate(
    http: &reqwest::Client,
    keystone: &str,
    token: &str,
    subject: &str,
) -> anyhow::Result<u16> {
    Ok(http
        .get(format!("{keystone}/v3/auth/tokens"))
        .header("x-auth-token", token)
        .header("x-subject-token", subject)
        .send()
        .await?
        .status()
        .as_u16())
}

/// The logs of the key rotation jobs' pods that are still there.
async fn rotation_logs(pods: &Api<Pod>) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for p in pods
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/name=keystone,app.kubernetes.io/component=keys"),
        )
        .await?
        .items
    {
        let name = p.metadata.name.unwrap_or_default();
        if let Ok(log) = pods.logs(&name, &LogParams::default()).await {
            out.push(log);
        }
    }
    Ok(out)
}

/// The last lines of a log, for a failure message.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The logs of every pod of a StatefulSet service (its current containers), by pod name.
async fn service_logs(
    pods: &Api<Pod>,
    service: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut out = std::collections::BTreeMap::new();
    let selector = server_selector(service);
    for p in pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let name = p.metadata.name.clone().unwrap_or_default();
        let log = pods.logs(&name, &LogParams::default()).await?;
        out.insert(name, log);
    }
    Ok(out)
}

/// The label selector of a service's server pods (not its Jobs').
fn server_selector(service: &str) -> String {
    format!("app.kubernetes.io/name={service},app.kubernetes.io/component=server")
}

/// The pods a label selector matches, or, for a failure message, why they could not be listed.
async fn list_pods(pods: &Api<Pod>, selector: &str) -> Result<Vec<Pod>, String> {
    pods.list(&ListParams::default().labels(selector))
        .await
        .map(|l| l.items)
        .map_err(|e| format!("listing the pods of {selector}: {e}"))
}

/// What a failure message needs to explain a service's pods: each container's state, restarts
/// and readiness, and the last lines of its current and previous container's logs.
async fn pod_report(pods: &Api<Pod>, service: &str) -> String {
    let list = match list_pods(pods, &server_selector(service)).await {
        Ok(list) => list,
        Err(e) => return e,
    };
    let mut out = Vec::new();
    for p in list {
        let name = p.metadata.name.clone().unwrap_or_default();
        for c in p
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default()
        {
            out.push(format!(
                "{name}/{}: ready {}, {} restarts, state {:?}, last state {:?}",
                c.name, c.ready, c.restart_count, c.state, c.last_state
            ));
        }
        for previous in [false, true] {
            let params = LogParams {
                previous,
                tail_lines: Some(40),
                ..LogParams::default()
            };
            let which = if previous { "previous" } else { "current" };
            match pods.logs(&name, &params).await {
                Ok(log) => out.push(format!("{name} ({which} container):\n{log}")),
                Err(e) => out.push(format!("{name} ({which} container): no log: {e}")),
            }
        }
    }
    out.join("\n")
}

/// The sequence number each server reported, by ordinal, from the start script's line
/// "every server reported (<ordinal> data <uuid> <seqno> <safe> ...)".
fn reported_seqnos(line: &str) -> std::collections::BTreeMap<u32, i64> {
    let inner = line
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inner, _)| inner)
        .unwrap_or_default();
    let words: Vec<&str> = inner.split_whitespace().collect();
    let mut out = std::collections::BTreeMap::new();
    for (i, w) in words.iter().enumerate() {
        if words.get(i + 1) == Some(&"data")
            && let (Ok(ordinal), Some(Ok(seqno))) =
                (w.parse::<u32>(), words.get(i + 3).map(|s| s.parse::<i64>()))
        {
            out.insert(ordinal, seqno);
        }
    }
    out
}

/// The error lines (and the tracebacks after them) that a service's pods logged, for a failure
/// message.
async fn error_report(pods: &Api<Pod>, service: &str) -> String {
    let list = match list_pods(pods, &format!("app.kubernetes.io/name={service}")).await {
        Ok(list) => list,
        Err(e) => return e,
    };
    let mut out = Vec::new();
    for p in list {
        let name = p.metadata.name.clone().unwrap_or_default();
        let containers = p
            .spec
            .map(|s| s.containers.into_iter().map(|c| c.name).collect())
            .unwrap_or_else(Vec::new);
        for container in containers {
            let params = LogParams {
                container: Some(container.clone()),
                timestamps: true,
                ..LogParams::default()
            };
            let log = match pods.logs(&name, &params).await {
                Ok(log) => log,
                Err(e) => {
                    out.push(format!("{name}/{container}: no log: {e}"));
                    continue;
                }
            };
            let mut lines = Vec::new();
            let mut after_error = 0;
            for line in log.lines() {
                if line.contains(" ERROR ") || line.contains("Traceback") {
                    after_error = 30;
                }
                if after_error > 0 {
                    lines.push(line);
                    after_error -= 1;
                }
            }
            let from = lines.len().saturating_sub(150);
            out.push(format!(
                "{name}/{container}: {} error lines{}",
                lines.len(),
                if lines.is_empty() {
                    String::new()
                } else {
                    format!(":\n{}", lines[from..].join("\n"))
                }
            ));
        }
    }
    out.join("\n")
}

/// Restart counts of a service's pods, by pod name.
async fn restarts(
    pods: &Api<Pod>,
    service: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, i32>> {
    let selector = server_selector(service);
    Ok(pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .map(|p| {
            let n = p
                .status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default()
                .iter()
                .map(|c| c.restart_count)
                .sum();
            (p.metadata.name.unwrap_or_default(), n)
        })
        .collect())
}

/// The running nodes of the RabbitMQ cluster, sorted, as rabbitmq-0's management API lists
/// them (the cloud's RabbitMQ user).
async fn rabbitmq_nodes(cloud: &Cloud, pods: &Api<Pod>) -> anyhow::Result<Vec<String>> {
    let password = password(cloud, "rabbitmq_password")?;
    let ip = pods
        .get("rabbitmq-0")
        .await?
        .status
        .and_then(|s| s.pod_ip)
        .context("rabbitmq-0 has no IP")?;
    let nodes: Value = reqwest::Client::new()
        .get(format!("http://{ip}:15672/api/nodes"))
        .basic_auth("openstack", Some(password))
        .timeout(Duration::from_secs(30))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let mut running: Vec<String> = nodes
        .as_array()
        .context("a list of nodes")?
        .iter()
        .filter(|n| n["running"] == true)
        .filter_map(|n| n["name"].as_str().map(str::to_owned))
        .collect();
    running.sort();
    Ok(running)
}

/// Waits until pod `name` is a new pod (not `uid`) and ready; returns how often its containers
/// restarted.
async fn wait_replaced(
    pods: &Api<Pod>,
    name: &str,
    uid: &str,
    timeout: Duration,
) -> anyhow::Result<i32> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(p) = pods.get_opt(name).await?
            && p.metadata.uid.as_deref() != Some(uid)
            && let Some(status) = p.status
            && status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        {
            let containers = status.container_statuses.unwrap_or_default();
            return Ok(containers.iter().map(|c| c.restart_count).sum());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "{name} was not replaced by a ready pod within {} s",
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until the StatefulSet has `replicas` ready pods.
async fn wait_ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
    replicas: i32,
    timeout: Duration,
) -> anyhow::Result<()> {
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let s = api.get(name).await?.status.context("status")?;
        if s.ready_replicas == Some(replicas) && s.available_replicas == Some(replicas) {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "{name}: {:?} of {replicas} ready after {} s",
            s.ready_replicas,
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Sends `signal` (KILL, STOP) to the process named `comm` in the pods of a service (only pod
/// `only` when given), on this host (the real node's): a process belongs to a pod when its
/// cgroup path names the pod's UID. Returns how many processes got it.
async fn signal_servers(
    pods: &Api<Pod>,
    service: &str,
    comm: &str,
    signal: &str,
    only: Option<&str>,
) -> anyhow::Result<usize> {
    let selector = server_selector(service);
    let uids: Vec<String> = pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|p| only.is_none() || p.metadata.name.as_deref() == only)
        .filter_map(|p| p.metadata.uid)
        .collect();
    let pids = processes(&uids, comm)?;
    for pid in &pids {
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -{signal} {pid} failed");
    }
    Ok(pids.len())
}

/// Evaluates an Erlang expression on the RabbitMQ node of `pod` with its rabbitmqctl, run
/// in the pod as the rabbitmq user.
async fn rabbitmqctl_eval(pods: &Api<Pod>, pod: &str, expr: &str) -> anyhow::Result<String> {
    let command = format!("rabbitmqctl -q eval '{expr}'");
    run_in_pod(
        pods,
        pod,
        // The node's VM started first; a health check's rabbitmq-diagnostics runs one too.
        "beam.smp",
        &["su", "-s", "/bin/sh", "rabbitmq", "-c", &command],
        &[],
        "",
    )
    .await
}

/// Writes `rounds` rows through mariadb-0, one at a time, each read through mariadb-1 right
/// after its write returned, as a client of the `mariadb` Service whose two connections went to
/// different servers would. Runs in a glance-api pod, with its Python and PyMySQL, as the
/// database's root user. Returns how many rows the read missed, and the rounds.
async fn causal_reads(cloud: &Cloud, pods: &Api<Pod>, rounds: u32) -> anyhow::Result<(u32, u32)> {
    let ip = |pod: &Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .context("a MariaDB pod without an IP")
    };
    let (writer, reader) = (
        ip(&pods.get("mariadb-0").await?)?,
        ip(&pods.get("mariadb-1").await?)?,
    );
    let client = list_pods(pods, &server_selector("glance-api"))
        .await
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .find_map(|p| p.metadata.name)
        .context("no glance-api pod")?;
    let root = password(cloud, "database_password")?;
    let rounds = rounds.to_string();
    let out = run_in_pod(
        pods,
        &client,
        "glance-api",
        &[
            "/var/lib/kolla/venv/bin/python3",
            "-",
            &writer,
            &reader,
            &rounds,
        ],
        &[("KSTACK_DB_PASSWORD", &root)],
        CAUSAL_READS_PY,
    )
    .await?;
    let mut numbers = out.split_whitespace().map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(missed)), Some(Ok(done))) => Ok((missed, done)),
        _ => anyhow::bail!("the causal read probe printed {out:?}, not \"<missed> <rounds>\""),
    }
}

/// The probe `causal_reads` runs: argv writer, reader, rounds; prints "<missed> <rounds>".
const CAUSAL_READS_PY: &str = r#"
import os, sys, time
import pymysql

writer, reader, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])


def connect(host):
    return pymysql.connect(host=host, port=3306, user="root",
                           password=os.environ["KSTACK_DB_PASSWORD"], autocommit=True)


def run(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


w, r = connect(writer), connect(reader)
run(w, "CREATE DATABASE IF NOT EXISTS kstack_probe")
run(w, "CREATE TABLE IF NOT EXISTS kstack_probe.causal (id INT PRIMARY KEY)")
run(w, "DELETE FROM kstack_probe.causal")
for _ in range(100):
    try:
        run(r, "SELECT 1 FROM kstack_probe.causal LIMIT 1")
        break
    except pymysql.err.ProgrammingError:
        time.sleep(0.1)
missed = 0
for i in range(rounds):
    run(w, "INSERT INTO kstack_probe.causal (id) VALUES (%s)", i)
    if run(r, "SELECT COUNT(*) FROM kstack_probe.causal WHERE id = %s", i)[0][0] != 1:
        missed += 1
run(w, "DROP DATABASE kstack_probe")
print(missed, rounds)
"#;

#[test]
fn the_positions_line_gives_each_servers_sequence_number() {
    let line = "kstack-mariadb-start: every server reported (0 data 2c5d638c-e98b-11f1-b4f7-8a7643c40588 1383 0 1 empty 2 data 2c5d638c-e98b-11f1-b4f7-8a7643c40588 1374 1); this one is the most advanced: starting a new cluster from it";
    assert_eq!(
        reported_seqnos(line),
        std::collections::BTreeMap::from([(0, 1383), (2, 1374)])
    );
    assert!(reported_seqnos("no positions here").is_empty());
}
