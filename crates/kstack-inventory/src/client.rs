//! A client of the inventory's REST API: what `kstack host-*` call, typed by the service's own
//! model. Errors say what to do (a missing token, a CA the client does not trust, a host that
//! is not there); the service's own message is passed on when it refuses a request.
use std::path::{Path, PathBuf};

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::model::{Host, HostList, Label, LabelList};

/// Why a call to the inventory service failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no inventory token: pass --token or set KSTACK_INVENTORY_TOKEN")]
    NoToken,
    #[error("reading CA file {}: {source}", path.display())]
    CaFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: no PEM certificate in it; give the CA's certificate in PEM (-----BEGIN CERTIFICATE-----)", path.display())]
    BadCa { path: PathBuf },
    #[error("building the HTTP client: {0}")]
    Build(reqwest::Error),
    /// The whole chain of causes (reqwest's top-level message hides the one that matters: a
    /// certificate the client does not trust, a refused connection).
    #[error("{0}")]
    Unreachable(String),
    #[error("inventory service answered {status}: {message}")]
    Refused {
        status: reqwest::StatusCode,
        message: String,
    },
    #[error("unexpected answer from {url}: {reason}")]
    Unexpected { url: String, reason: String },
    #[error("no host named {0} in the inventory (see kstack host-list)")]
    NoSuchHost(String),
}

/// One inventory service, at `url`, with a bearer token.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    ca_given: bool,
}

impl Client {
    /// A client of the service at `url`; `ca_file`, a PEM CA to trust besides the system's.
    /// A missing token is reported by the first call, so commands that fail earlier on their
    /// own arguments say that first.
    pub fn new(
        url: &str,
        token: Option<&str>,
        ca_file: Option<&Path>,
    ) -> Result<Self, ClientError> {
        let mut builder = reqwest::Client::builder();
        if let Some(ca) = ca_file {
            let pem = std::fs::read(ca).map_err(|source| ClientError::CaFile {
                path: ca.to_owned(),
                source,
            })?;
            // Every certificate of the bundle; a file with none is refused, not ignored.
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .ok()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| ClientError::BadCa {
                    path: ca.to_owned(),
                })?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Client {
            http: builder.build().map_err(ClientError::Build)?,
            url: url.trim_end_matches('/').to_owned(),
            token: token.map(str::to_owned),
            ca_given: ca_file.is_some(),
        })
    }

    pub async fn hosts(&self) -> Result<Vec<Host>, ClientError> {
        let list: HostList = self.call(Method::GET, "/v1/ihosts", None).await?;
        Ok(list.ihosts)
    }

    pub async fn host(&self, uuid: &str) -> Result<Host, ClientError> {
        self.call(Method::GET, &format!("/v1/ihosts/{uuid}"), None)
            .await
    }

    /// The UUID of the host named `host` (a hostname or a UUID).
    pub async fn resolve(&self, host: &str) -> Result<String, ClientError> {
        self.hosts()
            .await?
            .into_iter()
            .find(|h| h.hostname == host || h.uuid == host)
            .map(|h| h.uuid)
            .ok_or_else(|| ClientError::NoSuchHost(host.to_owned()))
    }

    /// Registers a host; the service checks `personality` (controller, compute, storage).
    pub async fn add_host(
        &self,
        hostname: &str,
        personality: &str,
        locked: bool,
    ) -> Result<Host, ClientError> {
        let body = json!({
            "hostname": hostname,
            "personality": personality,
            "administrative": if locked { "locked" } else { "unlocked" },
        });
        self.call(Method::POST, "/v1/ihosts", Some(body)).await
    }

    /// Locks (`true`) or unlocks the host `uuid`. A compute host's lock may answer while its
    /// instances are still moving off (its `task` says so); `force` locks at once.
    pub async fn set_locked(
        &self,
        uuid: &str,
        locked: bool,
        force: bool,
    ) -> Result<Host, ClientError> {
        let action = if locked { "lock" } else { "unlock" };
        let query = if locked && force { "?force=true" } else { "" };
        self.call(
            Method::POST,
            &format!("/v1/ihosts/{uuid}/{action}{query}"),
            None,
        )
        .await
    }

    pub async fn delete_host(&self, uuid: &str) -> Result<(), ClientError> {
        self.call::<Value>(Method::DELETE, &format!("/v1/ihosts/{uuid}"), None)
            .await
            .map(drop)
    }

    pub async fn labels(&self, host_uuid: &str) -> Result<Vec<Label>, ClientError> {
        let list: LabelList = self
            .call(Method::GET, &format!("/v1/ihosts/{host_uuid}/labels"), None)
            .await?;
        Ok(list.labels)
    }

    /// Sets `labels` on the host; a key it has already is refused unless `overwrite`.
    pub async fn assign_labels(
        &self,
        host_uuid: &str,
        labels: &[(String, String)],
        overwrite: bool,
    ) -> Result<Vec<Label>, ClientError> {
        let body: serde_json::Map<String, Value> =
            labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let path = format!(
            "/v1/labels/{host_uuid}{}",
            if overwrite { "?overwrite=true" } else { "" }
        );
        let list: LabelList = self
            .call(Method::POST, &path, Some(Value::Object(body)))
            .await?;
        Ok(list.labels)
    }

    pub async fn delete_label(&self, label_uuid: &str) -> Result<(), ClientError> {
        self.call::<Value>(Method::DELETE, &format!("/v1/labels/{label_uuid}"), None)
            .await
            .map(drop)
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T, ClientError> {
        let token = self.token.as_deref().ok_or(ClientError::NoToken)?;
        let url = format!("{}{path}", self.url);
        let mut req = self.http.request(method, &url).bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.map_err(|e| {
            let mut msg = format!("could not reach the inventory service at {}", self.url);
            let mut source: Option<&dyn std::error::Error> = Some(&e);
            while let Some(s) = source {
                msg.push_str(&format!(": {s}"));
                source = s.source();
            }
            if self.url.starts_with("https://") && !self.ca_given {
                msg.push_str(
                    " (if the service's certificate is signed by your own CA, pass --ca-file)",
                );
            }
            ClientError::Unreachable(msg)
        })?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| ClientError::Unexpected {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        if !status.is_success() {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
                .unwrap_or(text);
            return Err(ClientError::Refused { status, message });
        }
        let text = if text.is_empty() { "null" } else { &text };
        serde_json::from_str(text).map_err(|e| ClientError::Unexpected {
            url,
            reason: e.to_string(),
        })
    }
}
