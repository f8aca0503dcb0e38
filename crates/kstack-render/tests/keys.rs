//! Keystone's key repositories on Kubernetes: Secrets without data that every keystone pod
//! mounts read-only, and the rotation CronJob with the least access it needs.
use kstack_config::Config;
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::{Object, kubernetes};

fn render(vars: serde_json::Value) -> kstack_render::Rendered {
    let globals =
        Globals::from_vars(&vars.as_object().unwrap().clone().into_iter().collect()).unwrap();
    let config = Config::from_parts(
        globals,
        kstack_config::testing::passwords(1),
        Default::default(),
        Catalog::builtin().unwrap(),
    );
    kubernetes::render(&config).unwrap()
}

fn find<'a>(r: &'a kstack_render::Rendered, kind: &str, name: &str) -> &'a Object {
    r.objects
        .iter()
        .find(|o| o.kind() == kind && o.name() == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn key_repositories_are_secrets_without_data_mounted_read_only_for_keystone_only() {
    let r = render(serde_json::json!({}));
    for name in ["keystone-fernet-keys", "keystone-credential-keys"] {
        let Object::Secret(s) = find(&r, "Secret", name) else {
            unreachable!()
        };
        assert!(
            s.data.is_none() && s.string_data.is_none(),
            "{name}: no key in a render"
        );
        assert_eq!(s.immutable, None, "{name}: the rotation patches it");
        assert_eq!(
            s.metadata.annotations.as_ref().unwrap()["kstack.io/generated"],
            "fernet-keys"
        );
    }
    let Object::Deployment(d) = find(&r, "Deployment", "keystone") else {
        unreachable!()
    };
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(
        pod.security_context.as_ref().unwrap().fs_group,
        Some(42425),
        "Kolla's keystone group reads the keys"
    );
    let mounts = pod.containers[0].volume_mounts.as_ref().unwrap();
    for (volume, path) in [
        ("keystone-fernet-keys", "/etc/keystone/fernet-keys"),
        ("keystone-credential-keys", "/etc/keystone/credential-keys"),
    ] {
        let v = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == volume)
            .unwrap();
        let secret = v.secret.as_ref().expect("a Secret volume");
        assert_eq!(secret.secret_name.as_deref(), Some(volume));
        assert_eq!(secret.default_mode, Some(0o440));
        let m = mounts.iter().find(|m| m.name == volume).unwrap();
        assert_eq!((m.mount_path.as_str(), m.read_only), (path, Some(true)));
        // The whole directory: a subPath mount would never see a rotation.
        assert_eq!(m.sub_path, None);
    }
    // No Job writes keys on Kubernetes, and no other service mounts them.
    for o in &r.objects {
        let json = serde_json::to_string(&o.to_json_value()).unwrap();
        if o.kind() == "Job" {
            assert!(
                !json.contains("fernet_setup") && !json.contains("credential_setup"),
                "{}",
                o.name()
            );
        }
        if matches!(o.kind(), "Deployment" | "StatefulSet" | "DaemonSet") && o.name() != "keystone"
        {
            assert!(
                !json.contains("keystone-fernet-keys"),
                "{} mounts the keys",
                o.name()
            );
        }
    }
}

#[test]
fn the_rotation_job_may_read_and_patch_only_its_secret_and_runs_on_kolla_ansibles_timing() {
    let r = render(serde_json::json!({}));
    let Object::Role(role) = find(&r, "Role", "keystone-fernet-keys-rotate") else {
        unreachable!()
    };
    let rules = role.rules.as_ref().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["secrets".to_owned()][..])
    );
    assert_eq!(
        rules[0].resource_names.as_deref(),
        Some(&["keystone-fernet-keys".to_owned()][..])
    );
    assert_eq!(rules[0].verbs, ["get", "patch"]);
    let Object::RoleBinding(b) = find(&r, "RoleBinding", "keystone-fernet-keys-rotate") else {
        unreachable!()
    };
    assert_eq!(b.role_ref.name, "keystone-fernet-keys-rotate");
    assert_eq!(
        b.subjects.as_ref().unwrap()[0].name,
        "keystone-fernet-keys-rotate"
    );
    // The credential keys are not rotated on a schedule.
    assert!(
        !r.objects
            .iter()
            .any(|o| o.name().starts_with("keystone-credential-keys-rotate"))
    );

    let Object::CronJob(c) = find(&r, "CronJob", "keystone-fernet-keys-rotate") else {
        unreachable!()
    };
    // kolla-ansible's default interval (3 days) is checked hourly.
    assert_eq!(c.spec.schedule, "0 * * * *");
    assert_eq!(c.spec.concurrency_policy.as_deref(), Some("Forbid"));
    let pod = c
        .spec
        .job_template
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("keystone-fernet-keys-rotate")
    );
    assert_eq!(pod.automount_service_account_token, Some(false));
    let container = &pod.containers[0];
    assert!(
        container
            .image
            .as_ref()
            .unwrap()
            .contains("/keystone-fernet:")
    );
    let sc = container.security_context.as_ref().unwrap();
    assert_eq!(
        (
            sc.run_as_user,
            sc.run_as_non_root,
            sc.allow_privilege_escalation
        ),
        (Some(42425), Some(true), Some(false))
    );
    let env: std::collections::BTreeMap<&str, &str> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or_default()))
        .collect();
    assert_eq!(env["KSTACK_KEY_SECRET"], "keystone-fernet-keys");
    assert_eq!(env["KSTACK_ROTATION_INTERVAL"], "259200");
    assert_eq!(env["KSTACK_MAX_ACTIVE_KEYS"], "3");
    assert_eq!(env["KSTACK_NAMESPACE"], "openstack");
    let token = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .find_map(|s| s.service_account_token.as_ref())
        .expect("a projected token");
    assert_eq!(token.expiration_seconds, Some(600));

    // keystone.conf keeps as many keys as the job.
    let r = render(serde_json::json!({
        "fernet_token_expiry": 1800,
        "fernet_token_allow_expired_window": 0,
        "fernet_key_rotation_interval": 60,
    }));
    let Object::CronJob(c) = find(&r, "CronJob", "keystone-fernet-keys-rotate") else {
        unreachable!()
    };
    assert_eq!(c.spec.schedule, "* * * * *");
    let conf = r
        .objects
        .iter()
        .find_map(|o| match o {
            Object::Secret(s) if o.name().starts_with("keystone-keystone.conf-") => s
                .data
                .as_ref()
                .map(|d| String::from_utf8(d["keystone.conf"].0.clone()).unwrap()),
            _ => None,
        })
        .expect("keystone.conf");
    assert!(conf.contains("max_active_keys = 32\n"), "{conf}");
    assert!(conf.contains("expiration = 1800\n"), "{conf}");
}

#[test]
fn the_rotation_script_is_valid_python() {
    let Ok(out) = std::process::Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(kstack_render::kubernetes::keys::ROTATE_SCRIPT.as_bytes())?;
            c.wait_with_output()
        })
    else {
        panic!("python3 is needed to check the rotation script (hack/deps.sh installs it)");
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
