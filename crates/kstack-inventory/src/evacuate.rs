//! A compute host's lock that is safe for its guests (seed 003's lock as maintenance): before
//! the node gets its `NoExecute` taint (which stops nova-compute and libvirt there, and with
//! them every guest), the host's nova-compute service is disabled, so nothing new lands on it,
//! and each instance on it moves to another host: a live migration for a running one, a cold
//! migration (confirmed) for one that is stopped or whose live migration failed. Only when the
//! host is empty is it locked. The request answers 202 at once; the host's `task` says how far
//! the move is (`locking: ...`), and how it ended when it failed (`lock failed: ...`: the host
//! stays unlocked and its service is enabled again).
//!
//! Refused with 409 before anything changes when the host has instances and no other compute
//! service is enabled and up to take them, unless the lock is forced (`?force=true`: the old
//! behaviour, the taint at once).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kstack_ports::{ComputeHosts, Instance};

use crate::api::AppState;
use crate::error::Error;
use crate::model::{Administrative, HostPatch};
use crate::store::{HostRow, TASK_LOCKING};

/// How a lock waits for the compute service.
#[derive(Debug, Clone, Copy)]
pub struct MoveTiming {
    /// Between two looks at a moving instance.
    pub poll: Duration,
    /// Longest one instance may take to move.
    pub per_instance: Duration,
}

impl Default for MoveTiming {
    fn default() -> Self {
        MoveTiming {
            poll: Duration::from_secs(2),
            per_instance: Duration::from_secs(900),
        }
    }
}

/// The reason nova shows on a service the lock disabled.
pub const DISABLED_REASON: &str = "kstack: host locked for maintenance";

/// What [`start`] did.
pub enum Started {
    /// Nothing to move: the host may be locked now.
    LockNow,
    /// The instances are moving; the host (with its task) as it is now.
    Moving(Box<HostRow>),
}

fn unavailable(e: impl std::fmt::Display) -> Error {
    Error::Unavailable(format!(
        "the compute service (nova) did not answer, nothing was changed: {e}"
    ))
}

fn describe(instances: &[Instance]) -> String {
    instances
        .iter()
        .map(|i| format!("{} ({}, {})", i.name, i.id, i.status))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks whether `host`'s instances can move, and starts moving them. Nothing is changed
/// when this returns an error.
pub async fn start(
    state: &AppState,
    compute: Arc<dyn ComputeHosts>,
    host: HostRow,
) -> Result<Started, Error> {
    let services = compute.services().await.map_err(unavailable)?;
    if !services.iter().any(|s| s.host == host.hostname) {
        // No nova-compute there (not deployed yet, or the host runs none): nothing to move.
        return Ok(Started::LockNow);
    }
    let instances = compute
        .instances_on(&host.hostname)
        .await
        .map_err(unavailable)?;
    if instances.is_empty() {
        compute
            .set_enabled(&host.hostname, false, DISABLED_REASON)
            .await
            .map_err(unavailable)?;
        return Ok(Started::LockNow);
    }
    let others: Vec<&str> = services
        .iter()
        .filter(|s| s.enabled && s.up && s.host != host.hostname)
        .map(|s| s.host.as_str())
        .collect();
    if others.is_empty() {
        return Err(Error::Conflict(format!(
            "host {:?} has {} instance(s) on it: {}; no other compute host is enabled and up to \
             take them. Enable or add one, or move or delete them, then lock again; or lock with \
             ?force=true, which stops them with the host's nova-compute and libvirt",
            host.hostname,
            instances.len(),
            describe(&instances)
        )));
    }
    let task = format!(
        "{TASK_LOCKING}: moving {} instance(s) off to other compute hosts",
        instances.len()
    );
    let claimed = state.store.claim_task(&host.uuid, &task).await?;
    if let Err(e) = compute
        .set_enabled(&host.hostname, false, DISABLED_REASON)
        .await
    {
        let _ = state.store.set_task(host.id, None).await;
        return Err(unavailable(e));
    }
    state.hosts_changed();
    tracing::info!(host = %host.hostname, instances = instances.len(), "lock: moving the instances off");
    let state = state.clone();
    let row = claimed.clone();
    tokio::spawn(async move {
        run(state, compute, row, instances).await;
    });
    Ok(Started::Moving(Box::new(claimed)))
}

/// Moves every instance off, then locks the host; or records why it could not.
async fn run(
    state: AppState,
    compute: Arc<dyn ComputeHosts>,
    host: HostRow,
    instances: Vec<Instance>,
) {
    let timing = state.moves;
    let total = instances.len();
    let mut failures = Vec::new();
    for (n, inst) in instances.iter().enumerate() {
        let task = format!(
            "{TASK_LOCKING}: moving instance {} of {total} ({}, {})",
            n + 1,
            inst.name,
            inst.id
        );
        if let Err(e) = state.store.set_task(host.id, Some(&task)).await {
            tracing::warn!(host = %host.hostname, error = %e, "recording the lock's progress failed");
        }
        state.hosts_changed();
        let t0 = Instant::now();
        match move_one(compute.as_ref(), inst, &host.hostname, timing).await {
            Ok(how) => {
                tracing::info!(host = %host.hostname, instance = %inst.id, how, secs = t0.elapsed().as_secs_f64(), "lock: instance moved")
            }
            Err(why) => {
                tracing::warn!(host = %host.hostname, instance = %inst.id, why = %why, "lock: instance did not move");
                failures.push(format!("{} ({}): {why}", inst.name, inst.id));
            }
        }
    }
    // Whatever is still there (an instance that did not move, or one that arrived meanwhile).
    let left = match compute.instances_on(&host.hostname).await {
        Ok(left) => left,
        Err(e) => {
            failures.push(format!("listing the instances left on the host: {e}"));
            Vec::new()
        }
    };
    if failures.is_empty() && !left.is_empty() {
        failures.push(format!("still on the host: {}", describe(&left)));
    }
    if failures.is_empty() {
        let patch = HostPatch {
            administrative: Some(Administrative::Locked),
            ..HostPatch::default()
        };
        match crate::api::update_and_sync_row(&state, &host.uuid, &patch).await {
            Ok(_) => {
                let _ = state.store.set_task(host.id, None).await;
                tracing::info!(host = %host.hostname, instances = total, "lock: host empty, locked");
            }
            Err(e) => {
                failures.push(format!("locking the host after moving its instances: {e}"));
            }
        }
    }
    if !failures.is_empty() {
        // The host stays unlocked: new instances may land on it again.
        let enabled = compute.set_enabled(&host.hostname, true, "").await;
        let mut task = format!(
            "lock failed, the host stays unlocked: {}",
            failures.join("; ")
        );
        if let Err(e) = enabled {
            task.push_str(&format!(
                "; enabling its nova-compute service again failed too ({e}): enable it by hand"
            ));
        }
        if let Err(e) = state.store.set_task(host.id, Some(&task)).await {
            tracing::warn!(host = %host.hostname, error = %e, "recording the lock's failure failed");
        }
        tracing::warn!(host = %host.hostname, reason = %task, "lock failed");
    }
    state.hosts_changed();
}

/// Moves one instance off `from`; says how, or why not.
async fn move_one(
    compute: &dyn ComputeHosts,
    inst: &Instance,
    from: &str,
    timing: MoveTiming,
) -> Result<&'static str, String> {
    let deadline = Instant::now() + timing.per_instance;
    let running = matches!(inst.status.as_str(), "ACTIVE" | "PAUSED");
    if running {
        compute
            .live_migrate(&inst.id)
            .await
            .map_err(|e| format!("live migration refused: {e}"))?;
        match settle(compute, &inst.id, deadline, timing.poll).await? {
            None => return Ok("gone"),
            Some(i) if i.host.as_deref() != Some(from) => return Ok("live migration"),
            // Back on this host: the live migration failed; a cold one may still do.
            Some(_) => {}
        }
    }
    compute.cold_migrate(&inst.id).await.map_err(|e| {
        format!(
            "{}cold migration refused: {e}",
            if running {
                "live migration failed, "
            } else {
                ""
            }
        )
    })?;
    let Some(i) = settle(compute, &inst.id, deadline, timing.poll).await? else {
        return Ok("gone");
    };
    match i.status.as_str() {
        "VERIFY_RESIZE" => {
            compute
                .confirm_migration(&inst.id)
                .await
                .map_err(|e| format!("confirming the cold migration: {e}"))?;
            let Some(i) = settle(compute, &inst.id, deadline, timing.poll).await? else {
                return Ok("gone");
            };
            if i.host.as_deref() == Some(from) {
                return Err(format!(
                    "still on this host after its cold migration ({})",
                    i.status
                ));
            }
            Ok("cold migration")
        }
        status if i.host.as_deref() != Some(from) && status != "ERROR" => Ok("cold migration"),
        status => Err(format!(
            "cold migration ended with the instance {status} on {}",
            i.host.as_deref().unwrap_or("no host")
        )),
    }
}

/// Waits until the instance has no task under way and is not in a moving status; `None` when
/// it was deleted meanwhile.
async fn settle(
    compute: &dyn ComputeHosts,
    id: &str,
    deadline: Instant,
    poll: Duration,
) -> Result<Option<Instance>, String> {
    loop {
        let now = compute
            .instance(id)
            .await
            .map_err(|e| format!("reading the instance: {e}"))?;
        match now {
            None => return Ok(None),
            Some(i)
                if i.task_state.is_none()
                    && !matches!(i.status.as_str(), "MIGRATING" | "RESIZE" | "BUILD") =>
            {
                return Ok(Some(i));
            }
            Some(i) => {
                if Instant::now() >= deadline {
                    return Err(format!(
                        "still {} (task {}) after the time limit",
                        i.status,
                        i.task_state.as_deref().unwrap_or("none")
                    ));
                }
            }
        }
        tokio::time::sleep(poll).await;
    }
}
