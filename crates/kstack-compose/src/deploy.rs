//! The single-node deploy, written against [`Runner`]: check the engine and the images, `up`,
//! then wait until every long-running container is healthy (running, for one without a health
//! check) and every one-shot task has exited 0. The order in which tasks and services start is
//! the engine's, from the bundle's `depends_on` conditions; this waits and reports.
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use kstack_model::labels::{BOOTSTRAP, COMPONENT_LABEL, NAME_LABEL, SERVER};
use kstack_render::compose::ComposeBundle;

use crate::runner::{Container, Error, Runner};

/// How long the deploy waits, and how it looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// For every container to get there, counted from just before `up`.
    pub timeout: Duration,
    /// Between two looks at the containers.
    pub interval: Duration,
    /// The last log lines shown of each container that failed or did not get there in time.
    pub log_lines: u32,
}

impl Options {
    /// `timeout`, a look every 2 s, 20 log lines.
    pub fn new(timeout: Duration) -> Options {
        Options {
            timeout,
            interval: Duration::from_secs(2),
            log_lines: 20,
        }
    }
}

/// Progress, as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// The engine answered and has every image: `up` runs now.
    Starting,
    /// A container got where the deploy waits for it (healthy, running without a health check,
    /// or a task that exited 0), `at` after the start; once per container.
    Done { service: &'a str, at: Duration },
}

/// How a deploy ended; errors running the engine are [`Error`]s instead.
#[derive(Debug)]
pub enum Outcome {
    /// Every container healthy and every task done, `took` after the start.
    Healthy { took: Duration },
    /// No engine answered; nothing was started.
    NoEngine,
    /// The engine lacks these images (sorted); nothing was started.
    MissingImages(Vec<String>),
    /// `up` exited non-zero (`status`: `exit status: 1`); it said why on the terminal.
    UpFailed { status: String },
    /// A task failed, or not every container got there in time.
    Unhealthy(Unhealthy),
}

/// What failed or did not get there in time, with each one's last log lines. Shown as the
/// report the operator reads (`Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unhealthy {
    /// One-shot tasks that exited non-zero: the deploy stopped at once, as the services that
    /// depend on them never start.
    Failed(Vec<Stuck>),
    /// The containers still waited for when the time limit passed.
    TimedOut {
        timeout: Duration,
        waiting: Vec<Stuck>,
    },
}

/// One container in the report: its service, what it is at, and its last log lines (or why
/// they could not be read), every secret already redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub service: String,
    pub container: String,
    /// `exited with code 1`; for a waiting one its state or health (`starting`, `created`).
    pub why: String,
    pub logs: Result<String, String>,
    /// How many lines were asked for.
    pub log_lines: u32,
}

impl Stuck {
    /// The last lines under a heading.
    fn fmt_logs(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "--- {} (last {} lines) ---",
            self.container, self.log_lines
        )?;
        match &self.logs {
            Ok(text) => f.write_str(text),
            Err(e) => writeln!(f, "({e})"),
        }
    }
}

impl fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Built whole, so that the report ends without blank lines however the logs end.
        struct Report<'a>(&'a Unhealthy);
        impl fmt::Display for Report<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Unhealthy::Failed(failed) => {
                        for c in failed {
                            writeln!(f, "error: {} failed: {}", c.service, c.why)?;
                            c.fmt_logs(f)?;
                        }
                    }
                    Unhealthy::TimedOut { timeout, waiting } => {
                        writeln!(
                            f,
                            "error: not every container was healthy within {} s:",
                            timeout.as_secs()
                        )?;
                        for c in waiting {
                            writeln!(f, "  {} ({})", c.service, c.why)?;
                        }
                        for c in waiting {
                            c.fmt_logs(f)?;
                        }
                    }
                }
                Ok(())
            }
        }
        f.write_str(Report(self).to_string().trim_end())
    }
}

/// Where a container stands in the wait.
#[derive(Debug, PartialEq, Eq)]
enum Standing {
    Done,
    Waiting(String),
    Failed(String),
}

fn standing(c: &Container) -> Standing {
    let one_shot = c.labels.get(COMPONENT_LABEL).map(String::as_str) == Some(BOOTSTRAP);
    match (one_shot, c.state.as_str()) {
        (true, "exited") if c.exit_code == 0 => Standing::Done,
        (true, "exited") => Standing::Failed(format!("exited with code {}", c.exit_code)),
        (true, state) => Standing::Waiting(state.to_owned()),
        (false, "running") if c.health.is_empty() || c.health == "healthy" => Standing::Done,
        (false, "running") => Standing::Waiting(c.health.clone()),
        (false, state) => Standing::Waiting(state.to_owned()),
    }
}

/// Deploys the bundle written at `file` ([`crate::write_bundle`]): nothing starts unless the
/// engine answers and has every image of the bundle; then `up`, and a look at the containers
/// every `interval` until every one is done, a task failed (the report says which, at once),
/// or `timeout` passed. `redact` is applied to every log line and error text the report
/// carries (a service may log a password).
pub fn deploy(
    runner: &dyn Runner,
    bundle: &ComposeBundle,
    file: &Path,
    options: &Options,
    redact: &dyn Fn(&str) -> String,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Outcome, Error> {
    if !runner.answers() {
        return Ok(Outcome::NoEngine);
    }
    let images: BTreeSet<&str> = bundle
        .file
        .services
        .values()
        .map(|s| s.image.as_str())
        .collect();
    let missing: Vec<String> = images
        .into_iter()
        .filter(|image| !runner.has_image(image))
        .map(str::to_owned)
        .collect();
    if !missing.is_empty() {
        return Ok(Outcome::MissingImages(missing));
    }
    on_event(Event::Starting);
    let started = runner.now();
    match runner.up(file) {
        Ok(()) => {}
        Err(Error::Exit { status, .. }) => return Ok(Outcome::UpFailed { status }),
        Err(e) => return Err(e),
    }
    let stuck = |c: &Container, why: String| Stuck {
        service: c.service.clone(),
        container: c.name.clone(),
        why,
        logs: runner
            .logs(&c.name, options.log_lines)
            .map(|text| redact(&text))
            .map_err(|e| redact(&e.to_string())),
        log_lines: options.log_lines,
    };
    let mut done = BTreeSet::new();
    loop {
        let containers = runner.ps(file)?;
        if containers.is_empty() {
            return Err(Error::NoContainers {
                file: file.to_owned(),
            });
        }
        let at = runner.now().duration_since(started);
        let mut waiting = Vec::new();
        let mut failed = Vec::new();
        for c in &containers {
            match standing(c) {
                Standing::Done => {
                    if done.insert(c.name.clone()) {
                        on_event(Event::Done {
                            service: &c.service,
                            at,
                        });
                    }
                }
                Standing::Waiting(why) => waiting.push((c, why)),
                Standing::Failed(why) => failed.push((c, why)),
            }
        }
        if failed.is_empty() && waiting.is_empty() {
            return Ok(Outcome::Healthy {
                took: runner.now().duration_since(started),
            });
        }
        if !failed.is_empty() {
            let failed = failed.into_iter().map(|(c, why)| stuck(c, why)).collect();
            return Ok(Outcome::Unhealthy(Unhealthy::Failed(failed)));
        }
        if runner.now().duration_since(started) >= options.timeout {
            let waiting = waiting.into_iter().map(|(c, why)| stuck(c, why)).collect();
            return Ok(Outcome::Unhealthy(Unhealthy::TimedOut {
                timeout: options.timeout,
                waiting,
            }));
        }
        runner.sleep(options.interval);
    }
}

/// The last lines a long-running container logged, in [`service_logs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLog {
    pub service: String,
    pub container: String,
    pub lines: Vec<String>,
}

/// The last `lines` lines of every long-running container of each service on the engine (by
/// kstack's labels, so also a project written elsewhere), redacted; for `kstack verify`'s
/// report of a failed step.
pub fn service_logs(
    runner: &dyn Runner,
    services: &[String],
    lines: u32,
    redact: &dyn Fn(&str) -> String,
) -> Result<Vec<ContainerLog>, Error> {
    let mut out = Vec::new();
    for service in services {
        let labels = [(NAME_LABEL, service.as_str()), (COMPONENT_LABEL, SERVER)];
        for name in runner.containers(&labels)? {
            let text = redact(&runner.logs(&name, lines)?);
            out.push(ContainerLog {
                service: service.clone(),
                container: name,
                lines: text.lines().map(str::to_owned).collect(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fake::{Behaviour, FakeRunner};
    use kstack_config::Config;
    use kstack_model::catalog::Catalog;
    use kstack_model::globals::Globals;
    use kstack_render::compose;

    /// The default cloud with plain passwords (RSA key generation would dominate the test
    /// time).
    pub(crate) fn config() -> Config {
        use kstack_config::passwords::{KNOWN_KEYS, Passwords, Secret};
        let entries = KNOWN_KEYS
            .iter()
            .flat_map(|(_, keys)| keys.iter())
            .map(|k| ((*k).to_owned(), Secret::Value(format!("{k}-Xq9v"))))
            .collect();
        Config::from_parts(
            Globals::default(),
            Passwords { entries },
            Default::default(),
            Catalog::builtin().unwrap(),
        )
    }

    fn bundle() -> ComposeBundle {
        compose::render(&config()).unwrap()
    }

    const SECRET: &str = "keystone_database_password-Xq9v";

    fn redact(text: &str) -> String {
        text.replace(SECRET, "<redacted>")
    }

    /// Runs the deploy on `fake`: the outcome and every event, `Done` as `(service, seconds)`.
    fn run(fake: &FakeRunner, timeout: u64) -> (Outcome, Vec<(String, u64)>) {
        let mut events = Vec::new();
        let outcome = deploy(
            fake,
            &fake.bundle,
            Path::new("/srv/cloud/compose.yaml"),
            &Options::new(Duration::from_secs(timeout)),
            &redact,
            &mut |e| match e {
                Event::Starting => events.push(("(up)".to_owned(), 0)),
                Event::Done { service, at } => events.push((service.to_owned(), at.as_secs())),
            },
        )
        .unwrap();
        (outcome, events)
    }

    fn position(events: &[(String, u64)], service: &str) -> usize {
        events
            .iter()
            .position(|(s, _)| s == service)
            .unwrap_or_else(|| panic!("{service} never done: {events:?}"))
    }

    #[test]
    fn without_an_engine_nothing_is_looked_at_or_started() {
        let fake = FakeRunner::new(bundle()).without_engine();
        let (outcome, events) = run(&fake, 60);
        assert!(matches!(outcome, Outcome::NoEngine), "{outcome:?}");
        assert!(events.is_empty());
        assert_eq!(fake.calls(), ["info"]);
    }

    #[test]
    fn every_missing_image_is_named_once_and_nothing_starts() {
        let b = bundle();
        let keystone = b.file.services["keystone"].image.clone();
        let mariadb = b.file.services["mariadb"].image.clone();
        let fake = FakeRunner::new(b)
            .without_image(&mariadb)
            .without_image(&keystone);
        let (outcome, events) = run(&fake, 60);
        let Outcome::MissingImages(missing) = outcome else {
            panic!("{outcome:?}")
        };
        let mut want = vec![keystone.clone(), mariadb.clone()];
        want.sort();
        assert_eq!(
            missing, want,
            "sorted, each once (keystone's tasks share its image)"
        );
        assert!(events.is_empty());
        assert!(
            !fake.calls().contains(&"up".to_owned()),
            "{:?}",
            fake.calls()
        );
    }

    #[test]
    fn up_failing_is_its_own_outcome_and_nothing_is_waited_for() {
        let fake = FakeRunner::new(bundle()).up_fails("exit status: 1");
        let (outcome, _) = run(&fake, 60);
        let Outcome::UpFailed { status } = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(status, "exit status: 1");
        assert_eq!(fake.calls().last().map(String::as_str), Some("up"));
    }

    #[test]
    fn tasks_finish_before_their_service_and_services_after_their_dependencies() {
        let b = bundle();
        let fake = FakeRunner::new(b.clone())
            .behave("mariadb", Behaviour::DoneAfter(Duration::from_secs(10)))
            .behave(
                "keystone-db-sync",
                Behaviour::DoneAfter(Duration::from_secs(6)),
            )
            .behave("keystone", Behaviour::DoneAfter(Duration::from_secs(4)));
        let (outcome, events) = run(&fake, 600);
        let Outcome::Healthy { took } = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(events[0].0, "(up)");
        // Every container is reported done exactly once.
        let services: BTreeSet<&str> = events[1..].iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(services.len(), events.len() - 1, "{events:?}");
        assert_eq!(
            services,
            b.file.services.keys().map(String::as_str).collect(),
        );
        // Each once what it depends on was done (the same look may show both).
        let at = |s: &str| events[position(&events, s)].1;
        for (service, s) in &b.file.services {
            for dep in s.depends_on.keys() {
                assert!(at(dep) <= at(service), "{service} before {dep}: {events:?}");
            }
        }
        assert!(at("mariadb") >= 10 && at("keystone-db-sync") >= at("mariadb") + 6);
        assert!(at("keystone") >= at("keystone-db-sync") + 4, "{events:?}");
        // The looks come every 2 s: each is seen done by the first look after it is.
        assert_eq!(
            (at("mariadb"), at("keystone-db-sync"), at("keystone")),
            (10, 16, 20)
        );
        assert_eq!(took.as_secs(), events.iter().map(|e| e.1).max().unwrap());
    }

    #[test]
    fn a_failed_task_stops_the_deploy_at_once_and_its_dependents_never_start() {
        let fake = FakeRunner::new(bundle())
            .behave("keystone-db-sync", Behaviour::Exits(1))
            .logs(
                "openstack-keystone-db-sync-1",
                &format!("connecting with {SECRET}\nAccess denied\n"),
            );
        let (outcome, events) = run(&fake, 600);
        let Outcome::Unhealthy(report) = outcome else {
            panic!("{outcome:?}")
        };
        let Unhealthy::Failed(failed) = &report else {
            panic!("{report:?}")
        };
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].service, "keystone-db-sync");
        assert!(fake.started("keystone").is_none(), "keystone started");
        assert!(
            events.iter().all(|(s, _)| s != "keystone"),
            "keystone reported done: {events:?}"
        );
        // Stopped at the first look that showed it, far from the time limit.
        assert!(
            fake.elapsed() < Duration::from_secs(60),
            "{:?}",
            fake.elapsed()
        );
        assert_eq!(
            report.to_string(),
            "error: keystone-db-sync failed: exited with code 1\n\
             --- openstack-keystone-db-sync-1 (last 20 lines) ---\n\
             connecting with <redacted>\n\
             Access denied"
        );
    }

    #[test]
    fn at_the_time_limit_every_waiting_container_is_named_with_its_logs() {
        let fake = FakeRunner::new(bundle())
            .behave("horizon", Behaviour::NeverHealthy)
            // A server that exits restarts (`restart: always`): waited for, not failed.
            .behave("heat-engine", Behaviour::Exits(1))
            .logs("openstack-horizon-1", "AH00558: apache2\n");
        let (outcome, _) = run(&fake, 30);
        let Outcome::Unhealthy(report) = outcome else {
            panic!("{outcome:?}")
        };
        let Unhealthy::TimedOut { waiting, timeout } = &report else {
            panic!("{report:?}")
        };
        assert_eq!(timeout.as_secs(), 30);
        // Looked until the limit, not longer.
        assert!(fake.elapsed() >= Duration::from_secs(30));
        assert!(
            fake.elapsed() < Duration::from_secs(33),
            "{:?}",
            fake.elapsed()
        );
        let why: Vec<(&str, &str)> = waiting
            .iter()
            .map(|c| (c.service.as_str(), c.why.as_str()))
            .collect();
        assert_eq!(
            why,
            [("heat-engine", "restarting"), ("horizon", "unhealthy")]
        );
        assert_eq!(
            report.to_string(),
            "error: not every container was healthy within 30 s:\n  \
             heat-engine (restarting)\n  \
             horizon (unhealthy)\n\
             --- openstack-heat-engine-1 (last 20 lines) ---\n\
             --- openstack-horizon-1 (last 20 lines) ---\n\
             AH00558: apache2"
        );
    }

    #[test]
    fn logs_that_cannot_be_read_say_why_without_secrets() {
        let fake = FakeRunner::new(bundle())
            .behave("keystone-db-sync", Behaviour::Exits(2))
            .logs_fail(&format!("no such container ({SECRET})"));
        let (outcome, _) = run(&fake, 600);
        let Outcome::Unhealthy(report) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(
            report.to_string(),
            "error: keystone-db-sync failed: exited with code 2\n\
             --- openstack-keystone-db-sync-1 (last 20 lines) ---\n\
             (`docker logs openstack-keystone-db-sync-1` failed: no such container (<redacted>))"
        );
    }

    #[test]
    fn no_container_after_up_is_an_error_naming_the_file() {
        let fake = FakeRunner::new(bundle()).lists_nothing();
        let err = deploy(
            &fake,
            &fake.bundle,
            Path::new("/srv/cloud/compose.yaml"),
            &Options::new(Duration::from_secs(60)),
            &redact,
            &mut |_| {},
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`docker compose ps` lists no container of /srv/cloud/compose.yaml after `up`"
        );
    }

    #[test]
    fn service_logs_are_the_long_running_containers_of_each_service_redacted() {
        let fake = FakeRunner::new(bundle())
            .logs("openstack-keystone-1", &format!("a\nb {SECRET}\n"))
            .logs("openstack-keystone-db-sync-1", "not a server\n");
        run(&fake, 60);
        let got = service_logs(
            &fake,
            &["keystone".to_owned(), "nothing".to_owned()],
            20,
            &redact,
        )
        .unwrap();
        assert_eq!(
            got,
            [ContainerLog {
                service: "keystone".into(),
                container: "openstack-keystone-1".into(),
                lines: vec!["a".into(), "b <redacted>".into()],
            }]
        );
    }
}
