//! The ports of the inventory service: the traits through which it reaches a Kubernetes
//! cluster, and the plain data they carry.
//!
//! - [`sync`]: [`NodeSync`], how a host's labels and lock state reach its node, and which node
//!   labels it may never touch ([`sync::is_reserved_label_key`]).
//! - [`cloud`]: [`CloudStatus`], what the status page shows of the deployed cloud
//!   ([`cloud::Snapshot`]) and when that changes.
//! - [`compute`]: [`ComputeHosts`], the cloud's compute service as a compute host's lock needs
//!   it (its instances, the other hosts, migrations).
//!
//! `kstack-inventory` calls these traits, `kstack-kube` implements the first two against an API
//! server and `kstack-verify` the third against nova,
//! and `kstack-engine` computes a [`cloud::Snapshot`] from the release records. Each side
//! depends on this crate only, not on the others: the Kubernetes adapter builds without the
//! inventory's HTTP server and database, and the inventory without a Kubernetes client.
//!
//! Architecture invariant: no IO here, no HTTP server, no database, no Kubernetes client; only
//! traits, values and the in-memory implementations tests and a standalone inventory use
//! ([`RecordingSync`], [`NoNodeSync`], [`FakeCloudStatus`], [`NoCloudStatus`], [`FakeCompute`]).

pub mod cloud;
pub mod compute;
pub mod sync;

pub use cloud::{CloudStatus, FakeCloudStatus, NoCloudStatus};
pub use compute::{ComputeCall, ComputeError, ComputeHosts, ComputeService, FakeCompute, Instance};
pub use sync::{NoNodeSync, NodeSync, RecordingSync, SyncCall, SyncError};
