//! The fixtures: the test router (tools that echo, sleep, report progress, ask the client and
//! read their HTTP request) served on loopback behind an authentication layer, and a raw
//! client's helpers.

use std::time::Duration;

use cancelkit::http::server::{HttpRequest, McpHttpServer};
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::wire::{headers, sse};
use cancelkit::{JsonRpcError, cancel_reason};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc};

use crate::mcp_post;

/// How long a test waits for what should happen promptly.
pub(crate) const WAIT: Duration = Duration::from_secs(10);
const V2026: &str = "2026-07-28";

/// A sleep that ended early, and why.
#[derive(Debug)]
pub(crate) struct Stopped {
    pub(crate) seconds: f64,
    pub(crate) reason: String,
}

pub(crate) struct Server {
    pub(crate) url: String,
    pub(crate) address: String,
    pub(crate) stopped: Mutex<mpsc::UnboundedReceiver<Stopped>>,
}

impl Server {
    /// Waits for the next sleep that ended early.
    pub(crate) async fn next_stop(&self) -> Stopped {
        tokio::time::timeout(WAIT, self.stopped.lock().await.recv())
            .await
            .expect("a sleep stops in time")
            .expect("the server runs")
    }

    /// Whether a sleep stops within `within`.
    pub(crate) async fn stops_within(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.stopped.lock().await.recv())
            .await
            .is_ok()
    }
}

pub(crate) struct StopGuard {
    pub(crate) seconds: f64,
    done: bool,
    tx: mpsc::UnboundedSender<Stopped>,
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        if !self.done {
            let reason = cancel_reason().map_or_else(|| "none".into(), |r| r.to_string());
            let _ = self.tx.send(Stopped {
                seconds: self.seconds,
                reason,
            });
        }
    }
}

pub(crate) fn text(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

async fn call_tool(
    params: Value,
    cx: Context,
    tx: mpsc::UnboundedSender<Stopped>,
) -> Result<Value, JsonRpcError> {
    match params["name"].as_str().unwrap_or_default() {
        "echo" => Ok(text(params["arguments"]["text"].as_str().unwrap_or(""))),
        "sleep" => {
            let seconds = params["arguments"]["seconds"].as_f64().unwrap_or(0.0);
            let mut guard = StopGuard {
                seconds,
                done: false,
                tx,
            };
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            guard.done = true;
            Ok(text(format!("slept {seconds}")))
        }
        // Two progress notifications with the request's token, 50 ms apart, then the tag.
        "progress" => {
            let token = params["_meta"]["progressToken"].clone();
            for step in 1..=2 {
                let progress = json!({"progressToken": token, "progress": step, "total": 2});
                cx.peer()
                    .notify("notifications/progress", progress)
                    .await
                    .map_err(JsonRpcError::from)?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(text(params["arguments"]["tag"].as_str().unwrap_or("")))
        }
        // What the handler learns of its HTTP request.
        "whoami" => {
            let http = HttpRequest::of(&cx)
                .ok_or_else(|| JsonRpcError::internal("no HTTP request in the context"))?;
            let user = http.extensions().get::<User>().map(|user| user.0.clone());
            Ok(json!({
                "user": user,
                "session": http.session_id(),
                "clientId": http.client_id(),
                "method": http.method().as_str(),
                "path": http.uri().path(),
                "header": http.headers().get("x-user").and_then(|v| v.to_str().ok()),
            }))
        }
        // Asks the client for its roots and returns the answer.
        "ask" => {
            let roots: Value = cx
                .peer()
                .request("roots/list", json!({}))
                .timeout(WAIT)
                .await
                .map_err(JsonRpcError::from)?;
            Ok(text(roots.to_string()))
        }
        other => Err(JsonRpcError::invalid_params(format!("no tool {other}"))),
    }
}

/// The user an authentication layer in front of the server names (here: the `x-user` header).
#[derive(Clone, Debug)]
struct User(String);

/// The layer: puts the [`User`] of `x-user` in the request's extensions.
pub(crate) async fn authenticate(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let user = request
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .map(|v| User(v.to_owned()));
    if let Some(user) = user {
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}

/// Serves the test router with `configure`'s options on a loopback port.
pub(crate) async fn start(configure: impl FnOnce(McpHttpServer) -> McpHttpServer) -> Server {
    start_wrapped(configure, |app| app).await
}

/// As [`start`], with `wrap` around the server's router (layers in front of it).
pub(crate) async fn start_wrapped(
    configure: impl FnOnce(McpHttpServer) -> McpHttpServer,
    wrap: impl FnOnce(axum::Router) -> axum::Router,
) -> Server {
    let (tx, rx) = mpsc::unbounded_channel();
    let router = Router::new()
        .request("initialize", |params: Value, _cx: Context| async move {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            Ok::<_, JsonRpcError>(json!({
                "protocolVersion": McpRevision::answer_initialize(asked).to_string(),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-server-test", "version": "1"}
            }))
        })
        .request("server/discover", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"capabilities": {"tools": {}}}))
        })
        .request("tools/call", move |params: Value, cx: Context| {
            call_tool(params, cx, tx.clone())
        })
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        );
    let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .router(router)
        .max_frame_len(64 * 1024);
    let app = wrap(configure(McpHttpServer::new(builder)).into_router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        url: format!("http://{address}/mcp"),
        address,
        stopped: Mutex::new(rx),
    }
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

pub(crate) fn post(url: &str, session: Option<&str>, message: &Value) -> reqwest::RequestBuilder {
    mcp_post::post(&client(), url, session, message)
}

pub(crate) fn stamped(mut message: Value) -> Value {
    let params = message["params"].as_object_mut().expect("params");
    params.insert(
        "_meta".into(),
        json!({
            "io.modelcontextprotocol/protocolVersion": V2026,
            "io.modelcontextprotocol/clientCapabilities": {}
        }),
    );
    message
}

pub(crate) fn tool(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// Opens a 2025-11-25 session; its id.
pub(crate) async fn session(server: &Server) -> String {
    session_of(server, None).await
}

/// `request` as `user` (the `x-user` header), or as nobody.
pub(crate) fn as_user(
    request: reqwest::RequestBuilder,
    user: Option<&str>,
) -> reqwest::RequestBuilder {
    match user {
        Some(user) => request.header("x-user", user),
        None => request,
    }
}

/// Opens a 2025-11-25 session as `user` (the `x-user` header), or as nobody; its id.
pub(crate) async fn session_of(server: &Server, user: Option<&str>) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let response = as_user(post(&server.url, None, &initialize), user)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()[headers::SESSION_ID]
        .to_str()
        .unwrap()
        .to_owned();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = as_user(post(&server.url, Some(&session), &initialized), user)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    session
}

/// Reads an event stream until it ends (or `until` says stop): its events.
pub(crate) async fn events(
    response: reqwest::Response,
    until: impl Fn(&sse::Event) -> bool,
) -> Vec<sse::Event> {
    let mut body = response.bytes_stream();
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut events = Vec::new();
    loop {
        let chunk = tokio::time::timeout(WAIT, body.next())
            .await
            .expect("the stream goes on in time");
        let Some(Ok(chunk)) = chunk else {
            return events;
        };
        let before = events.len();
        parser.feed(&chunk, &mut events).unwrap();
        if events[before..].iter().any(&until) {
            return events;
        }
    }
}

/// The JSON-RPC messages among `events` (the priming event has none).
pub(crate) fn messages(events: &[sse::Event]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| serde_json::from_str(&e.data).expect("each event is one JSON-RPC message"))
        .collect()
}
