//! HTTPS for the service: a certificate chain and private key in PEM files, served with rustls
//! (the ring provider), reloaded when the files change.
//!
//! The files are read again every [`TlsConfig::reload_interval`]; when their content changed
//! and they still make a valid pair, new connections get the new certificate (connections
//! already open keep theirs). A pair that does not load is logged and the old one kept, so a
//! half-written renewal never takes the service down.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::Error;

/// How often the certificate and key files are checked for a change by default.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// A loaded certificate and key: what the server serves with, and the file contents it came from.
pub(crate) struct Loaded {
    pub(crate) rustls: RustlsConfig,
    files: (Vec<u8>, Vec<u8>),
}

/// Where the service's certificate and key are.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// PEM file with the certificate, then any intermediates.
    pub cert: PathBuf,
    /// PEM file with the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// How often to check the files for a change.
    pub reload_interval: Duration,
}

impl TlsConfig {
    /// The files, checked for a change every [`DEFAULT_RELOAD_INTERVAL`].
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        TlsConfig {
            cert: cert.into(),
            key: key.into(),
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        }
    }

    fn read(&self) -> Result<(Vec<u8>, Vec<u8>), Error> {
        let read = |what: &str, path: &PathBuf| {
            std::fs::read(path)
                .map_err(|e| Error::Config(format!("TLS {what} {}: {e}", path.display())))
        };
        let cert = read("certificate", &self.cert)?;
        check_key_mode(&self.key)?;
        Ok((cert, read("key", &self.key)?))
    }

    fn server_config(&self, cert: &[u8], key: &[u8]) -> Result<rustls::ServerConfig, Error> {
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                Error::Config(format!(
                    "TLS certificate {}: not PEM certificates: {e}",
                    self.cert.display()
                ))
            })?;
        if chain.is_empty() {
            return Err(Error::Config(format!(
                "TLS certificate {}: no CERTIFICATE block",
                self.cert.display()
            )));
        }
        // The key's bytes never reach a message: only where it is and what rustls says.
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|_| {
            Error::Config(format!(
                "TLS key {}: no PEM private key (PKCS#8, PKCS#1 or SEC1) found",
                self.key.display()
            ))
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| {
                Error::Config(format!(
                    "TLS certificate {} and key {} do not make a usable pair: {e}",
                    self.cert.display(),
                    self.key.display()
                ))
            })?;
        // HTTP/1.1 only: the connection time bounds hold for it (see crate::conn).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// Loads the files into a config the server can serve with.
    pub(crate) fn load(&self) -> Result<Loaded, Error> {
        let (cert, key) = self.read()?;
        Ok(Loaded {
            rustls: RustlsConfig::from_config(Arc::new(self.server_config(&cert, &key)?)),
            files: (cert, key),
        })
    }

    /// Reloads `loaded.rustls` whenever the files change to another valid pair; runs until
    /// aborted.
    pub(crate) async fn reload_on_change(self, loaded: Loaded) {
        let Loaded {
            rustls,
            files: mut loaded,
        } = loaded;
        let mut tick = tokio::time::interval(self.reload_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        // The last pair that failed to load, so a broken renewal is reported once, not at
        // every check.
        let mut failed: Option<(Vec<u8>, Vec<u8>)> = None;
        loop {
            tick.tick().await;
            let current = match self.read() {
                Ok(current) => current,
                Err(e) => {
                    tracing::warn!(error = %e, "TLS files unreadable; serving the loaded certificate");
                    continue;
                }
            };
            if current == loaded || failed.as_ref() == Some(&current) {
                continue;
            }
            match self.server_config(&current.0, &current.1) {
                Ok(config) => {
                    rustls.reload_from_config(Arc::new(config));
                    tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                    loaded = current;
                    failed = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "new TLS files do not load; serving the loaded certificate");
                    failed = Some(current);
                }
            }
        }
    }
}

/// Refuses a private key file that others may read or that group or others may change
/// (a group that may read it, such as Debian's `ssl-cert`, is fine).
#[cfg(unix)]
fn check_key_mode(path: &std::path::Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(()); // reading it says why
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o027 != 0 {
        return Err(Error::Config(format!(
            "TLS key {shown} can be read by others or changed by group or others (mode {mode:04o}); \
             it is the service's private key: run `chmod 600 {shown}` (or 640 for a group that \
             must read it)",
            shown = path.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_key_mode(_path: &std::path::Path) -> Result<(), Error> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_pair_is_refused_naming_the_files_never_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        let c = TlsConfig::new(&cert, &key);
        let err = c.read().unwrap_err().to_string();
        assert!(err.contains("tls.crt"), "{err}");

        std::fs::write(&cert, "not a certificate\n").unwrap();
        std::fs::write(&key, "SECRET-KEY-MATERIAL\n").unwrap();
        key_mode(&key, 0o600);
        let (cb, kb) = c.read().unwrap();
        let err = c.server_config(&cb, &kb).unwrap_err().to_string();
        assert!(err.contains("no CERTIFICATE block"), "{err}");

        let signed = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(&cert, signed.cert.pem()).unwrap();
        let (cb, kb) = c.read().unwrap();
        let err = c.server_config(&cb, &kb).unwrap_err().to_string();
        assert!(
            err.contains("tls.key") && err.contains("no PEM private key"),
            "{err}"
        );
        assert!(!err.contains("SECRET"), "{err}");

        let other = rcgen::generate_simple_self_signed(vec!["other".to_string()]).unwrap();
        std::fs::write(&key, other.signing_key.serialize_pem()).unwrap();
        let (cb, kb) = c.read().unwrap();
        let err = c.server_config(&cb, &kb).unwrap_err().to_string();
        assert!(err.contains("do not make a usable pair"), "{err}");

        std::fs::write(&key, signed.signing_key.serialize_pem()).unwrap();
        let (cb, kb) = c.read().unwrap();
        assert!(c.server_config(&cb, &kb).is_ok());
    }

    fn key_mode(path: &std::path::Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_key_others_may_read_is_refused_and_a_group_readable_one_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        let signed = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(&cert, signed.cert.pem()).unwrap();
        std::fs::write(&key, signed.signing_key.serialize_pem()).unwrap();
        let c = TlsConfig::new(&cert, &key);
        for mode in [0o644, 0o604, 0o660, 0o606] {
            key_mode(&key, mode);
            let err = c.load().err().expect("refused").to_string();
            assert!(
                err.contains("tls.key")
                    && err.contains(&format!("(mode {mode:04o})"))
                    && err.contains("chmod 600"),
                "{err}"
            );
        }
        for mode in [0o600, 0o640, 0o400] {
            key_mode(&key, mode);
            assert!(c.load().is_ok(), "{mode:o}");
        }
    }
}
