//! kolla-ansible's value conventions, as serde `deserialize_with` helpers, and the list of
//! problems typing collects.
//!
//! globals.yml is read by Ansible, which is lenient: `"yes"`, `on` and `1` are booleans,
//! `openstack_release: 2025.1` (a YAML float) is the string `2025.1`, `"1800"` is a number of
//! seconds. Each convention is a function from the value to its typed form (`None`: the value
//! is not of that form); its `deserialize_with` helper keeps the value as given beside it, in
//! a [`Read`], because the messages quote it and some checks look at its YAML kind. A wrong
//! value is not a serde error: typing goes on, so that every problem is reported at once, each
//! with the variable it belongs to.
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::GlobalsIssue;

/// One variable as a convention read it.
#[derive(Debug, Clone)]
pub(super) struct Read<T> {
    /// The value as given; `None` when the variable is not set at all.
    pub raw: Option<Value>,
    /// What the convention made of it; `None` when not set or not of the convention's form.
    pub typed: Option<T>,
}

impl<T> Default for Read<T> {
    fn default() -> Self {
        Read {
            raw: None,
            typed: None,
        }
    }
}

impl<T> Read<T> {
    /// Reads `raw` with `convention`.
    pub fn of(raw: &Value, convention: impl Fn(&Value) -> Option<T>) -> Self {
        Read {
            typed: convention(raw),
            raw: Some(raw.clone()),
        }
    }

    /// Whether the variable has a value (`key:` with nothing after it has none).
    pub fn is_set(&self) -> bool {
        self.raw.as_ref().is_some_and(|v| !v.is_null())
    }

    /// The value as given, `null` when not set.
    pub fn raw(&self) -> &Value {
        self.raw.as_ref().unwrap_or(&Value::Null)
    }
}

/// The `deserialize_with` helper of a convention.
fn read<'de, D, T>(d: D, convention: impl Fn(&Value) -> Option<T>) -> Result<Read<T>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(Read::of(&Value::deserialize(d)?, convention))
}

/// Reads an Ansible-style boolean: YAML booleans or the strings yes/no/true/false/on/off.
pub fn parse_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "yes" | "true" | "on" | "1" => Some(true),
            "no" | "false" | "off" | "0" => Some(false),
            _ => None,
        },
        Value::Number(n) => match n.as_u64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A string, or a number meaning its digits: Ansible turns numbers into strings in templates,
/// and `openstack_release: 2025.1` is a float in YAML but means the string "2025.1".
pub(super) fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A whole number, written as a YAML integer or as a string holding one.
pub(super) fn as_count(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// A mapping, each entry read by `entry`, in the order written (problems are reported in it).
pub(super) fn as_mapping<T>(v: &Value, entry: impl Fn(&Value) -> Option<T>) -> Option<Entries<T>> {
    let Value::Object(m) = v else {
        return None;
    };
    Some(
        m.iter()
            .map(|(k, x)| (k.clone(), Read::of(x, &entry)))
            .collect(),
    )
}

/// `deserialize_with`: a string ([`as_text`]).
pub(super) fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Read<String>, D::Error> {
    read(d, as_text)
}

/// `deserialize_with`: an Ansible boolean ([`parse_bool`]).
pub(super) fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<Read<bool>, D::Error> {
    read(d, parse_bool)
}

/// `deserialize_with`: a whole number, or a string holding one ([`as_count`]).
pub(super) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Read<u64>, D::Error> {
    read(d, as_count)
}

/// `deserialize_with`: a whole number written as a YAML integer (kstack's own settings).
pub(super) fn integer<'de, D: Deserializer<'de>>(d: D) -> Result<Read<u64>, D::Error> {
    read(d, Value::as_u64)
}

/// `deserialize_with`: a mapping of service to a whole number (`kstack_replicas`,
/// `kstack_timeouts`).
pub(super) fn per_service_integer<'de, D>(d: D) -> Result<PerService<u64>, D::Error>
where
    D: Deserializer<'de>,
{
    read(d, |v| as_mapping(v, Value::as_u64))
}

/// The entries of a mapping, each read by a convention, in the order written.
pub(super) type Entries<T> = Vec<(String, Read<T>)>;

/// A mapping of service to a value read by a convention.
pub(super) type PerService<T> = Read<Entries<T>>;

/// A mapping of service to a mapping of values read by a convention.
pub(super) type Nested<T> = Read<Entries<Entries<T>>>;

/// `deserialize_with`: a mapping of service to a mapping of strings (`kstack_resources`:
/// quantities, which may be written as numbers).
pub(super) fn per_service_texts<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Nested<String>, D::Error> {
    read(d, |v| as_mapping(v, |m| as_mapping(m, as_text)))
}

/// A value as a message quotes it: the kind of value it is.
pub(super) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing (null)",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A scalar as written (`90`, `"daily"`), anything else by its kind.
pub(super) fn shown(v: &Value) -> String {
    match v {
        Value::Number(n) => format!("`{n}`"),
        Value::String(s) => format!("`{s}`"),
        _ => describe(v).to_owned(),
    }
}

/// A number as written, anything else by its kind.
pub(super) fn number_or_kind(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        other => describe(other).to_owned(),
    }
}

/// A value in a message: control characters escaped.
pub(super) fn quoted(v: &str) -> String {
    let mut s: String = v.escape_debug().collect();
    if s.chars().count() > 80 {
        s = s.chars().take(77).collect::<String>() + "...";
    }
    format!("`{s}`")
}

/// The problems found while typing, in the order found.
#[derive(Debug, Default)]
pub(super) struct Issues(pub Vec<GlobalsIssue>);

impl Issues {
    pub fn push(&mut self, key: &str, subpath: Option<String>, message: String, help: String) {
        self.0.push(GlobalsIssue {
            key: key.to_owned(),
            subpath,
            message,
            help,
        });
    }

    /// A string variable: `""` when it is not set, or not a string (reported).
    pub fn text(&mut self, key: &str, r: &Read<String>) -> String {
        match (&r.typed, &r.raw) {
            (Some(s), _) => s.clone(),
            (None, None) => String::new(),
            (None, Some(other)) => {
                let got = describe(other);
                self.push(
                    key,
                    None,
                    format!("expected a string, found {got}"),
                    format!("write `{key}` as a quoted string, e.g. `{key}: \"value\"`"),
                );
                String::new()
            }
        }
    }

    /// An optional string variable: `None` when not set or empty.
    pub fn opt_text(&mut self, key: &str, r: &Read<String>) -> Option<String> {
        if !r.is_set() {
            return None;
        }
        Some(self.text(key, r)).filter(|s| !s.is_empty())
    }

    /// A string variable that must be one of `allowed` (a number is taken as written).
    pub fn choice(&mut self, key: &str, r: &Read<String>, allowed: &[&str]) -> String {
        let v = self.text(key, r);
        if r.raw().is_string() && !allowed.contains(&v.as_str()) {
            self.push(
                key,
                None,
                format!("`{v}` is not a supported value"),
                format!("use one of: {}", allowed.join(", ")),
            );
        }
        v
    }

    /// A boolean variable: `None` when not set, or not a boolean (reported).
    pub fn flag(&mut self, key: &str, r: &Read<bool>) -> Option<bool> {
        let v = r.raw.as_ref()?;
        if r.typed.is_none() {
            let got = match v {
                Value::String(s) => format!("the string `{s}`"),
                other => describe(other).to_owned(),
            };
            self.push(
                key,
                None,
                format!("expected a boolean, found {got}"),
                format!("write `{key}: \"yes\"` or `{key}: \"no\"`"),
            );
        }
        r.typed
    }
}
