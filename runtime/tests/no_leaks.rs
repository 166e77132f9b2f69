//! A million `#[cancellable]` calls under one long-lived parent leave nothing behind: no child
//! tokens registered with the parent, no memory. Measured with a counting global allocator, so
//! this file holds a single test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use cancelkit::{CancelReason, JsonRpcError, Scope, cancellable};

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[cancellable]
async fn handler(n: u64) -> Result<u64, JsonRpcError> {
    tokio::task::yield_now().await;
    Ok(n)
}

#[cancellable(timeout = "1s")]
async fn with_timeout(n: u64) -> Result<u64, JsonRpcError> {
    Ok(n)
}

#[test]
fn a_million_calls_leave_no_child_tokens_or_memory_behind() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (parent, canceller) = Scope::root();
    runtime.block_on(parent.clone().run(async {
        // Warm up: let every lazily allocated structure exist before measuring.
        for n in 0..1_000 {
            handler(n).await.unwrap();
            with_timeout(n).await.unwrap();
        }
        let live_before = LIVE_BYTES.load(Ordering::SeqCst);
        let allocations_before = ALLOCATIONS.load(Ordering::SeqCst);
        let mut sum = 0u64;
        for n in 0..1_000_000 {
            sum += handler(n).await.unwrap();
        }
        for n in 0..10_000 {
            sum += with_timeout(n).await.unwrap();
        }
        assert!(sum > 0);
        let live_after = LIVE_BYTES.load(Ordering::SeqCst);
        let allocations = ALLOCATIONS.load(Ordering::SeqCst) - allocations_before;
        assert_eq!(
            live_after,
            live_before,
            "{} bytes still allocated after the calls",
            live_after - live_before
        );
        // Per call: the child token's node, plus tokio-util's list of the parent's children,
        // which it frees when the last child leaves and allocates again for the next one
        // (hand-written child-token wiring pays the same). The timeout variant adds its reason
        // slot.
        assert!(
            allocations <= 2 * 1_000_000 + 3 * 10_000,
            "{allocations} allocations for 1,010,000 calls"
        );
    }));
    // The parent still works and its (now empty) tree cancels cleanly.
    canceller.cancel(CancelReason::Shutdown);
    assert!(parent.token().is_cancelled());
}
