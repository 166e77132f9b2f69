//! The runtime side: fan a cancellation out to every tool server, and keep the conversation
//! consistent when results and cancellations cross.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit_protocol::rap::ToolCancellation;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::shown;
use crate::sync::lock;

/// One tool server the runtime uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolServerTarget {
    /// The server's base URL (the one its `/.well-known/rap-toolset` hangs off).
    pub base_url: String,
    /// The bearer token the server expects, if any (the same as for invocations).
    pub bearer_token: Option<String>,
}

impl ToolServerTarget {
    /// A server at `base_url` without authentication.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            bearer_token: None,
        }
    }

    /// The same server, authenticated with `token`.
    pub fn with_bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }
}

/// The fate of one notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The server's base URL.
    pub server: String,
    /// The HTTP status it answered with, or why there was no answer.
    pub outcome: Result<u16, String>,
}

/// Sends `POST /cancel_tool_call` to every configured tool server.
///
/// [`notify`](Self::notify) returns at once: each server gets its own task, all start
/// together, each request has its own timeout, nothing is retried, and a failing server only
/// costs a log line.
#[derive(Debug, Clone)]
pub struct Notifier {
    servers: Arc<[ToolServerTarget]>,
    http: reqwest::Client,
}

/// The notifications of one [`Notifier::notify`], in flight. Dropping it lets them finish on
/// their own; awaiting [`outcomes`](Self::outcomes) collects what happened.
#[derive(Debug)]
pub struct NotifyHandle {
    tasks: JoinSet<Delivery>,
}

impl NotifyHandle {
    /// Waits for every server's answer (or timeout) and returns them, in completion order.
    pub async fn outcomes(mut self) -> Vec<Delivery> {
        let mut deliveries = Vec::with_capacity(self.tasks.len());
        while let Some(delivery) = self.tasks.join_next().await {
            if let Ok(delivery) = delivery {
                deliveries.push(delivery);
            }
        }
        deliveries
    }
}

impl Drop for NotifyHandle {
    fn drop(&mut self) {
        // Let in-flight notifications finish instead of aborting them with the set.
        self.tasks.detach_all();
    }
}

impl Notifier {
    /// A notifier for `servers`; each notification may take at most `timeout`. `https://`
    /// servers are trusted through the platform's roots (and `SSL_CERT_FILE`).
    pub fn new(servers: impl IntoIterator<Item = ToolServerTarget>, timeout: Duration) -> Self {
        Self::trusting(servers, timeout, Vec::new())
    }

    /// [`new`](Self::new), also trusting the certificates of the PEM CA file `ca_file`.
    ///
    /// # Errors
    ///
    /// The file cannot be read or holds no certificate.
    pub fn with_ca_file(
        servers: impl IntoIterator<Item = ToolServerTarget>,
        timeout: Duration,
        ca_file: &std::path::Path,
    ) -> Result<Self, crate::tls::TlsError> {
        let trusted = crate::tls::ca_certificates(ca_file)?;
        Ok(Self::trusting(servers, timeout, trusted))
    }

    fn trusting(
        servers: impl IntoIterator<Item = ToolServerTarget>,
        timeout: Duration,
        trusted: Vec<reqwest::Certificate>,
    ) -> Self {
        let http = reqwest::Client::builder()
            .tls_certs_merge(trusted)
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .expect("a plain HTTP client builds");
        Self {
            servers: servers.into_iter().collect(),
            http,
        }
    }

    /// Tells every server to cancel `tool_call_id` of `thread_id`; returns without waiting.
    /// Must be called inside a tokio runtime.
    pub fn notify(&self, thread_id: &str, tool_call_id: &str) -> NotifyHandle {
        let body = ToolCancellation {
            thread_id: thread_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        };
        let mut tasks = JoinSet::new();
        for server in self.servers.iter() {
            let url = format!("{}/cancel_tool_call", server.base_url.trim_end_matches('/'));
            let mut request = self.http.post(url).json(&body);
            if let Some(token) = &server.bearer_token {
                request = request.bearer_auth(token);
            }
            let base_url = server.base_url.clone();
            tasks.spawn(async move {
                let outcome = match request.send().await {
                    Ok(response) => {
                        let status = response.status();
                        if !status.is_success() {
                            tracing::warn!(server = ?shown(&base_url), status = status.as_u16(), "a tool server refused a cancellation");
                        }
                        Ok(status.as_u16())
                    }
                    Err(e) => {
                        let error = cancelkit_wire::chain(&e).to_string();
                        tracing::warn!(server = ?shown(&base_url), error = ?shown(&error), "cannot notify a tool server of a cancellation (not retried)");
                        Err(error)
                    }
                };
                Delivery {
                    server: base_url,
                    outcome,
                }
            });
        }
        NotifyHandle { tasks }
    }
}

/// How long [`CallTracker`] remembers a cancelled call by default (to recognise its late result).
pub const DEFAULT_INTERRUPTED_TTL: Duration = Duration::from_secs(300);

/// How many calls [`CallTracker`] tracks at most by default, running and cancelled together.
pub const DEFAULT_MAX_CALLS: usize = 10_000;

/// [`CallTracker::start`] refused a call: the tracker is full of running calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many tool calls in flight: {running} are running, the limit is {limit}")]
pub struct TrackerFull {
    /// How many calls are running.
    pub running: usize,
    /// The tracker's limit ([`CallTracker::max_calls`]).
    pub limit: usize,
}

type CallKey = (String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallState {
    Running,
    /// Cancelled; remembered until `expires` so its late result is recognised. `generation`
    /// tells this memory apart from a later one for the same ids in the expiry queue.
    Interrupted {
        generation: u64,
    },
}

#[derive(Debug, Default)]
struct Calls {
    states: HashMap<CallKey, CallState>,
    /// Cancelled calls in cancel order (so in expiry order): when each memory expires.
    interrupted: VecDeque<(Instant, u64, CallKey)>,
    next_generation: u64,
}

impl Calls {
    /// Forgets the oldest cancelled call if `expired_by` is past its expiry (or, with `None`,
    /// whatever its expiry); returns whether there was one to forget.
    fn forget_oldest(&mut self, expired_by: Option<Instant>) -> bool {
        while let Some(&(expires, generation, _)) = self.interrupted.front() {
            if expired_by.is_some_and(|now| expires > now) {
                return false;
            }
            let (_, _, key) = self.interrupted.pop_front().expect("just looked");
            if self.states.get(&key) == Some(&CallState::Interrupted { generation }) {
                self.states.remove(&key);
                return true;
            }
            // A stale queue entry: the ids were started again since; look at the next one.
        }
        false
    }

    fn forget_expired(&mut self, now: Instant) {
        while self.forget_oldest(Some(now)) {}
    }
}

/// Keeps a runtime's view of its tool calls consistent when a cancellation and a result cross:
/// a cancelled call gets a synthetic "interrupted" result at once, and a real result that
/// arrives afterwards is dropped.
///
/// Its memory is bounded. A call leaves as soon as its result is delivered; a cancelled call is
/// remembered for [`interrupted_ttl`](Self::interrupted_ttl) (default 5 minutes) so that its
/// late result is logged as such, then forgotten (a result for a forgotten call is still
/// dropped, as unknown). At most [`max_calls`](Self::max_calls) calls (default 10,000) are
/// tracked: at the limit, [`start`](Self::start) first forgets the oldest cancelled calls, and
/// if every tracked call is running it refuses the new one with [`TrackerFull`], which the
/// runtime should report as the tool call's failure instead of invoking the tool.
#[derive(Debug)]
pub struct CallTracker {
    calls: Mutex<Calls>,
    notifier: Option<Notifier>,
    interrupted_ttl: Duration,
    max_calls: usize,
}

impl Default for CallTracker {
    fn default() -> Self {
        Self::new(None)
    }
}

impl CallTracker {
    /// A tracker that also notifies the tool servers of each cancellation (with the default
    /// limits, [`DEFAULT_INTERRUPTED_TTL`] and [`DEFAULT_MAX_CALLS`]).
    pub fn new(notifier: Option<Notifier>) -> Self {
        Self {
            calls: Mutex::new(Calls::default()),
            notifier,
            interrupted_ttl: DEFAULT_INTERRUPTED_TTL,
            max_calls: DEFAULT_MAX_CALLS,
        }
    }

    /// The same tracker, remembering cancelled calls for `ttl` instead.
    pub fn interrupted_ttl(mut self, ttl: Duration) -> Self {
        self.interrupted_ttl = ttl;
        self
    }

    /// The same tracker, tracking at most `max_calls` calls (at least one).
    pub fn max_calls(mut self, max_calls: usize) -> Self {
        self.max_calls = max_calls.max(1);
        self
    }

    /// The notifier [`cancel`](Self::cancel) tells the tool servers through, if any.
    pub fn notifier(&self) -> Option<&Notifier> {
        self.notifier.as_ref()
    }

    /// How many calls are tracked: running ones and remembered cancelled ones.
    pub fn len(&self) -> usize {
        let mut calls = lock(&self.calls);
        calls.forget_expired(Instant::now());
        calls.states.len()
    }

    /// Whether no call is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records that `tool_call_id` of `thread_id` is being invoked; call it before invoking the
    /// tool. Refused with [`TrackerFull`] when [`max_calls`](Self::max_calls) calls are running.
    pub fn start(&self, thread_id: &str, tool_call_id: &str) -> Result<(), TrackerFull> {
        let key = (thread_id.to_owned(), tool_call_id.to_owned());
        let mut calls = lock(&self.calls);
        calls.forget_expired(Instant::now());
        if !calls.states.contains_key(&key) {
            while calls.states.len() >= self.max_calls {
                if !calls.forget_oldest(None) {
                    tracing::warn!(thread_id = ?shown(thread_id), tool_call_id = ?shown(tool_call_id), limit = self.max_calls, "refused a tool call: too many in flight");
                    return Err(TrackerFull {
                        running: calls.states.len(),
                        limit: self.max_calls,
                    });
                }
            }
        }
        calls.states.insert(key, CallState::Running);
        Ok(())
    }

    /// Cancels a running call: notifies the tool servers (without waiting) and returns the
    /// synthetic "interrupted" result to record in its place. `None` if the call is not running
    /// (unknown, finished, or already cancelled).
    pub fn cancel(&self, thread_id: &str, tool_call_id: &str) -> Option<Value> {
        {
            let key = (thread_id.to_owned(), tool_call_id.to_owned());
            let now = Instant::now();
            let mut calls = lock(&self.calls);
            calls.forget_expired(now);
            if calls.states.get(&key) != Some(&CallState::Running) {
                return None;
            }
            let generation = calls.next_generation;
            calls.next_generation += 1;
            calls
                .states
                .insert(key.clone(), CallState::Interrupted { generation });
            calls
                .interrupted
                .push_back((now + self.interrupted_ttl, generation, key));
        }
        if let Some(notifier) = &self.notifier {
            drop(notifier.notify(thread_id, tool_call_id));
        }
        Some(json!({
            "type": "tool_result",
            "group_id": thread_id,
            "id": tool_call_id,
            "text": "interrupted",
            "is_error": true,
        }))
    }

    /// Accepts a `tool_result` from a tool server: `Some(result)` if its call was running (the
    /// call is then forgotten), `None` (dropped, with a log line) if it was cancelled, already
    /// answered, or unknown.
    pub fn deliver(&self, result: Value) -> Option<Value> {
        let thread_id = result["group_id"].as_str().unwrap_or_default().to_owned();
        let tool_call_id = result["id"].as_str().unwrap_or_default().to_owned();
        let key = (thread_id, tool_call_id);
        let mut calls = lock(&self.calls);
        calls.forget_expired(Instant::now());
        match calls.states.get(&key) {
            Some(CallState::Running) => {
                calls.states.remove(&key);
                Some(result)
            }
            Some(CallState::Interrupted { .. }) => {
                tracing::info!(thread_id = ?shown(&key.0), tool_call_id = ?shown(&key.1), "dropped the result of a cancelled tool call");
                None
            }
            None => {
                tracing::warn!(thread_id = ?shown(&key.0), tool_call_id = ?shown(&key.1), "dropped a result for an unknown, already answered or long-cancelled tool call");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::{CallTracker, TrackerFull};

    fn result(id: &str) -> serde_json::Value {
        json!({"type": "tool_result", "group_id": "t", "id": id, "text": "done"})
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_forgotten_once_its_result_is_delivered() {
        let tracker = CallTracker::new(None);
        for i in 0..1000 {
            tracker.start("t", &format!("c{i}")).unwrap();
        }
        assert_eq!(tracker.len(), 1000);
        for i in 0..1000 {
            assert!(tracker.deliver(result(&format!("c{i}"))).is_some());
        }
        assert!(tracker.is_empty(), "{} calls left", tracker.len());
        assert!(
            tracker.deliver(result("c0")).is_none(),
            "a second result is dropped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_call_is_remembered_for_the_ttl_only() {
        let tracker = CallTracker::new(None).interrupted_ttl(Duration::from_secs(60));
        tracker.start("t", "c").unwrap();
        assert!(tracker.cancel("t", "c").is_some());
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(tracker.len(), 1, "remembered within the TTL");
        assert!(
            tracker.deliver(result("c")).is_none(),
            "its late result is dropped"
        );
        assert!(
            tracker.cancel("t", "c").is_none(),
            "a second cancel does nothing"
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(tracker.is_empty(), "forgotten after the TTL");
        assert!(
            tracker.deliver(result("c")).is_none(),
            "still dropped, as unknown"
        );

        // Ids started again after a cancel are a new call; the old memory's expiry leaves it be.
        tracker.start("t", "again").unwrap();
        assert!(tracker.cancel("t", "again").is_some());
        tracker.start("t", "again").unwrap();
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(tracker.len(), 1);
        assert!(tracker.deliver(result("again")).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_cancelled_calls_make_room_and_running_ones_refuse() {
        let tracker = CallTracker::new(None).max_calls(3);
        for id in ["a", "b", "c"] {
            tracker.start("t", id).unwrap();
        }
        assert_eq!(
            tracker.start("t", "d"),
            Err(TrackerFull {
                running: 3,
                limit: 3
            }),
            "full of running calls: refused"
        );
        assert_eq!(tracker.len(), 3);
        // A cancelled call's memory is the first to go.
        assert!(tracker.cancel("t", "a").is_some());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(tracker.cancel("t", "b").is_some());
        tracker.start("t", "d").unwrap();
        assert_eq!(tracker.len(), 3);
        assert!(tracker.deliver(result("b")).is_none());
        assert!(
            tracker.deliver(result("a")).is_none(),
            "forgotten, still dropped"
        );
        tracker.start("t", "e").unwrap(); // makes room by forgetting b
        assert_eq!(tracker.len(), 3);
        assert_eq!(tracker.start("t", "f").map_err(|e| e.running), Err(3));
        // Starting a call that is already tracked needs no room.
        tracker.start("t", "e").unwrap();
        for id in ["c", "d", "e"] {
            assert!(tracker.deliver(result(id)).is_some(), "{id}");
        }
        assert!(tracker.is_empty());
    }
}
