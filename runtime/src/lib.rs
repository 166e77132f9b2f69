//! cancelkit: request cancellation that works across agent protocols.
//!
//! Put `#[cancellable]` on an async handler and it becomes cancellable by the peer, by a
//! timeout, or by its caller, with cancellation reported as JSON-RPC error -32800:
//!
//! ```
//! use cancelkit::{cancellable, JsonRpcError};
//! use std::time::Duration;
//!
//! #[cancellable(timeout = "50ms")]
//! async fn search(query: String) -> Result<Vec<String>, JsonRpcError> {
//!     tokio::time::sleep(Duration::from_secs(5)).await; // dropped here when cancelled
//!     Ok(vec![query])
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let error = search("rust".into()).await.unwrap_err();
//! assert_eq!(error.code.code(), -32800);
//! # }
//! ```
//!
//! - [`scope`](mod@scope): the ambient [`CancellationToken`] of the current task, child scopes and
//!   [`spawn`] that carries cancellation into spawned tasks;
//! - [`Cancelled`] and [`CancelReason`]: why an operation stopped;
//! - [`JsonRpcError`]: the error a handler returns, with `From<Cancelled>` → -32800;
//! - [`peer`]: a JSON-RPC connection (ACP, MCP, LSP-style) with per-request cancellation;
//! - `rap` (feature `rap`, Unix only: process groups and signals): RAP tool cancellation over
//!   HTTP — a tool-server router, process
//!   tools, and the runtime-side notifier and call tracker;
//! - feature `rmcp`: `From<Cancelled> for rmcp::model::ErrorData`, so rmcp tools can be
//!   `#[cancellable(token = ct)]`;
//! - `acp` (feature `acp`): `From<Cancelled> for agent_client_protocol::Error`, and
//!   `#[cancellable(token = cancellation)]` on the official ACP SDK's `RequestCancellation`;
//! - [`protocol`]: the generated protocol types (`cancelkit-protocol`), re-exported.

#![forbid(unsafe_code)]

#[doc(hidden)]
#[path = "fuzzing.rs"]
pub mod __fuzz;
#[cfg(feature = "acp")]
pub mod acp;
mod cancelled;
mod error;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "mcp-server")]
pub mod mcp;
pub mod peer;
#[cfg(all(unix, feature = "rap"))]
pub mod rap;
pub mod scope;
mod sync;
#[cfg(feature = "tls")]
pub mod tls;

#[doc(hidden)]
pub mod __private {
    //! Used by the `#[cancellable]` expansion; not a public API.
    pub use crate::cancellable::{
        Abortable, Both, Cooperative, Deadline, Graceful, NoTimeout, OnCancel, Parent, ReturnError,
        ReturnValue, SignalWatch, Timer, abortable, cooperative, graceful, no_timeout, parent,
        parent_with_timeout, timeout,
    };
    pub use crate::scope::Scope;
    pub use tokio_util::sync::CancellationToken;

    /// The scope for a call that takes its parent from a `CancellationToken` parameter.
    pub fn child_of_token(token: &CancellationToken) -> Scope {
        Scope::new(token.child_token())
    }
}

pub(crate) mod cancellable;

pub use cancelkit_macros::cancellable;
pub use cancelkit_protocol as protocol;
/// MCP over HTTP without I/O: the SSE parser, the `Mcp-*` headers, the 2026-07-28 `_meta` keys
/// and the list of revisions (the `cancelkit-wire` crate).
pub use cancelkit_wire as wire;
pub use cancelled::{CancelReason, Cancelled};
pub use error::JsonRpcError;
pub use scope::{
    Canceller, Scope, cancel_reason, cancelled, current, current_scope, is_cancelled, spawn,
    with_token,
};
pub use tokio_util::sync::CancellationToken;
