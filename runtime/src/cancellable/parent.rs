//! `#[cancellable(token = param)]`: the call's scope below a token or a signal.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Both, Deadline, NoTimeout, Timer, timeout};
use crate::{CancelReason, Canceller, Scope};

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
