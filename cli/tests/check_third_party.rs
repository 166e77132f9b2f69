//! `cancelkit check mcp` against MCP servers nobody here wrote, pinned, over stdio and Streamable
//! HTTP, with what each does today asserted per check id: every check not listed as failing or
//! not applicable must pass. Each failure below was verified by hand with a raw JSON-RPC client
//! (a few lines of Python on the server's stdio or HTTP endpoint), not only by the check:
//!
//! * `@modelcontextprotocol/server-everything` 2026.8.31 (TypeScript SDK): its
//!   `trigger-long-running-operation {duration, steps}` (the length is not called `seconds`)
//!   honours `notifications/cancelled` for the answer, but its progress goes on to the natural
//!   end: by hand, 14 of 15 progress notifications came after a cancel sent 300 ms in. Its task
//!   tool `simulate-research-query` (`taskSupport: required`) runs only as a task: the plain
//!   scenarios are not applicable, and `tasks/cancel` behaves (cancelled at once, a second cancel
//!   -32602).
//! * FastMCP 4.1.2 (the Python SDK 2.3 underneath), speaking 2026-07-28: `wait {delay_ms}`
//!   stops its progress and sends no answer, but requests in flight are keyed by the id's text,
//!   so `2` and `"2"` are one request: by hand, in both orders, a cancel of either stopped the
//!   later one and the earlier one was answered (over HTTP at 2026-07-28 a cancel closes the
//!   call's stream and names no id, so it does not show there). Over HTTP at 2025-11-25 it answers a cancelled
//!   call with -32800 on its stream (by hand: 3 to 5 ms after the cancel), on purpose (its
//!   transport ends an unanswered request's stream that way), where the specification says
//!   SHOULD NOT.

use std::ffi::OsString;

mod support;

use support::{
    ONLY_2026 as AT_2025, SLOW_CALL_CHECKS as PLAIN, assert_outcomes, check_mcp, explain,
};

/// Not applicable at 2026-07-28 for a server without `subscriptions/listen`.
const AT_2026: [&str; 5] = [
    "mcp.cancel.initialize_id",
    "mcp.tasks.cancel",
    "mcp.tasks.cancel_terminal",
    "mcp.subscriptions.listen_acknowledged",
    "mcp.subscriptions.listen_cancel",
];

/// Runs the check with `options` against `server` (or `--url` in `options`) and asserts the
/// revision and every check's result ([`assert_outcomes`]). Returns the report.
fn assert_today(
    what: &str,
    options: &[&str],
    server: &[OsString],
    revision: &str,
    fail: &[&str],
    na: &[&[&str]],
) -> serde_json::Value {
    let (output, report) = check_mcp(options, server);
    let report = report.unwrap_or_else(|| panic!("{what}: {}", explain(&output)));
    assert_outcomes(what, &output, &report, revision, fail, &na.concat());
    report
}

fn detail<'a>(report: &'a serde_json::Value, id: &str) -> &'a str {
    let checks = report["checks"].as_array().unwrap();
    let check = checks.iter().find(|c| c["id"] == id).unwrap();
    check["detail"].as_str().unwrap()
}

const LONG: [&str; 8] = [
    "--tool",
    "trigger-long-running-operation",
    "--args",
    r#"{"duration": 1.5, "steps": 10}"#,
    "--fast-tool",
    "echo",
    "--fast-args",
    r#"{"message": "cancelkit"}"#,
];

fn server_everything_stdio() -> Vec<OsString> {
    let index = cancelkit_tests::node::server_everything();
    vec!["node".into(), index.into_os_string(), "stdio".into()]
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn server_everything_long_running_operation_over_stdio() {
    let report = assert_today(
        "server-everything (stdio)",
        &LONG,
        &server_everything_stdio(),
        "2025-11-25",
        &["mcp.cancel.progress_stops"],
        &[&AT_2025, &["mcp.tasks.cancel", "mcp.tasks.cancel_terminal"]],
    );
    let progress = detail(&report, "mcp.cancel.progress_stops");
    assert!(progress.contains("the work went on"), "{progress}");
    let slow = &report["slow_call"]["calibration"];
    assert!(slow["natural_ms"].as_f64().unwrap() >= 1500.0, "{slow}");
    assert_eq!(slow["progress_notifications"], 10, "{slow}");
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn server_everything_long_running_operation_over_http() {
    let server = cancelkit_tests::node::start_server_everything_http();
    let mut options = LONG.to_vec();
    options.extend(["--url", server.url()]);
    assert_today(
        "server-everything (HTTP)",
        &options,
        &[],
        "2025-11-25",
        &["mcp.cancel.progress_stops"],
        &[&AT_2025, &["mcp.tasks.cancel", "mcp.tasks.cancel_terminal"]],
    );
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn server_everything_task_tool_over_stdio() {
    let mut options = LONG;
    options[1] = "simulate-research-query";
    options[3] = r#"{"topic": "cancellation"}"#;
    let report = assert_today(
        "server-everything's task tool (stdio)",
        &options,
        &server_everything_stdio(),
        "2025-11-25",
        &[],
        &[&AT_2025, &PLAIN],
    );
    let why = detail(&report, "mcp.cancel.no_response");
    assert!(why.contains("only runs as a task"), "{why}");
}

fn fastmcp_stdio() -> Vec<OsString> {
    let python = cancelkit_tests::python::fastmcp_python();
    let script = cancelkit_tests::python::script("fastmcp_server.py");
    vec![python.into_os_string(), script.into_os_string()]
}

const WAIT: [&str; 8] = [
    "--tool",
    "wait",
    "--args",
    r#"{"delay_ms": 1000}"#,
    "--fast-tool",
    "add",
    "--fast-args",
    r#"{"a": 1, "b": 2}"#,
];

/// What FastMCP's `wait` does not offer at 2026-07-28: it is not a task tool.
const NO_TASK: [&str; 3] = [
    "mcp.tasks.ext.cancel_acknowledged",
    "mcp.tasks.ext.terminal",
    "mcp.tasks.ext.cancel_repeated",
];

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn fastmcp_over_stdio() {
    let report = assert_today(
        "FastMCP (stdio)",
        &WAIT,
        &fastmcp_stdio(),
        "2026-07-28",
        &["mcp.cancel.no_response", "mcp.cancel.id_types"],
        &[&AT_2026, &NO_TASK],
    );
    let ids = detail(&report, "mcp.cancel.id_types");
    assert!(
        ids.contains("\"2\" and 2 (sent first: \"2\"): 2 got no answer"),
        "{ids}"
    );
    assert!(detail(&report, "mcp.cancel.progress_stops").contains("none after it"));
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn fastmcp_task_tool_over_stdio() {
    let mut options = WAIT.to_vec();
    options[1] = "wait_task";
    options[3] = r#"{"delay_ms": 1500}"#;
    assert_today(
        "FastMCP's task tool (stdio)",
        &options,
        &fastmcp_stdio(),
        "2026-07-28",
        &["mcp.cancel.no_response", "mcp.cancel.id_types"],
        &[&AT_2026],
    );
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn fastmcp_over_http() {
    let server = cancelkit_tests::python::start_fastmcp_http();
    let mut options = WAIT.to_vec();
    options.extend(["--url", server.url()]);
    // At 2026-07-28 over HTTP a cancel closes the call's stream (which carried its progress):
    // it names no id, so the ids' mix-up does not show.
    let report = assert_today(
        "FastMCP (HTTP)",
        &options,
        &[],
        "2026-07-28",
        &[],
        &[&AT_2026, &NO_TASK, &["mcp.cancel.progress_stops"]],
    );
    assert!(detail(&report, "mcp.cancel.progress_stops").contains("closed"));
    // At 2025-11-25 the cancel is a POSTed notification, and the cancelled call is answered.
    options.extend(["--revision", "2025-11-25"]);
    let report = assert_today(
        "FastMCP (HTTP, 2025-11-25)",
        &options,
        &[],
        "2025-11-25",
        &[
            "mcp.cancel.no_response",
            "mcp.cancel.id_types",
            "mcp.cancel.parallel.cancelled_silent",
        ],
        &[&AT_2025, &["mcp.tasks.cancel", "mcp.tasks.cancel_terminal"]],
    );
    let answered = detail(&report, "mcp.cancel.no_response");
    assert!(answered.contains("answered with an error"), "{answered}");
}
