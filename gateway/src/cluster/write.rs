//! Writing to Redis: the queued writes (a pipeline at a time), cancels and claims sent at
//! once, the heartbeat and the renewal of running records' leases.

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{ErrorKind, Pipeline, RedisResult, RetryMethod, ServerErrorKind, Value};

use super::keys::{self, AckMessage, CancelMessage, ClaimedMessage, Heartbeat, Marker};
use super::link::{Failed, bounded};
use super::pending::{Op, Taken};
use super::scripts::{self, Put};
use super::shared::Shared;
use crate::runs::record::{self, RunRecord, RunState, Tombstone};

/// Writes per pipeline, records per rewrite pipeline, keys per `MGET`.
pub(super) const BATCH: usize = 256;

/// One write with how long it waited in the queue (a tombstone's expiry moves by that much).
pub(super) type Timed<'a> = (&'a Op, Duration);

/// Writes everything queued, a pipeline at a time; on a connection error puts the batch back
/// and says so (the link is then re-established).
pub(super) async fn flush(shared: &Shared, conn: &mut ConnectionManager) -> Result<(), Failed> {
    loop {
        let batch = shared.pending().take(BATCH);
        if batch.is_empty() {
            shared.update_gauges();
            return Ok(());
        }
        let (claims, writes): (Vec<Taken>, Vec<Taken>) = batch
            .into_iter()
            .partition(|taken| matches!(taken.op, Op::Claim { .. }));
        if let Err(e) = write(shared, conn, &writes).await {
            let mut all = writes;
            all.extend(claims);
            let dropped = shared.pending().put_back(all);
            shared.note_dropped(dropped);
            return Err(e);
        }
        written(shared, &writes);
        shared.pending().finish(&writes);
        let mut claims = claims.into_iter();
        while let Some(taken) = claims.next() {
            let Op::Claim { tombstone, run_id } = &taken.op else {
                continue;
            };
            let claiming = claim(shared, conn, tombstone, run_id);
            match bounded("claiming", shared.settings.lookup_timeout, claiming).await {
                Ok(won) => {
                    shared.memory().claimed(&tombstone.id);
                    if won && let Some(local) = shared.local.upgrade() {
                        tracing::info!(run_id, id = %tombstone.id, "a tombstone claimed after the reconnect cancels its run");
                        if local.apply_cancel(run_id, tombstone.reason.clone()) {
                            let _ = shared.push(Op::Ack(run_id.clone()));
                        }
                    }
                    shared.pending().finish(std::slice::from_ref(&taken));
                }
                Err(e) => {
                    let mut rest = vec![taken];
                    rest.extend(claims);
                    let dropped = shared.pending().put_back(rest);
                    shared.note_dropped(dropped);
                    return Err(e);
                }
            }
        }
        shared.update_gauges();
    }
}

/// Remembers what was written that a Redis restart would lose.
fn written(shared: &Shared, batch: &[Taken]) {
    let mut memory = shared.memory();
    for taken in batch {
        match &taken.op {
            Op::Cancel { run_id, reason, .. } => {
                memory.sent(run_id, reason.clone(), keys::marker_ttl(&shared.settings));
            }
            Op::Tombstone(tombstone) => {
                let left = tombstone.expires_at - record::unix_now()
                    + taken.queued_at.elapsed().as_secs_f64();
                memory.made(&tombstone.id, Duration::from_secs_f64(left.clamp(0.0, 1e9)));
            }
            _ => {}
        }
    }
}

/// Sends one batch of queued writes, less acks nobody waits for any more.
async fn write(
    shared: &Shared,
    conn: &mut ConnectionManager,
    batch: &[Taken],
) -> Result<(), Failed> {
    let fresh = batch.iter().filter(|taken| {
        let stale = matches!(taken.op, Op::Ack(_))
            && taken.queued_at.elapsed() > shared.settings.ack_timeout;
        if stale {
            tracing::debug!("redis: an ack expired before it could be sent");
        }
        !stale
    });
    let timed = fresh.map(|taken| (&taken.op, taken.queued_at.elapsed()));
    send(shared, conn, timed, shared.settings.lookup_timeout).await
}

/// Sends writes in one pipeline within `limit`. A command Redis refuses for good (bad data
/// under a key, say) costs only its own write, logged; a connection error, a refusal worth
/// retrying (loading, read-only, ...), or a server that lost the write script, fails the batch.
pub(super) async fn send<'a>(
    shared: &Shared,
    conn: &mut ConnectionManager,
    ops: impl Iterator<Item = Timed<'a>>,
    limit: Duration,
) -> Result<(), Failed> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let sha = shared.put_sha();
    let mut spans: Vec<(&'static str, usize)> = Vec::new();
    for (op, waited) in ops {
        let count = add_commands(&mut pipe, shared, sha.as_deref(), op, waited)?;
        spans.push((op.kind(), count));
    }
    if spans.is_empty() {
        return Ok(());
    }
    let results: Vec<RedisResult<Value>> =
        bounded("writing", limit, pipe.query_async(conn)).await?;
    let mut results = results.into_iter();
    for (kind, count) in spans {
        for result in results.by_ref().take(count) {
            if let Err(e) = result {
                if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) {
                    shared.set_put_sha(None);
                    return Err(e.into());
                }
                if !matches!(e.retry_method(), RetryMethod::NoRetry) {
                    return Err(e.into());
                }
                tracing::warn!(kind, error = %e, "redis refused a write; it is dropped");
            }
        }
    }
    Ok(())
}

/// Adds the commands of one write to `pipe`; returns how many.
fn add_commands(
    pipe: &mut Pipeline,
    shared: &Shared,
    sha: Option<&str>,
    op: &Op,
    waited: Duration,
) -> Result<usize, Failed> {
    let settings = &shared.settings;
    let sha = || sha.ok_or(Failed::NoScript);
    match op {
        Op::Record(record) => {
            add_record(pipe, shared, sha()?, record);
            Ok(1)
        }
        Op::Tombstone(tombstone) => {
            // Its life counts from when it could be written: moved by the time it waited.
            let mut tombstone = tombstone.clone();
            tombstone.expires_at += waited.as_secs_f64();
            let left = (tombstone.expires_at - record::unix_now()).clamp(0.001, 1e9);
            let text = keys::json(&tombstone);
            scripts::put(
                pipe,
                sha()?,
                &Put {
                    key: keys::tombstone(&tombstone.id),
                    indexes: &[keys::TOMBSTONES.to_owned()],
                    value: &text,
                    ttl_ms: keys::millis(Duration::from_secs_f64(left)),
                    member: &tombstone.id,
                    now_ms: keys::now_ms(),
                },
            );
            pipe.cmd("PUBLISH").arg(keys::CHANNEL_TOMBSTONE).arg(&text);
            Ok(2)
        }
        Op::Cancel { run_id, reason, .. } => {
            add_cancel(pipe, run_id, reason.as_deref(), keys::marker_ttl(settings));
            Ok(2)
        }
        Op::Ack(run_id) => {
            pipe.cmd("PUBLISH")
                .arg(keys::CHANNEL_CANCELLED)
                .arg(keys::json(&AckMessage {
                    run_id: run_id.clone(),
                }));
            Ok(1)
        }
        Op::Prune { set, run_id } => {
            pipe.cmd("ZREM").arg(set).arg(run_id);
            Ok(1)
        }
        // Claims are made one by one (their answers matter): never here.
        Op::Claim { .. } => Ok(0),
    }
}

/// A record and its two bare-id index entries, in one script call.
fn add_record(pipe: &mut Pipeline, shared: &Shared, sha: &str, record: &RunRecord) {
    let indexes = keys::rid_sets_of(record);
    let text = keys::json(record);
    scripts::put(
        pipe,
        sha,
        &Put {
            key: keys::run(&record.run_id),
            indexes: &indexes,
            value: &text,
            ttl_ms: keys::millis(keys::record_ttl(&shared.settings, record)),
            member: &record.run_id,
            now_ms: keys::now_ms(),
        },
    );
}

/// The marker (living `ttl`), then the message (a worker that misses the message finds the
/// marker).
pub(super) fn add_cancel(pipe: &mut Pipeline, run_id: &str, reason: Option<&str>, ttl: Duration) {
    let reason = reason.map(str::to_owned);
    pipe.cmd("SET")
        .arg(keys::cancel(run_id))
        .arg(keys::json(&Marker {
            reason: reason.clone(),
        }))
        .arg("PX")
        .arg(keys::millis(ttl));
    pipe.cmd("PUBLISH")
        .arg(keys::CHANNEL_CANCEL)
        .arg(keys::json(&CancelMessage {
            run_id: run_id.to_owned(),
            reason,
        }));
}

/// Stores the marker and publishes the cancel, now.
pub(super) async fn send_cancel(
    shared: &Shared,
    conn: &mut ConnectionManager,
    run_id: &str,
    reason: Option<&str>,
) -> RedisResult<()> {
    let mut pipe = redis::pipe();
    add_cancel(
        &mut pipe,
        run_id,
        reason,
        keys::marker_ttl(&shared.settings),
    );
    pipe.query_async(conn).await
}

/// Claims `tombstone` for `run_id` of this worker's: whether this worker holds the claim.
pub(super) async fn claim(
    shared: &Shared,
    conn: &mut ConnectionManager,
    tombstone: &Tombstone,
    run_id: &str,
) -> RedisResult<bool> {
    let claimant = format!("{}/{run_id}", shared.settings.worker);
    run_claim(shared, conn, &tombstone.id, &claimant).await
}

/// The claim script for tombstone `id`.
async fn run_claim(
    shared: &Shared,
    conn: &mut ConnectionManager,
    id: &str,
    claimant: &str,
) -> RedisResult<bool> {
    let won: i64 = redis::cmd("EVAL")
        .arg(scripts::CLAIM)
        .arg(3)
        .arg(keys::tombstone(id))
        .arg(keys::claimed(id))
        .arg(keys::TOMBSTONES)
        .arg(claimant)
        .arg(keys::millis(keys::claim_ttl(&shared.settings)))
        .arg(id)
        .arg(keys::CHANNEL_CLAIMED)
        .arg(keys::json(&ClaimedMessage { id: id.to_owned() }))
        .query_async(conn)
        .await?;
    Ok(won == 1)
}

/// Writes this worker's heartbeat.
pub(super) async fn heartbeat(shared: &Shared, conn: &mut ConnectionManager) -> Result<(), Failed> {
    let beat = keys::json(&Heartbeat {
        started_at: shared.started_at,
    });
    let mut set = redis::cmd("SET");
    set.arg(keys::worker(&shared.settings.worker))
        .arg(beat)
        .arg("PX")
        .arg(keys::millis(shared.settings.heartbeat_ttl));
    bounded(
        "heartbeat",
        shared.settings.lookup_timeout,
        set.query_async::<()>(conn),
    )
    .await
}

/// Deletes this worker's heartbeat (it stops): its running records read `lost` at once.
pub(super) async fn farewell(shared: &Shared, conn: &mut ConnectionManager) -> Result<(), Failed> {
    let mut del = redis::cmd("DEL");
    del.arg(keys::worker(&shared.settings.worker));
    bounded(
        "heartbeat",
        shared.settings.lookup_timeout,
        del.query_async::<()>(conn),
    )
    .await
}

/// Renews the leases of this worker's running records (writing them again, a batch at a time;
/// a newer record queued meanwhile is written after, so it wins).
pub(super) async fn renew(shared: &Shared, conn: &mut ConnectionManager) -> Result<(), Failed> {
    let Some(local) = shared.local.upgrade() else {
        return Ok(());
    };
    let live: Vec<RunRecord> = local
        .records()
        .into_iter()
        .filter(|r| r.state == RunState::Running && r.worker == shared.settings.worker)
        .collect();
    let ops: Vec<Op> = live.into_iter().map(Op::Record).collect();
    for chunk in ops.chunks(BATCH) {
        let timed = chunk.iter().map(|op| (op, Duration::ZERO));
        send(shared, conn, timed, shared.settings.lookup_timeout).await?;
    }
    Ok(())
}
