//! Several workers sharing runs and cancels through Redis.
//!
//! What Redis holds (all keys under the prefix `cancelkit:`, every key with a TTL):
//! - `cancelkit:run:<run_id>` → a [`RunRecord`] as JSON (TTL: while running, the tool timeout
//!   plus the retention, refreshed on every write; once finished, the retention);
//! - `cancelkit:rid:<s|n>:<id>` → the run ids whose JSON-RPC id is that string (`s`) or
//!   integer (`n`), so a bare id is found on every worker, and `cancelkit:urid:<owner in
//!   hex>:<s|n>:<id>` → the same for one user's runs (a user's lookup reads only its own): sorted
//!   sets scored by when each entry's record expires, every write dropping the expired entries,
//!   so an index never outgrows the records it names (TTL: the longest a record lives,
//!   refreshed on every write; an id whose record went early is pruned when a lookup meets
//!   it); a lookup reads at most 1,000 entries of one index;
//! - `cancelkit:cancel:<run_id>` → a cancel marker `{"reason": ...}` (TTL: the tombstone ttl),
//!   so a worker that missed the pub/sub message still applies it;
//! - `cancelkit:tombstone:<id>` → a [`Tombstone`] as JSON (TTL: until it expires).
//!
//! Channels: `cancellation:cancel` carries ContextForge's payload `{"run_id": ..., "reason":
//! ...}` (with our run id); `cancelkit:cancelled` carries `{"run_id": ...}` when the owning
//! worker has stopped the run (the ack a remote canceller waits for); `cancelkit:tombstone`
//! carries a [`Tombstone`].
//!
//! How it holds up when Redis does not:
//! - Commands go through redis-rs's `ConnectionManager`, which reconnects by itself; pub/sub has
//!   its own connection, which a background task (the *link*) re-establishes with backoff (100 ms
//!   doubling to 5 s) and checks with a `PING` every few seconds.
//! - Nothing local waits for Redis: [`Cluster::record`], [`Cluster::tombstone`] and
//!   [`Cluster::ack`] queue the write (bounded, coalesced per key, oldest dropped at the bound)
//!   and return; [`Cluster::find`], [`Cluster::cancel_remote`] and [`Cluster::claim_tombstone`]
//!   are bounded by their timeouts and answer at once while the link is down.
//! - Every time the link is (re)established, before it says it is connected, it writes this
//!   worker's records again (and its tombstones, if Redis is a new server: restarted, likely
//!   empty), flushes the queued writes, applies the cancel markers of its live runs, and reads
//!   the tombstones stored meanwhile. Pub/sub is at most once; the keys make up for it.
//! - An outage is logged once (when it starts, and when it ends) and shown by the gauge
//!   `cancelkit_gateway_redis_connected` (0 or 1); writes dropped at the bound are counted in
//!   `cancelkit_gateway_redis_dropped_total{kind}`.

mod keys;
mod link;
mod pending;
mod waiters;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::runs::record::{RunRecord, Tombstone};
use pending::{Op, Pending};
use waiters::Waiters;

/// The gauge: 1 while the link to Redis is up, else 0.
pub const METRIC_CONNECTED: &str = "cancelkit_gateway_redis_connected";
/// The counter of queued writes dropped at the bound while Redis was away (label `kind`:
/// `record`, `tombstone`, `cancel`, `ack`, `prune`).
pub const METRIC_DROPPED: &str = "cancelkit_gateway_redis_dropped_total";
/// The counter of remote cancels that did not wait for their ack because too many already did.
pub const METRIC_WAITERS_FULL: &str = "cancelkit_gateway_redis_ack_waiters_full_total";

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

/// The state the API and the link task share.
struct Shared {
    settings: Settings,
    local: Weak<dyn LocalRuns>,
    /// Commands; `None` when the URL is unusable (then Redis is away for good).
    conn: Option<ConnectionManager>,
    connected: AtomicBool,
    pending: Mutex<Pending>,
    /// Wakes the link when a write is queued.
    wake: Notify,
    waiters: Mutex<Waiters>,
    stop: CancellationToken,
}

impl Shared {
    fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Release);
        metrics::gauge!(METRIC_CONNECTED).set(if up { 1.0 } else { 0.0 });
    }

    /// The queue; a panic elsewhere while it was held does not poison it for good.
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a write and wakes the link; at the bound the oldest write goes (counted, and
    /// warned about once per outage).
    fn push(&self, op: Op) {
        let dropped = self.pending().push(op);
        self.note_dropped(dropped);
        self.wake.notify_one();
    }

    /// Counts writes dropped at the bound, and warns about the first of an outage.
    fn note_dropped(&self, dropped: Vec<pending::Dropped>) {
        for dropped in dropped {
            metrics::counter!(METRIC_DROPPED, "kind" => dropped.kind).increment(1);
            if dropped.first_in_outage {
                tracing::warn!(
                    bound = self.settings.max_pending,
                    kind = dropped.kind,
                    "too many writes wait for redis: dropping the oldest (further drops are only \
                     counted in {METRIC_DROPPED})"
                );
            }
        }
    }

    /// The command connection, while the link is up.
    fn conn(&self) -> Result<ConnectionManager, Unavailable> {
        match &self.conn {
            Some(conn) if self.is_connected() => Ok(conn.clone()),
            Some(_) => Err(Unavailable("not connected".into())),
            None => Err(Unavailable("no usable redis url".into())),
        }
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
            waiters: Mutex::new(Waiters::new(settings.max_pending)),
            settings,
            local,
            conn,
            connected: AtomicBool::new(false),
            wake: Notify::new(),
            stop: stop.clone(),
        });
        shared.set_connected(false);
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
    /// `max_pending`), and is written once it is back.
    pub fn record(&self, record: &RunRecord) {
        self.shared().push(Op::Record(record.clone()));
    }

    /// Every run on any worker that the API's `requestId` names (a run id, or a bare JSON-RPC
    /// id as a string or the integer it spells). Bounded by `lookup_timeout`; at once
    /// [`Unavailable`] while the link is down.
    ///
    /// Records of this worker's runs are included too (the caller merges). Ids whose record has
    /// expired are left out, and taken out of their index set in the background.
    pub async fn find(
        &self,
        selector: &str,
        owner: Option<&str>,
    ) -> Result<Vec<RunRecord>, Unavailable> {
        let shared = self.shared();
        let mut conn = shared.conn()?;
        let limit = shared.settings.lookup_timeout;
        match tokio::time::timeout(limit, link::find(shared, &mut conn, selector, owner)).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, selector, "redis lookup failed");
                Err(Unavailable(e.to_string()))
            }
            Err(_) => Err(Unavailable(format!("no answer within {limit:?}"))),
        }
    }

    /// Asks the worker that owns `record` to cancel it: stores the marker, publishes on
    /// `cancellation:cancel`, and waits up to `ack_timeout` for that worker's ack.
    ///
    /// While Redis is away (or the store and publish fail within `lookup_timeout`) the cancel is
    /// queued like any write and [`RemoteCancel::Deferred`] comes back at once. With too many
    /// cancellers already waiting (`max_pending`) it does not wait: [`RemoteCancel::Sent`].
    pub async fn cancel_remote(&self, record: &RunRecord, reason: Option<String>) -> RemoteCancel {
        let shared = self.shared();
        let run_id = record.run_id.as_str();
        let defer = |reason: Option<String>| {
            shared.push(Op::Cancel {
                run_id: run_id.to_owned(),
                reason,
            });
            RemoteCancel::Deferred
        };
        let Ok(mut conn) = shared.conn() else {
            return defer(reason);
        };
        // Waiting before publishing: an ack cannot slip by in between.
        let waiter = waiters::Waiter::register(shared, run_id);
        let limit = shared.settings.lookup_timeout;
        let sent = tokio::time::timeout(
            limit,
            link::send_cancel(shared, &mut conn, run_id, reason.as_deref()),
        )
        .await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, run_id, "redis: remote cancel deferred");
                return defer(reason);
            }
            Err(_) => {
                tracing::debug!(run_id, "redis: remote cancel deferred (no answer in time)");
                return defer(reason);
            }
        }
        let Some(waiter) = waiter else {
            metrics::counter!(METRIC_WAITERS_FULL).increment(1);
            return RemoteCancel::Sent;
        };
        if waiter.wait(shared.settings.ack_timeout).await {
            RemoteCancel::Stopped
        } else {
            RemoteCancel::Sent
        }
    }

    /// Stores and publishes a tombstone (kept and sent once Redis is back if it is away).
    pub fn tombstone(&self, tombstone: &Tombstone) {
        self.shared().push(Op::Tombstone(tombstone.clone()));
    }

    /// Claims a tombstone for a run that registered here: true if this worker may apply it
    /// (it deleted the key first, or Redis is away and the local copy decides).
    ///
    /// A tombstone of this worker's own that has not reached Redis yet is claimed without
    /// asking (its write is dropped, or its key deleted once written).
    pub async fn claim_tombstone(&self, id: &str) -> bool {
        let shared = self.shared();
        if shared.pending().claim_unwritten_tombstone(id) {
            return true;
        }
        let Ok(mut conn) = shared.conn() else {
            return true;
        };
        let mut del = redis::cmd("DEL");
        del.arg(keys::tombstone(id));
        let deleting = del.query_async::<i64>(&mut conn);
        match tokio::time::timeout(shared.settings.lookup_timeout, deleting).await {
            Ok(Ok(deleted)) => deleted == 1,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, id, "redis: tombstone claimed locally");
                true
            }
            Err(_) => {
                tracing::debug!(id, "redis: tombstone claimed locally (no answer in time)");
                true
            }
        }
    }

    /// Publishes that this worker stopped `run_id` (the ack on `cancelkit:cancelled`).
    pub fn ack(&self, run_id: &str) {
        self.shared().push(Op::Ack(run_id.to_owned()));
    }

    /// Whether the subscription to Redis is up right now (and this worker's state was
    /// written back after it last came up).
    pub fn is_connected(&self) -> bool {
        self.shared().is_connected()
    }

    /// Stops the background tasks. Later writes are kept (within the bound) but never sent.
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
