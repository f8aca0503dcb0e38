//! The whole default cloud rendered to Kubernetes objects: snapshot, determinism, no secrets.

use kstack_config::{genpwd, passwords, templates};
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::{Object, kubernetes};

fn default_cloud() -> kstack_render::Rendered {
    kubernetes::render(&Catalog::builtin().unwrap(), &Globals::default())
}

#[test]
fn default_cloud_snapshot() {
    insta::assert_snapshot!("default_cloud", default_cloud().to_yaml());
}

#[test]
fn rendering_twice_gives_the_same_bytes() {
    let a = default_cloud();
    let b = default_cloud();
    assert_eq!(a.to_yaml(), b.to_yaml());
    assert_eq!(a.to_json(), b.to_json());
}

#[test]
fn stream_order_is_namespace_configmaps_services_jobs_workloads() {
    let r = default_cloud();
    assert_eq!(r.objects[0].kind(), "Namespace");
    let kinds: Vec<&str> = r.objects.iter().map(Object::kind).collect();
    let pos = |k: &str| kinds.iter().position(|x| *x == k).unwrap();
    let last = |k: &str| kinds.iter().rposition(|x| *x == k).unwrap();
    assert!(last("ConfigMap") < pos("Service"));
    assert!(last("Service") < pos("Job"));
    assert!(
        last("Job")
            < pos("Deployment")
                .min(pos("StatefulSet"))
                .min(pos("DaemonSet"))
    );
}

#[test]
fn disabled_services_are_not_rendered() {
    let r = default_cloud();
    let groups = r.by_service();
    assert!(groups.contains_key("keystone"));
    assert!(
        !groups.contains_key("cinder-api"),
        "cinder is off by default"
    );
    for (service, objects) in &groups {
        assert!(objects.iter().all(|o| o.service() == Some(service)));
    }
}

#[test]
fn no_env_literal_is_a_password() {
    let filled = genpwd::fill_os_rng(&templates::passwords_yml()).unwrap();
    let pw = passwords::parse(&filled.text).unwrap();
    let secrets: Vec<&str> = pw.entries.keys().filter_map(|k| pw.get(k)).collect();
    assert!(!secrets.is_empty());
    let json = default_cloud().to_json();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut envs = Vec::new();
    collect_env_values(&value, &mut envs);
    assert!(envs.iter().any(|v| v == "COPY_ALWAYS"), "env was found");
    for v in &envs {
        assert!(
            !secrets.contains(&v.as_str()),
            "an env literal is a password"
        );
    }
}

fn collect_env_values(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Array(env)) = m.get("env") {
                for e in env {
                    if let Some(s) = e.get("value").and_then(|s| s.as_str()) {
                        out.push(s.to_owned());
                    }
                }
            }
            m.values().for_each(|x| collect_env_values(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_env_values(x, out)),
        _ => {}
    }
}
