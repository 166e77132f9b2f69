//! The fixtures: our `mcp_server --http` as a child process, one run of http_cancel.mjs in a
//! scenario and its report (the JSON lines, the tapped wire, the server's log), the check of
//! the session every exchange names, and of what the client reported.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

pub(crate) use crate::sdk_http::{Report, run_client};

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
    let node_dir = cancelkit_tests::node::dir();
    // node resolves the SDK from the script's directory, where `install` put it.
    let script = node_dir.join("http_cancel.mjs");
    run_client(Path::new(node()), &script, "TypeScript", scenario)
}

/// The scenarios that keep their session open 3.5 s for the SDK's resumptions of a stream.
const WAITING: [&str; 2] = ["client_cancels", "error_answer"];

/// One of the `WAITING` scenarios' runs: the first test to ask starts them all at once (each
/// with its server), so that their waits overlap instead of adding up.
pub(crate) fn waiting_run(scenario: &'static str) -> &'static Report {
    static RUNS: OnceLock<Vec<(&str, Result<Report, String>)>> = OnceLock::new();
    let runs = RUNS.get_or_init(|| {
        std::thread::scope(|scope| {
            let started: Vec<_> = WAITING
                .iter()
                .map(|&name| (name, scope.spawn(move || run(name))))
                .collect();
            started
                .into_iter()
                .map(|(name, thread)| {
                    let run = thread.join().map_err(|panic| {
                        let message = panic.downcast_ref::<String>().cloned();
                        let message = message
                            .or_else(|| panic.downcast_ref::<&str>().map(|m| (*m).to_owned()));
                        message.unwrap_or_else(|| "the run panicked".to_owned())
                    });
                    (name, run)
                })
                .collect()
        })
    });
    match runs.iter().find(|(name, _)| *name == scenario) {
        Some((_, Ok(report))) => report,
        Some((_, Err(message))) => panic!("{message}"),
        None => panic!("{scenario} is not one of {WAITING:?}"),
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
    // (Any other GET is a reconnection, which the tests account for.)
    let get = report.session_stream().expect("the session's GET stream");
    assert_eq!(get["status"], 200, "{all}");
    assert_eq!(get["responseHeaders"]["content-type"], "text/event-stream");
    // It ended with the client's DELETE.
    let last = exchanges.last().expect("exchanges");
    assert_eq!(last["method"], "DELETE", "{all}");
    assert_eq!(last["status"], 200, "{all}");
    session
}

/// What the client reported (`transport.onerror`, `Client.onerror`, console.error / warn), one
/// a line: `+MS ms SOURCE: MESSAGE` (MS since the client started), while the session was open,
/// then while it was ending.
pub(crate) fn reported(report: &Report) -> String {
    let lines = |member: &str| {
        let errors = report.event("transport_errors")[member].as_array();
        errors
            .expect("reported errors")
            .iter()
            .map(|e| {
                format!(
                    "  +{} ms {}: {}",
                    e["ms"],
                    as_str(&e["source"]),
                    as_str(&e["message"])
                )
            })
            .collect::<Vec<_>>()
    };
    let (open, closing) = (lines("errors"), lines("whileClosing"));
    let none = |lines: &[String]| {
        if lines.is_empty() {
            "  (nothing)".to_owned()
        } else {
            lines.join("\n")
        }
    };
    format!(
        "while the session was open:\n{}\nwhile it was ending:\n{}",
        none(&open),
        none(&closing)
    )
}

fn as_str(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// Asserts the client reported nothing while the session was open (it reports a resumption
/// that failed, and giving up on one, to `transport.onerror` and `Client.onerror`), and nothing
/// but the abort of its own streams once it was ending it (`close()` aborts the session's GET
/// stream, which the SDK sometimes reports as a disconnect).
pub(crate) fn assert_quiet(report: &Report) {
    let scenario = report.scenario;
    let reported = reported(report);
    let errors = &report.event("transport_errors");
    assert_eq!(
        errors["errors"].as_array().map(Vec::len),
        Some(0),
        "[{scenario}] the TypeScript client reported errors (ms since it started):\n{reported}\n\
         its GETs besides the session's stream:\n{}\n\n{}",
        crate::sdk_http::describe_gets(&report.reconnects(), 0.0),
        report.lines()
    );
    let closing = errors["whileClosing"].as_array().expect("whileClosing");
    assert!(
        closing
            .iter()
            .all(|e| as_str(&e["message"]).contains("AbortError")),
        "[{scenario}] the TypeScript client reported more than its own aborts while the session \
         ended:\n{reported}\n\n{}",
        report.lines()
    );
    println!("[{scenario}] the TypeScript client reported:\n{reported}");
}
