//! What a `#[cancellable]` call costs on the heap, counted exactly with the counting global
//! allocator, and that a million calls under one long-lived parent leave nothing behind (no child
//! tokens registered with the parent, no memory).
//!
//! The README ("Performance", from `cargo xtask bench macro`) claims one allocation per call,
//! the call's child token, with and without an ambient scope; with a timeout the call also
//! allocates the origin that records the timeout as the cancel reason, so two.
//!
//! Counted on the test's own thread (everything runs on a current-thread runtime), so libtest's
//! threads allocating meanwhile do not count.

use cancelkit::{CancelReason, JsonRpcError, Scope, cancellable};
use cancelkit_tests::alloc::{self, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The benchmark's body: completes at its first poll.
#[cancellable]
async fn ready(n: u64) -> Result<u64, JsonRpcError> {
    Ok(std::hint::black_box(n))
}

/// A body that waits once, so the call registers a waiter on its token.
#[cancellable]
async fn waits(n: u64) -> Result<u64, JsonRpcError> {
    tokio::task::yield_now().await;
    Ok(n)
}

#[cancellable(timeout = "1s")]
async fn with_timeout(n: u64) -> Result<u64, JsonRpcError> {
    tokio::task::yield_now().await;
    Ok(n)
}

/// Runs `calls` calls of `f` (after a warm-up that lets lazily allocated structures exist) and
/// asserts they made exactly `per_call` allocations each and left no byte behind.
async fn assert_costs<F, Fut>(what: &str, calls: u64, per_call: u64, f: F)
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<u64, JsonRpcError>>,
{
    for n in 0..1_000 {
        f(n).await.unwrap();
    }
    let before = alloc::thread_snapshot();
    let mut sum = 0u64;
    for n in 0..calls {
        sum = sum.wrapping_add(f(n).await.unwrap());
    }
    let delta = alloc::thread_snapshot().since(before);
    assert_eq!(sum, calls * (calls - 1) / 2);
    assert_eq!(
        delta.live_bytes, 0,
        "{what}: {} bytes still allocated after {calls} calls",
        delta.live_bytes
    );
    assert_eq!(
        delta.allocations,
        per_call * calls,
        "{what}: {} allocations for {calls} calls ({:.3} per call, expected {per_call})",
        delta.allocations,
        delta.allocations as f64 / calls as f64
    );
}

#[test]
fn cancellable_calls_allocate_once_and_leave_nothing_behind() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();

    // No ambient scope: the call's own token is its one allocation.
    runtime.block_on(async {
        assert_costs("no ambient scope", 100_000, 1, ready).await;
        assert_costs("no ambient scope, waiting body", 100_000, 1, waits).await;
    });

    // Inside a long-lived root scope, as the benchmark measures and as a request handler runs:
    // the child token is the one allocation (the root's idle child keeps tokio-util from freeing
    // and reallocating its list of children between one call and the next).
    let (parent, canceller) = Scope::root();
    runtime.block_on(parent.clone().run(async {
        assert_costs("inside a root scope", 1_000_000, 1, ready).await;
        assert_costs("inside a root scope, waiting body", 1_000_000, 1, waits).await;
        // The child token and the origin recording the timeout as the reason.
        assert_costs(
            "inside a root scope, with a timeout",
            10_000,
            2,
            with_timeout,
        )
        .await;
    }));
    // The parent still works and its (now empty) tree cancels cleanly.
    canceller.cancel(CancelReason::Shutdown);
    assert!(parent.token().is_cancelled());
}
