//! `cancelkit check mcp --url` against the gateway's `/mcp`, as an operator would run it: the
//! cancelkit command (built from `cli/`) with the caller's token in `--header`, at 2026-07-28
//! (a closed response stream is the cancel) and at 2025-11-25 (a POSTed
//! `notifications/cancelled`). Every cancellation check passes, and the demo upstream behind
//! the gateway logs every cancelled `sleep` as stopped.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::Gateway;

/// Runs the check at `revision` against `gateway` as alice; the report.
fn check(gateway: &Gateway, revision: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let output = support::cancelkit_check(gateway, revision)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let shown = format!(
        "exit {:?}\n{}\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{shown}");
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

/// The ids of the checks with `result`.
fn with(report: &Value, result: &str) -> Vec<String> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["result"] == result)
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

/// No check failed, and all eleven `mcp.cancel.*` checks passed, except `initialize_id` where
/// the revision has no `initialize` and `progress_stops` at 2026-07-28 (the cancel closes the
/// stream that carried the progress).
fn every_cancel_check_passed(report: &Value, legacy: bool) {
    assert!(with(report, "fail").is_empty(), "{report:#}");
    let passed = with(report, "pass");
    let cancel = passed.iter().filter(|id| id.starts_with("mcp.cancel."));
    let expected = if legacy { 11 } else { 9 };
    assert_eq!(cancel.count(), expected, "{report:#}");
}

/// The cancelled sleeps the demo upstream logged as stopped.
fn stopped(gateway: &Gateway) -> usize {
    gateway.count_stderr("cancelled tools/call sleep")
}

#[test]
fn the_gateway_passes_at_2026_07_28() {
    let gateway = Gateway::start();
    let report = check(&gateway, "2026-07-28");
    assert_eq!(report["revision"], "2026-07-28");
    every_cancel_check_passed(&report, false);
    // the gateway relays subscriptions/listen to no upstream, and cancels nothing of its own
    let passed = with(&report, "pass");
    assert!(passed.contains(&"mcp.subscriptions.server_cancels_only_listen".to_owned()));
    // 1 in flight, one of each of the 4 id pairs, 50 of the parallel ones and 20 in the
    // responsiveness loop: each closed stream stopped its sleep behind the gateway
    gateway.wait_for_stderr("cancelled tools/call sleep", Duration::from_secs(5));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while stopped(&gateway) < 72 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(stopped(&gateway) >= 72, "{}", gateway.stderr());
}

#[test]
fn the_gateway_passes_at_2025_11_25() {
    let gateway = Gateway::start();
    let report = check(&gateway, "2025-11-25");
    assert_eq!(report["revision"], "2025-11-25");
    every_cancel_check_passed(&report, true);
    // the demo upstream's progress, relayed by the gateway, stops with the cancel
    assert!(with(&report, "pass").contains(&"mcp.cancel.progress_stops".to_owned()));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while stopped(&gateway) < 72 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(stopped(&gateway) >= 72, "{}", gateway.stderr());
}
