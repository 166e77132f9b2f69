//! The futures `#[cancellable]` expands to. They are public (hidden) so the expansion can name
//! them; use the attribute instead of calling them.
//!
//! - [`abortable`]: the default mode, the body dropped at the cancel;
//! - [`cooperative`] and [`graceful`]: the body observes the cancel itself;
//! - [`parent`]: the scope of `token = param`, below a token or the ACP SDK's marker;
//! - [`declared`]: what each of them tells the runtime that routed the call about its mode.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::{CancelReason, Cancelled, Canceller, Scope};

mod abort;
mod cooperative;
pub(crate) mod declared;
mod parent;

pub use abort::{Abortable, abortable};
pub use cooperative::{Cooperative, Graceful, cooperative, graceful};
pub use parent::{Parent, SignalWatch, parent, parent_with_timeout};

/// What a cancelled call returns: an error built from [`Cancelled`], or a value (`on_cancel`).
pub trait OnCancel<T, E> {
    /// Produces the call's result for a cancellation.
    fn on_cancel(self, cancelled: Cancelled) -> Result<T, E>;
}

/// Cancellation becomes `Err(E::from(Cancelled))`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReturnError;

impl<T, E: From<Cancelled>> OnCancel<T, E> for ReturnError {
    fn on_cancel(self, cancelled: Cancelled) -> Result<T, E> {
        Err(E::from(cancelled))
    }
}

/// Cancellation becomes `Ok(f())`.
#[derive(Debug, Clone, Copy)]
pub struct ReturnValue<F>(pub F);

impl<T, E, F: FnOnce() -> T> OnCancel<T, E> for ReturnValue<F> {
    fn on_cancel(self, _cancelled: Cancelled) -> Result<T, E> {
        Ok((self.0)())
    }
}

pin_project! {
    /// A call's deadline: when its sleep completes, the call's scope is cancelled with
    /// [`CancelReason::Timeout`].
    #[derive(Debug)]
    pub struct Deadline {
        #[pin]
        sleep: Sleep,
        canceller: Canceller,
        after: Duration,
    }
}

/// What a call waits on besides its body and its token: nothing, or a [`Deadline`].
pub trait Timer {
    /// Whether the timer fired (and cancelled the scope) during this poll.
    fn fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool;
}

/// No timeout: never fires, takes no space.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTimeout;

impl Timer for NoTimeout {
    fn fired(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> bool {
        false
    }
}

impl Timer for Deadline {
    fn fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        let this = self.project();
        if this.sleep.poll(cx).is_ready() {
            // Stops everything below the call too (spawned children, nested calls).
            this.canceller.cancel(CancelReason::Timeout(*this.after));
            true
        } else {
            false
        }
    }
}

/// The scope and timer for a call without a timeout.
pub fn no_timeout(scope: Scope) -> (Scope, NoTimeout) {
    (scope, NoTimeout)
}

/// The scope and timer for a call with a timeout: the scope gets a canceller, so the timeout is
/// recorded as the reason that this call and everything below it report.
pub fn timeout(scope: Scope, after: Duration) -> (Scope, Deadline) {
    let (scope, canceller) = scope.with_canceller();
    let deadline = Deadline {
        sleep: tokio::time::sleep(after),
        canceller,
        after,
    };
    (scope, deadline)
}

pin_project! {
    /// Two timers polled together (a parent's watch and a [`Deadline`]); fires when either does.
    #[derive(Debug)]
    pub struct Both<A, B> {
        #[pin]
        first: A,
        #[pin]
        second: B,
    }
}

impl<A: Timer, B: Timer> Timer for Both<A, B> {
    fn fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        let this = self.project();
        // Both are polled, so both wakers stay registered.
        let first = this.first.fired(cx);
        let second = this.second.fired(cx);
        first || second
    }
}

/// Polls for the cancel of a call whose body is waiting: the token becomes the waiter on the
/// first wait (a call that never waits never allocates one), which registers the waker.
pub(crate) fn cancel_seen(
    mut waiter: Pin<&mut Option<WaitForCancellationFutureOwned>>,
    token: &mut Option<CancellationToken>,
    cx: &mut Context<'_>,
) -> bool {
    if waiter.is_none()
        && let Some(token) = token.take()
    {
        waiter.set(Some(token.cancelled_owned()));
    }
    waiter
        .as_pin_mut()
        .is_some_and(|waiter| waiter.poll(cx).is_ready())
}
