//! `/rpc`: batches, unknown methods and other hostile JSON-RPC messages, refused without harm.

use serde_json::{Value, json};

use crate::support::http::{echo_call, sleep_call};
use crate::support::{client, token};
use crate::target::Target;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_rpc_messages_are_refused_without_harm() {
    let mut target = Target::start().await;
    let refused: Vec<(&str, String)> = vec![
        (
            "batch",
            json!([echo_call(json!(1), "a"), echo_call(json!(2), "b")]).to_string(),
        ),
        ("empty batch", "[]".into()),
        ("not json", "{\"jsonrpc\": \"2.0\",".into()),
        ("no jsonrpc", json!({"id": 1, "method": "ping"}).to_string()),
        (
            "jsonrpc 1.0",
            json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}).to_string(),
        ),
        (
            "method number",
            json!({"jsonrpc": "2.0", "id": 1, "method": 7}).to_string(),
        ),
        (
            "method empty",
            json!({"jsonrpc": "2.0", "id": 1, "method": ""}).to_string(),
        ),
        (
            "params array",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1]}).to_string(),
        ),
        (
            "id null",
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}).to_string(),
        ),
        (
            "id float",
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}).to_string(),
        ),
        (
            "id object",
            json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}).to_string(),
        ),
        (
            "id bool",
            json!({"jsonrpc": "2.0", "id": true, "method": "ping"}).to_string(),
        ),
        (
            "id too big",
            r#"{"jsonrpc": "2.0", "id": 123456789012345678901234567890, "method": "ping"}"#.into(),
        ),
        (
            "a response",
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string(),
        ),
        (
            "deep nesting",
            format!("{}{}", "[".repeat(1500), "]".repeat(1500)),
        ),
    ];
    for (label, body) in &refused {
        let reply = target
            .send(
                &format!("rpc {label}"),
                client()
                    .post(target.url("/rpc"))
                    .bearer_auth(token("bob"))
                    .header("content-type", "application/json")
                    .body(body.clone()),
            )
            .await;
        assert_eq!(reply.status, 422, "{label}: {}", reply.text);
        assert!(reply.body["detail"].is_string(), "{label}: {}", reply.text);
    }
    // JSON-RPC errors, answered 200.
    let errors: Vec<(&str, Value, i64)> = vec![
        (
            "unknown method",
            json!({"jsonrpc": "2.0", "id": 1, "method": "no/such"}),
            -32601,
        ),
        (
            "unknown tool",
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope-nope"}}),
            -32602,
        ),
        (
            "no tool name",
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}),
            -32602,
        ),
        (
            "arguments a string",
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "demo-echo", "arguments": "x"}}),
            -32602,
        ),
        (
            "a tool name with control characters",
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "demo-\u{0}\u{1b}[31m"}}),
            -32602,
        ),
        ("negative sleep", sleep_call(json!(6), -5.0), -32602),
    ];
    for (label, message, code) in &errors {
        let reply = target
            .send(
                &format!("rpc {label}"),
                client()
                    .post(target.url("/rpc"))
                    .bearer_auth(token("bob"))
                    .json(message),
            )
            .await;
        assert_eq!(reply.status, 200, "{label}: {}", reply.text);
        assert_eq!(
            reply.body["error"]["code"], *code,
            "{label}: {}",
            reply.text
        );
        assert_eq!(reply.body["id"], message["id"], "{label}");
    }
    // Ids that are odd but legal are echoed as they came (up to 256 bytes: a longer one is
    // refused, see tests/tenants.rs).
    for id in [
        json!(""),
        json!("\u{0}\u{7}\n"),
        json!("x".repeat(256)),
        json!(i64::MIN),
        json!("日本語"),
    ] {
        let reply = target
            .send(
                "rpc odd id",
                client()
                    .post(target.url("/rpc"))
                    .bearer_auth(token("bob"))
                    .json(&echo_call(id.clone(), "odd")),
            )
            .await;
        assert_eq!(reply.body["id"], id, "{}", reply.text);
        assert_eq!(
            reply.body["result"]["content"][0]["text"], "odd",
            "{}",
            reply.text
        );
    }
    // Notifications bob may send, about alice's call or nonsense: 202, and nothing happens.
    for params in [
        json!({"requestId": "victim-7", "reason": "bob says so"}),
        json!({"requestId": target.victim_run}),
        json!({"requestId": null}),
        json!({"requestId": [1, 2]}),
        json!({"reason": 5}),
        json!({}),
    ] {
        let reply = target
            .send(
                "rpc hostile notification",
                client()
                    .post(target.url("/rpc"))
                    .bearer_auth(token("bob"))
                    .json(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})),
            )
            .await;
        assert_eq!(reply.status, 202, "{}", reply.text);
    }
    // Other methods on /rpc.
    for method in ["GET", "PUT", "DELETE"] {
        let reply = target
            .send(
                &format!("{method} /rpc"),
                client()
                    .request(method.parse().unwrap(), target.url("/rpc"))
                    .bearer_auth(token("bob")),
            )
            .await;
        assert_eq!(reply.status, 405, "{method}: {}", reply.text);
    }
    target.finish().await;
}
