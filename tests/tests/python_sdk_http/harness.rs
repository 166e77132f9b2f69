//! The fixtures: our `mcp_server --http` as a child process, one run of
//! http_cancel_interop.py in a scenario and its report (the JSON lines, the tapped wire, the
//! server's log), what both eras' client cancels must show, and the check of what the client
//! logged.

use std::sync::OnceLock;

use serde_json::{Value, json};

/// The stamp of a 2026-07-28 request's protocol version in `params._meta`.
pub(crate) const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

pub(crate) use crate::sdk_http::{Report, run_client};

/// Starts a server and runs http_cancel_interop.py against it in one scenario.
pub(crate) fn run(scenario: &'static str) -> Report {
    let python = cancelkit_tests::python::sdk_python();
    let script = cancelkit_tests::python::script("http_cancel_interop.py");
    run_client(&python, &script, "Python", scenario)
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
    // did anything else the client read (the script waits 3.5 s after the cancel in a session,
    // 300 ms after its last call at 2026-07-28).
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

/// What the client logged (the `mcp`, `httpx2` and `httpx` loggers, and captured warnings):
/// the records at WARNING and above, one a line (`+MS ms LEVEL LOGGER: MESSAGE`, MS since the
/// client started), what the SDK logged about resuming streams (at DEBUG and INFO), and how many
/// records it logged at each level.
pub(crate) fn reported(report: &Report) -> String {
    let log = report.event("log");
    let records = log["records"].as_array().expect("records");
    let line = |r: &Value| {
        let exc = r["exc"]
            .as_str()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        let message = r["message"].as_str().unwrap_or_default();
        let message = message.lines().next().unwrap_or_default();
        format!(
            "  +{} ms {} {}: {message}{exc}",
            r["ms"],
            r["level"].as_str().unwrap_or_default(),
            r["logger"].as_str().unwrap_or_default()
        )
    };
    let listed = |keep: &dyn Fn(&Value) -> bool| {
        let lines: Vec<_> = records.iter().filter(|r| keep(r)).map(line).collect();
        if lines.is_empty() {
            "  (nothing)".to_owned()
        } else {
            lines.join("\n")
        }
    };
    let loud = listed(&|r| is_loud(r));
    let resuming = listed(&|r| {
        !is_loud(r)
            && r["message"]
                .as_str()
                .is_some_and(|m| m.to_lowercase().contains("reconnect"))
    });
    format!(
        "at WARNING and above:\n{loud}\nabout resuming (DEBUG, INFO):\n{resuming}\nrecords at each level: {}",
        log["counts"]
    )
}

fn is_loud(record: &Value) -> bool {
    !matches!(record["level"].as_str(), Some("DEBUG" | "INFO"))
}

/// Asserts the client logged nothing at WARNING or above (the SDK logs a resumption that failed,
/// and giving up on one, at DEBUG; trouble it means to show, at WARNING and above).
pub(crate) fn assert_quiet(report: &Report) {
    let scenario = report.scenario;
    let reported = reported(report);
    let records = report.event("log")["records"].as_array().expect("records");
    assert!(
        !records.iter().any(is_loud),
        "[{scenario}] the Python client logged at WARNING or above:\n{reported}\nits GETs besides \
         the session's stream (ms since it started):\n{}\n\n{}",
        crate::sdk_http::describe_gets(&report.reconnects(), 0.0),
        report.lines()
    );
    println!("[{scenario}] the Python client logged:\n{reported}");
}
