//! RAP protections over loopback HTTP, each against an attempt to get round it: callbacks bound
//! to their invocation by a per-call secret (forged, misdirected and replayed results are
//! refused and change nothing, the genuine one completes its call), the tool server's bound on
//! running calls (global and per client), the bounds on client-chosen text, and client text in
//! the log only escaped. (The `rap` module is Unix only.)

#![cfg(unix)]

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use cancelkit::rap::{
    self, CallTracker, Delivered, Invocation, Invoker, Notifier, ToolCall, ToolError, ToolOutput,
    ToolServer, ToolServerTarget,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;

const TOKEN: &str = "s3cret";

/// Serves `router` on `listener` (with client addresses, for the rate limit and the shares).
fn serve(listener: TcpListener, router: axum::Router) {
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
}

/// `future`, or a panic after 10 s.
async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("no answer within 10 s")
}

/// Polls `check` every 10 ms, at most 5 s; panics with `what` if it never holds.
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// One gate per tool call id: the `gate` tool waits at its call's gate until it is opened.
#[derive(Clone, Default)]
struct Gates(Arc<Mutex<HashMap<String, Arc<Notify>>>>);

impl Gates {
    fn gate(&self, id: &str) -> Arc<Notify> {
        self.0
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    fn open(&self, id: &str) {
        self.gate(id).notify_one();
    }
}

#[cancelkit::cancellable]
async fn gate_tool(call: ToolCall, gates: Gates) -> Result<ToolOutput, ToolError> {
    gates.gate(&call.tool_call_id).notified().await;
    Ok(ToolOutput::Text(format!(
        "genuine result of {}",
        call.tool_call_id
    )))
}

/// A tool server with the `gate` tool, allowing callbacks to `origin`.
fn gate_server(
    origin: &str,
    gates: &Gates,
    builder: impl FnOnce(rap::ToolServerBuilder) -> rap::ToolServerBuilder,
) -> ToolServer {
    let gates = gates.clone();
    let base = ToolServer::builder("security-tests")
        .bearer_token(TOKEN)
        .allow_callback_origin(origin)
        .unwrap()
        .operation(
            "gate",
            "Waits until the test opens its gate",
            json!({"type": "object"}),
            move |_args: Value, call: ToolCall| gate_tool(call, gates.clone()),
        );
    builder(base).build()
}

async fn post(url: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn result(id: &str, text: &str) -> Value {
    json!({"type": "tool_result", "group_id": "thread-1", "id": id, "text": text})
}

/// An invoker (its callback route on loopback) and a tool server with the `gate` tool, whose
/// router notes each invocation's `callback_url` before handling it.
struct Rig {
    server: ToolServer,
    target: ToolServerTarget,
    invoker: Invoker,
    gates: Gates,
    callbacks: Arc<Mutex<HashMap<String, String>>>,
}

async fn rig() -> Rig {
    let callback_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", callback_listener.local_addr().unwrap());
    let gates = Gates::default();
    let server = gate_server(&origin, &gates, |b| b);
    let callbacks = Arc::new(Mutex::new(HashMap::new()));
    let seen = callbacks.clone();
    let note = move |request: axum::extract::Request, next: axum::middleware::Next| {
        let seen = seen.clone();
        async move {
            if request.uri().path() != "/invoke" {
                return next.run(request).await;
            }
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
            if let Ok(invocation) = serde_json::from_slice::<Value>(&body) {
                seen.lock().unwrap().insert(
                    invocation["id"].as_str().unwrap_or_default().to_owned(),
                    invocation["callback_url"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                );
            }
            let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(body));
            next.run(request).await
        }
    };
    let tools = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = ToolServerTarget::new(format!("http://{}", tools.local_addr().unwrap()))
        .with_bearer_token(TOKEN);
    serve(
        tools,
        server.router().layer(axum::middleware::from_fn(note)),
    );
    let notifier = Notifier::new([target.clone()], Duration::from_secs(2));
    let tracker = Arc::new(CallTracker::new(Some(notifier)));
    let invoker = Invoker::new(tracker, format!("{origin}/tool_result")).unwrap();
    serve(callback_listener, invoker.callback_router());
    Rig {
        server,
        target,
        invoker,
        gates,
        callbacks,
    }
}

impl Rig {
    fn callback_of(&self, id: &str) -> String {
        self.callbacks.lock().unwrap()[id].clone()
    }

    /// Calls `gate` as `id` from a task of its own; returns once the tool server runs it.
    async fn start(
        &self,
        id: &str,
    ) -> tokio::task::JoinHandle<Result<cancelkit::protocol::rap::ToolResult, rap::InvokeError>>
    {
        let running = self.server.running();
        let call = self
            .invoker
            .invoke(&self.target, Invocation::new("gate", "thread-1", id));
        let task = tokio::spawn(call);
        until("the tool server runs the call", || {
            self.server.running() == running + 1
        })
        .await;
        task
    }
}

/// Results posted without the call's secret, with a wrong one, with another call's, or again
/// after the call finished are refused with 403 and change nothing; the genuine result, posted
/// by the tool server to the URL it was given, completes the call.
#[tokio::test]
async fn forged_callbacks_are_refused_and_the_genuine_one_completes_the_call() {
    let rig = rig().await;
    let first = rig.start("call-1").await;
    let second = rig.start("call-2").await;
    let (url_1, url_2) = (rig.callback_of("call-1"), rig.callback_of("call-2"));
    let base = rig.invoker.callback_url();
    assert!(
        url_1.starts_with(&format!("{base}/")) && url_1.len() == base.len() + 33,
        "a call's URL is the callback URL plus its secret: {url_1}"
    );
    assert_ne!(url_1, url_2, "each call has its own secret");

    let forged = result("call-1", "forged");
    let wrong_secret = format!("{base}/{}", "0123456789abcdef".repeat(2));
    let attempts = [
        ("no secret", base.to_owned()),
        ("a wrong secret", wrong_secret),
        ("a malformed secret", format!("{base}/not-a-secret")),
        ("the secret of call-2", url_2.clone()),
    ];
    for (what, url) in &attempts {
        let (status, body) = post(url, &forged).await;
        assert_eq!(status, 403, "{what}: {body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert!(error["error"].is_string(), "{what}: {body}");
    }
    assert_eq!(
        rig.invoker.deliver("", forged.clone()),
        Delivered::Refused,
        "the in-process entry checks the secret too"
    );
    // Nothing completed or cancelled: both calls still wait and still run.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!first.is_finished() && !second.is_finished());
    assert_eq!(rig.invoker.pending(), 2);
    assert_eq!(rig.invoker.tracker().len(), 2);
    assert_eq!(rig.server.running(), 2);

    // The genuine result completes call-1 with the tool's own text.
    rig.gates.open("call-1");
    let result_1 = within(first).await.unwrap().unwrap();
    assert_eq!(result_1.text.as_deref(), Some("genuine result of call-1"));

    // A replay of a result for call-1, to its own URL, after it finished: refused.
    let (status, body) = post(&url_1, &result("call-1", "replayed")).await;
    assert_eq!(status, 403, "a replay: {body}");
    assert_eq!(rig.invoker.pending(), 1);
    assert!(!second.is_finished());

    rig.gates.open("call-2");
    let result_2 = within(second).await.unwrap().unwrap();
    assert_eq!(result_2.text.as_deref(), Some("genuine result of call-2"));
    assert_eq!(rig.invoker.pending(), 0);
    assert!(rig.invoker.tracker().is_empty());
}

/// Collects the `tool_result`s posted to it, by tool call id.
#[derive(Clone, Default)]
struct Results(Arc<Mutex<HashMap<String, Value>>>);

impl Results {
    /// Serves the collector; its callback URL.
    async fn start(&self) -> String {
        let router = axum::Router::new()
            .route(
                "/results",
                axum::routing::post(
                    |State(seen): State<Results>, axum::Json(result): axum::Json<Value>| async move {
                        let id = result["id"].as_str().unwrap_or_default().to_owned();
                        seen.0.lock().unwrap().insert(id, result);
                    },
                ),
            )
            .with_state(self.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/results", listener.local_addr().unwrap());
        serve(listener, router);
        url
    }

    fn has(&self, id: &str) -> bool {
        self.0.lock().unwrap().contains_key(id)
    }
}

/// `/invoke` of `gate` as `id` from `client`; (status, Retry-After, JSON body or null).
async fn invoke_from(
    client: &reqwest::Client,
    base: &str,
    callback_url: &str,
    id: &str,
) -> (u16, Option<String>, Value) {
    let response = client
        .post(format!("{base}/invoke"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "operation": "gate", "arguments": {}, "id": id, "group_id": "thread-1",
            "callback_url": callback_url,
        }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.json().await.unwrap_or(Value::Null);
    (status, retry, body)
}

fn client_from(address: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(address.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// With `max_running(2)`, a third call is refused with 503 naming the limit while the first two
/// run, and both still complete; once one has posted its result there is room again. With a
/// per-client share of 1, a client's second call is refused with 429 naming the share while
/// another address is still served.
#[tokio::test]
async fn running_calls_beyond_the_bound_are_refused_and_accepted_ones_complete() {
    let results = Results::default();
    let callback_url = results.start().await;
    let origin = callback_url.trim_end_matches("/results").to_owned();
    let gates = Gates::default();
    let server = gate_server(&origin, &gates, |b| b.max_running(2));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    serve(listener, server.router());
    let client = reqwest::Client::new();

    for id in ["a", "b"] {
        let (status, _, body) = invoke_from(&client, &base, &callback_url, id).await;
        assert_eq!(status, 200, "{id}: {body}");
    }
    let (status, retry, body) = invoke_from(&client, &base, &callback_url, "c").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert_eq!(body["limit"], "max_running");
    assert_eq!(body["max"], 2);
    assert!(
        body["error"].as_str().unwrap().contains("max_running"),
        "{body}"
    );
    assert_eq!(server.running(), 2, "the refused call never ran");

    gates.open("a");
    until("a's result arrives", || results.has("a")).await;
    until("a frees its place", || server.running() == 1).await;
    let (status, _, body) = invoke_from(&client, &base, &callback_url, "d").await;
    assert_eq!(status, 200, "{body}");
    gates.open("b");
    gates.open("d");
    until("b's and d's results arrive", || {
        results.has("b") && results.has("d")
    })
    .await;
    until("every place is free", || server.running() == 0).await;
    assert!(!results.has("c"), "the refused call posted nothing");

    // The per-client share: one call per address, ten in all.
    let shared = gate_server(&origin, &gates, |b| {
        b.max_running(10).max_running_per_client(1)
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    serve(listener, shared.router());
    let (one, two) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    assert_eq!(invoke_from(&one, &base, &callback_url, "x").await.0, 200);
    let (status, retry, body) = invoke_from(&one, &base, &callback_url, "y").await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert_eq!(body["limit"], "max_running_per_client");
    assert_eq!(body["max"], 1);
    let (status, _, body) = invoke_from(&two, &base, &callback_url, "z").await;
    assert_eq!(status, 200, "another address has its own share: {body}");
    gates.open("x");
    gates.open("z");
    until("x's and z's results arrive", || {
        results.has("x") && results.has("z")
    })
    .await;
    until("every place is free", || shared.running() == 0).await;
    assert!(!results.has("y"));
}

/// Ids, operation names, `call_id`, `user_id` and `callback_url` are bounded; each refusal is a
/// 400 whose message names the limit, and nothing runs.
#[tokio::test]
async fn client_chosen_text_is_bounded() {
    let gates = Gates::default();
    let server = gate_server("http://127.0.0.1:1", &gates, |b| b);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    serve(listener, server.router());
    let long = "a".repeat(rap::MAX_ID_LEN + 1);
    let long_url = format!(
        "http://127.0.0.1:1/{}",
        "p".repeat(rap::MAX_CALLBACK_URL_LEN)
    );
    let valid = json!({
        "operation": "gate", "arguments": {}, "id": "c", "group_id": "thread-1",
        "callback_url": "http://127.0.0.1:1/cb",
    });
    let cases = [
        ("id", json!(long), "256"),
        ("group_id", json!(long), "256"),
        (
            "operation",
            json!(long),
            "operation is longer than the limit of 256 bytes",
        ),
        (
            "call_id",
            json!(long),
            "call_id is longer than the limit of 256 bytes",
        ),
        (
            "user_id",
            json!(long),
            "user_id is longer than the limit of 256 bytes",
        ),
        (
            "callback_url",
            json!(long_url),
            "callback_url is longer than the limit of 2048 bytes",
        ),
    ];
    let client = reqwest::Client::new();
    for (field, value, message) in cases {
        let mut invocation = valid.clone();
        invocation[field] = value;
        let response = client
            .post(format!("{base}/invoke"))
            .bearer_auth(TOKEN)
            .json(&invocation)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{field}");
        let body: Value = response.json().await.unwrap();
        assert!(
            body["error"].as_str().unwrap().contains(message),
            "{field}: {body}"
        );
    }
    assert_eq!(server.running(), 0);
}

/// A writer that keeps what the log subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The log line holding `needle`; panics if none does.
    fn line_with(&self, needle: &str) -> String {
        let text = self.text();
        text.lines()
            .find(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no log line holds {needle:?}:\n{text}"))
            .to_owned()
    }
}

/// A `callback_url` with `%`, newlines and ANSI escapes, and ids with the same, reach the log
/// only escaped: one line each, no raw escape character. The subscriber's own ANSI
/// sanitization is off, so the escaping seen is the runtime's. (A current-thread runtime: the
/// servers' tasks run on this thread, under this thread's subscriber.)
#[tokio::test]
async fn client_text_reaches_the_log_escaped() {
    use tracing_subscriber::util::SubscriberInitExt;
    let log = Captured::default();
    let writer = log.clone();
    let _subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_ansi_sanitization(false)
        .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
        .with_writer(move || writer.clone())
        .finish()
        .set_default();

    let rig = rig().await;
    let base = rig.target.base_url.clone();
    let client = reqwest::Client::new();
    let origin = rig
        .invoker
        .callback_url()
        .trim_end_matches("/tool_result")
        .to_owned();
    // On the allowed origin, but with a line break and a colour escape that would forge a log
    // line; and off the allowed origin with `%` sequences.
    let injected = format!("{origin}/cb%0a%1b\r\n\u{1b}[31mFORGED-LINE level=ERROR\u{1b}[0m");
    let elsewhere = "http://evil.example/%s%n%0d%0a%x1b";
    for (id, callback_url) in [("c1", injected.as_str()), ("c2", elsewhere)] {
        let response = client
            .post(format!("{base}/invoke"))
            .bearer_auth(TOKEN)
            .json(&json!({
                "operation": "gate", "arguments": {}, "id": id, "group_id": "thread-1",
                "callback_url": callback_url,
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{callback_url:?}");
    }
    // An unknown operation named with a line break, and a forged callback whose ids carry one.
    let response = client
        .post(format!("{base}/invoke"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "operation": "no\nsuch\u{1b}[2Jtool", "arguments": {}, "id": "c3",
            "group_id": "thread-1", "callback_url": format!("{origin}/cb"),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let forged =
        json!({"type": "tool_result", "group_id": "g\n\u{1b}[2Jforged", "id": "x", "text": "x"});
    let url = format!("{}/{}", rig.invoker.callback_url(), "ab".repeat(16));
    assert_eq!(post(&url, &forged).await.0, 400);

    let text = log.text();
    assert!(
        !text.contains('\u{1b}'),
        "a raw escape reached the log:\n{text}"
    );
    assert!(
        !text.contains('\r'),
        "a raw carriage return reached the log:\n{text}"
    );
    assert!(
        !text
            .lines()
            .any(|line| line.starts_with("\u{1b}[31mFORGED") || line.starts_with("FORGED")),
        "a forged line:\n{text}"
    );
    let line = log.line_with("callback_url holds whitespace or control characters");
    assert!(
        line.contains(r"/cb%0a%1b\r\n\u{1b}[31mFORGED-LINE level=ERROR\u{1b}[0m"),
        "{line}"
    );
    let line = log.line_with("not on an allowed origin");
    assert!(
        line.contains(r#""http://evil.example/%s%n%0d%0a%x1b""#),
        "{line}"
    );
    let line = log.line_with("unknown operation");
    assert!(line.contains(r#""no\nsuch\u{1b}[2Jtool""#), "{line}");
    let line = log.line_with("invalid ids");
    assert!(line.contains(r#""g\n\u{1b}[2Jforged""#), "{line}");
}
