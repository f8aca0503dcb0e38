//! The cloud's databases out of and back into a running MariaDB server, through the pod's
//! `exec` subresource (what `kubectl exec` uses): `mariadb-dump` of the service databases in
//! one transaction on a ready Galera member, streamed to the caller while the cloud serves, and
//! the `mariadb` client fed the dump back.
//!
//! The root password reaches the container on the command's standard input, read into
//! `MYSQL_PWD` by the shell that then runs the client: never on a command line, in an object,
//! or in a log. Whatever the container writes on its standard error is passed through
//! [`Redact`] before it is shown.
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kstack_model::labels::{COMPONENT_LABEL, NAME_LABEL, SERVER};
use kube::Client;
use kube::api::{Api, AttachParams, ListParams};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

pub use kstack_model::backup::{DUMP_TRAILER, SERVICE, SYSTEM_DATABASES};

pub mod volume;

/// The MariaDB container (the catalog's name).
const CONTAINER: &str = "mariadb";

/// Errors of a backup or a restore.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
    #[error(
        "no ready MariaDB server in namespace {0} (pods {SERVICE}-N with a Ready container): is the cloud deployed and up? `kstack status` shows it"
    )]
    NoServer(String),
    #[error(
        "namespace {0} has no backup volume (claim {claim}): scheduled backups are off; set `kstack_backup_schedule` in globals.yml and deploy",
        claim = kstack_model::backup::CLAIM
    )]
    NoVolume(String),
    #[error("{what} in pod {pod} failed: {detail}")]
    Command {
        what: &'static str,
        pod: String,
        detail: String,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Hides what must not be shown (the passwords) in text from the container.
pub trait Redact: Sync {
    fn redact(&self, text: &str) -> String;
}

/// Where the commands run and how they log in.
pub struct Server<'a> {
    pub client: Client,
    pub namespace: &'a str,
    /// MariaDB's port (the catalog's `mysql` port of `mariadb`).
    pub port: u16,
    /// `database_password` of passwords.yml (root's).
    pub root_password: &'a str,
    pub redact: &'a dyn Redact,
}

/// A ready member of the Galera cluster: the one with the highest ordinal (`mariadb-2` before
/// `mariadb-0`), so on a replicated cloud a backup's reads go where fewer clients are.
pub async fn ready_member(client: &Client, namespace: &str) -> Result<String, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{NAME_LABEL}={SERVICE},{COMPONENT_LABEL}={SERVER}");
    let list = pods.list(&ListParams::default().labels(&selector)).await?;
    let mut ready: Vec<(u32, String)> = list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.name == CONTAINER && c.ready))
        })
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            let ordinal = name.rsplit('-').next()?.parse().ok()?;
            Some((ordinal, name))
        })
        .collect();
    ready.sort();
    ready
        .pop()
        .map(|(_, name)| name)
        .ok_or_else(|| Error::NoServer(namespace.to_owned()))
}

/// The names of the databases on `pod` other than [`SYSTEM_DATABASES`], sorted.
pub async fn service_databases(server: &Server<'_>, pod: &str) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    let script = format!(
        "exec mariadb --user=root --host=127.0.0.1 --port={} --batch --skip-column-names --execute='SHOW DATABASES'",
        server.port
    );
    run(
        server,
        pod,
        "listing the databases",
        &script,
        None,
        &mut out,
    )
    .await?;
    let mut names: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !SYSTEM_DATABASES.contains(l))
        .map(str::to_owned)
        .collect();
    names.sort();
    Ok(names)
}

/// `mariadb-dump` of `databases` on `pod` with [`kstack_model::backup::DUMP_OPTIONS`] (one
/// transaction over all of them, no locks), written to `out` as it comes. Fails when the dump
/// does not end with [`DUMP_TRAILER`].
pub async fn dump(
    server: &Server<'_>,
    pod: &str,
    databases: &[String],
    out: &mut (dyn AsyncWrite + Unpin + Send),
) -> Result<(), Error> {
    let names: Vec<String> = databases.iter().map(|d| shell_word(d)).collect();
    let script = format!(
        "exec mariadb-dump --user=root --host=127.0.0.1 --port={} {} --databases {}",
        server.port,
        kstack_model::backup::DUMP_OPTIONS.join(" "),
        names.join(" ")
    );
    let mut tail = Tail::new(out);
    run(server, pod, "mariadb-dump", &script, None, &mut tail).await?;
    if !tail.ends_with_line_starting(DUMP_TRAILER) {
        return Err(Error::Command {
            what: "mariadb-dump",
            pod: pod.to_owned(),
            detail: "the dump ended before its last line (cut off); nothing was kept".into(),
        });
    }
    Ok(())
}

/// Feeds `sql` (a dump of [`dump`]) to the `mariadb` client on `pod`, stopping at the first
/// error.
pub async fn load(
    server: &Server<'_>,
    pod: &str,
    sql: &mut (dyn AsyncRead + Unpin + Send),
) -> Result<(), Error> {
    let script = format!(
        "exec mariadb --user=root --host=127.0.0.1 --port={} --default-character-set=utf8mb4 --batch",
        server.port
    );
    let mut sink = tokio::io::sink();
    run(
        server,
        pod,
        "loading the dump",
        &script,
        Some(sql),
        &mut sink,
    )
    .await
}

/// Empties every ready memcached server of `namespace` (`flush_all` on `port`), so that no
/// service answers from its cache what a restore just replaced (Keystone caches projects,
/// users, roles and tokens' validations there). The number of servers emptied.
pub async fn flush_memcached(client: &Client, namespace: &str, port: u16) -> Result<usize, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{NAME_LABEL}=memcached,{COMPONENT_LABEL}={SERVER}");
    let mut flushed = 0;
    for p in pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let status = p.status.as_ref();
        let ready = status
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.name == "memcached" && c.ready));
        let (Some(name), Some(ip), true) = (
            p.metadata.name.clone(),
            status.and_then(|s| s.pod_ip.clone()),
            ready,
        ) else {
            continue;
        };
        let script = format!(
            "exec 3<>/dev/tcp/{ip}/{port} && printf 'flush_all\\r\\nquit\\r\\n' >&3 && IFS= read -r answer <&3 && printf '%s' \"$answer\""
        );
        let params = AttachParams::default()
            .container("memcached")
            .stdin(false)
            .stdout(true)
            .stderr(true);
        let mut process = pods
            .exec(&name, ["bash".to_owned(), "-c".to_owned(), script], &params)
            .await?;
        let mut stdout = process.stdout().expect("stdout was asked for");
        let mut answer = String::new();
        stdout.read_to_string(&mut answer).await?;
        let _ = tokio::time::timeout(Duration::from_secs(5), process.join()).await;
        if answer.trim() != "OK" {
            return Err(Error::Command {
                what: "emptying memcached",
                pod: name,
                detail: format!("flush_all answered {:?}, not OK", answer.trim()),
            });
        }
        flushed += 1;
    }
    Ok(flushed)
}

/// Runs `script` with bash in the MariaDB container of `pod`, the root password in `MYSQL_PWD`
/// (from the first line of its standard input), then `input` on its standard input; its
/// standard output goes to `out`. Fails with its standard error (redacted) when it does not
/// exit 0.
async fn run(
    server: &Server<'_>,
    pod: &str,
    what: &'static str,
    script: &str,
    input: Option<&mut (dyn AsyncRead + Unpin + Send)>,
    out: &mut (dyn AsyncWrite + Unpin + Send),
) -> Result<(), Error> {
    if server.root_password.contains('\n') {
        return Err(Error::Command {
            what,
            pod: pod.to_owned(),
            detail:
                "database_password of passwords.yml spans lines; MariaDB's clients cannot take it"
                    .into(),
        });
    }
    let command = vec![
        "bash".to_owned(),
        "-c".to_owned(),
        format!("IFS= read -r MYSQL_PWD || exit 111; export MYSQL_PWD; {script}"),
    ];
    let password = format!("{}\n", server.root_password);
    let pods: Api<Pod> = Api::namespaced(server.client.clone(), server.namespace);
    let target = Exec {
        pods: &pods,
        pod,
        container: CONTAINER,
        what,
        redact: server.redact,
    };
    target
        .run(command, Some(password.as_bytes()), input, out)
        .await
}

/// A command to run in a container through the `exec` subresource.
pub(crate) struct Exec<'a> {
    pub pods: &'a Api<Pod>,
    pub pod: &'a str,
    pub container: &'a str,
    /// What the command does, for errors.
    pub what: &'static str,
    pub redact: &'a dyn Redact,
}

impl Exec<'_> {
    /// Runs `command`, feeding it `first` then `input` on its standard input; its standard
    /// output goes to `out`. Fails with its standard error (redacted) when it does not exit 0.
    pub async fn run(
        &self,
        command: Vec<String>,
        first: Option<&[u8]>,
        input: Option<&mut (dyn AsyncRead + Unpin + Send)>,
        out: &mut (dyn AsyncWrite + Unpin + Send),
    ) -> Result<(), Error> {
        let (what, pod) = (self.what, self.pod);
        let params = AttachParams::default()
            .container(self.container)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .max_stdin_buf_size(64 * 1024)
            .max_stdout_buf_size(64 * 1024);
        let mut process = self.pods.exec(pod, command, &params).await?;
        let mut stdin = process.stdin().expect("stdin was asked for");
        let mut stdout = process.stdout().expect("stdout was asked for");
        let mut stderr = process.stderr().expect("stderr was asked for");
        let status = process.take_status().expect("the status is taken once");
        let feed = async move {
            if let Some(first) = first {
                stdin.write_all(first).await?;
            }
            if let Some(input) = input {
                tokio::io::copy(input, &mut stdin).await?;
            }
            stdin.shutdown().await
        };
        let drain = async {
            let written = async {
                tokio::io::copy(&mut stdout, &mut *out).await?;
                out.flush().await
            }
            .await;
            // Output that cannot be written (a full disk) is still read to its end, so the command
            // finishes and says how it ended instead of waiting for a reader.
            if written.is_err() {
                let _ = tokio::io::copy(&mut stdout, &mut tokio::io::sink()).await;
            }
            written
        };
        let errors = async {
            // Enough of what the command says for an error message.
            let mut text = Vec::new();
            (&mut stderr).take(16 * 1024).read_to_end(&mut text).await?;
            tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await?;
            Ok::<_, std::io::Error>(text)
        };
        let (fed, drained, errors) = tokio::join!(feed, drain, errors);
        let status = status.await;
        let errors = String::from_utf8_lossy(&errors.unwrap_or_default())
            .trim()
            .to_owned();
        let fail = |detail: String| Error::Command {
            what,
            pod: pod.to_owned(),
            detail: self.redact.redact(&detail),
        };
        match status {
            Some(s) if s.status.as_deref() == Some("Success") => {}
            // What the command said is the reason; the status only says that it failed.
            Some(s) => {
                return Err(fail(if errors.is_empty() {
                    s.message
                        .unwrap_or_else(|| "it exited with an error".into())
                } else {
                    errors
                }));
            }
            None => {
                return Err(fail(format!(
                    "the connection closed without an exit status: {errors}"
                )));
            }
        }
        fed.map_err(|e| fail(format!("sending its input: {e}")))?;
        drained.map_err(|e| fail(format!("writing its output: {e}")))?;
        // The exit status came: the connection's task ends right after it.
        let _ = tokio::time::timeout(Duration::from_secs(5), process.join()).await;
        Ok(())
    }
}

/// How long a backup or restore may take before it is given up (a dump of a cloud's databases
/// takes seconds; a large one minutes).
pub const TIMEOUT: Duration = Duration::from_secs(3600);

/// A word the shell takes as it is.
fn shell_word(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Passes everything through to `inner` and keeps the last bytes written, to check how the
/// stream ended (a dump as it arrives, and one read back before a restore).
pub struct Tail<'a> {
    inner: &'a mut (dyn AsyncWrite + Unpin + Send),
    last: Vec<u8>,
}

impl<'a> Tail<'a> {
    const KEEP: usize = 512;

    pub fn new(inner: &'a mut (dyn AsyncWrite + Unpin + Send)) -> Self {
        Tail {
            inner,
            last: Vec::new(),
        }
    }

    /// Whether the last non-empty line starts with `prefix`.
    pub fn ends_with_line_starting(&self, prefix: &str) -> bool {
        String::from_utf8_lossy(&self.last)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.starts_with(prefix))
    }
}

impl AsyncWrite for Tail<'_> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let polled = std::pin::Pin::new(&mut *this.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = polled {
            this.last.extend_from_slice(&buf[..n]);
            if this.last.len() > Self::KEEP {
                let cut = this.last.len() - Self::KEEP;
                this.last.drain(..cut);
            }
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dump_is_whole_only_when_its_last_line_says_so() {
        let mut sink = tokio::io::sink();
        let mut tail = Tail::new(&mut sink);
        tail.write_all(b"-- MariaDB dump\nCREATE TABLE t (a int);\n")
            .await
            .unwrap();
        assert!(!tail.ends_with_line_starting(DUMP_TRAILER));
        let long = vec![b'x'; 2000];
        tail.write_all(&long).await.unwrap();
        tail.write_all(b"\n-- Dump completed on 2026-11-28  0:01:02\n\n")
            .await
            .unwrap();
        assert!(tail.ends_with_line_starting(DUMP_TRAILER));
        assert!(tail.last.len() <= Tail::KEEP);
    }

    #[test]
    fn database_names_are_quoted_for_the_shell() {
        assert_eq!(shell_word("nova_api"), "'nova_api'");
        assert_eq!(shell_word("a'b"), r"'a'\''b'");
    }
}
