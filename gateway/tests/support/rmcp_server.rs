//! rmcp 3.9's Streamable HTTP MCP server, in-process on 127.0.0.1:0, with these tools:
//! `echo {text}`, `big {bytes}`, `routed {region}` (its `region` annotated `x-mcp-header`),
//! `sleep {seconds, label?}` (progress every 100 ms when asked; records its
//! start, its end, and its cancellation — token fired or future dropped) and `fail` (a
//! JSON-RPC error). A tap in front records every POST body and DELETE, and how the SSE stream
//! answering each request ended; the listener counts the TCP connections the server closed.
//!
//! [`Server::demo`] serves only `echo` and `sleep`, behaving as the gateway's stdio demo
//! upstream does (`sleep`'s progress in seconds slept of its total, its answer
//! `slept {duration:?}`), for the SDK tests' Streamable HTTP upstream (`support::sdk::HttpDemo`).
//! Used by tests/upstream_http.rs and, through `support::sdk`, tests/sdk_*.rs.

use std::borrow::Cow;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures_util::{Stream, StreamExt};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, CancelledNotificationParam, ContentBlock, ErrorData, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Which revisions the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Every revision rmcp knows: 2026-07-28 statelessly, the older ones with sessions.
    Both,
    /// As `Both`, answering with `application/json` rather than an SSE stream where it can
    /// (a response with no notification before it).
    Json,
    /// Only up to 2025-11-25 (a server from before 2026-07-28).
    Legacy,
}

/// What the tools did, in order.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<Value>>>);

impl Log {
    fn push(&self, entry: Value) {
        self.0.lock().unwrap().push(entry);
    }

    /// Every entry, in order.
    pub fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }

    /// The first entry matching `pred`.
    pub fn find(&self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        self.all().into_iter().find(|e| pred(e))
    }

    /// The `started` entry of the sleep labelled `label`.
    pub fn started(&self, label: &str) -> Value {
        self.find(|e| e["event"] == "started" && e["label"] == label)
            .unwrap_or_else(|| panic!("no sleep `{label}` started: {:?}", self.all()))
    }
}

/// Waits (at most 10 s) for an entry matching `pred`.
pub async fn wait_for(log: &Log, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(entry) = log.find(&pred) {
            return entry;
        }
        assert!(
            Instant::now() < deadline,
            "not seen within 10 s; the log: {:?}",
            log.all()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One POST the server received.
#[derive(Debug, Clone)]
pub struct Post {
    /// The JSON-RPC message.
    pub body: Value,
    /// Its `Mcp-Session-Id`.
    pub session: Option<String>,
    /// How its answer ended (`None` while it is being written).
    pub ended: Option<Ended>,
}

/// How the answer to a POST ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The server wrote all of it: a JSON body, an empty one, or an SSE stream to its end.
    Complete,
    /// The connection went away first: before the answer began, or during its SSE stream.
    Closed,
}

/// Every request the server received, and how many connections it closed.
#[derive(Clone, Default)]
pub struct Tap {
    posts: Arc<Mutex<Vec<Post>>>,
    deletes: Arc<Mutex<Vec<Option<String>>>>,
    answers: Arc<Mutex<Vec<(String, String)>>>,
    closed: Arc<AtomicUsize>,
    /// How long (ms) a `tools/call` POST is held before rmcp gets it.
    hold_ms: Arc<AtomicUsize>,
}

impl Tap {
    /// Every POST, in order.
    pub fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }

    /// How many POSTs carried `method`.
    pub fn count(&self, method: &str) -> usize {
        self.posts()
            .iter()
            .filter(|p| p.body["method"] == method)
            .count()
    }

    /// The content types of the answers to `method`.
    pub fn answered_as(&self, method: &str) -> Vec<String> {
        self.answers
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, content_type)| content_type.clone())
            .collect()
    }

    /// The session of every DELETE.
    pub fn deletes(&self) -> Vec<Option<String>> {
        self.deletes.lock().unwrap().clone()
    }

    /// The POST of the request with this JSON-RPC id (not a notification naming it).
    pub fn request(&self, id: &Value) -> Option<Post> {
        self.posts()
            .into_iter()
            .find(|p| p.body["id"] == *id && p.body.get("method").is_some())
    }

    /// How many TCP connections the server has closed.
    pub fn closed_connections(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }
}

/// The running server.
pub struct Server {
    /// Its MCP endpoint.
    pub url: String,
    /// What its tools did.
    pub log: Log,
    /// What it received.
    pub tap: Tap,
    sessions: Arc<LocalSessionManager>,
    stop: CancellationToken,
}

impl Server {
    /// Starts a server speaking `era`, with every tool.
    pub async fn start(era: Era) -> Server {
        Server::serve(era, false, None).await
    }

    /// Starts a server speaking every revision over HTTPS (cancelkit's TLS listener) with the
    /// server certificate of `ca`; its URL is `https://127.0.0.1:PORT/mcp`. Closed connections
    /// are not counted.
    pub async fn start_tls(ca: &cancelkit_tests::tls::TestCa) -> Server {
        let tls = cancelkit::tls::server_config(&ca.cert_file(), &ca.key_file())
            .expect("the test CA's server certificate loads");
        Server::serve(Era::Both, false, Some(tls)).await
    }

    /// Starts a server speaking `era` with the demo upstream's tools only, behaving as it does.
    pub async fn demo(era: Era) -> Server {
        Server::serve(era, true, None).await
    }

    async fn serve(
        era: Era,
        demo: bool,
        tls: Option<Arc<cancelkit::tls::rustls::ServerConfig>>,
    ) -> Server {
        let log = Log::default();
        let tap = Tap::default();
        let stop = CancellationToken::new();
        let sessions = Arc::new(LocalSessionManager::default());
        let mut router = Tools::tool_router();
        if demo {
            for other in ["big", "routed", "fail"] {
                router.remove_route(other);
            }
        }
        let tools = Tools {
            log: log.clone(),
            legacy: era == Era::Legacy,
            demo,
            router,
        };
        let config = StreamableHttpServerConfig::default()
            // hyper notices a closed SSE stream on its next write
            .with_sse_keep_alive(Some(Duration::from_millis(100)))
            .with_json_response(era == Era::Json)
            .with_cancellation_token(stop.child_token());
        let service: StreamableHttpService<Tools, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(tools.clone()), Arc::clone(&sessions), config);
        let recording = tap.clone();
        let router =
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
                    let _ = axum::serve(listener, router)
                        .with_graceful_shutdown(stopped.cancelled_owned())
                        .await;
                });
            }
            None => {
                let listener = Counting {
                    inner: listener,
                    closed: Arc::clone(&tap.closed),
                };
                tokio::spawn(async move {
                    let _ = axum::serve(listener, router)
                        .with_graceful_shutdown(stopped.cancelled_owned())
                        .await;
                });
            }
        }
        Server {
            url: format!("{scheme}://{addr}/mcp"),
            log,
            tap,
            sessions,
            stop,
        }
    }

    /// From now on, holds each `tools/call` POST for `hold` (recorded at once) before rmcp
    /// gets it, so that a message sent after it on another connection overtakes it.
    pub fn hold_calls(&self, hold: Duration) {
        self.tap
            .hold_ms
            .store(hold.as_millis() as usize, Ordering::SeqCst);
    }

    /// Forgets every session, as a server does when they expire.
    pub async fn expire_sessions(&self) {
        self.sessions.sessions.write().await.clear();
    }

    /// Stops the server.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The tap: records the request, then passes it on unchanged.
async fn record(tap: Tap, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    if parts.method != axum::http::Method::POST {
        if parts.method == axum::http::Method::DELETE {
            tap.deletes.lock().unwrap().push(session);
        }
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    }
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let method = body["method"].as_str().map(str::to_owned);
    let hold = if method.as_deref() == Some("tools/call") {
        tap.hold_ms.load(Ordering::SeqCst)
    } else {
        0
    };
    let mut ending = {
        let mut posts = tap.posts.lock().unwrap();
        posts.push(Post {
            body,
            session,
            ended: None,
        });
        Ending {
            posts: Arc::clone(&tap.posts),
            index: posts.len() - 1,
            complete: false,
        }
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    // Dropped here (`Closed`) if the connection goes away before the answer begins.
    let response = if hold > 0 {
        // Held in a task of its own: rmcp gets the request even if the client goes away.
        let held = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(hold as u64)).await;
            next.run(request).await
        });
        held.await.expect("the held request")
    } else {
        next.run(request).await
    };
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if let Some(method) = method {
        tap.answers
            .lock()
            .unwrap()
            .push((method, content_type.clone()));
    }
    if !content_type.starts_with("text/event-stream") {
        // A whole body (JSON, or none): complete as it is.
        ending.complete = true;
        return response;
    }
    let (parts, body) = response.into_parts();
    let watched = Watched {
        inner: body.into_data_stream(),
        ending,
    };
    Response::from_parts(parts, Body::from_stream(watched))
}

/// Records in its POST how the answer ended, when dropped.
struct Ending {
    posts: Arc<Mutex<Vec<Post>>>,
    index: usize,
    complete: bool,
}

impl Drop for Ending {
    fn drop(&mut self) {
        let ended = if self.complete {
            Ended::Complete
        } else {
            Ended::Closed
        };
        if let Some(post) = self.posts.lock().unwrap().get_mut(self.index) {
            post.ended = Some(ended);
        }
    }
}

/// An SSE answer, complete once its stream ended.
struct Watched<S> {
    inner: S,
    ending: Ending,
}

impl<S: Stream + Unpin> Stream for Watched<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let next = self.inner.poll_next_unpin(cx);
        if let Poll::Ready(None) = next {
            self.ending.complete = true;
        }
        next
    }
}

#[derive(Clone)]
struct Tools {
    log: Log,
    legacy: bool,
    /// Behave as the gateway's demo upstream.
    demo: bool,
    router: ToolRouter<Tools>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    seconds: f64,
    #[serde(default)]
    label: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct RoutedArgs {
    /// Mirrored into the `Mcp-Param-Region` header at 2026-07-28.
    #[schemars(extend("x-mcp-header" = "Region"))]
    region: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct BigArgs {
    bytes: usize,
}

fn request_id(context: &RequestContext<RoleServer>) -> Value {
    serde_json::to_value(&context.id).unwrap()
}

/// Records the sleep's cancellation if it is dropped before it ends.
struct Unfinished {
    log: Log,
    id: Value,
    label: String,
    started: Instant,
    armed: bool,
}

impl Unfinished {
    /// Records the cancellation (`how`: "token" or "dropped") and disarms.
    fn cancelled(&mut self, how: &str) {
        self.armed = false;
        self.log.push(json!({
            "event": "cancelled",
            "how": how,
            "id": self.id,
            "label": self.label,
            "after_ms": self.started.elapsed().as_millis() as u64,
        }));
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.armed {
            self.cancelled("dropped");
        }
    }
}

#[tool_router]
impl Tools {
    #[tool(description = "Answers with its text")]
    async fn echo(
        &self,
        Parameters(args): Parameters<EchoArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.log.push(json!({
            "event": "echo",
            "text": args.text,
            "id": request_id(&context),
            "version": context.meta.protocol_version().map(|v| v.to_string()),
            "session": session,
        }));
        Ok(CallToolResult::success(vec![ContentBlock::text(args.text)]))
    }

    #[tool(description = "Sleeps, with progress every 100 ms when asked")]
    async fn sleep(
        &self,
        Parameters(args): Parameters<SleepArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let id = request_id(&context);
        self.log
            .push(json!({"event": "started", "id": id, "label": args.label}));
        let started = Instant::now();
        let mut unfinished = Unfinished {
            log: self.log.clone(),
            id: id.clone(),
            label: args.label.clone(),
            started,
            armed: true,
        };
        let token = context.meta.get_progress_token();
        let done = tokio::time::sleep(Duration::from_secs_f64(args.seconds));
        tokio::pin!(done);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.tick().await;
        let mut sent = 0u32;
        loop {
            tokio::select! {
                () = &mut done => break,
                () = context.ct.cancelled() => {
                    unfinished.cancelled("token");
                    return Ok(CallToolResult::success(vec![ContentBlock::text("cancelled")]));
                }
                _ = tick.tick() => {
                    if let Some(token) = &token {
                        sent += 1;
                        let params = if self.demo {
                            // As the demo upstream: seconds slept, of the total.
                            let slept = started.elapsed().as_secs_f64().min(args.seconds);
                            ProgressNotificationParam::new(token.clone(), slept)
                                .with_total(args.seconds)
                                .with_message(format!("slept {slept:.1}s of {}s", args.seconds))
                        } else {
                            ProgressNotificationParam::new(token.clone(), f64::from(sent))
                        };
                        let _ = context.peer.notify_progress(params).await;
                    }
                }
            }
        }
        unfinished.armed = false;
        self.log
            .push(json!({"event": "finished", "id": id, "label": args.label}));
        let text = if self.demo {
            format!("slept {:?}", Duration::from_secs_f64(args.seconds))
        } else {
            "slept".into()
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    #[tool(description = "Answers with the region it was routed with")]
    async fn routed(
        &self,
        Parameters(args): Parameters<RoutedArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let header = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-param-region"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.log
            .push(json!({"event": "routed", "region": args.region, "header": header}));
        Ok(CallToolResult::success(vec![ContentBlock::text(
            args.region,
        )]))
    }

    #[tool(description = "Answers with `bytes` bytes of text")]
    async fn big(
        &self,
        Parameters(args): Parameters<BigArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "x".repeat(args.bytes),
        )]))
    }

    #[tool(description = "Fails with a JSON-RPC error")]
    async fn fail(&self) -> Result<CallToolResult, ErrorData> {
        Err(ErrorData::invalid_params(
            "no such thing",
            Some(json!({"why": "testing"})),
        ))
    }
}

#[tool_handler(router = self.router)]
impl ServerHandler for Tools {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.legacy {
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
            "reason": params.reason,
        }));
    }
}

/// A listener whose connections count themselves when closed.
struct Counting {
    inner: TcpListener,
    closed: Arc<AtomicUsize>,
}

impl axum::serve::Listener for Counting {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        loop {
            if let Ok((stream, addr)) = self.inner.accept().await {
                let closed = Arc::clone(&self.closed);
                return (Counted { stream, closed }, addr);
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

struct Counted {
    stream: TcpStream,
    closed: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
