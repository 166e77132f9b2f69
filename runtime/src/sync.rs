//! Small synchronisation helpers shared by the runtime's modules.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, recovering the data if a thread panicked while holding it.
///
/// The runtime never panics while it holds one of its own locks (handlers run outside them), so
/// the data is consistent even then; recovering keeps one panicking task from wedging a whole
/// connection or server.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
