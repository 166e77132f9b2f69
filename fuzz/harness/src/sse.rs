//! Target `sse`: the bounded `text/event-stream` parser of cancelkit-wire
//! (`cancelkit_wire::sse::Parser`).
//!
//! Input: byte 0 picks the limits (its low four bits [`Limits::line`], its high four bits
//! [`Limits::event`], each an index into [`SIZES`]), byte 1 seeds how the rest, the stream, is
//! cut into chunks. Checks:
//!
//! - no panic;
//! - chunking never changes the outcome: fed at once, one byte at a time, or in pseudo-random
//!   chunks of 0-16 bytes (empty ones included), the events, whether and which error ends the
//!   stream, the last event id, the retry and the number of comments are the same;
//! - no event is larger than the limits: its data, id and type (unless that is the default
//!   `message`) hold at most [`Limits::event`] bytes together;
//! - after an error every later `feed` returns the same error and adds no event;
//! - the outcome is that of a reference reading of the whole stream, written from the WHATWG
//!   rules and the limits (below): the same events, error, last event id, retry and comments;
//! - round trip: the events written back with `write_event` (each with its id, an empty one
//!   where it has none) read back the same, data, type and id.
//!
//! The rules: one UTF-8 byte order mark may open the stream; the stream is decoded as UTF-8,
//! bad bytes becoming U+FFFD; lines end with CRLF, LF or CR; an empty line dispatches the event
//! (with its data, if it has any, and the last event id set from the id buffer); `:` opens a
//! comment; `field: value` loses one space after the colon, `field` alone has an empty value;
//! `data` appends the value and `\n` to the data buffer, `event` sets the type, `id` without
//! NUL sets the id buffer, `retry` of ASCII digits sets the retry; a last line without a line
//! end, and an event without its empty line, are dropped.
//!
//! The limits: each line, the unfinished last one too, is checked before it is read. It is
//! refused when it has more than [`Limits::line`] bytes, or when with the data buffer, type and
//! id buffer so far it has more than [`Limits::event`]; when both, for the limit its bytes
//! reach first (the line's on a tie). Nothing is read after a refused line. The first bytes of
//! the stream, while they may yet be a byte order mark, are not a line.

use cancelkit_wire::sse::{DEFAULT_EVENT, Event, Limits, Parser, SseError, write_event};

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The limits byte 0 picks from: small ones so that inputs reach them, and the default.
pub const SIZES: [usize; 16] = [
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    12,
    16,
    24,
    32,
    64,
    1024,
    16 << 20,
];

/// Builds an input for this target (for seeds and tests): `line` and `event` are indexes into
/// [`SIZES`] (0-15).
pub fn input(line: u8, event: u8, seed: u8, stream: &[u8]) -> Vec<u8> {
    assert!(line < 16 && event < 16, "indexes into SIZES");
    let mut data = vec![event << 4 | line, seed];
    data.extend_from_slice(stream);
    data
}

/// What a parser made of a stream.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    events: Vec<Event>,
    result: Result<(), SseError>,
    last_event_id: Option<String>,
    retry: Option<u64>,
    comments: u64,
}

/// Target `sse`.
pub fn check(data: &[u8]) {
    crate::panics::install();
    let [limits, seed, stream @ ..] = data else {
        return;
    };
    let limits = Limits {
        line: SIZES[usize::from(limits & 0x0F)],
        event: SIZES[usize::from(limits >> 4)],
    };

    let whole = parse(limits, &[stream]);
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(
        parse(limits, &bytes),
        whole,
        "the outcome differs when the stream arrives one byte at a time"
    );
    let random = random_chunks(stream, *seed);
    assert_eq!(
        parse(limits, &random),
        whole,
        "the outcome differs when the stream arrives in chunks of {:?} bytes",
        random.iter().map(|c| c.len()).collect::<Vec<_>>()
    );

    for event in &whole.events {
        let kind = if event.event == DEFAULT_EVENT {
            0
        } else {
            event.event.len()
        };
        let size = event.data.len() + kind + event.id.as_deref().map_or(0, str::len);
        assert!(
            size <= limits.event,
            "an event of {size} bytes passed the limit of {}: {event:?}",
            limits.event
        );
    }

    assert_eq!(
        whole,
        reference(limits, stream),
        "the outcome differs from the rules (right)"
    );

    round_trip(&whole.events);
}

/// Feeds `chunks` to a new parser. After an error it feeds the rest all the same, then a little
/// more, checking that each answer is that error and changes nothing.
fn parse(limits: Limits, chunks: &[&[u8]]) -> Outcome {
    let mut parser = Parser::new(limits);
    let mut events = Vec::new();
    let mut result = Ok(());
    for chunk in chunks {
        let before = events.len();
        let answer = parser.feed(chunk, &mut events);
        match result {
            Ok(()) => result = answer,
            Err(error) => {
                assert_eq!(
                    answer,
                    Err(error),
                    "a feed after an error answers differently"
                );
                assert_eq!(events.len(), before, "a feed after an error added events");
            }
        }
    }
    let outcome = Outcome {
        events,
        result,
        last_event_id: parser.last_event_id().map(str::to_owned),
        retry: parser.retry(),
        comments: parser.comments(),
    };
    if let Err(error) = result {
        let mut events = Vec::new();
        for chunk in [&b""[..], b"\r\n\n", b"data: more\n\n"] {
            let answer = parser.feed(chunk, &mut events);
            assert_eq!(
                answer,
                Err(error),
                "a feed after an error answers differently"
            );
        }
        assert!(events.is_empty(), "feeds after an error added events");
        assert_eq!(
            (parser.last_event_id(), parser.retry(), parser.comments()),
            (
                outcome.last_event_id.as_deref(),
                outcome.retry,
                outcome.comments
            ),
            "feeds after an error changed the parser"
        );
    }
    outcome
}

/// Cuts `stream` into chunks of 0-16 bytes, sizes drawn from a xorshift generator seeded by
/// `seed`.
fn random_chunks(stream: &[u8], seed: u8) -> Vec<&[u8]> {
    let mut state = u32::from(seed).wrapping_mul(0x9E37_79B9) | 1;
    let mut chunks = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (state % 17) as usize;
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

/// The rules and the limits (see the module docs) applied to a whole stream, line by line.
/// Each value is decoded on its own, which is the same as decoding the whole stream: line ends
/// and colons are ASCII, and end any bad sequence before them.
fn reference(limits: Limits, stream: &[u8]) -> Outcome {
    let mut outcome = Outcome {
        events: Vec::new(),
        result: Ok(()),
        last_event_id: None,
        retry: None,
        comments: 0,
    };
    if stream.len() < BOM.len() && BOM.starts_with(stream) {
        return outcome; // perhaps a mark: nothing is read yet
    }
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let (mut data, mut kind, mut id) = (String::new(), String::new(), String::new());
    let mut rest = stream.strip_prefix(BOM).unwrap_or(stream);
    while !rest.is_empty() {
        let end = rest.iter().position(|&b| b == b'\r' || b == b'\n');
        let line = &rest[..end.unwrap_or(rest.len())];
        // The byte of the line at which each limit is passed, if it is: the first one decides.
        let fields = data.len() + kind.len() + id.len();
        let line_at = (line.len() > limits.line).then_some(limits.line + 1);
        let event_at = match limits.event.checked_sub(fields) {
            None => Some(0),
            Some(room) => (line.len() > room).then_some(room + 1),
        };
        match (line_at, event_at) {
            (Some(l), Some(e)) if l <= e => outcome.result = Err(too_long(limits)),
            (Some(_), None) => outcome.result = Err(too_long(limits)),
            (_, Some(_)) => outcome.result = Err(too_large(limits)),
            (None, None) => {}
        }
        let Some(end) = end else {
            break; // an unfinished line is checked, not read
        };
        if outcome.result.is_err() {
            break;
        }
        let crlf = rest[end..].starts_with(b"\r\n");
        rest = &rest[end + if crlf { 2 } else { 1 }..];
        if line.is_empty() {
            outcome.last_event_id = (!id.is_empty()).then(|| id.clone());
            let kind = std::mem::take(&mut kind);
            if data.is_empty() {
                continue;
            }
            data.pop();
            outcome.events.push(Event {
                event: if kind.is_empty() {
                    DEFAULT_EVENT.to_owned()
                } else {
                    kind
                },
                data: std::mem::take(&mut data),
                id: outcome.last_event_id.clone(),
            });
            continue;
        }
        if line[0] == b':' {
            outcome.comments += 1;
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                data.push_str(&text(value));
                data.push('\n');
            }
            b"event" => kind = text(value),
            b"id" if !value.contains(&0) => id = text(value),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                outcome.retry = Some(text(value).parse().unwrap_or(u64::MAX));
            }
            _ => {}
        }
    }
    outcome
}

fn too_long(limits: Limits) -> SseError {
    SseError::LineTooLong { limit: limits.line }
}

fn too_large(limits: Limits) -> SseError {
    SseError::EventTooLarge {
        limit: limits.event,
    }
}

/// The events written back read back the same.
fn round_trip(events: &[Event]) {
    let mut bytes = Vec::new();
    for event in events {
        write_event(
            &mut bytes,
            Some(event.id.as_deref().unwrap_or_default()),
            &event.event,
            &event.data,
        );
    }
    let mut parser = Parser::new(Limits::default());
    let mut again = Vec::new();
    let result = parser.feed(&bytes, &mut again);
    assert_eq!(result, Ok(()), "the written events are refused");
    assert_eq!(
        again,
        events,
        "the events read back differently from {:?}",
        String::from_utf8_lossy(&bytes)
    );
}
