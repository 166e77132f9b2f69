//! The fixtures: our `mcp_server --http` as a child process, one run of http_cancel.mjs in a
//! scenario and its report (the JSON lines, the tapped wire, the server's log), and the check
//! of the session every exchange names.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

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
pub(crate) struct Report {
    scenario: &'static str,
    pub(crate) events: Vec<Value>,
    pub(crate) server_log: String,
}

impl Report {
    /// The first line with this `event`.
    pub(crate) fn event(&self, name: &str) -> &Value {
        self.events
            .iter()
            .find(|e| e["event"] == name)
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
pub(crate) fn run(scenario: &'static str) -> Report {
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
pub(crate) fn assert_one_session(report: &Report) -> String {
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
