//! What the official SDKs' clients over Streamable HTTP share (python_sdk_http, ts_sdk_http):
//! our `mcp_server --http` as a child process, the report of one run of a client script
//! (its JSON lines, the tapped wire, the server's log), and the check of how the client's
//! resumptions of a stream that owes nothing more were answered.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::ops::RangeInclusive;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// `mcp_server --http 127.0.0.1:0`, its stderr in a file; killed when dropped.
pub(crate) struct HttpServer {
    child: Child,
    stdout: BufReader<ChildStdout>,
    pub(crate) url: String,
    pub(crate) log: tempfile::NamedTempFile,
}

impl HttpServer {
    pub(crate) fn start() -> HttpServer {
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

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).expect("the server's log")
    }

    /// Stops the server; its whole log, after checking that it printed nothing more on stdout
    /// than its one line.
    pub(crate) fn stop(mut self) -> String {
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

/// What one run of an SDK client script reported: its JSON lines, the last being the wire,
/// and the server's log.
pub(crate) struct Report {
    pub(crate) scenario: &'static str,
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

    /// The GET that opened the session's own stream: the client's first GET without a
    /// `Last-Event-ID`.
    pub(crate) fn session_stream(&self) -> Option<&Value> {
        self.exchanges()
            .iter()
            .find(|e| e["method"] == "GET" && e["headers"].get("last-event-id").is_none())
    }

    /// Every GET but the one that opened the session's stream: resumptions (with a
    /// `Last-Event-ID`), and GETs without one, which a client makes to reconnect (the TS SDK does
    /// after a resumed stream that ended without carrying an event id).
    pub(crate) fn reconnects(&self) -> Vec<&Value> {
        let session = self.session_stream().map(|e| &e["n"]);
        self.exchanges()
            .iter()
            .filter(|e| e["method"] == "GET" && Some(&e["n"]) != session)
            .collect()
    }

    /// The resumptions of the stream that answered `post`: the GETs whose `Last-Event-ID` is
    /// the id of an event that stream carried, or that an earlier resumption of it carried.
    pub(crate) fn resumptions_of(&self, post: &Value) -> Vec<&Value> {
        let ids_of = |exchange: &Value| -> Vec<String> {
            let events = exchange["events"].as_array().into_iter().flatten();
            events
                .filter_map(|e| e["id"].as_str().map(str::to_owned))
                .collect()
        };
        let mut ids: HashSet<String> = ids_of(post).into_iter().collect();
        let mut resumed = Vec::new();
        for get in self.reconnects() {
            let last = get["headers"]["last-event-id"].as_str();
            if last.is_some_and(|last| ids.contains(last)) {
                ids.extend(ids_of(get));
                resumed.push(get);
            }
        }
        resumed
    }

    /// Asserts how the client's reconnections went after calls' streams that owe nothing more
    /// (their calls cancelled or answered) ended: for each `(post, what, count)`, the stream
    /// that answered `post` (the `what` stream) was resumed `count` times (more than 2 is the
    /// clients' reconnect loop); the client made no other GET than those and the session's
    /// stream; and each resumption was answered 405 with `Allow: POST, DELETE`. `reported` is
    /// what the client reported, for the failure messages. Returns the resumptions, per stream.
    pub(crate) fn assert_resumptions_told_ended(
        &self,
        streams: &[(&Value, &str, RangeInclusive<usize>)],
        reported: &str,
    ) -> Vec<Vec<&Value>> {
        let scenario = self.scenario;
        let all = self.lines();
        let (first, first_what, _) = &streams[0];
        let since = first["endMs"].as_f64().unwrap_or_default();
        let gets = format!(
            "the GETs besides the session's stream (ms after the {first_what} stream ended):\n{}",
            describe_gets(&self.reconnects(), since)
        );
        let mut resumed = Vec::new();
        for (post, what, count) in streams {
            let of = self.resumptions_of(post);
            assert!(
                count.contains(&of.len()),
                "[{scenario}] the client resumed the {what} stream {} times, not {count:?} (more \
                 than 2 is a reconnect loop); {gets}\nthe client reported:\n{reported}\n\n{all}",
                of.len()
            );
            resumed.push(of);
        }
        let accounted: usize = resumed.iter().map(Vec::len).sum();
        let made = self.reconnects().len();
        assert!(
            made == accounted,
            "[{scenario}] the client made {made} GETs besides the session's stream, {accounted} of \
             them resuming those streams: the others are reconnections too (the TS SDK reconnects \
             without Last-Event-ID after a resumed stream that carried no event id: a reconnect \
             loop); {gets}\nthe client reported:\n{reported}\n\n{all}"
        );
        for (of, (_, what, _)) in resumed.iter().zip(streams) {
            for get in of {
                assert!(
                    get["status"] == 405 && get["responseHeaders"]["allow"] == "POST, DELETE",
                    "[{scenario}] a resumption of the {what} stream was not answered 405 with \
                     `Allow: POST, DELETE`; {gets}\nthe client reported:\n{reported}\n\n{all}"
                );
            }
        }
        println!("[{scenario}] {gets}");
        resumed
    }

    /// Asserts the session still served calls after `resumed`: the last `echo` was POSTed after
    /// the last of them, and answered.
    pub(crate) fn assert_served_after(&self, resumed: &[&Value]) {
        let all = self.lines();
        let echo = self
            .posts("tools/call")
            .into_iter()
            .rfind(|e| e["body"]["params"]["name"] == "echo")
            .expect("an echo");
        let last = resumed
            .last()
            .map_or(0.0, |get| get["ms"].as_f64().unwrap());
        assert!(
            echo["ms"].as_f64().unwrap() > last,
            "[{}] the last echo was not called after the resumptions:\n{all}",
            self.scenario
        );
        assert_eq!(echo["status"], 200, "{all}");
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

/// GETs, one a line: `+MS ms GET Last-Event-ID: ID -> STATUS`, MS counted from `since` (the
/// client's clock, as the exchanges' `ms`: when the resumed stream ended, say).
pub(crate) fn describe_gets(gets: &[&Value], since: f64) -> String {
    if gets.is_empty() {
        return "  (none)".to_owned();
    }
    gets.iter()
        .map(|get| {
            format!(
                "  +{:.0} ms GET Last-Event-ID: {} -> {}",
                get["ms"].as_f64().unwrap_or_default() - since,
                get["headers"]["last-event-id"].as_str().unwrap_or("-"),
                get["status"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Starts a server and runs `interpreter script URL LOG scenario` against it (the `client`, as
/// failures name it): the client's JSON lines, and the server's log.
pub(crate) fn run_client(
    interpreter: &Path,
    script: &Path,
    client: &str,
    scenario: &'static str,
) -> Report {
    let server = HttpServer::start();
    // The support code's runner for scripts: `interpreter script args...` with a time limit.
    let run = cancelkit_tests::python::run(
        interpreter,
        script,
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
        "[{scenario}] the {client} client failed ({}):\n{}\n{}\n--- server log ---\n{server_log}",
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
