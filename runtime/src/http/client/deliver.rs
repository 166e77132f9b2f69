//! The way back: every message from the server goes into the peer's input as one line, whole
//! and in order, through a queue bounded in bytes that a single writer task empties.

use cancelkit_protocol::jsonrpc::RequestId;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::bridge::{Shared, Signal};
use super::{failure, lines};
use crate::peer::budget::Budget;
use crate::peer::wire::{self, Incoming};

/// The request whose answer a stream is read for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Awaited<'a> {
    pub(super) id: &'a RequestId,
    pub(super) method: &'a str,
}

/// One item on its way into the peer's input.
pub(super) enum ToPeer {
    /// A message with its line end, and the room it took.
    Line(Vec<u8>, u32),
    /// End the input (after what is queued before).
    Close,
}

/// What delivering a server's message did.
#[derive(Debug)]
pub(super) enum Delivered {
    /// Given to the peer; `answered` when it was the awaited response.
    Passed { answered: bool },
    /// Not a JSON-RPC message: not delivered.
    Invalid(String),
    /// The bridge is stopping.
    Closed,
}

impl Shared {
    /// Queues one message (one line, without its end) for the peer's input, waiting for room
    /// while the peer does not read; `false` once the bridge stops or the input is closed.
    /// Cancel-safe: dropped while waiting, it has queued nothing.
    pub(super) async fn to_peer(&self, line: &[u8]) -> bool {
        let cost = self.unread.cost_of_bytes(line.len() + 1);
        let room = tokio::select! {
            biased;
            () = self.stop.cancelled() => false,
            taken = self.unread.take(cost) => taken,
        };
        if !room {
            return false;
        }
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
        if self.to_peer.send(ToPeer::Line(bytes, cost)).is_err() {
            self.unread.give_back(cost);
            return false;
        }
        true
    }

    /// Ends the peer's input once what is queued has been written: the peer closes.
    pub(super) fn close_peer_input(&self) {
        let _ = self.to_peer.send(ToPeer::Close);
    }

    /// Delivers a server's message (or batch) to the peer, in order.
    pub(super) async fn deliver(&self, data: &str, awaited: Option<Awaited<'_>>) -> Delivered {
        let data = data.trim();
        if !data.starts_with('[') {
            return self.deliver_one(data, awaited).await;
        }
        let batch: Vec<&RawValue> = match serde_json::from_str(data) {
            Ok(batch) => batch,
            Err(e) => {
                return Delivered::Invalid(format!(
                    "a batch from the server that is not JSON ({e}): {}",
                    failure::excerpt(data.as_bytes())
                ));
            }
        };
        let mut answered = false;
        for message in batch {
            match self.deliver_one(message.get(), awaited).await {
                Delivered::Passed { answered: yes } => answered |= yes,
                other => return other,
            }
        }
        Delivered::Passed { answered }
    }

    async fn deliver_one(&self, text: &str, awaited: Option<Awaited<'_>>) -> Delivered {
        let line = lines::one_line(text);
        // What the peer gets instead of the server's message, if anything.
        let mut instead = None;
        let response = match wire::parse(line.as_bytes()) {
            Incoming::Response { id, outcome } => {
                let ours = awaited.filter(|a| *a.id == id);
                if let Some(awaited) = ours {
                    instead = self
                        .learned
                        .learn(awaited.method, &outcome)
                        .map(|result| wire::result(&id, &result));
                }
                Some((id, ours.is_some()))
            }
            Incoming::Request { .. } | Incoming::Notification { .. } => None,
            Incoming::Invalid { error, .. } => {
                let detail = error
                    .data
                    .as_ref()
                    .map(Value::to_string)
                    .unwrap_or_default();
                return Delivered::Invalid(format!(
                    "the server sent something that is not a JSON-RPC message ({} {detail}): {}",
                    error.message,
                    failure::excerpt(text.as_bytes())
                ));
            }
            Incoming::Ignored(why) => {
                return Delivered::Invalid(format!(
                    "the server sent {why}: {}",
                    failure::excerpt(text.as_bytes())
                ));
            }
        };
        if !self
            .to_peer(instead.as_deref().unwrap_or(line.as_bytes()))
            .await
        {
            return Delivered::Closed;
        }
        // Only once the response is queued for the peer: a response on another request's
        // stream (a resumed stream may carry one) finishes that request too.
        let Some((id, ours)) = response else {
            return Delivered::Passed { answered: false };
        };
        if let Some(entry) = self.untrack(&id)
            && !ours
        {
            let _ = entry.signal.send(Signal::Answered);
        }
        Delivered::Passed { answered: ours }
    }
}

/// Writes the queued messages into the peer's input, each whole, until told to close it or
/// the bridge stops; then ends the input.
pub(super) async fn write_to_peer(
    mut pipe: WriteHalf<DuplexStream>,
    mut queued: mpsc::UnboundedReceiver<ToPeer>,
    unread: Budget,
    stop: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            next = queued.recv() => next,
        };
        let Some(ToPeer::Line(bytes, cost)) = next else {
            break;
        };
        let written = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            written = pipe.write_all(&bytes) => written,
        };
        unread.give_back(cost);
        if written.is_err() {
            break;
        }
    }
    unread.close();
    let _ = pipe.shutdown().await;
}
