//! `GET /metrics` scraped as Prometheus would: the request counters and latency histograms by
//! matched route and status, node syncs by outcome, and hosts by sync state, read from the
//! database at each scrape; each service's health, generation and replicas, read from the
//! cloud's status at each scrape.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use kstack_inventory::{RecordingSync, Role, Tokens, router};
use kstack_ports::cloud::{CloudStatus, FakeCloudStatus, Health, Service, Snapshot};
use serde_json::json;
use tower::ServiceExt;

const ADMIN: &str = "admin-token-0123456789abcdef0123456789";
const READER: &str = "reader-token-0123456789abcdef0123456789";

async fn call(
    app: &Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> (StatusCode, String, Option<String>) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let ctype = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 22)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap(), ctype)
}

/// The value of the sample line `name{labels}` (labels as written, in order).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .map(|v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn a_scrape_shows_requests_by_route_and_status_syncs_and_hosts_by_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inventory.db");
    let tokens = Tokens::new(BTreeMap::from([
        (ADMIN.to_string(), Role::Admin),
        (READER.to_string(), Role::Reader),
    ]))
    .unwrap();
    let state = kstack_inventory::state(
        db.to_str().unwrap(),
        tokens,
        Arc::new(RecordingSync::default()),
    )
    .await
    .unwrap();
    let app = router(state);

    // Scraping needs a token like the API.
    assert_eq!(
        call(&app, "GET", "/metrics", None, None).await.0,
        StatusCode::UNAUTHORIZED
    );

    let mut uuids = Vec::new();
    for name in ["compute-0", "compute-1"] {
        let (s, b, _) = call(
            &app,
            "POST",
            "/v1/ihosts",
            Some(ADMIN),
            Some(json!({"hostname": name, "personality": "compute"})),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        uuids.push(
            serde_json::from_str::<serde_json::Value>(&b).unwrap()["uuid"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    for u in &uuids {
        assert_eq!(
            call(&app, "GET", &format!("/v1/ihosts/{u}"), Some(READER), None)
                .await
                .0,
            StatusCode::OK
        );
    }
    assert_eq!(
        call(&app, "GET", "/v1/ihosts", None, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        call(&app, "GET", "/no/such/route", Some(READER), None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );

    let (s, text, ctype) = call(&app, "GET", "/metrics", Some(READER), None).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    assert!(ctype.unwrap().starts_with("application/openmetrics-text"));
    assert!(text.trim_end().ends_with("# EOF"), "{text}");

    let requests = |method: &str, route: &str, status: &str| {
        sample(
            &text,
            &format!(
                "kstack_inventory_http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}}"
            ),
        )
    };
    assert_eq!(requests("POST", "/v1/ihosts", "201"), Some(2.0), "{text}");
    // By route, never by UUID: two hosts, one series.
    assert_eq!(
        requests("GET", "/v1/ihosts/{uuid}", "200"),
        Some(2.0),
        "{text}"
    );
    assert!(!text.contains(&uuids[0]), "a UUID in a label: {text}");
    assert_eq!(requests("GET", "/v1/ihosts", "401"), Some(1.0), "{text}");
    assert_eq!(requests("GET", "unmatched", "404"), Some(1.0), "{text}");
    assert_eq!(
        sample(
            &text,
            "kstack_inventory_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/ihosts\"}"
        ),
        Some(2.0),
        "{text}"
    );
    // The two writes synced their hosts' nodes (RecordingSync knows every node).
    let synced = sample(
        &text,
        "kstack_inventory_node_syncs_total{outcome=\"synced\"}",
    )
    .or_else(|| {
        sample(
            &text,
            "kstack_inventory_node_syncs_total{outcome=\"pending\"}",
        )
    });
    assert!(synced.is_some_and(|n| n >= 2.0), "{text}");
    let by_state: f64 = ["pending", "synced", "failed"]
        .iter()
        .filter_map(|st| {
            sample(
                &text,
                &format!("kstack_inventory_hosts{{sync_state=\"{st}\"}}"),
            )
        })
        .sum();
    assert_eq!(by_state, 2.0, "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("kstack_inventory_host_sync_state{hostname=\"compute-1\",")),
        "{text}"
    );

    // A deleted host leaves the per-host series at the next scrape.
    assert_eq!(
        call(
            &app,
            "DELETE",
            &format!("/v1/ihosts/{}", uuids[1]),
            Some(ADMIN),
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    let (_, text, _) = call(&app, "GET", "/metrics", Some(READER), None).await;
    assert!(!text.contains("hostname=\"compute-1\""), "{text}");
    assert_eq!(
        sample(
            &text,
            "kstack_inventory_http_requests_total{method=\"GET\",route=\"/metrics\",status=\"200\"}"
        ),
        Some(1.0),
        "the first scrape is counted: {text}"
    );
}

/// Every sample of the exposition text: `name{labels}` as written → value. Also checks that
/// each sample's metric has `# HELP` and `# TYPE` lines before it.
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut described = std::collections::BTreeSet::new();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            described.insert(rest.split(' ').next().unwrap().to_owned());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        // The value follows the last space (label values may hold spaces).
        let (series, value) = line.rsplit_once(' ').unwrap();
        let name = series.split('{').next().unwrap();
        assert!(
            described.iter().any(|d| name.starts_with(d.as_str())),
            "{name} has no # TYPE line before it: {text}"
        );
        assert!(
            out.insert(series.to_owned(), value.parse().unwrap())
                .is_none(),
            "{series} twice: {text}"
        );
    }
    out
}

fn cloud_service(name: &str, health: Health, ready: i64, generation: Option<u64>) -> Service {
    Service {
        name: name.into(),
        kind: "Deployment".into(),
        ready,
        desired: 3,
        generation,
        health,
        reason: None,
        depends_on: vec![],
        history: vec![],
        last_deploy: vec![],
    }
}

/// The health series of `service`: state → value, for every state there is.
fn health_of(s: &BTreeMap<String, f64>, service: &str) -> BTreeMap<String, f64> {
    let prefix = format!("kstack_service_health{{service=\"{service}\",state=\"");
    s.iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(&prefix)
                .and_then(|st| st.strip_suffix("\"}"))
                .map(|st| (st.to_owned(), *v))
        })
        .collect()
}

#[tokio::test]
async fn a_scrape_shows_each_services_health_generation_and_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inventory.db");
    let tokens = Tokens::new(BTreeMap::from([(READER.to_string(), Role::Reader)])).unwrap();
    let mut progressing = cloud_service("nova-api", Health::Progressing, 1, Some(2));
    progressing.reason = Some("rolling out: 1 of 3 pods ready".into());
    let cloud = Arc::new(FakeCloudStatus::new(Snapshot {
        namespace: "openstack".into(),
        deploy_generation: Some(7),
        services: vec![
            cloud_service("keystone", Health::Healthy, 3, Some(4)),
            progressing,
            cloud_service("glance", Health::Missing, 0, None),
            cloud_service("heat", Health::Removed, 0, Some(1)),
            // A name from a record the engine did not write: its label value is escaped.
            cloud_service("we\"ird\\name", Health::Failed, 0, Some(1)),
        ],
        problem: None,
    }));
    let state = kstack_inventory::state(
        db.to_str().unwrap(),
        tokens,
        Arc::new(RecordingSync::default()),
    )
    .await
    .unwrap()
    .with_cloud(cloud.clone());
    let app = router(state);

    let (status, text, _) = call(&app, "GET", "/metrics", Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    for name in [
        "kstack_service_health",
        "kstack_service_generation",
        "kstack_service_ready_replicas",
        "kstack_service_desired_replicas",
        "kstack_cloud_deploy_generation",
        "kstack_cloud_status_problem",
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} gauge\n"))
                && text.contains(&format!("# HELP {name} ")),
            "{name}: {text}"
        );
    }
    let s = samples(&text);
    let states = |current: &str| -> BTreeMap<String, f64> {
        ["healthy", "progressing", "failed", "missing", "removed"]
            .iter()
            .map(|st| (st.to_string(), f64::from(u8::from(*st == current))))
            .collect()
    };
    // One series per state, 1 for the current one.
    assert_eq!(health_of(&s, "keystone"), states("healthy"), "{text}");
    assert_eq!(health_of(&s, "nova-api"), states("progressing"), "{text}");
    assert_eq!(health_of(&s, "glance"), states("missing"), "{text}");
    assert_eq!(health_of(&s, "heat"), states("removed"), "{text}");
    assert_eq!(
        health_of(&s, "we\\\"ird\\\\name"),
        states("failed"),
        "escaped as the exposition format says: {text}"
    );
    let one =
        |name: &str, service: &str| s.get(&format!("{name}{{service=\"{service}\"}}")).copied();
    assert_eq!(one("kstack_service_generation", "keystone"), Some(4.0));
    assert_eq!(one("kstack_service_generation", "nova-api"), Some(2.0));
    assert_eq!(
        one("kstack_service_generation", "glance"),
        None,
        "no generation recorded, no series: {text}"
    );
    assert_eq!(one("kstack_service_ready_replicas", "keystone"), Some(3.0));
    assert_eq!(one("kstack_service_ready_replicas", "nova-api"), Some(1.0));
    assert_eq!(
        one("kstack_service_desired_replicas", "nova-api"),
        Some(3.0)
    );
    assert_eq!(
        s.get("kstack_cloud_deploy_generation{namespace=\"openstack\"}"),
        Some(&7.0)
    );
    assert_eq!(
        s.get("kstack_cloud_status_problem{namespace=\"openstack\"}"),
        Some(&0.0)
    );
    // What the page says in words (reasons) is not a label.
    assert!(!text.contains("rolling out"), "{text}");

    // Keystone fails, nova-api finishes its rollout, heat is no longer recorded, the watches
    // lose the API server: the next scrape says so.
    cloud.update("keystone", |k| {
        k.health = Health::Failed;
        k.ready = 0;
        k.generation = Some(5);
    });
    cloud.update("nova-api", |n| {
        n.health = Health::Healthy;
        n.ready = 3;
    });
    let mut snap = cloud.snapshot().await;
    snap.services.retain(|x| x.name != "heat");
    snap.problem = Some("the API server cannot be reached".into());
    cloud.set(snap);
    let (_, text, _) = call(&app, "GET", "/metrics", Some(READER), None).await;
    let s = samples(&text);
    assert_eq!(health_of(&s, "keystone"), states("failed"), "{text}");
    assert_eq!(health_of(&s, "nova-api"), states("healthy"), "{text}");
    assert_eq!(
        s.get("kstack_service_generation{service=\"keystone\"}"),
        Some(&5.0)
    );
    assert_eq!(
        s.get("kstack_service_ready_replicas{service=\"keystone\"}"),
        Some(&0.0)
    );
    assert!(
        health_of(&s, "heat").is_empty() && !text.contains("service=\"heat\""),
        "a service gone from the cloud leaves no series: {text}"
    );
    assert_eq!(
        s.get("kstack_cloud_status_problem{namespace=\"openstack\"}"),
        Some(&1.0)
    );
}

#[tokio::test]
async fn without_a_cloud_there_are_no_service_series() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inventory.db");
    let tokens = Tokens::new(BTreeMap::from([(READER.to_string(), Role::Reader)])).unwrap();
    let state = kstack_inventory::state(
        db.to_str().unwrap(),
        tokens,
        Arc::new(RecordingSync::default()),
    )
    .await
    .unwrap();
    let (status, text, _) = call(&router(state), "GET", "/metrics", Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let s = samples(&text);
    assert!(
        !s.keys()
            .any(|k| k.starts_with("kstack_service_") || k.starts_with("kstack_cloud_")),
        "{text}"
    );
    // The hosts' gauges are still there.
    assert!(
        s.contains_key("kstack_inventory_hosts{sync_state=\"synced\"}"),
        "{text}"
    );
}
