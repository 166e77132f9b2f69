//! `#[cancellable]` in the shapes users write, compiled with every warning an error: the
//! expansion must add no warning of its own to the user's code (`unused_braces` on a body that
//! is a single expression, unused variables, unreachable code, ...).

#![deny(warnings)]

use std::sync::Arc;

use cancelkit::{CancellationToken, JsonRpcError, cancellable};

/// A crate that re-exports cancelkit, for `crate = "..."`.
mod sdk {
    pub use ::cancelkit;
}

struct Service {
    base: u32,
}

trait Handler {
    async fn run(&self, x: u32) -> Result<u32, JsonRpcError>;
    async fn owned(self: Arc<Self>, x: u32) -> Result<u32, JsonRpcError>;
}

impl Handler for Service {
    #[cancellable]
    async fn run(&self, x: u32) -> Result<u32, JsonRpcError> {
        Ok(x * 2 + self.base)
    }

    #[cancellable(timeout = "1s")]
    async fn owned(self: Arc<Self>, x: u32) -> Result<u32, JsonRpcError> {
        Ok(x + self.base)
    }
}

impl Service {
    #[cancellable(cooperative)]
    async fn cooperative(&self, x: u32) -> Result<u32, JsonRpcError> {
        Ok(x + self.base)
    }

    #[cancellable(on_cancel = zero)]
    async fn or_zero(&mut self) -> Result<u32, JsonRpcError> {
        Ok(self.base)
    }

    #[cancellable]
    async fn generic<T: Clone + Into<u32>>(&self, item: T) -> Result<u32, JsonRpcError> {
        Ok(item.clone().into() + self.base)
    }

    #[cancellable(timeout = "30s")]
    async fn impl_trait(&self, items: impl IntoIterator<Item = u32>) -> Result<u32, JsonRpcError> {
        Ok(items.into_iter().sum::<u32>() + self.base)
    }
}

fn zero() -> u32 {
    0
}

#[cancellable]
async fn free(x: u32) -> Result<u32, JsonRpcError> {
    Ok(x * 2)
}

#[cancellable]
async fn free_tail_call(x: u32) -> Result<u32, JsonRpcError> {
    free(x).await
}

#[cancellable(token = ct)]
async fn with_token(ct: CancellationToken, x: u32) -> Result<u32, JsonRpcError> {
    Ok(x)
}

#[cancellable(token = ct, timeout = "250ms", on_cancel = bool::default)]
async fn with_borrowed_token(ct: &CancellationToken) -> Result<bool, JsonRpcError> {
    Ok(ct.is_cancelled())
}

#[cancellable(crate = "crate::sdk::cancelkit")]
async fn through_a_reexport() -> Result<(), JsonRpcError> {
    Ok(())
}

#[cancellable(crate = "::cancelkit", cooperative, grace = "1s", timeout = "1m", token = ct)]
async fn every_option_but_on_cancel(ct: CancellationToken) -> Result<u8, JsonRpcError> {
    Ok(u8::from(ct.is_cancelled()))
}

#[cancellable]
async fn statements_and_early_return(x: u32) -> Result<u32, JsonRpcError> {
    if x == 0 {
        return Err(JsonRpcError::invalid_params("zero"));
    }
    let y = x.checked_mul(3).ok_or_else(|| JsonRpcError::internal("overflow"))?;
    Ok(y)
}

#[cancellable]
async fn impl_trait_return(x: u32) -> Result<impl std::fmt::Display, JsonRpcError> {
    Ok(x)
}

// Bodies on one line, as rustc's `unused_braces` only looks at single-line blocks.

#[cancellable]
async fn one_line(x: u32) -> Result<u32, JsonRpcError> { Ok(x * 2) }

#[cancellable(cooperative)]
async fn one_line_cooperative(x: u32) -> Result<u32, JsonRpcError> { Ok(x * 2) }

#[cancellable(on_cancel = zero, timeout = "5s")]
async fn one_line_on_cancel(x: u32) -> Result<u32, JsonRpcError> { Ok(x * 2) }

#[cancellable(token = ct)]
async fn one_line_token(ct: &CancellationToken, x: u32) -> Result<u32, JsonRpcError> { Ok(x + u32::from(ct.is_cancelled())) }

#[cancellable]
async fn one_line_impl_trait(x: impl Into<u32>) -> Result<impl std::fmt::Display, JsonRpcError> { Ok(x.into()) }

struct OneLine;

impl Handler for OneLine {
    #[cancellable]
    async fn run(&self, x: u32) -> Result<u32, JsonRpcError> { Ok(x * 2) }

    #[cancellable(crate = "crate::sdk::cancelkit", timeout = "1s")]
    async fn owned(self: Arc<Self>, x: u32) -> Result<u32, JsonRpcError> { Ok(x * 2) }
}

impl OneLine {
    #[cancellable(cooperative, grace = "2s", timeout = "1s")]
    async fn graceful<T: Into<u32>>(&self, x: T) -> Result<u32, JsonRpcError> { Ok(x.into()) }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut service = Service { base: 1 };
        assert_eq!(service.run(2).await, Ok(5));
        assert_eq!(service.cooperative(2).await, Ok(3));
        assert_eq!(service.or_zero().await, Ok(1));
        assert_eq!(service.generic(2u8).await, Ok(3));
        assert_eq!(service.impl_trait([1, 2]).await, Ok(4));
        let service = Arc::new(service);
        assert_eq!(service.clone().owned(2).await, Ok(3));
        assert_eq!(free(2).await, Ok(4));
        assert_eq!(free_tail_call(3).await, Ok(6));
        assert_eq!(with_token(CancellationToken::new(), 7).await, Ok(7));
        assert_eq!(with_borrowed_token(&CancellationToken::new()).await, Ok(false));
        assert_eq!(through_a_reexport().await, Ok(()));
        assert_eq!(every_option_but_on_cancel(CancellationToken::new()).await, Ok(0));
        assert_eq!(impl_trait_return(1).await.unwrap().to_string(), "1");
        assert_eq!(one_line(1).await, Ok(2));
        assert_eq!(one_line_cooperative(1).await, Ok(2));
        assert_eq!(one_line_on_cancel(1).await, Ok(2));
        assert_eq!(one_line_token(&CancellationToken::new(), 1).await, Ok(1));
        assert_eq!(one_line_impl_trait(1u8).await.unwrap().to_string(), "1");
        assert_eq!(OneLine.run(1).await, Ok(2));
        assert_eq!(Arc::new(OneLine).owned(1).await, Ok(2));
        assert_eq!(OneLine.graceful(1u8).await, Ok(1));
        assert!(statements_and_early_return(0).await.is_err());
        assert_eq!(statements_and_early_return(2).await, Ok(6));
    });
}
