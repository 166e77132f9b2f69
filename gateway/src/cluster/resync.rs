//! The resync after every (re)establishment of the link: this worker and Redis brought up to
//! date with each other, in bounded steps whose progress survives a failed attempt.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;

use super::LocalRuns;
use super::keys::{self, Marker};
use super::link::{Failed, bounded, take_tombstone};
use super::pending::Op;
use super::shared::Shared;
use super::write::{self, BATCH};
use crate::runs::record::{RunRecord, RunState, unix_now};

/// Most tombstones read from the index in one resync.
const MAX_TOMBSTONES_READ: usize = 100_000;
/// Tombstone ids read from the index per step.
const TOMBSTONE_PAGE: usize = 1_000;

/// A rewrite of this worker's records under way: what to write, and how far it got. Kept
/// across attempts, so a link that keeps breaking still gets every record written.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// The server (its `run_id`) the rewrite is for.
    server: String,
    /// The records, as they were when it began (newer ones are in the queue, written after).
    records: Vec<RunRecord>,
    /// How many were written.
    next: usize,
    /// Records written over all attempts: grows whenever an attempt made progress.
    total: u64,
}

impl Progress {
    /// A measure that grows with every batch written.
    pub(super) fn written(&self) -> u64 {
        self.total
    }

    fn active(&self) -> bool {
        self.next < self.records.len()
    }
}

/// How long one batch of the rewrite may take.
fn batch_deadline(shared: &Shared) -> Duration {
    shared.settings.lookup_timeout.max(Duration::from_secs(2))
}

/// Writes the heartbeat; to a new server, this worker's unacked cancels and waiting
/// tombstones; this worker's records, when needed; flushes the queue; applies the markers of
/// its live runs; takes in the stored tombstones.
pub(super) async fn resync(
    shared: &Shared,
    conn: &mut ConnectionManager,
    new_server: bool,
    server_now: &str,
    progress: &mut Progress,
) -> Result<(), Failed> {
    let Some(local) = shared.local.upgrade() else {
        return Ok(());
    };
    write::heartbeat(shared, conn).await?;
    let held: Vec<String> = local.tombstones().into_iter().map(|t| t.id).collect();
    if new_server {
        rewrite_cancels(shared, conn, &*local).await?;
    }

    let dropped = shared.pending().take_records_dropped();
    let resume = progress.active() && progress.server == server_now && !dropped;
    if !resume && (new_server || dropped || progress.active()) {
        let total = progress.total;
        *progress = Progress {
            server: server_now.to_owned(),
            records: local.records(),
            next: 0,
            total,
        };
    }
    if progress.active() {
        tracing::info!(
            records = progress.records.len(),
            from = progress.next,
            "redis: writing this worker's records"
        );
    }
    let limit = batch_deadline(shared);
    while progress.active() {
        let end = (progress.next + BATCH).min(progress.records.len());
        let ops: Vec<Op> = progress.records[progress.next..end]
            .iter()
            .cloned()
            .map(Op::Record)
            .collect();
        let timed = ops.iter().map(|op| (op, Duration::ZERO));
        write::send(shared, conn, timed, limit).await?;
        progress.total += (end - progress.next) as u64;
        progress.next = end;
    }
    progress.records = Vec::new();
    progress.next = 0;
    write::flush(shared, conn).await?;

    apply_markers(shared, conn, &*local).await?;
    let stored = read_tombstones(shared, conn, &*local).await?;
    if let Some(stored) = stored
        && !new_server
    {
        // Same server: a tombstone held here that is no longer stored was claimed (or
        // expired) meanwhile.
        for id in held.iter().filter(|id| !stored.contains(*id)) {
            local.forget_tombstone(id);
            shared.memory().claimed(id);
        }
    }
    Ok(())
}

/// To a new server: the cancels this worker sent that were not acked (markers again, and
/// published again), and the tombstones it made that still wait here.
async fn rewrite_cancels(
    shared: &Shared,
    conn: &mut ConnectionManager,
    local: &dyn LocalRuns,
) -> Result<(), Failed> {
    let now = Instant::now();
    let unacked = shared.memory().unacked();
    let mine: Vec<Op> = {
        let memory = shared.memory();
        local
            .tombstones()
            .into_iter()
            .filter(|t| t.expires_at > unix_now() && memory.is_mine(&t.id))
            .map(Op::Tombstone)
            .collect()
    };
    if !unacked.is_empty() || !mine.is_empty() {
        tracing::info!(
            cancels = unacked.len(),
            tombstones = mine.len(),
            "redis restarted: writing this worker's waiting cancels again"
        );
    }
    let limit = shared.settings.lookup_timeout;
    for chunk in unacked.chunks(BATCH) {
        let mut pipe = redis::pipe();
        for (run_id, sent) in chunk {
            let left = sent.until.saturating_duration_since(now);
            write::add_cancel(&mut pipe, run_id, sent.reason.as_deref(), left);
        }
        bounded("writing cancels", limit, pipe.query_async::<()>(conn)).await?;
    }
    for chunk in mine.chunks(BATCH) {
        let timed = chunk.iter().map(|op| (op, Duration::ZERO));
        write::send(shared, conn, timed, limit).await?;
    }
    Ok(())
}

/// Applies the cancel markers of this worker's live runs.
async fn apply_markers(
    shared: &Shared,
    conn: &mut ConnectionManager,
    local: &dyn LocalRuns,
) -> Result<(), Failed> {
    let records = local.records();
    let live: Vec<&str> = records
        .iter()
        .filter(|r| r.state == RunState::Running && r.worker == shared.settings.worker)
        .map(|r| r.run_id.as_str())
        .collect();
    let limit = shared.settings.lookup_timeout;
    for chunk in live.chunks(BATCH) {
        let marker_keys: Vec<String> = chunk.iter().map(|id| keys::cancel(id)).collect();
        let markers: Vec<Option<Vec<u8>>> = bounded(
            "reading cancel markers",
            limit,
            redis::cmd("MGET").arg(&marker_keys).query_async(conn),
        )
        .await?;
        for (run_id, marker) in chunk.iter().zip(markers) {
            let Some(bytes) = marker else { continue };
            match serde_json::from_slice::<Marker>(&bytes) {
                Ok(marker) => {
                    if local.apply_cancel(run_id, marker.reason) {
                        let _ = shared.push(Op::Ack((*run_id).to_owned()));
                    }
                }
                Err(e) => {
                    tracing::warn!(run_id, error = %e, "redis: unreadable cancel marker skipped");
                }
            }
        }
    }
    Ok(())
}

/// Reads the stored tombstones (through their index) and hands them to the worker. Returns
/// their ids, or `None` if there were more than [`MAX_TOMBSTONES_READ`].
async fn read_tombstones(
    shared: &Shared,
    conn: &mut ConnectionManager,
    local: &dyn LocalRuns,
) -> Result<Option<HashSet<String>>, Failed> {
    let limit = shared.settings.lookup_timeout;
    let now = keys::now_ms();
    let mut stored = HashSet::new();
    let mut offset = 0;
    loop {
        let ids: Vec<String> = bounded(
            "reading tombstones",
            limit,
            redis::cmd("ZRANGEBYSCORE")
                .arg(keys::TOMBSTONES)
                .arg(now)
                .arg("+inf")
                .arg("LIMIT")
                .arg(offset)
                .arg(TOMBSTONE_PAGE)
                .query_async(conn),
        )
        .await?;
        let page = ids.len();
        for chunk in ids.chunks(BATCH) {
            let tombstone_keys: Vec<String> = chunk.iter().map(|id| keys::tombstone(id)).collect();
            let values: Vec<Option<Vec<u8>>> = bounded(
                "reading tombstones",
                limit,
                redis::cmd("MGET").arg(&tombstone_keys).query_async(conn),
            )
            .await?;
            for (id, value) in chunk.iter().zip(values) {
                let Some(bytes) = value else { continue };
                stored.insert(id.clone());
                take_tombstone(local, &bytes, "the tombstone index");
            }
        }
        offset += page;
        if page < TOMBSTONE_PAGE {
            return Ok(Some(stored));
        }
        if offset >= MAX_TOMBSTONES_READ {
            tracing::warn!(
                read = offset,
                "redis: more tombstones than one resync reads; the rest arrive by pub/sub or not"
            );
            return Ok(None);
        }
    }
}
