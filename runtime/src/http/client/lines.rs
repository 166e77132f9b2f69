//! Lines in both directions: the peer's output cut into messages (bounded), and a server's
//! message made one line for the peer's input.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use cancelkit_protocol::jsonrpc::RequestId;
use tokio_util::codec::Decoder;

/// How much of an over-long line is kept, to find its request id.
pub(super) const HEAD_BYTES: usize = 256;

/// One line of the peer's output.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// A message, without its line end.
    Message(Bytes),
    /// A line longer than the limit, skipped: its first [`HEAD_BYTES`] bytes.
    TooLong(Bytes),
}

/// Cuts the peer's output into lines of at most `max` bytes; a longer line becomes one
/// [`Line::TooLong`] and the decoder resumes at the next line. Only I/O errors end the stream.
#[derive(Debug)]
pub(super) struct OutputLines {
    max: usize,
    /// How far the buffer has been searched for a line end.
    scanned: usize,
    /// Inside an over-long line (already reported), dropping bytes until its end.
    discarding: bool,
}

impl OutputLines {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max,
            scanned: 0,
            discarding: false,
        }
    }

    /// The limit in bytes.
    pub(super) fn limit(&self) -> usize {
        self.max
    }
}

impl Decoder for OutputLines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        loop {
            let Some(offset) = buf[self.scanned..].iter().position(|b| *b == b'\n') else {
                if self.discarding {
                    buf.clear();
                    self.scanned = 0;
                } else if buf.len() > self.max + 1 {
                    // `+ 1`: a `\r` that may open the line's `\r\n`.
                    self.discarding = true;
                    let head = Bytes::copy_from_slice(&buf[..HEAD_BYTES.min(buf.len())]);
                    buf.clear();
                    self.scanned = 0;
                    return Ok(Some(Line::TooLong(head)));
                } else {
                    self.scanned = buf.len();
                }
                return Ok(None);
            };
            let end = self.scanned + offset;
            let mut line = buf.split_to(end + 1);
            self.scanned = 0;
            if std::mem::take(&mut self.discarding) {
                continue;
            }
            line.truncate(end);
            if line.last() == Some(&b'\r') {
                line.truncate(end - 1);
            }
            if line.len() > self.max {
                line.truncate(HEAD_BYTES.min(line.len()));
                return Ok(Some(Line::TooLong(line.freeze())));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Ok(Some(Line::Message(line.freeze())));
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        if !self.discarding && !buf.iter().all(u8::is_ascii_whitespace) {
            let line = buf.split().freeze();
            self.scanned = 0;
            return Ok(Some(if line.len() > self.max {
                Line::TooLong(line.slice(..HEAD_BYTES.min(line.len())))
            } else {
                Line::Message(line)
            }));
        }
        buf.clear();
        Ok(None)
    }
}

/// The id of the request whose (over-long) message starts with `head`, if it is a request:
/// the first `"id":` member and a `"method"` member both in it. The peer writes `jsonrpc`,
/// `id` and `method` first.
pub(super) fn request_id_in(head: &[u8]) -> Option<RequestId> {
    let text = String::from_utf8_lossy(head);
    let start = text.find("\"id\":")? + 5;
    if !text.contains("\"method\"") {
        return None;
    }
    let rest = text[start..].trim_start();
    let token = if let Some(inside) = rest.strip_prefix('"') {
        let mut escaped = false;
        let end = inside.char_indices().find_map(|(i, c)| {
            if escaped {
                escaped = false;
                None
            } else if c == '\\' {
                escaped = true;
                None
            } else {
                (c == '"').then_some(i + 2)
            }
        })?;
        &rest[..end]
    } else {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '-'))
            .unwrap_or(rest.len());
        &rest[..end]
    };
    serde_json::from_str(token).ok()
}

/// A server's message as one line: valid JSON holds a raw line break only as whitespace
/// between tokens (inside strings they are escaped), so each becomes a space.
pub(super) fn one_line(text: &str) -> Cow<'_, str> {
    if text.contains(['\n', '\r']) {
        Cow::Owned(text.replace(['\n', '\r'], " "))
    } else {
        Cow::Borrowed(text)
    }
}
