//! `kstack openrc`: the admin's credentials for the OpenStack clients, as kolla-ansible's
//! `post-deploy` writes them: `admin-openrc.sh` (environment variables) and `clouds.yaml`
//! (cloud `kstack-admin`), both on Keystone's public endpoint (the public address when the
//! cloud has one) and the public interface, so a client outside the cluster works with them.
//! They hold the admin's password: written with mode 0600, replacing and never following what
//! is there, and never printed.
//!
//! Exit codes: 0 written, 1 IO failure, 2 invalid config.
use std::path::PathBuf;

use anyhow::Context as _;
use kstack_config::{Config, fs};
use kstack_render::Target;

use crate::exit::Exit;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  kstack openrc                      # into the config directory\n  kstack openrc -o ~/.config/openstack\n  . ./admin-openrc.sh && openstack server list\n  OS_CLOUD=kstack-admin openstack server list   # with clouds.yaml there\n\nBoth files hold the admin's password: mode 0600.\nExit codes: 0 written, 1 IO failure, 2 invalid config."
)]
pub struct Args {
    #[command(flatten)]
    pub config: super::config::ConfigDir,
    /// The directory to write admin-openrc.sh and clouds.yaml into (default: the config
    /// directory, as kolla-ansible writes them into /etc/kolla).
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// The global `--kubeconfig`: with TLS on the public endpoints and kstack's own CA, the
    /// CA is read from the cluster and written as `ca.crt` beside the files.
    #[arg(skip)]
    pub kubeconfig: Option<String>,
}

/// The cloud's name in clouds.yaml (`OS_CLOUD`).
pub const CLOUD_NAME: &str = "kstack-admin";

pub fn run(args: Args) -> anyhow::Result<Exit> {
    let dir = &args.config.config_dir;
    let Some(config) = super::load_config(dir)? else {
        return Ok(super::invalid_config(dir, "nothing written"));
    };
    let Some(mut creds) = Credentials::of(&config)? else {
        eprintln!(
            "error: passwords.yml has no keystone_admin_password; run `kstack genpwd` first, nothing written"
        );
        return Ok(Exit::BadInput);
    };
    let out = args.output.as_deref().unwrap_or(dir);
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    // HTTPS public endpoints: the CA the clients trust (OS_CACERT), kstack's own written here.
    creds.cacert = config.globals.tls.admin_openrc_cacert.clone();
    if super::tls::needs_made_certificate(&config) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let ca = runtime.block_on(super::tls::kstack_ca(&config, args.kubeconfig.as_deref()))?;
        if let Some(pem) = ca {
            let path = super::tls::write_ca(out, &pem)?;
            let path = std::path::absolute(&path).unwrap_or(path);
            creds.cacert = Some(path.display().to_string());
        }
    }
    for (name, text) in [
        ("admin-openrc.sh", creds.openrc()),
        ("clouds.yaml", creds.clouds_yaml()),
    ] {
        let path = out.join(name);
        fs::replace_file(&path, text.as_bytes(), 0o600)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!(
        "wrote admin-openrc.sh and clouds.yaml (cloud {CLOUD_NAME}) to {}: Keystone at {}",
        out.display(),
        creds.auth_url
    );
    Ok(Exit::Success)
}

/// What the clients need to log in as the admin.
struct Credentials {
    auth_url: String,
    username: String,
    password: String,
    project: String,
    region: String,
    /// The CA bundle of HTTPS public endpoints (`OS_CACERT`), when the clients need one.
    cacert: Option<String>,
}

impl Credentials {
    fn of(config: &Config) -> anyhow::Result<Option<Credentials>> {
        let g = &config.globals;
        let Some(password) = config.passwords.get("keystone_admin_password") else {
            return Ok(None);
        };
        let base = kstack_render::tasks::keystone_public_url(config, Target::Kubernetes)
            .map_err(|e| super::InputError(e.to_string()))?;
        Ok(Some(Credentials {
            auth_url: format!("{base}/v3"),
            username: g.keystone_admin_user.clone(),
            password: password.to_owned(),
            project: g.keystone_admin_project.clone(),
            region: g.openstack_region_name.clone(),
            cacert: None,
        }))
    }

    /// `admin-openrc.sh`: every value single-quoted for the shell.
    fn openrc(&self) -> String {
        let q = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let mut s = String::from(
            "# The admin's credentials for the OpenStack clients, written by `kstack openrc`.\n",
        );
        for (k, v) in [
            ("OS_PROJECT_DOMAIN_NAME", "Default"),
            ("OS_USER_DOMAIN_NAME", "Default"),
            ("OS_PROJECT_NAME", self.project.as_str()),
            ("OS_TENANT_NAME", self.project.as_str()),
            ("OS_USERNAME", self.username.as_str()),
            ("OS_PASSWORD", self.password.as_str()),
            ("OS_AUTH_URL", self.auth_url.as_str()),
            ("OS_INTERFACE", "public"),
            ("OS_ENDPOINT_TYPE", "publicURL"),
            ("OS_IDENTITY_API_VERSION", "3"),
            ("OS_REGION_NAME", self.region.as_str()),
            ("OS_AUTH_PLUGIN", "password"),
        ] {
            s.push_str(&format!("export {k}={}\n", q(v)));
        }
        if let Some(ca) = &self.cacert {
            s.push_str(&format!("export OS_CACERT={}\n", q(ca)));
        }
        s
    }

    /// `clouds.yaml`, written as JSON (which YAML reads as it is, so no value can mean
    /// something else to a YAML 1.1 or 1.2 reader).
    fn clouds_yaml(&self) -> String {
        let mut doc = serde_json::json!({"clouds": {CLOUD_NAME: {
            "auth": {
                "auth_url": self.auth_url,
                "username": self.username,
                "password": self.password,
                "project_name": self.project,
                "user_domain_name": "Default",
                "project_domain_name": "Default",
            },
            "region_name": self.region,
            "interface": "public",
            "identity_api_version": 3,
        }}});
        if let Some(ca) = &self.cacert {
            doc["clouds"][CLOUD_NAME]["cacert"] = serde_json::Value::String(ca.clone());
        }
        format!(
            "# The admin's cloud for the OpenStack clients (OS_CLOUD={CLOUD_NAME}), written by `kstack openrc`.\n{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        )
    }
}
