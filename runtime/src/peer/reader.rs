//! The peer's side of the transport: the task that takes incoming messages, classifies each and
//! applies cancels at once — nothing else — and closes the connection when the stream ends.

use std::sync::Arc;
use std::time::Duration;

use cancelkit_protocol::jsonrpc::ErrorCode;
use futures_util::{Stream, StreamExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::dispatch;
use super::handle::PeerHandle;
use super::limits::id_len;
use super::policy::CancelRequest;
use super::transport::{Inbound, Outbound, OutboundKind, Owner};
use super::wire::{self, Incoming};
use crate::{CancelReason, JsonRpcError};

/// Reads until the peer hangs up, a read fails, or the connection is closed; then closes it.
pub(crate) async fn read_loop<In>(
    peer: PeerHandle,
    mut frames: In,
    grace: Duration,
    stop_writing: CancellationToken,
    writer_task: JoinHandle<()>,
) where
    In: Stream<Item = std::io::Result<Inbound>> + Unpin,
{
    let shared = Arc::clone(&peer.shared);
    let stop = shared.stop_reading.clone();
    loop {
        let frame = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            frame = frames.next() => frame,
        };
        let frame = match frame {
            None => break,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "cannot read from the peer; closing the connection");
                break;
            }
            Some(Ok(frame)) => frame,
        };
        // Handling a message waits only for room in a queue (our output, the notification
        // queue): back-pressure when the peer does not read or handlers fall behind. Closing
        // the connection interrupts that wait.
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            () = handle_inbound(&peer, frame) => {}
        }
    }
    close(&peer, grace, stop_writing, writer_task).await;
}

async fn handle_inbound(peer: &PeerHandle, inbound: Inbound) {
    match inbound {
        Inbound::Frame(bytes) => handle(peer, wire::parse(&bytes), None).await,
        Inbound::Message(mut message) => handle(peer, message.as_incoming(), None).await,
        Inbound::Channel {
            channel,
            owner,
            mut message,
        } => handle(&peer.on(channel), message.as_incoming(), owner).await,
        Inbound::Abandoned {
            channel,
            id,
            reason,
        } => dispatch::apply_cancel(&peer.on(channel), CancelRequest { id, reason }),
        Inbound::Rejected(why) => {
            tracing::warn!(why, "rejected a frame");
            let error =
                JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request").with_data(why);
            let answer = wire::error(None, &error);
            peer.shared
                .outbox
                .send(Outbound::new(OutboundKind::Response { id: None }, answer))
                .await;
        }
    }
}

async fn handle(peer: &PeerHandle, incoming: Incoming<'_>, owner: Option<Owner>) {
    let shared = &peer.shared;
    match incoming {
        Incoming::Request { id, method, params } => {
            dispatch::request(peer, id, &method, params, owner).await;
        }
        Incoming::Notification { method, params } => {
            dispatch::notification(peer, &method, params).await;
        }
        Incoming::Response { id, .. } if id_len(&id) > shared.limits.max_id_len => {
            // Our ids are integers: it answers nothing of ours.
            tracing::debug!(
                length = id_len(&id),
                "dropped a response whose id is over the bound"
            );
        }
        Incoming::Response { id, outcome } => shared.answer(id, outcome),
        Incoming::Invalid { id, error } => {
            tracing::warn!(error = %error, data = ?error.data, "invalid message from the peer");
            // An id over the bound is not echoed: the answer goes to `null`.
            let id = id.filter(|id| id_len(id) <= shared.limits.max_id_len);
            let answer = wire::error(id.as_ref(), &error);
            let answer = Outbound::new(OutboundKind::Response { id }, answer).on(peer.channel);
            shared.outbox.send(answer).await;
        }
        Incoming::Ignored(why) => tracing::warn!(why, "ignored a message from the peer"),
    }
}

/// Closing: cancel everything in flight, fail what we are waiting for, let cancelled handlers
/// send the answers they owe and the writer write them — all within the grace period, after
/// which whatever is left is dropped.
///
/// The cause is [`CancelReason::Shutdown`] when we closed ([`PeerHandle::close`]), else
/// [`CancelReason::ConnectionClosed`]; then the requests the disconnect policy lets finish run
/// on until its bound.
async fn close(
    peer: &PeerHandle,
    grace: Duration,
    stop_writing: CancellationToken,
    mut writer_task: JoinHandle<()>,
) {
    let shared = &peer.shared;
    let deadline = tokio::time::Instant::now() + grace;
    if shared.closing.load(std::sync::atomic::Ordering::Relaxed) {
        shared.canceller.cancel(CancelReason::Shutdown);
        shared.survivors_canceller.cancel(CancelReason::Shutdown);
    } else {
        shared.canceller.cancel(CancelReason::ConnectionClosed);
        let survivors = shared.survivors_canceller.clone();
        let bound = shared.disconnect.bound(grace);
        if shared.disconnect == super::DisconnectPolicy::default() || bound.is_zero() {
            survivors.cancel(CancelReason::ConnectionClosed);
        } else {
            tracing::info!(
                ?bound,
                "the peer went away; requests the disconnect policy names run on until done or for at most the bound"
            );
            tokio::spawn(async move {
                tokio::time::sleep(bound).await;
                survivors.cancel(CancelReason::ConnectionClosed);
            });
        }
    }
    shared.fail_pending();
    if tokio::time::timeout_at(deadline, shared.limits.all_answered())
        .await
        .is_err()
    {
        tracing::warn!(
            in_flight = shared.registry.len(),
            "closing with handlers still running after the grace period; their answers are dropped"
        );
    }
    stop_writing.cancel();
    // Let the writer run at least once before the deadline is checked: what is already queued
    // goes out if the peer can take it without waiting, even with no grace at all.
    tokio::task::yield_now().await;
    if tokio::time::timeout_at(deadline, &mut writer_task)
        .await
        .is_err()
    {
        tracing::warn!(
            queued_bytes = shared.outbox.queued(),
            "the peer did not take our last messages within the grace period; dropped them"
        );
        writer_task.abort();
    }
    shared.outbox.close();
    shared.limits.close();
}
