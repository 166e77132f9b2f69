//! Heap use per call next to time per call: the benchmark binary counts with the shared
//! counting allocator of `cancelkit-tests` (the same one the memory tests use).

pub use cancelkit_tests::alloc::{allocations, live_bytes};

use cancelkit_tests::alloc::Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;
