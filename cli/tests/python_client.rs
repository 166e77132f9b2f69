//! `cancelkit trace` in front of a server that a real client drives: the official Python MCP
//! SDK (mcp 2.x, pinned in tests/python/requirements.txt and installed by the test) starts
//! `cancelkit trace --out FILE -- mcp_server` as its stdio server, cancels a `sleep` call the way
//! an application does, and keeps going. The trace must hold the SDK's frames as it sent them,
//! and `trace view` must draw the cancelled call.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

mod support;

use support::{BIN, view};

/// The trace's records, parsed: direction and frame.
fn frames(trace: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(trace)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter_map(|record| {
            let dir = record["dir"].as_str()?.to_owned();
            let frame = serde_json::from_str(record["line"].as_str()?).unwrap();
            Some((dir, frame))
        })
        .collect()
}

/// Drives one session in `era` and checks the trace and the timeline.
fn session(era: &str) {
    let python = cancelkit_tests::python::sdk_python();
    let server = cancelkit_tests::example("mcp_server");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join(format!("{era}.jsonl"));
    let args: [&OsStr; 4] = [
        era.as_ref(),
        BIN.as_ref(),
        trace.as_os_str(),
        server.as_os_str(),
    ];
    let run = cancelkit_tests::python::run(
        &python,
        &cancelkit_tests::python::script("traced_client.py"),
        &args,
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    let events: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let event = |name: &str| {
        events
            .iter()
            .find(|e| e["event"] == name)
            .unwrap_or_else(|| panic!("no {name} event: {}", run.stdout))
    };
    assert_eq!(event("sleep")["outcome"], "cancelled", "{}", run.stdout);
    assert_eq!(events.last().unwrap()["event"], "closed", "{}", run.stdout);

    // The wire, as the proxy recorded it.
    let frames = frames(&trace);
    let first = &frames[0];
    let opening = if era == "discover" {
        "server/discover"
    } else {
        "initialize"
    };
    assert_eq!(
        (first.0.as_str(), &first.1["method"]),
        ("in", &opening.into())
    );
    let sleep_id = frames
        .iter()
        .find(|(dir, f)| {
            dir == "in" && f["method"] == "tools/call" && f["params"]["name"] == "sleep"
        })
        .map(|(_, f)| f["id"].clone())
        .expect("the sleep call is in the trace");
    let cancel = frames
        .iter()
        .find(|(dir, f)| dir == "in" && f["method"] == "notifications/cancelled")
        .expect("the SDK's notifications/cancelled is in the trace");
    assert_eq!(cancel.1["params"]["requestId"], sleep_id);
    assert!(
        !frames
            .iter()
            .any(|(dir, f)| dir == "out" && f["id"] == sleep_id && f.get("method").is_none()),
        "the cancelled sleep call was answered"
    );
    let echoes = frames
        .iter()
        .filter(|(dir, f)| dir == "in" && f["params"]["name"] == "echo")
        .count();
    assert_eq!(echoes, 2);

    // The timeline: one row per request; the sleep call's carries the cancel and no response.
    let html = view(&trace, &dir.path().join(format!("{era}.html")));
    let rows: Vec<&str> = html.split("<div class=\"row\"").skip(1).collect();
    let sleep_row = rows
        .iter()
        .find(|r| {
            r.starts_with(&format!(
                " data-method=\"tools/call\" data-id=\"{sleep_id}\""
            ))
        })
        .unwrap_or_else(|| panic!("no row for the sleep call {sleep_id}:\n{html}"));
    assert!(sleep_row.contains("class=\"cancel\""), "{sleep_row}");
    assert!(sleep_row.contains("no response"), "{sleep_row}");
    let requests = frames
        .iter()
        .filter(|(dir, f)| dir == "in" && f.get("id").is_some() && f.get("method").is_some())
        .count();
    assert_eq!(rows.len(), requests, "{html}");
    let cancelled_rows = rows
        .iter()
        .filter(|r| r.contains("class=\"cancel\""))
        .count();
    assert_eq!(cancelled_rows, 1, "{html}");
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn python_sdk_session_at_2026_07_28() {
    session("discover");
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn python_sdk_session_at_2025_11_25() {
    session("initialize");
}
