//! What a Kolla container finds whatever the target: the directory `kolla_set_configs` reads
//! ([`KOLLA_CONFIG_DIR`]) and the `config.json` there that says where each file goes
//! ([`KollaConfig`]).
//!
//! Part of the layer both targets share: the config files ([`crate::files`]) and the bootstrap
//! tasks ([`crate::tasks`]) are written for this directory, and each target only decides how
//! the files get there (projected ConfigMaps and Secrets on Kubernetes, a read-only bind mount
//! on Compose).

use kstack_model::catalog;
use kstack_model::distro::{Distro, UnknownFact};
use kstack_model::release::Release;
use serde::Serialize;

/// Where Kolla's `kolla_set_configs` reads `config.json` and its sources.
pub const KOLLA_CONFIG_DIR: &str = "/var/lib/kolla/config_files";

/// Kolla's `config.json` for one container (kolla 2025.1 keys only).
#[derive(Debug, Serialize)]
pub struct KollaConfig {
    pub command: String,
    pub config_files: Vec<KollaConfigFile>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<catalog::Permission>,
}

/// One `config_files` entry of [`KollaConfig`].
#[derive(Debug, Serialize)]
pub struct KollaConfigFile {
    pub source: String,
    pub dest: String,
    pub owner: String,
    pub perm: String,
}

impl KollaConfig {
    /// The `config.json` of a catalog container for the image distribution `distro` and the
    /// OpenStack `release`: sources under [`KOLLA_CONFIG_DIR`], the `{fact}`s of command and
    /// destinations expanded (the target's `{bind_address}` to `bind_address`, a release's
    /// facts to its values).
    pub fn for_container(
        c: &catalog::Container,
        distro: &Distro,
        release: &Release,
        bind_address: &str,
    ) -> Result<KollaConfig, UnknownFact> {
        let target = |name: &str| {
            if name == "bind_address" {
                Some(bind_address.to_owned())
            } else {
                release.fact(name).map(str::to_owned)
            }
        };
        Ok(KollaConfig {
            command: distro.expand_with(&c.command, &target)?,
            config_files: c
                .config_files
                .iter()
                .map(|f| {
                    Ok(KollaConfigFile {
                        source: format!("{KOLLA_CONFIG_DIR}/{}", f.template),
                        dest: distro.expand_with(&f.dest, &target)?,
                        owner: f.owner.clone(),
                        perm: f.perm.clone(),
                    })
                })
                .collect::<Result<_, UnknownFact>>()?,
            permissions: c.permissions.clone(),
        })
    }

    /// Pretty JSON with a trailing newline; field order is fixed by the struct.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("config.json serializes");
        s.push('\n');
        s
    }
}
