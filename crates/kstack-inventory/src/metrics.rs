//! Prometheus metrics of the service, at `GET /metrics` (OpenMetrics text; the same bearer
//! tokens as the API, a reader may scrape):
//!
//! - `kstack_inventory_http_requests_total{method, route, status}`: requests answered, by the
//!   route they matched (`/v1/ihosts/{uuid}`, never a UUID, so the series stay few);
//! - `kstack_inventory_http_request_duration_seconds{method, route}`: their latency;
//! - `kstack_inventory_node_syncs_total{outcome}`: node syncs by outcome (`synced`, `pending`,
//!   `failed`), from writes, joins and audits;
//! - `kstack_inventory_hosts{sync_state}`: hosts by sync state, and
//!   `kstack_inventory_host_sync_state{hostname, sync_state}` (1 for each host's current state),
//!   both read from the database when scraped;
//! - from the cloud's release records and workloads ([`kstack_ports::CloudStatus`], read when
//!   scraped): `kstack_service_health{service, state}` (one series per state of
//!   [`Health`], 1 for the current one), `kstack_service_generation{service}`,
//!   `kstack_service_ready_replicas{service}`, `kstack_service_desired_replicas{service}`,
//!   `kstack_cloud_deploy_generation{namespace}` and `kstack_cloud_status_problem{namespace}`
//!   (1 while the snapshot may be incomplete). Services and their names only: nothing from
//!   passwords.yml is in a record.
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kstack_ports::cloud::{Health, Snapshot};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::api::AppState;
use crate::error::Error;
use crate::model::SyncState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    sync_state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HostLabels {
    hostname: String,
    sync_state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabels {
    service: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceStateLabels {
    service: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabels {
    namespace: String,
}

/// The client connections ([`crate::conn::Admission`] keeps them up to date).
#[derive(Clone, Debug, Default)]
pub struct ConnectionMetrics {
    /// Connections open now.
    pub open: Gauge,
    /// Idle connections closed to make room for a new one.
    pub closed_for_room: Counter,
    /// New connections refused because every open one was serving a request.
    pub refused: Counter,
}

/// The per-service gauges, rebuilt from a snapshot at each scrape.
#[derive(Default)]
struct CloudGauges {
    health: Family<ServiceStateLabels, Gauge>,
    generation: Family<ServiceLabels, Gauge>,
    ready: Family<ServiceLabels, Gauge>,
    desired: Family<ServiceLabels, Gauge>,
    deploy_generation: Family<NamespaceLabels, Gauge>,
    problem: Family<NamespaceLabels, Gauge>,
}

impl CloudGauges {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "kstack_service_health",
            "1 for the current health of each service of the cloud (healthy, progressing, failed, missing, removed), 0 for the others",
            self.health.clone(),
        );
        registry.register(
            "kstack_service_generation",
            "The service's current generation in the release index",
            self.generation.clone(),
        );
        registry.register(
            "kstack_service_ready_replicas",
            "Ready pods of the service's workload",
            self.ready.clone(),
        );
        registry.register(
            "kstack_service_desired_replicas",
            "Pods the service's workload wants",
            self.desired.clone(),
        );
        registry.register(
            "kstack_cloud_deploy_generation",
            "The last deploy generation recorded in the cloud's release index",
            self.deploy_generation.clone(),
        );
        registry.register(
            "kstack_cloud_status_problem",
            "1 while the cloud's status may be incomplete (the API server cannot be reached, a release record cannot be read), else 0",
            self.problem.clone(),
        );
    }

    /// Replaces every series with the snapshot's.
    fn set(&self, cloud: &Snapshot) {
        self.health.clear();
        self.generation.clear();
        self.ready.clear();
        self.desired.clear();
        self.deploy_generation.clear();
        self.problem.clear();
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for s in &cloud.services {
            let service = || ServiceLabels {
                service: s.name.clone(),
            };
            for h in Health::ALL {
                self.health
                    .get_or_create(&ServiceStateLabels {
                        service: s.name.clone(),
                        state: h.as_str().to_owned(),
                    })
                    .set(i64::from(h == s.health));
            }
            if let Some(g) = s.generation {
                self.generation.get_or_create(&service()).set(int(g));
            }
            self.ready.get_or_create(&service()).set(s.ready);
            self.desired.get_or_create(&service()).set(s.desired);
        }
        // No namespace: no cloud is watched, and there is nothing to say about one.
        if !cloud.namespace.is_empty() {
            let ns = NamespaceLabels {
                namespace: cloud.namespace.clone(),
            };
            if let Some(g) = cloud.deploy_generation {
                self.deploy_generation.get_or_create(&ns).set(int(g));
            }
            self.problem
                .get_or_create(&ns)
                .set(i64::from(cloud.problem.is_some()));
        }
    }
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// The service's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    syncs: Family<OutcomeLabels, Counter>,
    hosts: Family<StateLabels, Gauge>,
    host_state: Family<HostLabels, Gauge>,
    cloud: CloudGauges,
    connections: ConnectionMetrics,
    /// One scrape at a time rebuilds the host and cloud gauges.
    scrape: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        let syncs = Family::<OutcomeLabels, Counter>::default();
        let hosts = Family::<StateLabels, Gauge>::default();
        let host_state = Family::<HostLabels, Gauge>::default();
        registry.register(
            "kstack_inventory_http_requests",
            "HTTP requests answered, by method, matched route and status",
            requests.clone(),
        );
        registry.register_with_unit(
            "kstack_inventory_http_request_duration",
            "Time to answer an HTTP request, by method and matched route",
            Unit::Seconds,
            latency.clone(),
        );
        registry.register(
            "kstack_inventory_node_syncs",
            "Syncs of a host to its Kubernetes node, by outcome",
            syncs.clone(),
        );
        registry.register(
            "kstack_inventory_hosts",
            "Hosts in the inventory, by the sync state of their node",
            hosts.clone(),
        );
        registry.register(
            "kstack_inventory_host_sync_state",
            "1 for the current sync state of each host's node",
            host_state.clone(),
        );
        let connections = ConnectionMetrics::default();
        registry.register(
            "kstack_inventory_connections",
            "Client connections open",
            connections.open.clone(),
        );
        registry.register(
            "kstack_inventory_connections_closed_for_room",
            "Idle client connections closed to make room for a new one (the connection limit was reached)",
            connections.closed_for_room.clone(),
        );
        registry.register(
            "kstack_inventory_connections_refused",
            "New client connections refused because every open one was serving a request",
            connections.refused.clone(),
        );
        let cloud = CloudGauges::default();
        cloud.register(&mut registry);
        Metrics {
            registry,
            cloud,
            connections,
            requests,
            latency,
            syncs,
            hosts,
            host_state,
            scrape: tokio::sync::Mutex::new(()),
        }
    }
}

impl Metrics {
    /// The client connection metrics, for the server's admission of connections.
    pub fn connections(&self) -> ConnectionMetrics {
        self.connections.clone()
    }

    /// Counts one node sync.
    pub fn sync_outcome(&self, state: SyncState) {
        self.syncs
            .get_or_create(&OutcomeLabels {
                outcome: state.as_str().to_owned(),
            })
            .inc();
    }

    /// The OpenMetrics text, with the host gauges read from `state`'s database now and the
    /// service gauges from its cloud's current snapshot.
    pub async fn render(&self, state: &AppState) -> Result<String, Error> {
        let _one = self.scrape.lock().await;
        let (hosts, cloud) = tokio::join!(state.store.list_hosts(), state.cloud.snapshot());
        let hosts = hosts?;
        self.cloud.set(&cloud);
        self.hosts.clear();
        self.host_state.clear();
        for s in [SyncState::Pending, SyncState::Synced, SyncState::Failed] {
            // Every state has a series, 0 when no host is in it.
            drop(self.hosts.get_or_create(&StateLabels {
                sync_state: s.as_str().to_owned(),
            }));
        }
        for h in &hosts {
            self.hosts
                .get_or_create(&StateLabels {
                    sync_state: h.sync_state.clone(),
                })
                .inc();
            self.host_state
                .get_or_create(&HostLabels {
                    hostname: h.hostname.clone(),
                    sync_state: h.sync_state.clone(),
                })
                .set(1);
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .map_err(|e| Error::Config(format!("encoding the metrics: {e}")))?;
        Ok(out)
    }
}

/// Middleware: counts every answer (401s and 404s too) and times it, by matched route.
pub(crate) async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_owned();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let started = Instant::now();
    let resp = next.run(req).await;
    let m = &state.metrics;
    m.requests
        .get_or_create(&RequestLabels {
            method: method.clone(),
            route: route.clone(),
            status: resp.status().as_u16().to_string(),
        })
        .inc();
    m.latency
        .get_or_create(&RouteLabels { method, route })
        .observe(started.elapsed().as_secs_f64());
    resp
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    match state.metrics.render(&state).await {
        Ok(text) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}
