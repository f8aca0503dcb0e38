//! What the single-node deploy needs from a container engine, as a trait: the deploy logic
//! ([`crate::deploy()`]) runs nothing itself.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A container engine with Compose: [`crate::DockerCompose`], or [`crate::fake::FakeRunner`]
/// in tests. `file` is the project's `compose.yaml`.
pub trait Runner {
    /// Whether the engine answers (`docker info`); no engine at all counts as no.
    fn answers(&self) -> bool;

    /// Whether the engine has `image` (`docker image inspect`).
    fn has_image(&self, image: &str) -> bool;

    /// Creates and starts the project's containers, removing those of services no longer in
    /// it (`docker compose up -d --remove-orphans`). The engine orders them by their
    /// `depends_on` conditions: a one-shot task must exit 0, a service be healthy or started,
    /// before the services that depend on it start. A non-zero exit is [`Error::Exit`].
    fn up(&self, file: &Path) -> Result<(), Error>;

    /// Every container of the project, running or not (`docker compose ps -a`).
    fn ps(&self, file: &Path) -> Result<Vec<Container>, Error>;

    /// The last `lines` lines a container logged, its stdout then its stderr (`docker logs`).
    fn logs(&self, container: &str, lines: u32) -> Result<String, Error>;

    /// The names of the engine's containers, running or not, that carry every label of
    /// `labels` (`docker ps -a --filter label=...`).
    fn containers(&self, labels: &[(&str, &str)]) -> Result<Vec<String>, Error>;

    /// The clock the deploy measures its time limit with (the fake's moves only in
    /// [`Runner::sleep`]).
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// Waits before the deploy looks at the containers again.
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// One container of the project, as `docker compose ps` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// The container's name (`<project>-<service>-1`).
    pub name: String,
    /// Its Compose service.
    pub service: String,
    /// `created`, `running`, `restarting`, `exited`, ...
    pub state: String,
    /// `starting`, `healthy`, `unhealthy`; empty without a health check.
    pub health: String,
    pub exit_code: i64,
    pub labels: BTreeMap<String, String>,
}

/// Why the single-node target could not write its files or run the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be written, or a command could not be run at all (no `docker`).
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
    /// A command ran and failed; `stderr` is what it said.
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    /// A command whose output went to the terminal exited non-zero (`status`: `exit status: 1`).
    #[error("`{command}` failed ({status})")]
    Exit { command: String, status: String },
    /// `docker compose ps` printed something that is not its JSON.
    #[error("reading `docker compose ps` output: {error}")]
    Ps { error: serde_json::Error },
    /// `docker compose ps` lists nothing after `up`: the wrong project, or another engine.
    #[error("`docker compose ps` lists no container of {} after `up`", file.display())]
    NoContainers { file: PathBuf },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        move |error| Error::Io {
            context: context.into(),
            error,
        }
    }
}
