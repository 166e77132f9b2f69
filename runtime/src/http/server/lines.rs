//! The peer's output, split into lines under a bound.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// Splits the peer's output into lines, none longer than the limit (a longer one is dropped
/// whole, with a log line).
pub(super) struct Lines {
    max: usize,
    scanned: usize,
    discarding: bool,
}

impl Lines {
    /// Lines of at most `max` bytes.
    pub(super) fn new(max: usize) -> Lines {
        Lines {
            max,
            scanned: 0,
            discarding: false,
        }
    }
}

impl Decoder for Lines {
    type Item = Bytes;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, Self::Error> {
        loop {
            let Some(at) = buf[self.scanned..].iter().position(|b| *b == b'\n') else {
                if buf.len() > self.max {
                    if !self.discarding {
                        tracing::error!(
                            max = self.max,
                            "the peer wrote a message longer than the limit; dropped it"
                        );
                    }
                    self.discarding = true;
                    buf.clear();
                    self.scanned = 0;
                } else {
                    self.scanned = buf.len();
                }
                return Ok(None);
            };
            let end = self.scanned + at;
            let line = buf.split_to(end + 1).freeze();
            self.scanned = 0;
            if std::mem::take(&mut self.discarding) {
                continue;
            }
            return Ok(Some(line.slice(..end)));
        }
    }
}
