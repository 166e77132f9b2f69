//! HTTP helpers for the tests of the cancellation API, the ContextForge defects and hostile
//! input: calls over `/rpc` and `/mcp`, the API's two endpoints, raw requests, and bounded
//! async waits (so spawned calls keep running while a test waits).

use std::future::Future;
use std::time::{Duration, Instant};

use cancelkit::wire::sse;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Gateway, client, token, tools_call};

/// How long a test waits for anything that should happen promptly.
pub const WAIT: Duration = Duration::from_secs(10);

/// A response as the tests read it.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The `Cancelkit-Run-Id` header, if any.
    pub run_id: Option<String>,
    /// The `Mcp-Session-Id` header, if any.
    pub session: Option<String>,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body as text.
    pub text: String,
    /// The body as JSON (`Null` when it is empty or not JSON).
    pub body: Value,
}

impl Reply {
    /// Reads a whole response.
    pub async fn read(response: reqwest::Response) -> Reply {
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let run_id = header("cancelkit-run-id");
        let session = header("mcp-session-id");
        let content_type = header("content-type");
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            run_id,
            session,
            content_type,
            text,
            body,
        }
    }

    /// The JSON-RPC messages of an SSE body (read with the workspace's one event-stream
    /// parser), or the body itself when it is plain JSON.
    pub fn messages(&self) -> Vec<Value> {
        if !self.body.is_null() {
            return vec![self.body.clone()];
        }
        let mut events = Vec::new();
        let mut parser = sse::Parser::new(sse::Limits::default());
        parser
            .feed(self.text.as_bytes(), &mut events)
            .expect("an event stream within the limits");
        events
            .iter()
            .filter_map(|e| serde_json::from_str(&e.data).ok())
            .collect()
    }

    /// The JSON-RPC response among [`messages`](Self::messages) (the one with an `id`).
    pub fn response(&self) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m.get("id").is_some() && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no JSON-RPC response in {} {}", self.status, self.text))
    }

    /// The `detail` of a refusal.
    pub fn detail(&self) -> &str {
        self.body["detail"].as_str().unwrap_or("")
    }
}

/// A `demo-sleep` call.
pub fn sleep_call(id: Value, seconds: f64) -> Value {
    tools_call(id, "demo-sleep", json!({"seconds": seconds}))
}

/// A `demo-echo` call.
pub fn echo_call(id: Value, text: &str) -> Value {
    tools_call(id, "demo-echo", json!({"text": text}))
}

/// POSTs one JSON-RPC message to `/rpc` as `user`.
pub async fn rpc(gateway: &Gateway, user: &str, message: &Value) -> Reply {
    rpc_at(gateway.url("/rpc"), user.to_owned(), message.clone()).await
}

async fn rpc_at(url: String, user: String, message: Value) -> Reply {
    let response = client()
        .post(url)
        .bearer_auth(token(&user))
        .json(&message)
        .send()
        .await
        .expect("POST /rpc");
    Reply::read(response).await
}

/// POSTs to `/rpc` in a task of its own (the call runs while the test goes on).
pub fn spawn_rpc(gateway: &Gateway, user: &str, message: Value) -> tokio::task::JoinHandle<Reply> {
    tokio::spawn(rpc_at(gateway.url("/rpc"), user.to_owned(), message))
}

/// `POST {prefix}/cancellation/cancel` with `{"requestId", "reason"}` as `user`.
pub async fn cancel(
    gateway: &Gateway,
    user: &str,
    request_id: &str,
    reason: Option<&str>,
) -> Reply {
    cancel_at(gateway, "", user, request_id, reason).await
}

/// [`cancel`] under a path prefix (`""` or `"/v1"`).
pub async fn cancel_at(
    gateway: &Gateway,
    prefix: &str,
    user: &str,
    request_id: &str,
    reason: Option<&str>,
) -> Reply {
    let response = client()
        .post(gateway.url(&format!("{prefix}/cancellation/cancel")))
        .bearer_auth(token(user))
        .json(&json!({"requestId": request_id, "reason": reason}))
        .send()
        .await
        .expect("POST /cancellation/cancel");
    Reply::read(response).await
}

/// `POST /cancellation/cancel` with `body` as it is, as `user`.
pub async fn cancel_with(gateway: &Gateway, user: &str, body: Value) -> Reply {
    cancel_with_at(gateway, "", user, &body).await
}

/// [`cancel_with`] under a path prefix (`""` or `"/v1"`).
pub async fn cancel_with_at(gateway: &Gateway, prefix: &str, user: &str, body: &Value) -> Reply {
    let response = client()
        .post(gateway.url(&format!("{prefix}/cancellation/cancel")))
        .bearer_auth(token(user))
        .json(&body)
        .send()
        .await
        .expect("POST /cancellation/cancel");
    Reply::read(response).await
}

/// `GET {prefix}/cancellation/status/{id}` as `user` (`id` goes into the path as it is).
pub async fn status_at(gateway: &Gateway, prefix: &str, user: &str, id: &str) -> Reply {
    let response = client()
        .get(gateway.url(&format!("{prefix}/cancellation/status/{id}")))
        .bearer_auth(token(user))
        .send()
        .await
        .expect("GET /cancellation/status");
    Reply::read(response).await
}

/// `GET /cancellation/status/{id}` as `user`.
pub async fn status(gateway: &Gateway, user: &str, id: &str) -> Reply {
    status_at(gateway, "", user, id).await
}

/// Polls `check` every 10 ms until it gives a value; panics naming `what` after `within`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (without blocking the runtime) until the gateway's stderr contains `needle` at least
/// `count` times.
pub async fn until_stderr_count(gateway: &Gateway, needle: &str, count: usize) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = gateway.stderr();
        if text.matches(needle).count() >= count {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "`{needle}` not {count} times on the gateway's stderr within {WAIT:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (without blocking the runtime) until the gateway's stderr contains `needle`.
pub async fn until_stderr(gateway: &Gateway, needle: &str) -> String {
    until_stderr_count(gateway, needle, 1).await
}

/// The demo's stderr line that says a sleep started.
pub const SLEEP_STARTED: &str = "demo-upstream: started tools/call sleep (request id ";
/// The demo's stderr line that says a sleep was cancelled.
pub const SLEEP_CANCELLED: &str = "demo-upstream: cancelled tools/call sleep (request id ";

/// The upstream request ids of the sleeps the demo started for `label` (the duration as the
/// demo prints it, e.g. `"30s"` or `"1.5s"`).
pub fn started_upstream_ids(stderr: &str, label: &str) -> Vec<String> {
    let suffix = format!(") for {label}");
    stderr
        .lines()
        .filter_map(|l| l.split_once(SLEEP_STARTED).map(|(_, rest)| rest))
        .filter_map(|rest| rest.strip_suffix(&suffix))
        .map(str::to_owned)
        .collect()
}

/// The upstream request ids of the sleeps the demo says were cancelled.
pub fn cancelled_upstream_ids(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.split_once(SLEEP_CANCELLED).map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once(')').map(|(id, _)| id.to_owned()))
        .collect()
}

/// Waits until `user` sees exactly one run named `request_id` and gives its run id (the
/// owner learns a running call's run id this way before the call answers).
pub async fn run_id_of(gateway: &Gateway, user: &str, request_id: &str) -> String {
    eventually(
        WAIT,
        &format!("{user} sees a run named {request_id}"),
        || async {
            let reply = status(gateway, user, request_id).await;
            (reply.status == 200)
                .then(|| reply.body["run_id"].as_str().map(str::to_owned))
                .flatten()
        },
    )
    .await
}

/// Sends raw bytes to the gateway and reads until it closes or `within` passes; returns what
/// came back (for requests reqwest will not send).
pub async fn raw(gateway: &Gateway, request: &[u8], within: Duration) -> String {
    let address = gateway.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    stream.write_all(request).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(within, stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The HTTP status of a raw response (0 if none).
pub fn raw_status(response: &str) -> u16 {
    response
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `initialize` over `/mcp` (2025-11-25) as `user`; gives the session id.
pub async fn mcp_session(gateway: &Gateway, user: &str) -> String {
    let reply = mcp_post(
        gateway,
        user,
        None,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "cancelkit-tests", "version": "0"}}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["result"]["protocolVersion"], "2025-11-25");
    let session = reply.session.expect("Mcp-Session-Id on initialize");
    let initialized = mcp_post(
        gateway,
        user,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status, 202, "{}", initialized.text);
    session
}

/// POSTs one message to `/mcp` as `user`, in `session` if given.
pub async fn mcp_post(
    gateway: &Gateway,
    user: &str,
    session: Option<&str>,
    message: &Value,
) -> Reply {
    mcp_post_at(
        gateway.url("/mcp"),
        user.to_owned(),
        session.map(str::to_owned),
        message.clone(),
    )
    .await
}

async fn mcp_post_at(url: String, user: String, session: Option<String>, message: Value) -> Reply {
    let mut request = client()
        .post(url)
        .bearer_auth(token(&user))
        .header("accept", "application/json, text/event-stream")
        .json(&message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (name, value) in routing_headers(&message) {
        request = request.header(name, value);
    }
    Reply::read(request.send().await.expect("POST /mcp")).await
}

/// The headers a 2026-07-28 client sends with a stamped request: `MCP-Protocol-Version` (the
/// version of the stamp), `Mcp-Method` and `Mcp-Name`. None for a request without a stamp.
pub fn routing_headers(
    message: &Value,
) -> Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)> {
    let params = &message["params"];
    let Some(version) = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str() else {
        return Vec::new();
    };
    let method = message["method"].as_str().unwrap_or_default();
    let mut headers = cancelkit::wire::headers::routing(method, params);
    if let Ok(version) = version.parse() {
        headers.push((cancelkit::wire::headers::PROTOCOL_VERSION, version));
    }
    headers
}

/// POSTs to `/mcp` in a task of its own.
pub fn spawn_mcp(
    gateway: &Gateway,
    user: &str,
    session: Option<&str>,
    message: Value,
) -> tokio::task::JoinHandle<Reply> {
    tokio::spawn(mcp_post_at(
        gateway.url("/mcp"),
        user.to_owned(),
        session.map(str::to_owned),
        message,
    ))
}

/// Stamps a request for MCP 2026-07-28 (`params._meta`).
pub fn stamped(mut message: Value, version: &str) -> Value {
    message["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    message
}

/// Waits for a spawned call's reply.
pub async fn join(handle: tokio::task::JoinHandle<Reply>) -> Reply {
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("the call answered in time")
        .expect("the call's task")
}

/// Asserts `reply` is the -32800 answer to a cancelled call.
pub fn assert_cancelled(reply: &Reply, id: &Value, run_id: &str, reason: Option<&str>) {
    let response = reply.response();
    assert_eq!(response["id"], *id, "{response}");
    assert_eq!(
        response["error"],
        json!({"code": -32800, "message": "Request cancelled",
               "data": {"requestId": id, "runId": run_id, "reason": reason, "partial": false}}),
        "{response}"
    );
}

/// The value of the Prometheus sample `name{labels}` (labels as written, e.g.
/// `source="api"`; empty for none), 0 when absent.
pub fn metric(text: &str, name: &str, labels: &str) -> f64 {
    let wanted = if labels.is_empty() {
        name.to_owned()
    } else {
        format!("{name}{{{labels}}}")
    };
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(series, _)| *series == wanted)
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0.0)
}

/// Runs the gateway binary with `options` until it exits (at most `within`; then it is killed
/// and the status is `None`); gives its exit status, stdout and stderr.
pub fn run_to_exit(
    options: super::Options<'_>,
    within: Duration,
) -> (Option<std::process::ExitStatus>, String, String) {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, &options.config).expect("write config");
    let mut command = Command::new(env!("CARGO_BIN_EXE_cancelkit-gateway"));
    command
        .arg("--config")
        .arg(&path)
        .env_remove("REDIS_URL")
        .env_remove("MCPGATEWAY_TOOL_CANCELLATION_ENABLED")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if options.no_secret {
        command.env_remove("JWT_SECRET_KEY");
    } else {
        command.env("JWT_SECRET_KEY", super::SECRET);
    }
    for (key, value) in &options.env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("start the gateway binary");
    let deadline = Instant::now() + within;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().expect("the gateway's output");
    (
        status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

impl Gateway {
    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}
