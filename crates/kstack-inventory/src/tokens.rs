//! The service's bearer tokens: loading the tokens file, and looking a presented token up.
//!
//! The tokens file is a YAML map of token to role (`admin` or `reader`), one `TOKEN: ROLE` per
//! line. Loading refuses, naming the file and line and never the token:
//! - a file that group or others may read or change (like ssh does with a private key; the
//!   error gives the `chmod` to run);
//! - a token shorter than [`MIN_TOKEN_LEN`] characters, or with a character an
//!   `Authorization` header cannot carry;
//! - a role that is not `admin` or `reader`; the same token twice (by line numbers).
//!
//! Only SHA-256 digests of the tokens are kept. A lookup hashes the presented token once and
//! compares it with every digest in constant time, without stopping at a match, so neither
//! the time nor the work done tells which token (or how much of one) matched.
//! Architecture invariant: no token appears in an error, a log line or a `Debug` output.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

use crate::api::Role;
use crate::error::Error;

/// Shortest token accepted: 32 characters, e.g. 16 random bytes in hex (`openssl rand -hex 32`
/// gives 64). Short tokens can be guessed over the network.
pub const MIN_TOKEN_LEN: usize = 32;

const GENERATE: &str = "generate one with `openssl rand -hex 32`";

/// The tokens the service accepts, as digests. Cheap to look up, never printed.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<([u8; 32], Role)>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokens({} tokens)", self.entries.len())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn role_code(role: Role) -> u8 {
    match role {
        Role::Admin => 1,
        Role::Reader => 2,
    }
}

/// What is wrong with a token, if anything (never the token itself).
fn token_problem(token: &str) -> Option<String> {
    if token.chars().count() < MIN_TOKEN_LEN {
        return Some(format!(
            "the token is shorter than {MIN_TOKEN_LEN} characters; {GENERATE}"
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Some(
            "the token has a space, a control or a non-ASCII character, which an \
             Authorization header cannot carry"
                .to_string(),
        );
    }
    None
}

impl Tokens {
    /// Tokens from a map of token to role, checked like the tokens file's (length, characters).
    pub fn new(map: BTreeMap<String, Role>) -> Result<Self, Error> {
        let mut entries = Vec::with_capacity(map.len());
        let mut problems = Vec::new();
        for (n, (token, role)) in map.into_iter().enumerate() {
            match token_problem(&token) {
                Some(p) => problems.push(format!("token {} (role {role:?}): {p}", n + 1)),
                None => entries.push((digest(&token), role)),
            }
        }
        if !problems.is_empty() {
            return Err(Error::Config(problems.join("; ")));
        }
        Ok(Tokens { entries })
    }

    /// Loads and checks the tokens file (see the module documentation).
    pub fn load(path: &Path) -> Result<Self, Error> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| Error::Config(format!("tokens file {shown}: {e}")))?;
        if !meta.is_file() {
            return Err(Error::Config(format!(
                "tokens file {shown} is not a regular file"
            )));
        }
        check_mode(path, &meta)?;
        let bytes =
            std::fs::read(path).map_err(|e| Error::Config(format!("tokens file {shown}: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::Config(format!("tokens file {shown} is not UTF-8 text")))?;
        Self::parse(&text).map_err(|problems| {
            Error::Config(format!("tokens file {shown}: {}", problems.join("; ")))
        })
    }

    /// Parses the tokens file's text. Each problem names its line, never a token or a role
    /// (a file with token and role swapped would otherwise print the token).
    fn parse(text: &str) -> Result<Self, Vec<String>> {
        const SHAPE: &str = "expected a YAML map of token to role (admin or reader), \
                             one `TOKEN: ROLE` per line";
        let options = serde_saphyr::options! {
            duplicate_keys: serde_saphyr::DuplicateKeyPolicy::PassThrough,
        };
        let parsed: Result<Entries, _> = serde_saphyr::from_str_with_options(text, options);
        let entries = match parsed {
            Ok(Entries(entries)) => entries,
            // The parser's message may quote the file; only its position is reported.
            Err(e) => {
                return Err(vec![match e.location() {
                    Some(at) if at.line() > 0 => {
                        format!("line {}, column {}: {SHAPE}", at.line(), at.column())
                    }
                    _ => SHAPE.to_string(),
                }]);
            }
        };
        if entries.is_empty() {
            return Err(vec![format!("no tokens; {SHAPE}")]);
        }
        let mut problems = Vec::new();
        let mut first_line: BTreeMap<[u8; 32], u64> = BTreeMap::new();
        let mut out = Vec::with_capacity(entries.len());
        for (token, role) in entries {
            let line = token.referenced.line();
            let role = match role.value.as_str() {
                "admin" => Some(Role::Admin),
                "reader" => Some(Role::Reader),
                _ => {
                    problems.push(format!("line {line}: the role is not admin or reader"));
                    None
                }
            };
            if let Some(p) = token_problem(&token.value) {
                problems.push(format!("line {line}: {p}"));
                continue;
            }
            let d = digest(&token.value);
            if let Some(first) = first_line.get(&d) {
                problems.push(format!(
                    "line {line}: the same token as on line {first}; each token must be unique"
                ));
                continue;
            }
            first_line.insert(d, line);
            if let Some(role) = role {
                out.push((d, role));
            }
        }
        if problems.is_empty() {
            Ok(Tokens { entries: out })
        } else {
            Err(problems)
        }
    }

    /// The role of `presented`, if it is one of the tokens. Every stored digest is compared,
    /// in constant time, whatever matches.
    pub fn role(&self, presented: &str) -> Option<Role> {
        let d = digest(presented);
        let mut found = Choice::from(0);
        let mut code = 0u8;
        for (stored, role) in &self.entries {
            let eq = stored.as_slice().ct_eq(d.as_slice());
            code.conditional_assign(&role_code(*role), eq);
            found |= eq;
        }
        if !bool::from(found) {
            return None;
        }
        match code {
            1 => Some(Role::Admin),
            2 => Some(Role::Reader),
            _ => None,
        }
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is no token (nobody could call the API).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(unix)]
fn check_mode(path: &Path, meta: &std::fs::Metadata) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::Config(format!(
            "tokens file {shown} can be read or changed by group or others (mode {mode:04o}); \
             it holds secrets: run `chmod 600 {shown}`",
            shown = path.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_mode(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), Error> {
    Ok(())
}

/// The file's entries in order, duplicates kept, each token with its position.
struct Entries(Vec<(Spanned<String>, Spanned<String>)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of token to role")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Entries, E> {
                Ok(Entries(Vec::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef-admin";
    const R: &str = "0123456789abcdef0123456789abcdef-reader";

    #[test]
    fn parses_and_looks_up() {
        let t = Tokens::parse(&format!("# tokens\n{A}: admin\n\"{R}\": reader\n")).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.role(A), Some(Role::Admin));
        assert_eq!(t.role(R), Some(Role::Reader));
        assert_eq!(t.role(&A[..A.len() - 1]), None);
        assert_eq!(t.role(""), None);
        assert_eq!(format!("{t:?}"), "Tokens(2 tokens)");
    }

    #[test]
    fn short_token_is_refused_by_line_and_never_shown() {
        let err = Tokens::parse(&format!("{A}: admin\nabcde: reader\n")).unwrap_err();
        assert_eq!(err.len(), 1, "{err:?}");
        assert!(err[0].starts_with("line 2: "), "{err:?}");
        assert!(err[0].contains("shorter than 32"), "{err:?}");
        assert!(!err[0].contains("abcde"), "{err:?}");
        let exactly = "x".repeat(MIN_TOKEN_LEN);
        assert!(Tokens::parse(&format!("{exactly}: admin\n")).is_ok());
        let err = Tokens::new(BTreeMap::from([("short".to_string(), Role::Admin)])).unwrap_err();
        assert!(err.to_string().contains("shorter than 32"), "{err}");
        assert!(!err.to_string().contains("short\""), "{err}");
    }

    #[test]
    fn duplicate_token_is_reported_by_line_numbers_only() {
        let text = format!("{A}: admin\n{R}: reader\n{A}: reader\n");
        let err = Tokens::parse(&text).unwrap_err();
        assert_eq!(
            err,
            vec!["line 3: the same token as on line 1; each token must be unique".to_string()]
        );
    }

    #[test]
    fn bad_role_and_bad_yaml_never_echo_the_file() {
        // Token and role swapped: the "role" is the secret.
        let err = Tokens::parse(&format!("admin: {A}\n")).unwrap_err();
        let all = err.join("; ");
        assert!(
            all.contains("line 1: the role is not admin or reader"),
            "{all}"
        );
        assert!(!all.contains(A), "{all}");
        for text in [
            format!("{A}: admin\n{R}\n"),
            format!("- {A}\n"),
            format!("{A}: [admin\n"),
            format!("{A}: {{x: y}}\n"),
            String::new(),
        ] {
            let err = Tokens::parse(&text).unwrap_err().join("; ");
            assert!(err.contains("expected a YAML map"), "{text:?}: {err}");
            assert!(!err.contains("0123456789"), "{text:?}: {err}");
        }
        let err = Tokens::parse(&format!("{A}: admin\nsecret with spaces {A}: admin\n"))
            .unwrap_err()
            .join("; ");
        assert!(err.contains("line 2: the token has a space"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn group_or_world_readable_file_is_refused_with_the_chmod_to_run() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.yml");
        std::fs::write(&path, format!("{A}: admin\n")).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = Tokens::load(&path).unwrap_err().to_string();
            assert!(
                err.contains(&format!("(mode {mode:04o})"))
                    && err.contains(&format!("chmod 600 {}", path.display())),
                "{err}"
            );
            assert!(!err.contains(A), "{err}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Tokens::load(&path).unwrap().role(A), Some(Role::Admin));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(Tokens::load(&path).is_ok());
    }
}
