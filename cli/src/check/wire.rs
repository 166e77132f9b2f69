//! The raw JSON-RPC client the scenarios talk through, over a child's stdio ([`stdio`]) or
//! Streamable HTTP ([`http`]).
//!
//! Raw on purpose: `cancelkit check` must send frames a conforming client never would (malformed
//! cancels, ids `1` and `"1"` side by side) and watch for frames that must not come. Both
//! transports share one routing table, `Routes`: each response goes to the waiter registered
//! for its id (ids compare by their JSON text, so `1` and `"1"` are different), and every other
//! frame — responses nobody waits for, notifications, the server's requests — is kept in a
//! bounded queue of [`Client::others`], except the notifications that report work going on —
//! MCP's `notifications/progress` and ACP's `session/update` — which go to a bounded log of
//! their own ([`Client::progress`], [`Client::updates`]) with the time each one came. Every wait has a timeout;
//! the waiters, the queue, the logs, a line and an event are bounded.

pub mod http;
pub mod stdio;

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;

/// The longest frame kept: a longer stdio line is cut to this many bytes (and will not parse);
/// a longer HTTP body or server-sent event ends its response.
pub const MAX_LINE: usize = 4 << 20;
/// At most this many requests wait for their response at once.
pub const MAX_PENDING: usize = 4096;
/// At most this many unrouted frames are kept; older ones are dropped first.
pub const MAX_OTHERS: usize = 1024;
/// At most this many `notifications/cancelled` from the server are kept for [`Client::cancels`].
pub const MAX_CANCELS: usize = 256;
/// At most this many `notifications/progress` and `session/update` are kept for
/// [`Client::progress`] and [`Client::updates`]; older ones are dropped first.
pub const MAX_PROGRESS: usize = 16_384;
/// The notifications that go to the timed log instead of [`Client::others`].
const TIMED: [&str; 2] = ["notifications/progress", "session/update"];

/// A frame and when it came.
pub type Timed = (Value, Instant);

/// The key a response is routed by: its id's JSON text (`1` and `"1"` differ).
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// What the transport's readers and the client share.
#[derive(Default)]
pub(crate) struct Routes {
    pub(crate) pending: HashMap<String, oneshot::Sender<Timed>>,
    others: VecDeque<Value>,
    /// Every `notifications/progress` and `session/update` (the last [`MAX_PROGRESS`]), with
    /// when it came.
    log: VecDeque<Timed>,
    dropped: usize,
    /// Every `notifications/cancelled` the server sent (the first [`MAX_CANCELS`]), whoever
    /// took the frame.
    cancels: Vec<Value>,
    pub(crate) closed: bool,
}

impl Routes {
    /// Routes one frame from the server.
    pub(crate) fn route(&mut self, frame: Value) {
        let now = Instant::now();
        match frame.get("method").and_then(Value::as_str) {
            Some("notifications/cancelled") if self.cancels.len() < MAX_CANCELS => {
                self.cancels.push(frame.clone());
            }
            Some(method) if TIMED.contains(&method) && frame.get("id").is_none() => {
                if self.log.len() == MAX_PROGRESS {
                    self.log.pop_front();
                }
                self.log.push_back((frame, now));
                return;
            }
            _ => {}
        }
        let is_response = frame.get("method").is_none()
            && (frame.get("result").is_some() || frame.get("error").is_some());
        if is_response
            && let Some(id) = frame.get("id")
            && let Some(waiter) = self.pending.remove(&id_key(id))
        {
            // The waiter may have given up: then the frame is kept with the others.
            match waiter.send((frame, now)) {
                Ok(()) => return,
                Err((frame, _)) => return self.keep(frame),
            }
        }
        self.keep(frame);
    }

    /// Routes each message of a JSON-RPC body: one message, or a batch of them.
    pub(crate) fn route_all(&mut self, body: Value) {
        match body {
            Value::Array(batch) => batch.into_iter().for_each(|f| self.route(f)),
            frame => self.route(frame),
        }
    }

    fn keep(&mut self, frame: Value) {
        if self.others.len() == MAX_OTHERS {
            self.others.pop_front();
            self.dropped += 1;
        }
        self.others.push_back(frame);
    }

    /// Registers a waiter for `id`: refused when the transport has closed or too many wait.
    pub(crate) fn register(&mut self, id: &Value) -> io::Result<Pending> {
        if self.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if self.pending.len() >= MAX_PENDING {
            return Err(io::Error::other("too many requests in flight"));
        }
        let (tx, rx) = oneshot::channel();
        self.pending.insert(id_key(id), tx);
        Ok(Pending(Some(rx)))
    }
}

/// Shared routes, locked even after a panic elsewhere (the table stays consistent).
pub(crate) type Shared = Arc<Mutex<Routes>>;

pub(crate) fn lock(routes: &Shared) -> MutexGuard<'_, Routes> {
    routes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A JSON-RPC peer: a child on stdio, or a Streamable HTTP endpoint.
pub enum Client {
    /// A child's stdin and stdout.
    Stdio(Box<stdio::Stdio>),
    /// A Streamable HTTP endpoint.
    Http(http::Http),
}

impl Client {
    /// Starts `command` as a stdio server.
    pub fn spawn(command: &[OsString]) -> io::Result<Client> {
        stdio::Stdio::spawn(command).map(|c| Client::Stdio(Box::new(c)))
    }

    /// A client of the Streamable HTTP endpoint at `url` (`http://` or `https://`, trusting
    /// the platform's roots and `ca_file`) that sends `headers` with every request; a
    /// request's POST and the reading of its answer last at most `request_timeout`.
    pub fn connect(
        url: &str,
        request_timeout: Duration,
        headers: &[(String, String)],
        ca_file: Option<&std::path::Path>,
    ) -> io::Result<Client> {
        http::Http::new(url, request_timeout, headers, ca_file).map(Client::Http)
    }

    fn routes(&self) -> MutexGuard<'_, Routes> {
        match self {
            Client::Stdio(c) => lock(&c.routes),
            Client::Http(c) => lock(&c.routes),
        }
    }

    /// Sends one frame that expects no response (a notification).
    pub async fn send(&self, frame: &Value) -> io::Result<()> {
        self.deliver(frame).await.map(drop)
    }

    /// Sends one frame that expects no response; over HTTP, also says how the POST was
    /// answered (`HTTP 202 Accepted`, say), for the evidence.
    pub async fn deliver(&self, frame: &Value) -> io::Result<Option<String>> {
        match self {
            Client::Stdio(c) => c.send(frame).await.map(|()| None),
            Client::Http(c) => c.notify(frame).await.map(Some),
        }
    }

    /// Registers a waiter for `id`, then sends `frame` (a request with that id).
    pub async fn request(&self, id: &Value, frame: &Value) -> io::Result<Pending> {
        match self {
            Client::Stdio(c) => c.request(id, frame).await,
            Client::Http(c) => c.request(id, frame).await,
        }
    }

    /// Closes the response stream of the in-flight request `id` (Streamable HTTP only: at
    /// 2026-07-28 that is its cancellation). False when there is no such stream to close: on
    /// stdio, or when the request has already been answered or never sent.
    pub fn close_stream(&self, id: &Value) -> bool {
        match self {
            Client::Stdio(_) => false,
            Client::Http(c) => c.close_stream(id),
        }
    }

    /// Whether this is a Streamable HTTP client.
    pub fn is_http(&self) -> bool {
        matches!(self, Client::Http(_))
    }

    /// What went wrong last on the transport, if anything (HTTP: a connection that failed, an
    /// error status).
    pub fn failure(&self) -> Option<String> {
        match self {
            Client::Stdio(_) => None,
            Client::Http(c) => c.failure(),
        }
    }

    /// Takes the frames no waiter took, oldest first.
    pub fn others(&self) -> Vec<Value> {
        self.routes().others.drain(..).collect()
    }

    /// Every `notifications/cancelled` the server has sent so far (at most [`MAX_CANCELS`]),
    /// oldest first; unlike [`Client::others`], it does not take them.
    pub fn cancels(&self) -> Vec<Value> {
        self.routes().cancels.clone()
    }

    /// The `notifications/progress` for `token` kept so far, oldest first, with when each came;
    /// it does not take them.
    pub fn progress(&self, token: &Value) -> Vec<Timed> {
        self.timed("notifications/progress", "progressToken", token)
    }

    /// The `session/update` notifications for ACP session `session` kept so far, oldest first,
    /// with when each came; it does not take them.
    pub fn updates(&self, session: &str) -> Vec<Timed> {
        self.timed("session/update", "sessionId", &Value::from(session))
    }

    /// The kept `method` notifications whose `params[key]` is `value`.
    fn timed(&self, method: &str, key: &str, value: &Value) -> Vec<Timed> {
        self.routes()
            .log
            .iter()
            .filter(|(frame, _)| frame["method"] == method && &frame["params"][key] == value)
            .cloned()
            .collect()
    }

    /// Whether the server has gone: its stdout ended, or (HTTP) the last connection attempt
    /// was refused.
    pub fn closed(&self) -> bool {
        match self {
            Client::Stdio(c) => lock(&c.routes).closed,
            Client::Http(c) => c.unreachable(),
        }
    }

    /// Ends the child, or (HTTP) every stream still open and the legacy session.
    pub async fn shutdown(self) {
        match self {
            Client::Stdio(c) => (*c).shutdown().await,
            Client::Http(c) => c.shutdown().await,
        }
    }
}

/// A response still to come. Once it has come, or can no longer come, it is spent: later waits
/// give `None` at once.
pub struct Pending(Option<oneshot::Receiver<Timed>>);

impl Pending {
    /// A response that never comes (for a request that could not be sent).
    pub fn never() -> Pending {
        Pending(None)
    }

    /// The response, if it comes within `timeout` (`None` too when it can no longer come: the
    /// server has gone, or its response stream ended without it).
    pub async fn wait(&mut self, timeout: Duration) -> Option<Value> {
        self.wait_timed(timeout).await.map(|(frame, _)| frame)
    }

    /// Like [`Pending::wait`], with when the response came.
    pub async fn wait_timed(&mut self, timeout: Duration) -> Option<Timed> {
        let receiver = self.0.as_mut()?;
        let outcome = tokio::time::timeout(timeout, receiver).await.ok()?;
        self.0 = None;
        outcome.ok()
    }

    /// Like [`Pending::wait`], until `deadline`.
    pub async fn wait_until(&mut self, deadline: Instant) -> Option<Timed> {
        self.wait_timed(deadline.saturating_duration_since(Instant::now()))
            .await
    }

    /// The response if it has already come.
    pub fn now(&mut self) -> Option<Value> {
        self.now_timed().map(|(frame, _)| frame)
    }

    /// The response if it has already come, with when it came.
    pub fn now_timed(&mut self) -> Option<Timed> {
        let outcome = self.0.as_mut()?.try_recv();
        match outcome {
            Err(oneshot::error::TryRecvError::Empty) => None,
            outcome => {
                self.0 = None;
                outcome.ok()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn response(id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    }

    #[test]
    fn one_and_string_one_are_routed_apart() {
        let mut routes = Routes::default();
        let mut num = routes.register(&json!(1)).unwrap();
        let mut string = routes.register(&json!("1")).unwrap();
        routes.route(response(json!("1")));
        assert_eq!(string.now().unwrap()["id"], json!("1"));
        assert!(num.now().is_none(), "the numeric waiter got nothing");
        routes.route(response(json!(1)));
        assert_eq!(num.now().unwrap()["id"], json!(1));
        assert!(routes.others.is_empty());
    }

    #[test]
    fn unrouted_frames_are_kept_and_bounded() {
        let mut routes = Routes::default();
        routes.route(response(json!(7)));
        routes.route(json!({"jsonrpc": "2.0", "method": "notifications/message"}));
        routes.route_all(json!([{"jsonrpc": "2.0", "id": null, "error": {"code": -32600}}]));
        assert_eq!(routes.others.len(), 3);
        for n in 0..MAX_OTHERS {
            routes.route(response(json!(n)));
        }
        assert_eq!(routes.others.len(), MAX_OTHERS);
        assert_eq!(routes.dropped, 3);
    }

    #[test]
    fn no_waiter_after_close_or_beyond_the_bound() {
        let mut routes = Routes::default();
        for n in 0..MAX_PENDING {
            routes.register(&json!(n)).unwrap();
        }
        assert!(routes.register(&json!("one more")).is_err());
        routes.pending.clear();
        routes.closed = true;
        assert!(routes.register(&json!(1)).is_err());
    }

    #[test]
    fn progress_is_logged_apart_with_its_time_and_bounded() {
        let mut routes = Routes::default();
        let progress = |token: &str| json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}});
        routes.route(progress("a"));
        routes.route(progress("b"));
        routes.route(
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s"}}),
        );
        assert!(
            routes.others.is_empty(),
            "progress and session updates are not kept with the others"
        );
        assert_eq!(routes.log.len(), 3);
        for _ in 0..MAX_PROGRESS {
            routes.route(progress("c"));
        }
        assert_eq!(routes.log.len(), MAX_PROGRESS);
        assert!(
            routes
                .log
                .iter()
                .all(|(f, _)| f["params"]["progressToken"] == "c")
        );
    }

    #[test]
    fn the_servers_cancels_are_recorded_and_bounded() {
        let mut routes = Routes::default();
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}});
        routes.route(cancel.clone());
        routes.others.clear();
        assert_eq!(routes.cancels, std::slice::from_ref(&cancel));
        for _ in 0..MAX_CANCELS + 5 {
            routes.route(cancel.clone());
        }
        assert_eq!(routes.cancels.len(), MAX_CANCELS);
    }
}
