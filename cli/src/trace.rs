//! `cancelkit trace -- CMD [ARGS...]`: a transparent stdio proxy that records the session.
//!
//! The proxy starts `CMD` with piped stdin and stdout and an inherited stderr, copies its own
//! stdin to the child's and the child's stdout to its own, chunk by chunk as read, flushing after
//! each chunk and changing no byte. Each chunk is forwarded first and only then offered to the
//! recorder, a thread of its own, through a bounded channel: when the channel is full the chunk
//! is not recorded (it was already forwarded), the drop is counted, and the trace ends with a
//! `{"t_us":…,"dropped":N}` record. The recorder splits each direction into newline-terminated
//! frames and writes one JSON line per frame (see the crate documentation for the format).
//!
//! Signals: SIGINT, SIGTERM and SIGHUP sent to the proxy are forwarded to the child. When the
//! proxy's stdin reaches EOF the child's stdin is closed; the child's stdout is forwarded until
//! it closes (a signal received after the child exited ends that wait). The proxy exits with the child's exit code, or 128 + the signal number when the
//! child was killed by a signal, or 2 when the child cannot be started.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

/// The longest frame recorded in full, 16 MiB; only the start of a longer one is kept, marked
/// `"truncated": true`. Forwarding is never limited.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// How many chunks may wait for the recorder before further ones are dropped from the trace.
pub const CHANNEL_CAPACITY: usize = 4096;

/// The size of one read from either side.
const READ_SIZE: usize = 64 * 1024;

/// The exit code when the child cannot be started or the trace file cannot be created.
pub const EXIT_CANNOT_START: i32 = 2;

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

/// The default trace file name, `cancelkit-trace-<unix time>.jsonl` in the current directory.
pub fn default_out() -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from(format!("cancelkit-trace-{secs}.jsonl"))
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

/// What the forwarders hand to the recorder thread.
enum Msg {
    Chunk {
        t_us: u64,
        dir: Dir,
        bytes: Vec<u8>,
        gap: Option<bool>,
    },
    Eof(Dir),
    End {
        t_us: u64,
        dropped: u64,
    },
}

fn elapsed_us(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Copies `from` to `to` chunk by chunk, offering each forwarded chunk to the recorder without
/// waiting for it. Closes `to` at the end (for the child's stdin, that is the EOF it sees).
async fn pump<R, W>(
    mut from: R,
    mut to: W,
    dir: Dir,
    start: Instant,
    tx: mpsc::Sender<Msg>,
    dropped: Arc<AtomicU64>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; READ_SIZE];
    let mut gap: Option<bool> = None;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let t_us = elapsed_us(start);
        let chunk = &buf[..n];
        if to.write_all(chunk).await.is_err() || to.flush().await.is_err() {
            break;
        }
        let msg = Msg::Chunk {
            t_us,
            dir,
            bytes: chunk.to_vec(),
            gap,
        };
        match tx.try_send(msg) {
            Ok(()) => gap = None,
            Err(mpsc::error::TrySendError::Full(_)) => {
                dropped.fetch_add(1, Ordering::Relaxed);
                gap = Some(chunk.ends_with(b"\n"));
            }
            // the recorder stopped (it could not write): keep forwarding
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
    let _ = to.shutdown().await;
    drop(to);
    let _ = tx.send(Msg::Eof(dir)).await;
}

fn record_loop(mut rx: mpsc::Receiver<Msg>, file: File) -> io::Result<()> {
    let mut recorder = Recorder::new(BufWriter::new(file));
    while let Some(msg) = rx.blocking_recv() {
        match msg {
            Msg::Chunk {
                t_us,
                dir,
                bytes,
                gap,
            } => recorder.chunk(t_us, dir, &bytes, gap)?,
            Msg::Eof(dir) => recorder.eof(dir)?,
            Msg::End { t_us, dropped } => {
                recorder.finish(t_us, dropped)?;
                return Ok(());
            }
        }
    }
    recorder.finish(0, 0).map(drop)
}

/// Runs `cancelkit trace`: proxies `command` (program and arguments), recording to `out` (by
/// default [`default_out`]), and returns the exit code the proxy should exit with.
pub fn run(out: Option<PathBuf>, command: &[OsString]) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cancelkit trace: cannot start the runtime: {e}");
            return EXIT_CANNOT_START;
        }
    };
    let out = out.unwrap_or_else(default_out);
    let code = runtime.block_on(proxy(&out, command));
    // our stdin may still be blocked in a read on the runtime's blocking pool: do not wait for it
    runtime.shutdown_background();
    code
}

async fn proxy(out: &Path, command: &[OsString]) -> i32 {
    let Some((program, args)) = command.split_first() else {
        eprintln!("cancelkit trace: no command given (cancelkit trace -- CMD [ARGS...])");
        return EXIT_CANNOT_START;
    };
    let file = match File::create(out) {
        Ok(file) => file,
        Err(e) => {
            eprintln!(
                "cancelkit trace: cannot create the trace file {}: {e}",
                out.display()
            );
            return EXIT_CANNOT_START;
        }
    };
    // installed before the child starts, so a signal never kills the proxy instead of reaching it
    let signals = [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ]
    .map(|kind| signal(kind).map(|stream| (kind, stream)));
    let mut streams = Vec::new();
    for s in signals {
        match s {
            Ok(s) => streams.push(s),
            Err(e) => eprintln!("cancelkit trace: cannot forward a signal: {e}"),
        }
    }
    let start = Instant::now();
    let mut child = match tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!(
                "cancelkit trace: cannot start `{}`: {e}",
                program.to_string_lossy()
            );
            drop(file);
            let _ = std::fs::remove_file(out);
            return EXIT_CANNOT_START;
        }
    };
    let pid = child.id().and_then(|id| i32::try_from(id).ok());
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        unreachable!("both were piped");
    };

    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    let recorder = std::thread::spawn(move || record_loop(rx, file));
    let dropped = Arc::new(AtomicU64::new(0));
    let inbound = tokio::spawn(pump(
        tokio::io::stdin(),
        child_in,
        Dir::In,
        start,
        tx.clone(),
        dropped.clone(),
    ));
    let outbound = tokio::spawn(pump(
        child_out,
        tokio::io::stdout(),
        Dir::Out,
        start,
        tx.clone(),
        dropped.clone(),
    ));

    let status = loop {
        let signalled = futures_signal(&mut streams);
        tokio::select! {
            status = child.wait() => break status,
            kind = signalled => {
                if let Some(pid) = pid
                    && let Ok(sig) = nix::sys::signal::Signal::try_from(kind.as_raw_value())
                {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
                }
            }
        }
    };
    // everything the child wrote reaches the client before we exit, unless a signal says to
    // stop waiting (a grandchild may hold the child's stdout open long after the child exited)
    let mut outbound = outbound;
    tokio::select! {
        _ = &mut outbound => {}
        _ = futures_signal(&mut streams) => outbound.abort(),
    }
    inbound.abort();
    let _ = inbound.await;
    let _ = tx
        .send(Msg::End {
            t_us: elapsed_us(start),
            dropped: dropped.load(Ordering::Relaxed),
        })
        .await;
    drop(tx);
    match recorder.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!(
            "cancelkit trace: writing the trace {} failed: {e}",
            out.display()
        ),
        Err(_) => eprintln!("cancelkit trace: the recorder panicked"),
    }

    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => code,
            (None, Some(sig)) => 128 + sig,
            (None, None) => 1,
        },
        Err(e) => {
            eprintln!("cancelkit trace: waiting for the child failed: {e}");
            1
        }
    }
}

/// Waits for the first of `streams` to deliver a signal and returns its kind; never completes
/// when there are none.
async fn futures_signal(streams: &mut [(SignalKind, tokio::signal::unix::Signal)]) -> SignalKind {
    std::future::poll_fn(|cx| {
        for (kind, stream) in streams.iter_mut() {
            if let std::task::Poll::Ready(Some(())) = stream.poll_recv(cx) {
                return std::task::Poll::Ready(*kind);
            }
        }
        std::task::Poll::Pending
    })
    .await
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
