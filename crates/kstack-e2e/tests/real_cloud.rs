//! The cloud on the dev cluster's real node: real containers of the images `hack/images.sh`
//! built to Kolla's contract, every bootstrap Job doing its real work and every probe running
//! the image's own check, then `kstack verify` (a user's scenario against the deployed APIs)
//! passes. Needs a cluster started by `kstack dev up` with its real node and the images
//! imported (hack/test.sh does both).
//!
//! The default cloud, nova and neutron included, with the settings of a machine without KVM
//! or the OVS kernel module (docs/REAL-NODE.md). Then the OpenStack services move to images
//! rebuilt under another tag while a user issues tokens and lists images: no request fails.
use anyhow::Context;
use kstack_e2e::client;
use kstack_e2e::cloud::{Cloud, real_node_globals};
use kstack_k8s::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

mod several_nodes;
mod support;
use support::{
    Apis, LoadSwitch, admin_password, admin_token, admin_token_and_project, ceph_for_cinder,
    processes, real_node, reclaim_volumes, run_in_pod, started_ticks, user_load,
};

/// On top of the node globals: the default cloud (every service kolla-ansible enables by
/// default), central logging, Cinder with its volumes in a Ceph cluster, the provider network
/// kstack makes on the node's external interface (whose other end, this machine, has
/// 172.24.4.1/24), and that address as the cloud's public one (HAProxy publishes the public
/// endpoints there over HTTPS, with a certificate of kstack's own CA), with a longer step limit
/// for a loaded machine.
const REAL_CLOUD: &str = "kstack_timeouts: {default: 900}\nenable_central_logging: \"yes\"\n\
    enable_cinder: \"yes\"\ncinder_backend_ceph: \"yes\"\n\
    kstack_external_network: \"yes\"\nkstack_external_network_cidr: 172.24.4.0/24\n\
    kolla_external_vip_address: 172.24.4.1\nkolla_enable_tls_external: \"yes\"\n";

/// The cloud's public address (REAL_CLOUD's `kolla_external_vip_address`).
const PUBLIC: &str = "172.24.4.1";

/// The release the cloud is deployed at, and the one its upgrade moves it to, as an operator
/// does it: `openstack_release` changed in globals.yml, then `kstack deploy`. The images of both
/// (`hack/images.sh --release`) are imported on the real node; hack/test.sh builds them.
const FROM: &str = "2024.2";
const TO: &str = "2025.1";

/// The image tag of `release` on the real node (Debian bookworm, as `hack/images.sh` builds).
fn tag(release: &str) -> String {
    format!("{release}-debian-bookworm")
}

/// The real cloud's globals after its upgrade: [`TO`], with MariaDB, RabbitMQ and memcached
/// kept at [`FROM`]'s images.
fn upgraded_globals() -> String {
    let old = tag(FROM);
    format!(
        "{}mariadb_tag: \"{old}\"\nrabbitmq_tag: \"{old}\"\nmemcached_tag: \"{old}\"\n",
        globals_at(TO)
    )
}

/// The schedule of the backups the real cloud takes from its backup test on (once a year: the
/// test starts one by hand).
const BACKUP_SCHEDULE: &str = "0 0 1 1 *";

/// [`upgraded_globals`] with scheduled backups: the real cloud's globals from the backup test on.
fn scheduled_globals() -> String {
    format!(
        "{}kstack_backup_schedule: \"{BACKUP_SCHEDULE}\"\nkstack_backup_keep: 1\n",
        upgraded_globals()
    )
}

/// The real cloud's globals at `release`.
fn globals_at(release: &str) -> String {
    format!(
        "{}{REAL_CLOUD}openstack_release: \"{release}\"\n",
        real_node_globals()
    )
}

#[tokio::test]
async fn the_cloud_runs_in_real_containers_and_passes_verify() -> anyhow::Result<()> {
    let client = client().await?;
    let node = real_node(&client).await?;
    reclaim_volumes(&client).await?;

    let cloud = Cloud::new("kstack-real", &globals_at(FROM)).await?;
    ceph_for_cinder(&client, &cloud).await?;
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "deploy failed: {report}\n{stderr}");
    eprintln!(
        "deploy of the default cloud of {FROM} on the real node: {} s",
        report["seconds"]
    );

    // Every pod of the cloud ran on the real node, in containerd.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &cloud.ns.name);
    let list = pods.list(&ListParams::default()).await?;
    assert!(!list.items.is_empty());
    for p in &list.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let spec = p.spec.as_ref().context("pod spec")?;
        assert_eq!(spec.node_name.as_deref(), Some(node.as_str()), "pod {name}");
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        assert!(!statuses.is_empty(), "pod {name} has no container status");
        for c in statuses {
            let id = c.container_id.unwrap_or_default();
            assert!(
                id.starts_with("containerd://"),
                "pod {name} container {}: {id}",
                c.name
            );
        }
    }

    // `--keep`: the first server stays, running, for the upgrade below to carry through.
    let out = verify_keeping_a_guest(&cloud).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // The failed steps first, then what the node says about the guests' network, then
        // the whole report: a CI log keeps the beginning of a long failure.
        let failed: Vec<String> = serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v["steps"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|s| s["result"] == "failed")
            .map(|s| format!("{}: {}", s["step"], s["detail"]))
            .collect();
        let diagnostics = network_diagnostics(&client, &cloud).await;
        // What the failed run kept goes: a libvirt domain left on the node would stop the next
        // cloud's nova-compute.
        if let Some(prefix) = serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v["kept"]["prefix"].as_str().map(str::to_owned))
        {
            let _ = cloud.run(&["verify", "--delete", &prefix]).await;
        }
        panic!(
            "kstack verify failed: {}\n{diagnostics}\n{stdout}\n{stderr}",
            failed.join("\n"),
        );
    }
    let verdict: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("verify printed no JSON: {stdout}"))?;
    let steps = verdict["steps"].as_array().context("steps")?;
    let result = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .map(|s| s["result"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    // A user's scenario, every step: a token, every endpoint answering, a project and user of
    // their own, an image round trip with the same checksum, a network with a subnet and a
    // router, a flavor, a server booted to ACTIVE and deleted, a Heat stack created and
    // deleted, Horizon's login form, a volume in Ceph made available and deleted.
    for step in [
        "token",
        "endpoints",
        "project-user",
        "image",
        "network",
        "flavor",
        "server",
        "stack",
        "horizon",
        "volume",
    ] {
        assert_eq!(result(step), "ok", "step {step}: {verdict}");
    }
    assert_eq!(verdict["passed"], true, "{verdict}");
    // A user's scenario through the public endpoints: verify logged in at Keystone's public
    // URL and used the catalog's public endpoints, all on the public address (HAProxy).
    assert_eq!(
        verdict["auth_url"],
        format!("https://{PUBLIC}:5000"),
        "{verdict}"
    );
    // The router's gateway is on the provider network the deploy made (public1), not on a
    // scratch one of verify's.
    let network = steps
        .iter()
        .find(|s| s["step"] == "network")
        .context("network step")?;
    assert!(
        network["detail"]
            .as_str()
            .is_some_and(|d| d.contains("gateway on the external network public1")),
        "{network}"
    );
    // The server step attached a volume in Ceph to the running server (QEMU through librbd,
    // with the key libvirt holds); deleting the server released it.
    let server = steps
        .iter()
        .find(|s| s["step"] == "server")
        .context("server step")?;
    assert!(
        server["detail"]
            .as_str()
            .is_some_and(|d| d.contains("volume attached (in-use)")),
        "{server}"
    );
    // The guest reported its lease, the metadata of this very server (checked against the
    // server's id, name and port address) and its SSH server on its console; verify logged in
    // at its floating IP with the run's key, pinged from there a second server on another
    // network (which got its metadata through that network's DHCP port before the network was
    // attached to the same router), and wrote and read back the attached volume.
    assert!(
        server["detail"]
            .as_str()
            .is_some_and(|d| d.contains("got its lease")
                && d.contains("its metadata")
                && d.contains("logged in over SSH")
                && d.contains("its metadata through the network's DHCP port")
                && d.contains("answered the first one's ping")
                && d.contains("read back on the guest as /dev/vdb")),
        "{server}"
    );
    eprintln!(
        "kstack verify: {}",
        steps
            .iter()
            .map(|s| format!("{} {} s", s["step"].as_str().unwrap_or("?"), s["seconds"]))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let kept = KeptGuest::read(&verdict)?;
    // The rest runs on the upgraded cloud: tempest tests the release it was upgraded to. The
    // kept guest goes whatever happens: a libvirt domain left on the node would stop the next
    // cloud's nova-compute ("existing instances").
    let upgraded = {
        use futures::FutureExt as _;
        std::panic::AssertUnwindSafe(upgrade_without_a_failed_request(&cloud, &client, &kept))
            .catch_unwind()
            .await
    };
    let deleted = kept.delete(&cloud).await;
    let upgrade = match upgraded {
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(r) => r?,
    };
    deleted?;
    tempest_smoke_passes(&cloud, &client).await?;
    every_api_closes_its_connections(&cloud, &client).await?;
    data_directories_are_written_by_their_services(&cloud, &client).await?;
    the_inventory_takes_tokens_of_the_clouds_keystone(&cloud, &client).await?;
    kstack_logs_shows_what_the_services_wrote(&cloud).await?;
    central_logging_holds_what_keystone_logged(&cloud, &client, &upgrade).await?;
    backup_and_restore_bring_back_the_databases(&cloud, &client).await?;
    scheduled_backups_land_on_their_volume_and_restore(&cloud, &client).await?;
    the_public_certificate_renews_without_a_failed_request(&cloud, &client).await?;
    service_records_are_those_of_running_services(&cloud, &client).await?;
    several_nodes::guests_cross_nodes_and_move_off_a_locked_host(
        &cloud,
        &client,
        &scheduled_globals(),
    )
    .await
}

/// `kstack verify -o json --keep` with the guest `hack/guest.sh` built (hack/test.sh passes its
/// directory): a real Linux that must get its lease and its metadata through the router and
/// start SSH. The real node's external interface has 172.24.4.1/24 on its other end
/// (hack/realnode.sh): a floating IP on the provider network there is one this machine reaches.
async fn verify_keeping_a_guest(cloud: &Cloud) -> anyhow::Result<std::process::Output> {
    let guest = std::env::var("KSTACK_E2E_GUEST_IMAGE").context(
        "KSTACK_E2E_GUEST_IMAGE is not set: the directory hack/guest.sh prints (hack/test.sh sets it)",
    )?;
    cloud
        .run(&[
            "verify",
            "-o",
            "json",
            "--keep",
            "--guest-image",
            &guest,
            "--external-subnet",
            "172.24.4.0/24",
        ])
        .await
}

/// OpenStack's own test suite on this cloud: `hack/tempest.sh --smoke` (tempest 43.0.0 and the
/// plugins of 2025.1, `tempest.conf` written from the cloud) with validation on: the guest of
/// `hack/guest.sh` as the image and a provider network on the real node's external interface
/// (public1, kept for the rest of the test), so the scenarios boot servers, log in over SSH at
/// floating IPs and attach volumes. No test fails, and the tenant scenarios ran and passed.
/// `KSTACK_E2E_TEMPEST_SKIP=<reason>` leaves it out (printed), for a quicker run by hand.
async fn tempest_smoke_passes(cloud: &Cloud, client: &kube::Client) -> anyhow::Result<()> {
    if let Ok(reason) = std::env::var("KSTACK_E2E_TEMPEST_SKIP") {
        eprintln!("tempest smoke: not run (KSTACK_E2E_TEMPEST_SKIP: {reason})");
        return Ok(());
    }
    let workspace = tempfile::tempdir()?;
    let started = std::time::Instant::now();
    let sampler = GuestPorts::sample(client, cloud).await;
    let out = tokio::process::Command::new("bash")
        .arg(kstack_e2e::hack_script("tempest.sh"))
        .args(["--smoke", "--external-subnet", "172.24.4.0/24"])
        .env("KUBECONFIG", &cloud.kubeconfig)
        .env("KSTACK_CONFIG_DIR", cloud.dir.path())
        .env("KSTACK_NAMESPACE", &cloud.ns.name)
        .env("KSTACK_TEMPEST_WORKSPACE", workspace.path().join("ws"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    let seconds = started.elapsed().as_secs();
    if !out.status.success() {
        // A guest tempest could not reach: what the node says about the guests' network
        // (tempest's output above has the failed tests' guest consoles).
        let diagnostics = network_diagnostics(client, cloud).await;
        let history = sampler.history_of_macs_in(&stdout);
        panic!("tempest smoke failed ({seconds} s)\n{diagnostics}{history}");
    }
    drop(sampler);
    // summarize.py's last count line: `N passed, N failed, N skipped`.
    let counts = stdout
        .lines()
        .rev()
        .find_map(|l| {
            let n: Vec<u32> = l
                .split(", ")
                .map(|p| p.split(' ').next().and_then(|n| n.parse().ok()))
                .collect::<Option<_>>()?;
            (n.len() == 3 && l.contains(" passed, ")).then(|| (n[0], n[1], n[2]))
        })
        .context("tempest.sh printed no `N passed, N failed, N skipped` line")?;
    let (passed, failed, skipped) = counts;
    assert_eq!(failed, 0, "tempest smoke: {failed} failed");
    assert!(passed >= 90, "tempest smoke: only {passed} passed");
    // The scenarios a tenant lives by ran with validation: a server on a tenant network
    // behind a router, logged in to at its floating IP; a volume attached to a server.
    for scenario in [
        "tempest.scenario.test_network_basic_ops.TestNetworkBasicOps.test_network_basic_ops",
        "tempest.scenario.test_server_basic_ops.TestServerBasicOps.test_server_basic_ops",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(scenario) && l.trim_end().ends_with("... ok")),
            "tempest smoke: {scenario} did not pass"
        );
    }
    eprintln!(
        "tempest smoke on the real node: {passed} passed, {failed} failed, {skipped} skipped in {seconds} s"
    );
    Ok(())
}

/// Every OpenStack API but neutron's answers with `Connection: close` and closes the connection
/// (neutron-server's eventlet server keeps connections alive: its `wsgi_keep_alive` is
/// deprecated for removal in 2025.1, as neutron moves to uWSGI): a kept-alive
/// connection would pin a client to a pod through a rolling update, and the request it sent as
/// the stopping server closed the idle connection would fail (seen on glance-api: "connection
/// closed before message completed" during the upgrade).
async fn every_api_closes_its_connections(
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addresses = kstack_kube::service_addresses(client, &cloud.ns.name).await?;
    let public: std::net::IpAddr = PUBLIC.parse()?;
    let ca = support::public_ca(client, &cloud.ns.name).await?;
    for (service, port) in [
        ("keystone", 5000),
        ("glance-api", 9292),
        ("placement-api", 8780),
        ("nova-api", 8774),
        ("nova-api", 8775),
        ("heat-api", 8004),
        ("heat-api-cfn", 8000),
        // The public gateway (HAProxy) too, neutron's port included.
        ("public", 5000),
        ("public", 9696),
    ] {
        let ip = match service {
            "public" => &public,
            _ => addresses
                .get(service)
                .with_context(|| format!("no cluster IP for {service}"))?,
        };
        // HTTP/1.1 keeps a connection alive unless a side says otherwise: ask, and read until
        // the server closes it (a kept-alive connection would block until the timeout). The
        // public gateway speaks HTTPS.
        let tcp = tokio::net::TcpStream::connect((*ip, port)).await?;
        let mut conn: Box<dyn Stream> = match service {
            "public" => Box::new(tls_connect(tcp, &ca).await?.0),
            _ => Box::new(tcp),
        };
        conn.write_all(format!("GET / HTTP/1.1\r\nHost: {ip}:{port}\r\n\r\n").as_bytes())
            .await?;
        let mut answer = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            conn.read_to_end(&mut answer),
        )
        .await
        .with_context(|| format!("{service}:{port} kept the connection open after answering"))?;
        match read {
            Ok(_) => {}
            // Over TLS, a server closing the connection without a close_notify alert: closed
            // all the same, which is what is checked here.
            Err(e) if service == "public" && e.kind() == std::io::ErrorKind::UnexpectedEof => {}
            Err(e) => return Err(e.into()),
        }
        let answer = String::from_utf8_lossy(&answer);
        let head = answer.split("\r\n\r\n").next().unwrap_or_default();
        assert!(
            head.lines()
                .any(|l| l.to_ascii_lowercase().replace(' ', "") == "connection:close"),
            "{service}:{port} did not say Connection: close:\n{head}"
        );
    }
    eprintln!("every API answered with Connection: close and closed the connection");
    Ok(())
}

/// The inventory's view of the real cloud it watches: every service healthy in `/metrics`
/// (Prometheus's scrape, with the admin's Keystone token), and in Chromium the status page
/// signed in with that token shows every service healthy with the steps of its last deploy.
/// Screenshots go to `$KSTACK_TEST_ARTIFACTS/real-cloud/` (CI keeps them).
async fn the_status_page_and_metrics_show_the_real_cloud(
    http: &reqwest::Client,
    base: &str,
    token: &str,
) -> anyhow::Result<()> {
    let services = [
        "mariadb",
        "rabbitmq",
        "keystone",
        "glance-api",
        "nova-api",
        "nova-compute",
        "neutron-server",
        "heat-api",
        "horizon",
        "victoria-logs",
        "vlagent",
    ];
    let healthy = |text: &str, svc: &str| {
        text.contains(&format!(
            "kstack_service_health{{service=\"{svc}\",state=\"healthy\"}} 1\n"
        ))
    };
    let started = std::time::Instant::now();
    let metrics = loop {
        let text = http
            .get(format!("{base}/metrics"))
            .bearer_auth(token)
            .send()
            .await?
            .text()
            .await?;
        if services.iter().all(|s| healthy(&text, s)) {
            break text;
        }
        anyhow::ensure!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "not every service healthy in /metrics after 60 s:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    let generations = metrics
        .lines()
        .filter(|l| l.starts_with("kstack_service_generation{"))
        .count();
    assert!(generations >= 20, "{metrics}");
    eprintln!(
        "inventory /metrics: {} services healthy, {generations} with a generation",
        services.len()
    );

    let Some(bin) = kstack_inventory::browser::chromium() else {
        anyhow::ensure!(
            std::env::var_os("KSTACK_REQUIRE_CHROMIUM").is_none(),
            "chromium is not installed, and KSTACK_REQUIRE_CHROMIUM asks for the browser test: apt-get install chromium"
        );
        eprintln!("SKIPPED the status page in a browser: no `chromium` on PATH");
        return Ok(());
    };
    let out = std::env::var_os("KSTACK_TEST_ARTIFACTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("artifacts"))
        .join("real-cloud");
    std::fs::create_dir_all(&out)?;
    let mut browser = kstack_inventory::browser::Browser::launch(&bin).await;
    let loaded = std::time::Instant::now();
    browser
        .call(
            "Page.navigate",
            serde_json::json!({"url": format!("{base}/status")}),
        )
        .await
        .map_err(|e| anyhow::anyhow!("navigate: {e}"))?;
    anyhow::ensure!(
        browser
            .wait_for(
                "document.getElementById('token')",
                std::time::Duration::from_secs(20)
            )
            .await,
        "no sign-in form"
    );
    // The token goes in through the page's form, as a person pastes it; never into a log.
    browser
        .eval(&format!(
            "document.getElementById('token').value = {}; document.forms[0].submit(); true",
            serde_json::to_string(token)?
        ))
        .await
        .map_err(|e| anyhow::anyhow!("sign in: {e}"))?;
    let live = browser
        .wait_for(
            "location.pathname === '/status' && document.getElementById('conn').dataset.state === 'live' \
             && document.getElementById('summary').dataset.failing === '0'",
            std::time::Duration::from_secs(30),
        )
        .await;
    let took = loaded.elapsed();
    let dom = browser.dom().await;
    browser.screenshot(&out.join("status.png")).await;
    std::fs::write(out.join("status.html"), &dom)?;
    anyhow::ensure!(
        live,
        "the page did not go live with no failing service: {dom}"
    );
    for svc in services {
        let tag = dom
            .split(&format!("id=\"svc-{svc}\""))
            .nth(1)
            .and_then(|rest| rest.split('>').next())
            .with_context(|| format!("no row for {svc} on the page"))?;
        assert!(tag.contains("data-health=\"healthy\""), "{svc}: {tag}");
    }
    assert!(
        dom.contains("id=\"steps-keystone\""),
        "keystone's last deploy steps are not on the page"
    );
    assert!(!dom.contains(token), "the page shows the token");
    eprintln!(
        "status page in Chromium: live with every service healthy {:.1} s after navigating; screenshot {}",
        took.as_secs_f64(),
        out.join("status.png").display()
    );
    Ok(())
}

/// Central logging: the collector on the node shipped keystone's lines (verify made it issue
/// tokens) to the store, where a LogsQL query finds them by the file they came from; and no
/// passwords.yml value is anywhere in the store, whatever container logged it; and no container
/// logged an error line the allow-list (`log-errors-allowed.yaml`) does not name, but while the
/// upgrade replaced the pods (those are printed: a process stopped mid-work, a peer gone).
async fn central_logging_holds_what_keystone_logged(
    cloud: &Cloud,
    client: &kube::Client,
    upgrade: &UpgradeWindow,
) -> anyhow::Result<()> {
    let addresses = kstack_kube::service_addresses(client, &cloud.ns.name).await?;
    let store = format!(
        "http://{}:9428",
        addresses
            .get("victoria-logs")
            .context("no cluster IP for victoria-logs")?
    );
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()?;
    let query = |q: String| {
        let http = http.clone();
        let url = format!("{store}/select/logsql/query");
        async move {
            let r = http.post(url).form(&[("query", q)]).send().await?;
            let status = r.status();
            let body = r.text().await?;
            anyhow::ensure!(status.is_success(), "LogsQL query: HTTP {status}: {body}");
            body.lines()
                .map(|l| serde_json::from_str::<Value>(l).context("a line of the answer"))
                .collect::<anyhow::Result<Vec<Value>>>()
        }
    };
    // The kubelet writes /var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log.
    let keystone_files = format!(
        "file:~\"^/var/log/pods/{}_keystone-[^/]+/keystone/\"",
        cloud.ns.name
    );
    let started = std::time::Instant::now();
    let line = loop {
        let rows = query(format!("{keystone_files} \"/v3/auth/tokens\" | limit 5")).await?;
        if let Some(row) = rows.first() {
            break row.clone();
        }
        anyhow::ensure!(
            started.elapsed() < std::time::Duration::from_secs(180),
            "no line of keystone's in the store after 180 s"
        );
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    };
    eprintln!(
        "central logging: keystone's line in the store after {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        line["_msg"]
    );
    assert!(
        line["_msg"]
            .as_str()
            .is_some_and(|m| m.contains("/v3/auth/tokens")),
        "{line}"
    );
    // With the node it was written on.
    let node = real_node(client).await?;
    assert_eq!(line["node"].as_str(), Some(node.as_str()), "{line}");

    // The same through kstack, from wherever kstack runs (the API server's proxy).
    let out = cloud
        .run(&["logs", "keystone", "--central", "--tail", "500"])
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kstack logs --central: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.iter().any(|l| l.contains(" keystone-")
            && l.contains("/keystone: ")
            && l.contains("/v3/auth/tokens")),
        "kstack logs keystone --central: {stdout}"
    );
    // Only keystone's pods.
    assert!(
        lines.iter().all(|l| l
            .split(' ')
            .nth(1)
            .is_some_and(|p| p.starts_with("keystone-"))),
        "{stdout}"
    );
    eprintln!("kstack logs keystone --central: {} lines", lines.len());

    // Every line of the cloud's containers the store holds, checked for every password.
    let all = query(format!(
        "file:~\"^/var/log/pods/{}_\" | limit 1000000",
        cloud.ns.name
    ))
    .await?;
    let containers: std::collections::BTreeSet<&str> =
        all.iter().filter_map(|r| r["file"].as_str()).collect();
    assert!(
        containers.len() > 20,
        "the store holds the logs of only {} container files",
        containers.len()
    );
    let passwords = std::fs::read_to_string(cloud.dir.path().join(kstack_config::passwords::FILE))?;
    let passwords = kstack_config::passwords::parse(&passwords)
        .map_err(|_| anyhow::anyhow!("the cloud's passwords.yml does not load"))?;
    // The Ceph client's key, from the keyring the operator copied beside passwords.yml.
    let keyring = std::fs::read_to_string(
        cloud
            .dir
            .path()
            .join("config/cinder/cinder-volume/ceph.client.cinder.keyring"),
    )?;
    let ceph_key = keyring
        .lines()
        .find_map(|l| l.trim().strip_prefix("key = "))
        .context("no key in the Ceph keyring")?
        .to_owned();
    let mut leaks = Vec::new();
    let secrets = passwords
        .entries
        .keys()
        .filter_map(|k| Some((k.as_str(), passwords.get(k)?)))
        .chain([("the Ceph keyring's key", ceph_key.as_str())]);
    for (key, value) in secrets {
        // Short values (a uuid's parts, a port) would match by chance; genpwd's are long.
        if value.len() < 8 {
            continue;
        }
        for row in all
            .iter()
            .filter(|r| r["_msg"].as_str().is_some_and(|m| m.contains(value)))
        {
            leaks.push(format!("{key} in {}", row["file"].as_str().unwrap_or("?")));
        }
    }
    leaks.dedup();
    assert!(leaks.is_empty(), "passwords in the store: {leaks:#?}");
    eprintln!(
        "central logging: {} lines of {} container log files, none with a password",
        all.len(),
        containers.len()
    );

    // After deploy, verify and tempest, no container logged an error line (ERROR, CRITICAL,
    // a traceback) but those the repository's allow-list names with a reason. What was logged
    // while the upgrade replaced the pods is shown, not held against the cloud: the upgrade's
    // own test is that no user's request failed then.
    let allow = kstack_e2e::logscan::allowed()?;
    let (during, outside): (Vec<Value>, Vec<Value>) =
        all.iter().cloned().partition(|r| upgrade.holds(r));
    let in_upgrade = kstack_e2e::logscan::Scan::of(kstack_e2e::logscan::ordered(&during), &allow);
    eprintln!(
        "error lines logged while the upgrade replaced the pods: {} ({} kinds the allow-list does not name)\n{}",
        in_upgrade.errors,
        in_upgrade.unexpected.len(),
        in_upgrade.report()
    );
    let scan = kstack_e2e::logscan::Scan::of(kstack_e2e::logscan::ordered(&outside), &allow);
    for (a, n) in allow.iter().zip(&scan.allowed) {
        eprintln!(
            "allowed error lines: {n} in {} matching {:?} ({})",
            a.container,
            a.matches.as_str(),
            a.reason
        );
    }
    assert!(
        scan.unexpected.is_empty(),
        "{} kinds of error lines in the cloud's logs that log-errors-allowed.yaml does not allow \
         ({} error lines in all):\n{}",
        scan.unexpected.len(),
        scan.errors,
        scan.report()
    );
    eprintln!(
        "error lines in the cloud's logs: {}, every one allowed",
        scan.errors
    );
    Ok(())
}

/// `kstack logs keystone` prints the real keystone's lines (verify just made it issue tokens),
/// each under its pod and container, with no password in them; `--jobs` reads the bootstrap
/// Jobs' pods.
async fn kstack_logs_shows_what_the_services_wrote(cloud: &Cloud) -> anyhow::Result<()> {
    let out = cloud.run(&["logs", "keystone", "--tail", "200"]).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kstack logs keystone: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        !lines.is_empty(),
        "kstack logs keystone printed nothing: {stderr}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("keystone-") && l.contains("/keystone: ")),
        "every line under a keystone pod and its container:\n{stdout}"
    );
    let password = admin_password(cloud)?;
    assert!(!stdout.contains(&password), "a password in kstack logs");

    let out = cloud
        .run(&["logs", "keystone", "--jobs", "--tail", "5"])
        .await?;
    let jobs = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every Kolla container starts with kolla_set_configs' lines, so each Job pod has some.
    assert!(
        !jobs.is_empty() && jobs.lines().all(|l| l.starts_with("keystone-")),
        "the bootstrap Jobs' pods: {jobs}"
    );
    eprintln!(
        "kstack logs keystone: {} lines, e.g. {}",
        lines.len(),
        lines.last().unwrap_or(&"")
    );
    Ok(())
}

/// The inventory service with `--keystone-url` of the deployed Keystone: a token Keystone
/// issued to the admin user reads and writes hosts (the real Keystone lets the token validate
/// itself and lists its roles), a made-up one is refused.
async fn the_inventory_takes_tokens_of_the_clouds_keystone(
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let addresses = kstack_kube::service_addresses(client, &cloud.ns.name).await?;
    let keystone_ip = addresses
        .get("keystone")
        .context("no cluster IP for keystone")?;
    let keystone = format!("http://{keystone_ip}:5000");
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()?;
    let token = admin_token(&http, &keystone, &admin_password(cloud)?).await?;

    let dir = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config = kstack_inventory::ServeConfig {
        listen: ([127, 0, 0, 1], port).into(),
        database_url: dir.path().join("inventory.db").display().to_string(),
        tokens: kstack_inventory::Tokens::default(),
        keystone: Some(kstack_inventory::KeystoneAuth::new(format!(
            "{keystone}/v3"
        ))),
        tls: None,
        insecure_http: false,
        audit_interval: std::time::Duration::from_secs(3600),
        sync: std::sync::Arc::new(kstack_inventory::NoNodeSync),
        joins: None,
        // The status page and /metrics watch the deployed cloud.
        cloud: kstack_kube::cloud::KubeCloudStatus::start(
            client.clone(),
            &cloud.ns.name,
            kstack_model::catalog::Catalog::builtin()?
                .services
                .into_iter()
                .map(|(name, s)| (name, s.depends_on))
                .collect(),
        ),
        max_connections: None,
        compute: None,
    };
    let server = tokio::spawn(kstack_inventory::serve(config));
    let base = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..200 {
        if http
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    anyhow::ensure!(up, "the inventory service did not start");
    let create = http
        .post(format!("{base}/v1/ihosts"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"hostname": "compute-kt", "personality": "compute"}))
        .send()
        .await?;
    let created = create.status();
    let list = http
        .get(format!("{base}/v1/ihosts"))
        .bearer_auth(&token)
        .send()
        .await?;
    let listed = (list.status(), list.text().await?);
    let made_up = http
        .get(format!("{base}/v1/ihosts"))
        .bearer_auth("gAAAAABmade-up-token-0123456789")
        .send()
        .await?
        .status();
    // Prometheus scrapes with the same token.
    let scrape = http
        .get(format!("{base}/metrics"))
        .bearer_auth(&token)
        .send()
        .await?;
    let scraped = (scrape.status(), scrape.text().await?);
    let seen = the_status_page_and_metrics_show_the_real_cloud(&http, &base, &token).await;
    server.abort();
    seen?;
    assert_eq!(scraped.0, reqwest::StatusCode::OK, "{}", scraped.1);
    assert!(
        scraped.1.contains(
            "kstack_inventory_http_requests_total{method=\"POST\",route=\"/v1/ihosts\",status=\"201\"} 1"
        ),
        "{}",
        scraped.1
    );
    assert_eq!(
        created,
        reqwest::StatusCode::CREATED,
        "POST with the admin's Keystone token"
    );
    assert_eq!(listed.0, reqwest::StatusCode::OK, "{}", listed.1);
    assert!(listed.1.contains("compute-kt"), "{}", listed.1);
    assert_eq!(made_up, reqwest::StatusCode::UNAUTHORIZED);
    eprintln!(
        "inventory: the admin's Keystone token created and listed a host; a made-up token got 401"
    );
    Ok(())
}

/// The data directories as the host sees them (the real node's hostPath volumes): each
/// belongs to its service's Kolla user (uids of Kolla's `users.py`, which the images keep) and
/// holds what the service wrote there as that user. This is what config.json's `permissions`
/// are for: a claim's new directory belongs to root until `kolla_set_configs` hands it over.
async fn data_directories_are_written_by_their_services(
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<()> {
    use kstack_k8s::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use std::os::unix::fs::MetadataExt as _;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &cloud.ns.name);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let host_path = |claim: &'static str| {
        let (claims, volumes) = (claims.clone(), volumes.clone());
        async move {
            let pvc = claims
                .get(claim)
                .await
                .with_context(|| format!("claim {claim}"))?;
            let pv = pvc
                .spec
                .and_then(|s| s.volume_name)
                .with_context(|| format!("claim {claim} is not bound"))?;
            let path = volumes
                .get(&pv)
                .await?
                .spec
                .and_then(|s| s.host_path)
                .map(|h| h.path)
                .with_context(|| format!("volume {pv} of claim {claim} is no hostPath"))?;
            Ok::<_, anyhow::Error>(std::path::PathBuf::from(path))
        }
    };
    // (service, its directory on the host, Kolla uid, what the service writes there).
    let checks = [
        (
            "mariadb",
            host_path("mariadb-mariadb-0").await?,
            42434,
            &["ibdata1", "grastate.dat", "mysql"][..],
        ),
        (
            "rabbitmq",
            host_path("rabbitmq-rabbitmq-0").await?,
            42439,
            &["mnesia"][..],
        ),
        (
            "glance-api",
            host_path("glance-api-glance").await?,
            42415,
            &["images"][..],
        ),
        (
            "nova-compute",
            "/var/lib/kstack/nova".into(),
            42436,
            &["compute_id", "instances"][..],
        ),
    ];
    for (service, dir, uid, written) in checks {
        let owner = std::fs::metadata(&dir)
            .with_context(|| format!("{service}: {}", dir.display()))?
            .uid();
        assert_eq!(
            owner,
            uid,
            "{service}: {} belongs to uid {owner}",
            dir.display()
        );
        for name in written {
            let path = dir.join(name);
            let meta = std::fs::metadata(&path).with_context(|| {
                format!(
                    "{service} did not write {} (its directory holds {:?})",
                    path.display(),
                    std::fs::read_dir(&dir)
                        .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
                        .unwrap_or_default()
                )
            })?;
            assert_eq!(
                meta.uid(),
                uid,
                "{service}: {} belongs to uid {}",
                path.display(),
                meta.uid()
            );
        }
    }
    eprintln!(
        "data directories: mariadb, rabbitmq, glance and nova-compute wrote theirs as their Kolla users"
    );

    // Keystone's keys are a Secret, not a directory it writes: the kubelet puts them in the
    // pod's volume as root-owned files of mode 0440 in Kolla's keystone group (the pod's
    // fsGroup), so the keystone processes read them and nobody else does.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &cloud.ns.name);
    let keystone = pods
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/name=keystone,app.kubernetes.io/component=server"),
        )
        .await?
        .items
        .into_iter()
        .next()
        .context("no keystone pod")?;
    let uid = keystone.metadata.uid.context("pod UID")?;
    // The dev cluster's directory holds the kubeconfig and the real node's kubelet root.
    let dev_dir = std::path::PathBuf::from(std::env::var("KSTACK_E2E_KUBECONFIG")?)
        .parent()
        .context("the kubeconfig's directory")?
        .to_owned();
    for volume in ["keystone-fernet-keys", "keystone-credential-keys"] {
        let dir = dev_dir.join(format!(
            "real/kubelet/pods/{uid}/volumes/kubernetes.io~secret/{volume}"
        ));
        for key in ["0", "1"] {
            let path = dir.join(key);
            let meta = std::fs::metadata(&path).with_context(|| format!("{}", path.display()))?;
            assert_eq!(
                (meta.uid(), meta.gid(), meta.mode() & 0o777),
                (0, 42425, 0o440),
                "{}: owner, group and mode",
                path.display()
            );
            assert_eq!(meta.len(), 44, "{}: a Fernet key", path.display());
        }
    }
    eprintln!("keystone's keys: Secret files of mode 0440 in the keystone group, in its pod");
    Ok(())
}

/// The cloud moves from [`FROM`] to [`TO`] as an operator upgrades it (`openstack_release`
/// changed, `kstack deploy`: a backup, then per service the expand migrations before its new
/// pods, the contract ones after every service runs the new release) while a user issues tokens,
/// creates and deletes images and lists servers: no request fails. MariaDB, RabbitMQ and
/// memcached keep their images (pinned by tag, as an operator upgrading OpenStack alone does):
/// with one replica each, their upgrade cannot be seamless (replicated infrastructure is for
/// that).
async fn upgrade_without_a_failed_request(
    cloud: &Cloud,
    client: &kube::Client,
    kept: &KeptGuest,
) -> anyhow::Result<UpgradeWindow> {
    let (old, next) = (tag(FROM), tag(TO));
    let password = admin_password(cloud)?;

    let stop = LoadSwitch::new();
    let apis = Apis::of(client, &cloud.ns.name).await?;
    anyhow::ensure!(apis.nova.is_some(), "the default cloud has nova-api");
    let load = tokio::spawn(user_load(apis, password.clone(), stop.clone()));
    // The same load through the public endpoints (HAProxy, itself upgraded meanwhile).
    // Its certificate is renewed meanwhile: HAProxy rolls again, with no failed request.
    let public = Apis {
        keystone: format!("https://{PUBLIC}:5000"),
        glance: format!("https://{PUBLIC}:9292"),
        nova: Some(format!("https://{PUBLIC}:8774")),
        ca: Some(support::public_ca(client, &cloud.ns.name).await?),
    };
    let public_load = tokio::spawn(user_load(public, password.clone(), stop.clone()));
    // With KSTACK_E2E_UPGRADE_BOOTS set, a user boots servers like the kept one, one after
    // another, throughout. Not in CI yet: right after the upgrade the one compute host still
    // answers a boot with "No valid host" now and then (docs/LIFECYCLE.md).
    let boots = if std::env::var_os("KSTACK_E2E_UPGRADE_BOOTS").is_some() {
        let neutron = kstack_kube::service_addresses(client, &cloud.ns.name)
            .await?
            .get("neutron-server")
            .map(|ip| format!("http://{ip}:9696"))
            .context("no cluster IP for Service neutron-server")?;
        Some(tokio::spawn(server_boots(
            Apis::of(client, &cloud.ns.name).await?,
            neutron,
            password,
            kept.kept
                .server_id
                .clone()
                .context("verify kept no server")?,
            stop.clone(),
        )))
    } else {
        None
    };
    // An operator follows keystone's logs through the upgrade.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &cloud.ns.name);
    let keystone_pods = |list: Vec<Pod>| -> Vec<String> {
        list.into_iter().filter_map(|p| p.metadata.name).collect()
    };
    let selector = "app.kubernetes.io/name=keystone,app.kubernetes.io/component=server";
    let before: Vec<String> = keystone_pods(
        pods.list(&ListParams::default().labels(selector))
            .await?
            .items,
    );
    let mut follow = cloud
        .command(&["logs", "keystone", "-f", "--tail", "1"])?
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let followed = {
        use tokio::io::AsyncReadExt as _;
        let mut stdout = follow.stdout.take().context("stdout of kstack logs -f")?;
        tokio::spawn(async move {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text).await;
            text
        })
    };
    // The guest verify kept answers at its floating IP's SSH port throughout, or says when not.
    let reach = tokio::spawn(reachability(kept.address()?, stop.clone()));
    // A few rounds before the upgrade: the loop itself works.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;

    cloud.set_globals(&upgraded_globals())?;
    let started = chrono::Utc::now();
    let (code, report, stderr) = cloud.deploy().await?;
    let window = UpgradeWindow {
        started,
        ended: chrono::Utc::now(),
    };
    // Requests after the last pod rolled: the new pods serve.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    stop.stop();
    let load = load.await?;
    let public_load = public_load.await?;
    let reach = reach.await?;
    let boots = match boots {
        Some(b) => Some(b.await?),
        None => None,
    };
    assert_eq!(code, 0, "the upgrade failed: {report}\n{stderr}");
    // Before it changed anything, the deploy backed up the databases (into backups/ of the
    // config directory), under the same load.
    let backup = report["backup"]
        .as_str()
        .with_context(|| format!("the upgrade's report names no backup: {report}"))?;
    assert!(
        std::path::Path::new(backup).starts_with(cloud.dir.path().join("backups"))
            && std::path::Path::new(backup).join("backup.json").is_file(),
        "{backup}"
    );

    // `kstack logs -f`, started before the upgrade, printed the lines of keystone's new pods.
    follow.start_kill()?;
    let _ = follow.wait().await;
    let followed = followed.await?;
    let after: Vec<String> = keystone_pods(
        pods.list(&ListParams::default().labels(selector))
            .await?
            .items,
    );
    let new: Vec<&String> = after.iter().filter(|p| !before.contains(p)).collect();
    assert!(
        !new.is_empty(),
        "keystone's pods were not replaced: {before:?} → {after:?}"
    );
    for pod in &new {
        assert!(
            followed
                .lines()
                .any(|l| l.starts_with(&format!("{pod}/keystone: "))),
            "kstack logs keystone -f, started before the upgrade, printed nothing of the new pod {pod}:\n{}",
            followed
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    eprintln!(
        "kstack logs keystone -f followed the upgrade: {} lines, of the new pods {new:?} too",
        followed.lines().count()
    );

    // The services run the new images.
    let mut upgraded = 0;
    for p in pods.list(&ListParams::default()).await?.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        for c in p.spec.context("pod spec")?.containers {
            let image = c.image.unwrap_or_default();
            let infra = ["mariadb-server", "rabbitmq", "memcached"]
                .iter()
                .any(|i| image.contains(&format!("/{i}:")));
            let want = if infra { &old } else { &next };
            if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
                assert!(image.ends_with(&format!(":{want}")), "pod {name}: {image}");
                upgraded += usize::from(!infra);
            }
        }
    }
    assert!(upgraded > 0, "no running pod of an OpenStack service");
    no_stop_hook_failed_and_no_probe_warned(client, &cloud.ns.name).await?;
    load.assert_clean("during the upgrade");
    // The upgrade ran keystone's contract migrations: back to the release before them is
    // refused, with the reason, and nothing changes.
    let out = cloud.run(&["rollback", "keystone"]).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "rollback across {FROM}: {stderr}"
    );
    assert!(
        stderr.contains("refusing to roll back to generation")
            && stderr.contains(&format!("({old})"))
            && stderr.contains("ran the contract phase"),
        "{stderr}"
    );
    let keystone: Api<kstack_k8s::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &cloud.ns.name);
    let image = keystone
        .get("keystone")
        .await?
        .spec
        .and_then(|s| s.template.spec?.containers.first()?.image.clone());
    assert!(
        image
            .as_deref()
            .unwrap_or_default()
            .ends_with(&format!(":{next}")),
        "the refused rollback changed keystone: {image:?}"
    );
    eprintln!("rollback of keystone to {FROM} after the contract phase: refused, nothing changed");
    if let Some(boots) = boots {
        // Every server a user created during the upgrade got a final answer (none lost), and
        // the one created after it went ACTIVE. Servers that went to ERROR are printed with
        // nova's fault: on this one compute host some still do (docs/LIFECYCLE.md).
        eprintln!(
            "servers booted during the upgrade ({} to {}): {} ACTIVE (the slowest {:.0} s), {} in ERROR, {} lost or failed calls\n{}\n{}",
            window.started.format("%H:%M:%S"),
            window.ended.format("%H:%M:%S"),
            boots.active,
            boots.slowest.as_secs_f64(),
            boots.errored.len(),
            boots.failures.len(),
            boots.each.join("\n"),
            boots.errored.join("\n")
        );
        assert!(
            boots.failures.is_empty() && boots.last_active,
            "booting servers during the upgrade: {} ACTIVE, the last one {}, {} lost or failed calls:\n{}",
            boots.active,
            if boots.last_active {
                "ACTIVE"
            } else {
                "not ACTIVE"
            },
            boots.failures.len(),
            boots.failures.join("\n")
        );
    }
    public_load.assert_clean("during the upgrade, through the public endpoints");
    // libvirtd and virtlogd of the old container stopped with it (they run outside its cgroup):
    // one of each runs, started during the upgrade.
    for name in ["libvirtd", "virtlogd"] {
        let running = libvirt_processes(name)?;
        assert!(
            running.len() == 1 && running.iter().all(|(_, at)| *at >= window.started),
            "{name} in the cgroup kstack-libvirt after the upgrade (started {}): {running:?}",
            window.started
        );
    }
    // The server booted before the upgrade runs on: nova says ACTIVE, and the guest, logged in
    // to again, has been up since before the upgrade (no reboot, no rebuild).
    kept.still_runs(cloud, client).await?;
    eprintln!(
        "the guest kept from verify during the upgrade: {} of {} probes of its SSH port answered, the longest gap {:.0} s",
        reach.answered,
        reach.probes,
        reach.longest_gap.as_secs_f64()
    );
    anyhow::ensure!(
        reach.answered > 0,
        "the kept guest's SSH port never answered during the upgrade: {reach:?}"
    );
    eprintln!(
        "upgrade from {FROM} to {TO}: {} s; {} rounds of token issue, image create and delete, image list and server list, 0 failed; {} rounds through the public endpoints, 0 failed",
        report["seconds"], load.rounds, public_load.rounds
    );
    Ok(window)
}

/// After the upgrade (which stopped every OpenStack pod and started new ones): no preStop hook
/// failed (a hook that waits for the process it stops fails when the container ends first: the
/// graceful stop signals are the image init's rewrite of SIGTERM instead), and no probe left a
/// warning (an API whose probed path answers 300, its versions, is a success with a
/// ProbeWarning event at every probe: those are probed at /healthcheck).
async fn no_stop_hook_failed_and_no_probe_warned(
    client: &kube::Client,
    ns: &str,
) -> anyhow::Result<()> {
    use kstack_k8s::api::core::v1::Event;
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut found = Vec::new();
    for reason in ["FailedPreStopHook", "ProbeWarning"] {
        let listed = events
            .list(&ListParams::default().fields(&format!("reason={reason}")))
            .await?;
        found.extend(listed.items.into_iter().map(|e| {
            format!(
                "{reason} {}: {}",
                e.involved_object.name.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        }));
    }
    anyhow::ensure!(
        found.is_empty(),
        "events of failed preStop hooks or probe warnings:\n{}",
        found.join("\n")
    );
    Ok(())
}

/// When the upgrade's deploy ran: its pods were replaced then.
struct UpgradeWindow {
    started: chrono::DateTime<chrono::Utc>,
    ended: chrono::DateTime<chrono::Utc>,
}

impl UpgradeWindow {
    /// Whether a row of the central log store (`_time`) was logged during the upgrade.
    fn holds(&self, row: &Value) -> bool {
        row["_time"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .is_some_and(|t| t >= self.started && t <= self.ended)
    }
}

/// The server `kstack verify --keep` left running, with what logs in to it.
struct KeptGuest {
    kept: kstack_verify::Kept,
    secrets: kstack_verify::KeptSecrets,
    /// When verify ended: the guest has been up at least since then.
    since: std::time::Instant,
}

impl KeptGuest {
    /// From verify's JSON report: what it kept, and from its directory the scratch user's
    /// password and the SSH key (files of mode 0600, as an operator finds them).
    fn read(verdict: &Value) -> anyhow::Result<KeptGuest> {
        use std::os::unix::fs::PermissionsExt as _;
        let kept: kstack_verify::Kept = serde_json::from_value(verdict["kept"].clone())
            .with_context(|| format!("verify --keep reported nothing kept: {verdict}"))?;
        let dir = std::path::PathBuf::from(
            verdict["kept_dir"]
                .as_str()
                .with_context(|| format!("verify --keep named no directory: {verdict}"))?,
        );
        for name in ["kept.json", "id_ed25519"] {
            let mode = std::fs::metadata(dir.join(name))?.permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}: mode {mode:o}", dir.join(name).display());
        }
        let file: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("kept.json"))?)?;
        let password = file["user_password"]
            .as_str()
            .context("kept.json has no user_password")?;
        let key = std::fs::read_to_string(dir.join("id_ed25519"))?;
        anyhow::ensure!(
            !verdict.to_string().contains(password),
            "verify's report shows the scratch user's password"
        );
        anyhow::ensure!(
            kept.server_id.is_some() && kept.floating_ip.is_some(),
            "verify kept no server with a floating IP: {kept:?}"
        );
        Ok(KeptGuest {
            kept,
            secrets: kstack_verify::KeptSecrets {
                user_password: kstack_verify::Password::new(password),
                ssh_private_key: Some(kstack_verify::Password::new(key)),
            },
            since: std::time::Instant::now(),
        })
    }

    fn address(&self) -> anyhow::Result<std::net::SocketAddr> {
        let ip: std::net::IpAddr = self
            .kept
            .floating_ip
            .as_deref()
            .context("no floating IP")?
            .parse()?;
        Ok(std::net::SocketAddr::new(ip, 22))
    }

    /// Nova says ACTIVE, and the guest has been up since before [`KeptGuest::since`].
    async fn still_runs(&self, cloud: &Cloud, client: &kube::Client) -> anyhow::Result<()> {
        let id = self.kept.server_id.as_deref().context("no server")?;
        let apis = Apis::of(client, &cloud.ns.name).await?;
        let nova = apis.nova.as_deref().context("no nova-api")?;
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()?;
        let token = admin_token(&http, &apis.keystone, &admin_password(cloud)?).await?;
        let server: Value = http
            .get(format!("{nova}/v2.1/servers/{id}"))
            .header("X-Auth-Token", &token)
            .send()
            .await?
            .json()
            .await?;
        assert_eq!(
            server["server"]["status"], "ACTIVE",
            "the server kept from before the upgrade: {server}"
        );
        let uptime = kstack_verify::kept_guest_uptime(
            &self.kept,
            &self.secrets,
            std::time::Duration::from_secs(60),
        )
        .await
        .map_err(|e| anyhow::anyhow!("the guest kept from before the upgrade: {e}"))?;
        let since = self.since.elapsed();
        assert!(
            uptime >= since,
            "the guest kept from before the upgrade rebooted: up {uptime:?}, verify ended {since:?} ago"
        );
        eprintln!(
            "the server kept from before the upgrade: ACTIVE at {}, its guest up {:.0} s (verify ended {:.0} s ago)",
            self.address()?,
            uptime.as_secs_f64(),
            since.as_secs_f64()
        );
        Ok(())
    }

    /// `kstack verify --delete`: everything the kept run made goes.
    async fn delete(&self, cloud: &Cloud) -> anyhow::Result<()> {
        let out = cloud
            .run(&["verify", "--delete", &self.kept.prefix])
            .await?;
        assert!(
            out.status.success(),
            "kstack verify --delete {}: {}",
            self.kept.prefix,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !cloud
                .dir
                .path()
                .join("verify")
                .join(&self.kept.prefix)
                .exists(),
            "the kept run's directory is left after --delete"
        );
        Ok(())
    }
}

/// The processes named `name` on this machine (the real node) in the cgroup kstack-libvirt,
/// where nova-libvirt's start script runs libvirtd and virtlogd, with when each started.
fn libvirt_processes(name: &str) -> anyhow::Result<Vec<(i32, chrono::DateTime<chrono::Utc>)>> {
    // /proc/<pid>/stat's start time is in clock ticks since boot (USER_HZ, 100 on Linux x86).
    let stat = std::fs::read_to_string("/proc/stat")?;
    let boot: i64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .context("/proc/stat has no btime")?
        .trim()
        .parse()?;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
        if comm.trim() != name || !cgroup.lines().any(|l| l.ends_with(":/kstack-libvirt")) {
            continue;
        }
        let Some(ticks) = started_ticks(pid) else {
            continue; // it has ended since
        };
        let ticks = i64::try_from(ticks)?;
        let at = chrono::DateTime::from_timestamp_millis(boot * 1000 + ticks * 10)
            .context("a start time out of range")?;
        found.push((pid, at));
    }
    Ok(found)
}

/// The guests' ports on the node's integration bridge, sampled every 5 s while tempest runs: a
/// guest tempest could not reach has left by the time its test fails, so what its port did
/// (its OpenFlow port number, VLAN tag, link, and packets each way) is kept as it happened.
struct GuestPorts {
    samples: std::sync::Arc<std::sync::Mutex<Vec<PortSample>>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// One sample of one guest port (`tap...`) on the integration bridge.
#[derive(Clone)]
struct PortSample {
    at: chrono::DateTime<chrono::Utc>,
    name: String,
    mac: String,
    ofport: String,
    tag: String,
    link: String,
    error: String,
    rx: u64,
    tx: u64,
    dropped: u64,
}

impl GuestPorts {
    /// Starts sampling (nothing when the node has no Open vSwitch pod).
    async fn sample(client: &kube::Client, cloud: &Cloud) -> Self {
        let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let pods: Api<Pod> = Api::namespaced(client.clone(), &cloud.ns.name);
        let pod = pods.list(&ListParams::default()).await.ok().and_then(|l| {
            l.items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .find(|n| n.starts_with("openvswitch-vswitchd-"))
        });
        let task = pod.map(|pod| {
            let samples = samples.clone();
            tokio::spawn(async move {
                loop {
                    if let Ok(rows) = port_samples(&pods, &pod).await {
                        samples
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .extend(rows);
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                }
            })
        });
        Self { samples, task }
    }

    /// The history of the ports whose MAC address `text` names (tempest prints a failed test's
    /// server with its ports' MACs), one line per change of number, tag, link or error, with
    /// the packets each way at that sample and at the last one.
    fn history_of_macs_in(&self, text: &str) -> String {
        let Ok(mac) = regex::Regex::new(r"fa:16:3e(?::[0-9a-f]{2}){3}") else {
            return String::new();
        };
        let samples = self
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut macs: std::collections::BTreeSet<&str> =
            mac.find_iter(text).map(|m| m.as_str()).collect();
        // A class whose setup failed prints no server: then every port's history.
        let whose = if macs.is_empty() {
            macs = samples.iter().map(|s| s.mac.as_str()).collect();
            "every guest port"
        } else {
            "the failed tests' guest ports"
        };
        let mut out = format!(
            "\n== {whose} on br-int, sampled every 5 s ({} samples; MACs {macs:?})\n",
            samples.len()
        );
        for mac in macs {
            let mine: Vec<&PortSample> = samples.iter().filter(|s| s.mac == mac).collect();
            // A line at the first sample, the last, each change of state, and each time the
            // packets from the guest start or stop coming.
            let (mut last, mut was_moving): (Option<&PortSample>, Option<bool>) = (None, None);
            for (i, s) in mine.iter().enumerate() {
                let changed = last.is_none_or(|l| {
                    (&l.name, &l.ofport, &l.tag, &l.link, &l.error)
                        != (&s.name, &s.ofport, &s.tag, &s.link, &s.error)
                });
                let moving = last.map(|l| l.rx != s.rx);
                let turned = moving.is_some() && was_moving.is_some() && moving != was_moving;
                was_moving = moving.or(was_moving);
                if changed || turned || i + 1 == mine.len() {
                    out.push_str(&format!(
                        "  {} {mac} {} ofport {} tag {} link {} rx {} tx {} dropped {}{}\n",
                        s.at.format("%H:%M:%S"),
                        s.name,
                        s.ofport,
                        s.tag,
                        s.link,
                        s.rx,
                        s.tx,
                        s.dropped,
                        if s.error.is_empty() {
                            String::new()
                        } else {
                            format!(" error {}", s.error)
                        },
                    ));
                }
                last = Some(s);
            }
        }
        out
    }
}

impl Drop for GuestPorts {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The node's Open vSwitch ports with their VLAN tags, one `name,tag` CSV line each.
const OVS_PORT_TAGS: &[&str] = &[
    "ovs-vsctl",
    "--format=csv",
    "--no-headings",
    "--columns=name,tag",
    "list",
    "Port",
];

/// The guest ports (`tap...`) of the integration bridge now, from the node's Open vSwitch.
async fn port_samples(pods: &Api<Pod>, pod: &str) -> anyhow::Result<Vec<PortSample>> {
    let ovs = |args: &'static [&'static str]| run_in_pod(pods, pod, "ovs-vswitchd", args, &[], "");
    let interfaces = ovs(&[
        "ovs-vsctl",
        "--format=csv",
        "--no-headings",
        "--columns=name,ofport,external_ids,statistics,link_state,error",
        "list",
        "Interface",
    ])
    .await?;
    let tags = ovs(OVS_PORT_TAGS).await?;
    let tags: std::collections::HashMap<&str, &str> =
        tags.lines().filter_map(|l| l.split_once(',')).collect();
    let field = |map: &str, key: &str| {
        map.split(", ")
            .find_map(|kv| {
                kv.trim_start_matches('{')
                    .strip_prefix(key)?
                    .strip_prefix('=')
            })
            .map(|v| v.trim_end_matches('}').trim_matches('"').to_owned())
            .unwrap_or_default()
    };
    let at = chrono::Utc::now();
    let mut rows = Vec::new();
    for line in interfaces.lines().filter(|l| l.starts_with("tap")) {
        let mut reader = csv_fields(line).into_iter();
        let (name, ofport, ids, stats, link, error) = (
            reader.next().unwrap_or_default(),
            reader.next().unwrap_or_default(),
            reader.next().unwrap_or_default(),
            reader.next().unwrap_or_default(),
            reader.next().unwrap_or_default(),
            reader.next().unwrap_or_default(),
        );
        let count = |key: &str| field(&stats, key).parse::<u64>().unwrap_or(0);
        rows.push(PortSample {
            at,
            tag: tags.get(name.as_str()).copied().unwrap_or("").to_owned(),
            mac: field(&ids, "attached-mac"),
            ofport,
            link,
            error: if error == "[]" {
                String::new()
            } else {
                error.trim_matches('"').to_owned()
            },
            rx: count("rx_packets"),
            tx: count("tx_packets"),
            dropped: count("rx_dropped") + count("tx_dropped"),
            name,
        });
    }
    Ok(rows)
}

/// The fields of one CSV line as ovs-vsctl writes it: fields with a comma or a quote are in
/// double quotes, a quote inside doubled.
fn csv_fields(line: &str) -> Vec<String> {
    let (mut fields, mut cur, mut quoted, mut chars) =
        (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

/// How a TCP port answered while [`reachability`] probed it.
#[derive(Debug, Default)]
struct Reach {
    probes: u32,
    answered: u32,
    longest_gap: std::time::Duration,
}

/// Connects to `addr` once a second until the switch stops: how many answered, and the
/// longest time without an answer.
async fn reachability(addr: std::net::SocketAddr, stop: std::sync::Arc<LoadSwitch>) -> Reach {
    let mut r = Reach::default();
    let mut last = std::time::Instant::now();
    while !stop.stopped() {
        r.probes += 1;
        let probe = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            tokio::net::TcpStream::connect(addr),
        );
        if matches!(probe.await, Ok(Ok(_))) {
            r.answered += 1;
            last = std::time::Instant::now();
        } else {
            r.longest_gap = r.longest_gap.max(last.elapsed());
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    r
}

/// What a user booting servers saw while the cloud changed under them.
#[derive(Debug, Default)]
struct Boots {
    /// Servers that went ACTIVE (and were deleted).
    active: u32,
    /// Servers that went to ERROR, with nova's fault: a final answer, printed.
    errored: Vec<String>,
    /// Calls that failed and servers that reached no final state (lost requests).
    failures: Vec<String>,
    /// Whether the last boot, started after the change, went ACTIVE.
    last_active: bool,
    /// The longest time from a server's create to ACTIVE.
    slowest: std::time::Duration,
    /// Each server that went ACTIVE: when it was created and how long it took.
    each: Vec<String>,
}

/// A user boots servers one after another until the switch stops, each like `like` (its image,
/// flavor and network), waits until it is ACTIVE, then deletes it and waits until it is gone.
/// Every call that fails and a server neither ACTIVE nor in ERROR within 5 minutes is a failure;
/// a server in ERROR is recorded with nova's fault. The boot under way when the switch stops is
/// finished, and one more is booted after it (`last_active`).
async fn server_boots(
    apis: Apis,
    neutron: String,
    password: String,
    like: String,
    switch: std::sync::Arc<LoadSwitch>,
) -> Boots {
    let mut boots = Boots::default();
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("an HTTP client");
    let nova = apis.nova.clone().expect("the cloud has nova-api");
    let mut n = 0;
    // Until the switch stops, then one more: the first boot after the change.
    let mut after = false;
    while !after {
        after = switch.stopped();
        n += 1;
        boots.last_active = false;
        let started = chrono::Utc::now().format("%H:%M:%S%.3f");
        if let Err(e) = boot_one(
            &http,
            &apis.keystone,
            &nova,
            &neutron,
            &password,
            &like,
            n,
            &mut boots,
        )
        .await
        {
            boots.failures.push(format!("{started} boot {n}: {e:#}"));
        }
    }
    boots
}

/// One boot of [`server_boots`]: Err says which call or state failed.
#[allow(clippy::too_many_arguments)]
async fn boot_one(
    http: &reqwest::Client,
    keystone: &str,
    nova: &str,
    neutron: &str,
    password: &str,
    like: &str,
    n: u32,
    boots: &mut Boots,
) -> anyhow::Result<()> {
    async fn json(r: reqwest::RequestBuilder, what: &str) -> anyhow::Result<Value> {
        let r = r.send().await.with_context(|| what.to_owned())?;
        let status = r.status();
        let body = r.text().await.with_context(|| what.to_owned())?;
        anyhow::ensure!(
            status.is_success(),
            "{what}: HTTP {status}: {}",
            body.chars().take(300).collect::<String>()
        );
        Ok(serde_json::from_str(&body).unwrap_or(Value::Null))
    }
    let token = admin_token(http, keystone, password)
        .await
        .context("token")?;
    let template = json(
        http.get(format!("{nova}/v2.1/servers/{like}"))
            .header("x-auth-token", &token),
        "server show of the kept server",
    )
    .await?;
    let ports = json(
        http.get(format!("{neutron}/v2.0/ports?device_id={like}"))
            .header("x-auth-token", &token),
        "port list of the kept server",
    )
    .await?;
    let network = ports["ports"][0]["network_id"]
        .as_str()
        .context("the kept server has no port")?;
    let create = json(
        http.post(format!("{nova}/v2.1/servers"))
            .header("x-auth-token", &token)
            .json(&serde_json::json!({"server": {
                "name": format!("upgrade-boot-{n}"),
                "imageRef": template["server"]["image"]["id"],
                "flavorRef": template["server"]["flavor"]["id"],
                "networks": [{"uuid": network}],
            }})),
        "server create",
    )
    .await?;
    let id = create["server"]["id"]
        .as_str()
        .context("server create answered no id")?
        .to_owned();
    let begun = std::time::Instant::now();
    let created = chrono::Utc::now();
    let outcome = loop {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let server = json(
            http.get(format!("{nova}/v2.1/servers/{id}"))
                .header("x-auth-token", &token),
            "server show",
        )
        .await?;
        match server["server"]["status"].as_str() {
            Some("ACTIVE") => break Ok(true),
            Some("ERROR") => {
                let fault = &server["server"]["fault"];
                boots.errored.push(format!(
                    "{} boot {n}: server {id} went to ERROR: {}",
                    created.format("%H:%M:%S"),
                    fault["message"].as_str().unwrap_or("(no fault recorded)")
                ));
                break Ok(false);
            }
            _ if begun.elapsed() > std::time::Duration::from_secs(300) => {
                break Err(anyhow::anyhow!(
                    "server {id} not ACTIVE in 300 s: {}",
                    server["server"]["status"]
                ));
            }
            _ => {}
        }
    };
    boots.last_active = matches!(outcome, Ok(true));
    if boots.last_active {
        boots.active += 1;
        boots.slowest = boots.slowest.max(begun.elapsed());
        boots.each.push(format!(
            "{} boot {n}: ACTIVE in {:.0} s",
            created.format("%H:%M:%S"),
            begun.elapsed().as_secs_f64()
        ));
    }
    json(
        http.delete(format!("{nova}/v2.1/servers/{id}"))
            .header("x-auth-token", &token),
        "server delete",
    )
    .await?;
    let deleting = std::time::Instant::now();
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let r = http
            .get(format!("{nova}/v2.1/servers/{id}"))
            .header("x-auth-token", &token)
            .send()
            .await
            .context("server show after delete")?;
        if r.status() == reqwest::StatusCode::NOT_FOUND {
            break;
        }
        anyhow::ensure!(
            r.status().is_success(),
            "server show after delete: HTTP {}",
            r.status()
        );
        anyhow::ensure!(
            deleting.elapsed() < std::time::Duration::from_secs(300),
            "server {id} not gone 300 s after its delete"
        );
    }
    outcome.map(|_| ())
}

/// `kstack backup` while a user works (no request fails), then `kstack restore`: a project
/// deleted after the backup is back with its id, one made after it is gone, and Keystone
/// serves the restored project by id and issues tokens. A restore without
/// `--yes` and one of a damaged backup change nothing.
async fn backup_and_restore_bring_back_the_databases(
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let password = admin_password(cloud)?;
    let apis = Apis::of(client, &cloud.ns.name).await?;
    let keystone = apis.keystone.clone();
    let http = reqwest::Client::new();
    let token = admin_token(&http, &keystone, &password).await?;
    let project = |name: &str| {
        let (http, keystone, token) = (http.clone(), keystone.clone(), token.clone());
        let name = name.to_owned();
        async move {
            let r = http
                .post(format!("{keystone}/v3/projects"))
                .header("x-auth-token", &token)
                .json(&serde_json::json!({"project": {"name": name, "domain_id": "default"}}))
                .send()
                .await?;
            anyhow::ensure!(
                r.status().is_success(),
                "project create: HTTP {}",
                r.status()
            );
            let v: Value = r.json().await?;
            v["project"]["id"]
                .as_str()
                .map(str::to_owned)
                .context("no project id")
        }
    };
    // The ids of the projects named `name` (a list reads the database: Keystone caches
    // single projects, not lists).
    let named = |name: &str| {
        let (http, keystone, token) = (http.clone(), keystone.clone(), token.clone());
        let name = name.to_owned();
        async move {
            let r = http
                .get(format!("{keystone}/v3/projects?name={name}"))
                .header("x-auth-token", &token)
                .send()
                .await?;
            anyhow::ensure!(r.status().is_success(), "project list: HTTP {}", r.status());
            let v: Value = r.json().await?;
            anyhow::Ok(
                v["projects"]
                    .as_array()
                    .context("projects")?
                    .iter()
                    .filter_map(|p| p["id"].as_str().map(str::to_owned))
                    .collect::<Vec<_>>(),
            )
        }
    };
    let before = project("kstack-backup-before").await?;

    // The backup, while a user works.
    let stop = LoadSwitch::new();
    let load = tokio::spawn(user_load(apis.clone(), password.clone(), stop.clone()));
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let backups = tempfile::tempdir()?;
    let out = cloud
        .run(&[
            "backup",
            "-o",
            &backups.path().display().to_string(),
            "--json",
        ])
        .await?;
    // Enough rounds around the backup to judge (the load's check wants 20), counted, not
    // timed: a slow machine runs fewer per second.
    stop.stop_after(20, std::time::Duration::from_secs(120))
        .await;
    let load = load.await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kstack backup failed:\n{stdout}\n{stderr}"
    );
    load.assert_clean("during kstack backup");
    let manifest: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("kstack backup --json printed no manifest: {stdout}"))?;
    let databases: Vec<&str> = manifest["databases"]
        .as_array()
        .context("databases")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for db in [
        "keystone",
        "glance",
        "nova",
        "nova_api",
        "nova_cell0",
        "neutron",
        "placement",
        "cinder",
        "heat",
    ] {
        assert!(
            databases.contains(&db),
            "database {db} is not in the backup: {manifest}"
        );
    }
    for db in ["mysql", "information_schema", "performance_schema", "sys"] {
        assert!(
            !databases.contains(&db),
            "MariaDB's own {db} is in the backup: {manifest}"
        );
    }
    // One directory per backup, readable by its owner only, and no password printed.
    let entries: Vec<_> = std::fs::read_dir(backups.path())?.collect::<Result<_, _>>()?;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let dir = entries[0].path();
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&dir)?.permissions().mode() & 0o777, 0o700);
    for f in ["backup.json", "databases.sql.gz"] {
        assert_eq!(
            std::fs::metadata(dir.join(f))?.permissions().mode() & 0o777,
            0o600,
            "{f}"
        );
    }
    for key in [
        "database_password",
        "keystone_admin_password",
        "nova_database_password",
    ] {
        let secret = support::password(cloud, key)?;
        assert!(
            !stdout.contains(&secret) && !stderr.contains(&secret),
            "kstack backup printed {key}"
        );
    }
    eprintln!(
        "kstack backup under a user's load: {} databases, {} bytes compressed, {} s; {} rounds of the user's calls, 0 failed",
        databases.len(),
        manifest["dump"]["bytes"],
        manifest["seconds"],
        load.rounds
    );

    // After the backup: `before` deleted, `after` made.
    let r = http
        .delete(format!("{keystone}/v3/projects/{before}"))
        .header("x-auth-token", &token)
        .send()
        .await?;
    assert!(
        r.status().is_success(),
        "project delete: HTTP {}",
        r.status()
    );
    let after = project("kstack-backup-after").await?;
    let dir_arg = dir.display().to_string();

    // Without --yes: checked, nothing changed.
    let out = cloud.run(&["restore", &dir_arg]).await?;
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    assert_eq!(named("kstack-backup-after").await?, vec![after.clone()]);
    // A damaged copy: refused before anything is touched.
    let damaged = tempfile::tempdir()?;
    for f in ["backup.json", "databases.sql.gz"] {
        std::fs::copy(dir.join(f), damaged.path().join(f))?;
    }
    let dump = damaged.path().join("databases.sql.gz");
    let mut bytes = std::fs::read(&dump)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&dump, bytes)?;
    let out = cloud
        .run(&["restore", &damaged.path().display().to_string(), "--yes"])
        .await?;
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("damaged") && said.contains("nothing restored"),
        "{said}"
    );
    assert_eq!(named("kstack-backup-after").await?, vec![after.clone()]);

    // The restore.
    let out = cloud.run(&["restore", &dir_arg, "--yes"]).await?;
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kstack restore failed:\n{said}");
    assert_eq!(
        named("kstack-backup-before").await?,
        vec![before.clone()],
        "{said}"
    );
    assert!(named("kstack-backup-after").await?.is_empty(), "{said}");
    // Keystone serves the restored project by id, and new tokens.
    let token = admin_token(&http, &keystone, &password).await?;
    let r = http
        .get(format!("{keystone}/v3/projects/{before}"))
        .header("x-auth-token", &token)
        .send()
        .await?;
    assert!(
        r.status().is_success(),
        "the restored project: HTTP {}",
        r.status()
    );
    let r = http
        .delete(format!("{keystone}/v3/projects/{before}"))
        .header("x-auth-token", &token)
        .send()
        .await?;
    assert!(
        r.status().is_success(),
        "project delete: HTTP {}",
        r.status()
    );
    eprintln!(
        "kstack restore: {}",
        said.lines().last().unwrap_or_default()
    );
    Ok(())
}

/// `kstack_backup_schedule`: the deploy adds the `mariadb-backup` CronJob and its volume;
/// two runs of it (started as `kubectl create job --from=cronjob/...` does, with a schedule
/// that would not fire during the test) leave one backup with `kstack_backup_keep: 1`;
/// `kstack backup-list` shows it with its manifest, `kstack backup-fetch` copies it out
/// checked, and `kstack restore` of the copy brings back a project deleted after it was taken.
async fn scheduled_backups_land_on_their_volume_and_restore(
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<()> {
    use kstack_k8s::api::batch::v1::{CronJob, Job};
    let schedule = BACKUP_SCHEDULE;
    cloud.set_globals(&scheduled_globals())?;
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(
        code, 0,
        "deploy with a backup schedule failed: {report}\n{stderr}"
    );
    let ns = &cloud.ns.name;
    let crons: Api<CronJob> = Api::namespaced(client.clone(), ns);
    let cron = crons.get("mariadb-backup").await?;
    assert_eq!(cron.spec.schedule, schedule);

    // A project that exists when the backups are taken and is deleted after them.
    let password = admin_password(cloud)?;
    let apis = Apis::of(client, ns).await?;
    let http = reqwest::Client::new();
    let token = admin_token(&http, &apis.keystone, &password).await?;
    let r = http
        .post(format!("{}/v3/projects", apis.keystone))
        .header("x-auth-token", &token)
        .json(&serde_json::json!({"project": {"name": "kstack-scheduled", "domain_id": "default"}}))
        .send()
        .await?;
    anyhow::ensure!(
        r.status().is_success(),
        "project create: HTTP {}",
        r.status()
    );
    let project = r.json::<Value>().await?["project"]["id"]
        .as_str()
        .context("project id")?
        .to_owned();

    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let started = std::time::Instant::now();
    for run in 1..=2 {
        let job = Job {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("mariadb-backup-test-{run}")),
                ..Default::default()
            },
            spec: cron.spec.job_template.spec.clone(),
            ..Default::default()
        };
        jobs.create(&Default::default(), &job).await?;
        let name = format!("mariadb-backup-test-{run}");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(300);
        loop {
            let status = jobs.get(&name).await?.status.unwrap_or_default();
            if status.succeeded.unwrap_or(0) >= 1 {
                break;
            }
            if status.failed.unwrap_or(0) >= 1 || std::time::Instant::now() > until {
                let out = cloud
                    .run(&["logs", "mariadb", "--jobs", "--tail", "40"])
                    .await?;
                anyhow::bail!(
                    "the backup job {name} did not succeed: {status:?}\n{}",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        // Backups are named by the second they were taken.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    }
    let both = started.elapsed().as_secs_f64();

    let out = cloud.run(&["backup-list", "--json"]).await?;
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kstack backup-list failed: {said}");
    let listing: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(listing["schedule"]["schedule"], schedule, "{listing}");
    let backups = listing["backups"].as_array().context("backups")?;
    assert_eq!(
        backups.len(),
        1,
        "kstack_backup_keep: 1 keeps one: {listing}"
    );
    let name = backups[0]["name"].as_str().context("name")?.to_owned();
    let databases = backups[0]["manifest"]["databases"]
        .as_array()
        .context("the backup's manifest")?;
    for db in ["keystone", "nova", "neutron", "glance"] {
        assert!(databases.iter().any(|d| d == db), "{db} in {listing}");
    }

    // Deleted after the backup; the restore of the fetched copy brings it back.
    let r = http
        .delete(format!("{}/v3/projects/{project}", apis.keystone))
        .header("x-auth-token", &token)
        .send()
        .await?;
    anyhow::ensure!(
        r.status().is_success(),
        "project delete: HTTP {}",
        r.status()
    );
    let copies = tempfile::tempdir()?;
    let out = cloud
        .run(&[
            "backup-fetch",
            &name,
            "-o",
            &copies.path().display().to_string(),
        ])
        .await?;
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kstack backup-fetch failed: {said}");
    let copy = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(std::path::Path::new(&copy), copies.path().join(&name));
    let out = cloud.run(&["restore", &copy, "--yes"]).await?;
    let restored = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kstack restore of the fetched copy failed:\n{restored}"
    );
    let token = admin_token(&http, &apis.keystone, &password).await?;
    let r = http
        .get(format!("{}/v3/projects/{project}", apis.keystone))
        .header("x-auth-token", &token)
        .send()
        .await?;
    assert!(
        r.status().is_success(),
        "the project after the restore: HTTP {}",
        r.status()
    );
    let _ = http
        .delete(format!("{}/v3/projects/{project}", apis.keystone))
        .header("x-auth-token", &token)
        .send()
        .await?;
    // No reader pod is left behind.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let readers = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=backup-reader"))
        .await?;
    assert!(
        readers
            .items
            .iter()
            .all(|p| p.metadata.deletion_timestamp.is_some()),
        "a backup reader pod is left"
    );
    for run in 1..=2 {
        let _ = jobs
            .delete(
                &format!("mariadb-backup-test-{run}"),
                &kube::api::DeleteParams::background(),
            )
            .await;
    }
    eprintln!(
        "scheduled backup: two runs of the CronJob's job {both:.1} s, one kept ({name}), fetched and restored: {}",
        restored.lines().last().unwrap_or_default()
    );
    Ok(())
}

/// A connection that reads and writes bytes: plain TCP or TLS over it.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

/// A TLS connection to the public gateway over `tcp`, trusting only `ca_pem` and checking the
/// certificate names [`PUBLIC`]; also the certificate it served (DER).
async fn tls_connect(
    tcp: tokio::net::TcpStream,
    ca_pem: &str,
) -> anyhow::Result<(
    tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    Vec<u8>,
)> {
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let name = rustls_pki_types::ServerName::try_from(PUBLIC.to_owned())?;
    let stream = connector
        .connect(name, tcp)
        .await
        .context("TLS handshake with the public gateway, trusting kstack's CA")?;
    let served = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.as_ref().to_vec())
        .context("the public gateway served no certificate")?;
    Ok((stream, served))
}

/// The certificate (DER) of the Secret `kstack-public-tls`: the public endpoints' certificate
/// kstack made.
async fn stored_public_certificate(client: &kube::Client, ns: &str) -> anyhow::Result<Vec<u8>> {
    use rustls_pki_types::pem::PemObject as _;
    let secrets: Api<kstack_k8s::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let pem = secrets
        .get("kstack-public-tls")
        .await?
        .data
        .and_then(|d| d.get("tls.crt").cloned())
        .context("Secret kstack-public-tls has no tls.crt")?;
    let der = rustls_pki_types::CertificateDer::from_pem_slice(&pem.0)?;
    Ok(der.as_ref().to_vec())
}

/// The public endpoints' certificate is renewed (`kstack deploy --renew-certificate`) while a
/// user works through them: HAProxy rolls onto the new certificate and no request fails.
/// `kstack status` says until when the certificate is valid.
async fn the_public_certificate_renews_without_a_failed_request(
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let ns = &cloud.ns.name;
    let status = cloud.run(&["status"]).await?;
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "kstack status: {shown}");
    assert!(
        shown.contains(&format!(
            "public certificate (kstack's CA): valid for {PUBLIC} until"
        )),
        "{shown}"
    );
    let before = stored_public_certificate(client, ns).await?;
    let ca = support::public_ca(client, ns).await?;
    // `kstack openrc` writes that CA beside the credentials and names it for the clients.
    let out_dir = tempfile::tempdir()?;
    let out = cloud
        .run(&["openrc", "-o", out_dir.path().to_str().context("path")?])
        .await?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(out_dir.path().join("ca.crt"))?, ca);
    let openrc = std::fs::read_to_string(out_dir.path().join("admin-openrc.sh"))?;
    assert!(
        openrc.contains(&format!(
            "export OS_CACERT='{}'",
            out_dir.path().join("ca.crt").display()
        )) && openrc.contains(&format!("export OS_AUTH_URL='https://{PUBLIC}:5000/v3'")),
        "{openrc}"
    );
    let stop = LoadSwitch::new();
    let public = Apis {
        keystone: format!("https://{PUBLIC}:5000"),
        glance: format!("https://{PUBLIC}:9292"),
        nova: Some(format!("https://{PUBLIC}:8774")),
        ca: Some(ca.clone()),
    };
    let password = admin_password(cloud)?;
    let load = tokio::spawn(user_load(public, password, stop.clone()));
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let started = std::time::Instant::now();
    let out = cloud
        .run(&["deploy", "--renew-certificate", "-o", "json"])
        .await?;
    let seconds = started.elapsed().as_secs_f64();
    // The deploy returns once the new pod is ready; the old one still drains (5 s) and stops:
    // the load goes on past that, for at least the rounds the load's check wants.
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    stop.stop_after(20, std::time::Duration::from_secs(120))
        .await;
    let load = load.await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the renewal's deploy failed:\n{stderr}"
    );
    assert!(
        stderr.contains("public certificate: a new one from kstack's CA (a renewal was asked for)"),
        "{stderr}"
    );
    let after = stored_public_certificate(client, ns).await?;
    assert_ne!(before, after, "the stored certificate is the same");
    // New connections reach the new pods once kube-proxy has their endpoints (the old pods
    // drain meanwhile): allow it a few seconds.
    let public: std::net::IpAddr = PUBLIC.parse()?;
    let mut served = Vec::new();
    for _ in 0..20 {
        let tcp = tokio::net::TcpStream::connect((public, 5000)).await?;
        served = tls_connect(tcp, &ca).await?.1;
        if served == after {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(
        served, after,
        "HAProxy serves another certificate than the renewed one"
    );
    load.assert_clean("during the certificate renewal, through the public endpoints");
    eprintln!(
        "public certificate renewed in {seconds:.1} s under a user's load through the public endpoints: {} rounds, 0 failed",
        load.rounds
    );
    Ok(())
}

/// After the deploy, tempest and the upgrade (which replaced every OpenStack pod), the service
/// records of nova, cinder and heat and neutron's agents name only what runs: each record is up,
/// none is left over from a replaced pod, and no service is recorded twice on one host.
/// An operator's `openstack compute service list` shows no dead rows after a rollout.
async fn service_records_are_those_of_running_services(
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let addresses = kstack_kube::service_addresses(client, &cloud.ns.name).await?;
    let url = |svc: &str, port: u16| -> anyhow::Result<String> {
        let ip = addresses
            .get(svc)
            .with_context(|| format!("no cluster IP for Service {svc}"))?;
        Ok(format!("http://{ip}:{port}"))
    };
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()?;
    let password = admin_password(cloud)?;
    let keystone = url("keystone", 5000)?;
    let (token, project) = admin_token_and_project(&http, &keystone, &password).await?;
    let get = |u: String| {
        let http = http.clone();
        let token = token.clone();
        async move {
            let r = http.get(&u).header("x-auth-token", token).send().await?;
            anyhow::ensure!(r.status().is_success(), "GET {u}: HTTP {}", r.status());
            anyhow::Ok(r.json::<Value>().await?)
        }
    };
    let rows = |v: &Value, key: &str| -> anyhow::Result<Vec<Value>> {
        Ok(v[key]
            .as_array()
            .with_context(|| format!("no `{key}` in {v}"))?
            .clone())
    };
    let text = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();

    let pods: Api<Pod> = Api::namespaced(client.clone(), &cloud.ns.name);
    let running: Vec<Pod> = pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect();
    let of = |service: &str| {
        running
            .iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(kstack_model::labels::NAME_LABEL))
                    .is_some_and(|n| n == service)
            })
            .collect::<Vec<_>>()
    };
    let pods_of = |service: &str| -> std::collections::BTreeSet<String> {
        of(service)
            .into_iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    let nodes_of = |service: &str| -> std::collections::BTreeSet<String> {
        of(service)
            .into_iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect()
    };
    let mut report = Vec::new();

    // nova: the scheduler and conductor under their service's name, nova-compute under its
    // node's; every record up.
    let nova = rows(
        &get(format!("{}/v2.1/os-services", url("nova-api", 8774)?)).await?,
        "services",
    )?;
    let mut seen = std::collections::BTreeSet::new();
    for r in &nova {
        let (binary, host, state) = (text(r, "binary"), text(r, "host"), text(r, "state"));
        let expected = match binary.as_str() {
            "nova-scheduler" | "nova-conductor" => host == binary,
            "nova-compute" => true,
            _ => false,
        };
        assert!(expected, "nova service record {binary} on {host}: {r}");
        assert_eq!(state, "up", "nova service record {binary} on {host}: {r}");
        assert!(
            seen.insert((binary.clone(), host.clone())),
            "recorded twice: {r}"
        );
    }
    // A compute host is its node (host network): one record per node running nova-compute.
    let computes = seen.iter().filter(|(b, _)| b == "nova-compute").count();
    let compute_nodes = nodes_of("nova-compute");
    assert!(
        (1..=compute_nodes.len()).contains(&computes),
        "{computes} nova-compute records for the nodes {compute_nodes:?}: {nova:?}"
    );
    report.push(format!("nova {}", nova.len()));

    // cinder: the scheduler under its service's name, cinder-volume under its node's (and
    // backend's, `node@backend`); every record up.
    if addresses.contains_key("cinder-api") {
        let cinder = rows(
            &get(format!(
                "{}/v3/{project}/os-services",
                url("cinder-api", 8776)?
            ))
            .await?,
            "services",
        )?;
        let mut seen = std::collections::BTreeSet::new();
        for r in &cinder {
            let (binary, host, state) = (text(r, "binary"), text(r, "host"), text(r, "state"));
            let expected = match binary.as_str() {
                "cinder-scheduler" => host == binary,
                "cinder-volume" => true,
                _ => false,
            };
            assert!(expected, "cinder service record {binary} on {host}: {r}");
            assert_eq!(state, "up", "cinder service record {binary} on {host}: {r}");
            assert!(
                seen.insert((binary.clone(), host.clone())),
                "recorded twice: {r}"
            );
        }
        // cinder-volume runs on its node's network: one record per node and backend
        // (`node@backend`).
        let volume_hosts: std::collections::BTreeSet<&str> = seen
            .iter()
            .filter(|(b, _)| b == "cinder-volume")
            .map(|(_, h)| h.split('@').next().unwrap_or_default())
            .collect();
        let volume_nodes = nodes_of("cinder-volume");
        assert!(
            (1..=volume_nodes.len()).contains(&volume_hosts.len()),
            "cinder-volume recorded on {volume_hosts:?}, running on the nodes {volume_nodes:?}"
        );
        report.push(format!("cinder {}", cinder.len()));
    }

    // neutron: one live agent of each type per node.
    let agents = rows(
        &get(format!("{}/v2.0/agents", url("neutron-server", 9696)?)).await?,
        "agents",
    )?;
    let mut seen = std::collections::BTreeSet::new();
    for a in &agents {
        let (kind, host) = (text(a, "agent_type"), text(a, "host"));
        assert_eq!(a["alive"], true, "neutron agent {kind} on {host}: {a}");
        assert!(
            seen.insert((kind.clone(), host.clone())),
            "recorded twice: {a}"
        );
    }
    // The agents run on their node's network: no more hosts than nodes run them.
    let agent_hosts: std::collections::BTreeSet<&str> =
        seen.iter().map(|(_, h)| h.as_str()).collect();
    let agent_nodes = nodes_of("neutron-openvswitch-agent");
    assert!(
        (1..=agent_nodes.len()).contains(&agent_hosts.len()),
        "neutron agents on {agent_hosts:?}, the Open vSwitch agent on the nodes {agent_nodes:?}"
    );
    report.push(format!("neutron agents {}", agents.len()));

    // heat: one record per engine process, each of a running heat-engine pod (an engine that
    // stops deletes its record).
    if addresses.contains_key("heat-api") {
        let engines = pods_of("heat-engine");
        let heat = rows(
            &get(format!("{}/v1/{project}/services", url("heat-api", 8004)?)).await?,
            "services",
        )?;
        anyhow::ensure!(!heat.is_empty(), "heat has no engine records");
        for r in &heat {
            let (hostname, status) = (text(r, "hostname"), text(r, "status"));
            assert!(
                engines.contains(&hostname),
                "heat engine record of {hostname}, not a running heat-engine pod ({engines:?}): {r}"
            );
            assert_eq!(status, "up", "heat engine record of {hostname}: {r}");
        }
        report.push(format!("heat engines {}", heat.len()));
    }
    eprintln!(
        "service records after the upgrade, all up and of running services: {}",
        report.join(", ")
    );
    Ok(())
}

/// What the real node says about the guests' network after a failed `kstack verify` or tempest
/// run, each part best effort: the cloud's pods that restarted, dnsmasq's DHCP lines (from the
/// DHCP agent's container), Open vSwitch's ports and their VLAN tags, the machine's neighbours
/// on the external network and the routers' and DHCP servers' namespaces with their addresses,
/// the Neutron agents' and server's last warnings and errors.
async fn network_diagnostics(client: &kube::Client, cloud: &Cloud) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &cloud.ns.name);
    let list = match pods.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) => return format!("the cloud's pods could not be listed: {e}"),
    };
    let mut out = vec!["== the guests' network, as the real node saw it".to_owned()];
    for p in &list {
        for c in p
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
        {
            if c.restart_count > 0 {
                let last = c
                    .last_state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .map(|t| {
                        format!(
                            "{} (exit {}) at {:?}",
                            t.reason.as_deref().unwrap_or("?"),
                            t.exit_code,
                            t.finished_at
                        )
                    })
                    .unwrap_or_default();
                out.push(format!(
                    "restarted: {}/{} {} times, last {last}",
                    p.metadata.name.as_deref().unwrap_or("?"),
                    c.name,
                    c.restart_count
                ));
            }
        }
    }
    let named = |prefix: &str| {
        list.iter()
            .filter(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .filter_map(|p| Some((p.metadata.name.clone()?, p.metadata.uid.clone()?)))
            .next()
    };
    // dnsmasq writes to a file in the DHCP agent's container: read through the agent's
    // process (whose name the kernel cuts to 15 characters).
    let dhcp = named("neutron-dhcp-agent-")
        .ok_or_else(|| anyhow::anyhow!("no DHCP agent pod"))
        .and_then(|(_, uid)| processes(&[uid], "neutron-dhcp-ag"))
        .and_then(|pids| {
            let pid = pids.first().context("no neutron-dhcp-agent process runs")?;
            Ok(std::fs::read_to_string(format!(
                "/proc/{pid}/root/var/log/kolla/neutron/dnsmasq.log"
            ))?)
        });
    match dhcp {
        Ok(log) => {
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("DHCP") || l.contains("started"))
                .collect();
            out.push(format!(
                "dnsmasq, its last {} DHCP lines:",
                lines.len().min(30)
            ));
            out.extend(
                lines[lines.len().saturating_sub(30)..]
                    .iter()
                    .map(|l| format!("  {l}")),
            );
        }
        Err(e) => out.push(format!("dnsmasq's log could not be read: {e}")),
    }
    let ports = match named("openvswitch-vswitchd-") {
        Some((pod, _)) => run_in_pod(&pods, &pod, "ovs-vswitchd", OVS_PORT_TAGS, &[], "")
            .await
            .map(|csv| csv.lines().collect::<Vec<_>>().join(" ")),
        None => Err(anyhow::anyhow!("no openvswitch-vswitchd pod")),
    };
    match ports {
        Ok(p) => out.push(format!("Open vSwitch ports (name,tag): {p}")),
        Err(e) => out.push(format!("Open vSwitch's ports could not be read: {e}")),
    }
    // The integration bridge's OpenFlow rules with their packet counts (the security groups'
    // among them): between a tagged guest port and a tagged DHCP port, what held the packets.
    let counted = match named("openvswitch-vswitchd-") {
        Some((pod, _)) => {
            run_in_pod(
                &pods,
                &pod,
                "ovs-vswitchd",
                &["ovs-ofctl", "--names", "dump-flows", "br-int"],
                &[],
                "",
            )
            .await
        }
        None => Err(anyhow::anyhow!("no openvswitch-vswitchd pod")),
    };
    match counted {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            out.push(format!(
                "br-int's OpenFlow rules ({}, the first 300):",
                lines.len()
            ));
            out.extend(lines.iter().take(300).map(|l| format!("  {}", l.trim())));
        }
        Err(e) => out.push(format!("br-int's OpenFlow rules could not be read: {e}")),
    }
    out.extend(host_network());
    for service in [
        "neutron-server",
        "neutron-openvswitch-agent",
        "neutron-dhcp-agent",
        "neutron-l3-agent",
        "nova-compute",
    ] {
        match cloud.run(&["logs", service, "--tail", "3000"]).await {
            Ok(o) => {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                let bad: Vec<String> = text
                    .lines()
                    .filter(|l| l.contains(" WARNING ") || l.contains(" ERROR "))
                    .map(|l| l.chars().take(300).collect())
                    .collect();
                out.push(format!(
                    "{service}: {} warnings and errors, the last 8:",
                    bad.len()
                ));
                out.extend(
                    bad[bad.len().saturating_sub(8)..]
                        .iter()
                        .map(|l| format!("  {l}")),
                );
            }
            Err(e) => out.push(format!("kstack logs {service}: {e}")),
        }
    }
    out.join("\n")
}

/// The machine's side of the guests' network: its neighbours on the external network (where a
/// floating IP answers ARP, and with which MAC), and each router's and DHCP server's namespace
/// with its addresses (a router left behind by a deleted one would answer for its addresses).
fn host_network() -> Vec<String> {
    let run = |args: &[&str]| -> String {
        match std::process::Command::new("ip").args(args).output() {
            Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
            Err(e) => format!("ip {}: {e}", args.join(" ")),
        }
    };
    let mut out = vec![format!(
        "neighbours on {PUBLIC}/24: {}",
        run(&["neigh", "show", "to", &format!("{PUBLIC}/24")]).replace('\n', "; ")
    )];
    for ns in run(&["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("qrouter-") || n.starts_with("qdhcp-"))
    {
        let addrs = run(&["-n", ns, "-brief", "address"]);
        out.push(format!("{ns}: {}", addrs.replace('\n', "; ")));
    }
    out
}

/// The port history printed when tempest fails: ovs-vsctl's CSV read back, and one line per
/// change of the port, or of whether the guest's packets come, for the MACs the output names.
#[test]
fn a_failed_guests_port_history_shows_when_its_packets_stopped() {
    let line = r#"tap1d2806d5-81,-1,"{attached-mac=""fa:16:3e:a2:9e:3b"", iface-id=""1d28""}",{},[],"""could not open network device tap1d2806d5-81 (No such device)""""#;
    assert_eq!(
        csv_fields(line),
        [
            "tap1d2806d5-81",
            "-1",
            r#"{attached-mac="fa:16:3e:a2:9e:3b", iface-id="1d28"}"#,
            "{}",
            "[]",
            r#""could not open network device tap1d2806d5-81 (No such device)""#,
        ]
    );
    let at = |s: u32| chrono::DateTime::from_timestamp(i64::from(s), 0).unwrap_or_default();
    let sample = |t: u32, ofport: &str, rx: u64| PortSample {
        at: at(t),
        name: "tapa".into(),
        mac: "fa:16:3e:00:00:01".into(),
        ofport: ofport.into(),
        tag: "4".into(),
        link: "up".into(),
        error: String::new(),
        rx,
        tx: 0,
        dropped: 0,
    };
    let ports = GuestPorts {
        samples: std::sync::Arc::new(std::sync::Mutex::new(vec![
            sample(0, "7", 1),
            sample(5, "7", 2),
            sample(10, "7", 3),
            sample(15, "-1", 3),
            sample(20, "7", 3),
            sample(25, "7", 3),
            sample(30, "7", 3),
        ])),
        task: None,
    };
    let history = ports.history_of_macs_in("'OS-EXT-IPS-MAC:mac_addr': 'fa:16:3e:00:00:01'");
    let times: Vec<&str> = history
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    // The first sample, the reboot (-1), the port back, when rx stopped moving (the sample at
    // 15 s is the first without a new packet), and the last.
    assert_eq!(
        times,
        ["00:00:00", "00:00:15", "00:00:20", "00:00:30"],
        "{history}"
    );
    // No MAC in the output (a class whose setup failed): every port's history.
    let every = ports.history_of_macs_in("no MAC here");
    assert!(every.contains("every guest port"), "{every}");
    assert_eq!(
        every.lines().filter(|l| l.contains(" tapa ")).count(),
        4,
        "{every}"
    );
}
