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
    /// We are shutting down: [`PeerHandle::close`](crate::peer::PeerHandle::close), or the
    /// application's own shutdown.
    Shutdown,
    /// The other side went away: it hung up, a read failed, or it left our output unread past
    /// the write timeout.
    ConnectionClosed,
    /// Someone asked through an API rather than the protocol (a gateway's HTTP endpoint, an
    /// operator's tool: see [`PeerHandle::cancel_inbound`](crate::peer::PeerHandle::cancel_inbound)),
    /// with who asked, if known.
    Api(Option<String>),
}

impl CancelReason {
    /// The cause without any text given by someone else: the peer's reason and who asked
    /// through the API are left out. This is what a [`Peer`](crate::peer::Peer) tells other
    /// peers by default (see [`ReasonPolicy`](crate::peer::ReasonPolicy)).
    ///
    /// ```
    /// use cancelkit::CancelReason;
    ///
    /// let reason = CancelReason::Peer(Some("db password rejected for admin".into()));
    /// assert_eq!(reason.summary(), "cancelled by the peer");
    /// assert_eq!(CancelReason::Api(Some("alice".into())).summary(), "cancelled through the API");
    /// ```
    pub fn summary(&self) -> String {
        match self {
            CancelReason::Peer(_) => CancelReason::Peer(None).to_string(),
            CancelReason::Api(_) => CancelReason::Api(None).to_string(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CancelReason::Peer(Some(text)) => write!(f, "cancelled by the peer: {text}"),
            CancelReason::Peer(None) => f.write_str("cancelled by the peer"),
            CancelReason::Timeout(after) => write!(f, "timed out after {after:?}"),
            CancelReason::Parent => f.write_str("cancelled by its caller"),
            CancelReason::Shutdown => f.write_str("cancelled by shutdown"),
            CancelReason::ConnectionClosed => f.write_str("cancelled: the connection closed"),
            CancelReason::Api(Some(who)) => write!(f, "cancelled through the API by {who}"),
            CancelReason::Api(None) => f.write_str("cancelled through the API"),
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
