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
/// pod name then container order; with it, lines come as they are written, from every
/// container at once. Only the pods that exist when it starts are read (as `kubectl logs -l`
/// does). A container whose log cannot be opened gives one line saying why instead of failing
/// the others.
pub async fn log_lines(
    client: &Client,
    namespace: &str,
    selector: &str,
    selection: &LogSelection,
) -> Result<(usize, futures::stream::BoxStream<'static, LogLine>), Error> {
    use futures::{AsyncBufReadExt as _, StreamExt as _, TryStreamExt as _};
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
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
    let merged = if selection.follow {
        futures::stream::select_all(streams).boxed()
    } else {
        futures::stream::iter(streams).flatten().boxed()
    };
    Ok((n, merged))
}
