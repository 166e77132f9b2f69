//! What the registry is told at start, and what its operations answer.

use std::time::Duration;

/// What the registry is told at start.
#[derive(Debug, Clone)]
pub struct Settings {
    /// This worker's id (in every record).
    pub worker: String,
    /// How long a finished run's status is kept.
    pub retention: Duration,
    /// How long a cancel for a run not registered yet waits.
    pub tombstone_ttl: Duration,
    /// Most live runs.
    pub max_runs: usize,
    /// Most retained statuses.
    pub max_retained: usize,
    /// Most tombstones.
    pub max_tombstones: usize,
    /// Most retained statuses of one user.
    pub max_retained_per_user: usize,
    /// Most tombstones one user made.
    pub max_tombstones_per_user: usize,
}

/// Why a run could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The same client already has a run in flight with this id on this session.
    #[error("request id already in use by a call in flight")]
    Duplicate,
    /// `max_runs` runs are in flight on this worker.
    #[error("too many tool calls in flight")]
    Full,
}

/// Why the API cannot act on a `requestId`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// Nothing the caller may see is named so (a status read: 404, the same for runs that do
    /// not exist and for other users' runs, so nothing about those is revealed).
    NotFound,
    /// A bare JSON-RPC id that names several live runs: the caller must use a run id (these).
    Ambiguous(Vec<String>),
    /// A caller without `admin.system_config` named a `user`.
    UserNotAllowed,
    /// The cancel would wait for its run, but too many cancels wait already.
    TooManyWaiting {
        /// The configuration key of the limit.
        key: &'static str,
        /// The limit.
        limit: usize,
        /// Whether it is the caller's own share (else the gateway's bound).
        user: bool,
    },
}

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// A live run was found (on this worker or another) and stopped.
    Cancelled,
    /// No live run was stopped now: the cancel waits (tombstone, or delivery to a worker
    /// that is cut off), or the run had already ended.
    Queued,
}
