//! Entry points for cancelkit's fuzz targets (`fuzz/`) into crate-private code: the frame
//! decoders and JSON-RPC message classification.
//!
//! Not a public API and not covered by semver: the signatures here are owned types so that the
//! fuzz harness (`fuzz/harness`, crate `cancelkit-fuzz`) does not depend on how the peer module
//! is organised inside.

use bytes::BytesMut;
use tokio_util::codec::Decoder;

use crate::peer::Framing;
use crate::peer::framing::{Frame, FrameDecoder};
use crate::peer::wire::{self, Incoming};
use crate::protocol::jsonrpc::RequestId;

/// One decoded frame: `Ok(message bytes)`, or `Err(why)` for a frame the decoder rejected.
pub type DecodedFrame = Result<Vec<u8>, &'static str>;

/// Runs the peer's frame decoder (newline-delimited when `lines`, else `Content-Length`) with
/// `max_len` over a byte stream that arrives in `chunks`, exactly as the peer's reader drives
/// it: `decode` after every read until it yields nothing, then at the end of the stream
/// `decode_eof` until it yields nothing.
///
/// Returns the frames completed by each chunk, plus one last entry for those completed at the
/// end of the stream (`chunks.len() + 1` entries).
pub fn decode_chunks(lines: bool, max_len: usize, chunks: &[&[u8]]) -> Vec<Vec<DecodedFrame>> {
    let framing = if lines {
        Framing::Lines
    } else {
        Framing::ContentLength
    };
    let mut decoder = FrameDecoder::new(framing, max_len);
    let mut buf = BytesMut::new();
    let owned = |frame: Frame| match frame {
        Frame::Message(bytes) => Ok(bytes.to_vec()),
        Frame::Rejected(why) => Err(why),
    };
    let mut out = Vec::with_capacity(chunks.len() + 1);
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        let mut frames = Vec::new();
        while let Some(frame) = decoder.decode(&mut buf).expect("decoding never fails") {
            frames.push(owned(frame));
        }
        out.push(frames);
    }
    let mut frames = Vec::new();
    while let Some(frame) = decoder.decode_eof(&mut buf).expect("decoding never fails") {
        frames.push(owned(frame));
    }
    out.push(frames);
    out
}

/// What the peer's reader makes of one frame (an owned summary of its classification).
#[derive(Debug, Clone, PartialEq)]
pub enum Classified {
    /// A request: its id, method and params (raw JSON text).
    Request {
        /// The request id.
        id: RequestId,
        /// The method name.
        method: String,
        /// The params' raw JSON text, if present.
        params: Option<String>,
    },
    /// A notification: method and params (raw JSON text).
    Notification {
        /// The method name.
        method: String,
        /// The params' raw JSON text, if present.
        params: Option<String>,
    },
    /// A response: `Ok(result raw JSON)` or `Err(error code)`.
    Response {
        /// The id of the request it answers.
        id: RequestId,
        /// The result's raw JSON text, or the error's code.
        outcome: Result<String, i64>,
    },
    /// An invalid message, answered with an error (code) carrying `id` when it could be read.
    Invalid {
        /// The id the error response carries (`None`: `null`).
        id: Option<RequestId>,
        /// The JSON-RPC error code of that response.
        code: i64,
    },
    /// A message that is dropped without an answer, and why.
    Ignored(&'static str),
}

/// Classifies one frame as the peer's reader does.
pub fn classify(frame: &[u8]) -> Classified {
    match wire::parse(frame) {
        Incoming::Request { id, method, params } => Classified::Request {
            id,
            method: method.into_owned(),
            params: params.map(|p| p.get().to_owned()),
        },
        Incoming::Notification { method, params } => Classified::Notification {
            method: method.into_owned(),
            params: params.map(|p| p.get().to_owned()),
        },
        Incoming::Response { id, outcome } => Classified::Response {
            id,
            outcome: outcome
                .map(|r| r.get().to_owned())
                .map_err(|e| e.code.code()),
        },
        Incoming::Invalid { id, error } => Classified::Invalid {
            id,
            code: error.code.code(),
        },
        Incoming::Ignored(why) => Classified::Ignored(why),
    }
}
