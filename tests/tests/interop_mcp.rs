//! Our MCP bindings against rmcp's model types, both directions and both revisions.

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
