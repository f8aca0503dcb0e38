//! What a backup of the cloud's databases is, in one place: the layout and manifest that
//! `kstack backup` writes on the operator's machine and the scheduled backup (the
//! `mariadb-backup` CronJob) writes on its volume, the dump's options, and what `kstack restore`
//! reads back.
//!
//! A backup is a directory `<namespace>-<UTC time, %Y%m%dT%H%M%SZ>` holding [`DUMP`] (the gzip
//! of one `mariadb-dump` of every service database) and [`MANIFEST`] ([`Manifest`] as JSON).
use serde::{Deserialize, Serialize};

/// The MariaDB service the backups are of (the catalog's name).
pub const SERVICE: &str = "mariadb";

/// The file that says what a backup holds.
pub const MANIFEST: &str = "backup.json";
/// The dump of a backup.
pub const DUMP: &str = "databases.sql.gz";
/// The manifest's format; a restore refuses others.
pub const FORMAT: u32 = 1;

/// MariaDB's own databases: a backup leaves them out. The service databases' users and grants
/// are made by every deploy from passwords.yml (the services' `db-create` Jobs), so a restore
/// into another cloud keeps that cloud's accounts.
pub const SYSTEM_DATABASES: [&str; 4] =
    ["information_schema", "mysql", "performance_schema", "sys"];

/// `mariadb-dump`'s options, besides the connection and the databases: one transaction
/// (`--single-transaction`, InnoDB's consistent snapshot, no lock held against the services)
/// over all the databases, so they agree with each other as of one moment; each database
/// dropped and created again when the dump is loaded; no `LOCK TABLES` in it (Galera does not
/// replicate explicit locks).
pub const DUMP_OPTIONS: &[&str] = &[
    "--single-transaction",
    "--quick",
    "--routines",
    "--triggers",
    "--hex-blob",
    "--skip-add-locks",
    "--default-character-set=utf8mb4",
    "--add-drop-database",
];

/// The last line `mariadb-dump` writes when it dumped everything; a dump without it was cut off.
pub const DUMP_TRAILER: &str = "-- Dump completed";

/// The MariaDB user the scheduled backup dumps as (kolla-ansible's `mariadb_backup_database_user`),
/// with its password in passwords.yml under [`PASSWORD`]. Every MariaDB server makes it at its
/// start (kstack's init file, `mariadb-monitor.sql`) with read privileges only (`SELECT`,
/// `SHOW VIEW`, `TRIGGER`, `EVENT`): what `mariadb-dump` with [`DUMP_OPTIONS`] needs.
pub const USER: &str = "backup";
/// The passwords.yml key of [`USER`]'s password.
pub const PASSWORD: &str = "mariadb_backup_database_password";

/// The scheduled backup's objects: its CronJob and the claim of the volume that keeps them.
pub const CRONJOB: &str = "mariadb-backup";
pub const CLAIM: &str = "mariadb-backups";
/// Where the scheduled backup's volume is mounted in its pods.
pub const MOUNT: &str = "/backups";

/// What a backup holds: [`MANIFEST`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format: u32,
    /// The cloud's namespace.
    pub namespace: String,
    /// `openstack_release` of the cloud's globals when the backup was taken.
    pub openstack_release: String,
    /// When the dump's transaction started (UTC, RFC 3339).
    pub taken_at: String,
    /// How long the dump took.
    pub seconds: f64,
    /// The MariaDB server it was taken on (pod).
    pub member: String,
    /// The databases in the dump.
    pub databases: Vec<String>,
    pub dump: DumpFile,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DumpFile {
    pub file: String,
    /// Compressed size.
    pub bytes: u64,
    /// SHA-256 of the compressed file, hex.
    pub sha256: String,
}

/// The name of the backup of `namespace` taken at `utc` (`%Y%m%dT%H%M%SZ`).
pub fn backup_name(namespace: &str, utc: &str) -> String {
    format!("{namespace}-{utc}")
}

/// Whether `name` can be a backup's directory name: a plain name (letters, digits, `-`, `_`,
/// `.`), not starting with `.` (partial backups are hidden) and not a path.
pub fn is_backup_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_are_plain_names() {
        assert!(is_backup_name("openstack-20261128T021500Z"));
        for bad in ["", ".partial-x", "../x", "a/b", "a b", "x\n"] {
            assert!(!is_backup_name(bad), "{bad:?}");
        }
    }
}
