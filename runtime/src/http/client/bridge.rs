//! The bridge: the task reading the peer's output — each request `POST`ed by a task of its
//! own, each cancel routed to its request's task, notifications and responses `POST`ed in
//! order — and the state it shares with the tasks it spawns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cancelkit_protocol::jsonrpc::RequestId;
use cancelkit_wire::headers::{self, SESSION_ID};
use cancelkit_wire::sse;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::deliver::{PeerInput, ToPeer, peer_input};
use super::session::{Era, Learned, era_of};
use super::{HttpClient, MAX_UNREAD_BYTES, Options, failure, post, stream};
use crate::peer::budget::Budget;
use crate::peer::wire::{self, Incoming};
use crate::peer::{Inbound, Message, Outbound, OutboundKind};
use crate::sync::lock;

const INITIALIZED: &str = "notifications/initialized";
const CANCELLED: &str = "notifications/cancelled";

/// How much of a `202` (or error) body to a notification is read.
const SMALL_BODY: usize = 64 << 10;

/// What the bridge tells a request's task.
#[derive(Debug)]
pub(super) enum Signal {
    /// Cancelled at 2026-07-28: drop the stream.
    Abort,
    /// Cancelled in a legacy session: send this `notifications/cancelled`.
    Cancel(Bytes),
    /// Its response arrived on another stream: stop reading.
    Answered,
}

/// A request in flight.
#[derive(Debug)]
pub(super) struct Entry {
    era: Era,
    pub(super) signal: oneshot::Sender<Signal>,
}

/// What the bridge and its tasks share.
pub(super) struct Shared {
    pub(super) http: reqwest::Client,
    pub(super) url: reqwest::Url,
    extra: HeaderMap,
    pub(super) options: Options,
    /// The largest event or JSON answer read.
    pub(super) event_limit: usize,
    pub(super) learned: Learned,
    /// Requests in flight; at most `options.max_in_flight` (one `slots` permit each).
    in_flight: Mutex<HashMap<RequestId, Entry>>,
    slots: Arc<Semaphore>,
    /// Request `POST`s open at once.
    pub(super) posts: Semaphore,
    /// Bytes of requests waiting for a `POST` slot.
    pub(super) queued: Budget,
    /// Messages for the peer, taken whole and in order from [`peer_input`]. Unbounded as a
    /// channel, bounded by `unread` ([`MAX_UNREAD_BYTES`]), taken before anything is queued.
    pub(super) to_peer: mpsc::UnboundedSender<ToPeer>,
    pub(super) unread: Budget,
    /// The bridge stops: every task ends.
    pub(super) stop: CancellationToken,
    /// The session expired: the bridge closes the peer's input.
    expired: CancellationToken,
}

impl Shared {
    fn new(client: HttpClient, event_limit: usize, to_peer: mpsc::UnboundedSender<ToPeer>) -> Self {
        let options = client.options;
        Self {
            http: client.http,
            url: client.url,
            extra: client.headers,
            event_limit,
            learned: Learned::default(),
            in_flight: Mutex::default(),
            slots: Arc::new(Semaphore::new(options.max_in_flight)),
            posts: Semaphore::new(options.max_concurrent_posts),
            queued: Budget::new(options.max_queued_bytes),
            to_peer,
            unread: Budget::new(MAX_UNREAD_BYTES),
            stop: CancellationToken::new(),
            expired: CancellationToken::new(),
            options,
        }
    }

    /// The session expired: the bridge closes the connection.
    pub(super) fn expire(&self) {
        tracing::warn!(url = %super::failure::shown_url(&self.url), "the server ended the session; closing the connection");
        self.expired.cancel();
    }

    /// The headers of a `POST`: the extra ones, then the protocol's (none on `initialize`).
    pub(super) fn post_headers(&self, era: Option<Era>, initialize: bool) -> HeaderMap {
        let mut headers = self.extra.clone();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static(headers::ACCEPT_JSON_OR_SSE),
        );
        if !initialize {
            self.learned.protocol_headers(era, &mut headers);
        }
        headers
    }

    /// The headers of a `GET` opening (or reopening) an event stream.
    pub(super) fn get_headers(&self, era: Era, last_event_id: Option<&str>) -> HeaderMap {
        let mut headers = self.extra.clone();
        headers.insert(ACCEPT, HeaderValue::from_static(sse::CONTENT_TYPE));
        self.learned.protocol_headers(Some(era), &mut headers);
        if let Some(value) = last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(headers::LAST_EVENT_ID, value);
        }
        headers
    }

    /// Tracks request `id`; the receiver of its signals, `None` if it is tracked already.
    fn track(&self, id: RequestId, era: Era) -> Option<oneshot::Receiver<Signal>> {
        let mut in_flight = lock(&self.in_flight);
        if in_flight.contains_key(&id) {
            return None;
        }
        let (signal, receiver) = oneshot::channel();
        in_flight.insert(id, Entry { era, signal });
        Some(receiver)
    }

    /// Stops tracking request `id`.
    pub(super) fn untrack(&self, id: &RequestId) -> Option<Entry> {
        lock(&self.in_flight).remove(id)
    }

    /// A request from the peer: tracked, then `POST`ed by a task of its own.
    async fn request(
        self: &Arc<Self>,
        id: RequestId,
        method: &str,
        params: Option<&RawValue>,
        body: Bytes,
    ) {
        let era = era_of(method, params);
        let routing = match era {
            Era::V2026 => self.learned.routing(method, params),
            Era::Legacy => Vec::new(),
        };
        // Both bounds wait: back-pressure on the peer's output.
        let Ok(slot) = Arc::clone(&self.slots).acquire_owned().await else {
            return;
        };
        let cost = self.queued.cost_of_bytes(body.len());
        if !self.queued.take(cost).await {
            return;
        }
        let Some(signal) = self.track(id.clone(), era) else {
            self.queued.give_back(cost);
            tracing::warn!(request_id = %id, "the peer reused the id of a request in flight; the new one is not sent");
            return;
        };
        let job = post::Job {
            id,
            method: method.to_owned(),
            era,
            body,
            routing,
            queued: cost,
        };
        tokio::spawn(post::run(Arc::clone(self), job, signal, slot));
    }

    /// The peer's `notifications/cancelled` for request `id` (read from `params` when the
    /// peer did not say which): aborts a 2026-07-28 request's `POST`, or has a legacy
    /// request's task send the notification.
    fn cancel(&self, id: Option<RequestId>, params: Option<&RawValue>, message: Bytes) {
        #[derive(Deserialize)]
        struct Cancelled {
            #[serde(rename = "requestId")]
            id: RequestId,
        }
        let read = || params.and_then(|p| serde_json::from_str::<Cancelled>(p.get()).ok());
        let Some(id) = id.or_else(|| read().map(|c| c.id)) else {
            tracing::warn!("the peer sent notifications/cancelled without a request id; not sent");
            return;
        };
        let Some(entry) = self.untrack(&id) else {
            tracing::debug!(request_id = %id, "cancel for a request no longer in flight; not sent");
            return;
        };
        let signal = match entry.era {
            Era::V2026 => Signal::Abort,
            Era::Legacy => Signal::Cancel(message),
        };
        let _ = entry.signal.send(signal);
    }

    /// `POST`s a notification or a response, within the send timeout; whether the server
    /// accepted it.
    pub(super) async fn send(&self, body: Bytes, what: &str) -> bool {
        let headers = self.post_headers(None, false);
        let carried_session = headers.contains_key(SESSION_ID);
        let request = self.http.post(self.url.clone()).headers(headers).body(body);
        let exchange = async {
            let mut response = request.send().await?;
            let status = response.status();
            // Read the (empty or small) body, so the connection can be used again.
            let mut read = 0;
            while read < SMALL_BODY
                && let Some(chunk) = response.chunk().await?
            {
                read += chunk.len();
            }
            Ok::<_, reqwest::Error>(status)
        };
        match tokio::time::timeout(self.options.send_timeout, exchange).await {
            Ok(Ok(status)) if status.is_success() => true,
            Ok(Ok(StatusCode::NOT_FOUND)) if carried_session => {
                self.expire();
                false
            }
            Ok(Ok(status)) => {
                tracing::warn!(what, %status, "the server refused a message");
                false
            }
            Ok(Err(e)) => {
                tracing::warn!(what, "cannot send a message: {}", cancelkit_wire::chain(&e));
                false
            }
            Err(_) => {
                tracing::warn!(what, timeout = ?self.options.send_timeout, "sending a message took too long; given up");
                false
            }
        }
    }

    /// After `notifications/initialized`: opens the server's `GET` stream, once, in a legacy
    /// session, and waits until the server has answered it (at most the send timeout, which
    /// bounds the `GET` too) before the peer's next message is sent. A server may send a
    /// request of its own on that stream as soon as a call asks for it — the TypeScript SDK's
    /// server does, for a tool's `elicitation/create`, and drops it when no stream is open
    /// yet — so the stream is there before the call is.
    async fn start_listening(self: &Arc<Self>) {
        if !self.options.listen || !self.learned.start_listening() {
            return;
        }
        let (answered, first_get) = oneshot::channel();
        tokio::spawn(stream::listen(Arc::clone(self), answered));
        let _ = first_get.await;
    }

    /// `DELETE` with the session, if there is one.
    async fn end_session(&self) {
        if !self.learned.has_session() {
            return;
        }
        let mut headers = self.extra.clone();
        self.learned
            .protocol_headers(Some(Era::Legacy), &mut headers);
        let request = self.http.delete(self.url.clone()).headers(headers).send();
        match tokio::time::timeout(self.options.send_timeout, request).await {
            Ok(Ok(response)) => {
                tracing::debug!(status = %response.status(), "ended the session");
            }
            Ok(Err(e)) => {
                tracing::debug!("cannot end the session: {}", cancelkit_wire::chain(&e));
            }
            Err(_) => tracing::debug!("ending the session took too long; given up"),
        }
    }

    /// One message the peer sent.
    async fn outgoing(self: &Arc<Self>, message: Outbound) {
        if let OutboundKind::Cancel { id } = message.kind() {
            let id = id.clone();
            self.cancel(Some(id), None, message.into_bytes());
            return;
        }
        let bytes = message.into_bytes();
        // The method and params, for the headers and the era: our own message, read back.
        match wire::parse(&bytes) {
            Incoming::Request { id, method, params } => {
                let method = method.into_owned();
                let params = params.map(ToOwned::to_owned);
                self.request(id, &method, params.as_deref(), bytes).await;
            }
            Incoming::Notification { method, params } if method == CANCELLED => {
                let params = params.map(ToOwned::to_owned);
                self.cancel(None, params.as_deref(), bytes);
            }
            Incoming::Notification { method, .. } => {
                let method = method.into_owned();
                if self.send(bytes, &method).await && method == INITIALIZED {
                    self.start_listening().await;
                }
            }
            Incoming::Response { .. } => {
                self.send(bytes, "a response to the server's request").await;
            }
            Incoming::Invalid { .. } | Incoming::Ignored(_) => {
                tracing::debug!(
                    "the peer wrote a message that is not sent: {}",
                    failure::excerpt(&bytes)
                );
            }
        }
    }

    /// A message of the peer's beyond the limit: a request is answered with an error.
    fn too_long(self: &Arc<Self>, message: &Outbound, limit: usize) {
        let OutboundKind::Request { id } = message.kind() else {
            tracing::error!(
                limit,
                "the peer wrote a message beyond the client's limit; dropped"
            );
            return;
        };
        tracing::error!(request_id = %id, limit, "the peer wrote a request beyond the client's limit; not sent");
        let answer = Message::Response {
            id: id.clone(),
            outcome: Err(failure::not_sent(limit)),
        };
        // Not from the bridge itself: it must go on reading the peer's output meanwhile.
        let shared = Arc::clone(self);
        tokio::spawn(async move { shared.to_peer(Inbound::Message(answer), 256).await });
    }
}

/// Starts the bridge: the peer's input (which this returns), and the task reading the peer's
/// output from `output`, whose messages are at most `limit` bytes.
pub(super) fn spawn(
    client: HttpClient,
    event_limit: usize,
    output: mpsc::Receiver<Outbound>,
    limit: usize,
) -> (tokio::task::JoinHandle<()>, PeerInput) {
    // Bounded by `unread` (see `Shared::to_peer`).
    let (to_peer, queued) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared::new(client, event_limit, to_peer));
    let input = peer_input(queued, shared.unread.clone(), shared.stop.clone());
    (tokio::spawn(run(shared, output, limit)), input)
}

/// Reads the peer's output until it ends; then stops every task (the peer's input ends) and
/// ends the session.
async fn run(shared: Arc<Shared>, mut output: mpsc::Receiver<Outbound>, limit: usize) {
    let mut closing = false;
    loop {
        let message = tokio::select! {
            biased;
            () = shared.expired.cancelled(), if !closing => {
                // Owed answers were queued before the expiry was signalled; the peer takes
                // them, then the end of its input, and closes — which ends its output.
                closing = true;
                shared.close_peer_input();
                continue;
            }
            message = output.recv() => message,
        };
        match message {
            None => break,
            Some(message) if message.bytes().len() > limit => shared.too_long(&message, limit),
            Some(message) => shared.outgoing(message).await,
        }
    }
    shared.stop.cancel();
    shared.end_session().await;
}
