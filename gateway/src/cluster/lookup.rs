//! Reading runs: the records a selector names, and whether their workers still answer.

use std::collections::{HashMap, HashSet};

use redis::aio::ConnectionManager;
use redis::{RedisResult, RetryMethod};

use super::keys::{self, Heartbeat};
use super::pending::Op;
use super::shared::Shared;
use super::write::BATCH;
use crate::runs::record::{self, RunRecord, RunState};

/// The records a selector names: the run id's record, and those in the bare-id indexes
/// (every user's for an admin, `owner`'s own otherwise), at most [`keys::MAX_FIND`] per index.
/// A running record of another worker that stopped answering is [`RunState::Lost`].
pub(super) async fn find(
    shared: &Shared,
    conn: &mut ConnectionManager,
    selector: &str,
    owner: Option<&str>,
) -> RedisResult<Vec<RunRecord>> {
    let sets = keys::selector_sets(selector, owner);
    let now = keys::now_ms();
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for set in &sets {
        pipe.cmd("ZRANGEBYSCORE")
            .arg(set)
            .arg(now)
            .arg("+inf")
            .arg("LIMIT")
            .arg(0)
            .arg(keys::MAX_FIND);
    }
    let replies: Vec<RedisResult<Vec<String>>> = pipe.query_async(conn).await?;
    let mut members = Vec::with_capacity(replies.len());
    for (set, reply) in sets.iter().zip(replies) {
        match reply {
            Ok(ids) => members.push(ids),
            Err(e) if matches!(e.retry_method(), RetryMethod::NoRetry) => {
                tracing::warn!(set, error = %e, "redis: unreadable index set skipped");
                members.push(Vec::new());
            }
            Err(e) => return Err(e),
        }
    }

    // (run id, the set it came from) — a run id selector is looked up directly.
    let mut ids: Vec<(String, Option<&String>)> = Vec::new();
    let mut seen = HashSet::new();
    if record::is_run_id(selector) && seen.insert(selector.to_owned()) {
        ids.push((selector.to_owned(), None));
    }
    for (set, members) in sets.iter().zip(members) {
        for id in members {
            if seen.insert(id.clone()) {
                ids.push((id, Some(set)));
            }
        }
    }
    let mut found = Vec::new();
    for chunk in ids.chunks(BATCH) {
        let run_keys: Vec<String> = chunk.iter().map(|(id, _)| keys::run(id)).collect();
        let values: Vec<Option<Vec<u8>>> =
            redis::cmd("MGET").arg(&run_keys).query_async(conn).await?;
        for ((run_id, set), value) in chunk.iter().zip(values) {
            let Some(bytes) = value else {
                if let Some(set) = set {
                    let _ = shared.push(Op::Prune {
                        set: (*set).clone(),
                        run_id: run_id.clone(),
                    });
                }
                continue;
            };
            match serde_json::from_slice::<RunRecord>(&bytes) {
                Ok(record) if record.matches(selector) => found.push(record),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(run_id, error = %e, "redis: unreadable run record skipped");
                }
            }
        }
    }
    mark_lost(shared, conn, &mut found).await?;
    Ok(found)
}

/// Marks [`RunState::Lost`] the running records of other workers whose heartbeat is gone, or
/// who restarted since the run registered.
async fn mark_lost(
    shared: &Shared,
    conn: &mut ConnectionManager,
    found: &mut [RunRecord],
) -> RedisResult<()> {
    let me = shared.settings.worker.as_str();
    let workers: Vec<String> = found
        .iter()
        .filter(|r| r.state == RunState::Running && r.worker != me)
        .map(|r| r.worker.clone())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    if workers.is_empty() {
        return Ok(());
    }
    let beat_keys: Vec<String> = workers.iter().map(|w| keys::worker(w)).collect();
    let beats: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&beat_keys).query_async(conn).await?;
    // None: no heartbeat; Some(None): one this version cannot read (counted alive).
    let started: HashMap<&str, Option<Option<f64>>> = workers
        .iter()
        .zip(beats)
        .map(|(worker, beat)| {
            let started_at = beat.map(|bytes| {
                serde_json::from_slice::<Heartbeat>(&bytes)
                    .ok()
                    .map(|h| h.started_at)
            });
            (worker.as_str(), started_at)
        })
        .collect();
    for record in found
        .iter_mut()
        .filter(|r| r.state == RunState::Running && r.worker != me)
    {
        let alive = match started.get(record.worker.as_str()) {
            // Registered before the worker (re)started: its predecessor's run (both times
            // read from that worker's clock; a millisecond of slack for rounding).
            Some(Some(Some(started_at))) => record.registered_at + 0.001 >= *started_at,
            Some(Some(None)) => true,
            _ => false,
        };
        if !alive {
            record.state = RunState::Lost;
        }
    }
    Ok(())
}
