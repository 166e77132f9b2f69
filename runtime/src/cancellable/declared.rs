//! How a handler tells the runtime that routed it what `#[cancellable]` says about it.
//!
//! The `Peer` runs each request handler inside [`Declared`]. Every `#[cancellable]` call
//! declares its [`Mode`] when it starts; the first declaration made while the handler runs is the
//! handler's own (an annotated handler's attribute is always the first, since nothing of its body
//! runs before it; a plain closure takes the mode of the first `#[cancellable]` function it
//! awaits). At the cancel the runtime obeys it: a declared handler is polled on, so its own
//! mode decides what happens (abort mode returns at once with its `on_cancel` value or
//! -32800, cooperative mode runs to its partial result, a grace runs out); a handler that
//! declared nothing is dropped at its next `.await`.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

/// What a `#[cancellable]` function says about its cancellation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `#[cancellable]`: the body is dropped at the cancel.
    Abort,
    /// `#[cancellable(cooperative)]`, with or without a `grace`: the body sees the cancel and
    /// decides what to return.
    Cooperative,
}

tokio::task_local! {
    /// The declaration of the handler being polled, while [`Declared`] polls it.
    static DECLARED: Cell<Option<Mode>>;
}

/// Records `mode` as the declaration of the handler being polled, unless one was made already
/// (or no handler is being polled: a call made outside the `Peer`).
pub(crate) fn declare(mode: Mode) {
    let _ = DECLARED.try_with(|declared| {
        if declared.get().is_none() {
            declared.set(Some(mode));
        }
    });
}

pin_project! {
    /// A handler's future and the mode it declared (none until its first `#[cancellable]` call
    /// starts).
    #[derive(Debug)]
    pub(crate) struct Declared<F> {
        #[pin]
        handler: F,
        mode: Option<Mode>,
    }
}

impl<F> Declared<F> {
    /// Wraps a handler that has not been polled yet.
    pub(crate) fn new(handler: F) -> Self {
        Self {
            handler,
            mode: None,
        }
    }

    /// What the handler declared so far.
    pub(crate) fn mode(&self) -> Option<Mode> {
        self.mode
    }
}

impl<F: Future> Future for Declared<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let handler = this.handler;
        let (poll, mode) = DECLARED.sync_scope(Cell::new(*this.mode), || {
            let poll = handler.poll(cx);
            (poll, DECLARED.with(Cell::get))
        });
        *this.mode = mode;
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_declaration_wins_and_none_is_made_outside() {
        let first = Declared::new(async {
            declare(Mode::Cooperative);
            tokio::task::yield_now().await;
            declare(Mode::Abort);
        });
        let mut first = std::pin::pin!(first);
        (&mut first).await;
        assert_eq!(first.mode(), Some(Mode::Cooperative));
        let nothing = Declared::new(async {});
        let mut nothing = std::pin::pin!(nothing);
        (&mut nothing).await;
        assert_eq!(nothing.mode(), None);
        // Outside a handler a declaration goes nowhere (and does not panic).
        declare(Mode::Abort);
    }
}
