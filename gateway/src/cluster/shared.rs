//! The state the API and the link task share.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, Weak};

use redis::aio::ConnectionManager;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::memory::Memory;
use super::pending::{self, Op, Pending};
use super::waiters::Waiters;
use super::{
    LocalRuns, METRIC_CONNECTED, METRIC_DROPPED, METRIC_PENDING, METRIC_PENDING_CANCELS,
    METRIC_REFUSED, QueueFull, Settings, Unavailable,
};

/// What the [`Cluster`](super::Cluster) handles and the link task hold.
pub(super) struct Shared {
    pub settings: Settings,
    pub local: Weak<dyn LocalRuns>,
    /// Commands; `None` when the URL is unusable (then Redis is away for good).
    pub conn: Option<ConnectionManager>,
    pub connected: AtomicBool,
    pub pending: Mutex<Pending>,
    /// What must be written again to a Redis that restarted empty.
    pub memory: Mutex<Memory>,
    /// Wakes the link when a write is queued.
    pub wake: Notify,
    pub waiters: Mutex<Waiters>,
    pub stop: CancellationToken,
    /// When this worker started (in its heartbeat), seconds since the Unix epoch.
    pub started_at: f64,
    /// The hash of the loaded write script, once loaded on this connection.
    pub put_sha: Mutex<Option<String>>,
}

/// A lock that a panic elsewhere while it was held does not poison for good.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    pub(super) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    pub(super) fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Release);
        metrics::gauge!(METRIC_CONNECTED).set(if up { 1.0 } else { 0.0 });
    }

    /// The queue.
    pub(super) fn pending(&self) -> MutexGuard<'_, Pending> {
        lock(&self.pending)
    }

    /// What to write again after a restart.
    pub(super) fn memory(&self) -> MutexGuard<'_, Memory> {
        lock(&self.memory)
    }

    pub(super) fn waiters(&self) -> MutexGuard<'_, Waiters> {
        lock(&self.waiters)
    }

    /// The hash of the write script, if loaded.
    pub(super) fn put_sha(&self) -> Option<String> {
        lock(&self.put_sha).clone()
    }

    pub(super) fn set_put_sha(&self, sha: Option<String>) {
        *lock(&self.put_sha) = sha;
    }

    /// Sets the gauges of queued writes.
    pub(super) fn update_gauges(&self) {
        let (writes, cancels) = {
            let pending = self.pending();
            (pending.unsent(), pending.cancels())
        };
        metrics::gauge!(METRIC_PENDING).set(writes as f64);
        metrics::gauge!(METRIC_PENDING_CANCELS).set(cancels as f64);
    }

    /// Queues a write and wakes the link. A cancel beyond its share is refused (counted);
    /// other writes beyond the bound drop the oldest droppable one (counted, and warned about
    /// once per outage).
    pub(super) fn push(&self, op: Op) -> Result<(), QueueFull> {
        let kind = op.kind();
        let pushed = self.pending().push(op);
        let result = match pushed {
            Ok(dropped) => {
                self.note_dropped(dropped);
                self.wake.notify_one();
                Ok(())
            }
            Err(full) => {
                metrics::counter!(METRIC_REFUSED, "kind" => kind).increment(1);
                tracing::debug!(kind, error = %full, "a cancel waiting for redis was refused");
                Err(full)
            }
        };
        self.update_gauges();
        result
    }

    /// Counts writes dropped at the bound, and warns about the first of an outage.
    pub(super) fn note_dropped(&self, dropped: Vec<pending::Dropped>) {
        for dropped in dropped {
            metrics::counter!(METRIC_DROPPED, "kind" => dropped.kind).increment(1);
            if dropped.first_in_outage {
                tracing::warn!(
                    bound = self.settings.max_pending,
                    kind = dropped.kind,
                    "too many writes wait for redis: dropping the oldest records and acks (never \
                     cancels; further drops are only counted in {METRIC_DROPPED})"
                );
            }
        }
    }

    /// The command connection, while the link is up.
    pub(super) fn conn(&self) -> Result<ConnectionManager, Unavailable> {
        match &self.conn {
            Some(conn) if self.is_connected() => Ok(conn.clone()),
            Some(_) => Err(Unavailable("not connected".into())),
            None => Err(Unavailable("no usable redis url".into())),
        }
    }
}
