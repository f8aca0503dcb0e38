//! The REST API end to end through the router (tower `oneshot`), on SQLite in a temp dir,
//! and on PostgreSQL too when `KSTACK_TEST_POSTGRES_URL` is set (each test in its own schema).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use kstack_inventory::{
    AppState, RecordingSync, Role, SyncCall, SyncError, Tokens, audit_once, router,
};
use serde_json::{Value, json};
use tower::ServiceExt;

const ADMIN: &str = "admin-token-0123456789abcdef0123456789";
const READER: &str = "reader-token-0123456789abcdef0123456789";

struct Env {
    name: &'static str,
    state: AppState,
    app: Router,
    sync: Arc<RecordingSync>,
    /// The database URL, for a second replica on the same database.
    url: String,
    _dir: Option<tempfile::TempDir>,
}

fn tokens() -> Tokens {
    Tokens::new(BTreeMap::from([
        (ADMIN.to_string(), Role::Admin),
        (READER.to_string(), Role::Reader),
    ]))
    .unwrap()
}

async fn make_env(name: &'static str, url: &str, dir: Option<tempfile::TempDir>) -> Env {
    let sync = Arc::new(RecordingSync::default());
    let state = kstack_inventory::state(url, tokens(), sync.clone())
        .await
        .expect("open store");
    Env {
        name,
        app: router(state.clone()),
        state,
        sync,
        url: url.to_string(),
        _dir: dir,
    }
}

/// SQLite always; PostgreSQL when configured, in a fresh schema.
async fn envs() -> Vec<Env> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("inventory.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
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

async fn call(
    app: &Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<String>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(b))
            .unwrap(),
        None => req.body(Body::empty()).unwrap(),
    };
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("non-JSON body {:?}", String::from_utf8_lossy(&bytes)))
    };
    (status, value)
}

async fn admin(app: &Router, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    call(app, method, path, Some(ADMIN), body.map(|b| b.to_string())).await
}

async fn new_host(env: &Env, name: &str) -> String {
    let (s, v) = admin(
        &env.app,
        "POST",
        "/v1/ihosts",
        Some(json!({"hostname": name, "personality": "compute"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{}: {v}", env.name);
    v["uuid"].as_str().unwrap().to_string()
}

async fn new_locked_host(env: &Env, name: &str) -> String {
    let (s, v) = admin(
        &env.app,
        "POST",
        "/v1/ihosts",
        Some(json!({"hostname": name, "personality": "compute", "administrative": "locked"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{}: {v}", env.name);
    assert_eq!(v["administrative"], "locked", "{}: {v}", env.name);
    v["uuid"].as_str().unwrap().to_string()
}

fn assert_error(env: &Env, (s, v): &(StatusCode, Value), want: StatusCode, contains: &str) {
    assert_eq!(*s, want, "{}: {v}", env.name);
    assert_eq!(v["code"], json!(want.as_u16()), "{}: {v}", env.name);
    let msg = v["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains(contains),
        "{}: error {msg:?} should contain {contains:?}",
        env.name
    );
}

#[tokio::test]
async fn host_crud_and_sync() {
    for env in envs().await {
        let uuid = new_host(&env, "compute-0").await;
        let (s, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{uuid}"), None).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(v["hostname"], "compute-0");
        assert_eq!(v["administrative"], "unlocked");
        assert_eq!(v["operational"], "disabled");
        assert_eq!(v["sync_state"], "synced", "{v}");
        let (s, _) = admin(&env.app, "POST", &format!("/v1/ihosts/{uuid}/lock"), None).await;
        assert_eq!(s, StatusCode::OK);

        let dup = admin(
            &env.app,
            "POST",
            "/v1/ihosts",
            Some(json!({"hostname": "compute-0", "personality": "compute"})),
        )
        .await;
        assert_error(&env, &dup, StatusCode::CONFLICT, "already used");

        let (s, v) = admin(
            &env.app,
            "PATCH",
            &format!("/v1/ihosts/{uuid}"),
            Some(json!({"personality": "storage", "operational": "enabled"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["personality"], "storage");
        assert_eq!(v["operational"], "enabled");

        let (s, v) = admin(&env.app, "GET", "/v1/ihosts", None).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(v["ihosts"].as_array().unwrap().len(), 1);

        env.sync.clear();
        let (s, v) = admin(
            &env.app,
            "PATCH",
            &format!("/v1/ihosts/{uuid}"),
            Some(json!({"hostname": "compute-00"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["hostname"], "compute-00");
        assert!(
            env.sync.calls().contains(&SyncCall::SetLocked {
                hostname: "compute-00".into(),
                locked: true
            }),
            "rename must sync the new node: {:?}",
            env.sync.calls()
        );
        let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{uuid}/unlock"), None).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(v["administrative"], "unlocked");
        let rename = admin(
            &env.app,
            "PATCH",
            &format!("/v1/ihosts/{uuid}"),
            Some(json!({"hostname": "compute-01"})),
        )
        .await;
        assert_error(&env, &rename, StatusCode::CONFLICT, "lock the host first");
        let wrong_method = admin(&env.app, "PUT", &format!("/v1/ihosts/{uuid}"), None).await;
        assert_error(
            &env,
            &wrong_method,
            StatusCode::METHOD_NOT_ALLOWED,
            "method",
        );
        env.sync.clear();
        let (s, _) = admin(&env.app, "DELETE", &format!("/v1/ihosts/{uuid}"), None).await;
        assert_eq!(s, StatusCode::NO_CONTENT);
        assert_eq!(
            env.sync.calls(),
            vec![SyncCall::DeleteNode {
                hostname: "compute-00".into()
            }]
        );
        let gone = admin(&env.app, "GET", &format!("/v1/ihosts/{uuid}"), None).await;
        assert_error(&env, &gone, StatusCode::NOT_FOUND, "not found");
    }
}

#[tokio::test]
async fn auth_401_403_and_openapi() {
    for env in envs().await {
        let none = call(&env.app, "GET", "/v1/ihosts", None, None).await;
        assert_error(&env, &none, StatusCode::UNAUTHORIZED, "token");
        let wrong = call(&env.app, "GET", "/v1/ihosts", Some("nope"), None).await;
        assert_error(&env, &wrong, StatusCode::UNAUTHORIZED, "token");
        let (s, _) = call(&env.app, "GET", "/v1/ihosts", Some(READER), None).await;
        assert_eq!(s, StatusCode::OK);
        let body = json!({"hostname": "c1", "personality": "compute"}).to_string();
        let write = call(&env.app, "POST", "/v1/ihosts", Some(READER), Some(body)).await;
        assert_error(&env, &write, StatusCode::FORBIDDEN, "read");
        let (s, v) = admin(&env.app, "GET", "/v1/ihosts", None).await;
        assert_eq!(
            v["ihosts"],
            json!([]),
            "reader write must not be stored ({s})"
        );

        let (s, doc) = call(&env.app, "GET", "/openapi.json", None, None).await;
        assert_eq!(s, StatusCode::OK);
        for path in [
            "/v1/ihosts",
            "/v1/ihosts/{uuid}",
            "/v1/ihosts/{uuid}/lock",
            "/v1/ihosts/{uuid}/unlock",
            "/v1/ihosts/{host_uuid}/labels",
            "/v1/labels/{uuid}",
        ] {
            assert!(doc["paths"].get(path).is_some(), "openapi lacks {path}");
        }
        for schema in ["Host", "Label", "LabelList", "ErrorBody", "HostPatch"] {
            assert!(
                doc["components"]["schemas"].get(schema).is_some(),
                "lacks {schema}"
            );
        }
    }
}

#[tokio::test]
async fn labels_assign_overwrite_soft_delete() {
    for env in envs().await {
        let host = new_host(&env, "compute-1").await;
        env.sync.clear();
        let (s, v) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"example.com/sriov": "enabled", "tier": ""})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        let labels = v["labels"].as_array().unwrap();
        assert_eq!(labels.len(), 2);
        for l in labels {
            assert_eq!(l["host_uuid"], json!(host));
            assert!(uuid::Uuid::parse_str(l["uuid"].as_str().unwrap()).is_ok());
        }
        let sriov = labels
            .iter()
            .find(|l| l["label_key"] == "example.com/sriov")
            .unwrap();
        assert_eq!(sriov["label_value"], "enabled");
        let sriov_uuid = sriov["uuid"].as_str().unwrap().to_string();

        let dup = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"example.com/sriov": "disabled", "new": "x"})),
        )
        .await;
        assert_error(&env, &dup, StatusCode::CONFLICT, "example.com/sriov");
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{host}/labels"), None).await;
        assert_eq!(
            v["labels"].as_array().unwrap().len(),
            2,
            "409 batch wrote: {v}"
        );

        let (s, v) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{host}?overwrite=true"),
            Some(json!({"example.com/sriov": "disabled"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(
            v["labels"][0]["uuid"],
            json!(sriov_uuid),
            "overwrite keeps the row"
        );
        assert_eq!(v["labels"][0]["label_value"], "disabled");

        let (s, _) = admin(
            &env.app,
            "DELETE",
            &format!("/v1/labels/{sriov_uuid}"),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::NO_CONTENT);
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{host}/labels"), None).await;
        assert_eq!(
            v["labels"],
            json!([{"uuid": v["labels"][0]["uuid"], "host_uuid": host, "label_key": "tier", "label_value": ""}])
        );
        assert_eq!(env.state.store.count_label_rows(true).await.unwrap(), 2);
        assert_eq!(env.state.store.count_label_rows(false).await.unwrap(), 1);
        let again = admin(
            &env.app,
            "DELETE",
            &format!("/v1/labels/{sriov_uuid}"),
            None,
        )
        .await;
        assert_error(&env, &again, StatusCode::NOT_FOUND, "not found");

        // A deleted key can be assigned again without overwrite.
        let (s, _) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"example.com/sriov": "again"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK);

        let applies: Vec<SyncCall> = env
            .sync
            .calls()
            .into_iter()
            .filter(|c| matches!(c, SyncCall::ApplyLabels { .. }))
            .collect();
        assert_eq!(
            applies.len(),
            4,
            "one apply per successful write: {applies:?}"
        );
        assert_eq!(
            applies[2],
            SyncCall::ApplyLabels {
                hostname: "compute-1".into(),
                labels: BTreeMap::from([("tier".into(), "".into())]),
                managed_keys: vec!["example.com/sriov".into(), "tier".into()],
            }
        );
    }
}

#[tokio::test]
async fn bad_input_is_4xx_with_json_and_writes_nothing() {
    for env in envs().await {
        let host = new_host(&env, "compute-2").await;
        let path = format!("/v1/labels/{host}");
        let bad_key = admin(
            &env.app,
            "POST",
            &path,
            Some(json!({"good": "1", "-bad": "2"})),
        )
        .await;
        assert_error(
            &env,
            &bad_key,
            StatusCode::BAD_REQUEST,
            "must start and end",
        );
        let bad_value = admin(&env.app, "POST", &path, Some(json!({"good": "a/b"}))).await;
        assert_error(&env, &bad_value, StatusCode::BAD_REQUEST, "label value");
        let long = admin(
            &env.app,
            "POST",
            &path,
            Some(json!({ "x".repeat(64): "v" })),
        )
        .await;
        assert_error(&env, &long, StatusCode::BAD_REQUEST, "longer than 63");
        let prefix = admin(&env.app, "POST", &path, Some(json!({"Bad_Prefix/x": "v"}))).await;
        assert_error(&env, &prefix, StatusCode::BAD_REQUEST, "DNS subdomain");
        let not_string = admin(&env.app, "POST", &path, Some(json!({"k": 5}))).await;
        assert_error(
            &env,
            &not_string,
            StatusCode::BAD_REQUEST,
            "invalid request body",
        );
        let malformed = call(
            &env.app,
            "POST",
            &path,
            Some(ADMIN),
            Some("{\"k\": ".into()),
        )
        .await;
        assert_error(
            &env,
            &malformed,
            StatusCode::BAD_REQUEST,
            "invalid request body",
        );
        let array = call(&env.app, "POST", &path, Some(ADMIN), Some("[1]".into())).await;
        assert_error(
            &env,
            &array,
            StatusCode::BAD_REQUEST,
            "invalid request body",
        );
        // serde reads a struct from an array too; the API takes objects only.
        let host_path = path.replace("/v1/labels/", "/v1/ihosts/");
        let array_patch = call(
            &env.app,
            "PATCH",
            &host_path,
            Some(ADMIN),
            Some("[null, null]".into()),
        )
        .await;
        assert_error(
            &env,
            &array_patch,
            StatusCode::BAD_REQUEST,
            "expected a JSON object",
        );
        let query = admin(
            &env.app,
            "POST",
            &format!("{path}?overwrite=maybe"),
            Some(json!({"k": "v"})),
        )
        .await;
        assert_error(&env, &query, StatusCode::BAD_REQUEST, "invalid query");
        let bad_host = admin(
            &env.app,
            "POST",
            "/v1/ihosts",
            Some(json!({"hostname": "Bad Name", "personality": "compute"})),
        )
        .await;
        assert_error(&env, &bad_host, StatusCode::BAD_REQUEST, "hostname");
        let bad_pers = admin(
            &env.app,
            "POST",
            "/v1/ihosts",
            Some(json!({"hostname": "ok", "personality": "router"})),
        )
        .await;
        assert_error(
            &env,
            &bad_pers,
            StatusCode::BAD_REQUEST,
            "invalid request body",
        );

        let mut big = BTreeMap::new();
        for i in 0..3000 {
            big.insert(format!("key-{i}"), "value-value-value".to_string());
        }
        let body = serde_json::to_string(&big).unwrap();
        assert!(body.len() > 64 * 1024);
        let too_big = call(&env.app, "POST", &path, Some(ADMIN), Some(body)).await;
        assert_error(&env, &too_big, StatusCode::PAYLOAD_TOO_LARGE, "larger than");

        let missing = uuid::Uuid::new_v4();
        let unknown = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{missing}"),
            Some(json!({"k": "v"})),
        )
        .await;
        assert_error(&env, &unknown, StatusCode::NOT_FOUND, "not found");
        let unknown = admin(
            &env.app,
            "GET",
            &format!("/v1/ihosts/{missing}/labels"),
            None,
        )
        .await;
        assert_error(&env, &unknown, StatusCode::NOT_FOUND, "not found");
        let not_uuid = admin(&env.app, "GET", "/v1/ihosts/not-a-uuid", None).await;
        assert_error(&env, &not_uuid, StatusCode::NOT_FOUND, "not a UUID");
        let no_route = admin(&env.app, "GET", "/v2/nothing", None).await;
        assert_error(&env, &no_route, StatusCode::NOT_FOUND, "no such route");

        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{host}/labels"), None).await;
        assert_eq!(
            v["labels"],
            json!([]),
            "{}: a rejected batch wrote labels",
            env.name
        );
        assert_eq!(env.state.store.count_label_rows(true).await.unwrap(), 0);
    }
}

#[tokio::test]
async fn role_labels_need_a_locked_host() {
    for env in envs().await {
        let host = new_host(&env, "controller-0").await;
        let (s, _) = admin(&env.app, "POST", &format!("/v1/ihosts/{host}/unlock"), None).await;
        assert_eq!(s, StatusCode::OK);
        let path = format!("/v1/labels/{host}");
        for key in [
            "kstack.io/role-nova",
            "openstack-control-plane",
            "openstack-compute-node",
        ] {
            let r = admin(
                &env.app,
                "POST",
                &path,
                Some(json!({"plain": "1", key: "enabled"})),
            )
            .await;
            assert_error(&env, &r, StatusCode::CONFLICT, "lock the host first");
        }
        assert_eq!(env.state.store.count_label_rows(true).await.unwrap(), 0);

        env.sync.clear();
        let (s, v) = admin(
            &env.app,
            "PATCH",
            &format!("/v1/ihosts/{host}"),
            Some(json!({"administrative": "locked"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(
            env.sync.calls(),
            vec![
                SyncCall::ApplyLabels {
                    hostname: "controller-0".into(),
                    labels: BTreeMap::new(),
                    managed_keys: vec![],
                },
                SyncCall::SetLocked {
                    hostname: "controller-0".into(),
                    locked: true
                }
            ]
        );
        let (s, v) = admin(
            &env.app,
            "POST",
            &path,
            Some(json!({"openstack-control-plane": "enabled"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let label = v["labels"][0]["uuid"].as_str().unwrap().to_string();

        let (s, _) = admin(&env.app, "POST", &format!("/v1/ihosts/{host}/unlock"), None).await;
        assert_eq!(s, StatusCode::OK);
        let r = admin(&env.app, "DELETE", &format!("/v1/labels/{label}"), None).await;
        assert_error(&env, &r, StatusCode::CONFLICT, "lock the host first");
        let (s, _) = admin(&env.app, "POST", &format!("/v1/ihosts/{host}/lock"), None).await;
        assert_eq!(s, StatusCode::OK);
        let (s, _) = admin(&env.app, "DELETE", &format!("/v1/labels/{label}"), None).await;
        assert_eq!(s, StatusCode::NO_CONTENT);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_lose_nothing() {
    for env in envs().await {
        let host = new_host(&env, "compute-3").await;
        let mut tasks = Vec::new();
        for i in 0..20 {
            let app = env.app.clone();
            let path = format!("/v1/labels/{host}");
            tasks.push(tokio::spawn(async move {
                admin(
                    &app,
                    "POST",
                    &path,
                    Some(json!({ format!("key-{i}"): format!("v{i}") })),
                )
                .await
            }));
        }
        for t in tasks {
            let (s, v) = t.await.unwrap();
            assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        }
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{host}/labels"), None).await;
        let keys: Vec<&str> = v["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["label_key"].as_str().unwrap())
            .collect();
        let mut want: Vec<String> = (0..20).map(|i| format!("key-{i}")).collect();
        want.sort();
        assert_eq!(keys, want, "{}", env.name);
    }
}

/// Two service replicas on one database (what several `kstack inventory serve` processes on
/// one PostgreSQL, or on one SQLite file, are): every write answered 200 is in the database,
/// and concurrent changes to different fields of one host both stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_on_two_replicas_lose_nothing() {
    for env in envs().await {
        let replica = make_env(env.name, &env.url, None).await;
        let apps = [env.app.clone(), replica.app.clone()];
        let host = new_host(&env, "compute-4").await;
        let mut tasks = Vec::new();
        for i in 0..40 {
            let app = apps[i % 2].clone();
            let path = format!("/v1/labels/{host}?overwrite=true");
            tasks.push(tokio::spawn(async move {
                admin(
                    &app,
                    "POST",
                    &path,
                    Some(json!({ format!("key-{i}"): "v", "shared": format!("v{i}") })),
                )
                .await
            }));
        }
        for t in tasks {
            let (s, v) = t.await.unwrap();
            assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        }
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{host}/labels"), None).await;
        let labels: BTreeMap<&str, &str> = v["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    l["label_key"].as_str().unwrap(),
                    l["label_value"].as_str().unwrap(),
                )
            })
            .collect();
        for i in 0..40 {
            assert_eq!(
                labels.get(format!("key-{i}").as_str()),
                Some(&"v"),
                "{}",
                env.name
            );
        }
        let shared = labels.get("shared").copied().unwrap_or_default();
        assert!(
            (0..40).any(|i| shared == format!("v{i}")),
            "{}: shared = {shared:?}",
            env.name
        );
        assert_eq!(
            env.state.store.count_label_rows(false).await.unwrap(),
            41,
            "{}: one live row per key",
            env.name
        );

        for round in 0..10 {
            let (s, _) = admin(
                &env.app,
                "PATCH",
                &format!("/v1/ihosts/{host}"),
                Some(json!({"personality": "compute", "operational": "disabled"})),
            )
            .await;
            assert_eq!(s, StatusCode::OK);
            let path = format!("/v1/ihosts/{host}");
            let (a, b) = tokio::join!(
                admin(
                    &apps[0],
                    "PATCH",
                    &path,
                    Some(json!({"personality": "storage"}))
                ),
                admin(
                    &apps[1],
                    "PATCH",
                    &path,
                    Some(json!({"operational": "enabled"}))
                ),
            );
            assert_eq!((a.0, b.0), (StatusCode::OK, StatusCode::OK), "{a:?} {b:?}");
            let (_, v) = admin(&env.app, "GET", &path, None).await;
            assert_eq!(
                (&v["personality"], &v["operational"]),
                (&json!("storage"), &json!("enabled")),
                "{}: round {round}: a concurrent PATCH was lost",
                env.name
            );
        }
    }
}

#[tokio::test]
async fn audit_reapplies_everything() {
    for env in envs().await {
        let a = new_host(&env, "compute-a").await;
        let _b = new_locked_host(&env, "compute-b").await;
        let (s, _) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{a}"),
            Some(json!({"zone": "east"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        let (s, _) = admin(&env.app, "POST", &format!("/v1/ihosts/{a}/unlock"), None).await;
        assert_eq!(s, StatusCode::OK);
        env.sync.clear();
        assert_eq!(audit_once(&env.state).await.unwrap(), 2);
        // Hosts are synced concurrently: compare each host's calls, in order.
        let mut calls = env.sync.calls();
        calls.sort_by_key(|c| match c {
            SyncCall::ApplyLabels { hostname, .. } => (hostname.clone(), 0),
            SyncCall::SetLocked { hostname, .. } => (hostname.clone(), 1),
            SyncCall::DeleteNode { hostname } => (hostname.clone(), 2),
        });
        assert_eq!(
            calls,
            vec![
                SyncCall::ApplyLabels {
                    hostname: "compute-a".into(),
                    labels: BTreeMap::from([("zone".into(), "east".into())]),
                    managed_keys: vec!["zone".into()],
                },
                SyncCall::SetLocked {
                    hostname: "compute-a".into(),
                    locked: false
                },
                SyncCall::ApplyLabels {
                    hostname: "compute-b".into(),
                    labels: BTreeMap::new(),
                    managed_keys: vec![],
                },
                SyncCall::SetLocked {
                    hostname: "compute-b".into(),
                    locked: true
                },
            ]
        );
    }
}

#[tokio::test]
async fn a_joining_node_gets_its_hosts_state() {
    for env in envs().await {
        let a = new_host(&env, "compute-late").await;
        let (s, _) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{a}"),
            Some(json!({"zone": "west"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        env.sync.clear();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let follower = tokio::spawn(kstack_inventory::follow_joins(env.state.clone(), rx));
        tx.send("not-a-host".to_string()).await.unwrap();
        tx.send("compute-late".to_string()).await.unwrap();
        drop(tx);
        follower.await.unwrap();
        assert_eq!(
            env.sync.calls(),
            vec![
                SyncCall::ApplyLabels {
                    hostname: "compute-late".into(),
                    labels: BTreeMap::from([("zone".into(), "west".into())]),
                    managed_keys: vec!["zone".into()],
                },
                SyncCall::SetLocked {
                    hostname: "compute-late".into(),
                    locked: false
                },
            ],
            "{}",
            env.name
        );
        assert!(
            !kstack_inventory::sync_host(&env.state, "not-a-host")
                .await
                .unwrap()
        );
    }
}

/// The served OpenAPI document and the router agree: every documented operation is routed and
/// answers only statuses the document lists for it; every other method on a documented path is
/// 405; the label shapes are seed 003's, and real answers have exactly the documented fields.
#[tokio::test]
async fn openapi_document_matches_the_routes_and_shapes() {
    for env in envs().await {
        let (s, doc) = call(&env.app, "GET", "/openapi.json", None, None).await;
        assert_eq!(s, StatusCode::OK);
        let host = new_host(&env, "compute-doc").await;
        let (s, v) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"zone": "a"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let label_uuid = v["labels"][0]["uuid"].as_str().unwrap().to_string();

        // Each parameter is where the route takes it: in the path only when the path template
        // names it, else an optional query parameter (`?force=`, `?overwrite=`).
        let mut queries = Vec::new();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                for p in op["parameters"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    let name = p["name"].as_str().unwrap();
                    if path.contains(&format!("{{{name}}}")) {
                        assert_eq!(p["in"], "path", "{method} {path}: {p}");
                    } else {
                        assert_eq!(p["in"], "query", "{method} {path}: {p}");
                        assert_eq!(p["required"], json!(false), "{method} {path}: {p}");
                        queries.push(format!("{method} {path}?{name}"));
                    }
                }
            }
        }
        queries.sort();
        assert_eq!(
            queries,
            [
                "post /v1/ihosts/{uuid}/lock?force",
                "post /v1/labels/{uuid}?overwrite"
            ],
            "{}",
            env.name
        );

        let schemas = &doc["components"]["schemas"];
        let props = |name: &str| -> Vec<String> {
            let mut p: Vec<String> = schemas[name]["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("schema {name} has no properties"))
                .keys()
                .cloned()
                .collect();
            p.sort();
            p
        };
        let mut required: Vec<&str> = schemas["Label"]["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["host_uuid", "label_key", "label_value", "uuid"]);
        assert_eq!(props("Label"), required);
        assert_eq!(props("LabelList"), ["labels"]);
        assert_eq!(
            schemas["LabelList"]["properties"]["labels"]["items"]["$ref"],
            "#/components/schemas/Label"
        );
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{host}/labels"), None).await;
        let keys = |v: &Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(keys(&v), props("LabelList"));
        assert_eq!(keys(&v["labels"][0]), props("Label"));
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{host}"), None).await;
        assert_eq!(keys(&v), props("Host"));

        let paths = doc["paths"].as_object().unwrap();
        let mut calls: Vec<(&String, &Value, &str)> = Vec::new();
        for (template, item) in paths {
            for method in ["get", "post", "put", "patch", "delete"] {
                calls.push((template, item, method));
            }
        }
        // Deletes last (the label's before the host's), so every call finds its resource.
        calls.sort_by_key(|(t, _, m)| (*m == "delete", !t.starts_with("/v1/labels/")));
        let mut operations = 0;
        for (template, item, method) in calls {
            {
                let uuid = if template.starts_with("/v1/labels/") && method == "delete" {
                    &label_uuid
                } else {
                    &host
                };
                let path = template
                    .replace("{uuid}", uuid)
                    .replace("{host_uuid}", uuid);
                let body = match (template.as_str(), method) {
                    ("/v1/ihosts", "post") => {
                        Some(json!({"hostname": "compute-doc-2", "personality": "storage"}))
                    }
                    (_, "patch") => Some(json!({"operational": "enabled"})),
                    ("/v1/labels/{uuid}", "post") => Some(json!({"rack": "r1"})),
                    _ => None,
                };
                let (status, v) = admin(&env.app, &method.to_uppercase(), &path, body).await;
                match item.get(method) {
                    Some(op) => {
                        operations += 1;
                        let documented = op["responses"].as_object().unwrap();
                        assert!(
                            documented.contains_key(status.as_str()),
                            "{}: {method} {template} answered {status} ({v}), documented {:?}",
                            env.name,
                            documented.keys().collect::<Vec<_>>()
                        );
                        assert!(
                            status.is_success(),
                            "{}: {method} {template} with valid input: {status} {v}",
                            env.name
                        );
                    }
                    None => assert_eq!(
                        status,
                        StatusCode::METHOD_NOT_ALLOWED,
                        "{}: {method} {template} is routed but not documented",
                        env.name
                    ),
                }
            }
        }
        assert_eq!(operations, 10, "documented operations");
    }
}

/// Runs `sql` on the test's database directly, bypassing the service: rows the API refuses
/// today, as an older version may have stored them.
async fn raw_sql(env: &Env, sql: &str) {
    use sqlx::Connection;
    if env.name == "sqlite" {
        let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(&env.url);
        let mut c = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
        sqlx::query(sql).execute(&mut c).await.unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(&env.url).await.unwrap();
        sqlx::query(sql).execute(&mut c).await.unwrap();
    }
}

/// Log lines written while a [`Logs::capture`] guard lives (on this thread: the tests run on
/// tokio's current-thread runtime).
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

impl Logs {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(self.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn label_keys(v: &Value) -> Vec<String> {
    v["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["label_key"].as_str().unwrap().to_string())
        .collect()
}

/// Keys under kubernetes.io, k8s.io and their subdomains belong to Kubernetes: refused with a
/// 400 that says why, nothing stored, nothing synced. node-restriction.kubernetes.io is the
/// administrators' part and accepted.
#[tokio::test]
async fn reserved_label_prefixes_are_refused() {
    for env in envs().await {
        let host = new_host(&env, "compute-k8s").await;
        let path = format!("/v1/labels/{host}");
        env.sync.clear();
        for key in [
            "kubernetes.io/hostname",
            "k8s.io/anything",
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "node-role.kubernetes.io/control-plane",
            "topology.kubernetes.io/zone",
            "feature.node.kubernetes.io/cpu-model",
        ] {
            let r = admin(
                &env.app,
                "POST",
                &path,
                Some(json!({"rack": "r1", key: "x"})),
            )
            .await;
            assert_error(&env, &r, StatusCode::BAD_REQUEST, "Kubernetes reserves");
            assert_error(&env, &r, StatusCode::BAD_REQUEST, key);
        }
        assert_eq!(env.state.store.count_label_rows(true).await.unwrap(), 0);
        assert!(env.sync.calls().is_empty(), "{:?}", env.sync.calls());
        let (s, v) = admin(
            &env.app,
            "POST",
            &path,
            Some(json!({"node-restriction.kubernetes.io/trusted": "yes"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
    }
}

/// Rows with reserved keys stored before the API refused them (a live one and a removed one)
/// never reach the node: not set, and above all not removed, by a write or by the audit,
/// however often it runs. Removing such a row through the API leaves the node's label alone.
#[tokio::test]
async fn reserved_rows_from_before_are_never_pushed_or_removed() {
    for env in envs().await {
        let host = new_host(&env, "compute-old").await;
        let (s, _) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"rack": "r1"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        let live = uuid::Uuid::new_v4();
        raw_sql(
            &env,
            &format!(
                "INSERT INTO labels (created_at, uuid, host_id, label_key, label_value) \
                 SELECT '2024-01-01T00:00:00Z', '{live}', id, 'kubernetes.io/hostname', 'wrong' \
                 FROM hosts WHERE uuid = '{host}'"
            ),
        )
        .await;
        raw_sql(
            &env,
            &format!(
                "INSERT INTO labels (created_at, deleted_at, uuid, host_id, label_key, label_value) \
                 SELECT '2024-01-01T00:00:00Z', '2024-01-02T00:00:00Z', '{}', id, \
                 'node-role.kubernetes.io/worker', '' FROM hosts WHERE uuid = '{host}'",
                uuid::Uuid::new_v4()
            ),
        )
        .await;
        let logs = Logs::default();
        let guard = logs.capture();
        env.sync.clear();
        for _ in 0..3 {
            assert_eq!(audit_once(&env.state).await.unwrap(), 1);
        }
        let (s, _) = admin(&env.app, "DELETE", &format!("/v1/labels/{live}"), None).await;
        assert_eq!(s, StatusCode::NO_CONTENT, "{}", env.name);
        audit_once(&env.state).await.unwrap();
        drop(guard);
        let applies: Vec<SyncCall> = env
            .sync
            .calls()
            .into_iter()
            .filter(|c| matches!(c, SyncCall::ApplyLabels { .. }))
            .collect();
        assert_eq!(applies.len(), 5, "{}: {applies:?}", env.name);
        for call in &applies {
            assert_eq!(
                call,
                &SyncCall::ApplyLabels {
                    hostname: "compute-old".into(),
                    labels: BTreeMap::from([("rack".into(), "r1".into())]),
                    managed_keys: vec!["rack".into()],
                },
                "{}: a reserved key reached NodeSync",
                env.name
            );
        }
        let logs = logs.text();
        assert!(
            logs.contains("reserves") && logs.contains("kubernetes.io/hostname"),
            "{}: the skipped row is not reported: {logs}",
            env.name
        );
    }
}

/// At most 100 labels and 16 KiB of keys and values per host: a request over that alone is
/// 400, one that would take the host over it is 409, and nothing of a refused request stays.
#[tokio::test]
async fn labels_per_host_are_capped() {
    for env in envs().await {
        let host = new_host(&env, "compute-cap").await;
        let path = format!("/v1/labels/{host}");
        let many: BTreeMap<String, String> = (0..101)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect();
        let r = admin(&env.app, "POST", &path, Some(json!(many))).await;
        assert_error(&env, &r, StatusCode::BAD_REQUEST, "101 labels");
        assert_error(&env, &r, StatusCode::BAD_REQUEST, "at most 100");
        // 44 labels of 380 bytes each (the longest a label can be): 16,720 bytes.
        let prefix = format!("{}.{}", vec!["a".repeat(63); 3].join("."), "b".repeat(61));
        let big: BTreeMap<String, String> = (0..44)
            .map(|i| (format!("{prefix}/{:0>63}", i), "v".repeat(63)))
            .collect();
        assert!(big.keys().all(|k| k.len() == 253 + 1 + 63), "{prefix}");
        let r = admin(&env.app, "POST", &path, Some(json!(big))).await;
        assert_error(&env, &r, StatusCode::BAD_REQUEST, "at most 16384");
        assert_eq!(env.state.store.count_label_rows(true).await.unwrap(), 0);

        let hundred: BTreeMap<String, String> = (0..100)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect();
        let (s, v) = admin(&env.app, "POST", &path, Some(json!(hundred))).await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        let r = admin(&env.app, "POST", &path, Some(json!({"one-more": "v"}))).await;
        assert_error(&env, &r, StatusCode::CONFLICT, "would have 101 labels");
        // Replacing a value keeps the count.
        let (s, v) = admin(
            &env.app,
            "POST",
            &format!("{path}?overwrite=true"),
            Some(json!({"k0": "new"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        assert_eq!(env.state.store.count_label_rows(false).await.unwrap(), 100);

        // The byte budget over several requests.
        let other = new_host(&env, "compute-cap-2").await;
        let path = format!("/v1/labels/{other}");
        let (first, second): (Vec<_>, Vec<_>) =
            big.into_iter().enumerate().partition(|(i, _)| *i < 40);
        let first: BTreeMap<String, String> = first.into_iter().map(|(_, kv)| kv).collect();
        let second: BTreeMap<String, String> = second.into_iter().map(|(_, kv)| kv).collect();
        let (s, v) = admin(&env.app, "POST", &path, Some(json!(first))).await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        let r = admin(&env.app, "POST", &path, Some(json!(second))).await;
        assert_error(
            &env,
            &r,
            StatusCode::CONFLICT,
            "bytes of label keys and values",
        );
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{other}/labels"), None).await;
        assert_eq!(label_keys(&v).len(), 40, "{}", env.name);
    }
}

/// A sync that fails shows on the host (API and list) with the reason, and in a log line;
/// the audit clears it once the node takes the state. A host whose node has not joined yet
/// is pending, saying so.
#[tokio::test]
async fn sync_state_shows_failures_and_missing_nodes() {
    for env in envs().await {
        let host = new_host(&env, "compute-sync").await;
        let path = format!("/v1/ihosts/{host}");
        let (_, v) = admin(&env.app, "GET", &path, None).await;
        assert_eq!(
            (&v["sync_state"], &v["sync_reason"]),
            (&json!("synced"), &Value::Null),
            "{}: {v}",
            env.name
        );

        let logs = Logs::default();
        let guard = logs.capture();
        env.sync.fail_with(Some(SyncError::Failed(
            "etcdserver: request is too large".into(),
        )));
        let (s, v) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"zone": "a"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{}: the write stands: {v}", env.name);
        let (_, v) = admin(&env.app, "GET", &path, None).await;
        assert_eq!(v["sync_state"], "failed", "{}: {v}", env.name);
        assert_eq!(v["sync_reason"], "etcdserver: request is too large");
        assert!(v["sync_changed_at"].is_string(), "{v}");
        let (_, list) = admin(&env.app, "GET", "/v1/ihosts", None).await;
        assert_eq!(list["ihosts"][0]["sync_state"], "failed", "{list}");
        // The audit keeps trying, and says so.
        assert!(audit_once(&env.state).await.is_err());
        // A lock answered while the node refuses: the answer shows it.
        let (s, v) = admin(&env.app, "POST", &format!("{path}/lock"), None).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(
            (&v["administrative"], &v["sync_state"]),
            (&json!("locked"), &json!("failed")),
            "{v}"
        );
        drop(guard);
        let logs = logs.text();
        assert!(
            logs.contains("node sync failed")
                && logs.contains("compute-sync")
                && logs.contains("request is too large"),
            "{}: no log line for the failed sync: {logs}",
            env.name
        );

        env.sync.fail_with(None);
        assert_eq!(audit_once(&env.state).await.unwrap(), 1);
        let (_, v) = admin(&env.app, "GET", &path, None).await;
        assert_eq!(
            (&v["sync_state"], &v["sync_reason"]),
            (&json!("synced"), &Value::Null),
            "{}: {v}",
            env.name
        );

        env.sync
            .fail_with(Some(SyncError::NodeNotFound("compute-sync".into())));
        let (_, v) = admin(&env.app, "POST", &format!("{path}/unlock"), None).await;
        assert_eq!(v["sync_state"], "pending", "{}: {v}", env.name);
        let reason = v["sync_reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("no Kubernetes node named \"compute-sync\" yet"),
            "{reason}"
        );
        // Not a failure of the audit: the node gets its state when it joins.
        assert_eq!(audit_once(&env.state).await.unwrap(), 0);
        env.sync.fail_with(None);
    }
}

/// A sync that read the host before a newer write does not record its outcome over that
/// write's state.
#[tokio::test]
async fn a_stale_sync_outcome_is_not_recorded() {
    for env in envs().await {
        let host = new_host(&env, "compute-stale").await;
        let before = env.state.store.get_host(&host).await.unwrap();
        env.sync
            .fail_with(Some(SyncError::NodeNotFound("compute-stale".into())));
        let (s, _) = admin(
            &env.app,
            "POST",
            &format!("/v1/labels/{host}"),
            Some(json!({"zone": "a"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        env.sync.fail_with(None);
        let stale = kstack_inventory::SyncOutcome::synced();
        assert!(
            !env.state
                .store
                .record_sync(before.id, before.sync_generation, &stale)
                .await
                .unwrap()
        );
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{host}"), None).await;
        assert_eq!(v["sync_state"], "pending", "{}: {v}", env.name);
    }
}

/// Registering a host whose node runs pods must not evict them: a new host is unlocked (its
/// node is told so, never locked) unless the request asks for locked.
#[tokio::test]
async fn registering_a_host_does_not_lock_its_node_unless_asked() {
    for env in envs().await {
        env.sync.clear();
        let (s, v) = admin(
            &env.app,
            "POST",
            "/v1/ihosts",
            Some(json!({"hostname": "compute-running", "personality": "compute"})),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        assert_eq!(v["administrative"], "unlocked", "{}: {v}", env.name);
        let calls = env.sync.calls();
        assert!(
            calls.contains(&SyncCall::SetLocked {
                hostname: "compute-running".into(),
                locked: false
            }) && !calls
                .iter()
                .any(|c| matches!(c, SyncCall::SetLocked { locked: true, .. })),
            "{}: {calls:?}",
            env.name
        );

        env.sync.clear();
        new_locked_host(&env, "compute-new").await;
        assert!(
            env.sync.calls().contains(&SyncCall::SetLocked {
                hostname: "compute-new".into(),
                locked: true
            }),
            "{}: {:?}",
            env.name,
            env.sync.calls()
        );
        let (_, doc) = call(&env.app, "GET", "/openapi.json", None, None).await;
        let text = doc["components"]["schemas"]["HostCreate"].to_string();
        assert!(
            text.contains("evict"),
            "HostCreate documents the default: {text}"
        );
    }
}

/// `Bearer` in any letter case; a body without a JSON content type is 415, listed in the
/// OpenAPI document.
#[tokio::test]
async fn bearer_in_any_case_and_415_for_a_non_json_body() {
    for env in envs().await {
        for scheme in ["bearer", "BEARER", "BeArEr"] {
            let req = Request::builder()
                .uri("/v1/ihosts")
                .header("authorization", format!("{scheme} {ADMIN}"))
                .body(Body::empty())
                .unwrap();
            let resp = env.app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status(), StatusCode::OK, "{}: {scheme}", env.name);
        }
        for bad in ["Basic {ADMIN}", "Bearer", "Bearer  ", "{ADMIN}"] {
            let req = Request::builder()
                .uri("/v1/ihosts")
                .header("authorization", bad.replace("{ADMIN}", ADMIN))
                .body(Body::empty())
                .unwrap();
            let resp = env.app.clone().oneshot(req).await.unwrap();
            assert_eq!(
                resp.status(),
                StatusCode::UNAUTHORIZED,
                "{}: {bad}",
                env.name
            );
        }

        let body = json!({"hostname": "c415", "personality": "compute"}).to_string();
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
        ] {
            let mut req = Request::builder()
                .method("POST")
                .uri("/v1/ihosts")
                .header("authorization", format!("Bearer {ADMIN}"));
            if let Some(ct) = content_type {
                req = req.header("content-type", ct);
            }
            let resp = env
                .app
                .clone()
                .oneshot(req.body(Body::from(body.clone())).unwrap())
                .await
                .unwrap();
            let status = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            assert_error(
                &env,
                &(status, v),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "application/json",
            );
        }
        let (_, doc) = call(&env.app, "GET", "/openapi.json", None, None).await;
        for (path, method) in [
            ("/v1/ihosts", "post"),
            ("/v1/ihosts/{uuid}", "patch"),
            ("/v1/labels/{uuid}", "post"),
        ] {
            assert!(
                doc["paths"][path][method]["responses"].get("415").is_some(),
                "{method} {path} does not document 415"
            );
        }
        let (_, v) = admin(&env.app, "GET", "/v1/ihosts", None).await;
        assert_eq!(v["ihosts"], json!([]), "{}", env.name);
    }
}

/// Without node sync (`kstack inventory serve --no-node-sync`) nothing reaches a node, and the
/// hosts say so instead of claiming to be synced.
#[tokio::test]
async fn without_node_sync_hosts_are_pending_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let state = kstack_inventory::state(
        dir.path().join("inv.db").to_str().unwrap(),
        tokens(),
        Arc::new(kstack_inventory::NoNodeSync),
    )
    .await
    .unwrap();
    let app = router(state.clone());
    let (s, v) = admin(
        &app,
        "POST",
        "/v1/ihosts",
        Some(json!({"hostname": "c1", "personality": "compute"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(v["sync_state"], "pending", "{v}");
    assert_eq!(
        v["sync_reason"],
        "node sync is disabled (--no-node-sync): no node is changed"
    );
    assert_eq!(audit_once(&state).await.unwrap(), 0);
}
