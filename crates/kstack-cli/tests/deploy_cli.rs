//! `kstack deploy`, `plan` and `status` without a cluster: bad input exits 2 before any cluster
//! is contacted, with the diagnostic naming file, line and field; a cluster that cannot be
//! reached exits 1. `template --rbac` renders the deployer's account.
use std::process::Command;

fn kstack(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kstack"))
        .args(args)
        .env_remove("KSTACK_CONFIG_DIR")
        .env("NO_COLOR", "1")
        .output()
        .expect("run kstack")
}

fn config_dir(globals: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_str().unwrap();
    assert!(kstack(&["init", d]).status.success());
    std::fs::write(tmp.path().join("globals.yml"), globals).unwrap();
    assert!(kstack(&["genpwd", "--config-dir", d]).status.success());
    tmp
}

#[test]
fn invalid_timeouts_exit_2_naming_the_field_before_touching_a_cluster() {
    let tmp = config_dir("kstack_timeouts:\n  keystone: soon\n");
    let d = tmp.path().to_str().unwrap();
    for cmd in ["deploy", "plan", "status"] {
        // The kubeconfig does not exist: reaching for the cluster would fail with exit 1.
        let out = kstack(&[cmd, "--config-dir", d, "--kubeconfig", "/nonexistent"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {stderr}");
        assert!(stderr.contains("kstack_timeouts.keystone"), "{stderr}");
        assert!(stderr.contains("globals.yml"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn an_invalid_history_limit_exits_2_for_every_lifecycle_command() {
    let tmp = config_dir("kstack_history_limit: 1\n");
    let d = tmp.path().to_str().unwrap();
    for args in [
        &["deploy"][..],
        &["history"],
        &["rollback", "keystone"],
        &["rollback", "keystone", "--to", "1"],
    ] {
        let mut all = args.to_vec();
        all.extend(["--config-dir", d, "--kubeconfig", "/nonexistent"]);
        let out = kstack(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("kstack_history_limit"), "{stderr}");
        assert!(stderr.contains("from 2 to 1000, found 1"), "{stderr}");
    }
}

#[test]
fn an_unreachable_cluster_exits_1() {
    let tmp = config_dir("kubernetes_namespace: \"x\"\n");
    let d = tmp.path().to_str().unwrap();
    let out = kstack(&["deploy", "--config-dir", d, "--kubeconfig", "/nonexistent"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("/nonexistent"), "{stderr}");
}

#[test]
fn kubeconfig_is_a_global_option_before_or_after_the_sub_command() {
    let tmp = config_dir("kubernetes_namespace: \"x\"\n");
    let d = tmp.path().to_str().unwrap();
    for args in [
        &[
            "--kubeconfig",
            "/nonexistent/before",
            "status",
            "--config-dir",
            d,
        ][..],
        &[
            "status",
            "--config-dir",
            d,
            "--kubeconfig",
            "/nonexistent/after",
        ],
        &[
            "--kubeconfig",
            "/nonexistent/before",
            "history",
            "--config-dir",
            d,
        ],
        &[
            "plan",
            "--kubeconfig",
            "/nonexistent/after",
            "--config-dir",
            d,
        ],
    ] {
        let out = kstack(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The file named is the one reached for: not KUBECONFIG, not ~/.kube/config.
        let named = args[args.iter().position(|a| *a == "--kubeconfig").unwrap() + 1];
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
    // The inventory service without node sync needs no cluster, and says so.
    let out = kstack(&[
        "--kubeconfig",
        "/nonexistent",
        "inventory",
        "serve",
        "--tokens",
        "/nonexistent-tokens",
        "--no-node-sync",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--no-node-sync"), "{stderr}");
}

#[test]
fn template_rbac_is_least_privilege() {
    let tmp = config_dir("kubernetes_namespace: \"cloud-a\"\n");
    let d = tmp.path().to_str().unwrap();
    let out = kstack(&["template", "--rbac", "-o", "json", "--config-dir", d]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut kinds: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ServiceAccount"
        ]
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("\"*\""),
        "no wildcard verbs or resources: {text}"
    );
    for o in list["items"].as_array().unwrap() {
        if o["kind"] == "ClusterRole" {
            let rules = o["rules"].as_array().unwrap();
            // Only the one namespace can be read or changed.
            assert!(
                rules
                    .iter()
                    .all(|r| r["verbs"] == serde_json::json!(["create"])
                        || r["resourceNames"] == serde_json::json!(["cloud-a"])),
                "{rules:?}"
            );
        }
    }
}

/// A catalog.yml that loads but cannot be rendered: a config file kstack has no template for.
const UNRENDERABLE_CATALOG: &str = r#"services:
  memcached:
    containers:
      - name: memcached
        image: memcached
        command: /usr/bin/memcached -v -l 0.0.0.0 -p 11211
        user: memcached
        config_files:
          - { template: nope.conf, dest: /etc/nope.conf, owner: memcached, perm: "0600" }
        healthcheck:
          test: { exec: { command: [healthcheck_listen, memcached, "11211"] } }
"#;

#[test]
fn a_config_that_loads_but_cannot_render_exits_2_in_every_command() {
    let tmp = config_dir("");
    std::fs::write(tmp.path().join("catalog.yml"), UNRENDERABLE_CATALOG).unwrap();
    let d = tmp.path().to_str().unwrap();
    let out_dir = tmp.path().join("compose-out");
    let out_dir = out_dir.to_str().unwrap();
    for args in [
        &["validate"][..],
        &["template"],
        &["template", "--target", "compose", "-o", out_dir],
        &["deploy", "--target", "compose", "--compose-dir", out_dir],
        &["deploy"],
        &["plan"],
        &["status"],
        &["history"],
        &["rollback", "memcached"],
    ] {
        let mut all = args.to_vec();
        all.extend(["--config-dir", d, "--kubeconfig", "/nonexistent"]);
        let out = kstack(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("no template `memcached/nope.conf.j2`"),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(
        !std::path::Path::new(out_dir).exists(),
        "nothing written for a config that cannot render"
    );
}

#[test]
fn logs_of_an_unknown_service_exit_2_and_an_unreachable_cluster_1() {
    let tmp = config_dir("");
    let d = tmp.path().to_str().unwrap();
    let out = kstack(&["logs", "no-such-service", "--config-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`no-such-service` is not a service"),
        "{stderr}"
    );
    let out = kstack(&[
        "logs",
        "keystone",
        "--config-dir",
        d,
        "--kubeconfig",
        "/nonexistent",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kstack(&["logs", "keystone", "--since", "ten", "--config-dir", d]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`ten` is not an age"));
}
