//! The fixtures: the test router (`count`, `burst`) served on loopback with chosen bounds, a
//! client whose every request is bounded in time, and the checks of the two refusals.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::http::server::McpHttpServer;
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::wire::{headers, meta, sse};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::mcp_post;

/// How long a test waits for what should happen promptly.
pub(crate) const WAIT: Duration = Duration::from_secs(10);
pub(crate) const V2026: &str = "2026-07-28";
/// The default `max_id_len`.
pub(crate) const MAX_ID: usize = 256;
/// The replay bound per stream in the replay tests.
pub(crate) const REPLAY_BYTES: usize = 16 * 1024;
/// Progress events per `burst` call in the replay tests.
pub(crate) const BURST: u64 = 40;

pub(crate) fn text(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// `count`: counts its calls. `burst`: `count` progress notifications whose `message` is
/// `size` bytes, with the request's token, then an answer of `answer` bytes.
async fn call_tool(
    params: Value,
    cx: Context,
    runs: Arc<AtomicUsize>,
) -> Result<Value, JsonRpcError> {
    runs.fetch_add(1, Ordering::SeqCst);
    let arguments = &params["arguments"];
    match params["name"].as_str().unwrap_or_default() {
        "count" => Ok(text("counted")),
        "burst" => {
            let token = params["_meta"]["progressToken"].clone();
            let size = arguments["size"].as_u64().unwrap_or(0) as usize;
            for step in 1..=arguments["count"].as_u64().unwrap_or(0) {
                let progress = json!({"progressToken": token, "progress": step,
                                      "message": "m".repeat(size)});
                cx.peer()
                    .notify("notifications/progress", progress)
                    .await
                    .map_err(JsonRpcError::from)?;
            }
            let answer = arguments["answer"].as_u64().unwrap_or(0) as usize;
            Ok(text("a".repeat(answer)))
        }
        other => Err(JsonRpcError::invalid_params(format!("no tool {other}"))),
    }
}

pub(crate) fn router(runs: Arc<AtomicUsize>) -> Router {
    Router::new()
        .request("initialize", |params: Value, _cx: Context| async move {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            Ok::<_, JsonRpcError>(json!({
                "protocolVersion": McpRevision::answer_initialize(asked).to_string(),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-bounds-test", "version": "1"}
            }))
        })
        .request("tools/call", move |params: Value, cx: Context| {
            call_tool(params, cx, Arc::clone(&runs))
        })
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        )
}

pub(crate) struct Server {
    pub(crate) url: String,
    /// Calls of `tools/call` that reached the handler.
    pub(crate) runs: Arc<AtomicUsize>,
}

/// Serves the test router with `configure`'s options on a loopback port.
pub(crate) async fn start(configure: impl FnOnce(McpHttpServer) -> McpHttpServer) -> Server {
    let runs = Arc::new(AtomicUsize::new(0));
    let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .router(router(Arc::clone(&runs)))
        .max_frame_len(1024 * 1024);
    let app = configure(McpHttpServer::new(builder)).into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        url: format!("http://{address}/mcp"),
        runs,
    }
}

/// A client whose requests (bodies included) fail after [`WAIT`]: a request the server never
/// answers fails the test instead of hanging it.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(WAIT)
        .build()
        .unwrap()
}

pub(crate) fn post(url: &str, session: Option<&str>, message: &Value) -> reqwest::RequestBuilder {
    mcp_post::post(&client(), url, session, message)
}

/// `message` stamped for MCP 2026-07-28 (keeping what its `_meta` has).
pub(crate) fn stamped(mut message: Value) -> Value {
    let meta = message["params"]
        .as_object_mut()
        .expect("params")
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta[meta::PROTOCOL_VERSION] = json!(V2026);
    meta[meta::CLIENT_CAPABILITIES] = json!({});
    message
}

pub(crate) fn tool(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// `message` with `_meta.progressToken` set to `token`.
pub(crate) fn with_token(mut message: Value, token: &str) -> Value {
    message["params"]["_meta"] = json!({"progressToken": token});
    message
}

/// Opens a 2025-11-25 session; its id.
pub(crate) async fn session(server: &Server) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let response = post(&server.url, None, &initialize).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()[headers::SESSION_ID]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post(&server.url, Some(&session), &initialized)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    session
}

/// Reads an event stream until it ends, or until the first chunk with `first_chunk`.
pub(crate) async fn events(response: reqwest::Response, first_chunk: bool) -> Vec<sse::Event> {
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
        parser.feed(&chunk, &mut events).unwrap();
        if first_chunk {
            return events;
        }
    }
}

/// The answer to a request: its JSON, or the last message of its event stream.
pub(crate) async fn answer(response: reqwest::Response) -> Value {
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with(sse::CONTENT_TYPE));
    if !sse {
        return response.json().await.unwrap();
    }
    let events = events(response, false).await;
    let last = events
        .iter()
        .rev()
        .find(|e| !e.data.is_empty())
        .expect("a message");
    serde_json::from_str(&last.data).unwrap()
}

/// Asserts `answer` is the refusal of an id over the bound.
pub(crate) fn assert_id_refused(answer: &Value) {
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("request id longer than 256 bytes"),
        "{message}"
    );
    assert_eq!(answer["id"], Value::Null, "the id is not echoed");
    assert_eq!(answer["error"]["data"]["max"], MAX_ID, "{answer}");
}

/// Asserts `answer` is the refusal of a progress token over the bound, under `id`.
pub(crate) fn assert_token_refused(answer: &Value, id: &Value) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("progressToken longer than 256 bytes"),
        "{message}"
    );
    assert_eq!(&answer["id"], id);
}
