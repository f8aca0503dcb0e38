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

use anyhow::Context as _;
use kstack_compose::{DockerCompose, Event, Outcome};
use kstack_config::Config;
use kstack_render::compose::{self, COMPOSE_FILE, ComposeBundle};
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
            kstack_compose::write_bundle(&bundle, Path::new(dir))?;
            eprintln!(
                "wrote {} and {} config directories to {dir}",
                COMPOSE_FILE,
                bundle.config_dirs.len()
            );
        }
    }
    Ok(Exit::Success)
}

/// `kstack deploy --target compose`: writes the files, then [`kstack_compose::deploy`] runs
/// `docker compose up -d` and waits until every long-running container is healthy (running,
/// for one without a health check) and every one-shot task has exited 0, for at most
/// `timeout` seconds (default `kstack_timeouts.default`).
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
    kstack_compose::write_bundle(&bundle, &dir)?;
    let file = dir.join(COMPOSE_FILE);
    eprintln!("wrote {}", file.display());
    let up = kstack_compose::up_command(&file);
    // A service may log a password; the report shows none.
    let redactor = redactor(&config);
    let options = kstack_compose::Options::new(std::time::Duration::from_secs(timeout));
    let outcome = kstack_compose::deploy(
        &DockerCompose,
        &bundle,
        &file,
        &options,
        &|text| redactor.redact(text),
        &mut |event| match event {
            Event::Starting => eprintln!("running: {up}"),
            Event::Done { service, at } => {
                eprintln!("[{:7.1}s] done  {service}", at.as_secs_f64());
            }
        },
    )?;
    Ok(match outcome {
        Outcome::Healthy { took } => {
            eprintln!(
                "deployed on this node: every container healthy in {:.1}s",
                took.as_secs_f64()
            );
            Exit::Success
        }
        Outcome::NoEngine => {
            eprintln!(
                "error: no Docker engine answered `docker info`; nothing was started.\n\
                 Start Docker (e.g. `systemctl start docker`; on a kstack checkout, `bash hack/docker.sh up` \
                 and then `eval \"$(bash hack/docker.sh env)\"`), then run:\n  {up}"
            );
            Exit::StepFailed
        }
        Outcome::MissingImages(missing) => {
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
            Exit::StepFailed
        }
        Outcome::UpFailed { status } => {
            eprintln!("error: `{up}` failed ({status})");
            Exit::Failed
        }
        Outcome::Unhealthy(report) => {
            eprintln!("{report}");
            Exit::StepFailed
        }
    })
}

/// Hides every value of passwords.yml (and the Ceph key) in what the containers log.
pub(super) fn redactor(config: &Config) -> Redactor {
    Redactor::new(
        kstack_render::files::cloud_secret_values(config)
            .into_iter()
            .map(Password::new),
    )
}

/// Renders; a config the Compose target cannot render (a template error, a name clash, a task
/// naming no container, an empty password a task needs) is bad input (exit 2), as in every
/// command.
fn render(config: &Config) -> anyhow::Result<ComposeBundle> {
    compose::render(config).map_err(|e| super::InputError(e.to_string()).into())
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}
