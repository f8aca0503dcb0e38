//! `kstack template`: render the Kubernetes objects (and, with `--config-files`, the service
//! config files) of a config directory without a cluster. `--distro-facts` prints instead the
//! table of the images' base distributions (`kstack_model::distro::ALL`) as JSON, for tools
//! such as `hack/distro-parity.sh` that must not keep their own copy.
//!
//! Exit codes: 0 rendered, 1 IO failure (reading the config, writing the output), 2 invalid
//! config (every diagnostic is printed) or unknown `--service`.
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kstack_config::fs;
use kstack_render::{ContainerFiles, Rendered, Target, kubernetes, render_files};

use crate::exit::Exit;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack template --config-dir ./mycloud > cloud.yaml\n  kstack template --config-dir ./mycloud --service keystone -o json\n  kstack template --config-dir ./mycloud -o ./manifests   # one file per object\n  kstack template --config-dir ./mycloud --config-files ./files -o ./manifests\n  kstack template --rbac | kubectl apply --server-side -f -   # the account kstack deploy runs as\n  kstack template --distro-facts   # each kolla_base_distro with its version and paths, as JSON\n\n--config-files DIR writes every rendered service config file as\nDIR/<service>/<container>/<file> (per-host variants of DaemonSet services as\nDIR/<service>@<host>/<container>/<file>), files that carry a password with mode 0600,\nso tools such as oslo-config-validator can read them.\nExit codes: 0 rendered, 1 IO failure, 2 invalid config or unknown service."
)]
pub struct Args {
    #[command(flatten)]
    pub config: super::config::ConfigDir,
    /// Render only the objects of this catalog service (e.g. keystone, nova-api).
    #[arg(long, value_name = "SERVICE")]
    pub service: Option<String>,
    /// `yaml` (a `---` separated stream), `json` (a v1 List), or a directory to write one YAML
    /// file per object into (created if missing).
    #[arg(short, long, default_value = "yaml", value_name = "yaml|json|DIR")]
    pub output: String,
    /// Also write every rendered config file as `DIR/<service>/<container>/<file>`
    /// (mode 0600 for files that carry a password).
    #[arg(long, value_name = "DIR")]
    pub config_files: Option<PathBuf>,
    /// Render instead the ServiceAccount and least-privilege Role/ClusterRole that
    /// `kstack deploy` needs to run in the cloud's namespace.
    #[arg(long, conflicts_with_all = ["service", "config_files"])]
    pub rbac: bool,
    /// Print instead, as JSON, every base distribution of the Kolla images kstack knows
    /// (`kolla_base_distro`): its name, version in the image tag and the paths that differ.
    /// Reads no config directory.
    #[arg(long, conflicts_with_all = ["service", "config_files", "rbac", "output", "target"])]
    pub distro_facts: bool,
    /// `compose`: one node without Kubernetes; a DIR gets compose.yaml and config/.
    #[arg(long, value_enum, default_value_t)]
    pub target: super::compose::TargetArg,
}

pub fn run(args: Args) -> anyhow::Result<Exit> {
    if args.distro_facts {
        let mut json = serde_json::to_string_pretty(&kstack_model::distro::ALL)
            .context("serializing the distribution table")?;
        json.push('\n');
        write_stdout(&json)?;
        return Ok(Exit::Success);
    }
    if args.target == super::compose::TargetArg::Compose {
        let dir = &args.config.config_dir;
        return super::compose::template(dir, args.service.as_deref(), &args.output);
    }
    let dir = &args.config.config_dir;
    let Some(mut config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing rendered"));
    };
    super::tls::fill_example(&mut config, true)?;
    if let Some(service) = &args.service
        && !config.catalog.services.contains_key(service)
    {
        eprintln!("error: `{service}` is not a service of the catalog (see `kstack services`)");
        return Ok(Exit::BadInput);
    }
    let rendered = if args.rbac {
        Ok(kubernetes::rbac::deployer(&config.globals))
    } else {
        kubernetes::render(&config)
    };
    let mut rendered = match rendered {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(Exit::BadInput);
        }
    };
    if let Some(dir) = &args.config_files {
        let mut files = render_files(&config, Target::Kubernetes)
            .map_err(|e| super::InputError(e.to_string()))?;
        if let Some(service) = &args.service {
            files.retain(|f| &f.service == service);
        }
        write_config_files(&files, dir)?;
    }
    if let Some(service) = &args.service {
        rendered = rendered.only_service(service);
        if rendered.objects.is_empty() {
            eprintln!(
                "warning: service `{service}` is not enabled in globals.yml; nothing rendered"
            );
        }
    }
    match args.output.as_str() {
        "yaml" => write_stdout(&rendered.to_yaml())?,
        "json" => write_stdout(&rendered.to_json())?,
        dir => write_dir(&rendered, Path::new(dir))?,
    }
    Ok(Exit::Success)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// One file per object, prefixed with its position so `ls` shows the apply order. A Secret's
/// manifest (base64 of passwords) gets mode 0600, every other one 0644.
fn write_dir(rendered: &Rendered, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (i, o) in rendered.objects.iter().enumerate() {
        let path = dir.join(format!("{i:03}-{}", o.file_name("yaml")));
        let mode = if o.kind() == "Secret" { 0o600 } else { 0o644 };
        // A mode the operator tightened on an earlier render stays; a link is replaced.
        fs::replace_file(&path, o.to_yaml().as_bytes(), mode)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!(
        "wrote {} objects to {}",
        rendered.objects.len(),
        dir.display()
    );
    Ok(())
}

/// `DIR/<service>[@<host>]/<container>/<file>`; files that carry a password get mode 0600.
fn write_config_files(files: &[ContainerFiles], dir: &Path) -> anyhow::Result<()> {
    let mut n = 0;
    for cf in files {
        let service_dir = match &cf.host {
            Some(h) => format!("{}@{h}", cf.service),
            None => cf.service.clone(),
        };
        let d = dir.join(service_dir).join(&cf.container);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        for f in &cf.files {
            let path = d.join(&f.name);
            let mode = if f.secret { 0o600 } else { 0o644 };
            // A mode the operator tightened on an earlier render stays; a link is replaced.
            fs::replace_file(&path, f.content.as_bytes(), mode)
                .with_context(|| format!("writing {}", path.display()))?;
            n += 1;
        }
    }
    eprintln!("wrote {n} config files to {}", dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstack_model::catalog::Catalog;
    use kstack_model::globals::Globals;

    #[test]
    fn an_invalid_config_dir_exits_2_and_renders_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("globals.yml"), "kolla_base_distro: [\n").unwrap();
        let code = run(Args {
            config: super::super::config::ConfigDir {
                config_dir: tmp.path().to_owned(),
            },
            service: None,
            output: tmp.path().join("out").to_str().unwrap().to_owned(),
            config_files: None,
            rbac: false,
            distro_facts: false,
            target: Default::default(),
        })
        .unwrap();
        assert_eq!(code, Exit::BadInput);
        assert!(!tmp.path().join("out").exists());
    }

    #[test]
    fn config_files_are_written_per_service_and_container_with_secret_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let config = kstack_config::Config::from_parts(
            Globals::default(),
            kstack_config::testing::passwords(5),
            Default::default(),
            Catalog::builtin().unwrap(),
        );
        let files = render_files(&config, Target::Kubernetes).unwrap();
        write_config_files(&files, tmp.path()).unwrap();
        let conf = tmp.path().join("keystone/keystone/keystone.conf");
        let text = std::fs::read_to_string(&conf).unwrap();
        assert!(text.contains("[database]"));
        let wsgi = tmp.path().join("keystone/keystone/wsgi-keystone.conf");
        assert!(wsgi.exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&conf), 0o600, "keystone.conf carries passwords");
            assert_eq!(mode(&wsgi), 0o644);
        }
        // Writing again replaces the files.
        write_config_files(&files, tmp.path()).unwrap();
    }

    #[test]
    fn a_directory_output_has_one_file_per_object_in_apply_order() {
        let tmp = tempfile::tempdir().unwrap();
        let config = kstack_config::Config::from_parts(
            Globals::default(),
            kstack_config::testing::passwords(5),
            Default::default(),
            Catalog::builtin().unwrap(),
        );
        let rendered = kubernetes::render(&config).unwrap();
        write_dir(&rendered, tmp.path()).unwrap();
        let mut files: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        assert_eq!(files.len(), rendered.objects.len());
        assert_eq!(files[0], "000-namespace-openstack.yaml");
        let first = std::fs::read_to_string(tmp.path().join(&files[0])).unwrap();
        assert!(first.contains("kind: Namespace"), "{first}");
        // Secrets (base64 of passwords) are for their owner alone, whatever the umask.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mut secrets = 0;
            for f in &files {
                let path = tmp.path().join(f);
                let text = std::fs::read_to_string(&path).unwrap();
                let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
                if text.contains("\nkind: Secret\n") || text.starts_with("kind: Secret\n") {
                    secrets += 1;
                    assert_eq!(mode, 0o600, "{f}");
                } else {
                    assert_eq!(mode, 0o644, "{f}");
                }
            }
            assert!(secrets > 0, "no Secret manifest among {files:?}");
        }
    }
}
