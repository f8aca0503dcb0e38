//! The release record, kept in the cluster as ConfigMaps in the cloud's namespace so history
//! survives the machine that ran kstack.
//!
//! - `kstack-release` (label `kstack.io/release=index`): the deploy generation (monotonic, one
//!   more for every deploy that changed something), the input hash, and each service's current
//!   generation and state.
//! - `kstack-release-<service>-<generation>` (label `kstack.io/release=service`): one per
//!   service generation: the hash of every object, the images, the state (healthy/failed), the
//!   time, the names of the content-named ConfigMaps and Secrets it mounts (kept while the
//!   record exists) and the manifests of its other objects, so that generation can be applied
//!   again exactly, and the steps the deploy that wrote it took for the service (what each
//!   did, when, how it ended). No Secret content is stored: Secrets are referenced by name only.
use std::collections::{BTreeMap, BTreeSet};

use kstack_model::labels::{
    MANAGED_BY, PART_OF, PHASE_LABEL, RELEASE_LABEL, RELEASE_SERVICE_LABEL,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::cluster::ObjectRef;
use crate::plan::Plan;

/// Name of the index ConfigMap.
pub const INDEX_NAME: &str = "kstack-release";

/// Health of a service generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceState {
    Healthy,
    Failed,
    /// The service was disabled and its objects pruned.
    Removed,
}

impl std::fmt::Display for ServiceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServiceState::Healthy => "healthy",
            ServiceState::Failed => "failed",
            ServiceState::Removed => "removed",
        })
    }
}

/// Where a generation's database schema stands after an upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Migration {
    /// The expand phase ran; the contract phase waits until a whole upgrade succeeds. The
    /// previous release's code still runs on this schema.
    Expanded,
    /// The contract phase ran: the schema no longer serves older code. A rollback to a
    /// generation with other images than this one is refused.
    Contracted,
}

impl std::fmt::Display for Migration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Migration::Expanded => "expanded",
            Migration::Contracted => "contracted",
        })
    }
}

/// One service generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRecord {
    pub service: String,
    pub generation: u64,
    /// The deploy generation that recorded it.
    pub deploy_generation: u64,
    /// RFC 3339, UTC.
    pub time: String,
    pub state: ServiceState,
    /// Hash over every object hash of the service.
    pub config_hash: String,
    /// `Kind/name` → manifest hash.
    pub objects: BTreeMap<String, String>,
    pub images: Vec<String>,
    /// The image tags of the workload (`2025.1-ubuntu-noble`): the release it runs.
    #[serde(default)]
    pub release: String,
    /// Schema migration state, for a generation that took part in an upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<Migration>,
    /// For a generation made by a rollback: the generation whose objects it restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<u64>,
    /// Content-named ConfigMaps and Secrets the generation uses (by reference).
    pub config_refs: Vec<ObjectRef>,
    /// Manifests of the other objects (workload, Service, claims, Jobs), as applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<Value>,
    /// What the deploy (or rollback) that wrote this record did for the service, up to writing
    /// it, by start time. Empty in records written before kstack kept steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<DeployStep>,
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    Done,
    Failed,
}

impl std::fmt::Display for StepOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StepOutcome::Done => "done",
            StepOutcome::Failed => "failed",
        })
    }
}

/// One step a deploy took for a service, as kept in the record it wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployStep {
    /// `config`, `job db-sync`, `workload`, `healthy`, `contracted`, `rollback`.
    pub step: String,
    /// What it did: to its objects, the actions among `replace`, `create` and `change`
    /// (`create, change`), or `unchanged`; for a Job also `run again` (it had failed before;
    /// `unchanged`: it had succeeded); `wait` (health), `record` (contract phase done),
    /// `restore generation 3` (rollback).
    pub action: String,
    /// Milliseconds from the start of the deploy (the record's `time`) to the step's start.
    pub started_ms: u64,
    pub duration_ms: u64,
    pub outcome: StepOutcome,
    /// Why it failed: the first line of the failure, shortened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl DeployStep {
    /// When it started, from the deploy's start time (RFC 3339), as RFC 3339 UTC; `None` when
    /// that time cannot be read.
    pub fn started_at(&self, deploy_time: &str) -> Option<String> {
        offset_time(deploy_time, self.started_ms)
    }

    /// When it finished, as [`DeployStep::started_at`].
    pub fn finished_at(&self, deploy_time: &str) -> Option<String> {
        offset_time(
            deploy_time,
            self.started_ms.saturating_add(self.duration_ms),
        )
    }
}

fn offset_time(base: &str, ms: u64) -> Option<String> {
    let t = chrono::DateTime::parse_from_rfc3339(base).ok()?;
    let t = t.checked_add_signed(chrono::TimeDelta::milliseconds(i64::try_from(ms).ok()?))?;
    Some(
        t.with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

/// The first line of a failure, at most 200 characters: what a step record keeps of it.
pub fn short_reason(reason: &str) -> String {
    let line = reason.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_owned(),
    }
}

impl ServiceRecord {
    pub fn config_map_name(&self) -> String {
        format!("kstack-release-{}-{}", self.service, self.generation)
    }

    /// Same content and state: writing it again would change nothing.
    pub fn same_as(&self, other: &ServiceRecord) -> bool {
        self.generation == other.generation
            && self.state == other.state
            && self.objects == other.objects
            && self.migration == other.migration
            && self.rollback_of == other.rollback_of
    }

    /// The images of the generation's workloads (Deployments, StatefulSets, DaemonSets): what
    /// changes in an upgrade.
    pub fn workload_images(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for m in &self.manifests {
            if WORKLOAD_KINDS.contains(&m["kind"].as_str().unwrap_or_default()) {
                collect_images(m, &mut out);
            }
        }
        out
    }

    /// `healthy`, `failed`, `healthy, rollback of 3`, `healthy, expanded`, ...
    pub fn outcome(&self) -> String {
        let mut s = self.state.to_string();
        if let Some(g) = self.rollback_of {
            s.push_str(&format!(", rollback of {g}"));
        }
        if let Some(m) = self.migration {
            s.push_str(&format!(", {m}"));
        }
        s
    }
}

/// Kinds that run pods for a service.
pub const WORKLOAD_KINDS: &[&str] = &["Deployment", "StatefulSet", "DaemonSet"];

/// The release of a set of images: their tags, sorted and joined with `,`.
pub fn release_of(images: &BTreeSet<String>) -> String {
    let tags: BTreeSet<&str> = images
        .iter()
        .filter_map(|i| i.rsplit_once(':').map(|(_, t)| t))
        .filter(|t| !t.contains('/'))
        .collect();
    tags.into_iter().collect::<Vec<_>>().join(",")
}

/// The index: what the namespace runs now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReleaseIndex {
    pub generation: u64,
    pub input_hash: String,
    pub time: String,
    pub services: BTreeMap<String, IndexEntry>,
    /// The OpenStack release (`openstack_release`) of the last deploy that succeeded and
    /// changed something (an upgrade always does): what the cloud's databases have been
    /// migrated to. Absent in records of older kstack versions until their next change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openstack_release: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub generation: u64,
    pub state: ServiceState,
}

/// Every record found in the namespace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReleaseHistory {
    pub index: Option<ReleaseIndex>,
    /// Service → generation → record.
    pub services: BTreeMap<String, BTreeMap<u64, ServiceRecord>>,
}

/// A record ConfigMap that could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("release record ConfigMap {name}: {message}")]
pub struct RecordError {
    pub name: String,
    pub message: String,
}

impl ReleaseHistory {
    /// Reads the records out of ConfigMaps (others are ignored).
    pub fn from_config_maps<'a>(
        maps: impl IntoIterator<Item = &'a Value>,
    ) -> Result<ReleaseHistory, RecordError> {
        let mut h = ReleaseHistory::default();
        for cm in maps {
            let name = cm["metadata"]["name"].as_str().unwrap_or_default();
            let err = |message: String| RecordError {
                name: name.to_owned(),
                message,
            };
            match cm["metadata"]["labels"][RELEASE_LABEL].as_str() {
                Some("index") => {
                    let text = cm["data"]["index.json"]
                        .as_str()
                        .ok_or_else(|| err("no index.json".into()))?;
                    h.index = Some(serde_json::from_str(text).map_err(|e| err(e.to_string()))?);
                }
                Some("service") => {
                    let text = cm["data"]["record.json"]
                        .as_str()
                        .ok_or_else(|| err("no record.json".into()))?;
                    let mut r: ServiceRecord =
                        serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
                    if let Some(m) = cm["data"]["manifests.json"].as_str() {
                        r.manifests = serde_json::from_str(m).map_err(|e| err(e.to_string()))?;
                    }
                    h.services
                        .entry(r.service.clone())
                        .or_default()
                        .insert(r.generation, r);
                }
                _ => {}
            }
        }
        Ok(h)
    }

    /// The newest generation of a service.
    pub fn latest(&self, service: &str) -> Option<&ServiceRecord> {
        self.services.get(service)?.values().next_back()
    }

    /// The newest healthy generation of a service.
    pub fn last_healthy(&self, service: &str) -> Option<&ServiceRecord> {
        self.services
            .get(service)?
            .values()
            .rev()
            .find(|r| r.state == ServiceState::Healthy)
    }

    /// Every object any recorded generation points at (kept by prune).
    pub fn referenced_objects(&self) -> BTreeSet<ObjectRef> {
        self.referenced_objects_except(&BTreeSet::new())
    }

    /// Every object a recorded generation other than `except` (service, generation) points at.
    pub fn referenced_objects_except(
        &self,
        except: &BTreeSet<(String, u64)>,
    ) -> BTreeSet<ObjectRef> {
        let mut out = BTreeSet::new();
        for (service, records) in &self.services {
            for r in records.values() {
                if except.contains(&(service.clone(), r.generation)) {
                    continue;
                }
                out.extend(r.config_refs.iter().cloned());
                out.extend(r.manifests.iter().map(ObjectRef::of));
            }
        }
        out
    }

    /// Objects that only the generations `only` point at.
    pub fn referenced_only_by(&self, only: &BTreeSet<(String, u64)>) -> BTreeSet<ObjectRef> {
        let kept = self.referenced_objects_except(only);
        let mut out = BTreeSet::new();
        for (service, generation) in only {
            if let Some(r) = self.services.get(service).and_then(|m| m.get(generation)) {
                out.extend(
                    r.config_refs
                        .iter()
                        .cloned()
                        .chain(r.manifests.iter().map(ObjectRef::of))
                        .filter(|o| !kept.contains(o)),
                );
            }
        }
        out
    }

    /// The deploy generation of the next deploy that changes something.
    pub fn next_deploy_generation(&self) -> u64 {
        let recorded = self
            .services
            .values()
            .flat_map(|m| m.values())
            .map(|r| r.deploy_generation)
            .max()
            .unwrap_or(0);
        self.index
            .as_ref()
            .map_or(0, |i| i.generation)
            .max(recorded)
            + 1
    }
}

fn labels(kind: &str, service: Option<&str>) -> Value {
    let mut l = json!({ MANAGED_BY.0: MANAGED_BY.1, RELEASE_LABEL: kind, PART_OF.0: PART_OF.1 });
    if let Some(s) = service {
        l[RELEASE_SERVICE_LABEL] = json!(s);
    }
    l
}

/// The ConfigMap holding a service record.
pub fn record_config_map(namespace: &str, record: &ServiceRecord) -> Value {
    let manifests = serde_json::to_string(&record.manifests).unwrap_or_default();
    let mut head = record.clone();
    head.manifests.clear();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": record.config_map_name(),
            "namespace": namespace,
            "labels": labels("service", Some(&record.service)),
        },
        "data": {
            "record.json": serde_json::to_string_pretty(&head).unwrap_or_default(),
            "manifests.json": manifests,
        }
    })
}

/// The ConfigMap holding the index.
pub fn index_config_map(namespace: &str, index: &ReleaseIndex) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": INDEX_NAME,
            "namespace": namespace,
            "labels": labels("index", None),
        },
        "data": { "index.json": serde_json::to_string_pretty(index).unwrap_or_default() }
    })
}

/// The record of a service as planned, in the given state. Its generation is the latest
/// recorded one if the objects are the same, else one more.
pub fn service_record(
    plan: &Plan,
    history: &ReleaseHistory,
    service: &str,
    state: ServiceState,
    time: &str,
) -> ServiceRecord {
    let mut objects = BTreeMap::new();
    let mut config_refs = Vec::new();
    let mut manifests = Vec::new();
    let mut images = BTreeSet::new();
    let mut workload_images = BTreeSet::new();
    for o in plan.service_objects(service) {
        let d = &o.desired;
        // Jobs of a phase (install, expand, contract) run in some deploys only: they are not
        // part of what a generation runs, nor of what a rollback restores.
        if !d.manifest["metadata"]["labels"][PHASE_LABEL].is_null() {
            continue;
        }
        if WORKLOAD_KINDS.contains(&d.reference.kind.as_str()) {
            collect_images(&d.manifest, &mut workload_images);
        }
        objects.insert(d.reference.to_string(), d.hash.clone());
        if d.reference.kind == "ConfigMap" || d.reference.kind == "Secret" {
            config_refs.push(d.reference.clone());
        } else {
            manifests.push(d.manifest.clone());
        }
        collect_images(&d.manifest, &mut images);
    }
    let mut all = Vec::new();
    for (k, v) in &objects {
        all.extend_from_slice(k.as_bytes());
        all.extend_from_slice(v.as_bytes());
    }
    let generation = match history.latest(service) {
        Some(r) if r.objects == objects => r.generation,
        Some(r) => r.generation + 1,
        None => 1,
    };
    ServiceRecord {
        service: service.to_owned(),
        generation,
        deploy_generation: history.next_deploy_generation(),
        time: time.to_owned(),
        state,
        config_hash: crate::plan::hash(&all),
        objects,
        images: images.into_iter().collect(),
        release: release_of(&workload_images),
        migration: None,
        rollback_of: None,
        config_refs,
        manifests,
        steps: Vec::new(),
    }
}

/// Every `image` field in a manifest.
pub fn collect_images(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "image" {
                    if let Some(s) = x.as_str() {
                        out.insert(s.to_owned());
                    }
                } else {
                    collect_images(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_images(x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as kstack wrote it before it kept steps.
    const OLD_RECORD: &str = r#"{
      "service": "keystone", "generation": 2, "deploy_generation": 3,
      "time": "2026-11-01T10:00:00Z", "state": "healthy", "config_hash": "abc",
      "objects": {"Deployment/keystone": "h1"}, "images": ["kolla/keystone:2025.1"],
      "release": "2025.1", "config_refs": []
    }"#;

    #[test]
    fn a_record_without_steps_still_reads_and_is_written_without_them() {
        let cm = json!({
            "metadata": {"name": "kstack-release-keystone-2", "labels": {RELEASE_LABEL: "service"}},
            "data": {"record.json": OLD_RECORD},
        });
        let h = ReleaseHistory::from_config_maps([&cm]).unwrap();
        let r = h.latest("keystone").unwrap();
        assert_eq!(r.generation, 2);
        assert!(r.steps.is_empty());
        let written = record_config_map("openstack", r);
        assert!(
            !written["data"]["record.json"]
                .as_str()
                .unwrap()
                .contains("steps"),
            "{written}"
        );
    }

    #[test]
    fn steps_round_trip_and_give_their_times() {
        let step = DeployStep {
            step: "job db-sync".into(),
            action: "create".into(),
            started_ms: 61_500,
            duration_ms: 2_000,
            outcome: StepOutcome::Failed,
            reason: Some(short_reason(
                "BackoffLimitExceeded: Job has reached the limit\nmore",
            )),
        };
        assert_eq!(
            step.reason.as_deref(),
            Some("BackoffLimitExceeded: Job has reached the limit")
        );
        let mut r: ServiceRecord = serde_json::from_str(OLD_RECORD).unwrap();
        r.steps = vec![step.clone()];
        let cm = record_config_map("openstack", &r);
        let back = ReleaseHistory::from_config_maps([&cm]).unwrap();
        assert_eq!(
            back.latest("keystone").unwrap().steps,
            std::slice::from_ref(&step)
        );
        assert_eq!(
            step.started_at("2026-11-01T10:00:00Z").as_deref(),
            Some("2026-11-01T10:01:01Z")
        );
        assert_eq!(
            step.finished_at("2026-11-01T11:00:00+01:00").as_deref(),
            Some("2026-11-01T10:01:03Z")
        );
        assert_eq!(step.started_at("not a time"), None);
    }

    #[test]
    fn a_long_reason_is_shortened_on_a_character_boundary() {
        let long = "é".repeat(300);
        let s = short_reason(&long);
        assert_eq!(s.chars().count(), 203);
        assert!(s.ends_with("..."));
    }
}
