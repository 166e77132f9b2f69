//! A bounded reader of `text/event-stream` bodies, enough for MCP's Streamable HTTP: lines end
//! with CRLF, LF or CR; `data:` lines of one event are joined with `\n`; an empty line ends the
//! event; a line opening with `:` is a comment; one space after a field's colon is dropped. The
//! `event`, `id` and `retry` fields are read and ignored (MCP sends JSON-RPC in `data` alone).
//!
//! Bounded: a line longer than the limit, or an event whose data grows beyond it, is an error
//! (the caller ends the stream), so a server cannot make the checker hold unbounded memory.

/// A line or an event grew beyond the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge(pub usize);

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a server-sent event exceeds {} bytes", self.0)
    }
}

/// Turns body chunks into the data of each event.
#[derive(Debug)]
pub struct Parser {
    limit: usize,
    line: Vec<u8>,
    data: Vec<u8>,
    /// The last byte fed was a CR: an LF right after it ends nothing more.
    after_cr: bool,
}

impl Parser {
    /// A parser refusing lines and events longer than `limit` bytes.
    pub fn new(limit: usize) -> Parser {
        Parser {
            limit,
            line: Vec::new(),
            data: Vec::new(),
            after_cr: false,
        }
    }

    /// Feeds one chunk of the body; the data of every event it completes is pushed to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<String>) -> Result<(), TooLarge> {
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, false);
            match byte {
                b'\n' if after_cr => {}
                b'\n' => self.end_line(out)?,
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(out)?;
                }
                _ if self.line.len() >= self.limit => return Err(TooLarge(self.limit)),
                _ => self.line.push(byte),
            }
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<String>) -> Result<(), TooLarge> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if !self.data.is_empty() {
                self.data.pop(); // the `\n` after the last data line
                out.push(String::from_utf8_lossy(&self.data).into_owned());
                self.data.clear();
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.limit {
                return Err(TooLarge(self.limit));
            }
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(parser: &mut Parser, chunks: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn events_across_chunks_and_line_ends() {
        let mut parser = Parser::new(1024);
        let got = events(
            &mut parser,
            &[
                b": keep-alive\n\nevent: message\nid: 1\nda",
                b"ta: {\"a\":1}\r",
                b"\n\r\ndata:x\rdata: y\n\n",
                b"retry: 5\ndata\n\n",
            ],
        );
        assert_eq!(got, ["{\"a\":1}", "x\ny", ""]);
    }

    #[test]
    fn an_empty_event_is_not_dispatched_and_the_last_unended_one_waits() {
        let mut parser = Parser::new(1024);
        assert!(events(&mut parser, &[b"\n\nevent: x\n\ndata: late"]).is_empty());
        assert_eq!(events(&mut parser, &[b"\n\n"]), ["late"]);
    }

    #[test]
    fn long_lines_and_events_are_refused() {
        let mut out = Vec::new();
        let mut parser = Parser::new(12);
        assert_eq!(parser.feed(b"data: 1234567", &mut out), Err(TooLarge(12)));
        let mut parser = Parser::new(12);
        parser.feed(b"data: 123456\n", &mut out).unwrap();
        assert_eq!(parser.feed(b"data: 789012\n", &mut out), Err(TooLarge(12)));
        assert!(out.is_empty());
    }
}
