//! What is refused: late results after a cancel (also when the tracker cancelled the call),
//! calls beyond the pending bound, and refused invocations.

use cancelkit::rap::{Delivered, Invocation, InvokeError, ToolServerTarget};
use serde_json::{Value, json};

use crate::harness::{rig, within};

#[tokio::test]
async fn a_late_result_after_a_cancel_is_dropped() {
    let rig = rig(8).await;
    let call = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    rig.until_running(1).await;
    rig.drop_call(call).await;
    rig.stops(1).await;
    // A tool server that sends its result anyway, as the crossing allows: POSTed to the call's
    // own callback URL, refused (the call no longer waits, so its secret is forgotten) with
    // the same answer as a result for a call never made, and dropped.
    let late = json!({"type": "tool_result", "group_id": "thread-1", "id": "call-1", "text": "finished after all"});
    let post = |url: String, body: Value| async move {
        let response = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    let (status, answer) = post(rig.callback_of("call-1"), late.clone()).await;
    assert_eq!(status, 403, "{answer}");
    let unknown =
        json!({"type": "tool_result", "group_id": "thread-1", "id": "nobody", "text": "x"});
    assert_eq!(
        post(rig.callback_of("call-1"), unknown.clone()).await,
        (status, answer),
        "nothing about the call is revealed"
    );
    let secret = rig.secret_of("call-1");
    assert_eq!(rig.invoker.deliver(&secret, late), Delivered::Refused);
    rig.assert_interrupted("call-1");
    // A result for a call never made is refused too, and a malformed one ignored.
    assert_eq!(rig.invoker.deliver(&secret, unknown), Delivered::Refused);
    assert_eq!(
        rig.invoker.deliver(&secret, json!({"id": "call-1"})),
        Delivered::Malformed
    );
    let bad_id = json!({"type": "tool_result", "group_id": "../x", "id": "call-1", "text": "x"});
    assert_eq!(rig.invoker.deliver(&secret, bad_id), Delivered::Malformed);
}

/// A call cancelled through the tracker itself (not by dropping its future) ends with
/// `Closed` when its late result is dropped; a tracker shared with other code keeps its records
/// of calls the invoker did not make.
#[tokio::test]
async fn a_call_cancelled_through_the_tracker_ends_when_its_result_is_dropped() {
    let rig = rig(8).await;
    let call = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    rig.until_running(1).await;
    let tracker = rig.invoker.tracker();
    assert!(tracker.cancel("thread-1", "call-1").is_some());
    let stops = rig.stops(1).await;
    assert_eq!(stops[0].1, "cancelled by the peer: /cancel_tool_call");
    // The call still waits here, so its result, with its secret, is taken and dropped.
    let late = json!({"type": "tool_result", "group_id": "thread-1", "id": "call-1", "text": "x"});
    let secret = rig.secret_of("call-1");
    assert_eq!(rig.invoker.deliver(&secret, late), Delivered::Dropped);
    let outcome = within(call).await.unwrap();
    assert!(matches!(outcome, Err(InvokeError::Closed)), "{outcome:?}");

    tracker.start("thread-1", "elsewhere").unwrap();
    let other =
        json!({"type": "tool_result", "group_id": "thread-1", "id": "elsewhere", "text": "x"});
    assert_eq!(
        rig.invoker.deliver(&secret, other.clone()),
        Delivered::Refused
    );
    assert!(
        tracker.deliver(other).is_some(),
        "the other call's record is left to its owner"
    );
}

#[tokio::test]
async fn at_most_max_pending_calls_wait() {
    let rig = rig(2).await;
    let first = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-1", 60_000)));
    let second = tokio::spawn(rig.invoker.invoke(&rig.target, rig.sleep("call-2", 60_000)));
    rig.until_running(2).await;
    let refused = within(rig.invoker.invoke(&rig.target, rig.sleep("call-3", 0)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            InvokeError::Full {
                pending: 2,
                limit: 2
            }
        ),
        "{refused:?}"
    );
    assert_eq!(
        refused.to_string(),
        "too many tool calls waiting for a result: 2 pending, the limit is 2"
    );
    assert_eq!(rig.server.running(), 2, "the refused call was never sent");
    // A place frees as soon as a waiting call is given up (and cancelled).
    rig.drop_call(first).await;
    rig.stops(1).await;
    let result = within(rig.invoker.invoke(&rig.target, rig.sleep("call-4", 10)))
        .await
        .unwrap();
    assert_eq!(result.text.as_deref(), Some("call-4 slept"));
    rig.drop_call(second).await;
    rig.stops(2).await;
    rig.until_running(0).await;
    assert_eq!(rig.invoker.pending(), 0);
}

#[tokio::test]
async fn a_refused_invocation_is_an_error_and_is_forgotten() {
    let rig = rig(8).await;
    let error = within(rig.invoker.invoke(
        &rig.target,
        Invocation::new("no_such_tool", "thread-1", "call-1"),
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&error, InvokeError::Refused { status: 400, body } if body.contains("no operation")),
        "{error:?}"
    );
    let wrong_token = ToolServerTarget::new(rig.target.base_url.clone()).with_bearer_token("x");
    let error = within(rig.invoker.invoke(&wrong_token, rig.sleep("call-2", 0)))
        .await
        .unwrap_err();
    assert!(
        matches!(error, InvokeError::Refused { status: 401, .. }),
        "{error:?}"
    );
    assert!(rig.invoker.tracker().is_empty());
    assert_eq!(rig.invoker.pending(), 0);
    let error = within(rig.invoker.invoke(&rig.target, rig.sleep("a b", 0)))
        .await
        .unwrap_err();
    assert!(matches!(error, InvokeError::InvalidId), "{error:?}");
    assert!(
        rig.stops.lock().unwrap().is_empty(),
        "nothing was cancelled"
    );
}
