//! The label and annotation keys kstack writes on what it renders and reads back, and their
//! fixed values: the one place they are spelled.
//!
//! The renderer puts them on every Kubernetes object and Compose service, the engine selects,
//! prunes and records by them, `kstack-kube` and the CLI watch and list by them, and the
//! end-to-end tests count objects by them: a key spelled twice could drift apart and a selector
//! would silently match nothing. A test (`tests/labels.rs`) fails when one of these keys is
//! spelled as a string anywhere else in a crate's code.
//!
//! Keys under [`APP_PREFIX`] are Kubernetes' recommended labels; keys under `kstack.io/` are
//! kstack's own.

/// The prefix of Kubernetes' recommended labels, which kstack sets and selects pods by: globals
/// validation refuses an operator's pod label under it, so none can change a selector.
pub const APP_PREFIX: &str = "app.kubernetes.io/";

/// Label carrying the catalog service name; objects are grouped by service with it.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// Label separating long-running pods ([`SERVER`]) from bootstrap Job pods ([`BOOTSTRAP`]), so
/// a Service or workload selector never picks up a Job pod.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// [`COMPONENT_LABEL`]'s value on long-running pods and the objects serving them.
pub const SERVER: &str = "server";
/// [`COMPONENT_LABEL`]'s value on bootstrap tasks (Jobs, one-shot Compose services).
pub const BOOTSTRAP: &str = "bootstrap";
/// Label (and value) on everything kstack renders.
pub const PART_OF: (&str, &str) = ("app.kubernetes.io/part-of", "kstack");
/// Label (and value) every object kstack owns carries; prune never looks at anything else.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kstack");

/// The node label holding the node's host name (set by the kubelet): per-host DaemonSet
/// variants are pinned by it and replicas spread over it.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Label naming the bootstrap task a Job (or one-shot Compose service) runs, the catalog task
/// name, so the deploy engine finds the Job of a task.
pub const TASK_LABEL: &str = "kstack.io/task";
/// Label naming the phase of a bootstrap task that does not run on every deploy (`install`,
/// `expand`, `contract`; see [`crate::catalog::Phase`]).
pub const PHASE_LABEL: &str = "kstack.io/phase";
/// Label telling a DaemonSet's pods from those of its per-host variants (`all`, or the hash of
/// the host), so their selectors never overlap.
pub const VARIANT_LABEL: &str = "kstack.io/variant";
/// Label of a long-running Compose container: the hash of the files it reads at start (its
/// config directory and env file), so that a change to them recreates it, and only it.
pub const CONFIG_HASH_LABEL: &str = "kstack.io/config-hash";
/// Label of a release record ConfigMap: `index` (the deploy generation) or `service` (one
/// service generation).
pub const RELEASE_LABEL: &str = "kstack.io/release";
/// Label of a service's release record: the service it records.
pub const RELEASE_SERVICE_LABEL: &str = "kstack.io/release-service";

/// Annotation holding the hash of the manifest kstack applied; an object whose annotation
/// matches the desired hash is left alone (no API write).
pub const APPLIED_HASH_ANNOTATION: &str = "kstack.io/applied-hash";
/// Annotation on a Secret that kstack creates once with generated content (a key repository:
/// value [`FERNET_KEYS`]), and then never changes, prunes or restores.
pub const GENERATED_ANNOTATION: &str = "kstack.io/generated";
/// [`GENERATED_ANNOTATION`]'s value for a Fernet key repository (keys `0` and `1`).
pub const FERNET_KEYS: &str = "fernet-keys";
/// When the keys of a repository were last made or rotated (UTC, `%Y-%m-%dT%H:%M:%SZ`).
pub const ROTATED_AT_ANNOTATION: &str = "kstack.io/rotated-at";

/// The default `kstack_role_label_prefix`: a node runs the services of role `<r>` when it has
/// the label `kstack.io/role-<r>=true`.
pub const ROLE_LABEL_PREFIX: &str = "kstack.io/role-";
/// The role label prefix `kstack dev up` gives the real node beside simulated nodes, so a cloud
/// lands on it only when its globals.yml asks for that prefix.
pub const REAL_ROLE_LABEL_PREFIX: &str = "kstack.io/real-role-";
/// Pod label the dev cluster's kwok stages read: how long a simulated pod takes to become
/// ready (a duration such as `2s`).
pub const DEV_READY_DELAY_LABEL: &str = "kstack.io/dev-ready-delay";
/// Pod label the dev cluster's kwok stages read: how long after it became ready a simulated
/// Job pod completes.
pub const DEV_COMPLETE_DELAY_LABEL: &str = "kstack.io/dev-complete-delay";
