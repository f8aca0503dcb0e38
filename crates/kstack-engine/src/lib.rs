//! The deploy engine: a planner (desired objects and the catalog's dependency graph against
//! what the cluster holds → a graph of steps) and an executor that runs those steps over a
//! [`Cluster`] trait, in parallel as far as the graph allows, each gated on real health; and
//! the release record (generations, history) kept in the cluster; and [`cloud::snapshot`], the
//! cloud's health as the inventory's status page shows it, judged from those records.
//!
//! Architecture invariant: this crate does no IO of its own. Everything it learns about a
//! cluster comes through [`Cluster`] (implemented by `kstack-kube`, and in memory for tests by
//! [`fake::FakeCluster`], behind the `testing` feature); it never renders and never reads files.
//!
//! ```text
//! observe(cluster) ──► Observed ──► plan(rendered, catalog, observed) ──► Plan ──► deploy(cluster, plan)
//! ```
pub mod certs;
pub mod cloud;
pub mod cluster;
pub mod execute;
// Test support: compiled only for the tests and benchmarks that turn on `testing`, never into
// the kstack binary. Documented always, so the docs' links to it resolve.
#[cfg(any(feature = "testing", doc))]
pub mod fake;
pub mod keys;
pub mod plan;
pub mod release;
pub mod rollback;
pub mod status;

pub use cluster::{Cluster, ClusterError, Condition, ObjectRef, WaitOutcome};
pub use execute::{
    DEFAULT_OUTAGE, Event, Options, Report, RolledBack, StepFailure, deploy, observe,
};
pub use plan::{Action, Limits, Mode, Observed, Plan, ServiceMode, Step, StepKind, plan};
pub use release::{Migration, ReleaseHistory, ServiceRecord, ServiceState};
pub use rollback::{RollbackError, RollbackPlan, RollbackReport, plan_rollback, rollback};
