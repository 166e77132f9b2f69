//! Cooperative first, abort after a grace: `#[cancellable(cooperative, grace = "2s")]`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cancelkit::protocol::jsonrpc::ErrorCode;
use cancelkit::{CancelReason, JsonRpcError, Scope, cancellable};
use tokio::sync::oneshot;

use crate::{DropGuard, flag, poll_once, reason_of};

/// Works in 10 ms steps until cancelled, then spends `wind_down` (under the grace) wrapping up
/// and returns how many steps it did.
#[cancellable(cooperative, grace = "2s")]
async fn graceful_worker(
    progress: Arc<AtomicUsize>,
    wind_down: Duration,
    dropped: Arc<AtomicBool>,
) -> Result<usize, JsonRpcError> {
    let _guard = DropGuard(dropped);
    let mut done = 0;
    while !cancelkit::is_cancelled() {
        tokio::time::sleep(Duration::from_millis(10)).await;
        done += 1;
        progress.store(done, Ordering::SeqCst);
    }
    tokio::time::sleep(wind_down).await;
    Ok(done) // a partial result
}

/// Waits in paused time until `progress` reaches `at_least`.
async fn wait_for(progress: &AtomicUsize, at_least: usize) {
    while progress.load(Ordering::SeqCst) < at_least {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn grace_lets_the_body_return_a_partial_result() {
    let (root, canceller) = Scope::root();
    let (progress, dropped) = (Arc::new(AtomicUsize::new(0)), flag());
    let call = tokio::spawn(root.run(graceful_worker(
        progress.clone(),
        Duration::from_millis(1500),
        dropped.clone(),
    )));
    wait_for(&progress, 3).await;
    let cancelled_at = tokio::time::Instant::now();
    canceller.cancel(CancelReason::Peer(None));
    let done = call
        .await
        .unwrap()
        .expect("the body's own result, within the grace");
    assert!(done >= 3, "{done}");
    // It took the body's wind-down, not the whole grace.
    let took = cancelled_at.elapsed();
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert!(dropped.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_body_that_ignores_the_cancel_is_dropped_after_the_grace() {
    let (root, canceller) = Scope::root();
    let (started, dropped) = (flag(), flag());
    let mut call = Box::pin(root.run(ignores_the_cancel(started.clone(), dropped.clone())));
    assert!(poll_once(call.as_mut()).await.is_none());
    assert!(started.load(Ordering::SeqCst));
    let cancelled_at = tokio::time::Instant::now();
    canceller.cancel(CancelReason::Peer(Some("stop".into())));
    // The cancel wakes the call (an executor polls it now); the body is not dropped yet, and
    // the grace starts.
    assert!(poll_once(call.as_mut()).await.is_none());
    assert!(!dropped.load(Ordering::SeqCst), "dropped at the cancel");
    // Just before the grace runs out the body is still there.
    tokio::time::sleep(Duration::from_millis(1990)).await;
    assert!(poll_once(call.as_mut()).await.is_none());
    assert!(
        !dropped.load(Ordering::SeqCst),
        "dropped before the grace ran out"
    );
    let error = call.as_mut().await.unwrap_err();
    // Dropped when the grace ran out, not later when the call's future goes.
    assert!(dropped.load(Ordering::SeqCst), "the body was dropped");
    assert_eq!(cancelled_at.elapsed(), Duration::from_secs(2));
    assert_eq!(error.code.code(), -32800);
    assert_eq!(reason_of(&error), "cancelled by the peer: stop");
    drop(call);
}

#[cancellable(cooperative, grace = "2s")]
pub async fn ignores_the_cancel(
    started: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
) -> Result<u32, JsonRpcError> {
    let _guard = DropGuard(dropped);
    started.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(1)
}

#[cancellable(cooperative, timeout = "1s", grace = "500ms")]
async fn timed_graceful(
    wind_down: Duration,
    dropped: Arc<AtomicBool>,
) -> Result<Option<CancelReason>, JsonRpcError> {
    let _guard = DropGuard(dropped);
    cancelkit::cancelled().await;
    tokio::time::sleep(wind_down).await;
    Ok(cancelkit::cancel_reason())
}

#[tokio::test(start_paused = true)]
async fn timeout_then_grace() {
    // Winds down within the grace after the timeout: its own result, at 1 s + 300 ms.
    let start = tokio::time::Instant::now();
    let reason = timed_graceful(Duration::from_millis(300), flag())
        .await
        .unwrap();
    assert_eq!(reason, Some(CancelReason::Timeout(Duration::from_secs(1))));
    assert_eq!(start.elapsed(), Duration::from_millis(1300));

    // Takes longer than the grace: dropped at 1 s + 500 ms, with the timeout as the reason.
    let start = tokio::time::Instant::now();
    let dropped = flag();
    let error = timed_graceful(Duration::from_secs(60), dropped.clone())
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(error.code, ErrorCode::RequestCancelled);
    assert_eq!(reason_of(&error), "timed out after 1s");
}

/// Spawns a child with `cancelkit::spawn`, reports the child's cancel reason, and never stops.
#[cancellable(cooperative, grace = "1s")]
async fn spawns_and_ignores(
    child_saw: oneshot::Sender<Option<CancelReason>>,
    child_started: oneshot::Sender<()>,
) -> Result<(), JsonRpcError> {
    cancelkit::spawn(async move {
        child_started.send(()).unwrap();
        cancelkit::cancelled().await;
        child_saw.send(cancelkit::cancel_reason()).unwrap();
    });
    std::future::pending().await
}

#[tokio::test(start_paused = true)]
async fn spawned_work_is_cancelled_at_the_cancel_not_at_the_end_of_the_grace() {
    let (root, canceller) = Scope::root();
    let (saw_tx, saw_rx) = oneshot::channel();
    let (started_tx, started_rx) = oneshot::channel();
    let call = tokio::spawn(root.run(spawns_and_ignores(saw_tx, started_tx)));
    started_rx.await.unwrap();
    let cancelled_at = tokio::time::Instant::now();
    canceller.cancel(CancelReason::Shutdown);
    let saw = tokio::time::timeout(Duration::from_millis(100), saw_rx).await;
    assert_eq!(
        saw.expect("the spawned child is cancelled").unwrap(),
        Some(CancelReason::Shutdown)
    );
    assert_eq!(
        cancelled_at.elapsed(),
        Duration::ZERO,
        "the child is told at once"
    );
    let call = tokio::time::timeout(Duration::from_secs(5), call).await;
    let error = call.expect("dropped after the grace").unwrap().unwrap_err();
    assert_eq!(cancelled_at.elapsed(), Duration::from_secs(1));
    assert_eq!(reason_of(&error), "cancelled by shutdown");
}

#[tokio::test(start_paused = true)]
async fn without_a_cancel_the_grace_changes_nothing() {
    let (progress, dropped) = (Arc::new(AtomicUsize::new(0)), flag());
    // Never cancelled: runs until the test's own timeout would stop it; check it keeps going.
    let call = tokio::spawn(graceful_worker(
        progress.clone(),
        Duration::ZERO,
        dropped.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(progress.load(Ordering::SeqCst) >= 900);
    assert!(!call.is_finished() && !dropped.load(Ordering::SeqCst));
    call.abort();
}
