//! `kstack genpwd`: fill the empty values of passwords.yml, the way kolla-genpwd does.
//!
//! Only `key:` lines whose value is empty are rewritten; set values, key order and comments are
//! kept. Keys that kstack needs but the file lacks are appended. Pure: the caller supplies the
//! random number generator and writes the file.
use std::collections::BTreeSet;

use base64::Engine;
use rand::distributions::{Alphanumeric, DistString};
use rand::{CryptoRng, RngCore};
use ssh_key::private::Ed25519Keypair;
use ssh_key::{LineEnding, PrivateKey};

use crate::diagnostic::{Diag, Severity};
use crate::passwords::{self, KNOWN_KEYS, Secret};
use crate::yaml::parse_entries;

/// What kind of value a key gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    SshKey,
    Uuid,
    Fernet,
    Blank,
    Random,
}

/// The generation rule for a key (kolla-genpwd rules).
pub fn kind_of(key: &str) -> Kind {
    const UUIDS: &[&str] = &[
        "rbd_secret_uuid",
        "cinder_rbd_secret_uuid",
        "gnocchi_project_id",
        "gnocchi_resource_id",
        "gnocchi_user_id",
        "designate_pool_id",
    ];
    if key.ends_with("_ssh_key") {
        Kind::SshKey
    } else if UUIDS.contains(&key) {
        Kind::Uuid
    } else if key == "barbican_crypto_key" {
        Kind::Fernet
    } else if key == "docker_registry_password" {
        Kind::Blank
    } else {
        Kind::Random
    }
}

/// Result of [`fill`]: the new file text and the keys that got a value (never the values).
#[derive(Debug)]
pub struct Filled {
    pub text: String,
    pub generated: Vec<String>,
}

/// [`fill`] with the operating system's random number generator.
pub fn fill_os_rng(text: &str) -> Result<Filled, Vec<Diag>> {
    fill(text, &mut rand::rngs::OsRng)
}

/// Fills every empty value in `text`. Errors (invalid file) never contain a value.
pub fn fill<R: RngCore + CryptoRng>(text: &str, rng: &mut R) -> Result<Filled, Vec<Diag>> {
    // Validate first, so a broken file is reported and never rewritten.
    let entries = parse_entries(passwords::FILE, text, true)?;
    // Keys are filled in place and missing ones appended at column 1: a file whose top-level
    // keys are indented would no longer parse afterwards, so it is reported, not rewritten.
    let indented: Vec<Diag> = entries
        .iter()
        .filter(|e| e.key_loc.column() > 1)
        .take(1)
        .map(|e| {
            Diag::new(
                Severity::Error,
                passwords::FILE,
                format!(
                    "`{}` is indented: genpwd writes top-level keys at column 1",
                    e.key
                ),
            )
            .at(e.key_loc.line(), e.key_loc.column())
            .field(e.key.clone())
            .help("remove the indentation before the top-level keys")
        })
        .collect();
    if !indented.is_empty() {
        return Err(indented);
    }
    let parsed = passwords::parse(text)?;
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut generated = Vec::new();
    let mut blocks = Vec::new();

    for e in &entries {
        let empty = parsed
            .entries
            .get(&e.key)
            .is_some_and(|s| *s == Secret::Empty)
            || parsed
                .entries
                .get(&e.key)
                .is_some_and(|s| matches!(s, Secret::Value(v) if v.is_empty()));
        if !empty || kind_of(&e.key) == Kind::Blank {
            continue;
        }
        let line = e.key_loc.line() as usize;
        if line == 0 || line > lines.len() || !lines[line - 1].starts_with(&format!("{}:", e.key)) {
            // Not a simple top-level `key:` line (e.g. flow style): leave it alone.
            continue;
        }
        // The value's lines: the key line plus indented continuation lines (ssh key stubs).
        let mut end = line;
        while end < lines.len() && lines[end].starts_with([' ', '\t']) {
            end += 1;
        }
        blocks.push((line - 1, end, generate(&e.key, rng)));
        generated.push(e.key.clone());
    }
    for (start, end, block) in blocks.into_iter().rev() {
        lines.splice(
            start..end,
            block.lines().map(str::to_owned).collect::<Vec<_>>(),
        );
    }

    let present: BTreeSet<&str> = entries.iter().map(|e| e.key.as_str()).collect();
    let absent: Vec<&str> = KNOWN_KEYS
        .iter()
        .flat_map(|(_, keys)| keys.iter().copied())
        .filter(|k| !present.contains(k))
        .collect();
    if !absent.is_empty() {
        lines.push(String::new());
        lines.push("# Added by kstack genpwd: keys kstack uses that were missing.".into());
        for key in absent {
            if kind_of(key) == Kind::Blank {
                lines.push(format!("{key}:"));
            } else {
                lines.extend(generate(key, rng).lines().map(str::to_owned));
                generated.push(key.to_owned());
            }
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    // Never hand back a file that does not load: the caller would write it over the old one.
    if let Err(mut diags) = passwords::parse(&text) {
        for d in &mut diags {
            d.message = format!("genpwd could not fill this file's layout: {}", d.message);
        }
        return Err(diags);
    }
    Ok(Filled { text, generated })
}

fn generate<R: RngCore + CryptoRng>(key: &str, rng: &mut R) -> String {
    match kind_of(key) {
        Kind::Blank => format!("{key}:"),
        Kind::Random => format!("{key}: {}", Alphanumeric.sample_string(rng, 40)),
        Kind::Uuid => {
            let mut b = [0u8; 16];
            rng.fill_bytes(&mut b);
            format!(
                "{key}: \"{}\"",
                uuid::Builder::from_random_bytes(b).into_uuid()
            )
        }
        Kind::Fernet => {
            let mut b = [0u8; 32];
            rng.fill_bytes(&mut b);
            format!(
                "{key}: \"{}\"",
                base64::engine::general_purpose::URL_SAFE.encode(b)
            )
        }
        Kind::SshKey => {
            let (private, public) = ssh_keypair(rng);
            let mut out = format!("{key}:\n  private_key: |\n");
            for l in private.lines() {
                out.push_str(&format!("    {l}\n"));
            }
            out.push_str(&format!("  public_key: {public}"));
            out
        }
    }
}

/// An SSH key pair: the private key in OpenSSH's format, the public key as an authorized_keys
/// line. Ed25519, the key type OpenSSH's ssh-keygen makes by default: as strong as the RSA 4096
/// keys kolla-genpwd makes and made in microseconds, where an RSA 4096 key takes seconds of CPU
/// (five of them made `kstack genpwd` take 23 s). Every OpenSSH since 6.5 reads both files,
/// whatever the file is named; RSA keys an operator brings in passwords.yml are kept as they are.
pub fn ssh_keypair<R: RngCore + CryptoRng>(rng: &mut R) -> (String, String) {
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    let key = PrivateKey::from(Ed25519Keypair::from_seed(&seed));
    seed.fill(0);
    // Encoding an unencrypted Ed25519 key into a String cannot fail.
    let private = key
        .to_openssh(LineEnding::LF)
        .expect("OpenSSH private key encoding");
    let public = key
        .public_key()
        .to_openssh()
        .expect("OpenSSH public key encoding");
    (private.to_string(), public)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn fills_only_empty_values_and_keeps_comments() {
        let text = "# top comment\n---\nkeystone_admin_password: keepme\n# about db\ndatabase_password:\nnova_ssh_key:\n  private_key:\n  public_key:\ndocker_registry_password:\nrbd_secret_uuid:\nbarbican_crypto_key: \"\"\n";
        let mut rng = StdRng::seed_from_u64(7);
        let out = fill(text, &mut rng).unwrap();
        let t = &out.text;
        assert!(t.starts_with(
            "# top comment\n---\nkeystone_admin_password: keepme\n# about db\ndatabase_password: "
        ));
        assert!(t.contains("\ndocker_registry_password:\n"));
        let p = passwords::parse(t).unwrap();
        assert_eq!(p.get("keystone_admin_password"), Some("keepme"));
        let db = p.get("database_password").unwrap();
        assert_eq!(db.len(), 40);
        assert!(db.chars().all(|c| c.is_ascii_alphanumeric()));
        assert!(
            uuid::Uuid::parse_str(p.get("rbd_secret_uuid").unwrap())
                .unwrap()
                .get_version_num()
                == 4
        );
        let fernet = base64::engine::general_purpose::URL_SAFE
            .decode(p.get("barbican_crypto_key").unwrap())
            .unwrap();
        assert_eq!(fernet.len(), 32);
        match &p.entries["nova_ssh_key"] {
            Secret::SshKey {
                private_key,
                public_key,
            } => {
                let private = PrivateKey::from_openssh(private_key).expect("OpenSSH private key");
                assert_eq!(private.algorithm(), ssh_key::Algorithm::Ed25519);
                assert!(!private.is_encrypted());
                assert!(public_key.starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"));
                assert_eq!(
                    &private.public_key().to_openssh().unwrap(),
                    public_key,
                    "the public key is the private key's"
                );
            }
            other => panic!("not a key pair: {other:?}"),
        }
        assert!(
            !out.generated
                .contains(&"keystone_admin_password".to_string())
        );
        assert!(
            out.generated
                .contains(&"nova_database_password".to_string()),
            "absent known keys are appended"
        );
        // A second run changes nothing.
        let again = fill(t, &mut rng).unwrap();
        assert_eq!(&again.text, t);
        assert!(again.generated.is_empty());
    }

    #[test]
    fn broken_file_is_not_rewritten() {
        let mut rng = StdRng::seed_from_u64(1);
        assert!(fill("a: [\n", &mut rng).is_err());
    }

    /// Found by fuzzing: a file whose top-level keys are indented parses, but appending the
    /// missing keys at column 1 broke it, and genpwd handed back a file that did not load.
    #[test]
    fn indented_top_level_keys_are_reported_not_rewritten() {
        let mut rng = StdRng::seed_from_u64(1);
        let text = "# passwords\n  private_key: |\n    -----BEGIN PRIVATE KEY-----\n    MIIJ\n";
        let diags = fill(text, &mut rng).expect_err("an indented file is refused");
        let d = &diags[0];
        assert_eq!(
            (d.line, d.field.as_deref()),
            (2, Some("private_key")),
            "{d:?}"
        );
        assert!(d.message.contains("indented"), "{}", d.message);
        // A file at column 1 is still filled, and what genpwd writes loads again.
        let filled = fill("database_password:\n", &mut rng).expect("filled");
        assert!(passwords::parse(&filled.text).is_ok());
    }
}
