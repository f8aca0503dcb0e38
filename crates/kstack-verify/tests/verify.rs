//! The verify steps and their cleanup against the fake OpenStack of `kstack_verify::fake`: a healthy cloud
//! passes and is left as it was; a failing call stops the steps after it, is named in the
//! report, and everything made before it is still deleted; disabled services are skipped and
//! never called; cancellation cleans up; no password ever appears in a report.
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use kstack_verify::fake::{self, ADMIN_PASSWORD, Fault, Shared};
use kstack_verify::{Event, Outcome, Password, Report, ServiceInfo, Settings, Step};

fn services(disabled: &[&str]) -> BTreeMap<String, ServiceInfo> {
    [
        ("keystone", "keystone", Some("identity")),
        ("glance-api", "glance", Some("image")),
        ("placement-api", "placement", Some("placement")),
        ("nova-api", "nova", Some("compute")),
        ("nova-compute", "nova", None),
        ("neutron-server", "neutron", Some("network")),
        ("heat-api", "heat", Some("orchestration")),
        ("heat-api-cfn", "heat", Some("cloudformation")),
        ("heat-engine", "heat", None),
        ("horizon", "horizon", None),
        ("cinder-api", "cinder", Some("block-storage")),
    ]
    .into_iter()
    .map(|(name, project, ty)| {
        (
            name.to_owned(),
            ServiceInfo {
                project: project.to_owned(),
                enabled: !disabled.contains(&project),
                service_type: ty.map(str::to_owned),
            },
        )
    })
    .collect()
}

fn settings(fake: &Shared, disabled: &[&str]) -> Settings {
    let base = fake.lock().unwrap().base.clone();
    let mut s = Settings::new(
        format!("{base}/identity/v3/"),
        "admin",
        Password::new(ADMIN_PASSWORD),
        "admin",
        "RegionOne",
    );
    s.services = services(disabled);
    s.horizon_url = Some(format!("{base}/dashboard/"));
    s.timeout = Duration::from_secs(5);
    s.poll_interval = Duration::from_millis(10);
    s.request_timeout = Duration::from_secs(10);
    s.image_bytes = 3 << 20;
    s
}

/// Runs verify; returns the report and the events it sent, as lines.
async fn verify(s: &Settings) -> (Report, Vec<String>) {
    verify_until(s, std::future::pending()).await
}

async fn verify_until(
    s: &Settings,
    cancel: impl std::future::Future<Output = ()>,
) -> (Report, Vec<String>) {
    let events = Mutex::new(Vec::new());
    let on_event = |e: Event<'_>| {
        let line = match e {
            Event::Started(step) => format!("start {step}"),
            Event::Finished(r) => format!("{} {} {}", r.step, r.result.as_str(), r.detail),
            Event::Cleaned(c) => {
                format!("cleanup {} {} {}", c.resource, c.result.as_str(), c.detail)
            }
        };
        events.lock().unwrap().push(line);
    };
    let report = kstack_verify::run(s, cancel, &on_event).await;
    (report, events.into_inner().unwrap())
}

fn results(r: &Report) -> Vec<(Step, Outcome)> {
    r.steps.iter().map(|s| (s.step, s.result)).collect()
}

/// The report and the events as the CLI would show them, for secret checks.
fn everything(r: &Report, events: &[String]) -> String {
    format!(
        "{}\n{r:?}\n{}",
        serde_json::to_string(r).unwrap(),
        events.join("\n")
    )
}

#[tokio::test]
async fn a_healthy_cloud_passes_every_step_and_is_left_as_it_was() {
    let fake = fake::start().await;
    let s = settings(&fake, &[]);
    let (report, events) = verify(&s).await;
    assert!(report.passed, "{report:#?}");
    assert_eq!(
        results(&report),
        Step::ALL
            .iter()
            .map(|s| (*s, Outcome::Ok))
            .collect::<Vec<_>>()
    );
    let st = fake.lock().unwrap();
    assert_eq!(st.leftovers(), Vec::<String>::new());
    // Everything it made was deleted by cleanup, newest first, except what the server and
    // stack steps delete themselves.
    let cleaned: Vec<&str> = report
        .cleanup
        .iter()
        .map(|c| c.resource.split(' ').next().unwrap())
        .collect();
    // The router's interface (a "router" entry) goes before the subnet it holds, the router
    // after its networks.
    assert_eq!(
        cleaned,
        [
            "flavor", "router", "subnet", "network", "router", "image", "user", "project"
        ]
    );
    assert!(report.cleanup.iter().all(|c| c.result == Outcome::Ok));
    assert!(report.cleanup[0].resource.contains(&report.prefix));
    // The image went up and came back whole, the endpoints were each called.
    let image = &report.steps[3];
    assert!(
        image.detail.contains("3.0 MiB") && image.detail.contains("same SHA-256"),
        "{}",
        image.detail
    );
    assert!(
        report.steps[1].detail.starts_with(
            "8 public endpoints answer: identity, image, compute, placement, network, orchestration, cloudformation, block-storage"
        ),
        "{}",
        report.steps[1].detail
    );
    for root in [
        "GET /identity",
        "GET /image",
        "GET /placement",
        "GET /network",
        "GET /heat/v1/p-admin",
    ] {
        assert!(
            st.calls.iter().any(|c| c == root),
            "{root} not probed: {:?}",
            st.calls
        );
    }
    assert!(st.called("PUT /network/v2.0/routers/router-"));
    // The stack's wait condition was signalled through its pre-signed URL, whose signature
    // (a credential) appears nowhere in the report or the events.
    assert_eq!(st.cfn_signals, 1);
    let stack = &report.steps[7];
    assert!(
        stack
            .detail
            .contains("wait condition signalled through heat-api-cfn"),
        "{}",
        stack.detail
    );
    assert!(!everything(&report, &events).contains("FAKE-SIGNATURE"));
    // Every step reported its start and end, in order.
    let starts: Vec<&String> = events.iter().filter(|e| e.starts_with("start ")).collect();
    assert_eq!(starts.len(), 10);
    assert!(!everything(&report, &events).contains(ADMIN_PASSWORD));
    // A volume was attached to the running server, released by its deletion, then deleted.
    let server = &report.steps[6];
    assert!(
        server.detail.contains(
            "a 1 GiB volume attached (in-use) after 0.0 s, available again once the server was deleted"
        ),
        "{}",
        server.detail
    );
    assert!(st.attached.is_empty());
    assert!(
        st.calls
            .iter()
            .any(|c| c.starts_with("POST /compute/v2.1/servers/server-")
                && c.ends_with("/os-volume_attachments")),
        "{:?}",
        st.calls
    );
    // The volume was made, became available and was deleted by its own step.
    let volume = &report.steps[9];
    assert!(
        volume.detail.contains("1 GiB volume available after")
            && volume.detail.contains("deleted and gone"),
        "{}",
        volume.detail
    );
    assert!(st.called("POST /volume/v3/volumes") && st.called("DELETE /volume/v3/volumes/"));
}

#[tokio::test]
async fn a_failing_image_upload_stops_later_steps_names_the_call_and_still_cleans_up() {
    let fake = fake::start().await;
    fake.lock().unwrap().faults.push(Fault {
        method: "PUT".into(),
        path: "/file".into(),
        status: 500,
        body: r#"{"message": "store full: 0 bytes left on /var/lib/glance"}"#.into(),
        echo: false,
    });
    let s = settings(&fake, &[]);
    let (report, events) = verify(&s).await;
    assert!(!report.passed);
    use Outcome::*;
    assert_eq!(
        results(&report),
        vec![
            (Step::Token, Ok),
            (Step::Endpoints, Ok),
            (Step::ProjectUser, Ok),
            (Step::Image, Failed),
            (Step::Network, NotRun),
            (Step::Flavor, NotRun),
            (Step::Server, NotRun),
            (Step::Stack, NotRun),
            (Step::Horizon, NotRun),
            (Step::Volume, NotRun),
        ]
    );
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Image);
    let call = failed.call.as_ref().expect("the failing call");
    assert_eq!(call.method, "PUT");
    assert!(
        call.path().starts_with("/image/v2/images/image-") && call.path().ends_with("/file"),
        "{}",
        call.path()
    );
    assert_eq!(call.status, Some(500));
    assert_eq!(call.message, "store full: 0 bytes left on /var/lib/glance");
    assert!(
        failed.detail.contains("PUT http://127.0.0.1:")
            && failed.detail.contains("HTTP 500: store full"),
        "{}",
        failed.detail
    );
    assert_eq!(failed.services, ["glance-api"]);
    assert_eq!(report.steps[4].detail, "image failed");
    let st = fake.lock().unwrap();
    // Nothing after the image was attempted.
    assert!(
        !st.called("POST /network") && !st.called("POST /compute") && !st.called("POST /heat"),
        "{:?}",
        st.calls
    );
    // What was made before the failure is gone: the image, the user, the project.
    assert_eq!(st.leftovers(), Vec::<String>::new());
    let cleaned: Vec<&str> = report
        .cleanup
        .iter()
        .map(|c| c.resource.split(' ').next().unwrap())
        .collect();
    assert_eq!(cleaned, ["image", "user", "project"]);
    assert!(!everything(&report, &events).contains(ADMIN_PASSWORD));
}

#[tokio::test]
async fn cleanup_errors_are_reported_without_hiding_the_first_failure() {
    let fake = fake::start().await;
    {
        let mut st = fake.lock().unwrap();
        st.server_fault =
            Some("No valid host was found. There are not enough hosts available.".into());
        st.faults.push(Fault {
            method: "DELETE".into(),
            path: "/compute/v2.1/flavors/".into(),
            status: 503,
            body:
                "<html><body><h1>503 Service Unavailable</h1>nova-api is restarting</body></html>"
                    .into(),
            echo: false,
        });
    }
    let s = settings(&fake, &[]);
    let (report, _) = verify(&s).await;
    assert!(!report.passed);
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Server);
    assert!(
        failed.detail.ends_with(
            "went to ERROR: No valid host was found. There are not enough hosts available."
        ),
        "{}",
        failed.detail
    );
    // Cinder's too, since the server step attaches a volume when Cinder is there.
    assert_eq!(failed.services, ["cinder-api", "nova-api", "nova-compute"]);
    // The server in ERROR was deleted, the flavor could not be, everything else was.
    let leftovers: Vec<&str> = report.leftovers().map(|c| c.resource.as_str()).collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    assert!(leftovers[0].starts_with("flavor kstack-verify-"));
    let flavor = report.leftovers().next().unwrap();
    assert!(
        flavor.detail.contains("DELETE http://")
            && flavor
                .detail
                .contains("HTTP 503: 503 Service Unavailable nova-api is restarting"),
        "{}",
        flavor.detail
    );
    assert_eq!(report.cleanup[0].resource.split(' ').next(), Some("server"));
    let st = fake.lock().unwrap();
    assert_eq!(st.leftovers().len(), 1, "{:?}", st.leftovers());
    assert!(st.leftovers()[0].starts_with("flavor "));
}

#[tokio::test]
async fn disabled_services_are_skipped_and_never_called() {
    let fake = fake::start().await;
    let s = settings(&fake, &["glance", "heat", "horizon"]);
    let (report, _) = verify(&s).await;
    assert!(report.passed, "{report:#?}");
    use Outcome::*;
    assert_eq!(
        results(&report),
        vec![
            (Step::Token, Ok),
            (Step::Endpoints, Ok),
            (Step::ProjectUser, Ok),
            (Step::Image, Skipped),
            (Step::Network, Ok),
            (Step::Flavor, Ok),
            (Step::Server, Skipped),
            (Step::Stack, Skipped),
            (Step::Horizon, Skipped),
            (Step::Volume, Ok),
        ]
    );
    assert_eq!(report.steps[3].detail, "glance not enabled");
    assert_eq!(report.steps[6].detail, "glance not enabled");
    assert_eq!(report.steps[7].detail, "heat not enabled");
    assert_eq!(report.steps[8].detail, "horizon not enabled");
    assert!(
        report.steps[1]
            .detail
            .contains("not checked, service disabled: image, orchestration"),
        "{}",
        report.steps[1].detail
    );
    let st = fake.lock().unwrap();
    assert!(
        !st.called("GET /image")
            && !st.called("POST /image")
            && !st.called("GET /heat")
            && !st.called("GET /dashboard"),
        "{:?}",
        st.calls
    );
    assert_eq!(st.leftovers(), Vec::<String>::new());
}

#[tokio::test]
async fn without_keystone_everything_is_skipped() {
    let fake = fake::start().await;
    let s = settings(&fake, &["keystone"]);
    let (report, _) = verify(&s).await;
    assert!(report.passed);
    assert!(
        report
            .steps
            .iter()
            .all(|s| s.result == Outcome::Skipped && s.detail == "keystone not enabled")
    );
    assert!(fake.lock().unwrap().calls.is_empty());
}

#[tokio::test]
async fn a_broken_endpoint_fails_the_endpoint_step_naming_its_service() {
    let fake = fake::start().await;
    fake.lock().unwrap().broken_type = Some("placement".into());
    let s = settings(&fake, &[]);
    let (report, _) = verify(&s).await;
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Endpoints);
    assert!(
        failed
            .detail
            .starts_with("1 of 8 endpoints failed: placement: GET http://127.0.0.1:"),
        "{}",
        failed.detail
    );
    assert!(
        failed
            .detail
            .ends_with("/broken/placement: HTTP 503: Service Unavailable: no healthy upstream"),
        "{}",
        failed.detail
    );
    assert_eq!(failed.services, ["placement-api"]);
    assert_eq!(failed.call.as_ref().unwrap().status, Some(503));
    assert!(report.cleanup.is_empty());
}

#[tokio::test]
async fn an_enabled_service_missing_from_the_catalog_fails() {
    let fake = fake::start().await;
    fake.lock().unwrap().no_volume = true;
    let s = settings(&fake, &[]);
    let (report, _) = verify(&s).await;
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Endpoints);
    assert!(failed.detail.contains("no public endpoint of type block-storage in region RegionOne (registered by cinder-api)"), "{}", failed.detail);
    assert_eq!(failed.services, ["cinder-api"]);
}

#[tokio::test]
async fn cancellation_stops_the_running_step_and_cleans_up_all_it_made() {
    let fake = fake::start().await;
    fake.lock().unwrap().server_never_active = true;
    let s = settings(&fake, &[]);
    let watch = fake.clone();
    // "Ctrl-C" while the server is building.
    let cancel = async move {
        loop {
            if watch
                .lock()
                .unwrap()
                .calls
                .iter()
                .filter(|c| c.starts_with("GET /compute/v2.1/servers/"))
                .count()
                >= 3
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let (report, events) = verify_until(&s, cancel).await;
    assert!(report.interrupted && !report.passed);
    let server = &report.steps[6];
    assert_eq!(
        (server.step, server.result, server.detail.as_str()),
        (Step::Server, Outcome::Failed, "interrupted")
    );
    assert_eq!(report.steps[7].result, Outcome::NotRun);
    assert_eq!(report.steps.len(), 10);
    assert!(
        events.iter().any(|e| e == "server failed interrupted"),
        "{events:?}"
    );
    assert_eq!(report.cleanup[0].resource.split(' ').next(), Some("server"));
    assert!(
        report.cleanup.iter().all(|c| c.result == Outcome::Ok),
        "{:#?}",
        report.cleanup
    );
    assert_eq!(fake.lock().unwrap().leftovers(), Vec::<String>::new());
}

#[tokio::test]
async fn a_server_that_never_becomes_active_times_out_with_its_status() {
    let fake = fake::start().await;
    fake.lock().unwrap().server_never_active = true;
    let mut s = settings(&fake, &[]);
    s.timeout = Duration::from_millis(300);
    let (report, _) = verify(&s).await;
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Server);
    assert!(
        failed
            .detail
            .ends_with("not ACTIVE after 300ms (status BUILD, task state spawning)"),
        "{}",
        failed.detail
    );
    assert_eq!(fake.lock().unwrap().leftovers(), Vec::<String>::new());
}

#[tokio::test]
async fn passwords_echoed_by_a_service_never_reach_the_report() {
    // A broken Keystone that echoes the request body, admin password included, in its error.
    let fake = fake::start().await;
    fake.lock().unwrap().faults.push(Fault {
        method: "POST".into(),
        path: "/identity/v3/auth/tokens".into(),
        status: 401,
        body: "rejected (mysql://keystone:Db-s3cret-of-keystone@mariadb): ".into(),
        echo: true,
    });
    let mut s = settings(&fake, &[]);
    // Any other passwords.yml value the caller names is kept out too.
    s.secrets = vec![Password::new("Db-s3cret-of-keystone")];
    let (report, events) = verify(&s).await;
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Token);
    let all = everything(&report, &events);
    assert!(
        all.contains("rejected (mysql://keystone:<redacted>@mariadb): "),
        "{all}"
    );
    assert!(!all.contains(ADMIN_PASSWORD), "{all}");
    assert!(!all.contains("Db-s3cret-of-keystone"), "{all}");

    // One that echoes the user creation, with the scratch user's generated password.
    let fake = fake::start().await;
    fake.lock().unwrap().faults.push(Fault {
        method: "POST".into(),
        path: "/identity/v3/users".into(),
        status: 400,
        body: "bad user: ".into(),
        echo: true,
    });
    let s = settings(&fake, &[]);
    let (report, events) = verify(&s).await;
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::ProjectUser);
    let all = everything(&report, &events);
    assert!(
        all.contains(r#"\"password\": \"<redacted>\""#)
            || all.contains(r#""password":"<redacted>""#),
        "{all}"
    );
    assert!(!all.contains(ADMIN_PASSWORD));
    // The project made before the failure is gone.
    assert_eq!(fake.lock().unwrap().leftovers(), Vec::<String>::new());
}

#[tokio::test]
async fn an_unreachable_keystone_fails_the_token_step_naming_the_url() {
    let mut s = Settings::new(
        "http://127.0.0.1:1",
        "admin",
        Password::new(ADMIN_PASSWORD),
        "admin",
        "RegionOne",
    );
    s.services = services(&[]);
    let (report, _) = verify(&s).await;
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Token);
    assert!(
        failed
            .detail
            .starts_with("POST http://127.0.0.1:1/v3/auth/tokens: cannot connect: "),
        "{}",
        failed.detail
    );
    assert_eq!(failed.services, ["keystone"]);
    assert_eq!(failed.call.as_ref().unwrap().status, None);
}

#[tokio::test]
async fn service_names_resolve_through_the_given_addresses() {
    // The catalog and the auth URL name hosts no DNS knows, as cluster Service names are
    // outside the cluster; `resolve` maps them.
    let fake = fake::start().await;
    let port = {
        let mut st = fake.lock().unwrap();
        let port = st.base.rsplit(':').next().unwrap().to_owned();
        st.base = format!("http://keystone.cloud.svc:{port}");
        port
    };
    let mut s = settings(&fake, &["horizon"]);
    s.auth_url = format!("http://keystone.cloud.svc:{port}/identity");
    s.resolve.insert(
        "keystone.cloud.svc".into(),
        std::net::IpAddr::from([127, 0, 0, 1]),
    );
    let (report, _) = verify(&s).await;
    assert!(report.passed, "{report:#?}");
    // Without the map the name does not resolve.
    s.resolve.clear();
    let (report, _) = verify(&s).await;
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Token);
    assert!(
        failed.detail.contains("keystone.cloud.svc"),
        "{}",
        failed.detail
    );
    assert_eq!(failed.call.as_ref().unwrap().status, None);
}

#[tokio::test]
async fn without_heat_api_cfn_the_stack_has_no_wait_condition() {
    let fake = fake::start().await;
    fake.lock().unwrap().no_cfn = true;
    let mut s = settings(&fake, &[]);
    s.services.remove("heat-api-cfn");
    let (report, _) = verify(&s).await;
    assert!(report.passed, "{report:#?}");
    let st = fake.lock().unwrap();
    assert_eq!(st.cfn_signals, 0);
    assert!(
        st.calls.iter().all(|c| !c.contains("/resources/handle")),
        "{:?}",
        st.calls
    );
    assert!(
        report.steps[7]
            .detail
            .starts_with("OS::Heat::RandomString stack CREATE_COMPLETE"),
        "{}",
        report.steps[7].detail
    );
}

#[tokio::test]
async fn where_heat_api_cfn_cannot_check_signatures_the_handle_token_signals_at_heat_api() {
    let fake = fake::start().await;
    let mut s = settings(&fake, &[]);
    s.heat_cfn_signed_requests = false;
    let (report, _) = verify(&s).await;
    assert!(report.passed, "{report:#?}");
    let st = fake.lock().unwrap();
    // The stack user's token at the catalog's heat-api URL (the fake answers only there, in
    // the stack's project), not heat-api-cfn's pre-signed URL.
    assert_eq!((st.token_signals, st.cfn_signals), (1, 0));
    assert!(
        st.calls
            .iter()
            .any(|c| c.starts_with("POST /heat/v1/stack-project-")
                && c.ends_with("/resources/handle/signal")),
        "{:?}",
        st.calls
    );
    let detail = &report.steps[7].detail;
    assert!(
        detail.contains("signalled with its handle's token through heat-api")
            && detail.contains("heat-api-cfn cannot check signed requests on this release"),
        "{detail}"
    );
    let text = serde_json::to_string(&report).unwrap();
    assert!(!text.contains("handle-token-"), "{text}");
}

#[tokio::test]
async fn a_refused_wait_condition_signal_fails_the_stack_step_without_its_signature() {
    let fake = fake::start().await;
    fake.lock().unwrap().faults.push(Fault {
        method: "PUT".into(),
        path: "/cfn/v1/waitcondition/".into(),
        status: 403,
        body: r#"{"Error": {"Code": "SignatureDoesNotMatch", "Message": "The request signature we calculated does not match"}}"#.into(),
        echo: false,
    });
    let s = settings(&fake, &[]);
    let (report, events) = verify(&s).await;
    assert!(!report.passed);
    let stack = report.steps.iter().find(|r| r.step == Step::Stack).unwrap();
    assert_eq!(stack.result, Outcome::Failed);
    let text = everything(&report, &events);
    assert!(text.contains("/cfn/v1/waitcondition/stack-"), "{text}");
    assert!(text.contains("HTTP 403"), "{text}");
    assert!(!text.contains("FAKE-SIGNATURE"), "{text}");
    // The stack is still deleted by cleanup.
    assert_eq!(fake.lock().unwrap().leftovers(), Vec::<String>::new());
}

#[tokio::test]
async fn a_volume_that_goes_to_error_fails_the_volume_step_and_is_deleted() {
    let fake = fake::start().await;
    fake.lock().unwrap().volume_error = true;
    // Without nova, the volume step is the first to make a volume.
    let s = settings(&fake, &["nova"]);
    let (report, _) = verify(&s).await;
    assert!(!report.passed);
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Volume);
    assert!(failed.detail.contains("went to error"), "{}", failed.detail);
    assert_eq!(failed.services, ["cinder-api"]);
    // The volume the step made is deleted by the cleanup, first (newest).
    assert_eq!(report.cleanup[0].resource.split(' ').next(), Some("volume"));
    assert_eq!(report.cleanup[0].result, Outcome::Ok);
    let st = fake.lock().unwrap();
    assert_eq!(st.leftovers(), Vec::<String>::new());
}

#[tokio::test]
async fn a_volume_that_cannot_be_attached_fails_the_server_step_and_both_are_deleted() {
    let fake = fake::start().await;
    fake.lock().unwrap().volume_error = true;
    let s = settings(&fake, &[]);
    let (report, _) = verify(&s).await;
    let failed = report.failed_step().unwrap();
    assert_eq!(failed.step, Step::Server);
    assert!(failed.detail.contains("went to error"), "{}", failed.detail);
    assert_eq!(failed.services, ["cinder-api", "nova-api", "nova-compute"]);
    let cleaned: Vec<&str> = report
        .cleanup
        .iter()
        .map(|c| c.resource.split(' ').next().unwrap())
        .collect();
    // The server first: on a real cloud a volume still attached to it cannot be deleted.
    assert_eq!(&cleaned[..2], ["server", "volume"]);
    assert!(report.cleanup.iter().all(|c| c.result == Outcome::Ok));
    assert_eq!(fake.lock().unwrap().leftovers(), Vec::<String>::new());
}

#[tokio::test]
async fn without_cinder_the_volume_step_is_skipped_and_never_called() {
    let fake = fake::start().await;
    let s = settings(&fake, &["cinder"]);
    let (report, _) = verify(&s).await;
    assert!(report.passed, "{report:#?}");
    let volume = report.steps.last().unwrap();
    assert_eq!(
        (volume.step, volume.result),
        (Step::Volume, Outcome::Skipped)
    );
    assert_eq!(volume.detail, "cinder not enabled");
    assert!(!fake.lock().unwrap().called("POST /volume"));
}

#[tokio::test]
async fn a_kept_run_leaves_its_server_running_and_delete_kept_removes_all_of_it() {
    let fake = fake::start().await;
    let mut s = settings(&fake, &[]);
    s.keep = true;
    let (report, events) = verify(&s).await;
    assert!(report.passed, "{report:#?}");
    assert!(report.cleanup.is_empty(), "{:?}", report.cleanup);
    let kept = report
        .kept
        .clone()
        .expect("a kept run reports what it kept");
    let secrets = report.kept_secrets.clone().expect("and its secrets");
    assert_eq!(kept.prefix, s.prefix);
    let server = kept.server_id.clone().expect("the server is kept");
    assert!(
        kept.project_id.is_some() && kept.user_id.is_some(),
        "{kept:?}"
    );
    // The server runs on, with what it needs; what the steps delete themselves (the stack, the
    // volume step's volume) is gone.
    let left = fake.lock().unwrap().leftovers();
    assert!(left.contains(&format!("server {server}")), "{left:?}");
    assert!(
        left.iter().any(|l| l.starts_with("network "))
            && left.iter().any(|l| l.starts_with("project ")),
        "{left:?}"
    );
    assert!(!left.iter().any(|l| l.starts_with("stack ")), "{left:?}");
    let kinds: Vec<&str> = kept.resources.iter().map(|r| r.kind.as_str()).collect();
    assert!(
        kinds.contains(&"server") && kinds.contains(&"user"),
        "{kinds:?}"
    );
    // No guest image: no key to log in with.
    assert_eq!(kept.login_user, None);
    assert_eq!(secrets.ssh_private_key, None);
    // The scratch user's password is in the secrets only, never in the report or the events.
    let shown = everything(&report, &events);
    assert!(!shown.contains(secrets.user_password.expose()), "{shown}");
    assert!(!format!("{secrets:?}").contains(secrets.user_password.expose()));

    // Later, from what was kept (as the CLI reads it back): everything goes.
    let back: kstack_verify::Kept =
        serde_json::from_str(&serde_json::to_string(&kept).unwrap()).unwrap();
    let later = settings(&fake, &[]);
    let cleaned = Mutex::new(Vec::new());
    let reports = kstack_verify::delete_kept(&later, &back, &secrets, &|e| {
        if let Event::Cleaned(c) = e {
            cleaned.lock().unwrap().push(c.resource.clone());
        }
    })
    .await
    .unwrap();
    assert_eq!(reports.len(), kept.resources.len());
    assert!(
        reports.iter().all(|c| c.result == Outcome::Ok),
        "{reports:#?}"
    );
    assert_eq!(cleaned.into_inner().unwrap().len(), reports.len());
    // Servers first, as a run's own cleanup.
    assert!(reports[0].resource.starts_with("server "), "{reports:#?}");
    assert_eq!(fake.lock().unwrap().leftovers(), Vec::<String>::new());
    // A second delete finds everything gone and says so.
    let again = kstack_verify::delete_kept(&later, &back, &secrets, &|_| {})
        .await
        .unwrap();
    assert!(
        again
            .iter()
            .all(|c| c.result == Outcome::Ok && c.detail == "already gone"),
        "{again:#?}"
    );
}

#[tokio::test]
async fn delete_kept_without_the_admin_deletes_nothing_and_says_why() {
    let fake = fake::start().await;
    let mut s = settings(&fake, &[]);
    s.keep = true;
    let (report, _) = verify(&s).await;
    let (kept, secrets) = (report.kept.unwrap(), report.kept_secrets.unwrap());
    let before = fake.lock().unwrap().leftovers();
    let mut wrong = settings(&fake, &[]);
    wrong.password = Password::new("not-the-admin-password");
    let err = kstack_verify::delete_kept(&wrong, &kept, &secrets, &|_| {})
        .await
        .unwrap_err();
    assert!(
        err.contains("401") || err.to_lowercase().contains("auth"),
        "{err}"
    );
    assert!(!err.contains("not-the-admin-password"), "{err}");
    assert_eq!(fake.lock().unwrap().leftovers(), before);
}
