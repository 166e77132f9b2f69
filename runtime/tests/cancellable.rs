//! `#[cancellable]` and the scope, as a handler author sees them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cancelkit::protocol::jsonrpc::ErrorCode;
use cancelkit::{
    CancelReason, CancellationToken, Cancelled, JsonRpcError, Scope, cancellable, scope,
};
use tokio::sync::oneshot;

/// Sets its flag when dropped: observes that a body was dropped.
struct DropGuard(Arc<AtomicBool>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn flag() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

#[cancellable]
async fn wait_forever(
    started: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
) -> Result<u32, JsonRpcError> {
    started.store(true, Ordering::SeqCst);
    let _guard = DropGuard(dropped);
    std::future::pending::<()>().await;
    Ok(1)
}

fn reason_of(error: &JsonRpcError) -> String {
    error.data.as_ref().unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_owned()
}

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
async fn finish_on_signal(done: oneshot::Receiver<u32>) -> Result<u32, JsonRpcError> {
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

/// Polls a future once; `Some` if it completed.
async fn poll_once<F: std::future::Future + Unpin>(fut: F) -> Option<F::Output> {
    let mut fut = fut;
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[cancellable(timeout = "20ms")]
async fn slow(dropped: Arc<AtomicBool>) -> Result<(), JsonRpcError> {
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
async fn count_until_cancelled(progress: Arc<AtomicUsize>) -> Result<usize, JsonRpcError> {
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

/// Three levels; each level reports its token outwards and holds a guard.
#[cancellable]
async fn level(
    depth: usize,
    tokens: tokio::sync::mpsc::UnboundedSender<(usize, CancellationToken)>,
    dropped: Arc<[AtomicBool; 3]>,
    release: Arc<tokio::sync::Notify>,
) -> Result<usize, JsonRpcError> {
    struct Guard(Arc<[AtomicBool; 3]>, usize);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0[self.1].store(true, Ordering::SeqCst);
        }
    }
    let _guard = Guard(dropped.clone(), depth);
    tokens.send((depth, cancelkit::current().unwrap())).unwrap();
    let inner = if depth < 2 {
        Box::pin(level(depth + 1, tokens, dropped, release.clone())).await
    } else {
        release.notified().await;
        Ok(depth)
    };
    // An inner cancellation is an error the outer level can handle and go on.
    Ok(depth * 10 + inner.unwrap_or(9))
}

#[tokio::test]
async fn cancelling_the_outer_level_cancels_all_three() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let dropped = Arc::new([
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
    ]);
    let (root, canceller) = Scope::root();
    let call = tokio::spawn(root.run(level(
        0,
        tx,
        dropped.clone(),
        Arc::new(tokio::sync::Notify::new()),
    )));
    for _ in 0..3 {
        rx.recv().await.unwrap();
    }
    canceller.cancel(CancelReason::Peer(Some("stop".into())));
    let error = call.await.unwrap().unwrap_err();
    // The outer level is not polled again, so it cannot turn the inner error into a result.
    assert_eq!(reason_of(&error), "cancelled by the peer: stop");
    assert!(dropped.iter().all(|d| d.load(Ordering::SeqCst)));
}

#[tokio::test]
async fn cancelling_the_inner_level_leaves_the_outer_running() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let dropped = Arc::new([
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
    ]);
    let release = Arc::new(tokio::sync::Notify::new());
    let call = tokio::spawn(level(0, tx, dropped.clone(), release));
    let mut tokens = Vec::new();
    for _ in 0..3 {
        tokens.push(rx.recv().await.unwrap());
    }
    tokens.sort_by_key(|(depth, _)| *depth);
    tokens[2].1.cancel();
    // Level 2 fails with -32800, level 1 maps it to 9 and finishes, level 0 finishes.
    assert_eq!(call.await.unwrap().unwrap(), 19);
    assert!(dropped[2].load(Ordering::SeqCst));
    assert!(!tokens[0].1.is_cancelled() && !tokens[1].1.is_cancelled());
}

#[tokio::test]
async fn spawn_inherits_cancellation() {
    let (root, canceller) = Scope::root();
    let (tx, rx) = oneshot::channel();
    // `spawn` reads the ambient scope when called, so call it inside the scope.
    let child = root
        .run(async move {
            let handle = cancelkit::spawn(async move {
                tx.send(()).unwrap();
                cancelkit::cancelled().await;
                cancelkit::cancel_reason()
            });
            Ok::<_, ()>(handle)
        })
        .await
        .unwrap();
    rx.await.unwrap();
    canceller.cancel(CancelReason::Shutdown);
    assert_eq!(child.await.unwrap(), Some(CancelReason::Shutdown));
}

#[tokio::test]
async fn works_without_any_ambient_scope() {
    assert!(cancelkit::current().is_none());
    let (tx, rx) = oneshot::channel();
    tx.send(3).unwrap();
    assert_eq!(finish_on_signal(rx).await.unwrap(), 3);
}

#[cancellable(token = ct)]
async fn with_token_parameter(
    ct: CancellationToken,
    started: Arc<AtomicBool>,
) -> Result<(), JsonRpcError> {
    assert!(cancelkit::current().is_some());
    started.store(true, Ordering::SeqCst);
    std::future::pending().await
}

#[tokio::test]
async fn a_token_parameter_is_the_parent() {
    let ct = CancellationToken::new();
    let started = flag();
    // An ambient scope that is never cancelled: the parameter, not the ambient scope, decides.
    let call = tokio::spawn(scope(
        CancellationToken::new(),
        with_token_parameter(ct.clone(), started.clone()),
    ));
    while !started.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    ct.cancel();
    let error = call.await.unwrap().unwrap_err();
    assert_eq!(reason_of(&error), "cancelled by its caller");
}

/// A user-defined error type with `From<Cancelled>`.
#[derive(Debug, PartialEq)]
enum AppError {
    Cancelled(CancelReason),
}

impl From<Cancelled> for AppError {
    fn from(c: Cancelled) -> Self {
        AppError::Cancelled(c.reason)
    }
}

struct Service {
    calls: usize,
}

trait Handler {
    async fn handle(&self, n: u32) -> Result<u32, AppError>;
}

impl Handler for Service {
    #[cancellable]
    async fn handle(&self, n: u32) -> Result<u32, AppError> {
        Ok(n + self.calls as u32)
    }
}

impl Service {
    #[cancellable]
    async fn by_mut(&mut self) -> Result<usize, AppError> {
        self.calls += 1;
        Ok(self.calls)
    }

    #[cancellable(timeout = "1s")]
    async fn by_arc(self: Arc<Self>, extra: impl Into<usize>) -> Result<usize, AppError> {
        Ok(self.calls + extra.into())
    }

    #[cancellable]
    async fn generic<T>(&self, items: Vec<T>) -> Result<usize, AppError>
    where
        T: Clone + Send,
    {
        let early = items.is_empty();
        if early {
            return Ok(0);
        }
        let copies: Vec<T> = items.to_vec();
        Ok(copies.len() + self.calls)
    }
}

#[tokio::test]
async fn methods_generics_impl_trait_and_user_errors() {
    let mut service = Service { calls: 0 };
    assert_eq!(service.by_mut().await, Ok(1));
    assert_eq!(service.handle(1).await, Ok(2));
    assert_eq!(service.generic(vec![1, 2, 3]).await, Ok(4));
    assert_eq!(service.generic(Vec::<u8>::new()).await, Ok(0));
    let service = Arc::new(service);
    assert_eq!(service.by_arc(2u8).await, Ok(3));

    let (root, canceller) = Scope::root();
    canceller.cancel(CancelReason::Shutdown);
    let service = Service { calls: 0 };
    assert_eq!(
        root.run(service.handle(1)).await,
        Err(AppError::Cancelled(CancelReason::Shutdown))
    );
}

#[cancellable]
async fn uses_question_mark(input: &str) -> Result<u32, JsonRpcError> {
    let n: u32 = input
        .parse()
        .map_err(|_| JsonRpcError::invalid_params("not a number"))?;
    Ok(n)
}

#[tokio::test]
async fn question_mark_and_borrowed_arguments_work() {
    assert_eq!(uses_question_mark("41").await.unwrap(), 41);
    assert_eq!(
        uses_question_mark("x").await.unwrap_err().code,
        ErrorCode::InvalidParams
    );
}

#[test]
fn the_future_is_send_when_the_body_is() {
    fn assert_send<T: Send>(_: T) {}
    assert_send(slow(flag()));
    assert_send(count_until_cancelled(Arc::new(AtomicUsize::new(0))));
    assert_send(ignores_the_cancel(flag(), flag()));
}

// Cooperative first, abort after a grace: `#[cancellable(cooperative, grace = "2s")]`.

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
async fn ignores_the_cancel(
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
