//! The flavor and server steps: a flavor made by the admin, then a server booted from the
//! step's image on the step's network, active, (with Cinder) a volume attached, deleted and
//! gone. What it checks on a guest image is in [`super::guest`].
use std::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};

use super::{Failure, Run, id_of};
use crate::cleanup::{Kind, Owner};
use crate::http::Body;
use crate::secs;
use crate::ssh::Key;

impl Run<'_> {
    pub(super) async fn flavor(&mut self) -> Result<String, Failure> {
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

    pub(super) async fn server(&mut self) -> Result<String, Failure> {
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
            self.ssh_key = Some(key.clone());
            Some(key)
        } else {
            None
        };
        // Two servers go to different compute hosts where the cloud has several (a server
        // group of soft anti-affinity, as a user spreads a service), so the ping between them
        // crosses hosts; with one host they share it.
        let hints = match (&key, self.second_network.is_some()) {
            (Some(_), true) => Some(json!({ "group": self.server_group(&token, &nova).await? })),
            _ => None,
        };
        let (id, url) = self.boot(&token, &nova, &server, hints.as_ref()).await?;
        self.server_id = Some(id.clone());
        let booted = Instant::now();
        // The second server boots beside the first (same key and security group), once the
        // first has its host: the scheduler knows a group's hosts from its placed members only.
        let second = match (&key, self.second_network.as_ref()) {
            (Some(_), Some(net_b)) => {
                self.wait_placed(&token, &url).await?;
                let mut b = server.clone();
                b["name"] = json!(format!("{}-b", self.s.prefix));
                b["networks"] = json!([{ "uuid": net_b.network }]);
                Some(self.boot(&token, &nova, &b, hints.as_ref()).await?)
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
                let d = self.ping_across(session, &token, &url, id_b, url_b).await?;
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
        if self.s.keep {
            let attached = match volume {
                Some((_, t, written)) => format!(
                    "; a 1 GiB volume attached (in-use) after {t:.1} s{}",
                    written.unwrap_or_default()
                ),
                None => String::new(),
            };
            return Ok(format!(
                "ACTIVE after {active:.1} s{guest}{attached}; kept running"
            ));
        }
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

    /// A server group of soft anti-affinity (recorded for the cleanup): its id. Nova places
    /// its servers on different hosts when it can, on one when it cannot.
    async fn server_group(&mut self, token: &str, nova: &str) -> Result<String, Failure> {
        // `policy` (one string) and the soft policies need microversion 2.64 and 2.15.
        let (_, v) = self
            .api
            .call_with(
                Method::POST,
                &format!("{nova}/os-server-groups"),
                Some(token),
                &[("OpenStack-API-Version", "compute 2.64")],
                Body::Json(&json!({ "server_group": {
                    "name": self.s.prefix, "policy": "soft-anti-affinity",
                }})),
            )
            .await?;
        let id = id_of(&v["server_group"], "server group")?;
        self.record(
            Kind::ServerGroup,
            &id,
            format!("{nova}/os-server-groups/{id}"),
            Owner::User,
        );
        Ok(id)
    }

    /// Creates a server (recorded for the cleanup), with scheduler hints if given: its id
    /// and URL.
    async fn boot(
        &mut self,
        token: &str,
        nova: &str,
        server: &Value,
        hints: Option<&Value>,
    ) -> Result<(String, String), Failure> {
        let mut body = json!({ "server": server });
        if let Some(h) = hints {
            body["os:scheduler_hints"] = h.clone();
        }
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{nova}/servers"),
                Some(token),
                Body::Json(&body),
            )
            .await?;
        let id = id_of(&v["server"], "server")?;
        let url = format!("{nova}/servers/{id}");
        self.record(Kind::Server, &id, url.clone(), Owner::User);
        Ok((id, url))
    }

    /// Reads the server every poll interval until `answer` gives a result for what nova says
    /// of it (`server`), or the time limit passed: then `late` gives the result.
    async fn poll_server(
        &self,
        token: &str,
        url: &str,
        answer: impl Fn(&Value) -> Option<Result<(), Failure>>,
        late: impl FnOnce(&Value) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        let deadline = Instant::now() + self.s.timeout;
        loop {
            let (_, v) = self
                .api
                .call(Method::GET, url, Some(token), Body::None)
                .await?;
            if let Some(result) = answer(&v["server"]) {
                return result;
            }
            if Instant::now() >= deadline {
                return late(&v["server"]);
            }
            tokio::time::sleep(self.s.poll_interval).await;
        }
    }

    /// Waits until the server has a host (its `hostId`, which its project sees), or has left
    /// BUILD (what then went wrong is [`Run::wait_active`]'s to say), or the time limit passed.
    async fn wait_placed(&self, token: &str, url: &str) -> Result<(), Failure> {
        self.poll_server(
            token,
            url,
            |s| {
                (s["hostId"].as_str().is_some_and(|h| !h.is_empty())
                    || s["status"].as_str() != Some("BUILD"))
                .then_some(Ok(()))
            },
            |_| Ok(()),
        )
        .await
    }

    /// Waits until the server is ACTIVE; ERROR (with nova's fault) or the time limit fail.
    async fn wait_active(&self, token: &str, id: &str, url: &str) -> Result<(), Failure> {
        self.poll_server(
            token,
            url,
            |s| match s["status"].as_str() {
                Some("ACTIVE") => Some(Ok(())),
                Some("ERROR") => {
                    let fault = s["fault"]["message"].as_str().unwrap_or("no fault message");
                    Some(Err(Failure::check(format!(
                        "server {id} went to ERROR: {fault}"
                    ))))
                }
                _ => None,
            },
            |s| {
                let status = s["status"].as_str().unwrap_or_default();
                let task = s["OS-EXT-STS:task_state"].as_str().unwrap_or("none");
                Err(Failure::check(format!(
                    "server {id} not ACTIVE after {:?} (status {status}, task state {task})",
                    self.s.timeout
                )))
            },
        )
        .await
    }
}
