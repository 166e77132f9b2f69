//! The four examples work as their docs say: the client examples start the servers as child
//! processes, cancel a slow call, and report it.

use std::path::PathBuf;
use std::process::Command;

/// Builds the runtime's examples (once per test run) and returns the examples directory.
fn examples_dir() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "cancelkit", "--examples"])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the examples build");
    let me = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test binary> -> target/<profile>/examples
    me.parent().unwrap().parent().unwrap().join("examples")
}

fn run(name: &str) -> (String, String) {
    let output = Command::new(examples_dir().join(name))
        .env("RUST_LOG", "info")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the {name} example: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{name} failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

#[test]
fn mcp_client_cancels_a_sleep_on_mcp_server() {
    let (stdout, stderr) = run("mcp_client");
    assert!(
        stdout.contains("initialized: server speaks \"2025-11-25\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("gave up after 1s; notifications/cancelled sent"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tools/call echo: \"still serving\""),
        "{stdout}"
    );
    // The server logged the cancellation with the request id and reason, and sent no response.
    assert!(
        stderr.contains("the peer cancelled a request request_id=2 reason=\"timed out after 1s\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("no response for a request the peer cancelled request_id=2"),
        "{stderr}"
    );
}

#[test]
fn acp_client_cancels_prompt_turns_on_acp_agent() {
    let (stdout, stderr) = run("acp_client");
    assert!(
        stdout.contains("agent declares draft cancellation: true"),
        "{stdout}"
    );
    assert!(
        stdout.contains("session/update: \"slept 2 of 10 s\""),
        "{stdout}"
    );
    assert!(
        !stdout.contains("slept 4 of 10 s"),
        "the turn stopped at the cancel: {stdout}"
    );
    assert!(stdout.contains("stopReason \"cancelled\""), "{stdout}");
    assert!(
        stdout.contains("the agent cancelled its permission request"),
        "{stdout}"
    );
    assert!(
        stderr.contains("the client cancelled a prompt turn session_id=sess-1"),
        "{stderr}"
    );
}
