//! A counting global allocator: how many allocations a piece of code makes and how many heap
//! bytes are live, for the memory tests of `tests/tests/` and for `cancelkit-bench`.
//!
//! The allocator only counts; every call goes to [`System`] unchanged. A binary opts in by
//! declaring it as its global allocator (a library cannot do that for it):
//!
//! ```
//! use cancelkit_tests::alloc::{self, Counting};
//!
//! #[global_allocator]
//! static ALLOCATOR: Counting = Counting;
//!
//! # fn main() {
//! let before = alloc::thread_snapshot();
//! let boxed = std::hint::black_box(Box::new([0u8; 64]));
//! let during = alloc::thread_snapshot().since(before);
//! assert_eq!(during.allocations, 1);
//! assert_eq!(during.live_bytes, 64);
//! drop(boxed);
//! assert_eq!(alloc::thread_snapshot().since(before).live_bytes, 0);
//! # }
//! ```
//!
//! There are two sets of counters. [`snapshot`] counts the whole process, which is what a
//! benchmark wants. [`thread_snapshot`] counts only what the calling thread allocates and
//! frees: libtest's own threads (and other tests running in parallel) allocate whenever they
//! like, so a test that wants exact numbers measures its thread, and runs the code under test on
//! that thread too (a current-thread tokio runtime). Memory allocated on one thread and freed on
//! another shows up as live on the first and negative on the second.
//!
//! What counts as an allocation: every `alloc`, `alloc_zeroed` and `realloc` (a `realloc`
//! moves or resizes a block, which is what "an allocation per call" is about).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, Ordering};

/// The counting allocator. Declare it with `#[global_allocator]` in the binary that measures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    // Const-initialized and without a destructor: reading it never allocates, so the allocator
    // may use it.
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static THREAD_LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
}

fn count(allocations: u64, bytes: isize) {
    ALLOCATIONS.fetch_add(allocations, Ordering::Relaxed);
    LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed);
    let _ = THREAD_ALLOCATIONS.try_with(|n| n.set(n.get() + allocations));
    let _ = THREAD_LIVE_BYTES.try_with(|n| n.set(n.get() + bytes));
}

#[allow(unsafe_code)] // a global allocator cannot be written without it
// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(1, layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc_zeroed`'s contract.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(1, layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(0, -(layout.size() as isize));
        // SAFETY: `ptr` was returned by this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(1, new_size as isize - layout.size() as isize);
        }
        new
    }
}

/// Allocations (including reallocations) in the whole process since it started.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::SeqCst)
}

/// Heap bytes currently allocated in the whole process.
pub fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::SeqCst)
}

/// Both counters (of the process, or of one thread) at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// Allocations (including reallocations) so far.
    pub allocations: u64,
    /// Heap bytes allocated and not yet freed (for a thread: allocated minus freed by it).
    pub live_bytes: isize,
}

impl Snapshot {
    /// What happened between `earlier` and this snapshot.
    pub fn since(self, earlier: Snapshot) -> Delta {
        Delta {
            allocations: self.allocations - earlier.allocations,
            live_bytes: self.live_bytes - earlier.live_bytes,
        }
    }
}

/// The difference between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delta {
    /// Allocations made in between.
    pub allocations: u64,
    /// Change in live heap bytes (negative when more was freed than allocated).
    pub live_bytes: isize,
}

/// The whole process's counters now.
///
/// Panics if [`Counting`] is not the global allocator: the counters would stay at zero, and a
/// test comparing them would pass whatever the code under test did.
pub fn snapshot() -> Snapshot {
    assert_installed();
    Snapshot {
        allocations: allocations(),
        live_bytes: live_bytes(),
    }
}

/// The calling thread's counters now: what this thread allocated and freed, whatever other
/// threads do meanwhile.
///
/// Panics if [`Counting`] is not the global allocator.
pub fn thread_snapshot() -> Snapshot {
    assert_installed();
    Snapshot {
        allocations: THREAD_ALLOCATIONS.with(Cell::get),
        live_bytes: THREAD_LIVE_BYTES.with(Cell::get),
    }
}

/// Panics unless [`Counting`] is the process's global allocator. Probes once (one allocation,
/// made before the first snapshot reads the counters), then remembers.
pub fn assert_installed() {
    static VERIFIED: AtomicBool = AtomicBool::new(false);
    if VERIFIED.load(Ordering::SeqCst) {
        return;
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    drop(std::hint::black_box(Box::new(0u64)));
    assert!(
        ALLOCATIONS.load(Ordering::SeqCst) > before,
        "cancelkit_tests::alloc::Counting is not the global allocator: add \
         `#[global_allocator] static ALLOCATOR: Counting = Counting;` to the binary"
    );
    VERIFIED.store(true, Ordering::SeqCst);
}
