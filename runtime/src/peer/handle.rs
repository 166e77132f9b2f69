//! The user-facing handle of a connection ([`PeerHandle`]) and the state its tasks share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use cancelkit_protocol::jsonrpc::RequestId;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::dispatch::{Limits, QueuedNotification};
use super::outgoing::{OutgoingRequest, RequestError};
use super::policy::Rules;
use super::registry::Registry;
use super::router::{Reply, Router};
use super::wire;
use super::writer::{Outbox, TrySend};
use crate::sync::lock;
use crate::{Canceller, Scope};

/// One of our requests, waiting for its answer.
pub(crate) struct Pending {
    pub(crate) tx: oneshot::Sender<Reply>,
    /// Shared with the request's future: one allocation for both.
    pub(crate) method: Arc<str>,
}

/// What the reader, the writer, the handlers and every [`PeerHandle`] of a connection share.
pub(crate) struct Shared {
    pub(crate) rules: Rules,
    pub(crate) outbox: Outbox,
    pub(crate) registry: Registry,
    /// Our requests awaiting an answer. Bounded by the application: one entry per
    /// [`OutgoingRequest`] it holds, removed when that future completes or is dropped.
    pending: Mutex<HashMap<RequestId, Pending>>,
    next_id: AtomicI64,
    pub(crate) router: Router,
    pub(crate) limits: Limits,
    /// Notification handlers, run one after another in arrival order. Unbounded as a channel,
    /// bounded by the notification budget in `limits`, taken before anything is queued.
    pub(crate) notifications: mpsc::UnboundedSender<QueuedNotification>,
    /// Parent of every handler's scope; cancelled (shutdown) when the connection closes.
    pub(crate) connection: Scope,
    pub(crate) canceller: Canceller,
    pub(crate) stop_reading: CancellationToken,
}

impl Shared {
    pub(crate) fn new(
        rules: Rules,
        outbox: Outbox,
        router: Router,
        limits: Limits,
        notifications: mpsc::UnboundedSender<QueuedNotification>,
    ) -> Self {
        let (connection, canceller) = Scope::root();
        Self {
            rules,
            outbox,
            registry: Registry::default(),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            router,
            limits,
            notifications,
            connection,
            canceller,
            stop_reading: CancellationToken::new(),
        }
    }

    pub(crate) fn closed(&self) -> bool {
        self.canceller.is_cancelled()
    }

    /// Forgets an outgoing request (its answer, if any, will be dropped).
    pub(crate) fn forget(&self, id: &RequestId) {
        lock(&self.pending).remove(id);
    }

    /// Hands the peer's answer to the request waiting for it.
    pub(crate) fn answer(&self, id: RequestId, outcome: Reply) {
        let pending = lock(&self.pending).remove(&id);
        match pending {
            Some(pending) => {
                self.rules.on_response(&pending.method, &outcome);
                let _ = pending.tx.send(outcome);
            }
            None => tracing::debug!(
                request_id = %id,
                "dropped a response to a request we never sent, already cancelled or gave up on"
            ),
        }
    }

    /// MCP 2026-07-28 client: the server ended our `subscriptions/listen` request `id` with
    /// `notifications/cancelled`; its future completes with -32800. Whether it named one.
    pub(crate) fn end_listen(&self, id: &RequestId, reason: Option<String>) -> bool {
        let mut pending = lock(&self.pending);
        if pending
            .get(id)
            .is_none_or(|p| &*p.method != super::policy::era::LISTEN)
        {
            return false;
        }
        let Some(ended) = pending.remove(id) else {
            return false;
        };
        drop(pending);
        let error = crate::Cancelled::new(crate::CancelReason::Peer(reason));
        let _ = ended.tx.send(Err(error.into()));
        true
    }

    /// Fails every request still waiting for an answer ([`RequestError::Closed`]).
    pub(crate) fn fail_pending(&self) {
        let pending: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        drop(pending);
    }

    /// Tells the peer to cancel one of our requests (never `initialize`).
    pub(crate) fn send_cancel(&self, id: &RequestId, method: &str, reason: &str) {
        if self.closed() {
            return;
        }
        if let Some(message) = self.rules.cancel_message(id, method, reason) {
            self.outbox.send_anyway(message);
        }
    }
}

/// Sends requests and notifications on a connection; cheap to clone.
#[derive(Clone)]
pub struct PeerHandle {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for PeerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerHandle")
            .field("protocol", &self.shared.rules.protocol)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl PeerHandle {
    /// Sends a request and returns its future. The request is queued for writing at once (or,
    /// when our output queue is full because the peer is not reading, as soon as the future is
    /// awaited and there is room); awaiting the future waits for the answer, and dropping it
    /// unanswered cancels it (see [`OutgoingRequest`]).
    pub fn request<P: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: P,
    ) -> OutgoingRequest<R> {
        let shared = &self.shared;
        let id = RequestId::Number(shared.next_id.fetch_add(1, Ordering::Relaxed));
        let name: Arc<str> = Arc::from(method);
        let shared_arc = Arc::clone(shared);
        if let Some(why) = shared.rules.refuse_request(method) {
            tracing::warn!(method, "{why}");
            return OutgoingRequest::failed(shared_arc, id, name, RequestError::NotAllowed(why));
        }
        let params = if shared.rules.edits_outgoing(method) {
            serde_json::to_value(params).map(|mut params| {
                shared.rules.outgoing_params(method, &mut params);
                wire::params(&params)
            })
        } else {
            serde_json::value::to_raw_value(&params).map(|raw| (raw.get() != "null").then_some(raw))
        };
        let params = match params {
            Ok(params) => params,
            Err(e) => {
                return OutgoingRequest::failed(shared_arc, id, name, RequestError::Encode(e));
            }
        };
        let message = wire::request(&id, method, params.as_deref());
        let (tx, rx) = oneshot::channel();
        lock(&shared.pending).insert(
            id.clone(),
            Pending {
                tx,
                method: Arc::clone(&name),
            },
        );
        let unsent = match (shared.closed(), shared.outbox.try_send(message)) {
            (false, TrySend::Sent) => None,
            (false, TrySend::Full(message)) => Some(message),
            _ => {
                shared.forget(&id);
                return OutgoingRequest::failed(shared_arc, id, name, RequestError::Closed);
            }
        };
        OutgoingRequest::new(shared_arc, id, name, rx, unsent)
    }

    /// Sends a notification, waiting for room in our output queue if the peer is slow to read.
    /// Fails only if the connection is closed.
    pub async fn notify<P: Serialize>(&self, method: &str, params: P) -> Result<(), RequestError> {
        let params = serde_json::to_value(params).map_err(RequestError::Encode)?;
        if let Some(why) = self.shared.rules.refuse_notification(method, &params) {
            tracing::warn!(method, "{why}");
            return Err(RequestError::NotAllowed(why));
        }
        let message = wire::notification(method, wire::params(&params).as_deref());
        if !self.shared.closed() && self.shared.outbox.send(message).await {
            Ok(())
        } else {
            Err(RequestError::Closed)
        }
    }

    /// How many inbound requests are registered and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.shared.registry.len()
    }

    /// How many of our requests are waiting for an answer.
    pub fn pending_requests(&self) -> usize {
        lock(&self.shared.pending).len()
    }

    /// How many bytes of output wait to be written (each message counted with a small fixed
    /// overhead); at most [`PeerBuilder::max_output_bytes`](super::PeerBuilder::max_output_bytes).
    pub fn queued_output_bytes(&self) -> usize {
        self.shared.outbox.queued()
    }

    /// Whether the peer declared the draft `cancellation: {request: true}` capability (ACP).
    pub fn peer_accepts_draft_cancel(&self) -> bool {
        self.shared.rules.peer_accepts_draft()
    }

    /// Stops reading: everything in flight is cancelled (reason: shutdown), pending requests
    /// fail with [`RequestError::Closed`], and the connection ends once owed answers are sent —
    /// or once the shutdown grace has passed, whichever comes first.
    pub fn close(&self) {
        self.shared.stop_reading.cancel();
    }

    /// Whether the connection has stopped reading.
    pub fn is_closed(&self) -> bool {
        self.shared.closed()
    }
}
