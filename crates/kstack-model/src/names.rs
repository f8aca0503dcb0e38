//! The syntax of the names kstack writes into every object it renders: the Kubernetes
//! namespace and the parts of an image reference.
//!
//! Each check returns `Err(what is wrong)`, a sentence fragment naming the first offending
//! character or part, for [`crate::globals::Globals::from_vars`] to report with the variable.
//!
//! - Kubernetes namespace: an RFC 1123 label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63).
//! - Image references follow the OCI distribution reference grammar
//!   (`distribution/reference`, `reference.go`):
//!   ```text
//!   reference        := name [ ":" tag ]
//!   name             := [domain "/"] path
//!   domain           := host [":" port]
//!   host             := domain-name | IPv4address | "[" IPv6address "]"
//!   domain-name      := domain-component ("." domain-component)*
//!   domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
//!   path             := path-component ("/" path-component)*
//!   path-component   := alpha-numeric (separator alpha-numeric)*
//!   alpha-numeric    := [a-z0-9]+
//!   separator        := [_.] | "__" | "-"+
//!   tag              := [\w][\w.-]{0,127}
//!   ```
//!   kolla-ansible builds `[docker_registry/]docker_namespace/docker_image_name_prefix<image>:<tag>`,
//!   so `docker_registry` is a domain optionally followed by a path (a registry mirror under a
//!   path), `docker_namespace` a path, and the prefix the start of a path component.

/// A character for a message: printable ones quoted, others by code point.
fn show(c: char) -> String {
    if c.is_control() {
        format!("the control character U+{:04X}", c as u32)
    } else if c == ' ' {
        "a space".to_owned()
    } else {
        format!("`{c}`")
    }
}

/// Namespaces Kubernetes itself uses: never the cloud's (kstack labels the namespace it deploys
/// into and prunes what it owns there).
pub const RESERVED_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// `Err` when `ns` is one of Kubernetes' own namespaces ([`RESERVED_NAMESPACES`]).
pub fn own_namespace(ns: &str) -> Result<(), String> {
    if RESERVED_NAMESPACES.contains(&ns) {
        Err(format!(
            "it is one of Kubernetes' own namespaces ({}), not one for a cloud",
            RESERVED_NAMESPACES.join(", ")
        ))
    } else {
        Ok(())
    }
}

/// An RFC 1123 label, what a Kubernetes namespace name must be.
pub fn dns1123_label(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.len() > 63 {
        return Err(format!(
            "it has {} characters, at most 63 are allowed",
            s.len()
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "it contains {}; only lower-case letters, digits and `-` are allowed",
            show(c)
        ));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err("it must start and end with a letter or digit".into());
    }
    Ok(())
}

/// A path component of an image name: lower-case letters and digits, separated by one `.`, one
/// `_`, two `__` or any number of `-`.
fn path_component(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it has an empty path component (`//`, or a `/` at the start or end)".into());
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "it contains {}; only lower-case letters, digits, `.`, `_`, `-` and `/` are allowed",
            show(c)
        ));
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !s.starts_with(alnum) || !s.ends_with(alnum) {
        return Err(format!(
            "the part `{s}` must start and end with a lower-case letter or digit"
        ));
    }
    // Runs of separators between alphanumerics: `.`, `_`, `__` or `-`+.
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i] as char) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i] as char) {
            i += 1;
        }
        let sep = &s[start..i];
        let ok = matches!(sep, "." | "_" | "__") || sep.bytes().all(|b| b == b'-');
        if !ok {
            return Err(format!(
                "`{sep}` is not a separator: between letters and digits use one `.`, one `_`, `__` or dashes"
            ));
        }
    }
    Ok(())
}

/// A repository path: path components separated by `/` (`openstack.kolla`, `kolla/mirror`).
pub fn repository_path(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    s.split('/').try_for_each(path_component)
}

/// The start of an image name's last path components (`docker_image_name_prefix`): empty, or
/// what makes `<prefix><image>` a valid path.
pub fn name_prefix(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    repository_path(&format!("{s}a"))
}

/// A host for a URL: an IPv4 or IPv6 address, or a DNS name (letters, digits and `-` in parts
/// separated by `.`, at most 253 characters).
pub fn host(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    if s.contains("://") {
        return Err("it is a URL; write only the host name or address".into());
    }
    if s.len() > 253 {
        return Err("a host name is at most 253 characters".into());
    }
    registry(s).and_then(|()| {
        if s.contains(['/', ':', '[']) {
            Err("write only the host name or address, without a port or path".into())
        } else {
            Ok(())
        }
    })
}

/// A registry: `host[:port]`, optionally followed by a path (`quay.io`, `10.0.0.5:4000`,
/// `[fd00::1]:5000`, `registry.example.com/mirror`).
pub fn registry(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if let Some((scheme, _)) = s.split_once("://") {
        return Err(format!(
            "it starts with a URL scheme (`{scheme}://`); a registry is named without one"
        ));
    }
    let (domain, path) = match s.split_once('/') {
        Some((d, p)) => (d, Some(p)),
        None => (s, None),
    };
    let (host, port) = if let Some(rest) = domain.strip_prefix('[') {
        let Some((addr, after)) = rest.split_once(']') else {
            return Err("the IPv6 address has no closing `]`".into());
        };
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("`[{addr}]` is not an IPv6 address"));
        }
        match after {
            "" => (None, None),
            p => match p.strip_prefix(':') {
                Some(port) => (None, Some(port)),
                None => return Err("after `]` only `:<port>` may follow".into()),
            },
        }
    } else {
        match domain.split_once(':') {
            Some((h, p)) => (Some(h), Some(p)),
            None => (Some(domain), None),
        }
    };
    if let Some(host) = host {
        if host.is_empty() {
            return Err("the host name is empty".into());
        }
        for part in host.split('.') {
            if part.is_empty() {
                return Err(
                    "the host name has an empty part (`..`, or a `.` at the start or end)".into(),
                );
            }
            if let Some(c) = part
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
            {
                return Err(format!(
                    "the host name contains {}; only letters, digits, `-` and `.` are allowed",
                    show(c)
                ));
            }
            if part.starts_with('-') || part.ends_with('-') {
                return Err(format!(
                    "the host name part `{part}` must start and end with a letter or digit"
                ));
            }
        }
    }
    if let Some(port) = port {
        if port.is_empty() {
            return Err("the port after `:` is empty".into());
        }
        if !port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().map_or(true, |p| p == 0)
        {
            return Err(format!("`{port}` is not a port number (1 to 65535)"));
        }
    }
    match path {
        Some(p) => repository_path(p).map_err(|e| format!("its path is not valid: {e}")),
        None => Ok(()),
    }
}

/// An image tag: up to 128 letters, digits, `_`, `.` and `-`, not starting with `.` or `-`.
pub fn tag(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.len() > 128 {
        return Err(format!(
            "it has {} characters, at most 128 are allowed",
            s.len()
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "it contains {}; only letters, digits, `_`, `.` and `-` are allowed",
            show(c)
        ));
    }
    if s.starts_with(['.', '-']) {
        return Err("it must start with a letter, digit or `_`".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces() {
        for ok in ["openstack", "a", "kstack-e2e-1", &"a".repeat(63)] {
            assert_eq!(dns1123_label(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "OpenStack",
            "{{ x }}",
            "../../etc",
            "a_b",
            "a.b",
            "-a",
            "a-",
            "a\nb",
            &"a".repeat(64),
        ] {
            assert!(dns1123_label(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            dns1123_label("a\nb").unwrap_err(),
            "it contains the control character U+000A; only lower-case letters, digits and `-` are allowed"
        );
    }

    #[test]
    fn registries() {
        for ok in [
            "quay.io",
            "localhost",
            "localhost:4000",
            "10.0.0.5:5000",
            "[fd00::1]",
            "[fd00::1]:5000",
            "Registry.Example.COM",
            "registry.example.com/mirror/kolla",
            "my-registry",
        ] {
            assert_eq!(registry(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "{{ x }}",
            "../../etc",
            "quay.io:",
            "quay.io:0",
            "quay.io:99999",
            "quay.io:http",
            "-quay.io",
            "quay..io",
            "quay_io",
            "[fd00::1",
            "[not-ip]",
            "[fd00::1]x",
            "quay.io/",
            "quay.io/UPPER",
            "https://quay.io",
            "quay.io\n",
        ] {
            assert!(registry(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn repository_paths_and_prefixes() {
        for ok in [
            "openstack.kolla",
            "kolla",
            "a/b/c",
            "a__b",
            "a---b",
            "a_b.c-d",
        ] {
            assert_eq!(repository_path(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "Kolla",
            "{{ x }}",
            "../../etc",
            "a//b",
            "/a",
            "a/",
            "a..b",
            "a___b",
            "a.-b",
            "-a",
            "a b",
        ] {
            assert!(repository_path(bad).is_err(), "{bad:?}");
        }
        for ok in ["", "my-", "centos-source-", "sub/"] {
            assert_eq!(name_prefix(ok), Ok(()), "{ok}");
        }
        for bad in ["My-", "-", "a..", "{{ x }}", "../"] {
            assert!(name_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tags() {
        for ok in [
            "2025.1-rocky-9",
            "latest",
            "_x",
            "A.b-C_d",
            &"a".repeat(128),
        ] {
            assert_eq!(tag(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".x",
            "-x",
            "{{ x }}",
            "../../etc",
            "a:b",
            "a b",
            &"a".repeat(129),
        ] {
            assert!(tag(bad).is_err(), "{bad:?}");
        }
    }
}
