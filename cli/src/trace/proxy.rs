//! The proxy itself: starts the child, forwards both directions and the signals, hands every
//! forwarded chunk to the recorder thread without waiting for it, and exits as the child did.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::{Dir, Recorder};

/// How many chunks may wait for the recorder before further ones are dropped from the trace.
pub const CHANNEL_CAPACITY: usize = 4096;

/// The size of one read from either side.
const READ_SIZE: usize = 64 * 1024;

/// The exit code when the child cannot be started or the trace file cannot be created.
pub const EXIT_CANNOT_START: i32 = 2;

/// The default trace file name, `cancelkit-trace-<unix time>.jsonl` in the current directory.
pub fn default_out() -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from(format!("cancelkit-trace-{secs}.jsonl"))
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
