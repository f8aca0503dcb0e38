//! Which connections the service keeps open, and for how long.
//!
//! A client that opens connections and sends nothing (or half a request) must not starve the
//! others. Three bounds together:
//!
//! - **Time**: a connection must finish its TLS handshake within [`HANDSHAKE_TIMEOUT`], send
//!   its first request's headers within [`HEADER_READ_TIMEOUT`], and, between requests on a
//!   kept-alive connection, start the next one within the same time; a request body must
//!   arrive within [`BODY_READ_TIMEOUT`]. HTTP/1.1 only: hyper bounds an HTTP/1.1 connection's
//!   idle time, not an HTTP/2 one's, and the service's clients (the CLI, a browser, Prometheus)
//!   all speak HTTP/1.1.
//! - **Count**: at most [`Admission::max`] connections are open. The default leaves
//!   [`FD_RESERVE`] of the process's file descriptors for the database, the certificate files
//!   and the Kubernetes client, so the service never runs out of them and stops accepting.
//! - **Who yields**: when the limit is reached, the connection that has been open longest
//!   with no request in flight is closed to make room (an idle keep-alive client just
//!   reconnects); only when every connection is serving a request is the new one refused.
//!   So a new client is served at once however many silent connections are open. "Longest"
//!   is by the order the listener accepted the connections ([`Arrivals`] numbers them in the
//!   accept loop): each connection is admitted in a task of its own, and tasks do not run in
//!   the order they were spawned, so a connection admitted early could otherwise be older on
//!   paper than silent ones that arrived before it and be closed in their place.

use std::collections::BTreeMap;
use std::future::{Ready, ready};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use axum_server::accept::Accept;
use futures::future::BoxFuture;
use futures::task::AtomicWaker;
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::metrics::ConnectionMetrics;

/// Time for a TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time for a request's headers, counted from when the connection waits for them (so also
/// the longest a kept-alive connection stays idle).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time for a request's body once its headers arrived.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// File descriptors left for everything but client connections.
pub const FD_RESERVE: u64 = 64;
/// The fewest connections the service accepts, whatever the descriptor limit.
const MIN_CONNECTIONS: usize = 16;

/// Raises the process's soft limit on open files to its hard limit (the service holds one
/// descriptor per connection) and returns how many connections fit in it beside
/// [`FD_RESERVE`]. The limit is read and kept as it is when it cannot be raised.
pub fn connection_budget() -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if let (Some(soft), Some(hard)) = (limit.current, limit.maximum)
        && soft < hard
    {
        let raised = rustix::process::Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit = raised,
            Err(e) => {
                tracing::warn!(soft, hard, error = %e, "could not raise the open files limit")
            }
        }
    }
    budget(limit.current)
}

/// Connections that fit in a soft limit of `soft` open files (`None`: unlimited).
fn budget(soft: Option<u64>) -> usize {
    let fit = soft.map_or(u64::MAX, |s| s.saturating_sub(FD_RESERVE));
    usize::try_from(fit)
        .unwrap_or(usize::MAX)
        .clamp(MIN_CONNECTIONS, 1 << 20)
}

/// The open connections, in the order they were admitted; an [`Accept`] for axum-server that
/// admits each new connection (closing an idle one when full) before its TLS handshake.
#[derive(Clone)]
pub struct Admission {
    max: usize,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    open: Mutex<BTreeMap<u64, Arc<Slot>>>,
    metrics: ConnectionMetrics,
}

/// One open connection.
#[derive(Default)]
struct Slot {
    /// Requests being served (a response counts until its body is sent or dropped).
    busy: AtomicUsize,
    closed: AtomicBool,
    waker: AtomicWaker,
}

impl Slot {
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.waker.wake();
    }
}

impl Admission {
    /// Admits at most `max` connections at a time (at least one), counting them in `metrics`.
    pub fn new(max: usize, metrics: ConnectionMetrics) -> Admission {
        Admission {
            max: max.max(1),
            shared: Arc::new(Shared {
                metrics,
                ..Shared::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Slot>>> {
        // A panic while holding this lock leaves the map consistent (every change is one
        // insert or remove), so a poisoned lock is still good to use.
        self.shared
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for the connection that arrived `id`-th, or `None` when full and every
    /// connection is busy.
    fn admit(&self, id: u64) -> Option<(u64, Arc<Slot>)> {
        let mut open = self.lock();
        if open.len() >= self.max {
            let idle = open
                .iter()
                .find(|(_, s)| s.busy.load(Ordering::Acquire) == 0)
                .map(|(id, _)| *id);
            let Some(id) = idle else {
                self.shared.metrics.refused.inc();
                return None;
            };
            if let Some(slot) = open.remove(&id) {
                slot.close();
            }
            self.shared.metrics.closed_for_room.inc();
            self.shared.metrics.open.dec();
        }
        let slot = Arc::new(Slot::default());
        open.insert(id, slot.clone());
        self.shared.metrics.open.inc();
        Some((id, slot))
    }
}

/// The server's make-service: gives each accepted connection its service, numbered in the
/// order the listener accepted them (the accept loop calls it before the connection's task is
/// spawned), for [`Admission`] to tell which connection is oldest.
#[derive(Clone)]
pub struct Arrivals<S> {
    inner: S,
    next: Arc<AtomicU64>,
}

impl<S> Arrivals<S> {
    pub fn new(inner: S) -> Arrivals<S> {
        Arrivals {
            inner,
            next: Arc::default(),
        }
    }
}

impl<S: Clone, T> tower::Service<T> for Arrivals<S> {
    type Response = Arrived<S>;
    type Error = std::convert::Infallible;
    type Future = Ready<Result<Arrived<S>, std::convert::Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: T) -> Self::Future {
        ready(Ok(Arrived {
            seq: self.next.fetch_add(1, Ordering::Relaxed),
            inner: self.inner.clone(),
        }))
    }
}

/// One connection's service with its place in the order of arrival.
#[derive(Clone)]
pub struct Arrived<S> {
    seq: u64,
    inner: S,
}

impl<S: tower::Service<R>, R> tower::Service<R> for Arrived<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.inner.call(req)
    }
}

impl<I, S> Accept<I, Arrived<S>> for Admission {
    type Stream = Tracked<I>;
    type Service = Counted<S>;
    type Future = Ready<io::Result<(Tracked<I>, Counted<S>)>>;

    fn accept(&self, stream: I, service: Arrived<S>) -> Self::Future {
        let Arrived {
            seq,
            inner: service,
        } = service;
        ready(match self.admit(seq) {
            Some((id, slot)) => Ok((
                Tracked {
                    inner: stream,
                    id,
                    slot: slot.clone(),
                    admission: self.clone(),
                },
                Counted {
                    inner: service,
                    slot,
                },
            )),
            None => Err(io::Error::other(format!(
                "all {} connections are serving requests; connection refused",
                self.max
            ))),
        })
    }
}

/// A connection's stream: reads fail once the connection was closed to make room, and its
/// slot is given back when the connection ends.
pub struct Tracked<I> {
    inner: I,
    id: u64,
    slot: Arc<Slot>,
    admission: Admission,
}

impl<I> Drop for Tracked<I> {
    fn drop(&mut self) {
        // A connection closed to make room was already taken out.
        if self.admission.lock().remove(&self.id).is_some() {
            self.admission.shared.metrics.open.dec();
        }
    }
}

impl<I> Tracked<I> {
    fn check_closed(&self, cx: &mut Context<'_>) -> io::Result<()> {
        self.slot.waker.register(cx.waker());
        if self.slot.closed.load(Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for a new connection",
            ));
        }
        Ok(())
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Tracked<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check_closed(cx)?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Tracked<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A connection's service: marks the connection busy from a request's arrival until its
/// response body is sent (a status page's event stream stays busy while it is open).
#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    slot: Arc<Slot>,
}

/// One request in flight on a connection.
struct Busy(Arc<Slot>);

impl Busy {
    fn new(slot: Arc<Slot>) -> Busy {
        slot.busy.fetch_add(1, Ordering::AcqRel);
        Busy(slot)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<S, R> tower::Service<R> for Counted<S>
where
    S: tower::Service<R, Response = Response>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let busy = Busy::new(self.slot.clone());
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = response.await?;
            // The body owns the mark: it ends when the body is sent or dropped.
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _in_flight = &busy;
                    frame
                }))
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_leaves_the_reserve_and_has_a_floor() {
        assert_eq!(budget(Some(1024)), 1024 - FD_RESERVE as usize);
        assert_eq!(budget(Some(20)), MIN_CONNECTIONS);
        assert_eq!(budget(None), 1 << 20);
    }

    #[test]
    fn when_full_the_oldest_idle_connection_makes_room_and_busy_ones_never_do() {
        let metrics = ConnectionMetrics::default();
        let a = Admission::new(2, metrics.clone());
        let (first, s1) = a.admit(0).unwrap();
        let (_, s2) = a.admit(1).unwrap();
        // Full, both idle: the oldest (first) is closed.
        let (_, s3) = a.admit(2).unwrap();
        assert!(s1.closed.load(Ordering::Acquire));
        assert!(!s2.closed.load(Ordering::Acquire));
        assert!(!a.lock().contains_key(&first));
        // Full, the older one busy: the younger idle one goes.
        let _busy = Busy::new(s2.clone());
        let (_, _s4) = a.admit(3).unwrap();
        assert!(!s2.closed.load(Ordering::Acquire));
        assert!(s3.closed.load(Ordering::Acquire));
        // Full and all busy: refused.
        let _busy4 = Busy::new(_s4.clone());
        assert!(a.admit(4).is_none());
        assert_eq!(
            (metrics.closed_for_room.get(), metrics.refused.get()),
            (2, 1)
        );
        assert_eq!((a.lock().len(), metrics.open.get()), (2, 2));
    }

    #[test]
    fn the_oldest_is_by_arrival_not_by_when_its_task_ran() {
        let a = Admission::new(3, ConnectionMetrics::default());
        // Connection 3 arrived last but its task ran first; 0..=2 are silent.
        let (_, newest) = a.admit(3).unwrap();
        let (_, s0) = a.admit(0).unwrap();
        let (_, s1) = a.admit(1).unwrap();
        // Full: the room for connection 2 comes from connection 0, not from 3 (admitted first).
        let (_, _s2) = a.admit(2).unwrap();
        assert!(s0.closed.load(Ordering::Acquire));
        assert!(!s1.closed.load(Ordering::Acquire));
        assert!(!newest.closed.load(Ordering::Acquire));
    }

    #[tokio::test]
    async fn arrivals_number_connections_in_the_order_they_are_made() {
        use tower::Service;
        let mut make = Arrivals::new(());
        let mut seqs = Vec::new();
        for _ in 0..3 {
            seqs.push(make.call(()).await.unwrap().seq);
        }
        // A clone (the server keeps one per listener) shares the count.
        seqs.push(make.clone().call(()).await.unwrap().seq);
        assert_eq!(seqs, [0, 1, 2, 3]);
    }
}
