//! The way back: every message from the server goes to the peer as a message, parsed once,
//! whole and in order, through a queue bounded in bytes that the peer takes from.

use std::pin::Pin;

use cancelkit_protocol::jsonrpc::RequestId;
use futures_util::Stream;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::bridge::{Shared, Signal};
use super::failure;
use crate::peer::budget::Budget;
use crate::peer::wire::{self, Incoming};
use crate::peer::{Inbound, Message};

/// The request whose answer a stream is read for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Awaited<'a> {
    pub(super) id: &'a RequestId,
    pub(super) method: &'a str,
}

/// One item on its way to the peer.
pub(super) enum ToPeer {
    /// A message, and the room it took.
    Message(Inbound, u32),
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
    /// Queues one message of `size` bytes for the peer, waiting for room while the peer does
    /// not take them; `false` once the bridge stops or the input is closed. Cancel-safe:
    /// dropped while waiting, it has queued nothing.
    pub(super) async fn to_peer(&self, message: Inbound, size: usize) -> bool {
        let cost = self.unread.cost_of_bytes(size);
        let room = tokio::select! {
            biased;
            () = self.stop.cancelled() => false,
            taken = self.unread.take(cost) => taken,
        };
        if !room {
            return false;
        }
        if self.to_peer.send(ToPeer::Message(message, cost)).is_err() {
            self.unread.give_back(cost);
            return false;
        }
        true
    }

    /// Queues an answer we made (a failure's error response) for the peer.
    pub(super) async fn answer_peer(&self, bytes: Vec<u8>) -> bool {
        let size = bytes.len();
        self.to_peer(Inbound::Frame(bytes.into()), size).await
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
        let (message, response) = match wire::parse(text.as_bytes()) {
            Incoming::Response { id, outcome } => {
                let ours = awaited.filter(|a| *a.id == id);
                // What the peer gets instead of the server's result, if anything.
                let instead = ours.and_then(|awaited| self.learned.learn(awaited.method, &outcome));
                let outcome = instead.map_or(outcome, Ok);
                let answered = (id.clone(), ours.is_some());
                (Message::Response { id, outcome }, Some(answered))
            }
            Incoming::Request { id, method, params } => {
                let method = method.into_owned();
                let params = params.map(ToOwned::to_owned);
                (Message::Request { id, method, params }, None)
            }
            Incoming::Notification { method, params } => {
                let method = method.into_owned();
                let params = params.map(ToOwned::to_owned);
                (Message::Notification { method, params }, None)
            }
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
        if !self.to_peer(Inbound::Message(message), text.len()).await {
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

/// The peer's input, as [`peer_input`] makes it.
pub(super) type PeerInput = Pin<Box<dyn Stream<Item = std::io::Result<Inbound>> + Send>>;

/// The peer's input: the queued messages, each given back its room as the peer takes it,
/// until told to close or the bridge stops.
pub(super) fn peer_input(
    queued: mpsc::UnboundedReceiver<ToPeer>,
    unread: Budget,
    stop: CancellationToken,
) -> PeerInput {
    let state = (queued, unread, stop);
    Box::pin(futures_util::stream::unfold(
        Some(state),
        |state| async move {
            let (mut queued, unread, stop) = state?;
            let next = tokio::select! {
                biased;
                () = stop.cancelled() => None,
                next = queued.recv() => next,
            };
            match next {
                Some(ToPeer::Message(message, cost)) => {
                    unread.give_back(cost);
                    Some((Ok(message), Some((queued, unread, stop))))
                }
                Some(ToPeer::Close) | None => {
                    unread.close();
                    None
                }
            }
        },
    ))
}
