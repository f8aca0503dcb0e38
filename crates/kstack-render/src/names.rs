//! How rendered things are named, on either target: content hashes for what carries no secret
//! ([`short_hash`]), keyed hashes for what does ([`SecretNames`]), and the peers Service whose
//! name is part of a StatefulSet replica's address ([`peers_service`]).

use hmac::{Hmac, Mac};
use kstack_config::Config;
use kstack_config::passwords;
use sha2::{Digest, Sha256};

use crate::files::RenderError;

/// First 10 hex digits of the SHA-256 of `bytes`: the suffix of content-named objects that
/// carry no secret (ConfigMaps, Jobs, per-host variants).
pub fn short_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))[..10].to_owned()
}

/// Names the Secrets: first 10 hex digits of the HMAC-SHA-256 of their content under
/// passwords.yml's [`passwords::NAME_KEY`]. Anyone who may read pod specs sees a Secret's name;
/// with an unkeyed hash, the name of an env Secret holding one password would confirm guesses
/// of that password offline. With the key, the name is still fixed by the content (an
/// unchanged Secret keeps its name, a changed one rolls its pods) but says nothing about it.
/// A Compose container's config hash label is keyed the same way, for the same reason.
#[derive(Clone)]
pub struct SecretNames {
    key: Vec<u8>,
}

impl SecretNames {
    /// The namer of a config directory's Secrets; [`RenderError::MissingNameKey`] when
    /// passwords.yml has no key.
    pub fn of(config: &Config) -> Result<SecretNames, RenderError> {
        let key = config
            .passwords
            .get(passwords::NAME_KEY)
            .ok_or(RenderError::MissingNameKey {
                key: passwords::NAME_KEY,
            })?;
        Ok(SecretNames {
            key: key.as_bytes().to_vec(),
        })
    }

    /// The hash suffix of a Secret holding `bytes`.
    pub fn hash(&self, bytes: &[u8]) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(bytes);
        hex::encode(mac.finalize().into_bytes())[..10].to_owned()
    }
}

impl std::fmt::Debug for SecretNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretNames(<key redacted>)")
    }
}

/// The headless Service that governs a StatefulSet on Kubernetes: it gives each pod its stable
/// DNS name (`<pod>.<service>-peers.<namespace>.svc`, the address
/// [`Target::host`](crate::Target::host) gives one replica) and lists every port, ready or not,
/// because clustered stores (Galera, RabbitMQ) must find their peers before they are ready.
pub fn peers_service(service: &str) -> String {
    format!("{service}-peers")
}
