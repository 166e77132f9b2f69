//! The futures `#[cancellable]` expands to. They are public (hidden) so the expansion can name
//! them; use the attribute instead of calling them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::scope::Reasons;
use crate::{CancelReason, Cancelled, Canceller, Scope};

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
    /// Abort mode: the body runs in its own scope, raced against that scope's token and a
    /// timer. Once the token is cancelled the body is never polled again: it is dropped with
    /// this future, at the `.await` where it was waiting (a call cancelled before its first poll
    /// never starts its body). A body that completes within the poll during which the cancel
    /// arrives wins, and its result is returned.
    ///
    /// It holds as many token handles as hand-written wiring does: the scope's, and one that
    /// becomes the waiter only if the body has to wait.
    #[must_use = "futures do nothing unless awaited"]
    pub struct Abortable<F, H, D> {
        #[pin]
        body: TaskLocalFuture<Scope, F>,
        #[pin]
        waiter: Option<WaitForCancellationFutureOwned>,
        token: Option<CancellationToken>,
        #[pin]
        timer: D,
        reasons: Reasons,
        on_cancel: Option<H>,
    }
}

/// Builds the abort-mode future for `body`, running in the scope of `entered` (from
/// [`no_timeout`] or [`timeout`]).
pub fn abortable<F: Future, H, D: Timer>(
    entered: (Scope, D),
    on_cancel: H,
    body: F,
) -> Abortable<F, H, D> {
    let (scope, timer) = entered;
    Abortable {
        waiter: None,
        token: Some(scope.token().clone()),
        timer,
        reasons: scope.reasons(),
        body: scope.run(body),
        on_cancel: Some(on_cancel),
    }
}

impl<F, H, D, T, E> Future for Abortable<F, H, D>
where
    F: Future<Output = Result<T, E>>,
    H: OnCancel<T, E>,
    D: Timer,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // Cancelled since the last poll (or before the first): the body is not polled again.
        let cancelled = match (this.waiter.as_mut().as_pin_mut(), this.token.as_ref()) {
            (Some(waiter), _) => waiter.poll(cx).is_ready(),
            (None, Some(token)) => token.is_cancelled(),
            (None, None) => true,
        };
        if cancelled {
            return Poll::Ready(finish(this.on_cancel, this.reasons));
        }
        // A body that completes in this poll wins, even if the cancel arrived while it ran.
        if let Poll::Ready(output) = this.body.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if this.waiter.is_none()
            && let Some(token) = this.token.take()
        {
            this.waiter.set(Some(token.cancelled_owned()));
        }
        let cancelled = this
            .waiter
            .as_mut()
            .as_pin_mut()
            .is_some_and(|waiter| waiter.poll(cx).is_ready());
        if cancelled || this.timer.fired(cx) {
            return Poll::Ready(finish(this.on_cancel, this.reasons));
        }
        Poll::Pending
    }
}

fn finish<T, E, H: OnCancel<T, E>>(on_cancel: &mut Option<H>, reasons: &Reasons) -> Result<T, E> {
    on_cancel
        .take()
        .expect("a cancellable call is polled after it completed")
        .on_cancel(Cancelled::new(reasons.recorded()))
}

pin_project! {
    /// Cooperative mode: the body runs to completion in its own scope and observes cancellation
    /// itself (`cancelkit::is_cancelled()`, `cancelkit::cancelled()`); a timer only cancels the
    /// scope (with [`CancelReason::Timeout`]).
    #[must_use = "futures do nothing unless awaited"]
    pub struct Cooperative<F, D> {
        #[pin]
        body: TaskLocalFuture<Scope, F>,
        #[pin]
        timer: D,
        timer_done: bool,
    }
}

/// Builds the cooperative-mode future for `body`, running in the scope of `entered`.
pub fn cooperative<F: Future, D: Timer>(entered: (Scope, D), body: F) -> Cooperative<F, D> {
    let (scope, timer) = entered;
    Cooperative {
        body: scope.run(body),
        timer,
        timer_done: false,
    }
}

impl<F: Future, D: Timer> Future for Cooperative<F, D> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if !*this.timer_done && this.timer.fired(cx) {
            *this.timer_done = true;
        }
        this.body.poll(cx)
    }
}
