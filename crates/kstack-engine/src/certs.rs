//! The public endpoints' certificate when the operator brings none
//! (`kolla_enable_tls_external` without `certificates/haproxy.pem`): kstack makes a CA once, in
//! the Secret [`CA_SECRET`] of the cloud's namespace, and from it a certificate for the public
//! address, in the Secret [`PUBLIC_TLS_SECRET`] (`kubernetes.io/tls`, as cert-manager would
//! make one). The keys live only in those Secrets (and in the gateway's rendered `haproxy.pem`
//! Secret); they are never logged, planned or recorded.
//!
//! A deploy renews the certificate when it expires within [`RENEW_BEFORE_DAYS`], names another
//! host, or was not signed by the CA: the gateway's config then changes and it rolls, one pod
//! after the other, as for any other change.
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

use kstack_model::labels::{MANAGED_BY, PART_OF};

use crate::cluster::{Cluster, ClusterError, ObjectRef};

/// The Secret holding kstack's CA of a cloud (`ca.crt`, `ca.key`).
pub const CA_SECRET: &str = "kstack-ca";
/// The Secret holding the public endpoints' certificate kstack made (`tls.crt`, `tls.key`,
/// `ca.crt`).
pub const PUBLIC_TLS_SECRET: &str = "kstack-public-tls";
/// How long kstack's CA is valid.
pub const CA_DAYS: i64 = 3650;
/// How long a certificate kstack issues is valid.
pub const CERT_DAYS: i64 = 365;
/// A deploy renews a certificate that expires within this many days; `kstack status` warns
/// from then on.
pub const RENEW_BEFORE_DAYS: i64 = 30;

/// Errors making or reading certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("{0}")]
    Cluster(#[from] ClusterError),
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
}

fn invalid(what: &str, message: impl std::fmt::Display) -> CertError {
    CertError::Invalid {
        what: what.to_owned(),
        message: message.to_string(),
    }
}

/// A CA: its certificate and private key, PEM.
#[derive(Clone)]
pub struct Ca {
    pub cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

/// A certificate and its private key, PEM.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    key_pem: String,
}

impl Issued {
    /// The chain and key in one PEM, as HAProxy reads a `crt` file.
    pub fn haproxy_pem(&self) -> String {
        format!("{}{}", self.cert_pem, self.key_pem)
    }
}

/// A new CA for the cloud of `namespace`, valid [`CA_DAYS`] from an hour before `now`.
pub fn new_ca(namespace: &str, now: OffsetDateTime) -> Result<Ca, CertError> {
    let key = KeyPair::generate().map_err(|e| invalid("a CA key", e))?;
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "kstack");
    dn.push(DnType::CommonName, format!("kstack CA of {namespace}"));
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_before = now - Duration::hours(1);
    p.not_after = now + Duration::days(CA_DAYS);
    let cert = p.self_signed(&key).map_err(|e| invalid("the CA", e))?;
    Ok(Ca {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A server certificate for `host` (a DNS name or an IP address, an IPv6 one with or without
/// brackets) signed by `ca`, valid [`CERT_DAYS`] from an hour before `now`.
pub fn issue(ca: &Ca, host: &str, now: OffsetDateTime) -> Result<Issued, CertError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|e| invalid("the CA key", e))?;
    let issuer =
        Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(|e| invalid("the CA", e))?;
    let key = KeyPair::generate().map_err(|e| invalid("a key", e))?;
    let mut p = CertificateParams::new(vec![host.to_owned()])
        .map_err(|e| invalid(&format!("a certificate for {host}"), e))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, host);
    p.distinguished_name = dn;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    p.use_authority_key_identifier_extension = true;
    p.not_before = now - Duration::hours(1);
    p.not_after = now + Duration::days(CERT_DAYS);
    let cert = p
        .signed_by(&key, &issuer)
        .map_err(|e| invalid(&format!("a certificate for {host}"), e))?;
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// What a certificate says, as far as kstack checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFacts {
    /// Its subject's common name, if any.
    pub subject: String,
    /// The end of its validity (Unix seconds).
    pub not_after: i64,
    /// The DNS names and IP addresses it is valid for.
    pub names: Vec<String>,
}

impl CertFacts {
    /// Whole days left at `now` (negative once it expired).
    pub fn days_left(&self, now: OffsetDateTime) -> i64 {
        (self.not_after - now.unix_timestamp()).div_euclid(86_400)
    }

    /// Whether it is valid for `host` (brackets of an IPv6 address ignored; `*.` matches one
    /// label).
    pub fn names_host(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.names.iter().any(|n| {
            n.eq_ignore_ascii_case(host)
                || n.strip_prefix("*.").is_some_and(|rest| {
                    host.split_once('.')
                        .is_some_and(|(_, h)| h.eq_ignore_ascii_case(rest))
                })
        })
    }
}

/// The facts of the first certificate of `pem`.
pub fn inspect(pem: &str) -> Result<CertFacts, CertError> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| invalid("the certificate", format!("not PEM: {e}")))?;
    let cert = p
        .parse_x509()
        .map_err(|e| invalid("the certificate", format!("not X.509: {e}")))?;
    let subject = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => names.push((*d).to_owned()),
                x509_parser::extensions::GeneralName::IPAddress(b) => {
                    let ip = match b.len() {
                        4 => <[u8; 4]>::try_from(*b).ok().map(std::net::IpAddr::from),
                        16 => <[u8; 16]>::try_from(*b).ok().map(std::net::IpAddr::from),
                        _ => None,
                    };
                    names.extend(ip.map(|i| i.to_string()));
                }
                _ => {}
            }
        }
    }
    Ok(CertFacts {
        subject,
        not_after: cert.validity().not_after.timestamp(),
        names,
    })
}

/// Whether the first certificate of `cert_pem` was signed by the CA of `ca_pem`.
pub fn signed_by(cert_pem: &str, ca_pem: &str) -> bool {
    let parse = |pem: &str| {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .ok()
            .map(|(_, p)| p)
    };
    let (Some(c), Some(ca)) = (parse(cert_pem), parse(ca_pem)) else {
        return false;
    };
    let (Ok(c), Ok(ca)) = (c.parse_x509(), ca.parse_x509()) else {
        return false;
    };
    c.issuer().as_raw() == ca.subject().as_raw()
        && c.verify_signature(Some(ca.public_key())).is_ok()
}

/// Why a certificate kstack made must be made again, if it must: it expires within
/// [`RENEW_BEFORE_DAYS`], does not name `host`, or was not signed by `ca_pem`.
pub fn renewal_reason(
    cert_pem: &str,
    ca_pem: &str,
    host: &str,
    now: OffsetDateTime,
) -> Option<String> {
    let facts = match inspect(cert_pem) {
        Ok(f) => f,
        Err(e) => return Some(format!("it does not read: {e}")),
    };
    let days = facts.days_left(now);
    if days < RENEW_BEFORE_DAYS {
        return Some(format!(
            "it expires in {days} days (renewed from {RENEW_BEFORE_DAYS} days before)"
        ));
    }
    if !facts.names_host(host) {
        return Some(format!(
            "it names {} but the public host is {host}",
            facts.names.join(", ")
        ));
    }
    if !signed_by(cert_pem, ca_pem) {
        return Some("kstack's CA did not sign it".to_owned());
    }
    None
}

/// Whether [`public_certificate`] may write the Secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A deploy: make the CA and the certificate when missing, renew when due, store both.
    Store,
    /// A read-only command (plan, status, template): read what is there; what is missing or
    /// due is made in memory only, as the next deploy would make it.
    Read,
}

/// The public endpoints' certificate kstack made, and what happened to it.
#[derive(Debug, Clone)]
pub struct PublicCertificate {
    pub issued: Issued,
    /// kstack's CA certificate (PEM), what clients trust.
    pub ca_pem: String,
    /// Why it was (or, read-only, would be) made anew; `None` when the stored one is kept.
    pub renewed: Option<String>,
    /// The certificate (PEM) the Secret held before this call, which the gateway serves until
    /// a deploy renders `issued`: what `kstack status` judges.
    pub stored: Option<String>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

fn secret_field(secret: &Value, key: &str) -> Option<String> {
    let b64 = secret["data"][key].as_str()?;
    let bytes = STANDARD.decode(b64).ok()?;
    String::from_utf8(bytes).ok()
}

/// The CA certificate (`ca.crt`, PEM) of a [`CA_SECRET`] as the cluster returns it.
pub fn ca_certificate(secret: &Value) -> Option<String> {
    secret_field(secret, "ca.crt")
}

fn secret_manifest(namespace: &str, name: &str, kind: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::String(STANDARD.encode(v))))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": { MANAGED_BY.0: MANAGED_BY.1, PART_OF.0: PART_OF.1 },
        },
        "data": data,
    })
}

/// kstack's CA of the cloud in `namespace`, made (and, with [`Access::Store`], stored) when
/// there is none.
pub async fn ca(
    cluster: &dyn Cluster,
    namespace: &str,
    access: Access,
    now: OffsetDateTime,
) -> Result<Ca, CertError> {
    let r = ObjectRef::new("Secret", Some(namespace), CA_SECRET);
    let read = |s: &Value| -> Option<Ca> {
        Some(Ca {
            cert_pem: secret_field(s, "ca.crt")?,
            key_pem: secret_field(s, "ca.key")?,
        })
    };
    if let Some(s) = cluster.get(&r).await? {
        return read(&s).ok_or_else(|| {
            invalid(
                &format!("Secret {CA_SECRET} of namespace {namespace}"),
                "it lacks `ca.crt` or `ca.key`; delete it and deploy again to make a new CA (clients must then trust the new one)",
            )
        });
    }
    let made = new_ca(namespace, now)?;
    if access == Access::Read {
        return Ok(made);
    }
    let manifest = secret_manifest(
        namespace,
        CA_SECRET,
        "Opaque",
        &[("ca.crt", &made.cert_pem), ("ca.key", &made.key_pem)],
    );
    if cluster.create(&manifest).await? {
        return Ok(made);
    }
    // Another deploy made it meanwhile: use that one.
    let s = cluster.get(&r).await?.ok_or_else(|| {
        invalid(
            &format!("Secret {CA_SECRET}"),
            "it was made and deleted meanwhile; deploy again",
        )
    })?;
    read(&s).ok_or_else(|| {
        invalid(
            &format!("Secret {CA_SECRET}"),
            "it lacks `ca.crt` or `ca.key`",
        )
    })
}

/// The public endpoints' certificate for `host`: the stored one while it is good
/// ([`renewal_reason`]) and `renew` is false, else a new one from kstack's CA (stored with
/// [`Access::Store`]).
pub async fn public_certificate(
    cluster: &dyn Cluster,
    namespace: &str,
    host: &str,
    access: Access,
    renew: bool,
    now: OffsetDateTime,
) -> Result<PublicCertificate, CertError> {
    let ca = ca(cluster, namespace, access, now).await?;
    let r = ObjectRef::new("Secret", Some(namespace), PUBLIC_TLS_SECRET);
    let stored = cluster.get(&r).await?.and_then(|s| {
        Some(Issued {
            cert_pem: secret_field(&s, "tls.crt")?,
            key_pem: secret_field(&s, "tls.key")?,
        })
    });
    let reason = match &stored {
        None => Some("there is none yet".to_owned()),
        Some(_) if renew => Some("a renewal was asked for".to_owned()),
        Some(s) => renewal_reason(&s.cert_pem, &ca.cert_pem, host, now),
    };
    let stored_pem = stored.as_ref().map(|s| s.cert_pem.clone());
    let issued = match (stored, &reason) {
        (Some(s), None) => s,
        _ => {
            let issued = issue(&ca, host, now)?;
            if access == Access::Store {
                let manifest = secret_manifest(
                    namespace,
                    PUBLIC_TLS_SECRET,
                    "kubernetes.io/tls",
                    &[
                        ("tls.crt", &issued.cert_pem),
                        ("tls.key", &issued.key_pem),
                        ("ca.crt", &ca.cert_pem),
                    ],
                );
                cluster.apply_force(&manifest).await?;
            }
            issued
        }
    };
    Ok(PublicCertificate {
        issued,
        ca_pem: ca.cert_pem,
        renewed: reason,
        stored: stored_pem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeCluster;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    #[test]
    fn an_issued_certificate_names_the_host_is_signed_by_the_ca_and_lasts_a_year() {
        let ca = new_ca("openstack", now()).unwrap();
        for host in ["172.24.4.1", "cloud.example.com"] {
            let c = issue(&ca, host, now()).unwrap();
            let f = inspect(&c.cert_pem).unwrap();
            assert!(f.names_host(host), "{f:?}");
            assert!(!f.names_host("10.0.0.1"));
            assert_eq!(f.days_left(now()), CERT_DAYS);
            assert!(signed_by(&c.cert_pem, &ca.cert_pem));
            assert_eq!(renewal_reason(&c.cert_pem, &ca.cert_pem, host, now()), None);
            let pem = c.haproxy_pem();
            assert!(pem.contains("BEGIN CERTIFICATE") && pem.contains("PRIVATE KEY"));
        }
        let other = new_ca("openstack", now()).unwrap();
        let c = issue(&ca, "172.24.4.1", now()).unwrap();
        assert!(!signed_by(&c.cert_pem, &other.cert_pem));
        assert_eq!(
            renewal_reason(&c.cert_pem, &other.cert_pem, "172.24.4.1", now()).as_deref(),
            Some("kstack's CA did not sign it")
        );
    }

    #[test]
    fn renewal_is_due_before_expiry_and_for_another_host() {
        let ca = new_ca("openstack", now()).unwrap();
        let c = issue(&ca, "172.24.4.1", now()).unwrap();
        let late = now() + Duration::days(CERT_DAYS - RENEW_BEFORE_DAYS + 1);
        let why = renewal_reason(&c.cert_pem, &ca.cert_pem, "172.24.4.1", late).unwrap();
        assert!(why.contains("expires in 29 days"), "{why}");
        let why = renewal_reason(&c.cert_pem, &ca.cert_pem, "cloud.example.com", now()).unwrap();
        assert!(why.contains("public host is cloud.example.com"), "{why}");
    }

    #[test]
    fn wildcards_match_one_label() {
        let f = CertFacts {
            subject: String::new(),
            not_after: 0,
            names: vec!["*.example.com".into()],
        };
        assert!(f.names_host("cloud.example.com"));
        assert!(!f.names_host("a.cloud.example.com"));
        assert!(!f.names_host("example.com"));
    }

    #[tokio::test]
    async fn a_deploy_makes_ca_and_certificate_once_and_renews_when_due() {
        let cluster = FakeCluster::new();
        let first = public_certificate(
            &cluster,
            "openstack",
            "172.24.4.1",
            Access::Store,
            false,
            now(),
        )
        .await
        .unwrap();
        assert_eq!(first.renewed.as_deref(), Some("there is none yet"));
        let again = public_certificate(
            &cluster,
            "openstack",
            "172.24.4.1",
            Access::Store,
            false,
            now(),
        )
        .await
        .unwrap();
        assert_eq!(again.renewed, None);
        assert_eq!(again.issued.cert_pem, first.issued.cert_pem);
        assert_eq!(again.ca_pem, first.ca_pem);

        let late = now() + Duration::days(CERT_DAYS - 10);
        let renewed = public_certificate(
            &cluster,
            "openstack",
            "172.24.4.1",
            Access::Store,
            false,
            late,
        )
        .await
        .unwrap();
        assert!(renewed.renewed.unwrap().contains("expires in"));
        // What the gateway served until then is the first one, which status judges.
        assert_eq!(renewed.stored.as_ref(), Some(&first.issued.cert_pem));
        assert_ne!(renewed.issued.cert_pem, first.issued.cert_pem);
        assert_eq!(renewed.ca_pem, first.ca_pem, "the CA stays");
        assert!(signed_by(&renewed.issued.cert_pem, &first.ca_pem));

        let forced = public_certificate(
            &cluster,
            "openstack",
            "172.24.4.1",
            Access::Store,
            true,
            late,
        )
        .await
        .unwrap();
        assert_eq!(forced.renewed.as_deref(), Some("a renewal was asked for"));
        assert_ne!(forced.issued.cert_pem, renewed.issued.cert_pem);
    }

    #[tokio::test]
    async fn reading_stores_nothing() {
        let cluster = FakeCluster::new();
        let c = public_certificate(
            &cluster,
            "openstack",
            "172.24.4.1",
            Access::Read,
            false,
            now(),
        )
        .await
        .unwrap();
        assert!(c.renewed.is_some());
        for name in [CA_SECRET, PUBLIC_TLS_SECRET] {
            let r = ObjectRef::new("Secret", Some("openstack"), name);
            assert_eq!(cluster.get(&r).await.unwrap(), None, "{name}");
        }
    }
}
