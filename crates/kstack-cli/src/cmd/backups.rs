//! `kstack backup-list` and `kstack backup-fetch`: the scheduled backups
//! (`kstack_backup_schedule`) that the cluster keeps on its backup volume.
//!
//! Both read the volume through a short-lived pod that mounts it read-only
//! ([`kstack_kube::backup::volume::Reader`]), deleted when they end. `backup-fetch` copies one
//! backup into a directory of the operator's machine (mode 0700, files 0600) and checks it
//! whole there, as `kstack restore` will; a copy that fails its checks is deleted. The copy is
//! what `kstack restore` takes.
//!
//! Exit codes: 0 done, 1 the cluster or IO failed (no backup volume, no such backup, a damaged
//! copy), 2 invalid config or backup name.
use std::path::PathBuf;

use anyhow::Context as _;
use kstack_kube::backup::volume::{Listed, Reader, Schedule};
use kstack_model::backup::{DUMP, MANIFEST, Manifest, is_backup_name};
use serde::Serialize;
use tokio::io::AsyncWriteExt as _;

use crate::exit::Exit;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack backup-list\n  kstack backup-list --json\n\nThe backups the cluster took on its schedule (kstack_backup_schedule), oldest first, and the\nschedule's last runs. A backup without its manifest is listed as damaged.\nExit codes: 0 done, 1 the cluster failed or the cloud has no backup volume, 2 invalid config."
)]
pub struct ListArgs {
    #[command(flatten)]
    pub target: super::deploy::Target,
    /// Print the schedule and the backups as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack backup-fetch openstack-20261128T023000Z -o /srv/backups\n  kstack restore /srv/backups/openstack-20261128T023000Z --yes\n\nCopies one scheduled backup (a name of `kstack backup-list`) into DIR/<name>/ (mode 0700,\nits files 0600) and checks it whole there (checksum, compression, the dump's last line).\nExit codes: 0 done, 1 the cluster or IO failed, or the copy is damaged (then nothing is kept),\n2 invalid config or name."
)]
pub struct FetchArgs {
    #[command(flatten)]
    pub target: super::deploy::Target,
    /// The backup's name (`kstack backup-list` shows them).
    pub name: String,
    /// The directory to copy it into (DIR/<name>/ is made).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
}

/// `kstack backup-list --json`.
#[derive(Debug, Serialize)]
struct Listing {
    /// `None`: scheduled backups are off (the volume stays).
    schedule: Option<Schedule>,
    backups: Vec<Entry>,
}

#[derive(Debug, Serialize)]
struct Entry {
    name: String,
    /// `None`: the directory has no readable manifest.
    manifest: Option<Manifest>,
}

pub fn run_list(args: ListArgs) -> anyhow::Result<Exit> {
    let dir = &args.target.config.config_dir;
    let Some(config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing done"));
    };
    let runtime = super::backup::runtime()?;
    runtime.block_on(async {
        let client = kstack_kube::client(args.target.kubeconfig.as_deref()).await?;
        let namespace = config.globals.kubernetes_namespace.as_str();
        let schedule = kstack_kube::backup::volume::schedule(&client, namespace).await?;
        let reader = Reader::start(&client, namespace, &image(&config)?).await?;
        let listed = reader.list().await;
        reader.stop().await;
        let listing = Listing {
            schedule,
            backups: listed?.into_iter().map(entry).collect(),
        };
        if args.json {
            println!("{}", serde_json::to_string_pretty(&listing)?);
        } else {
            print!("{}", table(&listing));
        }
        Ok(Exit::Success)
    })
}

fn entry(l: Listed) -> Entry {
    Entry {
        manifest: l
            .manifest
            .and_then(|m| serde_json::from_str::<Manifest>(&m).ok()),
        name: l.name,
    }
}

fn table(l: &Listing) -> String {
    let mut out = match &l.schedule {
        Some(s) => format!(
            "schedule: {} (last run {}, last successful {})\n",
            s.schedule,
            s.last_schedule.as_deref().unwrap_or("never"),
            s.last_successful.as_deref().unwrap_or("never")
        ),
        None => "schedule: none (kstack_backup_schedule is not set; the volume stays)\n".into(),
    };
    if l.backups.is_empty() {
        out.push_str("no backups on the volume yet\n");
        return out;
    }
    out.push_str(&format!(
        "{:<40} {:<22} {:<9} {:>9} {:>12}\n",
        "NAME", "TAKEN (UTC)", "RELEASE", "DATABASES", "BYTES"
    ));
    for e in &l.backups {
        match &e.manifest {
            Some(m) => out.push_str(&format!(
                "{:<40} {:<22} {:<9} {:>9} {:>12}\n",
                e.name,
                m.taken_at,
                m.openstack_release,
                m.databases.len(),
                m.dump.bytes
            )),
            None => out.push_str(&format!("{:<40} damaged: no readable {MANIFEST}\n", e.name)),
        }
    }
    out
}

/// The MariaDB server's image: its `mysql` user owns the backups.
fn image(config: &kstack_config::Config) -> anyhow::Result<String> {
    kstack_render::kubernetes::backup::server_image(config)
        .context("the catalog has no mariadb service with a container")
}

pub fn run_fetch(args: FetchArgs) -> anyhow::Result<Exit> {
    let dir = &args.target.config.config_dir;
    if !is_backup_name(&args.name) {
        eprintln!(
            "error: `{}` is not a backup's name (`kstack backup-list` shows them); nothing done",
            args.name
        );
        return Ok(Exit::BadInput);
    }
    let Some(config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing done"));
    };
    let target = args.output.join(&args.name);
    let runtime = super::backup::runtime()?;
    runtime.block_on(async {
        let client = kstack_kube::client(args.target.kubeconfig.as_deref()).await?;
        let namespace = config.globals.kubernetes_namespace.as_str();
        let reader = Reader::start(&client, namespace, &image(&config)?).await?;
        let fetched = async {
            let listed = reader.list().await?;
            anyhow::ensure!(
                listed.iter().any(|l| l.name == args.name),
                "no backup {} on the backup volume of namespace {namespace} (`kstack backup-list` shows them)",
                args.name
            );
            super::backup::make_private_dir(&args.output, &target)?;
            let copied = async {
                for file in [MANIFEST, DUMP] {
                    let mut out = super::backup::private_file(&target.join(file)).await?;
                    reader.copy(&args.name, file, &mut out).await?;
                    out.flush().await?;
                    out.sync_all().await?;
                }
                super::backup::check_backup(&target).await
            }
            .await;
            if copied.is_err() {
                let _ = std::fs::remove_dir_all(&target);
            }
            copied
        }
        .await;
        reader.stop().await;
        let manifest = fetched.with_context(|| format!("fetching backup {}; nothing kept", args.name))?;
        eprintln!(
            "backup {} copied into {} and checked: {} databases, {} bytes compressed, taken {}",
            args.name,
            target.display(),
            manifest.databases.len(),
            manifest.dump.bytes,
            manifest.taken_at
        );
        println!("{}", target.display());
        Ok(Exit::Success)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstack_model::backup::DumpFile;

    fn manifest(bytes: u64) -> Manifest {
        Manifest {
            format: 1,
            namespace: "openstack".into(),
            openstack_release: "2025.1".into(),
            taken_at: "2026-11-28T02:30:00Z".into(),
            seconds: 2.1,
            member: "mariadb-0".into(),
            databases: vec!["keystone".into(), "nova".into()],
            dump: DumpFile {
                file: DUMP.into(),
                bytes,
                sha256: "00".into(),
            },
        }
    }

    #[test]
    fn the_table_shows_each_backup_and_a_damaged_one() {
        let text = table(&Listing {
            schedule: Some(Schedule {
                schedule: "30 2 * * *".into(),
                last_schedule: Some("2026-11-28T02:30:00Z".into()),
                last_successful: None,
            }),
            backups: vec![
                entry(Listed {
                    name: "openstack-20261128T023000Z".into(),
                    manifest: Some(serde_json::to_string(&manifest(113_040)).unwrap()),
                }),
                entry(Listed {
                    name: "openstack-20261129T023000Z".into(),
                    manifest: None,
                }),
            ],
        });
        assert!(
            text.starts_with(
                "schedule: 30 2 * * * (last run 2026-11-28T02:30:00Z, last successful never)\n"
            ),
            "{text}"
        );
        let rows: Vec<&str> = text.lines().skip(2).collect();
        assert!(
            rows[0].starts_with("openstack-20261128T023000Z")
                && rows[0].contains("2026-11-28T02:30:00Z")
                && rows[0].ends_with("113040"),
            "{text}"
        );
        assert!(
            rows[1].contains("damaged: no readable backup.json"),
            "{text}"
        );
    }

    #[test]
    fn no_schedule_says_so() {
        let text = table(&Listing {
            schedule: None,
            backups: vec![],
        });
        assert!(
            text.contains("kstack_backup_schedule is not set")
                && text.contains("no backups on the volume yet"),
            "{text}"
        );
    }
    /// The plain env the renderer gives the backup CronJob's container, for a cloud with a
    /// schedule keeping `keep`.
    fn rendered_env(keep: u32) -> Vec<(String, String)> {
        let vars =
            serde_json::json!({"kstack_backup_schedule": "@daily", "kstack_backup_keep": keep});
        let globals = kstack_model::globals::Globals::from_vars(
            &vars.as_object().unwrap().clone().into_iter().collect(),
        )
        .unwrap();
        let config = kstack_config::Config::from_parts(
            globals,
            kstack_config::testing::passwords(1),
            Default::default(),
            kstack_model::catalog::Catalog::builtin().unwrap(),
        );
        let r = kstack_render::kubernetes::render(&config).unwrap();
        let cron = r
            .objects
            .iter()
            .find_map(|o| match o {
                kstack_render::Object::CronJob(c) => {
                    (o.name() == kstack_model::backup::CRONJOB).then_some(c)
                }
                _ => None,
            })
            .unwrap();
        let pod = cron
            .spec
            .job_template
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .clone()
            .unwrap();
        pod.containers[0]
            .env
            .iter()
            .flatten()
            .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
            .collect()
    }

    /// Stand-ins for MariaDB's clients: `mariadb` answers the server's name and the databases,
    /// `mariadb-dump` writes a dump (cut off before its last line when `CUT` is set); both
    /// note their arguments and whether they got the password in their env.
    fn stubs(dir: &std::path::Path) {
        use std::os::unix::fs::PermissionsExt as _;
        let write = |name: &str, body: &str| {
            let p = dir.join(name);
            std::fs::write(&p, format!("#!/bin/bash\n{body}")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        write(
            "mariadb",
            r#"echo "mariadb $* pwd=${MYSQL_PWD:+set}" >> "$CALLS"
case "$*" in
*'SELECT @@hostname'*) echo mariadb-1 ;;
*'SHOW DATABASES'*) printf '%s\n' information_schema keystone mysql nova nova_api performance_schema sys ;;
*) exit 1 ;;
esac"#,
        );
        write(
            "mariadb-dump",
            r#"echo "mariadb-dump $* pwd=${MYSQL_PWD:+set}" >> "$CALLS"
echo "CREATE DATABASE keystone;"
echo "INSERT INTO project VALUES ('x');"
[ -n "${CUT:-}" ] && exit 0
echo "-- Dump completed on 2026-11-28  2:30:00""#,
        );
    }

    fn run_script(
        backups: &std::path::Path,
        bin: &std::path::Path,
        keep: u32,
        cut: bool,
    ) -> std::process::Output {
        let script = backups.parent().unwrap().join("mariadb-backup.sh");
        std::fs::write(&script, kstack_render::kubernetes::backup::SCRIPT).unwrap();
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(&script)
            .envs(rendered_env(keep))
            .env("KSTACK_BACKUP_DIR", backups)
            .env("MYSQL_PWD", "backup-secret")
            .env("CALLS", backups.parent().unwrap().join("calls"))
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            );
        if cut {
            cmd.env("CUT", "1");
        }
        cmd.output().unwrap()
    }

    #[tokio::test]
    async fn the_scheduled_backup_writes_what_restore_checks_and_keeps_the_newest() {
        let tmp = tempfile::tempdir().unwrap();
        let (bin, backups) = (tmp.path().join("bin"), tmp.path().join("backups"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&backups).unwrap();
        stubs(&bin);
        // Three older backups of this cloud, one of another namespace, a partial one left by
        // a killed run.
        for old in [
            "openstack-20261101T023000Z",
            "openstack-20261102T023000Z",
            "openstack-20261103T023000Z",
            "other-20261101T023000Z",
            ".partial-openstack-20261104T023000Z",
        ] {
            std::fs::create_dir_all(backups.join(old)).unwrap();
        }
        let out = run_script(&backups, &bin, 2, false);
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        let mut left: Vec<String> = std::fs::read_dir(&backups)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left.len(), 3, "{left:?}\n{said}");
        assert_eq!(
            left[0], "openstack-20261103T023000Z",
            "the newest older one stays: {left:?}"
        );
        assert_eq!(
            left[2], "other-20261101T023000Z",
            "another cloud's backups are not counted"
        );
        let new = backups.join(&left[1]);
        assert!(left[1].starts_with("openstack-2"), "{left:?}");
        // What `kstack restore` checks, it accepts.
        let manifest = super::super::backup::check_backup(&new).await.unwrap();
        assert_eq!(manifest.databases, ["keystone", "nova", "nova_api"]);
        assert_eq!(manifest.member, "mariadb-1");
        assert_eq!(manifest.namespace, "openstack");
        assert_eq!(manifest.openstack_release, "2025.1");
        assert_eq!(manifest.format, kstack_model::backup::FORMAT);
        assert_eq!(
            format!("openstack-{}", &left[1]["openstack-".len()..]),
            left[1]
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&new), 0o700);
        assert_eq!(mode(&new.join(DUMP)), 0o600);
        assert_eq!(mode(&new.join(MANIFEST)), 0o600);
        // The clients got the password in their env, never on their command line; the dump
        // came from the server the Service named, by its own name, with the shared options.
        let calls = std::fs::read_to_string(tmp.path().join("calls")).unwrap();
        assert!(!calls.contains("backup-secret"), "{calls}");
        assert!(calls.lines().all(|l| l.ends_with("pwd=set")), "{calls}");
        // Every client logged in as the backup's own user, never as root.
        assert!(
            calls
                .lines()
                .all(|l| l.contains(&format!("--user={}", kstack_model::backup::USER))),
            "{calls}"
        );
        let dump = calls
            .lines()
            .find(|l| l.starts_with("mariadb-dump"))
            .unwrap();
        assert!(dump.contains("--host=mariadb-1.mariadb-peers"), "{dump}");
        assert!(
            dump.contains(&kstack_model::backup::DUMP_OPTIONS.join(" ")),
            "{dump}"
        );
        assert!(
            dump.contains("--databases keystone nova nova_api "),
            "{dump}"
        );
        assert!(
            said.contains("removed openstack-20261101T023000Z")
                && said.contains("removed openstack-20261102T023000Z"),
            "{said}"
        );
    }

    #[test]
    fn a_cut_off_dump_leaves_nothing_and_removes_no_older_backup() {
        let tmp = tempfile::tempdir().unwrap();
        let (bin, backups) = (tmp.path().join("bin"), tmp.path().join("backups"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(backups.join("openstack-20261101T023000Z")).unwrap();
        stubs(&bin);
        let out = run_script(&backups, &bin, 1, true);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            said.contains("the dump ended before its last line (cut off); nothing was kept"),
            "{said}"
        );
        let left: Vec<String> = std::fs::read_dir(&backups)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["openstack-20261101T023000Z"]);
    }
}
