//! Targets `framing_lines` and `framing_content_length`: the peer's frame decoders.
//!
//! Input: byte 0 picks the maximum frame length (0-254, or 255 for 16 MiB), byte 1 seeds how
//! the rest, the byte stream, is cut into reads. Checks:
//!
//! - no panic;
//! - the frames are the same whether the stream arrives at once, one byte at a time, or in
//!   pseudo-random reads of 1-16 bytes (frame boundaries must not depend on read sizes);
//! - no message is longer than the maximum, and (lines) none holds a newline or is blank;
//! - the frames match a reference decoder written from the framing rules below, so a rejected
//!   frame costs only itself and decoding resumes at the next one.
//!
//! Lines: the stream splits at `\n`; one `\r` before it is dropped; blank lines are skipped; a
//! line longer than the maximum is rejected; a last line without `\n` still counts.
//! Content-Length: a header block ends at `\r\n\r\n` and must hold a valid `Content-Length`
//! (else rejected); a body longer than the maximum is rejected and skipped; a header block
//! longer than 8 KiB is rejected once and skipped to its end; an incomplete frame at the end of the
//! stream is dropped.

use cancelkit::__fuzz::{DecodedFrame, decode_chunks};

/// The largest header block the Content-Length decoder waits for.
const MAX_HEADERS: usize = 8 * 1024;

/// Target `framing_lines`.
pub fn lines(data: &[u8]) {
    check(true, data);
}

/// Target `framing_content_length`.
pub fn content_length(data: &[u8]) {
    check(false, data);
}

/// Builds an input for these targets (for seeds and tests).
pub fn input(max_len: u8, seed: u8, stream: &[u8]) -> Vec<u8> {
    let mut data = vec![max_len, seed];
    data.extend_from_slice(stream);
    data
}

fn check(lines: bool, data: &[u8]) {
    crate::panics::install();
    let [max, seed, stream @ ..] = data else {
        return;
    };
    let max_len = if *max == 255 {
        16 * 1024 * 1024
    } else {
        usize::from(*max)
    };
    let whole = decode_frames(lines, max_len, &[stream]);
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    let bytewise = decode_frames(lines, max_len, &bytes);
    assert_eq!(
        whole, bytewise,
        "the frames differ when the stream arrives one byte at a time"
    );
    let random = random_chunks(stream, *seed);
    let chunked = decode_frames(lines, max_len, &random);
    assert_eq!(
        whole,
        chunked,
        "the frames differ when the stream arrives in reads of {:?} bytes",
        random.iter().map(|c| c.len()).collect::<Vec<_>>()
    );
    for message in whole.iter().flatten() {
        assert!(
            message.len() <= max_len,
            "a message longer than the maximum"
        );
        if lines {
            assert!(!message.contains(&b'\n'), "a line holds a newline");
            assert!(!is_blank(message), "a blank line became a message");
        }
    }
    let expected = if lines {
        reference_lines(max_len, stream)
    } else {
        reference_content_length(max_len, stream)
    };
    assert_eq!(
        shape(&whole),
        expected,
        "the frames differ from the framing rules (Ok: message, Err: rejected)"
    );
}

/// Cuts `stream` into reads of 1-16 bytes, sizes drawn from a xorshift generator seeded by `seed`.
fn random_chunks(stream: &[u8], seed: u8) -> Vec<&[u8]> {
    let mut state = u32::from(seed).wrapping_mul(0x9E37_79B9) | 1;
    let mut chunks = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (1 + state % 16) as usize;
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// Frames with the rejection reasons erased (the reference decoders do not word them).
fn shape(frames: &[DecodedFrame]) -> Vec<Result<Vec<u8>, ()>> {
    frames.iter().map(|f| f.clone().map_err(|_| ())).collect()
}

/// The newline-delimited framing rules, decoding a whole stream.
pub fn reference_lines(max_len: usize, stream: &[u8]) -> Vec<Result<Vec<u8>, ()>> {
    let mut pieces: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
    let last = pieces.pop().unwrap_or_default();
    let mut frames = Vec::new();
    for line in pieces {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > max_len {
            frames.push(Err(()));
        } else if !is_blank(line) {
            frames.push(Ok(line.to_vec()));
        }
    }
    if last.len() > max_len {
        frames.push(Err(()));
    } else if !is_blank(last) {
        frames.push(Ok(last.to_vec()));
    }
    frames
}

/// The Content-Length framing rules, decoding a whole stream.
pub fn reference_content_length(max_len: usize, stream: &[u8]) -> Vec<Result<Vec<u8>, ()>> {
    let mut frames = Vec::new();
    let mut rest = stream;
    loop {
        let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") else {
            // Known to be too long once MAX_HEADERS + 4 bytes hold no terminator.
            if rest.len() > MAX_HEADERS + 3 {
                frames.push(Err(()));
            }
            return frames;
        };
        let headers = &rest[..end];
        rest = &rest[end + 4..];
        if end > MAX_HEADERS {
            frames.push(Err(()));
            continue;
        }
        match header_length(headers) {
            None => frames.push(Err(())),
            Some(len) if len > max_len => {
                frames.push(Err(()));
                rest = &rest[len.min(rest.len())..];
            }
            Some(len) if len <= rest.len() => {
                frames.push(Ok(rest[..len].to_vec()));
                rest = &rest[len..];
            }
            Some(_) => return frames, // cut off by the end of the stream
        }
    }
}

/// The first valid `Content-Length` value of a UTF-8 header block (lines split by CRLF,
/// `Name: value`, the name case-insensitive, spaces around either ignored).
fn header_length(headers: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(headers).ok()?;
    text.split("\r\n").find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            value.trim().parse().ok()
        } else {
            None
        }
    })
}

/// All frames of a stream that arrives in `chunks` (see [`decode_chunks`]).
pub fn decode_frames(lines: bool, max_len: usize, chunks: &[&[u8]]) -> Vec<DecodedFrame> {
    decode_chunks(lines, max_len, chunks)
        .into_iter()
        .flatten()
        .collect()
}

/// Frames one message, as a peer writes it (for seeds and the peer targets' inputs).
pub fn encode(lines: bool, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 24);
    if lines {
        out.extend_from_slice(message);
        out.push(b'\n');
    } else {
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", message.len()).as_bytes());
        out.extend_from_slice(message);
    }
    out
}
