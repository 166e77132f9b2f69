//! The official TypeScript MCP SDK (`@modelcontextprotocol/sdk`, pinned in
//! tests/node/package.json, installed under target/interop/node) as the client of our
//! `mcp_server` example over Streamable HTTP (`mcp_server --http 127.0.0.1:0`): its `Client`
//! over `StreamableHTTPClientTransport`. The client is tests/node/http_cancel.mjs; the
//! transport's `fetch` is a tap, so every HTTP exchange (headers, the message POSTed, the
//! answer's JSON body or SSE events, how the answer ended) is asserted on here, along with the
//! server's stderr log.
//!
//! - 2025-11-25 (`initialize`: a session named by `Mcp-Session-Id`): `callTool` on `sleep`
//!   with an `AbortSignal`, aborted after ~300 ms; the SDK POSTs `notifications/cancelled` in
//!   the session, our server stops the tool, ends the call's stream without a response, and
//!   serves the next call.
//! - 2025-11-25: our server gives up on a `sampling/createMessage` it sent (`ask_client`); its
//!   `notifications/cancelled` aborts the `extra.signal` of the SDK's sampling handler, the
//!   client answers nothing for it, and the tool result arrives.
//!
//! Not tested at 2026-07-28: the pinned SDK (1.32.2) does not speak it. In
//! `@modelcontextprotocol/sdk/dist/esm/types.js` of that version, `LATEST_PROTOCOL_VERSION` is
//! `'2025-11-25'` and `SUPPORTED_PROTOCOL_VERSIONS` is `[LATEST_PROTOCOL_VERSION, '2025-06-18',
//! '2025-03-26', '2024-11-05', '2024-10-07']`; `Client.connect` (`dist/esm/client/index.js`)
//! sends `initialize` with `LATEST_PROTOCOL_VERSION` (or nothing, when the transport already
//! has a session), and no file under its `dist/` mentions `server/discover`, `2026-07-28` or the
//! 2026-07-28 `_meta` stamp (`io.modelcontextprotocol/protocolVersion`). (Its `spec.types` names
//! a `"DRAFT-2026-v1"`, a schema snapshot the client does not use.)
//!
//! Node and npm are required: without them these tests fail, they never skip.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

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
        std::fs::read_to_string(self.log.path()).expect("the server's log")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one run of http_cancel.mjs reported: its JSON lines, the last being the wire, and the
/// server's log.
struct Report {
    scenario: &'static str,
    events: Vec<Value>,
    server_log: String,
}

impl Report {
    /// The first line with this `event`.
    fn event(&self, name: &str) -> &Value {
        self.events
            .iter()
            .find(|e| e["event"] == name)
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

/// `node`, checked to be there.
fn node() -> &'static str {
    match Command::new("node").arg("--version").output() {
        Ok(output) if output.status.success() => "node",
        Ok(output) => panic!(
            "`node --version` failed ({}); Node.js is needed for the TypeScript SDK peer",
            output.status
        ),
        Err(e) => panic!("cannot run `node` ({e}); Node.js is needed for the TypeScript SDK peer"),
    }
}

/// Starts a server and runs http_cancel.mjs against it in one scenario.
fn run(scenario: &'static str) -> Report {
    let node_dir = cancelkit_tests::node::install();
    let node = node();
    let server = HttpServer::start();
    // The support code's runner for scripts: `node script args...` with a time limit (node
    // resolves the SDK from the script's directory, where `install` put it).
    let run = cancelkit_tests::python::run(
        std::path::Path::new(node),
        &node_dir.join("http_cancel.mjs"),
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
        "[{scenario}] the TypeScript client failed ({}):\n{}\n{}\n--- server log ---\n{server_log}",
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

/// The session every exchange after `initialize` named, checked: `initialize` went without
/// one and was answered with it, and each later exchange carried it and the revision.
fn assert_one_session(report: &Report) -> String {
    let all = report.lines();
    let exchanges = report.exchanges();
    let initialize = &exchanges[0];
    assert_eq!(initialize["body"]["method"], "initialize", "{all}");
    assert_eq!(
        initialize["body"]["params"]["protocolVersion"], "2025-11-25",
        "{all}"
    );
    assert!(
        initialize["headers"].get("mcp-session-id").is_none(),
        "{all}"
    );
    assert_eq!(
        initialize["json"]["result"]["protocolVersion"], "2025-11-25",
        "{all}"
    );
    let session = initialize["responseHeaders"]["mcp-session-id"]
        .as_str()
        .unwrap_or_else(|| panic!("initialize was answered without Mcp-Session-Id:\n{all}"))
        .to_owned();
    assert_eq!(report.event("connected")["sessionId"], session.as_str());
    assert_eq!(report.event("connected")["protocolVersion"], "2025-11-25");
    for exchange in &exchanges[1..] {
        assert_eq!(
            exchange["headers"]["mcp-session-id"],
            session.as_str(),
            "{exchange}"
        );
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
    // It ended with the client's DELETE.
    let last = exchanges.last().expect("exchanges");
    assert_eq!(last["method"], "DELETE", "{all}");
    assert_eq!(last["status"], 200, "{all}");
    session
}

/// a. 2025-11-25: `callTool(sleep)` aborted through its `AbortSignal`: the SDK POSTs
/// `notifications/cancelled` in the session, our server stops the tool (logging the SDK's
/// reason), ends the call's stream without a response, and answers the next call.
#[test]
fn a_initialize_2025_11_25_aborting_call_tool_stops_the_tool_without_a_response() {
    let report = run("client_cancels");
    let all = report.lines();
    assert_one_session(&report);
    let listed = report.event("list_tools");
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
    let post = report.tool_post("sleep");
    assert_eq!(post["body"]["id"], *id, "{all}");
    // The call was still running when it was aborted, and the SDK gave up on it at once.
    assert_eq!(sleep["outcome"], "rejected", "{all}");
    assert!(
        sleep["callReturnedAfterAbortMs"].as_f64().unwrap() < 1_000.0,
        "{all}"
    );

    // The SDK POSTed notifications/cancelled for it, with the abort's reason; it was accepted.
    let cancels = report.posts("notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{all}");
    assert_eq!(cancels[0]["body"]["params"]["requestId"], *id, "{all}");
    assert_eq!(
        cancels[0]["body"]["params"]["reason"], "user pressed stop",
        "{all}"
    );
    assert_eq!(cancels[0]["status"], 202, "{all}");

    // The server logged the cancel and stopped the tool, with that id and reason, promptly.
    assert!(
        report.server_log.contains(&format!(
            "the peer cancelled a request request_id={id} reason=\"user pressed stop\""
        )),
        "{all}"
    );
    let line = sleep["stoppedLine"]
        .as_str()
        .unwrap_or_else(|| panic!("the tool never logged that it stopped:\n{all}"));
    assert!(
        line.contains(&format!("sleep tool stopped request_id={id} "))
            && line.ends_with(" reason=cancelled by the peer: user pressed stop"),
        "{line}\n{all}"
    );
    let stopped_ms = sleep["abortToStoppedMs"]
        .as_f64()
        .expect("abortToStoppedMs");
    println!("[client_cancels] abort -> \"sleep tool stopped\" in the server log: {stopped_ms} ms");
    assert!(stopped_ms < 2_000.0, "{all}");

    // The sleep's stream (an event stream) carried no response, and the server ended it after
    // the cancel; no response for it came any other way (the script waits 300 ms at the end).
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
        "an event with data on the aborted call's stream:\n{all}"
    );
    assert_eq!(post["end"], "eof", "{all}");
    assert!(
        post["endMs"].as_f64().unwrap() >= cancels[0]["ms"].as_f64().unwrap(),
        "the stream ended before the cancel:\n{all}"
    );
    assert_eq!(
        Report::responses(report.received(), id),
        Vec::<&Value>::new(),
        "{all}"
    );

    // And the server kept serving.
    assert_eq!(echoes.get(1), Some(&json!("still serving")), "{all}");
}

/// b. 2025-11-25: the server gives up on the `sampling/createMessage` it sent; its
/// `notifications/cancelled`, on the stream that carried the request, aborts the sampling
/// handler's `extra.signal` (the handler would wait 30 s), the client answers nothing for it,
/// and the tool result arrives.
#[test]
fn b_server_cancelling_its_sampling_request_aborts_the_handler_signal() {
    let report = run("server_cancels");
    let all = report.lines();
    assert_one_session(&report);

    let asked = report.received_method("sampling/createMessage");
    assert_eq!(asked.len(), 1, "{all}");
    let id = &asked[0]["id"];

    // The server gave up after timeout_ms and told the client, naming its request, after it,
    // on the stream its request went on (the session's GET stream, or the tool call's).
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

    // The handler's signal aborted about timeout_ms after it started, with the server's reason.
    let calls = report.event("sampling_handlers")["calls"]
        .as_array()
        .expect("calls")
        .clone();
    assert_eq!(calls.len(), 1, "{all}");
    assert_eq!(calls[0]["requestId"], *id, "{all}");
    assert_eq!(calls[0]["state"], "aborted", "{all}");
    assert_eq!(calls[0]["reason"], cancels[0]["params"]["reason"], "{all}");
    let after = calls[0]["afterMs"].as_f64().unwrap();
    println!(
        "[server_cancels] sampling handler's signal aborted after {after} ms (timeout_ms 500)"
    );
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
        report.events_named("echo").last().map(|e| &e["text"]),
        Some(&json!("still serving")),
        "{all}"
    );
}
