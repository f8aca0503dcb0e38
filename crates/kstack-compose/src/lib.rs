//! The single-node target's executor, the counterpart of `kstack-engine` for one node without
//! Kubernetes: it writes a rendered Compose bundle (`kstack_render::compose`) to disk and
//! deploys it over a [`Runner`], the counterpart of the engine's `Cluster` trait: what the
//! deploy needs from a container engine (does it answer, has it an image, `compose up`, the
//! project's containers and their health, a container's last log lines, the engine's
//! containers by label).
//!
//! [`DockerCompose`] implements it with the `docker` command line (Docker Compose v2);
//! [`fake::FakeRunner`] (behind the `testing` feature) in memory, starting containers in the
//! order the bundle's `depends_on` conditions allow, as Compose does.
//!
//! ```text
//! ComposeBundle ──► write_bundle(dir) ──► deploy(runner): engine? images? ──► up ──► wait
//!                                                 (every container healthy, every task done)
//! ```
//!
//! Architecture invariant: only this crate's code runs `docker` (tests may too); it never talks
//! to Kubernetes and prints nothing: progress is reported through [`Event`]s, the result is an
//! [`Outcome`], and the caller prints.
mod deploy;
mod docker;
mod files;
mod runner;

// Test support: compiled only for the tests that turn on `testing`, never into the kstack
// binary. Documented always, so the docs' links to it resolve.
#[cfg(any(feature = "testing", doc))]
pub mod fake;

pub use deploy::{ContainerLog, Event, Options, Outcome, Stuck, Unhealthy, deploy, service_logs};
pub use docker::{DockerCompose, up_command};
pub use files::write_bundle;
pub use runner::{Container, Error, Runner};
