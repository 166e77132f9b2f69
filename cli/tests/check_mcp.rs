//! `cancelkit check mcp` run as a real process: against the cancelkit runtime's `mcp_server`
//! example (every check passes), against a deliberately broken Python server (exactly its faults
//! fail, with evidence), and against commands that cannot be spoken to (exit code 2).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_cancelkit");

/// Every check's stable id, in the order they run.
const IDS: [&str; 10] = [
    "mcp.cancel.no_response",
    "mcp.cancel.keeps_serving",
    "mcp.cancel.unknown_id",
    "mcp.cancel.completed_id",
    "mcp.cancel.initialize_id",
    "mcp.cancel.malformed",
    "mcp.cancel.id_types",
    "mcp.cancel.parallel.others_answered",
    "mcp.cancel.parallel.cancelled_silent",
    "mcp.cancel.responsiveness",
];

fn broken_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/broken_mcp_server.py")
        .display()
        .to_string()
}

/// Runs `cancelkit check mcp OPTIONS -- SERVER` with `--json`; the output and the report.
fn check(options: &[&str], server: &[&str]) -> (Output, Option<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let output = Command::new(BIN)
        .args(["check", "mcp", "--json"])
        .arg(&json)
        .args(options)
        .arg("--")
        .args(server)
        .output()
        .unwrap();
    let report = std::fs::read(&json)
        .ok()
        .map(|bytes| serde_json::from_slice(&bytes).expect("the report is JSON"));
    (output, report)
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

fn ids(report: &Value) -> Vec<&str> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect()
}

fn explain(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn cancelkits_mcp_server_passes_every_check_at_2026_07_28() {
    let server = cancelkit_tests::example("mcp_server");
    let (output, report) = check(&[], &[server.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let report = report.expect("--json wrote the report");
    assert_eq!(report["revision"], "2026-07-28");
    assert_eq!(report["negotiated_by"], "server/discover");
    assert_eq!(report["verdict"], "pass");
    assert_eq!(ids(&report), IDS);
    assert!(checks_with(&report, "fail").is_empty());
    // 2026-07-28 has no initialize to cancel
    let na = checks_with(&report, "not_applicable");
    assert_eq!(na, BTreeSet::from(["mcp.cancel.initialize_id".to_owned()]));
    let timing = &report["checks"][9]["metrics"];
    assert_eq!(timing["answered"], 20, "{timing}");
    assert!(timing["p99_ms"].as_f64().unwrap() >= timing["p50_ms"].as_f64().unwrap());
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("mcp.cancel.id_types") && table.contains("verdict: pass"));
}

#[test]
fn cancelkits_mcp_server_passes_every_check_at_2025_11_25() {
    let server = cancelkit_tests::example("mcp_server");
    let (output, report) = check(&["--revision", "2025-11-25"], &[server.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2025-11-25");
    assert_eq!(report["negotiated_by"], "forced");
    assert_eq!(checks_with(&report, "pass").len(), IDS.len(), "{report:#}");
}

#[test]
fn a_server_that_answers_cancels_fails_exactly_those_checks() {
    let server = broken_server();
    let (output, report) = check(&["--musts-only"], &["python3", &server]);
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
    let evidence = |id: &str| {
        let check = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap();
        check["evidence"].to_string()
    };
    assert!(evidence("mcp.cancel.no_response").contains("-32800"));
    assert!(evidence("mcp.cancel.malformed").contains(r#"\"id\":null"#));
    assert!(evidence("mcp.cancel.parallel.cancelled_silent").contains("request cancelled"));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("mcp.cancel.malformed evidence:"), "{table}");
}

#[test]
fn musts_only_lets_a_failed_should_pass() {
    let server = broken_server();
    let broken = ["python3", server.as_str(), "--ignore-malformed"];
    let (output, report) = check(&[], &broken);
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let failed = checks_with(&report.unwrap(), "fail");
    assert!(failed.contains("mcp.cancel.no_response"), "{failed:?}");
    let (output, report) = check(&["--musts-only"], &broken);
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
