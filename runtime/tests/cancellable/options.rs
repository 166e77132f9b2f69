//! The attribute's options: `timeout`, `cooperative` (a partial result, the reason), and
//! `on_cancel`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cancelkit::protocol::jsonrpc::ErrorCode;
use cancelkit::{CancelReason, JsonRpcError, Scope, cancellable};
use tokio::sync::oneshot;

use crate::{DropGuard, flag, poll_once, reason_of};

#[cancellable(timeout = "20ms")]
pub async fn slow(dropped: Arc<AtomicBool>) -> Result<(), JsonRpcError> {
    let _guard = DropGuard(dropped);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn timeout_cancels_with_the_timeout_reason() {
    let dropped = flag();
    let error = slow(dropped.clone()).await.unwrap_err();
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(error.code, ErrorCode::RequestCancelled);
    assert_eq!(reason_of(&error), "timed out after 20ms");
}

#[cancellable(timeout = "20ms")]
async fn finish_on_signal_with_deadline(done: oneshot::Receiver<u32>) -> Result<u32, JsonRpcError> {
    Ok(done.await.unwrap())
}

/// A deadline that passed while the body waited is a cancel like any other: at the next poll it
/// wins over a value the body would now return.
#[tokio::test(start_paused = true)]
async fn a_deadline_passed_before_the_next_poll_wins_over_a_ready_value() {
    let (tx, rx) = oneshot::channel();
    let mut call = Box::pin(finish_on_signal_with_deadline(rx));
    assert!(poll_once(call.as_mut()).await.is_none());
    tokio::time::advance(Duration::from_millis(20)).await;
    tx.send(7).unwrap();
    let error = call.await.unwrap_err();
    assert_eq!(reason_of(&error), "timed out after 20ms");
}

#[cancellable(cooperative)]
pub async fn count_until_cancelled(progress: Arc<AtomicUsize>) -> Result<usize, JsonRpcError> {
    let mut done = 0;
    while !cancelkit::is_cancelled() {
        done += 1;
        progress.store(done, Ordering::SeqCst);
        tokio::task::yield_now().await;
    }
    Ok(done) // a partial result
}

#[tokio::test]
async fn cooperative_returns_a_partial_result() {
    let (root, canceller) = Scope::root();
    let progress = Arc::new(AtomicUsize::new(0));
    let call = tokio::spawn(root.run(count_until_cancelled(progress.clone())));
    while progress.load(Ordering::SeqCst) < 3 {
        tokio::task::yield_now().await;
    }
    canceller.cancel(CancelReason::Peer(None));
    let done = call.await.unwrap().unwrap();
    assert!(done >= 3);
}

#[cancellable(cooperative, timeout = "10ms")]
async fn cooperative_with_deadline() -> Result<Option<CancelReason>, JsonRpcError> {
    cancelkit::cancelled().await;
    Ok(cancelkit::cancel_reason())
}

#[tokio::test(start_paused = true)]
async fn cooperative_timeout_cancels_the_scope_and_tells_why() {
    assert_eq!(
        cooperative_with_deadline().await.unwrap(),
        Some(CancelReason::Timeout(Duration::from_millis(10)))
    );
}

#[derive(Debug, PartialEq)]
struct PromptResult {
    stop_reason: &'static str,
}

fn cancelled_turn() -> PromptResult {
    PromptResult {
        stop_reason: "cancelled",
    }
}

#[cancellable(on_cancel = cancelled_turn)]
async fn prompt(started: Arc<AtomicBool>) -> Result<PromptResult, JsonRpcError> {
    started.store(true, Ordering::SeqCst);
    std::future::pending::<()>().await;
    Ok(PromptResult {
        stop_reason: "end_turn",
    })
}

#[tokio::test]
async fn on_cancel_returns_its_value_instead_of_an_error() {
    let (root, canceller) = Scope::root();
    let started = flag();
    let call = tokio::spawn(root.run(prompt(started.clone())));
    while !started.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    canceller.cancel(CancelReason::Peer(None));
    assert_eq!(call.await.unwrap().unwrap(), cancelled_turn());
}
