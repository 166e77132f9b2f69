//! rmcp's Streamable HTTP server (`StreamableHttpService`) on 127.0.0.1, behind a tap that
//! records every HTTP request and can cut `tools/call` event streams.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use cancelkit::wire::sse;
use futures_util::{Stream, StreamExt};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, CancelledNotificationParam, ContentBlock, ErrorData, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::harness::header_of;

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

    async fn serve(mode: Mode, tls: Option<Arc<cancelkit::tls::rustls::ServerConfig>>) -> Server {
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

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
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
