//! How long the status page takes to load with many hosts.
//!
//!     cargo build --release -p kstack-inventory --example page_bench
//!     $CARGO_TARGET_DIR/release/examples/page_bench [--hosts N] [--labels L] [--runs R] [--postgres URL]
//!
//! Fills a fresh SQLite database (or a fresh schema of the PostgreSQL database at URL) with N
//! hosts (default 1,000; one in ten locked) of L labels each (default 5), gives the page a
//! cloud of 23 services with 5 recorded generations each (a fake `CloudStatus`: the Kubernetes
//! provider keeps its snapshot in memory, so reading it costs the same), serves the real router
//! on 127.0.0.1 and loads `GET /status` R times (default 50) over HTTP with a reader token,
//! as a browser would. Prints the time to the whole body (min, median, p95, max) and its size,
//! then the same for `/status/live` (what the script fetches after a change), then where the
//! time goes: reading the store and rendering the HTML, in-process. With `--browser`, headless
//! Chromium (Debian's `chromium`) signs in and loads the page R times (at most 20), printing
//! the Navigation Timing figures: the whole document received, DOMContentLoaded, the load
//! event, and the page live (its script connected to the event stream).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstack_inventory::model::{Administrative, HostCreate, Personality};
use kstack_inventory::page::{View, render_page};
use kstack_inventory::{NoNodeSync, Role, Tokens, router};
use kstack_ports::cloud::{
    FakeCloudStatus, Generation, Health, Service, Snapshot, sample_deploy_steps,
};

const READER: &str = "bench-reader-0123456789abcdef0123456789";

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn number(args: &[String], name: &str, default: usize) -> usize {
    match arg(args, name) {
        None => default,
        Some(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("page_bench: {name} {v:?} is not a number");
            std::process::exit(2)
        }),
    }
}

fn cloud() -> Snapshot {
    let names = [
        ("mariadb", vec![]),
        ("memcached", vec![]),
        ("rabbitmq", vec![]),
        ("openvswitch-db-server", vec![]),
        ("openvswitch-vswitchd", vec!["openvswitch-db-server"]),
        ("keystone", vec!["mariadb", "memcached"]),
        ("glance-api", vec!["keystone", "mariadb"]),
        ("placement-api", vec!["keystone", "mariadb"]),
        (
            "nova-api",
            vec!["keystone", "mariadb", "rabbitmq", "placement-api"],
        ),
        ("nova-scheduler", vec!["nova-api"]),
        ("nova-conductor", vec!["nova-api"]),
        ("nova-novncproxy", vec!["nova-api"]),
        ("nova-libvirt", vec![]),
        (
            "nova-compute",
            vec!["nova-conductor", "nova-libvirt", "neutron-server"],
        ),
        ("neutron-server", vec!["keystone", "mariadb", "rabbitmq"]),
        (
            "neutron-openvswitch-agent",
            vec!["neutron-server", "openvswitch-vswitchd"],
        ),
        ("neutron-dhcp-agent", vec!["neutron-server"]),
        ("neutron-l3-agent", vec!["neutron-server"]),
        ("neutron-metadata-agent", vec!["neutron-server"]),
        ("heat-api", vec!["keystone", "mariadb", "rabbitmq"]),
        ("heat-api-cfn", vec!["heat-api"]),
        ("heat-engine", vec!["heat-api"]),
        ("horizon", vec!["keystone", "memcached"]),
    ];
    let mut services: Vec<Service> = names
        .iter()
        .map(|(n, d)| Service {
            name: n.to_string(),
            kind: "Deployment".into(),
            ready: 3,
            desired: 3,
            generation: Some(5),
            health: Health::Healthy,
            reason: None,
            depends_on: d.iter().map(|s| s.to_string()).collect(),
            history: (1..=5)
                .rev()
                .map(|g| Generation {
                    generation: g,
                    deploy_generation: g,
                    time: format!("2026-11-2{g}T12:00:00Z"),
                    outcome: "healthy".into(),
                    images: vec![format!("kstack.local/kolla/{n}:2025.1-debian-bookworm")],
                })
                .collect(),
            last_deploy: sample_deploy_steps(),
        })
        .collect();
    services.sort_by(|a, b| a.name.cmp(&b.name));
    Snapshot {
        namespace: "openstack".into(),
        deploy_generation: Some(5),
        services,
        problem: None,
    }
}

fn stats(label: &str, mut times: Vec<Duration>, bytes: usize) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "{label:<34} min {:7.2} ms  median {:7.2} ms  p95 {:7.2} ms  max {:7.2} ms  ({} runs, {} KiB)",
        ms(times[0]),
        ms(p(0.5)),
        ms(p(0.95)),
        ms(*times.last().unwrap()),
        times.len(),
        bytes / 1024
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let hosts = number(&args, "--hosts", 1000);
    let labels = number(&args, "--labels", 5);
    let runs = number(&args, "--runs", 50).max(1);
    let browser = args.iter().any(|a| a == "--browser");
    let dir = tempfile::tempdir()?;
    let (backend, url) = match arg(&args, "--postgres") {
        Some(base) => {
            use sqlx::Connection;
            let schema = format!("page_bench_{}", uuid::Uuid::new_v4().simple());
            let mut conn = sqlx::PgConnection::connect(&base).await?;
            sqlx::query(&format!("CREATE SCHEMA {schema}"))
                .execute(&mut conn)
                .await?;
            let sep = if base.contains('?') { '&' } else { '?' };
            (
                "postgres",
                format!("{base}{sep}options=-c%20search_path%3D{schema}"),
            )
        }
        None => (
            "sqlite",
            dir.path().join("inventory.db").display().to_string(),
        ),
    };
    let tokens = Tokens::new(BTreeMap::from([(READER.to_string(), Role::Reader)]))?;
    let state = kstack_inventory::state(&url, tokens, Arc::new(NoNodeSync))
        .await?
        .with_cloud(Arc::new(FakeCloudStatus::new(cloud())));

    let t = Instant::now();
    for i in 0..hosts {
        let personality = match i % 10 {
            0..=1 => Personality::Controller,
            9 => Personality::Storage,
            _ => Personality::Compute,
        };
        let host = state
            .store
            .create_host(&HostCreate {
                hostname: format!("node-{i:05}"),
                personality,
                administrative: Some(if i % 10 == 3 {
                    Administrative::Locked
                } else {
                    Administrative::Unlocked
                }),
                operational: None,
            })
            .await?;
        let mut l = BTreeMap::new();
        for j in 0..labels {
            l.insert(
                format!("kstack.io/label-{j}"),
                format!("value-{}", (i + j) % 7),
            );
        }
        if !l.is_empty() {
            state.store.assign_labels(&host.uuid, &l, false).await?;
        }
    }
    eprintln!(
        "page_bench: {hosts} hosts with {labels} labels each in {backend} ({:.1} s to fill)",
        t.elapsed().as_secs_f64()
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = router(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::new();
    for path in ["/status", "/status/live"] {
        let mut times = Vec::with_capacity(runs);
        let mut size = 0;
        // One warm-up load (connection, database pool, caches).
        http.get(format!("{base}{path}"))
            .bearer_auth(READER)
            .send()
            .await?
            .bytes()
            .await?;
        for _ in 0..runs {
            let t = Instant::now();
            let r = http
                .get(format!("{base}{path}"))
                .bearer_auth(READER)
                .send()
                .await?;
            if !r.status().is_success() {
                return Err(format!("GET {path}: {}", r.status()).into());
            }
            let body = r.bytes().await?;
            times.push(t.elapsed());
            size = body.len();
        }
        stats(&format!("GET {path} over HTTP ({backend})"), times, size);
    }

    let mut read = Vec::with_capacity(runs);
    let mut render = Vec::with_capacity(runs);
    let mut size = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let view = View::read(&state).await?;
        read.push(t.elapsed());
        let t = Instant::now();
        size = render_page(&view).len();
        render.push(t.elapsed());
    }
    stats(&format!("  of which: read store ({backend})"), read, 0);
    stats("  of which: render HTML", render, size);
    if browser {
        browser_loads(&base, runs.min(20)).await;
    }
    Ok(())
}

/// Loads the page `runs` times in headless Chromium, signed in as a reader.
async fn browser_loads(base: &str, runs: usize) {
    use kstack_inventory::browser::{Browser, chromium};
    let Some(bin) = chromium() else {
        eprintln!("page_bench: --browser needs chromium on the PATH (apt-get install chromium)");
        std::process::exit(2)
    };
    let mut b = Browser::launch(&bin).await;
    b.call(
        "Page.navigate",
        serde_json::json!({"url": format!("{base}/status")}),
    )
    .await
    .unwrap();
    assert!(
        b.wait_for("document.getElementById('token')", Duration::from_secs(30))
            .await
    );
    b.eval(&format!(
        "document.getElementById('token').value = '{READER}'; document.forms[0].submit(); true"
    ))
    .await
    .unwrap();
    let live = "!window.__old && document.getElementById('conn') \
                && document.getElementById('conn').dataset.state === 'live' \
                && performance.getEntriesByType('navigation')[0].loadEventEnd > 0";
    assert!(
        b.wait_for(live, Duration::from_secs(30)).await,
        "the page never went live"
    );
    let (mut received, mut dcl, mut load, mut live_at) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        b.eval("window.__old = true; true").await.unwrap();
        let t = Instant::now();
        b.call(
            "Page.navigate",
            serde_json::json!({"url": format!("{base}/status")}),
        )
        .await
        .unwrap();
        assert!(
            b.wait_for(live, Duration::from_secs(30)).await,
            "the page never went live"
        );
        live_at.push(t.elapsed());
        let nav = b
            .eval("performance.getEntriesByType('navigation')[0].toJSON()")
            .await
            .unwrap();
        let at = |k: &str| Duration::from_secs_f64(nav[k].as_f64().unwrap_or(0.0) / 1000.0);
        received.push(at("responseEnd"));
        dcl.push(at("domContentLoadedEventEnd"));
        load.push(at("loadEventEnd"));
    }
    let _ = b.child.kill().await;
    stats("browser: document received", received, 0);
    stats("browser: DOMContentLoaded", dcl, 0);
    stats("browser: load event", load, 0);
    stats("browser: live (as seen by the bench)", live_at, 0);
}
