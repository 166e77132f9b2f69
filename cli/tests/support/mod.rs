//! A JSON-RPC session driven through `cancelkit trace`, shared by the tests that record a real
//! session and look at its timeline. Not every test uses every helper.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `cancelkit` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_cancelkit");

/// A server running behind `cancelkit trace --out TRACE`, spoken to one line at a time.
pub struct Traced {
    proxy: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Traced {
    /// Starts `command` behind the proxy, recording into `out`; the server's stderr goes to
    /// `stderr`.
    pub fn start<S: AsRef<OsStr>>(out: &Path, command: &[S], stderr: Stdio) -> Traced {
        let mut proxy = Command::new(BIN)
            .arg("trace")
            .arg("--out")
            .arg(out)
            .arg("--")
            .args(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("the proxy starts");
        let stdin = proxy.stdin.take();
        let stdout = BufReader::new(proxy.stdout.take().expect("piped"));
        Traced {
            proxy,
            stdin,
            stdout,
        }
    }

    /// Sends one message.
    pub fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("not finished");
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Reads the next message.
    pub fn receive(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// Closes the server's input and asserts that the proxy (and with it the server) exits with
    /// success within 20 s.
    pub fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = self.proxy.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the server did not exit at EOF");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status:?}");
    }
}

/// `cancelkit trace view TRACE -o HTML`; returns the page.
pub fn view(trace: &Path, html: &Path) -> String {
    let view = Command::new(BIN)
        .args(["trace", "view"])
        .arg(trace)
        .arg("-o")
        .arg(html)
        .output()
        .unwrap();
    assert!(view.status.success(), "{view:?}");
    std::fs::read_to_string(html).unwrap()
}

/// Every check id of `cancelkit check acp`, in the order they are reported.
pub const ACP_CHECK_IDS: [&str; 13] = [
    "acp.cancel_request.answered_once",
    "acp.cancel_request.honoured",
    "acp.cancel_request.keeps_serving",
    "acp.cancel_request_draft.answered_once",
    "acp.cancel_request_draft.keeps_serving",
    "acp.session_cancel.stop_reason",
    "acp.session_cancel.updates_stop",
    "acp.session_cancel.cascade",
    "acp.session_cancel.keeps_serving",
    "acp.ignore.unknown_id",
    "acp.ignore.completed_id",
    "acp.ignore.malformed",
    "acp.initialize.not_cancelled",
];

/// Every check id of `cancelkit check mcp`, in the order they are reported.
pub const MCP_CHECK_IDS: [&str; 19] = [
    "mcp.cancel.no_response",
    "mcp.cancel.progress_stops",
    "mcp.cancel.keeps_serving",
    "mcp.cancel.unknown_id",
    "mcp.cancel.completed_id",
    "mcp.cancel.initialize_id",
    "mcp.cancel.malformed",
    "mcp.cancel.id_types",
    "mcp.cancel.parallel.others_answered",
    "mcp.cancel.parallel.cancelled_silent",
    "mcp.cancel.responsiveness",
    "mcp.tasks.cancel",
    "mcp.tasks.cancel_terminal",
    "mcp.tasks.ext.cancel_acknowledged",
    "mcp.tasks.ext.terminal",
    "mcp.tasks.ext.cancel_repeated",
    "mcp.subscriptions.listen_acknowledged",
    "mcp.subscriptions.listen_cancel",
    "mcp.subscriptions.server_cancels_only_listen",
];

/// The checks of `cancelkit check mcp` that only 2026-07-28 has (the tasks extension and
/// subscriptions): `n/a` together at the earlier revisions.
pub const ONLY_2026: [&str; 6] = [
    "mcp.tasks.ext.cancel_acknowledged",
    "mcp.tasks.ext.terminal",
    "mcp.tasks.ext.cancel_repeated",
    "mcp.subscriptions.listen_acknowledged",
    "mcp.subscriptions.listen_cancel",
    "mcp.subscriptions.server_cancels_only_listen",
];

/// The checks of `cancelkit check mcp` that need a plain slow call in flight: `n/a` together
/// when there is none.
pub const SLOW_CALL_CHECKS: [&str; 7] = [
    "mcp.cancel.no_response",
    "mcp.cancel.progress_stops",
    "mcp.cancel.keeps_serving",
    "mcp.cancel.id_types",
    "mcp.cancel.parallel.others_answered",
    "mcp.cancel.parallel.cancelled_silent",
    "mcp.cancel.responsiveness",
];

/// Asserts what a `cancelkit check mcp` run found against what the server does today: the
/// run spoke `revision`, its report lists every check id in order, the checks in `fail` failed,
/// those in `na` did not apply and every other one passed (each difference is named), and the
/// exit code is 1 exactly when something fails.
pub fn assert_outcomes(
    what: &str,
    output: &std::process::Output,
    report: &Value,
    revision: &str,
    fail: &[&str],
    na: &[&str],
) {
    assert_eq!(report["revision"], revision, "{what}");
    assert_eq!(ids(report), MCP_CHECK_IDS, "{what}");
    let changed: Vec<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let id = c["id"].as_str().unwrap();
            let expected = if fail.contains(&id) {
                "fail"
            } else if na.contains(&id) {
                "not_applicable"
            } else {
                "pass"
            };
            (c["result"] != expected).then(|| {
                format!(
                    "{id}: {} today, expected {expected}: {}",
                    c["result"], c["detail"]
                )
            })
        })
        .collect();
    assert!(
        changed.is_empty(),
        "{what} behaves differently:\n{}\n\n{}",
        changed.join("\n"),
        String::from_utf8_lossy(&output.stdout)
    );
    let code = if fail.is_empty() { 0 } else { 1 };
    assert_eq!(
        output.status.code(),
        Some(code),
        "{what}: {}",
        explain(output)
    );
}

/// Runs `cancelkit check mcp --json REPORT OPTIONS -- SERVER` (without `-- SERVER` when `server`
/// is empty, as with `--url`); its output and the report, if one was written.
pub fn check_mcp<S: AsRef<OsStr>>(
    options: &[&str],
    server: &[S],
) -> (std::process::Output, Option<Value>) {
    check("mcp", options, server)
}

/// Runs `cancelkit check TARGET --json REPORT OPTIONS -- COMMAND` (without `-- COMMAND` when
/// `command` is empty); its output and the report, if one was written.
pub fn check<S: AsRef<OsStr>>(
    target: &str,
    options: &[&str],
    command: &[S],
) -> (std::process::Output, Option<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let output = Command::new(BIN)
        .args(["check", target, "--json"])
        .arg(&json)
        .args(options)
        .args(if command.is_empty() { None } else { Some("--") })
        .args(command)
        .output()
        .unwrap();
    let report = std::fs::read(&json)
        .ok()
        .map(|bytes| serde_json::from_slice(&bytes).expect("the report is JSON"));
    (output, report)
}

/// A report's check ids, in order.
pub fn ids(report: &Value) -> Vec<&str> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect()
}

/// The evidence of check `id`, as JSON text.
pub fn evidence(report: &Value, id: &str) -> String {
    let checks = report["checks"].as_array().unwrap();
    let check = checks.iter().find(|c| c["id"] == id).unwrap();
    check["evidence"].to_string()
}

/// A run's exit code and output, for an assertion's message.
pub fn explain(output: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
