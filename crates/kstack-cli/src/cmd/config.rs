//! `kstack init`, `kstack genpwd`, `kstack validate`: creating, completing and checking a config
//! directory (globals.yml, passwords.yml, config/).
//!
//! Exit codes: 0 valid / done, 1 IO failure, 2 invalid input files.
use std::path::{Path, PathBuf};

use anyhow::Context;
use kstack_config::{fs, genpwd, passwords, templates};

use crate::exit::Exit;

/// What rendering `config` reports: an error when the Kubernetes target cannot render it, a
/// warning when only the single-node Compose target cannot (a catalog whose names clash on one
/// node, say), since a cloud on Kubernetes does not need that one.
fn render_problems(config: &kstack_config::Config) -> (Option<String>, Option<String>) {
    // The certificate kstack makes in the cluster on deploy: rendered here with one of a
    // throw-away CA, which the Compose target has no cluster to make.
    let made_on_deploy = super::tls::needs_made_certificate(config);
    let mut config = config.clone();
    if let Err(e) = super::tls::fill_example(&mut config, false) {
        return (Some(format!("{e:#}")), None);
    }
    match kstack_render::kubernetes::render(&config) {
        Err(e) => (Some(e.to_string()), None),
        Ok(_) if made_on_deploy => (
            None,
            Some(format!(
                "the Compose target (`--target compose`) needs the public endpoints' certificate in `{}` (kstack makes one only in a Kubernetes cluster)",
                kstack_config::PUBLIC_CERTIFICATE_FILE
            )),
        ),
        Ok(_) => (
            None,
            kstack_render::compose::render(&config).err().map(|e| {
                format!("the Compose target (`--target compose`) cannot render this: {e}")
            }),
        ),
    }
}

/// Where the config directory is: `--config-dir`, else $KSTACK_CONFIG_DIR, else /etc/kstack.
///
/// `--config-dir` is a global option (before or after the sub-command, like kubectl's flags):
/// it is parsed by [`GlobalArgs`] and copied into every command's `ConfigDir` by
/// [`super::Command::set_globals`].
#[derive(Debug, Default, clap::Args)]
pub struct ConfigDir {
    #[arg(skip)]
    pub config_dir: PathBuf,
}

/// Options every command takes, before or after the sub-command.
#[derive(Debug, clap::Args)]
pub struct GlobalArgs {
    /// The config directory holding globals.yml, passwords.yml and config/.
    #[arg(
        long,
        global = true,
        env = "KSTACK_CONFIG_DIR",
        default_value = "/etc/kstack",
        value_name = "DIR"
    )]
    pub config_dir: PathBuf,
    /// Kubeconfig file of the cluster (default: $KUBECONFIG, ~/.kube/config, or the in-cluster
    /// account), for the commands that talk to one.
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Create a config directory: a commented globals.yml, an empty passwords.yml and config/.
    #[command(
        after_help = "Examples:\n  kstack init ./mycloud\n  KSTACK_CONFIG_DIR=/etc/kstack kstack init\n\nExisting files are never overwritten."
    )]
    Init {
        /// Directory to create (default: the config directory).
        dir: Option<PathBuf>,
        #[command(flatten)]
        dir_opt: ConfigDir,
    },
    /// Fill the empty values of passwords.yml (set values are never changed).
    #[command(
        after_help = "Examples:\n  kstack genpwd --config-dir ./mycloud\n\nSSH keys get Ed25519 key pairs (OpenSSH format), *_uuid keys UUIDs, the rest 40 random letters and digits.\nA new file is written with mode 0600; an existing file keeps its mode,\nwithout any permission for others."
    )]
    Genpwd {
        #[command(flatten)]
        dir_opt: ConfigDir,
    },
    /// Check globals.yml, passwords.yml, catalog.yml and config/; print every warning and error.
    #[command(
        after_help = "Examples:\n  kstack validate --config-dir ./mycloud\n\nExit codes: 0 valid (warnings allowed), 2 invalid input, 1 the files could not be read."
    )]
    Validate {
        #[command(flatten)]
        dir_opt: ConfigDir,
    },
}

impl ConfigCommand {
    pub(super) fn set_config_dir(&mut self, dir: &std::path::Path) {
        let (ConfigCommand::Init { dir_opt, .. }
        | ConfigCommand::Genpwd { dir_opt }
        | ConfigCommand::Validate { dir_opt }) = self;
        dir_opt.config_dir = dir.to_owned();
    }
}

pub fn run(command: ConfigCommand) -> anyhow::Result<Exit> {
    match command {
        ConfigCommand::Init { dir, dir_opt } => init(&dir.unwrap_or(dir_opt.config_dir)),
        ConfigCommand::Genpwd { dir_opt } => genpwd_cmd(&dir_opt.config_dir),
        ConfigCommand::Validate { dir_opt } => validate(&dir_opt.config_dir),
    }
}

fn init(dir: &Path) -> anyhow::Result<Exit> {
    let files = [
        (
            dir.join(kstack_config::GLOBALS_FILE),
            templates::GLOBALS_YML.to_owned(),
            0o644,
        ),
        (
            dir.join(passwords::FILE),
            templates::passwords_yml(),
            fs::PASSWORDS_MODE,
        ),
        (
            dir.join("config/README.md"),
            templates::CONFIG_README.to_owned(),
            0o644,
        ),
    ];
    // Check everything first so that init either writes all files or none.
    for (path, _, _) in &files {
        if path.exists() {
            anyhow::bail!(
                "{} already exists; kstack init never overwrites files",
                path.display()
            );
        }
    }
    std::fs::create_dir_all(dir.join("config"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    for (path, text, mode) in &files {
        fs::create_new(path, text.as_bytes(), *mode)?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!(
        "next: edit {}, then run `kstack genpwd --config-dir {}`",
        files[0].0.display(),
        dir.display()
    );
    Ok(Exit::Success)
}

fn genpwd_cmd(dir: &Path) -> anyhow::Result<Exit> {
    let path = dir.join(passwords::FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    match genpwd::fill_os_rng(&text) {
        Ok(filled) => {
            if filled.generated.is_empty() {
                eprintln!(
                    "{}: nothing to generate, every value is set",
                    path.display()
                );
            } else {
                fs::write_passwords(dir, &filled.text)?;
                eprintln!(
                    "{}: generated {} values: {}",
                    path.display(),
                    filled.generated.len(),
                    filled.generated.join(", ")
                );
            }
            Ok(Exit::Success)
        }
        Err(diags) => {
            super::print_diagnostics(&diags);
            Ok(Exit::BadInput)
        }
    }
}

fn validate(dir: &Path) -> anyhow::Result<Exit> {
    let loaded = fs::load_dir(dir)?;
    super::print_diagnostics(&loaded.diagnostics);
    let mut errors = loaded.diagnostics.iter().filter(|d| d.is_error()).count();
    let mut warnings = loaded.diagnostics.len() - errors;
    // A directory that loads can still fail to render (an override a template cannot use, a
    // password a task needs): validate renders it, so `deploy` finds nothing new.
    if let Some(config) = loaded.config.as_ref().filter(|_| errors == 0) {
        let (error, warning) = render_problems(config);
        if let Some(e) = error {
            eprintln!("error: {e}");
            errors += 1;
        }
        if let Some(w) = warning {
            eprintln!("warning: {w}");
            warnings += 1;
        }
    }
    if errors > 0 {
        eprintln!(
            "{}: invalid ({errors} errors, {warnings} warnings)",
            dir.display()
        );
        Ok(Exit::BadInput)
    } else {
        println!("{}: valid ({warnings} warnings)", dir.display());
        Ok(Exit::Success)
    }
}
