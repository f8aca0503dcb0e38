//! The whole default cloud, as rendered by kstack-render, is accepted by a real API server
//! (server-side apply, dry run): schema, defaulting and validation all run, nothing is stored.

use kstack_config::Config;
use kstack_e2e::{TempNamespace, client};
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::{Object, kubernetes};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde::Serialize;

async fn dry_apply<K>(api: Api<K>, name: &str, obj: &K) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Serialize,
{
    let params = PatchParams::apply("kstack").dry_run();
    api.patch(name, &params, &Patch::Apply(obj))
        .await
        .map(|_| ())
}

async fn dry_apply_object(client: &Client, ns: &str, o: &Object) -> Result<(), kube::Error> {
    let c = client.clone();
    let name = o.name();
    match o {
        Object::Namespace(x) => dry_apply(Api::all(c), name, x).await,
        Object::ClusterRole(x) => dry_apply(Api::all(c), name, x).await,
        Object::ClusterRoleBinding(x) => dry_apply(Api::all(c), name, x).await,
        Object::ServiceAccount(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::Role(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::RoleBinding(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::ConfigMap(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::Secret(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::PersistentVolumeClaim(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::Service(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::PodDisruptionBudget(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::Job(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::CronJob(x) => dry_apply(Api::namespaced(c, ns), name, x.as_ref()).await,
        Object::Deployment(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::StatefulSet(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
        Object::DaemonSet(x) => dry_apply(Api::namespaced(c, ns), name, x).await,
    }
}

#[tokio::test]
async fn default_cloud_is_accepted_by_the_api_server() -> anyhow::Result<()> {
    let client = client().await?;
    // The namespace is created for real: a dry-run create of it would not make the
    // namespaced objects acceptable.
    let ns = TempNamespace::new(&client, "kstack-dry-run").await?;
    let globals = Globals {
        kubernetes_namespace: ns.name.clone(),
        ..Globals::default()
    };
    // Generated passwords (SSH keys are stand-ins, no template uses them): config files that carry
    // them become Secrets, which the API server must accept too.
    let passwords = kstack_config::testing::passwords(1);
    // One per-host override, so a pinned DaemonSet variant (and the main one's NotIn) is checked.
    let overrides = std::collections::BTreeMap::from([(
        "nova/compute-1/nova.conf".to_owned(),
        b"[libvirt]\nvirt_type = qemu\n".to_vec(),
    )]);
    let config = Config::from_parts(globals, passwords, overrides, Catalog::builtin()?);
    let rendered = kubernetes::render(&config)?;
    assert!(rendered.objects.len() > 20, "the default cloud renders");

    let mut failures = Vec::new();
    for o in &rendered.objects {
        if let Err(e) = dry_apply_object(&client, &ns.name, o).await {
            failures.push(format!("{} {}: {e}", o.kind(), o.name()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} objects were rejected:\n{}",
        failures.len(),
        rendered.objects.len(),
        failures.join("\n")
    );
    Ok(())
}
