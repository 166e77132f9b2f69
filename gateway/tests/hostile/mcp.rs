//! `/mcp`: requests without a session, with the wrong protocol version and other hostile ones,
//! refused without harm.

use serde_json::{Value, json};

use crate::support::http::{echo_call, mcp_session, routing_headers, stamped};
use crate::support::{client, token};
use crate::target::Target;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_mcp_requests_are_refused_without_harm() {
    let mut target = Target::start().await;
    let bob = token("bob");
    let get = target
        .send(
            "GET /mcp without a session",
            client().get(target.url("/mcp")).bearer_auth(&bob),
        )
        .await;
    assert_eq!(get.status, 405, "{}", get.text);
    let delete = target
        .send(
            "DELETE /mcp without a session",
            client().delete(target.url("/mcp")).bearer_auth(&bob),
        )
        .await;
    assert_eq!(delete.status, 400, "{}", delete.text);
    for (method, expected) in [("GET", 404), ("DELETE", 404)] {
        let reply = target
            .send(
                &format!("{method} /mcp unknown session"),
                client()
                    .request(method.parse().unwrap(), target.url("/mcp"))
                    .bearer_auth(&bob)
                    .header("mcp-session-id", "no-such-session"),
            )
            .await;
        assert_eq!(reply.status, expected, "{method}: {}", reply.text);
    }
    // alice's session is not bob's: as if it did not exist.
    let alice_session = mcp_session(&target.gateway, "alice").await;
    for method in ["GET", "DELETE"] {
        let reply = target
            .send(
                &format!("{method} /mcp on alice's session"),
                client()
                    .request(method.parse().unwrap(), target.url("/mcp"))
                    .bearer_auth(&bob)
                    .header("mcp-session-id", &alice_session),
            )
            .await;
        assert_eq!(reply.status, 404, "{method}: {}", reply.text);
    }
    let mcp_url = target.url("/mcp");
    // A stamped request goes with the headers a 2026-07-28 client sends (its version, method
    // and tool), so each case below reaches the rung it is about.
    let post = |message: Value| {
        client()
            .post(&mcp_url)
            .bearer_auth(&bob)
            .header("accept", "application/json, text/event-stream")
            .headers(routing_headers(&message).into_iter().collect())
            .json(&message)
    };
    let reply = target
        .send(
            "cancel on alice's session",
            post(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "victim-7"}}))
                .header("mcp-session-id", &alice_session),
        )
        .await;
    assert_eq!(reply.status, 404, "{}", reply.text);

    for sid in ["x".repeat(4000), "../../etc".into(), "\u{e9}t\u{e9}".into()] {
        let reply = target
            .send(
                "odd session id",
                client()
                    .post(target.url("/mcp"))
                    .bearer_auth(&bob)
                    .header("mcp-session-id", sid.as_bytes())
                    .json(&echo_call(json!(1), "x")),
            )
            .await;
        assert!([400, 404].contains(&reply.status), "{}", reply.text);
    }
    let unstamped = target
        .send("unstamped tools/call", post(echo_call(json!(1), "x")))
        .await;
    assert_eq!(unstamped.status, 400, "{}", unstamped.text);
    for version in ["2025-11-25", "2099-01-01", "", "2026-07-28\u{0}"] {
        let reply = target
            .send(
                &format!("2026 request with version {version:?}"),
                post(stamped(echo_call(json!(2), "x"), version)),
            )
            .await;
        assert_eq!(reply.status, 400, "{version:?}: {}", reply.text);
        if version.contains('\u{0}') {
            // No header can name it: the headers disagree with the body.
            assert_eq!(reply.body["error"]["code"], -32020, "{}", reply.text);
            continue;
        }
        assert_eq!(reply.body["error"]["code"], -32022, "{}", reply.text);
        assert_eq!(
            reply.body["error"]["data"]["supported"],
            json!(["2026-07-28"]),
            "{}",
            reply.text
        );
        assert_eq!(reply.body["id"], 2);
    }
    // A version that is not a string, and missing capabilities: invalid params.
    let mut odd = stamped(echo_call(json!(3), "x"), "2026-07-28");
    odd["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(20260728);
    let reply = target.send("numeric version", post(odd)).await;
    assert_eq!(reply.body["error"]["code"], -32602, "{}", reply.text);
    let mut bare = stamped(echo_call(json!(4), "x"), "2026-07-28");
    bare["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let reply = target.send("no capabilities", post(bare)).await;
    assert_eq!(reply.body["error"]["code"], -32602, "{}", reply.text);
    // Malformed messages.
    for (label, body, code) in [
        (
            "batch",
            json!([echo_call(json!(5), "x")]).to_string(),
            -32600,
        ),
        ("not json", "{".to_owned(), -32700),
        (
            "deep",
            format!("{}{}", "{\"a\":".repeat(1000), "}".repeat(1000)),
            -32700,
        ),
    ] {
        let reply = target
            .send(
                &format!("mcp {label}"),
                client()
                    .post(target.url("/mcp"))
                    .bearer_auth(&bob)
                    .header("content-type", "application/json")
                    .body(body),
            )
            .await;
        assert_eq!(reply.status, 400, "{label}: {}", reply.text);
        assert_eq!(reply.body["error"]["code"], code, "{label}: {}", reply.text);
    }
    // An unknown method inside bob's own stamped request, and a 2026 request's cancel that
    // names alice's id: nothing reaches her run.
    let reply = target
        .send(
            "unknown 2026 method",
            post(stamped(
                json!({"jsonrpc": "2.0", "id": 6, "method": "no/such", "params": {}}),
                "2026-07-28",
            )),
        )
        .await;
    assert_eq!(reply.body["error"]["code"], -32601, "{}", reply.text);
    let reply = target
        .send(
            "2026 notification",
            post(stamped(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "victim-7"}}), "2026-07-28")),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    target.finish().await;
}
