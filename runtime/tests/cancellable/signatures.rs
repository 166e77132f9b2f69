//! What the attribute takes: methods, generics, `impl Trait`, user error types, `?` and
//! borrowed arguments; the future is `Send` when the body is.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use cancelkit::protocol::jsonrpc::ErrorCode;
use cancelkit::{CancelReason, Cancelled, JsonRpcError, Scope, cancellable};

use crate::flag;
use crate::grace::ignores_the_cancel;
use crate::options::{count_until_cancelled, slow};

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
        let copies: Vec<T> = items.clone();
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
