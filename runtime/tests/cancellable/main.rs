//! `#[cancellable]` and the scope, as a handler author sees them.

mod completion;
mod grace;
mod options;
mod scopes;
mod signatures;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cancelkit::{JsonRpcError, cancellable};

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
