//! What one tool call is ([`Invocation`]), how it can fail ([`InvokeError`]) and what became
//! of a delivered result ([`Delivered`]).

use super::*;

/// One tool call to make: what [`Invoker::invoke`] posts as the RAP invocation body (the
/// invoker adds its `callback_url`).
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// The operation (tool) to run.
    pub operation: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// The conversation thread (`group_id`); a cancellation names it as `thread_id`.
    pub thread_id: String,
    /// The tool call (`id`); a cancellation names it as `tool_call_id`.
    pub tool_call_id: String,
    /// A correlation id the server echoes in its result.
    pub call_id: Option<String>,
    /// The user on whose behalf the call runs.
    pub user_id: Option<String>,
}

impl Invocation {
    /// A call of `operation` without arguments, identified by `thread_id` and `tool_call_id`
    /// (each 1 to [`MAX_ID_LEN`](crate::rap::MAX_ID_LEN) characters of `[A-Za-z0-9._:-]`).
    pub fn new(
        operation: impl Into<String>,
        thread_id: impl Into<String>,
        tool_call_id: impl Into<String>,
    ) -> Self {
        Self {
            operation: operation.into(),
            arguments: Map::new(),
            thread_id: thread_id.into(),
            tool_call_id: tool_call_id.into(),
            call_id: None,
            user_id: None,
        }
    }

    /// The same call with `arguments` (a JSON object; anything else counts as no arguments).
    pub fn arguments(mut self, arguments: Value) -> Self {
        self.arguments = match arguments {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        self
    }
}

/// Why [`Invoker::invoke`] produced no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvokeError {
    /// [`InvokerBuilder::max_pending`] calls are already waiting for their results; nothing was sent.
    #[error("too many tool calls waiting for a result: {pending} pending, the limit is {limit}")]
    Full {
        /// How many calls are waiting.
        pending: usize,
        /// The invoker's limit.
        limit: usize,
    },
    /// The [`CallTracker`] is full of running calls; nothing was sent.
    #[error(transparent)]
    TrackerFull(#[from] TrackerFull),
    /// The thread or tool call id is not a valid RAP id; nothing was sent.
    #[error("thread and tool call ids must be 1-256 characters of [A-Za-z0-9._:-]")]
    InvalidId,
    /// The system's random source gave no secret for the call's callback URL; nothing was
    /// sent.
    #[error("cannot draw a callback secret for the tool call from the system's random source")]
    NoSecret,
    /// A call with the same thread and tool call ids is already waiting; nothing was sent.
    #[error("tool call {tool_call_id} of thread {thread_id} is already waiting for its result")]
    Duplicate {
        /// The thread id.
        thread_id: String,
        /// The tool call id.
        tool_call_id: String,
    },
    /// The tool server answered `/invoke` with an error status; the call did not start.
    #[error("the tool server refused the invocation with HTTP {status}: {body}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The start of the response body (at most 512 bytes, lossy UTF-8).
        body: String,
    },
    /// The tool server could not be reached (or did not answer within the invoke timeout).
    /// Whether the call started is unknown, so the tool servers were told to cancel it.
    #[error("cannot invoke the tool: {0}")]
    Unreachable(String),
    /// The call's cancellation scope was cancelled before its result arrived: the tool servers
    /// were sent `/cancel_tool_call`, and the tracker recorded `interrupted` (the synthetic
    /// result to show in the call's place).
    #[error("{cancelled}")]
    Cancelled {
        /// Why.
        cancelled: Cancelled,
        /// The synthetic `tool_result` the [`CallTracker`] recorded.
        interrupted: Value,
    },
    /// The call was cancelled through the tracker itself ([`CallTracker::cancel`]) rather than
    /// by dropping this future or cancelling its scope, and its result was then dropped.
    #[error("the tool call was cancelled through its tracker; its result was dropped")]
    Closed,
}

impl From<InvokeError> for JsonRpcError {
    /// A cancelled call stays -32800 (so a `#[cancellable]` handler can use `?`); the rest are
    /// -32603.
    fn from(error: InvokeError) -> Self {
        match error {
            InvokeError::Cancelled { cancelled, .. } => cancelled.into(),
            other => JsonRpcError::internal(other.to_string()),
        }
    }
}

/// What [`Invoker::deliver`] did with a `tool_result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// Handed to the call waiting for it.
    Accepted,
    /// Bound to its waiting call, but dropped: the call had been cancelled through the
    /// tracker ([`CallTracker::cancel`], which recorded `interrupted`), or its caller stopped
    /// waiting at that very moment. The call no longer waits.
    Dropped,
    /// Not a `tool_result` with valid ids; ignored.
    Malformed,
    /// Not bound to a call waiting here: the secret is missing, wrong or another call's, or
    /// the call is unknown, already answered, cancelled or given up (its secret forgotten).
    /// Nothing changed.
    Refused,
}
