//! The life of an inbound notification: a cancel is applied as it is read; anything else
//! with a handler waits for room in the notification budget, then runs in order on the
//! notification loop.

use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::budget::Budget;
use super::handle::PeerHandle;
use super::policy::CancelRequest;
use super::registry::Cancel;
use super::router::{Context, ErasedNotification};
use crate::{CancelReason, Scope};

use super::dispatch::PROGRESS;

/// A notification waiting for its handler.
pub(crate) struct QueuedNotification {
    handler: Arc<dyn ErasedNotification>,
    method: Box<str>,
    params: Option<Box<RawValue>>,
    cx: Context,
    /// Its room in the notification budget.
    cost: u32,
}

/// Reader side of a notification: a cancel is applied here and now; anything else with a
/// handler is queued for it, waiting for room in the notification budget (back-pressure on
/// the reader when handlers fall behind).
pub(crate) async fn notification(peer: &PeerHandle, method: &str, params: Option<&RawValue>) {
    let shared = &peer.shared;
    if let Some(cancel) = shared.rules.protocol.parse_cancel(method, params) {
        match cancel {
            Ok(cancel) => apply_cancel(peer, cancel),
            Err(why) => tracing::warn!(method, why, "ignored a malformed cancel notification"),
        }
        return;
    }
    // Also delivered to the application's handler, if it has one.
    shared
        .rules
        .on_notification(&shared.registry, method, params);
    if method == PROGRESS && matches!(shared.rules.protocol, super::Protocol::Mcp(_)) {
        shared.on_progress(params);
    }
    let Some(handler) = shared.router.notification_route(method) else {
        if method.starts_with("$/") {
            tracing::debug!(method, "ignored an unknown protocol notification");
        } else {
            tracing::debug!(method, "ignored a notification without a handler");
        }
        return;
    };
    let budget = &shared.limits.notification_bytes;
    let cost = budget.cost_of_bytes(params.map_or(0, |p| p.get().len()));
    if !budget.take(cost).await {
        return; // closing
    }
    let queued = QueuedNotification {
        handler: Arc::clone(handler),
        method: method.into(),
        params: params.map(ToOwned::to_owned),
        cx: Context {
            peer: peer.clone(),
            id: None,
            transport: None,
        },
        cost,
    };
    if let Err(unsent) = shared.notifications.send(queued) {
        budget.give_back(unsent.0.cost);
    }
}

pub(crate) fn apply_cancel(peer: &PeerHandle, cancel: CancelRequest) {
    let shared = &peer.shared;
    let length = super::limits::id_len(&cancel.id);
    if length > shared.limits.max_id_len {
        // No request has such an id: it was refused, never registered.
        tracing::debug!(
            length,
            max = shared.limits.max_id_len,
            "ignored a cancel naming a request id over the bound"
        );
        return;
    }
    if shared.rules.is_2026_client() {
        // MCP 2026-07-28: a server cancels nothing of ours but a subscription stream it ends.
        if shared.end_listen(&cancel.id, cancel.reason.clone()) {
            tracing::info!(request_id = %cancel.id, "the server ended a subscriptions/listen stream");
        } else {
            tracing::warn!(request_id = %cancel.id, "ignored a notifications/cancelled from an MCP 2026-07-28 server that names no subscriptions/listen stream of ours");
        }
        return;
    }
    let reason = CancelReason::Peer(cancel.reason.clone());
    match shared.registry.cancel(
        (peer.channel, &cancel.id),
        reason,
        !shared.rules.answer_cancelled,
    ) {
        // Logged with its method and cause when the handler stops.
        Cancel::Cancelled => tracing::debug!(
            request_id = %cancel.id,
            reason = cancel.reason.as_deref().unwrap_or("none given"),
            "applied the peer's cancel"
        ),
        outcome => tracing::info!(
            request_id = %cancel.id,
            ?outcome,
            "ignored a cancel for a request that is unknown, finished, already cancelled or not cancellable"
        ),
    }
}

/// Runs notification handlers one at a time, in the order the notifications arrived (streamed
/// updates such as ACP `session/update` must not overtake each other), until the connection
/// closes. Params are parsed here, not on the reader.
pub(crate) async fn notification_loop(
    mut queue: mpsc::UnboundedReceiver<QueuedNotification>,
    budget: Budget,
    scope: Scope,
) {
    let closed = scope.token().clone();
    scope
        .run(async move {
            loop {
                let next = tokio::select! {
                    biased;
                    () = closed.cancelled() => break,
                    next = queue.recv() => next,
                };
                let Some(queued) = next else { break };
                let QueuedNotification {
                    handler,
                    method,
                    params,
                    cx,
                    cost,
                } = queued;
                let run = std::panic::AssertUnwindSafe(async {
                    match handler.call(params.as_deref(), cx) {
                        Ok(handler) => {
                            drop(params);
                            handler.await;
                        }
                        Err(why) => tracing::warn!(
                            method = &*method,
                            why,
                            "ignored a notification with invalid params"
                        ),
                    }
                })
                .catch_unwind();
                let stopped = tokio::select! {
                    biased;
                    () = closed.cancelled() => true,
                    _ = run => false,
                };
                budget.give_back(cost);
                if stopped {
                    break;
                }
            }
        })
        .await;
}
