//! A container's config files as objects: one immutable, content-hash named ConfigMap, or a
//! Secret when the file carries a passwords.yml value, per file, mounted together as one
//! projected volume; and env from passwords.yml as an immutable Secret behind `secretKeyRef`s.
use std::collections::BTreeMap;

use kstack_k8s::api::core::v1::{
    ConfigMap, ConfigMapProjection, EnvVar, EnvVarSource, KeyToPath, ProjectedVolumeSource, Secret,
    SecretKeySelector, SecretProjection, Volume, VolumeMount, VolumeProjection,
};
use kstack_k8s::k8s_openapi::ByteString;
use kstack_model::catalog::{self};
use kstack_model::globals::Globals;

use super::{ContainerParts, Renderer, labels, meta};
use crate::Object;
use crate::files::{ContainerFiles, RenderedFile};
use crate::kolla::KOLLA_CONFIG_DIR;
use crate::names::{SecretNames, short_hash};

impl Renderer<'_> {
    /// The files of one container (`host: None`) or of its per-host variant.
    pub(super) fn container_files(
        &self,
        service: &str,
        container: &str,
        host: Option<&str>,
    ) -> Option<&ContainerFiles> {
        self.files
            .iter()
            .find(|f| f.service == service && f.container == container && f.host.as_deref() == host)
    }

    /// Config parts by container name, for the main workload or a host variant.
    pub(super) fn parts(
        &self,
        name: &str,
        service: &catalog::Service,
        host: Option<&str>,
    ) -> BTreeMap<String, ContainerParts> {
        let mut m = BTreeMap::new();
        for c in &service.containers {
            if let Some(files) = self.container_files(name, &c.name, host) {
                m.insert(
                    c.name.clone(),
                    config_parts(self.globals, &self.names, name, files),
                );
            }
        }
        m
    }
}

/// A Kubernetes object name from a file name: lower case, `[a-z0-9.-]` only.
pub(super) fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// One file as its own immutable object, named `<prefix>-<hash of the content>`: a Secret if
/// it carries a passwords.yml value (its hash keyed, [`SecretNames`]), else a ConfigMap.
/// Returns it with its volume projection (the file name as key and path).
fn file_object(
    globals: &Globals,
    names: &SecretNames,
    prefix: &str,
    labels: BTreeMap<String, String>,
    file: &RenderedFile,
) -> (Object, VolumeProjection) {
    let hash = if file.secret {
        names.hash(file.content.as_bytes())
    } else {
        short_hash(file.content.as_bytes())
    };
    let name = format!("{prefix}-{hash}");
    let items = Some(vec![KeyToPath {
        key: file.name.clone(),
        path: file.name.clone(),
        mode: None,
    }]);
    if file.secret {
        let object = Object::Secret(Secret {
            metadata: meta(globals, &name, labels),
            data: Some(BTreeMap::from([(
                file.name.clone(),
                ByteString(file.content.as_bytes().to_vec()),
            )])),
            immutable: Some(true),
            type_: Some("Opaque".into()),
            ..Default::default()
        });
        let projection = VolumeProjection {
            secret: Some(SecretProjection {
                name,
                items,
                ..Default::default()
            }),
            ..Default::default()
        };
        (object, projection)
    } else {
        let object = Object::ConfigMap(ConfigMap {
            metadata: meta(globals, &name, labels),
            data: Some(BTreeMap::from([(file.name.clone(), file.content.clone())])),
            immutable: Some(true),
            ..Default::default()
        });
        let projection = VolumeProjection {
            config_map: Some(ConfigMapProjection {
                name,
                items,
                ..Default::default()
            }),
            ..Default::default()
        };
        (object, projection)
    }
}

/// Files as objects, mounted together read-only at `mount_path` through one projected volume
/// named `volume_name`.
pub(super) fn files_volume(
    globals: &Globals,
    names: &SecretNames,
    owner: &str,
    prefix: impl Fn(&RenderedFile) -> String,
    labels: &BTreeMap<String, String>,
    files: &[RenderedFile],
    (volume_name, mount_path): (&str, &str),
) -> ContainerParts {
    let mut objects = Vec::new();
    let mut sources = Vec::new();
    for f in files {
        let (o, p) = file_object(globals, names, &prefix(f), labels.clone(), f);
        debug_assert_eq!(o.service(), Some(owner));
        objects.push(o);
        sources.push(p);
    }
    ContainerParts {
        objects,
        volume: Volume {
            name: volume_name.to_owned(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(sources),
                ..Default::default()
            }),
            ..Default::default()
        },
        mount: VolumeMount {
            name: volume_name.to_owned(),
            mount_path: mount_path.to_owned(),
            read_only: Some(true),
            ..Default::default()
        },
    }
}

/// The objects and volume of one container's Kolla config directory, owned by `owner`.
pub(super) fn config_parts(
    globals: &Globals,
    names: &SecretNames,
    owner: &str,
    files: &ContainerFiles,
) -> ContainerParts {
    let container = &files.container;
    files_volume(
        globals,
        names,
        owner,
        |f| {
            if f.name == "config.json" {
                format!("{owner}-{container}-config-json")
            } else {
                format!("{owner}-{}", slug(&f.name))
            }
        },
        &labels(owner, "config"),
        &files.files,
        (&format!("kolla-config-{container}"), KOLLA_CONFIG_DIR),
    )
}

/// Env from passwords: the values go into one immutable Secret (`<prefix>-env-<keyed hash>`,
/// e.g. `<service>-<task>` or `<service>-<container>`) and the env vars refer to it by
/// `secretKeyRef`.
pub(super) fn secret_env(
    globals: &Globals,
    names: &SecretNames,
    prefix: &str,
    labels: BTreeMap<String, String>,
    pairs: &[(&str, &str)],
) -> (Object, Vec<EnvVar>) {
    let data: BTreeMap<String, ByteString> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect();
    let hash = names.hash(&serde_json::to_vec(&data).expect("env data serializes"));
    let name = format!("{prefix}-env-{hash}");
    let vars = pairs
        .iter()
        .map(|(k, _)| EnvVar {
            name: (*k).to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: name.clone(),
                    key: (*k).to_owned(),
                    optional: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    let secret = Object::Secret(Secret {
        metadata: meta(globals, &name, labels),
        data: Some(data),
        immutable: Some(true),
        type_: Some("Opaque".into()),
        ..Default::default()
    });
    (secret, vars)
}
