//! What the real-node tests share: the cloud's admin password and a user's load on its APIs.
#![allow(dead_code)]
use anyhow::Context;
use kstack_e2e::cloud::Cloud;

/// The name of the cluster's one real node (labelled `kstack.io/real-node=true`); an error
/// saying how to start it when there is none.
pub async fn real_node(client: &kube::Client) -> anyhow::Result<String> {
    let nodes: kube::Api<kstack_k8s::api::core::v1::Node> = kube::Api::all(client.clone());
    let real = nodes
        .list(&kube::api::ListParams::default().labels("kstack.io/real-node=true"))
        .await?;
    anyhow::ensure!(
        real.items.len() == 1,
        "the cluster has no real node (labelled kstack.io/real-node=true): start it with `kstack dev up` (not --real-nodes 0)"
    );
    real.items[0].metadata.name.clone().context("node name")
}

/// Makes the real node's volumes whose claims went away with their namespace free again, and
/// empty. The dev cluster's volumes are a fixed pool kept after their claims (reclaim policy
/// Retain), so a few runs of the real-node tests on one cluster would otherwise use them all
/// up. Touches only hostPath volumes under `/var/lib/kstack/volumes/`, on this host (the
/// node's). Returns how many were freed.
pub async fn reclaim_volumes(client: &kube::Client) -> anyhow::Result<usize> {
    use kstack_k8s::api::core::v1::{Namespace, PersistentVolume};
    let volumes: kube::Api<PersistentVolume> = kube::Api::all(client.clone());
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    let mut freed = 0;
    for pv in volumes
        .list(&kube::api::ListParams::default().labels("kstack.io/real-node=true"))
        .await?
        .items
    {
        let name = pv.metadata.name.clone().unwrap_or_default();
        if pv.status.and_then(|s| s.phase).as_deref() != Some("Released") {
            continue;
        }
        let Some(spec) = pv.spec else { continue };
        let Some(ns) = spec.claim_ref.and_then(|c| c.namespace) else {
            continue;
        };
        let Some(path) = spec.host_path.map(|h| h.path) else {
            continue;
        };
        if !path.starts_with("/var/lib/kstack/volumes/")
            || path.contains("/../")
            || namespaces.get_opt(&ns).await?.is_some()
        {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("emptying volume {name} ({path})")),
        }
        volumes
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"spec": {"claimRef": null}})),
            )
            .await
            .with_context(|| format!("freeing volume {name}"))?;
        freed += 1;
    }
    Ok(freed)
}

/// Gives the cloud's Cinder a Ceph cluster, as an operator with an external one would: starts
/// `hack/ceph.sh`'s cluster on the real node's address (pods on the node reach it there; a
/// cluster already running is kept) and copies its `ceph.conf` and client keyring into the
/// cloud's config directory, where `cinder_backend_ceph` reads them.
pub async fn ceph_for_cinder(client: &kube::Client, cloud: &Cloud) -> anyhow::Result<()> {
    let name = real_node(client).await?;
    let nodes: kube::Api<kstack_k8s::api::core::v1::Node> = kube::Api::all(client.clone());
    let node = nodes.get(&name).await?;
    let address = node
        .status
        .and_then(|s| s.addresses)
        .unwrap_or_default()
        .into_iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address)
        .context("the real node has no InternalIP")?;
    let script = kstack_e2e::hack_script("ceph.sh");
    let dir = cloud.dir.path().to_str().context("config dir path")?;
    for args in [["up", address.as_str()], ["config", dir]] {
        let out = tokio::process::Command::new("bash")
            .arg(&script)
            .args(args)
            .output()
            .await?;
        anyhow::ensure!(
            out.status.success(),
            "hack/ceph.sh {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The value of `key` in the cloud's passwords.yml.
pub fn password(cloud: &Cloud, key: &str) -> anyhow::Result<String> {
    let passwords = std::fs::read_to_string(cloud.dir.path().join(kstack_config::passwords::FILE))?;
    Ok(kstack_config::passwords::parse(&passwords)
        .map_err(|_| anyhow::anyhow!("the cloud's passwords.yml does not load"))?
        .get(key)
        .with_context(|| format!("{key} in passwords.yml"))?
        .to_owned())
}

/// The admin password of the cloud's passwords.yml.
pub fn admin_password(cloud: &Cloud) -> anyhow::Result<String> {
    password(cloud, "keystone_admin_password")
}

/// What a user's client saw while the cloud changed under it.
#[derive(Default)]
pub struct Load {
    pub rounds: u64,
    pub failures: Vec<String>,
}

impl Load {
    /// Fails unless at least 20 rounds ran and none of them failed; `during` says when.
    pub fn assert_clean(&self, during: &str) {
        assert!(
            self.rounds >= 20,
            "only {} rounds of the user's calls {during}",
            self.rounds
        );
        assert!(
            self.failures.is_empty(),
            "{} of {} rounds failed {during}:\n{}",
            self.failures.len(),
            self.rounds,
            self.failures.join("\n")
        );
    }
}

/// The API endpoints a user's load calls (`http://<cluster IP>:<port>`).
#[derive(Clone)]
pub struct Apis {
    pub keystone: String,
    pub glance: String,
    /// nova-api, when the cloud has it.
    pub nova: Option<String>,
    /// The CA (PEM) the client trusts, for HTTPS endpoints.
    pub ca: Option<String>,
}

/// kstack's CA of the cloud in `ns` (the Secret `kstack-ca` a deploy with TLS on the public
/// endpoints makes), PEM: what a user's client trusts.
pub async fn public_ca(client: &kube::Client, ns: &str) -> anyhow::Result<String> {
    let secrets: kube::Api<kstack_k8s::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), ns);
    let secret = secrets
        .get("kstack-ca")
        .await
        .with_context(|| format!("Secret kstack-ca of {ns}"))?;
    let pem = secret
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .context("Secret kstack-ca has no ca.crt")?;
    Ok(String::from_utf8(pem.0)?)
}

impl Apis {
    /// The APIs of the cloud in namespace `ns`, at their Services' cluster IPs.
    pub async fn of(client: &kube::Client, ns: &str) -> anyhow::Result<Apis> {
        let addresses = kstack_kube::service_addresses(client, ns).await?;
        let url = |svc: &str, port: u16| {
            addresses
                .get(svc)
                .map(|ip| format!("http://{ip}:{port}"))
                .with_context(|| format!("no cluster IP for Service {svc}: {addresses:?}"))
        };
        Ok(Apis {
            keystone: url("keystone", 5000)?,
            glance: url("glance-api", 9292)?,
            nova: addresses
                .contains_key("nova-api")
                .then(|| url("nova-api", 8774))
                .transpose()?,
            ca: None,
        })
    }
}

/// Starts and stops a user's load ([`user_load`]) and counts its rounds as they run.
#[derive(Default)]
pub struct LoadSwitch {
    stop: std::sync::atomic::AtomicBool,
    rounds: std::sync::atomic::AtomicU64,
}

impl LoadSwitch {
    pub fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self::default())
    }

    /// Ends the load after its current round.
    pub fn stop(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn round(&self) {
        self.rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Lets the load run `more` further rounds from now (the rounds after a change show
    /// what users get once it is done), waiting at most `limit`, then ends it. A slow
    /// machine runs fewer rounds per second; counting rounds, not seconds, keeps the
    /// judgement of [`Load::assert_clean`] the same on any machine.
    pub async fn stop_after(&self, more: u64, limit: std::time::Duration) {
        let target = self.rounds.load(std::sync::atomic::Ordering::Relaxed) + more;
        let until = std::time::Instant::now() + limit;
        while self.rounds.load(std::sync::atomic::Ordering::Relaxed) < target
            && std::time::Instant::now() < until
        {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        self.stop();
    }
}

/// A user's work, again and again until `switch` stops it, through the Services' cluster IPs
/// as a user inside the cloud's network would call them. Each round:
/// - issues a token (POST /v3/auth/tokens to keystone);
/// - creates an image record (POST /v2/images: a write to the database) and deletes it;
/// - lists images (GET /v2/images: glance validates the token with keystone);
/// - lists servers (GET /v2.1/servers) when the cloud has nova.
pub async fn user_load(apis: Apis, password: String, switch: std::sync::Arc<LoadSwitch>) -> Load {
    let Apis {
        keystone,
        glance,
        nova,
        ca,
    } = apis;
    let mut http = reqwest::Client::builder()
        // A user's client waits (keystoneauth sets no timeout); a minute still catches a hang.
        .timeout(std::time::Duration::from_secs(60));
    for cert in ca
        .iter()
        .flat_map(|pem| reqwest::Certificate::from_pem_bundle(pem.as_bytes()).expect("a PEM CA"))
    {
        http = http.add_root_certificate(cert);
    }
    let http = http.build().expect("an HTTP client");
    let body = serde_json::json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}});
    // The error with its causes (reqwest's own message names only the URL).
    let chain = |e: &reqwest::Error| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text.push_str(&format!(": {s}"));
            source = s.source();
        }
        text
    };
    let mut load = Load::default();
    while !switch.stopped() {
        load.rounds += 1;
        switch.round();
        let started = chrono::Utc::now().format("%H:%M:%S%.3f");
        let token = match http
            .post(format!("{keystone}/v3/auth/tokens"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => r
                .headers()
                .get("x-subject-token")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            Ok(r) => {
                load.failures
                    .push(format!("{started} token: HTTP {}", r.status()));
                None
            }
            Err(e) => {
                load.failures
                    .push(format!("{started} token: {}", chain(&e)));
                None
            }
        };
        if let Some(token) = token {
            let mut calls: Vec<(&str, reqwest::RequestBuilder)> = Vec::new();
            let image = http
                .post(format!("{glance}/v2/images"))
                .header("x-auth-token", &token)
                .json(&serde_json::json!({
                    "name": format!("load-{}", load.rounds),
                    "disk_format": "raw", "container_format": "bare"}));
            match image.send().await {
                Ok(r) if r.status().is_success() => {
                    let id = r
                        .json::<serde_json::Value>()
                        .await
                        .ok()
                        .and_then(|v| v["id"].as_str().map(str::to_owned));
                    match id {
                        Some(id) => calls.push((
                            "image delete",
                            http.delete(format!("{glance}/v2/images/{id}")),
                        )),
                        None => load
                            .failures
                            .push(format!("{started} image create: no image id in the answer")),
                    }
                }
                Ok(r) => load
                    .failures
                    .push(format!("{started} image create: HTTP {}", r.status())),
                Err(e) => load
                    .failures
                    .push(format!("{started} image create: {}", chain(&e))),
            }
            calls.push(("image list", http.get(format!("{glance}/v2/images"))));
            if let Some(nova) = &nova {
                calls.push(("server list", http.get(format!("{nova}/v2.1/servers"))));
            }
            for (what, call) in calls {
                match call.header("x-auth-token", &token).send().await {
                    Ok(r) if r.status().is_success() => {}
                    Ok(r) => {
                        // The service's own words (nova names the exception), for the report.
                        let status = r.status();
                        let body = r.text().await.unwrap_or_default();
                        let body: String = body.chars().take(300).collect();
                        load.failures
                            .push(format!("{started} {what}: HTTP {status}: {body}"))
                    }
                    Err(e) => load
                        .failures
                        .push(format!("{started} {what}: {}", chain(&e))),
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    load
}

/// A token of the cloud's admin user, scoped to the admin project, from Keystone at `keystone`.
pub async fn admin_token(
    http: &reqwest::Client,
    keystone: &str,
    password: &str,
) -> anyhow::Result<String> {
    Ok(admin_token_and_project(http, keystone, password).await?.0)
}

/// [`admin_token`] and the id of the project it is scoped to (the admin project), which the
/// APIs with the project in their path (cinder, heat) take.
pub async fn admin_token_and_project(
    http: &reqwest::Client,
    keystone: &str,
    password: &str,
) -> anyhow::Result<(String, String)> {
    let body = serde_json::json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}});
    let resp = http
        .post(format!("{keystone}/v3/auth/tokens"))
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(resp.status().is_success(), "token: HTTP {}", resp.status());
    let token = resp
        .headers()
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .context("Keystone answered without X-Subject-Token")?;
    let project = resp.json::<serde_json::Value>().await?["token"]["project"]["id"]
        .as_str()
        .context("the token is scoped to no project")?
        .to_owned();
    Ok((token, project))
}

/// When process `pid` started, in clock ticks since the machine booted (the 22nd field of
/// `/proc/<pid>/stat`), or `None` once it has gone.
pub fn started_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's closing parenthesis; the start time is the 22nd field.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|t| t.parse().ok())
}

/// The processes named `comm` on this host (the real node's) that belong to one of the pods
/// `uids`, the one that started first first: a process belongs to a pod when its cgroup path
/// names the pod's UID. Process IDs wrap (at 32768 on a small machine), so a lower one is not
/// an older process.
pub fn processes(uids: &[String], comm: &str) -> anyhow::Result<Vec<i32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if name.trim() != comm {
            continue;
        }
        let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
        if uids
            .iter()
            .any(|u| cgroup.contains(u) || cgroup.contains(&u.replace('-', "_")))
            && let Some(started) = started_ticks(pid)
        {
            pids.push((started, pid));
        }
    }
    pids.sort_unstable();
    Ok(pids.into_iter().map(|(_, pid)| pid).collect())
}

/// Runs `args` in the namespaces of pod `pod`'s first process named `comm`, from this host (the
/// real node's), as `kubectl exec` would, with `env` added to its environment (kept off its
/// command line) and `stdin` as its input. Returns its standard output.
pub async fn run_in_pod(
    pods: &kube::Api<kstack_k8s::api::core::v1::Pod>,
    pod: &str,
    comm: &str,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &str,
) -> anyhow::Result<String> {
    use tokio::io::AsyncWriteExt;
    let uid = pods.get(pod).await?.metadata.uid.context("pod UID")?;
    // The pod's first such process: a later one may be a health check's, gone at any moment.
    let pid = processes(&[uid], comm)?
        .into_iter()
        .next()
        .with_context(|| format!("no {comm} runs in {pod}"))?;
    let mut child = tokio::process::Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-m", "-u", "-i", "-n", "-p", "--"])
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let mut input = child.stdin.take().context("stdin")?;
    input.write_all(stdin.as_bytes()).await?;
    drop(input);
    let out = child.wait_with_output().await?;
    anyhow::ensure!(
        out.status.success(),
        "{} in {pod}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
