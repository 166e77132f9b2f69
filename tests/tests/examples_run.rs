//! The runtime's four stdio examples work as their docs say: the client examples start the
//! servers as child processes, cancel a slow call, and report it.
//!
//! The examples are built in the profile these tests run in (`cargo test --release` runs release
//! builds of them) and run from the path cargo reports for them. A client example finds its
//! server next to itself, so the server is built first.

use std::process::Command;

use cancelkit_tests::example;

/// Builds the server example `server` and the client example `client`, runs the client, and
/// returns its stdout and stderr (the server's log goes to the client's stderr).
fn run(server: &str, client: &str) -> (String, String) {
    run_with(server, client, &[])
}

/// [`run`] with arguments for the client.
fn run_with(server: &str, client: &str, args: &[&str]) -> (String, String) {
    let server_binary = example(server);
    let client_binary = example(client);
    assert_eq!(
        server_binary.parent(),
        client_binary.parent(),
        "the client example looks for {server} next to itself"
    );
    let output = Command::new(&client_binary)
        .args(args)
        .env("RUST_LOG", "info")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", client_binary.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{client} failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

#[test]
fn mcp_client_cancels_a_sleep_on_mcp_server() {
    let (stdout, stderr) = run_with("mcp_server", "mcp_client", &[]);
    assert!(
        stdout.contains(
            "discovered: server speaks [\"2026-07-28\",\"2025-11-25\",\"2025-06-18\",\"2025-03-26\",\"2024-11-05\"]"
        ),
        "{stdout}"
    );
    assert_cancelled_and_still_serving(&stdout, &stderr);
}

#[test]
fn mcp_client_cancels_a_sleep_on_mcp_server_after_a_legacy_initialize() {
    let (stdout, stderr) = run_with("mcp_server", "mcp_client", &["--legacy"]);
    assert!(
        stdout.contains("initialized: server speaks \"2025-11-25\""),
        "{stdout}"
    );
    assert_cancelled_and_still_serving(&stdout, &stderr);
}

/// Every published legacy revision is negotiated as itself, and one the server does not know
/// gets the newest legacy revision; each `initialize` on a connection of its own.
#[test]
fn mcp_server_answers_every_legacy_revision_as_itself() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let server = example("mcp_server");
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let mut child = Command::new(&server)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", server.display()));
        let mut stdin = child.stdin.take().unwrap();
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{asked}","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
        )
        .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            answer["result"]["protocolVersion"], answered,
            "asked {asked}: {line}"
        );
    }
}

fn assert_cancelled_and_still_serving(stdout: &str, stderr: &str) {
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
    let (stdout, stderr) = run("acp_agent", "acp_client");
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
