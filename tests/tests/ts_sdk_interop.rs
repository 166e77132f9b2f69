//! The official TypeScript MCP SDK (pinned in tests/node/package.json, installed under
//! target/interop/node) against our `mcp_server` example: a client aborts a `tools/call` with an
//! `AbortController`; our server logs the cancellation, sends no response for it, and keeps
//! serving.

use std::process::Command;

use serde_json::Value;

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn typescript_client_aborting_a_tool_call() {
    let node_dir = cancelkit_tests::node::dir();
    let server = cancelkit_tests::example("mcp_server");
    let output = Command::new("node")
        .arg("abort_tool_call.mjs")
        .arg(&server)
        .current_dir(&node_dir)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the TypeScript client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let id = &report["sleepRequestId"];
    assert!(!id.is_null(), "{report}");

    // The SDK sent notifications/cancelled for the aborted call...
    assert_eq!(
        report["cancelSent"][0]["params"]["requestId"], *id,
        "{report}"
    );
    assert_eq!(
        report["cancelSent"][0]["params"]["reason"],
        "user pressed stop"
    );
    // ...and gave up at once (it reports a user abort as -32001 "Request timeout" style error).
    assert!(
        report["outcome"].as_str().unwrap().starts_with("rejected"),
        "{report}"
    );
    assert!(
        report["abortedAfterMs"].as_u64().unwrap() < 5_000,
        "{report}"
    );

    // Our server logged it with the id and reason, stopped the tool, and sent nothing for it.
    let log = report["serverLog"].as_str().unwrap();
    assert!(
        log.contains(&format!(
            "the peer cancelled a request request_id={id} reason=\"user pressed stop\""
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!("sleep tool stopped request_id={id}")),
        "{log}"
    );
    assert_eq!(
        report["responsesToSleep"],
        serde_json::json!([]),
        "{report}"
    );
    // And it kept serving.
    assert_eq!(report["echo"], "still serving");
}
