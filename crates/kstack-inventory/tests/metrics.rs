//! `GET /metrics` scraped as Prometheus would: the request counters and latency histograms by
//! matched route and status, node syncs by outcome, and hosts by sync state, read from the
//! database at each scrape.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use kstack_inventory::{RecordingSync, Role, Tokens, router};
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
