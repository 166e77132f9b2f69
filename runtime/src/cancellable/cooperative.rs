//! Cooperative mode, with or without a grace: the body observes the cancel itself.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::Timer;
use super::declared::{self, Mode};
use crate::scope::Reasons;
use crate::{Cancelled, Scope};

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
    declared::declare(Mode::Cooperative);
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

pin_project! {
    /// Cooperative mode with a grace (`#[cancellable(cooperative, grace = "2s")]`): cooperative
    /// first, abort after the grace.
    ///
    /// The body runs in its own scope and observes cancellation itself, as in [`Cooperative`].
    /// Once the scope is cancelled (by the caller, the peer or the timer) a grace period starts
    /// (when this future sees the cancel, which wakes it: at once under an executor);
    /// a body that completes within it returns its own result (typically a partial one). A body
    /// still running when the grace runs out is never polled again: it is dropped there, and
    /// the call returns `Err(E::from(Cancelled))` with the recorded reason.
    ///
    /// Until the cancel it holds one token handle; the waiter and the grace's sleep exist only
    /// once they are needed.
    #[must_use = "futures do nothing unless awaited"]
    pub struct Graceful<F, D> {
        #[pin]
        body: Option<TaskLocalFuture<Scope, F>>,
        #[pin]
        timer: D,
        timer_done: bool,
        #[pin]
        waiter: Option<WaitForCancellationFutureOwned>,
        token: Option<CancellationToken>,
        #[pin]
        deadline: Option<Sleep>,
        grace: Duration,
        reasons: Reasons,
    }
}

/// Builds the cooperative-with-grace future for `body`, running in the scope of `entered`.
pub fn graceful<F: Future, D: Timer>(
    entered: (Scope, D),
    grace: Duration,
    body: F,
) -> Graceful<F, D> {
    declared::declare(Mode::Cooperative);
    let (scope, timer) = entered;
    Graceful {
        token: Some(scope.token().clone()),
        reasons: scope.reasons(),
        body: Some(scope.run(body)),
        timer,
        timer_done: false,
        waiter: None,
        deadline: None,
        grace,
    }
}

impl<F, D, T, E> Future for Graceful<F, D>
where
    F: Future<Output = Result<T, E>>,
    E: From<Cancelled>,
    D: Timer,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if !*this.timer_done && this.timer.as_mut().fired(cx) {
            *this.timer_done = true;
        }
        // The grace ran out since the last poll: the body is not polled again.
        let expired = |deadline: Pin<&mut Option<Sleep>>, cx: &mut Context<'_>| {
            deadline
                .as_pin_mut()
                .is_some_and(|sleep| sleep.poll(cx).is_ready())
        };
        if expired(this.deadline.as_mut(), cx) {
            this.body.set(None);
            return Poll::Ready(Err(E::from(Cancelled::new(this.reasons.recorded()))));
        }
        let body = this
            .body
            .as_mut()
            .as_pin_mut()
            .expect("a cancellable call is polled after it completed");
        if let Poll::Ready(output) = body.poll(cx) {
            this.body.set(None);
            return Poll::Ready(output);
        }
        if this.deadline.is_none() && super::cancel_seen(this.waiter.as_mut(), this.token, cx) {
            // The grace starts now, when the cancel is first seen.
            this.waiter.set(None);
            this.deadline.set(Some(tokio::time::sleep(*this.grace)));
            if expired(this.deadline.as_mut(), cx) {
                this.body.set(None);
                return Poll::Ready(Err(E::from(Cancelled::new(this.reasons.recorded()))));
            }
        }
        Poll::Pending
    }
}
