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
        // A timer or watch that fired since the last poll (deadline reached, the peer's
        // cancel) is a cancel like the token's: the body is not polled again.
        if cancelled || this.timer.as_mut().fired(cx) {
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
        if cancelled {
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
        if this.deadline.is_none() {
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
            if cancelled {
                // The grace starts now, when the cancel is first seen.
                this.waiter.set(None);
                this.deadline.set(Some(tokio::time::sleep(*this.grace)));
                if expired(this.deadline.as_mut(), cx) {
                    this.body.set(None);
                    return Poll::Ready(Err(E::from(Cancelled::new(this.reasons.recorded()))));
                }
            }
        }
        Poll::Pending
    }
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

/// What `#[cancellable(token = param)]` accepts as the parent of the call's scope: a
/// [`CancellationToken`], or (feature `acp`) the ACP SDK's `RequestCancellation` marker.
pub trait Parent {
    /// What the call polls alongside its body to learn that the parent was cancelled: nothing
    /// for a token (its child is cancelled with it), a watcher for markers that are not tokens.
    type Watch: Timer;

    /// The call's scope, below this parent, and its watch.
    fn enter(&self) -> (Scope, Self::Watch);
}

impl Parent for CancellationToken {
    type Watch = NoTimeout;

    fn enter(&self) -> (Scope, NoTimeout) {
        (Scope::new(self.child_token()), NoTimeout)
    }
}

impl<P: Parent + ?Sized> Parent for &P {
    type Watch = P::Watch;

    fn enter(&self) -> (Scope, P::Watch) {
        (**self).enter()
    }
}

/// The scope and watch for a call whose parent is `parent`, without a timeout.
pub fn parent<P: Parent + ?Sized>(parent: &P) -> (Scope, P::Watch) {
    parent.enter()
}

/// The scope and timers for a call whose parent is `parent`, with a timeout.
pub fn parent_with_timeout<P: Parent + ?Sized>(
    parent: &P,
    after: Duration,
) -> (Scope, Both<P::Watch, Deadline>) {
    let (scope, watch) = parent.enter();
    let (scope, deadline) = timeout(scope, after);
    (
        scope,
        Both {
            first: watch,
            second: deadline,
        },
    )
}

/// A watch on a cancellation signal that is not a [`CancellationToken`] (the ACP SDK's
/// `RequestCancellation`): when the signal completes, the call's scope is cancelled with
/// [`CancelReason::Peer`].
pub struct SignalWatch {
    signal: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    canceller: Canceller,
}

impl std::fmt::Debug for SignalWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignalWatch")
            .field("fired", &self.signal.is_none())
            .finish_non_exhaustive()
    }
}

impl SignalWatch {
    /// A fresh root scope that `signal` cancels, with [`CancelReason::Peer`], once it completes.
    /// When `already` is true the scope is cancelled at once.
    pub fn root(signal: Pin<Box<dyn Future<Output = ()> + Send>>, already: bool) -> (Scope, Self) {
        let (scope, canceller) = Scope::new(CancellationToken::new()).with_canceller();
        let signal = if already {
            canceller.cancel(CancelReason::Peer(None));
            None
        } else {
            Some(signal)
        };
        (scope, SignalWatch { signal, canceller })
    }
}

impl Timer for SignalWatch {
    fn fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        let this = self.get_mut();
        let Some(signal) = this.signal.as_mut() else {
            return false;
        };
        if signal.as_mut().poll(cx).is_ready() {
            this.signal = None;
            this.canceller.cancel(CancelReason::Peer(None));
            true
        } else {
            false
        }
    }
}
