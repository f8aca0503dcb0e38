//! What differs between the base distributions of the Kolla images, in one place.
//!
//! The Kolla images are built on Rocky Linux or CentOS Stream (RPM packages) or on Debian or
//! Ubuntu (Debian packages), chosen by `kolla_base_distro`. The packages put Apache, MariaDB and
//! Galera at different paths. Everything that depends on that is a field of [`Distro`], and
//! every consumer reads it from here:
//! - the catalog names a fact in a config file's `dest` or a container's `command` as
//!   `{fact}` (`dest: "{apache_conf_dir}/wsgi-keystone.conf"`), expanded by [`Distro::expand`]
//!   when config.json is rendered (the same for the Kubernetes and the Compose target);
//! - templates get the whole struct as `distro` (`{{ distro.apache_command }}`).
//!
//! Facts of the Kolla image layout that are the same on every distribution live here too
//! ([`KOLLA_VENV`], [`Distro::site_packages`]), so no template spells them out on its own.
//!
//! [`ALL`] is the only list of the distributions and their versions: the names globals.yml may
//! give `kolla_base_distro`, the default of `kolla_base_distro_version` (kstack-config builds
//! kolla-ansible's Jinja default from it), and the distributions `hack/distro-parity.sh` checks
//! (it reads them from `kstack template --distro-facts`). A test keeps other copies out.
//!
//! Sources: kolla 2025.1 (`docker/openstack-base/Dockerfile.j2`: httpd and mod_wsgi vs apache2
//! and libapache2-mod-wsgi-py3, the venv and its `lib/python3` link; `docker/base/httpd_setup.sh`;
//! `docker/mariadb/`), kolla-ansible 2025.1 (`roles/*/templates/*.json.j2`: config file
//! destinations per distribution).
use serde::Serialize;

/// The Python virtualenv every Kolla OpenStack image installs the services into.
pub const KOLLA_VENV: &str = "/var/lib/kolla/venv";

/// Whether the distribution uses RPM or Debian packages: Apache and MariaDB follow from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Packages {
    Rpm,
    Deb,
}

/// The distribution-dependent facts kstack's files use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Distro {
    /// The `kolla_base_distro` name.
    pub name: &'static str,
    /// The distribution's version in the image tag, `kolla_base_distro_version`'s default
    /// (kolla-ansible 2025.1 `group_vars/all.yml`).
    pub version: &'static str,
    pub packages: Packages,
    /// The Apache binary a container runs in the foreground (`<apache_command> -DFOREGROUND`).
    pub apache_command: &'static str,
    /// The directory whose `*.conf` files Apache's main config includes.
    pub apache_conf_dir: &'static str,
    /// Where Apache's loadable modules are (`LoadModule ... <dir>/mod_ssl.so`).
    pub apache_modules_dir: &'static str,
    /// The user Apache's own workers run as (WSGI daemons run as the service user).
    pub apache_user: &'static str,
    /// Horizon's site file in [`Distro::apache_conf_dir`]: on Debian and Ubuntu it takes the
    /// name of Debian's default site, as in Kolla's deployment.
    pub horizon_site_file: &'static str,
    /// The MariaDB server's main option file, which kstack's `galera.cnf` replaces.
    pub mariadb_config: &'static str,
    /// The Galera 4 provider library.
    pub galera_provider: &'static str,
    /// The services' Python packages: Kolla links the venv's `lib/python3` to the
    /// distribution's Python version, so this path is the same everywhere.
    pub site_packages: &'static str,
    /// The venv's scripts (console and WSGI scripts of the services).
    pub venv_bin: &'static str,
}

const SITE_PACKAGES: &str = "/var/lib/kolla/venv/lib/python3/site-packages";
const VENV_BIN: &str = "/var/lib/kolla/venv/bin";

const RPM: Distro = Distro {
    name: "",
    version: "",
    packages: Packages::Rpm,
    apache_command: "/usr/sbin/httpd",
    apache_conf_dir: "/etc/httpd/conf.d",
    apache_modules_dir: "/usr/lib64/httpd/modules",
    apache_user: "apache",
    horizon_site_file: "horizon.conf",
    mariadb_config: "/etc/my.cnf",
    // Kolla's RPM images link /usr/lib64/galera to the galera-4 package's directory.
    galera_provider: "/usr/lib64/galera/libgalera_smm.so",
    site_packages: SITE_PACKAGES,
    venv_bin: VENV_BIN,
};

const DEB: Distro = Distro {
    name: "",
    version: "",
    packages: Packages::Deb,
    apache_command: "/usr/sbin/apache2",
    apache_conf_dir: "/etc/apache2/conf-enabled",
    apache_modules_dir: "/usr/lib/apache2/modules",
    apache_user: "www-data",
    horizon_site_file: "000-default.conf",
    mariadb_config: "/etc/mysql/my.cnf",
    galera_provider: "/usr/lib/galera/libgalera_smm.so",
    site_packages: SITE_PACKAGES,
    venv_bin: VENV_BIN,
};

/// Every base distribution the Kolla images are published for, kolla-ansible's default
/// (`rocky`) first.
pub const ALL: [Distro; 4] = [
    Distro {
        name: "rocky",
        version: "9",
        ..RPM
    },
    Distro {
        name: "centos",
        version: "stream9",
        ..RPM
    },
    Distro {
        name: "debian",
        version: "bookworm",
        ..DEB
    },
    Distro {
        name: "ubuntu",
        version: "noble",
        ..DEB
    },
];

/// kolla-ansible's default `kolla_base_distro`, and kstack's.
pub const DEFAULT: Distro = ALL[0];

/// The names of every distribution, sorted: what `kolla_base_distro` may be.
pub fn names() -> Vec<&'static str> {
    let mut names: Vec<&str> = ALL.iter().map(|d| d.name).collect();
    names.sort_unstable();
    names
}

/// The names of the facts a catalog string may name as `{fact}`.
pub const FACTS: &[&str] = &[
    "apache_command",
    "apache_conf_dir",
    "apache_modules_dir",
    "apache_user",
    "horizon_site_file",
    "mariadb_config",
    "galera_provider",
    "site_packages",
    "venv_bin",
];

/// Facts of where the cloud runs rather than of the image distribution, named in catalog
/// strings the same way: `bind_address`, where a service that takes its listen address on its
/// command line listens (every address of its pod on Kubernetes; on the single-node Compose
/// target, whose containers share the node's network, the node's address and never all of
/// them). The renderer gives their values ([`Distro::expand_with`]).
pub const TARGET_FACTS: &[&str] = &["bind_address"];

/// A catalog string naming a fact kstack does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fact `{{{name}}}`; known: {}, {}", FACTS.join(", "), TARGET_FACTS.join(", "))]
pub struct UnknownFact {
    pub name: String,
}

impl Distro {
    /// The distribution called `name` (`kolla_base_distro`).
    pub fn named(name: &str) -> Option<Distro> {
        ALL.into_iter().find(|d| d.name == name)
    }

    /// The value of the fact `name`.
    pub fn fact(&self, name: &str) -> Option<&'static str> {
        Some(match name {
            "apache_command" => self.apache_command,
            "apache_conf_dir" => self.apache_conf_dir,
            "apache_modules_dir" => self.apache_modules_dir,
            "apache_user" => self.apache_user,
            "horizon_site_file" => self.horizon_site_file,
            "mariadb_config" => self.mariadb_config,
            "galera_provider" => self.galera_provider,
            "site_packages" => self.site_packages,
            "venv_bin" => self.venv_bin,
            _ => return None,
        })
    }

    /// `text` with every `{fact}` replaced by its value for this distribution. A `{` that does
    /// not open a known fact is an error (the catalog is validated with [`check`] first).
    pub fn expand(&self, text: &str) -> Result<String, UnknownFact> {
        self.expand_with(text, &|_| None)
    }

    /// [`Distro::expand`], with the values of the [`TARGET_FACTS`] from `target`.
    pub fn expand_with(
        &self,
        text: &str,
        target: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, UnknownFact> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let Some(end) = after.find('}') else {
                return Err(UnknownFact {
                    name: after.to_owned(),
                });
            };
            let name = &after[..end];
            let value = match self.fact(name) {
                Some(v) => v.to_owned(),
                None => target(name).ok_or_else(|| UnknownFact {
                    name: name.to_owned(),
                })?,
            };
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// Checks that every `{fact}` in `text` names a known fact (the same for every distribution).
pub fn check(text: &str) -> Result<(), UnknownFact> {
    ALL[0]
        .expand_with(text, &|n| {
            (TARGET_FACTS.contains(&n) || crate::release::FACTS.contains(&n)).then(String::new)
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_is_known_for_every_distribution() {
        for d in ALL {
            for f in FACTS {
                assert!(
                    d.fact(f)
                        .is_some_and(|v| v.starts_with('/')
                            || matches!(*f, "apache_user" | "horizon_site_file")),
                    "{}: {f}",
                    d.name
                );
            }
            assert_eq!(Distro::named(d.name), Some(d));
        }
        assert_eq!(Distro::named("gentoo"), None);
    }

    #[test]
    fn versions_are_kolla_ansible_2025_1_defaults() {
        let versions: Vec<(&str, &str)> = ALL.iter().map(|d| (d.name, d.version)).collect();
        assert_eq!(
            versions,
            [
                ("rocky", "9"),
                ("centos", "stream9"),
                ("debian", "bookworm"),
                ("ubuntu", "noble")
            ]
        );
        assert_eq!(names(), ["centos", "debian", "rocky", "ubuntu"]);
        assert_eq!(DEFAULT.name, "rocky");
    }

    #[test]
    fn rpm_and_deb_families_differ_where_the_packages_do() {
        let rocky = Distro::named("rocky").unwrap();
        let debian = Distro::named("debian").unwrap();
        assert_eq!(
            rocky.expand("{apache_command} -DFOREGROUND").unwrap(),
            "/usr/sbin/httpd -DFOREGROUND"
        );
        assert_eq!(
            debian
                .expand("{apache_conf_dir}/wsgi-keystone.conf")
                .unwrap(),
            "/etc/apache2/conf-enabled/wsgi-keystone.conf"
        );
        assert_eq!(rocky.mariadb_config, "/etc/my.cnf");
        assert_eq!(debian.mariadb_config, "/etc/mysql/my.cnf");
        assert_eq!(Distro::named("ubuntu").unwrap().packages, Packages::Deb);
        assert_eq!(Distro::named("centos").unwrap().packages, Packages::Rpm);
    }

    #[test]
    fn unknown_or_unclosed_facts_are_errors() {
        let e = check("{apache_dir}/x.conf").unwrap_err();
        assert_eq!(e.name, "apache_dir");
        assert!(
            e.to_string()
                .starts_with("unknown fact `{apache_dir}`; known: apache_command"),
            "{e}"
        );
        assert!(check("{apache_conf_dir").is_err());
        // A fact of the target is known to the check; its value comes from the renderer.
        assert!(check("memcached -l {bind_address}").is_ok());
        let d = Distro::named("debian").unwrap();
        assert!(d.expand("-l {bind_address}").is_err());
        assert_eq!(
            d.expand_with("-l {bind_address} {venv_bin}", &|n| (n == "bind_address")
                .then(|| "10.1.2.3".to_owned()))
                .unwrap(),
            format!("-l 10.1.2.3 {}", d.venv_bin)
        );
        assert!(check("/etc/plain/path").is_ok());
    }
}
