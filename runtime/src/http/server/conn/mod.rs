//! One [`Peer`] behind the HTTP front: a 2025-11-25 session's, or the one that serves every
//! 2026-07-28 request. The HTTP side hands the peer each client message it parsed, as a
//! message ([`Inbound`]); the peer applies exactly the rules and bounds it applies on stdio,
//! and each message it sends comes back through [`Routing`], which puts it on the stream it
//! belongs to — by its kind and channel, without parsing it again:
//!
//! - a response goes on the stream of its request, and ends it;
//! - on the 2026-07-28 peer, each request is its own channel (its stream's number): whatever
//!   its handler sends (progress, log messages) goes on its stream;
//! - in a session, `notifications/progress` goes on the stream of the request that gave its
//!   token; a request of ours to the client goes on the session's `GET` stream when one is
//!   open, else on a request stream that is, and our `notifications/cancelled` for it follows
//!   it; any other notification goes on the `GET` stream.
//!
//! Requests of different 2026-07-28 clients are keyed by their channels, so their ids and
//! progress tokens reach the handler as the clients sent them, and each client's user (the
//! server's `owner` hook) has its own share of the peer's in-flight bounds.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cancelkit_protocol::jsonrpc::{ErrorCode, RequestId};
use tokio::sync::mpsc;

use super::request::HttpRequest;
use super::stream::{ResponseStream, StreamLimits};
use crate::JsonRpcError;
use crate::peer::wire::{self, Incoming};
use crate::peer::{Inbound, Message, Outbound, OutboundKind, Owner, Peer, PeerBuilder, PeerHandle};

mod cancels;
pub(super) use cancels::cancelled_id;
#[cfg(test)]
mod tests;

/// Messages waiting for the peer to take them; beyond, the HTTP side waits (back-pressure).
const INPUT_MESSAGES: usize = 64;
/// Finished streams kept for a client to resume after it missed their end.
const FINISHED_KEPT: usize = 64;
/// Streams no longer kept whose end is remembered (their number and the event after which
/// they owed nothing), so that a client resuming one late is told it ended.
const ENDED_KEPT: usize = 1024;
/// Cancels kept for requests not seen yet, per session.
pub(super) const EARLY_CANCELS: usize = 256;
/// How long such a cancel waits for its request.
pub(super) const EARLY_CANCEL_TTL: Duration = Duration::from_secs(30);

/// A request's key: its channel (0 in a session, its stream's number at 2026-07-28) and its
/// id, as the client sent it.
pub(super) type Key = (u64, RequestId);

/// Which peer this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A 2025-11-25 (or earlier) session: one client, its own ids, channel 0.
    Session,
    /// The peer of every 2026-07-28 request: each request on a channel of its own.
    Shared,
}

/// A request of a client on its way to the peer.
pub(super) struct Admitted {
    /// Its stream.
    pub(super) stream: Arc<ResponseStream>,
    /// The key the peer knows it by.
    pub(super) key: Key,
}

/// Why a request was not admitted.
#[derive(Debug)]
pub(super) enum Refusal {
    /// Its id is in flight already (sessions).
    DuplicateId,
    /// The connection has as many requests in flight as it may hold.
    Full,
    /// The peer is closed.
    Closed,
}

struct Route {
    stream: Arc<ResponseStream>,
    /// Its request has been handed to the peer: a cancel for it may follow it there.
    written: bool,
    /// What its handler learns about the HTTP request ([`HttpRequest::of`]).
    http: Option<Arc<HttpRequest>>,
    /// Sessions: the progress token it gave, routed to its stream.
    progress: Option<RequestId>,
}

#[derive(Default)]
struct Routes {
    requests: HashMap<Key, Route>,
    /// Sessions: progress tokens and the streams their notifications go on.
    progress: HashMap<RequestId, Arc<ResponseStream>>,
    /// Our requests to the client and the stream each went on.
    outbound: HashMap<RequestId, Arc<ResponseStream>>,
    /// Every stream a client may still attach to, by number.
    streams: HashMap<u64, Arc<ResponseStream>>,
    /// Finished streams still kept, oldest first.
    finished: VecDeque<u64>,
    /// Streams forgotten since: each one's number and the event after which it owed nothing,
    /// oldest first, at most [`ENDED_KEPT`].
    ended: VecDeque<(u64, u64)>,
    /// Cancels for requests not seen yet (sessions): on HTTP a client's cancel may overtake
    /// its request on another connection. Oldest first; at most [`EARLY_CANCELS`], each kept
    /// for [`EARLY_CANCEL_TTL`]. MCP forbids reusing an id within a session, so a cancel kept
    /// for an id can only be meant for the request that will come with it.
    early: VecDeque<(RequestId, Instant, Message)>,
    closed: bool,
}

/// A peer behind the HTTP front; see the [module documentation](self).
pub(super) struct Conn {
    pub(super) kind: Kind,
    pub(super) peer: PeerHandle,
    input: mpsc::Sender<Inbound>,
    /// Shared with the peer, which reads a request's [`HttpRequest`] from it as the request's
    /// handler starts.
    routes: Arc<Mutex<Routes>>,
    /// The session's `GET` stream (stream 0); `None` for the shared peer.
    pub(super) standalone: Option<Arc<ResponseStream>>,
    next_stream: AtomicU64,
    limits: StreamLimits,
    max_requests: usize,
}

impl Conn {
    /// Starts a peer from `builder`. `limits`: what its streams keep for resumption and for
    /// slow clients; `max_requests`: requests in flight at most (and so request streams:
    /// each request has one).
    pub(super) fn start(
        kind: Kind,
        builder: PeerBuilder,
        limits: StreamLimits,
        max_requests: usize,
    ) -> (Arc<Conn>, Peer) {
        let (input, mut input_rx) = mpsc::channel(INPUT_MESSAGES);
        let routes = Arc::new(Mutex::new(Routes::default()));
        let lookup = Arc::downgrade(&routes);
        let builder = builder.transport_data(Arc::new(move |channel, id: &RequestId| {
            let routes = lookup.upgrade()?;
            let routes = routes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let http = routes.requests.get(&(channel, id.clone()))?.http.clone()?;
            Some(http as Arc<dyn std::any::Any + Send + Sync>)
        }));
        let standalone =
            (kind == Kind::Session).then(|| Arc::new(ResponseStream::new(0, &limits, true)));
        let (peer, conn) = {
            // The peer needs its output's sink before the connection exists; the sink finds
            // the connection through this slot, and keeps it while the peer writes (as the
            // peer's output needs its routes until the peer stops).
            let slot = Arc::new(std::sync::OnceLock::<Arc<Conn>>::new());
            let incoming = futures_util::stream::poll_fn(move |cx| {
                input_rx.poll_recv(cx).map(|message| message.map(Ok))
            });
            let peer = builder.serve(
                incoming,
                Routing {
                    conn: Arc::clone(&slot),
                },
            );
            let conn = Arc::new(Conn {
                kind,
                peer: peer.handle(),
                input,
                routes,
                standalone,
                next_stream: AtomicU64::new(1),
                limits,
                max_requests,
            });
            let _ = slot.set(Arc::clone(&conn));
            (peer, conn)
        };
        (conn, peer)
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the peer has stopped.
    pub(super) fn is_closed(&self) -> bool {
        self.routes().closed || self.peer.is_closed()
    }

    /// Requests in flight.
    pub(super) fn requests(&self) -> usize {
        self.routes().requests.len()
    }

    /// Hands one message of a client to the peer, waiting while the peer is behind; `false` if
    /// the peer is gone. `channel`: its request's channel on the shared peer (0: the
    /// connection's own), and `owner`, the user whose share it counts against there.
    pub(super) async fn send(&self, channel: u64, owner: Option<Owner>, message: Message) -> bool {
        let inbound = if channel == 0 {
            Inbound::Message(message)
        } else {
            Inbound::Channel {
                channel,
                owner,
                message,
            }
        };
        self.input.send(inbound).await.is_ok()
    }

    /// Hands the peer anything else the HTTP side has to say (an abandoned request).
    pub(super) async fn send_inbound(&self, inbound: Inbound) -> bool {
        self.input.send(inbound).await.is_ok()
    }

    /// Registers a request of a client before it is handed to the peer: its stream, and what
    /// its handler learns of the HTTP request.
    pub(super) fn admit(
        &self,
        id: &RequestId,
        progress: Option<RequestId>,
        resumable: bool,
        http: Option<Arc<HttpRequest>>,
    ) -> Result<Admitted, Refusal> {
        let mut routes = self.routes();
        if routes.closed {
            return Err(Refusal::Closed);
        }
        if routes.requests.len() >= self.max_requests {
            return Err(Refusal::Full);
        }
        let stream_id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let key = match self.kind {
            Kind::Session => (0, id.clone()),
            Kind::Shared => (stream_id, id.clone()),
        };
        if routes.requests.contains_key(&key) {
            return Err(Refusal::DuplicateId);
        }
        let stream = Arc::new(ResponseStream::new(stream_id, &self.limits, resumable));
        // At 2026-07-28 a request's progress goes on its channel's stream: no token routes.
        let progress = progress.filter(|_| self.kind == Kind::Session);
        if let Some(token) = &progress {
            if routes.progress.contains_key(token) {
                // Two requests of one session with one token: progress follows the first.
                tracing::debug!(%token, "a progress token already in use");
            } else {
                routes.progress.insert(token.clone(), Arc::clone(&stream));
            }
        }
        routes.requests.insert(
            key.clone(),
            Route {
                stream: Arc::clone(&stream),
                written: false,
                http,
                progress,
            },
        );
        routes.streams.insert(stream_id, Arc::clone(&stream));
        Ok(Admitted { stream, key })
    }

    /// The stream numbered `id`, for a client resuming it.
    pub(super) fn stream(&self, id: u64) -> Option<Arc<ResponseStream>> {
        if id == 0 {
            return self.standalone.clone();
        }
        self.routes().streams.get(&id).cloned()
    }

    /// The stream our request to the client goes on.
    fn stream_for_our_request(&self, routes: &Routes) -> Option<Arc<ResponseStream>> {
        let standalone = self.standalone.as_ref()?;
        if standalone.attached() {
            return Some(Arc::clone(standalone));
        }
        let open = routes
            .requests
            .values()
            .filter(|r| r.stream.attached())
            .max_by_key(|r| r.stream.id);
        Some(Arc::clone(open.map_or(standalone, |r| &r.stream)))
    }

    /// One message of the peer's, to the stream it belongs to.
    fn route(self: &Arc<Self>, message: Outbound) {
        let channel = message.channel();
        let mut routes = self.routes();
        match message.kind() {
            OutboundKind::Response { id: Some(id) } => {
                let Some(route) = routes.requests.remove(&(channel, id.clone())) else {
                    tracing::debug!(%id, "a response for no request in flight; dropped");
                    return;
                };
                if let Some(token) = &route.progress {
                    routes.progress.remove(token);
                }
                route.stream.push(message.into_bytes(), true);
                Self::finish(&mut routes, &route.stream);
            }
            OutboundKind::Response { id: None } => {
                tracing::warn!(
                    "the peer answered a message the HTTP side let through as invalid; dropped"
                );
            }
            OutboundKind::Request { id } if channel == 0 => {
                let id = id.clone();
                match self.stream_for_our_request(&routes) {
                    Some(stream) => {
                        if routes.outbound.len() < self.max_requests {
                            routes.outbound.insert(id, Arc::clone(&stream));
                        }
                        stream.push(message.into_bytes(), false);
                    }
                    None => self.refuse_our_request(routes, id, message.bytes()),
                }
            }
            OutboundKind::Request { id } => {
                let id = id.clone();
                self.refuse_our_request(routes, id, message.bytes());
            }
            _ if channel != 0 => {
                // What a 2026-07-28 request's handler sends goes on that request's stream.
                match routes.streams.get(&channel) {
                    Some(stream) => {
                        stream.push(message.into_bytes(), false);
                    }
                    None => tracing::debug!(channel, "a notification for a stream that is gone"),
                }
            }
            OutboundKind::Progress { token } if routes.progress.contains_key(token) => {
                routes.progress[token].push(message.into_bytes(), false);
            }
            OutboundKind::Cancel { id } if routes.outbound.contains_key(id) => {
                let stream = routes.outbound.remove(id).expect("present");
                stream.push(message.into_bytes(), false);
            }
            _ => match &self.standalone {
                Some(standalone) => {
                    standalone.push(message.into_bytes(), false);
                }
                None => tracing::debug!("a notification with no stream to go on"),
            },
        }
    }

    /// A request of ours with no stream to the client (2026-07-28 has none for requests of the
    /// server): the peer gets its error answer, as if from the client.
    fn refuse_our_request(
        self: &Arc<Self>,
        routes: std::sync::MutexGuard<'_, Routes>,
        id: RequestId,
        bytes: &[u8],
    ) {
        drop(routes);
        let method = match wire::parse(bytes) {
            Incoming::Request { method, .. } => method.into_owned(),
            _ => String::new(),
        };
        let error = JsonRpcError::new(
            ErrorCode::from(-32603),
            format!(
                "{method}: no stream to the client (2026-07-28 has none for requests of the server)"
            ),
        );
        let answer = Inbound::Message(Message::Response {
            id,
            outcome: Err(error),
        });
        // Not awaited here: the peer's writer is calling us, and a peer waiting for room in
        // its input would never get to this answer.
        let conn = Arc::clone(self);
        tokio::spawn(async move { conn.send_inbound(answer).await });
    }

    /// A response from the client to one of our requests: its stream no longer carries our
    /// cancel for it.
    pub(super) fn answered(&self, id: &RequestId) {
        self.routes().outbound.remove(id);
    }

    /// The peer stopped: every request still in flight is answered with an error, so no
    /// client waits for a response that will not come.
    fn close(&self) {
        let mut routes = self.routes();
        if routes.closed {
            return;
        }
        routes.closed = true;
        let error = JsonRpcError::new(
            ErrorCode::from(-32603),
            "the server closed the connection before answering",
        );
        for ((_, id), route) in routes.requests.drain() {
            route
                .stream
                .push(Bytes::from(wire::error(Some(&id), &error)), true);
        }
        routes.progress.clear();
        routes.outbound.clear();
        if let Some(standalone) = &self.standalone {
            standalone.detach();
        }
    }
}

/// The peer's output: each message routed to its stream as the peer hands it over (pushing
/// onto a stream never waits: each stream bounds what it holds for a slow client). Closing it
/// — or dropping it, when the peer stops — closes the connection.
struct Routing {
    conn: Arc<std::sync::OnceLock<Arc<Conn>>>,
}

impl Routing {
    fn conn(&self) -> Option<&Arc<Conn>> {
        self.conn.get()
    }
}

impl futures_util::Sink<Outbound> for Routing {
    type Error = std::io::Error;

    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, message: Outbound) -> std::io::Result<()> {
        if let Some(conn) = self.conn() {
            conn.route(message);
        }
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if let Some(conn) = self.conn() {
            conn.close();
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for Routing {
    fn drop(&mut self) {
        if let Some(conn) = self.conn() {
            conn.close();
        }
    }
}
