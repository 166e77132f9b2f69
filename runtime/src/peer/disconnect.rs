//! What a connection does about cancellation beyond the protocol's rules: which reason text
//! leaves the process ([`ReasonPolicy`]) and what a closed connection does to the work in
//! flight ([`DisconnectPolicy`]).

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use cancelkit_protocol::jsonrpc::RequestId;

use crate::CancelReason;

/// What reason text our cancels carry to the peer: the `reason` of MCP
/// `notifications/cancelled` we send and the `data.reason` of the -32800 answers we send.
///
/// The default is [`Summary`](Self::Summary): the kind of cause, never text someone else gave
/// us, so a reason another peer, an API caller or the application wrote (an internal error
/// message, a user's name) is not passed on to a third party.
///
/// ```
/// use cancelkit::peer::{McpRevision, Peer, Protocol, ReasonPolicy};
///
/// let builder = Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25))
///     .outgoing_reason(ReasonPolicy::Fixed("cancelled by the gateway".into()));
/// # let _ = builder;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReasonPolicy {
    /// No reason at all: MCP `notifications/cancelled` without `reason`, -32800 without
    /// `data.reason`.
    None,
    /// Always this text.
    Fixed(String),
    /// The default: the cause's [`CancelReason::summary`] (`"timed out after 30s"`,
    /// `"cancelled by the peer"`, `"cancelled: the connection closed"`, `"the caller dropped
    /// the request"`), without the text a peer or an API caller gave. A -32800 answer to the
    /// very peer that cancelled the request keeps the text that peer gave (it tells it nothing
    /// new); a -32800 a handler returns on its own, with its own scope not cancelled, is its
    /// answer and passes as it wrote it.
    #[default]
    Summary,
    /// The whole cause, including the text a peer or an API caller gave (what cancelkit sent
    /// before this option existed). Only for peers you trust with it.
    Forward,
}

/// Why one of our outgoing requests is being cancelled.
#[derive(Debug, Clone)]
pub(crate) enum OutgoingCause {
    /// [`OutgoingRequest::cancel`](super::OutgoingRequest::cancel).
    Explicit,
    /// The future was dropped unanswered.
    Dropped,
    /// A timeout, or the scope it was made in.
    Reason(CancelReason),
}

impl OutgoingCause {
    /// The full text, as logged.
    pub(crate) fn full(&self) -> String {
        match self {
            OutgoingCause::Explicit => "cancelled by the caller".to_owned(),
            OutgoingCause::Dropped => "the caller dropped the request".to_owned(),
            OutgoingCause::Reason(reason) => reason.to_string(),
        }
    }
}

impl ReasonPolicy {
    /// The text that leaves the process for one of our cancels, or `None` for no reason.
    pub(crate) fn outgoing(&self, cause: &OutgoingCause) -> Option<String> {
        match (self, cause) {
            (ReasonPolicy::None, _) => None,
            (ReasonPolicy::Fixed(text), _) => Some(text.clone()),
            (ReasonPolicy::Summary, OutgoingCause::Reason(reason)) => Some(reason.summary()),
            (ReasonPolicy::Summary | ReasonPolicy::Forward, cause) => Some(cause.full()),
        }
    }

    /// The `data.reason` of a -32800 answer: `cause` is the request's own cancellation, if its
    /// scope was cancelled, and `own` whether it was this very peer that cancelled it. `None`
    /// leaves what the handler wrote as it is.
    pub(crate) fn answer(&self, cause: Option<&CancelReason>, own: bool) -> Answer {
        match (self, cause) {
            (ReasonPolicy::None, _) => Answer::Remove,
            (ReasonPolicy::Fixed(text), _) => Answer::Set(text.clone()),
            (ReasonPolicy::Forward, Some(reason)) => Answer::Set(reason.to_string()),
            (ReasonPolicy::Summary, Some(reason @ CancelReason::Peer(_))) if own => {
                Answer::Set(reason.to_string())
            }
            (ReasonPolicy::Summary, Some(reason)) => Answer::Set(reason.summary()),
            (_, None) => Answer::Keep,
        }
    }
}

/// What to do with the `data.reason` of a -32800 answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Keep,
    Remove,
    Set(String),
}

/// What a connection the peer closed (it hung up, a read failed, it stopped reading our output
/// past the write timeout) does to the inbound requests in flight.
///
/// The default, [`cancel_all`](Self::cancel_all), cancels them all, with
/// [`CancelReason::ConnectionClosed`]. [`finish`](Self::finish) lets the named methods (and,
/// with [`tasks`](Self::tasks), MCP tasks) run on: their answers cannot be written any more,
/// but their side effects complete. They still stop at the bound — the
/// [shutdown grace](super::PeerBuilder::shutdown_grace), or [`max`](Self::max) — cancelled
/// with `ConnectionClosed`. Closing the connection ourselves
/// ([`PeerHandle::close`](super::PeerHandle::close)) always cancels everything (`Shutdown`).
///
/// ```
/// use std::time::Duration;
/// use cancelkit::peer::{DisconnectPolicy, Peer, Protocol};
///
/// let builder = Peer::builder(Protocol::Acp)
///     .on_disconnect(DisconnectPolicy::finish(["db/commit"]).max(Duration::from_secs(30)));
/// # let _ = builder;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DisconnectPolicy {
    methods: HashSet<String>,
    tasks: bool,
    max: Option<Duration>,
}

impl DisconnectPolicy {
    /// Cancel everything in flight when the peer goes away (the default).
    pub fn cancel_all() -> Self {
        Self::default()
    }

    /// Let requests for these methods run to completion after the peer goes away.
    pub fn finish<I, S>(methods: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            methods: methods.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// MCP: let tasks (task-augmented `tools/call`, 2025-11-25, and the 2026-07-28 tasks
    /// extension) run to completion too.
    pub fn tasks(mut self, finish: bool) -> Self {
        self.tasks = finish;
        self
    }

    /// How long they may run on after the peer went away (default: the shutdown grace); then
    /// they are cancelled with [`CancelReason::ConnectionClosed`].
    pub fn max(mut self, max: Duration) -> Self {
        self.max = Some(max);
        self
    }

    /// Whether a request for `method` runs on after a disconnect.
    pub(crate) fn survives(&self, method: &str) -> bool {
        !self.methods.is_empty() && self.methods.contains(method)
    }

    /// Whether tasks run on after a disconnect.
    pub(crate) fn tasks_survive(&self) -> bool {
        self.tasks
    }

    /// How long survivors run on, given the connection's shutdown grace.
    pub(crate) fn bound(&self, grace: Duration) -> Duration {
        self.max.unwrap_or(grace)
    }
}

/// What a transport tells a handler about the request it handles (see
/// [`Context::transport`](super::Context::transport)), looked up by the request's id when its
/// handler starts.
pub(crate) type TransportData =
    Arc<dyn Fn(u64, &RequestId) -> Option<Arc<dyn Any + Send + Sync>> + Send + Sync>;

/// The options of this module, as the builder keeps them.
#[derive(Clone, Default)]
pub(crate) struct Extras {
    pub(crate) reason: ReasonPolicy,
    pub(crate) disconnect: DisconnectPolicy,
    /// Set by a transport that has something to tell handlers (the HTTP server).
    pub(crate) transport: Option<TransportData>,
}

impl std::fmt::Debug for Extras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extras")
            .field("reason", &self.reason)
            .field("disconnect", &self.disconnect)
            .field("transport", &self.transport.is_some())
            .finish()
    }
}
