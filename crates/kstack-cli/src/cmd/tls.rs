//! The public endpoints' certificate and the CA clients trust, for the commands that render or
//! talk to the public endpoints, with TLS on them (`kolla_enable_tls_external`).
//!
//! The operator's `certificates/haproxy.pem` is read with the config; without it kstack makes
//! a CA and a certificate in the cluster ([`kstack_engine::certs`]), which a deploy stores and
//! renews and the read-only commands read.
use std::path::Path;

use anyhow::Context as _;
use kstack_config::{Config, PublicCertificate};
use kstack_engine::Cluster;
use kstack_engine::certs::{self, Access};

/// Whether the config needs the certificate kstack makes: TLS on the public endpoints, a
/// public gateway enabled, and no operator certificate.
pub(crate) fn needs_made_certificate(config: &Config) -> bool {
    config.globals.tls.external
        && config.public_certificate.is_none()
        && config.enabled.iter().any(|s| {
            config
                .catalog
                .services
                .get(s)
                .is_some_and(|s| s.public_gateway)
        })
}

/// Puts the certificate kstack made for the public endpoints into `config` (with
/// [`Access::Store`] made, stored and renewed as due; `renew` forces a new one) and returns it,
/// when the config needs it ([`needs_made_certificate`]).
pub(crate) async fn fill_from_cluster(
    config: &mut Config,
    cluster: &dyn Cluster,
    access: Access,
    renew: bool,
) -> anyhow::Result<Option<certs::PublicCertificate>> {
    if !needs_made_certificate(config) {
        return Ok(None);
    }
    let host = config.globals.public_host().unwrap_or_default();
    let namespace = config.globals.kubernetes_namespace.clone();
    let made = certs::public_certificate(
        cluster,
        &namespace,
        &host,
        access,
        renew,
        time::OffsetDateTime::now_utc(),
    )
    .await
    .with_context(|| format!("the public endpoints' certificate in namespace {namespace}"))?;
    config.public_certificate = Some(PublicCertificate {
        pem: made.issued.haproxy_pem(),
    });
    Ok(Some(made))
}

/// Puts a certificate from a throw-away CA into `config`, for rendering without a cluster
/// (`kstack template`, `kstack validate`), when the config needs one; with `note`, says so on
/// stderr.
pub(crate) fn fill_example(config: &mut Config, note: bool) -> anyhow::Result<()> {
    if !needs_made_certificate(config) {
        return Ok(());
    }
    let host = config.globals.public_host().unwrap_or_default();
    let now = time::OffsetDateTime::now_utc();
    let ca = certs::new_ca(&config.globals.kubernetes_namespace, now)?;
    let issued = certs::issue(&ca, &host, now)?;
    if note {
        eprintln!(
            "note: haproxy.pem holds a certificate of a throw-away CA: `kstack deploy` makes the cloud's own from its CA in the cluster (or put yours in {})",
            kstack_config::PUBLIC_CERTIFICATE_FILE
        );
    }
    config.public_certificate = Some(PublicCertificate {
        pem: issued.haproxy_pem(),
    });
    Ok(())
}

/// The CA certificates (PEM) a client of the public endpoints must trust besides the public
/// roots, each with where it came from: the operator's `kolla_admin_openrc_cacert` when set,
/// and kstack's CA ([`kstack_ca`]). Empty without TLS.
pub(crate) async fn trusted_cas(
    config: &Config,
    kubeconfig: Option<&str>,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if !config.globals.tls.external {
        return Ok(out);
    }
    if let Some(path) = &config.globals.tls.admin_openrc_cacert {
        let pem = std::fs::read_to_string(path)
            .with_context(|| format!("kolla_admin_openrc_cacert: reading {path}"))?;
        out.push((path.clone(), pem));
    }
    if let Some(pem) = kstack_ca(config, kubeconfig).await? {
        let namespace = &config.globals.kubernetes_namespace;
        out.push((format!("Secret {namespace}/{}", certs::CA_SECRET), pem));
    }
    Ok(out)
}

/// kstack's CA certificate (PEM) from the cluster, when kstack made the public endpoints'
/// certificate ([`needs_made_certificate`]); an error naming what to do when the CA is not
/// there yet.
pub(crate) async fn kstack_ca(
    config: &Config,
    kubeconfig: Option<&str>,
) -> anyhow::Result<Option<String>> {
    if !needs_made_certificate(config) {
        return Ok(None);
    }
    let (client, _) = kstack_kube::counted_client(kubeconfig).await?;
    let cluster = kstack_kube::KubeCluster::new(client);
    let namespace = &config.globals.kubernetes_namespace;
    let r = kstack_engine::ObjectRef::new("Secret", Some(namespace), certs::CA_SECRET);
    let secret = cluster
        .get(&r)
        .await
        .with_context(|| format!("reading Secret {} of namespace {namespace}", certs::CA_SECRET))?
        .with_context(|| {
            format!(
                "namespace {namespace} has no Secret {}: kstack makes its CA on the first deploy with kolla_enable_tls_external; deploy first",
                certs::CA_SECRET
            )
        })?;
    let pem = certs::ca_certificate(&secret).with_context(|| {
        format!(
            "Secret {} of namespace {namespace} has no ca.crt",
            certs::CA_SECRET
        )
    })?;
    Ok(Some(pem))
}

/// Writes kstack's CA certificate (public, mode 0644) as `ca.crt` in `dir`, replacing what is
/// there; returns its path.
pub(crate) fn write_ca(dir: &Path, pem: &str) -> anyhow::Result<std::path::PathBuf> {
    let path = dir.join("ca.crt");
    kstack_config::fs::replace_file(&path, pem.as_bytes(), 0o644)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// What `kstack status` says about the public endpoints' certificate.
#[derive(Debug, Clone)]
pub(crate) struct CertificateStatus {
    pub line: String,
    /// Expired, or not valid for the public host: clients are refused now.
    pub problem: bool,
}

/// The state of the public endpoints' certificate, with TLS on them: the operator's, or the one
/// kstack made and stored (`made`, read from the cluster), which the gateway serves; its expiry
/// and names checked, and whether the next deploy renews it.
pub(crate) fn certificate_status(
    config: &Config,
    made: Option<&certs::PublicCertificate>,
) -> Option<CertificateStatus> {
    let (whose, pem) = match made {
        Some(m) => ("kstack's CA", m.stored.as_deref()),
        None => (
            kstack_config::PUBLIC_CERTIFICATE_FILE,
            Some(config.public_certificate.as_ref()?.pem.as_str()),
        ),
    };
    let Some(pem) = pem else {
        return Some(CertificateStatus {
            line: format!(
                "public certificate ({whose}): none yet; the next `kstack deploy` makes it"
            ),
            problem: false,
        });
    };
    let renewal = made
        .and_then(|m| m.renewed.as_deref())
        .map(|why| format!("; the next `kstack deploy` renews it: {why}"))
        .unwrap_or_default();
    let host = config.globals.public_host().unwrap_or_default();
    let now = time::OffsetDateTime::now_utc();
    let facts = match certs::inspect(pem) {
        Ok(f) => f,
        Err(e) => {
            return Some(CertificateStatus {
                line: format!("public certificate ({whose}): {e}{renewal}"),
                problem: true,
            });
        }
    };
    let days = facts.days_left(now);
    let until = time::OffsetDateTime::from_unix_timestamp(facts.not_after)
        .map(|t| t.date().to_string())
        .unwrap_or_default();
    let (state, problem) = if days < 0 {
        (
            format!("EXPIRED on {until}: clients refuse the public endpoints; replace it"),
            true,
        )
    } else if !facts.names_host(&host) {
        (
            format!(
                "WRONG HOST: it names {} but the public endpoints are at {host}; replace it",
                facts.names.join(", ")
            ),
            true,
        )
    } else if days < certs::RENEW_BEFORE_DAYS {
        (
            format!("expires in {days} days ({until}): renew it soon"),
            false,
        )
    } else {
        (
            format!("valid for {host} until {until} ({days} days)"),
            false,
        )
    };
    Some(CertificateStatus {
        line: format!("public certificate ({whose}): {state}{renewal}"),
        problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstack_model::globals::Globals;

    const HOST: &str = "cloud.example.com";

    fn config(pem: Option<String>) -> Config {
        let vars = serde_json::json!({
            "kolla_external_fqdn": HOST,
            "kolla_enable_tls_external": "yes",
        });
        let serde_json::Value::Object(m) = vars else {
            unreachable!()
        };
        let mut c = kstack_config::testing::config(
            Globals::from_vars(&m.into_iter().collect()).unwrap(),
            &[],
        );
        c.public_certificate = pem.map(|pem| PublicCertificate { pem });
        c
    }

    fn pem(host: &str, issued_days_ago: i64) -> String {
        let then = time::OffsetDateTime::now_utc() - time::Duration::days(issued_days_ago);
        let ca = certs::new_ca("openstack", then).unwrap();
        certs::issue(&ca, host, then).unwrap().haproxy_pem()
    }

    /// What a read of the cluster gives: `stored` in the Secret, due for renewal or not.
    fn made(stored: Option<String>, renewed: Option<&str>) -> certs::PublicCertificate {
        let now = time::OffsetDateTime::now_utc();
        let ca = certs::new_ca("openstack", now).unwrap();
        certs::PublicCertificate {
            issued: certs::issue(&ca, HOST, now).unwrap(),
            ca_pem: ca.cert_pem,
            renewed: renewed.map(str::to_owned),
            stored,
        }
    }

    #[test]
    fn status_says_until_when_and_flags_expired_or_wrong_certificates() {
        let status = |pem: String| certificate_status(&config(Some(pem)), None).unwrap();
        let ok = status(pem(HOST, 0));
        assert!(!ok.problem);
        assert!(
            ok.line.starts_with(&format!(
                "public certificate (certificates/haproxy.pem): valid for {HOST} until"
            )),
            "{}",
            ok.line
        );
        let soon = status(pem(HOST, 350));
        assert!(!soon.problem);
        assert!(soon.line.contains("renew it soon"), "{}", soon.line);
        let expired = status(pem(HOST, 400));
        assert!(expired.problem);
        assert!(expired.line.contains("EXPIRED"), "{}", expired.line);
        let wrong = status(pem("other.example.com", 0));
        assert!(wrong.problem);
        assert!(wrong.line.contains("WRONG HOST"), "{}", wrong.line);
        // Without a certificate of the operator's and none made: nothing to say.
        assert!(certificate_status(&config(None), None).is_none());
    }

    #[test]
    fn status_judges_the_certificate_kstack_stored_not_the_one_a_deploy_would_make() {
        // Expired in the Secret: a problem now, though the next deploy renews it.
        let c = config(None);
        let expired = certificate_status(
            &c,
            Some(&made(Some(pem(HOST, 400)), Some("it expires in -35 days"))),
        )
        .unwrap();
        assert!(expired.problem);
        assert!(
            expired
                .line
                .starts_with("public certificate (kstack's CA): EXPIRED")
                && expired
                    .line
                    .ends_with("; the next `kstack deploy` renews it: it expires in -35 days"),
            "{}",
            expired.line
        );
        let kept = certificate_status(&c, Some(&made(Some(pem(HOST, 0)), None))).unwrap();
        assert!(!kept.problem);
        assert!(
            kept.line.contains("valid for cloud.example.com until"),
            "{}",
            kept.line
        );
        let none = certificate_status(&c, Some(&made(None, Some("there is none yet")))).unwrap();
        assert!(!none.problem);
        assert!(none.line.contains("none yet"), "{}", none.line);
    }

    #[test]
    fn only_tls_with_a_gateway_and_no_operator_certificate_needs_kstacks() {
        assert!(needs_made_certificate(&config(None)));
        assert!(!needs_made_certificate(&config(Some(pem(HOST, 0)))));
    }
}
