//! The `cascade` example: one ACP `session/cancel` stops an MCP tool call and the RAP process
//! tool under it, across four real processes. Every hop is checked from the events the
//! processes reported (`--events`), and the process group and the processes are checked again
//! here, after the example has exited.

#![cfg(unix)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Held while a test builds and runs the example: both tests build it to the one path
/// `target/<profile>/examples/cascade` in different feature sets, so they take turns, whether
/// they run as threads of one process (`cargo test`) or as processes (nextest).
fn turn() -> std::fs::File {
    let path = cancelkit_tests::workspace_root()
        .join("target")
        .join("cascade-example.lock");
    let file = std::fs::File::create(&path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
    file.lock().expect("lock the cascade example");
    file
}

/// Runs `binary` with `args`, killing it after `limit`; its exit status and stdout.
fn run(binary: &Path, args: &[&str], limit: Duration) -> (bool, String) {
    let mut child = Command::new(binary)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} ran longer than {limit:?}", binary.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.success(), reader.join().unwrap())
}

/// Whether `kill -0 <target>` finds nothing (`-PGID` for a process group).
fn gone(target: i64) -> bool {
    !Command::new("sh")
        .arg("-c")
        .arg(format!("kill -0 -- {target} 2>/dev/null"))
        .status()
        .unwrap()
        .success()
}

/// The events of one name.
fn named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

/// Exactly one event of `name`.
fn one<'a>(events: &'a [Value], name: &str) -> &'a Value {
    let found = named(events, name);
    assert_eq!(found.len(), 1, "one {name} event expected: {events:#?}");
    found[0]
}

/// `cargo run -p cancelkit --example cascade`, as the README says: built without the rap
/// feature, the example runs itself again with it (through cargo, in the same profile). Two
/// builds of the runtime in feature sets of their own, a minute or more on two cores: run by
/// `cargo xtask test`, and by `cargo test -- --ignored`.
#[test]
#[ignore = "slow: builds the runtime twice in feature sets of its own (`cargo xtask test` runs it)"]
fn the_readme_command_runs_the_cascade_without_the_rap_feature() {
    let _turn = turn();
    let plain = cancelkit_tests::example_alone("cascade");
    let (ok, stdout) = run(&plain, &[], Duration::from_secs(600));
    assert!(ok, "{stdout}");
    assert!(stdout.contains("every hop observed"), "{stdout}");
}

#[test]
fn one_session_cancel_stops_every_hop() {
    let _turn = turn();
    // With the feature, run directly, with its events.
    let binary = cancelkit_tests::example_with_features("cascade", &["rap"]);
    let started = Instant::now();
    let (ok, stdout) = run(&binary, &["--events"], Duration::from_secs(60));
    let took = started.elapsed();
    assert!(ok, "the example failed:\n{stdout}");
    assert!(
        took < Duration::from_secs(5),
        "the example took {took:?}:\n{stdout}"
    );
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("event "))
        .map(|json| serde_json::from_str(json).unwrap())
        .collect();

    // The prompt was answered with a result, stopReason "cancelled", not an error.
    let answered = one(&events, "prompt_answered");
    assert_eq!(answered["result"], json!({"stopReason": "cancelled"}));

    // The MCP server read notifications/cancelled for the agent's tools/call, by its id.
    let sent = one(&events, "mcp_request_sent");
    let request_id = &sent["request_id"];
    assert!(request_id.is_number(), "{sent}");
    let cancelled = one(&events, "mcp_got_cancelled");
    assert_eq!(&cancelled["request_id"], request_id, "{cancelled}");
    let invoked = one(&events, "rap_invoked");
    assert_eq!(
        &invoked["mcp_request_id"], request_id,
        "the MCP server invoked the tool for that request: {invoked}"
    );

    // The tool server got /cancel_tool_call for exactly the call the MCP server invoked.
    let got = named(&events, "rap_got_cancel");
    assert!(!got.is_empty(), "no /cancel_tool_call: {events:#?}");
    for cancel in &got {
        assert_eq!(cancel["thread_id"], invoked["thread_id"], "{cancel}");
        assert_eq!(cancel["tool_call_id"], invoked["tool_call_id"], "{cancel}");
    }

    // The process group is gone (the example saw it go; it is still gone now).
    let started = one(&events, "process_started");
    let pgid = started["pgid"].as_i64().unwrap();
    assert_eq!(started["tool_call_id"], invoked["tool_call_id"]);
    assert!(pgid > 1);
    let group_gone = one(&events, "group_gone");
    assert_eq!(group_gone["pgid"], pgid);
    assert!(gone(-pgid), "process group {pgid} is still there");

    // In causal order, each within a second of the cancel.
    let at = |e: &Value| e["at_us"].as_u64().unwrap();
    let cancel_at = at(one(&events, "cancel_sent"));
    let chain = [cancelled, got[0], group_gone];
    let mut previous = cancel_at;
    for hop in chain {
        assert!(at(hop) >= previous, "out of order: {hop} before {previous}");
        previous = at(hop);
    }
    assert!(at(answered) >= cancel_at);
    assert!(
        previous - cancel_at < 1_000_000,
        "the last hop came {} µs after the cancel",
        previous - cancel_at
    );

    // No orphans: the agent, the MCP server and the tool server have all exited.
    let agent = sent["pid"].as_i64().unwrap();
    let mcp_server = one(&events, "mcp_server_ready")["pid"].as_i64().unwrap();
    let tool_server = one(&events, "tool_server_ready")["pid"].as_i64().unwrap();
    assert_eq!(cancelled["pid"].as_i64(), Some(mcp_server));
    assert_eq!(got[0]["pid"].as_i64(), Some(tool_server));
    for (who, pid) in [
        ("agent", agent),
        ("MCP server", mcp_server),
        ("tool server", tool_server),
    ] {
        assert!(gone(pid), "the {who} (pid {pid}) outlived the example");
    }

    // And the table the README shows.
    assert!(
        stdout.contains("total: session/cancel sent → last hop"),
        "{stdout}"
    );
    assert!(stdout.contains("every hop observed"), "{stdout}");
}
