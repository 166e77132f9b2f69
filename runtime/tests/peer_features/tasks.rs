//! `tasks/cancel` across the task boundary: task-augmented requests dropped before or after
//! their task id, our own server-side tasks, the bound on abandoned ones.

use std::time::Duration;

use cancelkit::peer::Peer;
use serde_json::{Value, json};

use crate::common::Event;
use crate::{MCP, SHORT, common};

pub fn task_call(label: &str, ms: u64) -> Value {
    json!({"name": "sleep", "arguments": {"label": label, "ms": ms}, "task": {"ttl": 60_000}})
}

/// Dropped before its `CreateTaskResult` arrives, a task-augmented request sends nothing at
/// once (never `notifications/cancelled`), then `tasks/cancel` as soon as the task id arrives.
#[tokio::test]
async fn a_task_request_dropped_before_its_task_id_sends_tasks_cancel_when_it_arrives() {
    let mut s = common::serve(MCP, |b| b);
    let call = s
        .peer
        .request::<_, Value>("tools/call", task_call("t", 60_000));
    let sent = s.wire.recv().await;
    assert_eq!(sent["method"], "tools/call");
    drop(call);
    s.wire.assert_silent(SHORT).await;
    s.wire
        .send(
            json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"task": {
            "taskId": "task-7", "status": "working", "createdAt": "2026-11-23T00:00:00.000Z",
            "lastUpdatedAt": "2026-11-23T00:00:00.000Z", "ttl": 60000}}}),
        )
        .await;
    let cancel = s.wire.recv().await;
    assert_eq!(cancel["method"], "tasks/cancel", "{cancel}");
    assert_eq!(cancel["params"], json!({"taskId": "task-7"}));
    assert!(cancel["id"].is_number());
    assert_eq!(s.peer.pending_requests(), 0);
    s.wire.assert_silent(SHORT).await;
}

/// Dropped once its task id has arrived (but before the caller took the result), it sends
/// `tasks/cancel` at once.
#[tokio::test]
async fn a_task_request_dropped_after_its_task_id_sends_tasks_cancel_at_once() {
    let mut s = common::serve(MCP, |b| b);
    let call = s
        .peer
        .request::<_, Value>("tools/call", task_call("t", 60_000));
    let sent = s.wire.recv().await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"task": {"taskId": "task-9", "status": "working"}}}))
        .await;
    for _ in 0..500 {
        if s.peer.pending_requests() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(s.peer.pending_requests(), 0, "the answer was read");
    drop(call);
    let cancel = s.wire.recv().await;
    assert_eq!(cancel["method"], "tasks/cancel", "{cancel}");
    assert_eq!(cancel["params"], json!({"taskId": "task-9"}));
}

/// Against our own server-side tasks: the client drops the call before the server's answer,
/// and the server's task ends `cancelled`, its handler stopped (or never started: the
/// `tasks/cancel` may reach the server before the handler's first poll).
#[tokio::test]
async fn a_dropped_task_request_ends_the_servers_task_cancelled() {
    let (events, mut rx) = common::events_channel();
    let (_server, client) = common::pair(
        Peer::builder(MCP).router(common::router(events)),
        Peer::builder(MCP),
    );
    drop(
        client
            .handle()
            .request::<_, Value>("tools/call", task_call("job", 60_000)),
    );
    let mut task = Value::Null;
    for _ in 0..500 {
        // Unknown (-32602) until the server has created it.
        if let Ok(seen) = client
            .handle()
            .request::<_, Value>("tasks/get", json!({"taskId": "task-0"}))
            .await
        {
            task = seen;
            if task["status"] != "working" {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(task["status"], "cancelled", "{task}");
    assert_eq!(task["statusMessage"], "Cancelled by the requester");
    tokio::time::sleep(SHORT).await;
    let mut seen = Vec::new();
    while let Ok(event) = rx.try_recv() {
        seen.push(event);
    }
    assert!(
        seen.is_empty() || seen == [Event::Started("job".into()), Event::Dropped("job".into())],
        "{seen:?}"
    );
}

/// At most `MAX_ABANDONED_TASKS` abandoned task requests wait for their task id; the one
/// beyond is forgotten (its task would run until its ttl), and only the kept ones are cancelled.
#[tokio::test]
async fn abandoned_task_requests_are_bounded() {
    let mut s = common::serve(MCP, |b| b);
    let n = cancelkit::peer::MAX_ABANDONED_TASKS + 1;
    let mut ids = Vec::new();
    for _ in 0..n {
        drop(
            s.peer
                .request::<_, Value>("tools/call", task_call("t", 60_000)),
        );
        ids.push(s.wire.recv().await["id"].clone());
    }
    assert_eq!(s.peer.pending_requests(), n - 1);
    for (i, id) in ids.iter().enumerate() {
        s.wire
            .send(json!({"jsonrpc": "2.0", "id": id, "result": {"task": {"taskId": format!("task-{i}")}}}))
            .await;
    }
    for i in 0..n - 1 {
        let cancel = s.wire.recv().await;
        assert_eq!(cancel["params"]["taskId"], format!("task-{i}"), "{cancel}");
    }
    s.wire.assert_silent(SHORT).await;
    assert_eq!(s.peer.pending_requests(), 0);
}
