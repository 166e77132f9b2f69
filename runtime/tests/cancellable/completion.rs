//! A cancel against the body's completion: before the start, mid-await, before the next poll
//! of a ready value, racing the body's own completion.

use std::sync::atomic::Ordering;

use cancelkit::protocol::jsonrpc::ErrorCode;
use cancelkit::{CancelReason, JsonRpcError, Scope, cancellable};
use tokio::sync::oneshot;

use crate::{flag, poll_once, reason_of, wait_forever};

#[tokio::test]
async fn cancelled_before_start_never_runs_the_body() {
    let (root, canceller) = Scope::root();
    canceller.cancel(CancelReason::Peer(Some("too late".into())));
    let (started, dropped) = (flag(), flag());
    let error = root
        .run(wait_forever(started.clone(), dropped))
        .await
        .unwrap_err();
    assert!(!started.load(Ordering::SeqCst));
    assert_eq!(error.code, ErrorCode::RequestCancelled);
    assert_eq!(error.message, "Request cancelled");
    assert_eq!(reason_of(&error), "cancelled by the peer: too late");
}

#[tokio::test]
async fn cancel_mid_await_drops_the_body_and_returns_32800() {
    let (root, canceller) = Scope::root();
    let (started, dropped) = (flag(), flag());
    let call = tokio::spawn(root.run(wait_forever(started.clone(), dropped.clone())));
    while !started.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    assert!(!dropped.load(Ordering::SeqCst));
    canceller.cancel(CancelReason::Peer(None));
    let error = call.await.unwrap().unwrap_err();
    assert!(dropped.load(Ordering::SeqCst), "the body was dropped");
    assert_eq!(error.code.code(), -32800);
    assert_eq!(reason_of(&error), "cancelled by the peer");
}

#[cancellable]
pub async fn finish_on_signal(done: oneshot::Receiver<u32>) -> Result<u32, JsonRpcError> {
    Ok(done.await.unwrap())
}

/// A cancel that arrives while the body waits wins over a result that would be ready at the
/// body's next poll: the body is dropped at that `.await` and never sees the value.
#[tokio::test]
async fn a_cancel_before_the_next_poll_drops_the_body_even_if_its_value_is_ready() {
    let (root, canceller) = Scope::root();
    let (tx, rx) = oneshot::channel();
    let mut call = Box::pin(root.run(finish_on_signal(rx)));
    assert!(poll_once(call.as_mut()).await.is_none());
    canceller.cancel(CancelReason::Peer(None));
    tx.send(7).unwrap();
    assert!(call.await.unwrap_err().is_cancelled());
}

/// Without a cancel, the same call completes with the value.
#[tokio::test]
async fn without_a_cancel_the_value_is_returned() {
    let (root, _canceller) = Scope::root();
    let (tx, rx) = oneshot::channel();
    let mut call = Box::pin(root.run(finish_on_signal(rx)));
    assert!(poll_once(call.as_mut()).await.is_none());
    tx.send(7).unwrap();
    assert_eq!(call.await.unwrap(), 7);
}

#[cancellable]
async fn cancels_its_own_caller_then_returns(
    canceller: cancelkit::Canceller,
) -> Result<u32, JsonRpcError> {
    canceller.cancel(CancelReason::Shutdown);
    Ok(9)
}

/// Completion racing cancel: the cancel lands while the body runs, and the body completes in
/// that same poll, so its result is returned.
#[tokio::test]
async fn completion_racing_cancel_returns_the_result() {
    let (root, canceller) = Scope::root();
    assert_eq!(
        root.run(cancels_its_own_caller_then_returns(canceller))
            .await
            .unwrap(),
        9
    );
}
