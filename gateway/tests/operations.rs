//! Operations: SIGTERM drains (runs get the grace, then are cancelled), a stdio upstream that
//! dies is restarted and the calls it owed are answered with an error, progress reaches the
//! caller.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Gateway, Options, client, config, token, tools_call};

async fn call(gateway: &Gateway, id: i64, tool: &str, arguments: Value) -> Value {
    client()
        .post(gateway.url("/rpc"))
        .bearer_auth(token("alice"))
        .json(&tools_call(json!(id), tool, arguments))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_runs_finish_within_the_grace_then_cancels_the_rest() {
    let mut gateway = Gateway::with(Options {
        config: config("drain_grace = \"1500ms\""),
        ..Options::default()
    });
    let base = gateway.base.clone();
    let short = tokio::spawn({
        let url = format!("{base}/rpc");
        async move {
            client()
                .post(url)
                .bearer_auth(token("alice"))
                .json(&tools_call(json!(1), "demo-sleep", json!({"seconds": 0.5})))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    });
    let long = tokio::spawn({
        let url = format!("{base}/rpc");
        async move {
            client()
                .post(url)
                .bearer_auth(token("alice"))
                .json(&tools_call(json!(2), "demo-sleep", json!({"seconds": 30})))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    });
    gateway.wait_for_stderr("for 30s", Duration::from_secs(10));
    gateway.wait_for_stderr("for 500ms", Duration::from_secs(10));
    let asked = Instant::now();
    gateway.terminate();
    gateway.wait_for_stderr("draining", Duration::from_secs(5));
    let refused = call(&gateway, 3, "demo-echo", json!({"text": "late"})).await;
    assert_eq!(
        refused["error"]["code"], -32050,
        "a new call while draining: {refused}"
    );
    let short = short.await.unwrap();
    assert_eq!(
        short["result"]["content"][0]["text"], "slept 500ms",
        "{short}"
    );
    let long = long.await.unwrap();
    assert_eq!(long["error"]["code"], -32800, "{long}");
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
async fn a_dead_stdio_upstream_answers_its_calls_with_an_error_and_comes_back() {
    let gateway = Gateway::start();
    let pending = tokio::spawn({
        let url = gateway.url("/rpc");
        async move {
            client()
                .post(url)
                .bearer_auth(token("alice"))
                .json(&tools_call(json!(1), "demo-sleep", json!({"seconds": 30})))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    });
    gateway.wait_for_stderr("for 30s", Duration::from_secs(10));
    let demo = gateway.children("demo-upstream");
    assert_eq!(demo.len(), 1, "one demo upstream child: {demo:?}");
    std::process::Command::new("kill")
        .args(["-KILL", &demo[0].to_string()])
        .status()
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("the call owed by the dead upstream is answered")
        .unwrap();
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("went away"), "{message}");
    assert!(answer["error"]["data"]["runId"].is_string(), "{answer}");
    // Restarted with backoff: echo works again.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let echo = call(&gateway, 2, "demo-echo", json!({"text": "back"})).await;
        if echo["result"]["content"][0]["text"] == "back" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream did not come back: {echo}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let demo_again = gateway.children("demo-upstream");
    assert_eq!(demo_again.len(), 1);
    assert_ne!(demo_again, demo, "a new process");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_cancels_the_run_and_the_upstream_work() {
    let gateway = Gateway::with(Options {
        config: config("[cancellation]\ntool_timeout = \"300ms\""),
        ..Options::default()
    });
    let answer = call(&gateway, 5, "demo-sleep", json!({"seconds": 30})).await;
    assert_eq!(answer["error"]["code"], -32800, "{answer}");
    let reason = answer["error"]["data"]["reason"].as_str().unwrap();
    assert!(reason.contains("timeout"), "{reason}");
    gateway.wait_for_stderr("cancelled tools/call sleep", Duration::from_secs(5));
    let metrics = client()
        .get(gateway.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("cancelkit_gateway_cancels_total{source=\"timeout\"} 1"),
        "{metrics}"
    );
}
