//! `serve()` over a real socket with reqwest: auth, a write, the body limit on the wire,
//! and the periodic audit reaching NodeSync.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kstack_inventory::{RecordingSync, Role, ServeConfig, SyncCall, Tokens, serve};
use serde_json::{Value, json};

const TOKEN: &str = "serve-test-token-0123456789abcdef0123";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_over_http_with_audit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inv.db");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sync = Arc::new(RecordingSync::default());
    let config = ServeConfig {
        listen: ([127, 0, 0, 1], port).into(),
        database_url: db.to_str().unwrap().to_string(),
        tokens: Tokens::new(BTreeMap::from([(TOKEN.to_string(), Role::Admin)])).unwrap(),
        audit_interval: Duration::from_millis(100),
        sync: sync.clone(),
        joins: None,
    };
    let server = tokio::spawn(serve(config));
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();

    let mut up = false;
    for _ in 0..100 {
        if client
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "server did not start: {:?}", server.is_finished());
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
