//! Running a request's handler: its concurrency slots (the owner's, then the connection's),
//! the race against its cancel, and a panic turned into an answer.

use std::sync::Arc;

use futures_util::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::router::{BoxFuture, Reply};
use crate::cancellable::declared::Declared;
use crate::{CancelReason, JsonRpcError, Scope};

/// Runs a handler's future, turning a panic into -32603: the request is still answered (and
/// leaves the registry), and the connection goes on.
///
/// A plain combinator rather than an `async fn`, so the handler's future is not stored twice.
pub(super) fn guarded(
    reply: impl std::future::Future<Output = Reply>,
) -> impl std::future::Future<Output = Reply> {
    std::panic::AssertUnwindSafe(reply)
        .catch_unwind()
        .map(|reply| {
            reply.unwrap_or_else(|_| Err(JsonRpcError::internal("the request handler panicked")))
        })
}

/// Waits for a concurrency slot (cancellably), then runs the handler. At the cancel, the
/// handler's own `#[cancellable]` declaration decides (see `cancellable::declared`): a handler
/// that declared a mode is polled on and obeys it; one that declared none is dropped at its
/// next `.await`.
///
/// The token raced is the scope's own, borrowed rather than cloned: every request's task is
/// sized for what it holds across its awaits (see `dispatch::request`).
pub(super) async fn run_handler(
    handler: BoxFuture<Reply>,
    scope: &Scope,
    concurrency: Option<Box<Slots>>,
) -> Reply {
    let token = scope.token();
    let cancelled = || -> Reply {
        let reason = scope.cancel_reason().unwrap_or(CancelReason::Parent);
        Err(crate::Cancelled::new(reason).into())
    };
    // Boxed: only a bounded request pays for the wait's future and its permits (every
    // request's task would otherwise be sized for them).
    let _permits = match concurrency {
        Some(slots) => match Box::pin(slots.acquire(token)).await {
            Some(permits) => Some(permits),
            None => return cancelled(),
        },
        None => None,
    };
    let mut handler = std::pin::pin!(Declared::new(handler));
    tokio::select! {
        biased;
        reply = &mut handler => return reply,
        () = token.cancelled() => {}
    }
    match handler.mode() {
        Some(_) => handler.await,
        None => cancelled(),
    }
}

/// The concurrency slots a request waits for: its owner's (when the transport named one and
/// its share is bounded), then the connection's.
pub(super) struct Slots {
    owner: Option<Arc<Semaphore>>,
    connection: Option<Arc<Semaphore>>,
}

/// The slots taken, held while the handler runs.
type Permits = Box<[Option<OwnedSemaphorePermit>; 2]>;

impl Slots {
    /// `None` when neither is bounded. Boxed, as is what it takes: only a bounded request pays
    /// for them (every request's task would otherwise be sized for them).
    pub(super) fn of(
        owner: Option<Arc<Semaphore>>,
        connection: Option<&Arc<Semaphore>>,
    ) -> Option<Box<Slots>> {
        (owner.is_some() || connection.is_some()).then(|| {
            Box::new(Slots {
                owner,
                connection: connection.cloned(),
            })
        })
    }

    /// Takes the owner's slot, then the connection's: a user waiting for their own slot holds
    /// none of the others'. `None` if cancelled first.
    async fn acquire(self: Box<Self>, token: &CancellationToken) -> Option<Permits> {
        let mut permits: Permits = Box::new([None, None]);
        for (slots, permit) in [self.owner, self.connection]
            .into_iter()
            .zip(permits.iter_mut())
        {
            let Some(slots) = slots else { continue };
            tokio::select! {
                biased;
                () = token.cancelled() => return None,
                taken = slots.acquire_owned() => *permit = taken.ok(),
            }
        }
        Some(permits)
    }
}
