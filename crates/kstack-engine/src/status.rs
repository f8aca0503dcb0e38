//! Health as kstack judges it, from an object's `status`: shared by the waits of
//! `kstack-kube` (evaluated on every watch event) and by `kstack status`.
use serde::Serialize;
use serde_json::Value;

use crate::plan::{Observed, Plan, Role};
use crate::release::ServiceState;

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// Desired and ready pod counts of a workload.
pub fn replica_counts(kind: &str, o: &Value) -> (i64, i64) {
    let s = &o["status"];
    match kind {
        "DaemonSet" => (int(&s["desiredNumberScheduled"]), int(&s["numberReady"])),
        _ => (
            o["spec"]["replicas"].as_i64().unwrap_or(1),
            int(&s["readyReplicas"]),
        ),
    }
}

/// The parts of a StatefulSet's spec Kubernetes never changes in place, as a comparable value:
/// the pod management policy (absent means `OrderedReady`), the governing Service, the
/// selector, and each claim template's name, storage class, access modes and size.
fn statefulset_fixed(o: &Value) -> Value {
    let spec = &o["spec"];
    let claims: Vec<Value> = spec["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            serde_json::json!([
                c["metadata"]["name"],
                c["spec"]["storageClassName"],
                c["spec"]["accessModes"],
                c["spec"]["resources"]["requests"]["storage"],
            ])
        })
        .collect();
    serde_json::json!([
        spec["podManagementPolicy"]
            .as_str()
            .unwrap_or("OrderedReady"),
        spec["serviceName"],
        spec["selector"],
        claims,
    ])
}

/// Whether applying `desired` over the existing StatefulSet `current` would change a field
/// Kubernetes refuses to change in place: the object must then be replaced (deleted with its
/// pods left running, then created again; the new object adopts the pods and rolls them).
pub fn needs_replacement(desired: &Value, current: &Value) -> bool {
    desired["kind"] == "StatefulSet" && statefulset_fixed(desired) != statefulset_fixed(current)
}

/// What of a workload kstack applied was changed in the cluster by someone else (`kubectl
/// scale`, `kubectl set image`, an edit): its replicas and its containers' images, compared
/// with `desired`, each as one line. Empty when nothing drifted, and for other kinds.
pub fn drift(desired: &Value, current: &Value) -> Vec<String> {
    let kind = desired["kind"].as_str().unwrap_or_default();
    if !matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet") {
        return Vec::new();
    }
    let mut out = Vec::new();
    if kind != "DaemonSet" {
        let want = &desired["spec"]["replicas"];
        let have = &current["spec"]["replicas"];
        if !want.is_null() && want != have {
            out.push(format!("replicas: {have} in the cluster, {want} wanted"));
        }
    }
    let images = |o: &Value| -> Vec<(String, String)> {
        o["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    c["image"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let have = images(current);
    for (name, want) in images(desired) {
        match have.iter().find(|(n, _)| *n == name) {
            Some((_, image)) if *image == want => {}
            Some((_, image)) => out.push(format!(
                "image of container {name}: {image} in the cluster, {want} wanted"
            )),
            None => out.push(format!("container {name} is missing in the cluster")),
        }
    }
    out
}

/// Whether a Deployment, StatefulSet or DaemonSet has rolled out its current spec: the
/// controller saw the latest generation, every desired pod runs the new template and is ready,
/// and no old pod is left.
pub fn rollout_complete(kind: &str, o: &Value) -> bool {
    let s = &o["status"];
    let generation = int(&o["metadata"]["generation"]);
    if int(&s["observedGeneration"]) < generation {
        return false;
    }
    let (desired, ready) = replica_counts(kind, o);
    match kind {
        "Deployment" => {
            int(&s["updatedReplicas"]) == desired
                && int(&s["availableReplicas"]) == desired
                && int(&s["replicas"]) == desired
                && ready == desired
        }
        "StatefulSet" => {
            let same_revision = match (s["currentRevision"].as_str(), s["updateRevision"].as_str())
            {
                (Some(c), Some(u)) => c == u,
                _ => true,
            };
            ready == desired && int(&s["updatedReplicas"]) == desired && same_revision
        }
        "DaemonSet" => {
            int(&s["updatedNumberScheduled"]) == desired
                && ready == desired
                && int(&s["numberAvailable"]) == desired
        }
        _ => false,
    }
}

/// `Some(Ok)` once a Job succeeded, `Some(Err(reason))` once it failed, `None` while it runs.
pub fn job_finished(o: &Value) -> Option<Result<(), String>> {
    for c in o["status"]["conditions"].as_array().into_iter().flatten() {
        if c["status"] != "True" {
            continue;
        }
        match c["type"].as_str() {
            Some("Complete") => return Some(Ok(())),
            Some("Failed") => {
                return Some(Err(format!(
                    "{}: {}",
                    c["reason"].as_str().unwrap_or("Failed"),
                    c["message"].as_str().unwrap_or_default()
                )));
            }
            _ => {}
        }
    }
    None
}

/// How a service looks right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Healthy,
    /// Rolling out or pods not ready yet.
    Progressing,
    /// Its workload does not exist.
    Missing,
    /// Disabled and pruned.
    Removed,
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Health::Healthy => "healthy",
            Health::Progressing => "progressing",
            Health::Missing => "missing",
            Health::Removed => "removed",
        })
    }
}

/// One row of `kstack status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceStatus {
    pub service: String,
    pub kind: String,
    pub desired: i64,
    pub ready: i64,
    /// The service generation recorded in the cluster, if any.
    pub generation: Option<u64>,
    /// The recorded outcome of that generation.
    pub recorded: Option<ServiceState>,
    pub health: Health,
}

/// Every enabled service of the plan (in start order), then services only the release index
/// still names.
pub fn status(plan: &Plan, observed: &Observed) -> Vec<ServiceStatus> {
    let index = observed.history.index.clone().unwrap_or_default();
    let mut out = Vec::new();
    for service in &plan.services {
        let Some(wl) = plan
            .service_objects(service)
            .find(|o| o.desired.role == Role::Workload)
        else {
            continue;
        };
        let r = &wl.desired.reference;
        let entry = index.services.get(service);
        let latest = observed.history.latest(service);
        let (desired, ready, health) = match observed.objects.get(r) {
            Some(o) => {
                let (d, rd) = replica_counts(&r.kind, o);
                let h = if rollout_complete(&r.kind, o) {
                    Health::Healthy
                } else {
                    Health::Progressing
                };
                (d, rd, h)
            }
            None => (0, 0, Health::Missing),
        };
        out.push(ServiceStatus {
            service: service.clone(),
            kind: r.kind.clone(),
            desired,
            ready,
            generation: entry.map(|e| e.generation).or(latest.map(|l| l.generation)),
            recorded: entry.map(|e| e.state).or(latest.map(|l| l.state)),
            health,
        });
    }
    for (service, e) in &index.services {
        if !plan.services.contains(service) {
            out.push(ServiceStatus {
                service: service.clone(),
                kind: String::new(),
                desired: 0,
                ready: 0,
                generation: Some(e.generation),
                recorded: Some(e.state),
                health: Health::Removed,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::drift;

    fn workload(kind: &str, replicas: Option<i64>, images: &[(&str, &str)]) -> serde_json::Value {
        let containers: Vec<_> = images
            .iter()
            .map(|(n, i)| json!({"name": n, "image": i}))
            .collect();
        let mut o =
            json!({"kind": kind, "spec": {"template": {"spec": {"containers": containers}}}});
        if let Some(r) = replicas {
            o["spec"]["replicas"] = json!(r);
        }
        o
    }

    #[test]
    fn drift_names_replicas_and_images_of_workloads_only() {
        let want = workload(
            "StatefulSet",
            Some(3),
            &[("mariadb", "a:1"), ("exporter", "b:1")],
        );
        assert!(drift(&want, &want).is_empty());
        let have = workload("StatefulSet", Some(2), &[("mariadb", "a:2")]);
        assert_eq!(
            drift(&want, &have),
            [
                "replicas: 2 in the cluster, 3 wanted",
                "image of container mariadb: a:2 in the cluster, a:1 wanted",
                "container exporter is missing in the cluster",
            ]
        );
        // A DaemonSet has no replicas; a container added by someone else is not kstack's.
        let want = workload("DaemonSet", None, &[("agent", "c:1")]);
        let have = workload("DaemonSet", None, &[("agent", "c:1"), ("sidecar", "d:1")]);
        assert!(drift(&want, &have).is_empty());
        // Other kinds are compared by their applied hash only.
        let cm = json!({"kind": "ConfigMap", "data": {"a": "1"}});
        assert!(drift(&cm, &json!({"kind": "ConfigMap", "data": {"a": "2"}})).is_empty());
    }
}
