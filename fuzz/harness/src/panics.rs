//! Telling deliberate panics from bugs.
//!
//! libFuzzer's Rust glue installs a panic hook that aborts, so any panic — even one that
//! cancelkit catches on purpose, such as a panicking request handler — would be reported as a
//! crash. [`install`] wraps whatever hook is current (libFuzzer's under the fuzzer, the default
//! one under `cargo test`) so that:
//!
//! - a panic whose payload is [`Expected`] is ignored (the harness's own panicking handlers);
//! - a panic inside [`judged_by_caller`] is left to that function's caller;
//! - any other panic is counted for its thread ([`unexpected`]) and passed on to the previous
//!   hook (which aborts under the fuzzer). Counting matters under `cargo test`, where a panic
//!   inside a tokio task is otherwise swallowed by the runtime: the checks compare the count
//!   before and after an input.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

/// The payload of a deliberate panic.
#[derive(Debug, Clone, Copy)]
pub struct Expected;

thread_local! {
    static UNEXPECTED: Cell<u64> = const { Cell::new(0) };
    static JUDGED: Cell<u32> = const { Cell::new(0) };
}

/// Installs the filtering hook (once per process).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().is::<Expected>() || JUDGED.with(Cell::get) > 0 {
                return;
            }
            UNEXPECTED.with(|n| n.set(n.get() + 1));
            previous(info);
        }));
    });
}

/// Panics deliberately (ignored by the hook).
pub fn expected<T>() -> T {
    std::panic::panic_any(Expected)
}

/// How many unexpected panics this thread has seen.
pub fn unexpected() -> u64 {
    UNEXPECTED.with(Cell::get)
}

/// Runs `f`, catching its panic; panics inside are not reported by the hook, the caller decides
/// (for code that catches some panics itself, such as the codegen around typify).
pub fn judged_by_caller<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    JUDGED.with(|n| n.set(n.get() + 1));
    let result = catch_unwind(AssertUnwindSafe(f));
    JUDGED.with(|n| n.set(n.get() - 1));
    result
}

/// A short description of a panic payload.
pub fn describe(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}
