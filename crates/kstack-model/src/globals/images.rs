//! The images: the release, the base distribution, the registry and the tags, and the image
//! references made of them.
use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use super::Globals;
use super::kolla::{self, Issues, Read, quoted};
use crate::names;

/// The image variables of globals.yml.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ImageSettings {
    #[serde(deserialize_with = "kolla::text")]
    openstack_release: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    kolla_base_distro: Read<String>,
    /// Derived from the distribution when not set.
    #[serde(deserialize_with = "kolla::text")]
    kolla_base_distro_version: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    openstack_tag_suffix: Read<String>,
    /// `{release}-{distro}-{distro_version}{suffix}` when not set.
    #[serde(deserialize_with = "kolla::text")]
    openstack_tag: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    docker_registry: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    docker_namespace: Read<String>,
    #[serde(deserialize_with = "kolla::text")]
    docker_image_name_prefix: Read<String>,
}

/// The image variables of globals.yml, typed, with the derived ones filled in
/// ([`Globals::images`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Images {
    pub openstack_release: String,
    /// One of [`crate::distro::names`].
    pub kolla_base_distro: String,
    /// The distribution's own version unless set explicitly.
    pub kolla_base_distro_version: String,
    pub openstack_tag_suffix: String,
    /// `{release}-{distro}-{distro_version}{suffix}` unless set explicitly.
    pub openstack_tag: String,
    /// Empty means no registry part in image references.
    pub docker_registry: String,
    pub docker_namespace: String,
    pub docker_image_name_prefix: String,
}

impl ImageSettings {
    pub fn check(&self, t: &mut Issues) -> Images {
        let openstack_release = t.choice(
            "openstack_release",
            &self.openstack_release,
            &crate::release::names(),
        );
        let kolla_base_distro = t.choice(
            "kolla_base_distro",
            &self.kolla_base_distro,
            &crate::distro::names(),
        );
        let kolla_base_distro_version =
            match t.opt_text("kolla_base_distro_version", &self.kolla_base_distro_version) {
                Some(v) => v,
                None => crate::distro::Distro::named(&kolla_base_distro)
                    .map(|d| d.version)
                    .unwrap_or_default()
                    .to_owned(),
            };
        let openstack_tag_suffix = t.text("openstack_tag_suffix", &self.openstack_tag_suffix);
        let openstack_tag = t
            .opt_text("openstack_tag", &self.openstack_tag)
            .unwrap_or_else(|| {
                format!(
                    "{openstack_release}-{kolla_base_distro}-{kolla_base_distro_version}{openstack_tag_suffix}"
                )
            });
        Images {
            docker_registry: t.text("docker_registry", &self.docker_registry),
            docker_namespace: t.text("docker_namespace", &self.docker_namespace),
            docker_image_name_prefix: t
                .text("docker_image_name_prefix", &self.docker_image_name_prefix),
            openstack_release,
            kolla_base_distro,
            kolla_base_distro_version,
            openstack_tag_suffix,
            openstack_tag,
        }
    }
}

/// A hint for a value that still holds a Jinja expression.
pub(super) fn jinja_hint(v: &str) -> &'static str {
    if v.contains("{{") || v.contains("{%") {
        " The value holds a Jinja expression that was not expanded: write the final value."
    } else {
        ""
    }
}

/// Reports `value` of `key` when `result` says it breaks its grammar, unless `key` is in
/// `skip` (already reported).
pub(super) fn check_name(
    t: &mut Issues,
    skip: &BTreeSet<&String>,
    (key, value): (&str, &str),
    what: &str,
    result: Result<(), String>,
    help: &str,
) {
    if skip.iter().any(|k| k.as_str() == key) {
        return;
    }
    if let Err(why) = result {
        t.push(
            key,
            None,
            format!("{} is not a valid {what}: {why}", quoted(value)),
            format!("{help}.{}", jinja_hint(value)),
        );
    }
}

/// Checks the parts of the image references against the grammars of [`crate::names`] on their
/// final values, skipping the variables in `skip` (already reported). A derived `openstack_tag`
/// names the variable that breaks it.
pub(super) fn check_image_names(
    t: &mut Issues,
    vars: &std::collections::BTreeMap<String, Value>,
    skip: &BTreeSet<&String>,
    i: &Images,
) {
    if !i.docker_registry.is_empty() {
        check_name(
            t,
            skip,
            ("docker_registry", &i.docker_registry),
            "image registry",
            names::registry(&i.docker_registry),
            "write `host[:port]`, optionally followed by a path, e.g. `quay.io` or `registry.example.com:5000/mirror`, without `https://`; an empty value means no registry part",
        );
    }
    check_name(
        t,
        skip,
        ("docker_namespace", &i.docker_namespace),
        "image namespace",
        names::repository_path(&i.docker_namespace),
        "write the repository path images live under, e.g. `openstack.kolla`: lower-case letters, digits and `.`, `_`, `-` between them, parts separated by `/`",
    );
    check_name(
        t,
        skip,
        ("docker_image_name_prefix", &i.docker_image_name_prefix),
        "image name prefix",
        names::name_prefix(&i.docker_image_name_prefix),
        "write what goes before each image name, e.g. `centos-source-`: lower-case letters, digits, `.`, `_`, `-`",
    );
    let tag_help = "an image tag is at most 128 letters, digits, `_`, `.` and `-`, not starting with `.` or `-`, e.g. `2025.1-rocky-9`";
    if vars.get("openstack_tag").is_some_and(|v| !v.is_null()) {
        check_name(
            t,
            skip,
            ("openstack_tag", &i.openstack_tag),
            "image tag",
            names::tag(&i.openstack_tag),
            tag_help,
        );
    } else if let Err(why) = names::tag(&i.openstack_tag) {
        // Derived `{release}-{distro}-{version}{suffix}`: name the variable that breaks it.
        let parts = [
            ("openstack_release", i.openstack_release.as_str()),
            (
                "kolla_base_distro_version",
                i.kolla_base_distro_version.as_str(),
            ),
            ("openstack_tag_suffix", i.openstack_tag_suffix.as_str()),
        ];
        let (key, value) = parts
            .iter()
            .find(|(_, v)| {
                v.chars()
                    .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
            })
            .or_else(|| parts.first().filter(|(_, v)| names::tag(v).is_err()))
            .copied()
            .unwrap_or(parts[0]);
        if !skip.iter().any(|k| k.as_str() == key) {
            t.push(
                key,
                None,
                format!(
                    "{} makes the image tag {} (`openstack_tag` is not set, so it is derived from `openstack_release`, `kolla_base_distro`, `kolla_base_distro_version` and `openstack_tag_suffix`) invalid: {why}",
                    quoted(value),
                    quoted(&i.openstack_tag),
                ),
                format!("{tag_help}; or set `openstack_tag` itself.{}", jinja_hint(value)),
            );
        }
    }
    // `<service>_tag`: every variable so named, whether kstack has the service or not.
    for (key, value) in vars
        .iter()
        .filter(|(k, _)| k.ends_with("_tag") && k.as_str() != "openstack_tag")
    {
        let value = match value {
            Value::String(s) if !s.is_empty() => s.clone(),
            Value::Number(x) => x.to_string(),
            _ => continue,
        };
        check_name(
            t,
            skip,
            (key, &value),
            "image tag",
            names::tag(&value),
            tag_help,
        );
    }
}

impl Globals {
    /// The image tag for a service: `<service>_tag` if set, else `openstack_tag`.
    pub fn tag_for(&self, service: &str) -> String {
        match self.vars.get(&format!("{service}_tag")) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => self.images.openstack_tag.clone(),
        }
    }

    /// The image reference `[registry/]namespace/prefix<image>:<tag>` for an image of a service,
    /// e.g. `image_ref("nova", "nova-api")`.
    pub fn image_ref(&self, service: &str, image: &str) -> String {
        let i = &self.images;
        let registry = if i.docker_registry.is_empty() {
            String::new()
        } else {
            format!("{}/", i.docker_registry)
        };
        format!(
            "{registry}{}/{}{image}:{}",
            i.docker_namespace,
            i.docker_image_name_prefix,
            self.tag_for(service)
        )
    }

    /// The facts of the image distribution (`kolla_base_distro`). Validation admits only
    /// [`crate::distro::names`]; a `Globals` built by hand with another name gets
    /// kolla-ansible's default, [`crate::distro::DEFAULT`].
    /// The OpenStack release (`openstack_release`, checked when the globals load).
    pub fn release(&self) -> crate::release::Release {
        crate::release::Release::named(&self.images.openstack_release)
            .unwrap_or(crate::release::DEFAULT)
    }

    pub fn distro(&self) -> crate::distro::Distro {
        crate::distro::Distro::named(&self.images.kolla_base_distro)
            .unwrap_or(crate::distro::DEFAULT)
    }
}
