//! Our MCP bindings against rmcp's model types, both directions and all three revisions.

use cancelkit_protocol::jsonrpc::RequestId;
use cancelkit_protocol::mcp::{v2024_11_05 as v2024, v2025_11_25 as v2025};
use rmcp::model as official;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

fn convert<T: DeserializeOwned>(value: &impl Serialize) -> T {
    let json = serde_json::to_value(value).unwrap();
    serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{json} does not parse: {e}"))
}

type OfficialCancelled = official::JsonRpcNotification<official::CancelledNotification>;

fn official_cancelled(id: Option<official::RequestId>, reason: Option<&str>) -> OfficialCancelled {
    official::JsonRpcNotification {
        jsonrpc: official::JsonRpcVersion2_0,
        notification: official::CancelledNotification::new(
            official::CancelledNotificationParam::new(id, reason.map(str::to_owned)),
        ),
    }
}

#[test]
fn cancelled_2024_round_trips_with_rmcp() {
    let ours: v2024::CancelledNotification = serde_json::from_value(json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "123", "reason": "User requested cancellation"}
    }))
    .unwrap();
    let theirs: OfficialCancelled = convert(&ours);
    let params = &theirs.notification.params;
    assert_eq!(
        params.request_id,
        Some(official::NumberOrString::String("123".into()))
    );
    assert_eq!(
        params.reason.as_deref(),
        Some("User requested cancellation")
    );
    let back: v2024::CancelledNotification = convert(&theirs);
    assert_eq!(back, ours);

    let theirs = official_cancelled(Some(official::NumberOrString::Number(9)), None);
    let ours: v2024::CancelledNotification = convert(&theirs);
    assert_eq!(ours.params.request_id, RequestId::Number(9));
    assert_eq!(ours.params.reason, None);
    assert_eq!(
        serde_json::to_value(&ours).unwrap(),
        serde_json::to_value(&theirs).unwrap()
    );
}

/// 2024-11-05 requires `requestId`; rmcp (which follows the later revisions) may omit it.
#[test]
fn a_2024_cancel_without_request_id_is_rejected_but_2025_accepts_it() {
    let theirs = official_cancelled(None, Some("task"));
    let json = serde_json::to_value(&theirs).unwrap();
    assert!(serde_json::from_value::<v2024::CancelledNotification>(json.clone()).is_err());
    let ours: v2025::CancelledNotification = serde_json::from_value(json).unwrap();
    assert_eq!(ours.params.request_id, None);
}

#[test]
fn cancelled_2025_round_trips_with_rmcp() {
    let ours: v2025::CancelledNotification = serde_json::from_value(json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 77, "reason": "timeout", "_meta": {"io.example/trace": "t"}}
    }))
    .unwrap();
    let theirs: OfficialCancelled = convert(&ours);
    assert_eq!(
        theirs.notification.params.request_id,
        Some(official::NumberOrString::Number(77))
    );
    assert_eq!(
        theirs.notification.params.reason.as_deref(),
        Some("timeout")
    );
    let back: v2025::CancelledNotification = convert(&theirs);
    assert_eq!(back, ours);

    let theirs = official_cancelled(
        Some(official::NumberOrString::String("abc".into())),
        Some("x"),
    );
    let ours: v2025::CancelledNotification = convert(&theirs);
    assert_eq!(ours.params.request_id, Some(RequestId::from("abc")));
    assert_eq!(
        v2025::CancelledNotification::METHOD,
        "notifications/cancelled"
    );
    assert_eq!(
        serde_json::to_value(&ours).unwrap(),
        serde_json::to_value(&theirs).unwrap()
    );
}

#[test]
fn tasks_cancel_request_round_trips_with_rmcp() {
    let ours: v2025::CancelTaskRequest = serde_json::from_value(json!({
        "jsonrpc": "2.0",
        "id": 11,
        "method": "tasks/cancel",
        "params": {"taskId": "task-1"}
    }))
    .unwrap();
    let theirs: official::JsonRpcRequest<official::CancelTaskRequest> = convert(&ours);
    assert_eq!(theirs.id, official::NumberOrString::Number(11));
    assert_eq!(theirs.request.params.task_id, "task-1");
    let back: v2025::CancelTaskRequest = convert(&theirs);
    assert_eq!(back, ours);

    let theirs = official::JsonRpcRequest::new(
        official::NumberOrString::String("c-1".into()),
        official::CancelTaskRequest::new(official::CancelTaskParams::new("task-9")),
    );
    let ours: v2025::CancelTaskRequest = convert(&theirs);
    assert_eq!(ours.id, RequestId::from("c-1"));
    assert_eq!(ours.params.task_id, "task-9");
    assert_eq!(
        serde_json::to_value(&ours).unwrap(),
        serde_json::to_value(&theirs).unwrap()
    );
}

#[test]
fn task_statuses_agree_with_rmcp() {
    let pairs = [
        (official::TaskStatus::Working, v2025::TaskStatus::Working),
        (
            official::TaskStatus::InputRequired,
            v2025::TaskStatus::InputRequired,
        ),
        (
            official::TaskStatus::Completed,
            v2025::TaskStatus::Completed,
        ),
        (official::TaskStatus::Failed, v2025::TaskStatus::Failed),
        (
            official::TaskStatus::Cancelled,
            v2025::TaskStatus::Cancelled,
        ),
    ];
    for (theirs, ours) in pairs {
        assert_eq!(convert::<v2025::TaskStatus>(&theirs), ours);
        assert_eq!(convert::<official::TaskStatus>(&ours), theirs);
    }
}

#[test]
fn request_ids_agree_with_rmcp() {
    for (theirs, ours) in [
        (official::NumberOrString::Number(0), RequestId::Number(0)),
        (official::NumberOrString::Number(-5), RequestId::Number(-5)),
        (
            official::NumberOrString::String("7".into()),
            RequestId::from("7"),
        ),
    ] {
        assert_eq!(convert::<RequestId>(&theirs), ours);
        assert_eq!(convert::<official::NumberOrString>(&ours), theirs);
    }
}

#[test]
fn cancel_method_tables() {
    assert_eq!(v2024::CANCEL_METHODS, ["notifications/cancelled"]);
    assert_eq!(
        v2025::CANCEL_METHODS,
        ["notifications/cancelled", "tasks/cancel"]
    );
    assert_eq!(v2025::CancelTaskRequest::METHOD, "tasks/cancel");
}

/// 2026-07-28: our bindings read what rmcp 3.11 writes and rmcp reads what ours write, for the
/// cancel notification, `server/discover` and the tasks extension's task, state and ack.
mod v2026 {
    use super::*;
    use cancelkit_protocol::mcp::v2026_07_28 as ours;

    fn example(name: &str) -> serde_json::Value {
        let path = cancelkit_tests::schema_dir()
            .join("examples/mcp-2026-07-28")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    #[test]
    fn the_cancel_notification_round_trips_with_rmcp() {
        let theirs = official_cancelled(Some(official::NumberOrString::Number(4)), Some("user"));
        let mine: ours::CancelledNotification = convert(&theirs);
        assert_eq!(mine.params.request_id, RequestId::Number(4));
        let back: OfficialCancelled = convert(&mine);
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&theirs).unwrap()
        );
        // 2026-07-28 requires the id that rmcp (following 2025-11-25) may leave out.
        let without = serde_json::to_value(official_cancelled(None, Some("task"))).unwrap();
        assert!(serde_json::from_value::<ours::CancelledNotification>(without).is_err());
    }

    #[test]
    fn discover_results_parse_both_ways() {
        let mine: ours::DiscoverResult =
            serde_json::from_value(example("DiscoverResult.valid-1.json")).unwrap();
        let theirs: official::DiscoverResult = convert(&mine);
        assert_eq!(theirs.supported_versions.len(), 3);
        assert_eq!(theirs.result_type, official::ResultType::COMPLETE);
        let back: ours::DiscoverResult = convert(&theirs);
        assert_eq!(back.supported_versions, mine.supported_versions);
    }

    #[test]
    fn extension_tasks_parse_both_ways() {
        let created: ours::CreateTaskResult =
            serde_json::from_value(example("CreateTaskResult.valid-1.json")).unwrap();
        let theirs: official::CreateTaskResult = convert(&created);
        assert_eq!(theirs.task.task_id, "task-7");
        assert_eq!(theirs.task.ttl_ms, Some(60_000));
        let back: ours::CreateTaskResult = convert(&theirs);
        assert_eq!(back, created);

        for name in [
            "GetTaskResult.valid-2.json",
            "GetTaskResult.valid-3.json",
            "GetTaskResult.valid-4.json",
        ] {
            let state: ours::GetTaskResult = serde_json::from_value(example(name)).unwrap();
            let theirs: official::GetTaskResult = convert(&state);
            let back: ours::GetTaskResult = convert(&theirs);
            assert_eq!(back, state, "{name}");
        }

        let ack: ours::CancelTaskResult =
            serde_json::from_value(example("CancelTaskResult.valid-1.json")).unwrap();
        let theirs: official::TaskAckResult = convert(&ack);
        let back: ours::CancelTaskResult = convert(&theirs);
        assert_eq!(back, ack);
        // A 2025-11-25 answer (the task) is not an acknowledgement, for either side.
        let legacy = json!({"taskId": "t", "status": "cancelled", "createdAt": "x", "lastUpdatedAt": "x", "ttl": 1});
        assert!(serde_json::from_value::<official::TaskAckResult>(legacy.clone()).is_err());
        assert!(serde_json::from_value::<ours::CancelTaskResult>(legacy).is_err());
    }
}
