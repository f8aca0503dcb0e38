//! `catalog.yml`: the operator catalog merged over the built-in one, the enabled services and
//! the checks that need both globals and catalog (dependencies, cycles, label keys).
use std::collections::BTreeSet;

use kstack_model::catalog::{Catalog, CatalogError, CatalogIssue};
use kstack_model::globals::{Globals, parse_bool};
use kstack_model::graph::Graph;

use crate::diagnostic::{Diag, Severity};

/// File name of the operator catalog inside the config directory (optional).
pub const CATALOG_FILE: &str = "catalog.yml";

/// 1-based line of the first line at or after `from` whose text, trimmed, starts with `needle`
/// (for a key) or contains it as a word (for a list item); 0 when not found.
pub(crate) fn find_line(text: &str, from: u64, needle: &str, key: bool) -> u64 {
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        if n < from {
            continue;
        }
        let t = line.trim_start().trim_start_matches("- ");
        let hit = if key {
            t.strip_prefix(needle)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        } else {
            line.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
                .any(|w| w == needle)
        };
        if hit {
            return n;
        }
    }
    0
}

fn issue_diag(text: Option<&str>, issue: &CatalogIssue) -> Diag {
    let (service, word): (&String, Option<&str>) = match issue {
        CatalogIssue::UnknownDependency { service, unknown } => (service, Some(unknown.as_str())),
        CatalogIssue::BadInstallAfter { service, .. } => (service, Some("install_after")),
        CatalogIssue::BadUpgradeBefore { service, .. } => (service, Some("upgrade_before")),
        CatalogIssue::WithWorkloadNotPost { service, task } => (service, Some(task.as_str())),
        CatalogIssue::UnknownBootstrapNeed {
            service, unknown, ..
        } => (service, Some(unknown.as_str())),
        CatalogIssue::UnknownBootstrapTask {
            service, unknown, ..
        } => (service, Some(unknown.as_str())),
        CatalogIssue::PhaseOrder { service, after, .. } => (service, Some(after.as_str())),
        CatalogIssue::UnknownTaskCondition { service, var, .. } => (service, Some(var.as_str())),
        CatalogIssue::UnknownPlaceholder { service, env, .. } => (service, Some(env.as_str())),
        CatalogIssue::NoContainers { service } | CatalogIssue::MissingField { service, .. } => {
            (service, None)
        }
        CatalogIssue::MissingPort { service, .. } => (service, Some("ports")),
        CatalogIssue::PublicNotExposed { service, port } => (service, Some(port.as_str())),
        CatalogIssue::SeveralGateways { service, .. } => (service, Some("public_gateway")),
        CatalogIssue::BadSharedVolume { service, volume } => (service, Some(volume.as_str())),
        CatalogIssue::BadAlsoOn { service, .. } => (service, Some("also_on")),
        CatalogIssue::UnknownFact {
            service, container, ..
        }
        | CatalogIssue::BadOwner {
            service, container, ..
        }
        | CatalogIssue::BadStopSignal {
            service, container, ..
        }
        | CatalogIssue::StopTargetWithoutSignal { service, container }
        | CatalogIssue::UnknownCondition {
            service, container, ..
        } => (service, Some(container.as_str())),
    };
    let field = match issue {
        CatalogIssue::UnknownDependency { .. } => format!("services.{service}.depends_on"),
        CatalogIssue::BadInstallAfter { .. } => format!("services.{service}.install_after"),
        CatalogIssue::BadUpgradeBefore { .. } => format!("services.{service}.upgrade_before"),
        CatalogIssue::UnknownBootstrapNeed { .. }
        | CatalogIssue::WithWorkloadNotPost { .. }
        | CatalogIssue::UnknownBootstrapTask { .. }
        | CatalogIssue::PhaseOrder { .. }
        | CatalogIssue::UnknownTaskCondition { .. }
        | CatalogIssue::UnknownPlaceholder { .. } => format!("services.{service}.bootstrap"),
        CatalogIssue::NoContainers { .. }
        | CatalogIssue::UnknownFact { .. }
        | CatalogIssue::BadOwner { .. }
        | CatalogIssue::BadStopSignal { .. }
        | CatalogIssue::StopTargetWithoutSignal { .. }
        | CatalogIssue::UnknownCondition { .. } => format!("services.{service}.containers"),
        CatalogIssue::MissingField { field, .. } => format!("services.{service}.{field}"),
        CatalogIssue::MissingPort { .. } | CatalogIssue::PublicNotExposed { .. } => {
            format!("services.{service}.ports")
        }
        CatalogIssue::SeveralGateways { .. } => format!("services.{service}.public_gateway"),
        CatalogIssue::BadSharedVolume { .. } => format!("services.{service}.volumes"),
        CatalogIssue::BadAlsoOn { .. } => format!("services.{service}.also_on"),
    };
    let mut line = 0;
    if let Some(text) = text {
        let svc_line = find_line(text, 1, service, true);
        line = svc_line;
        if svc_line > 0
            && let Some(w) = word
        {
            let l = find_line(text, svc_line + 1, w, false);
            if l > 0 {
                line = l;
            }
        }
    }
    let help = match issue {
        CatalogIssue::UnknownDependency { .. } => {
            "name a service of the catalog (see `kstack services`), or add the service to catalog.yml"
        }
        CatalogIssue::MissingField { .. } => {
            "a service that is not in the built-in catalog needs project, enable_flag, role, kind and containers"
        }
        CatalogIssue::UnknownFact { .. } => {
            "write `{fact}` only for a distribution fact kstack knows; any other path is written out"
        }
        CatalogIssue::BadOwner { .. } => "write the owner as `user:group`, e.g. `nova:nova`",
        CatalogIssue::MissingPort { .. } => {
            "list every port of the service in its `ports`, the built-in ones included (see `kstack services -o yaml`)"
        }
        _ => "fix catalog.yml (see `kstack services -o yaml` for the built-in entries)",
    };
    Diag::new(Severity::Error, CATALOG_FILE, issue.to_string())
        .at(line, 0)
        .field(field)
        .help(help)
}

/// Parses `catalog.yml` (when given) and merges it over the built-in catalog.
pub fn effective_catalog(text: Option<&str>) -> Result<Catalog, Vec<Diag>> {
    let builtin = Catalog::builtin().map_err(|e| {
        vec![Diag::new(
            Severity::Error,
            "built-in catalog",
            e.to_string(),
        )]
    })?;
    let Some(text) = text else {
        return Ok(builtin);
    };
    if let Some(d) = crate::yaml::lone_carriage_return(CATALOG_FILE, text) {
        return Err(vec![d]);
    }
    let overlay = match serde_saphyr::from_str(text) {
        Ok(Some(o)) => o,
        Ok(None) => return Ok(builtin),
        Err(e) => {
            let loc = e.location().unwrap_or(serde_saphyr::Location::UNKNOWN);
            let msg = e.without_snippet().to_string();
            let msg = match msg.rfind(" at line ") {
                Some(i) => msg[..i].to_owned(),
                None => msg,
            };
            return Err(vec![
                Diag::new(Severity::Error, CATALOG_FILE, format!("this is not a valid catalog: {msg}"))
                    .at(loc.line(), loc.column())
                    .help("catalog.yml has the shape of the built-in catalog: `services: {name: {field: value}}`; see `kstack services -o yaml`"),
            ]);
        }
    };
    match Catalog::merge(builtin, overlay) {
        Ok(c) => Ok(c),
        Err(CatalogError::Invalid(issues)) => {
            Err(issues.iter().map(|i| issue_diag(Some(text), i)).collect())
        }
        Err(e) => Err(vec![Diag::new(
            Severity::Error,
            CATALOG_FILE,
            e.to_string(),
        )]),
    }
}

/// The services whose enable flag is on in globals. The public gateway (`public_gateway`,
/// HAProxy) runs only when there is a public address to publish on.
pub fn enabled_services(catalog: &Catalog, globals: &Globals) -> BTreeSet<String> {
    catalog
        .services
        .iter()
        .filter(|(_, s)| {
            globals
                .vars
                .get(&s.enable_flag)
                .and_then(parse_bool)
                .unwrap_or(false)
                && (!s.public_gateway || globals.public_host().is_some())
        })
        .map(|(n, _)| n.clone())
        .collect()
}

/// A dependency cycle among the enabled services, as a diagnostic naming the file to edit.
pub fn check_cycle(
    catalog: &Catalog,
    enabled: &BTreeSet<String>,
    catalog_text: Option<&str>,
) -> Option<Diag> {
    let graph = Graph::from_catalog(catalog, |n| enabled.contains(n));
    let cycle = graph.find_cycle()?;
    // The cycle comes from catalog.yml when one of its edges is declared there.
    let in_file = catalog_text.and_then(|t| {
        cycle
            .iter()
            .find(|n| find_line(t, 1, n, true) > 0)
            .map(|n| (find_line(t, 1, n, true), n))
    });
    let mut d = Diag::new(
        Severity::Error,
        CATALOG_FILE,
        format!(
            "dependency cycle among the enabled services: {}",
            cycle.join(" → ")
        ),
    );
    d = match in_file {
        Some((line, n)) => d
            .at(line, 0)
            .field(format!("services.{n}.depends_on"))
            .help("edit catalog.yml: remove one of these depends_on entries so the services can start in order"),
        None => d.help(
            "the cycle is in the built-in catalog; override depends_on of one of these services in catalog.yml",
        ),
    };
    Some(d)
}

fn valid_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn valid_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Whether `key` is a valid Kubernetes label key (`[prefix/]name`).
pub fn valid_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => valid_dns_subdomain(prefix) && valid_label_name(name),
        None => valid_label_name(key),
    }
}

/// The node role label keys `kstack_role_label_prefix` makes, checked.
pub fn check_label_prefix(globals: &Globals, line: u64) -> Option<Diag> {
    let bad: Vec<String> = kstack_model::globals::ROLES
        .iter()
        .map(|r| globals.role_label(r).0)
        .filter(|k| !valid_label_key(k))
        .collect();
    if bad.is_empty() {
        return None;
    }
    Some(
        Diag::new(
            Severity::Error,
            crate::GLOBALS_FILE,
            format!("this prefix makes invalid Kubernetes label keys: {}", bad.join(", ")),
        )
        .at(line, 0)
        .field("kstack_role_label_prefix")
        .help("a label key is an optional DNS subdomain and `/` followed by up to 63 letters, digits, `-`, `_`, `.` starting and ending with a letter or digit, e.g. `kstack.io/role-`"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys() {
        assert!(valid_label_key("kstack.io/role-control"));
        assert!(valid_label_key("role-control"));
        assert!(!valid_label_key("Kstack.io/role-control"));
        assert!(!valid_label_key("kstack.io/role/control"));
        assert!(!valid_label_key("kstack io/control"));
    }
}
