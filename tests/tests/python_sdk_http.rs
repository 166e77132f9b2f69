//! The official MCP Python SDK (`mcp` 2.3.0 with every dependency pinned in
//! tests/python/requirements.txt, installed into a venv under target/interop/python) as the
//! client of our `mcp_server` example over Streamable HTTP (`mcp_server --http 127.0.0.1:0`).
//! The client is tests/python/http_cancel_interop.py, on the SDK's `streamable_http_client`; it
//! taps the SDK's HTTP client (an httpx2 transport around the default one), so every HTTP
//! exchange (headers, the message POSTed, the answer's JSON body or SSE events, how the answer
//! ended) is asserted on here, along with the server's stderr log.
//!
//! - 2026-07-28 (`discover()`: no handshake, no session, every request stamped in
//!   `params._meta`): the client cancels a running `sleep` by cancelling the anyio scope its
//!   call awaits in; the SDK closes the call's response stream (and POSTs no
//!   `notifications/cancelled`, which the 2026-07-28 HTTP wire does not have); our server takes
//!   the closed stream as the cancel, stops the tool, answers nothing, and serves the next call.
//!   It sends the client no requests and no `notifications/cancelled`.
//! - 2025-11-25 (`initialize()`: a session named by `Mcp-Session-Id`): the same cancel is the
//!   SDK's `notifications/cancelled`, POSTed in the session; our server stops the tool and ends
//!   the call's stream without a response.
//! - 2025-11-25: our server gives up on a `sampling/createMessage` it sent (`ask_client`); its
//!   `notifications/cancelled` interrupts the SDK's sampling callback, and the tool result
//!   arrives.
//!
//! Python and pip are required: without them these tests fail, they never skip.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

/// The stamp of a 2026-07-28 request's protocol version in `params._meta`.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// `mcp_server --http 127.0.0.1:0`, its stderr in a file; killed when dropped.
struct HttpServer {
    child: Child,
    stdout: BufReader<ChildStdout>,
    url: String,
    log: tempfile::NamedTempFile,
}

impl HttpServer {
    fn start() -> HttpServer {
        let binary = cancelkit_tests::example("mcp_server");
        let log = tempfile::NamedTempFile::new().expect("a temporary file for the server's log");
        let mut child = Command::new(&binary)
            .args(["--http", "127.0.0.1:0"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("the log file, for writing"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        // The example prints its line once bound; it has nothing else to do first.
        let read = stdout.read_line(&mut line).expect("the server's stdout");
        let url = line
            .strip_prefix("listening on ")
            .map(str::trim_end)
            .filter(|url| url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"))
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!(
                    "mcp_server --http printed {line:?} ({read} bytes), not \
                     `listening on http://127.0.0.1:PORT/mcp`; its log:\n{}",
                    std::fs::read_to_string(log.path()).unwrap_or_default()
                )
            })
            .to_owned();
        HttpServer {
            child,
            stdout,
            url,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).expect("the server's log")
    }

    /// Stops the server; its whole log, after checking that it printed nothing more on stdout
    /// than its one line.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut rest = String::new();
        let _ = self.stdout.read_to_string(&mut rest);
        assert_eq!(
            rest, "",
            "mcp_server --http printed more than one line on stdout"
        );
        self.log()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one run of http_cancel_interop.py reported: its JSON lines, the last being the wire,
/// and the server's log.
struct Report {
    scenario: &'static str,
    events: Vec<Value>,
    server_log: String,
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

    /// Every HTTP exchange, in the order the client made them: `{n, ms, method, headers, body,
    /// status, responseHeaders, events, comments, json, end, closedMs}`.
    fn exchanges(&self) -> &[Value] {
        self.event("wire")["exchanges"]
            .as_array()
            .expect("exchanges")
    }

    /// The POSTs of a JSON-RPC message with this method.
    fn posts(&self, method: &str) -> Vec<&Value> {
        self.exchanges()
            .iter()
            .filter(|e| e["method"] == "POST" && e["body"]["method"] == method)
            .collect()
    }

    /// The POST of the `tools/call` of this tool (there is one per tool in a run).
    fn tool_post(&self, tool: &str) -> &Value {
        let posts: Vec<_> = self
            .posts("tools/call")
            .into_iter()
            .filter(|e| e["body"]["params"]["name"] == tool)
            .collect();
        assert_eq!(
            posts.len(),
            1,
            "[{}] {tool}:\n{}",
            self.scenario,
            self.lines()
        );
        posts[0]
    }

    /// Every message the client sent: the bodies of its POSTs.
    fn sent(&self) -> Vec<&Value> {
        self.exchanges()
            .iter()
            .filter(|e| e["method"] == "POST")
            .map(|e| &e["body"])
            .collect()
    }

    /// Every message the client received: JSON bodies and the data of SSE events (the priming
    /// events carry none).
    fn received(&self) -> Vec<&Value> {
        let mut messages = Vec::new();
        for exchange in self.exchanges() {
            if exchange["json"].get("jsonrpc").is_some() {
                messages.push(&exchange["json"]);
            }
            for event in exchange["events"].as_array().into_iter().flatten() {
                if event["data"].get("jsonrpc").is_some() {
                    messages.push(&event["data"]);
                }
            }
        }
        messages
    }

    /// Messages received with this method.
    fn received_method(&self, method: &str) -> Vec<&Value> {
        self.received()
            .into_iter()
            .filter(|m| m["method"] == method)
            .collect()
    }

    /// Responses (results or errors) with this id among `messages`.
    fn responses<'a>(messages: Vec<&'a Value>, id: &Value) -> Vec<&'a Value> {
        messages
            .into_iter()
            .filter(|m| m.get("method").is_none() && m["id"] == *id)
            .collect()
    }

    /// The whole report, for failure messages.
    fn lines(&self) -> String {
        let mut all = self
            .events
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        all.push_str("\n--- server log ---\n");
        all.push_str(&self.server_log);
        all
    }
}

/// Starts a server and runs http_cancel_interop.py against it in one scenario.
fn run(scenario: &'static str) -> Report {
    let python = cancelkit_tests::python::install();
    let server = HttpServer::start();
    let run = cancelkit_tests::python::run(
        &python,
        &cancelkit_tests::python::script("http_cancel_interop.py"),
        &[
            OsStr::new(&server.url),
            server.log.path().as_os_str(),
            OsStr::new(scenario),
        ],
        Duration::from_secs(60),
    );
    let server_log = server.stop();
    assert!(
        run.status.success(),
        "[{scenario}] the Python client failed ({}):\n{}\n{}\n--- server log ---\n{server_log}",
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
    Report {
        scenario,
        events,
        server_log,
    }
}

/// The 2026-07-28 run, shared by the tests that assert on it.
fn discover_run() -> &'static Report {
    static RUN: OnceLock<Report> = OnceLock::new();
    RUN.get_or_init(|| run("discover"))
}

/// What both eras share: the client's call was cancelled while running, the server logged that
/// the tool stopped (promptly, with `reason`), no response for it reached the client, not even
/// late, and the next call was answered. Returns the log line of the stop.
fn assert_client_cancel_honoured<'a>(report: &'a Report, version: &str, reason: &str) -> &'a str {
    let all = report.lines();
    assert_eq!(
        report.event("connected")["protocolVersion"],
        version,
        "{all}"
    );
    let listed = report.event("list_tools");
    assert_eq!(listed["ok"], true, "{all}");
    for tool in ["echo", "sleep", "ask_client"] {
        assert!(
            listed["tools"].as_array().unwrap().contains(&json!(tool)),
            "{all}"
        );
    }
    let echoes: Vec<_> = report
        .events_named("echo")
        .iter()
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(echoes.first(), Some(&json!("hello")), "{all}");

    let sleep = report.event("sleep");
    let id = &sleep["requestId"];
    assert_eq!(report.tool_post("sleep")["body"]["id"], *id, "{all}");
    // The call was still running when the client cancelled it, and returned as cancelled.
    assert_eq!(sleep["outcome"], "cancelled", "{all}");

    // The tool stopped, with the cancel's reason, promptly.
    let line = sleep["stoppedLine"]
        .as_str()
        .unwrap_or_else(|| panic!("the tool never logged that it stopped:\n{all}"));
    assert!(
        line.ends_with(&format!(" reason=cancelled by the peer: {reason}")),
        "{line}\n{all}"
    );
    let stopped_ms = sleep["cancelToStoppedMs"]
        .as_f64()
        .expect("cancelToStoppedMs");
    println!(
        "[{}] cancel -> \"sleep tool stopped\" in the server log: {stopped_ms} ms",
        report.scenario
    );
    assert!(stopped_ms < 2_000.0, "{all}");

    // The sleep's POST was answered with an event stream that carried no response; neither
    // did anything else the client read (the script waits 300 ms at the end).
    let post = report.tool_post("sleep");
    assert_eq!(post["status"], 200, "{all}");
    assert_eq!(
        post["responseHeaders"]["content-type"], "text/event-stream",
        "{all}"
    );
    assert!(
        post["events"]
            .as_array()
            .expect("an SSE answer")
            .iter()
            .all(|e| e.get("data").is_none_or(|d| d == "")),
        "an event with data on the cancelled call's stream:\n{all}"
    );
    assert_eq!(
        Report::responses(report.received(), id),
        Vec::<&Value>::new(),
        "{all}"
    );

    // And the server kept serving.
    assert_eq!(echoes.get(1), Some(&json!("still serving")), "{all}");
    line
}

/// a. 2026-07-28 via `discover()`: every request stamped, no session, and the cancel is the
/// closed response stream.
#[test]
fn a_discover_2026_07_28_closing_the_stream_stops_the_tool_without_a_response() {
    let report = discover_run();
    let all = report.lines();
    assert_eq!(report.posts("server/discover").len(), 1, "{all}");
    assert_eq!(report.posts("initialize"), Vec::<&Value>::new(), "{all}");

    // No session: no GET stream, no DELETE, no Mcp-Session-Id either way; every message a
    // POST stamped with 2026-07-28 in its _meta and its MCP-Protocol-Version header.
    for exchange in report.exchanges() {
        assert_eq!(exchange["method"], "POST", "{exchange}\n{all}");
        assert!(
            exchange["headers"].get("mcp-session-id").is_none()
                && exchange["responseHeaders"].get("mcp-session-id").is_none(),
            "{exchange}\n{all}"
        );
        assert_eq!(
            exchange["headers"]["mcp-protocol-version"], "2026-07-28",
            "{exchange}"
        );
        assert_eq!(
            exchange["body"]["params"]["_meta"][PROTOCOL_VERSION_META], "2026-07-28",
            "{exchange}"
        );
        assert_eq!(exchange["status"], 200, "{exchange}\n{all}");
    }

    let line = assert_client_cancel_honoured(
        report,
        "2026-07-28",
        "the client closed the response stream",
    );

    // The SDK closed the call's stream (it aborts the POST) and sent no notifications/cancelled:
    // at 2026-07-28 over HTTP the closed stream is the cancel.
    let post = report.tool_post("sleep");
    let end = post["end"].as_str().unwrap_or_default();
    assert!(
        end == "cancelled by the client" || end == "closed by the client",
        "the sleep's stream ended {end:?}, not by the client:\n{all}"
    );
    assert_eq!(
        report.posts("notifications/cancelled"),
        Vec::<&Value>::new(),
        "{all}"
    );

    // The server logged the cancel under its own id for the request (one peer serves every
    // 2026-07-28 client), the one the stop was logged with.
    let ours = line
        .split_once("sleep tool stopped request_id=")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .expect("a request id in the stop line");
    assert!(
        report.server_log.contains(&format!(
            "the peer cancelled a request request_id={ours} reason=\"the client closed the response stream\""
        )),
        "{all}"
    );
}

/// b. 2026-07-28: after the cancelled call, and after `ask_client` (which at 2026-07-28 may not
/// ask the client anything), the server has sent the client no requests and no
/// `notifications/cancelled`.
#[test]
fn b_discover_2026_07_28_server_sends_no_requests_and_no_notifications_cancelled() {
    let report = discover_run();
    let all = report.lines();
    assert_eq!(report.event("sleep")["outcome"], "cancelled", "{all}");
    let asked = report.event("ask_client");
    assert!(
        asked["error"]
            .as_str()
            .is_some_and(|e| e.contains("issues no requests")),
        "{all}"
    );
    assert_eq!(
        report.event("sampling_callbacks")["calls"],
        json!([]),
        "{all}"
    );
    let requests: Vec<_> = report
        .received()
        .into_iter()
        .filter(|m| m.get("method").is_some() && m.get("id").is_some())
        .collect();
    assert_eq!(requests, Vec::<&Value>::new(), "{all}");
    assert_eq!(
        report.received_method("notifications/cancelled"),
        Vec::<&Value>::new(),
        "{all}"
    );
}

/// c. 2025-11-25 via `initialize()`: a session, and the cancel is the SDK's
/// `notifications/cancelled`, POSTed in it.
#[test]
fn c_initialize_2025_11_25_notifications_cancelled_stops_the_tool_without_a_response() {
    let report = run("initialize");
    let all = report.lines();
    let exchanges = report.exchanges();

    // initialize opened the session: no session header on it, one on its answer.
    let initialize = report.posts("initialize");
    assert_eq!(initialize.len(), 1, "{all}");
    assert_eq!(
        initialize[0]["body"]["params"]["protocolVersion"],
        "2025-11-25"
    );
    assert!(
        initialize[0]["headers"].get("mcp-session-id").is_none(),
        "{all}"
    );
    assert_eq!(
        initialize[0]["json"]["result"]["protocolVersion"],
        "2025-11-25"
    );
    let session = initialize[0]["responseHeaders"]["mcp-session-id"]
        .as_str()
        .unwrap_or_else(|| panic!("initialize was answered without Mcp-Session-Id:\n{all}"));
    assert!(!session.is_empty(), "{all}");

    // Everything after it names the session and the revision.
    for exchange in &exchanges[1..] {
        assert_eq!(exchange["headers"]["mcp-session-id"], session, "{exchange}");
        assert_eq!(
            exchange["headers"]["mcp-protocol-version"], "2025-11-25",
            "{exchange}"
        );
    }
    // The SDK opened the session's GET stream after notifications/initialized (202).
    assert_eq!(report.posts("notifications/initialized")[0]["status"], 202);
    let gets: Vec<_> = exchanges
        .iter()
        .filter(|e| e["method"] == "GET" && e["headers"].get("last-event-id").is_none())
        .collect();
    assert_eq!(gets.len(), 1, "{all}");
    assert_eq!(gets[0]["status"], 200, "{all}");
    assert_eq!(
        gets[0]["responseHeaders"]["content-type"],
        "text/event-stream"
    );

    // The SDK POSTed notifications/cancelled for the sleep, in the session; it was accepted.
    let id = &report.event("sleep")["requestId"];
    let cancels = report.posts("notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{all}");
    assert_eq!(cancels[0]["body"]["params"]["requestId"], *id, "{all}");
    assert_eq!(cancels[0]["status"], 202, "{all}");
    let reason = cancels[0]["body"]["params"]["reason"]
        .as_str()
        .expect("a reason")
        .to_owned();

    let line = assert_client_cancel_honoured(&report, "2025-11-25", &reason);
    assert!(
        line.contains(&format!("sleep tool stopped request_id={id} ")),
        "{line}"
    );
    assert!(
        report.server_log.contains(&format!(
            "the peer cancelled a request request_id={id} reason={}",
            json!(reason)
        )),
        "{all}"
    );

    // The server ended the sleep's stream itself, without a response, after the cancel.
    let post = report.tool_post("sleep");
    assert_eq!(post["end"], "eof", "{all}");
    let ended = post["endMs"].as_f64().expect("endMs");
    let cancelled = cancels[0]["ms"].as_f64().expect("ms");
    assert!(
        ended >= cancelled,
        "the stream ended before the cancel:\n{all}"
    );

    // The session ended with the client's DELETE.
    let last = exchanges.last().expect("exchanges");
    assert_eq!(last["method"], "DELETE", "{all}");
    assert_eq!(last["status"], 200, "{all}");
}

/// d. 2025-11-25: the server gives up on the `sampling/createMessage` it sent; its
/// `notifications/cancelled`, on the stream that carried the request, interrupts the Python
/// sampling callback (which would sleep 30 s), the client answers nothing for it, and the tool
/// result arrives.
#[test]
fn d_server_cancelling_its_sampling_request_interrupts_the_python_callback() {
    let report = run("server_cancels");
    let all = report.lines();
    assert_eq!(
        report.event("connected")["protocolVersion"],
        "2025-11-25",
        "{all}"
    );

    let asked = report.received_method("sampling/createMessage");
    assert_eq!(asked.len(), 1, "{all}");
    let id = &asked[0]["id"];

    // The server gave up after timeout_ms and told the client, naming its request, on the
    // stream its request went on (the session's GET stream, or the tool call's), after it.
    let cancels = report.received_method("notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{all}");
    assert_eq!(cancels[0]["params"]["requestId"], *id, "{all}");
    let carrier = report
        .exchanges()
        .iter()
        .find(|e| {
            e["events"]
                .as_array()
                .is_some_and(|events| events.iter().any(|ev| ev["data"] == *asked[0]))
        })
        .expect("the stream that carried sampling/createMessage");
    let datas: Vec<_> = carrier["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["data"])
        .collect();
    let at = |m: &Value| datas.iter().position(|d| *d == m);
    assert!(
        at(cancels[0]).is_some_and(|c| at(asked[0]).is_some_and(|a| c > a)),
        "the cancel did not follow the request on its stream:\n{all}"
    );

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

    // The client POSTed no response for the cancelled request.
    assert_eq!(
        Report::responses(report.sent(), id),
        Vec::<&Value>::new(),
        "{all}"
    );

    // The tool result arrived on the tool call's stream, saying the server gave up.
    let tool = report.event("ask_client");
    assert_eq!(tool["isError"], false, "{all}");
    assert!(
        tool["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("gave up after")),
        "{all}"
    );
    let post = report.tool_post("ask_client");
    let answered = post["events"]
        .as_array()
        .expect("an SSE answer")
        .iter()
        .any(|e| e["data"]["id"] == post["body"]["id"] && e["data"].get("result").is_some());
    assert!(answered, "{all}");
    assert!(
        report
            .server_log
            .contains("gave up on sampling/createMessage; the client was told"),
        "{all}"
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
