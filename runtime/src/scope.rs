//! Cancellation scopes: the ambient [`CancellationToken`] of the current task.
//!
//! A scope is a token made current for the duration of a future. Code running inside it asks
//! [`is_cancelled`] or awaits [`cancelled`] without threading a token through every call, and
//! nested work takes a child of it, so cancelling a scope cancels everything under it while
//! cancelling a child leaves its parent running.
//!
//! ```
//! use cancelkit::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let token = CancellationToken::new();
//! token.cancel();
//! let seen = cancelkit::with_token(token, async { cancelkit::is_cancelled() }).await;
//! assert!(seen);
//! assert!(!cancelkit::is_cancelled()); // outside any scope nothing is cancelled
//! # }
//! ```

use std::future::Future;
use std::sync::{Arc, OnceLock};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::CancelReason;

tokio::task_local! {
    static CURRENT: Scope;
}

/// Where a cancelled scope learns why: the nearest enclosing token that has a [`Canceller`], the
/// reason it was cancelled with (set once), and the next such token further out.
#[derive(Debug)]
struct Origin {
    token: CancellationToken,
    reason: OnceLock<CancelReason>,
    parent: Option<Arc<Origin>>,
    /// A root's idle child. tokio-util frees a token's list of children whenever the last
    /// child leaves and allocates it again for the next one; with this child always present, a
    /// long-lived root serves one short-lived child after another (calls, requests) without
    /// reallocating the list each time.
    _anchor: Option<CancellationToken>,
}

/// A cancellation token plus, when it descends from a [`Canceller`], the way to learn why it was
/// cancelled.
///
/// Cloning a scope is cheap (two reference counts) and yields the same token. [`Scope::child`]
/// makes a new token below this one: cancelling the parent cancels the child, never the reverse.
#[derive(Debug, Clone)]
pub struct Scope {
    token: CancellationToken,
    origin: Option<Arc<Origin>>,
}

impl Scope {
    /// A scope over an existing token. Its cancellation reason, if it is ever cancelled, is
    /// reported as [`CancelReason::Parent`], since nothing recorded why.
    pub fn new(token: CancellationToken) -> Self {
        Self {
            token,
            origin: None,
        }
    }

    /// A new root scope and the [`Canceller`] that cancels it with a reason.
    ///
    /// This is what a runtime creates per request: cancelling through the canceller records the
    /// reason (the peer's text, a shutdown) where every scope below can read it.
    ///
    /// ```
    /// use cancelkit::{CancelReason, Scope};
    ///
    /// let (scope, canceller) = Scope::root();
    /// let child = scope.child();
    /// canceller.cancel(CancelReason::Shutdown);
    /// assert!(child.token().is_cancelled());
    /// assert_eq!(child.cancel_reason(), Some(CancelReason::Shutdown));
    /// ```
    pub fn root() -> (Self, Canceller) {
        let token = CancellationToken::new();
        let anchor = token.child_token();
        Self::new(token).attach_canceller(Some(anchor))
    }

    /// Attaches a [`Canceller`] to this scope's token, so that cancelling through it records a
    /// reason that this scope and every scope below it report.
    ///
    /// Reasons recorded further out still apply: a scope reports the innermost recorded reason
    /// among the cancelled tokens it descends from.
    pub fn with_canceller(self) -> (Self, Canceller) {
        self.attach_canceller(None)
    }

    fn attach_canceller(self, anchor: Option<CancellationToken>) -> (Self, Canceller) {
        let origin = Arc::new(Origin {
            token: self.token.clone(),
            reason: OnceLock::new(),
            parent: self.origin,
            _anchor: anchor,
        });
        let canceller = Canceller {
            origin: Arc::clone(&origin),
        };
        let scope = Self {
            token: self.token,
            origin: Some(origin),
        };
        (scope, canceller)
    }

    /// A child scope: a child token that shares this scope's origin.
    ///
    /// The child is cancelled when this scope is; cancelling the child (through its token) does
    /// not touch this scope. Dropping the child removes it from the parent's list of children.
    pub fn child(&self) -> Self {
        Self {
            token: self.token.child_token(),
            origin: self.origin.clone(),
        }
    }

    /// A child of the ambient scope, or a fresh root scope when there is none.
    pub fn child_of_current() -> Self {
        CURRENT
            .try_with(Scope::child)
            .unwrap_or_else(|_| Self::new(CancellationToken::new()))
    }

    /// This scope's token.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Why this scope was cancelled, or `None` while it is not.
    ///
    /// The innermost reason recorded by a [`Canceller`] on a cancelled token this scope descends
    /// from (the peer's cancel, a timeout, shutdown); [`CancelReason::Parent`] when the token was
    /// cancelled without any recorded reason.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.token.is_cancelled().then(|| self.reasons().recorded())
    }

    /// Where this scope's cancellation reasons are recorded, detached from its token.
    pub(crate) fn reasons(&self) -> Reasons {
        Reasons(self.origin.clone())
    }

    /// Runs `fut` with this scope as the ambient scope.
    pub fn run<F: Future>(self, fut: F) -> tokio::task::futures::TaskLocalFuture<Scope, F> {
        CURRENT.scope(self, fut)
    }
}

/// The chain of recorded reasons a scope can consult once it knows it is cancelled.
#[derive(Debug, Clone)]
pub(crate) struct Reasons(Option<Arc<Origin>>);

impl Reasons {
    /// The innermost reason recorded on a cancelled enclosing token, else `Parent`.
    pub(crate) fn recorded(&self) -> CancelReason {
        let mut origin = self.0.as_deref();
        while let Some(o) = origin {
            if o.token.is_cancelled()
                && let Some(reason) = o.reason.get()
            {
                return reason.clone();
            }
            origin = o.parent.as_deref();
        }
        CancelReason::Parent
    }
}

impl From<CancellationToken> for Scope {
    fn from(token: CancellationToken) -> Self {
        Self::new(token)
    }
}

/// Cancels a root scope (from [`Scope::root`]) and records why.
///
/// The first reason wins: a second `cancel` neither changes the reason nor does anything else.
#[derive(Debug, Clone)]
pub struct Canceller {
    origin: Arc<Origin>,
}

impl Canceller {
    /// Records `reason` (if none is recorded yet) and cancels the root token, and with it every
    /// scope below it.
    pub fn cancel(&self, reason: CancelReason) {
        let _ = self.origin.reason.set(reason);
        self.origin.token.cancel();
    }

    /// Whether the root has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.origin.token.is_cancelled()
    }

    /// The root scope's token.
    pub fn token(&self) -> &CancellationToken {
        &self.origin.token
    }
}

/// Runs `fut` with `token` as the ambient cancellation token: a root scope of its own.
///
/// Inside, [`current`], [`is_cancelled`] and [`cancelled`] refer to `token`, and
/// `#[cancellable]` functions take children of it.
pub fn with_token<F: Future>(
    token: CancellationToken,
    fut: F,
) -> tokio::task::futures::TaskLocalFuture<Scope, F> {
    Scope::new(token).run(fut)
}

/// The ambient token, if the current task runs inside a scope.
pub fn current() -> Option<CancellationToken> {
    CURRENT.try_with(|scope| scope.token.clone()).ok()
}

/// The ambient scope, if any (the token plus what it knows about cancellation reasons).
pub fn current_scope() -> Option<Scope> {
    CURRENT.try_with(Scope::clone).ok()
}

/// Whether the ambient token is cancelled; `false` outside any scope.
pub fn is_cancelled() -> bool {
    CURRENT
        .try_with(|scope| scope.token.is_cancelled())
        .unwrap_or(false)
}

/// Completes when the ambient token is cancelled; outside any scope it never completes.
///
/// ```
/// use cancelkit::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let token = CancellationToken::new();
/// let canceller = token.clone();
/// tokio::spawn(async move { canceller.cancel() });
/// cancelkit::with_token(token, cancelkit::cancelled()).await; // returns once the spawned task cancels
/// # }
/// ```
pub async fn cancelled() {
    match current() {
        Some(token) => token.cancelled_owned().await,
        None => std::future::pending().await,
    }
}

/// Why the ambient scope was cancelled; `None` while it is not (or outside any scope).
///
/// Cooperative handlers use it to report the right reason when they stop early.
pub fn cancel_reason() -> Option<CancelReason> {
    CURRENT.try_with(Scope::cancel_reason).ok().flatten()
}

/// Spawns `fut` on the tokio runtime inside a child of the ambient scope.
///
/// The task inherits cancellation: cancelling the ambient scope cancels the task's token (the
/// task observes it, or stops at its next `.await` if it is `#[cancellable]`). Outside any scope
/// the task gets a fresh root token.
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(Scope::child_of_current().run(fut))
}
