//! kstack's own Kubernetes settings (`kubernetes_namespace`, `kstack_*`): where the cloud
//! lives, how many replicas each service runs, what its pods request and carry, how long a
//! deploy step may take and how much history is kept.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::Globals;
use super::images::check_name;
use super::kolla::{self, Issues, Nested, PerService, Read, describe, number_or_kind};

/// The roles a node can carry; each maps to the label `<kstack_role_label_prefix><role>=true`.
pub const ROLES: &[&str] = &["control", "compute", "network", "storage"];

/// Services that run as a cluster deciding by majority: an even number of replicas only adds a
/// way to lose the quorum.
pub const QUORUM_CLUSTERS: &[&str] = &["mariadb", "rabbitmq"];

/// Generations kept per service when `kstack_history_limit` is not set.
pub const DEFAULT_HISTORY_LIMIT: usize = 10;
const MAX_HISTORY_LIMIT: u64 = 1000;

/// The deploy step time limit when `kstack_timeouts` sets none (seconds).
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// The longest time limit accepted (one day).
const MAX_TIMEOUT_SECS: u64 = 86_400;

/// Resource requests for one service's containers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Kubernetes quantity, e.g. `500m`.
    pub cpu: Option<String>,
    /// Kubernetes quantity, e.g. `1Gi`.
    pub memory: Option<String>,
}

/// kstack's Kubernetes variables of globals.yml.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct KubernetesSettings {
    #[serde(deserialize_with = "kolla::text")]
    kubernetes_namespace: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kstack_role_label_prefix: Read<String>,
    /// The cluster's default storage class when not set.
    #[serde(deserialize_with = "kolla::text")]
    kstack_storage_class: Read<String>,
    #[serde(deserialize_with = "kolla::per_service_integer")]
    kstack_replicas: PerService<u64>,
    #[serde(deserialize_with = "kolla::per_service_texts")]
    kstack_resources: Nested<String>,
    #[serde(deserialize_with = "kolla::per_service_integer")]
    kstack_timeouts: PerService<u64>,
    #[serde(deserialize_with = "kolla::integer")]
    kstack_history_limit: Read<u64>,
    #[serde(deserialize_with = "per_service_labels")]
    kstack_pod_labels: Nested<String>,
}

/// A label value: a string, or a number or boolean meaning its text.
fn as_label_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `deserialize_with`: a mapping of service to a mapping of label to value.
fn per_service_labels<'de, D: Deserializer<'de>>(d: D) -> Result<Nested<String>, D::Error> {
    let labels = |v: &Value| kolla::as_mapping(v, |l| kolla::as_mapping(l, as_label_value));
    Ok(Read::of(&Value::deserialize(d)?, labels))
}

/// Whether `s` is a valid label name segment or value: at most 63 characters, alphanumerics,
/// `-`, `_` and `.`, starting and ending with an alphanumeric (values may be empty).
fn label_segment(s: &str, may_be_empty: bool) -> bool {
    if s.is_empty() {
        return may_be_empty;
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    s.len() <= 63
        && s.chars().all(ok_char)
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Whether `key` is a valid label key: `[prefix/]name`, the prefix a DNS subdomain.
fn label_key(key: &str) -> bool {
    match key.rsplit_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty()
                && prefix.len() <= 253
                && prefix
                    .split('.')
                    .all(|p| label_segment(p, false) && !p.contains('_'))
                && label_segment(name, false)
        }
        None => label_segment(key, false),
    }
}

/// Where the cloud lives: the namespace, the role label prefix and the storage class.
#[derive(Debug)]
pub(super) struct Placement {
    pub kubernetes_namespace: String,
    pub role_label_prefix: String,
    pub storage_class: Option<String>,
}

/// How each service is run: the per-service settings and the history kept.
#[derive(Debug)]
pub(super) struct Workloads {
    pub replicas: BTreeMap<String, u32>,
    pub resources: BTreeMap<String, Resources>,
    pub timeouts: BTreeMap<String, u64>,
    pub history_limit: usize,
    pub pod_labels: BTreeMap<String, BTreeMap<String, String>>,
}

impl KubernetesSettings {
    pub fn placement(&self, t: &mut Issues) -> Placement {
        Placement {
            kubernetes_namespace: t.text("kubernetes_namespace", &self.kubernetes_namespace),
            role_label_prefix: t.text("kstack_role_label_prefix", &self.kstack_role_label_prefix),
            storage_class: t.opt_text("kstack_storage_class", &self.kstack_storage_class),
        }
    }

    pub fn workloads(&self, t: &mut Issues) -> Workloads {
        Workloads {
            replicas: self.replicas(t),
            resources: self.resources(t),
            timeouts: self.timeouts(t),
            history_limit: self.history_limit(t),
            pod_labels: self.pod_labels(t),
        }
    }

    fn replicas(&self, t: &mut Issues) -> BTreeMap<String, u32> {
        let key = "kstack_replicas";
        let mut replicas = BTreeMap::new();
        let Some(entries) = per_service(
            t,
            key,
            &self.kstack_replicas,
            "a mapping of service to replicas",
            "write e.g. `kstack_replicas: {keystone: 3, nova: 2}`",
        ) else {
            return replicas;
        };
        for (svc, r) in entries {
            match r.typed.and_then(|n| u32::try_from(n).ok()) {
                // A cluster that decides by majority (Galera; RabbitMQ with `pause_minority`)
                // of an even size stops as a whole when half of it is gone: two servers lose
                // their quorum when one of them stops.
                Some(n) if n > 1 && n % 2 == 0 && QUORUM_CLUSTERS.contains(&svc.as_str()) => t
                    .push(
                        key,
                        Some(svc.clone()),
                        format!(
                            "{svc} with {n} replicas is a cluster that decides by majority: \
                             when {} of them stop, the others stop serving too",
                            n / 2
                        ),
                        format!(
                            "use an odd number: 1, or {} to survive the loss of {} ({} to survive {})",
                            n + 1,
                            n / 2,
                            n - 1,
                            (n - 2) / 2
                        ),
                    ),
                Some(n) => {
                    replicas.insert(svc.clone(), n);
                }
                None => t.push(
                    key,
                    Some(svc.clone()),
                    format!(
                        "expected a whole number of replicas, found {}",
                        describe(r.raw())
                    ),
                    format!("write e.g. `{svc}: 3` under `kstack_replicas`"),
                ),
            }
        }
        replicas
    }

    fn resources(&self, t: &mut Issues) -> BTreeMap<String, Resources> {
        let key = "kstack_resources";
        let mut resources = BTreeMap::new();
        per_service_mappings(
            t,
            key,
            &self.kstack_resources,
            (
                "a mapping of service to requests",
                "write e.g. `kstack_resources: {nova: {cpu: 500m, memory: 1Gi}}`",
            ),
            "a mapping with `cpu` and `memory`",
            |svc| {
                format!("write e.g. `{svc}: {{cpu: 500m, memory: 1Gi}}` under `kstack_resources`")
            },
            |t, svc, fields| {
                let mut res = Resources::default();
                for (field, q) in fields {
                    let slot = match field.as_str() {
                        "cpu" => &mut res.cpu,
                        "memory" => &mut res.memory,
                        _ => {
                            t.push(
                                key,
                                Some(format!("{svc}.{field}")),
                                format!("unknown resource `{field}`"),
                                "only `cpu` and `memory` can be requested".into(),
                            );
                            continue;
                        }
                    };
                    match &q.typed {
                        Some(q) => *slot = Some(q.clone()),
                        None => t.push(
                            key,
                            Some(format!("{svc}.{field}")),
                            format!(
                                "expected a Kubernetes quantity, found {}",
                                describe(q.raw())
                            ),
                            "write a quantity such as `500m` or `1Gi`".into(),
                        ),
                    }
                }
                resources.insert(svc.clone(), res);
            },
        );
        resources
    }

    fn timeouts(&self, t: &mut Issues) -> BTreeMap<String, u64> {
        let key = "kstack_timeouts";
        let mut timeouts = BTreeMap::new();
        let Some(entries) = per_service(
            t,
            key,
            &self.kstack_timeouts,
            "a mapping of service (or `default`) to seconds",
            "write e.g. `kstack_timeouts: {default: 600, nova-api: 900}`",
        ) else {
            return timeouts;
        };
        for (svc, r) in entries {
            match r.typed.filter(|n| (1..=MAX_TIMEOUT_SECS).contains(n)) {
                Some(n) => {
                    timeouts.insert(svc.clone(), n);
                }
                None => t.push(
                    key,
                    Some(svc.clone()),
                    format!(
                        "expected a whole number of seconds from 1 to {MAX_TIMEOUT_SECS}, found {}",
                        number_or_kind(r.raw())
                    ),
                    format!("write e.g. `{svc}: 900` under `kstack_timeouts`"),
                ),
            }
        }
        timeouts
    }

    fn history_limit(&self, t: &mut Issues) -> usize {
        let r = &self.kstack_history_limit;
        if !r.is_set() {
            return DEFAULT_HISTORY_LIMIT;
        }
        match r.typed.filter(|n| (2..=MAX_HISTORY_LIMIT).contains(n)) {
            Some(n) => n as usize,
            None => {
                t.push(
                    "kstack_history_limit",
                    None,
                    format!(
                        "expected a whole number of generations from 2 to {MAX_HISTORY_LIMIT}, found {}",
                        number_or_kind(r.raw())
                    ),
                    "write e.g. `kstack_history_limit: 10`".into(),
                );
                DEFAULT_HISTORY_LIMIT
            }
        }
    }

    fn pod_labels(&self, t: &mut Issues) -> BTreeMap<String, BTreeMap<String, String>> {
        let key = "kstack_pod_labels";
        let mut pod_labels = BTreeMap::new();
        per_service_mappings(
            t,
            key,
            &self.kstack_pod_labels,
            (
                "a mapping of service to labels",
                "write e.g. `kstack_pod_labels: {keystone: {team: identity}}`",
            ),
            "a mapping of label to value",
            |svc| format!("write e.g. `{svc}: {{team: storage}}` under `kstack_pod_labels`"),
            |t, svc, labels| {
                let mut out = BTreeMap::new();
                for (label, value) in labels {
                    let at = Some(format!("{svc}.{label}"));
                    let Some(value) = &value.typed else {
                        t.push(
                            key,
                            at,
                            format!("expected a label value, found {}", describe(value.raw())),
                            "write the value as a string".into(),
                        );
                        continue;
                    };
                    if label.starts_with(crate::labels::APP_PREFIX) {
                        t.push(
                            key,
                            at,
                            format!("`{label}` is set by kstack (it selects the service's pods)"),
                            "use a label outside the `app.kubernetes.io/` prefix".into(),
                        );
                    } else if !label_key(label) {
                        t.push(
                        key,
                        at,
                        format!("`{label}` is not a valid Kubernetes label key"),
                        "use `[prefix/]name`: name at most 63 characters of a-z, 0-9, `-`, `_`, `.`".into(),
                    );
                    } else if !label_segment(value, true) {
                        t.push(
                        key,
                        at,
                        format!("`{value}` is not a valid Kubernetes label value"),
                        "use at most 63 characters of a-z, 0-9, `-`, `_`, `.`, starting and ending with a letter or digit".into(),
                    );
                    } else {
                        out.insert(label.clone(), value.clone());
                    }
                }
                pod_labels.insert(svc.clone(), out);
            },
        );
        pod_labels
    }
}

/// The entries of a per-service mapping; `None` when it is not set (`null`) or not a mapping
/// (reported as "expected `what`").
fn per_service<'a, T>(
    t: &mut Issues,
    key: &str,
    r: &'a Read<Vec<(String, T)>>,
    what: &str,
    help: &str,
) -> Option<&'a Vec<(String, T)>> {
    match (&r.typed, &r.raw) {
        (Some(entries), _) => Some(entries),
        (None, None | Some(Value::Null)) => None,
        (None, Some(other)) => {
            t.push(
                key,
                None,
                format!("expected {what}, found {}", describe(other)),
                help.into(),
            );
            None
        }
    }
}

/// Calls `each` with the entries of a per-service mapping whose values must be mappings,
/// typed, in their order. The mapping itself is checked as [`per_service`] does (`what`: what
/// it must be, and the help); an entry that is not `expected` is reported in its place with the
/// help `example(service)`.
fn per_service_mappings<'a, T>(
    t: &mut Issues,
    key: &str,
    r: &'a Read<Vec<(String, Read<T>)>>,
    (what, help): (&str, &str),
    expected: &str,
    example: impl Fn(&str) -> String,
    mut each: impl FnMut(&mut Issues, &'a String, &'a T),
) {
    for (svc, entry) in per_service(t, key, r, what, help).into_iter().flatten() {
        match &entry.typed {
            Some(v) => each(t, svc, v),
            None => t.push(
                key,
                Some(svc.clone()),
                format!("expected {expected}, found {}", describe(entry.raw())),
                example(svc),
            ),
        }
    }
}

/// Checks the namespace against the DNS-1123 label grammar ([`crate::names`]) unless already
/// reported (`skip`).
pub(super) fn check_namespace(t: &mut Issues, skip: &BTreeSet<&String>, namespace: &str) {
    check_name(
        t,
        skip,
        ("kubernetes_namespace", namespace),
        "Kubernetes namespace",
        crate::names::dns1123_label(namespace)
            .and_then(|()| crate::names::own_namespace(namespace)),
        "a namespace is a DNS-1123 label: at most 63 lower-case letters, digits and `-`, starting and ending with a letter or digit, e.g. `openstack`, and one of the cloud's own (kstack labels, prunes and manages everything in it)",
    );
}

impl Globals {
    /// Replicas for a service (1 unless set in `kstack_replicas`).
    pub fn replicas_for(&self, service: &str) -> u32 {
        self.replicas.get(service).copied().unwrap_or(1)
    }

    /// The deploy step time limit of a service in seconds: its `kstack_timeouts` entry, else
    /// `kstack_timeouts.default`, else [`DEFAULT_TIMEOUT_SECS`].
    pub fn timeout_secs(&self, service: &str) -> u64 {
        self.timeouts
            .get(service)
            .or(self.timeouts.get("default"))
            .copied()
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
    }

    /// The node label selecting a role, e.g. `("kstack.io/role-control", "true")`.
    pub fn role_label(&self, role: &str) -> (String, String) {
        (
            format!("{}{role}", self.role_label_prefix),
            "true".to_owned(),
        )
    }
}
