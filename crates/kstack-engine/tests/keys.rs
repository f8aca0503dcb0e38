//! Keystone's key repositories against the in-memory cluster: made once with fresh keys, then
//! never written by a deploy, a reconfigure or a rollback, so a rotation done in the cluster
//! is never undone.
use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use kstack_engine::fake::FakeCluster;
use kstack_engine::{Cluster, Limits, ObjectRef};
use serde_json::Value;

mod common;
use common::{config, globals, run};

fn repository(name: &str) -> ObjectRef {
    ObjectRef::new("Secret", Some("openstack"), name)
}

fn key_ids(secret: &Value) -> Vec<String> {
    secret["data"]
        .as_object()
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn keys_are_made_once_and_no_deploy_or_rollback_writes_them_again() {
    let fake = FakeCluster::new();
    let (_, report) = run(&fake, &config(globals(&[])), false, &Limits::default()).await;
    assert!(report.succeeded());
    for name in ["keystone-fernet-keys", "keystone-credential-keys"] {
        let s = fake.object(&repository(name)).expect(name);
        assert_eq!(
            key_ids(&s),
            ["0", "1"],
            "{name}: a staged and a primary key"
        );
        for k in ["0", "1"] {
            let key = STANDARD.decode(s["data"][k].as_str().unwrap()).unwrap();
            assert_eq!(URL_SAFE.decode(key).unwrap().len(), 32, "{name}/{k}");
        }
        assert!(
            s["metadata"]["annotations"]["kstack.io/rotated-at"].is_string(),
            "{name}: when its keys were made"
        );
    }
    let made = fake
        .object(&repository("keystone-credential-keys"))
        .unwrap();

    // The CronJob rotates the keys in the cluster.
    let mut rotated = fake.object(&repository("keystone-fernet-keys")).unwrap();
    rotated["data"]["2"] = rotated["data"]["0"].clone();
    rotated["data"]["0"] = Value::String(STANDARD.encode("a new staged key"));
    fake.insert(rotated.clone());

    // A reconfigure of keystone (a new generation) leaves both Secrets alone.
    let before = fake.writes();
    let (plan, report) = run(
        &fake,
        &config(globals(&[("openstack_logging_debug", "yes")])),
        false,
        &Limits::default(),
    )
    .await;
    assert!(report.succeeded());
    assert!(fake.writes() > before, "keystone was reconfigured");
    for name in ["keystone-fernet-keys", "keystone-credential-keys"] {
        let o = plan
            .objects
            .iter()
            .find(|o| o.desired.reference == repository(name))
            .unwrap();
        assert_eq!(o.action, kstack_engine::Action::Unchanged, "{name}");
        assert!(
            fake.log()
                .iter()
                .all(|e| !e.what.ends_with(&format!("Secret/openstack/{name}"))),
            "{name} was written"
        );
    }
    assert_eq!(
        fake.object(&repository("keystone-fernet-keys")).unwrap(),
        rotated
    );

    // A rollback of keystone to the generation before the reconfigure restores its manifests,
    // not the keys.
    let h = kstack_engine::observe(&fake, "openstack", &[])
        .await
        .unwrap()
        .history;
    let configs: BTreeSet<ObjectRef> = fake
        .objects()
        .into_iter()
        .filter(|r| r.kind == "ConfigMap" || r.kind == "Secret")
        .collect();
    let plan = kstack_engine::plan_rollback(&h, "openstack", "keystone", None, &configs).unwrap();
    let report = kstack_engine::rollback(
        &fake,
        "openstack",
        &h,
        &plan,
        Duration::from_secs(60),
        "2026-01-03T00:00:00Z",
    )
    .await
    .unwrap();
    assert!(report.healthy, "{}", report.message);
    assert_eq!(
        fake.object(&repository("keystone-fernet-keys")).unwrap(),
        rotated
    );
    assert_eq!(
        fake.object(&repository("keystone-credential-keys"))
            .unwrap(),
        made
    );
}

#[tokio::test(start_paused = true)]
async fn a_missing_key_repository_is_made_again_and_an_existing_one_is_never_overwritten() {
    let fake = FakeCluster::new();
    run(&fake, &config(globals(&[])), false, &Limits::default()).await;
    let credential = fake
        .object(&repository("keystone-credential-keys"))
        .unwrap();
    // Someone deleted the Fernet keys (to end every token at once): the next deploy makes new
    // ones, and leaves the credential keys as they were.
    let old = fake.object(&repository("keystone-fernet-keys")).unwrap();
    fake.delete(&repository("keystone-fernet-keys"))
        .await
        .unwrap();
    let (_, report) = run(&fake, &config(globals(&[])), false, &Limits::default()).await;
    assert!(report.succeeded());
    let new = fake.object(&repository("keystone-fernet-keys")).unwrap();
    assert_eq!(key_ids(&new), ["0", "1"]);
    assert_ne!(new["data"], old["data"], "new keys");
    assert_eq!(
        fake.object(&repository("keystone-credential-keys"))
            .unwrap(),
        credential
    );
}
