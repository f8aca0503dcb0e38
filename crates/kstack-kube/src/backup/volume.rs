//! Reading the scheduled backups off their volume (the claim
//! [`kstack_model::backup::CLAIM`]): a short-lived pod mounts it read-only, and its files
//! are listed and copied out through the pod's `exec` subresource. The pod is deleted when the
//! reading ends, and stops by itself after [`READER_SECS`] should the caller be killed first.
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodSpec,
    SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstack_model::backup::{CLAIM, CRONJOB, MANIFEST, MOUNT, SERVICE, is_backup_name};
use kstack_model::labels::{COMPONENT_LABEL, MANAGED_BY, NAME_LABEL, PART_OF};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use tokio::io::AsyncWrite;

use super::{Error, Exec, Redact};

/// How long the reader pod lives at most.
pub const READER_SECS: i64 = 900;
/// How long the reader pod may take to start (its image is the MariaDB server's, which the node
/// has).
const START: Duration = Duration::from_secs(180);
const CONTAINER: &str = "reader";

/// What the volume holds for one backup directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub name: String,
    /// The manifest's text, `None` when the directory has none.
    pub manifest: Option<String>,
}

/// The backup CronJob as the cluster has it: its schedule and last runs (RFC 3339).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Schedule {
    pub schedule: String,
    pub last_schedule: Option<String>,
    pub last_successful: Option<String>,
}

/// The backup CronJob of `namespace`, `None` when scheduled backups are off.
pub async fn schedule(client: &Client, namespace: &str) -> Result<Option<Schedule>, Error> {
    let cron = Api::<CronJob>::namespaced(client.clone(), namespace)
        .get_opt(CRONJOB)
        .await?;
    Ok(cron.map(|c| {
        let status = c.status.unwrap_or_default();
        Schedule {
            schedule: c.spec.schedule,
            last_schedule: status.last_schedule_time.map(|t| t.0.to_string()),
            last_successful: status.last_successful_time.map(|t| t.0.to_string()),
        }
    }))
}

/// A pod with the backup volume mounted read-only.
pub struct Reader {
    pods: Api<Pod>,
    pod: String,
}

/// Nothing from a reader needs hiding: it reads backup files, not passwords.
struct Plain;

impl Redact for Plain {
    fn redact(&self, text: &str) -> String {
        text.to_owned()
    }
}

impl Reader {
    /// Starts the reader in `namespace` with `image` (the MariaDB server's: its `mysql` user
    /// owns the backups) and waits until it runs. Fails at once, naming the setting, when the
    /// namespace has no backup volume.
    pub async fn start(client: &Client, namespace: &str, image: &str) -> Result<Reader, Error> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
        if claims.get_opt(CLAIM).await?.is_none() {
            return Err(Error::NoVolume(namespace.to_owned()));
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let labels = BTreeMap::from([
            (NAME_LABEL.to_owned(), SERVICE.to_owned()),
            (COMPONENT_LABEL.to_owned(), "backup-reader".to_owned()),
            (PART_OF.0.to_owned(), PART_OF.1.to_owned()),
            (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
        ]);
        let pod = Pod {
            metadata: ObjectMeta {
                generate_name: Some(format!("{CLAIM}-reader-")),
                labels: Some(labels),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: CONTAINER.into(),
                    image: Some(image.to_owned()),
                    command: Some(vec!["sleep".into(), READER_SECS.to_string()]),
                    volume_mounts: Some(vec![VolumeMount {
                        name: "backups".into(),
                        mount_path: MOUNT.into(),
                        read_only: Some(true),
                        ..Default::default()
                    }]),
                    security_context: Some(SecurityContext {
                        allow_privilege_escalation: Some(false),
                        read_only_root_filesystem: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                volumes: Some(vec![Volume {
                    name: "backups".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: CLAIM.into(),
                        read_only: Some(true),
                    }),
                    ..Default::default()
                }]),
                active_deadline_seconds: Some(READER_SECS),
                automount_service_account_token: Some(false),
                restart_policy: Some("Never".into()),
                termination_grace_period_seconds: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = pods.create(&PostParams::default(), &pod).await?;
        let name = created.metadata.name.unwrap_or_default();
        let reader = Reader { pods, pod: name };
        if let Err(e) = reader.wait_running().await {
            reader.stop().await;
            return Err(e);
        }
        Ok(reader)
    }

    async fn wait_running(&self) -> Result<(), Error> {
        let until = tokio::time::Instant::now() + START;
        loop {
            let pod = self.pods.get(&self.pod).await?;
            let status = pod.status.unwrap_or_default();
            match status.phase.as_deref() {
                Some("Running") => return Ok(()),
                Some("Failed" | "Succeeded") => {
                    return Err(self.failed(format!(
                        "the reader pod ended before it was used: {}",
                        status.message.unwrap_or_default()
                    )));
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= until {
                // Why it is not running: the container's waiting reason, or the scheduler's.
                let waiting = status
                    .container_statuses
                    .iter()
                    .flatten()
                    .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
                    .map(|w| {
                        format!(
                            "{}: {}",
                            w.reason.clone().unwrap_or_default(),
                            w.message.clone().unwrap_or_default()
                        )
                    })
                    .chain(
                        status
                            .conditions
                            .iter()
                            .flatten()
                            .filter(|c| c.status == "False")
                            .filter_map(|c| c.message.clone()),
                    )
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(self.failed(format!(
                    "the reader pod did not start within {} s ({waiting})",
                    START.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn failed(&self, detail: String) -> Error {
        Error::Command {
            what: "reading the backup volume",
            pod: self.pod.clone(),
            detail,
        }
    }

    /// The pod's name.
    pub fn pod(&self) -> &str {
        &self.pod
    }

    /// The backup directories on the volume, oldest first, each with its manifest's text.
    /// Partial backups (hidden names) are left out.
    pub async fn list(&self) -> Result<Vec<Listed>, Error> {
        // One line per directory: its name, a tab, and its manifest on one line (or nothing).
        let script = format!(
            "cd {MOUNT} && for d in */; do d=${{d%/}}; printf '%s\\t' \"$d\"; \
             if [ -f \"$d/{MANIFEST}\" ]; then tr -d '\\n' < \"$d/{MANIFEST}\"; fi; printf '\\n'; done"
        );
        let mut out = Vec::new();
        self.exec("listing the backups")
            .run(
                vec!["bash".into(), "-c".into(), script],
                None,
                None,
                &mut out,
            )
            .await?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| {
                let (name, manifest) = l.split_once('\t')?;
                Some(Listed {
                    name: name.to_owned(),
                    manifest: Some(manifest.to_owned()).filter(|m| !m.trim().is_empty()),
                })
            })
            .collect())
    }

    /// Copies `file` of backup `name` to `out` as it comes.
    pub async fn copy(
        &self,
        name: &str,
        file: &str,
        out: &mut (dyn AsyncWrite + Unpin + Send),
    ) -> Result<(), Error> {
        if !is_backup_name(name) || !is_backup_name(file) {
            return Err(self.failed(format!("`{name}/{file}` is not a file of a backup")));
        }
        let path = format!("{MOUNT}/{name}/{file}");
        self.exec("copying a backup file")
            .run(vec!["cat".into(), "--".into(), path], None, None, out)
            .await
    }

    fn exec(&self, what: &'static str) -> Exec<'_> {
        Exec {
            pods: &self.pods,
            pod: &self.pod,
            container: CONTAINER,
            what,
            redact: &Plain,
        }
    }

    /// Deletes the pod (at once: it only sleeps).
    pub async fn stop(self) {
        let _ = self
            .pods
            .delete(&self.pod, &DeleteParams::default().grace_period(0))
            .await;
    }
}
