//! One module per group of commands; each group is a clap `Subcommand` enum flattened here.
//! Also what every command does alike: loading the config directory and printing its
//! diagnostics.
use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use kstack_config::{Config, Diag};

use crate::exit::Exit;

pub mod backup;
pub mod backups;
pub mod catalog;
pub mod compose;
pub mod config;
mod critical;
pub mod deploy;
pub mod dev;
pub mod inventory;
pub mod logs;
pub mod openrc;
pub mod template;
pub(crate) mod tls;
pub mod verify;
mod writer;

/// Bad input files (config directory, catalog file): `main` exits with [`Exit::BadInput`] for
/// this error.
/// The diagnostics have already been printed when it is returned.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Prints each diagnostic on stderr as miette renders it (file, line, the source line, help).
pub(crate) fn print_diagnostics(diagnostics: &[Diag]) {
    for d in diagnostics {
        eprintln!("{:?}", miette::Report::new(d.clone()));
    }
}

/// Loads the config directory (`kstack_config::fs::load_dir`) and prints every diagnostic;
/// `None` when one of them is an error. Every command that reads a config directory loads it
/// here, so all of them show the same diagnostics.
pub(crate) fn load_config(dir: &Path) -> anyhow::Result<Option<Config>> {
    let loaded = kstack_config::fs::load_dir(dir)?;
    print_diagnostics(&loaded.diagnostics);
    let errors = loaded.has_errors();
    Ok(loaded.config.filter(|_| !errors))
}

/// Says that the config directory is invalid and that the command did `nothing` (`nothing
/// done`, `nothing rendered`): bad input.
pub(crate) fn invalid_config(dir: &Path, nothing: &str) -> crate::exit::Exit {
    eprintln!("{}: invalid config, {nothing}", dir.display());
    crate::exit::Exit::BadInput
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The local Kubernetes control plane for tests and the all-in-one deployment.
    Dev(dev::Args),
    #[command(flatten)]
    Config(config::ConfigCommand),
    #[command(flatten)]
    Catalog(catalog::CatalogCommand),
    #[command(flatten)]
    Inventory(inventory::InventoryCommand),
    /// Render the Kubernetes objects of a config directory (no cluster needed).
    Template(template::Args),
    /// Write admin-openrc.sh and clouds.yaml: the admin's credentials for the OpenStack
    /// clients, on Keystone's public endpoint (mode 0600; no cluster needed).
    Openrc(openrc::Args),
    #[command(flatten)]
    Deploy(deploy::DeployCommand),
    /// Check a deployed cloud over its public APIs, as a user would: token, endpoints, a
    /// project and user, image, network, flavor, server, Heat stack, Horizon; then delete
    /// everything it made.
    #[command(after_help = verify::AFTER_HELP)]
    Verify(verify::Args),
    /// Print what every pod and container of a service writes (its bootstrap Jobs' with
    /// --jobs), passwords hidden; -f follows.
    Logs(logs::Args),
    /// Back up the cloud's databases into a directory while the cloud serves (one transaction
    /// on a ready MariaDB server).
    Backup(backup::BackupArgs),
    /// Load a backup of `kstack backup` back into the cloud's databases (checked whole first;
    /// needs --yes).
    Restore(backup::RestoreArgs),
    /// List the backups the cluster took on its schedule (kstack_backup_schedule), with the
    /// schedule's last runs.
    BackupList(backups::ListArgs),
    /// Copy one scheduled backup off the cluster's backup volume into a directory, checked
    /// whole, for `kstack restore`.
    BackupFetch(backups::FetchArgs),
}

impl Command {
    /// Gives every command the global options ([`config::GlobalArgs`]): `--config-dir`, and
    /// `--kubeconfig` to those that talk to a cluster.
    pub fn set_globals(&mut self, globals: &config::GlobalArgs) {
        use catalog::CatalogCommand as C;
        use deploy::DeployCommand as D;
        let dir = &globals.config_dir;
        let target = match self {
            Command::Config(c) => return c.set_config_dir(dir),
            Command::Catalog(C::Services(a)) => return a.catalog.dir.config_dir = dir.to_owned(),
            Command::Catalog(C::Graph(a)) => return a.catalog.dir.config_dir = dir.to_owned(),
            Command::Template(a) => return a.config.config_dir = dir.to_owned(),
            Command::Openrc(a) => {
                a.kubeconfig = globals.kubeconfig.clone();
                return a.config.config_dir = dir.to_owned();
            }
            Command::Inventory(c) => return c.set_kubeconfig(globals.kubeconfig.clone()),
            Command::Dev(_) => return,
            Command::Deploy(D::Deploy(a)) => &mut a.target,
            Command::Deploy(D::Plan(a)) => &mut a.target,
            Command::Deploy(D::Status(a)) => &mut a.target,
            Command::Deploy(D::History(a)) => &mut a.target,
            Command::Deploy(D::Rollback(a)) => &mut a.target,
            Command::Verify(a) => &mut a.target,
            Command::Logs(a) => &mut a.target,
            Command::Backup(a) => &mut a.target,
            Command::Restore(a) => &mut a.target,
            Command::BackupList(a) => &mut a.target,
            Command::BackupFetch(a) => &mut a.target,
        };
        target.config.config_dir = dir.to_owned();
        target.kubeconfig = globals.kubeconfig.clone();
    }
}

/// Runs `command`: its [`Exit`], or for `kstack dev` the status of the script it ran.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    let exit: Exit = match command {
        Command::Dev(args) => return dev::run(args),
        Command::Config(command) => config::run(command)?,
        Command::Catalog(command) => catalog::run(command)?,
        Command::Inventory(command) => inventory::run(command)?,
        Command::Template(args) => template::run(args)?,
        Command::Openrc(args) => openrc::run(args)?,
        Command::Deploy(command) => deploy::run(command)?,
        Command::Verify(args) => verify::run(args)?,
        Command::Logs(args) => logs::run(args)?,
        Command::Backup(args) => backup::run_backup(args)?,
        Command::Restore(args) => backup::run_restore(args)?,
        Command::BackupList(args) => backups::run_list(args)?,
        Command::BackupFetch(args) => backups::run_fetch(args)?,
    };
    Ok(exit.into())
}
