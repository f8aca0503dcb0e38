//! Runs the built `kstack` binary on a temporary config directory: init, genpwd, validate.
use std::process::Command;

fn kstack(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kstack"))
        .args(args)
        .env_remove("KSTACK_CONFIG_DIR")
        .env("NO_COLOR", "1")
        .output()
        .expect("run kstack")
}

#[test]
fn init_genpwd_validate_then_broken_globals() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cloud");
    let d = dir.to_str().unwrap();

    let out = kstack(&["init", d]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("globals.yml").exists() && dir.join("config/README.md").exists());

    // Before genpwd, validation fails and says what to do.
    let out = kstack(&["validate", "--config-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("kstack genpwd"), "{stderr}");

    // init refuses to overwrite.
    let out = kstack(&["init", "--config-dir", d]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));

    let out = kstack(&["genpwd", "--config-dir", d]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("passwords.yml"))
            .unwrap()
            .permissions()
            .mode();
        // init writes it 0600 and genpwd keeps that.
        assert_eq!(mode & 0o777, 0o600);
        // A mode the operator chose is kept, never widened; others lose every permission.
        for (before, after) in [
            (0o400, 0o400),
            (0o640, 0o640),
            (0o644, 0o640),
            (0o600, 0o600),
        ] {
            let path = dir.join("passwords.yml");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(before)).unwrap();
            // A missing key makes genpwd write the file again.
            let text = std::fs::read_to_string(&path).unwrap();
            let text: String = text
                .lines()
                .filter(|l| !l.starts_with("keystone_admin_password:"))
                .map(|l| format!("{l}\n"))
                .collect();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::fs::write(&path, text + "keystone_admin_password:\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(before)).unwrap();
            let out = kstack(&["genpwd", "--config-dir", d]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, after, "mode {before:o} became {mode:o}");
            let filled = std::fs::read_to_string(&path).unwrap();
            assert!(
                !filled.contains("keystone_admin_password:\n"),
                "not filled again"
            );
        }
    }
    let pw = std::fs::read_to_string(dir.join("passwords.yml")).unwrap();
    assert!(
        pw.contains("-----BEGIN OPENSSH PRIVATE KEY-----")
            && pw.contains("public_key: ssh-ed25519 AAAA"),
        "genpwd's SSH keys are Ed25519 key pairs in OpenSSH's format"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_kstack"))
        .arg("validate")
        .env("KSTACK_CONFIG_DIR", d)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("valid (0 warnings)"));

    // A second genpwd changes nothing.
    let out = kstack(&["genpwd", "--config-dir", d]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(dir.join("passwords.yml")).unwrap(),
        pw
    );

    std::fs::write(
        dir.join("globals.yml"),
        "---\nkolla_base_distro: rocky\nenable_nova: maybe\n",
    )
    .unwrap();
    let out = kstack(&["validate", "--config-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("globals.yml:3:"), "{stderr}");
    assert!(
        stderr.contains("enable_nova") && stderr.contains("maybe"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(
            pw.lines()
                .find(|l| l.starts_with("database_password"))
                .unwrap()
        )
    );
}

#[test]
fn help_has_examples() {
    for cmd in ["init", "genpwd", "validate"] {
        let out = kstack(&[cmd, "--help"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Examples:") && text.contains("--config-dir"),
            "{cmd}: {text}"
        );
    }
}

/// Links under `config/` that kstack refuses are bad input like any other (exit 2), never an IO
/// failure (exit 1), and the linked content is not read.
#[cfg(unix)]
#[test]
fn refused_override_links_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cloud");
    let d = dir.to_str().unwrap();
    assert!(kstack(&["init", d]).status.success());
    std::fs::write(
        dir.join("passwords.yml"),
        kstack_config::testing::passwords_yml(1),
    )
    .unwrap();
    let out = kstack(&["validate", "--config-dir", d]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let outside = tempfile::tempdir().unwrap();
    for (link, target) in [
        // A directory link looping back, and one leaving the config directory.
        ("config/nova", dir.join("config")),
        ("config/global.conf", outside.path().join("x.conf")),
    ] {
        std::fs::write(
            outside.path().join("x.conf"),
            "[DEFAULT]\nfrom_outside = 1\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(&target, dir.join(link)).unwrap();
        let out = kstack(&["validate", "--config-dir", d]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{link}: {stderr}");
        assert!(
            stderr.contains(link) && stderr.contains("symbolic link"),
            "{stderr}"
        );
        let out = kstack(&["template", "--config-dir", d]);
        assert_eq!(out.status.code(), Some(2), "{link}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("from_outside"));
        std::fs::remove_file(dir.join(link)).unwrap();
    }
}

#[test]
fn config_dir_works_before_or_after_the_sub_command_and_refused_settings_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cloud");
    let d = dir.to_str().unwrap();
    assert!(kstack(&["init", d]).status.success());
    assert!(kstack(&["--config-dir", d, "genpwd"]).status.success());
    let globals = dir.join("globals.yml");
    let starter = std::fs::read_to_string(&globals).unwrap();
    std::fs::write(
        &globals,
        format!("{starter}\nopenstack_region_name: \"{{{{ 'Lab' | upper }}}}\"\n"),
    )
    .unwrap();
    for args in [
        vec!["--config-dir", d, "template", "--service", "keystone"],
        vec!["template", "--config-dir", d, "--service", "keystone"],
    ] {
        let out = kstack(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stderr}");
        // The Jinja value was evaluated before rendering.
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("--bootstrap-region-id LAB"),
            "{args:?}"
        );
    }

    std::fs::write(
        &globals,
        format!("{starter}\nneutron_plugin_agent: \"ovn\"\n"),
    )
    .unwrap();
    let out = kstack(&["--config-dir", d, "validate"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("neutron_plugin_agent") && stderr.contains("OVN"),
        "{stderr}"
    );
}

#[test]
fn template_distro_facts_prints_the_distribution_table_without_a_config_dir() {
    // hack/distro-parity.sh reads the distributions from here; no config directory is needed.
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kstack"))
        .args(["template", "--distro-facts"])
        .current_dir(tmp.path())
        .env_remove("KSTACK_CONFIG_DIR")
        .output()
        .expect("run kstack");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let facts: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(facts.len(), kstack_model::distro::ALL.len());
    for (got, d) in facts.iter().zip(kstack_model::distro::ALL) {
        assert_eq!(got["name"], d.name);
        assert_eq!(got["version"], d.version);
        assert_eq!(got["apache_command"], d.apache_command);
        assert_eq!(got["galera_provider"], d.galera_provider);
    }
    // It prints only the table: the rendering flags do not go with it.
    let out = kstack(&["template", "--distro-facts", "--service", "keystone"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A config directory `cloud` in `tmp` made by `kstack init` and `kstack genpwd`, with
/// `globals` appended to its globals.yml.
fn cloud_dir(tmp: &std::path::Path, globals: &str) -> std::path::PathBuf {
    let dir = tmp.join("cloud");
    let d = dir.to_str().unwrap();
    assert!(kstack(&["init", d]).status.success());
    assert!(kstack(&["genpwd", "--config-dir", d]).status.success());
    let mut text = std::fs::read_to_string(dir.join("globals.yml")).unwrap();
    text.push('\n');
    text.push_str(globals);
    std::fs::write(dir.join("globals.yml"), text).unwrap();
    dir
}

#[test]
fn openrc_writes_the_admins_credentials_on_the_public_endpoint_mode_0600() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let dir = cloud_dir(tmp.path(), "kolla_external_vip_address: 198.51.100.10\n");
    let d = dir.to_str().unwrap();
    // A password with what a shell or YAML would read otherwise.
    let pw = "it's $HOME `x` \"q\" #no: 010";
    let passwords = std::fs::read_to_string(dir.join("passwords.yml")).unwrap();
    let passwords: String = passwords
        .lines()
        .map(|l| {
            if l.starts_with("keystone_admin_password:") {
                format!("keystone_admin_password: '{}'\n", pw.replace('\'', "''"))
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(dir.join("passwords.yml"), passwords).unwrap();

    let out_dir = tmp.path().join("out");
    let out = kstack(&["openrc", "--config-dir", d, "-o", out_dir.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(pw) && !String::from_utf8_lossy(&out.stdout).contains(pw));
    for f in ["admin-openrc.sh", "clouds.yaml"] {
        let mode = std::fs::metadata(out_dir.join(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
    // The shell reads back exactly the password and the public URL.
    let sh = std::process::Command::new("sh")
        .arg("-c")
        .arg(". ./admin-openrc.sh && printf '%s\\n%s' \"$OS_AUTH_URL\" \"$OS_PASSWORD\"")
        .current_dir(&out_dir)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&sh.stdout),
        format!("http://198.51.100.10:5000/v3\n{pw}")
    );
    // clouds.yaml reads back the same (as YAML).
    let clouds: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(out_dir.join("clouds.yaml")).unwrap())
            .unwrap();
    let auth = &clouds["clouds"]["kstack-admin"]["auth"];
    assert_eq!(auth["password"], pw);
    assert_eq!(auth["auth_url"], "http://198.51.100.10:5000/v3");
    assert_eq!(clouds["clouds"]["kstack-admin"]["interface"], "public");

    // A link planted where a file goes is replaced, not followed.
    let target = tmp.path().join("elsewhere");
    std::fs::write(&target, "keep").unwrap();
    std::fs::remove_file(out_dir.join("clouds.yaml")).unwrap();
    std::os::unix::fs::symlink(&target, out_dir.join("clouds.yaml")).unwrap();
    assert!(
        kstack(&["openrc", "--config-dir", d, "-o", out_dir.to_str().unwrap()])
            .status
            .success()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
}

#[test]
fn openrc_names_the_operators_ca_of_https_public_endpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = cloud_dir(
        tmp.path(),
        "kolla_external_fqdn: cloud.example.com\nkolla_enable_tls_external: \"yes\"\nkolla_admin_openrc_cacert: /etc/ssl/our-ca.pem\n",
    );
    let d = dir.to_str().unwrap();
    // The operator's certificate: no cluster is asked for one.
    std::fs::create_dir_all(dir.join("certificates")).unwrap();
    std::fs::write(
        dir.join("certificates/haproxy.pem"),
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nMIIC\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let out_dir = tmp.path().join("out");
    let out = kstack(&["openrc", "--config-dir", d, "-o", out_dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sh = std::process::Command::new("sh")
        .arg("-c")
        .arg(". ./admin-openrc.sh && printf '%s\\n%s' \"$OS_AUTH_URL\" \"$OS_CACERT\"")
        .current_dir(&out_dir)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&sh.stdout),
        "https://cloud.example.com:5000/v3\n/etc/ssl/our-ca.pem"
    );
    let clouds: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(out_dir.join("clouds.yaml")).unwrap())
            .unwrap();
    assert_eq!(
        clouds["clouds"]["kstack-admin"]["cacert"],
        "/etc/ssl/our-ca.pem"
    );
    assert!(
        !out_dir.join("ca.crt").exists(),
        "no CA of kstack's to write"
    );
}

#[test]
fn validate_accepts_tls_without_a_certificate_and_says_compose_needs_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = cloud_dir(
        tmp.path(),
        "kolla_external_vip_address: 198.51.100.10\nkolla_enable_tls_external: \"yes\"\n",
    );
    let d = dir.to_str().unwrap();
    let out = kstack(&["validate", "--config-dir", d]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("needs the public endpoints' certificate in `certificates/haproxy.pem`"),
        "{text}"
    );
}
