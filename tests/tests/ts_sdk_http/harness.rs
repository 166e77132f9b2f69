//! The fixtures: our `mcp_server --http` as a child process, one run of http_cancel.mjs in a
//! scenario and its report (the JSON lines, the tapped wire, the server's log), and the check
//! of the session every exchange names.

use std::ffi::OsStr;
use std::process::Command;
use std::time::Duration;

pub(crate) use crate::sdk_http::{HttpServer, Report};

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
