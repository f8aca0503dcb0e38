//! `serve()` over a real socket with reqwest: auth, a write, the body limit on the wire,
//! the periodic audit reaching NodeSync, HTTPS with a certificate that is reloaded when its
//! files change, and the refusal to send tokens over plain HTTP on a network address.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kstack_inventory::testing::{TestPki, free_port, serve_config};
use kstack_inventory::{RecordingSync, ServeConfig, SyncCall, serve};
use serde_json::{Value, json};

const TOKEN: &str = "serve-test-token-0123456789abcdef0123";

fn config(listen: SocketAddr, db: &std::path::Path, sync: Arc<RecordingSync>) -> ServeConfig {
    serve_config(listen, db, TOKEN, Duration::from_millis(100), sync)
}

/// Waits until `url` answers at all (our own server starting on a port we chose: nothing to
/// watch, so it is tried until it answers).
async fn wait_up(
    client: &reqwest::Client,
    url: &str,
    server: &tokio::task::JoinHandle<Result<(), kstack_inventory::Error>>,
) {
    for _ in 0..200 {
        if client.get(url).send().await.is_ok() {
            return;
        }
        assert!(!server.is_finished(), "server stopped");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("server did not answer at {url}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_over_http_with_audit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inv.db");
    let port = free_port();
    let sync = Arc::new(RecordingSync::default());
    let server = tokio::spawn(serve(config(
        ([127, 0, 0, 1], port).into(),
        &db,
        sync.clone(),
    )));
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_up(&client, &format!("{base}/openapi.json"), &server).await;
    assert!(db.exists(), "SQLite file not created");

    let r = client
        .get(format!("{base}/v1/ihosts"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], 401);

    let r = client
        .post(format!("{base}/v1/ihosts"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"hostname": "compute-9", "personality": "compute", "administrative": "locked"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let host: Value = r.json().await.unwrap();
    let uuid = host["uuid"].as_str().unwrap();

    let big = format!("{{\"k\": \"{}\"}}", "v".repeat(70 * 1024));
    let r = client
        .post(format!("{base}/v1/labels/{uuid}"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], 413);

    let mut audited = false;
    for _ in 0..50 {
        sync.clear();
        tokio::time::sleep(Duration::from_millis(250)).await;
        if sync.calls().contains(&SyncCall::SetLocked {
            hostname: "compute-9".into(),
            locked: true,
        }) {
            audited = true;
            break;
        }
    }
    assert!(audited, "periodic audit never synced the host");
    server.abort();
}

/// Plain HTTP on an address other hosts reach is refused before anything starts, saying what
/// to do; `insecure_http` allows it (behind a proxy that terminates TLS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_a_network_address_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inv.db");
    let sync = Arc::new(RecordingSync::default());
    let port = free_port();
    for ip in [[0, 0, 0, 0], [10, 1, 2, 3]] {
        let err = tokio::time::timeout(
            Duration::from_secs(10),
            serve(config((ip, port).into(), &db, sync.clone())),
        )
        .await
        .expect("serve must refuse at once, not listen")
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("plain HTTP")
                && err.contains("--tls-cert")
                && err.contains("--insecure-http"),
            "{err}"
        );
    }
    assert!(!db.exists(), "nothing may start before the refusal");

    let mut allowed = config(([0, 0, 0, 0], port).into(), &db, sync);
    allowed.insecure_http = true;
    let server = tokio::spawn(serve(allowed));
    wait_up(
        &reqwest::Client::new(),
        &format!("http://127.0.0.1:{port}/openapi.json"),
        &server,
    )
    .await;
    server.abort();
}

fn https_client(ca_pem: &[u8]) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem).unwrap())
        .build()
        .unwrap()
}

/// With a certificate and key the service speaks HTTPS (and only HTTPS) on any address; when
/// the files change it serves the new certificate without a restart, and a broken pair never
/// replaces a working one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_certificate_that_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inv.db");
    let first = TestPki::new(&dir.path().join("pki"), "first");
    let port = free_port();
    let mut c = config(
        ([127, 0, 0, 1], port).into(),
        &db,
        Arc::new(RecordingSync::default()),
    );
    let mut tls = first.tls_config();
    tls.reload_interval = Duration::from_millis(100);
    c.tls = Some(tls);
    let server = tokio::spawn(serve(c));
    let base = format!("https://127.0.0.1:{port}");
    let trusts_first = https_client(&first.ca_pem());
    wait_up(&trusts_first, &format!("{base}/openapi.json"), &server).await;

    let r = trusts_first
        .get(format!("{base}/v1/ihosts"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"ihosts": []}));
    // No plain HTTP on the same port.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/v1/ihosts"))
        .bearer_auth(TOKEN)
        .send()
        .await;
    assert!(
        plain.is_err() || !plain.as_ref().unwrap().status().is_success(),
        "plain HTTP answered: {plain:?}"
    );
    // A client that does not trust the CA refuses the service.
    let other = TestPki::new(&dir.path().join("other"), "other");
    let trusts_other = https_client(&other.ca_pem());
    assert!(
        trusts_other
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .is_err()
    );

    // A broken pair in place of the certificate: still the first one served.
    std::fs::write(&first.cert, "not a certificate").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        https_client(&first.ca_pem())
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .is_ok(),
        "a broken certificate file replaced the working one"
    );

    // The renewed pair (another CA's): served without a restart.
    std::fs::copy(&other.key, &first.key).unwrap();
    std::fs::copy(&other.cert, &first.cert).unwrap();
    let mut reloaded = false;
    for _ in 0..100 {
        // New connections each time: an open connection keeps its certificate.
        let fresh = https_client(&other.ca_pem());
        if fresh
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .is_ok()
        {
            reloaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reloaded, "the renewed certificate was never served");
    assert!(
        https_client(&first.ca_pem())
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .is_err(),
        "the old certificate is still served"
    );
    server.abort();
}

/// A certificate that does not load stops `serve` before it listens, naming the file.
#[tokio::test]
async fn a_bad_certificate_stops_serve_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inv.db");
    let pki = TestPki::new(&dir.path().join("pki"), "bad");
    std::fs::write(&pki.cert, "garbage").unwrap();
    let mut c = config(
        ([127, 0, 0, 1], free_port()).into(),
        &db,
        Arc::new(RecordingSync::default()),
    );
    c.tls = Some(pki.tls_config());
    let err = serve(c).await.unwrap_err().to_string();
    assert!(err.contains("bad-tls.crt"), "{err}");
    assert!(!db.exists(), "nothing may start before the refusal");
}

/// The status page's sign-in cookie is `Secure` when the service speaks HTTPS, and not over
/// plain HTTP on loopback (a browser would not send it back there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_cookie_is_secure_over_https_only() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new(&dir.path().join("pki"), "cookie");
    for tls in [true, false] {
        let port = free_port();
        let mut c = config(
            ([127, 0, 0, 1], port).into(),
            &dir.path().join(format!("inv-{tls}.db")),
            Arc::new(RecordingSync::default()),
        );
        let (scheme, client) = if tls {
            c.tls = Some(pki.tls_config());
            ("https", https_client(&pki.ca_pem()))
        } else {
            ("http", reqwest::Client::new())
        };
        let server = tokio::spawn(serve(c));
        let base = format!("{scheme}://127.0.0.1:{port}");
        wait_up(&client, &format!("{base}/openapi.json"), &server).await;
        let r = client
            .post(format!("{base}/status/login"))
            .form(&[("token", TOKEN)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(cookie.contains("HttpOnly; SameSite=Strict"), "{cookie}");
        assert_eq!(cookie.contains("; Secure"), tls, "{scheme}: {cookie}");
        // The cookie opens the page over the same connection kind.
        let pair = cookie.split(';').next().unwrap();
        let page = client
            .get(format!("{base}/status"))
            .header("cookie", pair)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        assert!(page.text().await.unwrap().contains("id=\"host-table\""));
        server.abort();
    }
}

/// Over HTTPS with room for 4 connections: 4 clients that connect and never start TLS do not
/// keep a 5th out (the connection idle longest makes room), and one that never starts TLS is
/// closed when the handshake time is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_silent_connections_make_room_and_time_out() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inv.db");
    let pki = TestPki::new(&dir.path().join("pki"), "limits");
    let port = free_port();
    let mut c = config(
        ([127, 0, 0, 1], port).into(),
        &db,
        Arc::new(RecordingSync::default()),
    );
    c.tls = Some(pki.tls_config());
    c.max_connections = Some(4);
    let server = tokio::spawn(serve(c));
    let base = format!("https://127.0.0.1:{port}");
    let client = https_client(&pki.ca_pem());
    wait_up(&client, &format!("{base}/openapi.json"), &server).await;

    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap(),
        );
    }
    let fresh = https_client(&pki.ca_pem());
    let started = std::time::Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        fresh
            .get(format!("{base}/v1/ihosts"))
            .bearer_auth(TOKEN)
            .send(),
    )
    .await
    .expect("a request with 4 silent connections open hung")
    .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    // The newest silent one still had its room; the handshake time (10 s) closes it.
    let mut last = silent.pop().unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(20), last.read(&mut buf))
        .await
        .expect("a connection that never started TLS was kept past 20 s");
    assert!(
        matches!(read, Ok(0)) || read.is_err(),
        "expected the connection closed, read {read:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}
