//! The link task: the pub/sub connection (re-established with backoff), the resync after every
//! (re)establishment, the queued writes, and the commands the API sends.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, PubSubSink, PubSubStream};
use redis::{Client, Msg, Pipeline, RedisError, RedisResult, RetryMethod, Value};

use super::keys::{self, AckMessage, CancelMessage, Marker};
use super::pending::{Op, Taken};
use super::{LocalRuns, Shared};
use crate::runs::record::{self, RunRecord, RunState, Tombstone};

/// The first wait before reconnecting.
pub(super) const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest wait before reconnecting.
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How often the pub/sub connection is checked with a `PING` (a silent network loses no
/// packets to tell us it is gone).
const PING_EVERY: Duration = Duration::from_secs(5);
/// The server id when `INFO` gives none.
const UNKNOWN_SERVER: &str = "unknown";
/// Writes per pipeline, records per rewrite pipeline, keys per `MGET` and per `SCAN` step.
const BATCH: usize = 256;

/// Runs until stopped, or until the worker it serves is gone.
pub(super) async fn run(shared: Arc<Shared>, client: Client, conn: ConnectionManager) {
    let mut backoff = BACKOFF_MIN;
    // The outage going on, if any, and whether it was logged.
    let mut down_since = Instant::now();
    let mut warned = false;
    let mut ever_up = false;
    // The `run_id` of the Redis server last synced with: another one was (re)started.
    let mut server: Option<String> = None;
    loop {
        if shared.local.strong_count() == 0 {
            tracing::debug!("redis link: the worker is gone, stopping");
            break;
        }
        let attempt = tokio::select! {
            biased;
            _ = shared.stop.cancelled() => break,
            attempt = establish(&shared, &client, &conn, &mut server) => attempt,
        };
        match attempt {
            Ok(link) => {
                backoff = BACKOFF_MIN;
                shared.set_connected(true);
                let dropped = shared.pending().end_outage();
                if warned || ever_up {
                    tracing::info!(
                        down_for = ?down_since.elapsed(),
                        dropped_writes = dropped,
                        "redis reachable again; this worker's runs and cancels are written back"
                    );
                } else {
                    tracing::info!(worker = %shared.settings.worker, "connected to redis");
                }
                ever_up = true;
                let end = serve(&shared, &conn, link).await;
                shared.set_connected(false);
                match end {
                    End::Stopped => break,
                    End::Lost(why) => {
                        down_since = Instant::now();
                        warned = true;
                        tracing::warn!(
                            reason = %why,
                            "redis connection lost: local work goes on, writes wait (bounded), \
                             reconnecting with backoff"
                        );
                    }
                }
            }
            Err(e) if !warned => {
                warned = true;
                tracing::warn!(
                    error = %e,
                    "redis unavailable: local work goes on, writes wait (bounded), retrying with \
                     backoff"
                );
            }
            Err(e) => tracing::debug!(error = %e, ?backoff, "redis still unavailable"),
        }
        tokio::select! {
            biased;
            _ = shared.stop.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    shared.set_connected(false);
}

/// An established pub/sub connection (the sink must live as long as the stream).
struct Link {
    sink: PubSubSink,
    stream: PubSubStream,
}

/// Why [`serve`] returned.
enum End {
    Stopped,
    Lost(String),
}

/// Why an establishment failed.
#[derive(Debug, thiserror::Error)]
enum Failed {
    #[error("{0}")]
    Redis(#[from] RedisError),
    #[error("{0} took longer than {1:?}")]
    Slow(&'static str, Duration),
}

async fn bounded<T>(
    what: &'static str,
    limit: Duration,
    work: impl Future<Output = RedisResult<T>>,
) -> Result<T, Failed> {
    match tokio::time::timeout(limit, work).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(Failed::Slow(what, limit)),
    }
}

/// Subscribes, then brings Redis and this worker up to date with each other.
async fn establish(
    shared: &Shared,
    client: &Client,
    conn: &ConnectionManager,
    server: &mut Option<String>,
) -> Result<Link, Failed> {
    let limit = shared.settings.lookup_timeout;
    let (mut sink, stream) = bounded("connecting", limit, client.get_async_pubsub())
        .await?
        .split();
    let channels = [
        keys::CHANNEL_CANCEL,
        keys::CHANNEL_CANCELLED,
        keys::CHANNEL_TOMBSTONE,
    ];
    bounded("subscribing", limit, sink.subscribe(&channels)).await?;
    // Subscribed first: whatever is published from here on reaches the stream, so the keys read
    // below cover everything before.
    let mut conn = conn.clone();
    let info = match bounded("INFO", limit, info_server(&mut conn)).await {
        Ok(info) => Ok(info),
        // The command connection may be the old one, dead, and reconnecting now: once more.
        Err(_) => bounded("INFO", limit, info_server(&mut conn)).await,
    };
    let server_now = match info {
        Ok(info) => server_run_id(&info).unwrap_or_else(|| UNKNOWN_SERVER.to_owned()),
        // Refused for good (an ACL without INFO): which server this is stays unknown, so
        // tombstones are written back only on the first connection.
        Err(Failed::Redis(e)) if matches!(e.retry_method(), RetryMethod::NoRetry) => {
            if server.is_none() {
                tracing::warn!(error = %e, "redis refuses INFO: a restarted server will not get this worker's tombstones back");
            }
            UNKNOWN_SERVER.to_owned()
        }
        Err(e) => return Err(e),
    };
    let new_server = server.as_deref() != Some(server_now.as_str());
    resync(shared, &mut conn, new_server).await?;
    *server = Some(server_now);
    Ok(Link { sink, stream })
}

async fn info_server(conn: &mut ConnectionManager) -> RedisResult<String> {
    redis::cmd("INFO").arg("server").query_async(conn).await
}

/// The server's `run_id` from `INFO server`: a new one each time a server starts.
fn server_run_id(info: &str) -> Option<String> {
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(|id| id.trim().to_owned())
}

/// Writes this worker's records again (and its tombstones to a new server), flushes the queued
/// writes, applies the markers of its live runs, and takes in the stored tombstones.
async fn resync(
    shared: &Shared,
    conn: &mut ConnectionManager,
    new_server: bool,
) -> Result<(), Failed> {
    let Some(local) = shared.local.upgrade() else {
        return Ok(());
    };
    let limit = shared.settings.lookup_timeout;
    let records = local.records();
    let mut ops: Vec<Op> = records.iter().cloned().map(Op::Record).collect();
    if new_server {
        let now = record::unix_now();
        ops.extend(
            local
                .tombstones()
                .into_iter()
                .filter(|t| t.expires_at > now)
                .map(Op::Tombstone),
        );
    }
    for chunk in ops.chunks(BATCH) {
        send(shared, conn, chunk.iter()).await?;
    }
    flush(shared, conn).await?;

    let live: Vec<&str> = records
        .iter()
        .filter(|r| r.state == RunState::Running && r.worker == shared.settings.worker)
        .map(|r| r.run_id.as_str())
        .collect();
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
                Ok(marker) => apply_cancel(shared, &*local, run_id, marker.reason),
                Err(e) => {
                    tracing::warn!(run_id, error = %e, "redis: unreadable cancel marker skipped")
                }
            }
        }
    }

    let mut cursor: u64 = 0;
    loop {
        let (next, found): (u64, Vec<String>) = bounded(
            "scanning tombstones",
            limit,
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(keys::TOMBSTONE_PATTERN)
                .arg("COUNT")
                .arg(BATCH)
                .query_async(conn),
        )
        .await?;
        if !found.is_empty() {
            let values: Vec<Option<Vec<u8>>> = bounded(
                "reading tombstones",
                limit,
                redis::cmd("MGET").arg(&found).query_async(conn),
            )
            .await?;
            for (key, value) in found.iter().zip(values) {
                let Some(bytes) = value else { continue };
                take_tombstone(&*local, &bytes, key);
            }
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok(())
}

/// Calls the worker back with a cancel, and acks it if the worker holds the run cancelled.
fn apply_cancel(shared: &Shared, local: &dyn LocalRuns, run_id: &str, reason: Option<String>) {
    if local.apply_cancel(run_id, reason) {
        shared.push(Op::Ack(run_id.to_owned()));
    }
}

/// Hands a tombstone read from Redis (pub/sub or a key) to the worker, unless it is unreadable
/// or expired.
fn take_tombstone(local: &dyn LocalRuns, bytes: &[u8], from: &str) {
    match serde_json::from_slice::<Tombstone>(bytes) {
        Ok(tombstone) if tombstone.expires_at > record::unix_now() => {
            local.add_tombstone(tombstone)
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(from, error = %e, "redis: unreadable tombstone skipped"),
    }
}

/// Serves an established link until it drops or the cluster stops: messages in, queued writes
/// out, a `PING` now and then.
async fn serve(shared: &Shared, conn: &ConnectionManager, mut link: Link) -> End {
    let mut conn = conn.clone();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.tick().await;
    // redis-rs buffers the messages of a subscription without a bound; this loop takes each
    // at once and does only local, non-blocking work with it (a flush between messages is
    // bounded by `lookup_timeout` per batch), so the buffer stays short.
    loop {
        if let Err(e) = flush(shared, &mut conn).await {
            return End::Lost(format!("writing: {e}"));
        }
        tokio::select! {
            biased;
            _ = shared.stop.cancelled() => {
                // Best effort: what was queued just before the stop (final records) goes out.
                if let Err(e) = flush(shared, &mut conn).await {
                    tracing::debug!(error = %e, "redis: the last writes were not sent");
                }
                return End::Stopped;
            }
            message = link.stream.next() => match message {
                Some(message) => handle(shared, &message),
                None => return End::Lost("the subscription closed".into()),
            },
            _ = shared.wake.notified() => {}
            _ = ping.tick() => {
                if shared.local.strong_count() == 0 {
                    tracing::debug!("redis link: the worker is gone, stopping");
                    return End::Stopped;
                }
                let limit = shared.settings.lookup_timeout;
                if let Err(e) = bounded("PING", limit, link.sink.ping::<Value>()).await {
                    return End::Lost(format!("pub/sub: {e}"));
                }
            }
        }
    }
}

/// One message from a channel.
fn handle(shared: &Shared, message: &Msg) {
    let channel = message.get_channel_name();
    let payload = message.get_payload_bytes();
    match channel {
        keys::CHANNEL_CANCEL => match serde_json::from_slice::<CancelMessage>(payload) {
            Ok(cancel) => {
                // Another worker's run is not live here: the worker says no, nothing happens.
                if let Some(local) = shared.local.upgrade() {
                    apply_cancel(shared, &*local, &cancel.run_id, cancel.reason);
                }
            }
            Err(e) => tracing::debug!(channel, error = %e, "redis: unreadable cancel ignored"),
        },
        keys::CHANNEL_CANCELLED => match serde_json::from_slice::<AckMessage>(payload) {
            Ok(ack) => shared.waiters().fire(&ack.run_id),
            Err(e) => tracing::debug!(channel, error = %e, "redis: unreadable ack ignored"),
        },
        keys::CHANNEL_TOMBSTONE => {
            if let Some(local) = shared.local.upgrade() {
                take_tombstone(&*local, payload, channel);
            }
        }
        _ => {}
    }
}

/// Writes everything queued, a pipeline at a time; on a connection error puts the batch back
/// and says so (the link is then re-established).
async fn flush(shared: &Shared, conn: &mut ConnectionManager) -> Result<(), Failed> {
    loop {
        let batch = shared.pending().take(BATCH);
        if batch.is_empty() {
            return Ok(());
        }
        if let Err(e) = write(shared, conn, &batch).await {
            let dropped = shared.pending().put_back(batch);
            shared.note_dropped(dropped);
            return Err(e);
        }
        let claimed = shared.pending().finish();
        if !claimed.is_empty() {
            // Claimed here while being written: no other worker may claim them now.
            let doomed: Vec<String> = claimed.iter().map(|id| keys::tombstone(id)).collect();
            let limit = shared.settings.lookup_timeout;
            if let Err(e) = bounded(
                "DEL",
                limit,
                redis::cmd("DEL").arg(&doomed).query_async::<()>(conn),
            )
            .await
            {
                tracing::warn!(error = %e, ids = ?claimed, "redis: a tombstone claimed here could not be deleted");
            }
        }
    }
}

/// Sends one batch of queued writes, less those that expired meanwhile.
async fn write(
    shared: &Shared,
    conn: &mut ConnectionManager,
    batch: &[Taken],
) -> Result<(), Failed> {
    let fresh = batch.iter().filter(|taken| {
        let stale = stale(shared, taken);
        if stale {
            tracing::debug!(
                kind = taken.op.kind(),
                "redis: a queued write expired before it could be sent"
            );
        }
        !stale
    });
    send(shared, conn, fresh.map(|taken| &taken.op)).await
}

/// Sends writes in one pipeline. A command Redis refuses for good (bad data under a key, say)
/// costs only its own write, logged; a connection error, or a refusal worth retrying (loading,
/// read-only, ...), fails the batch.
async fn send<'a>(
    shared: &Shared,
    conn: &mut ConnectionManager,
    ops: impl Iterator<Item = &'a Op>,
) -> Result<(), Failed> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let spans: Vec<(&'static str, usize)> = ops
        .map(|op| (op.kind(), add_commands(&mut pipe, shared, op)))
        .collect();
    if spans.is_empty() {
        return Ok(());
    }
    let limit = shared.settings.lookup_timeout;
    let results: Vec<RedisResult<Value>> =
        bounded("writing", limit, pipe.query_async(conn)).await?;
    let mut results = results.into_iter();
    for (kind, count) in spans {
        for result in results.by_ref().take(count) {
            if let Err(e) = result {
                if !matches!(e.retry_method(), RetryMethod::NoRetry) {
                    return Err(e.into());
                }
                tracing::warn!(kind, error = %e, "redis refused a write; it is dropped");
            }
        }
    }
    Ok(())
}

/// Whether a queued write no longer means anything: a cancel older than its marker would live,
/// an ack nobody waits for any more, an expired tombstone.
fn stale(shared: &Shared, taken: &Taken) -> bool {
    let age = taken.queued_at.elapsed();
    match &taken.op {
        Op::Cancel { .. } => age > keys::marker_ttl(&shared.settings),
        Op::Ack(_) => age > shared.settings.ack_timeout,
        Op::Tombstone(tombstone) => tombstone.expires_at <= record::unix_now(),
        Op::Record(_) | Op::Prune { .. } => false,
    }
}

/// Adds the commands of one write to `pipe`; returns how many.
fn add_commands(pipe: &mut Pipeline, shared: &Shared, op: &Op) -> usize {
    let settings = &shared.settings;
    match op {
        Op::Record(record) => {
            let ttl = keys::millis(keys::record_ttl(settings, record));
            pipe.cmd("SET")
                .arg(keys::run(&record.run_id))
                .arg(keys::json(record))
                .arg("PX")
                .arg(ttl);
            let now = keys::now_ms();
            for set in keys::rid_sets_of(record) {
                // The entry lives as long as its record; expired entries go with every write.
                pipe.cmd("ZADD")
                    .arg(&set)
                    .arg(now.saturating_add(ttl))
                    .arg(&record.run_id);
                pipe.cmd("ZREMRANGEBYSCORE").arg(&set).arg("-inf").arg(now);
                pipe.cmd("PEXPIRE")
                    .arg(&set)
                    .arg(keys::millis(keys::index_ttl(settings)));
            }
            7
        }
        Op::Tombstone(tombstone) => {
            let left = (tombstone.expires_at - record::unix_now()).max(0.001);
            let text = keys::json(tombstone);
            pipe.cmd("SET")
                .arg(keys::tombstone(&tombstone.id))
                .arg(&text)
                .arg("PX")
                .arg(keys::millis(Duration::from_secs_f64(left.min(1e9))));
            pipe.cmd("PUBLISH").arg(keys::CHANNEL_TOMBSTONE).arg(&text);
            2
        }
        Op::Cancel { run_id, reason } => {
            add_cancel(pipe, shared, run_id, reason.as_deref());
            2
        }
        Op::Ack(run_id) => {
            pipe.cmd("PUBLISH")
                .arg(keys::CHANNEL_CANCELLED)
                .arg(keys::json(&AckMessage {
                    run_id: run_id.clone(),
                }));
            1
        }
        Op::Prune { set, run_id } => {
            pipe.cmd("ZREM").arg(set).arg(run_id);
            1
        }
    }
}

/// The marker, then the message (a worker that misses the message finds the marker).
fn add_cancel(pipe: &mut Pipeline, shared: &Shared, run_id: &str, reason: Option<&str>) {
    let reason = reason.map(str::to_owned);
    pipe.cmd("SET")
        .arg(keys::cancel(run_id))
        .arg(keys::json(&Marker {
            reason: reason.clone(),
        }))
        .arg("PX")
        .arg(keys::millis(keys::marker_ttl(&shared.settings)));
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
    add_cancel(&mut pipe, shared, run_id, reason);
    pipe.query_async(conn).await
}

/// The records a selector names: the run id's record, and those in the bare-id indexes
/// (every user's for an admin, `owner`'s own otherwise), at most [`keys::MAX_FIND`] per index.
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
                    shared.push(Op::Prune {
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
                    tracing::warn!(run_id, error = %e, "redis: unreadable run record skipped")
                }
            }
        }
    }
    Ok(found)
}
