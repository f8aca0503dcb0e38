//! A small fake OpenStack on 127.0.0.1 for tests of verify (this crate's and the CLI's; feature
//! `fake`): Keystone, Glance, Nova, Neutron,
//! Heat, Placement and Horizon's login page behind path prefixes of one axum server, with the
//! state a run changes (so a test can check that cleanup removed everything) and injectable
//! faults. It enforces what the real services would refuse and a careless cleanup would hit:
//! unknown tokens, a router deleted with a subnet still attached, a subnet or network deleted
//! while in use.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub const ADMIN_PASSWORD: &str = "Adm1n-s3cret-Pa55word-xyzzy";
pub const ADMIN_PROJECT_ID: &str = "p-admin";

/// A response the fake gives instead of its normal one.
#[derive(Clone, Debug)]
pub struct Fault {
    pub method: String,
    /// The request path must contain this.
    pub path: String,
    pub status: u16,
    /// The answer body; with `echo` the request body is appended (a service echoing secrets).
    pub body: String,
    pub echo: bool,
}

#[derive(Default)]
pub struct FakeState {
    pub base: String,
    /// Every request, as `METHOD /path`.
    pub calls: Vec<String>,
    pub faults: Vec<Fault>,
    /// Servers go to ERROR with this fault message instead of ACTIVE.
    pub server_fault: Option<String>,
    /// Servers stay in BUILD.
    pub server_never_active: bool,
    /// This service type's catalog endpoints answer 503.
    pub broken_type: Option<String>,
    next_id: u64,
    tokens: BTreeMap<String, (String, String)>,
    pub projects: BTreeMap<String, String>,
    pub users: BTreeMap<String, String>,
    user_passwords: BTreeMap<String, String>,
    pub assignments: BTreeSet<(String, String, String)>,
    pub images: BTreeMap<String, (String, Vec<u8>)>,
    pub networks: BTreeSet<String>,
    pub subnets: BTreeMap<String, String>,
    pub routers: BTreeSet<String>,
    pub interfaces: BTreeSet<(String, String)>,
    pub flavors: BTreeSet<String>,
    /// Server id → GETs answered so far.
    pub servers: BTreeMap<String, u32>,
    /// Stack id → GETs answered so far.
    pub stacks: BTreeMap<String, u32>,
    /// Volume id → GETs answered so far.
    pub volumes: BTreeMap<String, u32>,
    /// Volumes go to `error` (no backend took them).
    pub volume_error: bool,
    /// Volume id → the server it is attached to (in-use).
    pub attached: BTreeMap<String, String>,
    /// The catalog has no `block-storage` endpoint (cinder-api never registered).
    pub no_volume: bool,
    deleted_stacks: BTreeSet<String>,
    /// The catalog has no `cloudformation` endpoint (heat-api-cfn not deployed).
    pub no_cfn: bool,
    /// Stacks whose wait condition has not been signalled: they stay CREATE_IN_PROGRESS.
    pub waiting: BTreeSet<String>,
    /// Wait condition signals accepted (a pre-signed URL with its signature, status SUCCESS).
    pub cfn_signals: u32,
    /// Stacks whose wait condition handle's transport is `TOKEN_SIGNAL`.
    token_transport: BTreeSet<String>,
    /// Wait condition signals accepted at heat-api with the handle's token (status SUCCESS).
    pub token_signals: u32,
}

/// The signature of the fake's pre-signed wait condition URL of stack `id`: a credential that
/// must never appear in a report.
pub fn cfn_signature(id: &str) -> String {
    format!("FAKE-SIGNATURE-{id}")
}

impl FakeState {
    /// Everything a run may create that still exists.
    pub fn leftovers(&self) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(
            self.projects
                .values()
                .filter(|n| *n != "admin")
                .map(|n| format!("project {n}")),
        );
        out.extend(
            self.users
                .values()
                .filter(|n| *n != "admin")
                .map(|n| format!("user {n}")),
        );
        out.extend(self.images.keys().map(|i| format!("image {i}")));
        out.extend(self.networks.iter().map(|i| format!("network {i}")));
        out.extend(self.subnets.keys().map(|i| format!("subnet {i}")));
        out.extend(self.routers.iter().map(|i| format!("router {i}")));
        out.extend(
            self.interfaces
                .iter()
                .map(|(r, s)| format!("interface {r}/{s}")),
        );
        out.extend(self.flavors.iter().map(|i| format!("flavor {i}")));
        out.extend(self.servers.keys().map(|i| format!("server {i}")));
        out.extend(self.stacks.keys().map(|i| format!("stack {i}")));
        out.extend(self.volumes.keys().map(|i| format!("volume {i}")));
        out
    }

    pub fn called(&self, prefix: &str) -> bool {
        self.calls.iter().any(|c| c.starts_with(prefix))
    }

    fn id(&mut self, kind: &str) -> String {
        self.next_id += 1;
        format!("{kind}-{:04}", self.next_id)
    }

    fn catalog(&self, project_id: &str) -> Value {
        let b = &self.base;
        let entries = [
            ("identity", "keystone", format!("{b}/identity")),
            ("image", "glance", format!("{b}/image")),
            ("compute", "nova", format!("{b}/compute/v2.1")),
            ("placement", "placement", format!("{b}/placement")),
            ("network", "neutron", format!("{b}/network")),
            ("orchestration", "heat", format!("{b}/heat/v1/{project_id}")),
            ("cloudformation", "heat-cfn", format!("{b}/cfn/v1")),
            ("block-storage", "cinder", format!("{b}/volume/v3")),
        ];
        Value::Array(
            entries
                .into_iter()
                .filter(|(ty, _, _)| {
                    !(self.no_cfn && *ty == "cloudformation"
                        || self.no_volume && *ty == "block-storage")
                })
                .map(|(ty, name, url)| {
                    let url = if self.broken_type.as_deref() == Some(ty) {
                        format!("{b}/broken/{ty}")
                    } else {
                        url
                    };
                    let eps: Vec<Value> = ["public", "internal", "admin"]
                        .iter()
                        .map(|i| json!({ "interface": i, "region_id": "RegionOne", "region": "RegionOne", "url": url }))
                        .collect();
                    json!({ "type": ty, "name": name, "endpoints": eps })
                })
                .collect(),
        )
    }
}

pub type Shared = Arc<Mutex<FakeState>>;

/// Starts the fake; its base URL is `state.base`.
pub async fn start() -> Shared {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut st = FakeState {
        base,
        ..FakeState::default()
    };
    st.projects.insert(ADMIN_PROJECT_ID.into(), "admin".into());
    st.users.insert("u-admin".into(), "admin".into());
    let shared: Shared = Arc::new(Mutex::new(st));
    let app = Router::new()
        .fallback(handle)
        .with_state(shared.clone())
        .layer(DefaultBodyLimit::max(64 << 20));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    shared
}

fn reply(status: u16, body: Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap();
    if body.is_null() {
        code.into_response()
    } else {
        (code, axum::Json(body)).into_response()
    }
}

fn not_found(what: &str) -> Response {
    reply(
        404,
        json!({ "itemNotFound": { "code": 404, "message": format!("{what} not found") } }),
    )
}

fn conflict(message: &str) -> Response {
    reply(
        409,
        json!({ "NeutronError": { "type": "Conflict", "message": message, "detail": "" } }),
    )
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let mut st = shared.lock().unwrap();
    st.calls.push(format!("{method} {path}"));
    if let Some(f) = st
        .faults
        .iter()
        .find(|f| f.method == method.as_str() && path.contains(&f.path))
        .cloned()
    {
        let mut text = f.body.clone();
        if f.echo {
            text.push_str(&String::from_utf8_lossy(&body));
        }
        return (StatusCode::from_u16(f.status).unwrap(), text).into_response();
    }
    if path == "/dashboard/auth/login/" && method == Method::GET {
        return (
            StatusCode::OK,
            [("content-type", "text/html")],
            "<html><body><form action=\"/auth/login/\" method=\"POST\"><input type=\"text\" name=\"username\" id=\"id_username\"><input type=\"password\" name=\"password\" id=\"id_password\"></form></body></html>",
        )
            .into_response();
    }
    if path.starts_with("/broken/") {
        return reply(
            503,
            json!({ "message": "Service Unavailable: no healthy upstream" }),
        );
    }
    let json_body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if path == "/identity/v3/auth/tokens" && method == Method::POST {
        return auth(&mut st, &json_body);
    }
    // A wait condition's pre-signed URL: no token, the signature in the query.
    if let Some(id) = path.strip_prefix("/cfn/v1/waitcondition/")
        && method == Method::PUT
    {
        let signed = uri
            .query()
            .is_some_and(|q| q.contains(&format!("Signature={}", cfn_signature(id))));
        if !signed {
            return reply(
                403,
                json!({ "Error": { "Code": "SignatureDoesNotMatch", "Message": "bad signature" } }),
            );
        }
        if json_body["status"] != "SUCCESS" || !st.waiting.remove(id) {
            return reply(400, json!({ "Error": { "Message": "unexpected signal" } }));
        }
        st.cfn_signals += 1;
        return reply(200, json!({}));
    }
    let token = headers
        .get("x-auth-token")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let Some((_user, project)) = st.tokens.get(token).cloned() else {
        return reply(
            401,
            json!({ "error": { "code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication." } }),
        );
    };
    let seg: Vec<&str> = path.trim_matches('/').split('/').collect();
    let m = method.as_str();
    match (m, seg.as_slice()) {
        // The endpoint roots (version documents).
        (
            "GET",
            ["identity"]
            | ["image"]
            | ["compute", "v2.1"]
            | ["placement"]
            | ["network"]
            | ["volume", "v3"],
        ) => reply(200, json!({ "versions": [] })),
        ("GET", ["heat", "v1", _]) => reply(300, json!({ "versions": [] })),
        ("GET", ["cfn", "v1"]) => reply(400, json!({ "Error": { "Message": "no Action" } })),
        // Keystone.
        ("POST", ["identity", "v3", "projects"]) => {
            let id = st.id("project");
            let name = json_body["project"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            st.projects.insert(id.clone(), name.clone());
            reply(201, json!({ "project": { "id": id, "name": name } }))
        }
        ("DELETE", ["identity", "v3", "projects", id]) => match st.projects.remove(*id) {
            Some(_) => reply(204, Value::Null),
            None => not_found("project"),
        },
        ("POST", ["identity", "v3", "users"]) => {
            let id = st.id("user");
            let name = json_body["user"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let pw = json_body["user"]["password"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            st.users.insert(id.clone(), name.clone());
            st.user_passwords.insert(id.clone(), pw);
            reply(201, json!({ "user": { "id": id, "name": name } }))
        }
        ("DELETE", ["identity", "v3", "users", id]) => match st.users.remove(*id) {
            Some(_) => {
                let id = id.to_string();
                st.assignments.retain(|(_, u, _)| *u != id);
                reply(204, Value::Null)
            }
            None => not_found("user"),
        },
        ("GET", ["identity", "v3", "roles"]) => reply(
            200,
            json!({ "roles": [{ "id": "r-member", "name": "member" }] }),
        ),
        ("PUT", ["identity", "v3", "projects", p, "users", u, "roles", r]) => {
            st.assignments
                .insert((p.to_string(), u.to_string(), r.to_string()));
            reply(204, Value::Null)
        }
        // Glance.
        ("POST", ["image", "v2", "images"]) => {
            let id = st.id("image");
            st.images.insert(id.clone(), ("queued".into(), Vec::new()));
            reply(
                201,
                json!({ "id": id, "status": "queued", "name": json_body["name"] }),
            )
        }
        ("PUT", ["image", "v2", "images", id, "file"]) => match st.images.get_mut(*id) {
            Some(img) => {
                *img = ("active".into(), body.to_vec());
                reply(204, Value::Null)
            }
            None => not_found("image"),
        },
        ("GET", ["image", "v2", "images", id]) => match st.images.get(*id) {
            Some((status, _)) => reply(200, json!({ "id": id, "status": status })),
            None => not_found("image"),
        },
        ("GET", ["image", "v2", "images", id, "file"]) => match st.images.get(*id) {
            Some((_, data)) => (StatusCode::OK, data.clone()).into_response(),
            None => not_found("image"),
        },
        ("DELETE", ["image", "v2", "images", id]) => match st.images.remove(*id) {
            Some(_) => reply(204, Value::Null),
            None => not_found("image"),
        },
        // Neutron. The fake cloud has no external (provider) network.
        ("GET", ["network", "v2.0", "networks"]) => reply(200, json!({ "networks": [] })),
        ("POST", ["network", "v2.0", "networks"]) => {
            let id = st.id("net");
            st.networks.insert(id.clone());
            reply(201, json!({ "network": { "id": id } }))
        }
        ("DELETE", ["network", "v2.0", "networks", id]) => {
            if st.subnets.values().any(|n| n == id) {
                return conflict(
                    "Unable to complete operation on network: one or more ports in use",
                );
            }
            if st.networks.remove(*id) {
                reply(204, Value::Null)
            } else {
                not_found("network")
            }
        }
        ("POST", ["network", "v2.0", "subnets"]) => {
            let net = json_body["subnet"]["network_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if !st.networks.contains(&net) {
                return not_found("network");
            }
            let id = st.id("subnet");
            st.subnets.insert(id.clone(), net);
            reply(
                201,
                json!({ "subnet": { "id": id, "cidr": json_body["subnet"]["cidr"] } }),
            )
        }
        ("DELETE", ["network", "v2.0", "subnets", id]) => {
            if st.interfaces.iter().any(|(_, s)| s == id) {
                return conflict(
                    "Unable to complete operation on subnet: one or more ports in use",
                );
            }
            if st.subnets.remove(*id).is_some() {
                reply(204, Value::Null)
            } else {
                not_found("subnet")
            }
        }
        ("POST", ["network", "v2.0", "routers"]) => {
            let id = st.id("router");
            st.routers.insert(id.clone());
            reply(201, json!({ "router": { "id": id } }))
        }
        ("PUT", ["network", "v2.0", "routers", id, action]) => {
            let subnet = json_body["subnet_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let key = (id.to_string(), subnet);
            match *action {
                "add_router_interface" => {
                    st.interfaces.insert(key);
                    reply(
                        200,
                        json!({ "id": id, "subnet_id": json_body["subnet_id"] }),
                    )
                }
                "remove_router_interface" => {
                    if st.interfaces.remove(&key) {
                        reply(200, json!({ "id": id }))
                    } else {
                        not_found("router interface")
                    }
                }
                _ => not_found("action"),
            }
        }
        ("DELETE", ["network", "v2.0", "routers", id]) => {
            if st.interfaces.iter().any(|(r, _)| r == id) {
                return conflict("Router still has ports");
            }
            if st.routers.remove(*id) {
                reply(204, Value::Null)
            } else {
                not_found("router")
            }
        }
        // Nova.
        ("POST", ["compute", "v2.1", "flavors"]) => {
            let id = st.id("flavor");
            st.flavors.insert(id.clone());
            reply(200, json!({ "flavor": { "id": id } }))
        }
        ("DELETE", ["compute", "v2.1", "flavors", id]) => {
            if st.flavors.remove(*id) {
                reply(202, Value::Null)
            } else {
                not_found("flavor")
            }
        }
        ("POST", ["compute", "v2.1", "servers"]) => {
            let s = &json_body["server"];
            let image = s["imageRef"].as_str().unwrap_or_default();
            let flavor = s["flavorRef"].as_str().unwrap_or_default();
            let net = s["networks"][0]["uuid"].as_str().unwrap_or_default();
            if !st.images.contains_key(image)
                || !st.flavors.contains(flavor)
                || !st.networks.contains(net)
            {
                return reply(
                    400,
                    json!({ "badRequest": { "code": 400, "message": "Invalid imageRef, flavorRef or network" } }),
                );
            }
            let id = st.id("server");
            st.servers.insert(id.clone(), 0);
            reply(202, json!({ "server": { "id": id } }))
        }
        ("GET", ["compute", "v2.1", "servers", id]) => {
            let fault = st.server_fault.clone();
            let never = st.server_never_active;
            match st.servers.get_mut(*id) {
                Some(polls) => {
                    *polls += 1;
                    let body = match (&fault, never || *polls < 2) {
                        (Some(f), _) => {
                            json!({ "server": { "id": id, "status": "ERROR", "fault": { "code": 500, "message": f } } })
                        }
                        (None, true) => {
                            json!({ "server": { "id": id, "status": "BUILD", "OS-EXT-STS:task_state": "spawning" } })
                        }
                        (None, false) => json!({ "server": { "id": id, "status": "ACTIVE" } }),
                    };
                    reply(200, body)
                }
                None => not_found("server"),
            }
        }
        ("POST", ["compute", "v2.1", "servers", id, "os-volume_attachments"]) => {
            let volume = json_body["volumeAttachment"]["volumeId"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if !st.servers.contains_key(*id) || !st.volumes.contains_key(&volume) {
                return not_found("server or volume");
            }
            st.attached.insert(volume.clone(), (*id).to_owned());
            reply(
                200,
                json!({ "volumeAttachment": { "volumeId": volume, "serverId": id } }),
            )
        }
        ("DELETE", ["compute", "v2.1", "servers", id]) => {
            if st.servers.remove(*id).is_some() {
                // Deleting a server releases its volumes.
                st.attached.retain(|_, server| server != id);
                reply(204, Value::Null)
            } else {
                not_found("server")
            }
        }
        // Cinder.
        ("POST", ["volume", "v3", "volumes"]) => {
            if json_body["volume"]["size"].as_u64().is_none_or(|n| n == 0) {
                return reply(
                    400,
                    json!({ "badRequest": { "code": 400, "message": "size must be a positive integer" } }),
                );
            }
            let id = st.id("volume");
            st.volumes.insert(id.clone(), 0);
            reply(202, json!({ "volume": { "id": id, "status": "creating" } }))
        }
        ("GET", ["volume", "v3", "volumes", id]) => {
            let error = st.volume_error;
            let in_use = st.attached.contains_key(*id);
            match st.volumes.get_mut(*id) {
                Some(polls) => {
                    *polls += 1;
                    let creating = *polls < 2;
                    let status = match (error, creating, in_use) {
                        (true, _, _) => "error",
                        (false, true, _) => "creating",
                        (false, false, true) => "in-use",
                        (false, false, false) => "available",
                    };
                    reply(200, json!({ "volume": { "id": id, "status": status } }))
                }
                None => not_found("volume"),
            }
        }
        ("DELETE", ["volume", "v3", "volumes", id]) => {
            if st.attached.contains_key(*id) {
                return reply(
                    400,
                    json!({ "badRequest": { "code": 400, "message": "Volume status must be available or error" } }),
                );
            }
            if st.volumes.remove(*id).is_some() {
                reply(202, Value::Null)
            } else {
                not_found("volume")
            }
        }
        // Heat.
        ("POST", ["heat", "v1", p, "stacks"]) => {
            if *p != project {
                return reply(403, json!({ "error": { "message": "wrong project" } }));
            }
            if json_body["template"]["resources"]
                .as_object()
                .is_none_or(|r| r.is_empty())
            {
                return reply(400, json!({ "error": { "message": "no resources" } }));
            }
            let id = st.id("stack");
            st.stacks.insert(id.clone(), 0);
            if json_body["template"]["resources"]["wait"]["type"] == "OS::Heat::WaitCondition" {
                st.waiting.insert(id.clone());
            }
            if json_body["template"]["resources"]["handle"]["properties"]["signal_transport"]
                == "TOKEN_SIGNAL"
            {
                // The stack user's token, in the stack's own project.
                st.tokens.insert(
                    format!("handle-token-{id}"),
                    ("stack-user".to_owned(), format!("stack-project-{id}")),
                );
                st.token_transport.insert(id.clone());
            }
            reply(201, json!({ "stack": { "id": id, "links": [] } }))
        }
        ("GET", ["heat", "v1", _, "stacks", _name, id, "resources", "handle"]) => {
            if !st.stacks.contains_key(*id) {
                return not_found("stack");
            }
            if st.token_transport.contains(*id) {
                // heat-api's URL as Heat's own configuration has it: not reachable from here.
                let endpoint = format!(
                    "http://heat-api.internal:8004/v1/stack-project-{id}/stacks/{_name}/{id}/resources/handle/signal"
                );
                return reply(
                    200,
                    json!({ "resource": { "resource_name": "handle", "resource_status": "CREATE_COMPLETE",
                        "attributes": { "token": format!("handle-token-{id}"), "endpoint": endpoint } } }),
                );
            }
            let url = format!(
                "{}/cfn/v1/waitcondition/{id}?SignatureMethod=HmacSHA256&AWSAccessKeyId=ak&Signature={}",
                st.base,
                cfn_signature(id)
            );
            let signal = json!({ "alarm_url": url }).to_string();
            reply(
                200,
                json!({ "resource": { "resource_name": "handle", "resource_status": "CREATE_COMPLETE", "attributes": { "signal": signal } } }),
            )
        }
        (
            "POST",
            [
                "heat",
                "v1",
                p,
                "stacks",
                _name,
                id,
                "resources",
                "handle",
                "signal",
            ],
        ) => {
            if *p != project || project != format!("stack-project-{id}") {
                return reply(
                    403,
                    json!({ "error": { "message": "not the stack user's" } }),
                );
            }
            if json_body["status"] != "SUCCESS" || !st.waiting.remove(*id) {
                return reply(400, json!({ "error": { "message": "unexpected signal" } }));
            }
            st.token_signals += 1;
            reply(200, Value::Null)
        }
        ("GET", ["heat", "v1", _, "stacks", _name, id]) => {
            if st.deleted_stacks.contains(*id) {
                return reply(
                    200,
                    json!({ "stack": { "id": id, "stack_status": "DELETE_COMPLETE" } }),
                );
            }
            let waiting = st.waiting.contains(*id);
            match st.stacks.get_mut(*id) {
                Some(polls) => {
                    *polls += 1;
                    let status = if *polls < 2 || waiting {
                        "CREATE_IN_PROGRESS"
                    } else {
                        "CREATE_COMPLETE"
                    };
                    reply(
                        200,
                        json!({ "stack": { "id": id, "stack_status": status } }),
                    )
                }
                None => not_found("stack"),
            }
        }
        ("DELETE", ["heat", "v1", _, "stacks", _name, id]) => {
            if st.stacks.remove(*id).is_some() {
                st.deleted_stacks.insert(id.to_string());
                reply(204, Value::Null)
            } else {
                not_found("stack")
            }
        }
        _ => not_found(&format!("{method} {path}")),
    }
}

fn auth(st: &mut FakeState, body: &Value) -> Response {
    let user = &body["auth"]["identity"]["password"]["user"];
    let password = user["password"].as_str().unwrap_or_default();
    let unauthorized = || {
        reply(
            401,
            json!({ "error": { "code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication." } }),
        )
    };
    let (user_id, project_id) = if user["name"] == "admin" {
        if password != ADMIN_PASSWORD || body["auth"]["scope"]["project"]["name"] != "admin" {
            return unauthorized();
        }
        ("u-admin".to_owned(), ADMIN_PROJECT_ID.to_owned())
    } else {
        let id = user["id"].as_str().unwrap_or_default().to_owned();
        let project = body["auth"]["scope"]["project"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if st.user_passwords.get(&id).map(String::as_str) != Some(password)
            || !st
                .assignments
                .iter()
                .any(|(p, u, _)| *p == project && *u == id)
        {
            return unauthorized();
        }
        (id, project)
    };
    let token = st.id("token");
    st.tokens
        .insert(token.clone(), (user_id.clone(), project_id.clone()));
    let catalog = st.catalog(&project_id);
    (
        StatusCode::CREATED,
        [("x-subject-token", token)],
        axum::Json(json!({ "token": {
            "user": { "id": user_id },
            "project": { "id": project_id },
            "catalog": catalog,
        }})),
    )
        .into_response()
}
