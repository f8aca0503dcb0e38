//! `kstack verify` through the binary: against the fake OpenStack of `kstack_verify::fake` a
//! healthy cloud exits 0 with the table, a failing upload exits 4 naming the call; an
//! unreachable Keystone fails the first step with exit 4, naming the URL it called; the admin
//! password is never printed; an invalid config exits 2 before any call; `--help` documents
//! the exit codes with an example.
use std::process::Command;

use kstack_verify::fake;

fn kstack(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kstack"))
        .args(args)
        .env_remove("KSTACK_CONFIG_DIR")
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .output()
        .expect("run kstack")
}

/// A config directory made by `init` and `genpwd` once per test process (genpwd makes RSA
/// keys, slow in a debug build); each test gets a copy with its own globals.yml.
fn config_dir(globals: &str) -> tempfile::TempDir {
    static BASE: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let base = BASE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().to_str().unwrap();
        assert!(kstack(&["init", d]).status.success());
        assert!(kstack(&["genpwd", "--config-dir", d]).status.success());
        tmp
    });
    let tmp = tempfile::tempdir().unwrap();
    for f in ["globals.yml", "passwords.yml"] {
        std::fs::copy(base.path().join(f), tmp.path().join(f)).unwrap();
    }
    std::fs::write(tmp.path().join("globals.yml"), globals).unwrap();
    tmp
}

fn admin_password(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(dir.join("passwords.yml")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("keystone_admin_password:"))
        .unwrap();
    let value = line.split_once(':').unwrap().1.trim().trim_matches('"');
    assert!(value.len() >= 20, "genpwd filled it: {line}");
    value.to_owned()
}

fn set_admin_password(dir: &std::path::Path, password: &str) {
    let path = dir.join("passwords.yml");
    let text: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("keystone_admin_password:") {
                format!("keystone_admin_password: \"{password}\"")
            } else {
                l.to_owned()
            }
        })
        .collect();
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
}

/// The fake cloud (served by a runtime that lives as long as the returned value) and the
/// flags that point `kstack verify` at it.
fn fake_cloud(faults: Vec<fake::Fault>) -> (tokio::runtime::Runtime, fake::Shared, Vec<String>) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let shared = rt.block_on(fake::start());
    let base = {
        let mut st = shared.lock().unwrap();
        st.faults = faults;
        st.base.clone()
    };
    let flags = vec![
        "--os-auth-url".to_owned(),
        format!("{base}/identity"),
        "--horizon-url".to_owned(),
        format!("{base}/dashboard"),
        "--timeout".to_owned(),
        "60".to_owned(),
        "--kubeconfig".to_owned(),
        "/nonexistent/kubeconfig".to_owned(),
    ];
    (rt, shared, flags)
}

#[test]
fn a_healthy_cloud_passes_with_exit_0_and_leaves_nothing_behind() {
    let tmp = config_dir("kubernetes_namespace: \"cloud-c\"\n");
    set_admin_password(tmp.path(), fake::ADMIN_PASSWORD);
    let (_rt, cloud, flags) = fake_cloud(Vec::new());
    let mut args = vec!["verify", "--config-dir", tmp.path().to_str().unwrap()];
    args.extend(flags.iter().map(String::as_str));
    let out = kstack(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for step in [
        "token",
        "endpoints",
        "project-user",
        "image",
        "network",
        "flavor",
        "server",
        "stack",
        "horizon",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(step))
            .unwrap_or_else(|| panic!("no row {step}: {stdout}"));
        assert_eq!(row.split_whitespace().nth(1), Some("ok"), "{row}");
    }
    let cleanup = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("cleanup"))
        .unwrap();
    assert!(
        cleanup.contains("ok") && cleanup.contains("deleted 8 resources"),
        "{cleanup}"
    );
    assert!(
        stdout.contains("passed: 9 ok, 1 skipped, 0 failed, 0 not run; total "),
        "{stdout}"
    );
    // The services kstack's catalog registers, and no more, were probed.
    assert!(stdout.contains("7 public endpoints answer"), "{stdout}");
    assert!(stdout.contains("orchestration, cloudformation"), "{stdout}");
    assert_eq!(cloud.lock().unwrap().leftovers(), Vec::<String>::new());
    assert!(!stdout.contains(fake::ADMIN_PASSWORD) && !stderr.contains(fake::ADMIN_PASSWORD));
}

#[test]
fn a_failing_upload_exits_4_naming_the_call_and_cleans_up() {
    let tmp = config_dir("kubernetes_namespace: \"cloud-d\"\nenable_heat: \"no\"\n");
    set_admin_password(tmp.path(), fake::ADMIN_PASSWORD);
    let (_rt, cloud, flags) = fake_cloud(vec![fake::Fault {
        method: "PUT".into(),
        path: "/file".into(),
        status: 413,
        body: r#"{"message": "Image exceeds the storage quota"}"#.into(),
        echo: false,
    }]);
    let mut args = vec!["verify", "--config-dir", tmp.path().to_str().unwrap()];
    args.extend(flags.iter().map(String::as_str));
    let out = kstack(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    assert!(stderr.contains("error: step `image` failed"), "{stderr}");
    assert!(
        stderr.contains("call:     PUT /image/v2/images/image-"),
        "{stderr}"
    );
    assert!(stderr.contains("status:   HTTP 413"), "{stderr}");
    assert!(
        stderr.contains("message:  Image exceeds the storage quota"),
        "{stderr}"
    );
    assert!(stderr.contains("services: glance-api"), "{stderr}");
    let row = |step: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(step))
            .unwrap_or_else(|| panic!("no row {step}: {stdout}"))
            .to_owned()
    };
    assert!(row("image").contains("failed"), "{stdout}");
    assert!(row("network").contains("not-run"), "{stdout}");
    // Heat is disabled in globals.yml: skipped, after the failure too.
    assert!(
        row("stack").contains("skipped") && row("stack").contains("heat not enabled"),
        "{stdout}"
    );
    assert!(row("cleanup").contains("deleted 3 resources"), "{stdout}");
    assert!(
        stdout.contains("FAILED: 3 ok, 2 skipped, 1 failed, 4 not run"),
        "{stdout}"
    );
    assert_eq!(cloud.lock().unwrap().leftovers(), Vec::<String>::new());
}

#[test]
fn an_unreachable_keystone_exits_4_naming_the_url() {
    let tmp = config_dir("kubernetes_namespace: \"cloud-a\"\n");
    let d = tmp.path().to_str().unwrap();
    // Port 1 on the loopback: nothing listens, the connection is refused at once.
    let out = kstack(&[
        "verify",
        "--config-dir",
        d,
        "--os-auth-url",
        "http://127.0.0.1:1/v3",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    // The failing call, on stderr.
    assert!(stderr.contains("error: step `token` failed"), "{stderr}");
    assert!(
        stderr.contains("call:     POST /v3/auth/tokens (at http://127.0.0.1:1)"),
        "{stderr}"
    );
    assert!(stderr.contains("status:   no answer"), "{stderr}");
    assert!(stderr.contains("message:  cannot connect: "), "{stderr}");
    assert!(stderr.contains("services: keystone"), "{stderr}");
    // The kubeconfig does not exist: said once, not fatal.
    assert!(
        stderr.contains("pod logs: not read (") && stderr.contains("/nonexistent/kubeconfig"),
        "{stderr}"
    );
    // The table: the token failed, the rest did not run.
    let token = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("token"))
        .unwrap();
    assert!(
        token.contains("failed")
            && token.contains("POST http://127.0.0.1:1/v3/auth/tokens: cannot connect"),
        "{stdout}"
    );
    let horizon = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("horizon"))
        .unwrap();
    assert!(
        horizon.contains("not-run") && horizon.contains("token failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cleanup") && stdout.contains("nothing to delete"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAILED: 0 ok, 1 skipped, 1 failed, 8 not run; total"),
        "{stdout}"
    );
    let password = admin_password(tmp.path());
    assert!(!stdout.contains(&password) && !stderr.contains(&password));
}

#[test]
fn the_default_auth_url_is_keystones_service_and_json_names_the_call() {
    let tmp = config_dir("kubernetes_namespace: \"cloud-b\"\n");
    let d = tmp.path().to_str().unwrap();
    // No cluster DNS here: the Service name does not resolve (or answers nothing).
    let out = kstack(&[
        "verify",
        "--config-dir",
        d,
        "-o",
        "json",
        "--kubeconfig",
        "/nonexistent",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["passed"], false);
    assert_eq!(v["auth_url"], "http://keystone.cloud-b.svc:5000");
    let token = &v["steps"][0];
    assert_eq!(token["step"], "token");
    assert_eq!(token["result"], "failed");
    assert_eq!(token["call"]["method"], "POST");
    assert_eq!(
        token["call"]["url"],
        "http://keystone.cloud-b.svc:5000/v3/auth/tokens"
    );
    assert_eq!(token["call"]["status"], serde_json::Value::Null);
    assert_eq!(v["steps"].as_array().unwrap().len(), 10);
    assert!(v["prefix"].as_str().unwrap().starts_with("kstack-verify-"));
    assert!(
        v["pod_logs_error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent")
    );
    let password = admin_password(tmp.path());
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(&password) && !stderr.contains(&password)
    );
}

#[test]
fn an_invalid_config_exits_2_before_calling_anything() {
    let tmp = config_dir("enable_heat: maybe\n");
    let d = tmp.path().to_str().unwrap();
    let out = kstack(&[
        "verify",
        "--config-dir",
        d,
        "--os-auth-url",
        "http://127.0.0.1:1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("enable_heat"), "{stderr}");
    assert!(!stderr.contains("auth/tokens"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_bad_external_subnet_or_guest_image_is_named_before_calling_anything() {
    let tmp = config_dir("");
    let d = tmp.path().to_str().unwrap();
    let base = [
        "verify",
        "--config-dir",
        d,
        "--os-auth-url",
        "http://127.0.0.1:1",
    ];
    let out = kstack(&[&base[..], &["--external-subnet", "172.24.4.0"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--external-subnet") && stderr.contains("172.24.4.0/24"),
        "{stderr}"
    );
    let missing = tmp.path().join("no-guest");
    let out = kstack(&[&base[..], &["--guest-image", missing.to_str().unwrap()]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no-guest") && stderr.contains("hack/guest.sh"),
        "{stderr}"
    );
    assert!(!stderr.contains("auth/tokens"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn an_empty_admin_password_exits_2() {
    let tmp = config_dir("kubernetes_namespace: \"x\"\n");
    let path = tmp.path().join("passwords.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("keystone_admin_password:") {
                "keystone_admin_password:".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&path, text).unwrap();
    let d = tmp.path().to_str().unwrap();
    let out = kstack(&[
        "verify",
        "--config-dir",
        d,
        "--os-auth-url",
        "http://127.0.0.1:1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("keystone_admin_password"), "{stderr}");
}

#[test]
fn resolve_reaches_service_names_without_dns() {
    // The default auth URL, keystone.cloud-e.svc, reaches the fake through --resolve.
    let tmp = config_dir(
        "kubernetes_namespace: \"cloud-e\"\nenable_openstack_core: \"no\"\nenable_keystone: \"yes\"\n",
    );
    set_admin_password(tmp.path(), fake::ADMIN_PASSWORD);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cloud = rt.block_on(fake::start());
    let port = {
        let mut st = cloud.lock().unwrap();
        let port = st.base.rsplit(':').next().unwrap().to_owned();
        st.base = format!("http://keystone.cloud-e.svc:{port}");
        port
    };
    let auth = format!("http://keystone.cloud-e.svc:{port}/identity");
    let d = tmp.path().to_str().unwrap();
    let out = kstack(&[
        "verify",
        "--config-dir",
        d,
        "--os-auth-url",
        &auth,
        "--resolve",
        "keystone.cloud-e.svc=127.0.0.1",
        "--kubeconfig",
        "/nonexistent",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("passed: 3 ok, 7 skipped"), "{stdout}");
    let out = kstack(&[
        "verify",
        "--config-dir",
        d,
        "--resolve",
        "keystone.cloud-e.svc",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("want HOST=ADDR"));
}

#[test]
fn help_has_an_example_and_the_exit_codes() {
    let out = kstack(&["verify", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kstack verify --config-dir ./mycloud"),
        "{text}"
    );
    assert!(text.contains("--os-auth-url"), "{text}");
    assert!(text.contains("4 a step failed"), "{text}");
}

#[test]
fn keep_leaves_the_server_and_delete_removes_it_and_its_directory() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = config_dir("kubernetes_namespace: \"cloud-k\"\n");
    set_admin_password(tmp.path(), fake::ADMIN_PASSWORD);
    let (_rt, cloud, flags) = fake_cloud(Vec::new());
    let dir = tmp.path().to_str().unwrap();
    let mut args = vec!["verify", "--config-dir", dir, "--keep", "-o", "json"];
    args.extend(flags.iter().map(String::as_str));
    let out = kstack(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let prefix = report["prefix"].as_str().unwrap().to_owned();
    assert_eq!(report["kept"]["prefix"], prefix.as_str(), "{report}");
    let server = report["kept"]["server_id"].as_str().unwrap().to_owned();
    assert!(report["cleanup"].as_array().unwrap().is_empty(), "{report}");
    assert!(
        cloud
            .lock()
            .unwrap()
            .leftovers()
            .contains(&format!("server {server}"))
    );
    // The kept run's directory: owner-only, with the scratch user's password (never printed).
    let kept_dir = tmp.path().join("verify").join(&prefix);
    assert_eq!(report["kept_dir"], kept_dir.to_str().unwrap(), "{report}");
    let file = kept_dir.join("kept.json");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&kept_dir), 0o700);
    assert_eq!(mode(&file), 0o600);
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let password = kept["user_password"].as_str().unwrap();
    assert!(password.len() >= 20);
    assert!(!stdout.contains(password) && !stderr.contains(password));

    // --delete with a prefix that was not kept changes nothing (exit 2, the path named).
    let mut missing = vec![
        "verify",
        "--config-dir",
        dir,
        "--delete",
        "kstack-verify-00000000",
    ];
    missing.extend(flags.iter().map(String::as_str));
    let out = kstack(&missing);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("kstack-verify-00000000") && stderr.contains("nothing deleted"),
        "{stderr}"
    );
    assert!(
        cloud
            .lock()
            .unwrap()
            .leftovers()
            .contains(&format!("server {server}"))
    );
    // Not a prefix at all: refused by the flag's check.
    let out = kstack(&["verify", "--config-dir", dir, "--delete", "../etc"]);
    assert_eq!(out.status.code(), Some(2));

    let mut delete = vec!["verify", "--config-dir", dir, "--delete", &prefix];
    delete.extend(flags.iter().map(String::as_str));
    let out = kstack(&delete);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("deleted server {prefix}")),
        "{stderr}"
    );
    assert_eq!(cloud.lock().unwrap().leftovers(), Vec::<String>::new());
    assert!(!kept_dir.exists());
    assert!(!stderr.contains(password) && !stderr.contains(fake::ADMIN_PASSWORD));
}

#[test]
fn keep_and_delete_together_are_refused() {
    let out = kstack(&["verify", "--keep", "--delete", "kstack-verify-0000abcd"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--keep") && stderr.contains("--delete"),
        "{stderr}"
    );
}

#[test]
fn a_kept_run_tells_how_to_delete_it() {
    let tmp = config_dir("kubernetes_namespace: \"cloud-t\"\n");
    set_admin_password(tmp.path(), fake::ADMIN_PASSWORD);
    let (_rt, _cloud, flags) = fake_cloud(Vec::new());
    let dir = tmp.path().to_str().unwrap();
    let mut args = vec!["verify", "--config-dir", dir, "--keep"];
    args.extend(flags.iter().map(String::as_str));
    let out = kstack(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("delete it: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let prefix = line.rsplit(' ').next().unwrap();
    assert_eq!(
        line,
        format!("delete it: kstack --config-dir {dir} verify --delete {prefix}")
    );
    assert!(stdout.contains("kept in the cloud: "), "{stdout}");
    assert!(
        tmp.path()
            .join("verify")
            .join(prefix)
            .join("kept.json")
            .is_file()
    );
}
