//! One HTTP call to an OpenStack API and what a failed call says: method, URL, status and the
//! service's own error message, pulled out of whichever JSON shape that service uses.
//!
//! Bodies are never logged and never put into an error, except the error message a service
//! sent back; the caller redacts the secrets it knows from every report (see
//! [`crate::Redactor`]), in case a service echoes one.
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde::Serialize;
use serde_json::Value;

/// A failed API call: the request and what came back (no status when nothing came back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}", self.describe())]
pub struct CallError {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The URL called, query included (kstack never puts a secret into a URL).
    pub url: String,
    /// The HTTP status, `None` when no answer came (connection refused, DNS, timeout).
    pub status: Option<u16>,
    /// The service's error message, or why no answer came.
    pub message: String,
}

impl CallError {
    fn describe(&self) -> String {
        match self.status {
            Some(s) => format!("{} {}: HTTP {s}: {}", self.method, self.url, self.message),
            None => format!("{} {}: {}", self.method, self.url, self.message),
        }
    }

    /// The path of the URL (`/v2/images/<id>/file`), for reports that name the call briefly.
    pub fn path(&self) -> &str {
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, r)| r);
        rest.find('/').map_or("/", |i| &rest[i..])
    }
}

/// What to send.
pub(crate) enum Body<'a> {
    None,
    Json(&'a Value),
    Bytes(Vec<u8>),
}

/// An answer with any status.
pub(crate) struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn json(&self) -> Value {
        if self.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&self.body).unwrap_or(Value::Null)
        }
    }
}

/// The HTTP client of a verify run.
#[derive(Clone)]
pub(crate) struct Api {
    client: reqwest::Client,
}

impl Api {
    /// A client with a time limit per call, host names resolved from `resolve` first, and
    /// `ca_certificates` trusted besides the public roots.
    pub fn new(
        request_timeout: Duration,
        resolve: &BTreeMap<String, IpAddr>,
        ca_certificates: &[reqwest::Certificate],
    ) -> Api {
        let mut builder = reqwest::Client::builder()
            .timeout(request_timeout)
            .connect_timeout(request_timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("kstack-verify/", env!("CARGO_PKG_VERSION")));
        for (host, ip) in resolve {
            // Port 0: the URL's port is used.
            builder = builder.resolve(host, SocketAddr::new(*ip, 0));
        }
        for c in ca_certificates {
            builder = builder.add_root_certificate(c.clone());
        }
        let client = builder.build().unwrap_or_else(|_| reqwest::Client::new());
        Api { client }
    }

    /// Sends one request; any status is a [`Reply`], no answer is a [`CallError`].
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        token: Option<&str>,
        body: Body<'_>,
    ) -> Result<Reply, CallError> {
        self.send_with(method, url, token, &[], body).await
    }

    /// [`Api::send`] with extra headers (a microversion).
    pub async fn send_with(
        &self,
        method: Method,
        url: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Body<'_>,
    ) -> Result<Reply, CallError> {
        let fail = |message: String| CallError {
            method: method.to_string(),
            url: url.to_owned(),
            status: None,
            message,
        };
        let mut req = self
            .client
            .request(method.clone(), url)
            .header("Accept", "application/json");
        if let Some(t) = token {
            req = req.header("X-Auth-Token", t);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req = match body {
            Body::None => req,
            Body::Json(v) => req.json(v),
            Body::Bytes(b) => req.header(CONTENT_TYPE, "application/octet-stream").body(b),
        };
        let resp = req.send().await.map_err(|e| fail(transport_message(&e)))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp
            .bytes()
            .await
            .map_err(|e| fail(format!("reading the answer: {}", transport_message(&e))))?
            .to_vec();
        tracing::debug!(%method, url, status, bytes = body.len(), "call");
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// GET a web page (no token, HTML accepted), any status.
    pub async fn page(&self, url: &str) -> Result<Reply, CallError> {
        let fail = |message: String| CallError {
            method: "GET".to_owned(),
            url: url.to_owned(),
            status: None,
            message,
        };
        let resp = self
            .client
            .get(url)
            .header("Accept", "text/html")
            .send()
            .await
            .map_err(|e| fail(transport_message(&e)))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp
            .bytes()
            .await
            .map_err(|e| fail(format!("reading the answer: {}", transport_message(&e))))?
            .to_vec();
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// PUTs `body` to a pre-signed URL (a Heat wait condition's), any status. The URL's query
    /// is its credential: it is never logged nor put into an error, which name the URL as
    /// [`presigned_display`] shows it.
    pub async fn put_presigned(&self, url: &str, body: &Value) -> Result<Reply, CallError> {
        let shown = presigned_display(url);
        let fail = |message: String| CallError {
            method: "PUT".to_owned(),
            url: shown.clone(),
            status: None,
            message,
        };
        let resp = self
            .client
            .put(url)
            .header("Accept", "application/json")
            .json(body)
            .send()
            .await
            .map_err(|e| fail(transport_message(&e)))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp
            .bytes()
            .await
            .map_err(|e| fail(format!("reading the answer: {}", transport_message(&e))))?
            .to_vec();
        tracing::debug!(
            method = "PUT",
            url = shown,
            status,
            bytes = body.len(),
            "call"
        );
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// Sends one request and wants a 2xx answer: its headers and JSON body (`Null` when empty).
    pub async fn call(
        &self,
        method: Method,
        url: &str,
        token: Option<&str>,
        body: Body<'_>,
    ) -> Result<(HeaderMap, Value), CallError> {
        self.call_with(method, url, token, &[], body).await
    }

    /// [`Api::call`] with extra headers (a microversion).
    pub async fn call_with(
        &self,
        method: Method,
        url: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Body<'_>,
    ) -> Result<(HeaderMap, Value), CallError> {
        let reply = self
            .send_with(method.clone(), url, token, headers, body)
            .await?;
        if !reply.ok() {
            return Err(status_error(&method, url, &reply));
        }
        let v = reply.json();
        Ok((reply.headers, v))
    }
}

/// A pre-signed URL as reports show it: without its query (the signature).
pub(crate) fn presigned_display(url: &str) -> String {
    match url.split_once('?') {
        Some((path, _)) => format!("{path}?<signature>"),
        None => url.to_owned(),
    }
}

/// A [`CallError`] for an answer with an unwanted status.
pub(crate) fn status_error(method: &Method, url: &str, reply: &Reply) -> CallError {
    CallError {
        method: method.to_string(),
        url: url.to_owned(),
        status: Some(reply.status),
        message: error_message(&reply.body),
    }
}

/// Why no answer came: the innermost cause (`Connection refused`, a DNS failure), or a timeout.
fn transport_message(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "no answer in time (timeout)".to_owned();
    }
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        causes.push(s.to_string());
        source = s.source();
    }
    let root = causes.pop().unwrap_or_else(|| own_message(e));
    if e.is_connect() {
        format!("cannot connect: {root}")
    } else {
        root
    }
}

/// reqwest's own message without the ` for url (...)` part (the caller names the URL).
fn own_message(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(u) = e.url()
        && let Some(i) = s.find(&format!(" for url ({u})"))
    {
        s.truncate(i);
    }
    s
}

/// The error message of an OpenStack answer. Keystone and Heat send `{"error": {"message"}}`
/// (Heat only `{"error": {"type"}}` for an error it does not show),
/// Nova `{"badRequest": {"message"}}` (any fault name), Neutron `{"NeutronError":
/// {"message"}}`, Glance and WSGI servers often plain text or HTML.
pub fn error_message(body: &[u8]) -> String {
    const MAX: usize = 400;
    if body.is_empty() {
        return "(empty answer)".to_owned();
    }
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let text = |v: &Value| v.as_str().map(str::to_owned).filter(|s| !s.is_empty());
        let found = text(&v["error"]["message"])
            .or_else(|| text(&v["message"]))
            .or_else(|| {
                v.as_object().and_then(|o| {
                    o.values().find_map(|inner| {
                        text(&inner["message"]).or_else(|| text(&inner["detail"]))
                    })
                })
            })
            // Heat leaves out the message of an error it does not call safe, but names its type.
            .or_else(|| {
                let ty = text(&v["error"]["type"])?;
                Some(match text(&v["explanation"]) {
                    Some(e) => format!("{e} ({ty})"),
                    None => ty,
                })
            })
            .or_else(|| text(&v["explanation"]))
            .or_else(|| text(&v["title"]))
            .or_else(|| text(&v["error"]));
        if let Some(m) = found {
            return truncate(&m, MAX);
        }
        return truncate(&v.to_string(), MAX);
    }
    let raw = String::from_utf8_lossy(body);
    truncate(&strip_tags(&raw), MAX)
}

/// Text of an HTML page without its tags, whitespace collapsed.
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => {
                in_tag = true;
                out.push(' ');
            }
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_of_each_service_shape() {
        let cases = [
            (
                r#"{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}"#,
                "The request you have made requires authentication.",
            ),
            (
                r#"{"badRequest": {"code": 400, "message": "Invalid imageRef provided."}}"#,
                "Invalid imageRef provided.",
            ),
            (
                r#"{"NeutronError": {"type": "InvalidInput", "message": "Invalid input for cidr.", "detail": ""}}"#,
                "Invalid input for cidr.",
            ),
            (
                r#"{"explanation": "The server could not comply", "code": 400, "error": {"message": "Property error: x", "type": "StackValidationFailed"}, "title": "Bad Request"}"#,
                "Property error: x",
            ),
            (
                r#"{"explanation": "The server could not comply", "code": 400, "error": {"traceback": null, "type": "ValueError"}, "title": "Bad Request"}"#,
                "The server could not comply (ValueError)",
            ),
            (
                "<html><head><title>413 Request Entity Too Large</title></head><body><h1>413 Request Entity Too Large</h1>Image exceeds the storage quota</body></html>",
                "413 Request Entity Too Large 413 Request Entity Too Large Image exceeds the storage quota",
            ),
            ("", "(empty answer)"),
        ];
        for (body, want) in cases {
            assert_eq!(error_message(body.as_bytes()), want, "{body}");
        }
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "x".repeat(2000);
        let m = error_message(long.as_bytes());
        assert!(m.chars().count() <= 401 && m.ends_with('…'), "{m}");
    }

    #[test]
    fn call_error_names_method_url_status_and_message() {
        let e = CallError {
            method: "PUT".into(),
            url: "http://glance:9292/v2/images/abc/file".into(),
            status: Some(500),
            message: "disk full".into(),
        };
        assert_eq!(
            e.to_string(),
            "PUT http://glance:9292/v2/images/abc/file: HTTP 500: disk full"
        );
        assert_eq!(e.path(), "/v2/images/abc/file");
    }
}
