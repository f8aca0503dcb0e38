//! The identity steps: the admin's token, every endpoint of the catalog, and the scratch
//! project and user the later steps work as.
use futures::future::join_all;
use reqwest::Method;
use serde_json::json;

use super::{Failure, Run, id_of, in_region};
use crate::cleanup::{Kind, Owner};
use crate::http::{Body, status_error};

impl Run<'_> {
    pub(super) async fn token(&mut self) -> Result<String, Failure> {
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

    pub(super) async fn endpoints(&mut self) -> Result<String, Failure> {
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

    pub(super) async fn project_user(&mut self) -> Result<String, Failure> {
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
        self.project_id = Some(project_id.clone());
        self.user_id = Some(user_id.clone());
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
}
