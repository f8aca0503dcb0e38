//! Keystone's key repositories on Kubernetes: the Secret every replica mounts, and the
//! CronJob that rotates its Fernet keys.
//!
//! A key repository ([`VolumeKind::KeyRepository`]) is one Secret, named like the catalog
//! volume, rendered without data: the engine creates it once with freshly generated keys
//! ([`GENERATED_ANNOTATION`]) and then never changes, prunes or restores it, so no key ever
//! passes through a render, a plan or a release record, and a rollback cannot bring old keys
//! back.
//!
//! A repository marked `rotate` gets `<volume>-rotate`: a ServiceAccount whose Role may only
//! read and patch that one Secret, and a CronJob that runs `fernet-rotate.py` in the
//! `keystone-fernet` image. The job gets its API credentials from a projected volume it
//! declares itself (a short-lived token for its ServiceAccount, the cluster's CA), not from
//! the namespace's default account. It rotates once the Secret's `kstack.io/rotated-at` is
//! `fernet_key_rotation_interval` old, so the schedule (every minute for intervals under an
//! hour, else hourly) only bounds how late a rotation may be. With Keystone keeping
//! `max_active_keys` keys (kolla-ansible's formula, [`FernetTiming::max_active_keys`]), a key
//! is purged only after every token it signed has expired and left the allowed window.

use std::collections::BTreeMap;

use kstack_k8s::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use kstack_k8s::api::core::v1::{
    ConfigMap, ConfigMapProjection, ConfigMapVolumeSource, Container, KeyToPath, PodSpec,
    PodTemplateSpec, ProjectedVolumeSource, Secret, SecurityContext, ServiceAccount,
    ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};
use kstack_k8s::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kstack_k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstack_model::catalog::{self, VolumeKind};
use kstack_model::globals::{FernetTiming, Globals};
use kstack_model::labels::{FERNET_KEYS, GENERATED_ANNOTATION};

use super::{labels, meta, pod_labels};
use crate::Object;
use crate::names::short_hash;

/// Mode of a key repository's files: read by the owner and the pod's `fsGroup` (the service's
/// group), by nobody else.
pub const KEY_MODE: i32 = 0o440;

/// The rotation script, run with the image's Python (keystone-manage's venv).
pub const ROTATE_SCRIPT: &str = include_str!("../../templates/keystone/fernet-rotate.py");
const SCRIPT_DIR: &str = "/usr/local/lib/kstack";
const CREDENTIALS_DIR: &str = "/var/run/secrets/kstack";
/// How long the rotation job's API token lives (the job takes seconds).
const TOKEN_SECS: i64 = 600;

/// A key repository's Secret as rendered: no data (see the module doc).
pub(crate) fn repository_secret(globals: &Globals, service: &str, volume: &str) -> Secret {
    let mut metadata = meta(globals, volume, labels(service, "keys"));
    metadata.annotations = Some(BTreeMap::from([(
        GENERATED_ANNOTATION.to_owned(),
        FERNET_KEYS.to_owned(),
    )]));
    Secret {
        metadata,
        type_: Some("Opaque".into()),
        ..Default::default()
    }
}

/// The CronJob schedule that checks for a due rotation: every minute for intervals under an
/// hour, else hourly.
pub fn schedule(timing: &FernetTiming) -> &'static str {
    if timing.rotation_interval < 3600 {
        "* * * * *"
    } else {
        "0 * * * *"
    }
}

/// The rotation objects of every `rotate` key repository of `service`.
pub(crate) fn rotation(globals: &Globals, name: &str, service: &catalog::Service) -> Vec<Object> {
    let mut out = Vec::new();
    for v in &service.volumes {
        let VolumeKind::KeyRepository {
            fs_group,
            rotate: true,
        } = v.kind
        else {
            continue;
        };
        out.extend(rotation_of(globals, name, service, &v.name, fs_group));
    }
    out
}

fn rotation_of(
    globals: &Globals,
    name: &str,
    service: &catalog::Service,
    secret: &str,
    fs_group: i64,
) -> Vec<Object> {
    let account = format!("{secret}-rotate");
    let l = || labels(name, "keys");
    let role = Role {
        metadata: meta(globals, &account, l()),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".into()]),
            resource_names: Some(vec![secret.to_owned()]),
            verbs: vec!["get".into(), "patch".into()],
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta(globals, &account, l()),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: account.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.clone(),
            namespace: Some(globals.kubernetes_namespace.clone()),
            ..Default::default()
        }]),
    };
    let script_map = format!("{account}-{}", short_hash(ROTATE_SCRIPT.as_bytes()));
    let script = ConfigMap {
        metadata: meta(globals, &script_map, l()),
        data: Some(BTreeMap::from([(
            "fernet-rotate.py".to_owned(),
            ROTATE_SCRIPT.to_owned(),
        )])),
        immutable: Some(true),
        ..Default::default()
    };
    let env = [
        ("KSTACK_NAMESPACE", globals.kubernetes_namespace.clone()),
        ("KSTACK_KEY_SECRET", secret.to_owned()),
        (
            "KSTACK_ROTATION_INTERVAL",
            globals.fernet.rotation_interval.to_string(),
        ),
        (
            "KSTACK_MAX_ACTIVE_KEYS",
            globals.fernet.max_active_keys().to_string(),
        ),
        ("KSTACK_API_CREDENTIALS", CREDENTIALS_DIR.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| kstack_k8s::api::core::v1::EnvVar {
        name: k.to_owned(),
        value: Some(v),
        ..Default::default()
    })
    .collect();
    let container = Container {
        name: "fernet-rotate".into(),
        image: Some(globals.image_ref(&service.project, "keystone-fernet")),
        command: Some(vec![
            "python3".into(),
            format!("{SCRIPT_DIR}/fernet-rotate.py"),
        ]),
        env: Some(env),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "script".into(),
                mount_path: SCRIPT_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            },
            VolumeMount {
                name: "api-credentials".into(),
                mount_path: CREDENTIALS_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            },
        ]),
        // Kolla gives a service's user the same uid as its group.
        security_context: Some(SecurityContext {
            run_as_user: Some(fs_group),
            run_as_group: Some(fs_group),
            run_as_non_root: Some(true),
            allow_privilege_escalation: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    let volumes = vec![
        Volume {
            name: "script".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: script_map,
                default_mode: Some(0o444),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "api-credentials".into(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![
                    VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            path: "token".into(),
                            expiration_seconds: Some(TOKEN_SECS),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    VolumeProjection {
                        config_map: Some(ConfigMapProjection {
                            name: "kube-root-ca.crt".into(),
                            items: Some(vec![KeyToPath {
                                key: "ca.crt".into(),
                                path: "ca.crt".into(),
                                ..Default::default()
                            }]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    let (key, value) = globals.role_label(&service.role.to_string());
    let pod = PodSpec {
        containers: vec![container],
        volumes: Some(volumes),
        service_account_name: Some(account.clone()),
        automount_service_account_token: Some(false),
        restart_policy: Some("Never".into()),
        node_selector: Some(BTreeMap::from([(key, value)])),
        ..Default::default()
    };
    let cron = CronJob {
        metadata: meta(globals, &account, l()),
        spec: CronJobSpec {
            schedule: schedule(&globals.fernet).to_owned(),
            concurrency_policy: Some("Forbid".into()),
            starting_deadline_seconds: Some(300),
            successful_jobs_history_limit: Some(1),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: None,
                spec: Some(JobSpec {
                    backoff_limit: Some(2),
                    active_deadline_seconds: Some(300),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(pod_labels(globals, name, l())),
                            ..Default::default()
                        }),
                        spec: Some(pod),
                    },
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        ..Default::default()
    };
    vec![
        Object::ServiceAccount(ServiceAccount {
            metadata: meta(globals, &account, l()),
            ..Default::default()
        }),
        Object::Role(role),
        Object::RoleBinding(binding),
        Object::ConfigMap(script),
        Object::CronJob(Box::new(cron)),
    ]
}
