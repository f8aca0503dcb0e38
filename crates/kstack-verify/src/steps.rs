//! The steps: each one a few API calls that a user of the cloud would make. A step returns the
//! line the report shows, or a [`Failure`] naming the failing call; whatever it creates goes
//! into [`Run::created`] as soon as the API has answered with its id.
use std::time::Instant;

use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::cleanup::{Created, Kind, Owner};
use crate::guest::Console;
use crate::http::{Api, Body, CallError, status_error};
use crate::ssh::{self, Key};
use crate::{
    Event, Outcome, Password, Redactor, Settings, Step, StepReport, not_run, secs, skipped,
};

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
            api: Api::new(s.request_timeout, &s.resolve),
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
        }
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

    async fn token(&mut self) -> Result<String, Failure> {
        let session = self
            .authenticate(
                json!({ "name": self.s.username, "domain": { "id": "default" } }),
                &self.s.password,
                json!({ "name": self.s.project, "domain": { "id": "default" } }),
            )
            .await?;
        let detail = format!(
            "{} in project {}; {} services in the catalog",
            self.s.username,
            self.s.project,
            session.catalog.len()
        );
        self.admin = Some(session);
        Ok(detail)
    }

    async fn endpoints(&mut self) -> Result<String, Failure> {
        let admin = self.admin()?;
        let iface = self.s.interface.as_str();
        let region = &self.s.region;
        // (service type, responsible kstack service, url)
        let mut probes: Vec<(String, Option<String>, String)> = Vec::new();
        let mut ignored = Vec::new();
        for entry in &admin.catalog {
            let ty = entry["type"].as_str().unwrap_or_default().to_owned();
            let owner = self.s.service_of_type(&ty);
            if let Some((_, info)) = owner
                && !info.enabled
            {
                ignored.push(ty);
                continue;
            }
            for ep in entry["endpoints"].as_array().into_iter().flatten() {
                if ep["interface"] == iface && in_region(ep, region) {
                    let url = ep["url"].as_str().unwrap_or_default().to_owned();
                    probes.push((ty.clone(), owner.map(|(n, _)| n.to_owned()), url));
                }
            }
        }
        let mut failures: Vec<(String, Option<String>, Failure)> = Vec::new();
        for (name, info) in &self.s.services {
            if let Some(ty) = &info.service_type
                && info.enabled
                && !probes.iter().any(|(t, _, _)| t == ty)
            {
                failures.push((
                    ty.clone(),
                    Some(name.clone()),
                    Failure::check(format!(
                        "no {iface} endpoint of type {ty} in region {region} (registered by {name})"
                    )),
                ));
            }
        }
        let token = admin.token.clone();
        let results = join_all(probes.iter().map(|(_, _, url)| {
            let api = self.api.clone();
            let token = token.clone();
            async move {
                let reply = api.send(Method::GET, url, Some(&token), Body::None).await?;
                if reply.status >= 500 {
                    Err(status_error(&Method::GET, url, &reply))
                } else {
                    Ok(reply.status)
                }
            }
        }))
        .await;
        for ((ty, owner, _), r) in probes.iter().zip(results) {
            if let Err(e) = r {
                failures.push((ty.clone(), owner.clone(), Failure::from(e)));
            }
        }
        if failures.is_empty() {
            let mut types: Vec<&str> = probes.iter().map(|(t, _, _)| t.as_str()).collect();
            types.dedup();
            let mut detail = format!(
                "{} {iface} endpoints answer: {}",
                probes.len(),
                types.join(", ")
            );
            if !ignored.is_empty() {
                detail.push_str(&format!(
                    " (not checked, service disabled: {})",
                    ignored.join(", ")
                ));
            }
            return Ok(detail);
        }
        let message = failures
            .iter()
            .map(|(ty, _, f)| format!("{ty}: {}", f.message))
            .collect::<Vec<_>>()
            .join("; ");
        let mut services: Vec<String> = failures.iter().filter_map(|(_, o, _)| o.clone()).collect();
        services.sort();
        services.dedup();
        let call = failures.iter().find_map(|(_, _, f)| f.call.clone());
        Err(Failure {
            message: format!(
                "{} of {} endpoints failed: {message}",
                failures.len(),
                probes.len().max(failures.len())
            ),
            call,
            services: Some(services),
        })
    }

    async fn project_user(&mut self) -> Result<String, Failure> {
        let token = self.admin()?.token.clone();
        let ks = self.keystone.clone();
        let name = self.s.prefix.clone();
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{ks}/v3/projects"),
                Some(&token),
                Body::Json(&json!({ "project": {
                    "name": name, "domain_id": "default", "enabled": true,
                    "description": "kstack verify scratch project",
                }})),
            )
            .await?;
        let project_id = id_of(&v["project"], "project")?;
        self.record(
            Kind::Project,
            &project_id,
            format!("{ks}/v3/projects/{project_id}"),
            Owner::Admin,
        );

        let body = json!({ "user": {
            "name": name, "domain_id": "default", "enabled": true,
            "default_project_id": project_id, "password": self.user_password.expose(),
        }});
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{ks}/v3/users"),
                Some(&token),
                Body::Json(&body),
            )
            .await?;
        let user_id = id_of(&v["user"], "user")?;
        self.record(
            Kind::User,
            &user_id,
            format!("{ks}/v3/users/{user_id}"),
            Owner::Admin,
        );

        let (_, v) = self
            .api
            .call(
                Method::GET,
                &format!("{ks}/v3/roles?name=member"),
                Some(&token),
                Body::None,
            )
            .await?;
        let role_id = v["roles"]
            .as_array()
            .and_then(|r| r.first())
            .and_then(|r| r["id"].as_str())
            .ok_or_else(|| Failure::check("Keystone has no role named `member`"))?
            .to_owned();
        self.api
            .call(
                Method::PUT,
                &format!("{ks}/v3/projects/{project_id}/users/{user_id}/roles/{role_id}"),
                Some(&token),
                Body::None,
            )
            .await?;
        let password = self.user_password.clone();
        let session = self
            .authenticate(
                json!({ "id": user_id }),
                &password,
                json!({ "id": project_id }),
            )
            .await?;
        self.user = Some(session);
        Ok(format!(
            "project and user {name} (role member); token issued as that user"
        ))
    }

    async fn image(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let token = user.token.clone();
        let glance = self.endpoint(user, "image")?;
        let name = self.s.prefix.clone();
        let (data, props, what) = match self.s.guest.clone() {
            Some(g) => {
                let what = format!(
                    "guest kernel ({}), initramfs ({}) and a ",
                    mib(g.kernel.len()),
                    mib(g.ramdisk.len())
                );
                // Nova boots the kernel and initramfs directly; the disk names them.
                let kernel = self
                    .upload(
                        &token,
                        &glance,
                        &format!("{name}-kernel"),
                        "aki",
                        json!({}),
                        g.kernel,
                    )
                    .await?;
                let ramdisk = self
                    .upload(
                        &token,
                        &glance,
                        &format!("{name}-ramdisk"),
                        "ari",
                        json!({}),
                        g.ramdisk,
                    )
                    .await?;
                let props = json!({
                    "kernel_id": kernel, "ramdisk_id": ramdisk, "os_command_line": g.cmdline,
                });
                (g.disk, props, what)
            }
            None => (image_bytes(self.s.image_bytes), json!({}), String::new()),
        };
        let want = hex::encode(Sha256::digest(&data));
        let size = data.len();
        let id = self
            .upload(&token, &glance, &name, "raw", props, data)
            .await?;
        let file = format!("{glance}/v2/images/{id}/file");
        let reply = self
            .api
            .send(Method::GET, &file, Some(&token), Body::None)
            .await?;
        if !reply.ok() {
            return Err(status_error(&Method::GET, &file, &reply).into());
        }
        let got = hex::encode(Sha256::digest(&reply.body));
        if got != want {
            return Err(Failure::check(format!(
                "GET {file}: the image read back differs from the upload: {} bytes with SHA-256 {got}, uploaded {size} bytes with SHA-256 {want}",
                reply.body.len()
            )));
        }
        self.image_id = Some(id);
        Ok(format!(
            "{what}{} raw image uploaded, active, read back with the same SHA-256 ({})",
            mib(size),
            &want[..12]
        ))
    }

    /// Creates an image (`disk_format` `raw`, `aki` or `ari`, with extra properties), uploads
    /// `data` and waits until it is active; returns its id.
    async fn upload(
        &mut self,
        token: &str,
        glance: &str,
        name: &str,
        disk_format: &str,
        props: Value,
        data: Vec<u8>,
    ) -> Result<String, Failure> {
        let container_format = match disk_format {
            "aki" | "ari" => disk_format,
            _ => "bare",
        };
        let mut body = json!({
            "name": name, "disk_format": disk_format,
            "container_format": container_format, "visibility": "private",
        });
        if let (Some(body), Some(props)) = (body.as_object_mut(), props.as_object()) {
            body.extend(props.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{glance}/v2/images"),
                Some(token),
                Body::Json(&body),
            )
            .await?;
        let id = id_of(&v, "image")?;
        let url = format!("{glance}/v2/images/{id}");
        self.record(Kind::Image, &id, url.clone(), Owner::User);
        self.api
            .call(
                Method::PUT,
                &format!("{url}/file"),
                Some(token),
                Body::Bytes(data),
            )
            .await?;
        let deadline = Instant::now() + self.s.timeout;
        loop {
            let (_, v) = self
                .api
                .call(Method::GET, &url, Some(token), Body::None)
                .await?;
            match v["status"].as_str().unwrap_or_default() {
                "active" => return Ok(id),
                bad @ ("killed" | "deleted" | "deactivated") => {
                    return Err(Failure::check(format!(
                        "image {id} went to status {bad} after the upload"
                    )));
                }
                other => {
                    if Instant::now() >= deadline {
                        return Err(Failure::check(format!(
                            "image {id} not active after {:?} (status {other})",
                            self.s.timeout
                        )));
                    }
                }
            }
            tokio::time::sleep(self.s.poll_interval).await;
        }
    }

    async fn network(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let token = user.token.clone();
        let neutron = self.endpoint(user, "network")?;
        let name = self.s.prefix.clone();
        let v2 = format!("{neutron}/v2.0");
        // Before the router, so that the cleanup (newest first) deletes the router first.
        let external = self.external_network(&token, &v2).await?;
        let (router, _) = self
            .create(
                &token,
                &format!("{v2}/routers"),
                Kind::Router,
                Owner::User,
                json!({ "name": name }),
            )
            .await?;
        let cidr = self.s.cidr.clone();
        let net = self
            .routed_network(&token, &v2, &router, &name, &cidr)
            .await?;
        self.network_id = Some(net);
        // With a guest, a second network behind the same router: a server there must answer
        // the first one's ping (routing between tenant networks).
        let second = match (&self.s.guest, next_subnet(&cidr)) {
            (Some(_), Some(cidr_b)) => {
                let name_b = format!("{name}-b");
                let (network, subnet) = self.tenant_network(&token, &v2, &name_b, &cidr_b).await?;
                self.second_network = Some(SecondNetwork {
                    network,
                    subnet,
                    name: name_b.clone(),
                    router: router.clone(),
                });
                format!(
                    ", a second network {name_b} ({cidr_b}), without a router until its server has its metadata"
                )
            }
            _ => String::new(),
        };
        let gateway = match external {
            Some((ext, ext_name)) => {
                self.api
                    .call(
                        Method::PUT,
                        &format!("{v2}/routers/{router}"),
                        Some(&token),
                        Body::Json(&json!({ "router": {
                            "external_gateway_info": { "network_id": ext },
                        }})),
                    )
                    .await?;
                self.external_id = Some(ext);
                format!(", gateway on the external network {ext_name}")
            }
            None => ", no external network for a gateway".to_owned(),
        };
        Ok(format!(
            "network, subnet {cidr} and router {name}, subnet attached{second}{gateway}"
        ))
    }

    /// A network named `name` with the IPv4 subnet `cidr`, attached to `router` (each recorded
    /// for the cleanup, which removes the interface before the subnet); its id.
    async fn routed_network(
        &mut self,
        token: &str,
        v2: &str,
        router: &str,
        name: &str,
        cidr: &str,
    ) -> Result<String, Failure> {
        let (net, subnet) = self.tenant_network(token, v2, name, cidr).await?;
        self.attach(token, v2, router, name, &subnet).await?;
        Ok(net)
    }

    /// A network named `name` with the IPv4 subnet `cidr` (both recorded for the cleanup): the
    /// network's and the subnet's ids.
    async fn tenant_network(
        &mut self,
        token: &str,
        v2: &str,
        name: &str,
        cidr: &str,
    ) -> Result<(String, String), Failure> {
        let (net, _) = self
            .create(
                token,
                &format!("{v2}/networks"),
                Kind::Network,
                Owner::User,
                json!({ "name": name }),
            )
            .await?;
        let (subnet, _) = self
            .create(
                token,
                &format!("{v2}/subnets"),
                Kind::Subnet,
                Owner::User,
                json!({ "name": name, "network_id": net, "ip_version": 4, "cidr": cidr }),
            )
            .await?;
        Ok((net, subnet))
    }

    /// Attaches `subnet` (of the network `name`) to `router`, recorded for the cleanup, which
    /// removes the interface before the subnet.
    async fn attach(
        &mut self,
        token: &str,
        v2: &str,
        router: &str,
        name: &str,
        subnet: &str,
    ) -> Result<(), Failure> {
        let attach = json!({ "subnet_id": subnet });
        self.api
            .call(
                Method::PUT,
                &format!("{v2}/routers/{router}/add_router_interface"),
                Some(token),
                Body::Json(&attach),
            )
            .await?;
        self.created.push(Created {
            kind: Kind::RouterInterface,
            name: name.to_owned(),
            id: subnet.to_owned(),
            url: format!("{v2}/routers/{router}/remove_router_interface"),
            owner: Owner::User,
            body: Some(attach),
        });
        Ok(())
    }

    /// The external network to put the router's gateway on: the one `--external-network`
    /// names, else the only one the cloud has (`router:external`), else, with
    /// `--external-subnet`, a scratch one the run makes as the admin, else none.
    async fn external_network(
        &mut self,
        token: &str,
        v2: &str,
    ) -> Result<Option<(String, String)>, Failure> {
        let (_, v) = self
            .api
            .call(
                Method::GET,
                &format!("{v2}/networks?router:external=true"),
                Some(token),
                Body::None,
            )
            .await?;
        let nets: Vec<(String, String)> = v["networks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| Some((n["id"].as_str()?.to_owned(), n["name"].as_str()?.to_owned())))
            .collect();
        match &self.s.external_network {
            Some(want) => nets
                .into_iter()
                .find(|(id, name)| id == want || name == want)
                .map(Some)
                .ok_or_else(|| {
                    Failure::check(format!(
                        "no external network named {want} (router:external networks visible to the user)"
                    ))
                }),
            None if nets.len() == 1 => Ok(nets.into_iter().next()),
            None if nets.is_empty() && self.s.external_subnet.is_some() => {
                self.scratch_external_network().await.map(Some)
            }
            None => Ok(None),
        }
    }

    /// A flat provider network on `physnet1` (the bridge of the first
    /// `neutron_external_interface`) with `--external-subnet`, its first address the gateway,
    /// made and later deleted by the admin; returns its id and name.
    async fn scratch_external_network(&mut self) -> Result<(String, String), Failure> {
        let admin = self.admin()?;
        let token = admin.token.clone();
        let neutron = self.endpoint(admin, "network")?;
        let v2 = format!("{neutron}/v2.0");
        let cidr = self.s.external_subnet.clone().unwrap_or_default();
        let name = format!("{}-external", self.s.prefix);
        let (net, _) = self
            .create(
                &token,
                &format!("{v2}/networks"),
                Kind::Network,
                Owner::Admin,
                json!({
                    "name": name, "router:external": true,
                    "provider:network_type": "flat", "provider:physical_network": "physnet1",
                }),
            )
            .await?;
        self.create(
            &token,
            &format!("{v2}/subnets"),
            Kind::Subnet,
            Owner::Admin,
            json!({
                "name": name, "network_id": net, "ip_version": 4, "cidr": cidr,
                "enable_dhcp": false,
            }),
        )
        .await?;
        Ok((net, name))
    }

    async fn flavor(&mut self) -> Result<String, Failure> {
        let admin = self.admin()?;
        let token = admin.token.clone();
        let nova = self.endpoint(admin, "compute")?;
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{nova}/flavors"),
                Some(&token),
                Body::Json(&json!({ "flavor": {
                    "name": self.s.prefix, "vcpus": 1, "ram": 128, "disk": 1,
                }})),
            )
            .await?;
        let id = id_of(&v["flavor"], "flavor")?;
        self.record(
            Kind::Flavor,
            &id,
            format!("{nova}/flavors/{id}"),
            Owner::Admin,
        );
        self.flavor_id = Some(id);
        Ok("1 vCPU, 128 MiB RAM, 1 GiB disk".to_owned())
    }

    async fn server(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let token = user.token.clone();
        let nova = self.endpoint(user, "compute")?;
        let (Some(image), Some(flavor), Some(net)) =
            (&self.image_id, &self.flavor_id, &self.network_id)
        else {
            return Err(Failure::check(
                "no image, flavor or network from the steps before",
            ));
        };
        let mut server = json!({
            "name": self.s.prefix, "imageRef": image, "flavorRef": flavor,
            "networks": [{ "uuid": net }],
        });
        // The guest gets the run's key from the metadata service, and a security group that
        // lets SSH and ping in.
        let key = if self.s.guest.is_some() {
            let key = Key::generate().map_err(Failure::check)?;
            let sg = self.login_access(&token).await?;
            server["key_name"] = json!(self.s.prefix);
            server["security_groups"] = json!([{ "name": sg }]);
            self.register_key(&token, &nova, &key).await?;
            Some(key)
        } else {
            None
        };
        let (id, url) = self.boot(&token, &nova, &server).await?;
        let booted = Instant::now();
        // The second server boots beside the first (same key and security group).
        let second = match (&key, self.second_network.as_ref()) {
            (Some(_), Some(net_b)) => {
                let mut b = server.clone();
                b["name"] = json!(format!("{}-b", self.s.prefix));
                b["networks"] = json!([{ "uuid": net_b.network }]);
                Some(self.boot(&token, &nova, &b).await?)
            }
            _ => None,
        };
        self.wait_active(&token, &id, &url).await?;
        let active = secs(booted);
        let (guest, session) = match &key {
            Some(key) => {
                let mut detail = self
                    .guest(&token, &url, &id, &self.s.prefix, "the router")
                    .await?;
                let session = match self.external_id.clone() {
                    Some(ext) => {
                        let (d, session) = self.login(&token, &id, &ext, key).await?;
                        detail.push_str("; ");
                        detail.push_str(&d);
                        Some(session)
                    }
                    None => {
                        detail
                            .push_str("; no external network, so no floating IP and no SSH login");
                        None
                    }
                };
                (format!("; {detail}"), session)
            }
            None => (String::new(), None),
        };
        let across = match (&second, &session) {
            (Some((id_b, url_b)), Some(session)) => {
                self.wait_active(&token, id_b, url_b).await?;
                let name_b = format!("{}-b", self.s.prefix);
                // Its network has no router yet: the metadata came through the DHCP port.
                self.guest(&token, url_b, id_b, &name_b, "its network's DHCP port")
                    .await?;
                let net_b = self
                    .second_network
                    .clone()
                    .ok_or_else(|| Failure::check("the second network is gone".to_owned()))?;
                let v2 = format!("{}/v2.0", self.endpoint(self.user()?, "network")?);
                self.attach(&token, &v2, &net_b.router, &net_b.name, &net_b.subnet)
                    .await?;
                let d = self.ping_across(session, &token, id_b, url_b).await?;
                self.delete_and_wait(Kind::Server, url_b, &token).await?;
                d
            }
            _ => String::new(),
        };
        let guest = format!("{guest}{across}");
        // With Cinder, a volume attached to the running server, which its deletion releases (a
        // detach from a running guest waits for the guest to let the device go).
        let volume = if self.s.project_enabled("cinder") {
            let cinder = self.endpoint(self.user()?, "block-storage")?;
            let (volume, t) = self.attach_volume(&token, &cinder, &url).await?;
            let written = match &session {
                Some(session) => Some(self.write_volume(session).await?),
                None => None,
            };
            Some((volume, t, written))
        } else {
            None
        };
        let deleting = Instant::now();
        self.delete_and_wait(Kind::Server, &url, &token).await?;
        let gone = secs(deleting);
        let attached = match volume {
            Some((volume, t, written)) => {
                self.wait_volume(&volume, &token, "available").await?;
                self.delete_and_wait(Kind::Volume, &volume, &token).await?;
                format!(
                    "; a 1 GiB volume attached (in-use) after {t:.1} s{}, available again once the server was deleted",
                    written.unwrap_or_default()
                )
            }
            None => String::new(),
        };
        Ok(format!(
            "ACTIVE after {active:.1} s{guest}{attached}; deleted and gone after {gone:.1} s"
        ))
    }

    /// Creates a server (recorded for the cleanup): its id and URL.
    async fn boot(
        &mut self,
        token: &str,
        nova: &str,
        server: &Value,
    ) -> Result<(String, String), Failure> {
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{nova}/servers"),
                Some(token),
                Body::Json(&json!({ "server": server })),
            )
            .await?;
        let id = id_of(&v["server"], "server")?;
        let url = format!("{nova}/servers/{id}");
        self.record(Kind::Server, &id, url.clone(), Owner::User);
        Ok((id, url))
    }

    /// Waits until the server is ACTIVE; ERROR (with nova's fault) or the time limit fail.
    async fn wait_active(&self, token: &str, id: &str, url: &str) -> Result<(), Failure> {
        let deadline = Instant::now() + self.s.timeout;
        loop {
            let (_, v) = self
                .api
                .call(Method::GET, url, Some(token), Body::None)
                .await?;
            let s = &v["server"];
            match s["status"].as_str().unwrap_or_default() {
                "ACTIVE" => return Ok(()),
                "ERROR" => {
                    let fault = s["fault"]["message"].as_str().unwrap_or("no fault message");
                    return Err(Failure::check(format!(
                        "server {id} went to ERROR: {fault}"
                    )));
                }
                other => {
                    if Instant::now() >= deadline {
                        let task = s["OS-EXT-STS:task_state"].as_str().unwrap_or("none");
                        return Err(Failure::check(format!(
                            "server {id} not ACTIVE after {:?} (status {other}, task state {task})",
                            self.s.timeout
                        )));
                    }
                }
            }
            tokio::time::sleep(self.s.poll_interval).await;
        }
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

    /// From the first guest (over SSH), the second server's fixed address on the other
    /// network answers ping: the router routes between the two tenant networks.
    async fn ping_across(
        &self,
        session: &ssh::Session,
        token: &str,
        id_b: &str,
        url_b: &str,
    ) -> Result<String, Failure> {
        let (_, v) = self
            .api
            .call(Method::GET, url_b, Some(token), Body::None)
            .await?;
        let address = addresses(&v["server"])
            .into_iter()
            .next()
            .ok_or_else(|| Failure::check(format!("server {id_b} has no address")))?;
        let started = Instant::now();
        // The router's new port may take a few seconds to pass traffic: a ping every second or
        // two until the first reply, for up to 40 s (the guest's busybox ping stops after its
        // count of pings, replied or not); the last one's statistics for the report.
        let (status, out) = session
            .run(
                &format!(
                    "i=0; while [ $i -lt 20 ]; do ping -c 1 -W 1 {address} >/dev/null 2>&1 && exit 0; sleep 1; i=$((i+1)); done; ping -c 1 -W 1 {address}"
                ),
                COMMAND_TIMEOUT * 4,
            )
            .await
            .map_err(|e| Failure::check(format!("no SSH: {e}")))?;
        if status != 0 {
            let last: Vec<&str> = out.lines().rev().take(2).collect();
            return Err(Failure::check(format!(
                "no route between the tenant networks: no reply to `ping {address}` in 40 s (server {id_b}, the second network) from the first guest, exit {status}: {}",
                last.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )));
        }
        Ok(format!(
            "; the second server, on a network without a router, got its lease and its metadata through the network's DHCP port, and once that network was attached to the same router answered the first one's ping at {address} ({:.1} s)",
            secs(started)
        ))
    }

    /// Reads the guest's console until it has reported its lease, its metadata and its SSH
    /// server, or given up on one of them; a failure names the first layer it did not reach.
    /// `via` says what the metadata came through (the router, or the DHCP port of a network
    /// without one).
    async fn guest(
        &self,
        token: &str,
        url: &str,
        id: &str,
        name: &str,
        via: &str,
    ) -> Result<String, Failure> {
        let started = Instant::now();
        let deadline = started + self.s.timeout;
        let action = format!("{url}/action");
        let (console, log) = loop {
            let (_, v) = self
                .api
                .call(
                    Method::POST,
                    &action,
                    Some(token),
                    Body::Json(&json!({ "os-getConsoleOutput": {} })),
                )
                .await?;
            let log = v["output"].as_str().unwrap_or_default().to_owned();
            let console = Console::read(&log);
            if console.settled() || Instant::now() >= deadline {
                break (console, log);
            }
            tokio::time::sleep(self.s.poll_interval).await;
        };
        let (_, v) = self
            .api
            .call(Method::GET, url, Some(token), Body::None)
            .await?;
        let addresses = addresses(&v["server"]);
        if let Some(why) = console.failure(id, name, &addresses) {
            // What the guest's init reported, or, when it reported nothing, the console's end.
            let lines: Vec<&str> = log.lines().map(str::trim_end).collect();
            let mut shown: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l.contains("kstack-guest: "))
                .collect();
            if shown.is_empty() {
                shown = lines[lines.len().saturating_sub(12)..].to_vec();
            }
            return Err(Failure {
                message: format!(
                    "server {id}: {why} (after {:.1} s; its console: {})",
                    secs(started),
                    shown.join(" | ")
                ),
                call: None,
                services: None,
            });
        }
        let lease = console.lease.map(|l| l.address).unwrap_or_default();
        Ok(format!(
            "the guest got its lease {lease} and its metadata (its instance id, hostname) through {via} and started SSH {:.1} s after ACTIVE",
            secs(started)
        ))
    }

    /// Registers the run's public key with nova as a key pair named like the run.
    async fn register_key(&mut self, token: &str, nova: &str, key: &Key) -> Result<(), Failure> {
        let name = self.s.prefix.clone();
        self.api
            .call(
                Method::POST,
                &format!("{nova}/os-keypairs"),
                Some(token),
                Body::Json(&json!({ "keypair": { "name": name, "public_key": key.public } })),
            )
            .await?;
        self.record(
            Kind::Keypair,
            &name,
            format!("{nova}/os-keypairs/{name}"),
            Owner::User,
        );
        Ok(())
    }

    /// A security group that lets SSH and ping in (the default group lets nothing in); returns
    /// its id.
    async fn login_access(&mut self, token: &str) -> Result<String, Failure> {
        let neutron = self.endpoint(self.user()?, "network")?;
        let v2 = format!("{neutron}/v2.0");
        let name = self.s.prefix.clone();
        let (sg, _) = self
            .create(
                token,
                &format!("{v2}/security-groups"),
                Kind::SecurityGroup,
                Owner::User,
                json!({ "name": name }),
            )
            .await?;
        for (protocol, port) in [("tcp", Some(22)), ("icmp", None)] {
            let mut rule = json!({
                "security_group_id": sg, "direction": "ingress", "ethertype": "IPv4",
                "protocol": protocol,
            });
            if let Some(port) = port {
                rule["port_range_min"] = json!(port);
                rule["port_range_max"] = json!(port);
            }
            self.api
                .call(
                    Method::POST,
                    &format!("{v2}/security-group-rules"),
                    Some(token),
                    Body::Json(&json!({ "security_group_rule": rule })),
                )
                .await?;
        }
        Ok(sg)
    }

    /// A floating IP on the external network for the server's port, then an SSH login to it
    /// with the run's key: the hostname the guest reports must be the server's name.
    async fn login(
        &mut self,
        token: &str,
        server_id: &str,
        ext: &str,
        key: &Key,
    ) -> Result<(String, ssh::Session), Failure> {
        let neutron = self.endpoint(self.user()?, "network")?;
        let v2 = format!("{neutron}/v2.0");
        let (_, v) = self
            .api
            .call(
                Method::GET,
                &format!("{v2}/ports?device_id={server_id}"),
                Some(token),
                Body::None,
            )
            .await?;
        let port = v["ports"][0]["id"]
            .as_str()
            .ok_or_else(|| Failure::check(format!("server {server_id} has no port")))?
            .to_owned();
        let (fip, v) = self
            .create(
                token,
                &format!("{v2}/floatingips"),
                Kind::FloatingIp,
                Owner::User,
                json!({ "floating_network_id": ext, "port_id": port }),
            )
            .await?;
        let address: std::net::IpAddr = v["floating_ip_address"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| Failure::check(format!("floating IP {fip} has no address")))?;
        let started = Instant::now();
        let deadline = started + self.s.timeout;
        let addr = std::net::SocketAddr::new(address, 22);
        // The router's NAT for a new floating IP takes a moment; until then nothing answers.
        let session = loop {
            let attempt = std::time::Duration::from_secs(10);
            match ssh::Session::login(addr, GUEST_USER, key, attempt).await {
                Ok(s) => break s,
                Err(e) => {
                    if Instant::now() >= deadline {
                        let layer = match e {
                            ssh::SshError::Connect(_) => "no floating IP",
                            _ => "no SSH",
                        };
                        return Err(Failure::check(format!(
                            "{layer}: server {server_id} at its floating IP {address}: {e} (after {:.1} s)",
                            secs(started)
                        )));
                    }
                    tokio::time::sleep(self.s.poll_interval).await;
                }
            }
        };
        let login = secs(started);
        let (status, out) = session
            .run("hostname", COMMAND_TIMEOUT)
            .await
            .map_err(|e| Failure::check(format!("no SSH: {e}")))?;
        let hostname = out.trim();
        if status != 0 || hostname != self.s.prefix {
            return Err(Failure::check(format!(
                "SSH to {address}: `hostname` exited {status} with {hostname:?}, the server is named {}",
                self.s.prefix
            )));
        }
        Ok((
            format!(
                "logged in over SSH as {GUEST_USER} with the run's key at the floating IP {address} after {login:.1} s, hostname {hostname}"
            ),
            session,
        ))
    }

    /// On the guest, the attached volume is a block device: bytes written to it (past the
    /// page cache) read back the same.
    async fn write_volume(&self, session: &ssh::Session) -> Result<String, Failure> {
        let token = format!("kstack-verify-{:016x}", rand::random::<u64>());
        let command = format!(
            "i=0; while [ ! -b /dev/vdb ] && [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done; \
             printf %s {token} | dd of=/dev/vdb conv=fsync 2>/dev/null && \
             echo 3 > /proc/sys/vm/drop_caches && head -c {} /dev/vdb",
            token.len()
        );
        let (status, out) = session
            .run(&command, COMMAND_TIMEOUT * 8)
            .await
            .map_err(|e| Failure::check(format!("no SSH: {e}")))?;
        if status != 0 || out != token {
            return Err(Failure::check(format!(
                "the attached volume on the guest: writing and reading back /dev/vdb exited {status} with {:?}, wrote {token:?}",
                out.chars().take(200).collect::<String>()
            )));
        }
        Ok(", written and read back on the guest as /dev/vdb".to_owned())
    }

    async fn volume(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let token = user.token.clone();
        let cinder = self.endpoint(user, "block-storage")?;
        let created = Instant::now();
        let (_, url) = self.new_volume(&token, &cinder).await?;
        let available = secs(created);
        let deleting = Instant::now();
        self.delete_and_wait(Kind::Volume, &url, &token).await?;
        Ok(format!(
            "1 GiB volume available after {available:.1} s; deleted and gone after {:.1} s",
            secs(deleting)
        ))
    }

    /// Creates a 1 GiB volume as the user and waits until it is available; its id and URL.
    async fn new_volume(&mut self, token: &str, cinder: &str) -> Result<(String, String), Failure> {
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{cinder}/volumes"),
                Some(token),
                Body::Json(&json!({ "volume": { "name": self.s.prefix, "size": 1 } })),
            )
            .await?;
        let id = id_of(&v["volume"], "volume")?;
        let url = format!("{cinder}/volumes/{id}");
        self.record(Kind::Volume, &id, url.clone(), Owner::User);
        self.wait_volume(&url, token, "available").await?;
        Ok((id, url))
    }

    /// Waits until the volume at `url` has status `want`; a status starting with `error` fails.
    async fn wait_volume(&self, url: &str, token: &str, want: &str) -> Result<(), Failure> {
        let deadline = Instant::now() + self.s.timeout;
        loop {
            let (_, v) = self
                .api
                .call(Method::GET, url, Some(token), Body::None)
                .await?;
            let status = v["volume"]["status"].as_str().unwrap_or_default();
            if status == want {
                return Ok(());
            }
            if status.starts_with("error") {
                return Err(Failure::check(format!(
                    "volume {url} went to {status} (the scheduler found no backend, or the backend or the hypervisor failed)"
                )));
            }
            if Instant::now() >= deadline {
                return Err(Failure::check(format!(
                    "volume {url} not {want} after {:?} (status {status})",
                    self.s.timeout
                )));
            }
            tokio::time::sleep(self.s.poll_interval).await;
        }
    }

    /// Attaches a new volume to the running server at `server` (a compute URL) and waits until
    /// Cinder says it is in use; the volume's URL and the seconds it took.
    async fn attach_volume(
        &mut self,
        token: &str,
        cinder: &str,
        server: &str,
    ) -> Result<(String, f64), Failure> {
        let started = Instant::now();
        let (id, url) = self.new_volume(token, cinder).await?;
        self.api
            .call(
                Method::POST,
                &format!("{server}/os-volume_attachments"),
                Some(token),
                Body::Json(&json!({ "volumeAttachment": { "volumeId": id } })),
            )
            .await?;
        self.wait_volume(&url, token, "in-use").await?;
        Ok((url, secs(started)))
    }

    async fn stack(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let token = user.token.clone();
        let heat = self.endpoint(user, "orchestration")?;
        let name = self.s.prefix.clone();
        let minutes = self.s.timeout.as_secs().div_ceil(60).max(1);
        // With heat-api-cfn, a wait condition too: Heat makes a stack user and a pre-signed
        // URL of the CloudFormation-compatible API, and the stack completes only once that URL
        // is signalled (as a server's boot script would).
        let cfn = self
            .s
            .service_of_type("cloudformation")
            .is_some_and(|(_, info)| info.enabled);
        let mut resources = json!({ "random": {
            "type": "OS::Heat::RandomString",
            "properties": { "length": 8 },
        }});
        if cfn {
            resources["handle"] = json!({
                "type": "OS::Heat::WaitConditionHandle",
                "properties": { "signal_transport": "CFN_SIGNAL" },
            });
            resources["wait"] = json!({
                "type": "OS::Heat::WaitCondition",
                "properties": {
                    "handle": { "get_resource": "handle" },
                    "timeout": self.s.timeout.as_secs().max(1),
                    "count": 1,
                },
            });
        }
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{heat}/stacks"),
                Some(&token),
                Body::Json(&json!({
                    "stack_name": name,
                    "timeout_mins": minutes,
                    "template": {
                        "heat_template_version": "2018-08-31",
                        "description": "kstack verify",
                        "resources": resources,
                    },
                })),
            )
            .await?;
        let id = id_of(&v["stack"], "stack")?;
        let url = format!("{heat}/stacks/{name}/{id}");
        self.record(Kind::Stack, &id, url.clone(), Owner::User);
        let created = Instant::now();
        let deadline = created + self.s.timeout;
        let mut signalled: Option<f64> = None;
        loop {
            let (_, v) = self
                .api
                .call(Method::GET, &url, Some(&token), Body::None)
                .await?;
            let s = &v["stack"];
            match s["stack_status"].as_str().unwrap_or_default() {
                "CREATE_COMPLETE" => break,
                bad @ ("CREATE_FAILED" | "ROLLBACK_COMPLETE" | "ROLLBACK_FAILED") => {
                    let reason = s["stack_status_reason"]
                        .as_str()
                        .unwrap_or("no reason given");
                    return Err(Failure::check(format!(
                        "stack {name} went to {bad}: {reason}"
                    )));
                }
                other => {
                    if Instant::now() >= deadline {
                        let waiting = if cfn && signalled.is_none() {
                            ", its wait condition handle never offered a signal URL"
                        } else {
                            ""
                        };
                        return Err(Failure::check(format!(
                            "stack {name} not CREATE_COMPLETE after {:?} (status {other}{waiting})",
                            self.s.timeout
                        )));
                    }
                    if cfn
                        && signalled.is_none()
                        && self.signal_wait_condition(&url, &token).await?
                    {
                        signalled = Some(secs(created));
                    }
                }
            }
            tokio::time::sleep(self.s.poll_interval).await;
        }
        let complete = secs(created);
        let deleting = Instant::now();
        self.api
            .call(Method::DELETE, &url, Some(&token), Body::None)
            .await?;
        crate::cleanup::wait_gone(&self.api, self.s, Kind::Stack, &url, &token)
            .await
            .map_err(Failure::check)?;
        self.forget(&url);
        let what = match signalled {
            Some(t) => {
                format!("stack with a wait condition signalled through heat-api-cfn after {t:.1} s")
            }
            None => "OS::Heat::RandomString stack".to_owned(),
        };
        Ok(format!(
            "{what} CREATE_COMPLETE after {complete:.1} s; deleted after {:.1} s",
            secs(deleting)
        ))
    }

    /// Signals the wait condition of the stack at `stack_url` once its handle exists: reads
    /// the handle's `signal` attribute (a pre-signed URL of heat-api-cfn) and PUTs a success
    /// to it, without a token. `Ok(false)`: the handle has no URL yet.
    async fn signal_wait_condition(&self, stack_url: &str, token: &str) -> Result<bool, Failure> {
        let (_, v) = self
            .api
            .call(
                Method::GET,
                &format!("{stack_url}/resources/handle?with_attr=signal"),
                Some(token),
                Body::None,
            )
            .await?;
        let signal = &v["resource"]["attributes"]["signal"];
        // A JSON document in a string attribute (an object from some Heat versions).
        let signal = match signal {
            Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            other => other.clone(),
        };
        let Some(alarm_url) = signal["alarm_url"].as_str().filter(|u| !u.is_empty()) else {
            return Ok(false);
        };
        let reply = self
            .api
            .put_presigned(
                alarm_url,
                &json!({
                    "status": "SUCCESS",
                    "reason": "signalled by kstack verify",
                    "data": "ok",
                    "id": "kstack-verify",
                }),
            )
            .await?;
        if !reply.ok() {
            return Err(status_error(
                &Method::PUT,
                &crate::http::presigned_display(alarm_url),
                &reply,
            )
            .into());
        }
        Ok(true)
    }

    async fn horizon(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let base = match find_endpoint(&user.catalog, "dashboard", self.s.interface.as_str(), &self.s.region) {
            Some(u) => u,
            None => self.s.horizon_url.clone().map(|u| u.trim_end_matches('/').to_owned()).ok_or_else(|| {
                Failure::check("no Horizon URL: the catalog has no dashboard endpoint and none was given (--horizon-url)")
            })?,
        };
        let url = format!("{base}/auth/login/");
        let reply = self.api.page(&url).await?;
        if reply.status != 200 {
            return Err(status_error(&Method::GET, &url, &reply).into());
        }
        let page = String::from_utf8_lossy(&reply.body);
        if !(page.contains("<form") && page.contains("name=\"password\"")) {
            return Err(CallError {
                method: "GET".into(),
                url,
                status: Some(200),
                message: "the page has no login form (no <form> with a password field)".into(),
            }
            .into());
        }
        Ok(format!(
            "{url}: 200 with a login form ({} KiB)",
            reply.body.len().div_ceil(1024)
        ))
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
/// Every address of a server (nova's `addresses`, over all its networks).
fn addresses(server: &Value) -> Vec<String> {
    server["addresses"]
        .as_object()
        .into_iter()
        .flat_map(|nets| nets.values())
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|a| a["addr"].as_str().map(str::to_owned))
        .collect()
}

/// The IPv4 block of the same size right after `cidr` (`10.99.0.0/24` → `10.99.1.0/24`);
/// `None` when it is not an IPv4 block or none follows.
pub(crate) fn next_subnet(cidr: &str) -> Option<String> {
    let (addr, len) = cidr.split_once('/')?;
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok().filter(|l| (1..=30).contains(l))?;
    let size = 1u32 << (32 - len);
    let base = u32::from(addr) & !(size - 1);
    let next = base.checked_add(size)?;
    Some(format!("{}/{len}", std::net::Ipv4Addr::from(next)))
}

fn id_of(v: &Value, what: &str) -> Result<String, Failure> {
    v["id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| Failure::check(format!("the answer creating the {what} has no id")))
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// The guest's user (`hack/guest.sh`'s image has CirrOS' user name, as tempest expects).
const GUEST_USER: &str = "cirros";
/// Time limit of one command on the guest.
const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// A raw disk image of `len` bytes: a master boot record whose code halts the CPU (so a
/// server booted from it idles) and whose one partition (Linux, type 0x83) holds the rest:
/// random bytes, so every run uploads different content. Nova's image safety check refuses
/// an MBR without a partition.
pub(crate) fn image_bytes(len: usize) -> Vec<u8> {
    use rand::RngCore as _;
    let len = len.max(1024);
    let mut data = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut data[512..]);
    data[..512].fill(0);
    // cli; hlt; jmp $-2
    data[..4].copy_from_slice(&[0xFA, 0xF4, 0xEB, 0xFD]);
    // Partition 1 at 446: not active, CHS fields saturated (LBA addressing), type 0x83,
    // first sector 1, every whole sector after it.
    let sectors = u32::try_from(len / 512 - 1).unwrap_or(u32::MAX);
    let entry = &mut data[446..462];
    entry[..4].copy_from_slice(&[0x00, 0xFE, 0xFF, 0xFF]);
    entry[4..8].copy_from_slice(&[0x83, 0xFE, 0xFF, 0xFF]);
    entry[8..12].copy_from_slice(&1u32.to_le_bytes());
    entry[12..16].copy_from_slice(&sectors.to_le_bytes());
    data[510] = 0x55;
    data[511] = 0xAA;
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_network_is_the_next_block_of_the_same_size() {
        assert_eq!(next_subnet("10.99.0.0/24").as_deref(), Some("10.99.1.0/24"));
        assert_eq!(next_subnet("10.99.0.7/24").as_deref(), Some("10.99.1.0/24"));
        assert_eq!(
            next_subnet("192.168.0.0/28").as_deref(),
            Some("192.168.0.16/28")
        );
        assert_eq!(next_subnet("255.255.255.0/24"), None);
        assert_eq!(next_subnet("fd00::/64"), None);
        assert_eq!(next_subnet("10.0.0.0/31"), None);
    }

    #[test]
    fn images_boot_sector_and_random_rest() {
        let a = image_bytes(4096);
        let b = image_bytes(4096);
        assert_eq!(a.len(), 4096);
        assert_eq!(&a[510..512], &[0x55, 0xAA]);
        assert_eq!(a[..512], b[..512]);
        assert_ne!(a[512..], b[512..]);
        // One Linux partition from sector 1 to the end (7 sectors of 512 bytes).
        assert_eq!(a[446 + 4], 0x83);
        assert_eq!(&a[446 + 8..446 + 12], &1u32.to_le_bytes());
        assert_eq!(&a[446 + 12..446 + 16], &7u32.to_le_bytes());
        assert!(a[462..510].iter().all(|&b| b == 0), "one partition only");
    }

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
