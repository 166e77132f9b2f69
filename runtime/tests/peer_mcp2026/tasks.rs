//! The tasks extension: task tools as extension tasks, `tasks/cancel`, and 2026-07-28 calls
//! that come back as tasks after they were dropped.

use std::time::Duration;

use cancelkit::peer::{McpRevision, Protocol};
use serde_json::{Value, json};

use crate::common::{Event, next_event};
use crate::{common, discover, meta, meta_with_tasks, serve_negotiated, sleep_call, task_request};

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
