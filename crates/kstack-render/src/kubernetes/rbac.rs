//! The access kstack itself needs to deploy a cloud into one namespace, least privilege:
//! a ServiceAccount `kstack`, a Role in the cloud's namespace for the kinds kstack applies,
//! watches and prunes, read access to pods and events for failure reports, and a ClusterRole
//! that may create the namespace and read or update only that namespace.
//!
//! Exec into pods is there for the databases' backup and restore (`kstack backup`,
//! `kstack restore`, the backup a deploy takes before an upgrade: `mariadb-dump` and the
//! `mariadb` client run in a MariaDB pod), and creating a pod for reading the scheduled backups'
//! volume (`kstack backup-list`, `backup-fetch`); neither gives more than the Role already does
//! (it creates workloads that run any pod, and reads the Secrets).
//!
//! Deliberately absent: any access to other namespaces, to nodes, and the
//! `escalate`/`bind` verbs. The only Role kstack renders for a service (Keystone's key
//! rotation: get and patch on one named Secret) grants less than this Role holds, which is
//! what Kubernetes requires of whoever creates it without `escalate`.
use std::collections::BTreeMap;

use kstack_k8s::api::core::v1::ServiceAccount;
use kstack_k8s::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kstack_k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstack_model::globals::Globals;
use kstack_model::labels::{COMPONENT_LABEL, PART_OF};

use crate::{Object, Rendered};

/// Name of the ServiceAccount, Role and RoleBinding.
pub const ACCOUNT: &str = "kstack";

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (PART_OF.0.to_owned(), PART_OF.1.to_owned()),
        (COMPONENT_LABEL.to_owned(), "deployer".to_owned()),
    ])
}

/// The ServiceAccount, Role, RoleBinding, ClusterRole and ClusterRoleBinding that let
/// `kstack deploy`, `plan` and `status` run as `system:serviceaccount:<namespace>:kstack`.
/// The namespace itself must exist first (it holds the ServiceAccount).
pub fn deployer(globals: &Globals) -> Rendered {
    let ns = &globals.kubernetes_namespace;
    let meta = |name: &str, namespaced: bool| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespaced.then(|| ns.clone()),
        labels: Some(labels()),
        ..Default::default()
    };
    // Apply creates (create), updates (patch), reads back (get), observes (list) and waits
    // (watch); prune deletes.
    let manage = ["get", "list", "watch", "create", "patch", "delete"];
    let role = Role {
        metadata: meta(ACCOUNT, true),
        rules: Some(vec![
            rule(
                &[""],
                &[
                    "configmaps",
                    "secrets",
                    "services",
                    "persistentvolumeclaims",
                    "serviceaccounts",
                ],
                &manage,
            ),
            rule(
                &["apps"],
                &["deployments", "statefulsets", "daemonsets"],
                &manage,
            ),
            rule(&["batch"], &["jobs", "cronjobs"], &manage),
            rule(&["policy"], &["poddisruptionbudgets"], &manage),
            rule(
                &["rbac.authorization.k8s.io"],
                &["roles", "rolebindings"],
                &manage,
            ),
            // Failure reports: what the pods and their events say.
            rule(&[""], &["pods", "events"], &["get", "list", "watch"]),
            // `kstack verify`'s failure report: the last log lines of the pods behind a
            // failed step.
            rule(&[""], &["pods/log"], &["get"]),
            // `kstack logs --central`: queries to the central log store's Service, through the
            // API server's proxy (the store's Service only, named with or without its port).
            PolicyRule {
                api_groups: Some(strings(&[""])),
                resources: Some(strings(&["services/proxy"])),
                resource_names: Some(strings(&["victoria-logs", "victoria-logs:9428"])),
                verbs: strings(&["get"]),
                ..Default::default()
            },
            // A StatefulSet rolled back: its pods of the failed revision that never became
            // ready are deleted so the controller recreates them from the restored template.
            rule(&[""], &["pods"], &["delete"]),
            // Backup and restore: commands in a MariaDB pod (a WebSocket exec asks `get`, and
            // `create` on newer API servers), and the pod that reads the backup volume.
            rule(&[""], &["pods/exec"], &["get", "create"]),
            rule(&[""], &["pods"], &["create"]),
            // The deploy lock (one writer at a time): a Lease it creates, reads and renews.
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["get", "create", "update"],
            ),
        ]),
    };
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: ACCOUNT.into(),
        namespace: Some(ns.clone()),
        ..Default::default()
    };
    let cluster_name = format!("kstack-deployer-{ns}");
    let cluster_role = ClusterRole {
        metadata: meta(&cluster_name, false),
        rules: Some(vec![
            // `create` cannot be limited to a name; everything else is limited to this namespace.
            rule(&[""], &["namespaces"], &["create"]),
            PolicyRule {
                resource_names: Some(vec![ns.clone()]),
                ..rule(&[""], &["namespaces"], &["get", "patch"])
            },
        ]),
        ..Default::default()
    };
    Rendered::new(vec![
        Object::ServiceAccount(ServiceAccount {
            metadata: meta(ACCOUNT, true),
            ..Default::default()
        }),
        Object::Role(role),
        Object::RoleBinding(RoleBinding {
            metadata: meta(ACCOUNT, true),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Role".into(),
                name: ACCOUNT.into(),
            },
            subjects: Some(vec![subject.clone()]),
        }),
        Object::ClusterRole(cluster_role),
        Object::ClusterRoleBinding(ClusterRoleBinding {
            metadata: meta(&cluster_name, false),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: cluster_name.clone(),
            },
            subjects: Some(vec![subject]),
        }),
    ])
}
