//! The trace file's records: the [`Dir`] of a frame, and the [`Recorder`] that splits each
//! direction's chunks into newline-terminated frames and writes one JSON line per frame.

use std::io::{self, Write};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The longest frame recorded in full, 16 MiB; only the start of a longer one is kept, marked
/// `"truncated": true`. Forwarding is never limited.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The direction of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Client → server: the proxy's stdin, forwarded to the child.
    In,
    /// Server → client: the child's stdout, forwarded to the proxy's stdout.
    Out,
}

impl Dir {
    /// The other direction, the one a response to a request sent this way travels.
    pub fn opposite(self) -> Dir {
        match self {
            Dir::In => Dir::Out,
            Dir::Out => Dir::In,
        }
    }

    fn index(self) -> usize {
        match self {
            Dir::In => 0,
            Dir::Out => 1,
        }
    }
}

#[derive(Serialize)]
struct FrameRecord<'a> {
    t_us: u64,
    dir: Dir,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

#[derive(Serialize)]
struct DroppedRecord {
    t_us: u64,
    dropped: u64,
}

/// A frame being assembled in one direction.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    truncated: bool,
    /// The start of this frame was lost (a chunk was dropped): discard up to the next newline.
    skipping: bool,
    /// When the last chunk of this frame was read.
    t_us: u64,
}

/// Turns the chunks read in each direction into trace records: splits them into frames at
/// newlines and writes one JSON line per frame to `out`.
///
/// Timestamps are those of the chunk that completed a frame, made non-decreasing across the file
/// (two directions read concurrently may reach the recorder in either order).
pub struct Recorder<W: Write> {
    out: W,
    max_line: usize,
    last_t: u64,
    pending: [Pending; 2],
}

impl<W: Write> Recorder<W> {
    /// A recorder writing to `out`, keeping at most [`MAX_LINE`] bytes of a frame.
    pub fn new(out: W) -> Self {
        Self::with_max_line(out, MAX_LINE)
    }

    /// A recorder keeping at most `max_line` bytes of a frame.
    pub fn with_max_line(out: W, max_line: usize) -> Self {
        Recorder {
            out,
            max_line,
            last_t: 0,
            pending: Default::default(),
        }
    }

    /// Records a chunk of `bytes` read in direction `dir` at `t_us`.
    ///
    /// `gap` says that chunks before this one were dropped: `Some(true)` if the last dropped one
    /// ended with a newline (this chunk starts a frame), `Some(false)` if not (this chunk
    /// continues a frame whose start is lost and which is therefore not recorded).
    pub fn chunk(
        &mut self,
        t_us: u64,
        dir: Dir,
        bytes: &[u8],
        gap: Option<bool>,
    ) -> io::Result<()> {
        let max_line = self.max_line;
        if let Some(at_line_start) = gap {
            let pending = &mut self.pending[dir.index()];
            *pending = Pending {
                skipping: !at_line_start,
                ..Pending::default()
            };
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let newline = rest.iter().position(|&b| b == b'\n');
            let (part, complete) = match newline {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            rest = match newline {
                Some(i) => &rest[i + 1..],
                None => &[],
            };
            let pending = &mut self.pending[dir.index()];
            pending.t_us = t_us;
            if !pending.skipping {
                let room = max_line.saturating_sub(pending.bytes.len());
                if part.len() > room {
                    pending.bytes.extend_from_slice(&part[..room]);
                    pending.truncated = true;
                } else {
                    pending.bytes.extend_from_slice(part);
                }
            }
            if complete {
                let frame = std::mem::take(pending);
                if !frame.skipping {
                    self.write_frame(dir, frame)?;
                }
            }
        }
        Ok(())
    }

    /// Direction `dir` reached its end: records a last frame that had no newline, if any.
    pub fn eof(&mut self, dir: Dir) -> io::Result<()> {
        let frame = std::mem::take(&mut self.pending[dir.index()]);
        if !frame.skipping && (!frame.bytes.is_empty() || frame.truncated) {
            self.write_frame(dir, frame)?;
        }
        Ok(())
    }

    /// Ends the trace: records the unterminated frames of both directions, then a `dropped`
    /// record if `dropped` is not zero, flushes and returns the writer.
    pub fn finish(mut self, t_us: u64, dropped: u64) -> io::Result<W> {
        self.eof(Dir::In)?;
        self.eof(Dir::Out)?;
        if dropped > 0 {
            let t_us = t_us.max(self.last_t);
            serde_json::to_writer(&mut self.out, &DroppedRecord { t_us, dropped })?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()?;
        Ok(self.out)
    }

    fn write_frame(&mut self, dir: Dir, frame: Pending) -> io::Result<()> {
        let t_us = frame.t_us.max(self.last_t);
        self.last_t = t_us;
        let (line, base64) = match std::str::from_utf8(&frame.bytes) {
            Ok(text) => (Some(text), None),
            // cut inside a character by the truncation: keep the valid start as text
            Err(e) if frame.truncated && e.error_len().is_none() => (
                std::str::from_utf8(&frame.bytes[..e.valid_up_to()]).ok(),
                None,
            ),
            Err(_) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(&frame.bytes)),
            ),
        };
        let record = FrameRecord {
            t_us,
            dir,
            line,
            base64,
            truncated: frame.truncated,
        };
        serde_json::to_writer(&mut self.out, &record)?;
        self.out.write_all(b"\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(bytes: &[u8]) -> Vec<serde_json::Value> {
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    #[test]
    fn frames_split_across_chunks_and_directions() {
        let mut r = Recorder::new(Vec::new());
        r.chunk(5, Dir::In, b"{\"a\":", None).unwrap();
        r.chunk(7, Dir::Out, b"x\ny", None).unwrap();
        r.chunk(6, Dir::In, b"1}\n\n", None).unwrap();
        let out = r.finish(9, 0).unwrap();
        let recs = records(&out);
        assert_eq!(
            recs,
            vec![
                serde_json::json!({"t_us": 7, "dir": "out", "line": "x"}),
                serde_json::json!({"t_us": 7, "dir": "in", "line": "{\"a\":1}"}),
                serde_json::json!({"t_us": 7, "dir": "in", "line": ""}),
                serde_json::json!({"t_us": 7, "dir": "out", "line": "y"}),
            ]
        );
    }

    #[test]
    fn long_lines_are_truncated_and_invalid_utf8_is_base64() {
        let mut r = Recorder::with_max_line(Vec::new(), 4);
        r.chunk(1, Dir::In, b"abcdefgh\nabc\xc3", None).unwrap();
        r.chunk(2, Dir::In, b"\xa9d\n\xff\xfe\n", None).unwrap();
        let out = r.finish(3, 0).unwrap();
        assert_eq!(
            records(&out),
            vec![
                serde_json::json!({"t_us": 1, "dir": "in", "line": "abcd", "truncated": true}),
                // cut inside "é": the valid start is kept as text
                serde_json::json!({"t_us": 2, "dir": "in", "line": "abc", "truncated": true}),
                serde_json::json!({"t_us": 2, "dir": "in", "base64": "//4="}),
            ]
        );
    }

    #[test]
    fn a_gap_discards_the_broken_frame_and_dropped_is_recorded() {
        let mut r = Recorder::new(Vec::new());
        r.chunk(1, Dir::Out, b"whole\npart", None).unwrap();
        // the chunk that finished "part..." and began "lost..." was dropped
        r.chunk(3, Dir::Out, b"-of-lost\nnext\n", Some(false))
            .unwrap();
        r.chunk(4, Dir::Out, b"fresh\n", Some(true)).unwrap();
        let out = r.finish(5, 2).unwrap();
        assert_eq!(
            records(&out),
            vec![
                serde_json::json!({"t_us": 1, "dir": "out", "line": "whole"}),
                serde_json::json!({"t_us": 3, "dir": "out", "line": "next"}),
                serde_json::json!({"t_us": 4, "dir": "out", "line": "fresh"}),
                serde_json::json!({"t_us": 5, "dropped": 2}),
            ]
        );
    }
}
