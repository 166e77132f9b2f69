//! Cancelling a request upstream when its call is dropped (see the module documentation of
//! [`super`]): a closed stream at 2026-07-28, `notifications/cancelled` at 2025-11-25.

use super::*;

/// Cancels request `id` upstream when dropped armed (see the module documentation).
pub(super) struct CancelOnDrop {
    pub(super) endpoint: Endpoint,
    pub(super) connection: Arc<Connection>,
    pub(super) id: i64,
    pub(super) scope: Option<cancelkit::Scope>,
    pub(super) armed: bool,
    /// At 2025-11-25: the task sending the request's POST.
    pub(super) in_flight: Option<InFlight>,
}

/// The task sending a request's POST (2025-11-25), which goes on when the request is dropped.
pub(super) struct InFlight {
    /// Fires when the server answered the POST (its status and headers arrived); closed
    /// when sending it failed.
    pub(super) answered: oneshot::Receiver<()>,
    pub(super) post: tokio::task::AbortHandle,
}

impl CancelOnDrop {
    /// Cancels the request now, with `reason`.
    pub(super) fn fire(&mut self, reason: String) {
        self.armed = false;
        let upstream = &*self.endpoint.upstream;
        if matches!(self.connection.era, Era::V2026) {
            tracing::debug!(upstream, id = self.id, %reason, "request cancelled: its response stream is closed");
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                upstream,
                id = self.id,
                "no runtime to send notifications/cancelled from"
            );
            return;
        };
        tracing::debug!(upstream, id = self.id, %reason, "sending notifications/cancelled");
        let message = json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": self.id, "reason": reason},
        });
        let endpoint = self.endpoint.clone();
        let connection = Arc::clone(&self.connection);
        let id = self.id;
        // The POST not answered yet (neither answered nor failed): the server may not know the
        // request when the cancel arrives.
        let unanswered = self.in_flight.take().and_then(|mut in_flight| {
            let pending = matches!(
                in_flight.answered.try_recv(),
                Err(oneshot::error::TryRecvError::Empty)
            );
            pending.then_some(in_flight)
        });
        runtime.spawn(async move {
            send_cancel(&endpoint, &connection, id, &message).await;
            if let Some(InFlight { answered, post }) = unanswered {
                let answered = tokio::time::timeout(CANCEL_TIMEOUT, answered).await;
                post.abort();
                if let Ok(Ok(())) = answered {
                    let upstream = &*endpoint.upstream;
                    tracing::debug!(upstream, id, "the server answered the cancelled request's POST: sending notifications/cancelled again");
                    send_cancel(&endpoint, &connection, id, &message).await;
                }
            }
        });
    }
}

/// POSTs `notifications/cancelled` for request `id`, within [`CANCEL_TIMEOUT`].
pub(super) async fn send_cancel(
    endpoint: &Endpoint,
    connection: &Connection,
    id: i64,
    message: &Value,
) {
    let sent = tokio::time::timeout(CANCEL_TIMEOUT, notify(endpoint, connection, message)).await;
    let upstream = &*endpoint.upstream;
    match sent {
        Ok(Ok(())) => {}
        Ok(Err(why)) => tracing::warn!(upstream, id, "notifications/cancelled: {why}"),
        Err(_) => {
            tracing::warn!(
                upstream,
                id,
                "notifications/cancelled took over {CANCEL_TIMEOUT:?}"
            );
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let reason = self
                .scope
                .as_ref()
                .and_then(cancelkit::Scope::cancel_reason)
                .map_or_else(|| DEFAULT_REASON.to_owned(), |cause| cause.summary());
            self.fire(reason);
        }
    }
}
