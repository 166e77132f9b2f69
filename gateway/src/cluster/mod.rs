//! Several workers sharing runs and cancels through Redis.
//!
//! What Redis holds (all keys under the prefix `cancelkit:`, every key with a TTL):
//! - `cancelkit:run:<run_id>` → a [`RunRecord`] as JSON (TTL: while running, a lease of the
//!   heartbeat ttl plus the retention, renewed by the link every third of it; once finished,
//!   the retention);
//! - `cancelkit:rid:<s|n>:<id>` → the run ids whose JSON-RPC id is that string (`s`) or
//!   integer (`n`), so a bare id is found on every worker, and `cancelkit:urid:<owner in
//!   hex>:<s|n>:<id>` → the same for one user's runs (a user's lookup reads only its own):
//!   sorted sets scored by when each entry's record expires; every write drops the expired
//!   entries and sets the set's TTL to its longest-lived entry's, so an index goes with the
//!   records it names (an id whose record went early is pruned when a lookup meets it); a
//!   lookup reads at most 1,000 entries of one index;
//! - `cancelkit:cancel:<run_id>` → a cancel marker `{"reason": ...}` (TTL: the tombstone ttl
//!   from when it is written), so a worker that missed the pub/sub message still applies it;
//! - `cancelkit:tombstone:<id>` → a [`Tombstone`] as JSON (TTL: until it expires), indexed in
//!   the sorted set `cancelkit:tombstones` (TTL: its longest-lived tombstone's);
//!   `cancelkit:claimed:<id>` → who claimed it (`<worker>/<run id>`), so a claim retried after
//!   its answer was lost recognises itself (TTL: twice the tombstone ttl plus 10 minutes);
//! - `cancelkit:worker:<worker id>` → the worker's heartbeat `{"started_at": ...}` (TTL: the
//!   heartbeat ttl, 15 s, refreshed every third of it while the link is up). A status read
//!   that finds a running record whose worker has no heartbeat, or one that restarted since
//!   the run registered, reports the run `lost` (`state_reason`: which worker stopped
//!   answering); a cancel of it is stored and published as usual (the worker may come back)
//!   and answered without waiting for an ack (`queued`, never `cancelled`).
//!
//! Channels: `cancellation:cancel` carries ContextForge's payload `{"run_id": ..., "reason":
//! ...}` (with our run id); `cancelkit:cancelled` carries `{"run_id": ...}` when the owning
//! worker has stopped the run (the ack a remote canceller waits for); `cancelkit:tombstone`
//! carries a [`Tombstone`]; `cancelkit:claimed` carries `{"id": ...}` when a tombstone was
//! claimed (every worker drops its copy).
//!
//! A tombstone stops at most one run: a worker where a matching run registers claims it with
//! one atomic script (delete the tombstone, record the claimant). A tombstone that never
//! reached Redis is claimed locally (no other worker saw it). When Redis is away or does not
//! answer, the claim fails closed: the run is not cancelled now, and the claim is queued and
//! made after the reconnect (then the run is cancelled if it won).
//!
//! How it holds up when Redis does not:
//! - Commands go through redis-rs's `ConnectionManager`, which reconnects by itself; pub/sub has
//!   its own connection, which a background task (the *link*) re-establishes with backoff (100 ms
//!   doubling to 5 s; back to 100 ms after an attempt that made progress) and checks with a
//!   `PING` every few seconds.
//! - Nothing local waits for Redis: [`Cluster::record`], [`Cluster::tombstone`] and
//!   [`Cluster::ack`] queue the write and return; [`Cluster::find`], [`Cluster::cancel_remote`]
//!   and [`Cluster::claim_tombstone`] are bounded by their timeouts and answer at once while the
//!   link is down.
//! - The queue (`max_pending`) is coalesced per key and fair: a queued cancel (remote cancel,
//!   tombstone, deferred claim) is never dropped, however long the outage (its expiry counts
//!   from when it is written: a marker lives the tombstone ttl from then, a tombstone's expiry
//!   moves by the time it waited). A new cancel beyond its share is refused ([`QueueFull`]):
//!   one user holds at most an eighth of the queue, users together half, an admin's cancels
//!   the rest. Records, acks and prunes make room for cancels, the oldest first (a dropped
//!   record is written again by the resync).
//! - Every time the link is (re)established, before it says it is connected, it resyncs: it
//!   writes the heartbeat; to a new server (restarted, likely empty: its `run_id` in `INFO`
//!   changed) this worker's cancels not acked yet (markers, published again) and the
//!   tombstones it made that are still waiting; this worker's records, if the server is new or
//!   records were dropped from the queue, in batches of 256 each within its own deadline,
//!   resumed where it stopped if the link drops meanwhile (so a large registry, 100,000
//!   retained runs, gets written however often the link breaks); then it flushes the queue,
//!   applies the cancel markers of its live runs, and reads the stored tombstones (on the
//!   same server, its copies of tombstones no longer there were claimed: dropped). Pub/sub is
//!   at most once; the keys make up for it, and messages that arrived before a link broke are
//!   still handled.
//! - An outage is logged once (when it starts, and when it ends) and shown by the gauge
//!   `cancelkit_gateway_redis_connected` (0 or 1), the gauges of queued writes
//!   (`cancelkit_gateway_redis_pending_writes`, of which cancels
//!   `cancelkit_gateway_redis_pending_cancels`), writes dropped at the bound
//!   (`cancelkit_gateway_redis_dropped_total{kind}`) and cancels refused at their share
//!   (`cancelkit_gateway_redis_refused_total{kind}`).

mod keys;
mod link;
mod lookup;
mod memory;
mod outcomes;
mod pending;
mod resync;
mod scripts;
mod shared;
mod waiters;
mod write;

pub use outcomes::{QueueFull, RemoteCancel, Unavailable};

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::runs::record::{RunRecord, RunState, Tombstone, unix_now};
use memory::Memory;
use pending::{Op, Pending, Unwritten};
use shared::Shared;
use waiters::Waiters;

/// The gauge: 1 while the link to Redis is up, else 0.
pub const METRIC_CONNECTED: &str = "cancelkit_gateway_redis_connected";
/// The counter of queued writes dropped at the bound while Redis was away (label `kind`:
/// `record`, `ack`, `prune`; `remembered` for a sent cancel or a tombstone this worker would
/// have written again after a Redis restart). Cancels are never dropped.
pub const METRIC_DROPPED: &str = "cancelkit_gateway_redis_dropped_total";
/// The counter of cancels refused because their share of the queue was full (label `kind`:
/// `cancel`, `tombstone`, `claim`).
pub const METRIC_REFUSED: &str = "cancelkit_gateway_redis_refused_total";
/// The gauge of writes waiting for Redis (or being written).
pub const METRIC_PENDING: &str = "cancelkit_gateway_redis_pending_writes";
/// The gauge of cancels among them.
pub const METRIC_PENDING_CANCELS: &str = "cancelkit_gateway_redis_pending_cancels";
/// The counter of remote cancels that did not wait for their ack because too many already did.
pub const METRIC_WAITERS_FULL: &str = "cancelkit_gateway_redis_ack_waiters_full_total";
/// How long a worker's heartbeat lives unless refreshed, by default.
pub const DEFAULT_HEARTBEAT_TTL: Duration = Duration::from_secs(15);

/// What the cluster calls back into: this worker's runs.
pub trait LocalRuns: Send + Sync + 'static {
    /// A cancel for `run_id` arrived (pub/sub, a marker found after a reconnect, or a tombstone
    /// claim that was made late). Cancels the run if it is live here; returns whether this
    /// worker holds it cancelled now (then the cluster publishes the ack on
    /// `cancelkit:cancelled`).
    fn apply_cancel(&self, run_id: &str, reason: Option<String>) -> bool;
    /// A tombstone arrived from another worker (pub/sub, or read after a reconnect).
    fn add_tombstone(&self, tombstone: Tombstone);
    /// Tombstone `id` was claimed (here or elsewhere), or is gone from Redis: drop the copy.
    fn forget_tombstone(&self, id: &str);
    /// Every run this worker knows (live and retained), to write again after Redis came back
    /// empty, and to look up cancel markers for the live ones after a reconnect.
    fn records(&self) -> Vec<RunRecord>;
    /// The tombstones this worker holds that have not expired.
    fn tombstones(&self) -> Vec<Tombstone>;
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
    /// How long this worker's heartbeat lives unless refreshed (every third of it): a worker
    /// silent this long is gone, its running runs `lost` ([`DEFAULT_HEARTBEAT_TTL`]).
    pub heartbeat_ttl: Duration,
    /// How long a cancel marker and a tombstone wait.
    pub tombstone_ttl: Duration,
    /// How long a remote canceller waits for the owner's ack.
    pub ack_timeout: Duration,
    /// How long one lookup may take before it counts as unavailable.
    pub lookup_timeout: Duration,
    /// Most writes waiting for Redis while it is away (cancels within their shares of it).
    pub max_pending: usize,
}

/// A worker's link to the others.
///
/// Cheap to clone; the background task stops when [`shutdown`](Self::shutdown) is called, when
/// the last clone is dropped, or when the [`LocalRuns`] it serves is gone.
#[derive(Debug, Clone)]
pub struct Cluster {
    handle: Arc<Handle>,
}

/// What the clones share; dropping the last one stops the link.
struct Handle {
    shared: Arc<Shared>,
    _stop: DropGuard,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("worker", &self.shared.settings.worker)
            .field("connected", &self.shared.is_connected())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connects (in the background: never fails and never blocks; while Redis is away the
    /// cluster says so through [`is_connected`](Self::is_connected) and retries with backoff).
    ///
    /// Call it within a Tokio runtime; without one (or with a URL redis-rs cannot read) the
    /// error is logged and the cluster stays disconnected.
    pub fn start(settings: Settings, local: Weak<dyn LocalRuns>) -> Cluster {
        let stop = CancellationToken::new();
        let runtime = tokio::runtime::Handle::try_current();
        let client = match (&runtime, redis::Client::open(settings.url.as_str())) {
            (Ok(_), Ok(client)) => Some(client),
            (Err(e), _) => {
                tracing::error!(error = %e, "the redis cluster needs a tokio runtime: staying alone");
                None
            }
            (_, Err(e)) => {
                tracing::error!(error = %e, "the redis url is unusable: staying alone");
                None
            }
        };
        let config = ConnectionManagerConfig::new()
            .set_min_delay(link::BACKOFF_MIN)
            .set_max_delay(link::BACKOFF_MAX)
            .set_number_of_retries(3)
            .set_connection_timeout(Some(settings.lookup_timeout))
            .set_response_timeout(Some(settings.lookup_timeout));
        let conn = client.as_ref().and_then(|client| {
            ConnectionManager::new_lazy_with_config(client.clone(), config)
                .inspect_err(|e| tracing::error!(error = %e, "redis: cannot set up a connection"))
                .ok()
        });
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::new(settings.max_pending)),
            memory: Mutex::new(Memory::new(settings.max_pending)),
            waiters: Mutex::new(Waiters::new(settings.max_pending)),
            settings,
            local,
            conn,
            connected: AtomicBool::new(false),
            wake: Notify::new(),
            stop: stop.clone(),
            started_at: unix_now(),
            put_sha: Mutex::new(None),
        });
        shared.set_connected(false);
        shared.update_gauges();
        // Shown at 0 from the start, so an outage's first refusal or drop is a change.
        for kind in ["cancel", "tombstone", "claim"] {
            metrics::counter!(METRIC_REFUSED, "kind" => kind).increment(0);
        }
        for kind in ["record", "ack", "prune", "remembered"] {
            metrics::counter!(METRIC_DROPPED, "kind" => kind).increment(0);
        }
        if let (Ok(runtime), Some(client), Some(conn)) = (runtime, client, shared.conn.clone()) {
            runtime.spawn(link::run(shared.clone(), client, conn));
        }
        Cluster {
            handle: Arc::new(Handle {
                shared,
                _stop: stop.drop_guard(),
            }),
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// Writes a run's record (and its bare-id index). Never waits: writes are coalesced per
    /// run, so while Redis is away only the newest record of each run waits (bounded by
    /// `max_pending`, making room for cancels), and is written once it is back.
    pub fn record(&self, record: &RunRecord) {
        // Records are never refused, only dropped (and written again by the resync).
        let _ = self.shared().push(Op::Record(record.clone()));
    }

    /// Every run on any worker that the API's `requestId` names (a run id, or a bare JSON-RPC
    /// id as a string or the integer it spells). Bounded by `lookup_timeout`; at once
    /// [`Unavailable`] while the link is down.
    ///
    /// Records of this worker's runs are included too (the caller merges). Ids whose record has
    /// expired are left out, and taken out of their index set in the background. A running
    /// record whose worker stopped answering comes back [`RunState::Lost`].
    pub async fn find(
        &self,
        selector: &str,
        owner: Option<&str>,
    ) -> Result<Vec<RunRecord>, Unavailable> {
        let shared = self.shared();
        let mut conn = shared.conn()?;
        let limit = shared.settings.lookup_timeout;
        match tokio::time::timeout(limit, lookup::find(shared, &mut conn, selector, owner)).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, selector, "redis lookup failed");
                Err(Unavailable(e.to_string()))
            }
            Err(_) => Err(Unavailable(format!("no answer within {limit:?}"))),
        }
    }

    /// Asks the worker that owns `record` to cancel it: stores the marker, publishes on
    /// `cancellation:cancel`, and waits up to `ack_timeout` for that worker's ack (not for a
    /// [`RunState::Lost`] run's: [`RemoteCancel::Sent`] at once). `by` is the user who asks,
    /// `None` for an admin: whose share of the queue a deferred cancel draws from.
    ///
    /// While Redis is away (or the store and publish fail within `lookup_timeout`) the cancel is
    /// queued and [`RemoteCancel::Deferred`] comes back at once — or [`QueueFull`] if its share
    /// of the queue is full (nothing queued). With too many cancellers already waiting
    /// (`max_pending`) it does not wait: [`RemoteCancel::Sent`].
    pub async fn cancel_remote(
        &self,
        record: &RunRecord,
        reason: Option<String>,
        by: Option<&str>,
    ) -> Result<RemoteCancel, QueueFull> {
        let shared = self.shared();
        let run_id = record.run_id.as_str();
        let defer = |reason: Option<String>| {
            shared.push(Op::Cancel {
                run_id: run_id.to_owned(),
                reason,
                by: by.map(str::to_owned),
            })?;
            Ok(RemoteCancel::Deferred)
        };
        let Ok(mut conn) = shared.conn() else {
            return defer(reason);
        };
        let lost = record.state == RunState::Lost;
        // Waiting before publishing: an ack cannot slip by in between.
        let waiter = if lost {
            None
        } else {
            waiters::Waiter::register(shared, run_id)
        };
        let limit = shared.settings.lookup_timeout;
        let sent = tokio::time::timeout(
            limit,
            write::send_cancel(shared, &mut conn, run_id, reason.as_deref()),
        )
        .await;
        match sent {
            Ok(Ok(())) => {
                shared
                    .memory()
                    .sent(run_id, reason.clone(), keys::marker_ttl(&shared.settings));
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, run_id, "redis: remote cancel deferred");
                return defer(reason);
            }
            Err(_) => {
                tracing::debug!(run_id, "redis: remote cancel deferred (no answer in time)");
                return defer(reason);
            }
        }
        if lost {
            return Ok(RemoteCancel::Sent);
        }
        let Some(waiter) = waiter else {
            metrics::counter!(METRIC_WAITERS_FULL).increment(1);
            return Ok(RemoteCancel::Sent);
        };
        if waiter.wait(shared.settings.ack_timeout).await {
            Ok(RemoteCancel::Stopped)
        } else {
            Ok(RemoteCancel::Sent)
        }
    }

    /// Stores, indexes and publishes a tombstone this worker made (queued and sent once Redis
    /// is back if it is away; [`QueueFull`] if its maker's share of the queue is full — then
    /// nothing was queued).
    pub fn tombstone(&self, tombstone: &Tombstone) -> Result<(), QueueFull> {
        let shared = self.shared();
        shared.push(Op::Tombstone(tombstone.clone()))?;
        let left = (tombstone.expires_at - unix_now()).clamp(0.0, 1e9);
        shared
            .memory()
            .made(&tombstone.id, Duration::from_secs_f64(left));
        Ok(())
    }

    /// Claims `tombstone` for `run_id`, a run that registered here: true if this worker may
    /// cancel the run now (it won the claim in Redis, or the tombstone is its own and never
    /// reached Redis, so no other worker saw it; one being written is claimed in Redis after
    /// its write, as below).
    ///
    /// Fails closed: when Redis is away or does not answer within `lookup_timeout`, false, and
    /// the claim is queued and made after the reconnect; if it wins then, the cluster cancels
    /// the run through [`LocalRuns::apply_cancel`]. (Queued within the tombstone scope's share;
    /// refused beyond it, with a warning: then this run is not cancelled by it.)
    pub async fn claim_tombstone(&self, tombstone: &Tombstone, run_id: &str) -> bool {
        let shared = self.shared();
        let id = tombstone.id.as_str();
        let unwritten = shared.pending().claim_unwritten_tombstone(id);
        if unwritten == Unwritten::Claimed {
            shared.memory().claimed(id);
            shared.update_gauges();
            return true;
        }
        let defer = || {
            match shared.push(Op::Claim {
                tombstone: tombstone.clone(),
                run_id: run_id.to_owned(),
            }) {
                Ok(()) => {
                    tracing::info!(
                        id,
                        run_id,
                        "the tombstone's claim is made later (redis away or slow, or the tombstone still being written): the run goes on until the claim is won"
                    );
                }
                Err(e) => {
                    tracing::warn!(id, run_id, error = %e, "a tombstone's claim could not be queued: it does not cancel this run");
                }
            }
            false
        };
        let Ok(mut conn) = shared.conn() else {
            return defer();
        };
        if unwritten == Unwritten::Writing {
            // It may be published already: claimed in Redis like anyone's, once written.
            return defer();
        }
        let claiming = write::claim(shared, &mut conn, tombstone, run_id);
        match tokio::time::timeout(shared.settings.lookup_timeout, claiming).await {
            Ok(Ok(won)) => {
                shared.memory().claimed(id);
                won
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, id, "redis: tombstone claim deferred");
                defer()
            }
            Err(_) => {
                tracing::debug!(id, "redis: tombstone claim deferred (no answer in time)");
                defer()
            }
        }
    }

    /// Publishes that this worker stopped `run_id` (the ack on `cancelkit:cancelled`).
    pub fn ack(&self, run_id: &str) {
        // Acks are never refused, only dropped (they matter for `ack_timeout` at most).
        let _ = self.shared().push(Op::Ack(run_id.to_owned()));
    }

    /// Whether the subscription to Redis is up right now (and this worker's state was
    /// written back after it last came up).
    pub fn is_connected(&self) -> bool {
        self.shared().is_connected()
    }

    /// Stops the background tasks (deleting this worker's heartbeat, best effort). Later
    /// writes are kept (within the bound) but never sent.
    pub fn shutdown(&self) {
        let shared = self.shared();
        shared.stop.cancel();
        shared.set_connected(false);
    }

    /// How many writes wait for Redis, or are being sent, right now (for tests and
    /// diagnostics): 0 means everything queued so far has reached Redis or was dropped.
    pub fn pending_writes(&self) -> usize {
        self.shared().pending().unsent()
    }
}
