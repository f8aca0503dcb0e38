//! `kstack backup` and `kstack restore`: the cloud's databases to a directory of the operator's
//! machine and back, while the cloud serves.
//!
//! A backup is one directory, `<DIR>/<namespace>-<UTC time>/`, mode 0700: `databases.sql.gz`
//! (a `mariadb-dump` of every service database in one transaction on a ready Galera member,
//! gzip-compressed as it arrives) and `backup.json` (what it holds, from which cloud and when,
//! the dump's size and SHA-256). The dump holds what the databases hold (password hashes and
//! the cells' connection URLs among it): mode 0600, and nothing of it is printed.
//!
//! A restore checks the whole backup first (manifest, checksum, the gzip stream, the dump's last
//! line) and touches nothing when any check fails; then, holding the cloud's deploy lock, it
//! loads the dump on a ready member: each database of the backup is dropped and created again
//! as it was, and Galera carries that to the other members; then memcached is emptied, so no
//! service answers from its cache what the restore replaced. Databases that are not in the
//! backup are left alone. A restore that fails midway leaves some databases restored and others
//! not; running it again starts over and is safe.
//!
//! Exit codes: 0 done, 1 the cluster, MariaDB or IO failed, 2 invalid config or backup, or a
//! restore without --yes, 75 --no-wait and another writer holds the lock.
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use async_compression::tokio::bufread::GzipDecoder;
use async_compression::tokio::write::GzipEncoder;
use kstack_config::Config;
use kstack_kube::backup::{self as db, Server};
use kstack_verify::{Password, Redactor};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use crate::exit::Exit;

pub use kstack_model::backup::{DUMP, DumpFile, FORMAT, MANIFEST, Manifest};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack backup -o /srv/backups        # writes /srv/backups/<namespace>-<UTC time>/\n  kstack backup -o /srv/backups --json # the manifest on stdout\n\nThe services keep serving: the dump is one transaction on a ready MariaDB server, without locks.\nThe backup directory holds the databases' content (password hashes among it): mode 0700,\nits files 0600. `kstack restore DIR --yes` loads it back.\nExit codes: 0 done, 1 the cluster, MariaDB or IO failed, 2 invalid config."
)]
pub struct BackupArgs {
    #[command(flatten)]
    pub target: super::deploy::Target,
    /// The directory to write the backup into (a new directory is made in it for each backup).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Print the manifest (backup.json) on stdout when done.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack restore /srv/backups/openstack-20261128T001500Z          # checks it, says what it would replace\n  kstack restore /srv/backups/openstack-20261128T001500Z --yes    # replaces those databases\n\nThe backup is checked whole (manifest, checksum, compression, the dump's last line) before\nanything is touched. Each database in the backup is dropped and loaded again as it was;\nothers are left alone. Takes the cloud's deploy lock (no deploy runs meanwhile).\nExit codes: 0 done, 1 the cluster, MariaDB or IO failed, 2 invalid config or backup, or no\n--yes, 75 --no-wait and another writer holds the lock."
)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub target: super::deploy::Target,
    /// A backup directory `kstack backup` wrote (the one holding backup.json).
    pub backup: PathBuf,
    /// Replace the databases (without it, the backup is checked and nothing is changed).
    #[arg(long)]
    pub yes: bool,
    /// Fail at once (exit 75) if a deploy or rollback holds the cloud's deploy lock, instead of
    /// waiting for it.
    #[arg(long)]
    pub no_wait: bool,
}

/// Hides passwords.yml's values in what the container says.
struct Hide(Redactor);

impl db::Redact for Hide {
    fn redact(&self, text: &str) -> String {
        self.0.redact(text)
    }
}

fn hide(config: &Config) -> Hide {
    Hide(Redactor::new(
        kstack_render::files::cloud_secret_values(config)
            .into_iter()
            .map(Password::new),
    ))
}

/// The connection facts of `config`'s MariaDB: its port and root's password.
fn mariadb(config: &Config) -> anyhow::Result<Option<(u16, String)>> {
    let port = kstack_render::files::port(&config.catalog, db::SERVICE, "mysql")?;
    Ok(config
        .passwords
        .get("database_password")
        .map(|p| (port, p.to_owned())))
}

pub fn run_backup(args: BackupArgs) -> anyhow::Result<Exit> {
    let dir = &args.target.config.config_dir;
    let Some(config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing done"));
    };
    if config.passwords.get("database_password").is_none() {
        eprintln!("error: passwords.yml has no database_password (MariaDB's root); nothing done");
        return Ok(Exit::BadInput);
    }
    let runtime = runtime()?;
    runtime.block_on(async {
        let client = kstack_kube::client(args.target.kubeconfig.as_deref()).await?;
        let (_, manifest) = take(&client, &config, &args.output).await?;
        if args.json {
            print!("{}", serde_json::to_string_pretty(&manifest)? + "\n");
        }
        Ok(Exit::Success)
    })
}

/// Takes a backup of the cloud of `config` into a new directory in `output` (see the module
/// doc): its path and manifest. Nothing is left in `output` when it fails.
pub(crate) async fn take(
    client: &kstack_kube::Client,
    config: &Config,
    output: &Path,
) -> anyhow::Result<(PathBuf, Manifest)> {
    let Some((port, password)) = mariadb(config)? else {
        anyhow::bail!("passwords.yml has no database_password (MariaDB's root)");
    };
    let namespace = config.globals.kubernetes_namespace.as_str();
    let hide = hide(config);
    let server = Server {
        client: client.clone(),
        namespace,
        port,
        root_password: &password,
        redact: &hide,
    };
    let member = db::ready_member(client, namespace).await?;
    let databases = db::service_databases(&server, &member).await?;
    anyhow::ensure!(
        !databases.is_empty(),
        "MariaDB in {member} holds no service database (has the cloud been deployed?)"
    );
    let now = chrono::Utc::now();
    let name =
        kstack_model::backup::backup_name(namespace, &now.format("%Y%m%dT%H%M%SZ").to_string());
    let target = output.join(&name);
    make_private_dir(output, &target)?;
    eprintln!(
        "backing up {} databases of namespace {namespace} from {member} into {}",
        databases.len(),
        target.display()
    );
    let started = Instant::now();
    let partial = target.join(format!("{DUMP}.partial"));
    let written = async {
        let file = private_file(&partial).await?;
        let mut gz = GzipEncoder::new(tokio::io::BufWriter::new(file));
        db::dump(&server, &member, &databases, &mut gz).await?;
        gz.shutdown().await?;
        let dump = target.join(DUMP);
        std::fs::rename(&partial, &dump)
            .with_context(|| format!("renaming {}", partial.display()))?;
        let (bytes, sha256) = digest(&dump).await?;
        let manifest = Manifest {
            format: FORMAT,
            namespace: namespace.to_owned(),
            openstack_release: config.globals.images.openstack_release.clone(),
            taken_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            seconds: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
            member: member.clone(),
            databases: databases.clone(),
            dump: DumpFile {
                file: DUMP.to_owned(),
                bytes,
                sha256,
            },
        };
        let text = serde_json::to_string_pretty(&manifest)? + "\n";
        kstack_config::fs::replace_file(&target.join(MANIFEST), text.as_bytes(), 0o600)
            .with_context(|| format!("writing {}", target.join(MANIFEST).display()))?;
        anyhow::Ok(manifest)
    };
    let written = tokio::time::timeout(db::TIMEOUT, written)
        .await
        .unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "the dump took longer than {:?}",
                db::TIMEOUT
            ))
        });
    let manifest = match written {
        Ok(m) => m,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&target);
            return Err(e.context(format!("backing up namespace {namespace}; nothing kept")));
        }
    };
    eprintln!(
        "backup {} written: {} databases, {} bytes compressed, {} s",
        target.display(),
        manifest.databases.len(),
        manifest.dump.bytes,
        manifest.seconds
    );
    Ok((target, manifest))
}

pub fn run_restore(args: RestoreArgs) -> anyhow::Result<Exit> {
    let dir = &args.target.config.config_dir;
    let Some(config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing done"));
    };
    let Some((port, password)) = mariadb(&config)? else {
        eprintln!("error: passwords.yml has no database_password (MariaDB's root); nothing done");
        return Ok(Exit::BadInput);
    };
    let runtime = runtime()?;
    runtime.block_on(async {
        let manifest = match check_backup(&args.backup).await {
            Ok(m) => m,
            Err(e) => {
                eprintln!("error: {e:#}; nothing restored");
                return Ok(Exit::BadInput);
            }
        };
        let namespace = config.globals.kubernetes_namespace.as_str();
        let from = if manifest.namespace == namespace {
            String::new()
        } else {
            format!(" (taken from namespace {})", manifest.namespace)
        };
        eprintln!(
            "backup {} is whole: {} databases taken {}{from}, release {}",
            args.backup.display(),
            manifest.databases.len(),
            manifest.taken_at,
            manifest.openstack_release
        );
        if manifest.openstack_release != config.globals.images.openstack_release {
            eprintln!(
                "error: the backup is of release {} and the cloud runs {}: restore it into a cloud of release {} (then upgrade); nothing restored",
                manifest.openstack_release,
                config.globals.images.openstack_release,
                manifest.openstack_release
            );
            return Ok(Exit::BadInput);
        }
        if !args.yes {
            eprintln!(
                "restoring replaces these databases of namespace {namespace} with the backup's: {}\nadd --yes to do it; nothing restored",
                manifest.databases.join(", ")
            );
            return Ok(Exit::BadInput);
        }
        let client = kstack_kube::client(args.target.kubeconfig.as_deref()).await?;
        let identity = kstack_kube::lock::identity("restore");
        let on_wait = |h: &kstack_kube::lock::Holder| {
            eprintln!(
                "waiting for the deploy lock of namespace {namespace}: held by {h} (--no-wait fails at once instead)"
            );
        };
        let lock = match kstack_kube::lock::acquire(
            client.clone(),
            namespace,
            &identity,
            !args.no_wait,
            &on_wait,
        )
        .await
        {
            Ok(l) => l,
            Err(e @ kstack_kube::lock::LockError::Held { .. }) => {
                eprintln!("kstack restore: {e}");
                return Ok(Exit::Locked);
            }
            Err(e) => return Err(e.into()),
        };
        let hide = hide(&config);
        let server = Server {
            client: client.clone(),
            namespace,
            port,
            root_password: &password,
            redact: &hide,
        };
        let started = Instant::now();
        let loaded = async {
            let member = db::ready_member(&client, namespace).await?;
            eprintln!(
                "restoring {} into namespace {namespace} on {member}",
                manifest.databases.join(", ")
            );
            let file = tokio::fs::File::open(args.backup.join(&manifest.dump.file)).await?;
            let mut sql = GzipDecoder::new(BufReader::new(file));
            db::load(&server, &member, &mut sql).await?;
            // What the services cached of the replaced rows goes too.
            let port = kstack_render::files::port(&config.catalog, "memcached", "memcached")?;
            let flushed = db::flush_memcached(&client, namespace, port).await?;
            eprintln!("emptied {flushed} memcached servers (the services' caches)");
            anyhow::Ok(())
        };
        let loaded = tokio::time::timeout(db::TIMEOUT, loaded)
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the restore took longer than {:?}", db::TIMEOUT)));
        lock.release().await;
        loaded.context(
            "restoring; databases loaded before the failure are restored, the others are as they were: run the restore again",
        )?;
        eprintln!(
            "restored {} databases into namespace {namespace} in {:.1} s",
            manifest.databases.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(Exit::Success)
    })
}

/// Before a deploy that upgrades a service (new images over a healthy generation), the
/// databases are backed up into `--backup-dir` (default `backups/` of the config directory),
/// unless `--no-backup` or the cloud has no MariaDB: the backup's directory.
pub(crate) async fn before_upgrade(
    (no_backup, backup_dir): (bool, Option<&Path>),
    target: &super::deploy::Target,
    config: &Config,
    plan: &kstack_engine::Plan,
) -> anyhow::Result<Option<PathBuf>> {
    let upgrading: Vec<&str> = plan
        .modes
        .iter()
        .filter(|(_, m)| matches!(m.mode, kstack_engine::Mode::Upgrade { .. }))
        .map(|(s, _)| s.as_str())
        .collect();
    if upgrading.is_empty() || no_backup || !config.enabled.contains(kstack_kube::backup::SERVICE) {
        return Ok(None);
    }
    let dir = backup_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| target.config.config_dir.join("backups"));
    eprintln!(
        "upgrading {}: backing up the databases first (--no-backup skips it)",
        upgrading.join(", ")
    );
    let client = kstack_kube::client(target.kubeconfig.as_deref()).await?;
    let (path, _) = take(&client, config, &dir).await?;
    Ok(Some(path))
}

/// Reads and checks a backup directory whole: the manifest, the dump's size and checksum, its
/// gzip stream to the end and its last line. The manifest when all hold.
pub async fn check_backup(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (a backup directory is one `kstack backup` made, holding {MANIFEST})",
            path.display()
        )
    })?;
    let manifest: Manifest = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a backup manifest", path.display()))?;
    anyhow::ensure!(
        manifest.format == FORMAT,
        "{}: format {} is not one this kstack reads ({FORMAT})",
        path.display(),
        manifest.format
    );
    anyhow::ensure!(
        !manifest.dump.file.contains('/') && !manifest.dump.file.starts_with('.'),
        "{}: field dump.file must name a file in the backup directory",
        path.display()
    );
    let dump = dir.join(&manifest.dump.file);
    let (bytes, sha256) = digest(&dump).await?;
    anyhow::ensure!(
        bytes == manifest.dump.bytes && sha256 == manifest.dump.sha256,
        "{}: {bytes} bytes with SHA-256 {sha256}, but {MANIFEST} says {} bytes with {}: the file changed or is damaged",
        dump.display(),
        manifest.dump.bytes,
        manifest.dump.sha256
    );
    // The whole gzip stream, and how the dump ends.
    let file = tokio::fs::File::open(&dump).await?;
    let mut sql = GzipDecoder::new(BufReader::new(file));
    let mut sink = tokio::io::sink();
    let mut tail = db::Tail::new(&mut sink);
    tokio::io::copy(&mut sql, &mut tail)
        .await
        .with_context(|| format!("{}: not a whole gzip file", dump.display()))?;
    let ends = tail.ends_with_line_starting(db::DUMP_TRAILER);
    anyhow::ensure!(
        ends,
        "{}: the dump does not end with mariadb-dump's last line: it was cut off",
        dump.display()
    );
    Ok(manifest)
}

/// Size and SHA-256 (hex) of a file.
async fn digest(path: &Path) -> anyhow::Result<(u64, String)> {
    let mut file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    let mut hash = Sha256::new();
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file
            .read(&mut buf)
            .await
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok((bytes, hex::encode(hash.finalize())))
}

/// `parent` (made if missing) and in it the new directory `dir`, mode 0700; an existing `dir`
/// is refused (two backups in one second).
pub(super) fn make_private_dir(parent: &Path, dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// A new file, mode 0600.
pub(super) async fn private_file(path: &Path) -> anyhow::Result<tokio::fs::File> {
    tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await
        .with_context(|| format!("creating {}", path.display()))
}

pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_compression::tokio::write::GzipEncoder;

    async fn write_backup(dir: &Path, sql: &[u8]) -> Manifest {
        let path = dir.join(DUMP);
        let mut gz = GzipEncoder::new(tokio::fs::File::create(&path).await.unwrap());
        gz.write_all(sql).await.unwrap();
        gz.shutdown().await.unwrap();
        let (bytes, sha256) = digest(&path).await.unwrap();
        let manifest = Manifest {
            format: FORMAT,
            namespace: "openstack".into(),
            openstack_release: "2025.1".into(),
            taken_at: "2026-11-28T00:00:00Z".into(),
            seconds: 1.0,
            member: "mariadb-0".into(),
            databases: vec!["keystone".into()],
            dump: DumpFile {
                file: DUMP.into(),
                bytes,
                sha256,
            },
        };
        std::fs::write(
            dir.join(MANIFEST),
            serde_json::to_string_pretty(&manifest).unwrap(),
        )
        .unwrap();
        manifest
    }

    const WHOLE: &[u8] =
        b"-- MariaDB dump\nCREATE DATABASE keystone;\n-- Dump completed on 2026-11-28  0:00:01\n";

    #[tokio::test]
    async fn a_whole_backup_passes_its_checks() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_backup(dir.path(), WHOLE).await;
        assert_eq!(check_backup(dir.path()).await.unwrap(), written);
    }

    #[tokio::test]
    async fn a_cut_off_dump_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_backup(
            dir.path(),
            b"-- MariaDB dump\nCREATE DATABASE keystone;\nINSERT INTO",
        )
        .await;
        let err = format!("{:#}", check_backup(dir.path()).await.unwrap_err());
        assert!(err.contains("cut off"), "{err}");
    }

    #[tokio::test]
    async fn a_changed_dump_is_refused_by_its_checksum() {
        let dir = tempfile::tempdir().unwrap();
        write_backup(dir.path(), WHOLE).await;
        let path = dir.path().join(DUMP);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        let err = format!("{:#}", check_backup(dir.path()).await.unwrap_err());
        assert!(err.contains("changed or is damaged"), "{err}");
    }

    #[tokio::test]
    async fn a_truncated_gzip_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_backup(dir.path(), WHOLE).await;
        // Cut the file and write a manifest that matches the cut file: the checksum holds, the
        // gzip stream does not.
        let path = dir.path().join(DUMP);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
        let (n, sha) = digest(&path).await.unwrap();
        let mut m: Manifest =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(MANIFEST)).unwrap())
                .unwrap();
        m.dump.bytes = n;
        m.dump.sha256 = sha;
        std::fs::write(
            dir.path().join(MANIFEST),
            serde_json::to_string(&m).unwrap(),
        )
        .unwrap();
        assert!(check_backup(dir.path()).await.is_err());
    }

    #[tokio::test]
    async fn a_directory_without_a_manifest_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = format!("{:#}", check_backup(dir.path()).await.unwrap_err());
        assert!(err.contains("backup.json"), "{err}");
    }

    #[tokio::test]
    async fn a_manifest_pointing_outside_the_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_backup(dir.path(), WHOLE).await;
        let mut m: Manifest =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(MANIFEST)).unwrap())
                .unwrap();
        m.dump.file = "../../etc/passwd".into();
        std::fs::write(
            dir.path().join(MANIFEST),
            serde_json::to_string(&m).unwrap(),
        )
        .unwrap();
        let err = format!("{:#}", check_backup(dir.path()).await.unwrap_err());
        assert!(err.contains("dump.file"), "{err}");
    }
}
