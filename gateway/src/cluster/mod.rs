//! Several workers sharing runs and cancels through Redis.
//!
//! INTERFACE (the registry in `crate::runs` relies on exactly this; the implementation is
//! being written).
//!
//! What Redis holds (all keys under the prefix `cancelkit:`, every key with a TTL):
//! - `cancelkit:run:<run_id>` → a [`RunRecord`] as JSON (TTL: while running, the tool timeout
//!   plus the retention, refreshed on every write; once finished, the retention);
//! - `cancelkit:rid:<s|n>:<id>` → a set of run ids whose JSON-RPC id is that string (`s`) or
//!   integer (`n`), so a bare id is found on every worker;
//! - `cancelkit:cancel:<run_id>` → a cancel marker `{"reason": ...}` (TTL: the tombstone ttl
//!   at least), so a worker that missed the pub/sub message still applies it;
//! - `cancelkit:tombstone:<id>` → a [`Tombstone`] as JSON (TTL: until it expires).
//!
//! Channels: `cancellation:cancel` carries ContextForge's payload `{"run_id": ..., "reason":
//! ...}` (with our run id); `cancelkit:cancelled` carries `{"run_id": ...}` when the owning
//! worker has stopped the run (the ack a remote canceller waits for); `cancelkit:tombstone`
//! carries a [`Tombstone`].

use std::sync::Weak;
use std::time::Duration;

use crate::runs::record::{RunRecord, Tombstone};

/// What the cluster calls back into: this worker's runs.
pub trait LocalRuns: Send + Sync + 'static {
    /// A cancel for `run_id` arrived (pub/sub, or a marker found after a reconnect). Cancels
    /// the run if it is live here; returns whether this worker holds it cancelled now (then the
    /// cluster publishes the ack on `cancelkit:cancelled`).
    fn apply_cancel(&self, run_id: &str, reason: Option<String>) -> bool;
    /// A tombstone arrived from another worker (pub/sub, or found by a scan after a reconnect).
    fn add_tombstone(&self, tombstone: Tombstone);
    /// Every run this worker knows (live and retained), to write again after Redis came back
    /// empty, and to look up cancel markers for the live ones after a reconnect.
    fn records(&self) -> Vec<RunRecord>;
    /// The tombstones this worker holds that have not expired, to write again after Redis came
    /// back empty.
    fn tombstones(&self) -> Vec<Tombstone>;
}

/// Redis was not reachable (or did not answer in time).
#[derive(Debug, Clone, thiserror::Error)]
#[error("redis unavailable: {0}")]
pub struct Unavailable(pub String);

/// What became of a cancel sent to the worker that owns a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteCancel {
    /// The owning worker said it stopped the run.
    Stopped,
    /// Published and marked, but no word from the owner in time (it may be gone or cut off:
    /// the marker makes it apply the cancel when it reconnects).
    Sent,
    /// Redis is down: kept, and published once it is back.
    Deferred,
}

/// How the cluster is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `redis://...`.
    pub url: String,
    /// This worker's id.
    pub worker: String,
    /// How long a finished run's record is kept.
    pub retention: Duration,
    /// How long a run may run (records of live runs outlive this plus the retention).
    pub run_ttl: Duration,
    /// How long a cancel marker and a tombstone wait.
    pub tombstone_ttl: Duration,
    /// How long a remote canceller waits for the owner's ack.
    pub ack_timeout: Duration,
    /// How long one lookup may take before it counts as unavailable.
    pub lookup_timeout: Duration,
    /// Most records or cancels waiting to be written while Redis is away.
    pub max_pending: usize,
}

/// A worker's link to the others.
#[derive(Debug, Clone)]
pub struct Cluster {
    _private: (),
}

impl Cluster {
    /// Connects (in the background: never fails and never blocks; while Redis is away the
    /// cluster says so through [`is_connected`](Self::is_connected) and retries with backoff).
    pub fn start(settings: Settings, local: Weak<dyn LocalRuns>) -> Cluster {
        let _ = (settings, local);
        unimplemented!("cluster: being written")
    }

    /// Writes a run's record (and its bare-id index). Never waits: writes are coalesced per
    /// run, so while Redis is away only the newest record of each run waits (bounded by
    /// `max_pending`), and is written once it is back.
    pub fn record(&self, record: &RunRecord) {
        let _ = record;
        unimplemented!("cluster: being written")
    }

    /// Every run on any worker that the API's `requestId` names (a run id, or a bare JSON-RPC
    /// id as a string or the integer it spells). Bounded by `lookup_timeout`.
    pub async fn find(&self, selector: &str) -> Result<Vec<RunRecord>, Unavailable> {
        let _ = selector;
        unimplemented!("cluster: being written")
    }

    /// Asks the worker that owns `record` to cancel it: stores the marker, publishes on
    /// `cancellation:cancel`, and waits up to `ack_timeout` for that worker's ack.
    pub async fn cancel_remote(&self, record: &RunRecord, reason: Option<String>) -> RemoteCancel {
        let _ = (record, reason);
        unimplemented!("cluster: being written")
    }

    /// Stores and publishes a tombstone (kept and sent once Redis is back if it is away).
    pub fn tombstone(&self, tombstone: &Tombstone) {
        let _ = tombstone;
        unimplemented!("cluster: being written")
    }

    /// Claims a tombstone for a run that registered here: true if this worker may apply it
    /// (it deleted the key first, or Redis is away and the local copy decides).
    pub async fn claim_tombstone(&self, id: &str) -> bool {
        let _ = id;
        unimplemented!("cluster: being written")
    }

    /// Publishes that this worker stopped `run_id` (the ack on `cancelkit:cancelled`).
    pub fn ack(&self, run_id: &str) {
        let _ = run_id;
        unimplemented!("cluster: being written")
    }

    /// Whether the subscription to Redis is up right now.
    pub fn is_connected(&self) -> bool {
        unimplemented!("cluster: being written")
    }

    /// Stops the background tasks.
    pub fn shutdown(&self) {
        unimplemented!("cluster: being written")
    }
}
