//! What the real-node tests share: the cloud's admin password and a user's load on its APIs.
#![allow(dead_code)]
use anyhow::Context;
use kstack_e2e::cloud::Cloud;

/// The value of `key` in the cloud's passwords.yml.
pub fn password(cloud: &Cloud, key: &str) -> anyhow::Result<String> {
    let passwords = std::fs::read_to_string(cloud.dir.path().join(kstack_config::passwords::FILE))?;
    Ok(kstack_config::passwords::parse(&passwords)
        .map_err(|_| anyhow::anyhow!("the cloud's passwords.yml does not load"))?
        .get(key)
        .with_context(|| format!("{key} in passwords.yml"))?
        .to_owned())
}

/// The admin password of the cloud's passwords.yml.
pub fn admin_password(cloud: &Cloud) -> anyhow::Result<String> {
    password(cloud, "keystone_admin_password")
}

/// What a user's client saw while the cloud changed under it.
#[derive(Default)]
pub struct Load {
    pub rounds: u64,
    pub failures: Vec<String>,
}

impl Load {
    /// Fails unless at least 20 rounds ran and none of them failed; `during` says when.
    pub fn assert_clean(&self, during: &str) {
        assert!(
            self.rounds >= 20,
            "only {} rounds of token and image list {during}",
            self.rounds
        );
        assert!(
            self.failures.is_empty(),
            "{} of {} rounds failed {during}:\n{}",
            self.failures.len(),
            self.rounds,
            self.failures.join("\n")
        );
    }
}

/// Issues a token and lists images, again and again, until `stop` turns true: each round is
/// one POST /v3/auth/tokens to keystone and one GET /v2/images to glance, through their
/// Services' cluster IPs, as a user inside the cloud's network would.
pub async fn user_load(
    keystone: String,
    glance: String,
    password: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Load {
    let http = reqwest::Client::builder()
        // A user's client waits (keystoneauth sets no timeout); a minute still catches a hang.
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("an HTTP client");
    let body = serde_json::json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}});
    // The error with its causes (reqwest's own message names only the URL).
    let chain = |e: &reqwest::Error| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text.push_str(&format!(": {s}"));
            source = s.source();
        }
        text
    };
    let mut load = Load::default();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        load.rounds += 1;
        let started = chrono::Utc::now().format("%H:%M:%S%.3f");
        let token = match http
            .post(format!("{keystone}/v3/auth/tokens"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => r
                .headers()
                .get("x-subject-token")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            Ok(r) => {
                load.failures
                    .push(format!("{started} token: HTTP {}", r.status()));
                None
            }
            Err(e) => {
                load.failures
                    .push(format!("{started} token: {}", chain(&e)));
                None
            }
        };
        if let Some(token) = token {
            match http
                .get(format!("{glance}/v2/images"))
                .header("x-auth-token", token)
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => load
                    .failures
                    .push(format!("{started} image list: HTTP {}", r.status())),
                Err(e) => load
                    .failures
                    .push(format!("{started} image list: {}", chain(&e))),
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    load
}

/// A token of the cloud's admin user, scoped to the admin project, from Keystone at `keystone`.
pub async fn admin_token(
    http: &reqwest::Client,
    keystone: &str,
    password: &str,
) -> anyhow::Result<String> {
    let body = serde_json::json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}});
    let resp = http
        .post(format!("{keystone}/v3/auth/tokens"))
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(resp.status().is_success(), "token: HTTP {}", resp.status());
    resp.headers()
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .context("Keystone answered without X-Subject-Token")
}
