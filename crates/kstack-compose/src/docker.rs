//! [`DockerCompose`]: the [`Runner`] of a real node, the `docker` command line with Compose v2.
use std::path::Path;
use std::process::{Command, Stdio};

use crate::runner::{Container, Error, Runner};

/// Runs `docker` (and `docker compose`) on this machine, against the engine its environment
/// names (`DOCKER_HOST`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DockerCompose;

/// The command an operator runs to start the project by hand: what the deploy runs (it also
/// removes orphans), shown when it cannot start.
pub fn up_command(file: &Path) -> String {
    format!("docker compose -f {} up -d", file.display())
}

/// Whether `docker <args>` exits 0, its output discarded.
fn succeeds(args: &[&str]) -> bool {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Runner for DockerCompose {
    fn answers(&self) -> bool {
        succeeds(&["info"])
    }

    fn has_image(&self, image: &str) -> bool {
        succeeds(&["image", "inspect", image])
    }

    fn up(&self, file: &Path) -> Result<(), Error> {
        let status = Command::new("docker")
            .args(["compose", "-f"])
            .arg(file)
            .args(["up", "-d", "--remove-orphans"])
            .status()
            .map_err(Error::io("running docker compose"))?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::Exit {
                command: up_command(file),
                status: status.to_string(),
            })
        }
    }

    fn ps(&self, file: &Path) -> Result<Vec<Container>, Error> {
        let out = Command::new("docker")
            .args(["compose", "-f"])
            .arg(file)
            .args(["ps", "-a", "--format", "json"])
            .stdin(Stdio::null())
            .output()
            .map_err(Error::io("running docker compose ps"))?;
        if !out.status.success() {
            return Err(Error::Failed {
                command: "docker compose ps".to_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        parse_ps(&String::from_utf8_lossy(&out.stdout))
    }

    fn logs(&self, container: &str, lines: u32) -> Result<String, Error> {
        let out = Command::new("docker")
            .args(["logs", "--tail", &lines.to_string(), container])
            .stdin(Stdio::null())
            .output()
            .map_err(Error::io("running docker"))?;
        if !out.status.success() {
            return Err(Error::Failed {
                command: format!("docker logs {container}"),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        // `docker logs` writes the container's stdout and stderr to its own.
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(text)
    }

    fn containers(&self, labels: &[(&str, &str)]) -> Result<Vec<String>, Error> {
        let mut args = vec!["ps".to_owned(), "-a".to_owned()];
        for (k, v) in labels {
            args.push("--filter".to_owned());
            args.push(format!("label={k}={v}"));
        }
        args.extend(["--format".to_owned(), "{{.Names}}".to_owned()]);
        let out = Command::new("docker")
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .map_err(Error::io("running docker"))?;
        if !out.status.success() {
            return Err(Error::Failed {
                command: format!("docker {}", args.join(" ")),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect())
    }
}

/// One container as `docker compose ps -a --format json` lists it.
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
    /// `key=value,key=value`.
    #[serde(rename = "Labels", default)]
    labels: String,
}

impl From<PsEntry> for Container {
    fn from(e: PsEntry) -> Container {
        let labels = e
            .labels
            .split(',')
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Container {
            name: e.name,
            service: e.service,
            state: e.state,
            health: e.health,
            exit_code: e.exit_code,
            labels,
        }
    }
}

/// Parses `docker compose ps -a --format json`: one object per line (Compose v2.21 and
/// later) or one array.
fn parse_ps(text: &str) -> Result<Vec<Container>, Error> {
    let trimmed = text.trim();
    let entries: Vec<PsEntry> = if trimmed.starts_with('[') {
        serde_json::from_str(trimmed).map_err(|error| Error::Ps { error })?
    } else {
        trimmed
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .map_err(|error| Error::Ps { error })?
    };
    Ok(entries.into_iter().map(Container::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ps_is_read_as_json_lines_or_one_array() {
        let ps = r#"{"Name":"openstack-keystone-1","Service":"keystone","State":"running","Health":"healthy","ExitCode":0,"Labels":"app.kubernetes.io/component=server,app.kubernetes.io/name=keystone"}
{"Name":"openstack-keystone-db-sync-1","Service":"keystone-db-sync","State":"exited","ExitCode":1,"Labels":"kstack.io/task=db-sync,app.kubernetes.io/component=bootstrap"}
"#;
        let got = parse_ps(ps).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name, "openstack-keystone-1");
        assert_eq!(got[0].health, "healthy");
        assert_eq!(
            got[0]
                .labels
                .get("app.kubernetes.io/name")
                .map(String::as_str),
            Some("keystone")
        );
        assert_eq!(got[1].service, "keystone-db-sync");
        assert_eq!((got[1].state.as_str(), got[1].exit_code), ("exited", 1));
        assert_eq!(got[1].health, "", "no health check: no health");
        assert_eq!(got[1].labels.len(), 2);
        // Older Compose prints one array.
        let array = format!("[{}]", ps.trim().lines().collect::<Vec<_>>().join(","));
        assert_eq!(parse_ps(&array).unwrap(), got);
        assert_eq!(parse_ps("").unwrap(), Vec::new());
        let err = parse_ps("Usage: docker compose ps").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("reading `docker compose ps` output: "),
            "{err}"
        );
    }

    #[test]
    fn the_command_shown_to_the_operator_names_the_file() {
        assert_eq!(
            up_command(Path::new("/srv/cloud/compose.yaml")),
            "docker compose -f /srv/cloud/compose.yaml up -d"
        );
    }
}
