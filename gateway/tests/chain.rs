//! Gateways in a chain: gateway B fronts gateway A's `/mcp` as a Streamable HTTP upstream,
//! with the bearer token A wants in the upstream's `headers` (taken from the environment). A
//! cancel made on B reaches the demo upstream behind A: B closes its 2026-07-28 stream to A,
//! which A takes as its client's cancel.

mod support;

use std::time::Duration;

use serde_json::json;
use support::http::{cancel, join, rpc, sleep_call, spawn_rpc, status, until_stderr};
use support::{Gateway, Options, token, tools_call};

fn front(a: &Gateway, header: &str) -> Gateway {
    Gateway::with(Options {
        config: format!(
            r#"
listen = "127.0.0.1:0"
[auth.permissions]
admin = ["admin.system_config", "tools.execute"]
alice = ["tools.execute"]

[[upstream]]
name = "a"
url = "{}/mcp"
[upstream.headers]
Authorization = "{header}"
"#,
            a.base
        ),
        env: vec![("A_TOKEN", token("alice"))],
        lazy_upstreams: true,
        ..Options::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_on_the_front_gateway_stops_the_tool_behind_the_back_one() {
    let a = Gateway::start();
    let b = front(&a, "Bearer ${A_TOKEN}");

    let echo = rpc(
        &b,
        "alice",
        &tools_call(json!(1), "a-demo-echo", json!({"text": "through two"})),
    )
    .await;
    assert_eq!(
        echo.body["result"]["content"][0]["text"], "through two",
        "{}",
        echo.text
    );

    let call = spawn_rpc(
        &b,
        "alice",
        tools_call(json!(2), "a-demo-sleep", json!({"seconds": 30})),
    );
    until_stderr(&a, "for 30s").await;
    let front_run = status(&b, "admin", "2").await;
    assert_eq!(front_run.body["state"], "running", "{}", front_run.text);
    let reply = cancel(&b, "admin", "2", Some("stop the chain")).await;
    assert_eq!(reply.body["status"], "cancelled", "{}", reply.text);
    let answer = join(call).await;
    assert_eq!(answer.body["error"]["code"], -32800, "{}", answer.text);
    assert_eq!(answer.body["error"]["data"]["reason"], "stop the chain");
    // Behind A, the demo stopped: A saw its client (B) close the stream.
    a.wait_for_stderr(
        "demo-upstream: cancelled tools/call sleep",
        Duration::from_secs(10),
    );
    let back = a.wait_for_stderr(
        "the client closed the response stream",
        Duration::from_secs(10),
    );
    assert!(back.contains("run cancelled"), "{back}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_token_the_back_gateway_refuses_and_the_front_says_so() {
    let a = Gateway::start();
    let b = front(&a, "Bearer not-a-token");
    let reply = rpc(&b, "alice", &sleep_call(json!(1), 0.1)).await;
    // `demo-sleep` is not a tool of B (its tools are a-demo-*), and B cannot list A's.
    assert!(reply.body["error"].is_object(), "{}", reply.text);
    let reply = rpc(
        &b,
        "alice",
        &tools_call(json!(2), "a-demo-echo", json!({"text": "x"})),
    )
    .await;
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("upstream `a`"), "{}", reply.text);
    assert!(
        !a.stderr().contains("demo-upstream: started"),
        "nothing ran behind A"
    );
}
