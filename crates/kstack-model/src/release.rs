//! The OpenStack releases kstack deploys, and what differs between them, in one place.
//!
//! `openstack_release` in globals.yml names one of [`ALL`]; any other value is refused when the
//! config loads (kstack's config files are written for these releases' options). The facts that
//! differ per release are fields of [`Release`]; templates get them all as `release`
//! (`{{ release.name }}`, `{{ release.placement_wsgi.module }}`), so no template compares
//! release names on its own.
//!
//! The images of each release are built by `hack/images.sh --release <name>` (the Python pins of
//! each release are under `hack/images/releases/`).
//!
//! Sources: each project's release on PyPI (the modules and scripts its wheel installs).
/// How uWSGI loads a service's WSGI application: a module of the project (`module =
/// package.module:application`), or, before a project had one, the WSGI script its wheel installs
/// in the venv's `bin/` (`wsgi-file = <venv>/bin/<script>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UwsgiApp {
    pub module: Option<&'static str>,
    pub script: Option<&'static str>,
}

const fn module(m: &'static str) -> UwsgiApp {
    UwsgiApp {
        module: Some(m),
        script: None,
    }
}

const fn script(s: &'static str) -> UwsgiApp {
    UwsgiApp {
        module: None,
        script: Some(s),
    }
}

/// One OpenStack release and the facts of it kstack's files use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// The `openstack_release` name (`2025.1`), also the start of the images' tags.
    pub name: &'static str,
    /// The release's code name, lower case (`epoxy`): what `[upgrade_levels]` pins accept.
    pub codename: &'static str,
    /// Placement's WSGI application: `placement.wsgi.api` exists from 2025.1.
    pub placement_wsgi: UwsgiApp,
    /// Cinder's WSGI application: `cinder.wsgi.api` exists from 2025.1.
    pub cinder_wsgi: UwsgiApp,
    /// nova-libvirt's command (`{nova_libvirt_command}` in the catalog): Kolla's start script
    /// from 2025.1 (virtlogd beside libvirtd); before it libvirtd itself. kstack's qemu.conf
    /// writes consoles to files, so neither needs virtlogd.
    pub nova_libvirt_command: &'static str,
    /// Whether heat-api-cfn can check AWS-signed requests (the CloudFormation API, and the
    /// pre-signed URLs of `CFN_SIGNAL` wait condition handles). Keystone lets only services and
    /// admins call `/v3/ec2tokens` (keystone 26.1.1 of 2024.2, 27.x of 2025.1); heat-api-cfn of
    /// 2025.1 (heat 24.1.2) calls it with its service user's token, heat 23.0.0 of 2024.2
    /// (that series' only release) without one, so Keystone refuses every signed request there.
    pub heat_cfn_signed_requests: bool,
}

/// The facts a catalog string may name as `{fact}` ([`Release::fact`]).
pub const FACTS: &[&str] = &["nova_libvirt_command"];

/// 2024.2 (Dalmatian).
pub const DALMATIAN: Release = Release {
    name: "2024.2",
    codename: "dalmatian",
    placement_wsgi: script("placement-api"),
    cinder_wsgi: script("cinder-wsgi"),
    nova_libvirt_command: "/usr/sbin/libvirtd --listen",
    heat_cfn_signed_requests: false,
};

/// 2025.1 (Epoxy), the default.
pub const EPOXY: Release = Release {
    name: "2025.1",
    codename: "epoxy",
    placement_wsgi: module("placement.wsgi.api:application"),
    cinder_wsgi: module("cinder.wsgi.api:application"),
    nova_libvirt_command: "/usr/local/bin/kolla_nova_libvirt_start",
    heat_cfn_signed_requests: true,
};

/// Every release kstack deploys, oldest first: the only list of them.
pub const ALL: [Release; 2] = [DALMATIAN, EPOXY];

/// The release of a config that does not name one.
pub const DEFAULT: Release = EPOXY;

impl Release {
    /// The release of that `openstack_release` name.
    pub fn named(name: &str) -> Option<Release> {
        ALL.into_iter().find(|r| r.name == name)
    }

    /// The value of one of [`FACTS`].
    pub fn fact(&self, name: &str) -> Option<&'static str> {
        match name {
            "nova_libvirt_command" => Some(self.nova_libvirt_command),
            _ => None,
        }
    }
}

/// The `openstack_release` names kstack accepts, oldest first.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|r| r.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_listed_oldest_first_with_distinct_names_and_the_default_among_them() {
        let names = names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
        assert_eq!(Release::named(DEFAULT.name), Some(DEFAULT));
        assert_eq!(Release::named("2024.2"), Some(DALMATIAN));
        assert_eq!(Release::named("2025.2"), None);
        for r in ALL {
            for f in FACTS {
                assert!(r.fact(f).is_some_and(|v| !v.is_empty()), "{}: {f}", r.name);
            }
            // Exactly one way to load each application.
            for app in [r.placement_wsgi, r.cinder_wsgi] {
                assert!(app.module.is_some() != app.script.is_some(), "{r:?}");
            }
        }
    }
}
