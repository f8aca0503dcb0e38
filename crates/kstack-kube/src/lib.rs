//! The only crate that talks to a Kubernetes API server.
//!
//! Everything else describes what it wants in plain values; this crate turns that into API calls
//! with kube-rs.
pub mod backup;
pub mod cloud;
pub mod cluster;
pub mod lock;
pub mod logs;
pub mod nodes;
pub mod services;

pub use cluster::{KubeCluster, RequestCounter, RequestCounts, counted_client};
pub use logs::{LogLine, LogSelection, PodLog, StoredLine, log_lines, pod_logs, stored_lines};
pub use services::service_addresses;

pub use kube::Client;
use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Errors from talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("no usable Kubernetes configuration: {0} (pass --kubeconfig or set KUBECONFIG)")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
    #[error("node {0} does not exist")]
    NodeNotFound(String),
    #[error("central log store: {0}")]
    Store(String),
}

/// A client from an explicit kubeconfig path, else like kubectl: `KUBECONFIG`, `~/.kube/config`,
/// in-cluster service account.
pub async fn client(kubeconfig: Option<&str>) -> Result<Client, Error> {
    Ok(Client::try_from(config(kubeconfig).await?)?)
}

/// The client configuration [`client`] uses.
pub async fn config(kubeconfig: Option<&str>) -> Result<Config, Error> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|source| Error::Kubeconfig {
                path: path.to_string(),
                source,
            })?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| Error::Kubeconfig {
                    path: path.to_string(),
                    source,
                })?
        }
        None => Config::infer().await?,
    })
}
