//! `#[cancellable]` inside the official ACP SDK (crate `agent-client-protocol` 5.x; feature
//! `acp`).
//!
//! The SDK tells a request handler that the client sent `$/cancel_request` for its request
//! through a [`RequestCancellation`] marker (from `Responder::cancellation()`); it never drops
//! the handler's work itself. With this feature:
//!
//! - `#[cancellable(token = cancellation)]` accepts a `RequestCancellation` parameter (owned or
//!   borrowed) as the parent of the call's scope: when the client cancels, the body is dropped
//!   at its next `.await` and the call returns -32800;
//! - `From<Cancelled> for agent_client_protocol::Error` gives that -32800 "Request cancelled",
//!   with `data.reason`, so a handler can return `Result<_, agent_client_protocol::Error>`;
//! - [`with_cancellation`] runs any future in a scope the marker cancels, so plain `#[cancellable]` calls
//!   (and [`spawn`](crate::spawn)ed tasks) inside it take the client's cancel as their parent.
//!
//! The SDK runs request callbacks inside its dispatch loop, which is also where it reads
//! `$/cancel_request`; a callback that awaited its work there would hold back the very cancel
//! meant to stop it. Spawn the work with `ConnectionTo::spawn` and answer from there:
//!
//! ```
//! use std::sync::Arc;
//!
//! use agent_client_protocol::v1::schema::{PromptRequest, PromptResponse, StopReason};
//! use agent_client_protocol::v1::{ConnectionTo, Responder};
//! use agent_client_protocol::{Agent, Client, RequestCancellation};
//! use cancelkit::cancellable;
//!
//! struct MyAgent;
//!
//! impl MyAgent {
//!     /// Dropped at its next `.await` when the client sends `$/cancel_request` for this
//!     /// request (or after 10 minutes); the client then receives -32800.
//!     #[cancellable(token = cancellation, timeout = "10m")]
//!     async fn prompt(
//!         &self,
//!         request: PromptRequest,
//!         cancellation: RequestCancellation,
//!     ) -> Result<PromptResponse, agent_client_protocol::Error> {
//!         let _ = request; // ... the turn's work, awaiting as it goes ...
//!         Ok(PromptResponse::new(StopReason::EndTurn))
//!     }
//! }
//!
//! let agent = Arc::new(MyAgent);
//! let builder = Agent.v1().on_receive_request(
//!     async move |request: PromptRequest,
//!                 responder: Responder<PromptResponse>,
//!                 cx: ConnectionTo<Client>| {
//!         let (agent, cancellation) = (agent.clone(), responder.cancellation());
//!         // Off the dispatch loop, which must stay free to read the cancel.
//!         cx.spawn(async move {
//!             responder.respond_with_result(agent.prompt(request, cancellation).await)
//!         })
//!     },
//!     agent_client_protocol::on_receive_request!(),
//! );
//! # let _ = builder;
//! ```

use std::future::Future;

pub use agent_client_protocol::RequestCancellation;

use crate::Scope;
use crate::cancellable::{Cooperative, Parent, SignalWatch, cooperative};

impl Parent for RequestCancellation {
    type Watch = SignalWatch;

    /// A fresh root scope, cancelled with [`CancelReason::Peer`](crate::CancelReason::Peer)
    /// when the client's `$/cancel_request` sets the marker (at once if it already has).
    fn enter(&self) -> (Scope, SignalWatch) {
        let marker = self.clone();
        let already = marker.is_cancelled();
        SignalWatch::root(Box::pin(async move { marker.cancelled().await }), already)
    }
}

/// Runs `fut` in a scope that `cancellation` cancels, with
/// [`CancelReason::Peer`](crate::CancelReason::Peer), when the client sends `$/cancel_request`.
///
/// `fut` itself is not dropped: it observes the cancel like a cooperative body
/// ([`is_cancelled`](crate::is_cancelled)), and the `#[cancellable]` calls inside it, children
/// of the scope, are dropped and return -32800. That lets the code around them answer:
///
/// ```
/// use agent_client_protocol::RequestCancellation;
/// use cancelkit::cancellable;
///
/// #[cancellable]
/// async fn work() -> Result<String, agent_client_protocol::Error> {
///     Ok("done".into())
/// }
///
/// async fn answer(cancellation: RequestCancellation) -> Result<String, agent_client_protocol::Error> {
///     cancelkit::acp::with_cancellation(&cancellation, work()).await
/// }
/// ```
pub fn with_cancellation<F: Future>(cancellation: &RequestCancellation, fut: F) -> Scoped<F> {
    Scoped {
        inner: cooperative(cancellation.enter(), fut),
    }
}

pin_project_lite::pin_project! {
    /// The future [`with_cancellation`] returns.
    #[must_use = "futures do nothing unless awaited"]
    pub struct Scoped<F> {
        #[pin]
        inner: Cooperative<F, SignalWatch>,
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}
