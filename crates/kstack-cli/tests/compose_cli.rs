//! Runs the built `kstack` binary for the Compose target: template to stdout and to a
//! directory, deploy without a Docker engine, and bad input.
use std::path::Path;
use std::process::{Command, Output};

fn kstack(args: &[&str], path: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kstack"));
    cmd.args(args)
        .env_remove("KSTACK_CONFIG_DIR")
        .env("NO_COLOR", "1");
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    cmd.output().expect("run kstack")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A valid config directory: `kstack init` + `kstack genpwd`.
fn cloud(root: &Path) -> String {
    let dir = root.join("cloud");
    let d = dir.to_str().unwrap().to_owned();
    for args in [
        vec!["init", d.as_str()],
        vec!["genpwd", "--config-dir", d.as_str()],
    ] {
        let out = kstack(&args, None);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    d
}

#[test]
fn template_prints_compose_yaml_and_writes_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let d = cloud(tmp.path());
    let out = kstack(
        &["template", "--config-dir", &d, "--target", "compose"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    assert!(
        yaml.contains("network_mode: host") && yaml.contains("keystone-db-sync:"),
        "{yaml}"
    );
    assert!(
        text(&out.stderr).contains("-o DIR"),
        "{}",
        text(&out.stderr)
    );

    let out_dir = tmp.path().join("node");
    let o = out_dir.to_str().unwrap();
    let out = kstack(
        &[
            "template",
            "--config-dir",
            &d,
            "--target",
            "compose",
            "-o",
            o,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(out_dir.join("compose.yaml")).unwrap(),
        yaml
    );
    assert!(
        out_dir
            .join("config/keystone/keystone/config.json")
            .is_file()
    );

    // No password from passwords.yml is in compose.yaml.
    let pw = std::fs::read_to_string(Path::new(&d).join("passwords.yml")).unwrap();
    let db = pw
        .lines()
        .find_map(|l| l.strip_prefix("database_password: "))
        .unwrap()
        .trim();
    assert!(db.len() >= 20);
    assert!(!yaml.contains(db));
    let cnf = std::fs::read_to_string(out_dir.join("config/keystone/tasks/db-create/client.cnf"))
        .unwrap();
    assert!(
        cnf.contains(db),
        "the root password is in the 0600 client file"
    );

    // The default target is unchanged: Kubernetes objects.
    let out = kstack(&["template", "--config-dir", &d], None);
    assert!(text(&out.stdout).contains("kind: Deployment"));
}

#[test]
fn deploy_without_docker_writes_the_files_and_exits_3() {
    let tmp = tempfile::tempdir().unwrap();
    let d = cloud(tmp.path());
    let out_dir = tmp.path().join("node");
    // A PATH with no docker binary: no engine can answer.
    let empty = tmp.path().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    let out = kstack(
        &[
            "deploy",
            "--target",
            "compose",
            "--config-dir",
            &d,
            "--compose-dir",
            out_dir.to_str().unwrap(),
        ],
        Some(empty.to_str().unwrap()),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("no Docker engine"), "{stderr}");
    assert!(
        stderr.contains("docker compose -f") && stderr.contains("up -d"),
        "{stderr}"
    );
    assert!(out_dir.join("compose.yaml").is_file());

    // Default output directory: <config-dir>/compose.
    let out = kstack(
        &["deploy", "--target", "compose", "--config-dir", &d],
        Some(empty.to_str().unwrap()),
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(Path::new(&d).join("compose/compose.yaml").is_file());

    // An engine that answers and has every image: `docker compose -f DIR/compose.yaml up -d`
    // runs, and its failure is the command's failure; after it, the containers are waited for
    // (`docker compose ps`: here one, healthy).
    let fake = tmp.path().join("fake-docker");
    std::fs::create_dir(&fake).unwrap();
    let log = tmp.path().join("docker.log");
    for (rc, want) in [(0, 0), (1, 1)] {
        let script = format!(
            "#!/bin/sh\necho \"$@\" >> {}\ncase \"$1\" in info|image) exit 0;; compose) case \"$4\" in \
             up) exit {rc};; ps) echo '{ps}'; exit 0;; esac;; esac\nexit 9\n",
            log.display(),
            ps = r#"{"Name":"openstack-keystone-1","Service":"keystone","State":"running","Health":"healthy","ExitCode":0,"Labels":"app.kubernetes.io/component=server"}"#
        );
        let bin = fake.join("docker");
        std::fs::write(&bin, script).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = kstack(
            &[
                "deploy",
                "--target",
                "compose",
                "--config-dir",
                &d,
                "--compose-dir",
                out_dir.to_str().unwrap(),
            ],
            Some(fake.to_str().unwrap()),
        );
        assert_eq!(out.status.code(), Some(want), "{}", text(&out.stderr));
    }
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls
            .lines()
            .any(|l| l.starts_with("image inspect ") && l.contains("/keystone:")),
        "{calls}"
    );
    let compose_calls: Vec<&str> = calls
        .lines()
        .filter(|l| !l.starts_with("image inspect "))
        .collect();
    let up = format!(
        "compose -f {}/compose.yaml up -d --remove-orphans",
        out_dir.display()
    );
    let ps = format!(
        "compose -f {}/compose.yaml ps -a --format json",
        out_dir.display()
    );
    assert_eq!(
        compose_calls,
        ["info", up.as_str(), ps.as_str(), "info", up.as_str()]
    );
}

#[test]
fn invalid_globals_give_the_same_diagnostics_as_the_kubernetes_target() {
    let tmp = tempfile::tempdir().unwrap();
    let d = cloud(tmp.path());
    std::fs::write(
        Path::new(&d).join("globals.yml"),
        "---\nkolla_base_distro: rocky\nenable_nova: maybe\n",
    )
    .unwrap();
    let out_dir = tmp.path().join("node");
    let o = out_dir.to_str().unwrap();
    let k8s = kstack(&["template", "--config-dir", &d], None);
    let compose = kstack(
        &[
            "template",
            "--config-dir",
            &d,
            "--target",
            "compose",
            "-o",
            o,
        ],
        None,
    );
    let deploy = kstack(
        &[
            "deploy",
            "--target",
            "compose",
            "--config-dir",
            &d,
            "--compose-dir",
            o,
        ],
        None,
    );
    let stderr = text(&compose.stderr);
    assert_eq!(compose.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("globals.yml:3:"), "{stderr}");
    assert!(
        stderr.contains("enable_nova") && stderr.contains("maybe"),
        "{stderr}"
    );
    assert_eq!(stderr, text(&k8s.stderr));
    assert_eq!(deploy.status.code(), Some(2));
    assert_eq!(text(&deploy.stderr), stderr);
    assert!(!out_dir.exists(), "nothing written for invalid input");
}

#[test]
fn help_has_examples() {
    let out = kstack(&["deploy", "--help"], None);
    let help = text(&out.stdout);
    assert!(
        help.contains("Examples:") && help.contains("--target"),
        "{help}"
    );
    let out = kstack(&["template", "--help"], None);
    assert!(text(&out.stdout).contains("compose"));
}

/// A one-shot task that fails: exit 3, the report names it with its last log lines, and a
/// password the container logged is not shown.
#[test]
fn a_failed_task_is_reported_with_its_log_lines_and_no_password() {
    let tmp = tempfile::tempdir().unwrap();
    let d = cloud(tmp.path());
    let passwords = std::fs::read_to_string(Path::new(&d).join("passwords.yml")).unwrap();
    let password = passwords
        .lines()
        .find_map(|l| l.strip_prefix("database_password: "))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .expect("database_password in passwords.yml");
    assert!(password.len() >= 8, "{password}");
    let fake = tmp.path().join("fake-docker");
    std::fs::create_dir(&fake).unwrap();
    let ps = r#"{"Name":"openstack-keystone-db-sync-1","Service":"keystone-db-sync","State":"exited","Health":"","ExitCode":1,"Labels":"app.kubernetes.io/component=bootstrap"}"#;
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in info|image) exit 0;; \
         logs) echo 'connecting to mysql://keystone:{password}@db failed'; exit 0;; \
         compose) case \"$4\" in up) exit 0;; ps) echo '{ps}'; exit 0;; esac;; esac\nexit 9\n"
    );
    let bin = fake.join("docker");
    std::fs::write(&bin, script).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = kstack(
        &["deploy", "--target", "compose", "--config-dir", &d],
        Some(fake.to_str().unwrap()),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("keystone-db-sync failed: exited with code 1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("connecting to mysql://keystone:"),
        "the task's log lines: {stderr}"
    );
    assert!(
        !stderr.contains(&password),
        "a password in the report: {stderr}"
    );
}
