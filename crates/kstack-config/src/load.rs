//! Loading a whole config directory from bytes: globals.yml, passwords.yml and `config/` overrides.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use kstack_model::catalog::Catalog;
use kstack_model::globals::{Globals, defaults, known_keys};
use kstack_model::settings;
use serde_json::Value;

use crate::catalog::{self as cat, CATALOG_FILE};

use crate::diagnostic::{Diag, Severity};
use crate::jinja::{self, Origin, Source};
use crate::passwords::{self, Passwords, Secret};
use crate::yaml::{Entry, parse_entries, span_of};

/// File name of the deployment description inside the config directory.
pub const GLOBALS_FILE: &str = "globals.yml";

/// The raw contents of a config directory. `None` means the file does not exist.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    pub globals: Option<Vec<u8>>,
    pub passwords: Option<Vec<u8>>,
    /// Files under `config/`, by path relative to `config/` with `/` separators.
    pub overrides: BTreeMap<String, Vec<u8>>,
    /// `catalog.yml`, the operator catalog merged over the built-in one.
    pub catalog: Option<Vec<u8>>,
    /// `certificates/haproxy.pem`: the operator's certificate of the public endpoints.
    pub public_certificate: Option<Vec<u8>>,
    /// Entries under `config/` the reader refused without reading them (a symbolic link that
    /// leaves `config/`, a link to a directory, a device or pipe), as errors [`load`] reports.
    pub refused: Vec<Diag>,
}

/// A loaded, valid config directory.
#[derive(Debug, Clone)]
pub struct Config {
    pub globals: Globals,
    pub passwords: Passwords,
    pub overrides: BTreeMap<String, Vec<u8>>,
    /// The built-in catalog with `catalog.yml` merged over it.
    pub catalog: Catalog,
    /// Names of the catalog services whose enable flag is on in globals.yml.
    pub enabled: BTreeSet<String>,
    /// The public endpoints' certificate with TLS on them (`kolla_enable_tls_external`): the
    /// operator's [`PUBLIC_CERTIFICATE_FILE`] when there is one; else `None` until kstack
    /// puts in the one it makes from its CA (on Kubernetes, before rendering).
    pub public_certificate: Option<PublicCertificate>,
}

/// Where the operator's certificate of the public endpoints is, in the config directory
/// (kolla-ansible's `kolla_external_fqdn_cert` in its `kolla_certificates_dir`): the chain,
/// then the private key, PEM, as HAProxy reads them.
pub const PUBLIC_CERTIFICATE_FILE: &str = "certificates/haproxy.pem";

/// The public endpoints' certificate chain and private key (PEM, one file): secret.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicCertificate {
    pub pem: String,
}

impl std::fmt::Debug for PublicCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicCertificate").finish_non_exhaustive()
    }
}

/// What is wrong with an operator's certificate file, if anything: it must hold a
/// certificate and then its private key.
fn certificate_problem(pem: &str) -> Option<&'static str> {
    let cert = pem.find("-----BEGIN CERTIFICATE-----");
    let key = pem
        .find("-----BEGIN PRIVATE KEY-----")
        .or_else(|| pem.find("-----BEGIN RSA PRIVATE KEY-----"))
        .or_else(|| pem.find("-----BEGIN EC PRIVATE KEY-----"));
    match (cert, key) {
        (None, _) => Some("the file holds no certificate (`-----BEGIN CERTIFICATE-----`)"),
        (_, None) => Some("the file holds no private key (`-----BEGIN PRIVATE KEY-----`)"),
        _ => None,
    }
}

impl Config {
    /// A config from already-typed parts (tests, benchmarks, tools): `enabled` is derived from
    /// the catalog's enable flags in `globals`.
    pub fn from_parts(
        globals: Globals,
        passwords: Passwords,
        overrides: BTreeMap<String, Vec<u8>>,
        catalog: Catalog,
    ) -> Config {
        let mut catalog = catalog;
        catalog.apply_conditions(&globals.vars);
        let enabled = cat::enabled_services(&catalog, &globals);
        Config {
            globals,
            passwords,
            overrides,
            catalog,
            enabled,
            public_certificate: None,
        }
    }
}

/// The result of loading: the config when there were no errors, and every diagnostic found.
#[derive(Debug)]
pub struct Loaded {
    pub config: Option<Config>,
    /// Errors and warnings, in file order.
    pub diagnostics: Vec<Diag>,
}

impl Loaded {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diag::is_error)
    }
}

fn utf8<'a>(file: &str, bytes: &'a [u8], diags: &mut Vec<Diag>) -> Option<&'a str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(e) => {
            diags.push(
                Diag::new(
                    Severity::Error,
                    file,
                    format!(
                        "the file is not UTF-8 text (invalid byte at offset {})",
                        e.valid_up_to()
                    ),
                )
                .help("save the file as UTF-8"),
            );
            None
        }
    }
}

/// Parses, evaluates and types globals.yml, returning the globals (if valid) and its
/// diagnostics.
pub fn load_globals(text: &str) -> (Option<Globals>, Vec<Diag>) {
    let (g, d, _) = load_globals_with(text, None);
    (g, d)
}

/// Evaluates the Jinja of globals.yml's entries and, when given, of passwords.yml's values
/// ([`crate::jinja`]). Returns every user variable's value and the evaluation errors.
fn evaluate(
    entries: &[Entry],
    passwords: Option<(&Passwords, &passwords::Locations)>,
) -> (BTreeMap<String, Value>, Vec<Diag>) {
    let mut sources = BTreeMap::new();
    for (k, v) in jinja::kolla_defaults() {
        sources.insert(
            k.to_owned(),
            Source {
                value: Value::String(v),
                origin: Origin::KollaDefault,
            },
        );
    }
    for (k, v) in defaults() {
        sources.insert(
            k,
            Source {
                value: v,
                origin: Origin::KstackDefault,
            },
        );
    }
    for e in entries {
        // `key:` with nothing after it means "not set": the default stays.
        if e.value.is_null() && sources.contains_key(&e.key) {
            continue;
        }
        sources.insert(
            e.key.clone(),
            Source {
                value: e.value.clone(),
                origin: Origin::Globals {
                    line: e.value_loc.line() as usize,
                    column: e.value_loc.column() as usize,
                },
            },
        );
    }
    // kolla-ansible passes passwords.yml after globals.yml: a name in both is the password.
    if let Some((p, locations)) = passwords {
        for (k, secret) in &p.entries {
            if let Secret::Value(v) = secret {
                let (line, column) = locations.get(k).copied().unwrap_or((0, 0));
                sources.insert(
                    k.clone(),
                    Source {
                        value: Value::String(v.clone()),
                        origin: Origin::Passwords {
                            line: line as usize,
                            column: column as usize,
                        },
                    },
                );
            }
        }
    }
    let (values, errors) = jinja::evaluate(sources);
    let diags = errors
        .into_iter()
        .map(|e| {
            let (file, line, column) = match e.origin {
                Origin::Passwords { line, column } => (passwords::FILE, line, column),
                Origin::Globals { line, column } => (GLOBALS_FILE, line, column),
                _ => (GLOBALS_FILE, 0, 0),
            };
            Diag::new(Severity::Error, file, e.message())
                .at(line as u64, column as u64)
                .field(e.key.clone())
                .help(e.help())
        })
        .collect();
    (values, diags)
}

/// [`load_globals`], evaluating passwords.yml's values as well when they are given; returns
/// the evaluated passwords.yml values too (empty when evaluation failed).
fn load_globals_with(
    text: &str,
    passwords: Option<(&Passwords, &passwords::Locations)>,
) -> (Option<Globals>, Vec<Diag>, BTreeMap<String, Value>) {
    let entries = match parse_entries(GLOBALS_FILE, text, false) {
        Ok(e) => e,
        Err(d) => return (None, d, BTreeMap::new()),
    };
    let (evaluated, eval_diags) = evaluate(&entries, passwords);
    let failed: BTreeSet<String> = eval_diags
        .iter()
        .filter(|d| d.file == GLOBALS_FILE)
        .filter_map(|d| d.field.clone())
        .collect();
    let (g, mut diags) = type_globals(text, &entries, &evaluated, &failed);
    diags.extend(eval_diags);
    diags.sort_by(|a, b| {
        (a.file != GLOBALS_FILE, a.line, a.column).cmp(&(b.file != GLOBALS_FILE, b.line, b.column))
    });
    (g, diags, evaluated)
}

/// Types the evaluated globals.yml entries. The variables in `failed` could not be evaluated
/// (their errors are reported already): the others are still typed, so that every problem is
/// reported at once, but no globals are returned.
fn type_globals(
    text: &str,
    entries: &[Entry],
    evaluated: &BTreeMap<String, Value>,
    failed: &BTreeSet<String>,
) -> (Option<Globals>, Vec<Diag>) {
    let known = known_keys();
    let mut diags = Vec::new();
    let mut vars = BTreeMap::new();
    let mut where_ = HashMap::new();
    for e in entries {
        if failed.contains(&e.key) {
            continue;
        }
        let value = evaluated.get(&e.key).unwrap_or(&e.value);
        if let Some(note) = settings::check(&e.key, value) {
            let (severity, loc) = if note.refused {
                (Severity::Error, &e.value_loc)
            } else {
                (Severity::Warning, &e.key_loc)
            };
            let mut d = Diag::new(severity, GLOBALS_FILE, note.message.clone())
                .at(loc.line(), loc.column())
                .field(e.key.clone())
                .help(note.help);
            if note.refused
                && let Some(span) = span_of(loc)
            {
                d = d.snippet(text, span, note.message);
            }
            diags.push(d);
        } else if !known.contains(&e.key)
            && !e.key.ends_with("_tag")
            && settings::lookup(&e.key).is_none()
        {
            diags.push(
                Diag::new(Severity::Warning, GLOBALS_FILE, "kstack does not interpret this variable; templates can still read it")
                    .at(e.key_loc.line(), e.key_loc.column())
                    .field(e.key.clone())
                    .help("check the spelling if you meant a kstack variable (see `kstack init` for the list)"),
            );
        }
        vars.insert(e.key.clone(), value.clone());
        where_.insert(e.key.clone(), e);
    }
    let refused = diags.iter().any(Diag::is_error);
    match Globals::from_vars(&vars) {
        Ok(g) if failed.is_empty() && !refused => (Some(g), diags),
        Ok(_) => (None, diags),
        Err(issues) => {
            for issue in issues.into_iter().filter(|i| !failed.contains(&i.key)) {
                let field = match &issue.subpath {
                    Some(sub) => format!("{}.{sub}", issue.key),
                    None => issue.key.clone(),
                };
                let mut d = Diag::new(Severity::Error, GLOBALS_FILE, issue.message.clone())
                    .field(field)
                    .help(issue.help.clone());
                if let Some(e) = where_.get(&issue.key) {
                    let (line, column) = issue
                        .subpath
                        .as_deref()
                        .and_then(|sub| nested_key_at(text, e.value_loc.line(), sub))
                        .unwrap_or((e.value_loc.line(), e.value_loc.column()));
                    d = d.at(line, column);
                    if let Some(span) = span_of(&e.value_loc) {
                        d = d.snippet(text, span, issue.message.clone());
                    }
                }
                diags.push(d);
            }
            diags.sort_by_key(|d| (d.line, d.column));
            (None, diags)
        }
    }
}

/// Where `sub` is written as a key of its own line (`  sub: ...`) in the block mapping that
/// starts at `line` (1-based), as line and column; `None` for a flow mapping (`{sub: 1}`, the
/// mapping's own position then) or a key not found before the next top-level variable.
fn nested_key_at(text: &str, line: u64, sub: &str) -> Option<(u64, u64)> {
    let first = usize::try_from(line.saturating_sub(1)).ok()?;
    for (i, l) in text.lines().enumerate().skip(first) {
        let trimmed = l.trim_start();
        if i > first && l.len() == trimmed.len() && !trimmed.is_empty() {
            return None;
        }
        for quote in ["", "\"", "'"] {
            if trimmed.starts_with(&format!("{quote}{sub}{quote}:")) {
                let column = l[..l.len() - trimmed.len()].chars().count() + 1;
                return Some((u64::try_from(i + 1).ok()?, u64::try_from(column).ok()?));
            }
        }
    }
    None
}

/// Loads a config directory from its contents. Does no IO. Collects every problem.
pub fn load(sources: &Sources) -> Loaded {
    let mut diags = Vec::new();
    let mut globals_text: Option<&str> = None;
    let mut pw_diags = Vec::new();
    // A file the reader refused (a link leading out of the directory) is reported as that.
    let refused = |file: &str| sources.refused.iter().any(|d| d.file == file);
    let mut passwords = match &sources.passwords {
        None if refused(passwords::FILE) => None,
        None => {
            pw_diags.push(
                Diag::new(Severity::Error, passwords::FILE, "the file does not exist")
                    .help("run `kstack init <dir>` and then `kstack genpwd`"),
            );
            None
        }
        Some(bytes) => utf8(passwords::FILE, bytes, &mut pw_diags).and_then(|text| {
            match passwords::parse_located(text) {
                Ok(p) => Some(p),
                Err(d) => {
                    pw_diags.extend(d);
                    None
                }
            }
        }),
    };
    let globals = match &sources.globals {
        None if refused(GLOBALS_FILE) => None,
        None => {
            diags.push(
                Diag::new(Severity::Error, GLOBALS_FILE, "the file does not exist")
                    .help("run `kstack init <dir>` to create a starter config directory"),
            );
            None
        }
        Some(bytes) => utf8(GLOBALS_FILE, bytes, &mut diags).and_then(|text| {
            globals_text = Some(text);
            let pw = passwords.as_ref().map(|(p, l)| (p, l));
            let (g, d, evaluated) = load_globals_with(text, pw);
            let pw_failed = d.iter().any(|d| d.file == passwords::FILE);
            diags.extend(d);
            if pw_failed {
                passwords = None;
            } else if let Some((p, locations)) = passwords.as_mut() {
                pw_diags.extend(passwords::set_evaluated(p, &evaluated, locations));
            }
            g
        }),
    };
    diags.append(&mut pw_diags);
    let passwords = passwords.map(|(p, _)| p);
    if let (Some(g), Some(p)) = (&globals, &passwords) {
        let missing = passwords::missing_required(g, p);
        if !missing.is_empty() {
            diags.push(
                Diag::new(
                    Severity::Error,
                    passwords::FILE,
                    format!("the enabled services need these passwords, which are missing or empty: {}", missing.join(", ")),
                )
                .help("run `kstack genpwd` to generate them (it keeps every value that is already set)"),
            );
        }
    }
    let catalog_text = match &sources.catalog {
        Some(bytes) => utf8(CATALOG_FILE, bytes, &mut diags),
        None => None,
    };
    let catalog = if sources.catalog.is_some() && catalog_text.is_none() {
        None
    } else {
        match cat::effective_catalog(catalog_text) {
            Ok(c) => Some(c),
            Err(d) => {
                diags.extend(d);
                None
            }
        }
    };
    let mut enabled = BTreeSet::new();
    if let Some(g) = &globals {
        let line = globals_text.map_or(0, |t| {
            cat::find_line(t, 1, "kstack_role_label_prefix", true)
        });
        diags.extend(cat::check_label_prefix(g, line));
        if let Some(c) = &catalog {
            enabled = cat::enabled_services(c, g);
            diags.extend(cat::check_cycle(c, &enabled, catalog_text));
            let verbatim = crate::overrides::verbatim_files(g);
            diags.extend(crate::overrides::check(c, &sources.overrides, &verbatim));
            diags.extend(crate::overrides::check_verbatim(g, &sources.overrides));
        }
    }
    diags.extend(sources.refused.iter().cloned());
    for (path, bytes) in &sources.overrides {
        let file = format!("config/{path}");
        if path.ends_with(".conf")
            || path.ends_with(".ini")
            || path.ends_with(".yaml")
            || path.ends_with(".yml")
        {
            utf8(&file, bytes, &mut diags);
        }
    }
    let mut public_certificate = None;
    if let Some(g) = globals.as_ref().filter(|g| g.tls.external)
        && let Some(bytes) = &sources.public_certificate
        && let Some(pem) = utf8(PUBLIC_CERTIFICATE_FILE, bytes, &mut diags)
    {
        match certificate_problem(pem) {
            Some(problem) => diags.push(
                Diag::new(Severity::Error, PUBLIC_CERTIFICATE_FILE, problem).help(format!(
                    "put the certificate of {} (then any intermediates) and its private key in this one PEM file, as HAProxy reads it, or remove the file and kstack makes one from its own CA",
                    g.public_host().unwrap_or_default()
                )),
            ),
            None => {
                public_certificate = Some(PublicCertificate {
                    pem: pem.to_owned(),
                })
            }
        }
    }
    let config = match (globals, passwords, catalog) {
        (Some(globals), Some(passwords), Some(mut catalog))
            if !diags.iter().any(Diag::is_error) =>
        {
            catalog.apply_conditions(&globals.vars);
            Some(Config {
                globals,
                passwords,
                overrides: sources.overrides.clone(),
                catalog,
                enabled,
                public_certificate,
            })
        }
        _ => None,
    };
    Loaded {
        config,
        diagnostics: diags,
    }
}
