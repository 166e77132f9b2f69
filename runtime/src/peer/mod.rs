//! A JSON-RPC connection with per-request cancellation: [`Peer`].
//!
//! One [`Peer`] serves one connection over any `AsyncRead + AsyncWrite` (stdio, a socket, an
//! in-memory duplex; [`PeerBuilder::connect`]) or any message transport ([`PeerBuilder::serve`]:
//! a stream of [`Inbound`] messages and a sink of [`Outbound`] ones — the Streamable HTTP server
//! and client are such transports; see [`transport`]). It routes inbound requests to handlers
//! ([`Router`]), each in its own task inside its own cancellation scope, and sends outbound
//! requests ([`PeerHandle::request`]) whose futures tell the peer when they are dropped
//! unanswered. Every rule below lives in this core, so every transport gets it.
//!
//! Cancellation follows the [`Protocol`]:
//!
//! - the reader task handles cancel notifications itself, before it reads the next frame —
//!   never queued behind handlers or behind the concurrency limit;
//! - every request is registered before its handler starts, so a cancel can never miss it;
//! - ACP and LSP answer every cancelled request (its result, or -32800); MCP sends nothing after
//!   the peer's `notifications/cancelled` unless [`PeerBuilder::answer_cancelled`] is set;
//! - `initialize` is never cancelled, in either direction;
//! - cancels for unknown, finished or other-direction ids, and malformed cancels, are ignored
//!   with a log line;
//! - closing the connection cancels everything in flight, unless a [`DisconnectPolicy`] lets
//!   named methods finish after the peer went away; the cause a handler sees tells a closed
//!   connection ([`CancelReason::ConnectionClosed`](crate::CancelReason::ConnectionClosed)) from
//!   our own shutdown;
//! - every queue is bounded (see [`PeerBuilder`] for the bounds and what happens at each): a
//!   request beyond the in-flight bounds is refused at once with -32050, and a peer that stops
//!   reading our output first slows down (we stop reading its input), then, after the write
//!   timeout, is disconnected.
//!
//! A cancel that arrives before its request is not remembered: on one ordered stream the
//! request is always registered first, so such a cancel can only be late (for a finished
//! request), and remembering it would wrongly cancel a later request that reuses the id.
//!
//! ```
//! use cancelkit::peer::{Context, Peer, Protocol, Router};
//! use cancelkit::{cancellable, JsonRpcError};
//!
//! #[cancellable]
//! async fn echo(text: String, _cx: Context) -> Result<String, JsonRpcError> {
//!     Ok(text)
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let (client_io, server_io) = tokio::io::duplex(4096);
//! let (read, write) = tokio::io::split(server_io);
//! let _server = Peer::builder(Protocol::Acp).router(Router::new().request("echo", echo)).connect(read, write);
//! let (read, write) = tokio::io::split(client_io);
//! let client = Peer::builder(Protocol::Acp).connect(read, write);
//! let answer: String = client.handle().request("echo", "hi").await.unwrap();
//! assert_eq!(answer, "hi");
//! # }
//! ```

pub(crate) mod budget;
mod builder;
mod disconnect;
mod dispatch;
pub(crate) mod framing;
mod handle;
pub(crate) mod limits;
mod negotiate;
mod notifications;
mod outgoing;
mod owners;
mod peer_handle;
mod policy;
mod reader;
mod registry;
pub(crate) mod router;
mod run;
pub mod transport;
pub(crate) mod wire;
mod writer;

use tokio::task::JoinHandle;

pub use builder::{
    DEFAULT_MAX_FRAME_LEN, DEFAULT_MAX_ID_LEN, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT_BYTES,
    DEFAULT_MAX_NOTIFICATION_BYTES, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_TASK_TTL,
    DEFAULT_MAX_TASKS, DEFAULT_SHUTDOWN_GRACE, DEFAULT_WRITE_TIMEOUT, PeerBuilder,
};
pub use disconnect::{DisconnectPolicy, ReasonPolicy};
pub use framing::Framing;
#[cfg(feature = "http")]
pub(crate) use handle::progress_token_of;
pub use handle::{MAX_ABANDONED_TASKS, MAX_PROGRESS_TOKENS, PeerHandle};
pub use negotiate::{DEFAULT_DISCOVER_TIMEOUT, Negotiated};
pub use outgoing::{OutgoingRequest, RequestError};
pub use policy::tasks::DEFAULT_TASK_TTL;
pub use policy::{McpRevision, Protocol};
pub use router::{Context, Router};
pub use transport::{Inbound, Message, Outbound, OutboundKind, Owner};

/// A served connection. Dropping it does not close the connection; use
/// [`PeerHandle::close`] or let the other side hang up.
#[derive(Debug)]
pub struct Peer {
    handle: PeerHandle,
    task: JoinHandle<()>,
}

impl Peer {
    /// A builder for a connection speaking `protocol`.
    pub fn builder(protocol: Protocol) -> PeerBuilder {
        PeerBuilder::new(protocol)
    }

    /// A handle for sending requests and notifications; cheap to clone.
    pub fn handle(&self) -> PeerHandle {
        self.handle.clone()
    }

    /// Waits until the connection is closed and every answer owed has been written — at most
    /// the [shutdown grace](PeerBuilder::shutdown_grace) after it stopped reading.
    pub async fn closed(self) {
        let _ = self.task.await;
    }
}
