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
