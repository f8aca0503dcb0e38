//! The steps: each one a few API calls that a user of the cloud would make. A step returns the
//! line the report shows, or a [`Failure`] naming the failing call; whatever it creates goes
//! into [`Run::created`] as soon as the API has answered with its id.
//!
//! This module holds the run's state ([`Run`]), the order of the steps and what they share
//! (recording what they create, sessions, endpoints, deleting and waiting); the steps live in
//! one submodule per group: `identity` (token, endpoints, scratch project and user), `image`,
//! `network`, `server` (flavor and server) with `guest` (what it checks on a guest image),
//! `volume`, `stack` and `horizon`.
use std::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};

use crate::cleanup::{Created, Kind, Owner};
use crate::http::{Api, Body, CallError};
use crate::{
    Event, Kept, KeptResource, KeptSecrets, Outcome, Password, Redactor, Settings, Step,
    StepReport, not_run, secs, skipped,
};

mod guest;
mod horizon;
mod identity;
mod image;
mod network;
mod neutron_view;
mod server;
mod stack;
mod volume;

/// Why a step failed.
pub(crate) struct Failure {
    pub message: String,
    pub call: Option<Box<CallError>>,
    /// Whose pods to look at, when not the step's own projects (the endpoint that failed).
    pub services: Option<Vec<String>>,
}

impl Failure {
    pub fn check(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            call: None,
            services: None,
        }
    }
}

impl From<CallError> for Failure {
    fn from(call: CallError) -> Failure {
        Failure {
            message: call.to_string(),
            call: Some(Box::new(call)),
            services: None,
        }
    }
}

/// A token and the catalog it came with.
pub(crate) struct Session {
    pub token: String,
    pub catalog: Vec<Value>,
}

/// The second tenant network of a run with a guest, and the router it joins later.
#[derive(Clone)]
struct SecondNetwork {
    network: String,
    subnet: String,
    name: String,
    router: String,
}

/// The state of one verify run.
pub(crate) struct Run<'a> {
    pub s: &'a Settings,
    pub api: Api,
    pub redactor: Redactor,
    /// When the running step started (for a report of an interrupted step).
    pub step_started: Option<Instant>,
    /// Keystone's base URL: the auth URL without a trailing `/` or `/v3`.
    pub keystone: String,
    pub admin: Option<Session>,
    pub user: Option<Session>,
    user_password: Password,
    /// Everything created and not yet deleted, in creation order.
    pub created: Vec<Created>,
    image_id: Option<String>,
    network_id: Option<String>,
    /// With a guest: a second network, isolated (no router) until its server has read its
    /// metadata through the network's DHCP port, then attached to the router.
    second_network: Option<SecondNetwork>,
    flavor_id: Option<String>,
    /// The external network the router's gateway is on (id), when the cloud has one.
    external_id: Option<String>,
    /// What a kept run reports: the scratch project and user, the first server, its
    /// floating IP and the run's SSH key.
    project_id: Option<String>,
    user_id: Option<String>,
    server_id: Option<String>,
    floating_ip: Option<String>,
    ssh_key: Option<crate::ssh::Key>,
}

impl<'a> Run<'a> {
    pub fn new(s: &'a Settings) -> Run<'a> {
        let user_password = Password::generate();
        let redactor = Redactor::new(
            [s.password.clone(), user_password.clone()]
                .into_iter()
                .chain(s.secrets.iter().cloned()),
        );
        let mut keystone = s.auth_url.trim_end_matches('/').to_owned();
        if let Some(base) = keystone.strip_suffix("/v3") {
            keystone = base.to_owned();
        }
        Run {
            s,
            api: Api::new(s.request_timeout, &s.resolve, &s.ca_certificates),
            redactor,
            step_started: None,
            keystone,
            admin: None,
            user: None,
            user_password,
            created: Vec::new(),
            image_id: None,
            network_id: None,
            second_network: None,
            flavor_id: None,
            external_id: None,
            project_id: None,
            user_id: None,
            server_id: None,
            floating_ip: None,
            ssh_key: None,
        }
    }

    /// The state that deletes a kept run's resources: its scratch user's password.
    pub fn for_kept(s: &'a Settings, user_password: Password) -> Run<'a> {
        let mut run = Run::new(s);
        run.redactor.add(user_password.clone());
        run.user_password = user_password;
        run
    }

    /// What this run made and did not delete, and the secrets that reach it.
    pub fn kept(&mut self) -> (Kept, KeptSecrets) {
        let resources = std::mem::take(&mut self.created)
            .into_iter()
            .map(|c| KeptResource {
                kind: c.kind.name().to_owned(),
                id: c.id,
                url: c.url,
                owner: c.owner.name().to_owned(),
                body: c.body,
            })
            .collect();
        let kept = Kept {
            prefix: self.s.prefix.clone(),
            project_id: self.project_id.clone(),
            user_id: self.user_id.clone(),
            server_id: self.server_id.clone(),
            floating_ip: self.floating_ip.clone(),
            login_user: self.ssh_key.as_ref().map(|_| guest::GUEST_USER.to_owned()),
            resources,
        };
        let secrets = KeptSecrets {
            user_password: self.user_password.clone(),
            // A key that cannot be written out leaves the guest reachable by nobody; the
            // resources are still deleted with the rest.
            ssh_private_key: self
                .ssh_key
                .as_ref()
                .and_then(|k| k.private_openssh().ok())
                .map(Password::new),
        };
        (kept, secrets)
    }

    /// Tokens for deleting a kept run's resources: the admin's, and the scratch user's when
    /// it can still log in (without it, the admin's token deletes the user's resources too).
    pub async fn login_for_kept(&mut self, kept: &Kept) -> Result<(), String> {
        self.token()
            .await
            .map_err(|f| self.redactor.redact(&f.message))?;
        if let (Some(user), Some(project)) = (&kept.user_id, &kept.project_id) {
            let password = self.user_password.clone();
            match self
                .authenticate(json!({ "id": user }), &password, json!({ "id": project }))
                .await
            {
                Ok(session) => self.user = Some(session),
                Err(f) => tracing::debug!(
                    "no token of the kept run's user: {}",
                    self.redactor.redact(&f.message)
                ),
            }
        }
        Ok(())
    }

    /// Takes a kept run's resources as this run's own, for [`Run::cleanup`].
    pub fn restore_kept(&mut self, kept: &Kept) -> Result<(), String> {
        for r in &kept.resources {
            let kind = Kind::named(&r.kind)
                .ok_or_else(|| format!("unknown kind of kept resource {:?}", r.kind))?;
            let owner = match r.owner.as_str() {
                "admin" => Owner::Admin,
                "user" => Owner::User,
                other => return Err(format!("unknown owner of kept resource {other:?}")),
            };
            self.created.push(Created {
                kind,
                name: kept.prefix.clone(),
                id: r.id.clone(),
                url: r.url.clone(),
                owner,
                body: r.body.clone(),
            });
        }
        Ok(())
    }

    /// Runs every step in order; after a failure the rest are not run.
    pub async fn steps(
        &mut self,
        reports: &mut Vec<StepReport>,
        on_event: &(dyn Fn(Event<'_>) + Sync),
    ) {
        let mut failed: Option<Step> = None;
        for step in Step::ALL {
            // A disabled service's step is skipped even after a failure: that says more.
            let report = if let Some(r) = skipped(self.s, step) {
                r
            } else if let Some(f) = failed {
                not_run(step, &format!("{f} failed"))
            } else {
                on_event(Event::Started(step));
                let started = Instant::now();
                self.step_started = Some(started);
                let result = self.step(step).await;
                let seconds = secs(started);
                match result {
                    Ok(detail) => StepReport {
                        step,
                        result: Outcome::Ok,
                        seconds,
                        detail,
                        call: None,
                        services: Vec::new(),
                    },
                    Err(f) => {
                        failed = Some(step);
                        StepReport {
                            step,
                            result: Outcome::Failed,
                            seconds,
                            detail: f.message,
                            call: f.call.map(|c| *c),
                            services: f
                                .services
                                .unwrap_or_else(|| self.s.services_of(step.responsible())),
                        }
                    }
                }
            };
            let report = self.redactor.step(report);
            on_event(Event::Finished(&report));
            reports.push(report);
        }
    }

    async fn step(&mut self, step: Step) -> Result<String, Failure> {
        match step {
            Step::Token => self.token().await,
            Step::Endpoints => self.endpoints().await,
            Step::ProjectUser => self.project_user().await,
            Step::Image => self.image().await,
            Step::Network => self.network().await,
            Step::Flavor => self.flavor().await,
            Step::Server => self.server().await,
            Step::Stack => self.stack().await,
            Step::Horizon => self.horizon().await,
            Step::Volume => self.volume().await,
        }
    }

    /// Creates a Neutron resource: POSTs `{ <kind's key>: body }` to its collection URL,
    /// records it for the cleanup (`<collection>/<id>`) and returns its id and the object the
    /// API answered with.
    async fn create(
        &mut self,
        token: &str,
        collection: &str,
        kind: Kind,
        owner: Owner,
        body: Value,
    ) -> Result<(String, Value), Failure> {
        let key = match kind {
            Kind::Network => "network",
            Kind::Subnet => "subnet",
            Kind::Router => "router",
            Kind::SecurityGroup => "security_group",
            Kind::FloatingIp => "floatingip",
            other => {
                return Err(Failure::check(format!(
                    "no Neutron collection for a {}",
                    other.name()
                )));
            }
        };
        let (_, mut v) = self
            .api
            .call(
                Method::POST,
                collection,
                Some(token),
                Body::Json(&json!({ key: body })),
            )
            .await?;
        let object = v[key].take();
        let id = id_of(&object, kind.name())?;
        self.record(kind, &id, format!("{collection}/{id}"), owner);
        Ok((id, object))
    }

    fn record(&mut self, kind: Kind, id: &str, url: String, owner: Owner) {
        tracing::debug!(kind = kind.name(), id, "created");
        self.created.push(Created {
            kind,
            name: self.s.prefix.clone(),
            id: id.to_owned(),
            url,
            owner,
            body: None,
        });
    }

    /// Drops a record once the step deleted the resource itself.
    fn forget(&mut self, url: &str) {
        self.created.retain(|c| c.url != url);
    }

    fn admin(&self) -> Result<&Session, Failure> {
        self.admin
            .as_ref()
            .ok_or_else(|| Failure::check("no admin token"))
    }

    fn user(&self) -> Result<&Session, Failure> {
        self.user
            .as_ref()
            .ok_or_else(|| Failure::check("no token of the scratch user"))
    }

    /// The URL of the endpoint of `service_type` in the session's catalog, for the configured
    /// interface and region, without a trailing `/`.
    fn endpoint(&self, session: &Session, service_type: &str) -> Result<String, Failure> {
        find_endpoint(
            &session.catalog,
            service_type,
            self.s.interface.as_str(),
            &self.s.region,
        )
        .ok_or_else(|| {
            Failure::check(format!(
                "the token's catalog has no {} endpoint of type {service_type} in region {}",
                self.s.interface.as_str(),
                self.s.region
            ))
        })
    }

    /// POST /v3/auth/tokens with a password, scoped to a project.
    async fn authenticate(
        &self,
        user: Value,
        password: &Password,
        project: Value,
    ) -> Result<Session, Failure> {
        let mut user = user;
        user["password"] = Value::String(password.expose().to_owned());
        let body = json!({
            "auth": {
                "identity": { "methods": ["password"], "password": { "user": user } },
                "scope": { "project": project },
            }
        });
        let url = format!("{}/v3/auth/tokens", self.keystone);
        let (headers, v) = self
            .api
            .call(Method::POST, &url, None, Body::Json(&body))
            .await?;
        let token = headers
            .get("x-subject-token")
            .and_then(|h| h.to_str().ok())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                Failure::check(format!(
                    "POST {url}: the answer has no X-Subject-Token header"
                ))
            })?
            .to_owned();
        let catalog = v["token"]["catalog"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(Session { token, catalog })
    }

    /// Deletes the `kind` at `url`, waits until it is gone and drops it from the cleanup.
    async fn delete_and_wait(&mut self, kind: Kind, url: &str, token: &str) -> Result<(), Failure> {
        self.api
            .call(Method::DELETE, url, Some(token), Body::None)
            .await?;
        crate::cleanup::wait_gone(&self.api, self.s, kind, url, token)
            .await
            .map_err(Failure::check)?;
        self.forget(url);
        Ok(())
    }
}

/// The first endpoint of `service_type` with that interface in that region.
pub(crate) fn find_endpoint(
    catalog: &[Value],
    service_type: &str,
    iface: &str,
    region: &str,
) -> Option<String> {
    catalog
        .iter()
        .filter(|e| e["type"] == service_type)
        .flat_map(|e| e["endpoints"].as_array().into_iter().flatten())
        .find(|ep| ep["interface"] == iface && in_region(ep, region))
        .and_then(|ep| ep["url"].as_str())
        .map(|u| u.trim_end_matches('/').to_owned())
}

fn in_region(ep: &Value, region: &str) -> bool {
    ep["region_id"] == region || ep["region"] == region
}

/// The `id` of a created resource; a missing one fails the step.
fn id_of(v: &Value, what: &str) -> Result<String, Failure> {
    v["id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| Failure::check(format!("the answer creating the {what} has no id")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_by_type_interface_and_region() {
        let catalog = vec![json!({
            "type": "image",
            "endpoints": [
                { "interface": "internal", "region_id": "RegionOne", "url": "http://in:9292" },
                { "interface": "public", "region_id": "RegionTwo", "url": "http://two:9292" },
                { "interface": "public", "region": "RegionOne", "url": "http://pub:9292/" },
            ],
        })];
        assert_eq!(
            find_endpoint(&catalog, "image", "public", "RegionOne").as_deref(),
            Some("http://pub:9292")
        );
        assert_eq!(
            find_endpoint(&catalog, "image", "internal", "RegionOne").as_deref(),
            Some("http://in:9292")
        );
        assert_eq!(
            find_endpoint(&catalog, "compute", "public", "RegionOne"),
            None
        );
    }
}
