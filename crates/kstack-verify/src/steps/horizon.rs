//! The Horizon step: the dashboard's login page answers with a login form.
use reqwest::Method;

use super::{Failure, Run, find_endpoint};
use crate::http::{CallError, status_error};

impl Run<'_> {
    pub(super) async fn horizon(&mut self) -> Result<String, Failure> {
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
