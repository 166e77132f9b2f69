//! The stdio transport: a child's stdin and stdout, one JSON-RPC frame per line. A reader task
//! routes each line until EOF, then wakes every waiter with nothing.
//!
//! Each child starts in a process group of its own, so what it starts in turn (`npx` → `node`,
//! a shell wrapper's fork) can be stopped with it: [`Stdio::shutdown`] closes its stdin, then
//! sends the group `SIGTERM`, waits up to [`GRACE`] and sends it `SIGKILL`. A child dropped
//! without a shutdown (a handshake that failed, a run interrupted) has its group sent `SIGTERM`
//! at once, and [`supervised`] finishes the job when the run ends. Its stderr goes where
//! [`stderr_to`] said: a file, or nowhere.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::process::Stdio as Piped;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use super::super::Unreachable;
use super::{MAX_LINE, Pending, Shared, lock};

/// How long a write to the child's stdin may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a child may take to exit once its stdin is closed.
const EXIT_WAIT: Duration = Duration::from_millis(500);
/// How long a process group is given between `SIGTERM` and `SIGKILL`.
pub const GRACE: Duration = Duration::from_millis(500);
/// How often a stopping group is looked at.
const POLL: Duration = Duration::from_millis(20);

/// Where the children's stderr goes (`None`: nowhere).
static STDERR: Mutex<Option<File>> = Mutex::new(None);
/// The process groups of children dropped without a shutdown, each with its leader, still to
/// be stopped by [`supervised`].
static LEFT: Mutex<Vec<Group>> = Mutex::new(Vec::new());
/// The signal that interrupted the run, or 0.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);
/// Whether a [`supervised`] run is under way, to stop what its children leave.
static SUPERVISING: AtomicBool = AtomicBool::new(false);

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sends the stderr of every child started from now on to `file` (`None`: discarded).
pub fn stderr_to(file: Option<File>) {
    *locked(&STDERR) = file;
}

/// The signal (`SIGINT`, `SIGTERM`, `SIGHUP`) that interrupted the last [`supervised`] run.
pub fn interrupted() -> Option<i32> {
    Some(INTERRUPTED.load(Ordering::Relaxed)).filter(|&n| n != 0)
}

/// A child's process group, and the child that leads it until it is reaped.
struct Group {
    id: Pid,
    leader: Option<Child>,
    /// Whether the group has been sent `SIGTERM`.
    terminated: bool,
}

/// A JSON-RPC peer on the other end of a child's stdio.
pub struct Stdio {
    /// `None` once shut down.
    group: Option<Group>,
    /// `None` once closed.
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pub(super) routes: Shared,
}

impl Stdio {
    /// Starts `command` in a process group of its own, with piped stdin and stdout (stderr goes
    /// where [`stderr_to`] said), and the reader task.
    pub fn spawn(command: &[OsString]) -> io::Result<Stdio> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command"))?;
        let stderr = match &*locked(&STDERR) {
            Some(file) => Piped::from(file.try_clone()?),
            None => Piped::null(),
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Piped::piped())
            .stdout(Piped::piped())
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        let id = child.id().and_then(|id| i32::try_from(id).ok());
        let id = Pid::from_raw(id.ok_or_else(|| io::Error::other("the child has no pid"))?);
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let routes = Shared::default();
        tokio::spawn(read(BufReader::new(stdout), Arc::clone(&routes)));
        Ok(Stdio {
            group: Some(Group {
                id,
                leader: Some(child),
                terminated: false,
            }),
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            routes,
        })
    }

    /// Writes one frame as a line.
    pub async fn send(&self, frame: &Value) -> io::Result<()> {
        let mut line = frame.to_string().into_bytes();
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let stdin = stdin.as_mut().ok_or(io::ErrorKind::BrokenPipe)?;
        let write = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        tokio::time::timeout(WRITE_TIMEOUT, write)
            .await
            .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
    }

    /// Registers a waiter for `id`, then sends `frame` (a request with that id).
    pub async fn request(&self, id: &Value, frame: &Value) -> io::Result<Pending> {
        let pending = lock(&self.routes).register(id)?;
        self.send(frame).await?;
        Ok(pending)
    }

    /// Ends the child: closes its stdin and gives it 500 ms to exit, then stops its process
    /// group (whatever it started and left running goes too): `SIGTERM`, up to [`GRACE`],
    /// `SIGKILL`.
    pub async fn shutdown(mut self) {
        drop(self.stdin.get_mut().take());
        let Some(mut group) = self.group.take() else {
            return;
        };
        if let Some(leader) = group.leader.as_mut() {
            let _ = tokio::time::timeout(EXIT_WAIT, leader.wait()).await;
        }
        stop(vec![group]).await;
    }
}

impl Drop for Stdio {
    /// A child not shut down (the run gave up on it, or was interrupted): its group is sent
    /// `SIGTERM` and left to [`supervised`] for the rest, its leader kept unreaped until then so
    /// that the group id stays its own. Outside a supervised run the group is sent `SIGKILL`.
    fn drop(&mut self) {
        let Some(mut group) = self.group.take() else {
            return;
        };
        if SUPERVISING.load(Ordering::Relaxed) {
            let _ = killpg(group.id, Signal::SIGTERM);
            group.terminated = true;
            locked(&LEFT).push(group);
        } else {
            let _ = killpg(group.id, Signal::SIGKILL);
        }
    }
}

/// `SIGTERM` to each group, up to [`GRACE`] for it to empty, then `SIGKILL` to what is left;
/// each leader is reaped.
async fn stop(mut groups: Vec<Group>) {
    for group in groups.iter_mut().filter(|g| !g.terminated) {
        let _ = killpg(group.id, Signal::SIGTERM);
        group.terminated = true;
    }
    let deadline = Instant::now() + GRACE;
    loop {
        groups.retain_mut(|group| {
            if let Some(leader) = group.leader.as_mut()
                && !matches!(leader.try_wait(), Ok(None))
            {
                group.leader = None;
            }
            // a group with no process left is gone; the leader, until reaped, keeps it
            killpg(group.id, None).is_ok()
        });
        if groups.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    for mut group in groups {
        let _ = killpg(group.id, Signal::SIGKILL);
        if let Some(leader) = group.leader.as_mut() {
            let _ = tokio::time::timeout(GRACE, leader.wait()).await;
        }
    }
}

/// Runs `run` (a check that starts children through [`Stdio::spawn`]), then stops the process
/// groups of the children it dropped without a shutdown. On `SIGINT`, `SIGTERM` or `SIGHUP` the
/// run is abandoned, every child's group is stopped, and the run is [`Unreachable`] (then
/// [`interrupted`] names the signal).
pub async fn supervised<T>(
    run: impl Future<Output = Result<T, Unreachable>>,
) -> Result<T, Unreachable> {
    INTERRUPTED.store(0, Ordering::Relaxed);
    let watch =
        |kind| signal(kind).map_err(|e| Unreachable(format!("cannot watch for signals: {e}")));
    let (mut int, mut term, mut hup) = (
        watch(SignalKind::interrupt())?,
        watch(SignalKind::terminate())?,
        watch(SignalKind::hangup())?,
    );
    SUPERVISING.store(true, Ordering::Relaxed);
    let outcome = tokio::select! {
        outcome = run => outcome,
        _ = int.recv() => Err(interrupt(Signal::SIGINT)),
        _ = term.recv() => Err(interrupt(Signal::SIGTERM)),
        _ = hup.recv() => Err(interrupt(Signal::SIGHUP)),
    };
    let left = std::mem::take(&mut *locked(&LEFT));
    stop(left).await;
    SUPERVISING.store(false, Ordering::Relaxed);
    outcome
}

/// Records `signal` as the one that interrupted the run.
fn interrupt(signal: Signal) -> Unreachable {
    INTERRUPTED.store(signal as i32, Ordering::Relaxed);
    Unreachable(format!(
        "interrupted by {}: the run was abandoned and its children stopped",
        signal.as_str()
    ))
}

/// The reader task: routes each line until EOF, then wakes every waiter with nothing.
async fn read(mut stdout: impl AsyncBufRead + Unpin, routes: Shared) {
    let mut line = Vec::new();
    while let Ok(true) = read_line(&mut stdout, &mut line).await {
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let frame = serde_json::from_str(text).unwrap_or_else(|_| json!({ "unparsed": text }));
        lock(&routes).route(frame);
    }
    let mut routes = lock(&routes);
    routes.closed = true;
    routes.pending.clear();
}

/// Reads one line into `line` (without its newline), keeping at most [`MAX_LINE`] bytes of it.
/// `Ok(false)` at EOF with nothing read.
async fn read_line(
    input: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> io::Result<bool> {
    line.clear();
    let mut any = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(any);
        }
        any = true;
        let (chunk, used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], at + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        input.consume(used);
        if done {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_cut_and_the_next_one_is_whole() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{}\nlast");
        let mut reader = BufReader::new(&input[..]);
        let mut line = Vec::new();
        assert!(read_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line.len(), MAX_LINE);
        assert!(read_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line, b"{}");
        assert!(read_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line, b"last");
        assert!(!read_line(&mut reader, &mut line).await.unwrap());
    }
}
