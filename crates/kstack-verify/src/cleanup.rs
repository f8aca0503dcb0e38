//! Deleting what a run created, newest first, each with the token that created it. A resource
//! that is already gone (404) counts as deleted; a failed deletion is reported and the next one
//! is still tried, so one stuck resource does not leave the rest behind.
use std::time::Instant;

use reqwest::Method;
use serde_json::Value;

use crate::http::{Api, Body, status_error};
use crate::steps::Run;
use crate::{CleanupReport, Event, Outcome, Settings, secs};

/// What kind of resource a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Project,
    User,
    Image,
    Network,
    Subnet,
    Router,
    /// The subnet's port on the router; removed with `remove_router_interface`.
    RouterInterface,
    Flavor,
    Server,
    Stack,
    Volume,
    Keypair,
    SecurityGroup,
    FloatingIp,
    ServerGroup,
}

impl Kind {
    const ALL: [Kind; 15] = [
        Kind::Project,
        Kind::User,
        Kind::Image,
        Kind::Network,
        Kind::Subnet,
        Kind::Router,
        Kind::RouterInterface,
        Kind::Flavor,
        Kind::Server,
        Kind::Stack,
        Kind::Volume,
        Kind::Keypair,
        Kind::SecurityGroup,
        Kind::FloatingIp,
        Kind::ServerGroup,
    ];

    /// The kind [`Kind::name`] names.
    pub fn named(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Project => "project",
            Kind::User => "user",
            Kind::Image => "image",
            Kind::Network => "network",
            Kind::Subnet => "subnet",
            Kind::Router => "router",
            Kind::RouterInterface => "router interface of subnet",
            Kind::Flavor => "flavor",
            Kind::Server => "server",
            Kind::Stack => "stack",
            Kind::Volume => "volume",
            Kind::Keypair => "key pair",
            Kind::SecurityGroup => "security group",
            Kind::FloatingIp => "floating IP",
            Kind::ServerGroup => "server group",
        }
    }
}

/// Whose token deletes it: the one that created it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Admin,
    User,
}

impl Owner {
    pub fn name(self) -> &'static str {
        match self {
            Owner::Admin => "admin",
            Owner::User => "user",
        }
    }
}

/// One created resource.
#[derive(Debug, Clone)]
pub(crate) struct Created {
    pub kind: Kind,
    pub name: String,
    pub id: String,
    /// The URL that deletes it (DELETE; PUT with `body` for a router interface).
    pub url: String,
    pub owner: Owner,
    pub body: Option<Value>,
}

impl Created {
    fn describe(&self) -> String {
        format!("{} {} ({})", self.kind.name(), self.name, self.id)
    }
}

impl Run<'_> {
    /// Deletes every recorded resource, servers first (a server holds the volumes attached
    /// to it, its ports and their floating IPs, though they were made after it), then the
    /// rest newest first.
    pub async fn cleanup(&mut self, on_event: &(dyn Fn(Event<'_>) + Sync)) -> Vec<CleanupReport> {
        let mut reports = Vec::new();
        let mut created = std::mem::take(&mut self.created);
        created.reverse();
        created.sort_by_key(|c| c.kind != Kind::Server);
        for c in created.iter() {
            let started = Instant::now();
            let session = match c.owner {
                Owner::User => self.user.as_ref().or(self.admin.as_ref()),
                Owner::Admin => self.admin.as_ref(),
            };
            let result = match session {
                Some(s) => delete(&self.api, self.s, c, &s.token).await,
                None => Err("no token to delete it with".to_owned()),
            };
            let (result, detail) = match result {
                Ok(d) => (Outcome::Ok, d),
                Err(e) => (Outcome::Failed, e),
            };
            let report = self.redactor.cleanup(CleanupReport {
                resource: c.describe(),
                result,
                seconds: secs(started),
                detail,
            });
            on_event(Event::Cleaned(&report));
            reports.push(report);
        }
        reports
    }
}

/// Deletes one resource and, for a server or a stack, waits until it is gone. `Ok` carries a
/// note (`already gone`), `Err` why it is still there.
async fn delete(api: &Api, s: &Settings, c: &Created, token: &str) -> Result<String, String> {
    // A volume that was attached to a server deleted just before is released a moment later:
    // Cinder takes no delete while it is still in use or detaching.
    if c.kind == Kind::Volume {
        wait_released(api, s, &c.url, token).await?;
    }
    let (method, body) = match (&c.kind, &c.body) {
        (Kind::RouterInterface, Some(b)) => (Method::PUT, Body::Json(b)),
        _ => (Method::DELETE, Body::None),
    };
    let reply = api
        .send(method.clone(), &c.url, Some(token), body)
        .await
        .map_err(|e| e.to_string())?;
    if reply.status == 404 {
        return Ok("already gone".to_owned());
    }
    if !reply.ok() {
        return Err(status_error(&method, &c.url, &reply).to_string());
    }
    if c.kind == Kind::Volume {
        return volume_gone(api, s, &c.url, token).await;
    }
    if matches!(c.kind, Kind::Server | Kind::Stack) {
        wait_gone(api, s, c.kind, &c.url, token).await?;
    }
    Ok(String::new())
}

/// Waits until a volume whose delete was accepted is gone. Cinder puts a volume it could not
/// delete because its storage still had it open (Ceph keeps a watch on an image for a while
/// after the QEMU that used it exits) back to `available`: then the delete is sent again, until
/// the time limit.
async fn volume_gone(api: &Api, s: &Settings, url: &str, token: &str) -> Result<String, String> {
    let deadline = Instant::now() + s.timeout;
    let mut again = 0;
    loop {
        let Some(status) = volume_status(api, url, token).await? else {
            return Ok(if again > 0 {
                format!("deleted after {again} more attempts (busy)")
            } else {
                String::new()
            });
        };
        if status == "error_deleting" {
            return Err(format!("volume {url}: error_deleting"));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "volume {url} still there after {:?} (status {status}, {again} more delete attempts)",
                s.timeout
            ));
        }
        tokio::time::sleep(s.poll_interval).await;
        if status == "available" {
            let reply = api
                .send(Method::DELETE, url, Some(token), Body::None)
                .await
                .map_err(|e| e.to_string())?;
            if reply.ok() {
                again += 1;
            }
        }
    }
}

/// Waits until the volume at `url` is neither attached nor on its way in or out of an
/// attachment (or gone).
async fn wait_released(api: &Api, s: &Settings, url: &str, token: &str) -> Result<(), String> {
    let deadline = Instant::now() + s.timeout;
    loop {
        let status = match volume_status(api, url, token).await? {
            None => return Ok(()),
            Some(status) => status,
        };
        if !matches!(
            status.as_str(),
            "in-use" | "attaching" | "detaching" | "reserved"
        ) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "volume {url} still {status} after {:?}: not deleted",
                s.timeout
            ));
        }
        tokio::time::sleep(s.poll_interval).await;
    }
}

/// The status of the volume at `url`; `None` once it is gone.
async fn volume_status(api: &Api, url: &str, token: &str) -> Result<Option<String>, String> {
    let reply = api
        .send(Method::GET, url, Some(token), Body::None)
        .await
        .map_err(|e| e.to_string())?;
    if reply.status == 404 {
        return Ok(None);
    }
    if !reply.ok() {
        return Err(status_error(&Method::GET, url, &reply).to_string());
    }
    Ok(Some(
        reply.json()["volume"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    ))
}

/// Waits until GET on a server, stack or volume says 404 (or the stack says DELETE_COMPLETE).
pub(crate) async fn wait_gone(
    api: &Api,
    s: &Settings,
    kind: Kind,
    url: &str,
    token: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + s.timeout;
    loop {
        let reply = api
            .send(Method::GET, url, Some(token), Body::None)
            .await
            .map_err(|e| e.to_string())?;
        if reply.status == 404 {
            return Ok(());
        }
        if !reply.ok() {
            return Err(status_error(&Method::GET, url, &reply).to_string());
        }
        let v = reply.json();
        let status = match kind {
            Kind::Stack => v["stack"]["stack_status"].as_str(),
            Kind::Volume => v["volume"]["status"].as_str(),
            _ => v["server"]["status"].as_str(),
        }
        .unwrap_or_default()
        .to_owned();
        match status.as_str() {
            "DELETE_COMPLETE" | "DELETED" | "SOFT_DELETED" => return Ok(()),
            "error_deleting" => {
                return Err(format!("{} {url}: error_deleting", kind.name()));
            }
            "DELETE_FAILED" => {
                let reason = v["stack"]["stack_status_reason"]
                    .as_str()
                    .unwrap_or("no reason given");
                return Err(format!("{} {url}: DELETE_FAILED: {reason}", kind.name()));
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            let fault = v["server"]["fault"]["message"]
                .as_str()
                .map(|f| format!(", fault: {f}"))
                .unwrap_or_default();
            return Err(format!(
                "{} {url} still there after {:?} (status {status}{fault})",
                kind.name(),
                s.timeout
            ));
        }
        tokio::time::sleep(s.poll_interval).await;
    }
}
