//! Why an operation stopped: [`Cancelled`] and its [`CancelReason`].

use std::fmt;
use std::time::Duration;

/// Why a scope was cancelled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// The peer asked (`$/cancel_request`, `notifications/cancelled`, `/cancel_tool_call`, ...),
    /// with the text it gave, if any.
    Peer(Option<String>),
    /// The operation ran longer than its `timeout`.
    Timeout(Duration),
    /// An enclosing operation was cancelled, or the token was cancelled without a recorded
    /// reason (for example a token handed in by another library).
    Parent,
    /// The connection closed or the runtime is shutting down.
    Shutdown,
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CancelReason::Peer(Some(text)) => write!(f, "cancelled by the peer: {text}"),
            CancelReason::Peer(None) => f.write_str("cancelled by the peer"),
            CancelReason::Timeout(after) => write!(f, "timed out after {after:?}"),
            CancelReason::Parent => f.write_str("cancelled by its caller"),
            CancelReason::Shutdown => f.write_str("cancelled by shutdown"),
        }
    }
}

/// The error a cancelled operation returns.
///
/// `#[cancellable]` functions return `Err(E::from(Cancelled { .. }))` when cancelled, so their
/// error type needs `From<Cancelled>`; [`JsonRpcError`](crate::JsonRpcError) turns it into
/// JSON-RPC error -32800 "Request cancelled".
///
/// ```
/// use cancelkit::{CancelReason, Cancelled};
///
/// let cancelled = Cancelled::new(CancelReason::Peer(Some("user pressed stop".into())));
/// assert_eq!(cancelled.to_string(), "request cancelled: cancelled by the peer: user pressed stop");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("request cancelled: {reason}")]
pub struct Cancelled {
    /// Why.
    pub reason: CancelReason,
}

impl Cancelled {
    /// A `Cancelled` for `reason`.
    pub fn new(reason: CancelReason) -> Self {
        Self { reason }
    }
}
