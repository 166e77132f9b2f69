//! What a run is: its ids, its key, its state, and the record every worker can read.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use cancelkit::protocol::jsonrpc::RequestId;
use serde::{Deserialize, Serialize};

/// The prefix of every run id.
pub const RUN_ID_PREFIX: &str = "run-";

/// A gateway-wide unique run id: `run-` and 32 hex digits.
pub fn new_run_id() -> Arc<str> {
    Arc::from(format!("{RUN_ID_PREFIX}{}", uuid::Uuid::new_v4().simple()))
}

/// Whether `text` has the shape of a run id.
pub fn is_run_id(text: &str) -> bool {
    text.strip_prefix(RUN_ID_PREFIX)
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What makes a run unique for the client that started it: who, on which session or
/// connection, with which JSON-RPC id (typed: `1` and `"1"` differ).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunKey {
    /// The token's subject.
    pub user: Arc<str>,
    /// The MCP session id, or a name for the connection or endpoint.
    pub channel: Arc<str>,
    /// The JSON-RPC id the client gave its `tools/call`.
    pub id: RequestId,
}

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// Its tool is running.
    Running,
    /// It returned a result.
    Completed,
    /// It ended with an error (upstream error, upstream gone).
    Failed,
    /// It was cancelled.
    Cancelled,
    /// It was running on a worker that stopped answering (its heartbeat in Redis lapsed, or
    /// it restarted since): how it ends is unknown. Never stored: a status read gives it to a
    /// running record whose worker is gone.
    Lost,
}

impl RunState {
    /// The name used in the status body and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
            RunState::Lost => "lost",
        }
    }
}

/// Who or what cancelled a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CancelSource {
    /// The client that started it (`notifications/cancelled`, or a closed 2026-07-28 stream).
    Client,
    /// The cancellation API (on this worker or another).
    Api,
    /// The configured tool timeout.
    Timeout,
    /// The caller went away before its answer (`/rpc`, a deleted session).
    Disconnect,
    /// The gateway is shutting down and the drain grace ran out.
    Shutdown,
}

impl CancelSource {
    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelSource::Client => "client",
            CancelSource::Api => "api",
            CancelSource::Timeout => "timeout",
            CancelSource::Disconnect => "disconnect",
            CancelSource::Shutdown => "shutdown",
        }
    }
}

/// A run as every worker sees it: kept in memory by its worker and, with Redis, stored there.
/// The owner is kept for authorization and never shown in a status body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The gateway-wide unique run id.
    pub run_id: String,
    /// The worker that runs it.
    pub worker: String,
    /// The subject of the token that started it.
    pub owner: String,
    /// The client's JSON-RPC id, typed.
    pub request_id: RequestId,
    /// The exposed tool name.
    pub name: Option<String>,
    /// When it was registered, seconds since the Unix epoch.
    pub registered_at: f64,
    /// Where it is in its life.
    pub state: RunState,
    /// When it was cancelled, seconds since the Unix epoch.
    pub cancelled_at: Option<f64>,
    /// The reason given with the cancel.
    pub cancel_reason: Option<String>,
    /// Who cancelled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_source: Option<CancelSource>,
    /// When the cancel that stopped it was made, if it was a queued one: a cancel that found
    /// no run (answered `queued`) and applied when this run registered. Seconds since the
    /// Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_queued_at: Option<f64>,
}

impl RunRecord {
    /// Whether the API's `requestId` names this run: its run id, or its JSON-RPC id — a string
    /// id equal to `selector`, or an integer id that `selector` spells as JSON does (`1`, never
    /// `01` or `+1`).
    /// A selector shaped like a run id names that run only, never a client's string id equal
    /// to it (a client cannot make a run id name its own call).
    pub fn matches(&self, selector: &str) -> bool {
        if is_run_id(selector) {
            return self.run_id == selector;
        }
        selector_of(&self.request_id) == selector
    }

    /// The status body of `GET /cancellation/status/{id}`: the seed's fields, plus `state`,
    /// `cancel_source` and `run_id` (and `state_reason` for a `lost` run: which worker stopped
    /// answering; `cancel_queued_at` for a run a queued cancel stopped); never the owner. `name`, `cancelled_at` and `cancel_reason` are written even
    /// when null (the schema's `RunStatus` allows leaving them out, as ContextForge does before
    /// a cancel; clients find them more easily this way).
    pub fn status_body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({
            "name": self.name,
            "registered_at": self.registered_at,
            "cancelled": self.cancelled_at.is_some(),
            "cancelled_at": self.cancelled_at,
            "cancel_reason": self.cancel_reason,
            "cancel_source": self.cancel_source.map(CancelSource::as_str),
            "state": self.state.as_str(),
            "run_id": self.run_id,
        });
        if let Some(queued_at) = self.cancel_queued_at {
            body["cancel_queued_at"] = serde_json::json!(queued_at);
        }
        if self.state == RunState::Lost {
            body["state_reason"] = serde_json::Value::String(format!(
                "worker {} stopped answering: how the run ends is unknown",
                self.worker
            ));
        }
        body
    }
}

/// A cancel that found no run: it cancels the first run that registers and matches, until it
/// expires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tombstone {
    /// Its own id (claimed once, gateway-wide).
    pub id: String,
    /// The API's `requestId`: a run id or a bare JSON-RPC id.
    pub selector: String,
    /// Whose runs it may cancel: one user, or `None` for anyone's (an admin's cancel).
    pub scope: Option<String>,
    /// The reason given with the cancel.
    pub reason: Option<String>,
    /// When the cancel was made, seconds since the Unix epoch (a run it stops says so in its
    /// status: `cancel_queued_at`).
    #[serde(default)]
    pub made_at: f64,
    /// When it expires, seconds since the Unix epoch.
    pub expires_at: f64,
}

impl Tombstone {
    /// Whether it applies to `record` (not checking expiry).
    pub fn applies_to(&self, record: &RunRecord) -> bool {
        record.matches(&self.selector) && self.scope.as_deref().is_none_or(|u| u == record.owner)
    }
}

/// Seconds since the Unix epoch, as the status body writes them.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The selector that names a request id: a string as it is, a number in decimal.
pub fn selector_of(id: &RequestId) -> String {
    match id {
        RequestId::String(s) => s.clone(),
        RequestId::Number(n) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: RequestId) -> RunRecord {
        RunRecord {
            run_id: new_run_id().to_string(),
            worker: "w".into(),
            owner: "alice".into(),
            request_id: id,
            name: Some("demo-sleep".into()),
            registered_at: unix_now(),
            state: RunState::Running,
            cancelled_at: None,
            cancel_reason: None,
            cancel_source: None,
            cancel_queued_at: None,
        }
    }

    #[test]
    fn selectors_match_run_ids_and_typed_request_ids() {
        let number = record(RequestId::Number(1));
        let string = record(RequestId::String("1".into()));
        assert!(number.matches("1") && string.matches("1"));
        assert!(!number.matches("01x") && !string.matches("01"));
        assert!(!number.matches("01") && !number.matches("+1") && !number.matches(" 1"));
        assert!(number.matches(&number.run_id) && !string.matches(&number.run_id));
        // A client's string id shaped like a run id is never named by it.
        let decoy = record(RequestId::String(number.run_id.clone()));
        assert!(!decoy.matches(&number.run_id));
        assert!(is_run_id(&number.run_id) && !is_run_id("run-xyz") && !is_run_id("1"));
    }

    #[test]
    fn a_status_body_never_names_the_owner() {
        let body = record(RequestId::Number(1)).status_body().to_string();
        assert!(!body.contains("alice"), "{body}");
        assert!(body.contains("\"cancelled_at\":null"), "{body}");
    }

    #[test]
    fn the_record_round_trips_with_its_typed_id() {
        let r = record(RequestId::String("7".into()));
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"request_id\":\"7\""), "{text}");
        assert_eq!(serde_json::from_str::<RunRecord>(&text).unwrap(), r);
    }
}
