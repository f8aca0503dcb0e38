//! A watch of a namespace's EndpointSlices that records, per Service, the number of ready
//! endpoints after every change and how long it was zero: what clients of an API saw while
//! its pods were replaced.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use kstack_k8s::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher;

use crate::client;

/// What the watch saw, per Service (label `kubernetes.io/service-name`).
#[derive(Debug, Default, Clone)]
pub struct Endpoints {
    /// Ready endpoints after every event.
    pub counts: BTreeMap<String, Vec<usize>>,
    /// The pods with a ready endpoint now.
    pub ready_pods: BTreeMap<String, BTreeSet<String>>,
    /// Time with no ready endpoint, after the Service first had one.
    pub zero: BTreeMap<String, Duration>,
    zero_since: BTreeMap<String, Instant>,
    slices: BTreeMap<String, (String, BTreeSet<String>)>,
}

impl Endpoints {
    fn update(&mut self, slice: &EndpointSlice, deleted: bool) {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let Some(service) = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/service-name"))
            .cloned()
        else {
            return;
        };
        if deleted {
            self.slices.remove(&name);
        } else {
            let ready: BTreeSet<String> = slice
                .endpoints
                .iter()
                .flatten()
                // `ready` unset means ready (discovery/v1).
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
                .map(|e| {
                    e.target_ref
                        .as_ref()
                        .and_then(|t| t.name.clone())
                        .unwrap_or_else(|| e.addresses.join(","))
                })
                .collect();
            self.slices.insert(name, (service.clone(), ready));
        }
        let pods: BTreeSet<String> = self
            .slices
            .values()
            .filter(|(s, _)| *s == service)
            .flat_map(|(_, p)| p.iter().cloned())
            .collect();
        let had = self
            .counts
            .get(&service)
            .is_some_and(|c| c.iter().any(|n| *n > 0));
        match (pods.is_empty(), self.zero_since.get(&service)) {
            (true, None) if had => {
                self.zero_since.insert(service.clone(), Instant::now());
            }
            (false, Some(since)) => {
                *self.zero.entry(service.clone()).or_default() += since.elapsed();
                self.zero_since.remove(&service);
            }
            _ => {}
        }
        self.counts
            .entry(service.clone())
            .or_default()
            .push(pods.len());
        self.ready_pods.insert(service, pods);
    }

    /// The time a Service has had no ready endpoint, counting a window still open.
    pub fn zero_time(&self, service: &str) -> Duration {
        self.zero.get(service).copied().unwrap_or_default()
            + self
                .zero_since
                .get(service)
                .map_or(Duration::ZERO, Instant::elapsed)
    }

    /// The fewest ready endpoints a Service had after it first had one.
    pub fn min_after_first(&self, service: &str) -> Option<usize> {
        let counts = self.counts.get(service)?;
        let first = counts.iter().position(|n| *n > 0)?;
        counts[first..].iter().min().copied()
    }
}

/// A running watch; stopped when dropped.
pub struct EndpointWatch {
    seen: Arc<Mutex<Endpoints>>,
    task: tokio::task::JoinHandle<()>,
}

impl EndpointWatch {
    /// What was seen so far.
    pub fn snapshot(&self) -> Endpoints {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for EndpointWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts watching the namespace's EndpointSlices; returns once the initial list is in.
pub async fn watch_endpoints(ns: &str) -> anyhow::Result<EndpointWatch> {
    let api: kube::Api<EndpointSlice> = kube::Api::namespaced(client().await?, ns);
    let seen = Arc::new(Mutex::new(Endpoints::default()));
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    let s = seen.clone();
    let task = tokio::spawn(async move {
        let mut synced = Some(synced_tx);
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            let Ok(e) = event else { continue };
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            match e {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => s.update(&o, false),
                watcher::Event::Delete(o) => s.update(&o, true),
                watcher::Event::InitDone => {
                    if let Some(tx) = synced.take() {
                        let _ = tx.send(());
                    }
                }
                watcher::Event::Init => {}
            }
        }
    });
    tokio::time::timeout(crate::WAIT, synced_rx)
        .await
        .context("the EndpointSlice watch did not sync")??;
    Ok(EndpointWatch { seen, task })
}
