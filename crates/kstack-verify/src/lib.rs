//! `kstack verify`: checks a deployed cloud over its public OpenStack APIs, as a user would.
//!
//! [`run`] walks the [`Step`]s in order: a token, every catalog endpoint, a scratch project and
//! user, an image round trip, a network with a router, a flavor, a server, a Heat stack and
//! Horizon's login page. A step whose service is disabled is skipped; the first failure stops
//! the steps after it. Everything a step creates is recorded the moment the API returns it, and
//! deleted in reverse order at the end, after a failure and after cancellation too (the
//! `cancel` future: Ctrl-C in the CLI). Every name starts with [`Settings::prefix`]
//! (`kstack-verify-<random>`), so leftovers are easy to find.
//!
//! The crate speaks plain HTTP (reqwest) and JSON; it needs no OpenStack client and no cluster.
//! It prints nothing: the [`Report`] (and the [`Event`]s while it runs) go to the caller.
//! Invariant: no password (the admin's, or the scratch user's generated one) appears in a
//! report, an event or a log line; every text that leaves the crate passes the [`Redactor`].
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

mod cleanup;
pub mod compute;
#[cfg(feature = "fake")]
pub mod fake;
mod guest;
mod http;
mod ssh;
mod steps;

pub use guest::{Console, GuestImage};
pub use http::{CallError, error_message};

/// A password: its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(value: impl Into<String>) -> Password {
        Password(value.into())
    }

    /// The value, for the one place that sends it (a token request body).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A random password of 32 letters and digits.
    pub fn generate() -> Password {
        use rand::Rng as _;
        let s: String = rand::thread_rng()
            .sample_iter(&rand::distributions::Alphanumeric)
            .take(32)
            .map(char::from)
            .collect();
        Password(s)
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// Which catalog endpoints to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Interface {
    Public,
    Internal,
    Admin,
}

impl Interface {
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Public => "public",
            Interface::Internal => "internal",
            Interface::Admin => "admin",
        }
    }
}

/// One service of the kstack catalog as verify needs it: its OpenStack project (which decides
/// the steps it serves), whether it is enabled, and the Keystone service type it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceInfo {
    /// `nova` for nova-api, nova-compute, ...: the steps name projects.
    pub project: String,
    pub enabled: bool,
    /// The service type of its Keystone registration (`image` for glance-api), if any.
    pub service_type: Option<String>,
}

/// What to check and how.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Keystone, `http://host:5000` (a trailing `/` or `/v3` is fine).
    pub auth_url: String,
    pub username: String,
    pub password: Password,
    /// The admin's project (scope of the admin token).
    pub project: String,
    pub region: String,
    /// The catalog interface of every endpoint used after the token.
    pub interface: Interface,
    /// kstack catalog services by name (`glance-api`, ...): which steps run, and whose pods to
    /// look at when a step fails.
    pub services: BTreeMap<String, ServiceInfo>,
    /// Horizon's base URL when the catalog has no `dashboard` endpoint.
    pub horizon_url: Option<String>,
    /// Time limit of each wait (image active, server ACTIVE and gone, stack complete and gone).
    pub timeout: Duration,
    /// Pause between two reads of a resource that is not there yet.
    pub poll_interval: Duration,
    /// Time limit of one HTTP call.
    pub request_timeout: Duration,
    /// Size of the generated image.
    pub image_bytes: usize,
    /// The name prefix of everything created, `kstack-verify-<random>`.
    pub prefix: String,
    /// The subnet of the scratch network.
    pub cidr: String,
    /// Host names to reach at a given address instead of asking DNS (a host outside the
    /// cluster: the catalog names Kubernetes Services, `glance-api.openstack.svc`).
    pub resolve: BTreeMap<String, std::net::IpAddr>,
    /// CA certificates trusted besides the usual public roots ([`ca_bundle`]): kstack's own
    /// CA, or the operator's (`kolla_admin_openrc_cacert`), for HTTPS public endpoints.
    pub ca_certificates: Vec<reqwest::Certificate>,
    /// More values to keep out of every report and event (e.g. every passwords.yml value, in
    /// case a service echoes one in an error), besides the two passwords.
    pub secrets: Vec<Password>,
    /// The guest to boot (`hack/guest.sh`'s kernel, initramfs and disk): the server step then
    /// checks on its console that it got its lease and its metadata and started SSH. Without
    /// it the server boots a disk whose boot sector halts the CPU.
    pub guest: Option<GuestImage>,
    /// The external network (name or id) for the router's gateway and the guest's floating
    /// IP; without it, the only `router:external` network the user sees, if there is one.
    pub external_network: Option<String>,
    /// When the cloud has no external network: the subnet (CIDR) of a scratch one the run
    /// makes as the admin (flat, on `physnet1`, its first address the gateway) and deletes.
    pub external_subnet: Option<String>,
    /// Leave what the run made in the cloud instead of deleting it (the server running, its
    /// floating IP, network, project and user): [`Report::kept`] says what, and
    /// [`delete_kept`] deletes it later.
    pub keep: bool,
    /// Whether heat-api-cfn can check AWS-signed requests on this cloud's release
    /// (`Release::heat_cfn_signed_requests`): the stack step's wait condition is then signalled
    /// at its handle's pre-signed heat-api-cfn URL, otherwise with its handle's token at
    /// heat-api.
    pub heat_cfn_signed_requests: bool,
}

impl Settings {
    /// Settings with the defaults: public interface, 300 s waits polled every 2 s, 60 s per
    /// call, a 4 MiB image, a random prefix, subnet 10.99.0.0/24.
    pub fn new(
        auth_url: impl Into<String>,
        username: impl Into<String>,
        password: Password,
        project: impl Into<String>,
        region: impl Into<String>,
    ) -> Settings {
        Settings {
            auth_url: auth_url.into(),
            username: username.into(),
            password,
            project: project.into(),
            region: region.into(),
            interface: Interface::Public,
            services: BTreeMap::new(),
            horizon_url: None,
            timeout: Duration::from_secs(300),
            poll_interval: Duration::from_secs(2),
            request_timeout: Duration::from_secs(60),
            image_bytes: 4 << 20,
            prefix: random_prefix(),
            cidr: "10.99.0.0/24".to_owned(),
            resolve: BTreeMap::new(),
            ca_certificates: Vec::new(),
            secrets: Vec::new(),
            guest: None,
            external_network: None,
            external_subnet: None,
            keep: false,
            heat_cfn_signed_requests: true,
        }
    }

    /// Whether any service of `project` is enabled.
    pub fn project_enabled(&self, project: &str) -> bool {
        self.services
            .values()
            .any(|s| s.project == project && s.enabled)
    }

    /// The enabled kstack services of the projects, by name.
    pub fn services_of(&self, projects: &[&str]) -> Vec<String> {
        self.services
            .iter()
            .filter(|(_, s)| s.enabled && projects.contains(&s.project.as_str()))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The kstack service registering `service_type`.
    pub fn service_of_type(&self, service_type: &str) -> Option<(&str, &ServiceInfo)> {
        self.services
            .iter()
            .find(|(_, s)| s.service_type.as_deref() == Some(service_type))
            .map(|(n, s)| (n.as_str(), s))
    }
}

/// The certificates of a PEM bundle (a CA file), for [`Settings::ca_certificates`]; an error
/// when it holds none.
pub fn ca_bundle(pem: &str) -> Result<Vec<reqwest::Certificate>, String> {
    reqwest::Certificate::from_pem_bundle(pem.as_bytes())
        .ok()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| "it holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)".to_owned())
}

/// `kstack-verify-` and 8 random hex digits.
pub fn random_prefix() -> String {
    format!("kstack-verify-{:08x}", rand::random::<u32>())
}

/// The checks, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Issue a token as the admin (POST /v3/auth/tokens).
    Token,
    /// Every catalog endpoint of the enabled services answers (anything but 5xx).
    Endpoints,
    /// A project and a user with the `member` role on it, and a token as that user.
    ProjectUser,
    /// Upload a generated raw image, wait until active, download it, compare SHA-256.
    Image,
    /// A network, a subnet and a router with the subnet attached.
    Network,
    /// A flavor (1 vCPU, 128 MiB RAM, 1 GiB disk).
    Flavor,
    /// A server on that image, flavor and network: ACTIVE (with Cinder, a volume attached to
    /// it), then deleted and gone (and the volume available again, then deleted).
    Server,
    /// A Heat stack: CREATE_COMPLETE, then deleted. With heat-api-cfn it has a wait condition,
    /// signalled through the pre-signed URL Heat makes for it.
    Stack,
    /// Horizon's login page answers 200 with a login form.
    Horizon,
    /// A 1 GiB Cinder volume: available, then deleted and gone.
    Volume,
}

impl Step {
    pub const ALL: [Step; 10] = [
        Step::Token,
        Step::Endpoints,
        Step::ProjectUser,
        Step::Image,
        Step::Network,
        Step::Flavor,
        Step::Server,
        Step::Stack,
        Step::Horizon,
        Step::Volume,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::Token => "token",
            Step::Endpoints => "endpoints",
            Step::ProjectUser => "project-user",
            Step::Image => "image",
            Step::Network => "network",
            Step::Flavor => "flavor",
            Step::Server => "server",
            Step::Stack => "stack",
            Step::Horizon => "horizon",
            Step::Volume => "volume",
        }
    }

    /// The OpenStack projects the step needs, which are also the ones to blame when it fails.
    /// The step is skipped when one of them is disabled.
    pub fn projects(self) -> &'static [&'static str] {
        match self {
            Step::Token | Step::Endpoints | Step::ProjectUser => &["keystone"],
            Step::Image => &["keystone", "glance"],
            Step::Network => &["keystone", "neutron"],
            Step::Flavor => &["keystone", "nova"],
            Step::Server => &["keystone", "nova", "glance", "neutron"],
            Step::Stack => &["keystone", "heat"],
            Step::Horizon => &["keystone", "horizon"],
            Step::Volume => &["keystone", "cinder"],
        }
    }

    /// The projects whose pods' logs explain a failure of this step (keystone only for its
    /// own steps: every step needs a token, few failures are Keystone's).
    pub fn responsible(self) -> &'static [&'static str] {
        match self {
            Step::Token | Step::Endpoints | Step::ProjectUser => &["keystone"],
            Step::Image => &["glance"],
            Step::Network => &["neutron"],
            Step::Flavor => &["nova"],
            Step::Server => &["nova", "cinder"],
            Step::Stack => &["heat"],
            Step::Horizon => &["horizon"],
            Step::Volume => &["cinder"],
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Ok,
    Failed,
    /// Its service is disabled; counts as passed.
    Skipped,
    /// An earlier step failed (or the run was cancelled) before it started.
    NotRun,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::NotRun => "not-run",
        }
    }
}

/// One step's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    pub step: Step,
    pub result: Outcome,
    pub seconds: f64,
    /// What was checked, or why it failed or was skipped.
    pub detail: String,
    /// The failing API call, when a call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<CallError>,
    /// The kstack services (catalog names) whose pods to look at; empty unless failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
}

/// The deletion of one created resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CleanupReport {
    /// e.g. `image kstack-verify-1a2b3c4d (5f0c…)`.
    pub resource: String,
    /// `Ok` or `Failed`.
    pub result: Outcome,
    pub seconds: f64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Whether every step passed (ok or skipped) and everything created was deleted.
    pub passed: bool,
    /// Whether the run was cancelled.
    pub interrupted: bool,
    pub prefix: String,
    pub auth_url: String,
    pub steps: Vec<StepReport>,
    pub cleanup: Vec<CleanupReport>,
    /// What the run left in the cloud, with [`Settings::keep`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<Kept>,
    /// What deleting the kept resources and logging in to the kept guest need; never printed.
    #[serde(skip)]
    pub kept_secrets: Option<KeptSecrets>,
    /// The whole run, cleanup included.
    pub seconds: f64,
}

/// What a run with [`Settings::keep`] left in the cloud: everything it made and did not delete
/// within a step, oldest first, for a look at it and for [`delete_kept`] later. It holds no
/// secret; those are in [`KeptSecrets`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    pub prefix: String,
    /// The scratch project and user the user's resources belong to.
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    /// The server left running, when the server step got that far.
    pub server_id: Option<String>,
    /// Its floating IP, when the cloud has an external network.
    pub floating_ip: Option<String>,
    /// The guest's user that the run's key logs in as, when the server boots a guest image.
    pub login_user: Option<String>,
    pub resources: Vec<KeptResource>,
}

/// One resource a kept run made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptResource {
    /// What it is (`server`, `floating IP`, ...).
    pub kind: String,
    pub id: String,
    /// The URL that deletes it (DELETE; PUT with `body` for a router interface).
    pub url: String,
    /// Whose token deletes it: `admin` or `user`.
    pub owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
}

/// The secrets of a kept run, which [`delete_kept`] needs and an operator needs to log in to
/// the guest; never part of a [`Report`].
#[derive(Clone, PartialEq)]
pub struct KeptSecrets {
    /// The scratch user's password.
    pub user_password: Password,
    /// The run's SSH private key (OpenSSH format), when the server boots a guest image.
    pub ssh_private_key: Option<Password>,
}

impl fmt::Debug for KeptSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeptSecrets(<redacted>)")
    }
}

impl Report {
    /// The step that failed (at most one: the first failure stops the run).
    pub fn failed_step(&self) -> Option<&StepReport> {
        self.steps.iter().find(|s| s.result == Outcome::Failed)
    }

    /// The deletions that failed: what may be left in the cloud.
    pub fn leftovers(&self) -> impl Iterator<Item = &CleanupReport> {
        self.cleanup.iter().filter(|c| c.result == Outcome::Failed)
    }
}

/// Progress while [`run`] works; every text in it is redacted.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    Started(Step),
    Finished(&'a StepReport),
    Cleaned(&'a CleanupReport),
}

/// Replaces every known secret in a text with `<redacted>`.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<Password>,
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = Password>) -> Redactor {
        let mut secrets: Vec<Password> = secrets
            .into_iter()
            .filter(|p| !p.expose().is_empty())
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|p| std::cmp::Reverse(p.expose().len()));
        Redactor { secrets }
    }

    pub fn add(&mut self, secret: Password) {
        let all = std::mem::take(&mut self.secrets);
        *self = Redactor::new(all.into_iter().chain([secret]));
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            if out.contains(s.expose()) {
                out = out.replace(s.expose(), "<redacted>");
            }
        }
        out
    }

    fn step(&self, mut r: StepReport) -> StepReport {
        r.detail = self.redact(&r.detail);
        if let Some(c) = &mut r.call {
            c.url = self.redact(&c.url);
            c.message = self.redact(&c.message);
        }
        r
    }

    fn cleanup(&self, mut r: CleanupReport) -> CleanupReport {
        r.resource = self.redact(&r.resource);
        r.detail = self.redact(&r.detail);
        r
    }
}

/// Runs every step, then deletes what they created, also when a step failed or `cancel`
/// completed first (the step running then is reported as failed, `interrupted`).
pub async fn run(
    settings: &Settings,
    cancel: impl Future<Output = ()>,
    on_event: &(dyn Fn(Event<'_>) + Sync),
) -> Report {
    let started = Instant::now();
    let mut state = steps::Run::new(settings);
    let mut reports: Vec<StepReport> = Vec::new();
    let interrupted = {
        let work = state.steps(&mut reports, on_event);
        tokio::pin!(work);
        tokio::pin!(cancel);
        tokio::select! {
            biased;
            () = &mut work => false,
            () = &mut cancel => true,
        }
    };
    if interrupted {
        let now = reports.len();
        let elapsed = state
            .step_started
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        for (i, step) in Step::ALL.iter().enumerate().skip(now) {
            let r = if i == now {
                StepReport {
                    step: *step,
                    result: Outcome::Failed,
                    seconds: elapsed,
                    detail: "interrupted".to_owned(),
                    call: None,
                    services: Vec::new(),
                }
            } else {
                skipped(settings, *step).unwrap_or_else(|| not_run(*step, "run interrupted"))
            };
            on_event(Event::Finished(&r));
            reports.push(r);
        }
    }
    // A kept run leaves everything, also after a failure: that is when a look at it helps most.
    // An interrupted one cleans up as always.
    let (cleanup, kept) = if settings.keep && !interrupted {
        (Vec::new(), Some(state.kept()))
    } else {
        (state.cleanup(on_event).await, None)
    };
    let (kept, kept_secrets) = kept.unzip();
    let passed = !interrupted
        && reports
            .iter()
            .all(|r| matches!(r.result, Outcome::Ok | Outcome::Skipped))
        && cleanup.iter().all(|c| c.result == Outcome::Ok);
    Report {
        passed,
        interrupted,
        prefix: settings.prefix.clone(),
        auth_url: state.redactor.redact(&settings.auth_url),
        steps: reports,
        cleanup,
        kept,
        kept_secrets,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// How long the kept run's guest has been up: an SSH login at its floating IP with the run's
/// key, then `/proc/uptime`. A guest that still runs since the run answers with more than the
/// time since then; one that rebooted, with less.
pub async fn kept_guest_uptime(
    kept: &Kept,
    secrets: &KeptSecrets,
    timeout: Duration,
) -> Result<Duration, String> {
    let (Some(ip), Some(user), Some(key)) = (
        &kept.floating_ip,
        &kept.login_user,
        &secrets.ssh_private_key,
    ) else {
        return Err(format!(
            "the kept run {} has no guest to log in to (no floating IP, guest user or key)",
            kept.prefix
        ));
    };
    let key = ssh::Key::from_openssh(key.expose())?;
    let ip: std::net::IpAddr = ip
        .parse()
        .map_err(|_| format!("the kept floating IP {ip:?} is not an address"))?;
    let session = ssh::Session::login(std::net::SocketAddr::new(ip, 22), user, &key, timeout)
        .await
        .map_err(|e| format!("server {:?} at {ip}: {e}", kept.server_id))?;
    let (status, out) = session
        .run("cat /proc/uptime", timeout)
        .await
        .map_err(|e| format!("{ip}: {e}"))?;
    let secs: f64 = out
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .filter(|_| status == 0)
        .ok_or_else(|| format!("{ip}: `cat /proc/uptime` exited {status} with {out:?}"))?;
    Ok(Duration::from_secs_f64(secs))
}

/// Deletes what a kept run left ([`Kept`], with its [`KeptSecrets`]): the user's resources
/// with the scratch user's token, the rest with the admin's (from `settings`), servers first,
/// then newest first, as a run's own cleanup does. A resource already gone counts as deleted.
pub async fn delete_kept(
    settings: &Settings,
    kept: &Kept,
    secrets: &KeptSecrets,
    on_event: &(dyn Fn(Event<'_>) + Sync),
) -> Result<Vec<CleanupReport>, String> {
    let mut state = steps::Run::for_kept(settings, secrets.user_password.clone());
    state.login_for_kept(kept).await?;
    state.restore_kept(kept)?;
    Ok(state.cleanup(on_event).await)
}

/// The report of a step whose service is disabled, `None` when all it needs is enabled.
fn skipped(settings: &Settings, step: Step) -> Option<StepReport> {
    let p = step
        .projects()
        .iter()
        .find(|p| !settings.project_enabled(p))?;
    Some(StepReport {
        step,
        result: Outcome::Skipped,
        seconds: 0.0,
        detail: format!("{p} not enabled"),
        call: None,
        services: Vec::new(),
    })
}

fn not_run(step: Step, why: &str) -> StepReport {
    StepReport {
        step,
        result: Outcome::NotRun,
        seconds: 0.0,
        detail: why.to_owned(),
        call: None,
        services: Vec::new(),
    }
}

/// Seconds since `t`, rounded to milliseconds.
fn secs(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_debug_is_redacted() {
        let p = Password::new("hunter2-secret");
        assert!(!format!("{p:?}").contains("hunter2"));
        let s = Settings::new("http://k:5000", "admin", p, "admin", "RegionOne");
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn redactor_replaces_every_secret_longest_first() {
        let r = Redactor::new([Password::new("abc"), Password::new("abcdef")]);
        assert_eq!(r.redact("x abcdef y abc z"), "x <redacted> y <redacted> z");
        assert_eq!(Redactor::new([Password::new("")]).redact("a b"), "a b");
    }

    #[test]
    fn prefixes_are_random_and_named() {
        let (a, b) = (random_prefix(), random_prefix());
        assert!(a.starts_with("kstack-verify-") && a.len() == 22, "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn generated_passwords_differ() {
        assert_ne!(Password::generate(), Password::generate());
        assert_eq!(Password::generate().expose().len(), 32);
    }
}
