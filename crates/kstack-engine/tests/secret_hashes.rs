//! The hash kstack records of a Secret (its applied-hash annotation, the release record's
//! object hashes, `kstack plan -o json`) says nothing of the Secret's data: those records are
//! readable by more people than the Secret, and an unkeyed hash of the data would let them
//! test guesses of a password offline.
mod common;

use kstack_engine::plan::desired;
use kstack_k8s::k8s_openapi::ByteString;
use kstack_render::Object;

#[test]
fn a_secret_hash_leaves_out_its_data_and_a_config_map_hash_covers_it() {
    let config = common::config(common::globals(&[]));
    let rendered = common::rendered(&config);
    let before = desired(&rendered);

    let mut changed = rendered.clone();
    let (mut secrets, mut config_maps) = (0, 0);
    for o in &mut changed.objects {
        match o {
            // A key repository's rendered Secret has no data (the engine generates it).
            Object::Secret(s) if s.data.is_none() => {}
            Object::Secret(s) => {
                for v in s.data.as_mut().unwrap().values_mut() {
                    *v = ByteString(b"a guessed password".to_vec());
                }
                secrets += 1;
            }
            Object::ConfigMap(c) => {
                for v in c.data.as_mut().unwrap().values_mut() {
                    v.push_str("# changed\n");
                }
                config_maps += 1;
            }
            _ => {}
        }
    }
    assert!(
        secrets > 10 && config_maps > 10,
        "{secrets} Secrets, {config_maps} ConfigMaps"
    );
    let after = desired(&changed);
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        match b.reference.kind.as_str() {
            "Secret" => assert_eq!(
                b.hash, a.hash,
                "{}: the hash depends on the data",
                b.reference
            ),
            "ConfigMap" => assert_ne!(b.hash, a.hash, "{}: the hash misses the data", b.reference),
            _ => assert_eq!(b.hash, a.hash, "{}", b.reference),
        }
    }
    // The Secret's manifest still carries its data and the annotation.
    let s = before
        .iter()
        .find(|d| d.reference.kind == "Secret")
        .unwrap();
    assert!(s.manifest["data"].is_object());
    assert_eq!(
        s.manifest["metadata"]["annotations"][kstack_model::labels::APPLIED_HASH_ANNOTATION],
        s.hash.as_str()
    );
}
