//! The stack step: a Heat stack (with heat-api-cfn, one with a wait condition the step
//! signals through its pre-signed URL) created, complete and deleted.
use std::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};

use super::{Failure, Run, id_of};
use crate::cleanup::{Kind, Owner};
use crate::http::{Body, status_error};
use crate::secs;

impl Run<'_> {
    pub(super) async fn stack(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let token = user.token.clone();
        let heat = self.endpoint(user, "orchestration")?;
        let name = self.s.prefix.clone();
        let minutes = self.s.timeout.as_secs().div_ceil(60).max(1);
        // With heat-api-cfn, a wait condition too: Heat makes a stack user and a pre-signed
        // URL of the CloudFormation-compatible API, and the stack completes only once that URL
        // is signalled (as a server's boot script would). Where heat-api-cfn cannot check
        // signed requests (Keystone refuses its calls on that release), the handle gives the
        // stack user's token for heat-api instead, as a template for that release would ask.
        let cfn = self
            .s
            .service_of_type("cloudformation")
            .is_some_and(|(_, info)| info.enabled);
        let presigned = self.s.heat_cfn_signed_requests;
        let mut resources = json!({ "random": {
            "type": "OS::Heat::RandomString",
            "properties": { "length": 8 },
        }});
        if cfn {
            let transport = if presigned {
                "CFN_SIGNAL"
            } else {
                "TOKEN_SIGNAL"
            };
            resources["handle"] = json!({
                "type": "OS::Heat::WaitConditionHandle",
                "properties": { "signal_transport": transport },
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
                            ", its wait condition handle never offered a way to signal it"
                        } else {
                            ""
                        };
                        return Err(Failure::check(format!(
                            "stack {name} not CREATE_COMPLETE after {:?} (status {other}{waiting})",
                            self.s.timeout
                        )));
                    }
                    if cfn && signalled.is_none() && self.signal(&url, &heat, &token).await? {
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
            Some(t) if presigned => {
                format!("stack with a wait condition signalled through heat-api-cfn after {t:.1} s")
            }
            Some(t) => format!(
                "stack with a wait condition signalled with its handle's token through heat-api \
                 after {t:.1} s (heat-api-cfn cannot check signed requests on this release)"
            ),
            None => "OS::Heat::RandomString stack".to_owned(),
        };
        Ok(format!(
            "{what} CREATE_COMPLETE after {complete:.1} s; deleted after {:.1} s",
            secs(deleting)
        ))
    }

    /// Signals the wait condition of the stack at `stack_url` once its handle exists, the way
    /// its transport says. `CFN_SIGNAL` (heat-api-cfn checks signed requests): PUTs a success to
    /// the handle's `signal` attribute, a pre-signed URL of heat-api-cfn, without a token.
    /// `TOKEN_SIGNAL`: POSTs it with the handle's `token` (the stack user's) to its `endpoint`,
    /// which is on heat-api's URL in Heat's own configuration (its internal one): the call goes
    /// to the same path on `heat`, the catalog's URL this run uses. `Ok(false)`: the handle
    /// offers no way yet.
    async fn signal(&self, stack_url: &str, heat: &str, token: &str) -> Result<bool, Failure> {
        let attrs = if self.s.heat_cfn_signed_requests {
            "signal"
        } else {
            "token&with_attr=endpoint"
        };
        let (_, v) = self
            .api
            .call(
                Method::GET,
                &format!("{stack_url}/resources/handle?with_attr={attrs}"),
                Some(token),
                Body::None,
            )
            .await?;
        let attrs = &v["resource"]["attributes"];
        let success = json!({
            "status": "SUCCESS",
            "reason": "signalled by kstack verify",
            "data": "ok",
            "id": "kstack-verify",
        });
        if !self.s.heat_cfn_signed_requests {
            let text = |k: &str| attrs[k].as_str().filter(|t| !t.is_empty());
            let (Some(handle_token), Some(endpoint)) = (text("token"), text("endpoint")) else {
                return Ok(false);
            };
            let signal_url = on_base(heat, endpoint).ok_or_else(|| {
                Failure::check(format!(
                    "the wait condition handle's endpoint {endpoint} is not a heat-api URL \
                     (…/v1/<project>/stacks/…)"
                ))
            })?;
            self.api
                .call(
                    Method::POST,
                    &signal_url,
                    Some(handle_token),
                    Body::Json(&success),
                )
                .await?;
            return Ok(true);
        }
        // A JSON document in a string attribute (an object from some Heat versions).
        let signal = match &attrs["signal"] {
            Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            other => other.clone(),
        };
        let Some(alarm_url) = signal["alarm_url"].as_str().filter(|u| !u.is_empty()) else {
            return Ok(false);
        };
        let reply = self.api.put_presigned(alarm_url, &success).await?;
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
}

/// `endpoint`'s path after heat-api's version (`<project>/stacks/...`) on `heat`, a heat-api
/// URL of the catalog (`https://host:8004/v1/<project>`). `None` when either has no `/v1/`.
fn on_base(heat: &str, endpoint: &str) -> Option<String> {
    let (base, _) = heat.split_once("/v1/")?;
    let (_, path) = endpoint.split_once("/v1/")?;
    Some(format!("{base}/v1/{path}"))
}

#[cfg(test)]
mod tests {
    use super::on_base;

    #[test]
    fn a_handle_endpoint_moves_to_the_catalogs_heat_url_keeping_its_project() {
        assert_eq!(
            on_base(
                "https://172.24.4.1:8004/v1/user-project",
                "http://heat-api.openstack.svc:8004/v1/stack-project/stacks/s/1/resources/handle/signal"
            )
            .as_deref(),
            Some("https://172.24.4.1:8004/v1/stack-project/stacks/s/1/resources/handle/signal")
        );
        assert_eq!(on_base("https://h:8004/", "http://x/v1/p/stacks"), None);
        assert_eq!(on_base("https://h:8004/v1/p", "http://x/stacks"), None);
    }
}
