//! Operations: SIGTERM drains (runs get the grace, then are cancelled), and a stdio upstream
//! that dies is restarted while the calls it owed are answered with an error.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::http::{echo_call, join, rpc, sleep_call, spawn_rpc};
use support::{Gateway, Options, config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_runs_finish_within_the_grace_then_cancels_the_rest() {
    let mut gateway = Gateway::with(Options {
        config: config("drain_grace = \"1500ms\""),
        ..Options::default()
    });
    let short = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 0.5));
    let long = spawn_rpc(&gateway, "alice", sleep_call(json!(2), 30.0));
    gateway.wait_for_stderr("for 30s", Duration::from_secs(10));
    gateway.wait_for_stderr("for 500ms", Duration::from_secs(10));
    let asked = Instant::now();
    gateway.terminate();
    gateway.wait_for_stderr("draining", Duration::from_secs(5));
    let refused = rpc(&gateway, "alice", &echo_call(json!(3), "late")).await;
    assert_eq!(
        refused.body["error"]["code"], -32050,
        "a new call while draining: {}",
        refused.text
    );
    let short = join(short).await;
    assert_eq!(
        short.body["result"]["content"][0]["text"], "slept 500ms",
        "{}",
        short.text
    );
    let long = join(long).await;
    assert_eq!(long.body["error"]["code"], -32800, "{}", long.text);
    assert!(
        asked.elapsed() >= Duration::from_millis(1400),
        "the long run was cancelled before the grace ran out: {:?}",
        asked.elapsed()
    );
    let log = gateway.wait_for_stderr("cancelled tools/call sleep", Duration::from_secs(5));
    assert_eq!(
        log.matches("cancelled tools/call sleep").count(),
        1,
        "only the long sleep stopped:\n{log}"
    );
    let status = gateway
        .wait_exit(Duration::from_secs(10))
        .expect("the gateway exits after draining");
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_to_the_whole_process_group_still_drains_through_the_upstream() {
    let mut gateway = Gateway::with(Options {
        config: config("drain_grace = \"3s\""),
        own_group: true,
        ..Options::default()
    });
    let short = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 0.5));
    gateway.wait_for_stderr("for 500ms", Duration::from_secs(10));
    // As Ctrl-C in a terminal: the gateway and everything in its group get the signal. The
    // upstream runs in a group of its own, so the call it owes is still answered.
    gateway.terminate_group();
    let short = join(short).await;
    assert_eq!(
        short.body["result"]["content"][0]["text"], "slept 500ms",
        "{}",
        short.text
    );
    let status = gateway
        .wait_exit(Duration::from_secs(10))
        .expect("the gateway exits after draining");
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_stdio_upstream_answers_its_calls_with_an_error_and_comes_back() {
    let gateway = Gateway::start();
    let pending = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 30.0));
    gateway.wait_for_stderr("for 30s", Duration::from_secs(10));
    let demo = gateway.children("demo-upstream");
    assert_eq!(demo.len(), 1, "one demo upstream child: {demo:?}");
    std::process::Command::new("kill")
        .args(["-KILL", &demo[0].to_string()])
        .status()
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), join(pending))
        .await
        .expect("the call owed by the dead upstream is answered");
    assert_eq!(answer.body["error"]["code"], -32603, "{}", answer.text);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("went away"), "{message}");
    assert!(
        answer.body["error"]["data"]["runId"].is_string(),
        "{}",
        answer.text
    );
    // Restarted with backoff: echo works again, from a new process.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let echo = rpc(&gateway, "alice", &echo_call(json!(2), "back")).await;
        if echo.body["result"]["content"][0]["text"] == "back" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream did not come back: {}",
            echo.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let demo_again = gateway.children("demo-upstream");
    assert_eq!(demo_again.len(), 1);
    assert_ne!(demo_again, demo, "a new process");
}
