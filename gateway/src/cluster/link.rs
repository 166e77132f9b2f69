//! The link task: the pub/sub connection (re-established with backoff), the resync after every
//! (re)establishment, the queued writes, the heartbeat and the messages from other workers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use redis::aio::{ConnectionManager, PubSubSink, PubSubStream};
use redis::{Client, Msg, RedisError, RedisResult, RetryMethod, Value};

use super::keys::{self, AckMessage, CancelMessage, ClaimedMessage};
use super::pending::Op;
use super::resync::{self, Progress};
use super::shared::Shared;
use super::{LocalRuns, scripts, write};
use crate::runs::record::{self, Tombstone};

/// The first wait before reconnecting.
pub(super) const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest wait before reconnecting.
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How often the pub/sub connection is checked with a `PING` at most (a silent network loses
/// no packets to tell us it is gone); the heartbeat is written at the same tick.
const PING_EVERY: Duration = Duration::from_secs(5);
/// The server id when `INFO` gives none.
const UNKNOWN_SERVER: &str = "unknown";

/// Runs until stopped, or until the worker it serves is gone.
pub(super) async fn run(shared: Arc<Shared>, client: Client, conn: ConnectionManager) {
    let mut backoff = BACKOFF_MIN;
    // The outage going on, if any, and whether it was logged.
    let mut down_since = Instant::now();
    let mut warned = false;
    let mut ever_up = false;
    // The `run_id` of the Redis server last synced with: another one was (re)started.
    let mut server: Option<String> = None;
    let mut progress = Progress::default();
    loop {
        if shared.local.strong_count() == 0 {
            tracing::debug!("redis link: the worker is gone, stopping");
            break;
        }
        let written = progress.written();
        let attempt = tokio::select! {
            biased;
            () = shared.stop.cancelled() => break,
            attempt = establish(&shared, &client, &conn, &mut server, &mut progress) => attempt,
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
            Err(e) => {
                if progress.written() > written {
                    // The rewrite got further: go on at once.
                    backoff = BACKOFF_MIN;
                }
                if warned {
                    tracing::debug!(error = %e, ?backoff, "redis still unavailable");
                } else {
                    warned = true;
                    tracing::warn!(
                        error = %e,
                        "redis unavailable: local work goes on, writes wait (bounded), retrying \
                         with backoff"
                    );
                }
            }
        }
        tokio::select! {
            biased;
            () = shared.stop.cancelled() => break,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    shared.set_connected(false);
}

/// An established pub/sub connection (the sink must live as long as the stream).
pub(super) struct Link {
    sink: PubSubSink,
    stream: PubSubStream,
}

/// Why [`serve`] returned.
enum End {
    Stopped,
    Lost(String),
}

/// Why an establishment (or a write) failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum Failed {
    #[error("{0}")]
    Redis(#[from] RedisError),
    #[error("{0} took longer than {1:?}")]
    Slow(&'static str, Duration),
    #[error("the write script is not loaded on this connection")]
    NoScript,
}

/// `work` within `limit`.
pub(super) async fn bounded<T>(
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
    progress: &mut Progress,
) -> Result<Link, Failed> {
    let limit = shared.settings.lookup_timeout;
    let (mut sink, stream) = bounded("connecting", limit, client.get_async_pubsub())
        .await?
        .split();
    let channels = [
        keys::CHANNEL_CANCEL,
        keys::CHANNEL_CANCELLED,
        keys::CHANNEL_TOMBSTONE,
        keys::CHANNEL_CLAIMED,
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
    let sha = bounded("loading the write script", limit, scripts::load(&mut conn)).await?;
    shared.set_put_sha(Some(sha));
    let new_server = server.as_deref() != Some(server_now.as_str());
    resync::resync(shared, &mut conn, new_server, &server_now, progress).await?;
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

/// Hands a tombstone read from Redis (pub/sub or a key) to the worker, unless it is unreadable
/// or expired.
pub(super) fn take_tombstone(local: &dyn LocalRuns, bytes: &[u8], from: &str) {
    match serde_json::from_slice::<Tombstone>(bytes) {
        Ok(tombstone) if tombstone.expires_at > record::unix_now() => {
            local.add_tombstone(tombstone);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(from, error = %e, "redis: unreadable tombstone skipped"),
    }
}

/// Serves an established link until it drops or the cluster stops; messages that arrived
/// before it dropped are still handled.
async fn serve(shared: &Shared, conn: &ConnectionManager, mut link: Link) -> End {
    let end = serve_until_lost(shared, conn, &mut link).await;
    if matches!(end, End::Lost(_)) {
        // A cancel that reached this worker just before the link broke (say, while it was
        // frozen) must not be lost with the link.
        while let Some(Some(message)) = link.stream.next().now_or_never() {
            handle(shared, &message);
        }
    }
    end
}

/// Messages in, queued writes out, the heartbeat and a `PING` now and then, running records'
/// leases renewed.
async fn serve_until_lost(shared: &Shared, conn: &ConnectionManager, link: &mut Link) -> End {
    let mut conn = conn.clone();
    let every = PING_EVERY.min(shared.settings.heartbeat_ttl / 3);
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let renew_every = keys::lease(&shared.settings) / 3;
    let mut renewed = Instant::now();
    // redis-rs buffers the messages of a subscription without a bound; this loop takes each
    // at once and does only local, non-blocking work with it (a flush between messages is
    // bounded by `lookup_timeout` per batch), so the buffer stays short.
    loop {
        if let Err(e) = write::flush(shared, &mut conn).await {
            return End::Lost(format!("writing: {e}"));
        }
        tokio::select! {
            biased;
            () = shared.stop.cancelled() => {
                // Best effort: what was queued just before the stop (final records) goes out,
                // and the heartbeat goes (this worker's running records read `lost` at once).
                if let Err(e) = write::flush(shared, &mut conn).await {
                    tracing::debug!(error = %e, "redis: the last writes were not sent");
                }
                if let Err(e) = write::farewell(shared, &mut conn).await {
                    tracing::debug!(error = %e, "redis: the heartbeat was not deleted");
                }
                return End::Stopped;
            }
            message = link.stream.next() => match message {
                Some(message) => handle(shared, &message),
                None => return End::Lost("the subscription closed".into()),
            },
            () = shared.wake.notified() => {}
            _ = tick.tick() => {
                if shared.local.strong_count() == 0 {
                    tracing::debug!("redis link: the worker is gone, stopping");
                    return End::Stopped;
                }
                let limit = shared.settings.lookup_timeout;
                if let Err(e) = bounded("PING", limit, link.sink.ping::<Value>()).await {
                    return End::Lost(format!("pub/sub: {e}"));
                }
                if let Err(e) = write::heartbeat(shared, &mut conn).await {
                    return End::Lost(format!("heartbeat: {e}"));
                }
                if renewed.elapsed() >= renew_every {
                    if let Err(e) = write::renew(shared, &mut conn).await {
                        return End::Lost(format!("renewing leases: {e}"));
                    }
                    renewed = Instant::now();
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
                if let Some(local) = shared.local.upgrade()
                    && local.apply_cancel(&cancel.run_id, cancel.reason)
                {
                    let _ = shared.push(Op::Ack(cancel.run_id));
                }
            }
            Err(e) => tracing::debug!(channel, error = %e, "redis: unreadable cancel ignored"),
        },
        keys::CHANNEL_CANCELLED => match serde_json::from_slice::<AckMessage>(payload) {
            Ok(ack) => {
                shared.memory().acked(&ack.run_id);
                shared.waiters().fire(&ack.run_id);
            }
            Err(e) => tracing::debug!(channel, error = %e, "redis: unreadable ack ignored"),
        },
        keys::CHANNEL_TOMBSTONE => {
            if let Some(local) = shared.local.upgrade() {
                take_tombstone(&*local, payload, channel);
            }
        }
        keys::CHANNEL_CLAIMED => match serde_json::from_slice::<ClaimedMessage>(payload) {
            Ok(claimed) => {
                shared.memory().claimed(&claimed.id);
                if let Some(local) = shared.local.upgrade() {
                    local.forget_tombstone(&claimed.id);
                }
            }
            Err(e) => tracing::debug!(channel, error = %e, "redis: unreadable claim ignored"),
        },
        _ => {}
    }
}
