//! What the cluster's operations answer: Redis unreachable, a cancel refused at its share of
//! the queue, what became of a cancel sent to another worker.

/// Redis was not reachable (or did not answer in time).
#[derive(Debug, Clone, thiserror::Error)]
#[error("redis unavailable: {0}")]
pub struct Unavailable(pub String);

/// A cancel that would wait for Redis was refused: its share of the queue is full. Nothing was
/// queued; the caller should say so (the API answers 429 for the user's own share, 503
/// otherwise) rather than `queued`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QueueFull {
    /// The user already has this many cancels waiting for Redis on this worker.
    #[error(
        "redis is unreachable and you have {limit} cancels waiting for it on this worker, your \
         share: this one was not queued; retry once redis is back"
    )]
    User {
        /// The share: an eighth of the queue.
        limit: usize,
    },
    /// Users (other than admins) together have this many cancels waiting.
    #[error(
        "redis is unreachable and users have {limit} cancels waiting for it on this worker, \
         their share: this one was not queued; retry once redis is back"
    )]
    Users {
        /// The share: half the queue.
        limit: usize,
    },
    /// The queue holds this many cancels.
    #[error(
        "redis is unreachable and {limit} cancels wait for it on this worker, the bound: this \
         one was not queued; retry once redis is back"
    )]
    All {
        /// The bound (`max_pending`).
        limit: usize,
    },
}

impl QueueFull {
    /// The limit reached.
    pub fn limit(&self) -> usize {
        match *self {
            QueueFull::User { limit } | QueueFull::Users { limit } | QueueFull::All { limit } => {
                limit
            }
        }
    }

    /// Whether it is the caller's own share (else one the caller shares with others).
    pub fn is_own_share(&self) -> bool {
        matches!(self, QueueFull::User { .. })
    }

    /// What the limit is, for an error message or a metric label.
    pub fn key(&self) -> &'static str {
        match self {
            QueueFull::User { .. } => "redis queue: a user's share (an eighth)",
            QueueFull::Users { .. } => "redis queue: users' share (half)",
            QueueFull::All { .. } => "redis queue (limits.max_runs + limits.max_retained)",
        }
    }
}

/// What became of a cancel sent to the worker that owns a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteCancel {
    /// The owning worker said it stopped the run.
    Stopped,
    /// Published and marked, but no word from the owner in time (it may be gone or cut off:
    /// the marker makes it apply the cancel when it reconnects). A `lost` run's cancel is
    /// always this, at once.
    Sent,
    /// Redis is down: queued, and published once it is back.
    Deferred,
}
