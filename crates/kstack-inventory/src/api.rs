//! HTTP layer: routes, bearer-token auth, JSON extractors with JSON errors, OpenAPI.
//!
//! Handlers validate, call the store (one transaction), then push the host's whole state to its
//! node and record the outcome on the host (`sync_state`, `sync_reason`). A NodeSync failure
//! after commit does not fail the request: the write stands, the failure is logged and shown
//! on the host, and the periodic audit retries.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kstack_ports::NodeSync;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::OpenApi;

use crate::error::{Error, ErrorBody};
use crate::keystone::{Keystone, Verdict};
use crate::model::{
    Administrative, Host, HostCreate, HostList, HostPatch, Label, LabelList, Personality,
};
use crate::store::{HostRow, Store};
use crate::tokens::Tokens;
use crate::validate;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read and write.
    Admin,
    /// Read only.
    Reader,
}

/// Shared state of the service.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub sync: Arc<dyn NodeSync>,
    pub tokens: Arc<Tokens>,
    /// Keystone, when tokens it issued are accepted too ([`crate::keystone`]).
    pub keystone: Option<Arc<Keystone>>,
    /// What `GET /metrics` shows ([`crate::metrics`]).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The deployed cloud, for the status page ([`kstack_ports::cloud`]).
    pub cloud: Arc<dyn kstack_ports::CloudStatus>,
    /// One message after each committed change of a host (the status page listens).
    pub host_changes: tokio::sync::broadcast::Sender<()>,
    /// Whether the status page's cookie gets `Secure` (the browser reaches the service
    /// over HTTPS, directly or through a proxy).
    pub secure_cookie: bool,
    /// The cloud's compute service: with it, a compute host's lock moves its instances off
    /// first ([`crate::evacuate`]); without it, a lock taints at once.
    pub compute: Option<Arc<dyn kstack_ports::ComputeHosts>>,
    /// How a lock waits for instances to move.
    pub moves: crate::evacuate::MoveTiming,
}

impl AppState {
    /// The same state, also accepting tokens issued by `keystone`.
    pub fn with_keystone(self, keystone: Keystone) -> AppState {
        AppState {
            keystone: Some(Arc::new(keystone)),
            ..self
        }
    }

    /// The same state, showing `cloud` on the status page.
    pub fn with_cloud(self, cloud: Arc<dyn kstack_ports::CloudStatus>) -> AppState {
        AppState { cloud, ..self }
    }

    /// The same state, moving a compute host's instances off through `compute` before it is
    /// locked, waiting as `moves` says.
    pub fn with_compute(
        self,
        compute: Arc<dyn kstack_ports::ComputeHosts>,
        moves: crate::evacuate::MoveTiming,
    ) -> AppState {
        AppState {
            compute: Some(compute),
            moves,
            ..self
        }
    }

    /// Tells the status page's listeners that a host changed.
    pub fn hosts_changed(&self) {
        // No receiver (no page open) is fine.
        let _ = self.host_changes.send(());
    }
}

/// JSON body extractor whose rejections are JSON errors (400, or 413 when too large).
///
/// Every body of this API is a JSON object. The body is checked for that before it is typed:
/// serde would otherwise read a struct from an array too (`[null, null]` as a `HostPatch` whose
/// first two fields are absent), accepting a request the OpenAPI document forbids.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<serde_json::Value>::from_request(req, state).await {
            Ok(Json(v)) if !v.is_object() => Err(Error::BadRequest(
                "invalid request body: expected a JSON object".into(),
            )),
            Ok(Json(v)) => serde_json::from_value(v)
                .map(ApiJson)
                .map_err(|e| Error::BadRequest(format!("invalid request body: {e}"))),
            Err(rej) => Err(json_rejection(rej)),
        }
    }
}

fn json_rejection(rej: JsonRejection) -> Error {
    if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Error::PayloadTooLarge(MAX_BODY_BYTES)
    } else if let JsonRejection::MissingJsonContentType(_) = rej {
        Error::UnsupportedMediaType
    } else {
        Error::BadRequest(format!("invalid request body: {}", rej.body_text()))
    }
}

/// Query of `POST /v1/labels/{host_uuid}`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OverwriteQuery {
    /// Replace the value of labels that already exist instead of failing with 409.
    #[serde(default)]
    pub overwrite: Option<bool>,
}

/// Query extractor with JSON errors.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|e| Error::BadRequest(format!("invalid query: {}", e.body_text())))
    }
}

/// A UUID path segment; anything that is not a UUID cannot name a resource.
pub struct UuidPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for UuidPath {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| Error::BadRequest(format!("invalid path: {}", e.body_text())))?;
        uuid::Uuid::parse_str(&raw)
            .map(|u| UuidPath(u.hyphenated().to_string()))
            .map_err(|_| Error::NotFound(format!("{raw:?} is not a UUID; no such resource")))
    }
}

/// The role of `token`: from the tokens file, else from Keystone when configured.
pub(crate) async fn role_of(state: &AppState, token: &str) -> Result<Role, Error> {
    match (state.tokens.role(token), &state.keystone) {
        (Some(role), _) => Ok(role),
        (None, None) => Err(Error::Unauthorized),
        (None, Some(k)) => match k.verdict(token).await {
            Ok(Verdict::Role(role)) => Ok(role),
            Ok(Verdict::Invalid) => Err(Error::Unauthorized),
            Ok(Verdict::NoRole) => Err(Error::ForbiddenRole(k.no_role_message())),
            Err(e) => {
                tracing::warn!(error = %e, "a Keystone token could not be validated");
                Err(Error::Unavailable(e.to_string()))
            }
        },
    }
}

async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/openapi.json" || crate::page::is_public(path) {
        return next.run(req).await;
    }
    let read = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    // The status page also takes its cookie (crate::page), only to read the page: the REST
    // API never reads a cookie, so no other site can make a browser change anything.
    let page = crate::page::is_page(path) && read;
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .map(str::to_string)
        .or_else(|| {
            page.then(|| crate::page::cookie_token(req.headers()))
                .flatten()
        });
    let Some(token) = token else {
        return if page {
            crate::page::login_page(StatusCode::UNAUTHORIZED, None)
        } else {
            Error::Unauthorized.into_response()
        };
    };
    let role = match role_of(&state, &token).await {
        Ok(role) => role,
        Err(Error::Unauthorized) if page => {
            return crate::page::login_page(
                StatusCode::UNAUTHORIZED,
                Some("That token is not accepted (any more): sign in again."),
            );
        }
        Err(e) => return e.into_response(),
    };
    if page && !crate::page::may_view(role) {
        return Error::Forbidden.into_response();
    }
    if !read && role != Role::Admin {
        return Error::Forbidden.into_response();
    }
    next.run(req).await
}

/// The token of an `Authorization: Bearer <token>` header; the scheme name is case-insensitive
/// (RFC 9110, section 11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

fn check_hostname(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|p| {
            !p.is_empty()
                && p.len() <= 63
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !p.starts_with('-')
                && !p.ends_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "hostname {name:?} is not a valid node name (lowercase letters, digits, '-' and '.', \
             at most 253 characters)"
        )))
    }
}

/// Pushes the host's labels and lock state to its node after a committed write; returns the
/// host with the outcome recorded. Nothing here fails the request (see the module docs).
async fn sync_after_write(state: &AppState, host: HostRow) -> HostRow {
    state.hosts_changed();
    match crate::sync_one(state, &host).await {
        Ok(outcome) => host.with_outcome(&outcome),
        Err(e) => {
            tracing::warn!(host = %host.hostname, error = %e, "recording the node sync failed; the audit retries");
            host
        }
    }
}

/// List hosts.
#[utoipa::path(get, path = "/v1/ihosts", tag = "hosts",
    responses((status = 200, body = HostList),
        (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
async fn list_hosts(State(state): State<AppState>) -> Result<Json<HostList>, Error> {
    let rows = state.store.list_hosts().await?;
    let ihosts = rows.iter().map(HostRow::to_api).collect::<Result<_, _>>()?;
    Ok(Json(HostList { ihosts }))
}

/// Register a host. It is unlocked unless the body says `"administrative": "locked"`, so
/// registering a node that already runs pods never evicts them; registering it locked taints
/// the node `services=disabled:NoExecute`, which evicts every pod that does not tolerate it.
#[utoipa::path(post, path = "/v1/ihosts", tag = "hosts", request_body = HostCreate,
    responses((status = 201, body = Host),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody)),
    security(("bearer" = [])))]
async fn create_host(
    State(state): State<AppState>,
    ApiJson(new): ApiJson<HostCreate>,
) -> Result<(StatusCode, Json<Host>), Error> {
    check_hostname(&new.hostname)?;
    let row = state.store.create_host(&new).await?;
    let row = sync_after_write(&state, row).await;
    Ok((StatusCode::CREATED, Json(row.to_api()?)))
}

/// Show a host.
#[utoipa::path(get, path = "/v1/ihosts/{uuid}", tag = "hosts",
    params(("uuid" = uuid::Uuid, Path, description = "host UUID")),
    responses((status = 200, body = Host),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
async fn get_host(
    State(state): State<AppState>,
    UuidPath(uuid): UuidPath,
) -> Result<Json<Host>, Error> {
    Ok(Json(state.store.get_host(&uuid).await?.to_api()?))
}

/// Change a host's hostname, personality, administrative or operational state.
#[utoipa::path(patch, path = "/v1/ihosts/{uuid}", tag = "hosts", request_body = HostPatch,
    params(("uuid" = uuid::Uuid, Path, description = "host UUID")),
    responses((status = 200, body = Host),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody)),
    security(("bearer" = [])))]
async fn patch_host(
    State(state): State<AppState>,
    UuidPath(uuid): UuidPath,
    ApiJson(patch): ApiJson<HostPatch>,
) -> Result<Json<Host>, Error> {
    if let Some(name) = &patch.hostname {
        check_hostname(name)?;
    }
    if let (Some(a), Some(_)) = (patch.administrative, &state.compute) {
        let host = state.store.get_host(&uuid).await?;
        if host.personality == Personality::Compute.as_str()
            && (a == Administrative::Locked) != host.locked()
        {
            return Err(Error::Conflict(format!(
                "host {:?} is a compute host: lock or unlock it with POST /v1/ihosts/{uuid}/lock                  or /unlock, which move its instances off first and disable or enable its                  compute service",
                host.hostname
            )));
        }
    }
    update_and_sync(&state, &uuid, &patch).await
}

async fn update_and_sync(
    state: &AppState,
    uuid: &str,
    patch: &HostPatch,
) -> Result<Json<Host>, Error> {
    Ok(Json(
        update_and_sync_row(state, uuid, patch).await?.to_api()?,
    ))
}

/// Applies `patch`, and syncs the host's node when its name or lock state changed.
pub(crate) async fn update_and_sync_row(
    state: &AppState,
    uuid: &str,
    patch: &HostPatch,
) -> Result<HostRow, Error> {
    let (before, after) = state.store.update_host(uuid, patch).await?;
    // On a rename the node under the old name is left alone (deleting a node is never a side
    // effect of a PATCH); the node under the new name gets the full state.
    let after =
        if before.hostname != after.hostname || before.administrative != after.administrative {
            sync_after_write(state, after).await
        } else {
            state.hosts_changed();
            after
        };
    Ok(after)
}

/// Delete a host and its labels; the Kubernetes node is deleted too.
#[utoipa::path(delete, path = "/v1/ihosts/{uuid}", tag = "hosts",
    params(("uuid" = uuid::Uuid, Path, description = "host UUID")),
    responses((status = 204, description = "deleted"),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
async fn delete_host(
    State(state): State<AppState>,
    UuidPath(uuid): UuidPath,
) -> Result<StatusCode, Error> {
    let host = state.store.delete_host(&uuid).await?;
    state.hosts_changed();
    if let Err(e) = state.sync.delete_node(&host.hostname).await {
        tracing::warn!(host = %host.hostname, error = %e, "node delete failed");
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Sets a host's administrative state (lock, unlock) and syncs it to its node.
async fn set_administrative(
    state: &AppState,
    uuid: &str,
    administrative: Administrative,
) -> Result<Json<Host>, Error> {
    let patch = HostPatch {
        administrative: Some(administrative),
        ..HostPatch::default()
    };
    update_and_sync(state, uuid, &patch).await
}

/// Query of `POST /v1/ihosts/{uuid}/lock`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LockQuery {
    /// Lock at once, without moving a compute host's instances off first (they stop with
    /// the host's nova-compute and libvirt).
    #[serde(default)]
    pub force: Option<bool>,
}

/// Lock a host: its node gets the `services=disabled:NoExecute` taint. A compute host's
/// instances move off first when the service knows the cloud's compute service: its
/// nova-compute is disabled, each instance live-migrates (cold when it is stopped or live
/// fails), and only then is the host locked. That answers 202 with the host's `task` saying
/// what runs; the host shows `administrative: locked` when it is done, or `task: lock
/// failed: ...` (still unlocked, its compute service enabled again). 409 when the host has
/// instances and no other compute host is enabled and up to take them, naming them; 503 when
/// the compute service does not answer. `?force=true` locks at once.
#[utoipa::path(post, path = "/v1/ihosts/{uuid}/lock", tag = "hosts",
    params(("uuid" = uuid::Uuid, Path, description = "host UUID"), LockQuery),
    responses((status = 200, body = Host, description = "locked"),
        (status = 202, body = Host, description = "moving the instances off; locked when done"),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 503, body = ErrorBody)),
    security(("bearer" = [])))]
async fn lock_host(
    State(state): State<AppState>,
    UuidPath(uuid): UuidPath,
    ApiQuery(q): ApiQuery<LockQuery>,
) -> Result<Response, Error> {
    let host = state.store.get_host(&uuid).await?;
    host.not_locking()?;
    let force = q.force.unwrap_or(false);
    if let Some(compute) = state
        .compute
        .clone()
        .filter(|_| !force && !host.locked() && host.personality == Personality::Compute.as_str())
        && let crate::evacuate::Started::Moving(row) =
            crate::evacuate::start(&state, compute, host.clone()).await?
    {
        return Ok((StatusCode::ACCEPTED, Json(row.to_api()?)).into_response());
    }
    if host.task.is_some() {
        state.store.set_task(host.id, None).await?;
    }
    Ok(set_administrative(&state, &uuid, Administrative::Locked)
        .await?
        .into_response())
}

/// Unlock a host: its node's taint goes; a compute host's nova-compute service is enabled
/// again when the service knows the cloud's compute service. 409 while a lock of it is under
/// way.
#[utoipa::path(post, path = "/v1/ihosts/{uuid}/unlock", tag = "hosts",
    params(("uuid" = uuid::Uuid, Path, description = "host UUID")),
    responses((status = 200, body = Host),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
async fn unlock_host(
    State(state): State<AppState>,
    UuidPath(uuid): UuidPath,
) -> Result<Json<Host>, Error> {
    let host = state.store.get_host(&uuid).await?;
    host.not_locking()?;
    let Json(mut unlocked) = set_administrative(&state, &uuid, Administrative::Unlocked).await?;
    let mut task = None;
    if let Some(compute) = state
        .compute
        .as_ref()
        .filter(|_| host.personality == Personality::Compute.as_str())
    {
        let known = match compute.services().await {
            Ok(services) => services.iter().any(|s| s.host == host.hostname),
            Err(e) => {
                task = Some(format!(
                    "unlocked, but the compute service did not answer: enable this host's \
                     nova-compute service by hand ({e})"
                ));
                false
            }
        };
        if known && let Err(e) = compute.set_enabled(&host.hostname, true, "").await {
            // Nova commits the change before it tells the host's nova-compute, which is still
            // starting again after the lock evicted it: an answer that never came may still
            // have enabled it.
            let enabled = compute.services().await.is_ok_and(|services| {
                services
                    .iter()
                    .any(|s| s.host == host.hostname && s.enabled)
            });
            if !enabled {
                task = Some(format!(
                    "unlocked, but enabling its nova-compute service failed: enable it by hand ({e})"
                ));
            }
        }
    }
    if task.is_some() || host.task.is_some() {
        state.store.set_task(host.id, task.as_deref()).await?;
        unlocked.task = task;
        state.hosts_changed();
    }
    Ok(Json(unlocked))
}

/// Assign labels (a JSON object of key to value) to a host, all or none. Keys under a prefix
/// Kubernetes reserves (`kubernetes.io`, `k8s.io` and their subdomains, except
/// `node-restriction.kubernetes.io`) are refused with 400; a host may have at most 100 labels
/// of at most 16 KiB (keys plus values) in all: a request over that alone is 400, one that
/// would take the host over it is 409.
#[utoipa::path(post, path = "/v1/labels/{uuid}", tag = "labels",
    request_body(content = BTreeMap<String, String>, description = "label key -> value"),
    params(("uuid" = uuid::Uuid, Path, description = "the UUID of the host to label (seed 003: host_uuid)"), OverwriteQuery),
    responses((status = 200, body = LabelList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody)),
    security(("bearer" = [])))]
async fn assign_labels(
    State(state): State<AppState>,
    UuidPath(host_uuid): UuidPath,
    ApiQuery(q): ApiQuery<OverwriteQuery>,
    ApiJson(labels): ApiJson<BTreeMap<String, String>>,
) -> Result<Json<LabelList>, Error> {
    if labels.is_empty() {
        return Err(Error::BadRequest("no labels given".to_string()));
    }
    let mut problems = Vec::new();
    for (k, v) in &labels {
        if let Err(e) = validate::check_label_key(k) {
            problems.push(e);
        }
        if let Err(e) = validate::check_label_value(v) {
            problems.push(format!("{e} (key {k:?})"));
        }
    }
    if !problems.is_empty() {
        return Err(Error::BadRequest(problems.join("; ")));
    }
    let bytes = labels.iter().map(|(k, v)| k.len() + v.len()).sum();
    if let Err(e) = validate::check_label_budget(labels.len(), bytes) {
        return Err(Error::BadRequest(format!("this request alone has {e}")));
    }
    let (host, labels) = state
        .store
        .assign_labels(&host_uuid, &labels, q.overwrite.unwrap_or(false))
        .await?;
    sync_after_write(&state, host).await;
    Ok(Json(LabelList { labels }))
}

/// List a host's labels.
#[utoipa::path(get, path = "/v1/ihosts/{host_uuid}/labels", tag = "labels",
    params(("host_uuid" = uuid::Uuid, Path, description = "host UUID")),
    responses((status = 200, body = LabelList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
async fn list_labels(
    State(state): State<AppState>,
    UuidPath(host_uuid): UuidPath,
) -> Result<Json<LabelList>, Error> {
    Ok(Json(LabelList {
        labels: state.store.list_labels(&host_uuid).await?,
    }))
}

/// Remove a label (soft delete).
#[utoipa::path(delete, path = "/v1/labels/{uuid}", tag = "labels",
    params(("uuid" = uuid::Uuid, Path, description = "label UUID")),
    responses((status = 204, description = "removed"),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
async fn delete_label(
    State(state): State<AppState>,
    UuidPath(uuid): UuidPath,
) -> Result<StatusCode, Error> {
    let (host, _label) = state.store.delete_label(&uuid).await?;
    sync_after_write(&state, host).await;
    Ok(StatusCode::NO_CONTENT)
}

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI description of the REST API.
#[derive(OpenApi)]
#[openapi(
    info(title = "kstack inventory", description = "Hosts and labels, synced to Kubernetes nodes."),
    paths(list_hosts, create_host, get_host, patch_host, delete_host, lock_host, unlock_host,
          assign_labels, list_labels, delete_label),
    components(schemas(Host, HostCreate, HostPatch, HostList, Label, LabelList, ErrorBody,
        crate::model::Personality, Administrative, crate::model::Operational,
        crate::model::SyncState)),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

async fn not_found() -> Error {
    Error::NotFound("no such route".to_string())
}

async fn method_not_allowed() -> Error {
    Error::MethodNotAllowed
}

/// The service's routes, with auth and the body limit.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/openapi.json", get(openapi_json))
        .route("/metrics", get(crate::metrics::metrics))
        .route("/status", get(crate::page::page))
        .route("/status/live", get(crate::page::live))
        .route("/status/events", get(crate::page::events))
        .route("/status/login", post(crate::page::login))
        .route("/status/logout", post(crate::page::logout))
        .route("/status/status.js", get(crate::page::script))
        .route("/status/status.css", get(crate::page::style))
        .route("/v1/ihosts", get(list_hosts).post(create_host))
        .route(
            "/v1/ihosts/{uuid}",
            get(get_host).patch(patch_host).delete(delete_host),
        )
        .route("/v1/ihosts/{uuid}/lock", post(lock_host))
        .route("/v1/ihosts/{uuid}/unlock", post(unlock_host))
        .route("/v1/ihosts/{uuid}/labels", get(list_labels))
        .route(
            "/v1/labels/{uuid}",
            post(assign_labels).delete(delete_label),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::track,
        ))
        .with_state(state)
}
