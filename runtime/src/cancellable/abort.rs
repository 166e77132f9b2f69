//! Abort mode: the body is dropped at the cancel.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::declared::{self, Mode};
use super::{OnCancel, Timer};
use crate::Cancelled;
use crate::Scope;
use crate::scope::Reasons;

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
/// [`no_timeout`](super::no_timeout) or [`timeout`](super::timeout)).
pub fn abortable<F: Future, H, D: Timer>(
    entered: (Scope, D),
    on_cancel: H,
    body: F,
) -> Abortable<F, H, D> {
    declared::declare(Mode::Abort);
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
        // A timer or watch that fired since the last poll (deadline reached, the peer's
        // cancel) is a cancel like the token's: the body is not polled again.
        if cancelled || this.timer.as_mut().fired(cx) {
            return Poll::Ready(finish(this.on_cancel, this.reasons));
        }
        // A body that completes in this poll wins, even if the cancel arrived while it ran.
        if let Poll::Ready(output) = this.body.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if super::cancel_seen(this.waiter.as_mut(), this.token, cx) {
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
