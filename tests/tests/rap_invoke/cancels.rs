//! Results through the callback route, and each way a call is cancelled: dropping its future,
//! cancelling its scope, a `#[cancellable]` timeout, a cancel overtaking its invocation.

use std::time::Duration;

use cancelkit::rap::{Invocation, InvokeError, Invoker, ToolServerTarget};
use cancelkit::{CancelReason, JsonRpcError, Scope, cancellable};
use serde_json::json;

use crate::harness::{rig, rig_with, within};

#[tokio::test]
async fn a_result_is_delivered_through_the_callback_route() {
    let rig = rig(8).await;
    let call = Invocation::new("echo", "thread-1", "call-1").arguments(json!({"text": "hi"}));
    let result = within(rig.invoker.invoke(&rig.target, call)).await.unwrap();
    assert_eq!(result.text.as_deref(), Some("hi"));
    assert_eq!(
        (result.group_id.as_str(), result.id.as_str()),
        ("thread-1", "call-1")
    );
    let result = within(rig.invoker.invoke(&rig.target, rig.sleep("call-2", 50)))
        .await
        .unwrap();
    assert_eq!(result.text.as_deref(), Some("call-2 slept"));
    assert!(
        rig.invoker.tracker().is_empty(),
        "delivered calls are forgotten"
    );
    assert_eq!(rig.invoker.pending(), 0);
    assert!(rig.stops.lock().unwrap().is_empty());
}

#[tokio::test]
async fn dropping_the_future_sends_cancel_tool_call() {
    let rig = rig(8).await;
    let call = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    rig.until_running(1).await;
    rig.drop_call(call).await;
    // The future was dropped: the tool server got /cancel_tool_call and its call's scope was
    // cancelled by it.
    let stops = rig.stops(1).await;
    assert_eq!(
        stops,
        [(
            "call-1".to_owned(),
            "cancelled by the peer: /cancel_tool_call".to_owned()
        )]
    );
    rig.until_running(0).await;
    rig.assert_interrupted("call-1");
}

/// A cancel can overtake its invocation (the runtime gives up while `POST /invoke` is on its
/// way); the server ignores a cancel for a call it does not know yet, so the invoker tells it
/// again once the invocation is answered.
#[tokio::test]
async fn a_cancel_that_overtakes_its_invocation_is_sent_again_once_it_is_answered() {
    let rig = rig_with(8, Duration::from_millis(500)).await;
    let call = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    rig.drop_call(call).await;
    assert_eq!(
        rig.server.running(),
        0,
        "the tool server has not seen the invocation yet"
    );
    let stops = rig.stops(1).await;
    assert_eq!(stops[0].1, "cancelled by the peer: /cancel_tool_call");
    rig.until_running(0).await;
    rig.assert_interrupted("call-1");
}

#[tokio::test]
async fn cancelling_the_scope_sends_cancel_tool_call_and_answers_interrupted() {
    let rig = rig(8).await;
    let (scope, canceller) = Scope::root();
    let invoker = rig.invoker.clone();
    let target = rig.target.clone();
    let call = rig.sleep("call-1", 60_000);
    let task = tokio::spawn(scope.run(async move { invoker.invoke(&target, call).await }));
    rig.until_running(1).await;
    canceller.cancel(CancelReason::Peer(Some("user pressed stop".into())));
    let outcome = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the invoke future resolves at the cancel")
        .unwrap();
    match outcome {
        Err(InvokeError::Cancelled {
            cancelled,
            interrupted,
        }) => {
            assert_eq!(
                cancelled.reason,
                CancelReason::Peer(Some("user pressed stop".into()))
            );
            assert_eq!(interrupted["text"], "interrupted");
            assert_eq!(interrupted["is_error"], true);
            assert_eq!(interrupted["id"], "call-1");
        }
        other => panic!("expected Cancelled, got {other:?}"),
    }
    let stops = rig.stops(1).await;
    assert_eq!(stops[0].1, "cancelled by the peer: /cancel_tool_call");
    rig.until_running(0).await;
    rig.assert_interrupted("call-1");
}

/// A `#[cancellable]` caller with a timeout: its scope is cancelled at the timeout, the call is
/// cancelled at the tool server, and `?` turns it into -32800.
#[cancellable(timeout = "1s")]
async fn ask_the_tool(invoker: Invoker, target: ToolServerTarget) -> Result<String, JsonRpcError> {
    let call = Invocation::new("sleep", "thread-1", "call-1").arguments(json!({"ms": 60_000}));
    let result = invoker.invoke(&target, call).await?;
    Ok(result.text.unwrap_or_default())
}

#[tokio::test]
async fn a_cancellable_callers_timeout_cancels_the_tool_call() {
    let rig = rig(8).await;
    let error = ask_the_tool(rig.invoker.clone(), rig.target.clone())
        .await
        .unwrap_err();
    assert_eq!(error.code.code(), -32800, "{error:?}");
    let stops = rig.stops(1).await;
    assert_eq!(stops[0].1, "cancelled by the peer: /cancel_tool_call");
    rig.until_running(0).await;
    rig.assert_interrupted("call-1");
}
