//! The commands that write to a cloud (`kstack deploy`, `kstack rollback`): one at a time per
//! cloud, under its deploy lock (`kstack_kube::lock`).
use std::time::Duration;

use anyhow::Context as _;
use kstack_config::Config;
use kstack_engine::ObjectRef;
use kstack_kube::KubeCluster;
use kstack_render::kubernetes;

use super::deploy::Target;
use crate::exit::Exit;

/// The commands that write to a cloud, one at a time, under its deploy lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    Deploy,
    Rollback,
}

impl Writer {
    pub(crate) fn command(self) -> &'static str {
        match self {
            Writer::Deploy => "deploy",
            Writer::Rollback => "rollback",
        }
    }

    /// Why the writer stopped when another writer took the lock over (`by`).
    fn lost(self, by: &dyn std::fmt::Display) -> String {
        let then = match self {
            Writer::Deploy => "; run `kstack deploy` again (it converges)",
            Writer::Rollback => "",
        };
        format!(
            "the deploy lock was taken over by {by} while this {} could not renew it: stopped{then}",
            self.command()
        )
    }

    /// What the writer says when Ctrl-C stopped it.
    fn interrupted(self) -> &'static str {
        match self {
            Writer::Deploy => "interrupted: stopped; run `kstack deploy` again (it converges)",
            Writer::Rollback => "interrupted: stopped; `kstack status` shows where the service is",
        }
    }
}

/// Runs `work` holding the cloud's deploy lock for `writer` ([`take_lock`]; `work` is given
/// how long the lock was waited for), and stops it when the lock is taken over (an error,
/// exit 1) or on Ctrl-C (exit 130). The lock is released however `work` ends; when it cannot
/// be taken, the exit code says why and `work` never runs.
pub(crate) async fn under_lock<F, Fut>(
    writer: Writer,
    target: &Target,
    config: &Config,
    no_wait: bool,
    work: F,
) -> anyhow::Result<Exit>
where
    F: FnOnce(Duration) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Exit>>,
{
    let command = writer.command();
    let lock = match take_lock(target, config, command, no_wait).await? {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let result = tokio::select! {
        r = work(lock.waited) => r,
        by = lock.lost() => Err(anyhow::anyhow!(writer.lost(&by))),
        _ = tokio::signal::ctrl_c() => {
            eprintln!("{}", writer.interrupted());
            Ok(Exit::Interrupted)
        }
    };
    lock.release().await;
    result
}

/// Creates the cloud's namespace when it does not exist yet: the deploy lock's Lease lives in it
/// (and the Secrets of kstack's CA, made under that lock), and both come before the first apply.
async fn ensure_namespace(cluster: &KubeCluster, config: &Config) -> anyhow::Result<()> {
    use kstack_engine::Cluster as _;
    let namespace = &config.globals.kubernetes_namespace;
    let ns_ref = ObjectRef::new("Namespace", None, namespace);
    if cluster
        .get(&ns_ref)
        .await
        .with_context(|| format!("reading namespace {namespace}"))?
        .is_none()
    {
        let manifest = kstack_render::Object::Namespace(kubernetes::namespace(&config.globals))
            .to_json_value();
        cluster
            .apply(&manifest)
            .await
            .with_context(|| format!("creating namespace {namespace}"))?;
    }
    Ok(())
}

/// Takes the cloud's deploy lock for `command`: creates the namespace first if it does not
/// exist (the Lease lives in it), waits for another writer unless `no_wait`, printing whom it
/// waits for. `Err(code)` when refused.
async fn take_lock(
    target: &Target,
    config: &Config,
    command: &str,
    no_wait: bool,
) -> anyhow::Result<Result<kstack_kube::lock::DeployLock, Exit>> {
    // A client of its own: the lock's requests are not the deploy's (its report counts those).
    let client = kstack_kube::client(target.kubeconfig.as_deref()).await?;
    let namespace = &config.globals.kubernetes_namespace;
    let cluster = KubeCluster::new(client.clone());
    ensure_namespace(&cluster, config).await?;
    let identity = kstack_kube::lock::identity(command);
    let on_wait = |h: &kstack_kube::lock::Holder| {
        eprintln!(
            "waiting for the deploy lock of namespace {namespace}: held by {h} (--no-wait fails at once instead)"
        );
    };
    match kstack_kube::lock::acquire(client, namespace, &identity, !no_wait, &on_wait).await {
        Ok(l) => Ok(Ok(l)),
        Err(e @ kstack_kube::lock::LockError::Held { .. }) => {
            eprintln!("kstack {command}: {e}");
            Ok(Err(Exit::Locked))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::Writer;

    #[test]
    fn a_stopped_writer_says_why_and_what_to_do_next() {
        assert_eq!(
            Writer::Deploy.lost(&"kstack deploy on host-a (pid 42)"),
            "the deploy lock was taken over by kstack deploy on host-a (pid 42) while this deploy could not renew it: stopped; run `kstack deploy` again (it converges)"
        );
        assert_eq!(
            Writer::Rollback.lost(&"kstack deploy on host-a (pid 42)"),
            "the deploy lock was taken over by kstack deploy on host-a (pid 42) while this rollback could not renew it: stopped"
        );
        assert_eq!(
            Writer::Deploy.interrupted(),
            "interrupted: stopped; run `kstack deploy` again (it converges)"
        );
        assert_eq!(
            Writer::Rollback.interrupted(),
            "interrupted: stopped; `kstack status` shows where the service is"
        );
    }
}
