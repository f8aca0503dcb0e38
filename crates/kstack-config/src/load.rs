//! Loading a whole config directory from bytes: globals.yml, passwords.yml and `config/` overrides.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use kstack_model::catalog::Catalog;
use kstack_model::globals::{Globals, known_keys};

use crate::catalog::{self as cat, CATALOG_FILE};

use crate::diagnostic::{Diag, Severity};
use crate::passwords::{self, Passwords};
use crate::yaml::{parse_entries, span_of};

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
        let enabled = cat::enabled_services(&catalog, &globals);
        Config {
            globals,
            passwords,
            overrides,
            catalog,
            enabled,
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

/// Parses and types globals.yml, returning the globals (if valid) and its diagnostics.
pub fn load_globals(text: &str) -> (Option<Globals>, Vec<Diag>) {
    let entries = match parse_entries(GLOBALS_FILE, text, false) {
        Ok(e) => e,
        Err(d) => return (None, d),
    };
    let known = known_keys();
    let mut diags = Vec::new();
    let mut vars = BTreeMap::new();
    let mut where_ = HashMap::new();
    for e in &entries {
        if !known.contains(&e.key) && !e.key.ends_with("_tag") {
            diags.push(
                Diag::new(Severity::Warning, GLOBALS_FILE, "kstack does not interpret this variable; templates can still read it")
                    .at(e.key_loc.line(), e.key_loc.column())
                    .field(e.key.clone())
                    .help("check the spelling if you meant a kstack variable (see `kstack init` for the list)"),
            );
        }
        vars.insert(e.key.clone(), e.value.clone());
        where_.insert(e.key.clone(), e);
    }
    match Globals::from_vars(&vars) {
        Ok(g) => (Some(g), diags),
        Err(issues) => {
            for issue in issues {
                let field = match &issue.subpath {
                    Some(sub) => format!("{}.{sub}", issue.key),
                    None => issue.key.clone(),
                };
                let mut d = Diag::new(Severity::Error, GLOBALS_FILE, issue.message.clone())
                    .field(field)
                    .help(issue.help.clone());
                if let Some(e) = where_.get(&issue.key) {
                    d = d.at(e.value_loc.line(), e.value_loc.column());
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

/// Loads a config directory from its contents. Does no IO. Collects every problem.
pub fn load(sources: &Sources) -> Loaded {
    let mut diags = Vec::new();
    let mut globals_text: Option<&str> = None;
    let globals = match &sources.globals {
        None => {
            diags.push(
                Diag::new(Severity::Error, GLOBALS_FILE, "the file does not exist")
                    .help("run `kstack init <dir>` to create a starter config directory"),
            );
            None
        }
        Some(bytes) => utf8(GLOBALS_FILE, bytes, &mut diags).and_then(|text| {
            globals_text = Some(text);
            let (g, d) = load_globals(text);
            diags.extend(d);
            g
        }),
    };
    let passwords = match &sources.passwords {
        None => {
            diags.push(
                Diag::new(Severity::Error, passwords::FILE, "the file does not exist")
                    .help("run `kstack init <dir>` and then `kstack genpwd`"),
            );
            None
        }
        Some(bytes) => {
            utf8(passwords::FILE, bytes, &mut diags).and_then(|text| match passwords::parse(text) {
                Ok(p) => Some(p),
                Err(d) => {
                    diags.extend(d);
                    None
                }
            })
        }
    };
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
            diags.extend(crate::overrides::check(c, &sources.overrides));
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
    let config = match (globals, passwords, catalog) {
        (Some(globals), Some(passwords), Some(catalog)) if !diags.iter().any(Diag::is_error) => {
            Some(Config {
                globals,
                passwords,
                overrides: sources.overrides.clone(),
                catalog,
                enabled,
            })
        }
        _ => None,
    };
    Loaded {
        config,
        diagnostics: diags,
    }
}
