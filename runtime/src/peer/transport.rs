//! The seam between the [`Peer`](super::Peer) core and what carries its messages.
//!
//! The core takes a [`Stream`] of [`Inbound`] messages and gives a [`Sink`] of [`Outbound`] ones
//! ([`PeerBuilder::serve`](super::PeerBuilder::serve)). Every rule and bound the peer applies —
//! cancels handled before the next message is read, in-flight bounds, the output budget and
//! its write timeout — lives in the core, so every transport gets the same ones.
//!
//! Two halves rather than one object (as rmcp's `Transport` is): the core reads and writes in two
//! tasks, so that a cancel is read and applied while a slow peer holds up our writes.
//!
//! - Byte streams (stdio, sockets, pipes): [`framed`] turns an `AsyncRead` and an `AsyncWrite`
//!   into the two halves, with newline-delimited or `Content-Length` [`Framing`] (tokio-util's
//!   `FramedRead` with our decoder in, one batching buffer out);
//!   [`PeerBuilder::connect`](super::PeerBuilder::connect) is `serve` over it.
//! - Message transports (the Streamable HTTP server) hand the core parsed messages
//!   ([`Inbound::Message`]) and route each outgoing message by its [`OutboundKind`] — the bytes
//!   are serialised once, by the core, and written as they are.

use std::borrow::Cow;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use cancelkit_protocol::jsonrpc::{ErrorCode, RequestId};
use futures_util::ready;
use futures_util::{Sink, Stream, StreamExt};
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::FramedRead;

use super::framing::{self, Frame, FrameDecoder, Framing};
use super::wire;
use crate::JsonRpcError;

/// One JSON-RPC message, parsed: the method and id read, the params and result kept as raw
/// JSON text for the handler to read into its own type.
#[derive(Debug)]
pub enum Message {
    /// A call that wants a response.
    Request {
        /// Its id.
        id: RequestId,
        /// Its method.
        method: String,
        /// Its params, as sent.
        params: Option<Box<RawValue>>,
    },
    /// A one-way message.
    Notification {
        /// Its method.
        method: String,
        /// Its params, as sent.
        params: Option<Box<RawValue>>,
    },
    /// An answer to a request.
    Response {
        /// The id of the request it answers.
        id: RequestId,
        /// Its result, or its error.
        outcome: Result<Box<RawValue>, JsonRpcError>,
    },
}

/// What a transport hands the core.
#[derive(Debug)]
pub enum Inbound {
    /// One message's bytes, not parsed yet (byte framings): the core parses them, answering
    /// what is not valid JSON-RPC as the specification says.
    Frame(Bytes),
    /// A message the transport has parsed already.
    Message(Message),
    /// A frame the transport could not take (too long, unreadable headers): answered with
    /// -32600 and this text as its data, and the connection goes on.
    Rejected(&'static str),
    /// A message on one of the transport's own channels (the Streamable HTTP server gives each
    /// 2026-07-28 request one). Its requests are keyed by channel and id, so clients that know
    /// nothing of each other may use the same ids; whatever the core sends for them (answers,
    /// and what their handlers send) goes out on the same channel ([`Outbound::channel`]).
    /// With an `owner`, its requests also count against that owner's share of the in-flight
    /// bounds ([`PeerBuilder::max_in_flight_per_owner`](super::PeerBuilder::max_in_flight_per_owner)).
    Channel {
        /// The channel, chosen by the transport; not 0, which is the connection's own.
        channel: u64,
        /// Who sent it (a session's user, a token's subject), if the transport knows.
        owner: Option<Owner>,
        /// The message.
        message: Message,
    },
    /// Whoever waits on `channel` for the answer to request `id` has gone (2026-07-28: the
    /// client closed the request's response stream, which is how it cancels): the request is
    /// cancelled as a cancel from the peer would, and no answer is owed.
    Abandoned {
        /// The channel.
        channel: u64,
        /// The request's id.
        id: RequestId,
        /// Why, for the handler and the log.
        reason: Option<String>,
    },
}

/// Who sent a message, as the transport names them (a user, a token's subject).
pub type Owner = std::sync::Arc<str>;

/// What an outgoing message is, for a transport that routes messages (an HTTP server sends
/// each on the stream it belongs to).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutboundKind {
    /// An answer to the peer's request `id` (`None`: to a message whose id could not be read).
    Response {
        /// The id of the request answered.
        id: Option<RequestId>,
    },
    /// A request of ours.
    Request {
        /// Its id.
        id: RequestId,
    },
    /// Our cancel of our request `id`.
    Cancel {
        /// The id of the request of ours it cancels.
        id: RequestId,
    },
    /// A notification whose params name a progress `token` (MCP `notifications/progress`).
    Progress {
        /// The token.
        token: RequestId,
    },
    /// Any other notification.
    Notification,
}

/// A message of ours, serialised once: its bytes (one JSON object, no framing) and its kind.
#[derive(Debug, Clone)]
pub struct Outbound {
    kind: OutboundKind,
    channel: u64,
    /// Kept as the serialiser wrote it: a byte framing copies it into its write buffer, and
    /// only a transport that keeps it turns it into [`Bytes`].
    bytes: Vec<u8>,
}

impl Outbound {
    pub(crate) fn new(kind: OutboundKind, bytes: Vec<u8>) -> Self {
        Self {
            kind,
            channel: 0,
            bytes,
        }
    }

    /// The same message, on `channel`.
    pub(crate) fn on(mut self, channel: u64) -> Self {
        self.channel = channel;
        self
    }

    /// The channel it goes out on: the one the request it answers came on, or the one of the
    /// handler that sent it; 0 for the connection's own.
    pub fn channel(&self) -> u64 {
        self.channel
    }

    /// What the message is.
    pub fn kind(&self) -> &OutboundKind {
        &self.kind
    }

    /// Its bytes: one JSON-RPC message, without framing.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its bytes, taken.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from(self.bytes)
    }
}

impl Message {
    /// The form the core handles: the method and params borrowed, the id and a response's
    /// outcome taken (what is left in their place allocates nothing).
    pub(crate) fn as_incoming(&mut self) -> wire::Incoming<'_> {
        let take_id = |id: &mut RequestId| std::mem::replace(id, RequestId::Number(0));
        match self {
            Message::Request { id, method, params } => wire::Incoming::Request {
                id: take_id(id),
                method: Cow::Borrowed(method),
                params: params.as_deref(),
            },
            Message::Notification { method, params } => wire::Incoming::Notification {
                method: Cow::Borrowed(method),
                params: params.as_deref(),
            },
            Message::Response { id, outcome } => wire::Incoming::Response {
                id: take_id(id),
                outcome: std::mem::replace(
                    outcome,
                    Err(JsonRpcError::new(ErrorCode::InternalError, String::new())),
                ),
            },
        }
    }
}

/// The two halves of a transport over bytes: `reader` cut into frames (none longer than
/// `max_len`; a longer one is rejected and skipped), and messages framed onto `writer`, as
/// many as are queued in one write.
pub fn framed<R, W>(
    reader: R,
    writer: W,
    framing: Framing,
    max_len: usize,
) -> (FramedIncoming<R>, FramedOutgoing<W>)
where
    R: AsyncRead,
    W: AsyncWrite,
{
    let incoming = FramedIncoming {
        inner: FramedRead::new(reader, FrameDecoder::new(framing, max_len)),
    };
    let outgoing = FramedOutgoing {
        writer,
        framing,
        buffer: Vec::with_capacity(INITIAL_BUFFER),
        written: 0,
    };
    (incoming, outgoing)
}

/// The incoming half of a byte transport: see [`framed`].
#[derive(Debug)]
pub struct FramedIncoming<R> {
    inner: FramedRead<R, FrameDecoder>,
}

impl<R: AsyncRead + Unpin> Stream for FramedIncoming<R> {
    type Item = std::io::Result<Inbound>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx).map(|frame| {
            frame.map(|frame| {
                frame.map(|frame| match frame {
                    Frame::Message(bytes) => Inbound::Frame(bytes),
                    Frame::Rejected(why) => Inbound::Rejected(why),
                })
            })
        })
    }
}

/// Messages gathered into one write at most (bytes); beyond, the sink writes before it takes
/// more.
const BATCH: usize = 1 << 20;

/// The most a writer keeps of its write buffer between writes.
const IDLE_BUFFER: usize = 64 * 1024;

/// A new write buffer's capacity.
const INITIAL_BUFFER: usize = 8 * 1024;

/// The outgoing half of a byte transport: see [`framed`]. Messages are framed into one buffer
/// and written together at each flush. (tokio-util's `FramedWrite` did the same 8–9 % slower
/// for 4 KiB messages in the peer benchmark, interleaved runs on one machine.)
#[derive(Debug)]
pub struct FramedOutgoing<W> {
    writer: W,
    framing: Framing,
    buffer: Vec<u8>,
    /// How much of `buffer` is written.
    written: usize,
}

impl<W: AsyncWrite + Unpin> FramedOutgoing<W> {
    fn poll_write_buffer(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.written < self.buffer.len() {
            let n =
                ready!(Pin::new(&mut self.writer).poll_write(cx, &self.buffer[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.buffer.clear();
        self.written = 0;
        if self.buffer.capacity() > IDLE_BUFFER {
            // A burst (or one huge message) is over: a connection does not keep its buffer
            // (up to a megabyte) for the rest of its life.
            self.buffer = Vec::with_capacity(INITIAL_BUFFER);
        }
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> Sink<Outbound> for FramedOutgoing<W> {
    type Error = std::io::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.buffer.len() >= BATCH {
            return self.poll_write_buffer(cx);
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(mut self: Pin<&mut Self>, item: Outbound) -> std::io::Result<()> {
        let this = &mut *self;
        framing::encode(this.framing, &item.bytes, &mut this.buffer);
        Ok(())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_write_buffer(cx))?;
        Pin::new(&mut self.writer).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        Pin::new(&mut self.writer).poll_shutdown(cx)
    }
}
