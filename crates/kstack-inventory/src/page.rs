//! The status page: hosts from the store, the cloud from [`kstack_ports::CloudStatus`],
//! server-rendered HTML plus one small embedded script that listens to `/status/events`
//! (Server-Sent Events, one `change` event per host or cloud change) and then fetches
//! `/status/live`, the same server-rendered fragment, to replace the live part of the page.
//! Nothing polls on a timer; nothing is loaded from elsewhere (the script and stylesheet are
//! compiled into the binary).
//!
//! Auth: the page takes the API's bearer tokens (the reader role may view). A browser cannot
//! send a bearer header when it navigates, so `GET /status` without one shows a login form that
//! posts the token to `POST /status/login`, which answers with a cookie holding it: HttpOnly
//! (scripts cannot read it), `SameSite=Strict` (no other site's page can make the browser send
//! it), `Path=/status` (the REST API never reads it, so it cannot be used to change anything),
//! `Secure` when the service serves HTTPS or sits behind a proxy that does, 8 hours. The cookie
//! is checked like a bearer header on every request, so a revoked token stops working at once.

use std::convert::Infallible;
use std::fmt::Write as _;

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use kstack_ports::cloud::{Health, Snapshot, broadcast_changes};
use serde::Deserialize;

use crate::api::{AppState, Role};
use crate::error::Error;
use crate::store::HostRow;

/// The cookie that carries the token of a signed-in browser.
pub const COOKIE: &str = "kstack_status";
/// How long a sign-in lasts.
pub const COOKIE_MAX_AGE_SECS: u64 = 8 * 3600;

const SCRIPT: &str = include_str!("page/status.js");
const STYLE: &str = include_str!("page/status.css");

/// Paths served without a token: the login form's target and the static assets (nothing in
/// them depends on the inventory).
pub(crate) fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/status/login" | "/status/logout" | "/status/status.js" | "/status/status.css"
    )
}

/// Paths of the page, where the cookie is accepted in place of a bearer header (on reads).
pub(crate) fn is_page(path: &str) -> bool {
    path == "/status" || path.starts_with("/status/")
}

/// The token in the status cookie (hex-encoded, so any token fits a cookie value).
pub(crate) fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .and_then(|(_, v)| unhex(v))
}

fn hex(s: &str) -> String {
    s.bytes()
        .fold(String::with_capacity(s.len() * 2), |mut o, b| {
            let _ = write!(o, "{b:02x}");
            o
        })
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) || s.is_empty() {
        return None;
    }
    let bytes = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// Escapes text for HTML content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Headers of every HTML answer: nothing but this origin's script and stylesheet may load, the
/// page may not be framed, nothing is cached (it shows labels and host names).
fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

const HEAD: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>kstack status</title><link rel=\"stylesheet\" href=\"/status/status.css\">";

/// The login form, with `problem` said above it.
pub(crate) fn login_page(status: StatusCode, problem: Option<&str>) -> Response {
    let mut b = String::from(HEAD);
    b.push_str("</head><body><main class=\"login\"><h1>kstack status</h1>");
    if let Some(p) = problem {
        let _ = write!(
            b,
            "<p class=\"problem\" id=\"login-problem\">{}</p>",
            esc(p)
        );
    }
    b.push_str(
        "<form method=\"post\" action=\"/status/login\">\
         <label for=\"token\">Inventory token (admin or reader)</label>\
         <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required>\
         <button type=\"submit\">Sign in</button></form>\
         <p class=\"note\">The token is kept in an HttpOnly cookie for this page only, for 8 hours.</p>\
         </main></body></html>",
    );
    html(status, b)
}

/// The body of `POST /status/login`.
#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

/// Checks the token like the API does; on success sets the cookie and sends the browser to the
/// page. The answer is a page that moves on by itself rather than a redirect, so the browser
/// sends the `SameSite=Strict` cookie on the next request even when the form came from
/// elsewhere (a redirect would be part of that cross-site navigation).
pub(crate) async fn login(
    State(state): State<AppState>,
    form: Result<Form<LoginForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return login_page(
            StatusCode::BAD_REQUEST,
            Some("send the form: token=<your token>, form-encoded"),
        );
    };
    let token = form.token.trim();
    match crate::api::role_of(&state, token).await {
        Ok(_role) => {
            let mut cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/status; Max-Age={COOKIE_MAX_AGE_SECS}",
                hex(token)
            );
            if state.secure_cookie {
                cookie.push_str("; Secure");
            }
            let mut r = html(
                StatusCode::OK,
                format!(
                    "{HEAD}<meta http-equiv=\"refresh\" content=\"0; url=/status\"></head>\
                     <body><main class=\"login\"><p>Signed in. <a href=\"/status\">Open the status page</a>.</p></main></body></html>"
                ),
            );
            match HeaderValue::from_str(&cookie) {
                Ok(v) => {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                    r
                }
                Err(_) => login_page(
                    StatusCode::BAD_REQUEST,
                    Some("that token cannot be kept in a cookie"),
                ),
            }
        }
        Err(Error::Unauthorized) => {
            tracing::info!("status page: sign-in refused (token not accepted)");
            login_page(
                StatusCode::UNAUTHORIZED,
                Some("That token is not accepted."),
            )
        }
        Err(e) => login_page(e.status(), Some(&e.to_string())),
    }
}

/// Clears the cookie.
pub(crate) async fn logout() -> Response {
    let mut r = login_page(StatusCode::OK, Some("Signed out."));
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "kstack_status=; HttpOnly; SameSite=Strict; Path=/status; Max-Age=0",
        ),
    );
    r
}

pub(crate) async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        SCRIPT,
    )
        .into_response()
}

pub(crate) async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        STYLE,
    )
        .into_response()
}

/// What the page shows, read once.
pub struct View {
    pub hosts: Vec<HostRow>,
    /// `(host uuid, key, value)`, sorted by host uuid.
    pub labels: Vec<(String, String, String)>,
    pub cloud: Snapshot,
}

impl View {
    pub async fn read(state: &AppState) -> Result<View, Error> {
        let (hosts, labels, cloud) = tokio::join!(
            state.store.list_hosts(),
            state.store.all_labels(),
            state.cloud.snapshot()
        );
        Ok(View {
            hosts: hosts?,
            labels: labels?,
            cloud,
        })
    }
}

/// `GET /status`: the whole page.
pub(crate) async fn page(State(state): State<AppState>) -> Result<Response, Error> {
    let view = View::read(&state).await?;
    Ok(html(StatusCode::OK, render_page(&view)))
}

/// `GET /status/live`: the live part of the page, which the script swaps in after a change.
pub(crate) async fn live(State(state): State<AppState>) -> Result<Response, Error> {
    let view = View::read(&state).await?;
    Ok(html(StatusCode::OK, render_live(&view)))
}

/// `GET /status/events`: a `hello` event, then a `change` event (data `hosts` or `cloud`) after
/// each change; comments keep the connection open through proxies.
pub(crate) async fn events(
    State(state): State<AppState>,
) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>>> {
    let hosts = broadcast_changes(state.host_changes.subscribe()).map(|()| "hosts");
    let cloud = state.cloud.changes().map(|()| "cloud");
    let changes = futures::stream::select(hosts, cloud)
        .map(|what| Ok(Event::default().event("change").data(what)));
    let hello =
        futures::stream::once(async { Ok(Event::default().event("hello").data("listening")) });
    Sse::new(hello.chain(changes)).keep_alive(KeepAlive::default())
}

/// The whole page: head, header, the live part.
pub fn render_page(view: &View) -> String {
    let live = render_live(view);
    let mut b = String::with_capacity(live.len() + 1024);
    b.push_str(HEAD);
    b.push_str("<script src=\"/status/status.js\" defer></script></head><body>");
    b.push_str(
        "<header><h1>kstack status</h1><span id=\"conn\" class=\"conn\" data-state=\"connecting\">connecting</span>\
         <form method=\"post\" action=\"/status/logout\"><button type=\"submit\">Sign out</button></form></header>",
    );
    b.push_str("<main id=\"live\">");
    b.push_str(&live);
    b.push_str("</main></body></html>");
    b
}

fn health_class(h: Health) -> &'static str {
    match h {
        Health::Healthy => "ok",
        Health::Progressing => "warn",
        Health::Failed | Health::Missing => "bad",
        Health::Removed => "off",
    }
}

/// The live part: the cloud (graph and services with their history), then the hosts.
pub fn render_live(view: &View) -> String {
    let mut b = String::with_capacity(256 * view.hosts.len() + 4096);
    render_cloud(&mut b, &view.cloud);
    render_hosts(&mut b, &view.hosts, &view.labels);
    b
}

fn render_cloud(b: &mut String, cloud: &Snapshot) {
    let failing = cloud
        .services
        .iter()
        .filter(|s| health_class(s.health) == "bad")
        .count();
    let _ = write!(
        b,
        "<section id=\"cloud\"><h2>Cloud{}{}</h2>",
        if cloud.namespace.is_empty() {
            String::new()
        } else {
            format!(" <code>{}</code>", esc(&cloud.namespace))
        },
        cloud
            .deploy_generation
            .map(|g| format!(", deploy generation {g}"))
            .unwrap_or_default()
    );
    if let Some(p) = &cloud.problem {
        let _ = write!(b, "<p class=\"problem\">{}</p>", esc(p));
    }
    let _ = write!(
        b,
        "<p id=\"summary\" data-services=\"{}\" data-failing=\"{failing}\">{} services, {failing} failing</p>",
        cloud.services.len(),
        cloud.services.len()
    );
    if cloud.services.is_empty() {
        b.push_str("</section>");
        return;
    }
    render_graph(b, cloud);
    b.push_str(
        "<table id=\"services\"><thead><tr><th>service</th><th>health</th><th>ready</th>\
         <th>generation</th><th>history</th></tr></thead><tbody>",
    );
    for s in &cloud.services {
        let _ = write!(
            b,
            "<tr id=\"svc-{n}\" class=\"{c}\" data-health=\"{h}\"><td>{n}<br><small>{k}</small></td>\
             <td class=\"health\">{h}{r}</td><td>{ready}/{desired}</td><td>{g}</td><td>",
            n = esc(&s.name),
            c = health_class(s.health),
            h = s.health.as_str(),
            k = esc(&s.kind),
            r = s
                .reason
                .as_deref()
                .map(|r| format!("<br><small>{}</small>", esc(r)))
                .unwrap_or_default(),
            ready = s.ready,
            desired = s.desired,
            g = s.generation.map(|g| g.to_string()).unwrap_or("-".into()),
        );
        render_last_deploy(b, s);
        if s.history.is_empty() {
            b.push_str("none recorded");
        } else {
            let _ = write!(
                b,
                "<details id=\"hist-{}\"><summary>{} generation{}</summary><table class=\"history\">\
                 <tr><th>gen</th><th>deploy</th><th>time</th><th>outcome</th><th>images</th></tr>",
                esc(&s.name),
                s.history.len(),
                if s.history.len() == 1 { "" } else { "s" }
            );
            for g in &s.history {
                let _ = write!(
                    b,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    g.generation,
                    g.deploy_generation,
                    esc(&g.time),
                    esc(&g.outcome),
                    g.images
                        .iter()
                        .map(|i| format!("<code>{}</code>", esc(i)))
                        .collect::<Vec<_>>()
                        .join("<br>")
                );
            }
            b.push_str("</table></details>");
        }
        b.push_str("</td></tr>");
    }
    b.push_str("</tbody></table></section>");
}

/// The steps of the deploy that wrote the service's newest generation: a folded table of
/// step, action, start (UTC, the full time on hover), duration and outcome.
fn render_last_deploy(b: &mut String, s: &kstack_ports::cloud::Service) {
    if s.last_deploy.is_empty() {
        return;
    }
    let failed = s
        .last_deploy
        .iter()
        .filter(|st| st.outcome != "done")
        .count();
    let _ = write!(
        b,
        "<details id=\"steps-{n}\" class=\"steps\"><summary>last deploy{d}: {c} step{p}{f}</summary>\
         <table class=\"steps\"><tr><th>step</th><th>action</th><th>started</th><th>took</th><th>outcome</th></tr>",
        n = esc(&s.name),
        d = s
            .history
            .first()
            .map(|g| format!(" (deploy {})", g.deploy_generation))
            .unwrap_or_default(),
        c = s.last_deploy.len(),
        p = if s.last_deploy.len() == 1 { "" } else { "s" },
        f = if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        },
    );
    for st in &s.last_deploy {
        let _ = write!(
            b,
            "<tr class=\"{c}\" data-outcome=\"{o}\"><td>{n}</td><td>{a}</td><td>{t}</td><td>{d}</td><td>{o}{r}</td></tr>",
            c = if st.outcome == "done" { "ok" } else { "bad" },
            o = esc(&st.outcome),
            n = esc(&st.step),
            a = esc(&st.action),
            t = if st.started.is_empty() {
                "-".to_owned()
            } else {
                format!(
                    "<time datetime=\"{full}\" title=\"{full}\">{short}</time>",
                    full = esc(&st.started),
                    short = esc(clock(&st.started)),
                )
            },
            d = duration(st.duration_ms),
            r = st
                .reason
                .as_deref()
                .map(|r| format!("<br><small>{}</small>", esc(r)))
                .unwrap_or_default(),
        );
    }
    b.push_str("</table></details>");
}

/// The time of day of an RFC 3339 time (`2026-11-25T20:02:01Z` → `20:02:01`), or all of it
/// when it is not in that form.
fn clock(t: &str) -> &str {
    t.get(11..19)
        .filter(|c| c.len() == 8 && c.as_bytes()[2] == b':' && c.as_bytes()[5] == b':')
        .unwrap_or(t)
}

/// `0.4 s`, `12.0 s`, `3 min 4 s`.
fn duration(ms: u64) -> String {
    if ms < 60_000 {
        format!("{}.{} s", ms / 1000, ms % 1000 / 100)
    } else {
        let s = ms / 1000;
        format!("{} min {} s", s / 60, s % 60)
    }
}

/// The dependency graph as SVG: one column per topological level, an arrow from each
/// dependency to the service that needs it, each box coloured by the service's health.
fn render_graph(b: &mut String, cloud: &Snapshot) {
    const W: usize = 150;
    const H: usize = 26;
    const GAP_X: usize = 50;
    const GAP_Y: usize = 12;
    let levels = cloud.levels();
    let mut columns: Vec<Vec<&kstack_ports::cloud::Service>> = Vec::new();
    for s in &cloud.services {
        let l = levels.get(s.name.as_str()).copied().unwrap_or(0);
        if columns.len() <= l {
            columns.resize(l + 1, Vec::new());
        }
        columns[l].push(s);
    }
    let mut pos = std::collections::BTreeMap::new();
    for (x, col) in columns.iter().enumerate() {
        for (y, s) in col.iter().enumerate() {
            pos.insert(
                s.name.as_str(),
                (10 + x * (W + GAP_X), 10 + y * (H + GAP_Y)),
            );
        }
    }
    let width = 20 + columns.len() * (W + GAP_X) - GAP_X;
    let height = 20 + columns.iter().map(Vec::len).max().unwrap_or(0) * (H + GAP_Y) - GAP_Y;
    let _ = write!(
        b,
        "<svg id=\"graph\" role=\"img\" aria-label=\"service dependency graph\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\">"
    );
    for s in &cloud.services {
        let Some(&(x2, y2)) = pos.get(s.name.as_str()) else {
            continue;
        };
        for d in &s.depends_on {
            if let Some(&(x1, y1)) = pos.get(d.as_str()) {
                let _ = write!(
                    b,
                    "<path class=\"edge\" d=\"M{} {} C{} {} {} {} {} {}\"/>",
                    x1 + W,
                    y1 + H / 2,
                    x1 + W + GAP_X / 2,
                    y1 + H / 2,
                    x2 - GAP_X / 2,
                    y2 + H / 2,
                    x2,
                    y2 + H / 2
                );
            }
        }
    }
    for s in &cloud.services {
        let Some(&(x, y)) = pos.get(s.name.as_str()) else {
            continue;
        };
        let _ = write!(
            b,
            "<g id=\"node-{n}\" class=\"node {c}\" data-health=\"{h}\"><title>{n}: {h}, {r}/{d} ready</title>\
             <rect x=\"{x}\" y=\"{y}\" width=\"{W}\" height=\"{H}\" rx=\"4\"/>\
             <text x=\"{tx}\" y=\"{ty}\">{n}</text></g>",
            n = esc(&s.name),
            c = health_class(s.health),
            h = s.health.as_str(),
            r = s.ready,
            d = s.desired,
            tx = x + 8,
            ty = y + H / 2 + 5,
        );
    }
    b.push_str("</svg>");
}

fn render_hosts(b: &mut String, hosts: &[HostRow], labels: &[(String, String, String)]) {
    let locked = hosts.iter().filter(|h| h.locked()).count();
    let unsynced = hosts.iter().filter(|h| h.sync_state != "synced").count();
    let _ = write!(
        b,
        "<section id=\"hosts\"><h2>Hosts</h2><p id=\"host-summary\" data-hosts=\"{}\">{} hosts, {locked} locked, {unsynced} not synced</p>",
        hosts.len(),
        hosts.len()
    );
    b.push_str(
        "<table id=\"host-table\"><thead><tr><th>host</th><th>personality</th><th>state</th>\
         <th>sync</th><th>labels</th></tr></thead><tbody>",
    );
    // Labels are sorted by host uuid: look each host's run up by binary search.
    for h in hosts {
        let start = labels.partition_point(|(u, _, _)| u.as_str() < h.uuid.as_str());
        let mine = labels[start..].iter().take_while(|(u, _, _)| *u == h.uuid);
        let sync_class = match h.sync_state.as_str() {
            "synced" => "ok",
            "failed" => "bad",
            _ => "warn",
        };
        let _ = write!(
            b,
            "<tr id=\"host-{name}\" data-locked=\"{lk}\" data-sync=\"{s}\"><td>{name}</td><td>{p}</td>\
             <td class=\"{lc}\">{adm}, {op}{task}</td><td class=\"{sync_class}\">{s}{reason}</td><td>",
            name = esc(&h.hostname),
            lk = h.locked(),
            p = esc(&h.personality),
            lc = if h.locked() || h.task.is_some() {
                "warn"
            } else {
                "ok"
            },
            // A lock moving the instances off, or how the last one failed.
            task = h
                .task
                .as_deref()
                .map(|t| format!("<br><small class=\"task\">{}</small>", esc(t)))
                .unwrap_or_default(),
            adm = esc(&h.administrative),
            op = esc(&h.operational),
            s = esc(&h.sync_state),
            reason = h
                .sync_reason
                .as_deref()
                .map(|r| format!("<br><small>{}</small>", esc(r)))
                .unwrap_or_default(),
        );
        for (_, k, v) in mine {
            let _ = write!(b, "<code class=\"label\">{}={}</code> ", esc(k), esc(v));
        }
        b.push_str("</td></tr>");
    }
    b.push_str("</tbody></table></section>");
}

/// Whether `role` may view the page: every role may.
pub(crate) fn may_view(role: Role) -> bool {
    matches!(role, Role::Admin | Role::Reader)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_clock_times_read_plainly() {
        assert_eq!(duration(0), "0.0 s");
        assert_eq!(duration(1500), "1.5 s");
        assert_eq!(duration(59_999), "59.9 s");
        assert_eq!(duration(184_000), "3 min 4 s");
        assert_eq!(clock("2026-11-25T20:02:01Z"), "20:02:01");
        assert_eq!(clock("2026-11-25"), "2026-11-25");
        assert_eq!(clock("ééééééééééééééééééé"), "ééééééééééééééééééé");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn cookie_value_round_trips_and_refuses_garbage() {
        let t = "tok;en=with spaces,and\"quotes";
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {COOKIE}={}", hex(t))).unwrap(),
        );
        assert_eq!(cookie_token(&h).as_deref(), Some(t));
        for bad in ["zz", "abc", ""] {
            let mut h = HeaderMap::new();
            h.insert(
                header::COOKIE,
                HeaderValue::from_str(&format!("{COOKIE}={bad}")).unwrap(),
            );
            assert_eq!(cookie_token(&h), None, "{bad:?}");
        }
    }
}
