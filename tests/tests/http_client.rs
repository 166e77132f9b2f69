//! The Streamable HTTP client (`cancelkit::http::client`): a cancelkit `Peer` whose messages
//! travel as HTTP, against servers nobody here wrote and against small servers that misbehave
//! on purpose.
//!
//! - rmcp 3.9's `StreamableHttpService` on 127.0.0.1, behind a tap that records every HTTP
//!   request: with sessions (revisions up to 2025-11-25), at 2026-07-28 (served statelessly),
//!   and without sessions answering JSON. Our peer negotiates, lists tools, calls them, answers
//!   the server's `roots/list`, and cancels a call by dropping its future — the rmcp tool sees
//!   its cancellation: by `notifications/cancelled` in a session, by the closed stream at
//!   2026-07-28.
//! - Resumption: the tap cuts each `tools/call` event stream right after its first event id;
//!   the call still gets its result, by `GET` with `Last-Event-ID` (and fails without it).
//! - A small axum server: a 2026-07-28 cancel is a closed stream and never a notification; the
//!   routing headers; failures (500 with text, 400 with a JSON-RPC error, a body that is not
//!   JSON, an oversized event, a stream that ends early, an expired session, a refused
//!   connection, a request beyond the client's limit) each fail the call with a clear error,
//!   never a hang; the session's `GET` stream reopened with `Last-Event-ID`; the server's own
//!   requests answered by the peer; at the `POST` bound requests wait in order while cancels
//!   still go through; a legacy cancel sent before its `POST` was answered is sent again.
//!
//! Only loopback addresses; every wait is bounded.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cancelkit::JsonRpcError;
use cancelkit::http::client::{Bridge, HttpClient, TransportFailure};
use cancelkit::peer::{
    Context, DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, PeerHandle, Protocol, RequestError,
    Router,
};
use cancelkit::wire::sse;
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The longest any single wait in these tests may take.
const WAIT: Duration = Duration::from_secs(10);

fn client_info() -> Value {
    json!({"name": "cancelkit-http-client-test", "version": "0.0.0"})
}

/// Waits (at most [`WAIT`]) until `check` gives a value.
async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {WAIT:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A peer connected through an [`HttpClient`], its bridge, and the `notifications/message`
/// its router received.
struct Client {
    peer: Peer,
    bridge: Bridge,
    messages: mpsc::Receiver<Value>,
}

impl Client {
    fn handle(&self) -> PeerHandle {
        self.peer.handle()
    }

    /// Closes the peer and waits (bounded) until the bridge has ended the session.
    async fn close(self) {
        self.peer.handle().close();
        tokio::time::timeout(WAIT, async {
            self.peer.closed().await;
            self.bridge.stopped().await;
        })
        .await
        .expect("the peer and its bridge stopped within 10 s");
    }
}

/// Connects a peer through `client`, with a router answering `ping` and `roots/list` and
/// forwarding `notifications/message`.
fn connect(client: HttpClient) -> Client {
    let (messages, received) = mpsc::channel(16);
    let router = Router::new()
        .request("ping", |_: Value, _: Context| async {
            Ok::<_, JsonRpcError>(json!({}))
        })
        .request("roots/list", |_: Value, _: Context| async {
            Ok::<_, JsonRpcError>(json!({"roots": [{"uri": "file:///work", "name": "work"}]}))
        })
        .notification("notifications/message", move |params: Value, _: Context| {
            let messages = messages.clone();
            async move {
                let _ = messages.try_send(params);
            }
        });
    let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .router(router)
        .client_capabilities(json!({"roots": {}}));
    let (peer, bridge) = client.connect_with_bridge(builder);
    Client {
        peer,
        bridge,
        messages: received,
    }
}

async fn negotiate(handle: &PeerHandle) -> McpRevision {
    tokio::time::timeout(
        WAIT,
        handle.discover_or_initialize(client_info(), DEFAULT_DISCOVER_TIMEOUT),
    )
    .await
    .expect("negotiated within 10 s")
    .expect("negotiated")
    .revision
}

/// `tools/call`, bounded: an answer (result or error) must come, never a hang.
async fn call(handle: &PeerHandle, tool: &str, arguments: Value) -> Result<Value, RequestError> {
    let request =
        handle.request::<_, Value>("tools/call", json!({"name": tool, "arguments": arguments}));
    tokio::time::timeout(WAIT, request)
        .await
        .unwrap_or_else(|_| panic!("`{tool}` got no answer within {WAIT:?}"))
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn rpc_error(outcome: Result<Value, RequestError>) -> JsonRpcError {
    match outcome {
        Err(RequestError::Rpc(error)) => error,
        other => panic!("expected an error response, got {other:?}"),
    }
}

fn header_of<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

// ---------------------------------------------------------------------------------------------
// rmcp's Streamable HTTP server, behind a tap.

mod rmcp_server {
    use super::*;
    use rmcp::handler::server::router::tool::ToolRouter;
    use rmcp::handler::server::wrapper::Parameters;
    use rmcp::model::{
        CallToolResult, CancelledNotificationParam, ContentBlock, ErrorData, ProtocolVersion,
        ServerCapabilities, ServerConfig,
    };
    use rmcp::service::{NotificationContext, RequestContext};
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use rmcp::{RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
    use serde::Deserialize;
    use std::borrow::Cow;

    /// How the server is configured.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Mode {
        /// Sessions; revisions up to 2025-11-25 only (a server from before 2026-07-28).
        Session,
        /// Every revision: 2026-07-28 served statelessly.
        Modern,
        /// No sessions, answers as `application/json`; revisions up to 2025-11-25.
        StatelessJson,
    }

    /// What the tools did, in order.
    #[derive(Clone, Default)]
    pub struct Log(Arc<Mutex<Vec<Value>>>);

    impl Log {
        fn push(&self, entry: Value) {
            self.0.lock().unwrap().push(entry);
        }

        pub fn all(&self) -> Vec<Value> {
            self.0.lock().unwrap().clone()
        }

        pub fn find(&self, event: &str, label: &str) -> Option<Value> {
            self.all()
                .into_iter()
                .find(|e| e["event"] == event && e["label"] == label)
        }
    }

    /// One HTTP request the server received.
    #[derive(Debug, Clone)]
    pub struct Seen {
        pub method: Method,
        pub headers: HeaderMap,
        pub body: Value,
        /// The answer's content type (POSTs).
        pub answered_as: Option<String>,
    }

    /// Every request the server received; optionally cuts `tools/call` event streams.
    #[derive(Clone, Default)]
    pub struct Tap {
        seen: Arc<Mutex<Vec<Seen>>>,
        cut_calls: Arc<AtomicBool>,
        cut: Arc<AtomicUsize>,
    }

    impl Tap {
        pub fn seen(&self) -> Vec<Seen> {
            self.seen.lock().unwrap().clone()
        }

        /// The POSTs of JSON-RPC `method`.
        pub fn posts(&self, method: &str) -> Vec<Seen> {
            self.seen()
                .into_iter()
                .filter(|s| s.method == Method::POST && s.body["method"] == method)
                .collect()
        }

        pub fn of(&self, method: Method) -> Vec<Seen> {
            self.seen()
                .into_iter()
                .filter(|s| s.method == method)
                .collect()
        }

        /// From now on, ends each `tools/call` event stream right after its first event id.
        pub fn cut_calls(&self) {
            self.cut_calls.store(true, Ordering::SeqCst);
        }

        /// How many streams were cut.
        pub fn cut(&self) -> usize {
            self.cut.load(Ordering::SeqCst)
        }
    }

    pub struct Server {
        pub url: String,
        pub log: Log,
        pub tap: Tap,
        stop: CancellationToken,
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.stop.cancel();
        }
    }

    impl Server {
        pub async fn start(mode: Mode) -> Server {
            Server::serve(mode, None).await
        }

        pub async fn start_tls(ca: &cancelkit_tests::tls::TestCa) -> Server {
            let tls = cancelkit::tls::server_config(&ca.cert_file(), &ca.key_file())
                .expect("the test CA's server certificate");
            Server::serve(Mode::Modern, Some(tls)).await
        }

        async fn serve(
            mode: Mode,
            tls: Option<Arc<cancelkit::tls::rustls::ServerConfig>>,
        ) -> Server {
            let log = Log::default();
            let tap = Tap::default();
            let stop = CancellationToken::new();
            let tools = Tools {
                log: log.clone(),
                legacy_only: mode != Mode::Modern,
                router: Tools::tool_router(),
            };
            let config = StreamableHttpServerConfig::default()
                // hyper notices a closed stream on its next write
                .with_sse_keep_alive(Some(Duration::from_millis(100)))
                .with_sse_retry(Some(Duration::from_millis(50)))
                .with_legacy_session_mode(mode != Mode::StatelessJson)
                .with_json_response(mode == Mode::StatelessJson)
                .with_cancellation_token(stop.child_token());
            let mut sessions = LocalSessionManager::default();
            // The `retry:` of its request streams' priming events.
            sessions.session_config.sse_retry = Some(Duration::from_millis(50));
            let service: StreamableHttpService<Tools, LocalSessionManager> =
                StreamableHttpService::new(move || Ok(tools.clone()), Arc::new(sessions), config);
            let recording = tap.clone();
            let app =
                axum::Router::new()
                    .nest_service("/mcp", service)
                    .layer(axum::middleware::from_fn(move |request, next| {
                        record(recording.clone(), request, next)
                    }));
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let stopped = stop.clone();
            let scheme = if tls.is_some() { "https" } else { "http" };
            match tls {
                Some(tls) => {
                    let listener = cancelkit::tls::TlsListener::new(listener, tls);
                    tokio::spawn(async move {
                        let _ = axum::serve(listener, app)
                            .with_graceful_shutdown(stopped.cancelled_owned())
                            .await;
                    });
                }
                None => {
                    tokio::spawn(async move {
                        let _ = axum::serve(listener, app)
                            .with_graceful_shutdown(stopped.cancelled_owned())
                            .await;
                    });
                }
            }
            Server {
                url: format!("{scheme}://{addr}/mcp"),
                log,
                tap,
                stop,
            }
        }
    }

    async fn record(tap: Tap, request: Request, next: Next) -> Response {
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, 16 << 20)
            .await
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let is_call = parts.method == Method::POST && body["method"] == "tools/call";
        let index = {
            let mut seen = tap.seen.lock().unwrap();
            seen.push(Seen {
                method: parts.method.clone(),
                headers: parts.headers.clone(),
                body,
                answered_as: None,
            });
            seen.len() - 1
        };
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        let content_type = header_of(response.headers(), "content-type").map(str::to_owned);
        tap.seen.lock().unwrap()[index].answered_as = content_type.clone();
        let event_stream = content_type.is_some_and(|t| t.starts_with("text/event-stream"));
        if !(is_call && event_stream && tap.cut_calls.load(Ordering::SeqCst)) {
            return response;
        }
        let (parts, body) = response.into_parts();
        let cut = CutAfterId {
            inner: body.into_data_stream(),
            parser: sse::Parser::new(sse::Limits::default()),
            events: Vec::new(),
            cut: Arc::clone(&tap.cut),
            done: false,
        };
        Response::from_parts(parts, Body::from_stream(cut))
    }

    /// An event stream that ends right after the chunk that brought its first event id.
    struct CutAfterId {
        inner: axum::body::BodyDataStream,
        parser: sse::Parser,
        events: Vec<sse::Event>,
        cut: Arc<AtomicUsize>,
        done: bool,
    }

    impl Stream for CutAfterId {
        type Item = Result<Bytes, axum::Error>;

        fn poll_next(
            mut self: Pin<&mut Self>,
            cx: &mut TaskContext<'_>,
        ) -> Poll<Option<Self::Item>> {
            let this = &mut *self;
            if this.done {
                return Poll::Ready(None);
            }
            match this.inner.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    let _ = this.parser.feed(&chunk, &mut this.events);
                    this.events.clear();
                    if this.parser.last_event_id().is_some() {
                        this.done = true;
                        this.cut.fetch_add(1, Ordering::SeqCst);
                    }
                    Poll::Ready(Some(Ok(chunk)))
                }
                other => other,
            }
        }
    }

    #[derive(Clone)]
    struct Tools {
        log: Log,
        legacy_only: bool,
        router: ToolRouter<Tools>,
    }

    #[derive(Deserialize, schemars::JsonSchema)]
    struct EchoArgs {
        text: String,
    }

    #[derive(Deserialize, schemars::JsonSchema)]
    struct SleepArgs {
        seconds: f64,
        label: String,
    }

    /// Records a sleep that was dropped before it ended.
    struct Unfinished {
        log: Log,
        label: String,
        armed: bool,
    }

    impl Drop for Unfinished {
        fn drop(&mut self) {
            if self.armed {
                self.log
                    .push(json!({"event": "cancelled", "how": "dropped", "label": self.label}));
            }
        }
    }

    #[tool_router]
    impl Tools {
        #[tool(description = "Answers with its text")]
        async fn echo(
            &self,
            Parameters(args): Parameters<EchoArgs>,
        ) -> Result<CallToolResult, ErrorData> {
            Ok(CallToolResult::success(vec![ContentBlock::text(args.text)]))
        }

        #[tool(description = "Sleeps; records its start, its end or its cancellation")]
        async fn sleep(
            &self,
            Parameters(args): Parameters<SleepArgs>,
            context: RequestContext<RoleServer>,
        ) -> Result<CallToolResult, ErrorData> {
            self.log
                .push(json!({"event": "started", "label": args.label}));
            let mut unfinished = Unfinished {
                log: self.log.clone(),
                label: args.label.clone(),
                armed: true,
            };
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(args.seconds)) => {}
                () = context.ct.cancelled() => {
                    unfinished.armed = false;
                    self.log.push(json!({"event": "cancelled", "how": "token", "label": args.label}));
                    return Ok(CallToolResult::success(vec![ContentBlock::text("cancelled")]));
                }
            }
            unfinished.armed = false;
            self.log
                .push(json!({"event": "finished", "label": args.label}));
            Ok(CallToolResult::success(vec![ContentBlock::text("slept")]))
        }

        #[tool(description = "Asks the client for its roots")]
        #[allow(deprecated)] // roots are deprecated at 2026-07-28; this server's sessions are older
        async fn roots(
            &self,
            context: RequestContext<RoleServer>,
        ) -> Result<CallToolResult, ErrorData> {
            let roots = context
                .peer
                .list_roots()
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let uris: Vec<String> = roots.roots.into_iter().map(|r| r.uri).collect();
            Ok(CallToolResult::success(vec![ContentBlock::text(
                uris.join(","),
            )]))
        }
    }

    #[tool_handler(router = self.router)]
    impl ServerHandler for Tools {
        #[allow(deprecated)]
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
            if self.legacy_only {
                Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
            } else {
                Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
            }
        }

        async fn on_cancelled(
            &self,
            params: CancelledNotificationParam,
            _context: NotificationContext<RoleServer>,
        ) {
            self.log.push(json!({
                "event": "notifications/cancelled",
                "requestId": params.request_id,
            }));
        }
    }
}

use rmcp_server::Mode;

/// The request ids of the `tools/call` POSTs of sleeps labelled `label`.
fn call_id(tap: &rmcp_server::Tap, label: &str) -> Value {
    tap.posts("tools/call")
        .into_iter()
        .find(|s| s.body["params"]["arguments"]["label"] == label)
        .map(|s| s.body["id"].clone())
        .unwrap_or_else(|| panic!("no call of sleep `{label}` was POSTed"))
}

/// Starts a sleep labelled `label`, waits until the rmcp tool runs it, then drops the call's
/// future, and waits until the tool records its cancellation.
async fn cancel_a_sleep(server: &rmcp_server::Server, handle: &PeerHandle, label: &str) -> Value {
    let pending = handle.request::<_, Value>(
        "tools/call",
        json!({"name": "sleep", "arguments": {"seconds": 30, "label": label}}),
    );
    eventually("the sleep started", || server.log.find("started", label)).await;
    drop(pending);
    eventually("the rmcp tool saw its cancellation", || {
        server.log.find("cancelled", label)
    })
    .await
}

#[tokio::test]
async fn rmcp_session_negotiates_lists_calls_and_cancels_with_a_notification() {
    let server = rmcp_server::Server::start(Mode::Session).await;
    let client = connect(HttpClient::new(&server.url).unwrap());
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);

    let tools: Value = handle.request("tools/list", json!({})).await.unwrap();
    let mut names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["echo", "roots", "sleep"]);
    let echoed = call(&handle, "echo", json!({"text": "hello"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hello");
    // The server's own request, answered by our router and POSTed back.
    let roots = call(&handle, "roots", json!({})).await.unwrap();
    assert_eq!(text(&roots), "file:///work");

    let cancelled = cancel_a_sleep(&server, &handle, "c").await;
    assert_eq!(cancelled["how"], "token", "{cancelled}");
    let id = call_id(&server.tap, "c");
    let notification = eventually("notifications/cancelled reached rmcp", || {
        server
            .log
            .all()
            .into_iter()
            .find(|e| e["event"] == "notifications/cancelled")
    })
    .await;
    assert_eq!(notification["requestId"], id);

    // The session and the negotiated version travel on everything after initialize.
    let initialize = &server.tap.posts("initialize")[0];
    assert_eq!(header_of(&initialize.headers, "mcp-session-id"), None);
    assert_eq!(header_of(&initialize.headers, "mcp-protocol-version"), None);
    let session = server
        .tap
        .posts("tools/list")
        .first()
        .and_then(|s| header_of(&s.headers, "mcp-session-id").map(str::to_owned))
        .expect("tools/list carried the session");
    for method in [
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "notifications/cancelled",
    ] {
        for post in server.tap.posts(method) {
            assert_eq!(
                header_of(&post.headers, "mcp-session-id"),
                Some(session.as_str()),
                "{method}"
            );
            assert_eq!(
                header_of(&post.headers, "mcp-protocol-version"),
                Some("2025-11-25"),
                "{method}"
            );
        }
    }
    // The session's GET stream was opened, with the session.
    let gets = eventually("the GET stream was opened", || {
        Some(server.tap.of(Method::GET)).filter(|g| !g.is_empty())
    })
    .await;
    assert_eq!(
        header_of(&gets[0].headers, "mcp-session-id"),
        Some(session.as_str())
    );
    assert_eq!(
        header_of(&gets[0].headers, "accept"),
        Some("text/event-stream")
    );

    client.close().await;
    let deletes = server.tap.of(Method::DELETE);
    assert_eq!(deletes.len(), 1, "the session is ended");
    assert_eq!(
        header_of(&deletes[0].headers, "mcp-session-id"),
        Some(session.as_str())
    );
}

#[tokio::test]
async fn rmcp_2026_negotiates_lists_calls_and_cancels_by_closing_the_stream() {
    let server = rmcp_server::Server::start(Mode::Modern).await;
    let client = connect(HttpClient::new(&server.url).unwrap());
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2026_07_28);

    let tools: Value = handle.request("tools/list", json!({})).await.unwrap();
    assert_eq!(tools["tools"].as_array().unwrap().len(), 3);
    let echoed = call(&handle, "echo", json!({"text": "hi 2026"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hi 2026");

    let cancelled = cancel_a_sleep(&server, &handle, "c").await;
    assert_eq!(cancelled["label"], "c");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        server.tap.posts("notifications/cancelled").is_empty(),
        "no notification at 2026-07-28: the closed stream is the cancel"
    );
    assert!(server.tap.posts("initialize").is_empty());

    for post in server.tap.of(Method::POST) {
        let method = post.body["method"].as_str().unwrap_or_default();
        assert_eq!(header_of(&post.headers, "mcp-session-id"), None, "{method}");
        assert_eq!(
            header_of(&post.headers, "mcp-protocol-version"),
            Some("2026-07-28"),
            "{method}"
        );
        assert_eq!(header_of(&post.headers, "mcp-method"), Some(method));
        assert_eq!(
            post.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
            "{method}"
        );
    }
    let call = &server.tap.posts("tools/call")[0];
    assert_eq!(header_of(&call.headers, "mcp-name"), Some("echo"));
    assert!(
        server.tap.of(Method::GET).is_empty(),
        "no GET stream at 2026-07-28"
    );
    client.close().await;
    assert!(
        server.tap.of(Method::DELETE).is_empty(),
        "no session to end"
    );
}

#[tokio::test]
async fn rmcp_stateless_json_answers_and_a_cancel_that_drops_the_connection() {
    let server = rmcp_server::Server::start(Mode::StatelessJson).await;
    // A long send timeout: the cancel must not wait for the POST's answer (which, in JSON
    // mode, comes only with the result) — without a session the connection is dropped at once.
    let client = connect(
        HttpClient::new(&server.url)
            .unwrap()
            .send_timeout(Duration::from_secs(30)),
    );
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);
    let echoed = call(&handle, "echo", json!({"text": "json"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "json");
    let answered = server.tap.posts("tools/call")[0].answered_as.clone();
    assert!(
        answered
            .as_deref()
            .is_some_and(|t| t.starts_with("application/json")),
        "{answered:?}"
    );

    cancel_a_sleep(&server, &handle, "c").await;
    let cancel = eventually("notifications/cancelled was POSTed", || {
        server
            .tap
            .posts("notifications/cancelled")
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        cancel.body["params"]["requestId"],
        call_id(&server.tap, "c")
    );
    for post in server.tap.of(Method::POST) {
        assert_eq!(
            header_of(&post.headers, "mcp-session-id"),
            None,
            "stateless: no session"
        );
    }
    client.close().await;
}

#[tokio::test]
async fn rmcp_session_stream_cut_after_its_first_event_id_is_resumed_with_last_event_id() {
    let server = rmcp_server::Server::start(Mode::Session).await;
    let client = connect(HttpClient::new(&server.url).unwrap());
    let handle = client.handle();
    negotiate(&handle).await;
    server.tap.cut_calls();

    // rmcp replays a request's stream only while the request runs: the sleep outlasts the
    // server's retry time.
    let slept = call(&handle, "sleep", json!({"seconds": 1.0, "label": "r"}))
        .await
        .expect("the cut call still gets its result");
    assert_eq!(text(&slept), "slept");
    assert!(server.tap.cut() >= 1, "the call's stream was cut");
    let resumed: Vec<String> = server
        .tap
        .of(Method::GET)
        .iter()
        .filter_map(|g| header_of(&g.headers, "last-event-id").map(str::to_owned))
        .collect();
    assert!(!resumed.is_empty(), "resumed with GET and Last-Event-ID");
    client.close().await;
}

#[tokio::test]
async fn without_resumption_the_cut_call_fails_with_a_clear_error() {
    // The control for the test above: the cut really loses the response.
    let server = rmcp_server::Server::start(Mode::Session).await;
    let client = connect(
        HttpClient::new(&server.url)
            .unwrap()
            .resume_attempts(0)
            .listen(false),
    );
    let handle = client.handle();
    negotiate(&handle).await;
    server.tap.cut_calls();
    let error = rpc_error(call(&handle, "sleep", json!({"seconds": 0.4, "label": "r"})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::Lost),
        "{error:?}"
    );
    assert!(
        error.message.contains("ended before the response"),
        "{}",
        error.message
    );
    client.close().await;
}

#[tokio::test]
async fn https_with_a_private_ca_just_works() {
    let ca = cancelkit_tests::tls::TestCa::generate();
    let server = rmcp_server::Server::start_tls(&ca).await;
    assert!(server.url.starts_with("https://"));
    let http = cancelkit::tls::client_builder(Some(&ca.ca_file()))
        .unwrap()
        .build()
        .unwrap();
    let client = connect(HttpClient::new(&server.url).unwrap().with_http_client(http));
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2026_07_28);
    let echoed = call(&handle, "echo", json!({"text": "over tls"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "over tls");
    cancel_a_sleep(&server, &handle, "tls").await;
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// A small server of our own, for what rmcp does not do on purpose.

mod fake {
    use super::*;
    use axum::routing::post;

    /// What the fake server saw and did.
    #[derive(Default)]
    pub struct Record {
        /// Speaks the legacy handshake (with a session) rather than 2026-07-28.
        pub legacy: bool,
        /// Every request with the session gets 404 from now on.
        pub session_gone: AtomicBool,
        pub seen: Mutex<Vec<(Method, HeaderMap, Value)>>,
        /// Ids of the `hang` calls whose stream the client closed.
        pub closed: Mutex<Vec<Value>>,
        /// The responses the client POSTed to our requests.
        pub answers: Mutex<Vec<Value>>,
        gets: AtomicUsize,
    }

    impl Record {
        pub fn posts(&self, method: &str) -> Vec<(HeaderMap, Value)> {
            self.seen
                .lock()
                .unwrap()
                .iter()
                .filter(|(m, _, body)| *m == Method::POST && body["method"] == method)
                .map(|(_, headers, body)| (headers.clone(), body.clone()))
                .collect()
        }

        pub fn of(&self, method: Method) -> Vec<HeaderMap> {
            self.seen
                .lock()
                .unwrap()
                .iter()
                .filter(|(m, _, _)| *m == method)
                .map(|(_, headers, _)| headers.clone())
                .collect()
        }
    }

    pub struct Fake {
        pub url: String,
        pub record: Arc<Record>,
    }

    impl Fake {
        pub async fn start(legacy: bool) -> Fake {
            let record = Arc::new(Record {
                legacy,
                ..Record::default()
            });
            let app = axum::Router::new()
                .route("/mcp", post(on_post).get(on_get).delete(on_delete))
                .with_state(Arc::clone(&record));
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            Fake {
                url: format!("http://{addr}/mcp"),
                record,
            }
        }
    }

    fn json_body(status: StatusCode, value: &Value) -> Response {
        (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            value.to_string(),
        )
            .into_response()
    }

    fn result(id: &Value, result: Value) -> Response {
        json_body(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )
    }

    pub fn event(id: Option<&str>, message: &Value) -> Bytes {
        let mut out = Vec::new();
        sse::write_event(&mut out, id, "message", &message.to_string());
        Bytes::from(out)
    }

    fn event_stream<S>(stream: S) -> Response
    where
        S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
    {
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(stream))
            .unwrap()
    }

    fn from_channel(rx: mpsc::Receiver<Bytes>) -> impl Stream<Item = Result<Bytes, Infallible>> {
        futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|bytes| (Ok(bytes), rx))
        })
    }

    /// Keep-alive comments every 50 ms (for at most 20 s); `on_drop` runs when the client
    /// closes the stream.
    fn hanging(
        on_drop: impl FnOnce() + Send + 'static,
    ) -> impl Stream<Item = Result<Bytes, Infallible>> {
        struct Guard<F: FnOnce()>(Option<F>);
        impl<F: FnOnce()> Drop for Guard<F> {
            fn drop(&mut self) {
                if let Some(f) = self.0.take() {
                    f();
                }
            }
        }
        futures_util::stream::unfold((Guard(Some(on_drop)), 0u32), |(guard, n)| async move {
            if n == 400 {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            Some((Ok(Bytes::from_static(b": keep-alive\n\n")), (guard, n + 1)))
        })
    }

    async fn on_post(
        State(record): State<Arc<Record>>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Response {
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        record
            .seen
            .lock()
            .unwrap()
            .push((Method::POST, headers.clone(), body.clone()));
        let id = body["id"].clone();
        let Some(method) = body["method"].as_str() else {
            record.answers.lock().unwrap().push(body.clone());
            return StatusCode::ACCEPTED.into_response();
        };
        if headers.contains_key("mcp-session-id") && record.session_gone.load(Ordering::SeqCst) {
            return (StatusCode::NOT_FOUND, "no such session").into_response();
        }
        if id.is_null() {
            return StatusCode::ACCEPTED.into_response(); // a notification
        }
        match method {
            "server/discover" if record.legacy => json_body(
                StatusCode::OK,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            ),
            "server/discover" => result(
                &id,
                json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "0"}}),
            ),
            "initialize" => {
                let mut response = result(
                    &id,
                    json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "0"}}),
                );
                response
                    .headers_mut()
                    .insert("mcp-session-id", "session-1".parse().unwrap());
                response
            }
            "tools/list" => result(
                &id,
                json!({"tools": [
                    {"name": "echo", "inputSchema": {"type": "object"}},
                    {"name": "hang", "inputSchema": {"type": "object", "properties": {
                        "region": {"type": "string", "x-mcp-header": "Region"}
                    }}},
                ]}),
            ),
            "tools/call" => call(&record, id, &body["params"]).await,
            _ => json_body(
                StatusCode::OK,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            ),
        }
    }

    async fn call(record: &Arc<Record>, id: Value, params: &Value) -> Response {
        fn done(id: &Value, text: &str) -> Value {
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
        }
        match params["name"].as_str().unwrap_or_default() {
            "echo" => json_body(
                StatusCode::OK,
                &done(
                    &id,
                    params["arguments"]["text"].as_str().unwrap_or_default(),
                ),
            ),
            "hang" => {
                let record = Arc::clone(record);
                event_stream(hanging(move || record.closed.lock().unwrap().push(id)))
            }
            "late" => {
                // The answer (a stream that never ends) begins only after 300 ms.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let record = Arc::clone(record);
                event_stream(hanging(move || record.closed.lock().unwrap().push(id)))
            }
            "cut_with_id" => {
                let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}});
                event_stream(futures_util::stream::iter([Ok(event(
                    Some("x1"),
                    &progress,
                ))]))
            }
            "huge_json" => json_body(StatusCode::OK, &done(&id, &"x".repeat(100 << 10))),
            "http500" => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "boom: the database is on fire",
            )
                .into_response(),
            "rpc400" => json_body(
                StatusCode::BAD_REQUEST,
                &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32602, "message": "Unknown tool arguments"}}),
            ),
            "bad_json" => (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                "this is not json",
            )
                .into_response(),
            "huge" => {
                let big = done(&id, &"x".repeat(100 << 10));
                event_stream(futures_util::stream::iter([Ok(event(None, &big))]))
            }
            "cut" => {
                let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}});
                event_stream(futures_util::stream::iter([Ok(event(None, &progress))]))
            }
            "ask" => {
                let (tx, rx) = mpsc::channel(4);
                let record = Arc::clone(record);
                tokio::spawn(async move {
                    let ping = json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"});
                    let _ = tx.send(event(Some("e1"), &ping)).await;
                    let answered = eventually("the client answered our ping", || {
                        record
                            .answers
                            .lock()
                            .unwrap()
                            .iter()
                            .find(|a| a["id"] == "srv-1")
                            .cloned()
                    })
                    .await;
                    let text = if answered.get("result").is_some() {
                        "answered"
                    } else {
                        "refused"
                    };
                    let _ = tx.send(event(Some("e2"), &done(&id, text))).await;
                });
                event_stream(from_channel(rx))
            }
            other => json_body(
                StatusCode::OK,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("no tool {other}")}}),
            ),
        }
    }

    /// The session's stream: the first carries `first` (id g1) and ends; a reopened one
    /// carries `second` (id g2) and stays open.
    async fn on_get(State(record): State<Arc<Record>>, headers: HeaderMap) -> Response {
        record
            .seen
            .lock()
            .unwrap()
            .push((Method::GET, headers.clone(), Value::Null));
        if !record.legacy {
            return StatusCode::METHOD_NOT_ALLOWED.into_response();
        }
        let message = |data: &str| json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}});
        if record.gets.fetch_add(1, Ordering::SeqCst) == 0 {
            return event_stream(futures_util::stream::iter([Ok(event(
                Some("g1"),
                &message("first"),
            ))]));
        }
        let first = futures_util::stream::iter([Ok(event(Some("g2"), &message("second")))]);
        event_stream(first.chain(hanging(|| {})))
    }

    async fn on_delete(State(record): State<Arc<Record>>, headers: HeaderMap) -> StatusCode {
        record
            .seen
            .lock()
            .unwrap()
            .push((Method::DELETE, headers, Value::Null));
        StatusCode::OK
    }
}

#[tokio::test]
async fn v2026_cancel_closes_the_requests_stream_and_sends_no_notification() {
    let server = fake::Fake::start(false).await;
    let client = connect(HttpClient::new(&server.url).unwrap());
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2026_07_28);
    // The listing teaches the client which argument travels in a header.
    let _: Value = handle.request("tools/list", json!({})).await.unwrap();

    let pending = handle.request::<_, Value>(
        "tools/call",
        json!({"name": "hang", "arguments": {"region": "eu-west"}}),
    );
    let (headers, body) = eventually("the call was POSTed", || {
        server.record.posts("tools/call").into_iter().next()
    })
    .await;
    assert_eq!(
        header_of(&headers, "mcp-protocol-version"),
        Some("2026-07-28")
    );
    assert_eq!(header_of(&headers, "mcp-method"), Some("tools/call"));
    assert_eq!(header_of(&headers, "mcp-name"), Some("hang"));
    assert_eq!(header_of(&headers, "mcp-param-region"), Some("eu-west"));
    assert_eq!(header_of(&headers, "mcp-session-id"), None);
    // Give the stream a moment to be open for real.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        server.record.closed.lock().unwrap().is_empty(),
        "still open"
    );

    drop(pending);
    let closed = eventually("the server saw the stream closed", || {
        server.record.closed.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(closed, body["id"]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        server.record.posts("notifications/cancelled").is_empty(),
        "the closed stream is the cancel; no notification"
    );
    // The connection goes on.
    let echoed = call(&handle, "echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "after");
    client.close().await;
}

#[tokio::test]
async fn http_failures_fail_the_call_with_a_clear_error_and_the_connection_goes_on() {
    let server = fake::Fake::start(false).await;
    let client = HttpClient::new(&server.url)
        .unwrap()
        .max_event_bytes(16 << 10);
    let client = connect(client);
    let handle = client.handle();
    negotiate(&handle).await;

    let error = rpc_error(call(&handle, "http500", json!({})).await);
    assert_eq!(error.code.code(), -32603);
    assert!(error.message.contains("HTTP 500"), "{}", error.message);
    assert!(
        error.message.contains("the database is on fire"),
        "{}",
        error.message
    );
    assert_eq!(TransportFailure::of(&error), Some(TransportFailure::Status));
    assert_eq!(error.data.as_ref().unwrap()["status"], 500);

    let error = rpc_error(call(&handle, "rpc400", json!({})).await);
    assert_eq!(
        error.code.code(),
        -32602,
        "the server's own error is passed on"
    );
    assert_eq!(error.message, "Unknown tool arguments");

    let error = rpc_error(call(&handle, "bad_json", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::BadAnswer),
        "{error:?}"
    );
    assert!(
        error.message.contains("this is not json"),
        "{}",
        error.message
    );

    let error = rpc_error(call(&handle, "huge", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::TooLarge),
        "{error:?}"
    );
    assert!(error.message.contains("16384"), "{}", error.message);

    let error = rpc_error(call(&handle, "cut", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::Lost),
        "{error:?}"
    );
    assert!(
        error.message.contains("ended before the response"),
        "{}",
        error.message
    );
    assert!(error.message.contains("no event id"), "{}", error.message);

    let error = rpc_error(call(&handle, "huge_json", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::TooLarge),
        "{error:?}"
    );

    // 2026-07-28: ids were given, so resuming is tried — and refused, as such servers do.
    let error = rpc_error(call(&handle, "cut_with_id", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::Lost),
        "{error:?}"
    );
    assert!(
        error.message.contains("refused to resume"),
        "{}",
        error.message
    );
    let gets = server.record.of(Method::GET);
    assert_eq!(gets.len(), 1, "one attempt: a refusal is final");
    assert_eq!(header_of(&gets[0], "last-event-id"), Some("x1"));
    assert_eq!(
        header_of(&gets[0], "mcp-protocol-version"),
        Some("2026-07-28")
    );
    assert_eq!(header_of(&gets[0], "mcp-session-id"), None);

    let echoed = call(&handle, "echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "still here");
    client.close().await;
}

#[tokio::test]
async fn an_unreachable_server_fails_with_the_cause() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let client = connect(HttpClient::new(&url).unwrap());
    let outcome = tokio::time::timeout(
        WAIT,
        client
            .handle()
            .discover_or_initialize(client_info(), DEFAULT_DISCOVER_TIMEOUT),
    )
    .await
    .expect("an answer within 10 s");
    let Err(RequestError::Rpc(error)) = outcome else {
        panic!("expected an error response, got {outcome:?}");
    };
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::Unreachable)
    );
    assert!(
        error.message.contains(&format!("cannot reach {url}")),
        "{}",
        error.message
    );
    assert!(
        error.message.to_lowercase().contains("refused"),
        "the cause: {}",
        error.message
    );
    client.close().await;
}

#[tokio::test]
async fn an_expired_session_fails_the_call_and_closes_the_connection() {
    let server = fake::Fake::start(true).await;
    let client = connect(HttpClient::new(&server.url).unwrap().listen(false));
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);
    let echoed = call(&handle, "echo", json!({"text": "before"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "before");

    server.record.session_gone.store(true, Ordering::SeqCst);
    let error = rpc_error(call(&handle, "echo", json!({"text": "after"})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::SessionExpired),
        "{error:?}"
    );
    assert!(
        error.message.contains("ended the session"),
        "{}",
        error.message
    );
    eventually("the connection closed", || handle.is_closed().then_some(())).await;
    let later = call(&handle, "echo", json!({"text": "later"})).await;
    assert!(matches!(later, Err(RequestError::Closed)), "{later:?}");
    tokio::time::timeout(WAIT, client.bridge.stopped())
        .await
        .expect("the bridge stopped");
}

#[tokio::test]
async fn the_sessions_get_stream_is_delivered_and_reopened_with_last_event_id() {
    let server = fake::Fake::start(true).await;
    let client = HttpClient::new(&server.url)
        .unwrap()
        .retry_delay(Duration::from_millis(20));
    let mut client = connect(client);
    let handle = client.handle();
    negotiate(&handle).await;
    for expected in ["first", "second"] {
        let message = tokio::time::timeout(WAIT, client.messages.recv())
            .await
            .expect("a message from the GET stream")
            .unwrap();
        assert_eq!(message["data"], expected);
    }
    let gets = server.record.of(Method::GET);
    assert_eq!(gets.len(), 2, "opened, then reopened once");
    assert_eq!(header_of(&gets[0], "last-event-id"), None);
    assert_eq!(header_of(&gets[1], "last-event-id"), Some("g1"));
    for get in &gets {
        assert_eq!(header_of(get, "mcp-session-id"), Some("session-1"));
        assert_eq!(header_of(get, "mcp-protocol-version"), Some("2025-11-25"));
    }
    client.close().await;
    let deletes = server.record.of(Method::DELETE);
    assert_eq!(deletes.len(), 1);
    assert_eq!(header_of(&deletes[0], "mcp-session-id"), Some("session-1"));
}

#[tokio::test]
async fn a_servers_request_on_a_calls_stream_is_answered_by_the_peer() {
    let server = fake::Fake::start(true).await;
    let client = connect(HttpClient::new(&server.url).unwrap().listen(false));
    let handle = client.handle();
    negotiate(&handle).await;
    let answered = call(&handle, "ask", json!({})).await.unwrap();
    assert_eq!(text(&answered), "answered");
    let (headers, answer) = server
        .record
        .seen
        .lock()
        .unwrap()
        .iter()
        .find(|(m, _, body)| *m == Method::POST && body["id"] == "srv-1")
        .map(|(_, headers, body)| (headers.clone(), body.clone()))
        .expect("the answer was POSTed");
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert_eq!(header_of(&headers, "mcp-session-id"), Some("session-1"));
    client.close().await;
}

#[tokio::test]
async fn at_the_post_bound_requests_wait_in_order_and_cancels_still_go_through() {
    let server = fake::Fake::start(false).await;
    let client = connect(
        HttpClient::new(&server.url)
            .unwrap()
            .max_concurrent_posts(1),
    );
    let handle = client.handle();
    negotiate(&handle).await;
    let hang = |region: &str| {
        handle.request::<_, Value>(
            "tools/call",
            json!({"name": "hang", "arguments": {"region": region}}),
        )
    };
    let first = hang("first");
    let (_, posted) = eventually("the first call was POSTed", || {
        server.record.posts("tools/call").into_iter().next()
    })
    .await;
    let second = hang("second");
    let third = handle.request::<_, Value>(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "third"}}),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        server.record.posts("tools/call").len(),
        1,
        "the others wait for the slot"
    );

    drop(second); // cancelled while waiting: never sent
    drop(first); // its stream closes, which frees the slot
    let echoed = tokio::time::timeout(WAIT, third)
        .await
        .expect("the third call got the slot")
        .unwrap();
    assert_eq!(text(&echoed), "third");
    let calls: Vec<Value> = server
        .record
        .posts("tools/call")
        .into_iter()
        .map(|(_, body)| body["params"]["arguments"].clone())
        .collect();
    assert_eq!(
        calls,
        [json!({"region": "first"}), json!({"text": "third"})]
    );
    let closed = eventually("the first call's stream closed", || {
        server.record.closed.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(closed, posted["id"]);
    client.close().await;
}

#[tokio::test]
async fn a_request_beyond_the_message_limit_fails_without_being_sent() {
    let server = fake::Fake::start(false).await;
    let client = connect(
        HttpClient::new(&server.url)
            .unwrap()
            .max_message_bytes(2048),
    );
    let handle = client.handle();
    negotiate(&handle).await;
    let error = rpc_error(call(&handle, "echo", json!({"text": "x".repeat(4096)})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::NotSent),
        "{error:?}"
    );
    assert!(error.message.contains("2048"), "{}", error.message);
    assert!(server.record.posts("tools/call").is_empty());
    let echoed = call(&handle, "echo", json!({"text": "small"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "small");
    client.close().await;
}

#[tokio::test]
async fn a_legacy_cancel_that_may_overtake_its_request_is_sent_again_once_the_post_is_answered() {
    let server = fake::Fake::start(true).await;
    let client = connect(HttpClient::new(&server.url).unwrap().listen(false));
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);
    let pending =
        handle.request::<_, Value>("tools/call", json!({"name": "late", "arguments": {}}));
    let (_, posted) = eventually("the call was POSTed", || {
        server.record.posts("tools/call").into_iter().next()
    })
    .await;
    drop(pending); // before the server answered the POST (it takes 300 ms)
    let cancels = eventually("notifications/cancelled was sent twice", || {
        Some(server.record.posts("notifications/cancelled")).filter(|c| c.len() == 2)
    })
    .await;
    for (headers, cancel) in &cancels {
        assert_eq!(cancel["params"]["requestId"], posted["id"]);
        assert_eq!(header_of(headers, "mcp-session-id"), Some("session-1"));
    }
    // Then the request's stream is dropped.
    eventually("the call's stream closed", || {
        server.record.closed.lock().unwrap().first().cloned()
    })
    .await;
    client.close().await;
}
