//! Reading a config directory from disk: what under `config/` is read, and what is refused.
#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::Path;

use kstack_config::fs::load_dir;
use kstack_config::{Loaded, render_plain};

/// A valid config directory (all services off but keystone's dependencies) with `config/`.
fn config_dir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("globals.yml"),
        "enable_openstack_core: no\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("passwords.yml"),
        kstack_config::testing::passwords_yml(1),
    )
    .unwrap();
    std::fs::create_dir_all(tmp.path().join("config/nova")).unwrap();
    tmp
}

fn errors(loaded: &Loaded) -> Vec<(String, String)> {
    loaded
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.file.clone(), d.message.clone()))
        .collect()
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_symlink_inside_config_is_read() {
    let tmp = config_dir();
    let cfg = tmp.path().join("config");
    write(
        &cfg.join("nova/common.conf.txt"),
        "[DEFAULT]\ndebug = True\n",
    );
    symlink("nova/common.conf.txt", cfg.join("nova.conf")).unwrap();
    let loaded = load_dir(tmp.path()).unwrap();
    assert!(
        !loaded.has_errors(),
        "{}",
        render_plain(&loaded.diagnostics)
    );
    assert_eq!(
        loaded.config.unwrap().overrides["nova.conf"],
        b"[DEFAULT]\ndebug = True\n"
    );
}

#[test]
fn a_symlink_leaving_config_is_refused_unread() {
    let tmp = config_dir();
    let outside = tempfile::tempdir().unwrap();
    write(
        &outside.path().join("stolen.conf"),
        "[DEFAULT]\nsecret_from_elsewhere = 1\n",
    );
    let cfg = tmp.path().join("config");
    symlink(outside.path().join("stolen.conf"), cfg.join("global.conf")).unwrap();
    // Through a relative path, and to a file of the config directory but outside `config/`.
    symlink("../../passwords.yml", cfg.join("nova/nova.conf")).unwrap();
    let sources = kstack_config::fs::read_dir(tmp.path()).unwrap();
    assert!(sources.overrides.is_empty(), "nothing was read");
    let loaded = kstack_config::load(&sources);
    assert!(loaded.config.is_none());
    let msg = "the symbolic link points outside `config/`; kstack does not read it";
    assert_eq!(
        errors(&loaded),
        [
            ("config/global.conf".to_owned(), msg.to_owned()),
            ("config/nova/nova.conf".to_owned(), msg.to_owned()),
        ]
    );
    let out = render_plain(&loaded.diagnostics);
    assert!(!out.contains("secret_from_elsewhere"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn directory_links_dangling_links_and_pipes_are_refused() {
    let tmp = config_dir();
    let cfg = tmp.path().join("config");
    // A link to a directory inside config/ (here, a loop) and one to a directory outside.
    symlink(".", cfg.join("nova/again")).unwrap();
    symlink("/etc", cfg.join("etc")).unwrap();
    symlink("missing.conf", cfg.join("glance.conf")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(cfg.join("keystone.conf"))
        .status()
        .is_ok_and(|s| s.success());
    let loaded = load_dir(tmp.path()).unwrap();
    assert!(loaded.config.is_none());
    let mut want = vec![
        (
            "config/etc".to_owned(),
            "the symbolic link points outside `config/`; kstack does not read it".to_owned(),
        ),
        (
            "config/glance.conf".to_owned(),
            "the symbolic link points at nothing kstack can read".to_owned(),
        ),
    ];
    if fifo {
        want.push((
            "config/keystone.conf".to_owned(),
            "this is not a regular file (a device, socket or pipe); kstack does not read it"
                .to_owned(),
        ));
    }
    want.push((
        "config/nova/again".to_owned(),
        "the symbolic link points to a directory; kstack reads only real directories under `config/`".to_owned(),
    ));
    assert_eq!(errors(&loaded), want);
}

#[test]
fn a_key_before_any_section_is_an_error_with_its_line() {
    let tmp = config_dir();
    write(
        &tmp.path().join("config/global.conf"),
        "# tuning\ndebug = True\n[DEFAULT]\n",
    );
    let loaded = load_dir(tmp.path()).unwrap();
    assert!(loaded.config.is_none());
    let d = loaded.diagnostics.iter().find(|d| d.is_error()).unwrap();
    assert_eq!((d.file.as_str(), d.line), ("config/global.conf", 2));
    insta::assert_snapshot!(render_plain(&loaded.diagnostics));
}

#[test]
fn a_file_written_again_keeps_the_permissions_its_owner_took_away() {
    use kstack_config::fs::keep_tighter;
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("out.yaml");
    // A new file gets what kstack asks for.
    assert_eq!(keep_tighter(&path, 0o644), 0o644);
    std::fs::write(&path, "x").unwrap();
    for (found, want, written) in [
        (0o644, 0o644, 0o644),
        (0o640, 0o644, 0o640),
        (0o600, 0o644, 0o600),
        (0o644, 0o600, 0o600),
        (0o400, 0o644, 0o400),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(found)).unwrap();
        assert_eq!(
            keep_tighter(&path, want),
            written,
            "found {found:o}, want {want:o}"
        );
    }
    // A link is not followed: its target's mode says nothing about the file kstack writes.
    let target = tmp.path().join("target");
    std::fs::write(&target, "x").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = tmp.path().join("link");
    symlink(&target, &link).unwrap();
    assert_eq!(keep_tighter(&link, 0o644), 0o644);
}

#[test]
fn globals_catalog_or_passwords_linked_from_outside_the_directory_are_refused_unread() {
    let outside = tempfile::tempdir().unwrap();
    // A file whose lines must never be quoted (as /etc/shadow's would be in a YAML error).
    write(
        &outside.path().join("shadow"),
        "root:$y$j9T$secret-hash:19000:0:99999:7:::\n",
    );
    for name in ["globals.yml", "catalog.yml", "passwords.yml"] {
        let tmp = config_dir();
        let _ = std::fs::remove_file(tmp.path().join(name));
        symlink(outside.path().join("shadow"), tmp.path().join(name)).unwrap();
        let loaded = load_dir(tmp.path()).unwrap();
        assert!(loaded.config.is_none(), "{name}");
        assert_eq!(
            errors(&loaded),
            [(
                name.to_owned(),
                "the symbolic link points outside the config directory; kstack does not read it"
                    .to_owned()
            )],
            "{name}"
        );
        let out = render_plain(&loaded.diagnostics);
        assert!(!out.contains("secret-hash"), "{out}");
    }
    // A link to a file inside the directory is read.
    let tmp = config_dir();
    std::fs::rename(tmp.path().join("globals.yml"), tmp.path().join("site.yml")).unwrap();
    symlink("site.yml", tmp.path().join("globals.yml")).unwrap();
    let loaded = load_dir(tmp.path()).unwrap();
    assert!(
        loaded.config.is_some(),
        "{}",
        render_plain(&loaded.diagnostics)
    );
}

#[test]
fn config_as_a_link_leading_out_of_the_directory_is_refused() {
    let tmp = config_dir();
    let outside = tempfile::tempdir().unwrap();
    write(
        &outside.path().join("nova.conf"),
        "[DEFAULT]\nfrom_elsewhere = 1\n",
    );
    std::fs::remove_dir_all(tmp.path().join("config")).unwrap();
    symlink(outside.path(), tmp.path().join("config")).unwrap();
    let sources = kstack_config::fs::read_dir(tmp.path()).unwrap();
    assert!(sources.overrides.is_empty(), "nothing was read");
    let loaded = kstack_config::load(&sources);
    assert!(loaded.config.is_none());
    let errs = errors(&loaded);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].1.contains("`config/` is a symbolic link"),
        "{errs:?}"
    );
}

/// The operator's certificate of the public endpoints, `certificates/haproxy.pem`: read with TLS
/// on them, refused (naming the file) when it lacks the key, read only inside the directory.
#[test]
fn the_operators_public_certificate_is_read_checked_and_kept_inside_the_directory() {
    let tmp = config_dir();
    write(
        &tmp.path().join("globals.yml"),
        "enable_openstack_core: no\nkolla_external_vip_address: 198.51.100.10\nkolla_enable_tls_external: \"yes\"\n",
    );
    let certs = tmp.path().join("certificates");
    std::fs::create_dir_all(&certs).unwrap();
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nMIIC\n-----END PRIVATE KEY-----\n";
    write(&certs.join("haproxy.pem"), pem);
    let loaded = load_dir(tmp.path()).unwrap();
    assert!(
        !loaded.has_errors(),
        "{}",
        render_plain(&loaded.diagnostics)
    );
    let cert = loaded.config.unwrap().public_certificate.expect("read");
    assert_eq!(cert.pem, pem);
    // Its Debug form never shows the key.
    assert!(!format!("{cert:?}").contains("MIIC"));

    // Without the key: an error naming the file; the key is not quoted.
    write(
        &certs.join("haproxy.pem"),
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    );
    let loaded = load_dir(tmp.path()).unwrap();
    assert_eq!(
        errors(&loaded),
        [(
            "certificates/haproxy.pem".to_owned(),
            "the file holds no private key (`-----BEGIN PRIVATE KEY-----`)".to_owned()
        )]
    );

    // No file: kstack makes one on deploy (nothing to read here).
    std::fs::remove_file(certs.join("haproxy.pem")).unwrap();
    let loaded = load_dir(tmp.path()).unwrap();
    assert!(!loaded.has_errors());
    assert!(loaded.config.unwrap().public_certificate.is_none());

    // `certificates/` linked to a directory elsewhere: refused unread.
    let elsewhere = tempfile::tempdir().unwrap();
    write(&elsewhere.path().join("haproxy.pem"), pem);
    std::fs::remove_dir(&certs).unwrap();
    symlink(elsewhere.path(), &certs).unwrap();
    let loaded = load_dir(tmp.path()).unwrap();
    let errs = errors(&loaded);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].0, "certificates/haproxy.pem");
    assert!(
        errs[0].1.contains("outside the config directory"),
        "{errs:?}"
    );
}
