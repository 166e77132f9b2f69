//! The futures `#[cancellable]` expands to. They are public (hidden) so the expansion can name
//! them; use the attribute instead of calling them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::Sleep;
use tokio_util::sync::WaitForCancellationFutureOwned;

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

/// The scope a call's body runs in, and the canceller that records its timeout.
fn enter(scope: Scope, timeout: Option<Duration>) -> (Scope, Option<(Sleep, Canceller, Duration)>) {
    match timeout {
        None => (scope, None),
        Some(after) => {
            let (scope, canceller) = scope.with_canceller();
            (scope, Some((tokio::time::sleep(after), canceller, after)))
        }
    }
}

pin_project! {
    /// Abort mode: the body runs in its own scope, raced against that scope's token and an
    /// optional deadline. Once the token is cancelled the body is never polled again: it is
    /// dropped with this future, at the `.await` where it was waiting (a call cancelled before
    /// its first poll never starts its body). A body that completes within the poll during which
    /// the cancel arrives wins, and its result is returned.
    #[must_use = "futures do nothing unless awaited"]
    pub struct Abortable<F, H> {
        #[pin]
        body: TaskLocalFuture<Scope, F>,
        #[pin]
        cancelled: WaitForCancellationFutureOwned,
        #[pin]
        deadline: Option<Sleep>,
        timeout: Option<(Canceller, Duration)>,
        scope: Scope,
        on_cancel: Option<H>,
    }
}

/// Builds the abort-mode future for `body`, running in `scope` (a child of the caller's scope).
pub fn abortable<F: Future, H>(
    scope: Scope,
    timeout: Option<Duration>,
    on_cancel: H,
    body: F,
) -> Abortable<F, H> {
    let (scope, timer) = enter(scope, timeout);
    let (deadline, timeout) = match timer {
        Some((sleep, canceller, after)) => (Some(sleep), Some((canceller, after))),
        None => (None, None),
    };
    Abortable {
        cancelled: scope.token().clone().cancelled_owned(),
        deadline,
        timeout,
        body: scope.clone().run(body),
        scope,
        on_cancel: Some(on_cancel),
    }
}

impl<F, H, T, E> Future for Abortable<F, H>
where
    F: Future<Output = Result<T, E>>,
    H: OnCancel<T, E>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // Cancelled since the last poll (or before the first): the body is not polled again.
        if this.scope.token().is_cancelled() {
            return Poll::Ready(finish(this.on_cancel, this.scope));
        }
        // A body that completes in this poll wins, even if the cancel arrived while it ran.
        if let Poll::Ready(output) = this.body.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if this.cancelled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(finish(this.on_cancel, this.scope));
        }
        if let Some(deadline) = this.deadline.as_mut().as_pin_mut()
            && deadline.poll(cx).is_ready()
        {
            if let Some((canceller, after)) = this.timeout.as_ref() {
                // Stops everything below this call too (spawned children, nested calls).
                canceller.cancel(CancelReason::Timeout(*after));
            }
            return Poll::Ready(finish(this.on_cancel, this.scope));
        }
        Poll::Pending
    }
}

fn finish<T, E, H: OnCancel<T, E>>(on_cancel: &mut Option<H>, scope: &Scope) -> Result<T, E> {
    let reason = scope.cancel_reason().unwrap_or(CancelReason::Parent);
    on_cancel
        .take()
        .expect("a cancellable call is polled after it completed")
        .on_cancel(Cancelled::new(reason))
}

pin_project! {
    /// Cooperative mode: the body runs to completion in its own scope and observes cancellation
    /// itself (`cancelkit::is_cancelled()`, `cancelkit::cancelled()`); a deadline only cancels
    /// the scope (with [`CancelReason::Timeout`]).
    #[must_use = "futures do nothing unless awaited"]
    pub struct Cooperative<F> {
        #[pin]
        body: TaskLocalFuture<Scope, F>,
        #[pin]
        deadline: Option<Sleep>,
        timeout: Option<(Canceller, Duration)>,
    }
}

/// Builds the cooperative-mode future for `body`, running in `scope`.
pub fn cooperative<F: Future>(scope: Scope, timeout: Option<Duration>, body: F) -> Cooperative<F> {
    let (scope, timer) = enter(scope, timeout);
    let (deadline, timeout) = match timer {
        Some((sleep, canceller, after)) => (Some(sleep), Some((canceller, after))),
        None => (None, None),
    };
    Cooperative {
        deadline,
        timeout,
        body: scope.run(body),
    }
}

impl<F: Future> Future for Cooperative<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(deadline) = this.deadline.as_mut().as_pin_mut()
            && deadline.poll(cx).is_ready()
        {
            if let Some((canceller, after)) = this.timeout.take() {
                canceller.cancel(CancelReason::Timeout(after));
            }
            this.deadline.set(None);
        }
        this.body.poll(cx)
    }
}
