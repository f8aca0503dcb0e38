//! Evaluating globals.yml and passwords.yml values as Jinja, the way kolla-ansible does.
//!
//! kolla-ansible hands both files to Ansible as variables, and Ansible templates a value when it
//! is used: `kolla_external_fqdn: "{{ kolla_external_vip_address }}"` or
//! `enable_keystone: "{{ enable_openstack_core | bool }}"` are ordinary lines of real files.
//! kstack evaluates every such value once, at load time, before typing the globals:
//!
//! - a value may refer to any variable of either file, to kstack's defaults, and to the
//!   kolla-ansible defaults of [`kolla_defaults`] (themselves Jinja, as in kolla-ansible's
//!   `group_vars/all.yml`);
//! - a value that is one expression (`"{{ x | bool }}"`) keeps the expression's type (a
//!   boolean, a number, a list); any other template gives a string;
//! - lists and mappings are evaluated item by item;
//! - a globals.yml value may not refer to a password: globals reach ConfigMaps, passwords only
//!   Secrets;
//! - an undefined variable, a cycle or a failing filter is an error naming the file, the line and
//!   the variable; a passwords.yml error never shows the value, nor a name taken from it.
//!
//! The filters are minijinja's built-ins (`default`, `lower`, `upper`, `replace`, `join`, `int`,
//! `string`, `list`, `select`, `map`, `trim`, `unique`, ...) with Ansible's meaning of `bool`,
//! plus the Ansible filters kolla-ansible's defaults use: `ternary`, `regex_replace`, `mandatory`,
//! `union`, `difference`, `intersect`, `basename`, `dirname`, `to_json`. Filters that read host
//! facts (`kolla_address`, `put_address_in_context`) and Ansible's host variables (`hostvars`,
//! `groups`, `inventory_hostname`, `ansible_facts`) have no meaning without an Ansible inventory:
//! they are errors that say so.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use minijinja::value::{Object, Value as JValue, ValueKind};
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior};
use serde_json::Value;

/// kolla-ansible 2025.1 defaults (from its `group_vars/all.yml`) that a value may refer to and
/// that kstack does not already default. Each is itself evaluated, so the chains of defaults work
/// as in kolla-ansible. kstack's own defaults ([`kstack_model::globals::defaults`]) come first.
/// These, and the one made from kstack's distribution table ([`distro_version_default`]).
pub fn kolla_defaults() -> Vec<(&'static str, String)> {
    KOLLA_DEFAULTS
        .iter()
        .map(|(k, v)| (*k, (*v).to_owned()))
        .chain([("kolla_base_distro_version", distro_version_default())])
        .collect()
}

/// `kolla_base_distro_version`'s default as kolla-ansible writes it, a Jinja mapping from each
/// `kolla_base_distro` to its version, made from [`kstack_model::distro::ALL`] (the one list
/// of the distributions), sorted by name.
pub fn distro_version_default() -> String {
    let mut versions: Vec<(&str, &str)> = kstack_model::distro::ALL
        .iter()
        .map(|d| (d.name, d.version))
        .collect();
    versions.sort_unstable();
    let table: Vec<String> = versions
        .iter()
        .map(|(name, version)| format!("'{name}': '{version}'"))
        .collect();
    format!("{{{{ {{{}}}[kolla_base_distro] }}}}", table.join(", "))
}

/// The defaults of [`kolla_defaults`] that are written out here.
const KOLLA_DEFAULTS: &[(&str, &str)] = &[
    ("kolla_internal_fqdn", "{{ kolla_internal_vip_address }}"),
    (
        "kolla_external_vip_address",
        "{{ kolla_internal_vip_address }}",
    ),
    ("kolla_external_fqdn", "{{ kolla_external_vip_address }}"),
    ("kolla_external_vip_interface", "{{ network_interface }}"),
    ("api_interface", "{{ network_interface }}"),
    ("migration_interface", "{{ api_interface }}"),
    ("storage_interface", "{{ network_interface }}"),
    ("swift_storage_interface", "{{ storage_interface }}"),
    (
        "swift_replication_interface",
        "{{ swift_storage_interface }}",
    ),
    ("tunnel_interface", "{{ network_interface }}"),
    ("dns_interface", "{{ network_interface }}"),
    ("octavia_network_interface", "{{ api_interface }}"),
    (
        "openstack_tag",
        "{{ openstack_release }}-{{ kolla_base_distro }}-{{ kolla_base_distro_version }}{{ openstack_tag_suffix }}",
    ),
    ("node_config", "/etc/kolla"),
    ("node_custom_config", "{{ node_config }}/config"),
    ("kolla_container_engine", "docker"),
    ("neutron_plugin_agent", "openvswitch"),
    ("kolla_enable_tls_internal", "no"),
    (
        "kolla_enable_tls_external",
        "{{ kolla_enable_tls_internal if kolla_same_external_internal_vip | bool else 'no' }}",
    ),
    ("kolla_enable_tls_backend", "no"),
    (
        "kolla_same_external_internal_vip",
        "{{ kolla_external_vip_address == kolla_internal_vip_address }}",
    ),
    (
        "internal_protocol",
        "{{ 'https' if kolla_enable_tls_internal | bool else 'http' }}",
    ),
    (
        "external_protocol",
        "{{ 'https' if kolla_enable_tls_external | bool else 'http' }}",
    ),
    ("openstack_logging_debug", "False"),
    ("enable_haproxy", "yes"),
    ("enable_keepalived", "{{ enable_haproxy | bool }}"),
    ("enable_keystone", "{{ enable_openstack_core | bool }}"),
    ("enable_glance", "{{ enable_openstack_core | bool }}"),
    ("enable_nova", "{{ enable_openstack_core | bool }}"),
    ("enable_neutron", "{{ enable_openstack_core | bool }}"),
    ("enable_heat", "{{ enable_openstack_core | bool }}"),
    ("enable_horizon", "{{ enable_openstack_core | bool }}"),
    ("enable_placement", "{{ enable_nova | bool }}"),
    (
        "enable_openvswitch",
        "{{ enable_neutron | bool and neutron_plugin_agent != 'ovn' }}",
    ),
    ("glance_backend_file", "yes"),
    ("glance_backend_ceph", "no"),
    ("glance_backend_swift", "no"),
    ("glance_backend_s3", "no"),
    ("glance_backend_vmware", "no"),
];

/// Variables of Ansible itself, not of kolla-ansible: they describe an inventory and its hosts.
const ANSIBLE_ONLY: &[&str] = &[
    "hostvars",
    "groups",
    "group_names",
    "inventory_hostname",
    "inventory_hostname_short",
    "ansible_facts",
    "ansible_host",
    "ansible_hostname",
    "ansible_default_ipv4",
    "play_hosts",
];

/// How many variables deep a reference may go (each level is a nested template evaluation).
const MAX_DEPTH: usize = 64;

/// Where a variable's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// globals.yml, at this line and column.
    Globals { line: usize, column: usize },
    /// passwords.yml, at this line and column.
    Passwords { line: usize, column: usize },
    /// kstack's built-in default.
    KstackDefault,
    /// A kolla-ansible default from [`kolla_defaults`].
    KollaDefault,
}

impl Origin {
    fn is_password(self) -> bool {
        matches!(self, Origin::Passwords { .. })
    }
    fn is_user(self) -> bool {
        matches!(self, Origin::Globals { .. } | Origin::Passwords { .. })
    }
}

/// Why a value could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The expression uses a name that no file and no default defines (`None`: the name is not
    /// shown because it was taken from a password).
    Undefined(Option<String>),
    /// The variables refer to each other in a circle (first and last are the same).
    Cycle(Vec<String>),
    /// A globals.yml value refers to this password.
    PasswordInGlobals(String),
    /// The template is not valid, or a filter failed; the text says how (never for passwords).
    Invalid(String),
}

/// One evaluation error, reported against the user's variable where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    /// The user's variable the error is reported against.
    pub key: String,
    /// Its location.
    pub origin: Origin,
    /// The variables followed from `key` to the one whose expression failed (empty when `key`'s
    /// own expression failed).
    pub via: Vec<String>,
    pub problem: Problem,
}

impl EvalError {
    /// The message, naming the chain of variables followed and what went wrong.
    pub fn message(&self) -> String {
        let via = if self.via.is_empty() {
            String::new()
        } else {
            let chain: Vec<String> = self.via.iter().map(|v| format!("`{v}`")).collect();
            format!(" (through {})", chain.join(" → "))
        };
        match &self.problem {
            Problem::Undefined(Some(name)) if ANSIBLE_ONLY.contains(&name.as_str()) => format!(
                "the Jinja expression{via} refers to `{name}`, an Ansible inventory or host fact; kstack has no Ansible inventory"
            ),
            Problem::Undefined(Some(name)) => format!(
                "the Jinja expression{via} refers to `{name}`, which is not defined in globals.yml, passwords.yml or kstack's defaults"
            ),
            Problem::Undefined(None) => format!(
                "the Jinja expression{via} refers to a variable that is not defined (the value is not shown: it is a secret)"
            ),
            Problem::Cycle(cycle) => {
                let c: Vec<String> = cycle.iter().map(|v| format!("`{v}`")).collect();
                format!(
                    "the variables refer to each other in a circle: {}",
                    c.join(" → ")
                )
            }
            Problem::PasswordInGlobals(pw) => format!(
                "the Jinja expression{via} refers to the password `{pw}`; globals.yml values are written into ConfigMaps, so they may not hold a password"
            ),
            Problem::Invalid(why) => {
                format!("the Jinja expression{via} cannot be evaluated: {why}")
            }
        }
    }

    /// What to do about it.
    pub fn help(&self) -> String {
        match &self.problem {
            Problem::Undefined(Some(name)) if ANSIBLE_ONLY.contains(&name.as_str()) => {
                "write the final value instead of reading it from the inventory".into()
            }
            Problem::Undefined(_) => {
                "define the variable in globals.yml, fix its spelling, or give a fallback with `| default(...)`; to keep `{{` as text write `{{ '{{' }}`".into()
            }
            Problem::Cycle(_) => "give one of these variables a final value".into(),
            Problem::PasswordInGlobals(_) => {
                "use the password in a template or a config/ override file, where it is kept in a Secret".into()
            }
            Problem::Invalid(_) => {
                "fix the expression (filters: default, bool, lower, upper, replace, ternary, regex_replace, join, int, ...); to keep `{{` as text write `{{ '{{' }}`".into()
            }
        }
    }
}

/// Whether a string holds Jinja syntax that Ansible would evaluate.
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// A variable to evaluate. (No `Debug`: it may hold a password.)
#[derive(Clone)]
pub struct Source {
    pub value: Value,
    pub origin: Origin,
}

#[derive(Default)]
struct State {
    done: HashMap<String, Value>,
    stack: Vec<String>,
    /// The first real failure of the current top-level evaluation (undefined names that a
    /// `default` filter catches are not failures).
    failure: Option<(Vec<String>, Problem)>,
    /// The last name looked up and not found, and the stack at that moment.
    missing: Option<(String, Vec<String>)>,
    /// Whether the top-level variable being evaluated comes from globals.yml.
    in_globals: bool,
}

struct Evaluator {
    env: Environment<'static>,
    sources: BTreeMap<String, Source>,
    state: Mutex<State>,
}

/// The variables as seen by a template: each is evaluated on first use.
#[derive(Debug)]
struct Scope(Arc<Evaluator>);

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Evaluator")
    }
}

impl Object for Scope {
    fn get_value(self: &Arc<Self>, key: &JValue) -> Option<JValue> {
        let name = key.as_str()?;
        let ev = &self.0;
        if !ev.sources.contains_key(name) {
            let mut st = ev.lock();
            let stack = st.stack.clone();
            st.missing = Some((name.to_owned(), stack));
            return None;
        }
        {
            let mut st = ev.lock();
            if st.in_globals && ev.sources[name].origin.is_password() {
                if st.failure.is_none() {
                    let stack = st.stack.clone();
                    st.failure = Some((stack, Problem::PasswordInGlobals(name.to_owned())));
                }
                return None;
            }
        }
        ev.var(name, &self.clone()).ok().map(|v| to_jinja(&v))
    }
}

impl Evaluator {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of `name`, evaluated (and remembered) on first use.
    fn var(&self, name: &str, scope: &Arc<Scope>) -> Result<Value, ()> {
        {
            let mut st = self.lock();
            if let Some(v) = st.done.get(name) {
                return Ok(v.clone());
            }
            if st.stack.len() >= MAX_DEPTH {
                if st.failure.is_none() {
                    let stack = st.stack.clone();
                    st.failure = Some((
                        stack,
                        Problem::Invalid(format!(
                            "the variables refer to each other more than {MAX_DEPTH} deep"
                        )),
                    ));
                }
                return Err(());
            }
            if let Some(pos) = st.stack.iter().position(|s| s == name) {
                if st.failure.is_none() {
                    let mut cycle = st.stack[pos..].to_vec();
                    cycle.push(name.to_owned());
                    let stack = st.stack[..pos].to_vec();
                    st.failure = Some((stack, Problem::Cycle(cycle)));
                }
                return Err(());
            }
            st.stack.push(name.to_owned());
        }
        let source = self.sources[name].clone();
        let result = self.value(&source.value, source.origin.is_password(), scope);
        let mut st = self.lock();
        st.stack.pop();
        match result {
            Ok(v) => {
                st.done.insert(name.to_owned(), v.clone());
                Ok(v)
            }
            Err(e) => {
                if st.failure.is_none() {
                    let mut stack = st.stack.clone();
                    stack.push(name.to_owned());
                    let problem = match (e.kind(), &st.missing) {
                        (ErrorKind::UndefinedError, Some((missing, at))) if *at == stack => {
                            if source.origin.is_password() {
                                Problem::Undefined(None)
                            } else {
                                Problem::Undefined(Some(missing.clone()))
                            }
                        }
                        _ if source.origin.is_password() => Problem::Invalid(
                            "the expression is not valid or a filter failed (the value is not shown: it is a secret)".into(),
                        ),
                        _ => Problem::Invalid(describe_error(&e)),
                    };
                    st.failure = Some((stack, problem));
                }
                Err(())
            }
        }
    }

    /// Evaluates a value: strings with Jinja syntax, and lists and mappings item by item.
    fn value(&self, v: &Value, as_string: bool, scope: &Arc<Scope>) -> Result<Value, Error> {
        match v {
            Value::String(s) if is_template(s) => {
                let ctx = JValue::from_dyn_object(scope.clone());
                if !as_string && let Some(expr) = single_expression(s) {
                    let out = self.env.compile_expression(expr)?.eval(ctx)?;
                    if out.is_undefined() {
                        return Err(Error::new(ErrorKind::UndefinedError, "undefined value"));
                    }
                    return to_json(&out);
                }
                Ok(Value::String(self.env.render_str(s, ctx)?))
            }
            Value::Array(items) => items
                .iter()
                .map(|x| self.value(x, as_string, scope))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(m) => m
                .iter()
                .map(|(k, x)| Ok((k.clone(), self.value(x, as_string, scope)?)))
                .collect::<Result<serde_json::Map<_, _>, _>>()
                .map(Value::Object),
            other => Ok(other.clone()),
        }
    }
}

/// A YAML/JSON value as a template value.
pub fn to_jinja(v: &Value) -> JValue {
    match v {
        Value::Null => JValue::from(()),
        Value::Bool(b) => JValue::from(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => JValue::from(i),
            (_, Some(u), _) => JValue::from(u),
            (_, _, f) => JValue::from(f.unwrap_or_default()),
        },
        Value::String(s) => JValue::from(s.as_str()),
        Value::Array(a) => JValue::from(a.iter().map(to_jinja).collect::<Vec<_>>()),
        Value::Object(o) => JValue::from(
            o.iter()
                .map(|(k, v)| (k.clone(), to_jinja(v)))
                .collect::<BTreeMap<String, JValue>>(),
        ),
    }
}

/// A template value as a YAML/JSON value; undefined is an error.
fn to_json(v: &JValue) -> Result<Value, Error> {
    Ok(match v.kind() {
        ValueKind::Undefined => {
            return Err(Error::new(ErrorKind::UndefinedError, "undefined value"));
        }
        ValueKind::None => Value::Null,
        ValueKind::Bool => Value::Bool(v.is_true()),
        ValueKind::Number => {
            if let Ok(i) = i64::try_from(v.clone()) {
                Value::from(i)
            } else {
                f64::try_from(v.clone())
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        ValueKind::String => Value::String(v.as_str().unwrap_or_default().to_owned()),
        ValueKind::Map => {
            let mut m = serde_json::Map::new();
            for k in v.try_iter()? {
                let item = v.get_item(&k)?;
                m.insert(k.to_string(), to_json(&item)?);
            }
            Value::Object(m)
        }
        ValueKind::Seq | ValueKind::Iterable => Value::Array(
            v.try_iter()?
                .map(|x| to_json(&x))
                .collect::<Result<_, _>>()?,
        ),
        _ => Value::String(v.to_string()),
    })
}

/// The expression of a string that is exactly one `{{ ... }}`, if it is.
fn single_expression(s: &str) -> Option<&str> {
    let t = s.trim();
    let inner = t.strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%")).then_some(inner)
}

fn describe_error(e: &Error) -> String {
    let mut s = match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    };
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(&format!(": {inner}"));
        src = inner.source();
    }
    s
}

/// Ansible's `bool`: yes/no/true/false/on/off/1/0 in any case, booleans and numbers.
fn ansible_bool(v: JValue) -> Result<bool, Error> {
    if let Some(b) = v.as_str().map(str::to_ascii_lowercase) {
        return match b.trim() {
            "yes" | "true" | "on" | "1" | "y" => Ok(true),
            "no" | "false" | "off" | "0" | "n" | "" => Ok(false),
            other => Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("`bool` cannot read the string `{other}` as a boolean"),
            )),
        };
    }
    if v.is_undefined() || v.is_none() {
        return Ok(false);
    }
    Ok(v.is_true())
}

/// The work one globals value may take to evaluate (minijinja's fuel: instructions, and bytes
/// of output, which a `format` width or a loop can ask for in the gigabytes). A value of
/// kolla-ansible's globals.yml takes a few hundred.
const FUEL: u64 = 200_000;

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_recursion_limit(100);
    env.set_fuel(Some(FUEL));
    env.add_filter("bool", ansible_bool);
    env.add_filter(
        "ternary",
        |v: JValue, yes: JValue, no: JValue, none: Option<JValue>| -> JValue {
            match none {
                Some(n) if v.is_none() => n,
                _ if v.is_true() => yes,
                _ => no,
            }
        },
    );
    env.add_filter(
        "regex_replace",
        |s: String, pattern: String, replacement: Option<String>| -> Result<String, Error> {
            let re = regex::Regex::new(&pattern).map_err(|e| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!("bad regular expression: {e}"),
                )
            })?;
            // Python's `\1` back-references become the regex crate's `${1}`.
            let rep = back_references(replacement.as_deref().unwrap_or(""));
            Ok(re.replace_all(&s, rep.as_str()).into_owned())
        },
    );
    env.add_filter("mandatory", |v: JValue| -> Result<JValue, Error> {
        if v.is_undefined() {
            Err(Error::new(
                ErrorKind::UndefinedError,
                "a mandatory variable is not defined",
            ))
        } else {
            Ok(v)
        }
    });
    env.add_filter("union", |a: Vec<JValue>, b: Vec<JValue>| -> Vec<JValue> {
        let mut out = a;
        for x in b {
            if !out.contains(&x) {
                out.push(x);
            }
        }
        out
    });
    env.add_filter(
        "difference",
        |a: Vec<JValue>, b: Vec<JValue>| -> Vec<JValue> {
            a.into_iter().filter(|x| !b.contains(x)).collect()
        },
    );
    env.add_filter(
        "intersect",
        |a: Vec<JValue>, b: Vec<JValue>| -> Vec<JValue> {
            a.into_iter().filter(|x| b.contains(x)).collect()
        },
    );
    env.add_filter("basename", |s: String| -> String {
        s.rsplit('/').next().unwrap_or("").to_owned()
    });
    env.add_filter("dirname", |s: String| -> String {
        match s.rfind('/') {
            Some(0) => "/".into(),
            Some(i) => s[..i].to_owned(),
            None => String::new(),
        }
    });
    env.add_filter("to_json", |v: JValue| -> Result<String, Error> {
        Ok(to_json(&v)?.to_string())
    });
    for facts in ["kolla_address", "put_address_in_context"] {
        env.add_filter(facts, move |_: JValue| -> Result<JValue, Error> {
            Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("`{facts}` reads a host's network facts from the Ansible inventory, which kstack does not have; write the address"),
            ))
        });
    }
    env
}

fn back_references(rep: &str) -> String {
    let mut out = String::new();
    let mut chars = rep.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut n = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    n.push(*d);
                    chars.next();
                }
                out.push_str(&format!("${{{n}}}"));
            }
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out
}

/// Evaluates every user variable (origin globals.yml or passwords.yml) of `sources`, returning
/// the user variables' values and the errors, one per variable where an error starts.
/// Passwords are evaluated as strings.
pub fn evaluate(sources: BTreeMap<String, Source>) -> (BTreeMap<String, Value>, Vec<EvalError>) {
    let user: Vec<(String, Origin)> = sources
        .iter()
        .filter(|(_, s)| s.origin.is_user())
        .map(|(k, s)| (k.clone(), s.origin))
        .collect();
    let ev = Arc::new(Evaluator {
        env: environment(),
        sources,
        state: Mutex::new(State::default()),
    });
    let scope = Arc::new(Scope(ev.clone()));
    let mut out = BTreeMap::new();
    let mut errors: Vec<EvalError> = Vec::new();
    let mut reported = BTreeSet::new();
    for (key, origin) in user {
        {
            let mut st = ev.lock();
            st.failure = None;
            st.missing = None;
            st.stack.clear();
            st.in_globals = matches!(origin, Origin::Globals { .. });
        }
        let result = ev.var(&key, &scope);
        let failure = ev.lock().failure.take();
        match (result, failure) {
            (Ok(v), None) => {
                out.insert(key, v);
            }
            (_, Some((stack, problem))) => {
                // Report against the deepest user variable on the way to the failure.
                let at = stack
                    .iter()
                    .rposition(|k| ev.sources.get(k).is_some_and(|s| s.origin.is_user()))
                    .unwrap_or(0);
                let (at_key, via) = match stack.get(at) {
                    Some(k) => (k.clone(), stack[at + 1..].to_vec()),
                    None => (key.clone(), Vec::new()),
                };
                let first = reported.insert(at_key.clone());
                if let Problem::Cycle(members) = &problem {
                    reported.extend(members.iter().cloned());
                }
                if first {
                    let origin = ev.sources.get(&at_key).map_or(origin, |s| s.origin);
                    errors.push(EvalError {
                        key: at_key,
                        origin,
                        via,
                        problem,
                    });
                }
            }
            (Err(()), None) => {
                if reported.insert(key.clone()) {
                    errors.push(EvalError {
                        key,
                        origin,
                        via: Vec::new(),
                        problem: Problem::Invalid("the value could not be evaluated".into()),
                    });
                }
            }
        }
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn g(line: usize) -> Origin {
        Origin::Globals { line, column: 1 }
    }

    fn run(vars: &[(&str, Value, Origin)]) -> (BTreeMap<String, Value>, Vec<EvalError>) {
        let mut sources: BTreeMap<String, Source> = kolla_defaults()
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_owned(),
                    Source {
                        value: json!(v),
                        origin: Origin::KollaDefault,
                    },
                )
            })
            .collect();
        for (k, v) in kstack_model::globals::defaults() {
            sources.insert(
                k,
                Source {
                    value: v,
                    origin: Origin::KstackDefault,
                },
            );
        }
        for (k, v, o) in vars {
            sources.insert(
                (*k).to_owned(),
                Source {
                    value: v.clone(),
                    origin: *o,
                },
            );
        }
        evaluate(sources)
    }

    #[test]
    fn references_follow_chains_of_defaults_and_keep_types() {
        let (out, errors) = run(&[
            ("kolla_internal_vip_address", json!("10.0.0.10"), g(1)),
            ("public", json!("{{ kolla_external_fqdn }}"), g(2)),
            (
                "enable_cinder",
                json!("{{ enable_openstack_core | bool }}"),
                g(3),
            ),
            ("region", json!("{{ 'Region' ~ 'Two' | lower }}"), g(4)),
            ("tag", json!("{{ openstack_tag }}"), g(5)),
            (
                "url",
                json!("http://{{ kolla_internal_vip_address }}:5000"),
                g(6),
            ),
            ("list", json!(["{{ api_interface }}", 3]), g(7)),
        ]);
        assert_eq!(errors, vec![]);
        assert_eq!(out["public"], json!("10.0.0.10"));
        assert_eq!(out["enable_cinder"], json!(true));
        assert_eq!(out["region"], json!("Regiontwo"));
        assert_eq!(out["tag"], json!("2025.1-rocky-9"));
        assert_eq!(out["url"], json!("http://10.0.0.10:5000"));
        assert_eq!(out["list"], json!(["eth0", 3]));
        assert_eq!(out["kolla_internal_vip_address"], json!("10.0.0.10"));
    }

    #[test]
    fn the_distro_version_default_is_kstacks_distribution_table() {
        for d in kstack_model::distro::ALL {
            let (out, errors) = run(&[
                ("kolla_base_distro", json!(d.name), g(1)),
                ("version", json!("{{ kolla_base_distro_version }}"), g(2)),
                ("tag", json!("{{ openstack_tag }}"), g(3)),
            ]);
            assert_eq!(errors, vec![]);
            assert_eq!(out["version"], json!(d.version), "{}", d.name);
            assert_eq!(
                out["tag"],
                json!(format!("2025.1-{}-{}", d.name, d.version))
            );
        }
        // The same text as kolla-ansible's `group_vars/all.yml`.
        assert_eq!(
            distro_version_default(),
            "{{ {'centos': 'stream9', 'debian': 'bookworm', 'rocky': '9', 'ubuntu': 'noble'}[kolla_base_distro] }}"
        );
    }

    #[test]
    fn ansible_filters_behave_as_in_ansible() {
        let (out, errors) = run(&[
            ("a", json!("{{ 'no' | bool }}"), g(1)),
            ("b", json!("{{ 'On' | bool }}"), g(2)),
            ("c", json!("{{ (1 == 1) | ternary('x', 'y') }}"), g(3)),
            // As in YAML `"... regex_replace('^(\\w+)', '\\1')"`: the Jinja string holds `\1`.
            (
                "d",
                json!(r"{{ 'eth0.100' | regex_replace('^(\\w+)\\.(\\d+)$', '\\2-\\1') }}"),
                g(4),
            ),
            (
                "e",
                json!("{{ undefined_thing | default('fallback') }}"),
                g(5),
            ),
            (
                "f",
                json!("{{ ['a', 'b'] | union(['b', 'c']) | join(',') }}"),
                g(6),
            ),
            ("h", json!("{{ '/etc/kolla/config' | basename }}"), g(7)),
            (
                "i",
                json!("{{ 'a-b-c' | replace('-', '_') | upper }}"),
                g(8),
            ),
        ]);
        assert_eq!(errors, vec![]);
        assert_eq!(out["a"], json!(false));
        assert_eq!(out["b"], json!(true));
        assert_eq!(out["c"], json!("x"));
        assert_eq!(out["d"], json!("100-eth0"));
        assert_eq!(out["e"], json!("fallback"));
        assert_eq!(out["f"], json!("a,b,c"));
        assert_eq!(out["h"], json!("config"));
        assert_eq!(out["i"], json!("A_B_C"));
    }

    #[test]
    fn an_undefined_name_is_reported_where_it_is_written() {
        let (_, errors) = run(&[
            ("a", json!("{{ b }}"), g(1)),
            ("b", json!("x-{{ nowhere }}"), g(2)),
        ]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "b");
        assert_eq!(errors[0].origin, g(2));
        assert_eq!(
            errors[0].problem,
            Problem::Undefined(Some("nowhere".into()))
        );
        assert!(
            errors[0].message().contains("`nowhere`"),
            "{}",
            errors[0].message()
        );
    }

    #[test]
    fn an_undefined_name_behind_defaults_is_reported_at_the_user_variable_with_the_chain() {
        // kolla_external_fqdn → kolla_external_vip_address → kolla_internal_vip_address (unset).
        let (_, errors) = run(&[("public", json!("{{ kolla_external_fqdn }}"), g(4))]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let e = &errors[0];
        assert_eq!((e.key.as_str(), e.origin), ("public", g(4)));
        assert_eq!(
            e.via,
            vec!["kolla_external_fqdn", "kolla_external_vip_address"]
        );
        assert_eq!(
            e.problem,
            Problem::Undefined(Some("kolla_internal_vip_address".into()))
        );
        assert!(
            e.message()
                .contains("`kolla_external_fqdn` → `kolla_external_vip_address`")
        );
    }

    #[test]
    fn a_very_long_chain_of_references_is_an_error_not_a_stack_overflow() {
        let names: Vec<String> = (0..5000).map(|i| format!("v{i}")).collect();
        let vars: Vec<(&str, Value, Origin)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let next = names.get(i + 1).map_or("'end'".to_owned(), Clone::clone);
                (n.as_str(), json!(format!("{{{{ {next} }}}}")), g(i + 1))
            })
            .collect();
        let (_, errors) = run(&vars);
        assert!(!errors.is_empty());
        assert!(
            errors
                .iter()
                .all(|e| e.message().contains("more than 64 deep")),
            "{errors:?}"
        );
    }

    #[test]
    fn cycles_are_named_once() {
        let (_, errors) = run(&[
            ("a", json!("{{ b }}"), g(1)),
            ("b", json!("{{ c }}"), g(2)),
            ("c", json!("{{ a | default('x') }}"), g(3)),
        ]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            errors[0].problem,
            Problem::Cycle(vec!["a".into(), "b".into(), "c".into(), "a".into()])
        );
        assert!(errors[0].message().contains("`a` → `b` → `c` → `a`"));
    }

    #[test]
    fn a_global_may_not_read_a_password_but_a_password_may_read_globals() {
        let pw = |line| Origin::Passwords { line, column: 1 };
        let (out, errors) = run(&[
            ("database_password", json!("s3cret"), pw(1)),
            (
                "keystone_database_password",
                json!("{{ database_password }}-{{ openstack_region_name }}"),
                pw(2),
            ),
            ("leak", json!("{{ database_password }}"), g(1)),
        ]);
        assert_eq!(out["keystone_database_password"], json!("s3cret-RegionOne"));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "leak");
        assert_eq!(
            errors[0].problem,
            Problem::PasswordInGlobals("database_password".into())
        );
        assert!(!errors[0].message().contains("s3cret"));
    }

    #[test]
    fn password_errors_never_show_the_value_or_names_from_it() {
        let pw = Origin::Passwords { line: 3, column: 5 };
        let (_, errors) = run(&[
            ("a_password", json!("{{ hunter2secret }}"), pw),
            (
                "b_password",
                json!("{{ 'x' | regex_replace('(', 'hunter3') }}"),
                pw,
            ),
        ]);
        assert_eq!(errors.len(), 2, "{errors:?}");
        for e in &errors {
            let text = format!("{} {} {:?}", e.message(), e.help(), e.problem);
            assert!(!text.contains("hunter"), "{text}");
        }
        assert_eq!(errors[0].problem, Problem::Undefined(None));
    }

    #[test]
    fn passwords_stay_strings_and_host_facts_are_refused() {
        let pw = Origin::Passwords { line: 1, column: 1 };
        let (out, errors) = run(&[
            ("x_password", json!("{{ 12 }}"), pw),
            ("addr", json!("{{ 'api' | kolla_address }}"), g(2)),
            ("host", json!("{{ hostvars[inventory_hostname] }}"), g(3)),
            ("plain", json!("no jinja here {"), g(4)),
        ]);
        assert_eq!(out["x_password"], json!("12"));
        assert_eq!(out["plain"], json!("no jinja here {"));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].message().contains("kolla_address"),
            "{}",
            errors[0].message()
        );
        assert!(
            errors[1].message().contains("Ansible inventory"),
            "{}",
            errors[1].message()
        );
    }
}
