//! The one reader (and writer) of `text/event-stream` bodies, as the WHATWG HTML standard's
//! server-sent events define the format, bounded so that a peer cannot make us hold
//! unbounded memory.
//!
//! Reading: one UTF-8 byte order mark may open the stream; lines end with CRLF, LF or CR (a
//! CRLF split across two chunks is one line end); a line opening with `:` is a comment; a
//! line is `field: value` (one space after the colon is dropped) or a bare `field`. `data`
//! lines accumulate, joined with `\n`; `event` names the type (`message` when absent); `id`
//! sets the last event id (unless it holds NUL); `retry` (ASCII digits only) sets the
//! reconnection time; other fields are ignored. An empty line dispatches the event, unless it
//! has no data. Bytes that are not UTF-8 become U+FFFD. At the end of the body an unfinished
//! event is dropped.
//!
//! Bounds ([`Limits`]): a line longer than [`Limits::line`] is refused with
//! [`SseError::LineTooLong`], an event whose fields (data with its line breaks, type and id)
//! plus the line being read grow beyond [`Limits::event`] with [`SseError::EventTooLarge`]; a
//! line beyond both with the error of the limit its bytes reach first, so that how the body is
//! cut into chunks never changes the outcome.
//! After an error the parser answers every later chunk with the same error: the caller ends
//! the stream.
//!
//! ```
//! use cancelkit_wire::sse::{Limits, Parser};
//!
//! let mut parser = Parser::new(Limits::default());
//! let mut events = Vec::new();
//! parser.feed(b"\xEF\xBB\xBF: keep-alive\r\nid: 7\r\ndata: {\"jsonrpc\":", &mut events)?;
//! parser.feed(b"\"2.0\"}\r\n\r\n", &mut events)?;
//! assert_eq!(events[0].data, r#"{"jsonrpc":"2.0"}"#);
//! assert_eq!(events[0].id.as_deref(), Some("7"));
//! assert_eq!(parser.comments(), 1);
//! # Ok::<(), cancelkit_wire::sse::SseError>(())
//! ```

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The type of an event without an `event` field.
pub const DEFAULT_EVENT: &str = "message";

/// The media type of an event stream.
pub const CONTENT_TYPE: &str = "text/event-stream";

/// How much of a stream one event, and one line, may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest line, without its line end, in bytes.
    pub line: usize,
    /// The largest event in bytes: its data (each line with the `\n` after it), its type and
    /// its id, plus the line being read.
    pub event: usize,
}

impl Limits {
    /// Lines and events of at most `bytes` each.
    pub const fn new(bytes: usize) -> Limits {
        Limits {
            line: bytes,
            event: bytes,
        }
    }
}

impl Default for Limits {
    /// 16 MiB per line and per event: the size of the largest JSON-RPC message cancelkit
    /// reads anywhere.
    fn default() -> Limits {
        Limits::new(16 << 20)
    }
}

/// A stream went beyond its [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line grew beyond [`Limits::line`] before it ended.
    #[error("a server-sent event line exceeds the limit of {limit} bytes")]
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// An event grew beyond [`Limits::event`] before it was dispatched.
    #[error("a server-sent event exceeds the limit of {limit} bytes")]
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event's type: its `event` field, or `message`.
    pub event: String,
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// The stream's last event id when the event was dispatched (what a client sends as
    /// `Last-Event-ID` to resume after it); `None` while it is empty.
    pub id: Option<String>,
}

/// Turns the chunks of one body into events.
#[derive(Debug)]
pub struct Parser {
    limits: Limits,
    /// The current line when it spans chunks (or the first bytes, while a BOM may be split).
    line: Vec<u8>,
    /// The current event's data lines, each followed by `\n`.
    data: String,
    /// The current event's type.
    kind: String,
    /// The id buffer: set by `id` lines, kept across events.
    id: String,
    /// The last event id: the id buffer as of the last dispatch.
    last_id: String,
    retry: Option<u64>,
    comments: u64,
    /// The previous chunk ended with CR: an LF opening the next one ends nothing more.
    after_cr: bool,
    /// Nothing but (part of) a byte order mark has been read.
    at_start: bool,
    failed: Option<SseError>,
}

impl Parser {
    /// A parser for one stream, within `limits`.
    pub fn new(limits: Limits) -> Parser {
        Parser {
            limits,
            line: Vec::new(),
            data: String::new(),
            kind: String::new(),
            id: String::new(),
            last_id: String::new(),
            retry: None,
            comments: 0,
            after_cr: false,
            at_start: true,
            failed: None,
        }
    }

    /// The parser's limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The stream's last event id (as of the last dispatched event, or empty line): what to
    /// send as `Last-Event-ID` when reconnecting. `None` while it is empty.
    pub fn last_event_id(&self) -> Option<&str> {
        (!self.last_id.is_empty()).then_some(self.last_id.as_str())
    }

    /// The reconnection time the stream asked for with `retry`, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// How many comment lines (such as keep-alives) the stream has held so far.
    pub fn comments(&self) -> u64 {
        self.comments
    }

    /// Reads `chunk`, appending every event it completes to `out`.
    ///
    /// # Errors
    ///
    /// [`SseError`] when a line or the event being read grows beyond the limits; every later
    /// call returns the same error. Events completed before the error are in `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let result = if self.at_start {
            self.start(chunk, out)
        } else {
            self.lines(chunk, out)
        };
        if let Err(error) = result {
            self.failed = Some(error);
        }
        result
    }

    /// The first bytes: a byte order mark, perhaps split across chunks, is dropped.
    fn start(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if self.line.is_empty() && chunk.len() >= BOM.len() {
            self.at_start = false;
            return self.lines(chunk.strip_prefix(BOM).unwrap_or(chunk), out);
        }
        let mut start = std::mem::take(&mut self.line);
        start.extend_from_slice(chunk);
        if start.len() < BOM.len() && BOM.starts_with(&start) {
            self.line = start;
            return Ok(());
        }
        self.at_start = false;
        let rest = start.strip_prefix(BOM).unwrap_or(&start);
        self.lines(rest, out)
    }

    fn lines(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while !chunk.is_empty() {
            let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') else {
                // Checked before it is kept: a refused chunk is not copied.
                self.check(self.line.len() + chunk.len())?;
                self.line.extend_from_slice(chunk);
                return Ok(());
            };
            let mut next = end + 1;
            if chunk[end] == b'\r' {
                match chunk.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if self.line.is_empty() {
                self.check(end)?;
                self.line_done(&chunk[..end], out);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&chunk[..end]);
                self.check(line.len())?;
                self.line_done(&line, out);
                line.clear();
                self.line = line;
            }
            chunk = &chunk[next..];
        }
        Ok(())
    }

    /// Whether a line of `line` bytes fits, with the event so far. A line beyond both limits
    /// is refused for the one its bytes reach first (the line's on a tie), as if they came one
    /// at a time: a line is checked unfinished at the end of every chunk and again whole, so
    /// the error must not depend on where the chunks end.
    fn check(&self, line: usize) -> Result<(), SseError> {
        let too_large = SseError::EventTooLarge {
            limit: self.limits.event,
        };
        // The fields may be over the limit already (bytes that are not UTF-8 grow into U+FFFD
        // after their line was checked): then no byte of the next line fits.
        let fields = self.data.len() + self.kind.len() + self.id.len();
        let event_room = self.limits.event.checked_sub(fields).ok_or(too_large)?;
        if line <= self.limits.line.min(event_room) {
            Ok(())
        } else if self.limits.line <= event_room {
            Err(SseError::LineTooLong {
                limit: self.limits.line,
            })
        } else {
            Err(too_large)
        }
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<Event>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            self.comments += 1;
            return;
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
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
            }
            b"event" => self.kind = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => self.id = String::from_utf8_lossy(value).into_owned(),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only, so the text parses unless it overflows: then the longest wait.
                let text = std::str::from_utf8(value).unwrap_or_default();
                self.retry = Some(text.parse().unwrap_or(u64::MAX));
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        self.last_id.clone_from(&self.id);
        let kind = std::mem::take(&mut self.kind);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the `\n` after the last data line
        out.push(Event {
            event: if kind.is_empty() {
                DEFAULT_EVENT.to_owned()
            } else {
                kind
            },
            data,
            id: self.last_event_id().map(str::to_owned),
        });
    }
}

/// Appends one event to `out` as a stream carries it: `id`, then `event` (unless it is
/// `message`), then one `data` line per line of `data` (split at CRLF, LF and CR), then the
/// empty line. `id` and `event` must not hold a line break (they are cut at the first one).
pub fn write_event(out: &mut Vec<u8>, id: Option<&str>, event: &str, data: &str) {
    fn first_line(text: &str) -> &str {
        text.split(['\r', '\n']).next().unwrap_or_default()
    }
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(first_line(id).as_bytes());
        out.push(b'\n');
    }
    if !event.is_empty() && event != DEFAULT_EVENT {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(first_line(event).as_bytes());
        out.push(b'\n');
    }
    let mut rest = data;
    loop {
        let end = rest.find(['\r', '\n']).unwrap_or(rest.len());
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&rest.as_bytes()[..end]);
        out.push(b'\n');
        if end == rest.len() {
            break;
        }
        let skip = if rest[end..].starts_with("\r\n") {
            2
        } else {
            1
        };
        rest = &rest[end + skip..];
    }
    out.push(b'\n');
}

/// Appends a comment line (`: text`), as keep-alives are sent; `text` is cut at its first
/// line break.
pub fn write_comment(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b": ");
    out.extend_from_slice(
        text.split(['\r', '\n'])
            .next()
            .unwrap_or_default()
            .as_bytes(),
    );
    out.push(b'\n');
}

#[cfg(test)]
mod tests;
