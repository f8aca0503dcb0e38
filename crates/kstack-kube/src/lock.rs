//! The deploy lock: one writer at a time per cloud namespace, as a `coordination.k8s.io` Lease
//! (the object Kubernetes' own leader election uses).
//!
//! A writer (`kstack deploy`, `kstack rollback`) takes the Lease named [`LEASE_NAME`] in the
//! cloud's namespace, renews it every [`RENEW_EVERY`] while it works, and clears its holder when
//! done. Another writer finds it held: it waits, or with `--no-wait` fails at once naming the
//! holder. A holder that stops renewing (a killed process) loses it: like client-go's leader
//! election, a waiter takes a Lease it has seen unchanged for [`LEASE_SECONDS`] of its own
//! clock, so clocks that disagree between machines cannot steal a live lock. A holder on the
//! same machine whose process is gone is known dead at once, and its lock is taken without
//! waiting. Readers (`plan`,
//! `status`, `history`) never take it.
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kstack_model::labels::MANAGED_BY;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// The Lease's name in the cloud's namespace.
pub const LEASE_NAME: &str = "kstack-deploy";
/// How long a holder that stopped renewing keeps the lock.
pub const LEASE_SECONDS: i32 = 30;
/// How often the holder renews.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// How often a waiter looks again.
const POLL: Duration = Duration::from_secs(2);

/// Who holds the lock, as the Lease says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Holder {
    pub identity: String,
    /// When the holder took it (RFC 3339), if recorded.
    pub since: Option<String>,
    /// When the holder last renewed it (RFC 3339), if recorded.
    pub renewed: Option<String>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.identity)?;
        if let Some(s) = &self.since {
            write!(f, " since {s}")?;
        }
        if let Some(r) = &self.renewed {
            write!(f, ", renewed {r}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// `--no-wait` and someone holds it.
    #[error(
        "the deploy lock of namespace {namespace} (Lease {LEASE_NAME}) is held by {holder}; \
         wait for it to finish, or run without --no-wait to wait (a holder that stops renewing \
         loses it after {LEASE_SECONDS}s)"
    )]
    Held { namespace: String, holder: Holder },
    #[error("taking the deploy lock of namespace {namespace}: {source}")]
    Api {
        namespace: String,
        source: kube::Error,
    },
}

/// A held lock. It renews itself in the background until [`DeployLock::release`] or drop;
/// [`DeployLock::lost`] resolves if another writer took it meanwhile.
pub struct DeployLock {
    api: Api<Lease>,
    identity: String,
    lost: watch::Receiver<Option<String>>,
    renewer: tokio::task::JoinHandle<()>,
    /// How long the caller waited for it.
    pub waited: Duration,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn holder_of(lease: &Lease) -> Option<Holder> {
    let spec = lease.spec.as_ref()?;
    let identity = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    Some(Holder {
        identity,
        since: spec.acquire_time.as_ref().map(|t| t.0.to_string()),
        renewed: spec.renew_time.as_ref().map(|t| t.0.to_string()),
    })
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// An error worth another try while waiting: the API server restarting, or a race.
fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 409 || s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Takes the deploy lock of `namespace` for `identity`. A held lock is waited for (calling
/// `on_wait` each time its holder changes), or with `wait == false` refused at once. The
/// namespace must exist.
pub async fn acquire(
    client: Client,
    namespace: &str,
    identity: &str,
    wait: bool,
    on_wait: &(dyn Fn(&Holder) + Sync),
) -> Result<DeployLock, LockError> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let api_err = |source| LockError::Api {
        namespace: namespace.to_owned(),
        source,
    };
    let started = Instant::now();
    // The Lease's resourceVersion as this waiter last saw it, and since when.
    let mut seen: Option<(String, Instant)> = None;
    let mut announced: Option<String> = None;
    let mut outage_since: Option<Instant> = None;
    loop {
        match try_take(&api, identity, &mut seen).await {
            Ok(Attempt::Taken) => break,
            Ok(Attempt::Raced) => continue,
            Ok(Attempt::Held(holder)) => {
                outage_since = None;
                if !wait {
                    return Err(LockError::Held {
                        namespace: namespace.to_owned(),
                        holder,
                    });
                }
                if announced.as_deref() != Some(holder.identity.as_str()) {
                    on_wait(&holder);
                    announced = Some(holder.identity.clone());
                }
            }
            Err(e) if is_transient(&e) => {
                // A waiter that cannot see the Lease starts its count afresh afterwards, so
                // the holder gets its full time to renew once the API server is back.
                seen = None;
                let since = *outage_since.get_or_insert_with(Instant::now);
                if since.elapsed() > OUTAGE {
                    return Err(api_err(e));
                }
                tracing::warn!(error = %e, "reading the deploy lock failed; retrying");
            }
            Err(e) => return Err(api_err(e)),
        }
        tokio::time::sleep(POLL).await;
    }
    let (tx, lost) = watch::channel(None);
    let renewer = tokio::spawn(renew(api.clone(), identity.to_owned(), tx));
    Ok(DeployLock {
        api,
        identity: identity.to_owned(),
        lost,
        renewer,
        waited: started.elapsed(),
    })
}

/// How long taking the lock rides out an unreachable API server.
const OUTAGE: Duration = Duration::from_secs(120);

enum Attempt {
    Taken,
    Held(Holder),
    /// Another writer changed the Lease between the read and the write: look again.
    Raced,
}

/// One attempt at taking the Lease for `identity`.
async fn try_take(
    api: &Api<Lease>,
    identity: &str,
    seen: &mut Option<(String, Instant)>,
) -> Result<Attempt, kube::Error> {
    let fresh = LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(LEASE_SECONDS),
        acquire_time: Some(now()),
        renew_time: Some(now()),
        ..Default::default()
    };
    let existing = match api.get(LEASE_NAME).await {
        Ok(l) => l,
        Err(e) if is_not_found(&e) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAME.into()),
                    labels: Some([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())].into()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    lease_transitions: Some(0),
                    ..fresh
                }),
            };
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Taken),
                // Another writer created it first: look again.
                Err(e) if is_conflict(&e) => Ok(Attempt::Raced),
                Err(e) => Err(e),
            };
        }
        Err(e) => return Err(e),
    };
    let version = existing
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let free = match holder_of(&existing) {
        None => true,
        Some(h) if h.identity == identity => true,
        // A kstack process on this machine that no longer runs (killed): no need to wait.
        Some(h) if holder_is_gone(&h.identity) => true,
        Some(_) => {
            // Expired when this waiter has seen the same version for the lease's duration.
            let duration = existing
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .unwrap_or(LEASE_SECONDS)
                .max(1) as u64;
            match seen {
                Some((v, at)) if *v == version => at.elapsed() >= Duration::from_secs(duration),
                _ => {
                    *seen = Some((version.clone(), Instant::now()));
                    false
                }
            }
        }
    };
    if !free {
        return Ok(holder_of(&existing).map_or(Attempt::Raced, Attempt::Held));
    }
    let transitions = existing
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0);
    let mut lease = existing.clone();
    lease.spec = Some(LeaseSpec {
        lease_transitions: Some(transitions + 1),
        ..fresh
    });
    match api
        .replace(LEASE_NAME, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => {
            if let Some(h) = holder_of(&existing).filter(|h| h.identity != identity) {
                tracing::warn!(previous = %h, "took over a deploy lock its holder stopped renewing");
            }
            Ok(Attempt::Taken)
        }
        // Someone else renewed or took it between the read and the write.
        Err(e) if is_conflict(&e) => Ok(Attempt::Raced),
        Err(e) => Err(e),
    }
}

/// Renews the Lease until the task is aborted; reports a takeover on `lost`.
async fn renew(api: Api<Lease>, identity: String, lost: watch::Sender<Option<String>>) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let mut lease = match api.get(LEASE_NAME).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "renewing the deploy lock failed; retrying");
                continue;
            }
        };
        match holder_of(&lease) {
            Some(h) if h.identity == identity => {}
            other => {
                let by = other.map_or_else(|| "nobody".to_owned(), |h| h.to_string());
                let _ = lost.send(Some(by));
                return;
            }
        }
        if let Some(spec) = lease.spec.as_mut() {
            spec.renew_time = Some(now());
        }
        if let Err(e) = api
            .replace(LEASE_NAME, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "renewing the deploy lock failed; retrying");
        }
    }
}

impl DeployLock {
    /// Resolves with the new holder if another writer took the lock (this one stopped
    /// renewing for longer than the lease lasts); never resolves otherwise.
    pub async fn lost(&self) -> String {
        let mut rx = self.lost.clone();
        loop {
            if let Some(by) = rx.borrow_and_update().clone() {
                return by;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Stops renewing and clears the holder, so the next writer need not wait for it to
    /// expire. Best effort: a lock that could not be cleared expires.
    pub async fn release(self) {
        self.renewer.abort();
        let Ok(mut lease) = self.api.get(LEASE_NAME).await else {
            return;
        };
        if holder_of(&lease).is_none_or(|h| h.identity != self.identity) {
            return;
        }
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.renew_time = Some(now());
        }
        if let Err(e) = self
            .api
            .replace(LEASE_NAME, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "releasing the deploy lock failed; it expires after {LEASE_SECONDS}s");
        }
    }
}

impl Drop for DeployLock {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// Whether `identity` (as [`identity`] writes it) names a process on this host that no longer
/// runs kstack: its PID is gone, or now belongs to another program. A holder elsewhere, or one
/// this cannot tell about, is not gone: its lock expires instead.
pub fn holder_is_gone(identity: &str) -> bool {
    let Some((rest, pid)) = identity.rsplit_once(" (pid ") else {
        return false;
    };
    let Some(pid) = pid.strip_suffix(')').and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    let Some((_, host)) = rest.rsplit_once('@') else {
        return false;
    };
    if host != this_host() || pid == std::process::id() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => comm.trim() != "kstack",
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown-host".into())
}

/// The identity a writer holds the lock under: command, user, host and process, so the
/// message a waiter sees says who to ask.
pub fn identity(command: &str) -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    let host = this_host();
    format!(
        "kstack {command} by {user}@{host} (pid {})",
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_is_gone_only_when_its_process_on_this_host_is() {
        let me = identity("deploy");
        assert!(!holder_is_gone(&me), "this process runs");
        let host = this_host();
        // PIDs above the kernel's limit (4194304) never exist.
        assert!(holder_is_gone(&format!(
            "kstack deploy by root@{host} (pid 4194999)"
        )));
        // Another program under a holder's PID (this test binary is not kstack): gone too.
        let parent = std::os::unix::process::parent_id();
        let comm = std::fs::read_to_string(format!("/proc/{parent}/comm")).unwrap_or_default();
        assert_eq!(
            holder_is_gone(&format!("kstack deploy by root@{host} (pid {parent})")),
            comm.trim() != "kstack"
        );
        // Elsewhere, or not ours to tell: not gone (its lease expires instead).
        assert!(!holder_is_gone(
            "kstack deploy by root@another-host (pid 4194999)"
        ));
        assert!(!holder_is_gone("some other tool"));
        assert!(!holder_is_gone(&format!(
            "kstack deploy by root@{host} (pid x)"
        )));
    }
}
