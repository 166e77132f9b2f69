//! The client side of MCP over Streamable HTTP: a [`Peer`] whose messages travel as HTTP
//! requests to one server URL.
//!
//! [`HttpClient::connect`] serves the peer on a message transport
//! ([`PeerBuilder::serve`]) and spawns a *bridge* beside it, which turns each message the peer
//! sends into HTTP and hands every message the server sends to the peer, parsed once. Every
//! rule and bound of the peer's core applies as on stdio. Everything the
//! [`Peer`] does — negotiation ([`PeerHandle::discover_or_initialize`]), request futures that
//! cancel when dropped, routers for the server's requests — works unchanged.
//!
//! ```no_run
//! use cancelkit::http::client::HttpClient;
//! use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, Protocol};
//! use serde_json::{Value, json};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = HttpClient::new("https://mcp.example.com/mcp")?
//!     .with_http_client(cancelkit::tls::client_builder(None)?.build()?)
//!     .header(
//!         reqwest::header::AUTHORIZATION,
//!         reqwest::header::HeaderValue::from_static("Bearer secret"),
//!     );
//! let peer = client.connect(Peer::builder(Protocol::Mcp(McpRevision::Negotiated)));
//! let handle = peer.handle();
//! let info = json!({"name": "demo", "version": "1.0.0"});
//! handle.discover_or_initialize(info, DEFAULT_DISCOVER_TIMEOUT).await?;
//! let tools: Value = handle.request("tools/list", json!({})).await?;
//! // Dropping this future before it resolves cancels the call on the server.
//! let call = handle.request::<_, Value>("tools/call", json!({"name": "search", "arguments": {}}));
//! drop(call);
//! handle.close(); // then the bridge ends the session (DELETE); see `connect_with_bridge`
//! peer.closed().await;
//! # Ok(()) }
//! ```
//!
//! # Messages
//!
//! Every message the peer writes is one `POST` to the URL, with
//! `Accept: application/json, text/event-stream` and `Content-Type: application/json`. A
//! request is answered with its response as `application/json`, or with an event stream whose
//! events each carry one message — progress, the server's own requests and notifications, then
//! the response; all of them go to the peer in the order they came. Each request's `POST` runs
//! in a task of its own, so requests run concurrently. A notification, or a response to one of
//! the server's requests, is `POST`ed before the bridge reads the peer's next message, so they
//! reach the server in order (`notifications/initialized` before the requests after it) and
//! are expected to be answered `202 Accepted`.
//!
//! # Eras
//!
//! Each request is sent in the era it belongs to:
//!
//! - **2026-07-28**: a request whose `params._meta` names protocol version 2026-07-28 (the
//!   peer stamps every request once `server/discover` succeeded), and `server/discover`
//!   itself. It carries no session, `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method`, and
//!   `Mcp-Name` for the methods that act on a named thing. A `tools/call` also carries one
//!   `Mcp-Param-*` header per argument whose schema is annotated `x-mcp-header`, as the last
//!   `tools/list` through this connection described the tool. A server that finds them
//!   missing or stale answers `HeaderMismatch` (-32020), which the call gets as its error:
//!   list the tools again and retry. A listed tool whose declarations break the transport's
//!   rules (a header name that is empty or not an HTTP token, two parameters naming one
//!   header, a declaration on anything but a `string`, `integer` or `boolean` parameter reached
//!   through `properties`) is left out of the `tools/list` result the peer gets, as the
//!   specification requires of Streamable HTTP clients, with a warning in the log.
//! - **Legacy** (2025-11-25 and before): the `Mcp-Session-Id` the `initialize` answer carried
//!   is sent on every later `POST`, `GET` and `DELETE`, and so is the `protocolVersion` of the
//!   `initialize` result as `MCP-Protocol-Version` (never on `initialize` itself). After
//!   `notifications/initialized` has been accepted, the bridge opens the server's `GET` stream
//!   (unless [`listen(false)`](HttpClient::listen)) and delivers its messages to the peer; a
//!   server without one answers 405, which is fine. The peer's next message waits until the
//!   server has answered that `GET` (at most the [send timeout](HttpClient::send_timeout)), so
//!   that a request the server sends on the stream as soon as a call asks for it is not lost. The stream is opened again with
//!   `Last-Event-ID` when it ends (see [Resumption](#resumption)).
//!
//! Servers' requests and notifications arriving on any stream (`sampling/createMessage`,
//! `ping`, `notifications/cancelled`, ...) go to the peer — its router answers the requests
//! (one without a route gets -32601) — and its answers are `POST`ed back.
//!
//! # Cancellation
//!
//! The peer writes `notifications/cancelled {requestId}` when one of its request futures is
//! dropped unanswered (or times out). The bridge sends it the way the request's era wants:
//!
//! - **2026-07-28**: the notification is *not* sent. The request's `POST` is aborted — its
//!   connection closed, or its HTTP/2 stream reset — and the closed stream is the
//!   cancellation, as the specification defines it.
//! - **Legacy**: the notification is `POST`ed. If the request's `POST` had not been answered
//!   yet (no status and headers), the notification may overtake it on another connection, and a
//!   server ignores a cancel for a request it does not know yet: so it is sent again once the
//!   `POST` is answered (waiting at most the [send timeout](HttpClient::send_timeout)). Then the
//!   request's stream is dropped. Without a session (a stateless server) the stream is dropped
//!   at once after the first notification: such a server cannot relate a notification to a
//!   request on another connection, and treats the dropped connection as the cancel.
//!
//! A request cancelled while it waits for a `POST` slot is never sent at all.
//!
//! # Resumption
//!
//! When a request's event stream ends or breaks before its response, and the server gave its
//! events ids, the bridge waits for the server's `retry:` time (else
//! [`retry_delay`](HttpClient::retry_delay)), then reopens it: `GET` with
//! `Last-Event-ID: <the last id seen>` (and the session), and reads on from there. A reopened
//! stream that brings nothing new counts as a failed attempt, and each failed attempt doubles
//! the wait (at most [`max_retry_delay`](HttpClient::max_retry_delay)); after
//! [`resume_attempts`](HttpClient::resume_attempts) failed attempts in a row the request fails.
//! A 2026-07-28 request is resumed the same way if its server gave ids (servers of that
//! revision have no sessions and normally none); without ids there is nothing to resume from,
//! and the request fails at once.
//!
//! # Failures
//!
//! A request never goes unanswered: when the server's answer cannot be had, the peer gets an
//! error response for the request's id, so the caller's future fails with
//! [`RequestError::Rpc`](crate::peer::RequestError::Rpc):
//!
//! - a non-2xx status: the JSON-RPC error in the body, if it holds one (under our request's
//!   id); else -32603 with the status and the start of the body;
//! - the server cannot be reached, the answer is not JSON or holds no response, an event is
//!   too large, the stream ended and could not be resumed: -32603 saying so (errors with their
//!   causes, on one line).
//!
//! Every such -32603 carries `data.transport` — see [`TransportFailure`] — so that a caller
//! can tell a server that could not be reached from one that lost the call.
//!
//! **An expired session ends the connection.** A 404 to anything that carried the session (a
//! request, a notification, the `GET` stream) means the server ended the session, and the
//! specification asks the client to start a new one: a request that got it fails with -32603
//! ([`TransportFailure::SessionExpired`]), then the bridge
//! closes the peer's input, so the peer closes and every other request fails with
//! [`RequestError::Closed`](crate::peer::RequestError::Closed). Connect again for a new
//! session; [`PeerHandle::is_closed`] tells a supervisor when.
//!
//! When the peer closes (its output ends), the bridge drops the streams of what is still in
//! flight (the peer has failed those requests already), sends `DELETE` with the session if
//! there is one — which ends whatever the server still runs for it — and stops;
//! [`Bridge::stopped`] waits for that.
//!
//! # Bounds
//!
//! | bound | default | at the bound |
//! |---|---|---|
//! | [`max_event_bytes`](HttpClient::max_event_bytes) | 16 MiB, at most the builder's `max_frame_len` | one SSE line or event, or a JSON answer, beyond it: the stream is dropped and its request fails (-32603, [`TransportFailure::TooLarge`]); on the `GET` stream, the stream is reopened |
//! | [`max_message_bytes`](HttpClient::max_message_bytes) | the larger of the builder's `max_frame_len` and `max_output_bytes` | a longer message from the peer is not sent; a request is answered -32603 at once, anything else is dropped with a log line |
//! | [`max_concurrent_posts`](HttpClient::max_concurrent_posts) | 64 | further requests wait for a slot in order (still cancellable; nothing is sent for one cancelled while waiting) |
//! | [`max_queued_bytes`](HttpClient::max_queued_bytes) | 16 MiB | requests waiting for a slot hold at most this much; beyond, the bridge stops reading the peer's output until one gets a slot (back-pressure) |
//! | [`max_in_flight`](HttpClient::max_in_flight) | 1024 | requests tracked at once (waiting or posting); beyond, the bridge stops reading the peer's output until one finishes (back-pressure: the peer's later messages, cancels included, wait) |
//! | [`resume_attempts`](HttpClient::resume_attempts) | 5 | failed reopenings in a row; then the request fails, or the `GET` stream is given up |
//! | [`max_retry_delay`](HttpClient::max_retry_delay) | 30 s | the longest wait before reopening a stream, whatever `retry:` says |
//! | [`send_timeout`](HttpClient::send_timeout) | 10 s | a notification, a response or a `DELETE` not answered in time is given up (logged) |
//! | [`MAX_UNREAD_BYTES`] | 16 MiB | messages from the server that the peer has not read yet; beyond, the tasks reading the server's streams wait, and read no more of them (back-pressure down to the server's connection) |
//! | [`MAX_ANNOTATED_TOOLS`] | 4096 tools | the `x-mcp-header` annotations of further tools are not kept (their calls lack `Mcp-Param-*`) |
//!
//! [`Peer`]: crate::peer::Peer
//! [`PeerHandle::discover_or_initialize`]: crate::peer::PeerHandle::discover_or_initialize
//! [`PeerHandle::is_closed`]: crate::peer::PeerHandle::is_closed

mod bridge;
mod declared;
mod deliver;
mod failure;
mod post;
mod session;
mod stream;
#[cfg(test)]
mod tests;

use std::time::Duration;

use futures_util::SinkExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::PollSender;

use crate::peer::{Peer, PeerBuilder};

pub use failure::TransportFailure;

/// The largest SSE event (or line), or JSON answer, read from the server by default (16 MiB);
/// never more than the peer's own `max_frame_len`.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;
/// Request `POST`s open at once by default.
pub const DEFAULT_MAX_CONCURRENT_POSTS: usize = 64;
/// Requests tracked at once (waiting for a slot, or posting) by default.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;
/// Bytes of requests waiting for a `POST` slot by default (16 MiB).
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 16 << 20;
/// Failed attempts in a row at reopening an event stream, by default.
pub const DEFAULT_RESUME_ATTEMPTS: u32 = 5;
/// The wait before reopening an event stream whose server named no `retry:` time (1 s).
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest wait before reopening an event stream by default (30 s).
pub const DEFAULT_MAX_RETRY_DELAY: Duration = Duration::from_secs(30);
/// How long a notification, a response or a `DELETE` may take by default (10 s).
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to the server may take, with the HTTP client [`HttpClient::new`]
/// builds (10 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Tools whose `x-mcp-header` annotations are kept at most.
pub const MAX_ANNOTATED_TOOLS: usize = 4096;
/// Bytes of the server's messages waiting for the peer to read them (16 MiB; a larger
/// message passes alone).
pub const MAX_UNREAD_BYTES: usize = 16 << 20;

/// The peer's messages waiting for the bridge to take them; beyond, the peer waits.
const OUTPUT_MESSAGES: usize = 8;

/// An [`HttpClient`] that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL cannot be parsed.
    #[error("invalid server URL: {0}")]
    Url(String),
    /// The URL is not `http://` or `https://`.
    #[error("the server URL must be http:// or https://, not {0}://")]
    Scheme(String),
    /// The default HTTP client cannot be built (its TLS set-up failed).
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Connects a [`Peer`] to an MCP server over Streamable HTTP; see the
/// [module documentation](self).
///
/// Options are set before [`connect`](Self::connect); each bound's default and what happens at
/// it are in the module documentation's table.
#[derive(Debug, Clone)]
pub struct HttpClient {
    url: reqwest::Url,
    http: reqwest::Client,
    headers: HeaderMap,
    options: Options,
}

/// The bridge's bounds and switches.
#[derive(Debug, Clone)]
struct Options {
    max_event_bytes: usize,
    max_message_bytes: Option<usize>,
    max_concurrent_posts: usize,
    max_in_flight: usize,
    max_queued_bytes: usize,
    resume_attempts: u32,
    retry_delay: Duration,
    max_retry_delay: Duration,
    send_timeout: Duration,
    listen: bool,
}

impl HttpClient {
    /// A client for the MCP endpoint at `url` (`http://` or `https://`), with an HTTP client
    /// of its own: rustls trusting the platform's roots ([`crate::tls::client_builder`]),
    /// [`DEFAULT_CONNECT_TIMEOUT`], no redirects followed. Nothing is sent before
    /// [`connect`](Self::connect).
    ///
    /// # Errors
    ///
    /// The URL cannot be parsed or is not `http(s)://`, or the HTTP client cannot be built.
    pub fn new(url: impl reqwest::IntoUrl) -> Result<Self, ClientError> {
        let url = url
            .into_url()
            .map_err(|e| ClientError::Url(cancelkit_wire::chain(&e).to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ClientError::Scheme(url.scheme().to_owned()));
        }
        let http = crate::tls::client_builder(None)
            .map_err(|e| ClientError::Client(cancelkit_wire::chain(&e).to_string()))?
            .connect_timeout(DEFAULT_CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .user_agent(concat!("cancelkit/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Client(cancelkit_wire::chain(&e).to_string()))?;
        Ok(Self {
            url,
            http,
            headers: HeaderMap::new(),
            options: Options {
                max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
                max_message_bytes: None,
                max_concurrent_posts: DEFAULT_MAX_CONCURRENT_POSTS,
                max_in_flight: DEFAULT_MAX_IN_FLIGHT,
                max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
                resume_attempts: DEFAULT_RESUME_ATTEMPTS,
                retry_delay: DEFAULT_RETRY_DELAY,
                max_retry_delay: DEFAULT_MAX_RETRY_DELAY,
                send_timeout: DEFAULT_SEND_TIMEOUT,
                listen: true,
            },
        })
    }

    /// Sends everything with `client` instead: one from
    /// [`cancelkit::tls::client_builder`](crate::tls::client_builder) with a private CA, say,
    /// or with a proxy. Give it no overall request timeout — a call may stream for long; the
    /// peer's request timeouts cancel calls instead.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http = client;
        self
    }

    /// Sends `name: value` with every HTTP request (an `Authorization`, say). The headers of
    /// the protocol itself (`Accept`, `Content-Type`, `Mcp-*`, `MCP-Protocol-Version`,
    /// `Last-Event-ID`) are set per request and win. The value is marked sensitive, so it is
    /// not shown by `Debug`.
    pub fn header(mut self, name: HeaderName, mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        self.headers.insert(name, value);
        self
    }

    /// The largest SSE line and event (its data, type and id), or JSON answer, read from the
    /// server (default [`DEFAULT_MAX_EVENT_BYTES`], and never more than the builder's
    /// `max_frame_len`). Beyond it the stream is dropped and its request fails.
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.options.max_event_bytes = bytes.max(1);
        self
    }

    /// The longest message the peer may send (default: the larger of the builder's
    /// `max_frame_len` and `max_output_bytes`). A longer request is answered with -32603 at
    /// once; a longer notification or response is dropped with a log line.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.options.max_message_bytes = Some(bytes.max(1));
        self
    }

    /// How many request `POST`s may be open at once (default
    /// [`DEFAULT_MAX_CONCURRENT_POSTS`]); further requests wait for one to finish, in order.
    pub fn max_concurrent_posts(mut self, posts: usize) -> Self {
        self.options.max_concurrent_posts = posts.max(1);
        self
    }

    /// How many requests are tracked at once, waiting for a slot or posting (default
    /// [`DEFAULT_MAX_IN_FLIGHT`]); beyond, the bridge stops reading the peer's output until one
    /// finishes.
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.options.max_in_flight = requests.max(1);
        self
    }

    /// How many bytes the requests waiting for a `POST` slot may hold (default
    /// [`DEFAULT_MAX_QUEUED_BYTES`]); beyond, the bridge stops reading the peer's output until
    /// one gets its slot. A single larger request passes alone.
    pub fn max_queued_bytes(mut self, bytes: usize) -> Self {
        self.options.max_queued_bytes = bytes.max(1);
        self
    }

    /// How many failed attempts in a row at reopening an event stream are made before the
    /// request fails or the `GET` stream is given up (default [`DEFAULT_RESUME_ATTEMPTS`]);
    /// 0 never resumes.
    pub fn resume_attempts(mut self, attempts: u32) -> Self {
        self.options.resume_attempts = attempts;
        self
    }

    /// The wait before reopening an event stream when the server named no `retry:` time
    /// (default [`DEFAULT_RETRY_DELAY`]).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.options.retry_delay = delay;
        self
    }

    /// The longest wait before reopening an event stream, whatever the server's `retry:`
    /// says and however many attempts failed (default [`DEFAULT_MAX_RETRY_DELAY`]).
    pub fn max_retry_delay(mut self, delay: Duration) -> Self {
        self.options.max_retry_delay = delay;
        self
    }

    /// How long a notification, a response to the server, or the closing `DELETE` may take
    /// (default [`DEFAULT_SEND_TIMEOUT`]); also how long a cancelled legacy request's `POST`
    /// is awaited, to send its cancellation again once the server answered it.
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.options.send_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Whether to open the server's `GET` stream in a legacy session (default `true`).
    pub fn listen(mut self, listen: bool) -> Self {
        self.options.listen = listen;
        self
    }

    /// The URL requests go to.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Connects a peer built by `builder` (an MCP builder: its router serves the server's
    /// requests) to the server, and spawns the bridge on the current tokio runtime. Nothing is
    /// sent until the peer sends something — typically
    /// [`discover_or_initialize`](crate::peer::PeerHandle::discover_or_initialize).
    ///
    /// The builder's framing is replaced by lines, which the bridge reads. The bridge runs
    /// until the peer closes ([`PeerHandle::close`](crate::peer::PeerHandle::close), or the
    /// session expired).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as [`PeerBuilder::connect`] does.
    pub fn connect(self, builder: PeerBuilder) -> Peer {
        self.connect_with_bridge(builder).0
    }

    /// [`connect`](Self::connect), also returning the [`Bridge`], to wait until the session is
    /// ended after the peer closed:
    ///
    /// ```no_run
    /// # use cancelkit::http::client::HttpClient;
    /// # use cancelkit::peer::{McpRevision, Peer, Protocol};
    /// # async fn demo(client: HttpClient) {
    /// let (peer, bridge) = client.connect_with_bridge(Peer::builder(Protocol::Mcp(McpRevision::Negotiated)));
    /// // ...
    /// peer.handle().close();
    /// bridge.stopped().await; // the DELETE ending the session has been sent (or given up)
    /// # }
    /// ```
    pub fn connect_with_bridge(self, builder: PeerBuilder) -> (Peer, Bridge) {
        let event_limit = self
            .options
            .max_event_bytes
            .min(builder.frame_limit())
            .max(1);
        let line_limit = self
            .options
            .max_message_bytes
            .unwrap_or_else(|| builder.output_limit());
        let (output, from_peer) = tokio::sync::mpsc::channel(OUTPUT_MESSAGES);
        let output = PollSender::new(output)
            .sink_map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        let (task, input) = bridge::spawn(self, event_limit, from_peer, line_limit);
        let peer = builder.serve(input, output);
        (peer, Bridge { task })
    }
}

/// The task carrying a peer's messages over HTTP (see [`HttpClient::connect_with_bridge`]). It
/// runs on its own: dropping this does not stop it; the peer closing does.
#[derive(Debug)]
pub struct Bridge {
    task: tokio::task::JoinHandle<()>,
}

impl Bridge {
    /// Waits until the bridge has stopped: the peer closed, the requests still in flight were
    /// dropped, and the session was ended (`DELETE`, within the
    /// [send timeout](HttpClient::send_timeout)).
    pub async fn stopped(self) {
        let _ = self.task.await;
    }

    /// Whether the bridge has stopped.
    pub fn is_stopped(&self) -> bool {
        self.task.is_finished()
    }
}
