//! The scheduled backup of the cloud's databases (`kstack_backup_schedule`): the CronJob
//! [`backup::CRONJOB`] that takes the same backup `kstack backup` takes, onto a volume of its
//! own (the claim [`backup::CLAIM`]), and keeps the newest `kstack_backup_keep`.
//!
//! The job runs [`SCRIPT`] in the mariadb-server image (it has the MariaDB clients, gzip and
//! coreutils): it asks the `mariadb` Service (ready servers only) for one server and dumps
//! from that server by its own name, as MariaDB's `backup` user ([`backup::USER`], made by
//! every server at its start with read privileges only), whose password reaches it only by
//! `secretKeyRef` (`MYSQL_PWD`, which the clients read); root's password is not in its pod.
//! An init container, the only part that runs as root, gives the volume to the image's `mysql`
//! user with mode 0700 (a hostPath volume, as on a single node, ignores `fsGroup`); the dump
//! runs as `mysql`. The pod has no API token.
//! Everything the script must agree on with `kstack backup` and `kstack restore` (file names,
//! manifest format, dump options, system databases) is passed from [`kstack_model::backup`].
use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_k8s::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use kstack_k8s::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EnvVar, PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, SecurityContext, Volume,
    VolumeMount,
};
use kstack_k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstack_model::backup;
use kstack_model::globals::ScheduledBackup;

use super::config::secret_env;
use super::workload::pvc_spec;
use super::{labels, meta, pod_labels};
use crate::Object;
use crate::files::{RenderError, port};
use crate::names::{SecretNames, peers_service, short_hash};

/// The backup script (see the module doc).
pub const SCRIPT: &str = include_str!("../../templates/mariadb/mariadb-backup.sh");
const SCRIPT_DIR: &str = "/usr/local/lib/kstack";
/// The component label of the scheduled backup's objects.
pub const COMPONENT: &str = "backup";
/// How long one backup may run before Kubernetes stops it.
const DEADLINE_SECS: i64 = 3600;

/// The scheduled backup's objects, when `kstack_backup_schedule` is set and MariaDB is on.
pub(super) fn scheduled(config: &Config, names: &SecretNames) -> Result<Vec<Object>, RenderError> {
    let globals = &config.globals;
    let Some(plan) = &globals.backup else {
        return Ok(Vec::new());
    };
    let Some(service) = config.catalog.services.get(backup::SERVICE) else {
        return Ok(Vec::new());
    };
    if !config.enabled.contains(backup::SERVICE) {
        return Ok(Vec::new());
    }
    let l = || labels(backup::SERVICE, COMPONENT);
    let password =
        config
            .passwords
            .get(backup::PASSWORD)
            .ok_or_else(|| RenderError::MissingPassword {
                service: backup::SERVICE.into(),
                task: backup::CRONJOB.into(),
                key: backup::PASSWORD.into(),
            })?;
    let (secret, secret_vars) = secret_env(
        globals,
        names,
        backup::CRONJOB,
        l(),
        &[("MYSQL_PWD", password)],
    );
    let script_map = format!("{}-{}", backup::CRONJOB, short_hash(SCRIPT.as_bytes()));
    let script = ConfigMap {
        metadata: meta(globals, &script_map, l()),
        data: Some(BTreeMap::from([(
            "mariadb-backup.sh".to_owned(),
            SCRIPT.to_owned(),
        )])),
        immutable: Some(true),
        ..Default::default()
    };
    let claim = PersistentVolumeClaim {
        metadata: meta(globals, backup::CLAIM, l()),
        spec: Some(pvc_spec(globals, &plan.volume_size)),
        ..Default::default()
    };
    let image = server_image(config).unwrap_or_default();
    let env = script_env(config, plan)?
        .into_iter()
        .map(|(k, v)| EnvVar {
            name: k.to_owned(),
            value: Some(v),
            ..Default::default()
        })
        .chain(secret_vars)
        .collect();
    let backups = VolumeMount {
        name: "backups".into(),
        mount_path: backup::MOUNT.into(),
        ..Default::default()
    };
    let prepare = Container {
        name: "volume-owner".into(),
        image: Some(image.clone()),
        command: Some(vec![
            "sh".into(),
            "-c".into(),
            format!("chown mysql:mysql {m} && chmod 0700 {m}", m = backup::MOUNT),
        ]),
        volume_mounts: Some(vec![backups.clone()]),
        security_context: Some(SecurityContext {
            run_as_user: Some(0),
            ..Default::default()
        }),
        ..Default::default()
    };
    let dump = Container {
        name: "backup".into(),
        image: Some(image),
        command: Some(vec![
            "bash".into(),
            format!("{SCRIPT_DIR}/mariadb-backup.sh"),
        ]),
        env: Some(env),
        volume_mounts: Some(vec![
            backups,
            VolumeMount {
                name: "script".into(),
                mount_path: SCRIPT_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            },
        ]),
        // The image's user (mysql); nothing to gain.
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (key, value) = globals.role_label(&service.role.to_string());
    let pod = PodSpec {
        init_containers: Some(vec![prepare]),
        containers: vec![dump],
        volumes: Some(vec![
            Volume {
                name: "backups".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: backup::CLAIM.into(),
                    read_only: None,
                }),
                ..Default::default()
            },
            Volume {
                name: "script".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: script_map,
                    default_mode: Some(0o444),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]),
        automount_service_account_token: Some(false),
        restart_policy: Some("Never".into()),
        node_selector: Some(BTreeMap::from([(key, value)])),
        ..Default::default()
    };
    let cron = CronJob {
        metadata: meta(globals, backup::CRONJOB, l()),
        spec: CronJobSpec {
            schedule: plan.schedule.clone(),
            concurrency_policy: Some("Forbid".into()),
            // A run missed by more than an hour (the controller was down) is skipped; the
            // next one comes at its time.
            starting_deadline_seconds: Some(DEADLINE_SECS),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: None,
                spec: Some(JobSpec {
                    backoff_limit: Some(1),
                    active_deadline_seconds: Some(DEADLINE_SECS),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(pod_labels(globals, backup::SERVICE, l())),
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
    Ok(vec![
        Object::PersistentVolumeClaim(claim),
        secret,
        Object::ConfigMap(script),
        Object::CronJob(Box::new(cron)),
    ])
}

/// The MariaDB server's image (the catalog's first container of the service): the scheduled
/// backup runs in it, and so does the pod that reads the backup volume, since its `mysql` user
/// owns the backups. `None` when the catalog has no such service or container.
pub fn server_image(config: &Config) -> Option<String> {
    let service = config.catalog.services.get(backup::SERVICE)?;
    let container = service.containers.first()?;
    Some(config.globals.image_ref(&service.project, &container.image))
}

/// The script's plain env: what it must agree on with `kstack backup` and `kstack restore`.
fn script_env(
    config: &Config,
    plan: &ScheduledBackup,
) -> Result<Vec<(&'static str, String)>, RenderError> {
    let globals = &config.globals;
    Ok(vec![
        ("KSTACK_BACKUP_DIR", backup::MOUNT.to_owned()),
        ("KSTACK_BACKUP_KEEP", plan.keep.to_string()),
        ("KSTACK_NAMESPACE", globals.kubernetes_namespace.clone()),
        (
            "KSTACK_RELEASE_JSON",
            serde_json::Value::String(globals.images.openstack_release.clone()).to_string(),
        ),
        ("KSTACK_DB_SERVICE", backup::SERVICE.to_owned()),
        ("KSTACK_DB_USER", backup::USER.to_owned()),
        ("KSTACK_DB_PEERS", peers_service(backup::SERVICE)),
        (
            "KSTACK_DB_PORT",
            port(&config.catalog, backup::SERVICE, "mysql")?.to_string(),
        ),
        ("KSTACK_DUMP_OPTIONS", backup::DUMP_OPTIONS.join(" ")),
        (
            "KSTACK_SYSTEM_DATABASES",
            backup::SYSTEM_DATABASES.join(" "),
        ),
        ("KSTACK_DUMP_TRAILER", backup::DUMP_TRAILER.to_owned()),
        ("KSTACK_DUMP_FILE", backup::DUMP.to_owned()),
        ("KSTACK_MANIFEST_FILE", backup::MANIFEST.to_owned()),
        ("KSTACK_FORMAT", backup::FORMAT.to_string()),
    ])
}
