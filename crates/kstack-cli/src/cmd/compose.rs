//! The single-node Compose target of `kstack template` and `kstack deploy`: writing
//! `compose.yaml` and the config directories, and running `docker compose up -d`.
//!
//! Exit codes ([`Exit`]): success; failed (IO, or `docker compose` failed); bad input (the
//! same diagnostics as the Kubernetes target, or an option the Compose target does not take);
//! step failed when `kstack deploy --target compose` wrote the files but found no Docker engine
//! or an image missing (nothing was started), or a container did not become healthy in time or
//! a one-shot task failed.
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;
use kstack_config::{Config, fs};
use kstack_model::labels::{BOOTSTRAP, COMPONENT_LABEL};
use kstack_render::compose::{self, COMPOSE_FILE, CONFIG_DIR, ComposeBundle, HEADER};
use kstack_verify::{Password, Redactor};

use crate::exit::Exit;

/// Where the rendered cloud runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetArg {
    /// Kubernetes objects.
    #[default]
    Kubernetes,
    /// One node without Kubernetes: a Compose file and the containers' config directories.
    Compose,
}

/// `kstack template --target compose`: `output` is `yaml`, `json` or a directory.
pub fn template(config_dir: &Path, service: Option<&str>, output: &str) -> anyhow::Result<Exit> {
    if service.is_some() {
        eprintln!(
            "error: --service is not supported with --target compose: the Compose file needs every service its dependencies name"
        );
        return Ok(Exit::BadInput);
    }
    let Some(config) = super::load_config(config_dir)? else {
        return Ok(super::invalid_config(config_dir, "nothing rendered"));
    };
    let bundle = render(&config)?;
    match output {
        "yaml" => {
            write_stdout(&bundle.to_yaml())?;
            eprintln!(
                "note: only compose.yaml was printed; the config files it mounts are written with `-o DIR`"
            );
        }
        "json" => {
            write_stdout(&bundle.to_json())?;
            eprintln!(
                "note: only the Compose file was printed; the config files it mounts are written with `-o DIR`"
            );
        }
        dir => {
            write_bundle(&bundle, Path::new(dir))?;
            eprintln!(
                "wrote {} and {} config directories to {dir}",
                COMPOSE_FILE,
                bundle.config_dirs.len()
            );
        }
    }
    Ok(Exit::Success)
}

/// `kstack deploy --target compose`: writes the files, runs `docker compose up -d`, then waits
/// until every long-running container is healthy (running, for one without a health check)
/// and every one-shot task has exited 0, for at most `timeout` seconds (default
/// `kstack_timeouts.default`).
pub fn deploy(
    config_dir: &Path,
    output: Option<&Path>,
    timeout: Option<u64>,
) -> anyhow::Result<Exit> {
    let Some(config) = super::load_config(config_dir)? else {
        return Ok(super::invalid_config(config_dir, "nothing rendered"));
    };
    let timeout = timeout.unwrap_or_else(|| config.globals.timeout_secs("default"));
    let bundle = render(&config)?;
    let dir = output.map_or_else(|| config_dir.join("compose"), Path::to_path_buf);
    write_bundle(&bundle, &dir)?;
    let file = dir.join(COMPOSE_FILE);
    eprintln!("wrote {}", file.display());
    let up = format!("docker compose -f {} up -d", file.display());
    if !docker_answers() {
        eprintln!(
            "error: no Docker engine answered `docker info`; nothing was started.\n\
             Start Docker (e.g. `systemctl start docker`; on a kstack checkout, `bash hack/docker.sh up` \
             and then `eval \"$(bash hack/docker.sh env)\"`), then run:\n  {up}"
        );
        return Ok(Exit::StepFailed);
    }
    let missing = missing_images(&bundle);
    if !missing.is_empty() {
        eprintln!(
            "error: the Docker engine lacks {} image(s) of this cloud; nothing was started:",
            missing.len()
        );
        for image in &missing {
            eprintln!("  {image}");
        }
        eprintln!(
            "Load them into the engine (`docker load -i images.tar`; on a kstack checkout, \
             `bash hack/docker.sh up` builds and loads the default cloud's images), then run:\n  {up}"
        );
        return Ok(Exit::StepFailed);
    }
    eprintln!("running: {up}");
    let started = std::time::Instant::now();
    let status = Command::new("docker")
        .args(["compose", "-f"])
        .arg(&file)
        .args(["up", "-d", "--remove-orphans"])
        .status()
        .context("running docker compose")?;
    if !status.success() {
        eprintln!("error: `{up}` failed ({status})");
        return Ok(Exit::Failed);
    }
    // A service may log a password; the report shows none.
    let redactor = Redactor::new(
        kstack_render::files::cloud_secret_values(&config)
            .into_iter()
            .map(Password::new),
    );
    match wait_healthy(
        &file,
        started,
        std::time::Duration::from_secs(timeout),
        &redactor,
    )? {
        Ok(()) => {
            eprintln!(
                "deployed on this node: every container healthy in {:.1}s",
                started.elapsed().as_secs_f64()
            );
            Ok(Exit::Success)
        }
        Err(report) => {
            eprintln!("{report}");
            Ok(Exit::StepFailed)
        }
    }
}

/// The images of the bundle the engine does not have (`docker image inspect`).
fn missing_images(bundle: &ComposeBundle) -> Vec<String> {
    let images: std::collections::BTreeSet<&str> = bundle
        .file
        .services
        .values()
        .map(|s| s.image.as_str())
        .collect();
    images
        .into_iter()
        .filter(|image| {
            !Command::new("docker")
                .args(["image", "inspect", image])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(str::to_owned)
        .collect()
}

/// One container of the project as `docker compose ps -a --format json` lists it.
#[derive(Debug, serde::Deserialize)]
struct PsEntry {
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Service")]
    service: String,
    #[serde(rename = "State")]
    state: String,
    #[serde(rename = "Health", default)]
    health: String,
    #[serde(rename = "ExitCode", default)]
    exit_code: i64,
    #[serde(rename = "Labels", default)]
    labels: String,
}

/// Where a container stands in the wait.
#[derive(Debug, PartialEq, Eq)]
enum Standing {
    Done,
    Waiting(String),
    Failed(String),
}

fn standing(c: &PsEntry) -> Standing {
    let one_shot = c
        .labels
        .split(',')
        .any(|l| l.split_once('=') == Some((COMPONENT_LABEL, BOOTSTRAP)));
    match (one_shot, c.state.as_str()) {
        (true, "exited") if c.exit_code == 0 => Standing::Done,
        (true, "exited") => Standing::Failed(format!("exited with code {}", c.exit_code)),
        (true, state) => Standing::Waiting(state.to_owned()),
        (false, "running") if c.health.is_empty() || c.health == "healthy" => Standing::Done,
        (false, "running") => Standing::Waiting(c.health.clone()),
        (false, state) => Standing::Waiting(state.to_owned()),
    }
}

/// Parses `docker compose ps -a --format json`: one object per line (Compose v2.21 and
/// later) or one array.
fn parse_ps(text: &str) -> anyhow::Result<Vec<PsEntry>> {
    let trimmed = text.trim();
    if trimmed.starts_with('[') {
        return serde_json::from_str(trimmed).context("reading `docker compose ps` output");
    }
    trimmed
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).context("reading `docker compose ps` output"))
        .collect()
}

/// Waits until every container is [`Standing::Done`]; prints each one as it gets there. The
/// inner error is the report of what failed or did not get there in time, with each one's
/// last log lines.
fn wait_healthy(
    file: &Path,
    started: std::time::Instant,
    timeout: std::time::Duration,
    redactor: &Redactor,
) -> anyhow::Result<Result<(), String>> {
    let mut done = std::collections::BTreeSet::new();
    loop {
        let out = Command::new("docker")
            .args(["compose", "-f"])
            .arg(file)
            .args(["ps", "-a", "--format", "json"])
            .stdin(Stdio::null())
            .output()
            .context("running docker compose ps")?;
        anyhow::ensure!(
            out.status.success(),
            "`docker compose ps` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let entries = parse_ps(&String::from_utf8_lossy(&out.stdout))?;
        anyhow::ensure!(
            !entries.is_empty(),
            "`docker compose ps` lists no container of {} after `up`",
            file.display()
        );
        let at = started.elapsed().as_secs_f64();
        let mut waiting = Vec::new();
        let mut failed = Vec::new();
        for c in &entries {
            match standing(c) {
                Standing::Done => {
                    if done.insert(c.name.clone()) {
                        eprintln!("[{at:7.1}s] done  {}", c.service);
                    }
                }
                Standing::Waiting(why) => waiting.push((c, why)),
                Standing::Failed(why) => failed.push((c, why)),
            }
        }
        if failed.is_empty() && waiting.is_empty() {
            return Ok(Ok(()));
        }
        if !failed.is_empty() || started.elapsed() >= timeout {
            let mut report = String::new();
            for (c, why) in &failed {
                report.push_str(&format!("error: {} failed: {why}\n", c.service));
                report.push_str(&last_lines(&c.name, redactor));
            }
            if failed.is_empty() {
                report.push_str(&format!(
                    "error: not every container was healthy within {} s:\n",
                    timeout.as_secs()
                ));
                for (c, why) in &waiting {
                    report.push_str(&format!("  {} ({why})\n", c.service));
                }
                for (c, _) in &waiting {
                    report.push_str(&last_lines(&c.name, redactor));
                }
            }
            return Ok(Err(report.trim_end().to_owned()));
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// The last lines a container logged, under a heading.
fn last_lines(container: &str, redactor: &Redactor) -> String {
    const LINES: i64 = 20;
    let text = container_logs(container, LINES, redactor)
        .unwrap_or_else(|e| format!("({})\n", redactor.redact(&e)));
    format!("--- {container} (last {LINES} lines) ---\n{text}")
}

/// The last `lines` lines a container of this node's engine logged (`docker logs` writes the
/// container's stdout and stderr to its own), every value of passwords.yml shown as the
/// redactor shows it.
pub(super) fn container_logs(
    container: &str,
    lines: i64,
    redactor: &Redactor,
) -> Result<String, String> {
    let out = Command::new("docker")
        .args(["logs", "--tail", &lines.to_string(), container])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running docker: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`docker logs {container}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(redactor.redact(&text))
}

/// Renders; a config the Compose target cannot render (a template error, a name clash, a task
/// naming no container, an empty password a task needs) is bad input (exit 2), as in every
/// command.
fn render(config: &Config) -> anyhow::Result<ComposeBundle> {
    compose::render(config).map_err(|e| super::InputError(e.to_string()).into())
}

/// Whether a Docker engine answers (`docker info` exits 0). No docker binary counts as no.
fn docker_answers() -> bool {
    Command::new("docker")
        .arg("info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Writes `dir/compose.yaml` and `dir/config/<path>/<file>`: secret files mode 0600, the others
/// 0644. A `config/` left by an earlier kstack render is replaced whole, so a disabled service's
/// files (and passwords) do not linger.
pub fn write_bundle(bundle: &ComposeBundle, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let compose_path = dir.join(COMPOSE_FILE);
    let config_root = dir.join(CONFIG_DIR);
    let ours = std::fs::read_to_string(&compose_path).is_ok_and(|s| s.starts_with(HEADER));
    if ours && config_root.exists() {
        std::fs::remove_dir_all(&config_root)
            .with_context(|| format!("removing the old {}", config_root.display()))?;
    }
    for d in &bundle.config_dirs {
        let path = config_root.join(&d.path);
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        for f in &d.files {
            write_file(
                &path.join(&f.name),
                f.content.as_bytes(),
                if f.secret { 0o600 } else { 0o644 },
            )?;
        }
    }
    write_file(&compose_path, bundle.to_yaml().as_bytes(), 0o644)
}

/// Creates or replaces a file with `mode`: a secret is never readable by others, not even
/// between creation and a later chmod. A file that exists keeps any permission the operator
/// took away ([`kstack_config::fs::keep_tighter`]): modes stay or tighten, never widen.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mode = fs::keep_tighter(path, mode);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    // An existing file keeps its old mode on open: set it explicitly.
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstack_model::catalog::Catalog;
    use kstack_model::globals::Globals;
    use std::os::unix::fs::PermissionsExt as _;

    fn config() -> Config {
        use kstack_config::passwords::{KNOWN_KEYS, Passwords, Secret};
        // Plain values only: RSA key generation would dominate the test time.
        let entries = KNOWN_KEYS
            .iter()
            .flat_map(|(_, keys)| keys.iter())
            .map(|k| ((*k).to_owned(), Secret::Value(format!("{k}-Xq9v"))))
            .collect();
        let passwords = Passwords { entries };
        Config::from_parts(
            Globals::default(),
            passwords,
            Default::default(),
            Catalog::builtin().unwrap(),
        )
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn files_are_written_with_their_modes_and_stale_ones_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = compose::render(&config()).unwrap();
        // Left over from an earlier render of a service that is now disabled.
        let stale = tmp.path().join("config/cinder-api/cinder-api");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("config.json"), "{}").unwrap();
        std::fs::write(tmp.path().join(COMPOSE_FILE), HEADER).unwrap();

        write_bundle(&bundle, tmp.path()).unwrap();
        assert!(!stale.exists(), "a disabled service's files are removed");
        let compose_yaml = std::fs::read_to_string(tmp.path().join(COMPOSE_FILE)).unwrap();
        assert_eq!(compose_yaml, bundle.to_yaml());
        let mut secrets = 0;
        for d in &bundle.config_dirs {
            for f in &d.files {
                let p = tmp.path().join(CONFIG_DIR).join(&d.path).join(&f.name);
                assert_eq!(std::fs::read_to_string(&p).unwrap(), f.content);
                let want = if f.secret { 0o600 } else { 0o644 };
                assert_eq!(mode(&p), want, "{}", p.display());
                secrets += usize::from(f.secret);
            }
        }
        assert!(secrets > 0, "the task files holding passwords are secret");
        assert_eq!(
            mode(
                &tmp.path()
                    .join("config/keystone/tasks/db-create/client.cnf")
            ),
            0o600
        );
        assert_eq!(
            mode(&tmp.path().join("config/keystone/keystone/config.json")),
            0o644
        );
    }

    #[test]
    fn a_mode_the_operator_tightened_is_kept_on_the_next_render() {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = compose::render(&config()).unwrap();
        write_bundle(&bundle, tmp.path()).unwrap();
        let compose_yaml = tmp.path().join(COMPOSE_FILE);
        assert_eq!(mode(&compose_yaml), 0o644);
        std::fs::set_permissions(&compose_yaml, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_bundle(&bundle, tmp.path()).unwrap();
        assert_eq!(mode(&compose_yaml), 0o640, "widened again");
        assert_eq!(
            std::fs::read_to_string(&compose_yaml).unwrap(),
            bundle.to_yaml()
        );
    }

    #[test]
    fn containers_are_done_when_healthy_or_a_task_exited_0() {
        let ps = r#"{"Name":"openstack-keystone-1","Service":"keystone","State":"running","Health":"healthy","ExitCode":0,"Labels":"app.kubernetes.io/component=server,app.kubernetes.io/name=keystone"}
{"Name":"openstack-horizon-1","Service":"horizon","State":"running","Health":"starting","ExitCode":0,"Labels":"app.kubernetes.io/component=server"}
{"Name":"openstack-memcached-1","Service":"memcached","State":"running","Health":"","ExitCode":0,"Labels":"app.kubernetes.io/component=server"}
{"Name":"openstack-nova-api-1","Service":"nova-api","State":"exited","Health":"","ExitCode":1,"Labels":"app.kubernetes.io/component=server"}
{"Name":"openstack-keystone-db-sync-1","Service":"keystone-db-sync","State":"exited","Health":"","ExitCode":0,"Labels":"kstack.io/task=db-sync,app.kubernetes.io/component=bootstrap"}
{"Name":"openstack-glance-api-register-1","Service":"glance-api-register","State":"exited","Health":"","ExitCode":1,"Labels":"app.kubernetes.io/component=bootstrap"}
{"Name":"openstack-glance-api-db-sync-1","Service":"glance-api-db-sync","State":"running","Health":"","ExitCode":0,"Labels":"app.kubernetes.io/component=bootstrap"}
"#;
        let got: Vec<(String, Standing)> = parse_ps(ps)
            .unwrap()
            .iter()
            .map(|c| (c.service.clone(), standing(c)))
            .collect();
        let want = [
            ("keystone", Standing::Done),
            ("horizon", Standing::Waiting("starting".into())),
            ("memcached", Standing::Done),
            // A server that exited restarts (restart: always): waited for, not failed.
            ("nova-api", Standing::Waiting("exited".into())),
            ("keystone-db-sync", Standing::Done),
            (
                "glance-api-register",
                Standing::Failed("exited with code 1".into()),
            ),
            ("glance-api-db-sync", Standing::Waiting("running".into())),
        ];
        assert_eq!(
            got,
            want.into_iter()
                .map(|(s, st)| (s.to_owned(), st))
                .collect::<Vec<_>>()
        );
        // Older Compose prints one array.
        let array = format!("[{}]", ps.trim().lines().collect::<Vec<_>>().join(","));
        assert_eq!(parse_ps(&array).unwrap().len(), 7);
    }

    #[test]
    fn an_unrelated_config_dir_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let mine = tmp.path().join("config/notes.txt");
        std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
        std::fs::write(&mine, "keep").unwrap();
        write_bundle(&compose::render(&config()).unwrap(), tmp.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&mine).unwrap(), "keep");
    }
}
