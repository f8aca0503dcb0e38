//! The host inventory service: hosts and labels over REST, synced to Kubernetes nodes.
//!
//! Implements the StarlingX host-label design (seed 003): a `labels` table with
//! `created_at, updated_at, deleted_at, id, uuid, host_id, label_key, label_value`,
//! `POST /v1/labels/{host_uuid}`, `GET /v1/ihosts/{host_uuid}/labels`, `DELETE /v1/labels/{uuid}`.
//!
//! Code map: [`validate`] (pure syntax rules, reserved prefixes, label budget), [`store`] (SQL,
//! one transaction per write), [`api`] (HTTP, auth, OpenAPI), [`tokens`] (the tokens file,
//! constant-time lookup), [`keystone`] (tokens the cloud's Keystone issued), [`metrics`] (Prometheus), [`tls`] (HTTPS,
//! certificate reload), [`conn`] (time and count bounds on client connections),
//! [`sync`] and [`cloud`] (the `NodeSync` and `CloudStatus` traits the Kubernetes crate
//! implements, defined in `kstack-ports` and re-exported here); this file pushes hosts to their
//! nodes and records the outcome on each host.
//! Architecture invariant: this crate never talks to Kubernetes itself.

pub mod api;
#[cfg(feature = "testing")]
pub mod browser;
pub mod client;
pub mod conn;
pub mod error;
pub mod evacuate;
pub mod keystone;
pub mod metrics;
pub mod model;
pub mod page;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;
pub mod tokens;
pub mod validate;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use api::{ApiDoc, AppState, Role, router};
pub use error::{Error, ErrorBody};
pub use keystone::{Keystone, KeystoneAuth};
pub use kstack_ports::{
    CloudStatus, FakeCloudStatus, NoCloudStatus, NoNodeSync, NodeSync, RecordingSync, SyncCall,
    SyncError, cloud, sync,
};
pub use store::{Store, SyncOutcome};
pub use tls::TlsConfig;
pub use tokens::Tokens;

use model::SyncState;

/// How to run the service.
pub struct ServeConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// `postgres://...`, `sqlite:...` or a SQLite file path (created if missing).
    pub database_url: String,
    /// The bearer tokens and their roles.
    pub tokens: Tokens,
    /// Also accept tokens issued by this Keystone ([`keystone`]).
    pub keystone: Option<KeystoneAuth>,
    /// Serve HTTPS with these files; `None` serves plain HTTP, which [`serve`] allows only on
    /// a loopback address unless `insecure_http` is set.
    pub tls: Option<TlsConfig>,
    /// Allow plain HTTP on a non-loopback address (bearer tokens then cross the network in
    /// clear): only for a service behind something that terminates TLS.
    pub insecure_http: bool,
    /// How often to re-apply all labels and lock states to the nodes.
    pub audit_interval: Duration,
    /// Where committed changes go.
    pub sync: Arc<dyn NodeSync>,
    /// Names of nodes that joined the cluster (see [`follow_joins`]); `None` when nothing
    /// watches the nodes, and then only the audit reaches a late node.
    pub joins: Option<tokio::sync::mpsc::Receiver<String>>,
    /// The deployed cloud the status page shows ([`cloud::NoCloudStatus`] for none).
    pub cloud: Arc<dyn CloudStatus>,
    /// The most connections open at once; `None`: as many as the open files limit allows
    /// ([`conn::connection_budget`]), which is also the most this can be.
    pub max_connections: Option<usize>,
    /// The cloud's compute service: a compute host's lock moves its instances off first
    /// ([`evacuate`]); `None`: a lock taints at once.
    pub compute: Option<Arc<dyn kstack_ports::ComputeHosts>>,
}

/// Builds the state: opens the database and runs migrations.
pub async fn state(
    database_url: &str,
    tokens: Tokens,
    sync: Arc<dyn NodeSync>,
) -> Result<AppState, Error> {
    Ok(AppState {
        store: Store::connect(database_url).await?,
        sync,
        tokens: Arc::new(tokens),
        keystone: None,
        metrics: Default::default(),
        cloud: Arc::new(NoCloudStatus),
        host_changes: tokio::sync::broadcast::channel(64).0,
        secure_cookie: false,
        compute: None,
        moves: Default::default(),
    })
}

/// How many hosts the audit syncs at once: enough to hide API-server round trips, few enough
/// not to flood the API server or the database pool.
pub const AUDIT_CONCURRENCY: usize = 16;

/// What the node of a host should get: its live labels and the keys it ever set, both without
/// any key Kubernetes reserves ([`validate::is_reserved_label_key`]). Rows with such keys can
/// be in the database from before the API refused them. They are never pushed (the kubelet
/// owns them) and never removed: removing `kubernetes.io/hostname` because a row of that key
/// was deleted would delete the kubelet's label at every audit, forever.
fn node_labels(hostname: &str, ls: store::LabelState) -> (BTreeMap<String, String>, Vec<String>) {
    let (labels, skipped): (BTreeMap<_, _>, BTreeMap<_, _>) = ls
        .labels
        .into_iter()
        .partition(|(k, _)| !validate::is_reserved_label_key(k));
    if !skipped.is_empty() {
        let keys: Vec<&String> = skipped.keys().collect();
        tracing::warn!(
            host = %hostname,
            ?keys,
            "stored labels under a prefix Kubernetes reserves are not applied to the node; \
             remove them (DELETE /v1/labels/{{uuid}})"
        );
    }
    let managed = ls
        .managed_keys
        .into_iter()
        .filter(|k| !validate::is_reserved_label_key(k))
        .collect();
    (labels, managed)
}

/// Pushes one host's labels and lock state to its node, and records on the host whether its
/// node now matches it ([`SyncOutcome`]). `Err` only when the database fails.
pub(crate) async fn sync_one(
    state: &AppState,
    host: &store::HostRow,
) -> Result<SyncOutcome, Error> {
    if !state.sync.enabled() {
        let outcome = SyncOutcome {
            state: SyncState::Pending,
            reason: Some("node sync is disabled (--no-node-sync): no node is changed".into()),
        };
        if state
            .store
            .record_sync(host.id, host.sync_generation, &outcome)
            .await?
        {
            state.hosts_changed();
        }
        return Ok(outcome);
    }
    let ls = state.store.label_state(host.id).await?;
    let (labels, managed) = node_labels(&host.hostname, ls);
    // Both are tried: the lock matters even when the labels cannot be applied.
    let r1 = state
        .sync
        .apply_labels(&host.hostname, &labels, &managed)
        .await;
    let r2 = state.sync.set_locked(&host.hostname, host.locked()).await;
    let outcome = match r1.and(r2) {
        Ok(()) => SyncOutcome::synced(),
        Err(SyncError::NodeNotFound(_)) => SyncOutcome {
            state: SyncState::Pending,
            reason: Some(format!(
                "no Kubernetes node named {:?} yet; it gets this host's labels and lock state \
                 when it joins",
                host.hostname
            )),
        },
        Err(SyncError::Failed(e)) => {
            tracing::warn!(host = %host.hostname, error = %e, "node sync failed; the audit retries");
            SyncOutcome {
                state: SyncState::Failed,
                reason: Some(e),
            }
        }
    };
    // Only a recorded change is news for the status page (the audit re-syncs every host).
    if state
        .store
        .record_sync(host.id, host.sync_generation, &outcome)
        .await?
    {
        state.hosts_changed();
    }
    state.metrics.sync_outcome(outcome.state);
    Ok(outcome)
}

/// Re-applies every host's labels and lock state through NodeSync, repairing drift, and
/// records each host's outcome. Up to [`AUDIT_CONCURRENCY`] hosts are synced at once. Returns
/// how many hosts' nodes now match them; a host whose node does not exist (yet) is not
/// counted and not an error. The first failure is returned only after every host was tried.
pub async fn audit_once(state: &AppState) -> Result<usize, Error> {
    use futures::StreamExt;
    let hosts = state.store.list_hosts().await?;
    // Owned values in the futures: borrowed ones make the spawned audit task's future
    // not provably Send (a known higher-ranked lifetime limitation).
    let mut results = futures::stream::iter(hosts)
        .map(|host| {
            let state = state.clone();
            async move {
                let outcome = sync_one(&state, &host).await?;
                Ok::<_, Error>((host.hostname, outcome))
            }
        })
        .buffer_unordered(AUDIT_CONCURRENCY);
    let mut ok = 0;
    let mut first_err = None;
    while let Some(r) = results.next().await {
        match r {
            Ok((
                _,
                SyncOutcome {
                    state: SyncState::Synced,
                    ..
                },
            )) => ok += 1,
            Ok((
                _,
                SyncOutcome {
                    state: SyncState::Pending,
                    ..
                },
            )) => {}
            Ok((hostname, SyncOutcome { reason, .. })) => {
                let e = Error::Sync(format!("{hostname}: {}", reason.unwrap_or_default()));
                first_err.get_or_insert(e);
            }
            Err(e) => {
                tracing::warn!(error = %e, "audit sync failed");
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(ok),
    }
}

/// Pushes the labels and lock state of the host named `hostname` to its node: what a node that
/// joins the cluster gets. Returns `Ok(false)` when no host has that name (the node is not ours),
/// `Err` when the push failed (recorded on the host too).
pub async fn sync_host(state: &AppState, hostname: &str) -> Result<bool, Error> {
    match state.store.host_by_name(hostname).await? {
        Some(host) => match sync_one(state, &host).await? {
            SyncOutcome {
                state: SyncState::Failed,
                reason,
            } => Err(Error::Sync(format!(
                "{hostname}: {}",
                reason.unwrap_or_default()
            ))),
            _ => Ok(true),
        },
        None => Ok(false),
    }
}

/// Syncs every node name received on `joins` (nodes that joined the cluster) until the sender
/// is dropped. Failures are logged; the periodic audit retries them.
pub async fn follow_joins(state: AppState, mut joins: tokio::sync::mpsc::Receiver<String>) {
    while let Some(name) = joins.recv().await {
        match sync_host(&state, &name).await {
            Ok(true) => tracing::info!(node = %name, "node joined; labels and lock state applied"),
            Ok(false) => tracing::debug!(node = %name, "node joined; no host of that name"),
            Err(e) => tracing::warn!(node = %name, error = %e, "syncing a joined node failed"),
        }
    }
}

/// Refuses to send bearer tokens in clear over a network: plain HTTP only on loopback, unless
/// `insecure_http` says something in front terminates TLS.
fn check_transport(config: &ServeConfig) -> Result<(), Error> {
    if config.tls.is_none() && !config.listen.ip().is_loopback() && !config.insecure_http {
        return Err(Error::Config(format!(
            "refusing to serve on {} over plain HTTP: bearer tokens would cross the network in \
             clear. Give a certificate and key (--tls-cert, --tls-key), listen on a loopback \
             address, or, only behind a proxy that terminates TLS, allow it with --insecure-http",
            config.listen
        )));
    }
    Ok(())
}

/// Runs the service until the listener fails; audits on `audit_interval`. Serves HTTPS when
/// `tls` is set (reloading the files when they change), else plain HTTP (see
/// [`ServeConfig::insecure_http`]).
pub async fn serve(config: ServeConfig) -> Result<(), Error> {
    if config.tokens.is_empty() && config.keystone.is_none() {
        return Err(Error::Config(
            "no API tokens configured and no Keystone to accept tokens from".to_string(),
        ));
    }
    if config.audit_interval.is_zero() {
        return Err(Error::Config("audit interval must be positive".to_string()));
    }
    check_transport(&config)?;
    // Certificate problems are reported before anything else starts.
    let tls = match config.tls {
        Some(files) => Some((files.load()?, files)),
        None => None,
    };
    let mut state = state(&config.database_url, config.tokens, config.sync)
        .await?
        .with_cloud(config.cloud);
    if let Some(compute) = config.compute {
        state = state.with_compute(compute, evacuate::MoveTiming::default());
    }
    // A lock that was moving instances when the service last stopped ran in that process.
    let stale = state
        .store
        .interrupt_tasks(
            "lock interrupted: the inventory service stopped while moving the host's instances \
             off; its nova-compute service may still be disabled: lock it again, or unlock it",
        )
        .await?;
    if stale > 0 {
        tracing::warn!(
            hosts = stale,
            "locks interrupted by the last stop are marked so"
        );
    }
    // The browser reaches the page over HTTPS: served here, or by the proxy in front.
    state.secure_cookie = tls.is_some() || config.insecure_http;
    if let Some(auth) = config.keystone {
        let keystone =
            Keystone::new(auth).map_err(|e| Error::Config(format!("the Keystone client: {e}")))?;
        state = state.with_keystone(keystone);
    }
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    // Background tasks stop with the server, also when this future is dropped.
    let mut tasks = AbortOnDrop(Vec::new());
    let audit_state = state.clone();
    let interval = config.audit_interval;
    if let Some(rx) = config.joins {
        tasks.0.push(tokio::spawn(follow_joins(state.clone(), rx)));
    }
    tasks.0.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = audit_once(&audit_state).await {
                tracing::warn!(error = %e, "audit failed");
            }
        }
    }));
    let budget = conn::connection_budget();
    let max = match config.max_connections {
        Some(n) if n > budget => {
            tracing::warn!(
                asked = n,
                budget,
                "fewer connections than asked fit in the open files limit"
            );
            budget
        }
        Some(n) => n,
        None => budget,
    };
    let admission = conn::Admission::new(max, state.metrics.connections());
    // The body timeout wraps the whole router, so it bounds every request's body.
    let app = conn::Arrivals::new(tower::Layer::layer(
        &tower_http::timeout::RequestBodyTimeoutLayer::new(conn::BODY_READ_TIMEOUT),
        router(state),
    ));
    let listener = listener.into_std()?;
    let result = match tls {
        Some((loaded, files)) => {
            tracing::info!(addr = %config.listen, max_connections = max, "inventory listening (https)");
            let rustls = loaded.rustls.clone();
            tasks.0.push(tokio::spawn(files.reload_on_change(loaded)));
            let server = axum_server::from_tcp_rustls(listener, rustls)?.map(|tls| {
                tls.handshake_timeout(conn::HANDSHAKE_TIMEOUT)
                    .acceptor(admission)
            });
            bounded(server).serve(app).await
        }
        _ => {
            tracing::info!(addr = %config.listen, max_connections = max, "inventory listening (http)");
            let server = axum_server::from_tcp(listener)?.acceptor(admission);
            bounded(server).serve(app).await
        }
    };
    drop(tasks);
    Ok(result?)
}

/// The time bounds of [`conn`] on a server: HTTP/1.1 only, the first request and every
/// later request's headers within [`conn::HEADER_READ_TIMEOUT`].
fn bounded<A: axum_server::Address, Acc>(
    mut server: axum_server::Server<A, Acc>,
) -> axum_server::Server<A, Acc> {
    server
        .http_builder()
        .http1()
        .header_read_timeout(conn::HEADER_READ_TIMEOUT);
    server
        .first_request_timeout(conn::HEADER_READ_TIMEOUT)
        .http1_only()
}

/// Aborts its tasks when dropped.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}
