//! No passwords.yml value, and no key of the Ceph keyring the operator copies beside it, outside
//! a Secret (Kubernetes) or a 0600 file (Compose), whatever characters it holds.
//!
//! The templates write a password in many forms: raw, URL-encoded in a database URL or the
//! transport URL, `$$`-escaped for oslo.config, quoted for JSON, SQL, MySQL option files and
//! shell. Every password of a whole cloud (every service on, clustered replicas) is set to a
//! distinct value built around a unique run of letters and digits (its *marker*), which every
//! one of these encodings leaves intact. The checks then scan everything that is not a secret
//! for the markers:
//! - Kubernetes: every object but a Secret's data (ConfigMap data, env literals, arguments,
//!   commands, probes, labels, annotations, names), and the metadata of Secrets;
//! - Compose: `compose.yaml` and every config file that is not written 0600;
//! - the config files `kstack template --config-files` writes (0644 unless secret).
//!
//! A fixed case per character the issue names, and a property test over random values of the
//! printable range with quotes, `;`, `$`, `#`, `%`, `{{ }}`, backslashes and non-ASCII letters.

use kstack_config::Config;
use kstack_config::passwords::{self, Passwords, Secret};
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::{Object, Target, compose, files, kubernetes};
use proptest::prelude::*;

/// Every service on, three replicas of the clustered ones, Cinder's volumes in Ceph.
fn globals() -> Globals {
    let serde_json::Value::Object(m) = serde_json::json!({
        "enable_cinder": true,
        "cinder_backend_ceph": true,
        "kstack_replicas": {"mariadb": 3, "rabbitmq": 3, "memcached": 2},
    }) else {
        unreachable!()
    };
    Globals::from_vars(&m.into_iter().collect()).unwrap()
}

/// A marker unique to key `i`: letters and digits no template writes on its own.
fn marker(i: usize) -> String {
    format!("Qz{i:03}{MARK}")
}

/// Every known plain password: `before` + its marker + `after`. SSH keys are left out: no
/// template uses them.
fn passwords_around(before: &str, after: &str) -> (Passwords, Vec<(String, String)>) {
    let mut entries = std::collections::BTreeMap::new();
    let mut values = Vec::new();
    for (i, k) in passwords::KNOWN_KEYS
        .iter()
        .flat_map(|(_, keys)| keys.iter())
        .filter(|k| !k.ends_with("_ssh_key"))
        .enumerate()
    {
        let m = marker(i);
        let v = format!("{before}{m}{after}");
        entries.insert((*k).to_owned(), Secret::Value(v.clone()));
        values.push((m, v));
    }
    values.push((marker(KEYRING), keyring()));
    (Passwords { entries }, values)
}

/// The marker index of the Ceph client's keyring, the operator's secret file beside
/// passwords.yml.
const KEYRING: usize = 999;

fn keyring() -> String {
    format!("[client.cinder]\n\tkey = {}==\n", marker(KEYRING))
}

/// The part every marker shares.
const MARK: &str = "kW7xJ4vR9";

/// Where a password was found, if anywhere, in `text`: a marker survives every form the
/// templates write a password in (raw, URL-encoded, `$$`-escaped, JSON-, SQL-, shell-,
/// option-file- and dotenv-quoted), since none of them changes letters or digits.
fn leak(text: &str, values: &[(String, String)]) -> Option<String> {
    let at = text.find(MARK)?;
    let found = values
        .iter()
        .find(|(m, _)| text.contains(m.as_str()))
        .map_or("a password", |(m, _)| m.as_str());
    Some(format!("the marker {found} (at byte {at})"))
}

fn config(pw: Passwords) -> Config {
    let overrides = [
        (
            "cinder/ceph.conf",
            "[global]\nfsid = 5cc463da-cd3f-447c-bc3a-cd1e8720331a\nmon_host = 10.0.0.1\n"
                .to_owned(),
        ),
        ("cinder/cinder-volume/ceph.client.cinder.keyring", keyring()),
    ]
    .into_iter()
    .map(|(p, t)| (p.to_owned(), t.into_bytes()))
    .collect();
    Config::from_parts(globals(), pw, overrides, Catalog::builtin().unwrap())
}

/// Every check on both targets; the first leak found, as a message.
fn check(config: &Config, values: &[(String, String)]) -> Result<(), String> {
    let r = kubernetes::render(config).map_err(|e| format!("Kubernetes render failed: {e}"))?;
    let (mut config_maps, mut secrets) = (0, 0);
    for o in &r.objects {
        let visible = match o {
            Object::Secret(s) => {
                secrets += 1;
                serde_json::to_string(&s.metadata).unwrap()
            }
            Object::ConfigMap(_) => {
                config_maps += 1;
                serde_json::to_string(&o.to_json_value()).unwrap()
            }
            _ => serde_json::to_string(&o.to_json_value()).unwrap(),
        };
        if let Some(what) = leak(&visible, values) {
            return Err(format!("{} {} holds {what}", o.kind(), o.name()));
        }
    }
    // Files without a password stay ConfigMaps: the secret flag is not set on everything.
    if config_maps < 20 || secrets < 20 {
        return Err(format!("{config_maps} ConfigMaps, {secrets} Secrets"));
    }

    for target in [Target::Kubernetes, Target::Compose] {
        for cf in files::render_files(config, target).map_err(|e| e.to_string())? {
            for f in cf.files.iter().filter(|f| !f.secret) {
                if let Some(what) = leak(&f.content, values) {
                    return Err(format!(
                        "{target:?} config file {}/{}/{} is not secret and holds {what}",
                        cf.service, cf.container, f.name
                    ));
                }
            }
        }
    }

    let b = compose::render(config).map_err(|e| format!("Compose render failed: {e}"))?;
    if let Some(what) = leak(&b.to_yaml(), values) {
        return Err(format!("compose.yaml holds {what}"));
    }
    let mut secret_files = 0;
    for d in &b.config_dirs {
        for f in &d.files {
            secret_files += usize::from(f.secret);
            if !f.secret
                && let Some(what) = leak(&f.content, values)
            {
                return Err(format!(
                    "Compose file config/{}/{} would be written 0644 and holds {what}",
                    d.path, f.name
                ));
            }
        }
    }
    if secret_files < 20 {
        return Err(format!("only {secret_files} Compose files are secret"));
    }
    Ok(())
}

fn assert_no_leak(before: &str, after: &str) {
    let (pw, values) = passwords_around(before, after);
    if let Err(e) = check(&config(pw), &values) {
        panic!("passwords `{before}<marker>{after}`: {e}");
    }
}

#[test]
fn plain_passwords_stay_in_secrets() {
    assert_no_leak("", "");
}

#[test]
fn a_semicolon_is_no_way_out_of_a_secret() {
    assert_no_leak("a;", ";b");
}

#[test]
fn a_dollar_is_no_way_out_of_a_secret() {
    assert_no_leak("$a", "$$b$");
}

#[test]
fn a_double_quote_is_no_way_out_of_a_secret() {
    assert_no_leak("\"", "\"x\"");
}

#[test]
fn a_single_quote_is_no_way_out_of_a_secret() {
    assert_no_leak("'", "'x'");
}

#[test]
fn a_comment_sign_is_no_way_out_of_a_secret() {
    assert_no_leak("a #", " #b");
}

#[test]
fn percent_braces_and_backslashes_are_no_way_out_of_a_secret() {
    assert_no_leak("%41{{ x }}", "\\n\\{% raw %}");
}

#[test]
fn a_mix_with_non_ascii_letters_is_no_way_out_of_a_secret() {
    assert_no_leak(" ;$\"' #%é", "ß{{\\'\"$ #;ø ");
}

/// Printable ASCII, the characters the templates escape, and some non-ASCII letters; no
/// control characters (passwords.yml refuses them).
fn printable() -> impl Strategy<Value = String> {
    let chars = prop_oneof![
        4 => (0x20u8..0x7f).prop_map(char::from),
        2 => prop::sample::select(vec![
            ';', '$', '#', '%', '"', '\'', '\\', '{', '}', ' ', '@', ':', '/', '&', '=',
        ]),
        1 => prop::sample::select(vec!['é', 'ß', 'ø', 'Ж', '中', 'λ']),
    ];
    prop::collection::vec(chars, 0..12).prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_random_password_leaves_a_secret(before in printable(), after in printable()) {
        let (pw, values) = passwords_around(&before, &after);
        let result = check(&config(pw), &values);
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}

/// The names of the Secrets of a render, by the prefix before their hash, with the bytes that
/// hash covers (a file's content, or an env Secret's data as JSON).
fn secret_names(r: &kstack_render::Rendered) -> Vec<(String, String, Vec<u8>)> {
    r.objects
        .iter()
        .filter_map(|o| match o {
            // A key repository is named by its volume and holds generated keys, not a file.
            Object::Secret(s) if s.data.is_none() => None,
            Object::Secret(s) => {
                let name = o.name().to_owned();
                let (prefix, hash) = name.rsplit_once('-').unwrap();
                let data = s.data.clone().unwrap_or_default();
                let hashed = if prefix.ends_with("-env") {
                    serde_json::to_vec(&data).unwrap()
                } else {
                    data.into_values().next().unwrap().0
                };
                Some((prefix.to_owned(), hash.to_owned(), hashed))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_secret_name_is_a_keyed_hash_that_tells_nothing_of_the_content() {
    let (pw, _) = passwords_around("", "");
    let first = kubernetes::render(&config(pw.clone())).unwrap();
    let secrets = secret_names(&first);
    assert!(secrets.len() >= 20, "{} Secrets", secrets.len());
    assert!(
        secrets.iter().any(|(p, _, _)| p.ends_with("-env")),
        "env Secrets are checked too"
    );
    // Whoever may read a pod spec sees these names. With a plain SHA-256 of the content (the
    // env Secret of a health check holds one password), the name would confirm a guessed
    // password offline.
    for (prefix, hash, content) in &secrets {
        assert_ne!(
            hash,
            &kstack_render::names::short_hash(content),
            "Secret {prefix}-{hash} is named by the unkeyed hash of its content"
        );
    }

    // Another key: every Secret gets another name, no ConfigMap does, and the content is the
    // same.
    let mut other = pw.clone();
    other.entries.insert(
        passwords::NAME_KEY.to_owned(),
        Secret::Value("another-name-key-0123456789".into()),
    );
    let second = kubernetes::render(&config(other)).unwrap();
    // By prefix and content (two containers may share a prefix with different files).
    let by_content = |names: &[(String, String, Vec<u8>)]| {
        names
            .iter()
            .map(|(p, h, c)| ((p.clone(), kstack_render::names::short_hash(c)), h.clone()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (before, after) = (by_content(&secrets), by_content(&secret_names(&second)));
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the same Secrets with the same content"
    );
    for (key, h1) in &before {
        assert_ne!(
            h1, &after[key],
            "Secret {}: the name does not depend on the key",
            key.0
        );
    }
    let config_maps = |r: &kstack_render::Rendered| -> Vec<String> {
        r.objects
            .iter()
            .filter(|o| matches!(o, Object::ConfigMap(_)))
            .map(|o| o.name().to_owned())
            .collect()
    };
    assert_eq!(config_maps(&first), config_maps(&second));

    // The same key and content: the same names, so an unchanged Secret never rolls its pods.
    let again = kubernetes::render(&config(pw)).unwrap();
    assert_eq!(secret_names(&again), secrets);
}

#[test]
fn without_the_name_key_rendering_stops_naming_the_key_and_genpwd() {
    let (mut pw, values) = passwords_around("", "");
    pw.entries.remove(passwords::NAME_KEY);
    let err = kubernetes::render(&config(pw)).unwrap_err().to_string();
    assert!(err.contains(passwords::NAME_KEY), "{err}");
    assert!(err.contains("kstack genpwd"), "{err}");
    assert!(leak(&err, &values).is_none(), "{err}");
}
