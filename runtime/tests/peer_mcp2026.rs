//! MCP 2026-07-28 on the wire: no handshake (`server/discover`, per-request `_meta`, no
//! `initialize`, no `ping`), the era chosen per connection by a negotiated server, client-only
//! cancellation, a server's `notifications/cancelled` only to end `subscriptions/listen`, and
//! the tasks extension.

mod common;

use std::time::Duration;

use cancelkit::peer::{
    Context, DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, Protocol, RequestError, Router,
};
use cancelkit::{CancelReason, Cancelled, JsonRpcError};
use common::{Event, Served, next_event, pair, serve_extended};
use serde_json::{Value, json};

/// What a negotiating server speaks: every published revision, newest first.
const EVERY_REVISION: [&str; 5] = [
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

const NEGOTIATED: Protocol = Protocol::Mcp(McpRevision::Negotiated);
const SHORT: Duration = Duration::from_millis(300);

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

fn meta_with_tasks() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    })
}

fn sleep_call(label: &str, ms: u64, meta: Value) -> Value {
    json!({"name": "sleep", "arguments": {"label": label, "ms": ms}, "_meta": meta})
}

/// `server/discover`, and `subscriptions/listen` that ends its own stream after `ms` (as a
/// server does when it shuts a subscription down).
fn modern_routes(router: Router, events: common::Events) -> Router {
    router
        .request("server/discover", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"capabilities": {"tools": {}}}))
        })
        .request("tools/list", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"tools": []}))
        })
        .request("resources/read", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"contents": [], "ttlMs": 60_000, "cacheScope": "public"}))
        })
        .request("subscriptions/listen", move |p: Value, _cx: Context| {
            let events = events.clone();
            async move {
                let _ = events.0.send(Event::Started("listen".into()));
                let ms = p["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Err::<Value, JsonRpcError>(Cancelled::new(CancelReason::Shutdown).into())
            }
        })
}

fn serve_negotiated(
    configure: impl FnOnce(cancelkit::peer::PeerBuilder) -> cancelkit::peer::PeerBuilder,
) -> Served {
    serve_extended(NEGOTIATED, modern_routes, configure)
}

/// A `tasks/get` or `tasks/cancel` for `task_id`, with `meta`, and its answer.
async fn task_request(
    s: &mut Served,
    id: Value,
    method: &str,
    task_id: &str,
    meta: Value,
) -> Value {
    s.wire
        .call(id, method, json!({"taskId": task_id, "_meta": meta}))
        .await
}

async fn discover(s: &mut Served) -> Value {
    let answer = s
        .wire
        .call(json!("d"), "server/discover", json!({"_meta": meta()}))
        .await;
    assert_eq!(s.peer.mcp_revision(), Some(McpRevision::V2026_07_28));
    answer
}

#[tokio::test]
async fn discover_chooses_2026_and_the_runtime_completes_its_result() {
    let mut s = serve_negotiated(|b| b);
    assert_eq!(
        s.peer.mcp_revision(),
        None,
        "undecided before the first message"
    );
    let answer = discover(&mut s).await;
    let result = &answer["result"];
    assert_eq!(result["resultType"], "complete", "{answer}");
    assert_eq!(result["supportedVersions"], json!(EVERY_REVISION));
    assert_eq!(result["capabilities"]["tools"], json!({}));
    assert!(result["ttlMs"].is_u64() && result["cacheScope"].is_string());
    assert!(
        result["capabilities"].get("extensions").is_none(),
        "no tasks extension without task tools"
    );
    let called = s
        .wire
        .call(json!(2), "tools/call", sleep_call("fast", 0, meta()))
        .await;
    assert_eq!(called["result"]["resultType"], "complete", "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "fast");
    assert!(
        called["result"].get("ttlMs").is_none(),
        "a tool result is not cacheable"
    );
    // Lists are cacheable results: `ttlMs` and `cacheScope` are required, and added.
    let listed = s
        .wire
        .call(json!(3), "tools/list", json!({"_meta": meta()}))
        .await;
    assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
    assert_eq!(listed["result"]["ttlMs"], 0);
    assert_eq!(listed["result"]["cacheScope"], "private");
    assert_eq!(listed["result"]["resultType"], "complete");
    let kept = s
        .wire
        .call(json!(4), "resources/read", json!({"_meta": meta()}))
        .await;
    assert_eq!(
        kept["result"]["ttlMs"], 60_000,
        "the application's choice is kept: {kept}"
    );
    assert_eq!(kept["result"]["cacheScope"], "public");
}

#[tokio::test]
async fn requests_without_their_meta_in_another_version_or_of_the_handshake_are_refused() {
    let mut s = serve_negotiated(|b| b);
    discover(&mut s).await;
    let bare = s
        .wire
        .call(
            json!(1),
            "tools/call",
            json!({"name": "sleep", "arguments": {"label": "x", "ms": 0}}),
        )
        .await;
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let later = s
        .wire
        .call(
            json!(2),
            "tools/call",
            sleep_call(
                "x",
                0,
                json!({"io.modelcontextprotocol/protocolVersion": "2030-01-01", "io.modelcontextprotocol/clientCapabilities": {}}),
            ),
        )
        .await;
    assert_eq!(later["error"]["code"], -32022, "{later}");
    assert_eq!(later["error"]["data"]["requested"], "2030-01-01");
    assert_eq!(later["error"]["data"]["supported"], json!(EVERY_REVISION));
    for method in ["ping", "initialize"] {
        let answer = s
            .wire
            .call(json!(method), method, json!({"_meta": meta()}))
            .await;
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
    }
    assert!(
        s.events.try_recv().is_err(),
        "no handler ran for a refused request"
    );
}

#[tokio::test]
async fn an_unsupported_discover_decides_nothing_and_initialize_still_can() {
    let mut s = serve_negotiated(|b| b);
    let answer = s
        .wire
        .call(
            json!(1),
            "server/discover",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32022, "{answer}");
    assert_eq!(s.peer.mcp_revision(), None);
    let init = s
        .wire
        .call(
            json!(2),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "label": "init", "ms": 0}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    assert_eq!(s.peer.mcp_revision(), Some(McpRevision::V2025_11_25));
    // Legacy rules from now on: no `_meta` needed, and a task is asked for with `params.task`.
    let task = s
        .wire
        .call(
            json!(3),
            "tools/call",
            json!({"name": "sleep", "arguments": {"label": "t", "ms": 0}, "task": {"ttl": 1000}}),
        )
        .await;
    assert_eq!(task["result"]["task"]["ttl"], 1000, "{task}");
}

#[tokio::test]
async fn a_2024_initialize_chooses_2024_where_tasks_do_not_exist() {
    let mut s = serve_negotiated(|b| b);
    s.wire
        .call(
            json!(1),
            "initialize",
            json!({"protocolVersion": "2024-11-05", "label": "init", "ms": 0}),
        )
        .await;
    assert_eq!(s.peer.mcp_revision(), Some(McpRevision::V2024_11_05));
    let call = s
        .wire
        .call(
            json!(2),
            "tools/call",
            json!({"name": "sleep", "arguments": {"label": "t", "ms": 0}, "task": {"ttl": 1000}}),
        )
        .await;
    assert_eq!(call["result"]["content"][0]["text"], "t", "{call}");
}

#[tokio::test]
async fn a_client_cancel_stops_the_call_and_nothing_is_answered() {
    let mut s = serve_negotiated(|b| b);
    discover(&mut s).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": sleep_call("slow", 60_000, meta())}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("slow".into())
    );
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "user"}}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("slow".into())
    );
    s.wire.assert_silent(SHORT).await;
    let next = s
        .wire
        .call(json!(8), "tools/call", sleep_call("next", 0, meta()))
        .await;
    assert_eq!(next["result"]["content"][0]["text"], "next");
}

#[tokio::test]
async fn a_2026_server_issues_no_requests_and_cancels_only_its_listen_streams() {
    let mut s = serve_negotiated(|b| b);
    discover(&mut s).await;
    let asked = tokio::time::timeout(
        Duration::from_secs(5),
        s.peer
            .request::<_, Value>("sampling/createMessage", json!({})),
    )
    .await
    .expect("refused at once, not sent and waited for");
    assert!(
        matches!(&asked, Err(RequestError::NotAllowed(why)) if why.contains("issues no requests")),
        "{asked:?}"
    );
    let stray = s
        .peer
        .notify("notifications/cancelled", json!({"requestId": 5}))
        .await;
    assert!(
        matches!(stray, Err(RequestError::NotAllowed(_))),
        "{stray:?}"
    );
    s.wire.assert_silent(SHORT).await;

    // A listen stream the server ends: notifications/cancelled naming it, and no response.
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": "sub", "method": "subscriptions/listen", "params": {"ms": 200, "_meta": meta()}}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("listen".into())
    );
    s.peer
        .notify(
            "notifications/progress",
            json!({"progressToken": 1, "progress": 1}),
        )
        .await
        .unwrap();
    let ended = loop {
        let message = s.wire.recv().await;
        if message["method"] == "notifications/cancelled" {
            break message;
        }
    };
    assert_eq!(ended["params"]["requestId"], "sub", "{ended}");
    assert!(ended["params"]["reason"].is_string());
    s.wire.assert_silent(SHORT).await;
    // Once it ended, it cannot be cancelled again.
    let again = s
        .peer
        .notify("notifications/cancelled", json!({"requestId": "sub"}))
        .await;
    assert!(
        matches!(again, Err(RequestError::NotAllowed(_))),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_server_may_end_an_open_listen_stream_itself() {
    let mut s = serve_negotiated(|b| b);
    discover(&mut s).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": {"ms": 60_000, "_meta": meta()}}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("listen".into())
    );
    s.peer
        .notify(
            "notifications/cancelled",
            json!({"requestId": 3, "reason": "bye"}),
        )
        .await
        .expect("allowed for an open subscriptions/listen");
    let sent = s.wire.recv().await;
    assert_eq!(sent["params"]["requestId"], 3, "{sent}");
}

#[tokio::test]
async fn task_tools_run_as_extension_tasks_that_tasks_cancel_acknowledges_and_stops() {
    let mut s = serve_negotiated(|b| b.task_tools(["sleep"]));
    let discovered = discover(&mut s).await;
    assert_eq!(
        discovered["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "{discovered}"
    );
    let created = s
        .wire
        .call(
            json!(1),
            "tools/call",
            sleep_call("long", 60_000, meta_with_tasks()),
        )
        .await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    assert_eq!(task["status"], "working");
    assert!(task["ttlMs"].is_u64() && task.get("ttl").is_none());
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("long".into())
    );

    let ack = task_request(
        &mut s,
        json!(2),
        "tasks/cancel",
        &task_id,
        meta_with_tasks(),
    )
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("long".into())
    );
    let got = task_request(&mut s, json!(3), "tasks/get", &task_id, meta_with_tasks()).await;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    assert_eq!(got["result"]["resultType"], "complete");
    assert!(got["result"].get("result").is_none() && got["result"].get("error").is_none());
    let again = task_request(
        &mut s,
        json!(4),
        "tasks/cancel",
        &task_id,
        meta_with_tasks(),
    )
    .await;
    assert_eq!(
        again["result"],
        json!({"resultType": "complete"}),
        "a repeated cancel is acknowledged: {again}"
    );
    let unknown = task_request(&mut s, json!(5), "tasks/cancel", "nope", meta_with_tasks()).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let no_meta = s
        .wire
        .call(json!(6), "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(no_meta["error"]["code"], -32602, "{no_meta}");
}

#[tokio::test]
async fn a_finished_extension_task_carries_its_result_and_clients_without_the_extension_get_results()
 {
    let mut s = serve_negotiated(|b| b.task_tools(["sleep"]));
    discover(&mut s).await;
    let plain = s
        .wire
        .call(json!(1), "tools/call", sleep_call("plain", 0, meta()))
        .await;
    assert_eq!(plain["result"]["content"][0]["text"], "plain", "{plain}");
    let created = s
        .wire
        .call(
            json!(2),
            "tools/call",
            sleep_call("quick", 10, meta_with_tasks()),
        )
        .await;
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let mut got = Value::Null;
    for attempt in 0..100 {
        got = task_request(&mut s, json!(100 + attempt), "tasks/get", &task_id, meta()).await;
        if got["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["result"]["content"][0]["text"], "quick");
    let late = task_request(&mut s, json!(3), "tasks/cancel", &task_id, meta()).await;
    assert_eq!(late["result"], json!({"resultType": "complete"}), "{late}");
    let still = task_request(&mut s, json!(4), "tasks/get", &task_id, meta()).await;
    assert_eq!(
        still["result"]["status"], "completed",
        "a late cancel changes nothing"
    );
}

fn legacy_server_router() -> Router {
    Router::new()
        .request("initialize", |p: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(json!({
                "protocolVersion": p["protocolVersion"],
                "capabilities": {},
                "serverInfo": {"name": "legacy", "version": "1"}
            }))
        })
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        )
        .request("echo", |p: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(json!({"echo": p}))
        })
}

#[tokio::test]
async fn a_negotiated_client_discovers_a_2026_server_and_stamps_its_requests() {
    let server = Peer::builder(NEGOTIATED).router(
        legacy_server_router()
            .request("server/discover", |_: Value, _cx: Context| async {
                Ok::<_, JsonRpcError>(json!({"capabilities": {}}))
            })
            .request("subscriptions/listen", |_: Value, _cx: Context| async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err::<Value, JsonRpcError>(Cancelled::new(CancelReason::Shutdown).into())
            }),
    );
    let client = Peer::builder(NEGOTIATED)
        .client_capabilities(json!({"sampling": {}}))
        .client_info(json!({"name": "test-client", "version": "1"}));
    let (server, client) = pair(server, client);
    let handle = client.handle();
    let negotiated = handle
        .discover_or_initialize(
            json!({"name": "test-client", "version": "1"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(negotiated.revision, McpRevision::V2026_07_28);
    assert_eq!(
        server.handle().mcp_revision(),
        Some(McpRevision::V2026_07_28)
    );
    let echoed: Value = handle.request("echo", json!({"x": 1})).await.unwrap();
    let meta = &echoed["echo"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "{echoed}"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"sampling": {}})
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "test-client"
    );
    assert_eq!(echoed["resultType"], "complete");
    // The server ends our subscription: our request fails with -32800, not a hang.
    let ended = tokio::time::timeout(
        Duration::from_secs(5),
        handle.request::<_, Value>("subscriptions/listen", json!({})),
    )
    .await
    .expect("the stream's end reaches the client");
    match ended {
        Err(RequestError::Rpc(error)) => assert!(error.is_cancelled(), "{error:?}"),
        other => panic!("expected the subscription to end with -32800, got {other:?}"),
    }
}

#[tokio::test]
async fn a_negotiated_client_falls_back_to_initialize_with_a_legacy_server() {
    let server =
        Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25)).router(legacy_server_router());
    let (server, client) = pair(server, Peer::builder(NEGOTIATED));
    let negotiated = client
        .handle()
        .discover_or_initialize(
            json!({"name": "c", "version": "1"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(negotiated.revision, McpRevision::V2025_11_25);
    assert_eq!(negotiated.server["serverInfo"]["name"], "legacy");
    let echoed: Value = client
        .handle()
        .request("echo", json!({"x": 1}))
        .await
        .unwrap();
    assert!(
        echoed["echo"].get("_meta").is_none(),
        "legacy requests are not stamped: {echoed}"
    );
    assert!(echoed.get("resultType").is_none());
    drop(server);
}

#[tokio::test]
async fn a_fixed_2026_client_stamps_from_its_first_request_and_a_negotiated_server_follows() {
    let server = Peer::builder(NEGOTIATED).router(legacy_server_router());
    let client = Peer::builder(Protocol::Mcp(McpRevision::V2026_07_28));
    let (server, client) = pair(server, client);
    let echoed: Value = client.handle().request("echo", json!({})).await.unwrap();
    assert_eq!(
        echoed["echo"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "{echoed}"
    );
    assert_eq!(
        echoed["echo"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({})
    );
    assert_eq!(
        server.handle().mcp_revision(),
        Some(McpRevision::V2026_07_28)
    );
    // A fixed 2026-07-28 client only discovers: a legacy answer is an error, not a fallback.
    let refused = client
        .handle()
        .request::<_, Value>("initialize", json!({}))
        .await;
    assert!(
        matches!(refused, Err(RequestError::Rpc(ref e)) if e.code.code() == -32601),
        "{refused:?}"
    );
}

#[tokio::test]
async fn the_client_info_given_to_discover_is_stamped_on_every_later_request() {
    let server = Peer::builder(NEGOTIATED).router(legacy_server_router());
    let (_server, client) = pair(server, Peer::builder(NEGOTIATED));
    let negotiated = client
        .handle()
        .discover_or_initialize(
            json!({"name": "learned", "version": "2"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .unwrap();
    // The server has no `server/discover` route: the runtime answers it rather than leave a
    // client that already ruled out `initialize` stranded.
    assert_eq!(negotiated.revision, McpRevision::V2026_07_28);
    assert_eq!(
        negotiated.server["supportedVersions"],
        json!(EVERY_REVISION)
    );
    assert_eq!(negotiated.server["capabilities"], json!({}));
    let echoed: Value = client.handle().request("echo", json!({})).await.unwrap();
    assert_eq!(
        echoed["echo"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"], "learned",
        "{echoed}"
    );
}

fn extension_client(b: cancelkit::peer::PeerBuilder) -> cancelkit::peer::PeerBuilder {
    b.client_capabilities(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}))
}

/// A 2026-07-28 `tools/call` from a client declaring the tasks extension may come back as a
/// task: given up before its answer, it is cancelled as an ordinary request
/// (`notifications/cancelled`) and, if the answer turns out to be a task after all,
/// `tasks/cancel` follows as soon as its id arrives.
#[tokio::test]
async fn a_dropped_2026_call_that_comes_back_as_a_task_is_cancelled_both_ways() {
    let mut s = common::serve(Protocol::Mcp(McpRevision::V2026_07_28), extension_client);
    let call = s
        .peer
        .request::<_, Value>("tools/call", json!({"name": "sleep", "arguments": {}}));
    let sent = s.wire.recv().await;
    assert_eq!(
        sent["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}}),
        "{sent}"
    );
    drop(call);
    let cancelled = s.wire.recv().await;
    assert_eq!(
        cancelled["method"], "notifications/cancelled",
        "{cancelled}"
    );
    assert_eq!(cancelled["params"]["requestId"], sent["id"]);
    // The server had made a task before the cancel reached it.
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": sent["id"], "result": {
            "resultType": "task", "taskId": "task-3", "status": "working",
            "createdAt": "2026-11-23T00:00:00.000Z", "lastUpdatedAt": "2026-11-23T00:00:00.000Z",
            "ttlMs": 60000}}))
        .await;
    let cancel = s.wire.recv().await;
    assert_eq!(cancel["method"], "tasks/cancel", "{cancel}");
    assert_eq!(cancel["params"]["taskId"], "task-3");
    assert_eq!(
        cancel["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "tasks/cancel is a 2026-07-28 request like any other: {cancel}"
    );
    assert_eq!(s.peer.pending_requests(), 0);
}

/// If the server honoured the cancel (no task, so no answer ever), the request is forgotten
/// after a while rather than kept for the life of the connection.
#[tokio::test(start_paused = true)]
async fn a_dropped_2026_call_the_server_stopped_is_forgotten_after_a_while() {
    let mut s = common::serve(Protocol::Mcp(McpRevision::V2026_07_28), extension_client);
    let call = s
        .peer
        .request::<_, Value>("tools/call", json!({"name": "sleep", "arguments": {}}));
    let _sent = s.wire.recv().await;
    drop(call);
    let cancelled = s.wire.recv().await;
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(
        s.peer.pending_requests(),
        1,
        "kept, in case a task id comes"
    );
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(s.peer.pending_requests(), 0);
}

/// Without the extension declared, a 2026-07-28 call is an ordinary request: cancelled with
/// `notifications/cancelled` and forgotten at once.
#[tokio::test]
async fn a_dropped_2026_call_without_the_extension_is_an_ordinary_cancel() {
    let mut s = common::serve(Protocol::Mcp(McpRevision::V2026_07_28), |b| b);
    let call = s
        .peer
        .request::<_, Value>("tools/call", json!({"name": "sleep", "arguments": {}}));
    let sent = s.wire.recv().await;
    drop(call);
    let cancelled = s.wire.recv().await;
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], sent["id"]);
    assert_eq!(s.peer.pending_requests(), 0);
}
