//! Logging in to the guest over SSH, as its user would: a key pair made for the run (its public
//! half goes to nova as a key pair, and the guest installs it from the metadata service), then
//! commands run on the guest, each with its exit status and output.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use russh::client;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{PrivateKey, PrivateKeyWithHashAlg, PublicKeyOrCertificate};

/// A key pair of one verify run.
#[derive(Clone)]
pub(crate) struct Key {
    private: Arc<PrivateKey>,
    /// The public key in OpenSSH's one-line format.
    pub public: String,
}

impl Key {
    /// A fresh Ed25519 key pair from the OS random source.
    pub fn generate() -> Result<Key, String> {
        let mut seed = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut seed);
        Key::of(PrivateKey::from(Ed25519Keypair::from_seed(&seed)))
    }

    /// The key pair of an OpenSSH private key (a kept run's `id_ed25519`).
    pub fn from_openssh(text: &str) -> Result<Key, String> {
        Key::of(
            PrivateKey::from_openssh(text)
                .map_err(|e| format!("reading the SSH private key: {e}"))?,
        )
    }

    fn of(private: PrivateKey) -> Result<Key, String> {
        let public = private
            .public_key()
            .to_openssh()
            .map_err(|e| format!("writing the SSH public key: {e}"))?;
        Ok(Key {
            private: Arc::new(private),
            public,
        })
    }

    /// The private key in OpenSSH's format, for `ssh -i` (a kept run's guest).
    pub fn private_openssh(&self) -> Result<String, String> {
        self.private
            .to_openssh(russh::keys::ssh_key::LineEnding::LF)
            .map(|k| k.to_string())
            .map_err(|e| format!("writing the SSH private key: {e}"))
    }
}

/// Why a login or a command failed; the variant names the layer.
#[derive(Debug)]
pub(crate) enum SshError {
    /// No TCP connection (or no SSH banner) within the time limit.
    Connect(String),
    /// The server refused the key.
    Refused,
    /// The session broke after login.
    Session(String),
}

impl std::fmt::Display for SshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SshError::Connect(e) => write!(f, "no SSH connection: {e}"),
            SshError::Refused => f.write_str("the SSH server refused the run's key"),
            SshError::Session(e) => write!(f, "the SSH session failed: {e}"),
        }
    }
}

/// The guest's host key is new with every boot, so any is accepted: what is checked is that
/// the guest took the run's key from the metadata service.
struct AnyHostKey;

impl client::Handler for AnyHostKey {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        _key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

/// A logged-in session.
pub(crate) struct Session {
    handle: client::Handle<AnyHostKey>,
}

impl Session {
    /// Connects to `addr` and logs in as `user` with `key`; one attempt, bounded by
    /// `timeout`.
    pub async fn login(
        addr: SocketAddr,
        user: &str,
        key: &Key,
        timeout: Duration,
    ) -> Result<Session, SshError> {
        // No inactivity limit: the session waits while a volume is attached to the guest;
        // every command has its own time limit instead.
        let config = Arc::new(client::Config {
            inactivity_timeout: None,
            ..Default::default()
        });
        let mut handle = tokio::time::timeout(timeout, client::connect(config, addr, AnyHostKey))
            .await
            .map_err(|_| SshError::Connect(format!("{addr}: no answer within {timeout:?}")))?
            .map_err(|e| SshError::Connect(format!("{addr}: {e}")))?;
        let auth = tokio::time::timeout(
            timeout,
            handle.authenticate_publickey(
                user,
                PrivateKeyWithHashAlg::new(Arc::clone(&key.private), None),
            ),
        )
        .await
        .map_err(|_| {
            SshError::Session(format!("{addr}: no answer to the login within {timeout:?}"))
        })?
        .map_err(|e| SshError::Session(format!("{addr}: {e}")))?;
        if !auth.success() {
            return Err(SshError::Refused);
        }
        Ok(Session { handle })
    }

    /// Runs `command` (a shell line) and returns its exit status and what it wrote to stdout
    /// and stderr.
    pub async fn run(&self, command: &str, timeout: Duration) -> Result<(u32, String), SshError> {
        let work = async {
            let mut channel = self
                .handle
                .channel_open_session()
                .await
                .map_err(|e| SshError::Session(e.to_string()))?;
            channel
                .exec(true, command)
                .await
                .map_err(|e| SshError::Session(e.to_string()))?;
            let mut out = Vec::new();
            let mut status = None;
            while let Some(msg) = channel.wait().await {
                match msg {
                    russh::ChannelMsg::Data { ref data } => out.extend_from_slice(data),
                    russh::ChannelMsg::ExtendedData { ref data, .. } => out.extend_from_slice(data),
                    russh::ChannelMsg::ExitStatus { exit_status } => status = Some(exit_status),
                    _ => {}
                }
            }
            let status = status.ok_or_else(|| {
                SshError::Session(format!("`{command}` ended without an exit status"))
            })?;
            Ok((status, String::from_utf8_lossy(&out).into_owned()))
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| SshError::Session(format!("`{command}` did not end within {timeout:?}")))?
    }
}
