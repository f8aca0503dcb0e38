//! The `ComputeHosts` trait: what the inventory asks the cloud's compute service (nova) when a
//! compute host is locked: which instances run there, which other hosts could take them, and
//! to move them. The inventory decides the order (`kstack-inventory`'s `evacuate`); the
//! OpenStack implementation lives in `kstack-verify::compute` (nova's API with a Keystone
//! token). [`FakeCompute`] is for tests: instances that move when told, or refuse to.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One instance (server) as nova reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub id: String,
    pub name: String,
    /// `ACTIVE`, `SHUTOFF`, `MIGRATING`, `VERIFY_RESIZE`, `ERROR`, ...
    pub status: String,
    /// The compute host it is on (`OS-EXT-SRV-ATTR:host`).
    pub host: Option<String>,
    /// The task under way (`OS-EXT-STS:task_state`), `None` when idle.
    pub task_state: Option<String>,
}

/// One compute service (nova-compute on a host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeService {
    pub host: String,
    /// Its administrative status: new instances are scheduled to it only when enabled.
    pub enabled: bool,
    /// Whether it reports in (`state` up).
    pub up: bool,
}

/// Why a call to the compute service failed, for people (never carries a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ComputeError(pub String);

/// The cloud's compute service, as an administrator sees it.
#[async_trait::async_trait]
pub trait ComputeHosts: Send + Sync + 'static {
    /// Every nova-compute service.
    async fn services(&self) -> Result<Vec<ComputeService>, ComputeError>;
    /// Enables or disables the nova-compute service of `host` (with a reason when disabling).
    /// A host without one is an error.
    async fn set_enabled(
        &self,
        host: &str,
        enabled: bool,
        reason: &str,
    ) -> Result<(), ComputeError>;
    /// The instances on `host`, of every project.
    async fn instances_on(&self, host: &str) -> Result<Vec<Instance>, ComputeError>;
    /// One instance; `None` when it no longer exists.
    async fn instance(&self, id: &str) -> Result<Option<Instance>, ComputeError>;
    /// Starts a live migration to a host the scheduler picks (block migration when the disks
    /// are not shared).
    async fn live_migrate(&self, id: &str) -> Result<(), ComputeError>;
    /// Starts a cold migration to a host the scheduler picks; it ends in `VERIFY_RESIZE`.
    async fn cold_migrate(&self, id: &str) -> Result<(), ComputeError>;
    /// Confirms a cold migration in `VERIFY_RESIZE`.
    async fn confirm_migration(&self, id: &str) -> Result<(), ComputeError>;
}

/// One call [`FakeCompute`] received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComputeCall {
    SetEnabled { host: String, enabled: bool },
    LiveMigrate { id: String },
    ColdMigrate { id: String },
    Confirm { id: String },
}

#[derive(Debug, Default)]
struct FakeState {
    services: BTreeMap<String, ComputeService>,
    instances: BTreeMap<String, Instance>,
    /// Instances whose live migration fails (they stay where they are, ACTIVE).
    no_live: Vec<String>,
    /// Instances whose cold migration fails too (they go to ERROR).
    no_cold: Vec<String>,
    /// Hosts whose service change is applied but answered with an error (nova-api timing out
    /// on the host's nova-compute after committing the change).
    slow_answer: Vec<String>,
    /// The status of an instance in VERIFY_RESIZE before its cold migration.
    before_migration: BTreeMap<String, String>,
    calls: Vec<ComputeCall>,
}

/// An in-memory compute service: a migration moves the instance at once to the first other
/// enabled and up host, unless told to fail. For tests.
#[derive(Debug, Default)]
pub struct FakeCompute {
    state: Mutex<FakeState>,
}

impl FakeCompute {
    fn with<T>(&self, f: impl FnOnce(&mut FakeState) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Adds a compute service, enabled and up.
    pub fn add_host(&self, host: &str) {
        self.with(|s| {
            s.services.insert(
                host.to_string(),
                ComputeService {
                    host: host.to_string(),
                    enabled: true,
                    up: true,
                },
            );
        });
    }

    /// Marks a host's service down (it no longer reports in).
    pub fn set_down(&self, host: &str) {
        self.with(|s| {
            if let Some(svc) = s.services.get_mut(host) {
                svc.up = false;
            }
        });
    }

    /// Adds an instance on `host` with `status`.
    pub fn add_instance(&self, id: &str, host: &str, status: &str) {
        self.with(|s| {
            s.instances.insert(
                id.to_string(),
                Instance {
                    id: id.to_string(),
                    name: format!("server-{id}"),
                    status: status.to_string(),
                    host: Some(host.to_string()),
                    task_state: None,
                },
            );
        });
    }

    /// Enabling or disabling `host`'s service from now on takes effect but answers an error.
    pub fn answer_late(&self, host: &str) {
        self.with(|s| s.slow_answer.push(host.to_string()));
    }

    /// The live migration of `id` fails from now on.
    pub fn refuse_live(&self, id: &str) {
        self.with(|s| s.no_live.push(id.to_string()));
    }

    /// The cold migration of `id` fails from now on.
    pub fn refuse_cold(&self, id: &str) {
        self.with(|s| s.no_cold.push(id.to_string()));
    }

    /// The instance as it is now.
    pub fn get(&self, id: &str) -> Option<Instance> {
        self.with(|s| s.instances.get(id).cloned())
    }

    /// The service of `host` as it is now.
    pub fn service(&self, host: &str) -> Option<ComputeService> {
        self.with(|s| s.services.get(host).cloned())
    }

    /// Every call so far, oldest first.
    pub fn calls(&self) -> Vec<ComputeCall> {
        self.with(|s| s.calls.clone())
    }

    /// Where a migration of `id` goes: the first other enabled and up host.
    fn target(s: &FakeState, id: &str) -> Option<String> {
        let from = s.instances.get(id)?.host.clone();
        s.services
            .values()
            .find(|svc| svc.enabled && svc.up && Some(&svc.host) != from.as_ref())
            .map(|svc| svc.host.clone())
    }
}

#[async_trait::async_trait]
impl ComputeHosts for FakeCompute {
    async fn services(&self) -> Result<Vec<ComputeService>, ComputeError> {
        Ok(self.with(|s| s.services.values().cloned().collect()))
    }

    async fn set_enabled(
        &self,
        host: &str,
        enabled: bool,
        _reason: &str,
    ) -> Result<(), ComputeError> {
        self.with(|s| {
            s.calls.push(ComputeCall::SetEnabled {
                host: host.to_string(),
                enabled,
            });
            let late = s.slow_answer.iter().any(|h| h == host);
            match s.services.get_mut(host) {
                Some(svc) => {
                    svc.enabled = enabled;
                    if late {
                        return Err(ComputeError("no answer in time (timeout)".to_string()));
                    }
                    Ok(())
                }
                None => Err(ComputeError(format!(
                    "no nova-compute service on host {host}"
                ))),
            }
        })
    }

    async fn instances_on(&self, host: &str) -> Result<Vec<Instance>, ComputeError> {
        Ok(self.with(|s| {
            s.instances
                .values()
                .filter(|i| i.host.as_deref() == Some(host))
                .cloned()
                .collect()
        }))
    }

    async fn instance(&self, id: &str) -> Result<Option<Instance>, ComputeError> {
        Ok(self.get(id))
    }

    async fn live_migrate(&self, id: &str) -> Result<(), ComputeError> {
        self.with(|s| {
            s.calls
                .push(ComputeCall::LiveMigrate { id: id.to_string() });
            if s.no_live.iter().any(|x| x == id) {
                return Ok(()); // accepted, then it stays where it was (as nova's do)
            }
            match FakeCompute::target(s, id) {
                Some(to) => {
                    if let Some(i) = s.instances.get_mut(id) {
                        i.host = Some(to);
                    }
                    Ok(())
                }
                None => Err(ComputeError(format!(
                    "No valid host was found for instance {id}"
                ))),
            }
        })
    }

    async fn cold_migrate(&self, id: &str) -> Result<(), ComputeError> {
        self.with(|s| {
            s.calls
                .push(ComputeCall::ColdMigrate { id: id.to_string() });
            let to = FakeCompute::target(s, id);
            let refuse = s.no_cold.iter().any(|x| x == id);
            let Some(i) = s.instances.get_mut(id) else {
                return Err(ComputeError(format!("instance {id} not found")));
            };
            if refuse {
                i.status = "ERROR".to_string();
                return Ok(());
            }
            match to {
                Some(to) => {
                    i.host = Some(to);
                    let before = std::mem::replace(&mut i.status, "VERIFY_RESIZE".to_string());
                    s.before_migration.insert(id.to_string(), before);
                    Ok(())
                }
                None => Err(ComputeError(format!(
                    "No valid host was found for instance {id}"
                ))),
            }
        })
    }

    async fn confirm_migration(&self, id: &str) -> Result<(), ComputeError> {
        self.with(|s| {
            s.calls.push(ComputeCall::Confirm { id: id.to_string() });
            match s.instances.get_mut(id) {
                Some(i) if i.status == "VERIFY_RESIZE" => {
                    i.status = s
                        .before_migration
                        .remove(id)
                        .unwrap_or_else(|| "ACTIVE".to_string());
                    Ok(())
                }
                Some(i) => Err(ComputeError(format!(
                    "instance {id} is {}, not VERIFY_RESIZE",
                    i.status
                ))),
                None => Err(ComputeError(format!("instance {id} not found"))),
            }
        })
    }
}
