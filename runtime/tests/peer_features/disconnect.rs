//! The disconnect policy: what a hang-up cancels, what runs on, and until when.

use std::time::{Duration, Instant};

use cancelkit::CancelReason;
use cancelkit::peer::{DisconnectPolicy, Protocol};
use serde_json::json;
use tokio::sync::mpsc;

use crate::causes::{cause_routes, next_cause};
use crate::common::{Event, next_event, serve_extended};
use crate::tasks::task_call;
use crate::{MCP, common, request, wait_in_flight};

#[tokio::test]
async fn by_default_a_hang_up_cancels_everything() {
    let mut s = common::serve(Protocol::Acp, |b| b);
    s.wire
        .send(request(1, "sleep", json!({"label": "a", "ms": 60_000})))
        .await;
    assert_eq!(next_event(&mut s.events).await, Event::Started("a".into()));
    s.wire.hang_up().await;
    assert_eq!(next_event(&mut s.events).await, Event::Dropped("a".into()));
}

/// A named method runs to completion after the client hangs up (seen through its handler's
/// events: it finished, it was not dropped); the others are cancelled with the cause
/// `ConnectionClosed`.
#[tokio::test]
async fn a_named_method_finishes_after_the_client_hangs_up() {
    let (tx, mut causes) = mpsc::unbounded_channel();
    let mut s = serve_extended(
        MCP,
        move |router, _| cause_routes(router, tx),
        |b| b.on_disconnect(DisconnectPolicy::finish(["sleep"]).max(Duration::from_secs(5))),
    );
    s.wire
        .send(request(1, "sleep", json!({"label": "keep", "ms": 300})))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("keep".into())
    );
    s.wire.send(request(2, "watch", json!({}))).await;
    wait_in_flight(&s, 2).await;
    s.wire.hang_up().await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::ConnectionClosed)
    );
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Finished("keep".into())
    );
    // Its task ends too: nothing is left in flight, nothing waits forever to be written.
    wait_in_flight(&s, 0).await;
    tokio::time::timeout(Duration::from_secs(5), s.server.closed())
        .await
        .unwrap();
}

/// Methods that run on after a disconnect are still cancelled at the policy's bound, with the
/// cause `ConnectionClosed`.
#[tokio::test]
async fn methods_that_run_on_stop_at_the_bound() {
    let (tx, mut causes) = mpsc::unbounded_channel();
    let mut s = serve_extended(
        MCP,
        move |router, _| cause_routes(router, tx),
        |b| b.on_disconnect(DisconnectPolicy::finish(["watch"]).max(Duration::from_millis(300))),
    );
    s.wire.send(request(1, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    let hung_up = Instant::now();
    s.wire.hang_up().await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::ConnectionClosed)
    );
    let after = hung_up.elapsed();
    assert!(
        after >= Duration::from_millis(280),
        "cancelled after {after:?}, before the bound"
    );
    // The bound is the policy's 300 ms, not the 2 s shutdown grace.
    assert!(
        after < Duration::from_millis(1500),
        "cancelled after {after:?}"
    );
}

/// MCP tasks run on after a hang-up when the policy says so, and are stopped otherwise.
#[tokio::test]
async fn tasks_finish_after_a_hang_up_when_the_policy_says_so() {
    for (finish, expected) in [
        (true, Event::Finished("job".into())),
        (false, Event::Dropped("job".into())),
    ] {
        let mut s = common::serve(MCP, |b| {
            b.on_disconnect(
                DisconnectPolicy::finish(Vec::<String>::new())
                    .tasks(finish)
                    .max(Duration::from_secs(5)),
            )
        });
        let created = s
            .wire
            .call(json!(1), "tools/call", task_call("job", 300))
            .await;
        assert_eq!(created["result"]["task"]["status"], "working", "{created}");
        assert_eq!(
            next_event(&mut s.events).await,
            Event::Started("job".into())
        );
        s.wire.hang_up().await;
        assert_eq!(
            next_event(&mut s.events).await,
            expected,
            "finish tasks: {finish}"
        );
    }
}
