//! The official MCP Python SDK (`mcp` 2.3.0 with every dependency pinned in
//! tests/python/requirements.txt, installed into a venv under target/interop/python) as the
//! client of our `mcp_server` example over stdio. The client is tests/python/cancel_interop.py;
//! it taps the transport between the SDK's `stdio_client` and `ClientSession`, so every message
//! that crossed the wire, both ways, is asserted on here along with the server's stderr log.
//!
//! - 2026-07-28 (`discover()`, no handshake) and 2025-11-25 (`initialize()`): the client cancels
//!   a running `sleep` by cancelling the anyio scope its call awaits in; the SDK sends
//!   `notifications/cancelled`, our server stops the tool, answers nothing for it, and serves
//!   the next call.
//! - 2025-11-25: our server gives up on a `sampling/createMessage` it sent (`ask_client`); its
//!   `notifications/cancelled` interrupts the SDK's sampling callback, and the tool result
//!   arrives.
//! - 2026-07-28: the server sends the client no `notifications/cancelled` (it may only to end
//!   `subscriptions/listen`) and no requests at all, and its `tools/list` result is one the SDK
//!   accepts.
//!
//! Python and pip are required: without them these tests fail, they never skip.

use std::ffi::OsStr;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

/// What one run of cancel_interop.py reported: its JSON lines, the last being the wire.
struct Report {
    scenario: &'static str,
    events: Vec<Value>,
}

impl Report {
    /// The first line with this `event`.
    fn event(&self, name: &str) -> &Value {
        self.events_named(name)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("[{}] no {name:?} line:\n{}", self.scenario, self.lines()))
    }

    fn events_named(&self, name: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == name).collect()
    }

    /// Every message on the wire: `{dir: "in"|"out", ms, message, withheld?}`.
    fn wire(&self) -> &[Value] {
        self.event("wire")["messages"].as_array().expect("messages")
    }

    fn server_log(&self) -> &str {
        self.event("wire")["serverLog"].as_str().expect("serverLog")
    }

    /// Messages in one direction (`"in"`: from the server) with this method.
    fn messages<'a>(&'a self, dir: &'a str, method: &'a str) -> Vec<&'a Value> {
        self.wire()
            .iter()
            .filter(|m| m["dir"] == dir && m["message"]["method"] == method)
            .map(|m| &m["message"])
            .collect()
    }

    /// Responses (results or errors) in one direction for the request with this id.
    fn responses<'a>(&'a self, dir: &'a str, id: &'a Value) -> Vec<&'a Value> {
        self.wire()
            .iter()
            .map(|m| (m, &m["message"]))
            .filter(|(m, message)| {
                m["dir"] == dir && message.get("method").is_none() && message["id"] == *id
            })
            .map(|(_, message)| message)
            .collect()
    }

    /// Requests the server sent the client.
    fn server_requests(&self) -> Vec<&Value> {
        self.wire()
            .iter()
            .filter(|m| {
                m["dir"] == "in"
                    && m["message"].get("method").is_some()
                    && m["message"].get("id").is_some()
            })
            .map(|m| &m["message"])
            .collect()
    }

    /// The whole report, for failure messages.
    fn lines(&self) -> String {
        self.events
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs cancel_interop.py against the example server in one scenario.
fn run(scenario: &'static str) -> Report {
    let python = cancelkit_tests::python::sdk_python();
    let server = cancelkit_tests::example("mcp_server");
    let run = cancelkit_tests::python::run(
        &python,
        &cancelkit_tests::python::script("cancel_interop.py"),
        &[server.as_os_str(), OsStr::new(scenario)],
        Duration::from_secs(60),
    );
    assert!(
        run.status.success(),
        "[{scenario}] the Python client failed ({}):\n{}\n{}",
        run.status,
        run.stdout,
        run.stderr
    );
    let events = run
        .stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("[{scenario}] not a JSON line ({e}): {line}"))
        })
        .collect();
    Report { scenario, events }
}

/// The 2026-07-28 run, shared by the tests that assert on it.
fn discover_run() -> &'static Report {
    static RUN: OnceLock<Report> = OnceLock::new();
    RUN.get_or_init(|| run("discover"))
}

/// The client cancelled a running `sleep`: the SDK sent `notifications/cancelled` for it, the
/// server stopped the tool promptly and sent no response for it, and answered the next call.
fn assert_client_cancel_honoured(report: &Report, version: &str) {
    let all = report.lines();
    assert_eq!(
        report.event("connected")["protocolVersion"],
        version,
        "{all}"
    );
    let echoes: Vec<_> = report
        .events_named("echo")
        .iter()
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(echoes.first(), Some(&json!("hello")), "{all}");

    let sleep = report.event("sleep");
    let id = &sleep["requestId"];
    assert!(id.is_number() || id.is_string(), "{all}");
    // The call was still running when the client cancelled it, and returned as cancelled.
    assert_eq!(sleep["outcome"], "cancelled", "{all}");

    // The SDK told the server, naming the request.
    let cancels = report.messages("out", "notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{all}");
    assert_eq!(cancels[0]["params"]["requestId"], *id, "{all}");

    // The server logged the cancel and stopped the tool, with that request id, promptly.
    let log = report.server_log();
    assert!(
        log.contains(&format!("the peer cancelled a request request_id={id} ")),
        "{log}"
    );
    assert!(
        log.contains(&format!("sleep tool stopped request_id={id} ")),
        "{log}"
    );
    let stopped_ms = sleep["cancelToStoppedMs"]
        .as_f64()
        .unwrap_or_else(|| panic!("the tool never logged that it stopped:\n{all}\n{log}"));
    println!(
        "[{}] cancel -> \"sleep tool stopped\" in the server log: {stopped_ms} ms",
        report.scenario
    );
    assert!(stopped_ms < 2_000.0, "{all}");

    // No response for the cancelled call, not even late (the script waits 300 ms at the end).
    assert_eq!(report.responses("in", id), Vec::<&Value>::new(), "{all}");

    // And the server kept serving.
    assert_eq!(echoes.get(1), Some(&json!("still serving")), "{all}");
}

/// a. 2026-07-28 via `discover()`.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn a_discover_2026_07_28_client_cancel_stops_the_tool_without_a_response() {
    let report = discover_run();
    assert_eq!(
        report.messages("out", "server/discover").len(),
        1,
        "{}",
        report.lines()
    );
    assert_eq!(
        report.messages("out", "initialize"),
        Vec::<&Value>::new(),
        "{}",
        report.lines()
    );
    assert_client_cancel_honoured(report, "2026-07-28");
}

/// b. 2025-11-25 via `initialize()`.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn b_initialize_2025_11_25_client_cancel_stops_the_tool_without_a_response() {
    let report = run("initialize");
    let initialize = report.messages("out", "initialize");
    assert_eq!(initialize.len(), 1, "{}", report.lines());
    assert_eq!(initialize[0]["params"]["protocolVersion"], "2025-11-25");
    assert_client_cancel_honoured(&report, "2025-11-25");
}

/// c. 2025-11-25: the server gives up on the `sampling/createMessage` it sent; its
/// `notifications/cancelled` interrupts the Python sampling callback (which would sleep 30 s),
/// the client answers nothing for it, and the tool result arrives.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn c_server_cancelling_its_sampling_request_interrupts_the_python_callback() {
    let report = run("server_cancels");
    let all = report.lines();
    assert_eq!(
        report.event("connected")["protocolVersion"],
        "2025-11-25",
        "{all}"
    );

    let asked = report.messages("in", "sampling/createMessage");
    assert_eq!(asked.len(), 1, "{all}");
    let id = &asked[0]["id"];

    // The server gave up after timeout_ms and told the client, naming its request.
    let cancels = report.messages("in", "notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{all}");
    assert_eq!(cancels[0]["params"]["requestId"], *id, "{all}");

    // The SDK cancelled the callback's scope: it saw the cancellation about timeout_ms after it
    // started, not its 30 s sleep running out.
    let calls = report.event("sampling_callbacks")["calls"]
        .as_array()
        .expect("calls")
        .clone();
    assert_eq!(calls.len(), 1, "{all}");
    assert_eq!(calls[0]["requestId"], *id, "{all}");
    assert_eq!(calls[0]["state"], "cancelled", "{all}");
    let after = calls[0]["afterMs"].as_f64().unwrap();
    println!("[server_cancels] sampling callback interrupted after {after} ms (timeout_ms 500)");
    assert!((400.0..3_000.0).contains(&after), "{all}");

    // The client sent no response for the cancelled request.
    assert_eq!(report.responses("out", id), Vec::<&Value>::new(), "{all}");

    // The tool result arrived, saying the server gave up.
    let tool = report.event("ask_client");
    assert_eq!(tool["isError"], false, "{all}");
    assert!(
        tool["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("gave up after")),
        "{all}"
    );
    assert!(
        report
            .server_log()
            .contains("gave up on sampling/createMessage; the client was told"),
        "{}",
        report.server_log()
    );
    assert_eq!(
        report
            .events_named("echo")
            .into_iter()
            .last()
            .map(|e| &e["text"]),
        Some(&json!("still serving")),
        "{all}"
    );
}

/// d. 2026-07-28: after the client's cancelled call, and after `ask_client` (whose request, if
/// the server sends one, the script leaves unanswered so the server's timeout runs out), the
/// server has sent the client no `notifications/cancelled`.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn d_discover_2026_07_28_server_sends_no_notifications_cancelled() {
    let report = discover_run();
    assert_eq!(report.event("sleep")["outcome"], "cancelled");
    assert!(
        !report.events_named("ask_client").is_empty(),
        "{}",
        report.lines()
    );
    assert_eq!(
        report.messages("in", "notifications/cancelled"),
        Vec::<&Value>::new(),
        "{}",
        report.lines()
    );
}

/// 2026-07-28 servers issue no requests at all, `ask_client` or not.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn discover_2026_07_28_server_sends_the_client_no_requests() {
    let report = discover_run();
    assert_eq!(
        report.server_requests(),
        Vec::<&Value>::new(),
        "a 2026-07-28 server sent the client requests:\n{}\n{}",
        report.lines(),
        report.server_log()
    );
}

/// The Python SDK validates 2026-07-28 results strictly: `tools/list` (cacheable, SEP-2549)
/// must carry `ttlMs` and `cacheScope`. `ClientSession.call_tool` lists the tools before it
/// returns its first result, so without them every 2026-07-28 Python client fails at its first
/// tool call.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn discover_2026_07_28_tools_list_is_accepted_by_the_python_sdk() {
    let report = discover_run();
    let listed = report.event("list_tools");
    assert_eq!(listed["ok"], true, "{listed}");
    let tools = listed["tools"].as_array().expect("tools");
    for tool in ["echo", "sleep"] {
        assert!(tools.contains(&json!(tool)), "{listed}");
    }
}
