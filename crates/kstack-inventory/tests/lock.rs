//! A compute host's lock with the cloud's compute service known (a fake nova): the instances
//! move off first (live, cold when stopped or when live fails), then the host is locked; 409
//! naming them when nowhere can take them; a failed move leaves the host unlocked and its
//! service enabled again. On SQLite, and on PostgreSQL when `KSTACK_TEST_POSTGRES_URL` is set.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use kstack_inventory::evacuate::MoveTiming;
use kstack_inventory::{AppState, RecordingSync, Role, SyncCall, Tokens, router};
use kstack_ports::{ComputeCall, FakeCompute};
use serde_json::{Value, json};
use tower::ServiceExt;

const ADMIN: &str = "admin-token-0123456789abcdef0123456789";

struct Env {
    name: &'static str,
    state: AppState,
    app: Router,
    sync: Arc<RecordingSync>,
    nova: Arc<FakeCompute>,
    _dir: Option<tempfile::TempDir>,
}

async fn make_env(name: &'static str, url: &str, dir: Option<tempfile::TempDir>) -> Env {
    let sync = Arc::new(RecordingSync::default());
    let nova = Arc::new(FakeCompute::default());
    let tokens = Tokens::new(BTreeMap::from([(ADMIN.to_string(), Role::Admin)])).unwrap();
    let state = kstack_inventory::state(url, tokens, sync.clone())
        .await
        .expect("open store")
        .with_compute(
            nova.clone(),
            MoveTiming {
                poll: Duration::from_millis(5),
                per_instance: Duration::from_secs(5),
            },
        );
    Env {
        name,
        app: router(state.clone()),
        state,
        sync,
        nova,
        _dir: dir,
    }
}

async fn envs() -> Vec<Env> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inventory.db");
    let mut out = vec![make_env("sqlite", path.to_str().unwrap(), Some(dir)).await];
    if let Ok(base) = std::env::var("KSTACK_TEST_POSTGRES_URL") {
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
    out
}

async fn admin(app: &Router, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {ADMIN}"));
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(b.to_string()))
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
        serde_json::from_slice(&bytes).unwrap()
    };
    (status, value)
}

async fn host(env: &Env, name: &str, personality: &str) -> String {
    let (s, v) = admin(
        &env.app,
        "POST",
        "/v1/ihosts",
        Some(json!({"hostname": name, "personality": personality})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{}: {v}", env.name);
    v["uuid"].as_str().unwrap().to_string()
}

/// The host once no lock runs on it any more.
async fn settled(env: &Env, uuid: &str) -> Value {
    for _ in 0..1000 {
        let (s, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{uuid}"), None).await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        if !v["task"].as_str().is_some_and(|t| t.starts_with("locking")) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{}: the lock of {uuid} never ended", env.name);
}

/// The lock states pushed to `hostname`'s node, oldest first (its registration pushes
/// `false`).
fn locked_calls(env: &Env, hostname: &str) -> Vec<bool> {
    env.sync
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            SyncCall::SetLocked {
                hostname: h,
                locked,
            } if h == hostname => Some(locked),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_compute_hosts_lock_moves_its_instances_off_then_locks_and_unlock_enables_it() {
    for env in envs().await {
        let c1 = host(&env, "c1", "compute").await;
        host(&env, "c2", "compute").await;
        env.nova.add_host("c1");
        env.nova.add_host("c2");
        env.nova.add_instance("a", "c1", "ACTIVE");
        env.nova.add_instance("b", "c1", "SHUTOFF");
        // Its live migration fails (it stays on c1, ACTIVE): a cold one moves it.
        env.nova.add_instance("c", "c1", "ACTIVE");
        env.nova.refuse_live("c");
        env.nova.add_instance("elsewhere", "c2", "ACTIVE");

        let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{c1}/lock"), None).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{}: {v}", env.name);
        assert_eq!(v["administrative"], "unlocked", "{}: {v}", env.name);
        assert!(
            v["task"]
                .as_str()
                .unwrap()
                .starts_with("locking: moving 3 instance(s)"),
            "{}: {v}",
            env.name
        );
        let v = settled(&env, &c1).await;
        assert_eq!(v["administrative"], "locked", "{}: {v}", env.name);
        assert_eq!(v["task"], Value::Null, "{}: {v}", env.name);
        for (id, status) in [
            ("a", "ACTIVE"),
            ("b", "SHUTOFF"),
            ("c", "ACTIVE"),
            ("elsewhere", "ACTIVE"),
        ] {
            let i = env.nova.get(id).unwrap();
            assert_eq!(i.host.as_deref(), Some("c2"), "{}: {i:?}", env.name);
            assert_eq!(i.status, status, "{}: {i:?}", env.name);
        }
        assert_eq!(
            env.nova.calls(),
            vec![
                ComputeCall::SetEnabled {
                    host: "c1".into(),
                    enabled: false
                },
                ComputeCall::LiveMigrate { id: "a".into() },
                ComputeCall::ColdMigrate { id: "b".into() },
                ComputeCall::Confirm { id: "b".into() },
                ComputeCall::LiveMigrate { id: "c".into() },
                ComputeCall::ColdMigrate { id: "c".into() },
                ComputeCall::Confirm { id: "c".into() },
            ],
            "{}",
            env.name
        );
        assert_eq!(locked_calls(&env, "c1"), vec![false, true], "{}", env.name);
        assert!(!env.nova.service("c1").unwrap().enabled, "{}", env.name);

        let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{c1}/unlock"), None).await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        assert_eq!(v["administrative"], "unlocked", "{}: {v}", env.name);
        assert!(env.nova.service("c1").unwrap().enabled, "{}", env.name);
        assert_eq!(
            locked_calls(&env, "c1"),
            vec![false, true, false],
            "{}",
            env.name
        );
    }
}

#[tokio::test]
async fn instances_with_nowhere_to_go_are_a_409_naming_them_and_nothing_changes() {
    for env in envs().await {
        let c1 = host(&env, "c1", "compute").await;
        env.nova.add_host("c1");
        env.nova.add_host("c2");
        env.nova.set_down("c2");
        env.nova.add_instance("0f1e", "c1", "ACTIVE");

        let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{c1}/lock"), None).await;
        assert_eq!(s, StatusCode::CONFLICT, "{}: {v}", env.name);
        let msg = v["error"].as_str().unwrap();
        for want in [
            "server-0f1e",
            "0f1e",
            "no other compute host",
            "?force=true",
        ] {
            assert!(msg.contains(want), "{}: {msg:?} lacks {want:?}", env.name);
        }
        assert!(env.nova.service("c1").unwrap().enabled, "{}", env.name);
        assert!(
            env.nova.calls().is_empty(),
            "{}: {:?}",
            env.name,
            env.nova.calls()
        );
        assert_eq!(locked_calls(&env, "c1"), vec![false], "{}", env.name);
        let (_, v) = admin(&env.app, "GET", &format!("/v1/ihosts/{c1}"), None).await;
        assert_eq!(v["administrative"], "unlocked", "{}: {v}", env.name);
        assert_eq!(v["task"], Value::Null, "{}: {v}", env.name);

        // Forced: locked at once, the instance left where it is.
        let (s, v) = admin(
            &env.app,
            "POST",
            &format!("/v1/ihosts/{c1}/lock?force=true"),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        assert_eq!(v["administrative"], "locked", "{}: {v}", env.name);
        assert_eq!(locked_calls(&env, "c1"), vec![false, true], "{}", env.name);
        assert_eq!(env.nova.get("0f1e").unwrap().host.as_deref(), Some("c1"));
    }
}

#[tokio::test]
async fn a_move_that_fails_leaves_the_host_unlocked_with_its_service_enabled() {
    for env in envs().await {
        let c1 = host(&env, "c1", "compute").await;
        env.nova.add_host("c1");
        env.nova.add_host("c2");
        env.nova.add_instance("ok", "c1", "ACTIVE");
        env.nova.add_instance("stuck", "c1", "ACTIVE");
        env.nova.refuse_live("stuck");
        env.nova.refuse_cold("stuck");

        let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{c1}/lock"), None).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{}: {v}", env.name);
        let v = settled(&env, &c1).await;
        assert_eq!(v["administrative"], "unlocked", "{}: {v}", env.name);
        let task = v["task"].as_str().unwrap();
        assert!(
            task.starts_with("lock failed, the host stays unlocked")
                && task.contains("server-stuck (stuck)")
                && task.contains("ERROR"),
            "{}: {task:?}",
            env.name
        );
        assert!(env.nova.service("c1").unwrap().enabled, "{}", env.name);
        assert_eq!(locked_calls(&env, "c1"), vec![false], "{}", env.name);
        assert_eq!(env.nova.get("ok").unwrap().host.as_deref(), Some("c2"));

        // A lock under way refuses another lock and an unlock.
        let row = env.state.store.get_host(&c1).await.unwrap();
        env.state
            .store
            .set_task(row.id, Some("locking: moving instance 1 of 1"))
            .await
            .unwrap();
        for action in ["lock", "unlock"] {
            let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{c1}/{action}"), None).await;
            assert_eq!(s, StatusCode::CONFLICT, "{} {action}: {v}", env.name);
            assert!(
                v["error"].as_str().unwrap().contains("being locked"),
                "{}: {v}",
                env.name
            );
        }
        // The service restarted: the lock is marked interrupted, and may be tried again.
        let n = env
            .state
            .store
            .interrupt_tasks("lock interrupted")
            .await
            .unwrap();
        assert_eq!(n, 1, "{}", env.name);
        let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{c1}/unlock"), None).await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        assert_eq!(v["task"], Value::Null, "{}: {v}", env.name);
    }
}

#[tokio::test]
async fn an_empty_compute_host_or_one_nova_does_not_know_locks_at_once() {
    for env in envs().await {
        let c1 = host(&env, "c1", "compute").await;
        let ctl = host(&env, "ctl", "controller").await;
        let c9 = host(&env, "c9", "compute").await;
        env.nova.add_host("c1");
        env.nova.add_host("c2");
        env.nova.add_instance("x", "c2", "ACTIVE");

        let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{c1}/lock"), None).await;
        assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
        assert_eq!(v["administrative"], "locked", "{}: {v}", env.name);
        assert!(!env.nova.service("c1").unwrap().enabled, "{}", env.name);
        for h in [&ctl, &c9] {
            let (s, v) = admin(&env.app, "POST", &format!("/v1/ihosts/{h}/lock"), None).await;
            assert_eq!(s, StatusCode::OK, "{}: {v}", env.name);
            assert_eq!(v["administrative"], "locked", "{}: {v}", env.name);
        }
        assert_eq!(
            env.nova.calls(),
            vec![ComputeCall::SetEnabled {
                host: "c1".into(),
                enabled: false
            }],
            "{}",
            env.name
        );
        // A compute host's lock state changes only through lock and unlock.
        let (s, v) = admin(
            &env.app,
            "PATCH",
            &format!("/v1/ihosts/{c1}"),
            Some(json!({"administrative": "unlocked"})),
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT, "{}: {v}", env.name);
        assert!(
            v["error"].as_str().unwrap().contains("/unlock"),
            "{}: {v}",
            env.name
        );
    }
}
