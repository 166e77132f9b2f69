//! `cancelkit check mcp` run as a real process: against a deliberately broken Python server
//! (exactly its faults fail, with evidence), and against commands that cannot be spoken to (exit
//! code 2). The real servers, the cancelkit runtime's `mcp_server` example among them, are in
//! `check_peers.rs`.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

mod support;

use support::{MCP_CHECK_IDS as IDS, check_mcp as check, evidence, explain, ids};

/// 1 s slow calls (twice the calibration's minimum) and short waits keep each run to seconds;
/// the broken task never ends, so `mcp.tasks.ext.terminal` waits out `--timeout` plus the slow
/// call's length.
const QUICK: [&str; 4] = ["--args", r#"{"seconds": 1}"#, "--timeout", "1"];

fn broken_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/broken_mcp_server.py")
        .display()
        .to_string()
}

fn checks_with(report: &Value, result: &str) -> BTreeSet<String> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["result"] == result)
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_server_that_answers_cancels_fails_exactly_those_checks() {
    let server = broken_server();
    let (output, report) = check(
        &[&QUICK[..], &["--musts-only"]].concat(),
        &[cancelkit_tests::external::python3(), &server],
    );
    // the reply to a malformed cancel breaks a MUST: --musts-only fails too
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2025-11-25");
    assert_eq!(report["negotiated_by"], "initialize");
    assert_eq!(ids(&report), IDS);
    let failed = checks_with(&report, "fail");
    let expected = [
        "mcp.cancel.no_response",
        "mcp.cancel.malformed",
        "mcp.cancel.parallel.cancelled_silent",
    ];
    assert_eq!(failed, expected.map(String::from).into(), "{report:#}");
    let evidence = |id: &str| evidence(&report, id);
    assert!(evidence("mcp.cancel.no_response").contains("-32800"));
    assert!(evidence("mcp.cancel.malformed").contains(r#"\"id\":null"#));
    assert!(evidence("mcp.cancel.parallel.cancelled_silent").contains("request cancelled"));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("mcp.cancel.malformed evidence:"), "{table}");
}

fn tasks_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/broken_tasks_server.py")
        .display()
        .to_string()
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_2026_server_that_breaks_tasks_and_subscriptions_fails_exactly_those_checks() {
    let (output, report) = check(
        &QUICK,
        &[cancelkit_tests::external::python3(), &tasks_server()],
    );
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2026-07-28");
    assert_eq!(ids(&report), IDS);
    let expected = [
        "mcp.tasks.ext.cancel_acknowledged",
        "mcp.tasks.ext.terminal",
        "mcp.tasks.ext.cancel_repeated",
        "mcp.subscriptions.listen_acknowledged",
        "mcp.subscriptions.listen_cancel",
        "mcp.subscriptions.server_cancels_only_listen",
    ];
    let failed = checks_with(&report, "fail");
    assert_eq!(failed, expected.map(String::from).into(), "{report:#}");
    assert!(evidence(&report, "mcp.tasks.ext.cancel_acknowledged").contains("-32603"));
    assert!(evidence(&report, "mcp.tasks.ext.terminal").contains(r#"\"status\":\"working\""#));
    assert!(evidence(&report, "mcp.subscriptions.listen_acknowledged").contains("acknowledged"));
    assert!(evidence(&report, "mcp.subscriptions.listen_cancel").contains("resultType"));
    let cancels = evidence(&report, "mcp.subscriptions.server_cancels_only_listen");
    assert!(cancels.contains("echoed"), "{cancels}");
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_2025_server_that_answers_tasks_cancel_too_early_fails_exactly_those_checks() {
    let (output, report) = check(
        &QUICK,
        &[
            cancelkit_tests::external::python3(),
            &tasks_server(),
            "--legacy",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2025-11-25");
    let expected = ["mcp.tasks.cancel", "mcp.tasks.cancel_terminal"];
    let failed = checks_with(&report, "fail");
    assert_eq!(failed, expected.map(String::from).into(), "{report:#}");
    let cancel = evidence(&report, "mcp.tasks.cancel");
    assert!(cancel.contains(r#"\"status\":\"working\""#), "{cancel}");
}

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn musts_only_lets_a_failed_should_pass() {
    let server = broken_server();
    let broken = [
        cancelkit_tests::external::python3(),
        server.as_str(),
        "--ignore-malformed",
    ];
    let (output, report) = check(&QUICK, &broken);
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let failed = checks_with(&report.unwrap(), "fail");
    assert!(failed.contains("mcp.cancel.no_response"), "{failed:?}");
    let (output, report) = check(&[&QUICK[..], &["--musts-only"]].concat(), &broken);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    assert_eq!(report.unwrap()["verdict"], "pass");
}

#[test]
fn a_command_that_does_not_exist_exits_2() {
    let (output, report) = check(&[], &["/nonexistent/cancelkit-no-such-server"]);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    assert!(report.is_none());
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot start"));
}

#[test]
fn a_server_that_never_answers_exits_2() {
    let (output, _) = check(&["--timeout", "0.5"], &["sleep", "30"]);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("initialize"));
}
