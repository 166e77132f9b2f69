//! The fixtures: our `mcp_server --http` as a child process, one run of
//! http_cancel_interop.py in a scenario and its report (the JSON lines, the tapped wire, the
//! server's log), and what both eras' client cancels must show.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

/// The stamp of a 2026-07-28 request's protocol version in `params._meta`.
pub(crate) const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

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
pub(crate) struct Report {
    scenario: &'static str,
    pub(crate) events: Vec<Value>,
    pub(crate) server_log: String,
}

impl Report {
    /// The first line with this `event`.
    pub(crate) fn event(&self, name: &str) -> &Value {
        self.events_named(name)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("[{}] no {name:?} line:\n{}", self.scenario, self.lines()))
    }

    pub(crate) fn events_named(&self, name: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == name).collect()
    }

    /// Every HTTP exchange, in the order the client made them: `{n, ms, method, headers, body,
    /// status, responseHeaders, events, comments, json, end, closedMs}`.
    pub(crate) fn exchanges(&self) -> &[Value] {
        self.event("wire")["exchanges"]
            .as_array()
            .expect("exchanges")
    }

    /// The POSTs of a JSON-RPC message with this method.
    pub(crate) fn posts(&self, method: &str) -> Vec<&Value> {
        self.exchanges()
            .iter()
            .filter(|e| e["method"] == "POST" && e["body"]["method"] == method)
            .collect()
    }

    /// The POST of the `tools/call` of this tool (there is one per tool in a run).
    pub(crate) fn tool_post(&self, tool: &str) -> &Value {
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
    pub(crate) fn sent(&self) -> Vec<&Value> {
        self.exchanges()
            .iter()
            .filter(|e| e["method"] == "POST")
            .map(|e| &e["body"])
            .collect()
    }

    /// Every message the client received: JSON bodies and the data of SSE events (the priming
    /// events carry none).
    pub(crate) fn received(&self) -> Vec<&Value> {
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
    pub(crate) fn received_method(&self, method: &str) -> Vec<&Value> {
        self.received()
            .into_iter()
            .filter(|m| m["method"] == method)
            .collect()
    }

    /// Responses (results or errors) with this id among `messages`.
    pub(crate) fn responses<'a>(messages: Vec<&'a Value>, id: &Value) -> Vec<&'a Value> {
        messages
            .into_iter()
            .filter(|m| m.get("method").is_none() && m["id"] == *id)
            .collect()
    }

    /// The whole report, for failure messages.
    pub(crate) fn lines(&self) -> String {
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
pub(crate) fn run(scenario: &'static str) -> Report {
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
pub(crate) fn discover_run() -> &'static Report {
    static RUN: OnceLock<Report> = OnceLock::new();
    RUN.get_or_init(|| run("discover"))
}

/// What both eras share: the client's call was cancelled while running, the server logged that
/// the tool stopped (promptly, with `reason`), no response for it reached the client, not even
/// late, and the next call was answered. Returns the log line of the stop.
pub(crate) fn assert_client_cancel_honoured<'a>(
    report: &'a Report,
    version: &str,
    reason: &str,
) -> &'a str {
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
