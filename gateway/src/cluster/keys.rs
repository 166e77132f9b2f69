//! Key names, channel names, TTLs and the JSON payloads the cluster writes: one place, so the
//! layout documented in [`super`] is the layout written.

use std::time::Duration;

use cancelkit::protocol::jsonrpc::RequestId;
use serde::{Deserialize, Serialize};

use super::Settings;
use crate::runs::record::{RunRecord, RunState};

/// ContextForge's channel: `{"run_id", "reason"}`.
pub(super) const CHANNEL_CANCEL: &str = "cancellation:cancel";
/// The owner's ack: `{"run_id"}`.
pub(super) const CHANNEL_CANCELLED: &str = "cancelkit:cancelled";
/// A new tombstone, as JSON.
pub(super) const CHANNEL_TOMBSTONE: &str = "cancelkit:tombstone";
/// A tombstone was claimed: `{"id"}` (every worker drops its copy).
pub(super) const CHANNEL_CLAIMED: &str = "cancelkit:claimed";

/// Every key starts with this.
pub(super) const PREFIX: &str = "cancelkit:";
/// The index of the tombstones: a sorted set of their ids scored by when each expires (ms since
/// the epoch), living as long as its longest-lived tombstone.
pub(super) const TOMBSTONES: &str = "cancelkit:tombstones";

/// `cancelkit:run:<run_id>`.
pub(super) fn run(run_id: &str) -> String {
    format!("{PREFIX}run:{run_id}")
}

/// Most run ids read from one bare-id index: a bare id that names more live or retained runs
/// than this is ambiguous whichever of them the caller may see... unless it is read from the
/// caller's own index, which holds only their runs (see [`selector_sets`]).
pub(super) const MAX_FIND: usize = 1_000;

/// `cancelkit:rid:s:<id>`: the runs whose JSON-RPC id is the string `id`, every user's. A
/// sorted set scored by when each entry's record expires (ms since the epoch): every write
/// drops the expired entries, so it never holds more than the records it can name.
pub(super) fn rid_string(id: &str) -> String {
    format!("{PREFIX}rid:s:{id}")
}

/// `cancelkit:rid:n:<n>`: the runs whose JSON-RPC id is the integer `n`, every user's.
pub(super) fn rid_number(n: i64) -> String {
    format!("{PREFIX}rid:n:{n}")
}

/// `cancelkit:urid:<owner in hex>:s:<id>` and `...:n:<n>`: the same, one user's runs only.
fn rid_owner(owner: &str, kind: char, id: &str) -> String {
    let hex: String = owner.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}urid:{hex}:{kind}:{id}")
}

/// The bare-id indexes a record belongs to: every user's, and its owner's.
pub(super) fn rid_sets_of(record: &RunRecord) -> [String; 2] {
    match &record.request_id {
        RequestId::String(s) => [rid_string(s), rid_owner(&record.owner, 's', s)],
        RequestId::Number(n) => [
            rid_number(*n),
            rid_owner(&record.owner, 'n', &n.to_string()),
        ],
    }
}

/// The indexes a selector is looked up in: every user's (`owner` None: an admin), or one
/// user's own (so a user's lookup is exact however many runs others have under that id). A
/// string id equal to the selector, and the integer it spells in JSON's own form.
pub(super) fn selector_sets(selector: &str, owner: Option<&str>) -> Vec<String> {
    let number = selector
        .parse::<i64>()
        .ok()
        .filter(|n| n.to_string() == selector);
    let mut sets = Vec::with_capacity(2);
    match owner {
        None => {
            sets.push(rid_string(selector));
            if let Some(n) = number {
                sets.push(rid_number(n));
            }
        }
        Some(owner) => {
            sets.push(rid_owner(owner, 's', selector));
            if let Some(n) = number {
                sets.push(rid_owner(owner, 'n', &n.to_string()));
            }
        }
    }
    sets
}

/// Milliseconds since the Unix epoch (the scores of the index sets).
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `cancelkit:cancel:<run_id>`.
pub(super) fn cancel(run_id: &str) -> String {
    format!("{PREFIX}cancel:{run_id}")
}

/// `cancelkit:tombstone:<id>`.
pub(super) fn tombstone(id: &str) -> String {
    format!("{PREFIX}tombstone:{id}")
}

/// `cancelkit:claimed:<id>`: who claimed tombstone `id` (`<worker>/<run id>`), so a claim
/// retried after its answer was lost recognises itself.
pub(super) fn claimed(id: &str) -> String {
    format!("{PREFIX}claimed:{id}")
}

/// `cancelkit:worker:<worker id>`: the worker's heartbeat ([`Heartbeat`]), gone when the
/// worker stops refreshing it.
pub(super) fn worker(id: &str) -> String {
    format!("{PREFIX}worker:{id}")
}

/// How long a record lives: while running, a lease of the heartbeat ttl plus the retention,
/// renewed by its worker's link (so a run whose worker died reads `lost` for about the
/// retention, then goes); once finished, the retention.
pub(super) fn record_ttl(settings: &Settings, record: &RunRecord) -> Duration {
    match record.state {
        RunState::Running | RunState::Lost => lease(settings),
        _ => settings.retention,
    }
}

/// The lease of a running run's record: renewed every third of it.
pub(super) fn lease(settings: &Settings) -> Duration {
    settings.heartbeat_ttl.saturating_add(settings.retention)
}

/// How long a claim key lives: long enough for a claim retried after an outage to find it.
pub(super) fn claim_ttl(settings: &Settings) -> Duration {
    settings
        .tombstone_ttl
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(600))
}

/// How long a cancel marker waits for its run's worker.
pub(super) fn marker_ttl(settings: &Settings) -> Duration {
    settings.tombstone_ttl
}

/// A TTL in whole milliseconds for `PX`/`PEXPIRE`: at least 1 (Redis refuses 0).
pub(super) fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The payload on [`CHANNEL_CANCEL`], exactly ContextForge's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct CancelMessage {
    /// The run to cancel (our run id).
    pub run_id: String,
    /// The reason given with the cancel.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The payload on [`CHANNEL_CANCELLED`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct AckMessage {
    /// The run its worker stopped.
    pub run_id: String,
}

/// The value of a cancel marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Marker {
    /// The reason given with the cancel.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The payload on [`CHANNEL_CLAIMED`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ClaimedMessage {
    /// The tombstone's id.
    pub id: String,
}

/// The value of a worker's heartbeat key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Heartbeat {
    /// When the worker's process started, seconds since the Unix epoch (a run registered before
    /// this was its predecessor's under the same worker id).
    pub started_at: f64,
}

/// JSON of a payload of strings and numbers: cannot fail.
pub(super) fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| String::from("{}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cancel_payload_is_contextforges_shape() {
        let text = json(&CancelMessage {
            run_id: "run-1".into(),
            reason: None,
        });
        assert_eq!(text, r#"{"run_id":"run-1","reason":null}"#);
        let parsed: CancelMessage = serde_json::from_str(r#"{"run_id":"7"}"#).unwrap();
        assert_eq!(parsed.reason, None);
    }

    #[test]
    fn typed_ids_have_their_own_index_sets_for_everyone_and_for_their_owner() {
        let record = |id: RequestId, owner: &str| RunRecord {
            run_id: "run-1".into(),
            worker: "w".into(),
            owner: owner.into(),
            request_id: id,
            name: None,
            registered_at: 0.0,
            state: RunState::Running,
            cancelled_at: None,
            cancel_reason: None,
            cancel_source: None,
            cancel_queued_at: None,
        };
        assert_eq!(
            rid_sets_of(&record(RequestId::Number(1), "al:ice")),
            ["cancelkit:rid:n:1", "cancelkit:urid:616c3a696365:n:1"]
        );
        assert_eq!(
            rid_sets_of(&record(RequestId::String("1".into()), "al:ice")),
            ["cancelkit:rid:s:1", "cancelkit:urid:616c3a696365:s:1"]
        );
        assert_eq!(
            selector_sets("1", None),
            ["cancelkit:rid:s:1", "cancelkit:rid:n:1"]
        );
        assert_eq!(
            selector_sets("01", Some("al:ice")),
            ["cancelkit:urid:616c3a696365:s:01"]
        );
        assert_eq!(millis(Duration::ZERO), 1);
    }
}
