//! The content of Secrets the engine generates
//! ([`kstack_model::labels::GENERATED_ANNOTATION`]): a Fernet key repository as
//! `keystone-manage fernet_setup` makes one, a staged key `0` and a primary key `1`, each 32
//! random bytes from the operating system, URL-safe base64 (a Fernet key). The keys go
//! straight into the create request; they are never logged, planned or recorded.
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use rand::RngCore;
use rand::rngs::OsRng;
use serde_json::{Value, json};

use kstack_model::labels::ROTATED_AT_ANNOTATION;

/// A fresh Fernet key: URL-safe base64 of 32 random bytes.
pub fn fernet_key() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE.encode(bytes)
}

/// `manifest` (a rendered key repository Secret, no data) with keys `0` and `1` and the time
/// they were made ([`ROTATED_AT_ANNOTATION`], which the rotation counts from).
pub fn with_fresh_keys(manifest: &Value) -> Value {
    let mut m = manifest.clone();
    m["data"] = json!({
        "0": STANDARD.encode(fernet_key()),
        "1": STANDARD.encode(fernet_key()),
    });
    // The minute, as the rotation records it (its schedule's grid).
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:00Z").to_string();
    if let Some(meta) = m["metadata"].as_object_mut() {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(ROTATED_AT_ANNOTATION.to_owned(), Value::String(now));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fernet_keys_and_differ() {
        let rendered = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k"}});
        let a = with_fresh_keys(&rendered);
        let b = with_fresh_keys(&rendered);
        for m in [&a, &b] {
            for k in ["0", "1"] {
                let key = STANDARD.decode(m["data"][k].as_str().unwrap()).unwrap();
                let raw = URL_SAFE.decode(&key).unwrap();
                assert_eq!(raw.len(), 32, "a Fernet key is 32 bytes");
            }
            let at = m["metadata"]["annotations"][ROTATED_AT_ANNOTATION]
                .as_str()
                .unwrap();
            assert!(chrono::NaiveDateTime::parse_from_str(at, "%Y-%m-%dT%H:%M:%SZ").is_ok());
        }
        assert_ne!(a["data"]["0"], a["data"]["1"]);
        assert_ne!(a["data"]["1"], b["data"]["1"]);
        assert!(
            rendered.get("data").is_none(),
            "the rendered manifest is unchanged"
        );
    }
}
