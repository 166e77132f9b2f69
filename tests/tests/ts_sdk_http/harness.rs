//! The fixtures: our `mcp_server --http` as a child process, one run of http_cancel.mjs in a
//! scenario and its report (the JSON lines, the tapped wire, the server's log), and the check
//! of the session every exchange names.

use std::path::Path;
use std::process::Command;

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
    let node_dir = cancelkit_tests::node::install();
    // node resolves the SDK from the script's directory, where `install` put it.
    let script = node_dir.join("http_cancel.mjs");
    run_client(Path::new(node()), &script, "TypeScript", scenario)
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
