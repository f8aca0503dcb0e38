//! `kstack inventory serve` and the `host-*` commands through the binary: the tokens file is
//! refused when others may read it (with the chmod to run), when a token is short or repeated
//! (by line, never printing a token); plain HTTP on a network address is refused (exit 2);
//! over HTTPS the client works with `--ca-file` and names the cause without it; `host-add`
//! registers unlocked unless `--locked` (and says what locking does); `host-list` shows
//! each host's sync state.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use kstack_inventory::testing::{TestPki, free_port};

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

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
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

#[test]
fn plain_http_on_a_network_address_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(dir.path(), &format!("{TOKEN}: admin\n"), 0o600);
    let db = dir.path().join("inv.db");
    let err = refused(&[
        "inventory",
        "serve",
        "--tokens",
        &tokens,
        "--database",
        db.to_str().unwrap(),
        "--no-node-sync",
        "--listen",
        "0.0.0.0:1",
    ]);
    assert!(
        err.contains("plain HTTP") && err.contains("--insecure-http"),
        "{err}"
    );
}

/// A running `kstack inventory serve`, killed when dropped.
struct Service {
    child: Child,
    _dir: tempfile::TempDir,
    pki: TestPki,
    url: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    fn start() -> Service {
        let dir = tempfile::tempdir().unwrap();
        let tokens = tokens_file(dir.path(), &format!("{TOKEN}: admin\n"), 0o600);
        let pki = TestPki::new(&dir.path().join("pki"), "cli");
        let port = free_port();
        let db = dir.path().join("inv.db");
        let child = Command::new(env!("CARGO_BIN_EXE_kstack"))
            .args([
                "inventory",
                "serve",
                "--tokens",
                &tokens,
                "--no-node-sync",
                "--database",
                db.to_str().unwrap(),
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--tls-cert",
                pki.cert.to_str().unwrap(),
                "--tls-key",
                pki.key.to_str().unwrap(),
                "--audit-interval",
                "3600",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kstack inventory serve");
        let service = Service {
            child,
            _dir: dir,
            pki,
            url: format!("https://127.0.0.1:{port}"),
        };
        // Our own server on a port we chose: nothing to watch, so try until it answers.
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return service;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("kstack inventory serve did not start");
    }

    /// Runs a client command against the service, trusting its CA.
    fn client(&self, args: &[&str]) -> Output {
        let mut all = args.to_vec();
        all.extend([
            "--url",
            &self.url,
            "--token",
            TOKEN,
            "--ca-file",
            self.pki.ca.to_str().unwrap(),
        ]);
        kstack(&all)
    }
}

#[test]
fn the_client_speaks_https_with_a_ca_file_and_hosts_register_unlocked() {
    let svc = Service::start();

    let out = kstack(&["host-list", "--url", &svc.url, "--token", TOKEN]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("could not reach the inventory service")
            && err.to_lowercase().contains("certificate")
            && err.contains("--ca-file"),
        "{err}"
    );
    assert!(!err.contains(TOKEN), "{err}");

    let out = svc.client(&["host-add", "compute-1", "--personality", "compute"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("evicted"), "{}", stderr(&out));
    let out = svc.client(&[
        "host-add",
        "compute-2",
        "--personality",
        "compute",
        "--locked",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("registering compute-2 locked")
            && stderr(&out).contains("services=disabled:NoExecute")
            && stderr(&out).contains("evicted"),
        "{}",
        stderr(&out)
    );

    let out = svc.client(&["host-list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "UUID",
            "HOSTNAME",
            "PERSONALITY",
            "ADMINISTRATIVE",
            "OPERATIONAL",
            "SYNC",
            "REASON",
            "TASK"
        ],
        "{table}"
    );
    // --no-node-sync: no node is changed, and the hosts say so.
    assert_eq!(
        rows[1][1..6],
        ["compute-1", "compute", "unlocked", "disabled", "pending"],
        "{table}"
    );
    assert_eq!(
        rows[2][1..6],
        ["compute-2", "compute", "locked", "disabled", "pending"],
        "{table}"
    );
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .contains("node sync is disabled"),
        "{table}"
    );

    let out = svc.client(&["host-lock", "compute-1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("locking compute-1: its Kubernetes node is cordoned"),
        "{}",
        stderr(&out)
    );

    let out = svc.client(&["host-label-assign", "compute-1", "kubernetes.io/hostname=x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("400") && stderr(&out).contains("Kubernetes reserves"),
        "{}",
        stderr(&out)
    );
}

/// `serve` with an admin token, its own database and a free port, plus `extra`, refused before
/// it listens: its stderr.
fn serve_refused_with(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(
        dir.path(),
        "admin-token-0123456789abcdef0123456789: admin\n",
        0o600,
    );
    let db = dir.path().join("inventory.db");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "inventory",
        "serve",
        "--tokens",
        &tokens,
        "--database",
        db.to_str().unwrap(),
        "--no-node-sync",
        "--listen",
        &listen,
    ];
    args.extend_from_slice(extra);
    refused(&args)
}

#[test]
fn a_keystone_url_that_is_not_http_is_refused_naming_it() {
    let err = serve_refused_with(&["--keystone-url", "keystone.openstack.svc:5000"]);
    assert!(
        err.contains("--keystone-url keystone.openstack.svc:5000"),
        "{err}"
    );
    assert!(err.contains("http://"), "{err}");
    // The role flags need a Keystone to ask.
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(
        dir.path(),
        "admin-token-0123456789abcdef0123456789: admin\n",
        0o600,
    );
    let out = kstack(&[
        "inventory",
        "serve",
        "--tokens",
        &tokens,
        "--keystone-admin-roles",
        "admin",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--keystone-url"), "{}", stderr(&out));
}

#[test]
fn a_cloud_namespace_that_is_not_a_namespace_name_is_refused() {
    let err = serve_refused_with(&["--cloud-namespace", "Open_Stack"]);
    assert!(
        err.contains("--cloud-namespace \"Open_Stack\" is not a namespace name"),
        "{err}"
    );
}

/// One HTTP/1.1 request on a new connection; the status line, or why there is none.
fn get_status_line(port: u16, path: &str, timeout: Duration) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&head[..n]);
    Ok(text.lines().next().unwrap_or_default().to_string())
}

/// 1,100 connections that send nothing or half a request, to a service whose process may
/// open only 1,024 files (a common default): a normal request is still answered in under a
/// second, and a half-sent request is dropped once the header time is up.
#[test]
fn silent_and_half_sent_connections_do_not_starve_a_normal_request() {
    use std::io::{Read, Write};
    // This test's own side holds 1,100 sockets.
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if nofile.current.is_some_and(|c| c < 2048) {
        let raised = rustix::process::Rlimit {
            current: nofile.maximum,
            maximum: nofile.maximum,
        };
        rustix::process::setrlimit(rustix::process::Resource::Nofile, raised)
            .expect("this test needs 2,048 open files");
    }
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(dir.path(), &format!("{TOKEN}: admin\n"), 0o600);
    let db = dir.path().join("inv.db");
    let port = free_port();
    // The service under a limit of 1,024 open files, soft and hard.
    let child = Command::new("sh")
        .args(["-c", "ulimit -n 1024 && exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_kstack"))
        .args([
            "inventory",
            "serve",
            "--tokens",
            &tokens,
            "--no-node-sync",
            "--database",
            db.to_str().unwrap(),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--audit-interval",
            "3600",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kstack inventory serve");
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _service = Kill(child);
    // Our own server on a port we chose: nothing to watch, so try until it answers.
    let up = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        get_status_line(port, "/openapi.json", Duration::from_secs(5))
            .is_ok_and(|l| l.contains(" 200 "))
    });
    assert!(up, "kstack inventory serve did not start");

    let mut held = Vec::new();
    for i in 0..1100 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        if i % 10 == 0 {
            s.write_all(b"GET /v1/ihosts HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .unwrap();
        }
        held.push(s);
    }
    let started = std::time::Instant::now();
    let line = get_status_line(port, "/openapi.json", Duration::from_secs(10));
    let took = started.elapsed();
    assert!(
        line.as_deref().is_ok_and(|l| l.contains(" 200 ")),
        "a normal request with 1,100 silent connections open: {line:?} after {took:?}"
    );
    assert!(
        took < Duration::from_secs(1),
        "a normal request took {took:?} with 1,100 silent connections open"
    );

    // The newest half-sent request is still open (nothing needed its room); it is closed
    // when the header time (10 s) is up, well before 20 s.
    let mut half = held.swap_remove(1090);
    half.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 256];
    let closed = match half.read(&mut buf) {
        Ok(_) => true, // EOF or the service's error response, then EOF
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(
        closed && started.elapsed() < Duration::from_secs(15),
        "a half-sent request was not dropped within the header time ({:?})",
        started.elapsed()
    );
}
