//! The status page through the router (tower `oneshot`): what it shows of hosts and of a fake
//! cloud, who may see it (bearer header or sign-in cookie, reader role), and the event stream
//! that tells the page about a change. On SQLite, and on PostgreSQL too when
//! `KSTACK_TEST_POSTGRES_URL` is set (each test in its own schema).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures::StreamExt;
use kstack_inventory::{RecordingSync, Role, Tokens, router};
use kstack_ports::cloud::{
    FakeCloudStatus, Generation, Health, Service, Snapshot, sample_deploy_steps,
};
use serde_json::json;
use tower::ServiceExt;

const ADMIN: &str = "admin-token-0123456789abcdef0123456789";
const READER: &str = "reader-token-0123456789abcdef0123456789";

struct Env {
    name: &'static str,
    state: kstack_inventory::AppState,
    app: Router,
    cloud: Arc<FakeCloudStatus>,
    _dir: Option<tempfile::TempDir>,
}

fn service(name: &str, deps: &[&str], health: Health) -> Service {
    Service {
        name: name.into(),
        kind: "Deployment".into(),
        ready: if health == Health::Healthy { 2 } else { 0 },
        desired: 2,
        generation: Some(3),
        health,
        reason: None,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        history: vec![
            Generation {
                generation: 3,
                deploy_generation: 5,
                time: "2026-11-25T20:00:00Z".into(),
                outcome: "healthy".into(),
                images: vec![format!("registry.local/kolla/{name}:2025.1")],
            },
            Generation {
                generation: 2,
                deploy_generation: 4,
                time: "2026-11-24T20:00:00Z".into(),
                outcome: "failed".into(),
                images: vec![format!("registry.local/kolla/{name}:2024.2")],
            },
        ],
        last_deploy: sample_deploy_steps(),
    }
}

fn cloud() -> Snapshot {
    Snapshot {
        namespace: "openstack".into(),
        deploy_generation: Some(5),
        services: vec![
            service("glance", &["keystone", "mariadb"], Health::Healthy),
            service("keystone", &["mariadb"], Health::Healthy),
            service("mariadb", &[], Health::Healthy),
        ],
        problem: None,
    }
}

async fn make_env(name: &'static str, url: &str, dir: Option<tempfile::TempDir>) -> Env {
    let tokens = Tokens::new(BTreeMap::from([
        (ADMIN.to_string(), Role::Admin),
        (READER.to_string(), Role::Reader),
    ]))
    .unwrap();
    let cloud = Arc::new(FakeCloudStatus::new(cloud()));
    let state = kstack_inventory::state(url, tokens, Arc::new(RecordingSync::default()))
        .await
        .expect("open store")
        .with_cloud(cloud.clone());
    Env {
        name,
        app: router(state.clone()),
        state,
        cloud,
        _dir: dir,
    }
}

async fn envs() -> Vec<Env> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inventory.db");
    let mut out = vec![make_env("sqlite", path.to_str().unwrap(), Some(dir)).await];
    match std::env::var("KSTACK_TEST_POSTGRES_URL") {
        Ok(base) => {
            use sqlx::Connection;
            let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
            let mut conn = sqlx::PgConnection::connect(&base).await.expect("postgres");
            sqlx::query(&format!("CREATE SCHEMA {schema}"))
                .execute(&mut conn)
                .await
                .unwrap();
            let sep = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
            out.push(make_env("postgres", &url, None).await);
        }
        Err(_) => eprintln!("note: KSTACK_TEST_POSTGRES_URL not set; PostgreSQL run skipped"),
    }
    out
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

async fn send(app: &Router, req: Request<Body>) -> Answer {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

fn get(path: &str, bearer: Option<&str>, cookie: Option<&str>) -> Request<Body> {
    let mut r = Request::get(path);
    if let Some(t) = bearer {
        r = r.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    if let Some(c) = cookie {
        r = r.header(header::COOKIE, c);
    }
    r.body(Body::empty()).unwrap()
}

async fn admin_json(app: &Router, method: &str, path: &str, body: serde_json::Value) -> String {
    let a = send(
        app,
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await;
    assert!(
        a.status.is_success(),
        "{method} {path}: {} {}",
        a.status,
        a.body
    );
    a.body
}

async fn login(app: &Router, token: &str) -> Answer {
    send(
        app,
        Request::post("/status/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("token={token}")))
            .unwrap(),
    )
    .await
}

/// The `name=value` of a Set-Cookie header.
fn cookie_pair(a: &Answer) -> String {
    let v = a.headers[header::SET_COOKIE].to_str().unwrap();
    v.split(';').next().unwrap().to_string()
}

#[tokio::test]
async fn reader_sees_hosts_services_history_and_graph() {
    for env in envs().await {
        let host: serde_json::Value = serde_json::from_str(
            &admin_json(
                &env.app,
                "POST",
                "/v1/ihosts",
                json!({"hostname": "compute-7", "personality": "compute", "administrative": "locked"}),
            )
            .await,
        )
        .unwrap();
        let uuid = host["uuid"].as_str().unwrap();
        admin_json(
            &env.app,
            "POST",
            &format!("/v1/labels/{uuid}"),
            json!({"openstack-compute-node": "enabled", "rack": "r12"}),
        )
        .await;
        env.cloud.update("keystone", |s| {
            s.health = Health::Failed;
            s.ready = 0;
            s.reason = Some("keystone-0: readiness probe failed".into());
        });
        // What the host is doing (a compute host's lock moving its instances off), escaped.
        let row = env.state.store.get_host(uuid).await.unwrap();
        env.state
            .store
            .set_task(row.id, Some("lock failed: <vm-1> did not move"))
            .await
            .unwrap();

        let a = send(&env.app, get("/status", Some(READER), None)).await;
        assert_eq!(a.status, StatusCode::OK, "{}: {}", env.name, a.body);
        let csp = a.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{csp}");
        let b = &a.body;
        // The host, its lock state, sync state and labels.
        assert!(
            b.contains(r#"<tr id="host-compute-7" data-locked="true" data-sync="synced">"#),
            "{}: {b}",
            env.name
        );
        assert!(
            b.contains(
                r#"locked, disabled<br><small class="task">lock failed: &lt;vm-1&gt; did not move</small>"#
            ),
            "{b}"
        );
        assert!(b.contains("<code class=\"label\">openstack-compute-node=enabled</code>"));
        assert!(b.contains("<code class=\"label\">rack=r12</code>"));
        assert!(
            b.contains(r#"data-hosts="1">1 hosts, 1 locked, 0 not synced"#),
            "{b}"
        );
        // Services with ready/desired, generation, health and why, and their history.
        assert!(
            b.contains(r#"<tr id="svc-keystone" class="bad" data-health="failed">"#),
            "{b}"
        );
        assert!(b.contains("keystone-0: readiness probe failed"));
        assert!(b.contains(r#"<tr id="svc-glance" class="ok" data-health="healthy">"#));
        assert!(b.contains("<td>2/2</td><td>3</td>"), "{b}");
        assert!(b.contains("<td>0/2</td><td>3</td>"), "{b}");
        assert!(b.contains("<summary>2 generations</summary>"));
        assert!(b.contains("<code>registry.local/kolla/glance:2024.2</code>"));
        assert!(b.contains(r#"data-services="3" data-failing="1""#), "{b}");
        // The graph: one column per level, coloured by health.
        assert!(b.contains(r#"<g id="node-keystone" class="node bad" data-health="failed">"#));
        assert!(
            b.contains(r#"<rect x="10" y="10""#),
            "mariadb at level 0: {b}"
        );
        assert!(
            b.contains(r#"<rect x="210" y="10""#),
            "keystone at level 1: {b}"
        );
        assert!(
            b.contains(r#"<rect x="410" y="10""#),
            "glance at level 2: {b}"
        );
        assert_eq!(b.matches("class=\"edge\"").count(), 3, "{b}");
        // The script and stylesheet come from the service itself.
        assert!(b.contains(r#"<script src="/status/status.js" defer>"#));
        let js = send(&env.app, get("/status/status.js", None, None)).await;
        assert_eq!(js.status, StatusCode::OK);
        assert!(js.body.contains("new EventSource(\"/status/events\")"));
        // The live part alone is the same rendering.
        let live = send(&env.app, get("/status/live", Some(READER), None)).await;
        assert_eq!(live.status, StatusCode::OK);
        assert!(
            live.body.starts_with("<section id=\"cloud\">"),
            "{}",
            live.body
        );
        assert!(live.body.contains("host-compute-7"));
    }
}

#[tokio::test]
async fn each_service_shows_the_steps_of_its_last_deploy() {
    for env in envs().await {
        env.cloud.update("keystone", |s| {
            s.health = Health::Failed;
            let healthy = s.last_deploy.last_mut().unwrap();
            healthy.outcome = "failed".into();
            healthy.reason = Some("timed out after 60s <b>".into());
        });
        env.cloud.update("mariadb", |s| s.last_deploy.clear());
        let a = send(&env.app, get("/status", Some(READER), None)).await;
        assert_eq!(a.status, StatusCode::OK, "{}: {}", env.name, a.body);
        let b = &a.body;
        // Glance: four steps of deploy 5, each with its action, start, duration and outcome.
        assert!(
            b.contains(
                r#"<details id="steps-glance" class="steps"><summary>last deploy (deploy 5): 4 steps</summary>"#
            ),
            "{}: {b}",
            env.name
        );
        assert!(
            b.contains(
                r#"<tr class="ok" data-outcome="done"><td>job db-sync</td><td>create</td><td><time datetime="2026-11-25T20:00:00Z" title="2026-11-25T20:00:00Z">20:00:00</time></td><td>12.4 s</td><td>done</td></tr>"#
            ),
            "{b}"
        );
        assert!(
            b.contains(r#"<td>healthy</td><td>wait</td><td><time datetime="2026-11-25T20:00:12Z" title="2026-11-25T20:00:12Z">20:00:12</time></td><td>1 min 28 s</td>"#),
            "{b}"
        );
        // Keystone's health step failed: said in the summary and the row, with the reason
        // escaped.
        assert!(
            b.contains("<summary>last deploy (deploy 5): 4 steps, 1 failed</summary>"),
            "{b}"
        );
        assert!(
            b.contains(r#"<tr class="bad" data-outcome="failed"><td>healthy</td>"#),
            "{b}"
        );
        assert!(
            b.contains("failed<br><small>timed out after 60s &lt;b&gt;</small>"),
            "{b}"
        );
        // A record without steps (written before kstack kept them) shows none.
        assert!(!b.contains(r#"id="steps-mariadb""#), "{b}");
        assert_eq!(b.matches("<details id=\"steps-").count(), 2, "{b}");
    }
}

#[tokio::test]
async fn no_token_gets_the_login_form_and_a_wrong_one_is_refused() {
    for env in envs().await {
        for path in ["/status", "/status/live", "/status/events"] {
            let a = send(&env.app, get(path, None, None)).await;
            assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}: {path}", env.name);
            assert!(
                a.body
                    .contains("<form method=\"post\" action=\"/status/login\">")
            );
            assert!(
                !a.body.contains("svc-"),
                "{path} leaked the page: {}",
                a.body
            );
        }
        let wrong = "wrong-token-0123456789abcdef0123456789";
        let a = send(&env.app, get("/status", Some(wrong), None)).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED);
        assert!(a.body.contains("not accepted"), "{}", a.body);
        let a = login(&env.app, wrong).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED);
        assert!(a.headers.get(header::SET_COOKIE).is_none());
        assert!(!a.body.contains(wrong), "the token is echoed: {}", a.body);
        // A forged cookie is a wrong token too.
        let a = send(
            &env.app,
            get("/status", None, Some("kstack_status=6e6f7065")),
        )
        .await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED);
        let a = send(
            &env.app,
            Request::post("/status/login")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST);
        assert!(a.body.contains("token="), "{}", a.body);
    }
}

#[tokio::test]
async fn sign_in_sets_a_strict_http_only_cookie_that_only_the_page_takes() {
    for env in envs().await {
        let a = login(&env.app, READER).await;
        assert_eq!(a.status, StatusCode::OK, "{}: {}", env.name, a.body);
        let set = a.headers[header::SET_COOKIE].to_str().unwrap().to_string();
        for attr in [
            "HttpOnly",
            "SameSite=Strict",
            "Path=/status",
            "Max-Age=28800",
        ] {
            assert!(set.contains(attr), "{attr} missing: {set}");
        }
        assert!(!set.contains("Secure"), "plain HTTP on loopback: {set}");
        assert!(!set.contains(READER), "the token in clear: {set}");
        assert!(!a.body.contains(READER));
        assert!(a.body.contains("url=/status"), "{}", a.body);
        let cookie = cookie_pair(&a);

        let page = send(&env.app, get("/status", None, Some(&cookie))).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert!(page.body.contains("svc-keystone"));
        // The REST API never takes the cookie: not to read, and above all not to write.
        let api = send(&env.app, get("/v1/ihosts", None, Some(&cookie))).await;
        assert_eq!(api.status, StatusCode::UNAUTHORIZED);
        let admin_cookie = cookie_pair(&login(&env.app, ADMIN).await);
        let write = send(
            &env.app,
            Request::post("/v1/ihosts")
                .header(header::COOKIE, &admin_cookie)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    json!({"hostname": "evil", "personality": "compute"}).to_string(),
                ))
                .unwrap(),
        )
        .await;
        assert_eq!(write.status, StatusCode::UNAUTHORIZED, "{}", write.body);

        let out = send(
            &env.app,
            Request::post("/status/logout").body(Body::empty()).unwrap(),
        )
        .await;
        assert!(
            out.headers[header::SET_COOKIE]
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
    }
}

/// Reads SSE frames until one contains `want`, or fails after a few seconds.
async fn next_event(
    body: &mut (impl futures::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
    want: &str,
) -> String {
    let mut seen = String::new();
    let r = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(chunk) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if seen.contains(want) {
                return;
            }
        }
    })
    .await;
    assert!(r.is_ok(), "no {want:?} within 5 s; got {seen:?}");
    seen
}

#[tokio::test]
async fn the_event_stream_tells_of_host_and_cloud_changes() {
    for env in envs().await {
        let resp = env
            .app
            .clone()
            .oneshot(get("/status/events", Some(READER), None))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{}", env.name);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
        let mut body = resp.into_body().into_data_stream();
        next_event(&mut body, "event: hello\ndata: listening").await;

        admin_json(
            &env.app,
            "POST",
            "/v1/ihosts",
            json!({"hostname": "compute-1", "personality": "compute"}),
        )
        .await;
        next_event(&mut body, "event: change\ndata: hosts").await;

        env.cloud.update("mariadb", |s| s.health = Health::Failed);
        next_event(&mut body, "event: change\ndata: cloud").await;
        assert_eq!(env.cloud.subscribers(), 1);
    }
}
