//! Seed 004's contract — the cancellation API of ContextForge that the gateway keeps — pinned
//! against the real `cancelkit-gateway` binary on loopback.
//!
//! Every expectation here is quoted from seed 004 (`shared/seeds/004_*.txt`, "Cancellation API
//! — Tool Cancellation"), with the sentence it checks next to it. **These expectations change
//! only when the seed does**: if the gateway's behaviour and this file disagree, the gateway is
//! wrong. What the gateway adds beyond the seed (run ids, `state`, per-user scoping, the race
//! window) is tested elsewhere; here it only must not break what the seed says. The `/v1`
//! prefix serves the same API (ContextForge's versioned path), so each endpoint is checked
//! under both.

mod support;

use serde_json::{Value, json};
use support::http::{
    Reply, SLEEP_CANCELLED, cancel_with_at, join, mcp_post, mcp_session, sleep_call, spawn_mcp,
    spawn_rpc, status_at, until_stderr, until_stderr_count,
};
use support::{Gateway, Options, config, tools_call};

const STARTED: &str = "demo-upstream: started tools/call sleep";
const PREFIXES: [&str; 2] = ["", "/v1"];

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// "Response 200 (application/json): { "name": "<string|null>", "registered_at": <float>,
/// "cancelled": <boolean>, "cancelled_at": <float|null>, "cancel_reason": "<string|null>" }"
fn assert_status_body(reply: &Reply) {
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = &reply.body;
    assert!(
        body["name"].is_string() || body["name"].is_null(),
        "name: {body}"
    );
    // "`registered_at` is a Unix timestamp (seconds since epoch)"
    let registered_at = body["registered_at"]
        .as_f64()
        .unwrap_or_else(|| panic!("registered_at is a float: {body}"));
    assert!(
        (now() - registered_at).abs() < 120.0,
        "registered_at in seconds since the epoch: {body}"
    );
    assert!(body["cancelled"].is_boolean(), "cancelled: {body}");
    assert!(
        body["cancelled_at"].is_f64() || body["cancelled_at"].is_null(),
        "cancelled_at: {body}"
    );
    assert!(
        body["cancel_reason"].is_string() || body["cancel_reason"].is_null(),
        "cancel_reason: {body}"
    );
}

/// "`status == "cancelled"` indicates the gateway found the run locally and attempted
/// cancellation", and "Cancelled tasks return a JSON-RPC error with code `-32800`".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_run_is_cancelled_and_its_call_answers_minus_32800() {
    let gateway = Gateway::start();
    for (n, prefix) in PREFIXES.into_iter().enumerate() {
        let id = format!("contract-{n}");
        // "JSON-RPC `tools/call` requests: All tool invocations via the JSON-RPC protocol are
        // registered with their request ID for cancellation support"
        let call = spawn_rpc(&gateway, "alice", sleep_call(json!(id), 30.0));
        until_stderr_count(&gateway, STARTED, n + 1).await;
        let before = status_at(&gateway, prefix, "admin", &id).await;
        assert_status_body(&before);
        assert_eq!(before.body["cancelled"], false, "{}", before.text);
        // "`cancelled_at` is present only if the run has been cancelled"
        assert!(!before.body["cancelled_at"].is_f64(), "{}", before.text);

        // "Request body (application/json): { "requestId": "<string>", "reason":
        // "<string|null>" }" → "Response 200 (application/json): { "status": "cancelled" |
        // "queued", "requestId": "<string>", "reason": "<string|null>" }"
        let reply = cancel_with_at(
            &gateway,
            prefix,
            "admin",
            &json!({"requestId": id, "reason": "operator"}),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(
            reply.body,
            json!({"status": "cancelled", "requestId": id, "reason": "operator"})
        );

        // "Cancelled tasks raise `asyncio.CancelledError`, which is caught and converted to a
        // JSON-RPC error response" / "return a JSON-RPC error with code `-32800`"
        let answer = join(call).await;
        let response = answer.response();
        assert_eq!(response["id"], json!(id), "{response}");
        assert_eq!(response["error"]["code"], -32800, "{response}");

        // "For tools forwarded to external MCP servers, the broadcast allows those servers to
        // handle cancellation": the upstream that ran the tool got `notifications/cancelled`.
        until_stderr_count(&gateway, SLEEP_CANCELLED, n + 1).await;

        // "`cancelled_at` is present only if the run has been cancelled"; "`cancel_reason`
        // contains the reason provided during cancellation (if any)"
        let after = status_at(&gateway, prefix, "admin", &id).await;
        assert_status_body(&after);
        assert_eq!(after.body["cancelled"], true, "{}", after.text);
        assert!(
            after.body["cancelled_at"].as_f64().unwrap()
                >= before.body["registered_at"].as_f64().unwrap(),
            "{}",
            after.text
        );
        assert_eq!(after.body["cancel_reason"], "operator", "{}", after.text);
    }
}

/// A cancel without a reason: "reason": "<string|null>".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_without_a_reason_is_answered_with_a_null_reason() {
    let gateway = Gateway::start();
    for (n, body) in [
        json!({"requestId": "r0"}),
        json!({"requestId": "r1", "reason": null}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = body["requestId"].as_str().unwrap().to_owned();
        let call = spawn_rpc(&gateway, "alice", sleep_call(json!(id), 30.0));
        until_stderr_count(&gateway, STARTED, n + 1).await;
        let reply = cancel_with_at(&gateway, "", "admin", &body).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(
            reply.body,
            json!({"status": "cancelled", "requestId": id, "reason": null})
        );
        assert_eq!(join(call).await.response()["error"]["code"], -32800);
    }
}

/// "`status == "queued"` indicates the gateway did not find the run locally but broadcasted
/// the notification for remote peers to handle" — answered 200, with and without a reason,
/// on both paths.
#[tokio::test]
async fn a_cancel_that_finds_no_run_is_queued() {
    let gateway = Gateway::start();
    for prefix in PREFIXES {
        for (body, reason) in [
            (json!({"requestId": "nothing-1", "reason": "r"}), json!("r")),
            (
                json!({"requestId": "nothing-2", "reason": null}),
                Value::Null,
            ),
            (json!({"requestId": "nothing-3"}), Value::Null),
        ] {
            let reply = cancel_with_at(&gateway, prefix, "admin", &body).await;
            assert_eq!(reply.status, 200, "{prefix} {body}: {}", reply.text);
            assert_eq!(
                reply.body,
                json!({"status": "queued", "requestId": body["requestId"], "reason": reason}),
                "{prefix} {body}"
            );
        }
    }
}

/// "Pre-registration cancellations: If a cancellation request arrives before the tool
/// execution is registered (race condition), the cancellation will be queued".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_before_its_call_is_registered_is_queued() {
    let gateway = Gateway::start();
    let reply = cancel_with_at(
        &gateway,
        "",
        "admin",
        &json!({"requestId": "early", "reason": "before it starts"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.body,
        json!({"status": "queued", "requestId": "early", "reason": "before it starts"})
    );
}

/// "Response 404 (application/json): { "detail": "Run not found" }"
#[tokio::test]
async fn the_status_of_an_unknown_run_is_404_run_not_found() {
    let gateway = Gateway::start();
    for prefix in PREFIXES {
        let reply = status_at(&gateway, prefix, "admin", "no-such-run").await;
        assert_eq!(reply.status, 404, "{prefix}: {}", reply.text);
        assert_eq!(reply.body, json!({"detail": "Run not found"}), "{prefix}");
    }
}

/// "When disabled:" — "`POST /cancellation/cancel` returns 404", "`GET
/// /cancellation/status/{id}` returns 404", "Tool executions are not registered for
/// cancellation".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_off_both_endpoints_return_404_and_nothing_is_registered() {
    let gateway = Gateway::with(Options {
        config: config(""),
        env: vec![("MCPGATEWAY_TOOL_CANCELLATION_ENABLED", "false".into())],
        ..Options::default()
    });
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!("off"), 1.0));
    until_stderr(&gateway, STARTED).await;
    for prefix in PREFIXES {
        let cancel = cancel_with_at(
            &gateway,
            prefix,
            "admin",
            &json!({"requestId": "off", "reason": null}),
        )
        .await;
        assert_eq!(cancel.status, 404, "{prefix}: {}", cancel.text);
        let status = status_at(&gateway, prefix, "admin", "off").await;
        assert_eq!(status.status, 404, "{prefix}: {}", status.text);
    }
    // Not cancelled: it runs to its end.
    let answer = join(call).await;
    assert!(answer.response()["result"].is_object(), "{}", answer.text);
}

/// "Permissions: `admin.system_config` by default (RBAC)": a token without it may not act on
/// a run; one with it may.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_needs_admin_system_config() {
    let gateway = Gateway::start();
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!("rbac"), 30.0));
    until_stderr(&gateway, STARTED).await;
    for prefix in PREFIXES {
        let denied =
            cancel_with_at(&gateway, prefix, "nobody", &json!({"requestId": "rbac"})).await;
        assert_eq!(denied.status, 403, "{prefix}: {}", denied.text);
        let denied = status_at(&gateway, prefix, "nobody", "rbac").await;
        assert_eq!(denied.status, 403, "{prefix}: {}", denied.text);
    }
    // `ops` holds admin.system_config and nothing else.
    assert_status_body(&status_at(&gateway, "", "ops", "rbac").await);
    let reply = cancel_with_at(&gateway, "", "ops", &json!({"requestId": "rbac"})).await;
    assert_eq!(reply.body["status"], "cancelled", "{}", reply.text);
    assert_eq!(join(call).await.response()["error"]["code"], -32800);
}

/// "Tool executions are automatically registered for cancellation tracking in the following
/// scenarios: 1. **JSON-RPC `tools/call` requests**: All tool invocations via the JSON-RPC
/// protocol are registered with their request ID for cancellation support" — the MCP
/// endpoint's calls are JSON-RPC `tools/call` requests too: registered under their request id,
/// cancelled through the API, answered -32800 on their stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_call_over_mcp_is_registered_and_cancelled_the_same_way() {
    let gateway = Gateway::start();
    let session = mcp_session(&gateway, "alice").await;
    let call = spawn_mcp(
        &gateway,
        "alice",
        Some(&session),
        tools_call(json!(2), "demo-sleep", json!({"seconds": 30})),
    );
    until_stderr(&gateway, STARTED).await;
    assert_status_body(&status_at(&gateway, "", "admin", "2").await);
    let reply = cancel_with_at(
        &gateway,
        "",
        "admin",
        &json!({"requestId": "2", "reason": "operator"}),
    )
    .await;
    assert_eq!(
        reply.body,
        json!({"status": "cancelled", "requestId": "2", "reason": "operator"})
    );
    let answer = join(call).await;
    let response = answer.response();
    assert_eq!(
        (&response["id"], &response["error"]["code"]),
        (&json!(2), &json!(-32800)),
        "{response}"
    );
    until_stderr(&gateway, SLEEP_CANCELLED).await;
    // The session goes on.
    let next = mcp_post(
        &gateway,
        "alice",
        Some(&session),
        &tools_call(json!(3), "demo-echo", json!({"text": "after"})),
    )
    .await;
    assert_eq!(next.response()["result"]["content"][0]["text"], "after");
}
