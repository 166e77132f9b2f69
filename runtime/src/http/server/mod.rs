//! The server side of MCP over Streamable HTTP: [`McpHttpServer`], an axum service serving a
//! cancelkit [`Router`](crate::peer::Router) with the rules and bounds of the stdio peer.
//!
//! Every client message goes into a [`Peer`](crate::peer::Peer) built from the
//! [`PeerBuilder`] you give, exactly as it would on stdio; the HTTP side only decides which
//! peer and which response stream:
//!
//! - **2025-11-25 and earlier**: `initialize` (a POST without `Mcp-Session-Id`) opens a
//!   session with a peer of its own, named in the response's `Mcp-Session-Id`. Later POSTs name
//!   it; `GET` opens the session's stream for messages that belong to no request; `DELETE`
//!   ends the session, cancelling what it runs. `notifications/cancelled` is the cancel: the
//!   request's stream ends without a response (a cancel that overtakes its request on another
//!   connection waits for it). A response stream that breaks is *not* a
//!   cancel: its events wait in a bounded replay buffer, and a `GET` with `Last-Event-ID`
//!   resumes it (from 2025-11-25 on, every stream starts with a priming event, so it can be
//!   resumed before its first message). A stream that owes nothing more — its request was
//!   cancelled, or the client resumes at or past its response — answers the resume with 405,
//!   which both official clients take quietly (they resume every stream that ended without a
//!   result; a 400 made each cancel cost the TypeScript client five errors, and an event stream
//!   that ends at once made it reconnect every second).
//! - **2026-07-28**: no sessions. A request stamped with 2026-07-28 `_meta` (or
//!   `server/discover`) goes to one peer shared by every such request, under an id of ours;
//!   closing its response stream is its cancel.
//!
//! Answers: a request whose method is in [`stream_methods`](McpHttpServer::stream_methods)
//! (`tools/call` by default) gets an event stream at once; any other gets its response as JSON
//! unless something comes before it (progress, a request of ours), which makes it a stream.
//! Streams carry a keep-alive comment every [`keep_alive`](McpHttpServer::keep_alive) while
//! idle, so a proxy's idle timeout never closes — and at 2026-07-28, cancels — a long call.
//!
//! Every request is checked against DNS rebinding first ([`OriginPolicy`]: by default only
//! loopback origins, and loopback hosts on a loopback-bound server are the caller's to add).
//!
//! | bound | default | at the bound |
//! |---|---|---|
//! | [`max_sessions`](McpHttpServer::max_sessions) | 1024 | idle sessions are ended first; else `initialize` gets 503 and -32050 |
//! | [`max_sessions_per_owner`](McpHttpServer::max_sessions_per_owner) | none | that owner's idle sessions are ended first; else their `initialize` gets 503 and -32050 naming the share |
//! | [`session_idle`](McpHttpServer::session_idle) | 30 min | a session with nothing in flight and no stream open for that long is ended |
//! | [`replay_events`](McpHttpServer::replay_events) | 64 per stream | the oldest event goes (never the response); resuming from before it gets 400 |
//! | [`replay_bytes`](McpHttpServer::replay_bytes) | 1 MiB per stream | the same; the response is kept even when it alone is larger |
//! | [`session_replay_bytes`](McpHttpServer::session_replay_bytes) | 16 MiB per session, all its streams | a stream getting an event drops its own oldest ones (never its response) until the session is within it |
//! | requests in flight per peer | the builder's `max_in_flight` | 503 and -32050 |
//! | streams per session | one per request in flight, the 64 last finished, the `GET` stream | a request beyond is refused as above; the oldest finished stream is forgotten (resuming it gets 400, or 405 if it owed nothing more: the ends of the last 1,024 forgotten are kept) |
//! | a body | the builder's `max_frame_len` | 413 |
//! | a request id, a `progressToken` | the builder's `max_id_len` (256 bytes) | 400 with -32600 and `"id": null` (id), or -32602 (token); a `notifications/cancelled` naming such an id is ignored |
//! | cancels that overtook their request (sessions) | 256 per session, 30 s each | the oldest is forgotten (its request, if it ever comes, runs) |
//! | events waiting for a client that does not read | 256, and [`unread_bytes`](McpHttpServer::unread_bytes) (4 MiB) | its connection is dropped (a 2026-07-28 request is cancelled; a session's stream can be resumed) |

mod body;
mod conn;
mod handlers;
mod request;
mod session;
mod stream;

pub use request::HttpRequest;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::routing::post;
use cancelkit_wire::origin::OriginPolicy;
use tokio_util::sync::CancellationToken;

use crate::peer::PeerBuilder;
use conn::{Conn, Kind};
use session::Sessions;
use stream::{SessionBytes, StreamLimits};

/// How often an idle stream carries a keep-alive comment by default.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Sessions held at most by default.
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
/// How long a session may stay idle by default before it is ended.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// Events each stream of a session keeps for resumption by default.
pub const DEFAULT_REPLAY_EVENTS: usize = 64;
/// Bytes each stream of a session keeps for resumption by default (1 MiB).
pub const DEFAULT_REPLAY_BYTES: usize = 1024 * 1024;
/// Bytes all the streams of a session keep for resumption together by default (16 MiB).
pub const DEFAULT_SESSION_REPLAY_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of events a connection may leave unread by default before it is dropped (4 MiB).
pub const DEFAULT_UNREAD_BYTES: usize = 4 * 1024 * 1024;
/// The path served by default.
pub const DEFAULT_PATH: &str = "/mcp";

/// Serves a cancelkit `Router` over Streamable HTTP; see the [module documentation](self).
///
/// ```no_run
/// use cancelkit::http::server::McpHttpServer;
/// use cancelkit::peer::{McpRevision, Peer, Protocol, Router};
///
/// # async fn run(router: Router) -> std::io::Result<()> {
/// let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated)).router(router);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(listener, McpHttpServer::new(builder).into_router()).await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct McpHttpServer {
    builder: PeerBuilder,
    options: Options,
}

#[derive(Debug, Clone)]
struct Options {
    path: String,
    keep_alive: Option<Duration>,
    origin: OriginPolicy,
    max_sessions: usize,
    max_sessions_per_owner: usize,
    session_idle: Duration,
    replay: usize,
    replay_bytes: usize,
    session_replay_bytes: usize,
    unread_bytes: usize,
    stream_methods: Vec<String>,
    owner: Option<Owner>,
    stop: Option<CancellationToken>,
    on_request: Option<RequestHook>,
}

/// What sees a request before its handler: its method and the head of its POST.
type OnRequest = dyn Fn(&str, &mut Parts) -> HeaderMap + Send + Sync;

/// The hook of [`McpHttpServer::on_request`].
#[derive(Clone)]
struct RequestHook(Arc<OnRequest>);

impl std::fmt::Debug for RequestHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestHook(..)")
    }
}

/// What names a request's user, from its head.
type OwnerOf = dyn Fn(&Parts) -> Option<String> + Send + Sync;

/// Who a request is from, for sessions that belong to one user.
#[derive(Clone)]
struct Owner(Arc<OwnerOf>);

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Owner(..)")
    }
}

impl McpHttpServer {
    /// A server whose peers are built by `builder` (its router, its bounds, its MCP options).
    pub fn new(builder: PeerBuilder) -> McpHttpServer {
        McpHttpServer {
            builder,
            options: Options {
                path: DEFAULT_PATH.to_owned(),
                keep_alive: Some(DEFAULT_KEEP_ALIVE),
                origin: OriginPolicy::new(),
                max_sessions: DEFAULT_MAX_SESSIONS,
                max_sessions_per_owner: usize::MAX,
                session_idle: DEFAULT_SESSION_IDLE,
                replay: DEFAULT_REPLAY_EVENTS,
                replay_bytes: DEFAULT_REPLAY_BYTES,
                session_replay_bytes: DEFAULT_SESSION_REPLAY_BYTES,
                unread_bytes: DEFAULT_UNREAD_BYTES,
                stream_methods: vec!["tools/call".to_owned()],
                owner: None,
                stop: None,
                on_request: None,
            },
        }
    }

    /// The path to serve (default [`DEFAULT_PATH`]).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.options.path = path.into();
        self
    }

    /// The keep-alive comment interval on idle streams (default [`DEFAULT_KEEP_ALIVE`]);
    /// `None` sends none.
    pub fn keep_alive(mut self, every: Option<Duration>) -> Self {
        self.options.keep_alive = every.map(|d| d.max(Duration::from_millis(1)));
        self
    }

    /// Which `Origin` and `Host` values are accepted (default: loopback origins only, any
    /// host). A server bound to loopback should also check hosts
    /// ([`OriginPolicy::loopback_hosts`]).
    pub fn origin_policy(mut self, policy: OriginPolicy) -> Self {
        self.options.origin = policy;
        self
    }

    /// Sessions held at most (default [`DEFAULT_MAX_SESSIONS`]).
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.options.max_sessions = sessions.max(1);
        self
    }

    /// Sessions one owner ([`session_owner`](Self::session_owner)) holds at most (default: no
    /// share, only [`max_sessions`](Self::max_sessions)). An owner at their share gets 503 and
    /// -32050 for a new `initialize` (sessions of theirs idle past the idle limit are ended
    /// first), while everyone else still opens sessions.
    pub fn max_sessions_per_owner(mut self, sessions: usize) -> Self {
        self.options.max_sessions_per_owner = sessions.max(1);
        self
    }

    /// How long a session with nothing in flight and no stream open lives on (default
    /// [`DEFAULT_SESSION_IDLE`]).
    pub fn session_idle(mut self, idle: Duration) -> Self {
        self.options.session_idle = idle.max(Duration::from_millis(1));
        self
    }

    /// Events each stream of a session keeps for a client to resume it (default
    /// [`DEFAULT_REPLAY_EVENTS`], at most 256); 0 makes streams not resumable.
    pub fn replay_events(mut self, events: usize) -> Self {
        self.options.replay = events.min(stream::LIVE_QUEUE);
        self
    }

    /// Bytes each stream of a session keeps for a client to resume it (default
    /// [`DEFAULT_REPLAY_BYTES`]): past it, the oldest events go, as past
    /// [`replay_events`](Self::replay_events). The response that ends a stream is never
    /// dropped: it is owed, and kept even when it alone is larger.
    pub fn replay_bytes(mut self, bytes: usize) -> Self {
        self.options.replay_bytes = bytes;
        self
    }

    /// Bytes all the streams of one session keep together for resumption (default
    /// [`DEFAULT_SESSION_REPLAY_BYTES`]; a session has one stream per request in flight, the
    /// 64 last finished, and its `GET` stream). Past it, a stream that gets an event drops its
    /// own oldest events — the new one too, if need be — but never its response; other
    /// streams keep theirs. The events still reach a client that is connected.
    pub fn session_replay_bytes(mut self, bytes: usize) -> Self {
        self.options.session_replay_bytes = bytes;
        self
    }

    /// Bytes of events a connection may leave unread (default [`DEFAULT_UNREAD_BYTES`];
    /// besides at most 256 events): an event that would go beyond it drops the connection,
    /// as a client that does not read is never waited for. A 2026-07-28 request is then
    /// cancelled; a session's stream can be resumed with `Last-Event-ID`. An event larger than
    /// the bound still goes to a connection that has nothing waiting. Keep it above
    /// [`replay_bytes`](Self::replay_bytes): a resumption starts with the replayed events
    /// waiting.
    pub fn unread_bytes(mut self, bytes: usize) -> Self {
        self.options.unread_bytes = bytes;
        self
    }

    /// The methods answered with an event stream at once (default `tools/call`), so their
    /// progress flows and, at 2026-07-28, closing the stream can cancel them.
    pub fn stream_methods<I, S>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.options.stream_methods = methods.into_iter().map(Into::into).collect();
        self
    }

    /// Sessions belong to the user who opened them: `owner` says who sends an HTTP request
    /// (typically from what an authentication layer put in its extensions). A session is
    /// only found for requests with the owner of its `initialize`; anyone else — another
    /// user who learnt or guessed the id — is told it does not exist (404), for every
    /// method: POST, the `GET` stream, its resumption and `DELETE`. By default sessions
    /// belong to no one, and an unguessable id is their only protection.
    pub fn session_owner<F>(mut self, owner: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.options.owner = Some(Owner(Arc::new(owner)));
        self
    }

    /// When `stop` is cancelled, sessions' `GET` streams — which are owed no answer — end, so
    /// a graceful shutdown does not wait for clients that keep them open; a stream still owed
    /// an answer (a request's, or its resumption) goes on until the answer is sent.
    pub fn stop_streams_on(mut self, stop: CancellationToken) -> Self {
        self.options.stop = Some(stop);
        self
    }

    /// Runs `hook` on every request the server admits (not on notifications), after its
    /// checks and before its handler, with its method and the head of its POST: what the
    /// hook inserts into the extensions, the handler reads through
    /// [`HttpRequest::extensions`]; the headers it returns go on the response — an event
    /// stream's too, which starts before the handler runs. This is how a server tells a client
    /// at once something its handler will use, such as the id under which the call can be
    /// looked up (the gateway's `Cancelkit-Run-Id`).
    pub fn on_request<F>(mut self, hook: F) -> Self
    where
        F: Fn(&str, &mut Parts) -> HeaderMap + Send + Sync + 'static,
    {
        self.options.on_request = Some(RequestHook(Arc::new(hook)));
        self
    }

    /// The axum router serving the path: `POST`, `GET` and `DELETE`.
    pub fn into_router(self) -> axum::Router {
        let body_limit = self.builder.frame_limit();
        let path = self.options.path.clone();
        let state = Arc::new(State::new(self));
        axum::Router::new()
            .route(
                &path,
                post(handlers::post)
                    .get(handlers::get)
                    .delete(handlers::delete),
            )
            .layer(DefaultBodyLimit::max(body_limit))
            .with_state(state)
    }
}

/// What the handlers share.
struct State {
    builder: PeerBuilder,
    options: Options,
    sessions: Arc<Sessions>,
    shared: Mutex<Option<Arc<Conn>>>,
    max_requests: usize,
    /// The builder's `max_id_len`: the longest string request id or progress token.
    max_id_len: usize,
}

impl State {
    fn new(server: McpHttpServer) -> State {
        let options = server.options;
        State {
            max_requests: server.builder.request_limit(),
            max_id_len: server.builder.id_limit(),
            sessions: Sessions::new(
                options.max_sessions,
                options.max_sessions_per_owner,
                options.session_idle,
            ),
            builder: server.builder,
            options,
            shared: Mutex::new(None),
        }
    }

    /// The peer of 2026-07-28 requests, started (again) when there is none.
    fn shared_conn(&self) -> Arc<Conn> {
        let mut shared = self
            .shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match shared.as_ref() {
            Some(conn) if !conn.is_closed() => Arc::clone(conn),
            _ => {
                // Its streams are not resumable: no replay.
                let limits = StreamLimits {
                    replay_events: 0,
                    ..self.stream_limits()
                };
                let (conn, _peer) = Conn::start(
                    Kind::Shared,
                    self.builder.clone(),
                    limits,
                    self.max_requests,
                );
                *shared = Some(Arc::clone(&conn));
                conn
            }
        }
    }

    /// A new session's peer.
    fn session_conn(&self) -> Arc<Conn> {
        Conn::start(
            Kind::Session,
            self.builder.clone(),
            self.stream_limits(),
            self.max_requests,
        )
        .0
    }

    /// What the streams of a new connection keep, with a session share of its own.
    fn stream_limits(&self) -> StreamLimits {
        StreamLimits {
            replay_events: self.options.replay,
            replay_bytes: self.options.replay_bytes,
            unread_bytes: self.options.unread_bytes,
            session: SessionBytes::new(self.options.session_replay_bytes),
        }
    }
}
