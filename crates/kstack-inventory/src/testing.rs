//! Test helpers (feature `testing`), for the tests of this crate, the CLI and the end-to-end
//! suite: a throwaway certificate authority and a server certificate for 127.0.0.1 and
//! localhost, written as PEM files; a free local port; a [`ServeConfig`] for a server on
//! loopback with one admin token.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

use crate::tls::TlsConfig;
use crate::{NoCloudStatus, NodeSync, Role, ServeConfig, Tokens};

/// A TCP port on 127.0.0.1 that nothing listens on right now (the OS's choice of a free one).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port on 127.0.0.1")
        .port()
}

/// A server on `listen` with its SQLite database at `db`, `admin_token` as its one (admin)
/// token, plain HTTP, no Keystone, no cloud, committed changes to `sync`, the audit every
/// `audit_interval`. Tests change the fields they exercise.
pub fn serve_config(
    listen: SocketAddr,
    db: &Path,
    admin_token: &str,
    audit_interval: Duration,
    sync: Arc<dyn NodeSync>,
) -> ServeConfig {
    ServeConfig {
        listen,
        database_url: db.to_str().expect("a UTF-8 database path").to_string(),
        tokens: Tokens::new(BTreeMap::from([(admin_token.to_string(), Role::Admin)]))
            .expect("a valid token"),
        keystone: None,
        tls: None,
        insecure_http: false,
        audit_interval,
        sync,
        joins: None,
        cloud: Arc::new(NoCloudStatus),
        max_connections: None,
        compute: None,
    }
}

/// A CA certificate (`ca.crt`) and a server certificate and key it signed (`tls.crt`,
/// `tls.key`), valid for `127.0.0.1` and `localhost`, in one directory.
pub struct TestPki {
    pub dir: PathBuf,
    /// The CA certificate a client trusts.
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestPki {
    /// Makes a new CA and server certificate in `dir` (created if missing), named with
    /// `name` (`{name}-ca.crt`, `{name}-tls.crt`, `{name}-tls.key`).
    pub fn new(dir: &Path, name: &str) -> Self {
        std::fs::create_dir_all(dir).expect("create the PKI directory");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("kstack test CA {name}"));
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let key = KeyPair::generate().expect("server key");
        let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("server params");
        let cert = params.signed_by(&key, &ca).expect("server certificate");
        let pki = TestPki {
            dir: dir.to_path_buf(),
            ca: dir.join(format!("{name}-ca.crt")),
            cert: dir.join(format!("{name}-tls.crt")),
            key: dir.join(format!("{name}-tls.key")),
        };
        std::fs::write(&pki.ca, ca.pem()).expect("write CA");
        std::fs::write(&pki.cert, cert.pem()).expect("write certificate");
        std::fs::write(&pki.key, key.serialize_pem()).expect("write key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&pki.key, std::fs::Permissions::from_mode(0o600))
                .expect("chmod the key");
        }
        pki
    }

    /// The service's TLS settings for this certificate.
    pub fn tls_config(&self) -> TlsConfig {
        TlsConfig::new(&self.cert, &self.key)
    }

    /// The CA certificate's PEM.
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(&self.ca).expect("read CA")
    }
}
