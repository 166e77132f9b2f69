//! Our side of the transport: a bounded queue of outgoing messages ([`Outbox`]) and the task
//! that hands it to the transport's sink ([`write_loop`]).
//!
//! Everything we send — answers, errors, our requests and notifications, cancels — waits in the
//! outbox until the writer has written it. The outbox holds at most its byte budget: when the
//! peer stops reading, the outbox fills, and whoever wants to send waits (the reader stops
//! reading the peer's input, handlers wait to answer). If the peer reads nothing for the write
//! timeout, the connection is closed and everything in flight is cancelled.

use std::time::Duration;

use futures_util::{Sink, SinkExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::budget::Budget;
use super::transport::Outbound;

/// One message waiting to be written, with the room it took in the budget.
pub(crate) struct Queued {
    message: Outbound,
    cost: u32,
}

/// The queue of outgoing messages.
#[derive(Debug)]
pub(crate) struct Outbox {
    /// Unbounded as a channel, bounded by `budget`: nothing is queued without first taking its
    /// room (except cancels, see [`Outbox::send_anyway`]), and the writer gives the room back
    /// once the bytes are written.
    tx: mpsc::UnboundedSender<Queued>,
    budget: Budget,
}

/// What [`Outbox::try_send`] did.
pub(crate) enum TrySend {
    /// Queued.
    Sent,
    /// No room now: the message is handed back.
    Full(Outbound),
    /// The connection is closed.
    Closed,
}

impl Outbox {
    /// An outbox holding at most `max_bytes` (plus a small overhead per message), and the
    /// receiving end for [`write_loop`].
    pub(crate) fn new(max_bytes: usize) -> (Self, mpsc::UnboundedReceiver<Queued>) {
        // Bounded by `budget` (see the `tx` field).
        let (tx, rx) = mpsc::unbounded_channel();
        let budget = Budget::new(max_bytes);
        (Self { tx, budget }, rx)
    }

    fn cost(&self, message: &Outbound) -> u32 {
        self.budget.cost_of_bytes(message.bytes().len())
    }

    fn push(&self, message: Outbound, cost: u32) -> bool {
        match self.tx.send(Queued { message, cost }) {
            Ok(()) => true,
            Err(unsent) => {
                self.budget.give_back(unsent.0.cost);
                false
            }
        }
    }

    /// Queues a message, waiting for room; `false` if the connection is closed.
    pub(crate) async fn send(&self, message: Outbound) -> bool {
        let cost = self.cost(&message);
        self.budget.take(cost).await && self.push(message, cost)
    }

    /// Queues a message if there is room now.
    pub(crate) fn try_send(&self, message: Outbound) -> TrySend {
        let cost = self.cost(&message);
        if !self.budget.try_take(cost) {
            return if self.tx.is_closed() {
                TrySend::Closed
            } else {
                TrySend::Full(message)
            };
        }
        if self.push(message, cost) {
            TrySend::Sent
        } else {
            TrySend::Closed
        }
    }

    /// Room for `message` once there is some: a future to store and poll (for requests that
    /// could not be queued at once). `true` once the room is taken.
    pub(crate) fn room_for(
        &self,
        message: &Outbound,
    ) -> (
        u32,
        impl std::future::Future<Output = bool> + Send + 'static,
    ) {
        let cost = self.cost(message);
        (cost, self.budget.take_owned(cost))
    }

    /// Queues a message whose room was taken with [`Outbox::room_for`].
    pub(crate) fn send_taken(&self, message: Outbound, cost: u32) -> bool {
        self.push(message, cost)
    }

    /// Queues a message now, over the budget if need be. Only for cancel notifications, which
    /// are sent from `Drop` and cannot wait: there is at most one per request of ours, so
    /// their number is bounded by the requests the application holds.
    pub(crate) fn send_anyway(&self, message: Outbound) -> bool {
        let cost = self.cost(&message);
        let cost = if self.budget.try_take(cost) { cost } else { 0 };
        self.push(message, cost)
    }

    /// The budget, for the writer to give room back.
    pub(crate) fn budget(&self) -> Budget {
        self.budget.clone()
    }

    /// Refuses everything from now on and wakes whoever waits for room.
    pub(crate) fn close(&self) {
        self.budget.close();
    }

    /// Bytes (with overhead) queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.budget.in_use()
    }
}

/// The most bytes of messages handed to the sink before it is flushed.
const BATCH: usize = 1 << 20;

/// Hands queued messages to `sink`, as many as are queued (up to [`BATCH`]) before each flush,
/// until `stop`; then hands over what is still queued and closes the sink. A sink error, or a
/// flush that does not complete within `write_timeout` (the peer is not reading), closes the
/// connection (`close_reading`).
pub(crate) async fn write_loop<S>(
    mut sink: S,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    budget: Budget,
    write_timeout: Duration,
    stop: CancellationToken,
    close_reading: CancellationToken,
) where
    S: Sink<Outbound, Error = std::io::Error> + Unpin,
{
    loop {
        let first = tokio::select! {
            biased;
            message = rx.recv() => message,
            () = stop.cancelled() => None,
        };
        let Some(first) = first else {
            break;
        };
        let mut cost = first.cost;
        let written = tokio::time::timeout(write_timeout, async {
            let mut bytes = first.message.bytes().len();
            sink.feed(first.message).await?;
            // Everything queued meanwhile goes out in the same write.
            while bytes < BATCH
                && let Ok(message) = rx.try_recv()
            {
                bytes += message.message.bytes().len();
                cost += message.cost;
                sink.feed(message.message).await?;
            }
            sink.flush().await
        })
        .await;
        budget.give_back(cost);
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot write to the peer; closing the connection");
                budget.close();
                close_reading.cancel();
                return;
            }
            Err(_) => {
                tracing::warn!(
                    ?write_timeout,
                    "the peer has not read our output for the write timeout; closing the connection"
                );
                budget.close();
                close_reading.cancel();
                return;
            }
        }
    }
    // Stopping: hand over what is still queued (the reader bounds this by the shutdown grace).
    budget.close();
    while let Ok(message) = rx.try_recv() {
        if sink.feed(message.message).await.is_err() {
            return;
        }
    }
    let _ = sink.close().await;
}
