//! Tokens issued by the cloud's Keystone, accepted beside the static tokens of [`crate::tokens`]
//! (seed 003 authenticates the inventory API with Keystone).
//!
//! A bearer token that is not a static one is validated against Keystone
//! (`GET /v3/auth/tokens`, the token as both `X-Auth-Token` and `X-Subject-Token`: Keystone's
//! default policy lets a token validate itself, so the service needs no credentials of its
//! own). The roles of the token's scope decide what it may do: one of [`KeystoneAuth::admin_roles`]
//! reads and writes, one of [`KeystoneAuth::reader_roles`] reads, none is refused with 403.
//!
//! Answers are cached by the SHA-256 of the token until the token expires, at most
//! [`KeystoneAuth::cache_ttl`] (a revoked token is refused again at most that late), and a
//! token Keystone refused for [`NEGATIVE_TTL`], so a client retrying a bad token does not turn
//! into a request to Keystone each time. The cache holds at most [`CACHE_ENTRIES`] tokens;
//! when full, expired entries go first, then all of them.
//!
//! Architecture invariant: a token is never logged, kept in clear, or put into an error.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::api::Role;

/// How long a token Keystone refused stays refused without asking again.
pub const NEGATIVE_TTL: Duration = Duration::from_secs(10);
/// Most tokens the cache holds.
pub const CACHE_ENTRIES: usize = 10_000;

/// How the service asks Keystone.
#[derive(Debug, Clone)]
pub struct KeystoneAuth {
    /// Keystone's URL, e.g. `http://keystone.openstack.svc:5000` (with or without `/v3`).
    pub url: String,
    /// Role names that may read and write (default `admin`).
    pub admin_roles: Vec<String>,
    /// Role names that may read (default `reader`, `member`).
    pub reader_roles: Vec<String>,
    /// Longest time a validated token is trusted without asking Keystone again.
    pub cache_ttl: Duration,
    /// How long one validation may take.
    pub timeout: Duration,
}

impl KeystoneAuth {
    /// Keystone at `url` with the default role mapping and cache.
    pub fn new(url: impl Into<String>) -> KeystoneAuth {
        KeystoneAuth {
            url: url.into(),
            admin_roles: vec!["admin".into()],
            reader_roles: vec!["reader".into(), "member".into()],
            cache_ttl: Duration::from_secs(300),
            timeout: Duration::from_secs(10),
        }
    }

    /// The token validation endpoint.
    fn tokens_url(&self) -> String {
        let base = self.url.trim_end_matches('/');
        let base = base.strip_suffix("/v3").unwrap_or(base);
        format!("{base}/v3/auth/tokens")
    }
}

/// What Keystone says of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Valid, with a role that maps to this.
    Role(Role),
    /// Valid, but none of its roles is mapped.
    NoRole,
    /// Not a token Keystone knows (expired, revoked, made up).
    Invalid,
}

/// Keystone could not answer: the request is neither allowed nor refused.
#[derive(Debug, thiserror::Error)]
#[error("Keystone at {url} did not validate the token: {reason}")]
pub struct Unavailable {
    pub url: String,
    pub reason: String,
}

/// Validates tokens against Keystone, with a cache.
pub struct Keystone {
    auth: KeystoneAuth,
    client: reqwest::Client,
    cache: Mutex<HashMap<[u8; 32], (Verdict, Instant)>>,
}

impl std::fmt::Debug for Keystone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keystone")
            .field("url", &self.auth.url)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct TokenBody {
    token: TokenInfo,
}

#[derive(Deserialize)]
struct TokenInfo {
    expires_at: Option<String>,
    #[serde(default)]
    roles: Vec<RoleRef>,
}

#[derive(Deserialize)]
struct RoleRef {
    name: String,
}

impl Keystone {
    pub fn new(auth: KeystoneAuth) -> Result<Keystone, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(auth.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Keystone {
            auth,
            client,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The answer to a Keystone token whose roles map to nothing: the roles that would do.
    pub fn no_role_message(&self) -> String {
        format!(
            "the Keystone token has none of the roles this service maps: {} (read and write), {} (read)",
            self.auth.admin_roles.join(", "),
            self.auth.reader_roles.join(", ")
        )
    }

    /// What `token` may do, from the cache or from Keystone.
    pub async fn verdict(&self, token: &str) -> Result<Verdict, Unavailable> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some((v, until)) = self.lock().get(&key).copied()
            && until > now
        {
            return Ok(v);
        }
        let (verdict, valid_for) = self.ask(token).await?;
        let mut cache = self.lock();
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (_, until)| *until > now);
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(key, (verdict, now + valid_for));
        Ok(verdict)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (Verdict, Instant)>> {
        // A panic while holding the lock leaves a cache that is still consistent.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn ask(&self, token: &str) -> Result<(Verdict, Duration), Unavailable> {
        let url = self.auth.tokens_url();
        let unavailable = |reason: String| Unavailable {
            url: self.auth.url.clone(),
            reason,
        };
        let resp = self
            .client
            .get(&url)
            .header("X-Auth-Token", token)
            .header("X-Subject-Token", token)
            .send()
            .await
            // reqwest's error names the URL only, never a header.
            .map_err(|e| unavailable(e.without_url().to_string()))?;
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::NOT_FOUND {
            return Ok((Verdict::Invalid, NEGATIVE_TTL));
        }
        if !status.is_success() {
            return Err(unavailable(format!("it answered {status}")));
        }
        let body: TokenBody = resp
            .json()
            .await
            .map_err(|e| unavailable(format!("its answer is not a token: {}", e.without_url())))?;
        let names: Vec<&str> = body.token.roles.iter().map(|r| r.name.as_str()).collect();
        let has = |wanted: &[String]| names.iter().any(|n| wanted.iter().any(|w| w == n));
        let verdict = if has(&self.auth.admin_roles) {
            Verdict::Role(Role::Admin)
        } else if has(&self.auth.reader_roles) {
            Verdict::Role(Role::Reader)
        } else {
            Verdict::NoRole
        };
        let expires = body
            .token
            .expires_at
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        let valid_for = match expires.map(|t| t.signed_duration_since(chrono::Utc::now())) {
            // Past its expiry by this service's clock: refused, whatever Keystone said.
            Some(left) if left <= chrono::Duration::zero() => {
                return Ok((Verdict::Invalid, NEGATIVE_TTL));
            }
            Some(left) => left
                .to_std()
                .unwrap_or(Duration::ZERO)
                .min(self.auth.cache_ttl),
            // An expiry that is absent or unreadable: trust the answer for the shortest time.
            None => NEGATIVE_TTL.min(self.auth.cache_ttl),
        };
        Ok((verdict, valid_for))
    }
}
