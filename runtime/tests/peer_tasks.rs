//! MCP 2025-11-25 tasks: task-augmented `tools/call`, `tasks/get`, `tasks/result`,
//! `tasks/cancel`, and the `tasks.cancel` capability.

mod common;

use std::time::Duration;

use cancelkit::peer::{McpRevision, Protocol};
use common::{Event, Served, next_event, serve};
use serde_json::{Value, json};

const MCP: Protocol = Protocol::Mcp(McpRevision::V2025_11_25);

async fn start_task(s: &mut Served, label: &str, ms: u64) -> String {
    let created = s
        .wire
        .call(
            json!(1),
            "tools/call",
            json!({"name": "sleep", "arguments": {"label": label, "ms": ms}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 60000);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    task["taskId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_task_augmented_call_answers_at_once_and_its_result_is_collected_later() {
    let mut s = serve(MCP, |b| b);
    let task_id = start_task(&mut s, "job", 100).await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("job".into())
    );
    let result = s
        .wire
        .call(json!(2), "tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(result["result"]["content"][0]["text"], "job", "{result}");
    let task = s
        .wire
        .call(json!(3), "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(task["result"]["status"], "completed");
}

#[tokio::test]
async fn tasks_cancel_moves_the_task_to_cancelled_before_answering_and_stops_the_work() {
    let mut s = serve(MCP, |b| b);
    let task_id = start_task(&mut s, "long", 60_000).await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("long".into())
    );
    let cancelled = s
        .wire
        .call(json!(2), "tasks/cancel", json!({"taskId": task_id}))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["result"]["taskId"], task_id.as_str());
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("long".into())
    );
    let task = s
        .wire
        .call(json!(3), "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(task["result"]["status"], "cancelled");
    let result = s
        .wire
        .call(json!(4), "tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(result["error"]["code"], -32800);
}

#[tokio::test]
async fn cancelling_a_terminal_or_unknown_task_is_invalid_params() {
    let mut s = serve(MCP, |b| b);
    let done = start_task(&mut s, "quick", 0).await;
    s.wire
        .call(json!(2), "tasks/result", json!({"taskId": done}))
        .await;
    let answer = s
        .wire
        .call(json!(3), "tasks/cancel", json!({"taskId": done}))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        format!("task `{done}` is already completed")
    );

    let cancelled = start_task(&mut s, "twice", 60_000).await;
    s.wire
        .call(json!(4), "tasks/cancel", json!({"taskId": cancelled}))
        .await;
    assert_eq!(
        s.wire
            .call(json!(5), "tasks/cancel", json!({"taskId": cancelled}))
            .await["error"]["code"],
        -32602
    );

    for (id, params) in [
        (6, json!({"taskId": "task-404"})),
        (7, json!({})),
        (8, Value::Null),
    ] {
        assert_eq!(
            s.wire.call(json!(id), "tasks/cancel", params.clone()).await["error"]["code"],
            -32602
        );
        assert_eq!(
            s.wire.call(json!(id + 10), "tasks/get", params).await["error"]["code"],
            -32602
        );
    }
}

/// A task is never cancelled with `notifications/cancelled`: the original request id is already
/// answered, so such a cancel is ignored and the task runs on.
#[tokio::test]
async fn notifications_cancelled_does_not_touch_a_task() {
    let mut s = serve(MCP, |b| b);
    let task_id = start_task(&mut s, "keep", 100).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}))
        .await;
    let result = s
        .wire
        .call(json!(2), "tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(result["result"]["content"][0]["text"], "keep");
}

/// `tasks/result` is itself a request that can be cancelled; the task runs on. MCP answers a
/// cancelled request with nothing at all, ever.
#[tokio::test]
async fn a_waiting_tasks_result_can_be_cancelled() {
    let mut s = serve(MCP, |b| b);
    let task_id = start_task(&mut s, "slow", 300).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}}))
        .await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}))
        .await;
    // Request 3 waits for the same task as request 2 did: had the cancel not taken effect, 2's
    // answer would be written when 3's is, and the stream is ordered, so it would arrive before
    // 3's answer or before the answer to the quick request 4 that follows it.
    let (result, before_3) = s
        .wire
        .call_seeing(json!(3), "tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(result["result"]["content"][0]["text"], "slow", "{result}");
    let (task, before_4) = s
        .wire
        .call_seeing(json!(4), "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(task["result"]["status"], "completed", "{task}");
    let answers_to_2: Vec<&Value> = before_3
        .iter()
        .chain(&before_4)
        .filter(|message| message.get("id") == Some(&json!(2)))
        .collect();
    assert!(
        answers_to_2.is_empty(),
        "the cancelled tasks/result was answered: {answers_to_2:?}"
    );
    s.wire.assert_silent(Duration::from_millis(100)).await;
    assert_eq!(s.peer.in_flight(), 0);
}

#[tokio::test]
async fn initialize_declares_tasks_cancel() {
    let mut s = serve(MCP, |b| b);
    let answer = s
        .wire
        .call(json!(0), "initialize", json!({"label": "i", "ms": 0}))
        .await;
    let tasks = &answer["result"]["capabilities"]["tasks"];
    assert_eq!(tasks["cancel"], json!({}), "{answer}");
    assert_eq!(tasks["requests"]["tools"]["call"], json!({}));
    // The 2024-11-05 revision has no tasks.
    let mut s = serve(Protocol::Mcp(McpRevision::V2024_11_05), |b| b);
    let answer = s
        .wire
        .call(json!(0), "initialize", json!({"label": "i", "ms": 0}))
        .await;
    assert!(answer["result"].get("capabilities").is_none(), "{answer}");
    assert_eq!(
        s.wire
            .call(json!(1), "tasks/get", json!({"taskId": "t"}))
            .await["error"]["code"],
        -32601
    );
}
