//! The contract of seed 001, "Tool Cancellation Notification" (RAP's `/cancel_tool_call`),
//! checked on a real `ToolServer`, the `rap_tool_server` example and the runtime's `Notifier`,
//! over real HTTP on 127.0.0.1.
//!
//! Every expectation here is quoted from seed 001 (`001_4043585ee4e77108.txt`) and changes
//! only when the seed does. Each assertion sits next to the sentence of the seed it checks.
//! Unix only, like the `rap` module.

#![cfg(unix)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::routing::post;
use cancelkit::Scope;
use cancelkit::rap::{
    DEFAULT_MAX_RUNNING, Notifier, NotifyHandle, ToolCall, ToolError, ToolOutput, ToolServer,
    ToolServerTarget,
};
use futures_util::future::join_all;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const TOKEN: &str = "seed-001-token";

/// The seed's sentences, quoted verbatim.
const MUST_RETURN_200: &str = "The tool server MUST return HTTP 200 to acknowledge receipt, regardless of whether it intends to act on the notification or whether the tool call was found.";
const EMPTY_200: &str = "The response SHOULD be an empty 200 OK.";
const MUST_VALIDATE: &str =
    "Tool servers MUST validate that /cancel_tool_call requests are authentic";
const NO_RETRIES: &str = "If the notification fails (network error, timeout, non-200 response), the runtime MUST NOT retry. The notification is a single-shot attempt.";
const OTHERS_STILL_NOTIFIED: &str = "If the runtime manages multiple tool servers, a failure to notify one server MUST NOT prevent notification of the others.";

/// Serves `router` on a fresh loopback port, with client addresses.
async fn serve(router: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await.unwrap() });
    addr
}

/// A tool server with the token and otherwise its defaults (rate limit included): `watch`
/// hands its call's scope to the test and runs until cancelled, `echo` completes at once and
/// posts its result to a callback server of the test's.
struct Tools {
    base: String,
    scopes: mpsc::Receiver<Scope>,
    results: Arc<Mutex<Vec<Value>>>,
    callback_url: String,
    http: reqwest::Client,
}

impl Tools {
    async fn start() -> Tools {
        Tools::with_rate_limit(50, 100).await
    }

    /// [`start`](Self::start), with `rate_limit(per_second, burst)` (the default: 50, 100).
    async fn with_rate_limit(per_second: u32, burst: u32) -> Tools {
        let results = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&results);
        let callbacks = axum::Router::new().route(
            "/results",
            post(move |axum::Json(result): axum::Json<Value>| {
                let seen = Arc::clone(&seen);
                async move { seen.lock().unwrap().push(result) }
            }),
        );
        let callback = serve(callbacks).await;
        // One scope per watched call; the largest burst is 500, so this bound is never reached.
        let (scopes_tx, scopes) = mpsc::channel(DEFAULT_MAX_RUNNING);
        let server = ToolServer::builder("seed-001")
            .bearer_token(TOKEN)
            .rate_limit(per_second, burst)
            .allow_callback_origin(&format!("http://{callback}"))
            .unwrap()
            .operation(
                "watch",
                "Runs until cancelled",
                json!({}),
                move |_: Value, _: ToolCall| {
                    let scopes_tx = scopes_tx.clone();
                    async move {
                        scopes_tx
                            .try_send(cancelkit::scope::current_scope().unwrap())
                            .expect("at most DEFAULT_MAX_RUNNING watched calls");
                        std::future::pending::<Result<ToolOutput, ToolError>>().await
                    }
                },
            )
            .operation(
                "echo",
                "Completes at once",
                json!({}),
                |_: Value, _: ToolCall| async { Ok(ToolOutput::from("done")) },
            )
            .build();
        Tools {
            base: format!("http://{}", serve(server.router()).await),
            scopes,
            results,
            callback_url: format!("http://{callback}/results"),
            http: reqwest::Client::new(),
        }
    }

    async fn invoke(&self, operation: &str, id: &str) -> u16 {
        let body = json!({
            "operation": operation, "arguments": {}, "id": id, "group_id": "thread_1",
            "callback_url": self.callback_url,
        });
        let request = self.http.post(format!("{}/invoke", self.base));
        let response = request.bearer_auth(TOKEN).json(&body).send().await.unwrap();
        response.status().as_u16()
    }

    /// Invokes `watch` as `id`; the call's scope.
    async fn watch(&mut self, id: &str) -> Scope {
        assert_eq!(self.invoke("watch", id).await, 200);
        self.scopes.recv().await.unwrap()
    }

    /// A `/cancel_tool_call` for `id` as the seed's example sends it: status and body.
    async fn cancel(&self, token: Option<&str>, id: &str) -> (u16, Vec<u8>) {
        cancel_at(&self.http, &self.base, token, id).await
    }
}

/// A `/cancel_tool_call` for `id` to the server at `base`: status and body.
async fn cancel_at(
    http: &reqwest::Client,
    base: &str,
    token: Option<&str>,
    id: &str,
) -> (u16, Vec<u8>) {
    let mut request = http
        .post(format!("{base}/cancel_tool_call"))
        .header("content-type", "application/json")
        .body(json!({"thread_id": "thread_1", "tool_call_id": id}).to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

/// Whether `scope` is cancelled within 2 s.
async fn cancelled(scope: &Scope) -> bool {
    for _ in 0..200 {
        if scope.token().is_cancelled() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// A 200 with an empty body.
fn assert_empty_200(answer: (u16, Vec<u8>), what: &str) {
    assert_eq!(answer.0, 200, "{what}: {MUST_RETURN_200}");
    assert!(
        answer.1.is_empty(),
        "{what}: {EMPTY_200} Got {:?}",
        answer.1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_call_id_is_answered_an_empty_200() {
    let tools = Tools::start().await;
    // "tool servers MUST handle notifications for unknown tool_call_id values gracefully (for
    // example, by logging the event and returning 200 OK)."
    assert_empty_200(
        tools.cancel(Some(TOKEN), "call_unknown").await,
        "unknown id",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_already_completed_is_answered_an_empty_200() {
    let tools = Tools::start().await;
    assert_eq!(tools.invoke("echo", "call_done").await, 200);
    for _ in 0..200 {
        if !tools.results.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(tools.results.lock().unwrap()[0]["id"], "call_done");
    // "The notification MAY arrive after the tool has already completed and sent its result.
    // Tool servers MUST handle this gracefully."
    assert_empty_200(
        tools.cancel(Some(TOKEN), "call_done").await,
        "completed call",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_cancel_is_answered_an_empty_200_like_the_first() {
    let mut tools = Tools::start().await;
    let scope = tools.watch("call_twice").await;
    assert_empty_200(
        tools.cancel(Some(TOKEN), "call_twice").await,
        "first cancel",
    );
    // "Tool servers MAY use this signal to terminate in-flight operations"
    assert!(cancelled(&scope).await, "the call was not stopped");
    // "Tool servers SHOULD handle duplicate notifications for the same tool_call_id
    // gracefully. The runtime does not guarantee exactly-once delivery."
    assert_empty_200(tools.cancel(Some(TOKEN), "call_twice").await, "duplicate");
}

/// Cancels every call of `ids` (of `thread_1`) at once through `notifier`, as a runtime does
/// when a user interrupts an agent with many tool calls in flight; every server's outcome.
async fn cancel_all(
    notifier: &Notifier,
    ids: impl Iterator<Item = String>,
) -> Vec<Result<u16, String>> {
    let handles: Vec<_> = ids.map(|id| notifier.notify("thread_1", &id)).collect();
    let outcomes = join_all(handles.into_iter().map(NotifyHandle::outcomes)).await;
    outcomes.into_iter().flatten().map(|d| d.outcome).collect()
}

/// Outcomes counted: "300 x 200", or "290 x 200, 10 x 429", "1 x error".
fn summary(outcomes: &[Result<u16, String>]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for outcome in outcomes {
        let key = outcome.as_ref().map_or("error".to_owned(), u16::to_string);
        *counts.entry(key).or_insert(0) += 1;
    }
    let parts: Vec<_> = counts.iter().map(|(k, n)| format!("{n} x {k}")).collect();
    parts.join(", ")
}

/// Invokes `n` calls, then cancels them all at once through the runtime's `Notifier`.
async fn burst(n: usize) {
    // n client and n server sockets, and under `cargo test` the other burst's beside them
    let limit = cancelkit_tests::raise_fd_limit();
    assert!(
        limit >= 4 * n as u64,
        "{limit} open files are too few for a burst of {n}"
    );
    let mut tools = Tools::start().await;
    let invocations = (0..n).map(|i| {
        let tools = &tools;
        async move { tools.invoke("watch", &format!("call_{i}")).await }
    });
    assert!(join_all(invocations).await.iter().all(|&s| s == 200));
    let mut scopes = Vec::with_capacity(n);
    for _ in 0..n {
        scopes.push(tools.scopes.recv().await.unwrap());
    }
    let target = ToolServerTarget::new(tools.base.clone()).with_bearer_token(TOKEN);
    let notifier = Notifier::new([target], Duration::from_secs(10));
    let outcomes = cancel_all(&notifier, (0..n).map(|i| format!("call_{i}"))).await;
    let ok = outcomes.iter().filter(|o| **o == Ok(200)).count();
    eprintln!("{n} authenticated cancels at once: {}", summary(&outcomes));
    assert_eq!(ok, n, "{MUST_RETURN_200} Got {}", summary(&outcomes));
    for scope in &scopes {
        assert!(
            cancelled(scope).await,
            "a cancel of the burst was not applied"
        );
    }
}

/// A user interrupting an agent with many tool calls in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_300_authenticated_cancels_at_once_is_all_200() {
    burst(300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_500_authenticated_cancels_at_once_is_all_200() {
    burst(500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_cancels_are_refused_and_not_applied() {
    let mut tools = Tools::start().await;
    let scope = tools.watch("call_guarded").await;
    // "An unauthenticated /cancel_tool_call endpoint would allow an attacker to cancel
    // in-flight operations for arbitrary tool calls" (the seed names no status for a refusal).
    for token in [None, Some("not-the-token")] {
        let (status, _) = tools.cancel(token, "call_guarded").await;
        assert!(
            (400..500).contains(&status),
            "{token:?}: {MUST_VALIDATE}: {status}"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!scope.token().is_cancelled(), "{MUST_VALIDATE}");
    assert_empty_200(tools.cancel(Some(TOKEN), "call_guarded").await, "authentic");
    assert!(cancelled(&scope).await);
}

/// Wrong tokens from 127.0.0.1 as fast as two connections go, until `stop` (at most 20,000).
fn guess(tools: &Tools, stop: &Arc<AtomicBool>) -> tokio::task::JoinSet<Vec<u16>> {
    let mut guessers = tokio::task::JoinSet::new();
    for _ in 0..2 {
        let (http, base, stop) = (tools.http.clone(), tools.base.clone(), Arc::clone(stop));
        guessers.spawn(async move {
            let mut statuses = Vec::new();
            while !stop.load(Ordering::SeqCst) && statuses.len() < 20_000 {
                statuses.push(cancel_at(&http, &base, Some("guess"), "call_x").await.0);
            }
            statuses
        });
    }
    guessers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_is_rate_limited_and_the_runtimes_cancels_still_apply() {
    // Refilling one request a second, so that the guessers keep the budget spent.
    let mut tools = Tools::with_rate_limit(1, 100).await;
    let mut scopes = Vec::new();
    for i in 0..50 {
        scopes.push(tools.watch(&format!("call_{i}")).await);
    }
    // "Tool servers SHOULD rate-limit the /cancel_tool_call endpoint to prevent abuse."
    let stop = Arc::new(AtomicBool::new(false));
    let mut guessers = guess(&tools, &stop);
    for _ in 0..600 {
        if tools.cancel(Some("guess"), "call_x").await.0 == 429 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The runtime on the guessers' own address cancels every call at once while they go on:
    // "the runtime MUST NOT retry", so a cancel the server refused would be lost. Whatever
    // the answers, every cancel is applied.
    let target = ToolServerTarget::new(tools.base.clone()).with_bearer_token(TOKEN);
    let notifier = Notifier::new([target], Duration::from_secs(10));
    let outcomes = cancel_all(&notifier, (0..50).map(|i| format!("call_{i}"))).await;
    stop.store(true, Ordering::SeqCst);
    let mut guessed = Vec::new();
    while let Some(statuses) = guessers.join_next().await {
        guessed.extend(statuses.unwrap().into_iter().map(Ok));
    }
    let (guessed, answered) = (summary(&guessed), summary(&outcomes));
    eprintln!("wrong tokens: {guessed}; the runtime's 50 cancels meanwhile: {answered}");
    assert!(guessed.contains(" x 429"), "not rate-limited: {guessed}");
    assert!(
        answered.contains(" x 429"),
        "the attack missed the runtime: {answered}"
    );
    for scope in &scopes {
        assert!(cancelled(scope).await, "{NO_RETRIES} {answered}");
    }
}

/// One request a test's own server received (method, URI, headers, body), and when.
type Received = (Method, Uri, HeaderMap, Vec<u8>, Instant);

/// What one of the test's own servers received.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Received>>>);

/// A server that records every request and answers each with `status`, or never (`None`).
async fn recording_server(status: Option<u16>) -> (String, Seen) {
    let seen = Seen::default();
    let router = axum::Router::new()
        .fallback(
            move |State(seen): State<Seen>,
                  method: Method,
                  uri: Uri,
                  headers: HeaderMap,
                  body: axum::body::Bytes| async move {
                let received = (method, uri, headers, body.to_vec(), Instant::now());
                seen.0.lock().unwrap().push(received);
                match status {
                    Some(status) => axum::http::StatusCode::from_u16(status).unwrap(),
                    None => std::future::pending().await,
                }
            },
        )
        .with_state(seen.clone());
    (format!("http://{}", serve(router).await), seen)
}

/// A server that accepts connections and closes each at once; counts them.
async fn closing_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    (format!("http://{addr}"), connections)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_notifies_every_server_once_concurrently_and_never_retries() {
    let mut tools = Tools::start().await;
    let scope = tools.watch("call_x").await;
    let (failing, seen_500) = recording_server(Some(500)).await;
    let (busy, seen_429) = recording_server(Some(429)).await;
    let (hanging, seen_hanging) = recording_server(None).await;
    let (closing, connections) = closing_server().await;
    let refusing = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let timeout = Duration::from_millis(800);
    let targets = [
        ToolServerTarget::new(failing),
        ToolServerTarget::new(busy),
        ToolServerTarget::new(hanging),
        ToolServerTarget::new(closing),
        ToolServerTarget::new(refusing),
        ToolServerTarget::new(tools.base.clone()).with_bearer_token(TOKEN),
    ];
    let notifier = Notifier::new(targets, timeout);
    let started = Instant::now();
    let handle = notifier.notify("thread_1", "call_x");
    // "The runtime SHOULD send all notifications concurrently and MUST NOT block the
    // cancellation operation on their completion."
    assert!(started.elapsed() < timeout, "notify waited for the servers");
    let outcomes = handle.outcomes().await;
    assert_eq!(outcomes.len(), 6);
    // "a failure to notify one server MUST NOT prevent notification of the others."
    assert!(cancelled(&scope).await, "{OTHERS_STILL_NOTIFIED}");
    let answered: Vec<_> = outcomes
        .iter()
        .filter_map(|d| d.outcome.clone().ok())
        .collect();
    assert_eq!(answered.len(), 3, "{outcomes:?}");
    for status in [500, 429, 200] {
        assert!(answered.contains(&status), "{outcomes:?}");
    }

    // Long past every timeout: still one request each.
    tokio::time::sleep(timeout + Duration::from_millis(700)).await;
    for (name, seen) in [
        ("500", &seen_500),
        ("429", &seen_429),
        ("timeout", &seen_hanging),
    ] {
        let seen = seen.0.lock().unwrap();
        assert_eq!(seen.len(), 1, "the server answering {name}: {NO_RETRIES}");
        let (method, uri, headers, body, at) = &seen[0];
        // "The runtime MUST send the tool cancellation notification as an HTTP POST with
        // Content-Type: application/json to the tool server's /cancel_tool_call endpoint."
        assert_eq!((method, uri.path()), (&Method::POST, "/cancel_tool_call"));
        assert_eq!(headers["content-type"], "application/json");
        let body: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(
            body,
            json!({"thread_id": "thread_1", "tool_call_id": "call_x"})
        );
        // All sent together: none waited for the one that never answers.
        assert!(
            *at - started < timeout,
            "{name} was notified after {:?}",
            *at - started
        );
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "closed connection: {NO_RETRIES}"
    );
}

/// The `rap_tool_server` example binary, where the issue measured the burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_tool_server_answers_a_burst_of_authenticated_cancels_all_200() {
    let binary = cancelkit_tests::example_with_features("rap_tool_server", &["rap"]);
    let mut child = tokio::process::Command::new(binary)
        .args(["0", TOKEN, "http://127.0.0.1:9"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next_line().await.unwrap().unwrap_or_default();
    let base = first
        .strip_prefix("listening on ")
        .expect(&first)
        .to_owned();
    let target = ToolServerTarget::new(base).with_bearer_token(TOKEN);
    let notifier = Notifier::new([target], Duration::from_secs(10));
    for n in [300, 500] {
        let outcomes = cancel_all(&notifier, (0..n).map(|i| format!("call_{n}_{i}"))).await;
        let ok = outcomes.iter().filter(|o| **o == Ok(200)).count();
        let got = summary(&outcomes);
        eprintln!("rap_tool_server: {n} authenticated cancels at once: {got}");
        assert_eq!(ok, n, "{MUST_RETURN_200} Got {got}");
    }
    child.kill().await.unwrap();
}
