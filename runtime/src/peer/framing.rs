//! Frame boundaries: newline-delimited JSON (ACP, MCP stdio) and `Content-Length` headers (LSP).
//!
//! The decoders never fail on content: an oversized or malformed frame becomes a
//! [`Frame::Rejected`] item and decoding resumes at the next frame, so bad input costs one error
//! response, never the connection. Only I/O errors end the stream.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// How messages are delimited on the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One JSON message per line (`\n`, optionally `\r\n`): ACP, MCP over stdio.
    Lines,
    /// `Content-Length: N\r\n\r\n` followed by N bytes: LSP.
    ContentLength,
}

/// One decoded frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A complete message's bytes.
    Message(Bytes),
    /// A frame that was skipped: too long, or with unreadable headers.
    Rejected(&'static str),
}

/// Decoder for either framing with a maximum message size.
#[derive(Debug)]
pub(crate) struct FrameDecoder {
    framing: Framing,
    max_len: usize,
    /// How far the buffer has been searched for the end of a line (Lines) or of a header
    /// block (Content-Length), so bytes arriving one by one are not searched again and again.
    scanned: usize,
    /// Lines: inside an oversized line, dropping bytes until its newline.
    discarding: bool,
    /// Content-Length: body bytes still to skip for an oversized message.
    skip: usize,
    /// Content-Length: inside a header block longer than [`MAX_HEADERS`], already rejected,
    /// dropping bytes until its end.
    skipping_headers: bool,
    /// Content-Length: the announced length of the body being awaited.
    body_len: Option<usize>,
}

impl FrameDecoder {
    pub(crate) fn new(framing: Framing, max_len: usize) -> Self {
        Self {
            framing,
            max_len,
            scanned: 0,
            discarding: false,
            skip: 0,
            skipping_headers: false,
            body_len: None,
        }
    }

    fn decode_line(&mut self, buf: &mut BytesMut) -> Option<Frame> {
        loop {
            let Some(offset) = buf[self.scanned..].iter().position(|b| *b == b'\n') else {
                // A pending `\r` may be the start of the line's `\r\n`: it does not count
                // towards the limit until the next byte says so, or the frame's fate would
                // depend on where a read happens to end.
                let pending = buf.len() - usize::from(buf.last() == Some(&b'\r'));
                if self.discarding || pending > self.max_len {
                    let first = !self.discarding;
                    self.discarding = true;
                    buf.clear();
                    self.scanned = 0;
                    if first {
                        return Some(Frame::Rejected("message exceeds the maximum frame size"));
                    }
                } else {
                    self.scanned = buf.len();
                }
                return None;
            };
            let end = self.scanned + offset;
            let mut line = buf.split_to(end + 1);
            self.scanned = 0;
            if std::mem::take(&mut self.discarding) {
                continue; // the tail of a line already reported as too long
            }
            line.truncate(end);
            if line.last() == Some(&b'\r') {
                line.truncate(end - 1);
            }
            if line.len() > self.max_len {
                return Some(Frame::Rejected("message exceeds the maximum frame size"));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue; // blank lines separate nothing
            }
            return Some(Frame::Message(line.freeze()));
        }
    }

    fn decode_content_length(&mut self, buf: &mut BytesMut) -> Option<Frame> {
        loop {
            if self.skip > 0 {
                let n = self.skip.min(buf.len());
                buf.advance(n);
                self.skip -= n;
                if self.skip > 0 {
                    return None;
                }
            }
            if self.skipping_headers {
                match self.find_headers_end(buf) {
                    Some(end) => {
                        buf.advance(end + 4);
                        self.skipping_headers = false;
                    }
                    None => {
                        // Keep what could be the start of a terminator split across reads.
                        buf.advance(buf.len().saturating_sub(3));
                        self.scanned = buf.len();
                        return None;
                    }
                }
            }
            if let Some(len) = self.body_len {
                if buf.len() < len {
                    buf.reserve(len - buf.len());
                    return None;
                }
                self.body_len = None;
                return Some(Frame::Message(buf.split_to(len).freeze()));
            }
            // A header block longer than MAX_HEADERS is rejected once and skipped to its end,
            // whether it arrives at once or in pieces (it is known to be too long as soon as
            // MAX_HEADERS + 4 bytes hold no terminator).
            let Some(end) = self.find_headers_end(buf) else {
                if buf.len() > MAX_HEADERS + 3 {
                    self.skipping_headers = true;
                    buf.advance(buf.len() - 3);
                    self.scanned = buf.len();
                    return Some(Frame::Rejected(HEADERS_TOO_LONG));
                }
                return None;
            };
            if end > MAX_HEADERS {
                buf.advance(end + 4);
                return Some(Frame::Rejected(HEADERS_TOO_LONG));
            }
            let headers = buf.split_to(end + 4);
            match content_length(&headers[..end]) {
                Some(len) if len > self.max_len => {
                    self.skip = len;
                    return Some(Frame::Rejected("message exceeds the maximum frame size"));
                }
                Some(len) => self.body_len = Some(len),
                None => return Some(Frame::Rejected("missing or invalid Content-Length header")),
            }
        }
    }
}

/// The longest `Content-Length` header block accepted.
const MAX_HEADERS: usize = 8 * 1024;

const HEADERS_TOO_LONG: &str = "Content-Length headers longer than 8 KiB";

impl FrameDecoder {
    /// Where the header block at the front of `buf` ends (the offset of its `\r\n\r\n`),
    /// searching only what was not searched before (less three bytes, for a terminator split
    /// across reads).
    fn find_headers_end(&mut self, buf: &[u8]) -> Option<usize> {
        let from = self.scanned.saturating_sub(3).min(buf.len());
        match buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            Some(offset) => {
                self.scanned = 0;
                Some(from + offset)
            }
            None => {
                self.scanned = buf.len();
                None
            }
        }
    }
}

/// The value of the `Content-Length` header in a header block.
fn content_length(headers: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(headers).ok()?;
    text.split("\r\n").find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())?
    })
}

impl Decoder for FrameDecoder {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        Ok(match self.framing {
            Framing::Lines => self.decode_line(buf),
            Framing::ContentLength => self.decode_content_length(buf),
        })
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        // A last line without its newline still counts.
        if self.framing == Framing::Lines && !self.discarding && !buf.is_empty() {
            let line = buf.split().freeze();
            self.scanned = 0;
            if line.len() > self.max_len {
                // A pending `\r` did not count while it could start a `\r\n`; now it is data.
                return Ok(Some(Frame::Rejected(
                    "message exceeds the maximum frame size",
                )));
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some(Frame::Message(line)));
            }
        }
        buf.clear();
        Ok(None)
    }
}

/// Appends one framed message to `out`.
pub(crate) fn encode(framing: Framing, message: &[u8], out: &mut impl BufMut) {
    match framing {
        Framing::Lines => {
            out.put_slice(message);
            out.put_u8(b'\n');
        }
        Framing::ContentLength => {
            out.put_slice(b"Content-Length: ");
            out.put_slice(message.len().to_string().as_bytes());
            out.put_slice(b"\r\n\r\n");
            out.put_slice(message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(framing: Framing, max: usize, input: &[u8]) -> Vec<Frame> {
        let mut decoder = FrameDecoder::new(framing, max);
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        // Feed one byte at a time: frame boundaries must not depend on read sizes.
        for byte in input {
            buf.extend_from_slice(&[*byte]);
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                frames.push(frame);
            }
        }
        while let Some(frame) = decoder.decode_eof(&mut buf).unwrap() {
            frames.push(frame);
        }
        frames
    }

    fn msg(text: &str) -> Frame {
        Frame::Message(Bytes::copy_from_slice(text.as_bytes()))
    }

    #[test]
    fn lines_split_on_newlines_and_skip_blank_lines() {
        let frames = decode_all(
            Framing::Lines,
            64,
            b"{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}",
        );
        assert_eq!(
            frames,
            vec![msg("{\"a\":1}"), msg("{\"b\":2}"), msg("{\"c\":3}")]
        );
    }

    #[test]
    fn an_oversized_line_is_rejected_once_and_the_next_line_still_arrives() {
        let mut input = vec![b'x'; 200];
        input.extend_from_slice(b"\n{\"ok\":true}\n");
        let frames = decode_all(Framing::Lines, 64, &input);
        assert_eq!(
            frames,
            vec![
                Frame::Rejected("message exceeds the maximum frame size"),
                msg("{\"ok\":true}")
            ]
        );
    }

    #[test]
    fn content_length_frames_and_recovery() {
        let mut input = Vec::new();
        encode(Framing::ContentLength, b"{\"a\":1}", &mut input);
        input.extend_from_slice(b"Content-Type: x\r\n\r\n"); // no length
        input.extend_from_slice(b"Content-Length: 100\r\n\r\n");
        input.extend_from_slice(&[b'y'; 100]);
        encode(Framing::ContentLength, b"{\"b\":2}", &mut input);
        let frames = decode_all(Framing::ContentLength, 64, &input);
        assert_eq!(
            frames,
            vec![
                msg("{\"a\":1}"),
                Frame::Rejected("missing or invalid Content-Length header"),
                Frame::Rejected("message exceeds the maximum frame size"),
                msg("{\"b\":2}"),
            ]
        );
    }

    /// Feeds `input` in reads of `size` bytes.
    fn decode_in_reads(framing: Framing, max: usize, input: &[u8], size: usize) -> Vec<Frame> {
        let mut decoder = FrameDecoder::new(framing, max);
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for chunk in input.chunks(size) {
            buf.extend_from_slice(chunk);
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                frames.push(frame);
            }
        }
        while let Some(frame) = decoder.decode_eof(&mut buf).unwrap() {
            frames.push(frame);
        }
        frames
    }

    #[test]
    fn a_line_of_the_maximum_length_passes_whether_or_not_a_read_ends_before_its_newline() {
        // Found by the framing_lines fuzzer: "abcd\r" pending was counted as 5 bytes.
        for size in 1..=6 {
            assert_eq!(
                decode_in_reads(Framing::Lines, 4, b"abcd\r\nxy\n", size),
                vec![msg("abcd"), msg("xy")],
                "reads of {size}"
            );
        }
        assert_eq!(
            decode_in_reads(Framing::Lines, 4, b"abcde\r\n", 1),
            vec![Frame::Rejected("message exceeds the maximum frame size")]
        );
        // At the end of the stream a last `\r` is data, and counts (found by the fuzzer).
        assert_eq!(
            decode_in_reads(Framing::Lines, 1, b"x\r", 1),
            vec![Frame::Rejected("message exceeds the maximum frame size")]
        );
        assert_eq!(
            decode_in_reads(Framing::Lines, 2, b"x\r", 1),
            vec![msg("x\r")]
        );
    }

    #[test]
    fn an_over_long_header_block_is_rejected_once_whatever_the_read_sizes() {
        // Found by the framing_content_length fuzzer: rejected once when read at once, twice
        // (and differently) when read in pieces.
        let mut input = vec![b'x'; 9000];
        input.extend_from_slice(b"\r\n\r\n");
        encode(Framing::ContentLength, b"{}", &mut input);
        for size in [1, 3, 255, 4096, input.len()] {
            assert_eq!(
                decode_in_reads(Framing::ContentLength, 64, &input, size),
                vec![Frame::Rejected(HEADERS_TOO_LONG), msg("{}")],
                "reads of {size}"
            );
        }
        // Exactly at the limit is fine, also when the terminator arrives after it.
        let mut at_limit = b"Content-Length: 2\r\n".to_vec();
        at_limit.resize(MAX_HEADERS, b' ');
        at_limit.extend_from_slice(b"\r\n\r\n{}");
        for size in [1, 7, at_limit.len()] {
            assert_eq!(
                decode_in_reads(Framing::ContentLength, 64, &at_limit, size),
                vec![msg("{}")],
                "reads of {size}"
            );
        }
    }

    #[test]
    fn header_names_are_case_insensitive() {
        assert_eq!(content_length(b"content-length: 12"), Some(12));
        assert_eq!(
            content_length(b"Content-Type: a\r\nCONTENT-LENGTH:7"),
            Some(7)
        );
        assert_eq!(content_length(b"Content-Length: -1"), None);
    }
}
