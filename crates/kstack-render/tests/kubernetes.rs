//! The whole default cloud rendered to Kubernetes objects: snapshot, determinism, no secrets.

use kstack_config::{Config, genpwd, passwords, templates};
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::{Object, kubernetes};

fn render(catalog: Catalog, globals: Globals) -> kstack_render::Rendered {
    let config = Config::from_parts(globals, Default::default(), Default::default(), catalog);
    kubernetes::render(&config).unwrap()
}

fn default_cloud() -> kstack_render::Rendered {
    render(Catalog::builtin().unwrap(), Globals::default())
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

fn globals_with(vars: serde_json::Value) -> Globals {
    let serde_json::Value::Object(m) = vars else {
        unreachable!()
    };
    Globals::from_vars(&m.into_iter().collect()).unwrap()
}

fn find<'a>(r: &'a kstack_render::Rendered, kind: &str, name: &str) -> &'a Object {
    r.objects
        .iter()
        .find(|o| o.kind() == kind && o.name() == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn statefulsets_get_a_headless_service_and_claims_with_the_storage_class() {
    let g = globals_with(
        serde_json::json!({"kstack_storage_class": "fast", "kstack_replicas": {"mariadb": 3}}),
    );
    let r = render(Catalog::builtin().unwrap(), g);
    let Object::Service(svc) = find(&r, "Service", "mariadb") else {
        unreachable!()
    };
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    let Object::StatefulSet(sts) = find(&r, "StatefulSet", "mariadb") else {
        unreachable!()
    };
    let spec = sts.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(spec.service_name.as_deref(), Some("mariadb"));
    let claims = spec.volume_claim_templates.as_ref().unwrap();
    assert_eq!(
        claims[0]
            .spec
            .as_ref()
            .unwrap()
            .storage_class_name
            .as_deref(),
        Some("fast")
    );
    // Replica 0's claim exists before the StatefulSet, for the bootstrap Job.
    find(&r, "PersistentVolumeClaim", "mariadb-mariadb-0");
}

#[test]
fn host_namespaces_and_privileges_only_where_the_catalog_says() {
    let catalog = Catalog::builtin().unwrap();
    let r = default_cloud();
    for o in &r.objects {
        let (Some(service), Some(pod)) = (o.service(), pod_spec(o)) else {
            continue;
        };
        let p = &catalog.services[service].privileges;
        assert_eq!(
            pod.host_network.unwrap_or(false),
            p.host_network,
            "{service}"
        );
        assert_eq!(pod.host_pid.unwrap_or(false), p.host_pid, "{service}");
        assert_eq!(pod.host_ipc.unwrap_or(false), p.host_ipc, "{service}");
        for c in &pod.containers {
            let privileged = c.security_context.as_ref().and_then(|s| s.privileged);
            assert_eq!(privileged.unwrap_or(false), p.privileged, "{service}");
            assert!(
                c.command.is_none() && c.args.is_none(),
                "{service} keeps the entrypoint"
            );
        }
    }
}

fn pod_spec(o: &Object) -> Option<&kstack_k8s::api::core::v1::PodSpec> {
    match o {
        Object::Deployment(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::StatefulSet(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::DaemonSet(d) => d.spec.as_ref()?.template.spec.as_ref(),
        Object::Job(d) => d.spec.as_ref()?.template.spec.as_ref(),
        _ => None,
    }
}

#[test]
fn config_maps_and_jobs_are_named_by_their_content() {
    let catalog = Catalog::builtin().unwrap();
    let mut changed = catalog.clone();
    changed.services.get_mut("keystone").unwrap().containers[0].command = "keystone-x".into();
    let a = default_cloud();
    let b = render(changed, Globals::default());
    let names = |r: &kstack_render::Rendered, kind: &str| -> Vec<String> {
        r.objects
            .iter()
            .filter(|o| o.kind() == kind && o.service() == Some("keystone"))
            .map(|o| o.name().to_owned())
            .collect()
    };
    let (ca, cb) = (names(&a, "ConfigMap"), names(&b, "ConfigMap"));
    assert_eq!(ca.len(), 1);
    assert_ne!(ca, cb, "a new config.json is a new ConfigMap");
    assert!(ca[0].starts_with("keystone-keystone-config-json-"));
    let (ja, jb) = (names(&a, "Job"), names(&b, "Job"));
    assert_eq!(ja.len(), 1, "one kolla_bootstrap task: db-sync");
    assert!(ja[0].starts_with("keystone-db-sync-"));
    assert_ne!(ja, jb, "a Job mounting a new ConfigMap is a new Job");
    let Object::ConfigMap(cm) = find(&a, "ConfigMap", &ca[0]) else {
        unreachable!()
    };
    assert_eq!(cm.immutable, Some(true));
}
