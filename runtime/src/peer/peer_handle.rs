//! The user-facing handle of a connection: requests and notifications out, cancels, and what
//! is in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cancelkit_protocol::jsonrpc::RequestId;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::outgoing::{OutgoingRequest, RequestError};
use super::policy::Protocol;
use super::registry::Cancel;
use super::transport::{Outbound, OutboundKind};
use super::wire;
use super::writer::TrySend;
use crate::CancelReason;
use crate::sync::lock;

use super::handle::{Pending, Shared, TaskCancel, is_task_request, progress_token_of};

/// Sends requests and notifications on a connection; cheap to clone.
#[derive(Clone)]
pub struct PeerHandle {
    pub(crate) shared: Arc<Shared>,
    /// The transport channel this handle speaks on: its requests' answers, and what it sends,
    /// go back on it. 0 for a byte stream.
    pub(crate) channel: u64,
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
    /// This handle, speaking on the transport's `channel`.
    pub(crate) fn on(&self, channel: u64) -> PeerHandle {
        PeerHandle {
            shared: Arc::clone(&self.shared),
            channel,
        }
    }

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
        let name = shared.method_name(method);
        let shared_arc = Arc::clone(shared);
        if let Some(why) = shared.rules.refuse_request(method) {
            tracing::warn!(method, "{why}");
            return OutgoingRequest::failed(shared_arc, id, name, RequestError::NotAllowed(why));
        }
        let params = serde_json::value::to_raw_value(&params)
            .map(|raw| shared.rules.outgoing_params(method, raw));
        let params = match params {
            Ok(params) => params,
            Err(e) => {
                return OutgoingRequest::failed(shared_arc, id, name, RequestError::Encode(e));
            }
        };
        let task = if is_task_request(&shared.rules, method, params.as_deref()) {
            TaskCancel::Task
        } else {
            TaskCancel::No
        };
        let progress_token = matches!(shared.rules.protocol, Protocol::Mcp(_))
            .then(|| progress_token_of(params.as_deref()))
            .flatten();
        let message = Outbound::new(
            OutboundKind::Request { id: id.clone() },
            wire::request(&id, method, params.as_deref()),
        )
        .on(self.channel);
        let (tx, rx) = oneshot::channel();
        lock(&shared.pending).insert(
            id.clone(),
            Pending {
                tx,
                method: Arc::clone(&name),
                task,
                orphan: false,
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
            .with_task(task != TaskCancel::No)
            .with_progress_token(progress_token)
    }

    /// [`request`](Self::request) with a timeout that restarts whenever the peer reports
    /// progress for it, up to `max` in all (MCP `notifications/progress`; MCP 2026-07-28
    /// recommends this to clients). Adds `_meta.progressToken` to the params unless they carry
    /// one already. See [`OutgoingRequest::progress_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(peer: cancelkit::peer::PeerHandle) -> Result<(), cancelkit::peer::RequestError> {
    /// let result: serde_json::Value = peer
    ///     .request_with_progress(
    ///         "tools/call",
    ///         serde_json::json!({"name": "build", "arguments": {}}),
    ///         Duration::from_secs(10),  // no progress for 10 s: cancelled
    ///         Duration::from_secs(600), // never more than 10 min
    ///     )
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn request_with_progress<P: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: P,
        idle: Duration,
        max: Duration,
    ) -> OutgoingRequest<R> {
        let mut params = match serde_json::to_value(params) {
            Ok(params) => params,
            Err(e) => {
                let id = RequestId::Number(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
                return OutgoingRequest::failed(
                    Arc::clone(&self.shared),
                    id,
                    Arc::from(method),
                    RequestError::Encode(e),
                );
            }
        };
        static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
        if params.is_null() {
            params = serde_json::json!({});
        }
        if let Some(object) = params.as_object_mut() {
            let meta = object
                .entry("_meta")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.entry("progressToken").or_insert_with(|| {
                    let n = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
                    format!("cancelkit-progress-{n}").into()
                });
            }
        }
        self.request(method, params).progress_timeout(idle, max)
    }

    /// Cancels the inbound request `id` in flight from our side — an operator, or a gateway's
    /// HTTP API, asked — with `reason` as its cause (typically [`CancelReason::Api`] with who
    /// asked). The handler sees the reason through [`crate::cancel_reason`]; the request is
    /// still answered (-32800, or the handler's result), since the peer did not cancel it.
    /// Returns whether a cancellable request with that id was in flight and not yet cancelled.
    pub fn cancel_inbound(&self, id: &RequestId, reason: CancelReason) -> bool {
        let outcome = self.shared.registry.cancel_ours((self.channel, id), reason);
        tracing::debug!(request_id = %id, ?outcome, "cancel of an inbound request asked from our side");
        outcome == Cancel::Cancelled
    }

    /// Sends request `R` of the generated bindings (`cancelkit::protocol::acp::request::SessionPrompt`,
    /// `...::mcp::v2025_11_25::request::CancelTask`): the method, the params' type and the
    /// result's type come from `R`, so neither can be mistyped. Otherwise as
    /// [`request`](Self::request).
    ///
    /// ```no_run
    /// use cancelkit::peer::PeerHandle;
    /// use cancelkit::protocol::acp::{PromptRequestParams, request::SessionPrompt};
    ///
    /// # async fn run(peer: PeerHandle) -> Result<(), Box<dyn std::error::Error>> {
    /// let params: PromptRequestParams = serde_json::from_value(serde_json::json!({
    ///     "sessionId": "s-1",
    ///     "prompt": [{"type": "text", "text": "Hello"}]
    /// }))?;
    /// let result = peer.send::<SessionPrompt>(params).await?;
    /// println!("the turn ended: {:?}", result.stop_reason);
    /// # Ok(()) }
    /// ```
    pub fn send<R: cancelkit_protocol::Request>(
        &self,
        params: R::Params,
    ) -> OutgoingRequest<R::Result> {
        self.request(R::METHOD, params)
    }

    /// Sends notification `N` of the generated bindings
    /// (`cancelkit::protocol::acp::notification::SessionCancel`); otherwise as
    /// [`notify`](Self::notify).
    ///
    /// # Errors
    ///
    /// As [`notify`](Self::notify).
    pub async fn send_notification<N: cancelkit_protocol::Notification>(
        &self,
        params: N::Params,
    ) -> Result<(), RequestError> {
        self.notify(N::METHOD, params).await
    }

    /// Sends a notification, waiting for room in our output queue if the peer is slow to read.
    /// Fails only if the connection is closed.
    pub async fn notify<P: Serialize>(&self, method: &str, params: P) -> Result<(), RequestError> {
        let params = serde_json::to_value(params).map_err(RequestError::Encode)?;
        if let Some(why) = self.shared.rules.refuse_notification(method, &params) {
            tracing::warn!(method, "{why}");
            return Err(RequestError::NotAllowed(why));
        }
        let kind = match params.get("progressToken").map(RequestId::deserialize) {
            Some(Ok(token)) => OutboundKind::Progress { token },
            _ => OutboundKind::Notification,
        };
        let message = wire::notification(method, wire::params(&params).as_deref());
        let message = Outbound::new(kind, message).on(self.channel);
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
        self.shared.closing.store(true, Ordering::Relaxed);
        self.shared.stop_reading.cancel();
    }

    /// Whether the connection has stopped reading.
    pub fn is_closed(&self) -> bool {
        self.shared.closed()
    }
}
