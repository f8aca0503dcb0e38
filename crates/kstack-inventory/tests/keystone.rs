//! Keystone tokens on the inventory API: a Keystone stand-in on a local port answers
//! `GET /v3/auth/tokens` the way Keystone does (200 with the token's roles and expiry for a
//! token validating itself, 404 for a token it does not know), and counts the calls.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::routing::get;
use kstack_inventory::{Keystone, KeystoneAuth, RecordingSync, Role, Tokens, router};
use serde_json::{Value, json};
use tower::ServiceExt;

const STATIC_ADMIN: &str = "static-admin-token-0123456789abcdef012345";
const KS_ADMIN: &str = "gAAAAA-keystone-admin-token";
const KS_READER: &str = "gAAAAA-keystone-reader-token";
const KS_MEMBER: &str = "gAAAAA-keystone-member-token";
const KS_NOROLE: &str = "gAAAAA-keystone-no-role-token";
const KS_EXPIRED: &str = "gAAAAA-keystone-expired-token";

#[derive(Default)]
struct FakeKeystone {
    /// token -> (roles, expires_at)
    tokens: HashMap<&'static str, (Vec<&'static str>, String)>,
    calls: AtomicUsize,
    fail: std::sync::atomic::AtomicBool,
}

async fn validate(
    axum::extract::State(k): axum::extract::State<Arc<FakeKeystone>>,
    headers: HeaderMap,
) -> (StatusCode, axum::Json<Value>) {
    k.calls.fetch_add(1, Ordering::SeqCst);
    if k.fail.load(Ordering::SeqCst) {
        return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({})));
    }
    let auth = headers.get("x-auth-token").and_then(|v| v.to_str().ok());
    let subject = headers.get("x-subject-token").and_then(|v| v.to_str().ok());
    let (Some(auth), Some(subject)) = (auth, subject) else {
        return (StatusCode::UNAUTHORIZED, axum::Json(json!({})));
    };
    // Keystone: an unknown X-Auth-Token is 401; an unknown subject 404.
    if !k.tokens.contains_key(auth) {
        return (StatusCode::UNAUTHORIZED, axum::Json(json!({})));
    }
    match k.tokens.get(subject) {
        Some((roles, expires_at)) => (
            StatusCode::OK,
            axum::Json(json!({"token": {
                "expires_at": expires_at,
                "roles": roles.iter().map(|r| json!({"id": format!("id-{r}"), "name": r})).collect::<Vec<_>>(),
                "project": {"name": "admin", "domain": {"id": "default"}},
            }})),
        ),
        None => (StatusCode::NOT_FOUND, axum::Json(json!({}))),
    }
}

async fn fake_keystone() -> (Arc<FakeKeystone>, String) {
    let later = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let past = (chrono::Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    let k = Arc::new(FakeKeystone {
        tokens: HashMap::from([
            (KS_ADMIN, (vec!["admin", "member", "reader"], later.clone())),
            (KS_READER, (vec!["reader"], later.clone())),
            (KS_MEMBER, (vec!["member"], later.clone())),
            (KS_NOROLE, (vec!["heat_stack_user"], later.clone())),
            (KS_EXPIRED, (vec!["admin"], past)),
        ]),
        ..Default::default()
    });
    let app = Router::new()
        .route("/v3/auth/tokens", get(validate))
        .with_state(k.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (k, url)
}

async fn app(auth: KeystoneAuth) -> (Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inventory.db");
    let tokens = Tokens::new(BTreeMap::from([(STATIC_ADMIN.to_string(), Role::Admin)])).unwrap();
    let state = kstack_inventory::state(
        db.to_str().unwrap(),
        tokens,
        Arc::new(RecordingSync::default()),
    )
    .await
    .unwrap()
    .with_keystone(Keystone::new(auth).unwrap());
    (router(state), dir)
}

/// (status, body) of a request with `token`.
async fn call(
    app: &Router,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {token}"));
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn host(name: &str) -> Value {
    json!({"hostname": name, "personality": "compute"})
}

#[tokio::test]
async fn keystone_roles_decide_what_a_token_may_do() {
    let (k, url) = fake_keystone().await;
    let (app, _dir) = app(KeystoneAuth::new(format!("{url}/v3/"))).await;

    // admin reads and writes.
    let (s, b) = call(&app, "POST", "/v1/ihosts", KS_ADMIN, Some(host("node-a"))).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(
        call(&app, "GET", "/v1/ihosts", KS_ADMIN, None).await.0,
        StatusCode::OK
    );
    // reader and member read only.
    for t in [KS_READER, KS_MEMBER] {
        assert_eq!(
            call(&app, "GET", "/v1/ihosts", t, None).await.0,
            StatusCode::OK
        );
        let (s, _) = call(&app, "POST", "/v1/ihosts", t, Some(host("node-b"))).await;
        assert_eq!(s, StatusCode::FORBIDDEN);
    }
    // A valid token with no mapped role: 403 naming the roles that would do.
    let (s, b) = call(&app, "GET", "/v1/ihosts", KS_NOROLE, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    assert!(b.contains("admin") && b.contains("reader"), "{b}");
    // Unknown tokens, and a token past its expiry (even if Keystone vouched for it): 401.
    for t in ["gAAAAA-made-up-token", KS_EXPIRED] {
        let (s, b) = call(&app, "GET", "/v1/ihosts", t, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{t}: {b}");
    }
    // Static tokens never reach Keystone.
    let before = k.calls.load(Ordering::SeqCst);
    assert_eq!(
        call(&app, "GET", "/v1/ihosts", STATIC_ADMIN, None).await.0,
        StatusCode::OK
    );
    assert_eq!(k.calls.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn answers_are_cached_until_the_ttl_and_refusals_for_a_moment() {
    let (k, url) = fake_keystone().await;
    let auth = KeystoneAuth {
        cache_ttl: Duration::from_millis(300),
        ..KeystoneAuth::new(url)
    };
    let (app, _dir) = app(auth).await;
    for _ in 0..5 {
        assert_eq!(
            call(&app, "GET", "/v1/ihosts", KS_READER, None).await.0,
            StatusCode::OK
        );
    }
    assert_eq!(
        k.calls.load(Ordering::SeqCst),
        1,
        "one validation for five requests"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        call(&app, "GET", "/v1/ihosts", KS_READER, None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        k.calls.load(Ordering::SeqCst),
        2,
        "asked again after the TTL"
    );

    // A refused token is remembered briefly: retrying it does not reach Keystone each time.
    for _ in 0..3 {
        call(&app, "GET", "/v1/ihosts", "gAAAAA-made-up-token", None).await;
    }
    assert_eq!(k.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn keystone_down_is_503_and_no_answer_leaks_the_token() {
    let (k, url) = fake_keystone().await;
    let (inventory, _dir) = app(KeystoneAuth::new(url.clone())).await;
    k.fail.store(true, Ordering::SeqCst);
    let (s, b) = call(&inventory, "GET", "/v1/ihosts", KS_ADMIN, None).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    assert!(b.contains("Keystone at"), "{b}");
    assert!(!b.contains(KS_ADMIN), "{b}");

    // Nothing listens there at all.
    let (away, _dir2) = app(KeystoneAuth::new("http://127.0.0.1:9")).await;
    let (s, b) = call(&away, "GET", "/v1/ihosts", KS_ADMIN, None).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    assert!(!b.contains(KS_ADMIN), "{b}");
}
