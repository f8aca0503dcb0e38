//! What the containers of a set of pods wrote: the last lines, for diagnosing a service from
//! outside (`kstack verify` shows them for the service behind a failing API call), and every
//! line as a stream, followed or not (`kstack logs`).
use kstack_k8s::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};

use crate::Error;

/// The tail of one container's log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodLog {
    pub pod: String,
    pub container: String,
    /// The last lines, or why they could not be read (`(no log: ...)`), e.g. a container that
    /// has not started.
    pub text: String,
}

/// The pods matching `selector` by name, each with its containers (init containers first, in
/// the order of the pod spec).
async fn containers_of(
    api: &Api<Pod>,
    selector: &str,
) -> Result<Vec<(String, Vec<String>)>, Error> {
    let mut pods = api
        .list(&ListParams::default().labels(selector))
        .await?
        .items;
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(pods
        .iter()
        .map(|pod| {
            let containers = pod
                .spec
                .iter()
                .flat_map(|s| {
                    s.init_containers
                        .iter()
                        .flatten()
                        .chain(s.containers.iter())
                        .map(|c| c.name.clone())
                })
                .collect();
            (pod.metadata.name.clone().unwrap_or_default(), containers)
        })
        .collect())
}

/// The last `tail_lines` lines of every container (init containers included) of the pods in
/// `namespace` matching the label `selector`, by pod name then container order. A container
/// whose log cannot be read gets a note instead of failing the whole call.
pub async fn pod_logs(
    client: &Client,
    namespace: &str,
    selector: &str,
    tail_lines: i64,
) -> Result<Vec<PodLog>, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut out = Vec::new();
    for (name, containers) in containers_of(&api, selector).await? {
        for container in containers {
            let params = LogParams {
                container: Some(container.clone()),
                tail_lines: Some(tail_lines),
                ..LogParams::default()
            };
            let text = match api.logs(&name, &params).await {
                Ok(t) => t,
                Err(e) => format!("(no log: {e})"),
            };
            out.push(PodLog {
                pod: name.clone(),
                container,
                text,
            });
        }
    }
    Ok(out)
}

/// Which part of each container's log [`log_lines`] reads.
#[derive(Debug, Clone, Default)]
pub struct LogSelection {
    /// Keep following the logs as they are written.
    pub follow: bool,
    /// Only lines newer than this many seconds.
    pub since_seconds: Option<i64>,
    /// Only the last lines of each container.
    pub tail_lines: Option<i64>,
}

/// One line a container wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub pod: String,
    pub container: String,
    pub line: String,
}

/// The log lines of every container (init containers included) of the pods in `namespace`
/// matching `selector`, as one stream. Without `follow`, each container's lines come whole, by
/// pod name then container order, for the pods that exist now. With it, lines come as they are
/// written, from every container at once, and a watch of the pods adds every container that
/// starts later: the pods of a rollout, a container the kubelet restarted (its new log whole).
/// A container whose log cannot be opened gives one line saying why instead of failing the
/// others. The count is of the containers read from the start.
pub async fn log_lines(
    client: &Client,
    namespace: &str,
    selector: &str,
    selection: &LogSelection,
) -> Result<(usize, futures::stream::BoxStream<'static, LogLine>), Error> {
    use futures::{AsyncBufReadExt as _, StreamExt as _, TryStreamExt as _};
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    if selection.follow {
        return follow_lines(api, selector, selection).await;
    }
    let mut streams = Vec::new();
    for (name, containers) in containers_of(&api, selector).await? {
        for container in containers {
            let params = LogParams {
                container: Some(container.clone()),
                follow: selection.follow,
                since_seconds: selection.since_seconds,
                tail_lines: selection.tail_lines,
                ..LogParams::default()
            };
            let (p, c) = (name.clone(), container.clone());
            let tag = move |line: String| LogLine {
                pod: p.clone(),
                container: c.clone(),
                line,
            };
            let stream: futures::stream::BoxStream<'static, LogLine> =
                match api.log_stream(&name, &params).await {
                    Ok(reader) => {
                        let (p, c) = (name.clone(), container.clone());
                        reader
                            .lines()
                            .map_ok(tag)
                            .map(move |r| {
                                r.unwrap_or_else(|e| LogLine {
                                    pod: p.clone(),
                                    container: c.clone(),
                                    line: format!("(log interrupted: {e})"),
                                })
                            })
                            .boxed()
                    }
                    Err(e) => futures::stream::iter([tag(format!("(no log: {e})"))]).boxed(),
                };
            streams.push(stream);
        }
    }
    let n = streams.len();
    Ok((n, futures::stream::iter(streams).flatten().boxed()))
}

/// One run of one container: a restarted container is another run, with a log of its own.
type Run = (String, String, i32);

/// The containers of `pod` that have run (running, or terminated with a log), with their
/// restart counts: init containers first.
fn runs(pod: &Pod) -> Vec<Run> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    pod.status
        .iter()
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .filter(|c| {
            c.state
                .as_ref()
                .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
        })
        .map(|c| (uid.clone(), c.name.clone(), c.restart_count))
        .collect()
}

/// Copies one container's log, line by line, into `tx` until the log ends or nobody reads.
fn forward(
    api: &Api<Pod>,
    pod: String,
    container: String,
    params: LogParams,
    tx: futures::channel::mpsc::UnboundedSender<LogLine>,
) {
    use futures::{AsyncBufReadExt as _, StreamExt as _};
    let api = api.clone();
    tokio::spawn(async move {
        let line = |text: String| LogLine {
            pod: pod.clone(),
            container: container.clone(),
            line: text,
        };
        match api.log_stream(&pod, &params).await {
            Ok(reader) => {
                let mut lines = reader.lines();
                while let Some(next) = lines.next().await {
                    let text = next.unwrap_or_else(|e| format!("(log interrupted: {e})"));
                    if tx.unbounded_send(line(text)).is_err() {
                        return;
                    }
                }
            }
            Err(e) => {
                let _ = tx.unbounded_send(line(format!("(no log: {e})")));
            }
        }
    });
}

/// [`log_lines`] with `follow`: the containers running now from `selection`'s point, then
/// every container that starts while the stream is read, from its first line.
async fn follow_lines(
    api: Api<Pod>,
    selector: &str,
    selection: &LogSelection,
) -> Result<(usize, futures::stream::BoxStream<'static, LogLine>), Error> {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let mut pods = api
        .list(&ListParams::default().labels(selector))
        .await?
        .items;
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut seen = std::collections::BTreeSet::new();
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        for run in runs(pod) {
            let params = LogParams {
                container: Some(run.1.clone()),
                follow: true,
                since_seconds: selection.since_seconds,
                tail_lines: selection.tail_lines,
                ..LogParams::default()
            };
            forward(&api, name.clone(), run.1.clone(), params, tx.clone());
            seen.insert(run);
        }
    }
    let n = seen.len();
    let watch_api = api.clone();
    let config = watcher::Config::default().labels(selector);
    tokio::spawn(async move {
        let mut events = watcher(watch_api, config)
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = events.next().await {
            if tx.is_closed() {
                return;
            }
            let Ok(pod) = event else { continue };
            let name = pod.metadata.name.clone().unwrap_or_default();
            for run in runs(&pod) {
                if seen.insert(run.clone()) {
                    let params = LogParams {
                        container: Some(run.1.clone()),
                        follow: true,
                        ..LogParams::default()
                    };
                    forward(&api, name.clone(), run.1, params, tx.clone());
                }
            }
        }
    });
    Ok((n, rx.boxed()))
}

/// One line of the central log store (central logging's VictoriaLogs) that a container of the
/// cloud wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLine {
    /// When the kubelet wrote it (RFC 3339).
    pub time: String,
    pub pod: String,
    pub container: String,
    /// As the container wrote it.
    pub line: String,
}

/// The store's Service (the catalog's `victoria-logs`); its port is the catalog's too, given by
/// the caller.
pub const STORE_SERVICE: &str = "victoria-logs";

/// The LogsQL query for the lines of the running pods of `service` in `namespace` (not its
/// Jobs' pods), newest `limit` first: the collector keeps each line's file,
/// `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log`, and a service's pods are named
/// `<service>-<hash>-<id>` (Deployment), `<service>-<n>` (StatefulSet) or `<service>-<id>`
/// (DaemonSet), so `heat-api` does not match `heat-api-cfn`'s pods.
pub fn store_query(
    namespace: &str,
    service: &str,
    since_seconds: Option<i64>,
    limit: i64,
) -> String {
    let pods = format!(
        "^/var/log/pods/{}_{}-([a-z0-9]+-[a-z0-9]{{5}}|[0-9]+|[a-z0-9]{{5}})_",
        regex_quote(namespace),
        regex_quote(service)
    );
    let since = since_seconds
        .map(|s| format!(" _time:{s}s"))
        .unwrap_or_default();
    format!(
        "file:~{}{since} | sort by (_time) desc | limit {limit}",
        serde_json::Value::from(pods)
    )
}

/// `s` with the characters a regular expression gives a meaning escaped.
fn regex_quote(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// A line as the kubelet writes it, `<time> <stream> <P|F> <line>`, taken apart; `None` for
/// anything else.
fn cri_line(raw: &str) -> Option<(&str, &str)> {
    let mut parts = raw.splitn(4, ' ');
    let time = parts.next()?;
    let stream = parts.next()?;
    let tag = parts.next()?;
    let line = parts.next().unwrap_or("");
    ((stream == "stdout" || stream == "stderr") && (tag == "F" || tag == "P"))
        .then_some((time, line))
}

/// The pod and container of a pod log file path.
fn pod_and_container(file: &str) -> Option<(String, String)> {
    let rest = file.strip_prefix("/var/log/pods/")?;
    let mut it = rest.split('/');
    let dir = it.next()?;
    let container = it.next()?;
    // <namespace>_<pod>_<uid>: namespaces and pods have no `_`.
    let pod = dir.split('_').nth(1)?;
    Some((pod.to_owned(), container.to_owned()))
}

/// The newest `limit` lines of the running pods of `service` (pods gone long ago included) in
/// the central log store of `namespace`, oldest first, read through the API server's proxy to
/// the store's Service on its port `store_port` (the catalog's): no port of the store needs to
/// be reachable from where kstack runs.
pub async fn stored_lines(
    client: &Client,
    namespace: &str,
    store_port: u16,
    service: &str,
    since_seconds: Option<i64>,
    limit: i64,
) -> Result<Vec<StoredLine>, Error> {
    let query = store_query(namespace, service, since_seconds, limit);
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("query", &query)
        .finish();
    let uri = format!(
        "/api/v1/namespaces/{namespace}/services/{STORE_SERVICE}:{store_port}/proxy/select/logsql/query?{body}"
    );
    let request = http::Request::get(uri)
        .body(Vec::new())
        .map_err(|e| Error::Store(e.to_string()))?;
    let text = match client.request_text(request).await {
        Ok(t) => t,
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 503 => {
            return Err(Error::Store(format!(
                "no store answers in namespace {namespace} (HTTP {}): is `enable_central_logging: yes` deployed?",
                s.code
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for row in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(row)
            .map_err(|e| Error::Store(format!("an answer that is not JSON lines: {e}")))?;
        let raw = v["_msg"].as_str().unwrap_or_default();
        let (time, line) = cri_line(raw).unwrap_or((v["_time"].as_str().unwrap_or_default(), raw));
        let (pod, container) = v["file"]
            .as_str()
            .and_then(pod_and_container)
            .unwrap_or_default();
        out.push(StoredLine {
            time: time.to_owned(),
            pod,
            container,
            line: line.to_owned(),
        });
    }
    // The store orders by when the collector read a line; people read by when it was written.
    out.sort_by_key(|l| time_key(&l.time));
    Ok(out)
}

/// An RFC 3339 UTC time as the kubelet writes it (`...:25.6962036Z`, trailing zeros of the
/// fraction dropped) in a form that sorts as the times do: the fraction to nine digits.
fn time_key(t: &str) -> String {
    let Some(base) = t.strip_suffix('Z') else {
        return t.to_owned();
    };
    let (secs, frac) = base.split_once('.').unwrap_or((base, ""));
    format!("{secs}.{frac:0<9}Z")
}

#[cfg(test)]
mod store_tests {
    use super::*;

    #[test]
    fn a_services_query_names_its_pods_only() {
        let q = store_query("openstack", "heat-api", Some(3600), 100);
        assert_eq!(
            q,
            r#"file:~"^/var/log/pods/openstack_heat-api-([a-z0-9]+-[a-z0-9]{5}|[0-9]+|[a-z0-9]{5})_" _time:3600s | sort by (_time) desc | limit 100"#
        );
        let re = regex::Regex::new(
            r"^/var/log/pods/openstack_heat-api-([a-z0-9]+-[a-z0-9]{5}|[0-9]+|[a-z0-9]{5})_",
        )
        .unwrap();
        for own in [
            "/var/log/pods/openstack_heat-api-6b5b486b64-tj8rz_u/heat-api/0.log",
            "/var/log/pods/openstack_heat-api-0_u/heat-api/0.log",
            "/var/log/pods/openstack_heat-api-x7k2p_u/heat-api/0.log",
        ] {
            assert!(re.is_match(own), "{own}");
        }
        for other in [
            "/var/log/pods/openstack_heat-api-cfn-6fb897d94b-9qbr6_u/heat-api-cfn/0.log",
            "/var/log/pods/openstack_heat-api-db-sync-d02abafa94-8jnnw_u/heat-api/0.log",
            "/var/log/pods/other_heat-api-6b5b486b64-tj8rz_u/heat-api/0.log",
        ] {
            assert!(!re.is_match(other), "{other}");
        }
        assert!(regex_quote("a.b").contains("\\."));
    }

    #[test]
    fn times_sort_as_they_happened_whatever_their_fraction_digits() {
        let mut t = vec![
            "2026-11-26T02:18:25.69620361Z",
            "2026-11-26T02:18:25.6962036Z",
            "2026-11-26T02:18:25Z",
            "2026-11-26T02:18:24.9Z",
        ];
        t.sort_by_key(|s| time_key(s));
        assert_eq!(
            t,
            [
                "2026-11-26T02:18:24.9Z",
                "2026-11-26T02:18:25Z",
                "2026-11-26T02:18:25.6962036Z",
                "2026-11-26T02:18:25.69620361Z"
            ]
        );
    }

    #[test]
    fn kubelet_lines_are_taken_apart() {
        assert_eq!(
            cri_line("2026-11-26T02:18:25.69Z stderr F hello world"),
            Some(("2026-11-26T02:18:25.69Z", "hello world"))
        );
        assert_eq!(cri_line("plain text"), None);
        assert_eq!(
            pod_and_container("/var/log/pods/ns_keystone-57dc9bd896-z66jb_2a-b/keystone/0.log"),
            Some((
                "keystone-57dc9bd896-z66jb".to_owned(),
                "keystone".to_owned()
            ))
        );
        assert_eq!(pod_and_container("/elsewhere"), None);
    }
}
