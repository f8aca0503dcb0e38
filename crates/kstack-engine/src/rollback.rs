//! Rollback: a service back to a recorded generation. The automatic rollback of a failed
//! deploy step and `kstack rollback SERVICE [--to GENERATION]` both restore a generation the
//! same way: re-apply the manifests its record holds (workloads, Services, access control;
//! not Jobs, which ran already, nor claims, which hold data), whose content-named ConfigMaps
//! and Secrets are still in the namespace because prune keeps what any record points at;
//! then wait until every workload is healthy again. The result is recorded as a new
//! generation with `rollback_of`, so generations only ever increase.
//!
//! A StatefulSet's pods of the failed revision that never became ready are deleted after its
//! template is restored: the controller waits for them otherwise, and never replaces them.
//!
//! What a rollback does not undo: database schema. Expand-phase migrations leave a schema the
//! previous release still runs on; once a contract phase ran, it does not. A rollback to a
//! generation with other images than a later generation whose contract phase ran is refused.
use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::cluster::{Cluster, Condition, ObjectRef, WaitOutcome};
use crate::execute::{DEFAULT_OUTAGE, retry};
use crate::release::{
    DeployStep, IndexEntry, Migration, ReleaseHistory, ServiceRecord, ServiceState, StepOutcome,
    WORKLOAD_KINDS, index_config_map, record_config_map, short_reason,
};

/// Kinds a rollback does not re-apply: Jobs ran already (and are immutable), claims hold data.
const NOT_RESTORED: &[&str] = &["Job", "PersistentVolumeClaim"];

/// Re-applies the manifests of `record` and waits (up to `timeout` per workload) until each
/// workload is healthy. Returns the writes made, or why it failed.
pub async fn restore(
    cluster: &dyn Cluster,
    record: &ServiceRecord,
    timeout: Duration,
) -> Result<u64, String> {
    let mut writes = 0;
    let retries = AtomicU64::new(0);
    let restored: Vec<_> = record
        .manifests
        .iter()
        .filter(|m| !NOT_RESTORED.contains(&m["kind"].as_str().unwrap_or_default()))
        // Keys are never rolled back: tokens signed since would no longer validate.
        .filter(|m| !crate::plan::is_generated(m))
        .collect();
    for m in &restored {
        if m["kind"] == "StatefulSet" {
            let r = ObjectRef::of(m);
            let current = retry(&retries, DEFAULT_OUTAGE, || cluster.get(&r))
                .await
                .map_err(|e| format!("reading {r}: {e}"))?;
            if current.is_some_and(|c| crate::status::needs_replacement(m, &c)) {
                retry(&retries, DEFAULT_OUTAGE, || cluster.delete_keeping_pods(&r))
                    .await
                    .map_err(|e| format!("replacing {r}: {e}"))?;
                writes += 1;
            }
        }
        retry(&retries, DEFAULT_OUTAGE, || cluster.apply(m))
            .await
            .map_err(|e| format!("applying {}: {e}", ObjectRef::of(m)))?;
        writes += 1;
        if m["kind"] == "StatefulSet" {
            writes += unstick(cluster, m).await?;
        }
    }
    for m in restored
        .iter()
        .filter(|m| WORKLOAD_KINDS.contains(&m["kind"].as_str().unwrap_or_default()))
    {
        let r = ObjectRef::of(m);
        let deadline = tokio::time::Instant::now() + timeout;
        match retry(&retries, DEFAULT_OUTAGE, || {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            cluster.wait(&r, Condition::RolloutComplete, left)
        })
        .await
        .map_err(|e| format!("waiting for {r}: {e}"))?
        {
            WaitOutcome::Met => {}
            WaitOutcome::Failed(why) => return Err(format!("{r}: {why}")),
            WaitOutcome::TimedOut => {
                return Err(format!("{r} was not healthy after {}s", timeout.as_secs()));
            }
        }
    }
    Ok(writes)
}

/// A StatefulSet (with ordered pod management) does not replace a pod that never became ready
/// when its template is reverted: it waits for that pod first. Its pods that are not ready are
/// deleted, so the controller recreates them from the restored template. Returns the deletes.
async fn unstick(cluster: &dyn Cluster, sts: &serde_json::Value) -> Result<u64, String> {
    let r = ObjectRef::of(sts);
    let namespace = r.namespace.clone().unwrap_or_default();
    let selector = sts["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    if selector.is_empty() {
        return Ok(0);
    }
    let retries = AtomicU64::new(0);
    let pods = retry(&retries, DEFAULT_OUTAGE, || {
        cluster.pods(&namespace, &selector)
    })
    .await
    .map_err(|e| format!("listing the pods of {r}: {e}"))?;
    let mut deleted = 0;
    for p in &pods {
        let owned = p["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o["kind"] == "StatefulSet" && o["name"].as_str() == Some(r.name.as_str()));
        let ready = p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        if owned && !ready {
            let pod = ObjectRef::new(
                "Pod",
                Some(&namespace),
                p["metadata"]["name"].as_str().unwrap_or_default(),
            );
            retry(&retries, DEFAULT_OUTAGE, || cluster.delete(&pod))
                .await
                .map_err(|e| format!("deleting {pod}: {e}"))?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// A duration in whole milliseconds, as step records keep it.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The record of `restored` re-applied as generation `generation`.
pub fn restored_record(
    restored: &ServiceRecord,
    generation: u64,
    deploy_generation: u64,
    now: &str,
) -> ServiceRecord {
    ServiceRecord {
        generation,
        deploy_generation,
        time: now.to_owned(),
        state: ServiceState::Healthy,
        rollback_of: Some(restored.generation),
        migration: None,
        steps: Vec::new(),
        ..restored.clone()
    }
}

/// Why a rollback was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RollbackError {
    #[error(
        "service `{service}` has no recorded generation in namespace {namespace}: it was never deployed there (see `kstack history`)"
    )]
    NoHistory { service: String, namespace: String },
    #[error(
        "service `{service}` has no generation {generation}; recorded: {recorded} (see `kstack history {service}`)"
    )]
    UnknownGeneration {
        service: String,
        generation: u64,
        recorded: String,
    },
    #[error(
        "service `{service}`: generation {generation} never became healthy; roll back to a healthy one (see `kstack history {service}`)"
    )]
    NotHealthy { service: String, generation: u64 },
    #[error(
        "service `{service}` has no healthy generation older than the one it runs ({current}) with other objects: nothing to roll back to"
    )]
    NothingEarlier { service: String, current: u64 },
    #[error("service `{service}` already runs what generation {generation} holds")]
    AlreadyThere { service: String, generation: u64 },
    #[error(
        "service `{service}`: refusing to roll back to generation {target} ({target_release}): generation {contracted} ({contracted_release}) ran the contract phase of its database migrations, and the schema no longer serves the code of generation {target}. A rollback does not undo schema changes; restore the database from a backup taken before generation {contracted} if you must go back"
    )]
    CrossesContract {
        service: String,
        target: u64,
        target_release: String,
        contracted: u64,
        contracted_release: String,
    },
    #[error(
        "service `{service}`: generation {generation} mounts {missing}, which no longer exists in the namespace; it cannot be restored"
    )]
    MissingConfig {
        service: String,
        generation: u64,
        missing: String,
    },
}

/// What a rollback will restore: checked against the history and the namespace's objects.
#[derive(Debug, Clone, PartialEq)]
pub struct RollbackPlan {
    pub service: String,
    /// The generation the service runs now.
    pub current: u64,
    pub target: ServiceRecord,
    /// The generation the rollback will be recorded as.
    pub generation: u64,
}

/// Picks and checks the generation to restore: `to`, or the newest healthy generation older
/// than the current one with other objects. `existing` are the ConfigMaps and Secrets in the
/// namespace.
pub fn plan_rollback(
    history: &ReleaseHistory,
    namespace: &str,
    service: &str,
    to: Option<u64>,
    existing: &BTreeSet<ObjectRef>,
) -> Result<RollbackPlan, RollbackError> {
    let Some(records) = history.services.get(service).filter(|m| !m.is_empty()) else {
        return Err(RollbackError::NoHistory {
            service: service.to_owned(),
            namespace: namespace.to_owned(),
        });
    };
    let latest = records.values().next_back().map_or(0, |r| r.generation);
    let current = history
        .index
        .as_ref()
        .and_then(|i| i.services.get(service))
        .map_or(latest, |e| e.generation);
    let current_record = records.get(&current);
    let target = match to {
        Some(g) => {
            let r = records
                .get(&g)
                .ok_or_else(|| RollbackError::UnknownGeneration {
                    service: service.to_owned(),
                    generation: g,
                    recorded: records
                        .keys()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            if r.state != ServiceState::Healthy {
                return Err(RollbackError::NotHealthy {
                    service: service.to_owned(),
                    generation: g,
                });
            }
            if current_record.is_some_and(|c| c.objects == r.objects)
                && history
                    .index
                    .as_ref()
                    .and_then(|i| i.services.get(service))
                    .is_some_and(|e| e.state == ServiceState::Healthy)
            {
                return Err(RollbackError::AlreadyThere {
                    service: service.to_owned(),
                    generation: g,
                });
            }
            r
        }
        None => records
            .values()
            .rev()
            .filter(|r| r.generation < current && r.state == ServiceState::Healthy)
            .find(|r| current_record.is_none_or(|c| c.objects != r.objects))
            .ok_or_else(|| RollbackError::NothingEarlier {
                service: service.to_owned(),
                current,
            })?,
    };
    // Schema: no contract phase may have run for other code after the target generation.
    let target_images = target.workload_images();
    if let Some(c) = records.values().find(|r| {
        r.generation > target.generation
            && r.migration == Some(Migration::Contracted)
            && r.workload_images() != target_images
    }) {
        return Err(RollbackError::CrossesContract {
            service: service.to_owned(),
            target: target.generation,
            target_release: target.release.clone(),
            contracted: c.generation,
            contracted_release: c.release.clone(),
        });
    }
    if let Some(missing) = target.config_refs.iter().find(|r| !existing.contains(*r)) {
        return Err(RollbackError::MissingConfig {
            service: service.to_owned(),
            generation: target.generation,
            missing: missing.to_string(),
        });
    }
    Ok(RollbackPlan {
        service: service.to_owned(),
        current,
        target: target.clone(),
        generation: latest + 1,
    })
}

/// The outcome of [`rollback`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RollbackReport {
    pub service: String,
    pub from: u64,
    pub to: u64,
    /// The generation the restored state is recorded as.
    pub generation: u64,
    pub healthy: bool,
    pub message: String,
    pub writes: u64,
}

/// Restores `plan.target`, waits until it is healthy, and records the result (a new
/// generation, healthy or failed) and the index. Errors talking to the cluster while
/// recording are returned; a restore that does not become healthy is reported, not an error.
pub async fn rollback(
    cluster: &dyn Cluster,
    namespace: &str,
    history: &ReleaseHistory,
    plan: &RollbackPlan,
    timeout: Duration,
    now: &str,
) -> Result<RollbackReport, crate::cluster::ClusterError> {
    let deploy_generation = history.next_deploy_generation();
    let mut record = restored_record(&plan.target, plan.generation, deploy_generation, now);
    let started = tokio::time::Instant::now();
    let restored = restore(cluster, &plan.target, timeout).await;
    record.steps = vec![DeployStep {
        step: "rollback".into(),
        action: format!("restore generation {}", plan.target.generation),
        started_ms: 0,
        duration_ms: millis(started.elapsed()),
        outcome: if restored.is_ok() {
            StepOutcome::Done
        } else {
            StepOutcome::Failed
        },
        reason: restored.as_ref().err().map(|why| short_reason(why)),
    }];
    let (healthy, message, mut writes) = match restored {
        Ok(w) => (
            true,
            format!(
                "{}: rolled back from generation {} to generation {} (recorded as generation {}); healthy",
                plan.service, plan.current, plan.target.generation, plan.generation
            ),
            w,
        ),
        Err(why) => {
            record.state = ServiceState::Failed;
            (
                false,
                format!(
                    "{}: rollback to generation {} applied but not healthy: {why}",
                    plan.service, plan.target.generation
                ),
                0,
            )
        }
    };
    let retries = AtomicU64::new(0);
    let record_map = record_config_map(namespace, &record);
    retry(&retries, DEFAULT_OUTAGE, || cluster.apply(&record_map)).await?;
    let mut index = history.index.clone().unwrap_or_default();
    index.generation = deploy_generation;
    index.time = now.to_owned();
    index.services.insert(
        plan.service.clone(),
        IndexEntry {
            generation: plan.generation,
            state: record.state,
        },
    );
    let index_map = index_config_map(namespace, &index);
    retry(&retries, DEFAULT_OUTAGE, || cluster.apply(&index_map)).await?;
    writes += 2;
    Ok(RollbackReport {
        service: plan.service.clone(),
        from: plan.current,
        to: plan.target.generation,
        generation: plan.generation,
        healthy,
        message,
        writes,
    })
}
