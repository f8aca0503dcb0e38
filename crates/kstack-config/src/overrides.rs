//! Operator config overrides under `config/`, in kolla-ansible's layout: INI parsing with line
//! numbers, which override files apply to which generated file (and in which order), and the
//! checks `kstack validate` reports.
//!
//! The merge order for one generated INI file `F` of service `S` in project `P`:
//! 1. for the container's main file (`<P>.conf`, else its first mergeable `.conf`):
//!    `global.conf`, `<P>.conf`, `<P>/<S>.conf`;
//! 2. for any other mergeable file: `<P>/<F>`;
//! 3. per host: `<P>/<host>/<F>`, only for DaemonSet services (the only ones pinned to hosts).
//!
//! Later files win per `[section]` key; a key repeated in one file is a multi-valued option.
//! Override files are taken literally: unlike kolla-ansible, kstack does not run them through
//! a template engine. Every setting must be under a `[section]` header
//! ([`Ini::parse_override`]). A setting that looks like a credential ([`Ini::credentials`]) is
//! warned about, and the files it is merged into are kept secret. Which files are read at all
//! (regular files; links only within `config/`) is [`crate::fs`]'s rule.
//!
//! Pure: bytes in, values or diagnostics out. Diagnostics name file and line but never echo a
//! line's text (an override may hold a password).
use std::collections::{BTreeMap, BTreeSet};

use kstack_model::catalog::{Catalog, Container, Service, WorkloadKind};
use kstack_model::globals::Globals;

use crate::diagnostic::{Diag, Severity};

/// The message of an override key before any `[section]` header.
const SECTIONLESS: &str =
    "this setting comes before any `[section]` header, so it belongs to no section";

/// The directory of override files inside the config directory.
pub const DIR: &str = "config";

/// One `[section]` of an INI file, keys in first-seen order; a key may have several values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub entries: Vec<(String, Vec<String>)>,
}

/// An INI file as oslo.config and MariaDB read it. Keys before any header live in a section
/// with an empty name, written first and without a header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ini {
    pub sections: Vec<Section>,
}

/// A line an INI parser cannot read. Never carries the line's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct IniError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl Ini {
    fn section_mut(&mut self, name: &str) -> &mut Section {
        let i = match self.sections.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => {
                self.sections.push(Section {
                    name: name.to_owned(),
                    entries: Vec::new(),
                });
                self.sections.len() - 1
            }
        };
        &mut self.sections[i]
    }

    /// Parses INI text: `[section]` headers, `key = value` (or `key: value`) lines, comments
    /// starting with `#` or `;`, and indented continuation lines. A section that appears twice
    /// is one section; a key that appears twice is multi-valued. Keys before any header are
    /// kept in a section without a name (rendered files may have them).
    pub fn parse(text: &str) -> Result<Ini, IniError> {
        Ini::parse_with(text, false)
    }

    /// Parses an operator's override file: like [`Ini::parse`], but a key before any
    /// `[section]` header is an error. oslo.config refuses such a file, and merged into a
    /// generated file the key would land in no section of it.
    pub fn parse_override(text: &str) -> Result<Ini, IniError> {
        Ini::parse_with(text, true)
    }

    fn parse_with(text: &str, sections_only: bool) -> Result<Ini, IniError> {
        let mut ini = Ini::default();
        let mut current = String::new();
        // (section, key) of the last value, for continuation lines.
        let mut last: Option<(String, String)> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
                continue;
            }
            let indented = raw.starts_with(' ') || raw.starts_with('\t');
            if indented && let Some((sec, key)) = &last {
                let section = ini.section_mut(sec);
                if let Some((_, values)) = section.entries.iter_mut().find(|(k, _)| k == key)
                    && let Some(v) = values.last_mut()
                {
                    v.push('\n');
                    v.push_str(trimmed);
                }
                continue;
            }
            if let Some(rest) = trimmed.strip_prefix('[') {
                let Some(name) = rest.strip_suffix(']') else {
                    return Err(IniError {
                        line,
                        message: "a section header must be a whole line like `[database]`".into(),
                    });
                };
                let name = name.trim();
                if name.is_empty() {
                    return Err(IniError {
                        line,
                        message: "the section header has no name".into(),
                    });
                }
                current = name.to_owned();
                ini.section_mut(&current);
                last = None;
                continue;
            }
            let Some(pos) = trimmed.find(['=', ':']) else {
                return Err(IniError {
                    line,
                    message: "expected `key = value`, a `[section]` header or a comment (`#`)"
                        .into(),
                });
            };
            let key = trimmed[..pos].trim();
            let value = trimmed[pos + 1..].trim();
            if key.is_empty() {
                return Err(IniError {
                    line,
                    message: "the line has a value but no key before `=`".into(),
                });
            }
            if sections_only && current.is_empty() {
                return Err(IniError {
                    line,
                    // The key is not echoed either: the line may be a pasted secret.
                    message: SECTIONLESS.into(),
                });
            }
            let section = ini.section_mut(&current);
            match section.entries.iter_mut().find(|(k, _)| k == key) {
                Some((_, values)) => values.push(value.to_owned()),
                None => section
                    .entries
                    .push((key.to_owned(), vec![value.to_owned()])),
            }
            last = Some((current.clone(), key.to_owned()));
        }
        Ok(ini)
    }

    /// The `(section, key)` of every setting that looks like a credential written literally: a
    /// key naming a password, secret or token with a value, or a URL with a password in it
    /// (`scheme://user:password@host`). Used to warn, and to keep the files such an override
    /// is merged into secret.
    pub fn credentials(&self) -> Vec<(&str, &str)> {
        let mut out = Vec::new();
        for s in &self.sections {
            for (key, values) in &s.entries {
                let k = key.to_ascii_lowercase();
                let named = ["password", "passwd", "secret", "token"]
                    .iter()
                    .any(|w| k.contains(w));
                if values
                    .iter()
                    .any(|v| (named && !v.is_empty()) || url_with_password(v))
                {
                    out.push((s.name.as_str(), key.as_str()));
                }
            }
        }
        out
    }

    /// Lays `over` on top: every key `over` sets replaces all values of that key in the same
    /// section (keeping its position); new keys and sections are appended.
    pub fn merge(&mut self, over: &Ini) {
        for s in &over.sections {
            let target = self.section_mut(&s.name);
            for (key, values) in &s.entries {
                match target.entries.iter_mut().find(|(k, _)| k == key) {
                    Some((_, v)) => v.clone_from(values),
                    None => target.entries.push((key.clone(), values.clone())),
                }
            }
        }
    }

    /// Writes the file: sectionless keys first, then each section, `key = value` lines.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let mut sections: Vec<&Section> = self.sections.iter().collect();
        sections.sort_by_key(|s| !s.name.is_empty());
        for s in sections {
            if !s.name.is_empty() {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push('[');
                out.push_str(&s.name);
                out.push_str("]\n");
            }
            for (key, values) in &s.entries {
                for v in values {
                    out.push_str(key);
                    out.push_str(" = ");
                    // Continuation lines are indented so the reader joins them again.
                    out.push_str(&v.replace('\n', "\n    "));
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// Whether `v` holds a URL whose user info has a password (`scheme://user:pw@host`).
fn url_with_password(v: &str) -> bool {
    v.match_indices("://").any(|(i, _)| {
        let rest = &v[i + 3..];
        let authority = rest.split(['/', '?', '#', ' ', ',']).next().unwrap_or("");
        authority.rsplit_once('@').is_some_and(|(userinfo, _)| {
            userinfo
                .split_once(':')
                .is_some_and(|(_, pw)| !pw.is_empty())
        })
    })
}

/// The main config file of a container, the one `global.conf`, `<project>.conf` and
/// `<project>/<service>.conf` merge into: `<project>.conf` if the container has it, else its
/// first mergeable `.conf` file (`glance-api.conf`).
pub fn main_file<'a>(project: &str, container: &'a Container) -> Option<&'a str> {
    let mergeable = || container.config_files.iter().filter(|f| f.merge_ini);
    let own = format!("{project}.conf");
    mergeable()
        .find(|f| f.template == own)
        .or_else(|| mergeable().find(|f| f.template.ends_with(".conf")))
        .map(|f| f.template.as_str())
}

/// Paths (relative to `config/`) that merge into `file` of one container of `service`, in
/// order, without the per-host ones. Empty when the file is not mergeable.
pub fn sources_for(
    service_name: &str,
    service: &Service,
    container: &Container,
    file: &str,
) -> Vec<String> {
    let Some(cf) = container.config_files.iter().find(|f| f.template == file) else {
        return Vec::new();
    };
    if !cf.merge_ini {
        return Vec::new();
    }
    let p = &service.project;
    if main_file(p, container) == Some(file) {
        let mut v = vec![
            "global.conf".to_owned(),
            format!("{p}.conf"),
            format!("{p}/{service_name}.conf"),
        ];
        v.dedup();
        v
    } else {
        vec![format!("{p}/{file}")]
    }
}

/// The per-host override path of a file: `<project>/<host>/<file>`.
pub fn host_source(project: &str, host: &str, file: &str) -> String {
    format!("{project}/{host}/{file}")
}

/// Per-host override files, indexed once: project → host → file names.
#[derive(Debug, Default, Clone)]
pub struct HostIndex {
    pub by_project: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl HostIndex {
    /// Indexes every `<project>/<host>/<file>` path.
    pub fn new<'a>(paths: impl IntoIterator<Item = &'a String>) -> HostIndex {
        let mut ix = HostIndex::default();
        for path in paths {
            let parts: Vec<&str> = path.split('/').collect();
            if let [project, host, file] = parts[..] {
                ix.by_project
                    .entry(project.to_owned())
                    .or_default()
                    .entry(host.to_owned())
                    .or_default()
                    .insert(file.to_owned());
            }
        }
        ix
    }

    /// Hosts with an override of any mergeable file of `service`, sorted.
    pub fn hosts_for(&self, service: &Service) -> Vec<&str> {
        let Some(hosts) = self.by_project.get(&service.project) else {
            return Vec::new();
        };
        hosts
            .iter()
            .filter(|(_, files)| {
                service.containers.iter().any(|c| {
                    c.config_files
                        .iter()
                        .any(|f| f.merge_ini && files.contains(&f.template))
                })
            })
            .map(|(h, _)| h.as_str())
            .collect()
    }
}

/// Whether a directory name can be a Kubernetes node name (`kubernetes.io/hostname` value).
fn valid_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 63
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        && h.as_bytes()[0].is_ascii_alphanumeric()
        && h.as_bytes()[h.len() - 1].is_ascii_alphanumeric()
}

/// What an override path is used for, or why it is not.
enum Use {
    Used,
    Unused(String),
    Invalid(String, String),
}

/// Overrides of services that exist but are disabled are not warned about: operators keep
/// them while a service is switched off.
fn classify(catalog: &Catalog, path: &str) -> Use {
    let services = || catalog.services.iter();
    let mergeable_of = |project: &str, file: &str| -> Vec<(&String, &Service)> {
        services()
            .filter(|(_, s)| {
                s.project == project
                    && s.containers.iter().any(|c| {
                        c.config_files
                            .iter()
                            .any(|f| f.merge_ini && f.template == file)
                    })
            })
            .collect()
    };
    let parts: Vec<&str> = path.split('/').collect();
    match parts[..] {
        ["global.conf"] => Use::Used,
        [file] => {
            let project = file.strip_suffix(".conf").unwrap_or_default();
            if services().any(|(_, s)| s.project == project) {
                Use::Used
            } else {
                Use::Unused(format!(
                    "no catalog service belongs to a project named `{project}`"
                ))
            }
        }
        [project, file] => {
            let by_service = file.strip_suffix(".conf").is_some_and(|s| {
                services().any(|(n, svc)| n.as_str() == s && svc.project == project)
            });
            if by_service || !mergeable_of(project, file).is_empty() {
                Use::Used
            } else {
                Use::Unused(format!(
                    "`{file}` is neither `<service>.conf` of a {project} service nor an INI file kstack generates for {project}"
                ))
            }
        }
        [project, host, file] => {
            let users = mergeable_of(project, file);
            if users.is_empty() {
                return Use::Unused(format!(
                    "`{file}` is not an INI file kstack generates for {project}"
                ));
            }
            if !valid_host(host) {
                return Use::Invalid(
                    format!("`{host}` cannot be a Kubernetes node name"),
                    "name the directory after the node (`kubectl get nodes`): letters, digits, `-`, `.`, `_`, at most 63 characters".into(),
                );
            }
            let pinned: Vec<&str> = users
                .iter()
                .filter(|(_, s)| s.kind == WorkloadKind::DaemonSet)
                .map(|(n, _)| n.as_str())
                .collect();
            if pinned.is_empty() {
                let list: Vec<String> = users
                    .iter()
                    .map(|(n, s)| format!("{n} ({})", s.kind))
                    .collect();
                Use::Invalid(
                    format!(
                        "a per-host override only applies to DaemonSet services, and `{file}` is used by {}, whose pods are not tied to a host",
                        list.join(", ")
                    ),
                    format!(
                        "move the settings to `config/{project}/{file}` or `config/{project}/<service>.conf` to apply them to every pod"
                    ),
                )
            } else {
                Use::Used
            }
        }
        _ => Use::Unused("kstack reads at most `config/<project>/<host>/<file>`".into()),
    }
}

/// Files of `config/` that containers get as they are rather than merged into a generated
/// file, by path relative to `config/`: the Ceph cluster's configuration and the client's
/// keyring when Cinder stores volumes in Ceph (kolla-ansible's layout).
pub fn verbatim_files(globals: &Globals) -> Vec<String> {
    match &globals.cinder_ceph {
        Some(ceph) => vec![ceph.conf_file(), ceph.keyring_file()],
        None => Vec::new(),
    }
}

/// The cephx key of a Ceph keyring (`key = <base64>` in the client's section).
pub fn keyring_key(keyring: &str) -> Option<String> {
    keyring.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "key" && !v.trim().is_empty()).then(|| v.trim().to_owned())
    })
}

/// Errors for the [`verbatim_files`] that are missing, and for a keyring without a key.
pub fn check_verbatim(globals: &Globals, overrides: &BTreeMap<String, Vec<u8>>) -> Vec<Diag> {
    let Some(ceph) = &globals.cinder_ceph else {
        return Vec::new();
    };
    let keyring = ceph.keyring_file();
    let keyless = overrides
        .get(&keyring)
        .filter(|b| keyring_key(&String::from_utf8_lossy(b)).is_none())
        .map(|_| {
            Diag::new(
                Severity::Error,
                &format!("{DIR}/{keyring}"),
                "the keyring holds no `key = ...` line",
            )
            .help(format!(
                "copy the whole keyring of `client.{}` as `ceph auth get client.{}` prints it",
                ceph.user, ceph.user
            ))
        });
    verbatim_files(globals)
        .into_iter()
        .filter(|path| !overrides.contains_key(path))
        .map(|path| {
            let what = if path.ends_with(".keyring") {
                format!(
                    "the keyring of the Ceph client `client.{}` (`ceph auth get client.{} -o FILE` on the Ceph cluster); it is deployed as a Kubernetes Secret",
                    ceph.user, ceph.user
                )
            } else {
                format!(
                    "the Ceph cluster `{}`'s configuration: at least `fsid` and `mon_host` under `[global]`",
                    ceph.cluster
                )
            };
            Diag::new(
                Severity::Error,
                &format!("{DIR}/{path}"),
                "the file does not exist, and `cinder_backend_ceph` is on in globals.yml",
            )
            .help(format!(
                "copy here {what}, or set `cinder_backend_ceph: \"no\"`"
            ))
        })
        .chain(keyless)
        .collect()
}

/// Checks every override file: INI syntax of the files that are used (error with line),
/// per-host overrides of services that are not DaemonSets (error), files kstack does not use
/// (warning). `verbatim` are the files used as they are ([`verbatim_files`]).
pub fn check(
    catalog: &Catalog,
    overrides: &BTreeMap<String, Vec<u8>>,
    verbatim: &[String],
) -> Vec<Diag> {
    let mut diags = Vec::new();
    for (path, bytes) in overrides {
        let file = format!("{DIR}/{path}");
        if verbatim.contains(path) {
            continue;
        }
        match classify(catalog, path) {
            Use::Used => {
                // Non-UTF-8 files are reported by the loader already.
                let Ok(text) = std::str::from_utf8(bytes) else {
                    continue;
                };
                // Python's line reader (oslo.config's) splits at a lone carriage return: what
                // follows one would be a setting of its own there, and one kstack never saw.
                if let Some(d) = crate::yaml::lone_carriage_return(&file, text) {
                    diags.push(d);
                    continue;
                }
                let ini = Ini::parse_override(text);
                if let Ok(ini) = &ini {
                    for (section, key) in ini.credentials() {
                        diags.push(
                            Diag::new(
                                Severity::Warning,
                                &file,
                                "this setting looks like a credential written in clear (a password, secret or token, or a URL with a password)",
                            )
                            .field(format!("{section}.{key}"))
                            .help("the files this override is merged into are kept secret (a Secret, a 0600 file), but the override itself lies in clear in the config directory: keep the directory as private as passwords.yml, and prefer a setting kstack fills from passwords.yml"),
                        );
                    }
                }
                if let Err(e) = ini {
                    let help = if e.message == SECTIONLESS {
                        "put the `[section]` header it belongs to above it, e.g. `[DEFAULT]`; override files are merged section by section over the generated file"
                    } else {
                        "fix the line; override files are INI files merged key by key over the generated file"
                    };
                    diags.push(
                        Diag::new(Severity::Error, &file, e.message)
                            .at(e.line as u64, 0)
                            .help(help),
                    );
                }
            }
            Use::Unused(why) => diags.push(
                Diag::new(
                    Severity::Warning,
                    &file,
                    format!("kstack does not use this file: {why}"),
                )
                .help("see the override layout in `config/README.md`"),
            ),
            Use::Invalid(message, help) => {
                diags.push(Diag::new(Severity::Error, &file, message).help(help))
            }
        }
    }
    diags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_carriage_return_in_an_override_is_an_error_with_its_line() {
        let catalog = Catalog::builtin().unwrap();
        let overrides = BTreeMap::from([(
            "neutron.conf".to_owned(),
            b"[DEFAULT]\ndebug = True\n[ml2]\ntype_drivers = flat\rpassword = X\n".to_vec(),
        )]);
        let diags = check(&catalog, &overrides, &[]);
        let d = diags
            .iter()
            .find(|d| d.is_error())
            .expect("an error for the lone carriage return");
        assert_eq!(d.line, 4, "{d}");
        assert!(d.message.contains("carriage return"), "{d}");
        // CRLF line endings are fine.
        let crlf = BTreeMap::from([(
            "neutron.conf".to_owned(),
            b"[DEFAULT]\r\ndebug = True\r\n".to_vec(),
        )]);
        assert!(!check(&catalog, &crlf, &[]).iter().any(|d| d.is_error()));
    }

    #[test]
    fn parse_merge_and_write() {
        let mut base =
            Ini::parse("[DEFAULT]\ndebug = False\n\n[database]\nconnection = a\n").unwrap();
        let over = Ini::parse(
            "# comment\n[database]\nmax_retries = -1\nconnection = b\n[DEFAULT]\ndebug: True\n[new]\nx = 1\nx = 2\n",
        )
        .unwrap();
        base.merge(&over);
        assert_eq!(
            base.to_text(),
            "[DEFAULT]\ndebug = True\n\n[database]\nconnection = b\nmax_retries = -1\n\n[new]\nx = 1\nx = 2\n"
        );
    }

    #[test]
    fn continuation_lines_join() {
        let ini = Ini::parse("[a]\nk = one\n  two\n").unwrap();
        assert_eq!(ini.sections[0].entries[0].1, vec!["one\ntwo".to_owned()]);
        assert_eq!(ini.to_text(), "[a]\nk = one\n    two\n");
    }

    #[test]
    fn malformed_lines_name_the_line_and_not_the_text() {
        let e = Ini::parse("[a]\nk = v\nsecretvalue\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(!e.to_string().contains("secretvalue"));
        assert_eq!(Ini::parse("[a\n").unwrap_err().line, 1);
        assert_eq!(Ini::parse("[]\n").unwrap_err().line, 1);
        assert_eq!(Ini::parse("\n= v\n").unwrap_err().line, 2);
    }

    #[test]
    fn an_override_key_before_any_section_is_an_error() {
        let text = "# tuning\ndebug = True\n[DEFAULT]\nx = 1\n";
        assert!(
            Ini::parse(text).is_ok(),
            "generated files may have such keys"
        );
        let e = Ini::parse_override(text).unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(
            e.message,
            "this setting comes before any `[section]` header, so it belongs to no section"
        );
        assert!(Ini::parse_override("[DEFAULT]\ndebug = True\n").is_ok());
    }

    #[test]
    fn credentials_written_in_clear_are_found() {
        let ini = Ini::parse_override(
            "[database]\nconnection = mysql+pymysql://nova:hunter2@db/nova\nmax_retries = -1\n\
             [DEFAULT]\ntransport_url = rabbit://openstack@mq:5672//\nadmin_password =\n\
             [ldap]\nPassword = x\n[cache]\nmemcache_secret_key = k\nbackend_argument = url:a@b\n",
        )
        .unwrap();
        assert_eq!(
            ini.credentials(),
            [
                ("database", "connection"),
                ("ldap", "Password"),
                ("cache", "memcache_secret_key"),
            ]
        );
    }

    #[test]
    fn host_names() {
        assert!(valid_host("compute-1.example.org"));
        assert!(!valid_host("-bad"));
        assert!(!valid_host(""));
        assert!(!valid_host(&"a".repeat(64)));
    }
}
