//! The volume step: a 1 GiB Cinder volume made, available, deleted and gone; and the volume
//! the server step attaches to its server.
use std::time::Instant;

use reqwest::Method;
use serde_json::json;

use super::{Failure, Run, id_of};
use crate::cleanup::{Kind, Owner};
use crate::http::Body;
use crate::secs;

impl Run<'_> {
    pub(super) async fn volume(&mut self) -> Result<String, Failure> {
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
    pub(super) async fn wait_volume(
        &self,
        url: &str,
        token: &str,
        want: &str,
    ) -> Result<(), Failure> {
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
    pub(super) async fn attach_volume(
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
}
