//! The bounds on what a client chooses and on what the server buffers for it, on real HTTP on
//! loopback (`McpHttpServer`, driven by reqwest and the workspace's SSE parser) and on the
//! stdio framing of a bare `Peer`:
//!
//! - a request id longer than the builder's `max_id_len` (256 bytes) is refused with -32600
//!   naming the limit, answered with `"id": null`, and its handler never runs — in a session,
//!   at 2026-07-28 and on stdio; an id of exactly 256 bytes is served;
//! - a `_meta.progressToken` over the same bound is refused with -32602 naming it, under the
//!   request's id, and its handler never runs; one at the bound is served, progress and all;
//! - the replay buffer of an unread 2025-11-25 stream keeps at most `replay_bytes` (the newest
//!   events; resuming from before them gets 400), always with the response — even one larger
//!   than the bound on its own;
//! - the replay buffers of a session's streams keep at most `session_replay_bytes` together.

#[path = "support/mcp_post.rs"]
mod mcp_post;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::http::server::McpHttpServer;
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::wire::{headers, meta, sse};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// How long a test waits for what should happen promptly.
const WAIT: Duration = Duration::from_secs(10);
const V2026: &str = "2026-07-28";
/// The default `max_id_len`.
const MAX_ID: usize = 256;
/// The replay bound per stream in the replay tests.
const REPLAY_BYTES: usize = 16 * 1024;
/// Progress events per `burst` call in the replay tests.
const BURST: u64 = 40;

fn text(text: impl Into<String>) -> Value {
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

fn router(runs: Arc<AtomicUsize>) -> Router {
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

struct Server {
    url: String,
    /// Calls of `tools/call` that reached the handler.
    runs: Arc<AtomicUsize>,
}

/// Serves the test router with `configure`'s options on a loopback port.
async fn start(configure: impl FnOnce(McpHttpServer) -> McpHttpServer) -> Server {
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
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(WAIT)
        .build()
        .unwrap()
}

fn post(url: &str, session: Option<&str>, message: &Value) -> reqwest::RequestBuilder {
    mcp_post::post(&client(), url, session, message)
}

/// `message` stamped for MCP 2026-07-28 (keeping what its `_meta` has).
fn stamped(mut message: Value) -> Value {
    let meta = message["params"]
        .as_object_mut()
        .expect("params")
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta[meta::PROTOCOL_VERSION] = json!(V2026);
    meta[meta::CLIENT_CAPABILITIES] = json!({});
    message
}

fn tool(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// `message` with `_meta.progressToken` set to `token`.
fn with_token(mut message: Value, token: &str) -> Value {
    message["params"]["_meta"] = json!({"progressToken": token});
    message
}

/// Opens a 2025-11-25 session; its id.
async fn session(server: &Server) -> String {
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
async fn events(response: reqwest::Response, first_chunk: bool) -> Vec<sse::Event> {
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
async fn answer(response: reqwest::Response) -> Value {
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
fn assert_id_refused(answer: &Value) {
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
fn assert_token_refused(answer: &Value, id: &Value) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("progressToken longer than 256 bytes"),
        "{message}"
    );
    assert_eq!(&answer["id"], id);
}

#[tokio::test]
async fn an_over_long_request_id_is_refused_and_its_handler_never_runs() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let long = json!("i".repeat(MAX_ID + 1));
    for message in [
        tool(long.clone(), "count", json!({})),
        stamped(tool(long.clone(), "count", json!({}))),
    ] {
        let session = (message["params"]["_meta"][meta::PROTOCOL_VERSION] != V2026)
            .then_some(session.as_str());
        let response = post(&server.url, session, &message).send().await.unwrap();
        assert_eq!(response.status(), 400, "{message}");
        assert_id_refused(&response.json().await.unwrap());
    }
    // A cancel naming such an id names nothing: accepted, and the session goes on.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": long, "reason": "r"}});
    let response = post(&server.url, Some(&session), &cancel)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let response = post(
        &server.url,
        Some(&session),
        &tool(json!(1), "count", json!({})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(
        answer(response).await["result"]["content"][0]["text"],
        "counted"
    );
    assert_eq!(
        server.runs.load(Ordering::SeqCst),
        1,
        "only the last call ran"
    );
}

#[tokio::test]
async fn an_id_at_the_bound_is_served() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let id = json!("i".repeat(MAX_ID));
    for message in [
        tool(id.clone(), "count", json!({})),
        stamped(tool(id.clone(), "count", json!({}))),
    ] {
        let session = (message["params"]["_meta"][meta::PROTOCOL_VERSION] != V2026)
            .then_some(session.as_str());
        let response = post(&server.url, session, &message).send().await.unwrap();
        assert_eq!(response.status(), 200, "{message}");
        let answer = answer(response).await;
        assert_eq!(answer["id"], id);
        assert_eq!(
            answer["result"]["content"][0]["text"], "counted",
            "{answer}"
        );
    }
    assert_eq!(server.runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_over_long_progress_token_is_refused_and_one_at_the_bound_is_served() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let long = "t".repeat(MAX_ID + 1);
    let call = tool(
        json!(7),
        "burst",
        json!({"count": 2, "size": 1, "answer": 1}),
    );
    for message in [
        with_token(call.clone(), &long),
        stamped(with_token(call.clone(), &long)),
    ] {
        let session = (message["params"]["_meta"][meta::PROTOCOL_VERSION] != V2026)
            .then_some(session.as_str());
        let response = post(&server.url, session, &message).send().await.unwrap();
        assert_eq!(response.status(), 400, "{message}");
        assert_token_refused(&response.json().await.unwrap(), &json!(7));
    }
    assert_eq!(server.runs.load(Ordering::SeqCst), 0, "no handler ran");
    // At the bound: the call runs and its progress carries the token.
    let token = "t".repeat(MAX_ID);
    let response = post(&server.url, Some(&session), &with_token(call, &token))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let got = events(response, false).await;
    let progress: Vec<Value> = got
        .iter()
        .filter(|e| e.data.contains("notifications/progress"))
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    assert_eq!(progress.len(), 2, "{got:?}");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == token)
    );
    assert_eq!(server.runs.load(Ordering::SeqCst), 1);
}

/// Calls `burst` in `session` with a token at the bound, reads only the priming event (the
/// stream is left unread), then waits until the response is in the stream's replay buffer
/// (resuming after the last progress event). The stream's number.
async fn unread_burst(server: &Server, session: &str, id: u64, answer_bytes: usize) -> u64 {
    let call = tool(
        json!(id),
        "burst",
        json!({"count": BURST, "size": 1000, "answer": answer_bytes}),
    );
    let call = with_token(call, &"t".repeat(MAX_ID));
    let response = post(&server.url, Some(session), &call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let primed = events(response, true).await;
    let (stream, seq) = primed[0]
        .id
        .as_deref()
        .and_then(|id| id.split_once('/'))
        .expect("a priming event with an id");
    assert_eq!(seq, "0");
    let stream: u64 = stream.parse().unwrap();
    let resumed = resume(server, session, stream, BURST).await;
    assert_eq!(resumed.status(), 200, "the response is kept");
    let got = events(resumed, false).await;
    let response: Value = serde_json::from_str(&got.last().expect("the response").data).unwrap();
    assert_eq!(response["id"], id, "{response}");
    stream
}

async fn resume(server: &Server, session: &str, stream: u64, after: u64) -> reqwest::Response {
    client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, session)
        .header(headers::LAST_EVENT_ID, format!("{stream}/{after}"))
        .send()
        .await
        .unwrap()
}

/// What the replay buffer of finished stream `stream` holds: resumes after each event in
/// turn until a resumption is accepted (those before are refused: their events are gone).
/// The first event kept, and the events replayed.
async fn replay_of(server: &Server, session: &str, stream: u64) -> (u64, Vec<sse::Event>) {
    for after in 0..=BURST {
        let response = resume(server, session, stream, after).await;
        if response.status() == 200 {
            return (after + 1, events(response, false).await);
        }
        assert_eq!(response.status(), 400);
    }
    panic!("stream {stream} cannot be resumed at all");
}

fn bytes(events: &[sse::Event]) -> usize {
    events.iter().map(|e| e.data.len()).sum()
}

#[tokio::test]
async fn an_unread_stream_keeps_its_newest_events_within_its_replay_bytes_and_the_response() {
    let server = start(|s| s.replay_bytes(REPLAY_BYTES)).await;
    let session = session(&server).await;
    let stream = unread_burst(&server, &session, 3, 10).await;
    let (first, replayed) = replay_of(&server, &session, stream).await;
    assert!(first > 1, "the oldest events went");
    let seqs: Vec<String> = replayed.iter().filter_map(|e| e.id.clone()).collect();
    let expected: Vec<String> = (first..=BURST + 1)
        .map(|s| format!("{stream}/{s}"))
        .collect();
    assert_eq!(
        seqs, expected,
        "the newest events, in order, to the response"
    );
    let response: Value = serde_json::from_str(&replayed.last().unwrap().data).unwrap();
    assert_eq!(response["id"], 3);
    assert_eq!(response["result"]["content"][0]["text"], "a".repeat(10));
    let kept = bytes(&replayed);
    assert!(kept <= REPLAY_BYTES, "{kept} bytes kept");
    // It keeps as much as fits: one more event would not have.
    let event = replayed[0].data.len();
    assert!(kept + event > REPLAY_BYTES, "{kept} + {event} bytes");
    assert!(
        replayed[0].data.len() > 1000 + MAX_ID,
        "each event carries the token"
    );
}

#[tokio::test]
async fn a_response_larger_than_the_replay_bound_is_kept_alone() {
    let server = start(|s| s.replay_bytes(REPLAY_BYTES)).await;
    let session = session(&server).await;
    let stream = unread_burst(&server, &session, 4, 2 * REPLAY_BYTES).await;
    let (first, replayed) = replay_of(&server, &session, stream).await;
    assert_eq!(first, BURST + 1, "every progress event went");
    assert_eq!(replayed.len(), 1);
    assert!(bytes(&replayed) > REPLAY_BYTES);
    let response: Value = serde_json::from_str(&replayed[0].data).unwrap();
    assert_eq!(response["id"], 4);
}

#[tokio::test]
async fn the_streams_of_a_session_keep_at_most_its_replay_bytes_together() {
    let session_bytes = REPLAY_BYTES * 3 / 2;
    let server = start(|s| {
        s.replay_bytes(REPLAY_BYTES)
            .session_replay_bytes(session_bytes)
    })
    .await;
    let session = session(&server).await;
    let first = unread_burst(&server, &session, 5, 10).await;
    let second = unread_burst(&server, &session, 6, 10).await;
    let (_, first) = replay_of(&server, &session, first).await;
    let (_, second) = replay_of(&server, &session, second).await;
    let (first, second) = (bytes(&first), bytes(&second));
    assert!(first + second <= session_bytes, "{first} + {second} bytes");
    assert!(
        second < first,
        "the stream that came later kept less: {first}, {second}"
    );
}

/// One line of the peer's output.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut R) -> Value {
    let mut line = String::new();
    tokio::time::timeout(WAIT, lines.read_line(&mut line))
        .await
        .expect("an answer in time")
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

#[tokio::test]
async fn on_stdio_an_over_long_id_or_token_is_refused_and_its_handler_never_runs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (client, server) = tokio::io::duplex(1024 * 1024);
    let (read, write) = tokio::io::split(server);
    let _peer = Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25))
        .router(router(Arc::clone(&runs)))
        .connect(read, write);
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read);
    let mut send = async |message: Value| {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        write.write_all(&line).await.unwrap();
    };
    send(tool(json!("i".repeat(MAX_ID + 1)), "count", json!({}))).await;
    assert_id_refused(&read_line(&mut lines).await);
    let call = tool(
        json!(2),
        "burst",
        json!({"count": 1, "size": 1, "answer": 1}),
    );
    send(with_token(call, &"t".repeat(MAX_ID + 1))).await;
    assert_token_refused(&read_line(&mut lines).await, &json!(2));
    // A cancel naming an over-long id is ignored; an id at the bound is served.
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "i".repeat(MAX_ID + 1)}}),
    )
    .await;
    let id = json!("i".repeat(MAX_ID));
    send(tool(id.clone(), "count", json!({}))).await;
    let answer = read_line(&mut lines).await;
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "counted");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "only the last call ran");
}
