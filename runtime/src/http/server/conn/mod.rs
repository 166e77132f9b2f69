//! One [`Peer`] behind the HTTP front: a 2025-11-25 session's, or the one all 2026-07-28
//! requests share. The HTTP side writes the clients' messages into the peer as lines on an
//! in-memory pipe, so the peer applies exactly the rules and bounds it applies on stdio; the
//! pump reads the peer's output and sends each message on the stream it belongs to.
//!
//! - a response goes on the stream of its request, and ends it;
//! - `notifications/progress` goes on the stream of the request that gave its token;
//! - a request of ours to the client (sessions only) goes on the session's `GET` stream when
//!   one is open, else on a request stream that is; our `notifications/cancelled` for it
//!   follows it;
//! - any other notification goes on the `GET` stream (sessions) or nowhere (2026-07-28 has no
//!   stream that is not a request's).
//!
//! The 2026-07-28 peer is shared by clients that know nothing of each other, so their ids and
//! progress tokens are replaced by ours on the way in and put back on the way out.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cancelkit_protocol::jsonrpc::{ErrorCode, RequestId};
use futures_util::StreamExt;
use serde_json::value::RawValue;
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio_util::codec::FramedRead;

use super::lines::Lines;
use super::params::{cancelled_id, token_of, with_progress_token, with_token};
use super::request::HttpRequest;
use super::stream::{ResponseStream, StreamLimits};
use crate::JsonRpcError;
use crate::peer::wire::{self, Incoming};
use crate::peer::{Peer, PeerBuilder, PeerHandle};

mod cancels;
#[cfg(test)]
mod tests;

/// Bytes of the pipe between the HTTP side and the peer, each way.
const PIPE_BYTES: usize = 64 * 1024;
/// Finished streams kept for a client to resume after it missed their end.
const FINISHED_KEPT: usize = 64;
/// Streams no longer kept whose end is remembered (their number and the event after which
/// they owed nothing), so that a client resuming one late is told it ended.
const ENDED_KEPT: usize = 1024;
/// Cancels kept for requests not seen yet, per session.
pub(super) const EARLY_CANCELS: usize = 256;
/// How long such a cancel waits for its request.
pub(super) const EARLY_CANCEL_TTL: Duration = Duration::from_secs(30);

/// Which peer this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A 2025-11-25 (or earlier) session: one client, its own ids.
    Session,
    /// The peer of every 2026-07-28 request: ids and progress tokens are ours.
    Shared,
}

/// A request of a client on its way to the peer.
pub(super) struct Admitted {
    /// Its stream.
    pub(super) stream: Arc<ResponseStream>,
    /// The id the peer knows it by.
    pub(super) id: RequestId,
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
    /// Its request has been written into the peer: a cancel for it may follow it there.
    written: bool,
    /// What its handler learns about the HTTP request ([`HttpRequest::of`]).
    http: Option<Arc<HttpRequest>>,
    /// Shared peer: the client's own id, put back on the response.
    client_id: Option<RequestId>,
    /// The key of its progress route, if it gave a token.
    progress: Option<RequestId>,
}

struct ProgressRoute {
    stream: Arc<ResponseStream>,
    /// Shared peer: the client's own token, put back on each notification.
    client_token: Option<RequestId>,
}

#[derive(Default)]
struct Routes {
    requests: HashMap<RequestId, Route>,
    progress: HashMap<RequestId, ProgressRoute>,
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
    early: VecDeque<(RequestId, Instant, Bytes)>,
    closed: bool,
}

/// A peer behind the HTTP front; see the [module documentation](self).
pub(super) struct Conn {
    pub(super) kind: Kind,
    pub(super) peer: PeerHandle,
    input: tokio::sync::Mutex<WriteHalf<DuplexStream>>,
    /// Shared with the peer, which reads a request's [`HttpRequest`] from it as the request's
    /// handler starts.
    routes: Arc<Mutex<Routes>>,
    /// The session's `GET` stream (stream 0); `None` for the shared peer.
    pub(super) standalone: Option<Arc<ResponseStream>>,
    next_stream: AtomicU64,
    next_id: AtomicI64,
    limits: StreamLimits,
    max_requests: usize,
}

impl Conn {
    /// Starts a peer from `builder` and its pump. `limits`: what its streams keep for
    /// resumption and for slow clients; `max_requests`: requests in flight at most (and so
    /// request streams: each request has one).
    pub(super) fn start(
        kind: Kind,
        builder: PeerBuilder,
        limits: StreamLimits,
        max_requests: usize,
    ) -> (Arc<Conn>, Peer) {
        let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
        let (peer_read, peer_write) = tokio::io::split(theirs);
        let max_line = builder.output_limit();
        let routes = Arc::new(Mutex::new(Routes::default()));
        let lookup = Arc::downgrade(&routes);
        let peer = builder
            .transport_data(Arc::new(move |id: &RequestId| {
                let routes = lookup.upgrade()?;
                let routes = routes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let http = routes.requests.get(id)?.http.clone()?;
                Some(http as Arc<dyn std::any::Any + Send + Sync>)
            }))
            .connect(peer_read, peer_write);
        let (output, input) = tokio::io::split(ours);
        let standalone =
            (kind == Kind::Session).then(|| Arc::new(ResponseStream::new(0, &limits, true)));
        let conn = Arc::new(Conn {
            kind,
            peer: peer.handle(),
            input: tokio::sync::Mutex::new(input),
            routes,
            standalone,
            next_stream: AtomicU64::new(1),
            next_id: AtomicI64::new(1),
            limits,
            max_requests,
        });
        tokio::spawn(pump(Arc::clone(&conn), output, max_line));
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

    /// Writes one message into the peer; `false` if the peer is gone.
    pub(super) async fn send(&self, message: &[u8]) -> bool {
        let mut line = Vec::with_capacity(message.len() + 1);
        // A body may be pretty-printed; in valid JSON a line break is only ever whitespace.
        line.extend(message.iter().map(|b| match b {
            b'\n' | b'\r' => b' ',
            other => *other,
        }));
        line.push(b'\n');
        let mut input = self.input.lock().await;
        input.write_all(&line).await.is_ok()
    }

    /// Registers a request of a client before it is written into the peer: its stream, what
    /// its handler learns of the HTTP request, and (shared peer) the id and token it goes by.
    /// Returns what to write, and the admission.
    pub(super) fn admit(
        &self,
        id: &RequestId,
        method: &str,
        params: Option<&RawValue>,
        resumable: bool,
        http: Option<Arc<HttpRequest>>,
    ) -> Result<(Vec<u8>, Admitted), Refusal> {
        let token = crate::peer::progress_token_of(params);
        let mut routes = self.routes();
        if routes.closed {
            return Err(Refusal::Closed);
        }
        if routes.requests.len() >= self.max_requests {
            return Err(Refusal::Full);
        }
        let stream_id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let stream = Arc::new(ResponseStream::new(stream_id, &self.limits, resumable));
        let (message, peer_id, client_id, progress) = match self.kind {
            Kind::Session => {
                if routes.requests.contains_key(id) {
                    return Err(Refusal::DuplicateId);
                }
                (None, id.clone(), None, token.clone())
            }
            Kind::Shared => {
                let ours = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
                let our_token = token.as_ref().map(|_| {
                    RequestId::String(format!("p{}", self.next_id.fetch_add(1, Ordering::Relaxed)))
                });
                let rewritten = match (&our_token, params) {
                    (Some(ours), Some(params)) => Some(with_token(params, ours)),
                    _ => None,
                };
                let message = wire::request(&ours, method, rewritten.as_deref().or(params));
                (Some(message), ours, Some(id.clone()), our_token)
            }
        };
        if let Some(key) = &progress {
            if routes.progress.contains_key(key) {
                // Two requests of one session with one token: progress follows the first.
                tracing::debug!(token = %key, "a progress token already in use");
            } else {
                routes.progress.insert(
                    key.clone(),
                    ProgressRoute {
                        stream: Arc::clone(&stream),
                        client_token: token.clone().filter(|_| self.kind == Kind::Shared),
                    },
                );
            }
        }
        routes.requests.insert(
            peer_id.clone(),
            Route {
                stream: Arc::clone(&stream),
                written: false,
                http,
                client_id,
                progress,
            },
        );
        routes.streams.insert(stream_id, Arc::clone(&stream));
        Ok((
            message.unwrap_or_default(),
            Admitted {
                stream,
                id: peer_id,
            },
        ))
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
    fn route(self: &Arc<Self>, line: Bytes) {
        let mut answer_ourselves = None;
        {
            let mut routes = self.routes();
            match wire::parse(&line) {
                Incoming::Response { id, outcome } => {
                    let Some(route) = routes.requests.remove(&id) else {
                        tracing::debug!(%id, "a response for no request in flight; dropped");
                        return;
                    };
                    if let Some(token) = &route.progress {
                        routes.progress.remove(token);
                    }
                    let data = match &route.client_id {
                        None => line.clone(),
                        Some(client_id) => Bytes::from(match &outcome {
                            Ok(result) => wire::result(client_id, result),
                            Err(error) => wire::error(Some(client_id), error),
                        }),
                    };
                    route.stream.push(data, true);
                    Self::finish(&mut routes, &route.stream);
                }
                Incoming::Notification { method, params } => {
                    if method == "notifications/progress" {
                        let token = params.and_then(|p| token_of(p.get()));
                        if let Some(route) = token.and_then(|t| routes.progress.get(&t)) {
                            let data = match (&route.client_token, params) {
                                (Some(theirs), Some(params)) => Bytes::from(wire::notification(
                                    &method,
                                    Some(&with_progress_token(params, theirs)),
                                )),
                                _ => line.clone(),
                            };
                            route.stream.push(data, false);
                            return;
                        }
                    }
                    if method == "notifications/cancelled" {
                        let id = params.and_then(|p| cancelled_id(p.get()));
                        if let Some(stream) = id.and_then(|id| routes.outbound.remove(&id)) {
                            stream.push(line.clone(), false);
                            return;
                        }
                    }
                    match &self.standalone {
                        Some(standalone) => {
                            standalone.push(line.clone(), false);
                        }
                        None => tracing::debug!(%method, "a notification with no stream to go on"),
                    }
                }
                Incoming::Request { id, method, .. } => {
                    match self.stream_for_our_request(&routes) {
                        Some(stream) => {
                            if routes.outbound.len() < self.max_requests {
                                routes.outbound.insert(id.clone(), Arc::clone(&stream));
                            }
                            stream.push(line.clone(), false);
                        }
                        None => {
                            let error = JsonRpcError::new(
                                ErrorCode::from(-32603),
                                format!(
                                    "{method}: no stream to the client (2026-07-28 has none for requests of the server)"
                                ),
                            );
                            answer_ourselves = Some(wire::error(Some(&id), &error));
                        }
                    }
                }
                Incoming::Invalid { .. } | Incoming::Ignored(_) => {
                    tracing::warn!("the peer wrote a message that is not JSON-RPC; dropped");
                }
            }
        }
        if let Some(answer) = answer_ourselves {
            // Not awaited here: the pump must go on reading the peer's output, or a peer
            // waiting for room there would never read this answer.
            let conn = Arc::clone(self);
            tokio::spawn(async move { conn.send(&answer).await });
        }
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
        routes.closed = true;
        let error = JsonRpcError::new(
            ErrorCode::from(-32603),
            "the server closed the connection before answering",
        );
        for (id, route) in routes.requests.drain() {
            let client_id = route.client_id.as_ref().unwrap_or(&id);
            route
                .stream
                .push(Bytes::from(wire::error(Some(client_id), &error)), true);
        }
        routes.progress.clear();
        routes.outbound.clear();
        if let Some(standalone) = &self.standalone {
            standalone.detach();
        }
    }
}

/// Reads the peer's output until it closes, routing every message.
async fn pump(conn: Arc<Conn>, output: ReadHalf<DuplexStream>, max_line: usize) {
    let mut lines = FramedRead::new(output, Lines::new(max_line));
    while let Some(Ok(line)) = lines.next().await {
        conn.route(line);
    }
    conn.close();
}
