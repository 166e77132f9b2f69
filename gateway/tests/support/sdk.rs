//! The official MCP SDKs as clients of the gateway's `/mcp`: the upstream under test, a driver
//! for the client scripts of `tests/python` and `tests/node` (JSON lines out, a go-ahead line
//! in, a hard time limit), and the admin's view of a run (status, metrics).
//!
//! The scenarios of `sdk_python.rs` and `sdk_typescript.rs` take an [`UpstreamUnderTest`]: the
//! demo upstream on stdio ([`StdioDemo`]), or rmcp's Streamable HTTP server in the test process
//! with the demo's tools ([`HttpDemo`]), which the gateway speaks to at 2026-07-28 or, when it
//! is limited to 2025-11-25, at 2025-11-25.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::rmcp_server::{self, Ended, Server};
use super::{Gateway, Options, client, token};

/// The line the demo upstream writes on stderr when a `sleep` is cancelled (an upstream under
/// test writes the same, see [`UpstreamUnderTest`]).
pub const STOP_LINE: &str = "demo-upstream: cancelled tools/call sleep (request id ";

/// The upstream behind the gateway in an SDK test. It must be named `demo` and serve the demo
/// upstream's tools (so the gateway exposes `demo-echo` and `demo-sleep`, `sleep` reporting
/// progress every 100 ms), and log [`STOP_LINE`] when a `sleep` is cancelled.
pub trait UpstreamUnderTest {
    /// For failure messages: which kind of upstream this is.
    fn kind(&self) -> &'static str;
    /// The `[[upstream]]` tables of the gateway's config.
    fn config(&self) -> String;
    /// Everything the upstream logged so far.
    fn log(&self, gateway: &Gateway) -> String;

    /// How many `sleep`s the upstream reported stopped by a cancel.
    fn stops(&self, gateway: &Gateway) -> usize {
        self.log(gateway).matches(STOP_LINE).count()
    }

    /// Whether the gateway reaches the upstream as it starts (and logs "upstream ready"), rather
    /// than at its first use.
    fn connects_at_start(&self) -> bool {
        true
    }

    /// How many `sleep`s are running upstream now, when the upstream can tell.
    fn sleeps_running(&self) -> Option<usize> {
        None
    }

    /// Once the client is done: asserts that every stop reached the upstream the way the
    /// gateway's connector should cancel (nothing to check where the upstream cannot tell).
    fn check_stops(&self, _gateway: &Gateway) {}
}

/// The demo upstream on stdio (the gateway's own `demo-upstream` subcommand); its stderr is
/// the gateway's.
pub struct StdioDemo;

impl UpstreamUnderTest for StdioDemo {
    fn kind(&self) -> &'static str {
        "stdio demo upstream"
    }

    fn config(&self) -> String {
        "[[upstream]]\nname = \"demo\"\ncommand = \"@self\"\nargs = [\"demo-upstream\"]\n".into()
    }

    fn log(&self, gateway: &Gateway) -> String {
        gateway.stderr()
    }
}

/// The demo upstream over Streamable HTTP: rmcp's server in the test process on 127.0.0.1
/// ([`Server::demo`]: `echo`, and `sleep` with the demo's progress and answer), its tap
/// recording what the gateway sent it. Its log is rendered from what the tools did, a cancelled
/// `sleep` as [`STOP_LINE`] with rmcp's request id, as the demo upstream logs it.
pub struct HttpDemo {
    server: Server,
    era: Era,
}

impl HttpDemo {
    /// Starts the server. At [`Era::V2026`] it speaks every revision rmcp knows, so the
    /// gateway's connector speaks 2026-07-28 to it (no session; a call is cancelled by closing
    /// its response stream); at [`Era::V2025`] it speaks only up to 2025-11-25, so the connector
    /// falls back to `initialize` (a session; a call is cancelled by POSTing
    /// `notifications/cancelled` with the connector's own id for it).
    pub async fn start(era: Era) -> HttpDemo {
        let server = Server::demo(match era {
            Era::V2026 => rmcp_server::Era::Both,
            Era::V2025 => rmcp_server::Era::Legacy,
        })
        .await;
        HttpDemo { server, era }
    }

    /// The upstream's `sleep` entries that ended cancelled, in order.
    fn stopped(&self) -> Vec<Value> {
        self.server
            .log
            .all()
            .into_iter()
            .filter(|e| e["event"] == "cancelled")
            .collect()
    }
}

impl UpstreamUnderTest for HttpDemo {
    fn connects_at_start(&self) -> bool {
        false
    }

    fn kind(&self) -> &'static str {
        match self.era {
            Era::V2026 => "Streamable HTTP demo upstream (rmcp at 2026-07-28)",
            Era::V2025 => "Streamable HTTP demo upstream (rmcp at 2025-11-25)",
        }
    }

    fn config(&self) -> String {
        format!(
            "[[upstream]]\nname = \"demo\"\nurl = \"{}\"\n",
            self.server.url
        )
    }

    fn log(&self, _gateway: &Gateway) -> String {
        let mut log = String::new();
        for entry in self.server.log.all() {
            let id = selector(&entry["id"]);
            let line = match entry["event"].as_str() {
                Some("started") => {
                    format!("demo-upstream: started tools/call sleep (request id {id})")
                }
                Some("finished") => {
                    format!("demo-upstream: finished tools/call sleep (request id {id})")
                }
                Some("cancelled") => format!(
                    "{STOP_LINE}{id}) after {}ms: {}",
                    entry["after_ms"],
                    if entry["how"] == "token" {
                        "its cancellation token fired"
                    } else {
                        "its future was dropped"
                    }
                ),
                _ => format!("demo-upstream: {entry}"),
            };
            log.push_str(&line);
            log.push('\n');
        }
        log
    }

    fn sleeps_running(&self) -> Option<usize> {
        let log = self.server.log.all();
        let count = |event: &str| log.iter().filter(|e| e["event"] == event).count();
        Some(count("started") - count("finished") - count("cancelled"))
    }

    fn check_stops(&self, gateway: &Gateway) {
        let tap = &self.server.tap;
        let posts = tap.posts();
        let stopped = self.stopped();
        let context = || {
            let posts: Vec<String> = posts
                .iter()
                .map(|p| format!("{} session={:?} ended={:?}", p.body, p.session, p.ended))
                .collect();
            format!(
                "the {}'s log:\n{}\nwhat it received:\n{}",
                self.kind(),
                self.log(gateway),
                posts.join("\n")
            )
        };
        // The client abort and the API cancel, at least (then the burst's, if any ran).
        assert!(stopped.len() >= 2, "{}", context());
        let notices: Vec<_> = posts
            .iter()
            .filter(|p| p.body["method"] == "notifications/cancelled")
            .collect();
        for stop in &stopped {
            let id = &stop["id"];
            let call = tap
                .request(id)
                .unwrap_or_else(|| panic!("no POST of request {id}\n{}", context()));
            assert_eq!(call.body["method"], "tools/call", "{}", context());
            match self.era {
                Era::V2025 => {
                    // notifications/cancelled with the id the connector gave the call upstream,
                    // on the call's session (twice when the call was cancelled before rmcp
                    // answered its POST: the first may have overtaken it); rmcp stopped the
                    // tool on it.
                    assert!(call.session.is_some(), "{}", context());
                    let named: Vec<_> = notices
                        .iter()
                        .filter(|n| n.body["params"]["requestId"] == *id)
                        .collect();
                    assert!(
                        (1..=2).contains(&named.len()),
                        "cancels for {id}\n{}",
                        context()
                    );
                    for notice in named {
                        assert_eq!(notice.session, call.session, "{}", context());
                    }
                    assert_eq!(stop["how"], "token", "{}", context());
                }
                Era::V2026 => {
                    // No session; the connector closed the call's response stream.
                    assert_eq!(call.session, None, "{}", context());
                    assert_eq!(
                        call.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                        "2026-07-28",
                        "{}",
                        context()
                    );
                    assert_eq!(call.ended, Some(Ended::Closed), "{}", context());
                }
            }
        }
        match self.era {
            Era::V2025 => {
                assert_eq!(tap.count("initialize"), 1, "{}", context());
                // Each names its cause, the gist only (not the caller's own words).
                let reason = |stop: &Value| {
                    notices
                        .iter()
                        .find(|n| n.body["params"]["requestId"] == stop["id"])
                        .map(|n| n.body["params"]["reason"].clone())
                        .expect("checked above")
                };
                assert_eq!(
                    reason(&stopped[0]),
                    "cancelled by the peer",
                    "{}",
                    context()
                );
                assert_eq!(
                    reason(&stopped[1]),
                    "cancelled through the API",
                    "{}",
                    context()
                );
            }
            Era::V2026 => {
                // At 2026-07-28 the closed stream is the cancel: nothing is POSTed for it.
                assert_eq!(notices.len(), 0, "{}", context());
                assert_eq!(tap.count("initialize"), 0, "{}", context());
            }
        }
    }
}

/// Starts a gateway (users admin, alice, bob as in [`super::config`]) in front of `upstream`.
pub fn start_gateway(upstream: &dyn UpstreamUnderTest) -> Gateway {
    let config = format!(
        r#"
listen = "127.0.0.1:0"

[auth.permissions]
admin = ["admin.system_config", "tools.execute"]
alice = ["tools.execute"]
bob = ["tools.execute"]

{}"#,
        upstream.config()
    );
    Gateway::with(Options {
        config,
        lazy_upstreams: !upstream.connects_at_start(),
        ..Options::default()
    })
}

/// Waits until `upstream` reported `count` stops; panics with its log after `within`.
pub async fn wait_for_stops(
    upstream: &dyn UpstreamUnderTest,
    gateway: &Gateway,
    count: usize,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    loop {
        let stops = upstream.stops(gateway);
        if stops >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the {} reported {stops} stopped sleeps, not {count}, within {within:?}:\n{}",
            upstream.kind(),
            plain(&upstream.log(gateway))
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `text` without ANSI escape sequences (the gateway's log is coloured).
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte (a letter).
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `GET /cancellation/status/{selector}` as admin: the HTTP status and the body.
pub async fn status(gateway: &Gateway, selector: &str) -> (u16, Value) {
    let response = client()
        .get(gateway.url(&format!("/cancellation/status/{selector}")))
        .bearer_auth(token("admin"))
        .send()
        .await
        .expect("status request");
    let code = response.status().as_u16();
    (code, response.json().await.unwrap_or(Value::Null))
}

/// `POST /cancellation/cancel` as admin: the HTTP status and the body.
pub async fn cancel(gateway: &Gateway, selector: &str, reason: &str) -> (u16, Value) {
    let response = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token("admin"))
        .json(&json!({"requestId": selector, "reason": reason}))
        .send()
        .await
        .expect("cancel request");
    let code = response.status().as_u16();
    (code, response.json().await.unwrap_or(Value::Null))
}

/// `cancelkit_gateway_cancels_total{source="<source>"}` from `/metrics`.
pub async fn cancels_total(gateway: &Gateway, source: &str) -> f64 {
    let text = client()
        .get(gateway.url("/metrics"))
        .send()
        .await
        .expect("metrics request")
        .text()
        .await
        .expect("metrics body");
    let series = format!("cancelkit_gateway_cancels_total{{source=\"{source}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
        .trim()
        .parse()
        .expect("a number")
}

/// A client script running against the gateway: its JSON lines as they come, a way to let it
/// go on, and a hard time limit (it is killed when the limit passes or the driver is dropped).
pub struct Script {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    events: Vec<Value>,
    deadline: Instant,
}

/// How long a script may run in all.
pub const SCRIPT_LIMIT: Duration = Duration::from_secs(45);

impl Script {
    /// `python tests/python/<script> args...` in the pinned venv (installed on first use).
    pub fn python(script: &str, args: &[&str]) -> Script {
        let python = cancelkit_tests::python::install();
        let mut command = Command::new(python);
        command
            .arg(cancelkit_tests::python::script(script))
            .args(args)
            .env("PYTHONUNBUFFERED", "1");
        Script::spawn(format!("python {script}"), command)
    }

    /// `node tests/node/<script> args...` with the pinned packages (installed on first use).
    pub fn node(script: &str, args: &[&str]) -> Script {
        let dir = cancelkit_tests::node::install();
        let mut command = Command::new("node");
        command.arg(script).args(args).current_dir(dir);
        Script::spawn(format!("node {script}"), command)
    }

    fn spawn(name: String, mut command: Command) -> Script {
        command
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("http_proxy")
            .env_remove("https_proxy")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
        // Bounded: a script that writes faster than the test reads waits on its pipe.
        let (tx, lines) = mpsc::channel(1024);
        let stdout = child.stdout.take().expect("piped stdout");
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).await.is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped stderr");
        let sink = Arc::clone(&stderr);
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Script {
            name,
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            events: Vec::new(),
            deadline: Instant::now() + SCRIPT_LIMIT,
        }
    }

    /// Everything the script printed so far, and its stderr: for failure messages.
    pub fn transcript(&self) -> String {
        let lines: Vec<String> = self.events.iter().map(Value::to_string).collect();
        format!(
            "[{}] stdout:\n{}\n[{}] stderr:\n{}",
            self.name,
            lines.join("\n"),
            self.name,
            self.stderr.lock().unwrap()
        )
    }

    /// The next line; `None` at the end of the output. Panics past the time limit.
    async fn next_event(&mut self) -> Option<Value> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, self.lines.recv()).await {
            Ok(Some(line)) => {
                let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("not a JSON line ({e}): {line}\n{}", self.transcript())
                });
                self.events.push(event.clone());
                Some(event)
            }
            Ok(None) => None,
            Err(_) => {
                let _ = self.child.start_kill();
                panic!(
                    "the script ran past its limit of {SCRIPT_LIMIT:?}\n{}",
                    self.transcript()
                );
            }
        }
    }

    /// Waits for the next line whose `event` is `name` (skipping none: the scripts print their
    /// events in a fixed order, so any other line here is a failure).
    pub async fn expect(&mut self, name: &str) -> Value {
        match self.next_event().await {
            Some(event) if event["event"] == name => event,
            Some(_) => panic!("expected {name:?} next\n{}", self.transcript()),
            None => {
                // Let stderr catch up before reporting.
                tokio::time::sleep(Duration::from_millis(200)).await;
                panic!(
                    "the script ended before {name:?} ({:?})\n{}",
                    self.child.try_wait(),
                    self.transcript()
                )
            }
        }
    }

    /// Lets a script waiting on stdin go on.
    pub async fn go(&mut self) {
        let waiting = self.expect("waiting").await;
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin
            .write_all(b"go\n")
            .await
            .unwrap_or_else(|e| panic!("stdin: {e} ({waiting})"));
        stdin.flush().await.expect("flush stdin");
    }

    /// Reads the rest of the output (the last line is `wire`) and waits for a clean exit.
    pub async fn finish(mut self) -> Report {
        let wire = self.expect("wire").await;
        while self.next_event().await.is_some() {}
        let left = self.deadline.saturating_duration_since(Instant::now());
        let status = tokio::time::timeout(left, self.child.wait()).await;
        match status {
            Ok(Ok(status)) if status.success() => {}
            other => panic!(
                "the script did not exit cleanly: {other:?}\n{}",
                self.transcript()
            ),
        }
        Report {
            transcript: self.transcript(),
            exchanges: wire["exchanges"].as_array().cloned().unwrap_or_default(),
        }
    }
}

/// What a script saw on the wire: every HTTP exchange with the gateway, each with the JSON-RPC
/// messages the gateway sent on its body.
pub struct Report {
    /// The whole output, for failure messages.
    pub transcript: String,
    /// `{method, request, session, status, contentType, messages, ended}` each.
    pub exchanges: Vec<Value>,
}

impl Report {
    /// The exchange that POSTed the request with this id (not a notification naming it).
    pub fn post_of(&self, id: &Value) -> &Value {
        self.exchanges
            .iter()
            .find(|e| e["request"]["id"] == *id && e["request"].get("method").is_some())
            .unwrap_or_else(|| panic!("no POST of request {id}\n{}", self.transcript))
    }

    /// Every response (result or error) the gateway sent for the request with this id, on any
    /// stream.
    pub fn responses_to(&self, id: &Value) -> Vec<&Value> {
        self.messages()
            .filter(|m| m.get("method").is_none() && m["id"] == *id)
            .collect()
    }

    /// Every message the gateway sent.
    pub fn messages(&self) -> impl Iterator<Item = &Value> {
        self.exchanges
            .iter()
            .flat_map(|e| e["messages"].as_array().into_iter().flatten())
    }

    /// The notifications the client POSTed with this method.
    pub fn notifications_sent(&self, method: &str) -> Vec<&Value> {
        self.exchanges
            .iter()
            .filter(|e| e["request"]["method"] == method && e["request"].get("id").is_none())
            .map(|e| &e["request"])
            .collect()
    }
}

/// The MCP revision a client speaks with the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: a session; `notifications/cancelled` is the cancel, a closed stream is not.
    V2025,
    /// 2026-07-28: no session; closing the request's response stream is the cancel.
    V2026,
}

impl Era {
    /// The revision's name.
    pub fn version(self) -> &'static str {
        match self {
            Era::V2025 => "2025-11-25",
            Era::V2026 => "2026-07-28",
        }
    }
}

/// How the admin's API cancel names the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelBy {
    /// The bare JSON-RPC id the SDK gave the call.
    BareId,
    /// The run id, read from the run's status (looked up by the bare id).
    RunId,
}

/// What differs between the SDKs in the scenarios of [`run_scenarios`].
pub struct Expected {
    /// The revision the client speaks.
    pub era: Era,
    /// The `cancel_reason` of the run the client aborted.
    pub abort_reason: &'static str,
    /// How the client's own aborted call ended, as the script reports it.
    pub abort_outcome: &'static str,
    /// How the API cancel names the run.
    pub cancel_by: CancelBy,
}

/// A `requestId` as the cancellation API takes it.
fn selector(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The scenarios every SDK client runs against the gateway, in the order its script runs them
/// (see tests/python/gateway_client.py and tests/node/gateway_client.mjs): connect, list, echo,
/// progress, a client abort, an API cancel, echo again; then what crossed the wire.
pub async fn run_scenarios(
    gateway: &Gateway,
    upstream: &dyn UpstreamUnderTest,
    mut script: Script,
    expected: &Expected,
) -> Report {
    let era = expected.era;
    let connected = script.expect("connected").await;
    assert_eq!(
        connected["protocolVersion"],
        era.version(),
        "{}",
        script.transcript()
    );

    let listed = script.expect("list_tools").await;
    assert_eq!(
        listed["tools"],
        json!(["demo-echo", "demo-sleep"]),
        "{}",
        script.transcript()
    );

    let echo = script.expect("echo").await;
    assert_eq!(echo["text"], "hello", "{}", script.transcript());
    assert!(
        echo["meta"]["io.cancelkit/runId"]
            .as_str()
            .is_some_and(|r| r.starts_with("run-")),
        "a result names its run: {}",
        script.transcript()
    );

    // Progress from the upstream reaches the SDK's progress callback, in order, then the result.
    let progress = script.expect("progress").await;
    let updates = progress["updates"].as_array().cloned().unwrap_or_default();
    assert!(
        updates.len() >= 2,
        "progress notifications reach the client: {}",
        script.transcript()
    );
    let values: Vec<f64> = updates
        .iter()
        .map(|u| u["progress"].as_f64().unwrap_or(-1.0))
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]) && values.iter().all(|v| *v > 0.0 && *v <= 0.5),
        "{values:?}: {}",
        script.transcript()
    );
    assert!(updates.iter().all(|u| u["total"] == 0.5), "{updates:?}");
    assert_eq!(progress["text"], "slept 500ms", "{}", script.transcript());

    // The client aborts a slow sleep once it runs upstream.
    let stops_before = upstream.stops(gateway);
    let aborted = script.expect("client_abort").await;
    assert_eq!(
        aborted["outcome"],
        expected.abort_outcome,
        "{}",
        script.transcript()
    );
    assert!(
        aborted["progressBeforeAbort"].as_u64() >= Some(1),
        "{}",
        script.transcript()
    );
    let aborted_id = aborted["requestId"].clone();
    assert!(
        aborted_id.is_number() || aborted_id.is_string(),
        "{}",
        script.transcript()
    );
    // ...the upstream tool stops...
    wait_for_stops(upstream, gateway, stops_before + 1, Duration::from_secs(5)).await;
    // ...and the gateway says the run was cancelled, by the client.
    let (code, run) = status(gateway, &selector(&aborted_id)).await;
    assert_eq!(code, 200, "status of the aborted call: {run}");
    assert_eq!(run["cancelled"], true, "{run}");
    assert_eq!(run["state"], "cancelled", "{run}");
    assert_eq!(run["name"], "demo-sleep", "{run}");
    assert_eq!(run["cancel_reason"], expected.abort_reason, "{run}");
    let aborted_run = run["run_id"].as_str().expect("run_id").to_owned();
    let log = plain(&gateway.stderr());
    assert!(
        log.contains(&format!(
            "run cancelled run_id=\"{aborted_run}\" source=\"client\""
        )),
        "the gateway logs the run's cancel as the client's:\n{log}"
    );
    assert_eq!(cancels_total(gateway, "client").await, 1.0);
    assert_eq!(cancels_total(gateway, "api").await, 0.0);
    script.go().await;

    // An admin cancels a slow sleep through the API: the SDK's call fails with -32800.
    let ready = script.expect("api_cancel_ready").await;
    let api_id = ready["requestId"].clone();
    let (code, run) = status(gateway, &selector(&api_id)).await;
    assert_eq!(code, 200, "status of the running call: {run}");
    assert_eq!(run["state"], "running", "{run}");
    assert_eq!(run["cancelled"], false, "{run}");
    let api_run = run["run_id"].as_str().expect("run_id").to_owned();
    let target = match expected.cancel_by {
        CancelBy::BareId => selector(&api_id),
        CancelBy::RunId => api_run.clone(),
    };
    let (code, body) = cancel(gateway, &target, "operator stop").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], "cancelled", "{body}");
    let cancelled = script.expect("api_cancel").await;
    assert_eq!(cancelled["requestId"], api_id, "{}", script.transcript());
    assert_eq!(cancelled["outcome"], "rejected", "{}", script.transcript());
    let error = &cancelled["error"];
    assert_eq!(error["code"], -32800, "{}", script.transcript());
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("Request cancelled")),
        "{}",
        script.transcript()
    );
    assert_eq!(error["data"]["runId"], api_run.as_str(), "{error}");
    assert_eq!(error["data"]["partial"], false, "{error}");
    assert_eq!(error["data"]["requestId"], api_id, "{error}");
    assert_eq!(error["data"]["reason"], "operator stop", "{error}");
    wait_for_stops(upstream, gateway, stops_before + 2, Duration::from_secs(5)).await;
    let (_, run) = status(gateway, &api_run).await;
    assert_eq!(run["state"], "cancelled", "{run}");
    assert_eq!(run["cancel_reason"], "operator stop", "{run}");
    assert_eq!(cancels_total(gateway, "api").await, 1.0);
    assert_eq!(cancels_total(gateway, "client").await, 1.0);
    script.go().await;

    // The client goes on working.
    let echo = script.expect("echo").await;
    assert_eq!(echo["text"], "still serving", "{}", script.transcript());

    // A burst of calls aborted right after they are sent, some cancels racing their calls:
    // every run still ends (none is left running its 30 s), before the client closes (ending a
    // 2025-11-25 session would cancel its runs anyway).
    let burst = script.expect("abort_burst").await;
    assert_eq!(
        burst["outcomes"].get("completed"),
        None,
        "{}",
        script.transcript()
    );
    let burst_ids = burst["ids"].as_array().cloned().unwrap_or_default();
    assert!(!burst_ids.is_empty(), "{}", script.transcript());
    wait_for_no_runs(gateway, Duration::from_secs(5)).await;
    wait_for_idle_upstream(upstream, gateway, Duration::from_secs(5)).await;
    script.go().await;

    let report = script.finish().await;
    upstream.check_stops(gateway);
    check_wire(&report, era, &aborted_id, &api_id);
    for id in &burst_ids {
        assert_eq!(
            report.responses_to(id),
            Vec::<&Value>::new(),
            "no response for an aborted call\n{}",
            report.transcript
        );
    }
    report
}

/// Waits until no run is in flight (`/health`); panics after `within`.
pub async fn wait_for_no_runs(gateway: &Gateway, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let health: Value = client()
            .get(gateway.url("/health"))
            .send()
            .await
            .expect("health request")
            .json()
            .await
            .expect("health body");
        if health["runs_in_flight"] == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "runs still in flight {within:?} after their clients aborted them: {health}\n{}",
            plain(&gateway.stderr())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until no `sleep` runs upstream, where the upstream can tell; panics after `within`.
pub async fn wait_for_idle_upstream(
    upstream: &dyn UpstreamUnderTest,
    gateway: &Gateway,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    while let Some(running) = upstream.sleeps_running() {
        if running == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{running} sleeps still run in the {} {within:?} after their runs ended:\n{}",
            upstream.kind(),
            upstream.log(gateway)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What crossed the wire, below the SDK.
fn check_wire(report: &Report, era: Era, aborted_id: &Value, api_id: &Value) {
    let all = &report.transcript;
    // No response for the call the client aborted, on any stream.
    assert_eq!(
        report.responses_to(aborted_id),
        Vec::<&Value>::new(),
        "a call the client cancelled gets no response\n{all}"
    );
    let aborted_post = report.post_of(aborted_id);
    match era {
        Era::V2025 => {
            // The SDK POSTed notifications/cancelled (202); the gateway then ended the call's
            // stream without a response.
            let notices: Vec<&Value> = report
                .exchanges
                .iter()
                .filter(|e| {
                    e["request"]["method"] == "notifications/cancelled"
                        && e["request"]["params"]["requestId"] == *aborted_id
                })
                .collect();
            assert_eq!(notices.len(), 1, "{all}");
            let notice = notices[0];
            assert_eq!(notice["status"], 202, "{notice}");
            assert_eq!(aborted_post["ended"], "eof", "{aborted_post}");
            let session = &report.exchanges[1]["session"];
            assert!(session.is_string(), "{all}");
            for exchange in &report.exchanges[1..] {
                assert_eq!(exchange["session"], *session, "{exchange}");
            }
        }
        Era::V2026 => {
            // The SDK closed the call's stream (no notification: 2026-07-28 HTTP has none).
            assert_eq!(
                report.notifications_sent("notifications/cancelled"),
                Vec::<&Value>::new(),
                "{all}"
            );
            assert_eq!(aborted_post["ended"], "client", "{aborted_post}");
            for exchange in &report.exchanges {
                assert!(exchange["session"].is_null(), "no sessions: {exchange}");
                assert_ne!(exchange["method"], "GET", "no GET stream: {exchange}");
            }
        }
    }
    // The API-cancelled call: its progress, then one response, the -32800 error, then the end.
    let api_post = report.post_of(api_id);
    let messages = api_post["messages"].as_array().expect("messages");
    let (last, progress) = messages.split_last().expect("messages on the stream");
    assert!(
        !progress.is_empty()
            && progress
                .iter()
                .all(|m| m["method"] == "notifications/progress"),
        "{api_post}"
    );
    assert_eq!(last["error"]["code"], -32800, "{api_post}");
    assert_eq!(report.responses_to(api_id).len(), 1, "{all}");
    // Results are written in the client's era: 2026-07-28's resultType only for 2026-07-28.
    for message in report.messages() {
        if let Some(result) = message.get("result") {
            assert_eq!(
                result.get("resultType").is_some(),
                era == Era::V2026,
                "{message}"
            );
        }
    }
}
