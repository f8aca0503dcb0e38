//! The real cloud grown to a second real node (`kstack dev up --real-nodes 2`), as an operator
//! adds a compute host: the node joins, the images are imported there, `kstack deploy` puts
//! nova-compute, libvirt, Open vSwitch and its agent on it, tenant networks become VLANs on the
//! nodes' tunnel network. Then what a second compute host is for:
//! - `kstack verify`'s two servers go to different hosts and reach each other across them;
//! - a guest live-migrates onto the new host while a client keeps connecting to it;
//! - the inventory's lock of that host (`kstack host-lock`) moves its two guests off, live,
//!   before it taints the node, and the guests keep answering; the unlock gives it back.
//!
//! The node leaves again at the end, whatever happened: the tests after this one expect one
//! real node.
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::FutureExt as _;
use kstack_e2e::cloud::Cloud;
use kstack_k8s::api::core::v1::{Node, Pod};
use kstack_ports::ComputeHosts;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use crate::support::{LoadSwitch, admin_password, public_ca, run_in_pod};

/// The second real node's name, which is also its host name and so nova's name of its compute
/// host.
const NODE2: &str = "kstack-real-2";

/// The dev cluster's script, with the environment hack/test.sh gave this test (its cluster's
/// directory and ports).
async fn devcluster(args: &[&str]) -> anyhow::Result<String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/devcluster.sh");
    let out = tokio::process::Command::new("bash")
        .arg(&script)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "devcluster.sh {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The cloud on two real nodes; `globals` are the cloud's globals so far (the external
/// interface `kstack-ext0` among them).
pub async fn guests_cross_nodes_and_move_off_a_locked_host(
    cloud: &Cloud,
    client: &kube::Client,
    globals: &str,
) -> anyhow::Result<()> {
    let images = std::env::var("KSTACK_E2E_IMAGES").context(
        "KSTACK_E2E_IMAGES is not set: the image directory hack/images.sh prints (hack/test.sh sets it)",
    )?;
    let t = Instant::now();
    devcluster(&["up", "--real-nodes", "2"]).await?;
    let up = t.elapsed();
    let result = std::panic::AssertUnwindSafe(async {
        devcluster(&["import", &images]).await?;
        eprintln!(
            "second real node: up in {:.0} s, images imported in {:.0} s",
            up.as_secs_f64(),
            (t.elapsed() - up).as_secs_f64()
        );
        on_two_nodes(cloud, client, globals).await
    })
    .catch_unwind()
    .await;
    // Back to one real node whatever happened; its guests were deleted (or are lost with it).
    let shrunk = devcluster(&["up", "--real-nodes", "1"]).await;
    match result {
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(r) => r?,
    }
    shrunk.map(|_| ())
}

async fn on_two_nodes(cloud: &Cloud, client: &kube::Client, globals: &str) -> anyhow::Result<()> {
    // Tenant networks as VLANs on the tunnel network between the nodes (`kstack-tun`, physnet2),
    // the external network where it was (docs/REAL-NODE.md, "The cloud across two nodes").
    let single = "neutron_external_interface: kstack-ext0\n";
    anyhow::ensure!(globals.contains(single), "the globals have no {single:?}");
    cloud.set_globals(&format!(
        "{}neutron_tenant_network_types: \"vlan\"\n",
        globals.replace(
            single,
            "neutron_external_interface: kstack-ext0,kstack-tun\n"
        )
    ))?;
    let neutron = cloud.dir.path().join("config/neutron");
    std::fs::create_dir_all(&neutron)?;
    std::fs::write(
        neutron.join("ml2_conf.ini"),
        "[ml2_type_vlan]\nnetwork_vlan_ranges = physnet2:100:199\n",
    )?;
    let (code, report, stderr) = cloud.deploy().await?;
    assert_eq!(code, 0, "deploy onto two nodes failed: {report}\n{stderr}");
    eprintln!(
        "deploy with a second compute node and VLAN tenant networks: {} s",
        report["seconds"]
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &cloud.ns.name);
    let on_node2: Vec<String> = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={NODE2}")))
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    for service in [
        "nova-compute",
        "nova-libvirt",
        "openvswitch-vswitchd",
        "neutron-openvswitch-agent",
    ] {
        assert!(
            on_node2
                .iter()
                .any(|p| p.starts_with(&format!("{service}-"))),
            "no {service} pod on {NODE2}: {on_node2:?}"
        );
    }
    new_host_is_mapped(&pods).await?;

    // A user's view: verify's two servers land on different hosts (soft anti-affinity) and
    // ping each other through the router. Two runs keep a guest each, for the moves below.
    let verify = |run: &'static str| async move {
        let out = crate::verify_keeping_a_guest(cloud).await?;
        let v: Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "verify ({run}) printed no JSON: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        anyhow::Ok((out.status.success(), v))
    };
    let t = Instant::now();
    let (a, b) = tokio::join!(verify("first"), verify("second"));
    let (a, b) = (a?, b?);
    let mut kept = Vec::new();
    for (_, v) in [&a, &b] {
        match crate::KeptGuest::read(v) {
            Ok(k) => kept.push(k),
            // A run that failed before its guest had an address kept what it made all the same.
            Err(_) => {
                if let Some(prefix) = v["kept"]["prefix"].as_str() {
                    let _ = cloud.run(&["verify", "--delete", prefix]).await;
                }
            }
        }
    }
    let outcome = std::panic::AssertUnwindSafe(async {
        for (ok, v) in [&a, &b] {
            assert!(ok, "kstack verify on two nodes failed: {v}");
        }
        let server = |v: &Value| {
            v["steps"]
                .as_array()
                .and_then(|s| s.iter().find(|s| s["step"] == "server"))
                .and_then(|s| s["detail"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let nova = nova(cloud, client).await?;
        let services = nova.services().await?;
        for (_, v) in [&a, &b] {
            let d = server(v);
            assert!(
                d.contains("on another compute host than the first")
                    && d.contains("answered the first one's ping")
                    && d.contains("logged in over SSH"),
                "{d}\ncompute services: {services:?}"
            );
        }
        eprintln!(
            "two verify runs at once on two nodes: {:.0} s, each with its two servers on different hosts",
            t.elapsed().as_secs_f64()
        );
        anyhow::ensure!(kept.len() == 2, "the verify runs kept {} guests", kept.len());
        guests_move(cloud, client, &nova, &kept).await
    })
    .catch_unwind()
    .await;
    for k in &kept {
        let _ = k.delete(cloud).await;
    }
    match outcome {
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(r) => r,
    }
}

/// Waits until nova has mapped the new compute host to its cell (`nova-manage cell_v2
/// list_hosts`, in nova-conductor's pod): the scheduler's periodic discovery does it within
/// `discover_hosts_in_cells_interval` of the host's first report; a server placed there before
/// would fail ("not mapped to any cell").
async fn new_host_is_mapped(pods: &Api<Pod>) -> anyhow::Result<()> {
    let conductor = pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.metadata.name)
        .find(|n| n.starts_with("nova-conductor-"))
        .context("no running nova-conductor pod")?;
    let t = Instant::now();
    let mut last = String::new();
    while t.elapsed() < Duration::from_secs(180) {
        match run_in_pod(
            pods,
            &conductor,
            "nova-conductor",
            // A session of its own: oslo.messaging reads its process group's /proc entry,
            // which nsenter's child (in the pod's PID namespace, its group outside) lacks.
            &[
                "setsid",
                "setpriv",
                "--reuid=nova",
                "--regid=nova",
                "--init-groups",
                "/var/lib/kolla/venv/bin/nova-manage",
                "cell_v2",
                "list_hosts",
            ],
            &[],
            "",
        )
        .await
        {
            Ok(out) if out.contains(NODE2) => {
                eprintln!(
                    "{NODE2} mapped to its cell {:.0} s after the deploy",
                    t.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            Ok(out) => last = out,
            Err(e) => last = format!("{e:#}"),
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    anyhow::bail!("{NODE2} not mapped to a cell 180 s after the deploy: {last}")
}

/// Nova as the cloud's admin sees it, through the public endpoints (kstack's CA trusted).
async fn nova(
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<kstack_verify::compute::Nova> {
    let creds = kstack_verify::compute::Credentials {
        auth_url: format!("https://{}:5000", crate::PUBLIC),
        username: "admin".into(),
        password: kstack_verify::Password::new(admin_password(cloud)?),
        project_name: "admin".into(),
        user_domain: "Default".into(),
        project_domain: "Default".into(),
        region: "RegionOne".into(),
        interface: kstack_verify::Interface::Public,
        ca_pem: Some(public_ca(client, &cloud.ns.name).await?.into_bytes()),
    };
    Ok(kstack_verify::compute::Nova::new(
        creds,
        Duration::from_secs(90),
    )?)
}

/// Waits until the instance is ACTIVE with no task on `host`.
async fn settled_on(
    nova: &dyn ComputeHosts,
    id: &str,
    host: &str,
    limit: Duration,
) -> anyhow::Result<()> {
    let t = Instant::now();
    loop {
        let i = nova.instance(id).await?.context("the instance is gone")?;
        if i.status == "ACTIVE" && i.task_state.is_none() && i.host.as_deref() == Some(host) {
            return Ok(());
        }
        anyhow::ensure!(
            t.elapsed() < limit && i.status != "ERROR",
            "instance {id} not ACTIVE on {host} after {:.0} s: {i:?}",
            t.elapsed().as_secs_f64()
        );
        // A migration that failed leaves the instance ACTIVE and idle where it was.
        anyhow::ensure!(
            !(i.status == "ACTIVE"
                && i.task_state.is_none()
                && t.elapsed() > Duration::from_secs(20)),
            "instance {id} is ACTIVE on {:?}, not {host}, with no task {:.0} s after it was told to move: nova's instance actions say why",
            i.host,
            t.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Both kept guests onto the new host (a live migration each, with a client connecting to its
/// SSH port once a second), then the inventory's lock of that host moves them off again before
/// it taints the node; the unlock gives the host back.
async fn guests_move(
    cloud: &Cloud,
    client: &kube::Client,
    nova: &kstack_verify::compute::Nova,
    kept: &[crate::KeptGuest],
) -> anyhow::Result<()> {
    let services = nova.services().await?;
    let node1 = services
        .iter()
        .find(|s| s.host != NODE2 && s.up && s.enabled)
        .map(|s| s.host.clone())
        .with_context(|| format!("no other compute host up and enabled: {services:?}"))?;
    let ids: Vec<String> = kept
        .iter()
        .map(|k| {
            k.kept
                .server_id
                .clone()
                .context("a kept guest without server")
        })
        .collect::<anyhow::Result<_>>()?;

    // Onto the new host: the other host disabled for the moment, so the scheduler picks it.
    nova.set_enabled(&node1, false, "kstack e2e: moving guests to the new host")
        .await?;
    let moved = std::panic::AssertUnwindSafe(async {
        let mut migrated = 0;
        for (k, id) in kept.iter().zip(&ids) {
            if nova.instance(id).await?.and_then(|i| i.host).as_deref() == Some(NODE2) {
                eprintln!("guest {id} already on {NODE2} (placed there by the scheduler)");
                continue;
            }
            let stop = LoadSwitch::new();
            let probe = tokio::spawn(crate::reachability(k.address()?, stop.clone()));
            let t = Instant::now();
            nova.live_migrate(id).await?;
            settled_on(nova, id, NODE2, Duration::from_secs(300)).await?;
            let took = t.elapsed();
            tokio::time::sleep(Duration::from_secs(3)).await;
            stop.stop();
            let reach = probe.await?;
            eprintln!(
                "live migration of {id} from {node1} to {NODE2}: {:.1} s; its SSH port answered {} of {} connects (one a second), the longest gap {:.1} s",
                took.as_secs_f64(),
                reach.answered,
                reach.probes,
                reach.longest_gap.as_secs_f64()
            );
            assert!(
                reach.longest_gap <= Duration::from_secs(5),
                "the guest stopped answering for {:?} during its live migration: {reach:?}",
                reach.longest_gap
            );
            migrated += 1;
        }
        anyhow::Ok(migrated)
    })
    .catch_unwind()
    .await;
    nova.set_enabled(&node1, true, "").await?;
    let migrated = match moved {
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(r) => r?,
    };
    // A lock right after these moves once failed to live-migrate both guests back (the lock then
    // tried cold migrations, which need SSH between the hosts): nova finishes a live migration
    // on the source host after the instance is ACTIVE on the destination. Until the lock waits
    // for that itself, the test leaves it the time.
    if migrated > 0 {
        tokio::time::sleep(Duration::from_secs(30)).await;
    }

    // The lock, as an operator does it: the inventory service with the cloud's compute
    // service, the host registered, `kstack host-lock`.
    let inventory = Inventory::start(cloud, client).await?;
    let add = inventory
        .kstack(cloud, &["host-add", NODE2, "--personality", "compute"])
        .await?;
    anyhow::ensure!(add.status.success(), "host-add: {}", stderr(&add));
    let stop = LoadSwitch::new();
    let probes: Vec<_> = kept
        .iter()
        .map(|k| {
            k.address()
                .map(|a| tokio::spawn(crate::reachability(a, stop.clone())))
        })
        .collect::<anyhow::Result<_>>()?;
    let t = Instant::now();
    let lock = inventory.kstack(cloud, &["host-lock", NODE2]).await?;
    let locked_in = t.elapsed();
    stop.stop();
    let mut reaches = Vec::new();
    for p in probes {
        reaches.push(p.await?);
    }
    anyhow::ensure!(
        lock.status.success(),
        "host-lock {NODE2}: {}\n{}",
        String::from_utf8_lossy(&lock.stdout),
        stderr(&lock)
    );
    for id in &ids {
        settled_on(nova, id, &node1, Duration::from_secs(60)).await?;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let tainted = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.effect == "NoExecute"))
    };
    assert!(
        tainted(&nodes.get(NODE2).await?),
        "{NODE2} has no NoExecute taint after its lock"
    );
    eprintln!(
        "kstack host-lock {NODE2} with 2 guests on it: {:.1} s, both live-migrated (not rebooted, checked below) and ACTIVE on {node1}; their SSH ports answered {}",
        locked_in.as_secs_f64(),
        reaches
            .iter()
            .map(|r| format!(
                "{} of {} connects (longest gap {:.1} s)",
                r.answered,
                r.probes,
                r.longest_gap.as_secs_f64()
            ))
            .collect::<Vec<_>>()
            .join(" and ")
    );
    for r in &reaches {
        assert!(
            r.longest_gap <= Duration::from_secs(5),
            "a guest stopped answering for {:?} while its host was locked: {r:?}",
            r.longest_gap
        );
    }
    // Moved live, not rebooted: each has been up since before its verify run ended.
    for k in kept {
        let up = kstack_verify::kept_guest_uptime(&k.kept, &k.secrets, Duration::from_secs(30))
            .await
            .map_err(anyhow::Error::msg)?;
        assert!(
            up >= k.since.elapsed(),
            "guest {:?} up {up:?} only: it restarted",
            k.kept.server_id
        );
    }

    let unlock = inventory.kstack(cloud, &["host-unlock", NODE2]).await?;
    anyhow::ensure!(unlock.status.success(), "host-unlock: {}", stderr(&unlock));
    assert!(
        !tainted(&nodes.get(NODE2).await?),
        "{NODE2} still tainted after its unlock"
    );
    let service = nova
        .services()
        .await?
        .into_iter()
        .find(|s| s.host == NODE2)
        .context("no compute service of the unlocked host")?;
    assert!(
        service.enabled,
        "{NODE2}'s compute service still disabled after the unlock: {service:?}"
    );
    eprintln!("kstack host-unlock {NODE2}: the taint gone, its compute service enabled");
    Ok(())
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `kstack inventory serve` with the cloud's compute service (an admin's OpenStack variables
/// through the public endpoints), syncing the test cluster's nodes; stopped when dropped.
struct Inventory {
    _child: tokio::process::Child,
    url: String,
    token: String,
    _dir: tempfile::TempDir,
}

impl Inventory {
    async fn start(cloud: &Cloud, client: &kube::Client) -> anyhow::Result<Self> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir()?;
        let token = format!("e2e-{:032x}", rand::random::<u128>());
        let tokens = dir.path().join("tokens.yml");
        std::fs::write(&tokens, format!("{token}: admin\n"))?;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600))?;
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, public_ca(client, &cloud.ns.name).await?)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let listen = format!("127.0.0.1:{port}");
        let database = dir.path().join("inventory.db");
        let child = cloud
            .command(&[
                "inventory",
                "serve",
                "--compute-from-env",
                "--listen",
                &listen,
                "--cloud-namespace",
                &cloud.ns.name,
            ])?
            .arg("--database")
            .arg(&database)
            .arg("--tokens")
            .arg(&tokens)
            .env("OS_AUTH_URL", format!("https://{}:5000", crate::PUBLIC))
            .env("OS_USERNAME", "admin")
            .env("OS_PASSWORD", admin_password(cloud)?)
            .env("OS_PROJECT_NAME", "admin")
            .env("OS_INTERFACE", "public")
            .env("OS_CACERT", &ca)
            .kill_on_drop(true)
            .spawn()?;
        let t = Instant::now();
        while tokio::net::TcpStream::connect(&listen).await.is_err() {
            anyhow::ensure!(
                t.elapsed() < Duration::from_secs(30),
                "the inventory service did not listen on {listen} in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Inventory {
            _child: child,
            url: format!("http://{listen}"),
            token,
            _dir: dir,
        })
    }

    /// `kstack ARGS` on `cloud`'s config directory, as a client of this service.
    async fn kstack(&self, cloud: &Cloud, args: &[&str]) -> anyhow::Result<std::process::Output> {
        Ok(cloud
            .command(args)?
            .env("KSTACK_INVENTORY_URL", &self.url)
            .env("KSTACK_INVENTORY_TOKEN", &self.token)
            .output()
            .await?)
    }
}
