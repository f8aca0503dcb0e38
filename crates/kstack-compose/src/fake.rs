//! An in-memory [`Runner`] for tests of the single-node deploy: it knows the bundle it was made
//! with, starts each service once its `depends_on` conditions hold (a task exited 0, a service
//! healthy or started), as Compose does, and lets each one finish, become healthy, fail or
//! never get there after a per-service delay, on a clock that moves only when the deploy
//! sleeps. It logs every call.
//!
//! Behind the `testing` feature: dependents turn it on in their `[dev-dependencies]`.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kstack_model::labels::{BOOTSTRAP, COMPONENT_LABEL};
use kstack_render::compose::{ComposeBundle, Condition};

use crate::runner::{Container, Error, Runner};

/// How a service's container behaves once started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// A task exits 0, a service is healthy (running, without a health check), this long after
    /// it started.
    DoneAfter(Duration),
    /// A task exits with this code when it starts; a service exits with it and keeps being
    /// restarted (`restart: always`).
    Exits(i64),
    /// A service runs but its health check never passes.
    NeverHealthy,
}

/// When a service reached each point, on the fake's clock (`None`: never).
#[derive(Debug, Clone, Copy)]
struct Times {
    started: Option<Duration>,
    /// A task's exit 0, a service's health.
    done: Option<Duration>,
}

#[derive(Debug, Default)]
struct Inner {
    clock: Duration,
    up_at: Option<Duration>,
    calls: Vec<String>,
}

/// A fake engine with Compose, running one bundle. By default the engine answers, has every
/// image, and every container is done the moment it starts.
#[derive(Debug)]
pub struct FakeRunner {
    /// The bundle it runs.
    pub bundle: ComposeBundle,
    base: Instant,
    engine: bool,
    missing: BTreeSet<String>,
    up_status: Option<String>,
    lists_nothing: bool,
    behaviour: BTreeMap<String, Behaviour>,
    logs: BTreeMap<String, String>,
    logs_fail: Option<String>,
    inner: Mutex<Inner>,
}

impl FakeRunner {
    pub fn new(bundle: ComposeBundle) -> FakeRunner {
        FakeRunner {
            bundle,
            base: Instant::now(),
            engine: true,
            missing: BTreeSet::new(),
            up_status: None,
            lists_nothing: false,
            behaviour: BTreeMap::new(),
            logs: BTreeMap::new(),
            logs_fail: None,
            inner: Mutex::default(),
        }
    }

    /// No engine answers.
    pub fn without_engine(mut self) -> FakeRunner {
        self.engine = false;
        self
    }

    /// The engine lacks `image`.
    pub fn without_image(mut self, image: &str) -> FakeRunner {
        self.missing.insert(image.to_owned());
        self
    }

    /// `up` exits with `status` (`exit status: 1`).
    pub fn up_fails(mut self, status: &str) -> FakeRunner {
        self.up_status = Some(status.to_owned());
        self
    }

    /// `ps` lists no container (another project, another engine).
    pub fn lists_nothing(mut self) -> FakeRunner {
        self.lists_nothing = true;
        self
    }

    /// How `service` behaves.
    pub fn behave(mut self, service: &str, behaviour: Behaviour) -> FakeRunner {
        self.behaviour.insert(service.to_owned(), behaviour);
        self
    }

    /// What `container` logged.
    pub fn logs(mut self, container: &str, text: &str) -> FakeRunner {
        self.logs.insert(container.to_owned(), text.to_owned());
        self
    }

    /// Reading any container's logs fails, the engine saying `stderr`.
    pub fn logs_fail(mut self, stderr: &str) -> FakeRunner {
        self.logs_fail = Some(stderr.to_owned());
        self
    }

    /// Every call so far: `info`, `image inspect <image>`, `up`, `ps`, `logs <container>`,
    /// `ps --filter <labels>`, `sleep <secs>`.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// The fake's clock: how long the deploy slept.
    pub fn elapsed(&self) -> Duration {
        self.lock().clock
    }

    /// When `service` started, after `up` (`None`: never, so far).
    pub fn started(&self, service: &str) -> Option<Duration> {
        let inner = self.lock();
        let up = inner.up_at?;
        let at = self.times(up)[service].started?;
        (at <= inner.clock).then_some(at)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn call(&self, what: String) {
        self.lock().calls.push(what);
    }

    fn container_name(&self, service: &str) -> String {
        format!("{}-{service}-1", self.bundle.file.name)
    }

    fn one_shot(&self, service: &str) -> bool {
        self.bundle.file.services[service]
            .labels
            .get(COMPONENT_LABEL)
            .is_some_and(|c| c == BOOTSTRAP)
    }

    /// Every service's times, for an `up` at `up`.
    fn times(&self, up: Duration) -> BTreeMap<String, Times> {
        let mut times = BTreeMap::new();
        for service in self.bundle.file.services.keys() {
            self.times_of(service, up, &mut times);
        }
        times
    }

    fn times_of(&self, service: &str, up: Duration, memo: &mut BTreeMap<String, Times>) -> Times {
        if let Some(t) = memo.get(service) {
            return *t;
        }
        let mut started = Some(up);
        for (dep, d) in &self.bundle.file.services[service].depends_on {
            let t = self.times_of(dep, up, memo);
            let met = match d.condition {
                Condition::ServiceStarted => t.started,
                Condition::ServiceHealthy | Condition::ServiceCompletedSuccessfully => t.done,
            };
            started = started.zip(met).map(|(a, b)| a.max(b));
        }
        let done = match self.behaviour(service) {
            Behaviour::DoneAfter(d) => started.map(|s| s + d),
            Behaviour::Exits(_) | Behaviour::NeverHealthy => None,
        };
        let t = Times { started, done };
        memo.insert(service.to_owned(), t);
        t
    }

    fn behaviour(&self, service: &str) -> Behaviour {
        self.behaviour
            .get(service)
            .copied()
            .unwrap_or(Behaviour::DoneAfter(Duration::ZERO))
    }

    fn container(&self, service: &str, t: Times, now: Duration) -> Container {
        let s = &self.bundle.file.services[service];
        let has_health = s.healthcheck.is_some();
        let (state, health, exit_code) = match (t.started, self.one_shot(service)) {
            (Some(at), _) if at > now => ("created", "", 0),
            (None, _) => ("created", "", 0),
            (Some(_), true) => match (self.behaviour(service), t.done) {
                (Behaviour::Exits(code), _) => ("exited", "", code),
                (_, Some(done)) if done <= now => ("exited", "", 0),
                _ => ("running", "", 0),
            },
            (Some(_), false) => match (self.behaviour(service), t.done) {
                (Behaviour::Exits(code), _) => ("restarting", "", code),
                (_, _) if !has_health => ("running", "", 0),
                (_, Some(done)) if done <= now => ("running", "healthy", 0),
                (Behaviour::NeverHealthy, _) => ("running", "unhealthy", 0),
                _ => ("running", "starting", 0),
            },
        };
        Container {
            name: self.container_name(service),
            service: service.to_owned(),
            state: state.to_owned(),
            health: health.to_owned(),
            exit_code,
            labels: s.labels.clone(),
        }
    }
}

impl Runner for FakeRunner {
    fn answers(&self) -> bool {
        self.call("info".to_owned());
        self.engine
    }

    fn has_image(&self, image: &str) -> bool {
        self.call(format!("image inspect {image}"));
        !self.missing.contains(image)
    }

    fn up(&self, file: &Path) -> Result<(), Error> {
        let mut inner = self.lock();
        inner.calls.push("up".to_owned());
        if let Some(status) = &self.up_status {
            return Err(Error::Exit {
                command: crate::up_command(file),
                status: status.clone(),
            });
        }
        inner.up_at = Some(inner.clock);
        Ok(())
    }

    fn ps(&self, _file: &Path) -> Result<Vec<Container>, Error> {
        self.call("ps".to_owned());
        let (up, now) = {
            let inner = self.lock();
            (inner.up_at, inner.clock)
        };
        let Some(up) = up.filter(|_| !self.lists_nothing) else {
            return Ok(Vec::new());
        };
        Ok(self
            .times(up)
            .into_iter()
            .map(|(service, t)| self.container(&service, t, now))
            .collect())
    }

    fn logs(&self, container: &str, _lines: u32) -> Result<String, Error> {
        self.call(format!("logs {container}"));
        match &self.logs_fail {
            Some(stderr) => Err(Error::Failed {
                command: format!("docker logs {container}"),
                stderr: stderr.clone(),
            }),
            None => Ok(self.logs.get(container).cloned().unwrap_or_default()),
        }
    }

    fn containers(&self, labels: &[(&str, &str)]) -> Result<Vec<String>, Error> {
        let filter: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.call(format!("ps --filter {}", filter.join(",")));
        if self.lock().up_at.is_none() {
            return Ok(Vec::new());
        }
        Ok(self
            .bundle
            .file
            .services
            .iter()
            .filter(|(_, s)| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|l| l == v))
            })
            .map(|(name, _)| self.container_name(name))
            .collect())
    }

    fn now(&self) -> Instant {
        self.base + self.lock().clock
    }

    fn sleep(&self, duration: Duration) {
        let mut inner = self.lock();
        inner.calls.push(format!("sleep {}", duration.as_secs()));
        inner.clock += duration;
    }
}
