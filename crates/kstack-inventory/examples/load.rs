//! Load benchmark of the inventory service, in-process.
//!
//!     cargo run -p kstack-inventory --example load -- [--postgres URL] [--clients N] [--secs S]
//!
//! Starts the router on 127.0.0.1 (NodeSync = a counting no-op, no Kubernetes), creates
//! hosts with labels, then drives N concurrent reqwest clients for a fixed time per operation:
//! `GET /v1/ihosts/{uuid}/labels` and `POST /v1/labels/{uuid}?overwrite=true`.
//! Prints requests/s and p50/p99 latency per operation per backend, then times
//! `audit_once` over 1,000 hosts through the counting NodeSync (in-process, not Kubernetes).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kstack_inventory::{AppState, NodeSync, Role, audit_once, router};

const TOKEN: &str = "load-admin-0123456789abcdef0123456789";

#[derive(Default)]
struct CountingSync {
    apply: AtomicUsize,
    lock: AtomicUsize,
    delete: AtomicUsize,
}

#[async_trait::async_trait]
impl NodeSync for CountingSync {
    async fn apply_labels(
        &self,
        _hostname: &str,
        _labels: &BTreeMap<String, String>,
        _managed_keys: &[String],
    ) -> Result<(), kstack_inventory::SyncError> {
        self.apply.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    async fn set_locked(
        &self,
        _hostname: &str,
        _locked: bool,
    ) -> Result<(), kstack_inventory::SyncError> {
        self.lock.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    async fn delete_node(&self, _hostname: &str) -> Result<(), kstack_inventory::SyncError> {
        self.delete.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

struct Args {
    postgres: Option<String>,
    clients: usize,
    secs: u64,
    hosts: usize,
    audit_hosts: usize,
}

fn args() -> Args {
    let mut a = Args {
        postgres: None,
        clients: 16,
        secs: 10,
        hosts: 100,
        audit_hosts: 1000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--postgres" => a.postgres = Some(v),
            "--clients" => a.clients = v.parse().expect("--clients N"),
            "--secs" => a.secs = v.parse().expect("--secs S"),
            "--hosts" => a.hosts = v.parse().expect("--hosts N"),
            "--audit-hosts" => a.audit_hosts = v.parse().expect("--audit-hosts N"),
            _ => panic!("unknown argument {k}"),
        }
    }
    a
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn create_hosts(client: &reqwest::Client, base: &str, prefix: &str, n: usize) -> Vec<String> {
    let mut uuids = Vec::with_capacity(n);
    for i in 0..n {
        let r = client
            .post(format!("{base}/v1/ihosts"))
            .bearer_auth(TOKEN)
            .json(
                &serde_json::json!({"hostname": format!("{prefix}-{i}"), "personality": "compute"}),
            )
            .send()
            .await
            .expect("create host");
        let status = r.status();
        let v: serde_json::Value = r.json().await.expect("json");
        assert!(status.is_success(), "create host: {status} {v}");
        let uuid = v["uuid"].as_str().expect("uuid").to_string();
        let r = client
            .post(format!("{base}/v1/labels/{uuid}"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"zone": "a", "disk": "ssd", "rack": format!("r{}", i % 10)}))
            .send()
            .await
            .expect("labels");
        assert!(r.status().is_success(), "labels: {}", r.status());
        uuids.push(uuid);
    }
    uuids
}

#[derive(Clone, Copy)]
enum Op {
    Get,
    Post,
}

async fn drive(
    client: &reqwest::Client,
    base: &str,
    hosts: &Arc<Vec<String>>,
    op: Op,
    clients: usize,
    secs: u64,
) -> (usize, usize, f64, Vec<Duration>) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        let base = base.to_string();
        let hosts = hosts.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let mut i = c;
            while Instant::now() < deadline {
                let uuid = &hosts[i % hosts.len()];
                i += clients;
                let t = Instant::now();
                let r = match op {
                    Op::Get => {
                        client
                            .get(format!("{base}/v1/ihosts/{uuid}/labels"))
                            .bearer_auth(TOKEN)
                            .send()
                            .await
                    }
                    Op::Post => {
                        client
                            .post(format!("{base}/v1/labels/{uuid}?overwrite=true"))
                            .bearer_auth(TOKEN)
                            .json(&serde_json::json!({"load": format!("v{i}")}))
                            .send()
                            .await
                    }
                };
                let ok = match r {
                    Ok(r) => {
                        let s = r.status();
                        let _ = r.bytes().await;
                        s.is_success()
                    }
                    Err(_) => false,
                };
                lat.push(t.elapsed());
                if !ok {
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.expect("client task");
        all.extend(l);
        errors += e;
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort();
    (all.len(), errors, elapsed, all)
}

async fn bench(backend: &str, url: &str, a: &Args) {
    let sync = Arc::new(CountingSync::default());
    let tokens = kstack_inventory::Tokens::new(BTreeMap::from([(TOKEN.to_string(), Role::Admin)]))
        .expect("tokens");
    let state: AppState = kstack_inventory::state(url, tokens, sync.clone())
        .await
        .expect("open store");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let base = format!("http://{addr}");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(a.clients * 2)
        .build()
        .unwrap();

    let t = Instant::now();
    let hosts = Arc::new(create_hosts(&client, &base, "load", a.hosts).await);
    println!(
        "[{backend}] setup: {} hosts x 3 labels in {:.2}s",
        hosts.len(),
        t.elapsed().as_secs_f64()
    );
    for (name, op) in [
        ("GET  /v1/ihosts/{uuid}/labels", Op::Get),
        ("POST /v1/labels/{uuid}?overwrite=true", Op::Post),
    ] {
        let (n, errors, secs, lat) = drive(&client, &base, &hosts, op, a.clients, a.secs).await;
        println!(
            "[{backend}] {name}: {n} req in {secs:.1}s = {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, errors {errors} ({} clients)",
            n as f64 / secs,
            pct(&lat, 0.50).as_secs_f64() * 1e3,
            pct(&lat, 0.99).as_secs_f64() * 1e3,
            a.clients
        );
    }

    // Audit: bring the host count to audit_hosts, then time one full audit pass.
    let more = a.audit_hosts.saturating_sub(hosts.len());
    let t = Instant::now();
    create_hosts(&client, &base, "audit", more).await;
    println!(
        "[{backend}] setup: {more} more hosts in {:.2}s",
        t.elapsed().as_secs_f64()
    );
    sync.apply.store(0, Ordering::Relaxed);
    sync.lock.store(0, Ordering::Relaxed);
    let t = Instant::now();
    let ok = audit_once(&state).await.expect("audit");
    let el = t.elapsed();
    println!(
        "[{backend}] audit_once over {ok} hosts: {:.1} ms ({:.3} ms/host); NodeSync calls: {} apply_labels, {} set_locked (counting no-op, not Kubernetes)",
        el.as_secs_f64() * 1e3,
        el.as_secs_f64() * 1e3 / ok.max(1) as f64,
        sync.apply.load(Ordering::Relaxed),
        sync.lock.load(Ordering::Relaxed),
    );
}

#[tokio::main]
async fn main() {
    let a = args();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("load.db");
    bench("sqlite", path.to_str().unwrap(), &a).await;
    if let Some(base) = &a.postgres {
        use sqlx::Connection;
        let schema = format!("load_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect(base).await.expect("postgres");
        sqlx::query(&format!("CREATE SCHEMA {schema}"))
            .execute(&mut conn)
            .await
            .unwrap();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        bench("postgres", &url, &a).await;
        sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
            .execute(&mut conn)
            .await
            .unwrap();
        println!("[postgres] dropped schema {schema}");
    }
}
