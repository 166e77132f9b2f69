//! [`PeerBuilder`]: a connection's options, every bound with its default, and `connect`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Peer;
use super::dispatch::{self, Limits};
use super::framing::Framing;
use super::handle::{PeerHandle, Shared};
use super::owners::OwnerBounds;
use super::policy::tasks::TaskLimits;
use super::policy::{McpOptions, Protocol, Rules};
use super::reader::read_loop;
use super::router::Router;
use super::transport::{self, Inbound, Outbound};
use super::writer::{Outbox, write_loop};

/// The largest message accepted by default (16 MiB); larger frames are answered with an error
/// and skipped.
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// Inbound requests in flight (running or queued) by default; more are refused with -32050.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 4096;

/// Bytes of params the inbound requests in flight may hold by default (64 MiB).
pub const DEFAULT_MAX_IN_FLIGHT_BYTES: usize = 64 * 1024 * 1024;

/// Bytes of inbound notifications queued for their handlers by default (16 MiB).
pub const DEFAULT_MAX_NOTIFICATION_BYTES: usize = 16 * 1024 * 1024;

/// Bytes of output waiting to be written by default (16 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;

/// How long the peer may leave our output unread before the connection is closed (60 s).
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long closing waits for owed answers to be sent by default (2 s).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The longest string request id or MCP `progressToken` accepted by default (256 bytes).
///
/// Neither JSON-RPC nor MCP bounds them, and no SDK we know sends long ones: integers, UUIDs
/// (36 bytes), a UUID with a counter. A peer keeps an id for as long as its request runs (and
/// the HTTP server in its routes), and copies a token into every progress notification, so an
/// unbounded one costs memory for minutes; 256 bytes leaves room for any id a client mints.
pub const DEFAULT_MAX_ID_LEN: usize = 256;

/// The smallest [`PeerBuilder::max_id_len`]: the ids and tokens the HTTP server gives its
/// shared 2026-07-28 peer must fit.
const MIN_ID_LEN: usize = 32;

/// MCP 2025-11-25 tasks a connection keeps at most by default.
pub const DEFAULT_MAX_TASKS: usize = 1024;

/// The longest `ttl` granted to an MCP task by default (24 h); longer requests are shortened.
pub const DEFAULT_MAX_TASK_TTL: Duration = Duration::from_secs(24 * 3600);

/// Configures a [`Peer`].
///
/// Every queue a connection has is bounded, and what happens at each bound is fixed:
///
/// | bound | default | at the bound |
/// |---|---|---|
/// | [`max_frame_len`](Self::max_frame_len) | 16 MiB | the frame is skipped and answered with -32600 |
/// | [`max_in_flight`](Self::max_in_flight) | 4096 requests | the request is refused at once with -32050 *Server overloaded* |
/// | [`max_in_flight_bytes`](Self::max_in_flight_bytes) | 64 MiB of params | the same |
/// | [`max_in_flight_per_owner`](Self::max_in_flight_per_owner) | a quarter of each in-flight bound | the same, for one owner's requests; the other owners are still served |
/// | [`max_concurrency`](Self::max_concurrency) | none | requests wait for a slot, still cancellable |
/// | [`max_id_len`](Self::max_id_len) | 256 bytes | a request with a longer string id gets -32600 with `"id": null`, one with a longer MCP `progressToken` -32602; neither runs; a cancel naming such an id is ignored |
/// | [`max_notification_bytes`](Self::max_notification_bytes) | 16 MiB | the reader waits for the notification handlers (back-pressure) |
/// | [`max_output_bytes`](Self::max_output_bytes) | 16 MiB | senders wait: handlers to answer, the reader to read on (back-pressure) |
/// | [`write_timeout`](Self::write_timeout) | 60 s | a peer that reads nothing for that long is disconnected; all in flight is cancelled |
/// | [`shutdown_grace`](Self::shutdown_grace) | 2 s | closing drops answers not yet written by then |
/// | [`max_tasks`](Self::max_tasks) (MCP) | 1024 | a task-augmented request is refused with -32050 |
/// | [`max_task_ttl`](Self::max_task_ttl) (MCP) | 24 h | a longer `ttl` is shortened; at its `ttl` a task is stopped and forgotten |
///
/// Cancel notifications are never refused or queued: the reader applies them as it reads them.
#[derive(Debug, Clone)]
pub struct PeerBuilder {
    protocol: Protocol,
    framing: Framing,
    router: Router,
    max_concurrency: Option<usize>,
    max_frame_len: usize,
    max_in_flight: usize,
    max_in_flight_bytes: usize,
    /// Per owner: requests, bytes and running handlers; `None`: a quarter of the
    /// connection's in-flight bounds, and no concurrency bound of its own.
    per_owner: Option<(usize, usize, Option<usize>)>,
    max_notification_bytes: usize,
    max_id_len: usize,
    max_output_bytes: usize,
    write_timeout: Duration,
    answer_cancelled: Option<bool>,
    emit_draft_cancel: bool,
    shutdown_grace: Duration,
    tasks: TaskLimits,
    mcp: McpOptions,
    extras: super::disconnect::Extras,
}

impl PeerBuilder {
    pub(super) fn new(protocol: Protocol) -> Self {
        Self {
            protocol,
            framing: protocol.default_framing(),
            router: Router::new(),
            max_concurrency: None,
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_in_flight_bytes: DEFAULT_MAX_IN_FLIGHT_BYTES,
            per_owner: None,
            max_notification_bytes: DEFAULT_MAX_NOTIFICATION_BYTES,
            max_id_len: DEFAULT_MAX_ID_LEN,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            answer_cancelled: None,
            emit_draft_cancel: false,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            tasks: TaskLimits {
                max_tasks: DEFAULT_MAX_TASKS,
                max_ttl: DEFAULT_MAX_TASK_TTL,
            },
            mcp: McpOptions::default(),
            extras: Default::default(),
        }
    }

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
    /// they can still be cancelled. Cancel notifications never wait. Requests running and
    /// queued together stay within [`max_in_flight`](Self::max_in_flight).
    pub fn max_concurrency(mut self, limit: usize) -> Self {
        self.max_concurrency = Some(limit.max(1));
        self
    }

    /// The largest message accepted, in bytes (default [`DEFAULT_MAX_FRAME_LEN`]).
    pub fn max_frame_len(mut self, bytes: usize) -> Self {
        self.max_frame_len = bytes;
        self
    }

    /// How many inbound requests may be in flight — running, or queued behind
    /// [`max_concurrency`](Self::max_concurrency) — at once (default
    /// [`DEFAULT_MAX_IN_FLIGHT`]). A request beyond it is answered at once with -32050
    /// *Server overloaded* and never runs; the reader goes on, so the cancels behind it still
    /// apply at once.
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests.max(1);
        self
    }

    /// How many bytes of params the inbound requests in flight may hold together (default
    /// [`DEFAULT_MAX_IN_FLIGHT_BYTES`]); a request beyond it is refused like one beyond
    /// [`max_in_flight`](Self::max_in_flight). A single request larger than the whole budget
    /// is admitted when nothing else is in flight.
    pub fn max_in_flight_bytes(mut self, bytes: usize) -> Self {
        self.max_in_flight_bytes = bytes;
        self
    }

    /// Each owner's share of the in-flight bounds, for transports that say who sent each
    /// message ([`Inbound::Channel`]: the Streamable HTTP server names a 2026-07-28 request's
    /// user, a gateway the token's subject): at most `requests` in flight, holding at most
    /// `bytes` of params, and (`Some`) at most `concurrency` running. One owner at its share is
    /// refused with -32050 like a connection at its bounds, while the others are still served.
    /// Each is capped by the connection's own bound. Default: a quarter of
    /// [`max_in_flight`](Self::max_in_flight) and of
    /// [`max_in_flight_bytes`](Self::max_in_flight_bytes), and no concurrency bound per owner.
    pub fn max_in_flight_per_owner(
        mut self,
        requests: usize,
        bytes: usize,
        concurrency: Option<usize>,
    ) -> Self {
        self.per_owner = Some((requests.max(1), bytes, concurrency.map(|n| n.max(1))));
        self
    }

    /// The per-owner bounds in force.
    fn owner_bounds(&self) -> OwnerBounds {
        let (requests, bytes, concurrency) = self.per_owner.unwrap_or((
            (self.max_in_flight / 4).max(1),
            self.max_in_flight_bytes / 4,
            None,
        ));
        OwnerBounds {
            requests: requests.min(self.max_in_flight),
            bytes: bytes.min(self.max_in_flight_bytes),
            concurrency,
        }
    }

    /// How many bytes of inbound notifications may wait for their handlers (default
    /// [`DEFAULT_MAX_NOTIFICATION_BYTES`]). Notifications cannot be refused, so when handlers
    /// fall this far behind, the reader waits for them (cancels included).
    pub fn max_notification_bytes(mut self, bytes: usize) -> Self {
        self.max_notification_bytes = bytes;
        self
    }

    /// The longest string request id, and MCP `_meta.progressToken`, accepted in bytes (default
    /// [`DEFAULT_MAX_ID_LEN`]; at least 32). Integer ids are always accepted.
    ///
    /// A request with a longer id is answered at once with -32600 *Invalid request: request id
    /// longer than N bytes* and `"id": null` — as JSON-RPC answers a request whose id it cannot
    /// use — and is never registered, run or logged with its id. A request with a longer
    /// progress token is answered with -32602, under its id, and never runs. A cancel naming a
    /// longer id is ignored (no request can have it), with a debug log line. The HTTP server
    /// applies the same bound before a request reaches its peer.
    pub fn max_id_len(mut self, bytes: usize) -> Self {
        self.max_id_len = bytes.max(MIN_ID_LEN);
        self
    }

    /// How many bytes of output may wait to be written (default
    /// [`DEFAULT_MAX_OUTPUT_BYTES`]). When the peer does not read and this fills up, whoever
    /// sends waits: handlers to answer, and the reader, which stops reading the peer's input.
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// How long the peer may leave our output unread — a write making no progress — before the
    /// connection is closed and everything in flight cancelled (default
    /// [`DEFAULT_WRITE_TIMEOUT`]).
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
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

    /// How long closing waits for cancelled handlers to send their answers and for the peer to
    /// take them (default [`DEFAULT_SHUTDOWN_GRACE`]); [`Peer::closed`] returns within it.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// MCP 2025-11-25: how many tasks the connection keeps at once, working or finished until
    /// their `ttl` ends (default [`DEFAULT_MAX_TASKS`]). A task-augmented request beyond it is
    /// refused with -32050.
    pub fn max_tasks(mut self, tasks: usize) -> Self {
        self.tasks.max_tasks = tasks;
        self
    }

    /// MCP 2025-11-25: the longest `ttl` granted to a task (default
    /// [`DEFAULT_MAX_TASK_TTL`]); a longer one asked for is shortened, as the specification
    /// allows. When a task's `ttl` ends it is forgotten, and stopped if still working.
    pub fn max_task_ttl(mut self, ttl: Duration) -> Self {
        self.tasks.max_ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// MCP 2026-07-28 client: the capabilities stamped on every request's `_meta` (default
    /// `{}`: none). Declare the tasks extension with
    /// `{"extensions": {"io.modelcontextprotocol/tasks": {}}}`.
    pub fn client_capabilities(mut self, capabilities: serde_json::Value) -> Self {
        self.mcp.client.capabilities = capabilities;
        self
    }

    /// MCP 2026-07-28 client: the `clientInfo` (`{"name", "version"}`) stamped on every
    /// request's `_meta`, which the specification asks clients to send.
    pub fn client_info(mut self, info: serde_json::Value) -> Self {
        self.mcp.client.info = Some(info);
        self
    }

    /// MCP 2026-07-28 server (tasks extension): `tools/call` of these tools runs as a task —
    /// answered at once with `resultType: "task"`, observed with `tasks/get`, stopped with
    /// `tasks/cancel` — for a client that declares `io.modelcontextprotocol/tasks` in the
    /// request's capabilities; `server/discover` then declares the extension. Other clients,
    /// and other tools, get the result as usual.
    ///
    /// At 2025-11-25, where the client asks for a task (`params.task`), only these tools run as
    /// tasks once this is called; a task-augmented call of another tool is refused with -32601
    /// (without this call, any `tools/call` may become a task).
    pub fn task_tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.mcp.task_tools = tools.into_iter().map(Into::into).collect();
        self.mcp.task_tools_declared = true;
        self
    }

    /// What reason text our cancels tell the peer (MCP `notifications/cancelled.reason`,
    /// -32800 `data.reason`); default [`ReasonPolicy::Summary`](super::ReasonPolicy::Summary):
    /// the kind of cause, never text a peer or an API caller gave us.
    pub fn outgoing_reason(mut self, policy: super::ReasonPolicy) -> Self {
        self.extras.reason = policy;
        self
    }

    /// What the peer going away does to the requests in flight; default
    /// [`DisconnectPolicy::cancel_all`](super::DisconnectPolicy::cancel_all).
    pub fn on_disconnect(mut self, policy: super::DisconnectPolicy) -> Self {
        self.extras.disconnect = policy;
        self
    }

    /// The longest message the peer may write: a transport reading its output as lines
    /// bounds them by this.
    #[cfg(feature = "http")]
    pub(crate) fn output_limit(&self) -> usize {
        self.max_frame_len.max(self.max_output_bytes)
    }

    /// How many requests a transport keeps routes for: the peer's own bound, plus room for
    /// the requests beyond it that the peer refuses with -32050 (so clients see its refusal).
    #[cfg(feature = "http")]
    pub(crate) fn request_limit(&self) -> usize {
        self.max_in_flight.saturating_add(64)
    }

    /// Whether the router has a handler for requests of `method`.
    #[cfg(feature = "http")]
    pub(crate) fn routes_request(&self, method: &str) -> bool {
        self.router.request_route(method).is_some()
    }

    /// What handlers learn from the transport about each request
    /// ([`Context::transport`](super::Context::transport)): `data` is asked with the request's
    /// id as its handler starts.
    #[cfg(feature = "http")]
    pub(crate) fn transport_data(mut self, data: super::disconnect::TransportData) -> Self {
        self.extras.transport = Some(data);
        self
    }

    /// The largest message accepted, in bytes.
    #[cfg(feature = "http")]
    pub(crate) fn frame_limit(&self) -> usize {
        self.max_frame_len
    }

    /// The longest string request id or progress token accepted, in bytes.
    #[cfg(feature = "http")]
    pub(crate) fn id_limit(&self) -> usize {
        self.max_id_len
    }

    /// Starts serving a byte stream: messages framed as [`PeerBuilder::framing`] says, none
    /// longer than [`PeerBuilder::max_frame_len`]. This is [`PeerBuilder::serve`] over
    /// [`transport::framed`].
    pub fn connect<Rd, Wr>(self, reader: Rd, writer: Wr) -> Peer
    where
        Rd: AsyncRead + Send + Unpin + 'static,
        Wr: AsyncWrite + Send + Unpin + 'static,
    {
        let (incoming, outgoing) =
            transport::framed(reader, writer, self.framing, self.max_frame_len);
        self.serve(incoming, outgoing)
    }

    /// Starts serving a message transport: spawns the task that takes `incoming` messages and
    /// the one that hands ours to `outgoing`, on the current tokio runtime. The connection
    /// ends when `incoming` ends or fails, or when `outgoing` fails or takes nothing for the
    /// [write timeout](PeerBuilder::write_timeout). See [`transport`](super::transport).
    pub fn serve<In, Out>(self, incoming: In, outgoing: Out) -> Peer
    where
        In: Stream<Item = std::io::Result<Inbound>> + Send + Unpin + 'static,
        Out: Sink<Outbound, Error = std::io::Error> + Send + Unpin + 'static,
    {
        let owner_bounds = self.owner_bounds();
        let rules = Rules::new(
            self.protocol,
            self.answer_cancelled,
            self.emit_draft_cancel,
            self.tasks,
            self.mcp,
        );
        let (outbox, out_rx) = Outbox::new(self.max_output_bytes);
        let output_budget = outbox.budget();
        let limits = Limits::new(
            self.max_in_flight,
            self.max_in_flight_bytes,
            self.max_concurrency,
            self.max_notification_bytes,
            self.max_id_len,
            owner_bounds,
        );
        let notification_budget = limits.notification_bytes.clone();
        // Bounded by `max_notification_bytes`: room is taken in that budget before anything is
        // queued, and given back when its handler has run.
        let (notifications_tx, notifications_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::new(
            rules,
            outbox,
            self.router,
            limits,
            notifications_tx,
            self.extras,
        ));
        tokio::spawn(dispatch::notification_loop(
            notifications_rx,
            notification_budget,
            shared.connection.child(),
        ));
        let handle = PeerHandle {
            shared: Arc::clone(&shared),
            channel: 0,
        };
        let stop_writing = CancellationToken::new();
        let writer_task = tokio::spawn(write_loop(
            outgoing,
            out_rx,
            output_budget,
            self.write_timeout,
            stop_writing.clone(),
            shared.stop_reading.clone(),
        ));
        let reader_task = tokio::spawn(read_loop(
            handle.clone(),
            incoming,
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
