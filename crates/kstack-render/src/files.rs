//! The files each container finds in `/var/lib/kolla/config_files`: Kolla's `config.json` and
//! the service config files it names, rendered for one target.
//!
//! Both targets (Kubernetes and the single-node Compose file) mount the same files; only the
//! addresses services use to reach each other differ, and [`Target`] is where that difference
//! lives.
use kstack_config::Config;

use crate::kubernetes::KollaConfig;

/// Where the rendered cloud runs. The target decides how one service reaches another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// A Kubernetes cluster: services reach each other through Kubernetes Service names.
    Kubernetes,
    /// One node without Kubernetes (Compose, host network): every service on the node's address.
    Compose,
}

/// One file of a container's config directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFile {
    /// File name inside `/var/lib/kolla/config_files` (the `source` in config.json).
    pub name: String,
    pub content: String,
    /// Whether the file carries a value from passwords.yml: a Secret, never a ConfigMap, and
    /// mode 0600 on disk.
    pub secret: bool,
}

/// Every file one container of one service mounts, `config.json` included, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerFiles {
    pub service: String,
    pub container: String,
    pub files: Vec<RenderedFile>,
}

/// A template that failed to render: names the template, the line and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("template {template}, line {line}: {message}")]
    Template {
        template: String,
        line: usize,
        message: String,
    },
}

/// Renders the config directory of every container of every enabled service, in service and
/// container order.
pub fn render_files(config: &Config, target: Target) -> Result<Vec<ContainerFiles>, RenderError> {
    let _ = target;
    let mut out = Vec::new();
    for name in &config.enabled {
        let Some(service) = config.catalog.services.get(name) else {
            continue;
        };
        for c in &service.containers {
            out.push(ContainerFiles {
                service: name.clone(),
                container: c.name.clone(),
                files: vec![RenderedFile {
                    name: "config.json".into(),
                    content: KollaConfig::for_container(c).to_json(),
                    secret: false,
                }],
            });
        }
    }
    Ok(out)
}
