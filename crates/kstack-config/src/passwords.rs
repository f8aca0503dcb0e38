//! `passwords.yml`: kolla-genpwd key names, typed secrets and the keys each service needs.
//!
//! Invariant: no secret value is ever put into a [`Diag`], a log line or a `Debug` output.
use std::collections::BTreeMap;
use std::fmt;

use kstack_model::globals::Globals;
use serde_json::Value;

use crate::diagnostic::{Diag, Severity};
use crate::yaml::parse_entries;

/// File name inside the config directory.
pub const FILE: &str = "passwords.yml";

/// The keys kstack knows, grouped by the service that uses them (kolla-ansible 2025.1 names).
/// The first group is shared infrastructure, needed whenever anything is deployed.
pub const KNOWN_KEYS: &[(&str, &[&str])] = &[
    (
        "infrastructure",
        &[
            "docker_registry_password",
            "kolla_ssh_key",
            "haproxy_password",
            "keepalived_password",
            "haproxy_ssh_key",
        ],
    ),
    (
        "mariadb",
        &[
            "database_password",
            "mariadb_monitor_password",
            "mariadb_backup_database_password",
            "proxysql_admin_password",
            "proxysql_stats_password",
        ],
    ),
    (
        "rabbitmq",
        &[
            "rabbitmq_password",
            "rabbitmq_monitoring_password",
            "rabbitmq_cluster_cookie",
        ],
    ),
    ("memcached", &["memcache_secret_key"]),
    (
        "keystone",
        &[
            "keystone_admin_password",
            "keystone_database_password",
            "keystone_ssh_key",
            "keystone_federation_openid_crypto_password",
        ],
    ),
    (
        "glance",
        &["glance_database_password", "glance_keystone_password"],
    ),
    (
        "placement",
        &["placement_database_password", "placement_keystone_password"],
    ),
    (
        "nova",
        &[
            "nova_database_password",
            "nova_api_database_password",
            "nova_keystone_password",
            "nova_ssh_key",
            "libvirt_sasl_password",
            "rbd_secret_uuid",
        ],
    ),
    (
        "neutron",
        &[
            "neutron_database_password",
            "neutron_keystone_password",
            "metadata_secret",
            "neutron_ssh_key",
        ],
    ),
    (
        "heat",
        &[
            "heat_database_password",
            "heat_keystone_password",
            "heat_domain_admin_password",
        ],
    ),
    (
        "horizon",
        &["horizon_secret_key", "horizon_database_password"],
    ),
    (
        "cinder",
        &[
            "cinder_database_password",
            "cinder_keystone_password",
            "cinder_rbd_secret_uuid",
        ],
    ),
];

/// Keys an enabled service cannot start without.
const REQUIRED: &[(&str, &[&str])] = &[
    ("mariadb", &["database_password"]),
    (
        "rabbitmq",
        &["rabbitmq_password", "rabbitmq_cluster_cookie"],
    ),
    ("memcached", &["memcache_secret_key"]),
    (
        "keystone",
        &["keystone_admin_password", "keystone_database_password"],
    ),
    (
        "glance",
        &["glance_database_password", "glance_keystone_password"],
    ),
    (
        "placement",
        &["placement_database_password", "placement_keystone_password"],
    ),
    (
        "nova",
        &[
            "nova_database_password",
            "nova_api_database_password",
            "nova_keystone_password",
            "metadata_secret",
            "libvirt_sasl_password",
        ],
    ),
    (
        "neutron",
        &[
            "neutron_database_password",
            "neutron_keystone_password",
            "metadata_secret",
        ],
    ),
    (
        "heat",
        &[
            "heat_database_password",
            "heat_keystone_password",
            "heat_domain_admin_password",
        ],
    ),
    ("horizon", &["horizon_secret_key"]),
    (
        "cinder",
        &["cinder_database_password", "cinder_keystone_password"],
    ),
];

/// The passwords.yml that `kstack init` writes: every known key, empty.
pub fn starter_template() -> String {
    let mut out = String::from(
        "# kstack passwords (kolla-ansible passwords.yml key names).\n\
         # Fill the empty values with `kstack genpwd`; it never changes a value that is set.\n\
         # Keep this file secret (mode 0600).\n---\n",
    );
    for (group, keys) in KNOWN_KEYS {
        out.push_str(&format!("\n# {group}\n"));
        for key in *keys {
            if key.ends_with("_ssh_key") {
                out.push_str(&format!("{key}:\n  private_key:\n  public_key:\n"));
            } else {
                out.push_str(&format!("{key}:\n"));
            }
        }
    }
    out
}

/// One passwords.yml value.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    Empty,
    Value(String),
    SshKey {
        private_key: String,
        public_key: String,
    },
}

impl Secret {
    pub fn is_empty(&self) -> bool {
        match self {
            Secret::Empty => true,
            Secret::Value(v) => v.is_empty(),
            Secret::SshKey {
                private_key,
                public_key,
            } => private_key.is_empty() || public_key.is_empty(),
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Secret::Empty => "Empty",
            Secret::Value(_) => "Value(<redacted>)",
            Secret::SshKey { .. } => "SshKey(<redacted>)",
        })
    }
}

/// All secrets from passwords.yml, by key.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct Passwords {
    pub entries: BTreeMap<String, Secret>,
}

impl Passwords {
    /// The value of a plain password, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        match self.entries.get(key)? {
            Secret::Value(v) if !v.is_empty() => Some(v),
            _ => None,
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A password holding a control character: templates write passwords into line-based files
/// (oslo.config INI, MySQL option files, env files), where a line break would end the value and
/// make the rest new options. Names the kind of character, never the value.
fn control_character(key: &str, value: &str, line: u64, column: u64) -> Diag {
    let what = match value.chars().find(|c| c.is_control()) {
        Some('\n' | '\r') => "a line break",
        Some('\t') => "a tab",
        _ => "a control character",
    };
    let block = value.ends_with('\n');
    let mut help = format!(
        "passwords are written into line-based config files, where {what} would end the value and \
         turn the rest into new settings; "
    );
    if block {
        help.push_str(
            "a YAML block scalar (`|` or `>`) ends with a line break: write the password on one \
             line (`key: \"...\"`), ",
        );
    } else {
        help.push_str("remove it, ");
    }
    help.push_str("or empty the value and run `kstack genpwd`");
    Diag::new(
        Severity::Error,
        FILE,
        format!("the password contains {what} (the value starting here; it is not shown)"),
    )
    .at(line, column)
    .field(key)
    .help(help)
}

/// Parses passwords.yml. Errors never contain the file text or a value. Values are taken as
/// written; [`crate::load`] also evaluates their Jinja expressions.
pub fn parse(text: &str) -> Result<Passwords, Vec<Diag>> {
    parse_located(text).map(|(p, _)| p)
}

/// Where each entry's value starts: line and column.
pub(crate) type Locations = BTreeMap<String, (u64, u64)>;

/// [`parse`], with the location of each value.
pub(crate) fn parse_located(text: &str) -> Result<(Passwords, Locations), Vec<Diag>> {
    let entries = parse_entries(FILE, text, true)?;
    let mut diags = Vec::new();
    let mut out = Passwords::default();
    let mut locations = Locations::new();
    for e in entries {
        locations.insert(e.key.clone(), (e.value_loc.line(), e.value_loc.column()));
        let err = |msg: String, help: String| {
            Diag::new(Severity::Error, FILE, msg)
                .at(e.value_loc.line(), e.value_loc.column())
                .field(e.key.clone())
                .help(help)
        };
        let secret = if e.key.ends_with("_ssh_key") {
            match &e.value {
                Value::Null => Secret::Empty,
                Value::Object(m) => {
                    let mut get = |field: &str| match m.get(field) {
                        None | Some(Value::Null) => Some(String::new()),
                        Some(Value::String(s)) => Some(s.clone()),
                        Some(other) => {
                            diags.push(err(
                                format!("`{field}` must be a string, found {}", kind(other)),
                                "write the key as a YAML block string (`|`)".into(),
                            ));
                            None
                        }
                    };
                    let private_key = get("private_key");
                    let public_key = get("public_key");
                    for extra in m
                        .keys()
                        .filter(|k| *k != "private_key" && *k != "public_key")
                    {
                        diags.push(err(
                            format!("unexpected field `{extra}` in an SSH key pair"),
                            "an SSH key pair has only `private_key` and `public_key`".into(),
                        ));
                    }
                    match (private_key, public_key) {
                        (Some(p), Some(q)) if p.is_empty() && q.is_empty() => Secret::Empty,
                        (Some(private_key), Some(public_key)) => Secret::SshKey {
                            private_key,
                            public_key,
                        },
                        _ => continue,
                    }
                }
                other => {
                    diags.push(err(
                        format!("expected a mapping with `private_key` and `public_key`, found {}", kind(other)),
                        format!("empty the value (`{}:`) and run `kstack genpwd` to generate a key pair", e.key),
                    ));
                    continue;
                }
            }
        } else {
            match &e.value {
                Value::Null => Secret::Empty,
                Value::String(s) if s.chars().any(char::is_control) => {
                    diags.push(control_character(
                        &e.key,
                        s,
                        e.value_loc.line(),
                        e.value_loc.column(),
                    ));
                    continue;
                }
                Value::String(s) => Secret::Value(s.clone()),
                // `password: 123456` is a number in YAML; Ansible uses it as a string.
                Value::Number(n) => Secret::Value(n.to_string()),
                other => {
                    diags.push(err(
                        format!("expected a string, found {}", kind(other)),
                        "quote the password (`key: \"...\"`), or empty it and run `kstack genpwd`"
                            .into(),
                    ));
                    continue;
                }
            }
        };
        out.entries.insert(e.key.clone(), secret);
    }
    if diags.is_empty() {
        Ok((out, locations))
    } else {
        Err(diags)
    }
}

/// Replaces the values that held Jinja with their evaluated values, refusing results that hold
/// a control character (the same rule as for values written directly).
pub(crate) fn set_evaluated(
    passwords: &mut Passwords,
    evaluated: &BTreeMap<String, Value>,
    locations: &Locations,
) -> Vec<Diag> {
    let mut diags = Vec::new();
    for (key, secret) in passwords.entries.iter_mut() {
        let Secret::Value(v) = secret else { continue };
        if !crate::jinja::is_template(v) {
            continue;
        }
        let Some(Value::String(new)) = evaluated.get(key) else {
            continue;
        };
        let (line, column) = locations.get(key).copied().unwrap_or((0, 0));
        if new.chars().any(char::is_control) {
            diags.push(control_character(key, new, line, column));
        } else {
            *v = new.clone();
        }
    }
    diags
}

/// Keys needed by the enabled services that are missing or empty, sorted, without duplicates.
pub fn missing_required(globals: &Globals, passwords: &Passwords) -> Vec<&'static str> {
    let mut missing: Vec<&'static str> = REQUIRED
        .iter()
        .filter(|(svc, _)| globals.is_enabled(svc))
        .flat_map(|(_, keys)| keys.iter().copied())
        .filter(|k| passwords.entries.get(*k).is_none_or(Secret::is_empty))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starter_template_parses_to_all_empty() {
        let p = parse(&starter_template()).unwrap();
        let n: usize = KNOWN_KEYS.iter().map(|(_, k)| k.len()).sum();
        assert_eq!(p.entries.len(), n);
        assert!(p.entries.values().all(|s| *s == Secret::Empty));
        let all = missing_required(&Globals::default(), &p);
        assert!(all.contains(&"keystone_admin_password"));
        assert!(
            !all.contains(&"cinder_database_password"),
            "cinder is off by default"
        );
    }

    #[test]
    fn control_characters_are_refused_naming_key_and_line_never_the_value() {
        let text = "database_password: okvalue\n\
                    keystone_admin_password: \"top\\nsecret\\n[DEFAULT]\\ndebug = True\"\n\
                    rabbitmq_password: |\n  blocksecret\n\
                    memcache_secret_key: \"tab\\tsecret\"\n\
                    metadata_secret: \"bell\\u0007secret\"\n\
                    horizon_secret_key: \"del\\u007fsecret\"\n";
        let diags = parse(text).unwrap_err();
        let got: Vec<(String, u64)> = diags
            .iter()
            .map(|d| (d.field.clone().unwrap(), d.line))
            .collect();
        assert_eq!(
            got,
            [
                ("keystone_admin_password".to_owned(), 2),
                ("rabbitmq_password".to_owned(), 4),
                ("memcache_secret_key".to_owned(), 5),
                ("metadata_secret".to_owned(), 6),
                ("horizon_secret_key".to_owned(), 7),
            ]
        );
        assert!(diags[0].message.contains("a line break"));
        assert!(diags[1].help.as_deref().unwrap().contains("block scalar"));
        assert!(diags[2].message.contains("a tab"));
        assert!(diags[3].message.contains("a control character"));
        let shown = format!("{}{diags:?}", crate::render_plain(&diags));
        for secret in ["top", "blocksecret", "DEFAULT", "bell", "del"] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
        }
        // Printable ASCII, spaces, quotes and non-ASCII letters are fine.
        let p = parse("database_password: \" a;$\\\"' #%é{{ x }}\"\n").unwrap();
        assert_eq!(p.get("database_password"), Some(" a;$\"' #%é{{ x }}"));
    }

    #[test]
    fn debug_output_is_redacted() {
        let p = parse("keystone_admin_password: hunter2secret\n").unwrap();
        assert_eq!(p.get("keystone_admin_password"), Some("hunter2secret"));
        assert!(!format!("{p:?}").contains("hunter2secret"));
    }
}
