//! `kstack inventory serve` through the binary: the tokens file is refused (exit 2) when others
//! may read it (with the chmod to run), when a token is short or repeated (by line, never
//! printing a token).
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const TOKEN: &str = "cli-test-token-0123456789abcdef012345";

fn kstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kstack"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("KSTACK_INVENTORY_URL")
        .env_remove("KSTACK_INVENTORY_TOKEN")
        .env_remove("KSTACK_INVENTORY_CA_FILE")
        .env("NO_COLOR", "1")
        .output()
        .expect("run kstack")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tokens_file(dir: &Path, text: &str, mode: u32) -> String {
    let path = dir.join("tokens.yml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_str().unwrap().to_string()
}

/// `serve` with `args` refused before it listens: exit 2, stderr returned.
fn refused(args: &[&str]) -> String {
    let out = kstack(args);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    stderr(&out)
}

#[test]
fn a_tokens_file_others_can_read_or_with_weak_tokens_is_refused_without_printing_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inv.db");
    let db = db.to_str().unwrap();
    let serve = |tokens: &str| {
        refused(&[
            "inventory",
            "serve",
            "--tokens",
            tokens,
            "--database",
            db,
            "--no-node-sync",
            "--listen",
            "127.0.0.1:1",
        ])
    };

    let path = tokens_file(dir.path(), &format!("{TOKEN}: admin\n"), 0o644);
    let err = serve(&path);
    assert!(
        err.contains("(mode 0644)") && err.contains(&format!("chmod 600 {path}")),
        "{err}"
    );
    assert!(!err.contains(TOKEN), "{err}");

    let path = tokens_file(
        dir.path(),
        &format!("{TOKEN}: admin\nhunter2: reader\n"),
        0o600,
    );
    let err = serve(&path);
    assert!(
        err.contains("line 2: the token is shorter than 32 characters"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");

    let path = tokens_file(
        dir.path(),
        &format!("{TOKEN}: admin\n{TOKEN}: reader\n"),
        0o600,
    );
    let err = serve(&path);
    assert!(err.contains("line 2: the same token as on line 1"), "{err}");
    assert!(!err.contains(TOKEN), "{err}");
    assert!(!db_exists(db), "nothing may start before the refusal");
}

fn db_exists(db: &str) -> bool {
    Path::new(db).exists()
}
