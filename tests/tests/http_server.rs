//! `cancelkit::http::server::McpHttpServer` on real HTTP on loopback, driven by a raw client
//! (reqwest, the workspace's SSE parser) so every status, header and event is asserted as sent:
//!
//! - a session's response stream cut by the client is resumed with `Last-Event-ID` and the
//!   result arrives; with the replay buffer off, the same resumption is refused;
//! - behind a proxy that cuts connections idle for 300 ms, a 1 s call at 2026-07-28 completes
//!   with keep-alive comments every 100 ms and is cancelled (the closed stream) without them;
//! - cancels: a closed 2026-07-28 stream, a session's `notifications/cancelled` (its stream ends
//!   with no response; one that overtakes its request, as HTTP allows, cancels it when it
//!   comes), a session `DELETE` (what it runs is cancelled);
//! - two 2026-07-28 clients sending the same id and progress token at once each get their own
//!   progress and response, under their own id and token;
//! - a request of the server to the client travels on the session's stream and its answer,
//!   POSTed back, reaches the tool;
//! - a handler reads its HTTP request (`HttpRequest::of`): what a layer put in the extensions,
//!   the session, the client's own id at both eras;
//! - with `session_owner`, a session is found only by its owner (404 for anyone else on POST,
//!   GET, resumption and DELETE); `stop_streams_on` ends the GET streams, not the calls;
//! - bad input: every refusal with its status and JSON-RPC error.

#[path = "support/mcp_post.rs"]
mod mcp_post;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cancelkit::http::server::{HttpRequest, McpHttpServer};
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::wire::origin::OriginPolicy;
use cancelkit::wire::{headers, sse};
use cancelkit::{JsonRpcError, cancel_reason};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

/// How long a test waits for what should happen promptly.
const WAIT: Duration = Duration::from_secs(10);
const V2026: &str = "2026-07-28";

/// A sleep that ended early, and why.
#[derive(Debug)]
struct Stopped {
    seconds: f64,
    reason: String,
}

struct Server {
    url: String,
    address: String,
    stopped: Mutex<mpsc::UnboundedReceiver<Stopped>>,
}

impl Server {
    /// Waits for the next sleep that ended early.
    async fn next_stop(&self) -> Stopped {
        tokio::time::timeout(WAIT, self.stopped.lock().await.recv())
            .await
            .expect("a sleep stops in time")
            .expect("the server runs")
    }

    /// Whether a sleep stops within `within`.
    async fn stops_within(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.stopped.lock().await.recv())
            .await
            .is_ok()
    }
}

struct StopGuard {
    seconds: f64,
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

fn text(text: impl Into<String>) -> Value {
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
async fn authenticate(
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
async fn start(configure: impl FnOnce(McpHttpServer) -> McpHttpServer) -> Server {
    start_wrapped(configure, |app| app).await
}

/// As [`start`], with `wrap` around the server's router (layers in front of it).
async fn start_wrapped(
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

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn post(url: &str, session: Option<&str>, message: &Value) -> reqwest::RequestBuilder {
    mcp_post::post(&client(), url, session, message)
}

fn stamped(mut message: Value) -> Value {
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

fn tool(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// Opens a 2025-11-25 session; its id.
async fn session(server: &Server) -> String {
    session_of(server, None).await
}

/// `request` as `user` (the `x-user` header), or as nobody.
fn as_user(request: reqwest::RequestBuilder, user: Option<&str>) -> reqwest::RequestBuilder {
    match user {
        Some(user) => request.header("x-user", user),
        None => request,
    }
}

/// Opens a 2025-11-25 session as `user` (the `x-user` header), or as nobody; its id.
async fn session_of(server: &Server, user: Option<&str>) -> String {
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
async fn events(
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
fn messages(events: &[sse::Event]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| serde_json::from_str(&e.data).expect("each event is one JSON-RPC message"))
        .collect()
}

#[tokio::test]
async fn a_cut_session_stream_is_resumed_with_last_event_id() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let call = tool(json!(5), "sleep", json!({"seconds": 0.4}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The priming event gives the id to resume from before any message; then the client cuts.
    let primed = events(response, |_| true).await;
    let last_id = primed[0].id.clone().expect("a priming event with an id");
    assert!(primed[0].data.is_empty(), "{primed:?}");
    let resumed = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, &session)
        .header(headers::LAST_EVENT_ID, &last_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let got = messages(&events(resumed, |_| false).await);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["id"], 5);
    assert_eq!(got[0]["result"]["content"][0]["text"], "slept 0.4");
}

#[tokio::test]
async fn without_a_replay_buffer_a_cut_stream_cannot_be_resumed() {
    let server = start(|s| s.replay_events(0)).await;
    let session = session(&server).await;
    let call = tool(json!(5), "echo", json!({"text": "x"}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let got = events(response, |_| false).await;
    assert!(got.iter().all(|e| e.id.is_none()), "no ids: {got:?}");
    let resumed = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, &session)
        .header(headers::LAST_EVENT_ID, "2/0")
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 400);
}

/// A stamped 1 s sleep through a proxy that cuts connections idle for 300 ms: the messages and
/// keep-alive comments the stream carried.
async fn sleep_behind_idle_cutting_proxy(server: &Server) -> (Vec<Value>, u64) {
    let proxy =
        cancelkit_tests::proxy::idle_cutting(server.address.clone(), Duration::from_millis(300))
            .await;
    let call = stamped(tool(json!(1), "sleep", json!({"seconds": 1.0})));
    let response = post(&format!("{proxy}/mcp"), None, &call)
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut events = Vec::new();
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(WAIT, body.next()).await {
        parser.feed(&chunk, &mut events).unwrap();
    }
    (messages(&events), parser.comments())
}

#[tokio::test]
async fn keep_alive_comments_keep_a_long_call_alive_behind_an_idle_timeout() {
    let server = start(|s| s.keep_alive(Some(Duration::from_millis(100)))).await;
    let (got, comments) = sleep_behind_idle_cutting_proxy(&server).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["result"]["content"][0]["text"], "slept 1");
    assert!(comments >= 5, "{comments} keep-alive comments");
    assert!(!server.stops_within(Duration::from_millis(300)).await);
}

#[tokio::test]
async fn without_keep_alive_the_idle_timeout_cancels_the_call() {
    let server = start(|s| s.keep_alive(None)).await;
    let (got, comments) = sleep_behind_idle_cutting_proxy(&server).await;
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(comments, 0);
    let stopped = server.next_stop().await;
    assert!(
        stopped.reason.contains("closed the response stream"),
        "{stopped:?}"
    );
}

#[tokio::test]
async fn closing_a_2026_stream_cancels_its_request() {
    let server = start(|s| s).await;
    let call = stamped(tool(json!("c"), "sleep", json!({"seconds": 30})));
    let response = post(&server.url, None, &call).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let started = Instant::now();
    drop(response);
    let stopped = server.next_stop().await;
    assert_eq!(stopped.seconds, 30.0);
    assert!(
        stopped.reason.contains("closed the response stream"),
        "{stopped:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_session_cancel_stops_the_tool_and_ends_its_stream_without_a_response() {
    let server = Arc::new(start(|s| s).await);
    let session = session(&server).await;
    let call = tool(json!(9), "sleep", json!({"seconds": 30}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let reading = tokio::spawn(events(response, |_| false));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 9, "reason": "user"}});
    let accepted = post(&server.url, Some(&session), &cancel)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);
    let stopped = server.next_stop().await;
    assert!(stopped.reason.contains("user"), "{stopped:?}");
    let got = messages(&reading.await.unwrap());
    assert!(
        got.is_empty(),
        "no response for a cancelled request: {got:?}"
    );
    // The session goes on.
    let echo = post(
        &server.url,
        Some(&session),
        &tool(json!(10), "echo", json!({"text": "on"})),
    )
    .send()
    .await
    .unwrap();
    let got = messages(&events(echo, |_| false).await);
    assert_eq!(got[0]["result"]["content"][0]["text"], "on");
}

#[tokio::test]
async fn a_session_cancel_that_overtakes_its_request_cancels_it_when_it_comes() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 77, "reason": "overtaken"}});
    let accepted = post(&server.url, Some(&session), &cancel)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);
    let call = tool(json!(77), "sleep", json!({"seconds": 30}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let stopped = server.next_stop().await;
    assert!(stopped.reason.contains("overtaken"), "{stopped:?}");
    let got = messages(&events(response, |_| false).await);
    assert!(
        got.is_empty(),
        "no response for a cancelled request: {got:?}"
    );
}

#[tokio::test]
async fn deleting_a_session_cancels_what_it_runs_and_forgets_it() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let call = tool(json!(1), "sleep", json!({"seconds": 30}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let reading = tokio::spawn(events(response, |_| false));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let deleted = client()
        .delete(&server.url)
        .header(headers::SESSION_ID, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    server.next_stop().await;
    let _ = reading.await.unwrap();
    let after = post(
        &server.url,
        Some(&session),
        &tool(json!(2), "echo", json!({"text": "x"})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(after.status(), 404);
    let error: Value = after.json().await.unwrap();
    assert_eq!(error["error"]["code"], -32001);
}

#[tokio::test]
async fn clients_at_2026_sharing_an_id_and_a_progress_token_each_get_their_own() {
    let server = start(|s| s).await;
    let call = |tag: &str| {
        let mut message = stamped(tool(json!(1), "progress", json!({"tag": tag})));
        message["params"]["_meta"]["progressToken"] = json!("tok");
        message
    };
    let (a, b) = tokio::join!(
        post(&server.url, None, &call("a")).send(),
        post(&server.url, None, &call("b")).send()
    );
    let (a, b) = tokio::join!(events(a.unwrap(), |_| false), events(b.unwrap(), |_| false));
    for (got, tag) in [(messages(&a), "a"), (messages(&b), "b")] {
        assert_eq!(got.len(), 3, "{got:?}");
        for progress in &got[..2] {
            assert_eq!(progress["method"], "notifications/progress");
            assert_eq!(progress["params"]["progressToken"], "tok");
        }
        assert_eq!(got[2]["id"], 1);
        assert_eq!(got[2]["result"]["content"][0]["text"], tag);
    }
}

#[tokio::test]
async fn a_request_of_the_server_goes_on_the_session_stream_and_its_answer_comes_back() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let response = post(
        &server.url,
        Some(&session),
        &tool(json!(3), "ask", json!({})),
    )
    .send()
    .await
    .unwrap();
    let mut body = response.bytes_stream();
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut seen = Vec::new();
    let mut answered = false;
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(WAIT, body.next()).await {
        let mut events = Vec::new();
        parser.feed(&chunk, &mut events).unwrap();
        for message in messages(&events) {
            if message["method"] == "roots/list" {
                let answer = json!({"jsonrpc": "2.0", "id": message["id"],
                                    "result": {"roots": [{"uri": "file:///r"}]}});
                let accepted = post(&server.url, Some(&session), &answer)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(accepted.status(), 202);
                answered = true;
            }
            seen.push(message);
        }
    }
    assert!(answered, "{seen:?}");
    let last = seen.last().unwrap();
    assert_eq!(last["id"], 3);
    assert!(
        last["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("file:///r"),
        "{last}"
    );
}

#[tokio::test]
async fn short_calls_are_answered_as_json() {
    let server = start(|s| s.stream_methods(Vec::<String>::new())).await;
    let session = session(&server).await;
    let response = post(
        &server.url,
        Some(&session),
        &tool(json!(1), "echo", json!({"text": "j"})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "j");
}

/// A raw POST with these headers and body; status and JSON body.
async fn raw(server: &Server, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut request = client().post(&server.url).body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn bad_requests_get_a_clear_status_and_error() {
    let server = start(|s| s.max_sessions(1)).await;
    let json_headers = [
        ("content-type", "application/json"),
        ("accept", headers::ACCEPT_JSON_OR_SSE),
    ];
    let echo = stamped(tool(json!(1), "echo", json!({"text": "x"}))).to_string();
    // Not acceptable, wrong media type.
    let (status, _) = raw(
        &server,
        &[
            ("content-type", "application/json"),
            ("accept", "text/html"),
        ],
        &echo,
    )
    .await;
    assert_eq!(status, 406);
    let (status, _) = raw(&server, &[("content-type", "text/plain")], &echo).await;
    assert_eq!(status, 415);
    // Not JSON, not JSON-RPC, a batch.
    let (status, body) = raw(&server, &json_headers, "{\"jsonrpc\":").await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32700))
    );
    let (status, body) = raw(
        &server,
        &json_headers,
        r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    assert_eq!(body["id"], 1);
    let (status, body) = raw(&server, &json_headers, &format!("[{echo}]")).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    // Too large for the peer's frame limit.
    let big = stamped(tool(json!(1), "echo", json!({"text": "x".repeat(100_000)}))).to_string();
    let (status, _) = raw(&server, &json_headers, &big).await;
    assert_eq!(status, 413);
    // Neither a session nor a 2026-07-28 stamp.
    let unstamped = tool(json!(1), "echo", json!({"text": "x"})).to_string();
    let (status, body) = raw(&server, &json_headers, &unstamped).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    // An unknown session.
    let (status, body) = raw(
        &server,
        &[json_headers[0], json_headers[1], ("mcp-session-id", "nope")],
        &unstamped,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (404, Some(-32001))
    );
    // Headers that disagree with a 2026-07-28 body.
    let (status, body) = raw(
        &server,
        &[
            json_headers[0],
            json_headers[1],
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &echo,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32020))
    );
    let (status, body) = raw(
        &server,
        &[
            json_headers[0],
            json_headers[1],
            ("mcp-method", "tools/list"),
        ],
        &echo,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32020))
    );
    // A foreign origin (DNS rebinding).
    let (status, _) = raw(
        &server,
        &[
            json_headers[0],
            json_headers[1],
            ("origin", "http://evil.example"),
        ],
        &echo,
    )
    .await;
    assert_eq!(status, 403);
    // A session's protocol version, a duplicate id in flight, too many sessions.
    let session = session(&server).await;
    let session_headers = [
        json_headers[0],
        json_headers[1],
        ("mcp-session-id", session.as_str()),
    ];
    let (status, body) = raw(
        &server,
        &[
            session_headers[0],
            session_headers[1],
            session_headers[2],
            ("mcp-protocol-version", "2025-06-18"),
        ],
        &unstamped,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    let long = tool(json!(7), "sleep", json!({"seconds": 30}));
    let first = post(&server.url, Some(&session), &long)
        .send()
        .await
        .unwrap();
    let (status, body) = raw(&server, &session_headers, &long.to_string()).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600)),
        "{body}"
    );
    drop(first);
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let (status, body) = raw(&server, &json_headers, &initialize.to_string()).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (503, Some(-32050))
    );
    // GET without a session, DELETE of an unknown one.
    let get = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
    let delete = client()
        .delete(&server.url)
        .header("mcp-session-id", "nope")
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 404);
}

#[tokio::test]
async fn a_loopback_server_checking_hosts_refuses_a_rebound_name() {
    let server = start(|s| s.origin_policy(OriginPolicy::new().loopback_hosts())).await;
    let echo = stamped(tool(json!(1), "echo", json!({"text": "x"})));
    let refused = post(&server.url, None, &echo)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let allowed = post(&server.url, None, &echo).send().await.unwrap();
    assert_eq!(allowed.status(), 200);
}

/// The result of a `whoami` call answered on `response` (JSON or an event stream).
async fn whoami_result(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 200);
    let streamed = response.headers().get("content-type").is_some_and(|v| {
        v.to_str()
            .unwrap_or_default()
            .starts_with(sse::CONTENT_TYPE)
    });
    let answer = if streamed {
        messages(&events(response, |_| false).await)
            .pop()
            .expect("an answer")
    } else {
        response.json().await.unwrap()
    };
    answer["result"].clone()
}

#[tokio::test]
async fn a_handler_reads_its_http_request_at_both_eras() {
    let server = start_wrapped(
        |s| s,
        |app| app.layer(axum::middleware::from_fn(authenticate)),
    )
    .await;
    // In a session: the session, the id as sent, what the layer put in the extensions.
    let session = session_of(&server, Some("alice")).await;
    let response = post(
        &server.url,
        Some(&session),
        &tool(json!(7), "whoami", json!({})),
    )
    .header("x-user", "alice")
    .send()
    .await
    .unwrap();
    let seen = whoami_result(response).await;
    assert_eq!(
        seen,
        json!({"user": "alice", "session": session, "clientId": 7, "method": "POST",
               "path": "/mcp", "header": "alice"})
    );
    // At 2026-07-28: no session, and the client's own id although the handler runs under one
    // of the server's (two clients sending "abc" at once share the peer).
    let response = post(
        &server.url,
        None,
        &stamped(tool(json!("abc"), "whoami", json!({}))),
    )
    .header("x-user", "bob")
    .send()
    .await
    .unwrap();
    let seen = whoami_result(response).await;
    assert_eq!(
        seen,
        json!({"user": "bob", "session": null, "clientId": "abc", "method": "POST",
               "path": "/mcp", "header": "bob", "resultType": "complete"})
    );
}

#[tokio::test]
async fn with_an_owner_a_session_is_found_only_by_its_owner() {
    let server = start(|s| {
        s.session_owner(|parts| {
            parts
                .headers
                .get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
    })
    .await;
    let session = session_of(&server, Some("alice")).await;
    let echo = tool(json!(1), "echo", json!({"text": "x"}));
    // Bob, and a request naming no user, are told the session does not exist.
    for user in [Some("bob"), None] {
        let label = format!("{user:?}");
        let posted = as_user(post(&server.url, Some(&session), &echo), user)
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status(), 404, "POST as {label}");
        let error: Value = posted.json().await.unwrap();
        assert_eq!(error["error"]["code"], -32001, "POST as {label}");
        let get = |resume: bool| {
            let mut request = as_user(client().get(&server.url), user)
                .header("accept", sse::CONTENT_TYPE)
                .header(headers::SESSION_ID, &session);
            if resume {
                request = request.header(headers::LAST_EVENT_ID, "0");
            }
            request.send()
        };
        assert_eq!(get(false).await.unwrap().status(), 404, "GET as {label}");
        assert_eq!(get(true).await.unwrap().status(), 404, "resume as {label}");
        let deleted = as_user(client().delete(&server.url), user)
            .header(headers::SESSION_ID, &session)
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status(), 404, "DELETE as {label}");
    }
    // The session is untouched: alice calls, then ends it.
    let posted = post(&server.url, Some(&session), &echo)
        .header("x-user", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    let deleted = client()
        .delete(&server.url)
        .header("x-user", "alice")
        .header(headers::SESSION_ID, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
}

#[tokio::test]
async fn the_stop_token_ends_get_streams_and_calls_run_on_to_their_answers() {
    let stop = CancellationToken::new();
    let server = start({
        let stop = stop.clone();
        |s| s.stop_streams_on(stop)
    })
    .await;
    let session = session(&server).await;
    let stream = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let call = post(
        &server.url,
        Some(&session),
        &tool(json!(1), "sleep", json!({"seconds": 0.5})),
    )
    .send()
    .await
    .unwrap();
    let answer = tokio::spawn(events(call, |_| false));
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.cancel();
    // The GET stream ends (`events` panics if it is still open after its wait)...
    let started = Instant::now();
    let on_stream = events(stream, |_| false).await;
    assert!(started.elapsed() < Duration::from_secs(2), "{on_stream:?}");
    assert!(messages(&on_stream).is_empty(), "{on_stream:?}");
    // ...and the call is answered.
    let got = messages(&answer.await.unwrap());
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["result"]["content"][0]["text"], "slept 0.5");
    // A GET opened after the stop ends at once.
    let late = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, &session)
        .send()
        .await
        .unwrap();
    if late.status() == 200 {
        let started = Instant::now();
        events(late, |_| false).await;
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
