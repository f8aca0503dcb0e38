//! Kubernetes label syntax checks, the reserved prefixes, the per-host label budget and the
//! rule for role labels.
//!
//! Pure functions, no IO: every reason returned here ends up verbatim in a 4xx response.
//! Which prefixes Kubernetes reserves is part of the `NodeSync` contract, so that rule lives
//! with the trait in `kstack_ports::sync` and is re-exported here.

pub use kstack_ports::sync::{ADMIN_DOMAIN, RESERVED_DOMAINS, is_reserved_label_key};

/// Prefix of label keys that move OpenStack roles between hosts.
pub const ROLE_PREFIX: &str = "kstack.io/role-";

/// Label names (without prefix) that also move OpenStack roles, as in StarlingX.
pub const ROLE_LABELS: [&str; 2] = ["openstack-control-plane", "openstack-compute-node"];

/// True when assigning or removing `key` changes where OpenStack services run,
/// so the host must be locked first.
pub fn is_role_label(key: &str) -> bool {
    if key.starts_with(ROLE_PREFIX) {
        return true;
    }
    let name = key.rsplit_once('/').map_or(key, |(_, n)| n);
    ROLE_LABELS.contains(&name)
}

/// Most labels one host may carry in the inventory.
pub const MAX_LABELS_PER_HOST: usize = 100;

/// Most bytes (keys plus values) of one host's labels in the inventory. A single label may be
/// up to 380 bytes (253 prefix + '/' + 63 name + 63 value), so this bound and
/// [`MAX_LABELS_PER_HOST`] both matter. Together they keep the inventory's share of a Node
/// object far below etcd's request limit (1.5 MiB by default), whatever else is on the Node.
pub const MAX_LABEL_BYTES_PER_HOST: usize = 16 * 1024;

/// Checks that a host with `count` labels of `bytes` bytes (keys plus values) stays within
/// [`MAX_LABELS_PER_HOST`] and [`MAX_LABEL_BYTES_PER_HOST`].
pub fn check_label_budget(count: usize, bytes: usize) -> Result<(), String> {
    if count > MAX_LABELS_PER_HOST {
        return Err(format!(
            "{count} labels; a host may have at most {MAX_LABELS_PER_HOST}"
        ));
    }
    if bytes > MAX_LABEL_BYTES_PER_HOST {
        return Err(format!(
            "{bytes} bytes of label keys and values; a host may have at most \
             {MAX_LABEL_BYTES_PER_HOST}"
        ));
    }
    Ok(())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

fn check_name(what: &str, s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err(format!("{what} {s:?} is longer than 63 characters"));
    }
    if let Some(c) = s.chars().find(|c| !is_name_char(*c)) {
        return Err(format!(
            "{what} {s:?} contains {c:?}; only A-Z, a-z, 0-9, '-', '_' and '.' are allowed"
        ));
    }
    let first = s.chars().next();
    let last = s.chars().last();
    if !first.is_some_and(|c| c.is_ascii_alphanumeric())
        || !last.is_some_and(|c| c.is_ascii_alphanumeric())
    {
        return Err(format!(
            "{what} {s:?} must start and end with a letter or digit"
        ));
    }
    Ok(())
}

fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Err("label key prefix before '/' is empty".to_string());
    }
    if prefix.len() > 253 {
        return Err(format!(
            "label key prefix {prefix:?} is longer than 253 characters"
        ));
    }
    for part in prefix.split('.') {
        let ok = !part.is_empty()
            && part.len() <= 63
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !part.starts_with('-')
            && !part.ends_with('-');
        if !ok {
            return Err(format!(
                "label key prefix {prefix:?} is not a DNS subdomain \
                 (lowercase letters, digits, '-' and '.'; each part 1-63 characters, \
                 starting and ending with a letter or digit)"
            ));
        }
    }
    Ok(())
}

/// Checks a label key: `[prefix/]name`, prefix a DNS subdomain of at most 253 characters,
/// name at most 63 characters, and the prefix not one Kubernetes reserves
/// ([`is_reserved_label_key`]).
pub fn check_label_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("label key is empty".to_string());
    }
    match key.split_once('/') {
        Some((prefix, name)) => {
            if name.contains('/') {
                return Err(format!("label key {key:?} contains more than one '/'"));
            }
            check_prefix(prefix)?;
            check_name("label key name", name)?;
            if is_reserved_label_key(key) {
                return Err(format!(
                    "label key {key:?} is under {prefix:?}, which Kubernetes reserves for its own \
                     components (kubernetes.io, k8s.io and their subdomains; only \
                     {ADMIN_DOMAIN}/ is for administrators); use a prefix of your own, \
                     e.g. example.com/"
                ));
            }
            Ok(())
        }
        None => check_name("label key name", key),
    }
}

/// Checks a label value: empty, or at most 63 characters of the name charset.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    check_name("label value", value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(check_label_key("a").is_ok());
        assert!(check_label_key("example.com/name-1.x_y").is_ok());
        assert!(check_label_key(&"a".repeat(63)).is_ok());
        assert!(check_label_key(&"a".repeat(64)).is_err());
        assert!(check_label_key("").is_err());
        assert!(check_label_key("/name").is_err());
        assert!(check_label_key("a/b/c").is_err());
        assert!(check_label_key("-a").is_err());
        assert!(check_label_key("a-").is_err());
        assert!(check_label_key("a b").is_err());
        assert!(check_label_key("Example.com/a").is_err());
        let long_prefix = format!("{}/a", vec!["a".repeat(63); 4].join("."));
        assert!(long_prefix.len() > 253 + 2);
        assert!(check_label_key(&long_prefix).is_err());
    }

    #[test]
    fn reserved_prefixes_are_refused() {
        let err = check_label_key("kubernetes.io/hostname").unwrap_err();
        assert!(err.contains("reserves"), "{err}");
        let err = check_label_key("node-role.kubernetes.io/worker").unwrap_err();
        assert!(err.contains("\"node-role.kubernetes.io\""), "{err}");
        assert!(check_label_key("node-restriction.kubernetes.io/trusted").is_ok());
    }

    #[test]
    fn budget() {
        assert!(check_label_budget(MAX_LABELS_PER_HOST, MAX_LABEL_BYTES_PER_HOST).is_ok());
        let err = check_label_budget(MAX_LABELS_PER_HOST + 1, 10).unwrap_err();
        assert!(err.contains("at most 100"), "{err}");
        let err = check_label_budget(1, MAX_LABEL_BYTES_PER_HOST + 1).unwrap_err();
        assert!(err.contains("at most 16384"), "{err}");
    }

    #[test]
    fn values() {
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("enabled").is_ok());
        assert!(check_label_value("a/b").is_err());
        assert!(check_label_value(&"v".repeat(64)).is_err());
        assert!(check_label_value("_x").is_err());
    }

    #[test]
    fn roles() {
        assert!(is_role_label("kstack.io/role-nova"));
        assert!(is_role_label("openstack-control-plane"));
        assert!(is_role_label("example.com/openstack-compute-node"));
        assert!(!is_role_label("sriov"));
    }
}
