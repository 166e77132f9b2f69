//! A JSON-RPC connection with per-request cancellation: [`Peer`].
//!
//! One [`Peer`] serves one connection over any `AsyncRead + AsyncWrite` (stdio, a socket, an
//! in-memory duplex). It routes inbound requests to handlers ([`Router`]), each in its own task
//! inside its own cancellation scope, and sends outbound requests ([`PeerHandle::request`]) whose
//! futures tell the peer when they are dropped unanswered.
//!
//! Cancellation follows the [`Protocol`]:
//!
//! - the reader task handles cancel notifications itself, before it reads the next frame —
//!   never queued behind handlers or behind the concurrency limit;
//! - every request is registered before its handler starts, so a cancel can never miss it;
//! - ACP and LSP answer every cancelled request (its result, or -32800); MCP sends nothing after
//!   the peer's `notifications/cancelled` unless [`PeerBuilder::answer_cancelled`] is set;
//! - `initialize` is never cancelled, in either direction;
//! - cancels for unknown, finished or other-direction ids, and malformed cancels, are ignored
//!   with a log line;
//! - closing the connection cancels everything in flight.
//!
//! A cancel that arrives before its request is not remembered: on one ordered stream the
//! request is always registered first, so such a cancel can only be late (for a finished
//! request), and remembering it would wrongly cancel a later request that reuses the id.
//!
//! ```
//! use cancelkit::peer::{Context, Peer, Protocol, Router};
//! use cancelkit::{cancellable, JsonRpcError};
//!
//! #[cancellable]
//! async fn echo(text: String, _cx: Context) -> Result<String, JsonRpcError> {
//!     Ok(text)
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let (client_io, server_io) = tokio::io::duplex(4096);
//! let (read, write) = tokio::io::split(server_io);
//! let _server = Peer::builder(Protocol::Acp).router(Router::new().request("echo", echo)).connect(read, write);
//! let (read, write) = tokio::io::split(client_io);
//! let client = Peer::builder(Protocol::Acp).connect(read, write);
//! let answer: String = client.handle().request("echo", "hi").await.unwrap();
//! assert_eq!(answer, "hi");
//! # }
//! ```

pub(crate) mod framing;
mod outgoing;
mod policy;
mod registry;
mod router;
mod tasks;
pub(crate) mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit_protocol::acp;
use cancelkit_protocol::jsonrpc::{ErrorCode, RequestId};
use futures_util::{FutureExt, StreamExt};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

pub use framing::Framing;
pub use outgoing::{OutgoingRequest, RequestError};
pub use policy::{McpRevision, Protocol};
pub use router::{Context, Router};

use framing::{Frame, FrameDecoder};
use registry::{Cancel, Registry};
use router::Reply;
use wire::Incoming;

use crate::{CancelReason, Canceller, JsonRpcError, Scope};

/// The largest message accepted by default (16 MiB); larger frames are answered with an error
/// and skipped.
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// Configures a [`Peer`].
#[derive(Debug, Clone)]
pub struct PeerBuilder {
    protocol: Protocol,
    framing: Framing,
    router: Router,
    max_concurrency: Option<usize>,
    max_frame_len: usize,
    answer_cancelled: Option<bool>,
    emit_draft_cancel: bool,
    shutdown_grace: Duration,
}

impl PeerBuilder {
    /// The handlers for inbound requests and notifications.
    pub fn router(mut self, router: Router) -> Self {
        self.router = router;
        self
    }

    /// Overrides the protocol's framing (newline-delimited JSON for ACP and MCP,
    /// `Content-Length` for LSP).
    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// Runs at most `limit` request handlers at once; further requests wait in a queue, where
    /// they can still be cancelled. Cancel notifications never wait.
    pub fn max_concurrency(mut self, limit: usize) -> Self {
        self.max_concurrency = Some(limit.max(1));
        self
    }

    /// The largest message accepted, in bytes (default [`DEFAULT_MAX_FRAME_LEN`]).
    pub fn max_frame_len(mut self, bytes: usize) -> Self {
        self.max_frame_len = bytes;
        self
    }

    /// Whether a request the peer cancelled still gets a response (-32800 or its result).
    /// Default: yes for ACP and LSP, no for MCP; MCP gateways that answer cancelled
    /// `tools/call` with -32800 set it to `true`.
    pub fn answer_cancelled(mut self, answer: bool) -> Self {
        self.answer_cancelled = Some(answer);
        self
    }

    /// ACP only: send the draft `$/cancelRequest {id}` instead of `$/cancel_request` to a peer
    /// that declared `cancellation: {request: true}` during `initialize`. Peers that did not
    /// declare it still get the shipped `$/cancel_request`, which needs no capability.
    pub fn emit_draft_cancel(mut self, emit: bool) -> Self {
        self.emit_draft_cancel = emit;
        self
    }

    /// How long closing waits for cancelled handlers to send their answers (default 2 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Starts serving the connection: spawns its reader and writer tasks on the current tokio
    /// runtime.
    pub fn connect<Rd, Wr>(self, reader: Rd, writer: Wr) -> Peer
    where
        Rd: AsyncRead + Send + Unpin + 'static,
        Wr: AsyncWrite + Send + Unpin + 'static,
    {
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (notifications_tx, notifications_rx) = mpsc::unbounded_channel();
        let (connection, canceller) = Scope::root();
        let shared = Arc::new(Shared {
            protocol: self.protocol,
            answer_cancelled: self
                .answer_cancelled
                .unwrap_or(self.protocol.answers_cancelled()),
            emit_draft_cancel: self.emit_draft_cancel,
            peer_accepts_draft: AtomicBool::new(false),
            out: out_tx,
            registry: Registry::default(),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            router: self.router,
            limiter: self.max_concurrency.map(|n| Arc::new(Semaphore::new(n))),
            tasks: (self.protocol == Protocol::Mcp(McpRevision::V2025_11_25))
                .then(|| Arc::new(tasks::Tasks::default())),
            notifications: notifications_tx,
            connection,
            canceller,
            stop_reading: CancellationToken::new(),
        });
        tokio::spawn(notification_loop(
            notifications_rx,
            shared.connection.child(),
        ));
        let handle = PeerHandle {
            shared: Arc::clone(&shared),
        };
        let stop_writing = CancellationToken::new();
        let writer_task = tokio::spawn(write_loop(
            writer,
            out_rx,
            self.framing,
            stop_writing.clone(),
            shared.stop_reading.clone(),
        ));
        let reader_task = tokio::spawn(read_loop(
            handle.clone(),
            FramedRead::new(reader, FrameDecoder::new(self.framing, self.max_frame_len)),
            self.shutdown_grace,
            stop_writing,
            writer_task,
        ));
        Peer {
            handle,
            task: reader_task,
        }
    }
}

/// A served connection. Dropping it does not close the connection; use
/// [`PeerHandle::close`] or let the other side hang up.
#[derive(Debug)]
pub struct Peer {
    handle: PeerHandle,
    task: JoinHandle<()>,
}

impl Peer {
    /// A builder for a connection speaking `protocol`.
    pub fn builder(protocol: Protocol) -> PeerBuilder {
        PeerBuilder {
            protocol,
            framing: protocol.default_framing(),
            router: Router::new(),
            max_concurrency: None,
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            answer_cancelled: None,
            emit_draft_cancel: false,
            shutdown_grace: Duration::from_secs(2),
        }
    }

    /// A handle for sending requests and notifications; cheap to clone.
    pub fn handle(&self) -> PeerHandle {
        self.handle.clone()
    }

    /// Waits until the connection is closed and every answer owed has been written.
    pub async fn closed(self) {
        let _ = self.task.await;
    }
}

/// Sends requests and notifications on a connection; cheap to clone.
#[derive(Clone)]
pub struct PeerHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PeerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerHandle")
            .field("protocol", &self.shared.protocol)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl PeerHandle {
    /// Sends a request and returns its future. The request is written at once; awaiting the
    /// future waits for the answer, and dropping it unanswered cancels it (see
    /// [`OutgoingRequest`]).
    pub fn request<P: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: P,
    ) -> OutgoingRequest<R> {
        let shared = &self.shared;
        let id = RequestId::Number(shared.next_id.fetch_add(1, Ordering::Relaxed));
        let name: Arc<str> = Arc::from(method);
        let mut params = match serde_json::to_value(params) {
            Ok(params) => params,
            Err(e) => {
                return OutgoingRequest::failed(
                    Arc::clone(shared),
                    id,
                    name,
                    RequestError::Encode(e),
                );
            }
        };
        if shared.protocol == Protocol::Acp && method == "initialize" {
            declare_draft_cancellation(&mut params, "clientCapabilities");
        }
        let raw = to_raw(&params);
        let (tx, rx) = oneshot::channel();
        shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id.clone(),
                Pending {
                    tx,
                    method: Arc::clone(&name),
                },
            );
        if shared.closed() || !shared.send(wire::request(&id, method, raw.as_deref())) {
            shared.forget(&id);
            return OutgoingRequest::failed(Arc::clone(shared), id, name, RequestError::Closed);
        }
        OutgoingRequest::new(Arc::clone(shared), id, name, rx)
    }

    /// Sends a notification. Fails only if the connection is closed.
    pub fn notify<P: Serialize>(&self, method: &str, params: P) -> Result<(), RequestError> {
        let params = serde_json::to_value(params).map_err(RequestError::Encode)?;
        let raw = to_raw(&params);
        if self.shared.send(wire::notification(method, raw.as_deref())) {
            Ok(())
        } else {
            Err(RequestError::Closed)
        }
    }

    /// How many inbound requests are registered and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.shared.registry.len()
    }

    /// How many of our requests are waiting for an answer.
    pub fn pending_requests(&self) -> usize {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Whether the peer declared the draft `cancellation: {request: true}` capability (ACP).
    pub fn peer_accepts_draft_cancel(&self) -> bool {
        self.shared.peer_accepts_draft.load(Ordering::Relaxed)
    }

    /// Stops reading: everything in flight is cancelled (reason: shutdown), pending requests
    /// fail with [`RequestError::Closed`], and the connection ends once owed answers are sent.
    pub fn close(&self) {
        self.shared.stop_reading.cancel();
    }

    /// Whether the connection has stopped reading.
    pub fn is_closed(&self) -> bool {
        self.shared.closed()
    }
}

struct Pending {
    tx: oneshot::Sender<Reply>,
    /// Shared with the request's future: one allocation for both.
    method: Arc<str>,
}

pub(crate) struct Shared {
    protocol: Protocol,
    answer_cancelled: bool,
    emit_draft_cancel: bool,
    /// ACP: the peer declared `cancellation: {request: true}`.
    peer_accepts_draft: AtomicBool,
    out: mpsc::UnboundedSender<Vec<u8>>,
    registry: Registry,
    pending: Mutex<HashMap<RequestId, Pending>>,
    next_id: AtomicI64,
    router: Router,
    limiter: Option<Arc<Semaphore>>,
    /// MCP 2025-11-25: task-augmented requests and `tasks/*`.
    tasks: Option<Arc<tasks::Tasks>>,
    /// Notification handlers, run one after another in arrival order.
    notifications: mpsc::UnboundedSender<router::BoxFuture<()>>,
    /// Parent of every handler's scope; cancelled (shutdown) when the connection closes.
    connection: Scope,
    canceller: Canceller,
    stop_reading: CancellationToken,
}

impl Shared {
    fn send(&self, message: Vec<u8>) -> bool {
        self.out.send(message).is_ok()
    }

    fn closed(&self) -> bool {
        self.canceller.is_cancelled()
    }

    /// Forgets an outgoing request (its answer, if any, will be dropped).
    pub(crate) fn forget(&self, id: &RequestId) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// Tells the peer to cancel one of our requests (never `initialize`).
    pub(crate) fn send_cancel(&self, id: &RequestId, method: &str, reason: &str) {
        if method == "initialize" || self.closed() {
            return;
        }
        let draft = self.emit_draft_cancel && self.peer_accepts_draft.load(Ordering::Relaxed);
        let (cancel_method, params) = policy::cancel_notification(self.protocol, draft, id, reason);
        tracing::debug!(request_id = %id, method, reason, cancel_method, "cancelling our request");
        let raw = to_raw(&params);
        self.send(wire::notification(cancel_method, raw.as_deref()));
    }
}

fn to_raw(value: &serde_json::Value) -> Option<Box<RawValue>> {
    (!value.is_null()).then(|| serde_json::value::to_raw_value(value).expect("a Value serializes"))
}

/// Sets `<key>.cancellation.request = true` inside an ACP `initialize` params or result.
fn declare_draft_cancellation(message: &mut serde_json::Value, key: &str) {
    let Some(object) = message.as_object_mut() else {
        return;
    };
    let capabilities = object
        .entry(key)
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if let Some(capabilities) = capabilities.as_object_mut() {
        capabilities.insert(
            "cancellation".into(),
            serde_json::json!({ "request": true }),
        );
    }
}

/// Reads `<key>.cancellation.request` from an ACP `initialize` params or result.
fn declares_draft_cancellation(message: Option<&RawValue>, key: &str) -> bool {
    message
        .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok())
        .and_then(|value| {
            value
                .get(key)?
                .get("cancellation")?
                .get("request")?
                .as_bool()
        })
        .unwrap_or(false)
}

/// Writes queued messages, batching whatever is queued into one write. A write error closes
/// the connection (`close_reading`): nothing more can be answered on it.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    framing: Framing,
    stop: CancellationToken,
    close_reading: CancellationToken,
) {
    let mut buffer = Vec::with_capacity(8 * 1024);
    loop {
        let first = tokio::select! {
            biased;
            message = rx.recv() => message,
            () = stop.cancelled() => None,
        };
        let Some(first) = first else {
            break;
        };
        buffer.clear();
        framing::encode(framing, &first, &mut buffer);
        // Everything queued meanwhile goes out in the same write.
        while buffer.len() < 1 << 20
            && let Ok(message) = rx.try_recv()
        {
            framing::encode(framing, &message, &mut buffer);
        }
        if let Err(e) = async {
            writer.write_all(&buffer).await?;
            writer.flush().await
        }
        .await
        {
            tracing::warn!(error = %e, "cannot write to the peer; closing the connection");
            close_reading.cancel();
            return;
        }
    }
    // Stopping: write what is still queued.
    buffer.clear();
    while let Ok(message) = rx.try_recv() {
        framing::encode(framing, &message, &mut buffer);
    }
    if !buffer.is_empty() {
        let _ = writer.write_all(&buffer).await;
    }
    let _ = writer.flush().await;
    let _ = writer.shutdown().await;
}

async fn read_loop<Rd: AsyncRead + Unpin>(
    peer: PeerHandle,
    mut frames: FramedRead<Rd, FrameDecoder>,
    grace: Duration,
    stop_writing: CancellationToken,
    writer_task: JoinHandle<()>,
) {
    let shared = Arc::clone(&peer.shared);
    loop {
        let frame = tokio::select! {
            biased;
            () = shared.stop_reading.cancelled() => break,
            frame = frames.next() => frame,
        };
        match frame {
            None => break,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "cannot read from the peer; closing the connection");
                break;
            }
            Some(Ok(Frame::Rejected(why))) => {
                tracing::warn!(why, "rejected a frame");
                let error =
                    JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request").with_data(why);
                shared.send(wire::error(None, &error));
            }
            Some(Ok(Frame::Message(bytes))) => handle_message(&peer, &bytes),
        }
    }
    // Closing: cancel everything in flight, fail what we are waiting for, then let cancelled
    // handlers send the answers they owe (bounded by the grace period) before the writer stops.
    shared.canceller.cancel(CancelReason::Shutdown);
    let pending: Vec<Pending> = {
        let mut map = shared.pending.lock().unwrap_or_else(|e| e.into_inner());
        map.drain().map(|(_, pending)| pending).collect()
    };
    drop(pending);
    if tokio::time::timeout(grace, shared.registry.drained())
        .await
        .is_err()
    {
        tracing::warn!(
            in_flight = shared.registry.len(),
            "closing with handlers still running after the grace period; their answers are dropped"
        );
    }
    stop_writing.cancel();
    let _ = writer_task.await;
}

/// Runs notification handlers one at a time, in the order the notifications arrived (streamed
/// updates such as ACP `session/update` must not overtake each other), until the connection
/// closes.
async fn notification_loop(
    mut queue: mpsc::UnboundedReceiver<router::BoxFuture<()>>,
    scope: Scope,
) {
    let closed = scope.token().clone();
    scope
        .run(async move {
            loop {
                let next = tokio::select! {
                    biased;
                    () = closed.cancelled() => break,
                    next = queue.recv() => next,
                };
                let Some(handler) = next else { break };
                tokio::select! {
                    biased;
                    () = closed.cancelled() => break,
                    _ = std::panic::AssertUnwindSafe(handler).catch_unwind() => {}
                }
            }
        })
        .await;
}

/// Handles one message. Runs on the reader task: everything here is quick and never waits.
fn handle_message(peer: &PeerHandle, bytes: &[u8]) {
    let shared = &peer.shared;
    match wire::parse(bytes) {
        Incoming::Request { id, method, params } => handle_request(peer, id, &method, params),
        Incoming::Notification { method, params } => handle_notification(peer, &method, params),
        Incoming::Response { id, outcome } => {
            let pending = shared
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            match pending {
                Some(pending) => {
                    if shared.protocol == Protocol::Acp
                        && &*pending.method == "initialize"
                        && let Ok(result) = &outcome
                    {
                        let accepts =
                            declares_draft_cancellation(Some(result), "agentCapabilities");
                        shared.peer_accepts_draft.store(accepts, Ordering::Relaxed);
                    }
                    let _ = pending.tx.send(outcome);
                }
                None => tracing::debug!(
                    request_id = %id,
                    "dropped a response to a request we never sent, already cancelled or gave up on"
                ),
            }
        }
        Incoming::Invalid { id, error } => {
            tracing::warn!(error = %error, data = ?error.data, "invalid message from the peer");
            shared.send(wire::error(id.as_ref(), &error));
        }
        Incoming::Ignored(why) => tracing::warn!(why, "ignored a message from the peer"),
    }
}

fn handle_notification(peer: &PeerHandle, method: &str, params: Option<&RawValue>) {
    let shared = &peer.shared;
    if let Some(cancel) = shared.protocol.parse_cancel(method, params) {
        match cancel {
            Ok(cancel) => {
                let reason = CancelReason::Peer(cancel.reason.clone());
                match shared
                    .registry
                    .cancel(&cancel.id, reason, !shared.answer_cancelled)
                {
                    Cancel::Cancelled => tracing::info!(
                        request_id = %cancel.id,
                        reason = cancel.reason.as_deref().unwrap_or("none given"),
                        "the peer cancelled a request"
                    ),
                    outcome => tracing::info!(
                        request_id = %cancel.id,
                        ?outcome,
                        "ignored a cancel for a request that is unknown, finished, already cancelled or not cancellable"
                    ),
                }
            }
            Err(why) => tracing::warn!(method, why, "ignored a malformed cancel notification"),
        }
        return;
    }
    if shared.protocol == Protocol::Acp && method == acp::SessionCancelParams::METHOD {
        match params.map(|raw| serde_json::from_str::<acp::SessionCancelParams>(raw.get())) {
            Some(Ok(cancel)) => {
                let cancelled = shared.registry.cancel_session(&cancel.session_id);
                tracing::info!(session_id = %cancel.session_id, prompts = cancelled, "the client cancelled a prompt turn");
            }
            _ => tracing::warn!("ignored a malformed session/cancel"),
        }
        // Also delivered to a `session/cancel` handler, if the application has one.
    }
    let cx = Context {
        peer: peer.clone(),
        id: None,
    };
    match shared.router.notify(method, params, cx) {
        Some(Ok(fut)) => {
            let _ = shared.notifications.send(fut);
        }
        Some(Err(why)) => tracing::warn!(method, why, "ignored a notification with invalid params"),
        None if method.starts_with("$/") => {
            tracing::debug!(method, "ignored an unknown protocol notification")
        }
        None => tracing::debug!(method, "ignored a notification without a handler"),
    }
}

fn handle_request(peer: &PeerHandle, id: RequestId, method: &str, params: Option<&RawValue>) {
    let shared = &peer.shared;
    if let Some(tasks) = &shared.tasks {
        // Quick task operations are answered right here, in order with the cancel notifications.
        let quick = match method {
            "tasks/get" => Some(tasks.get(params)),
            "tasks/cancel" => Some(tasks.cancel(params)),
            _ => None,
        };
        if let Some(reply) = quick {
            send_reply(shared, &id, &reply);
            return;
        }
        if method == "tasks/result" {
            let wait = Arc::clone(tasks).result(params.map(ToOwned::to_owned));
            spawn_request(peer, id, method, Box::pin(wait), false, None);
            return;
        }
    }
    let Some(route) = shared.router.request_route(method).cloned() else {
        let error =
            JsonRpcError::method_not_found().with_data(format!("no handler for `{method}`"));
        shared.send(wire::error(Some(&id), &error));
        return;
    };
    if let Some(tasks) = &shared.tasks
        && tasks::AUGMENTABLE.contains(&method)
        && let Some(ttl) = tasks::requested(params)
    {
        // Task-augmented: answer with the task now, run the handler on in the task's scope.
        let (scope, canceller) = shared.connection.child().with_canceller();
        let (task_id, created) = tasks.create(ttl, canceller);
        send_reply(shared, &id, &created);
        let cx = Context {
            peer: peer.clone(),
            id: Some(id),
        };
        let handler = route.call(params, cx);
        let (tasks, limiter, token) = (
            Arc::clone(tasks),
            shared.limiter.clone(),
            scope.token().clone(),
        );
        tokio::spawn(scope.clone().run(async move {
            let reply = guarded(run_handler(
                handler,
                &scope,
                &token,
                limiter,
                route.cooperative,
            ))
            .await;
            tasks.finish(&task_id, reply);
        }));
        return;
    }
    if shared.protocol == Protocol::Acp && method == "initialize" {
        let accepts = declares_draft_cancellation(params, "clientCapabilities");
        shared.peer_accepts_draft.store(accepts, Ordering::Relaxed);
    }
    let session = (shared.protocol == Protocol::Acp && method == "session/prompt")
        .then(|| {
            params
                .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok())
                .and_then(|value| value.get("sessionId")?.as_str().map(str::to_owned))
        })
        .flatten();
    let cx = Context {
        peer: peer.clone(),
        id: Some(id.clone()),
    };
    let handler = route.call(params, cx);
    spawn_request(peer, id, method, handler, route.cooperative, session);
}

/// Registers a request, then runs its handler in its own task and scope.
fn spawn_request(
    peer: &PeerHandle,
    id: RequestId,
    method: &str,
    handler: router::BoxFuture<Reply>,
    cooperative: bool,
    session: Option<String>,
) {
    let shared = &peer.shared;
    let is_initialize = method == "initialize";
    let (scope, canceller) = shared.connection.child().with_canceller();
    let generation = match shared
        .registry
        .insert(id.clone(), canceller, !is_initialize, session)
    {
        Ok(generation) => generation,
        Err(registry::Duplicate) => {
            tracing::warn!(request_id = %id, method, "rejected a request reusing an id still in flight");
            let error = JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request").with_data(
                format!("request id {id} is already in use by a request in flight"),
            );
            shared.send(wire::error(Some(&id), &error));
            return;
        }
    };
    let peer = peer.clone();
    let limiter = shared.limiter.clone();
    let token = scope.token().clone();
    tokio::spawn(scope.clone().run(async move {
        let reply = guarded(run_handler(handler, &scope, &token, limiter, cooperative)).await;
        finish(&peer, id, generation, is_initialize, reply);
    }));
}

fn send_reply(shared: &Shared, id: &RequestId, reply: &Reply) {
    shared.send(match reply {
        Ok(result) => wire::result(id, result),
        Err(error) => wire::error(Some(id), error),
    });
}

/// Runs a handler's future, turning a panic into -32603: the request is still answered (and
/// leaves the registry), and the connection goes on.
///
/// A plain combinator rather than an `async fn`, so the handler's future is not stored twice.
fn guarded(
    reply: impl std::future::Future<Output = Reply>,
) -> impl std::future::Future<Output = Reply> {
    std::panic::AssertUnwindSafe(reply)
        .catch_unwind()
        .map(|reply| {
            reply.unwrap_or_else(|_| Err(JsonRpcError::internal("the request handler panicked")))
        })
}

/// Waits for a slot (cancellably), then runs the handler; unless the route is cooperative, a
/// cancel drops the handler at its next `.await`.
async fn run_handler(
    handler: router::BoxFuture<Reply>,
    scope: &Scope,
    token: &CancellationToken,
    limiter: Option<Arc<Semaphore>>,
    cooperative: bool,
) -> Reply {
    let cancelled = || -> Reply {
        let reason = scope.cancel_reason().unwrap_or(CancelReason::Parent);
        Err(crate::Cancelled::new(reason).into())
    };
    let _permit = match limiter {
        Some(limiter) => tokio::select! {
            biased;
            () = token.cancelled() => return cancelled(),
            permit = limiter.acquire_owned() => permit.ok(),
        },
        None => None,
    };
    if cooperative {
        return handler.await;
    }
    tokio::select! {
        biased;
        reply = handler => reply,
        () = token.cancelled() => cancelled(),
    }
}

/// Sends a finished request's answer, as the protocol wants it.
fn finish(peer: &PeerHandle, id: RequestId, generation: u64, is_initialize: bool, reply: Reply) {
    let shared = &peer.shared;
    let Some(finished) = shared.registry.finish(&id, generation) else {
        tracing::info!(request_id = %id, "no response for a request the peer cancelled");
        return;
    };
    let reply = match reply {
        // ACP: a turn ended by `session/cancel` is answered with a result, never an error.
        Err(error) if finished.session_cancelled && error.is_cancelled() => Ok(
            RawValue::from_string(r#"{"stopReason":"cancelled"}"#.to_owned()).expect("valid JSON"),
        ),
        Ok(result) if is_initialize && shared.protocol == Protocol::Acp => {
            let mut value: serde_json::Value =
                serde_json::from_str(result.get()).unwrap_or(serde_json::Value::Null);
            declare_draft_cancellation(&mut value, "agentCapabilities");
            Ok(to_raw(&value).unwrap_or(result))
        }
        Ok(result) if is_initialize && shared.tasks.is_some() => {
            let mut value: serde_json::Value =
                serde_json::from_str(result.get()).unwrap_or(serde_json::Value::Null);
            declare_task_cancellation(&mut value);
            Ok(to_raw(&value).unwrap_or(result))
        }
        other => other,
    };
    send_reply(shared, &id, &reply);
}

/// MCP 2025-11-25: declares `capabilities.tasks.cancel` and task-augmented `tools/call` in an
/// `initialize` result, keeping whatever the application declared.
fn declare_task_cancellation(result: &mut serde_json::Value) {
    let Some(capabilities) = result
        .as_object_mut()
        .map(|r| {
            r.entry("capabilities")
                .or_insert_with(|| serde_json::json!({}))
        })
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    let tasks = capabilities
        .entry("tasks")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(tasks) = tasks.as_object_mut() {
        tasks
            .entry("cancel")
            .or_insert_with(|| serde_json::json!({}));
        let requests = tasks
            .entry("requests")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(requests) = requests.as_object_mut() {
            let tools = requests
                .entry("tools")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(tools) = tools.as_object_mut() {
                tools.entry("call").or_insert_with(|| serde_json::json!({}));
            }
        }
    }
}
