//! The cloud's compute service (nova) as a compute host's lock needs it: the inventory's
//! [`ComputeHosts`] over nova's API, as an administrator (a password, a project scope). The
//! token is kept and asked for again a minute before it expires or when nova answers 401.
//!
//! Microversion 2.88: services by `host` with `status` and `state`, `PUT /os-services/{id}`
//! (2.53), `os-migrateLive` with `host: null` and `block_migration: "auto"` (2.25) and no
//! `force` (2.68), servers listed across projects by `host`.
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kstack_ports::{ComputeError, ComputeHosts, ComputeService, Instance};
use reqwest::Method;
use serde_json::{Value, json};

use crate::http::{Api, Body, CallError};
use crate::{Interface, Password, Redactor};

const MICROVERSION: &str = "2.88";

/// Who logs in, and where.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// Keystone's URL (with or without `/v3`).
    pub auth_url: String,
    pub username: String,
    pub password: Password,
    pub project_name: String,
    pub user_domain: String,
    pub project_domain: String,
    pub region: String,
    pub interface: Interface,
    /// PEM certificates to trust besides the public roots (OS_CACERT: the cloud's own CA).
    pub ca_pem: Option<Vec<u8>>,
}

struct Session {
    token: String,
    nova: String,
    until: Instant,
}

/// [`ComputeHosts`] against nova.
pub struct Nova {
    api: Api,
    creds: Credentials,
    redactor: Redactor,
    session: tokio::sync::Mutex<Option<Session>>,
    /// nova-compute service ids by host (the id `PUT /os-services` takes).
    service_ids: Mutex<BTreeMap<String, String>>,
}

fn err(e: impl std::fmt::Display, redactor: &Redactor) -> ComputeError {
    ComputeError(redactor.redact(&e.to_string()))
}

impl Nova {
    /// A client; an error when `creds.ca_pem` holds no PEM certificate.
    pub fn new(creds: Credentials, request_timeout: Duration) -> Result<Nova, ComputeError> {
        let redactor = Redactor::new([creds.password.clone()]);
        let ca = match &creds.ca_pem {
            Some(pem) => reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ComputeError(format!("no PEM certificate in the CA file: {e}")))?,
            None => Vec::new(),
        };
        Ok(Nova {
            api: Api::new(request_timeout, &BTreeMap::new(), &ca),
            creds,
            redactor,
            session: tokio::sync::Mutex::new(None),
            service_ids: Mutex::new(BTreeMap::new()),
        })
    }

    async fn login(&self) -> Result<Session, ComputeError> {
        let c = &self.creds;
        let base = c.auth_url.trim_end_matches('/');
        let base = base.strip_suffix("/v3").unwrap_or(base);
        let url = format!("{base}/v3/auth/tokens");
        let body = json!({
            "auth": {
                "identity": { "methods": ["password"], "password": { "user": {
                    "name": c.username, "domain": { "name": c.user_domain },
                    "password": c.password.expose(),
                } } },
                "scope": { "project": { "name": c.project_name, "domain": { "name": c.project_domain } } },
            }
        });
        let (headers, v) = self
            .api
            .call(Method::POST, &url, None, Body::Json(&body))
            .await
            .map_err(|e| err(e, &self.redactor))?;
        let token = headers
            .get("x-subject-token")
            .and_then(|h| h.to_str().ok())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ComputeError(format!("POST {url}: no X-Subject-Token in the answer")))?
            .to_owned();
        let catalog = v["token"]["catalog"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let nova =
            crate::steps::find_endpoint(&catalog, "compute", c.interface.as_str(), &c.region)
                .ok_or_else(|| {
                    ComputeError(format!(
                        "the catalog has no {} compute endpoint in region {}",
                        c.interface.as_str(),
                        c.region
                    ))
                })?;
        // Keystone's default lifetime is an hour; a token is renewed a minute before it ends.
        let expires = v["token"]["expires_at"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| (t.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds())
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(3600)
            .saturating_sub(60);
        Ok(Session {
            token,
            nova: nova.trim_end_matches('/').to_owned(),
            until: Instant::now() + Duration::from_secs(expires),
        })
    }

    /// One call to nova with a valid token (a new one after a 401, once).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, CallError> {
        for attempt in 0..2 {
            let (token, nova) = {
                let mut s = self.session.lock().await;
                if s.as_ref().is_none_or(|s| Instant::now() >= s.until) {
                    *s = Some(self.login().await.map_err(|e| CallError {
                        method: "POST".into(),
                        url: self.creds.auth_url.clone(),
                        status: None,
                        message: e.0,
                    })?);
                }
                let s = s.as_ref().expect("just set");
                (s.token.clone(), s.nova.clone())
            };
            let url = format!("{nova}{path}");
            let reply = self
                .api
                .send_with(
                    method.clone(),
                    &url,
                    Some(&token),
                    &[("OpenStack-API-Version", &format!("compute {MICROVERSION}"))],
                    body.map_or(Body::None, Body::Json),
                )
                .await?;
            if reply.status == 401 && attempt == 0 {
                *self.session.lock().await = None;
                continue;
            }
            if !reply.ok() {
                return Err(crate::http::status_error(&method, &url, &reply));
            }
            return Ok(reply.json());
        }
        unreachable!("the loop returns on its second pass")
    }

    async fn action(&self, id: &str, body: Value) -> Result<(), ComputeError> {
        self.call(Method::POST, &format!("/servers/{id}/action"), Some(&body))
            .await
            .map(drop)
            .map_err(|e| err(e, &self.redactor))
    }
}

fn instance(v: &Value) -> Instance {
    let s = |k: &str| v[k].as_str().map(str::to_owned);
    Instance {
        id: s("id").unwrap_or_default(),
        name: s("name").unwrap_or_default(),
        status: s("status").unwrap_or_default(),
        host: s("OS-EXT-SRV-ATTR:host"),
        task_state: s("OS-EXT-STS:task_state"),
    }
}

#[async_trait::async_trait]
impl ComputeHosts for Nova {
    async fn services(&self) -> Result<Vec<ComputeService>, ComputeError> {
        let v = self
            .call(Method::GET, "/os-services?binary=nova-compute", None)
            .await
            .map_err(|e| err(e, &self.redactor))?;
        let mut ids = BTreeMap::new();
        let out = v["services"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|s| {
                let host = s["host"].as_str().unwrap_or_default().to_owned();
                if let Some(id) = s["id"].as_str() {
                    ids.insert(host.clone(), id.to_owned());
                }
                ComputeService {
                    host,
                    enabled: s["status"] == "enabled",
                    up: s["state"] == "up",
                }
            })
            .collect();
        *self.service_ids.lock().unwrap_or_else(|e| e.into_inner()) = ids;
        Ok(out)
    }

    async fn set_enabled(
        &self,
        host: &str,
        enabled: bool,
        reason: &str,
    ) -> Result<(), ComputeError> {
        let known = self
            .service_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(host)
            .cloned();
        let id = match known {
            Some(id) => id,
            None => {
                self.services().await?;
                self.service_ids
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(host)
                    .cloned()
                    .ok_or_else(|| {
                        ComputeError(format!("no nova-compute service on host {host}"))
                    })?
            }
        };
        let body = if enabled {
            json!({ "status": "enabled" })
        } else {
            json!({ "status": "disabled", "disabled_reason": reason })
        };
        self.call(Method::PUT, &format!("/os-services/{id}"), Some(&body))
            .await
            .map(drop)
            .map_err(|e| err(e, &self.redactor))
    }

    async fn instances_on(&self, host: &str) -> Result<Vec<Instance>, ComputeError> {
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut path = format!("/servers/detail?all_tenants=1&host={host}&limit=200");
            if let Some(m) = &marker {
                path.push_str(&format!("&marker={m}"));
            }
            let v = self
                .call(Method::GET, &path, None)
                .await
                .map_err(|e| err(e, &self.redactor))?;
            let page: Vec<Instance> = v["servers"]
                .as_array()
                .map(|a| a.as_slice())
                .unwrap_or_default()
                .iter()
                .map(instance)
                .collect();
            let more = page.len() == 200;
            marker = page.last().map(|i| i.id.clone());
            out.extend(page);
            if !more {
                return Ok(out);
            }
        }
    }

    async fn instance(&self, id: &str) -> Result<Option<Instance>, ComputeError> {
        match self
            .call(Method::GET, &format!("/servers/{id}"), None)
            .await
        {
            Ok(v) => Ok(Some(instance(&v["server"]))),
            Err(e) if e.status == Some(404) => Ok(None),
            Err(e) => Err(err(e, &self.redactor)),
        }
    }

    async fn live_migrate(&self, id: &str) -> Result<(), ComputeError> {
        self.action(
            id,
            json!({ "os-migrateLive": { "host": null, "block_migration": "auto" } }),
        )
        .await
    }

    async fn cold_migrate(&self, id: &str) -> Result<(), ComputeError> {
        self.action(id, json!({ "migrate": null })).await
    }

    async fn confirm_migration(&self, id: &str) -> Result<(), ComputeError> {
        self.action(id, json!({ "confirmResize": null })).await
    }
}
