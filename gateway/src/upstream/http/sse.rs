//! A bounded reader of `text/event-stream` bodies, as the WHATWG HTML standard's "server-sent
//! events" defines the format: lines end with CRLF, LF or CR; `data:` lines accumulate (joined
//! with `\n`), an empty line dispatches the event, `:` starts a comment, and a single space
//! after the colon is dropped.
//!
//! Written here rather than taken from `eventsource-stream` because that crate buffers a line or
//! an event of any size; this one refuses an event (its data plus the line being read) larger
//! than a limit, so an upstream cannot make the gateway hold unbounded memory.

/// One dispatched event. Only what MCP uses is kept: the data, and the type and id for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// The `event:` field (empty when absent, which means `message`).
    pub(crate) kind: String,
    /// The `data:` lines joined with `\n`.
    pub(crate) data: String,
    /// The last `id:` seen so far on the stream, if any.
    pub(crate) id: Option<String>,
}

/// An event, or a line still without its end, grew beyond the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a server-sent event exceeds {limit} bytes")]
pub(crate) struct TooLarge {
    /// The limit in bytes.
    pub(crate) limit: usize,
}

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Turns body chunks into events, holding at most `limit` bytes of one event.
#[derive(Debug)]
pub(crate) struct Parser {
    limit: usize,
    /// The current line, up to what has arrived.
    line: Vec<u8>,
    /// The current event's data lines, each followed by `\n`.
    data: String,
    kind: String,
    last_id: Option<String>,
    /// The previous chunk ended with CR: a LF opening the next one belongs to that line end.
    after_cr: bool,
    /// Nothing has been read yet (a byte order mark may open the stream).
    at_start: bool,
}

impl Parser {
    /// A parser refusing events larger than `limit` bytes.
    pub(crate) fn new(limit: usize) -> Parser {
        Parser {
            limit,
            line: Vec::new(),
            data: String::new(),
            kind: String::new(),
            last_id: None,
            after_cr: false,
            at_start: true,
        }
    }

    /// Reads `chunk`, appending every event it completes to `out`.
    ///
    /// # Errors
    ///
    /// [`TooLarge`] when the event being read (its data so far plus the unfinished line) grows
    /// beyond the limit; the parser should not be used afterwards.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), TooLarge> {
        if self.at_start {
            // A UTF-8 byte order mark may precede the first line, perhaps split across chunks.
            let mut start = std::mem::take(&mut self.line);
            start.extend_from_slice(chunk);
            if start.len() < BOM.len() && BOM.starts_with(&start) {
                self.line = start;
                return Ok(());
            }
            self.at_start = false;
            let rest = start.strip_prefix(BOM).unwrap_or(&start);
            return self.lines(rest, out);
        }
        self.lines(chunk, out)
    }

    fn lines(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), TooLarge> {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.line.extend_from_slice(chunk);
                    self.check()?;
                    return Ok(());
                }
                Some(end) => {
                    self.line.extend_from_slice(&chunk[..end]);
                    self.check()?;
                    let mut next = end + 1;
                    if chunk[end] == b'\r' {
                        match chunk.get(next) {
                            Some(b'\n') => next += 1,
                            Some(_) => {}
                            None => self.after_cr = true,
                        }
                    }
                    chunk = &chunk[next..];
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, out);
                    self.line = line;
                    self.line.clear();
                }
            }
        }
        Ok(())
    }

    fn check(&self) -> Result<(), TooLarge> {
        if self.line.len() + self.data.len() > self.limit {
            Err(TooLarge { limit: self.limit })
        } else {
            Ok(())
        }
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<Event>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // a comment (keep-alives are sent this way)
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => {
                self.data.push_str(&value);
                self.data.push('\n');
            }
            b"event" => self.kind = value.into_owned(),
            b"id" if !value.contains('\0') => self.last_id = Some(value.into_owned()),
            _ => {} // `retry` and unknown fields: nothing MCP needs
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let kind = std::mem::take(&mut self.kind);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the `\n` after the last data line
        out.push(Event {
            kind,
            data,
            id: self.last_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]], limit: usize) -> Result<Vec<Event>, TooLarge> {
        let mut parser = Parser::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out)?;
        }
        Ok(out)
    }

    fn data(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn data_lines_join_and_blank_lines_dispatch() {
        let out = events(
            &[b"event: message\nid: 7\ndata: {\"a\":\ndata:1}\n\n: keep-alive\n\ndata:x\n\n"],
            1024,
        )
        .unwrap();
        assert_eq!(data(&out), ["{\"a\":\n1}", "x"]);
        assert_eq!(out[0].kind, "message");
        assert_eq!(out[0].id.as_deref(), Some("7"));
        assert_eq!(out[1].kind, "");
        assert_eq!(out[1].id.as_deref(), Some("7"), "the last id carries over");
    }

    #[test]
    fn every_line_end_works_and_chunks_split_anywhere() {
        let whole = b"\xEF\xBB\xBFdata: one\r\n\r\ndata: two\r\rdata: three\n\n";
        let expected = ["one", "two", "three"];
        assert_eq!(data(&events(&[whole], 64).unwrap()), expected);
        for split in 0..whole.len() {
            let (a, b) = whole.split_at(split);
            assert_eq!(
                data(&events(&[a, b], 64).unwrap()),
                expected,
                "split {split}"
            );
        }
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(data(&events(&bytes, 64).unwrap()), ["one", "two", "three"]);
    }

    #[test]
    fn events_without_data_and_an_unfinished_event_are_not_dispatched() {
        let out = events(&[b"id: 1\nretry: 100\n\ndata\n\nevent: x\n\ndata: cut"], 64).unwrap();
        assert_eq!(data(&out), [""], "a bare `data` line is an empty data line");
    }

    #[test]
    fn an_event_or_a_line_beyond_the_limit_is_refused() {
        assert_eq!(
            events(&[b"data: 0123456789\n", b"data: 0123456789\n"], 20),
            Err(TooLarge { limit: 20 })
        );
        assert_eq!(
            events(&[b"data: 01234567890123456789"], 20),
            Err(TooLarge { limit: 20 })
        );
        assert!(events(&[b"data: 0123456789\n\n", b"data: 0123456789\n\n"], 20).is_ok());
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let out = events(&[b"data: \xFF\n\n"], 64).unwrap();
        assert_eq!(data(&out), ["\u{FFFD}"]);
    }
}
