//! Storage: the same SQL against SQLite (default, a file) or PostgreSQL (by URL).
//!
//! Every write runs in one transaction, so a bad batch leaves nothing behind. On SQLite writes
//! are also serialized in-process by a mutex; on PostgreSQL they run concurrently, and writes
//! to one host wait for each other on the host row's lock.
//! Architecture invariant: no HTTP and no NodeSync here; the API layer calls them after commit.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use crate::error::Error;
use crate::model::{
    Administrative, Host, HostCreate, HostPatch, Label, Operational, Personality, SyncState,
};
use crate::validate;

/// A stored host with its internal id.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HostRow {
    pub id: i64,
    pub uuid: String,
    pub hostname: String,
    pub personality: String,
    pub administrative: String,
    pub operational: String,
    pub created_at: String,
    pub updated_at: Option<String>,
    /// `pending`, `synced` or `failed` (see [`Host::sync_state`]).
    pub sync_state: String,
    pub sync_reason: Option<String>,
    pub sync_changed_at: Option<String>,
    /// Counts the committed writes that change what the node should have. A sync records its
    /// outcome only if no such write happened since it read the host, so a slow sync never
    /// marks a newer change as synced.
    pub sync_generation: i64,
    /// What the host is doing (see [`Host::task`]).
    pub task: Option<String>,
}

/// The prefix of the task of a lock under way (see [`Host::task`]).
pub const TASK_LOCKING: &str = "locking";

/// What a sync did, as recorded on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOutcome {
    pub state: SyncState,
    /// Why it is pending or failed; `None` when synced.
    pub reason: Option<String>,
}

/// Longest sync reason stored (an API server's error can be long).
const MAX_SYNC_REASON: usize = 1024;

impl SyncOutcome {
    pub fn synced() -> Self {
        SyncOutcome {
            state: SyncState::Synced,
            reason: None,
        }
    }

    fn stored_reason(&self) -> Option<String> {
        self.reason.as_ref().map(|r| {
            let mut end = r.len().min(MAX_SYNC_REASON);
            while !r.is_char_boundary(end) {
                end -= 1;
            }
            r[..end].to_string()
        })
    }
}

impl HostRow {
    /// True when the host is administratively locked.
    pub fn locked(&self) -> bool {
        self.administrative == Administrative::Locked.as_str()
    }

    /// True while a lock that moves the host's instances off is under way.
    pub fn locking(&self) -> bool {
        self.task
            .as_deref()
            .is_some_and(|t| t.starts_with(TASK_LOCKING))
    }

    /// 409 while a lock of the host is under way (another lock or an unlock must wait).
    pub fn not_locking(&self) -> Result<(), Error> {
        if !self.locking() {
            return Ok(());
        }
        Err(Error::Conflict(format!(
            "host {:?} is being locked ({}); wait for the lock to end (GET /v1/ihosts/{})",
            self.hostname,
            self.task.as_deref().unwrap_or_default(),
            self.uuid
        )))
    }

    /// The API view. Stored values are constrained by CHECKs, so parsing only fails
    /// if someone edited the database by hand; that is reported, not panicked on.
    pub fn to_api(&self) -> Result<Host, Error> {
        let bad = |what: &str, v: &str| {
            Error::Config(format!("host {} has invalid {what} {v:?}", self.uuid))
        };
        Ok(Host {
            uuid: self.uuid.clone(),
            hostname: self.hostname.clone(),
            personality: Personality::parse(&self.personality)
                .ok_or_else(|| bad("personality", &self.personality))?,
            administrative: Administrative::parse(&self.administrative)
                .ok_or_else(|| bad("administrative", &self.administrative))?,
            operational: Operational::parse(&self.operational)
                .ok_or_else(|| bad("operational", &self.operational))?,
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            sync_state: SyncState::parse(&self.sync_state)
                .ok_or_else(|| bad("sync_state", &self.sync_state))?,
            sync_reason: self.sync_reason.clone(),
            sync_changed_at: self.sync_changed_at.clone(),
            task: self.task.clone(),
        })
    }

    /// This row as it is after `outcome` was recorded (without reading it again).
    pub fn with_outcome(mut self, outcome: &SyncOutcome) -> Self {
        let reason = outcome.stored_reason();
        if self.sync_state != outcome.state.as_str() || self.sync_reason != reason {
            self.sync_state = outcome.state.as_str().to_string();
            self.sync_reason = reason;
            self.sync_changed_at = Some(now());
        }
        self
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
struct LabelRow {
    uuid: String,
    host_uuid: String,
    label_key: String,
    label_value: String,
}

impl From<LabelRow> for Label {
    fn from(r: LabelRow) -> Self {
        Label {
            uuid: r.uuid,
            host_uuid: r.host_uuid,
            label_key: r.label_key,
            label_value: r.label_value,
        }
    }
}

/// Labels of one host as NodeSync wants them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelState {
    /// Live labels.
    pub labels: BTreeMap<String, String>,
    /// Every key this service ever set on the host (live or soft-deleted), sorted.
    pub managed_keys: Vec<String>,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

fn role_lock_error(host: &HostRow, key: &str, action: &str) -> Error {
    Error::Conflict(format!(
        "cannot {action} label {key:?} on host {:?} while it is unlocked: \
         this label moves OpenStack roles; lock the host first \
         (POST /v1/ihosts/{}/lock), then retry",
        host.hostname, host.uuid
    ))
}

const LABEL_SELECT: &str = "SELECT l.uuid AS uuid, h.uuid AS host_uuid, l.label_key AS label_key, \
     l.label_value AS label_value FROM labels l JOIN hosts h ON h.id = l.host_id";

/// The SQL is identical for both backends (`$n` placeholders work in SQLite too),
/// so each backend gets the same functions, generated from one body. The two differences:
/// how a write transaction starts (`$begin_write`) and how a write locks the host row it
/// checks (`$for_update`). SQLite's `BEGIN IMMEDIATE` takes the database's write lock up
/// front, so a second process never fails to upgrade a read; PostgreSQL's `FOR UPDATE` makes
/// writers on the same host (other replicas) wait for each other instead of acting on a
/// stale read, e.g. assigning a role label while another replica unlocks the host.
macro_rules! backend_ops {
    ($module:ident, $db:ty, $begin_write:literal, $for_update:literal) => {
        mod $module {
            use super::*;
            type Pool = sqlx::Pool<$db>;
            type Tx = sqlx::Transaction<'static, $db>;

            async fn begin_write(pool: &Pool) -> Result<Tx, Error> {
                Ok(pool.begin_with($begin_write).await?)
            }

            async fn host_by_uuid(tx: &mut Tx, uuid: &str) -> Result<HostRow, Error> {
                sqlx::query_as::<_, HostRow>(concat!(
                    "SELECT * FROM hosts WHERE uuid = $1",
                    $for_update
                ))
                .bind(uuid)
                .fetch_optional(&mut **tx)
                .await?
                .ok_or_else(|| Error::NotFound(format!("host {uuid} not found")))
            }

            /// Marks the host as having a change its node does not have yet.
            async fn mark_pending(tx: &mut Tx, host: &mut HostRow) -> Result<(), Error> {
                let ts = now();
                let generation: i64 = sqlx::query_scalar(
                    "UPDATE hosts SET sync_generation = sync_generation + 1, \
                     sync_state = 'pending', sync_reason = NULL, sync_changed_at = $1 \
                     WHERE id = $2 RETURNING sync_generation",
                )
                .bind(&ts)
                .bind(host.id)
                .fetch_one(&mut **tx)
                .await?;
                host.sync_generation = generation;
                host.sync_state = SyncState::Pending.as_str().to_string();
                host.sync_reason = None;
                host.sync_changed_at = Some(ts);
                Ok(())
            }

            pub async fn record_sync(
                pool: &Pool,
                host_id: i64,
                generation: i64,
                outcome: &SyncOutcome,
            ) -> Result<bool, Error> {
                // Only a change is written: the audit re-syncs every host and must not
                // rewrite every row each time.
                let reason = outcome.stored_reason();
                let done = sqlx::query(
                    "UPDATE hosts SET sync_state = $1, sync_reason = $2, sync_changed_at = $3 \
                     WHERE id = $4 AND sync_generation = $5 \
                     AND (sync_state <> $1 OR sync_reason IS DISTINCT FROM $2)",
                )
                .bind(outcome.state.as_str())
                .bind(reason)
                .bind(now())
                .bind(host_id)
                .bind(generation)
                .execute(pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            pub async fn get_host(pool: &Pool, uuid: &str) -> Result<HostRow, Error> {
                sqlx::query_as::<_, HostRow>("SELECT * FROM hosts WHERE uuid = $1")
                    .bind(uuid)
                    .fetch_optional(pool)
                    .await?
                    .ok_or_else(|| Error::NotFound(format!("host {uuid} not found")))
            }

            pub async fn host_by_name(pool: &Pool, hostname: &str) -> Result<Option<HostRow>, Error> {
                Ok(sqlx::query_as::<_, HostRow>("SELECT * FROM hosts WHERE hostname = $1")
                    .bind(hostname)
                    .fetch_optional(pool)
                    .await?)
            }

            pub async fn list_hosts(pool: &Pool) -> Result<Vec<HostRow>, Error> {
                Ok(sqlx::query_as::<_, HostRow>("SELECT * FROM hosts ORDER BY hostname")
                    .fetch_all(pool)
                    .await?)
            }

            pub async fn create_host(pool: &Pool, new: &HostCreate) -> Result<HostRow, Error> {
                let mut tx = begin_write(pool).await?;
                let taken: Option<String> =
                    sqlx::query_scalar("SELECT uuid FROM hosts WHERE hostname = $1")
                        .bind(&new.hostname)
                        .fetch_optional(&mut *tx)
                        .await?;
                if let Some(uuid) = taken {
                    return Err(Error::Conflict(format!(
                        "hostname {:?} is already used by host {uuid}",
                        new.hostname
                    )));
                }
                let uuid = uuid::Uuid::new_v4().to_string();
                sqlx::query(
                    "INSERT INTO hosts (uuid, hostname, personality, administrative, operational, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&uuid)
                .bind(&new.hostname)
                .bind(new.personality.as_str())
                .bind(new.administrative.unwrap_or(Administrative::Unlocked).as_str())
                .bind(new.operational.unwrap_or(Operational::Disabled).as_str())
                .bind(now())
                .execute(&mut *tx)
                .await
                .map_err(|e| {
                    if is_unique_violation(&e) {
                        Error::Conflict(format!("hostname {:?} is already used", new.hostname))
                    } else {
                        e.into()
                    }
                })?;
                let row = host_by_uuid(&mut tx, &uuid).await?;
                tx.commit().await?;
                Ok(row)
            }

            pub async fn update_host(
                pool: &Pool,
                uuid: &str,
                patch: &HostPatch,
            ) -> Result<(HostRow, HostRow), Error> {
                let mut tx = begin_write(pool).await?;
                let before = host_by_uuid(&mut tx, uuid).await?;
                if let Some(name) = patch.hostname.as_ref().filter(|n| **n != before.hostname) {
                    let locked = patch.administrative.map_or(before.locked(), |a| a == Administrative::Locked);
                    if !locked {
                        return Err(Error::Conflict(format!(
                            "cannot rename host {:?} while it is unlocked; lock the host first \
                             (POST /v1/ihosts/{}/lock), then retry",
                            before.hostname, before.uuid
                        )));
                    }
                    let taken: Option<String> = sqlx::query_scalar(
                        "SELECT uuid FROM hosts WHERE hostname = $1 AND uuid <> $2",
                    )
                    .bind(name)
                    .bind(uuid)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if let Some(other) = taken {
                        return Err(Error::Conflict(format!(
                            "hostname {name:?} is already used by host {other}"
                        )));
                    }
                }
                sqlx::query(
                    "UPDATE hosts SET hostname = $1, personality = $2, administrative = $3, \
                     operational = $4, updated_at = $5 WHERE id = $6",
                )
                .bind(patch.hostname.as_deref().unwrap_or(&before.hostname))
                .bind(patch.personality.map_or(before.personality.as_str(), |p| p.as_str()))
                .bind(patch.administrative.map_or(before.administrative.as_str(), |p| p.as_str()))
                .bind(patch.operational.map_or(before.operational.as_str(), |p| p.as_str()))
                .bind(now())
                .bind(before.id)
                .execute(&mut *tx)
                .await
                .map_err(|e| {
                    if is_unique_violation(&e) {
                        Error::Conflict("hostname is already used".to_string())
                    } else {
                        e.into()
                    }
                })?;
                let mut after = host_by_uuid(&mut tx, uuid).await?;
                if after.hostname != before.hostname || after.administrative != before.administrative {
                    mark_pending(&mut tx, &mut after).await?;
                }
                tx.commit().await?;
                Ok((before, after))
            }

            pub async fn claim_task(pool: &Pool, uuid: &str, task: &str) -> Result<HostRow, Error> {
                let mut tx = begin_write(pool).await?;
                let host = host_by_uuid(&mut tx, uuid).await?;
                host.not_locking()?;
                sqlx::query("UPDATE hosts SET task = $1 WHERE id = $2")
                    .bind(task)
                    .bind(host.id)
                    .execute(&mut *tx)
                    .await?;
                let row = host_by_uuid(&mut tx, uuid).await?;
                tx.commit().await?;
                Ok(row)
            }

            pub async fn set_task(pool: &Pool, id: i64, task: Option<&str>) -> Result<(), Error> {
                sqlx::query("UPDATE hosts SET task = $1 WHERE id = $2")
                    .bind(task)
                    .bind(id)
                    .execute(pool)
                    .await?;
                Ok(())
            }

            pub async fn interrupt_tasks(pool: &Pool, task: &str) -> Result<u64, Error> {
                let done = sqlx::query("UPDATE hosts SET task = $1 WHERE task LIKE $2")
                    .bind(task)
                    .bind(format!("{TASK_LOCKING}%"))
                    .execute(pool)
                    .await?;
                Ok(done.rows_affected())
            }

            pub async fn delete_host(pool: &Pool, uuid: &str) -> Result<HostRow, Error> {
                let mut tx = begin_write(pool).await?;
                let host = host_by_uuid(&mut tx, uuid).await?;
                sqlx::query("DELETE FROM labels WHERE host_id = $1")
                    .bind(host.id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("DELETE FROM hosts WHERE id = $1")
                    .bind(host.id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(host)
            }

            pub async fn assign_labels(
                pool: &Pool,
                host_uuid: &str,
                labels: &BTreeMap<String, String>,
                overwrite: bool,
            ) -> Result<(HostRow, Vec<Label>), Error> {
                let mut tx = begin_write(pool).await?;
                let mut host = host_by_uuid(&mut tx, host_uuid).await?;
                if !host.locked() {
                    if let Some(key) = labels.keys().find(|k| validate::is_role_label(k)) {
                        return Err(role_lock_error(&host, key, "assign"));
                    }
                }
                // One statement per key against the live-key unique index, so a writer in
                // another replica can never slip in between a check and an insert.
                let upsert = if overwrite {
                    "INSERT INTO labels (created_at, uuid, host_id, label_key, label_value) \
                     VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (host_id, label_key) WHERE deleted_at IS NULL \
                     DO UPDATE SET label_value = excluded.label_value, updated_at = excluded.created_at \
                     RETURNING uuid"
                } else {
                    "INSERT INTO labels (created_at, uuid, host_id, label_key, label_value) \
                     VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (host_id, label_key) WHERE deleted_at IS NULL DO NOTHING \
                     RETURNING uuid"
                };
                let ts = now();
                let mut out = Vec::with_capacity(labels.len());
                let mut duplicates = Vec::new();
                for (key, value) in labels {
                    let stored: Option<String> = sqlx::query_scalar(upsert)
                        .bind(&ts)
                        .bind(uuid::Uuid::new_v4().to_string())
                        .bind(host.id)
                        .bind(key)
                        .bind(value)
                        .fetch_optional(&mut *tx)
                        .await?;
                    let Some(uuid) = stored else {
                        duplicates.push(key.clone());
                        continue;
                    };
                    out.push(Label {
                        uuid,
                        host_uuid: host.uuid.clone(),
                        label_key: key.clone(),
                        label_value: value.clone(),
                    });
                }
                if !duplicates.is_empty() {
                    return Err(Error::Conflict(format!(
                        "host {:?} already has label(s) {}; use ?overwrite=true to replace",
                        host.hostname,
                        duplicates.join(", ")
                    )));
                }
                // The budget counts what the host has after this write (overwrites replace),
                // inside the transaction, so concurrent writers cannot overshoot it together.
                let (count, bytes): (i64, i64) = sqlx::query_as(
                    "SELECT COUNT(*), COALESCE(SUM(LENGTH(label_key) + LENGTH(label_value)), 0) \
                     FROM labels WHERE host_id = $1 AND deleted_at IS NULL",
                )
                .bind(host.id)
                .fetch_one(&mut *tx)
                .await?;
                if let Err(e) = validate::check_label_budget(
                    usize::try_from(count).unwrap_or(usize::MAX),
                    usize::try_from(bytes).unwrap_or(usize::MAX),
                ) {
                    return Err(Error::Conflict(format!(
                        "host {:?} would have {e}; remove labels first (DELETE /v1/labels/{{uuid}})",
                        host.hostname
                    )));
                }
                mark_pending(&mut tx, &mut host).await?;
                tx.commit().await?;
                Ok((host, out))
            }

            pub async fn list_labels(pool: &Pool, host_uuid: &str) -> Result<Vec<Label>, Error> {
                // One statement (the hot read path): no row means no such host, one row
                // without a label means a host without labels.
                let rows: Vec<(Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
                    "SELECT l.uuid, l.label_key, l.label_value FROM hosts h \
                     LEFT JOIN labels l ON l.host_id = h.id AND l.deleted_at IS NULL \
                     WHERE h.uuid = $1 ORDER BY l.label_key",
                )
                .bind(host_uuid)
                .fetch_all(pool)
                .await?;
                if rows.is_empty() {
                    return Err(Error::NotFound(format!("host {host_uuid} not found")));
                }
                Ok(rows
                    .into_iter()
                    .filter_map(|(uuid, key, value)| {
                        Some(Label {
                            uuid: uuid?,
                            host_uuid: host_uuid.to_string(),
                            label_key: key?,
                            label_value: value?,
                        })
                    })
                    .collect())
            }

            pub async fn all_labels(pool: &Pool) -> Result<Vec<(String, String, String)>, Error> {
                Ok(sqlx::query_as(
                    "SELECT h.uuid, l.label_key, l.label_value FROM labels l \
                     JOIN hosts h ON h.id = l.host_id WHERE l.deleted_at IS NULL \
                     ORDER BY h.uuid, l.label_key",
                )
                .fetch_all(pool)
                .await?)
            }

            pub async fn delete_label(pool: &Pool, uuid: &str) -> Result<(HostRow, Label), Error> {
                let mut tx = begin_write(pool).await?;
                let row = sqlx::query_as::<_, LabelRow>(&format!(
                    "{LABEL_SELECT} WHERE l.uuid = $1 AND l.deleted_at IS NULL"
                ))
                .bind(uuid)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or_else(|| Error::NotFound(format!("label {uuid} not found")))?;
                let mut host = host_by_uuid(&mut tx, &row.host_uuid).await?;
                if !host.locked() && validate::is_role_label(&row.label_key) {
                    return Err(role_lock_error(&host, &row.label_key, "remove"));
                }
                let ts = now();
                let done = sqlx::query(
                    "UPDATE labels SET deleted_at = $1, updated_at = $1 \
                     WHERE uuid = $2 AND deleted_at IS NULL",
                )
                .bind(&ts)
                .bind(uuid)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    // Another replica removed it between our read and the host lock.
                    return Err(Error::NotFound(format!("label {uuid} not found")));
                }
                mark_pending(&mut tx, &mut host).await?;
                tx.commit().await?;
                Ok((host, row.into()))
            }

            pub async fn label_state(pool: &Pool, host_id: i64) -> Result<LabelState, Error> {
                let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
                    "SELECT label_key, label_value, deleted_at FROM labels WHERE host_id = $1 \
                     ORDER BY label_key",
                )
                .bind(host_id)
                .fetch_all(pool)
                .await?;
                let mut state = LabelState::default();
                for (key, value, deleted_at) in rows {
                    if deleted_at.is_none() {
                        state.labels.insert(key.clone(), value);
                    }
                    if state.managed_keys.last() != Some(&key) {
                        state.managed_keys.push(key);
                    }
                }
                Ok(state)
            }
        }
    };
}

backend_ops!(sqlite_ops, sqlx::Sqlite, "BEGIN IMMEDIATE", "");
backend_ops!(pg_ops, sqlx::Postgres, "BEGIN", " FOR UPDATE");

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// The inventory database. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
    writes: Arc<tokio::sync::Mutex<()>>,
}

macro_rules! dispatch {
    ($self:ident . $f:ident ( $($arg:expr),* )) => {{
        match &$self.backend {
            // SQLite has one writer at a time anyway; queueing on a mutex is cheaper and
            // fairer than SQLite's sleeping busy handler.
            Backend::Sqlite(p) => {
                let _guard = $self.writes.lock().await;
                sqlite_ops::$f(p $(, $arg)*).await
            }
            // PostgreSQL writers run concurrently, ordered per host by the row lock.
            Backend::Postgres(p) => pg_ops::$f(p $(, $arg)*).await,
        }
    }};
    (read $self:ident . $f:ident ( $($arg:expr),* )) => {{
        match &$self.backend {
            Backend::Sqlite(p) => sqlite_ops::$f(p $(, $arg)*).await,
            Backend::Postgres(p) => pg_ops::$f(p $(, $arg)*).await,
        }
    }};
}

impl Store {
    /// Opens the database and runs the migrations.
    ///
    /// `url` is `postgres://...`/`postgresql://...`, `sqlite:...`, or a plain file path
    /// (SQLite, created if missing).
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(8)
                .acquire_timeout(Duration::from_secs(10))
                .connect(url)
                .await?;
            sqlx::migrate!("./migrations/postgres").run(&pool).await?;
            Backend::Postgres(pool)
        } else {
            let opts = if url.starts_with("sqlite:") {
                SqliteConnectOptions::from_str(url)?
            } else {
                SqliteConnectOptions::new().filename(url)
            };
            let opts = opts
                .create_if_missing(true)
                .foreign_keys(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(10));
            let pool = SqlitePoolOptions::new()
                .max_connections(4)
                .connect_with(opts)
                .await?;
            sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
            Backend::Sqlite(pool)
        };
        Ok(Store {
            backend,
            writes: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    pub async fn get_host(&self, uuid: &str) -> Result<HostRow, Error> {
        dispatch!(read self.get_host(uuid))
    }

    pub async fn list_hosts(&self) -> Result<Vec<HostRow>, Error> {
        dispatch!(read self.list_hosts())
    }

    /// The host whose hostname (and so node name) is `hostname`, if any.
    pub async fn host_by_name(&self, hostname: &str) -> Result<Option<HostRow>, Error> {
        dispatch!(read self.host_by_name(hostname))
    }

    pub async fn create_host(&self, new: &HostCreate) -> Result<HostRow, Error> {
        dispatch!(self.create_host(new))
    }

    /// Returns the host before and after the change.
    pub async fn update_host(
        &self,
        uuid: &str,
        patch: &HostPatch,
    ) -> Result<(HostRow, HostRow), Error> {
        dispatch!(self.update_host(uuid, patch))
    }

    pub async fn delete_host(&self, uuid: &str) -> Result<HostRow, Error> {
        dispatch!(self.delete_host(uuid))
    }

    /// Sets the host's task, unless a lock is under way on it (409).
    pub async fn claim_task(&self, uuid: &str, task: &str) -> Result<HostRow, Error> {
        dispatch!(self.claim_task(uuid, task))
    }

    /// Sets (or clears) the task of the host with internal id `id`.
    pub async fn set_task(&self, id: i64, task: Option<&str>) -> Result<(), Error> {
        dispatch!(self.set_task(id, task))
    }

    /// Replaces the task of every lock under way with `task` (at a start: whatever ran them
    /// stopped); returns how many there were.
    pub async fn interrupt_tasks(&self, task: &str) -> Result<u64, Error> {
        dispatch!(self.interrupt_tasks(task))
    }

    /// Assigns all labels or none. The caller validates syntax first.
    pub async fn assign_labels(
        &self,
        host_uuid: &str,
        labels: &BTreeMap<String, String>,
        overwrite: bool,
    ) -> Result<(HostRow, Vec<Label>), Error> {
        dispatch!(self.assign_labels(host_uuid, labels, overwrite))
    }

    pub async fn list_labels(&self, host_uuid: &str) -> Result<Vec<Label>, Error> {
        dispatch!(read self.list_labels(host_uuid))
    }

    /// Every live label of every host as `(host uuid, key, value)`, sorted by host uuid then
    /// key: one query for the status page, however many hosts there are.
    pub async fn all_labels(&self) -> Result<Vec<(String, String, String)>, Error> {
        dispatch!(read self.all_labels())
    }

    /// Soft-deletes a label (sets `deleted_at`).
    pub async fn delete_label(&self, uuid: &str) -> Result<(HostRow, Label), Error> {
        dispatch!(self.delete_label(uuid))
    }

    pub async fn label_state(&self, host_id: i64) -> Result<LabelState, Error> {
        dispatch!(read self.label_state(host_id))
    }

    /// Records a sync's outcome on the host, unless a write changed the host since the sync
    /// read it (`generation`, see [`HostRow::sync_generation`]) or nothing changed. Returns
    /// whether the row was written.
    pub async fn record_sync(
        &self,
        host_id: i64,
        generation: i64,
        outcome: &SyncOutcome,
    ) -> Result<bool, Error> {
        dispatch!(self.record_sync(host_id, generation, outcome))
    }

    /// Counts label rows including soft-deleted ones (for tests and diagnostics).
    pub async fn count_label_rows(&self, include_deleted: bool) -> Result<i64, Error> {
        let sql = if include_deleted {
            "SELECT COUNT(*) FROM labels"
        } else {
            "SELECT COUNT(*) FROM labels WHERE deleted_at IS NULL"
        };
        Ok(match &self.backend {
            Backend::Sqlite(p) => sqlx::query_scalar(sql).fetch_one(p).await?,
            Backend::Postgres(p) => sqlx::query_scalar(sql).fetch_one(p).await?,
        })
    }
}
