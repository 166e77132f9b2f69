//! A tool's child process, in its own process group and temporary directory.
//!
//! ```no_run
//! # async fn tool() -> Result<(), cancelkit::rap::process::ProcessError> {
//! use std::time::Duration;
//! use cancelkit::rap::process::{self, RunOptions};
//!
//! let mut command = tokio::process::Command::new("make");
//! command.arg("test");
//! let options = RunOptions::new(Duration::from_secs(5)).output_limit(64 * 1024);
//! let output = process::run_with(command, options).await?;
//! println!("{}", output.stdout);
//! # Ok(()) }
//! ```

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

use crate::{CancelReason, Cancelled};

/// How much of each of stdout and stderr [`run`] keeps by default: 1 MiB.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;

/// Once the process group is gone, how long to wait for the output pipes to close; only a
/// process that left the group (`setsid`) can hold them longer, and its output is cut there.
const DRAIN: Duration = Duration::from_millis(250);

/// What a finished process produced.
#[derive(Debug, Clone)]
pub struct ProcessOutput {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output (lossy UTF-8), at most the output limit, followed by
    /// `"\n[... output truncated after N bytes]"` if there was more.
    pub stdout: String,
    /// Its standard error, likewise.
    pub stderr: String,
}

/// Why [`run`] produced no output.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The process could not be started, or its temporary directory not created.
    #[error("cannot run the tool process: {0}")]
    Io(#[from] std::io::Error),
    /// The call was cancelled; the process group was terminated and its directory removed.
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

/// How [`run_with`] runs a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    grace: Duration,
    output_limit: usize,
    temp_root: Option<PathBuf>,
}

impl RunOptions {
    /// `grace` between SIGTERM and SIGKILL when the group is stopped; output capped at
    /// [`DEFAULT_OUTPUT_LIMIT`].
    pub fn new(grace: Duration) -> Self {
        RunOptions {
            grace,
            output_limit: DEFAULT_OUTPUT_LIMIT,
            temp_root: None,
        }
    }

    /// Creates each call's temporary directory under `dir` (for example a tmpfs) instead of
    /// [`std::env::temp_dir`].
    pub fn temp_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_root = Some(dir.into());
        self
    }

    /// Keeps at most `bytes` of each of stdout and stderr. The rest is still read (so the
    /// process never blocks on a full pipe) but discarded, and the kept text ends with
    /// `"\n[... output truncated after N bytes]"`.
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }
}

/// [`run_with`] with the default output limit.
pub async fn run(
    command: tokio::process::Command,
    grace: Duration,
) -> Result<ProcessOutput, ProcessError> {
    run_with(command, RunOptions::new(grace)).await
}

/// Runs `command` in a new process group, with a fresh temporary directory as its working
/// directory and `TMPDIR`, collecting its (capped) output.
///
/// When the ambient scope is cancelled (the call was cancelled), the whole group gets SIGTERM,
/// then SIGKILL if anything of it is left after the grace period, even if the group's leader
/// exited at once; the directory is removed and the result is [`ProcessError::Cancelled`]. If
/// the future is dropped instead (abort mode), the same happens in the background.
///
/// When the leader exits by itself, whatever it left running in its group is stopped the same
/// way (SIGTERM, grace, SIGKILL) before the directory is removed and the output returned.
/// Creating and removing the directory run on tokio's blocking pool.
pub async fn run_with(
    mut command: tokio::process::Command,
    options: RunOptions,
) -> Result<ProcessOutput, ProcessError> {
    let dir = tokio::task::spawn_blocking(|| {
        tempfile::Builder::new().prefix("cancelkit-tool-").tempdir()
    })
    .await
    .map_err(std::io::Error::other)??;
    command
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            remove_dir(dir).await;
            return Err(e.into());
        }
    };
    let pgid = child.id().map(|id| Pid::from_raw(id as i32));
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut group = Group {
        pgid,
        grace: options.grace,
        dir: Some(dir),
        child: Some(child),
    };
    let mut out = Capture::new(options.output_limit);
    let mut err = Capture::new(options.output_limit);
    let status = {
        let reading = async { tokio::join!(out.read_from(stdout), err.read_from(stderr)) };
        let mut reading = std::pin::pin!(reading);
        let mut read_all = false;
        let leader = group.child.as_mut().expect("just spawned");
        let status = loop {
            tokio::select! {
                biased;
                () = crate::cancelled() => break None,
                status = leader.wait() => break Some(status),
                _ = &mut reading, if !read_all => read_all = true,
            }
        };
        // Stop the group (all of it when cancelled; what the leader left behind when it exited
        // by itself), still reading its output: a process that writes while it shuts down
        // must not die of a closed pipe before its grace period is over. Then give the pipes
        // a moment to close.
        let cancelled = status.is_none();
        let stopping = async {
            if cancelled {
                group.stop().await;
                return;
            }
            if let Some(pgid) = group.pgid
                && group_alive(pgid).await
            {
                tracing::info!(
                    pgid = pgid.as_raw(),
                    "a tool's process exited and left processes behind; stopping them"
                );
                stop_group(pgid, options.grace, None).await;
            }
            group.pgid = None;
        };
        let mut stopping = std::pin::pin!(stopping);
        let mut stopped_at: Option<Instant> = None;
        while stopped_at.is_none() || !read_all {
            let drain_until = stopped_at.map(|at| at + DRAIN);
            tokio::select! {
                () = &mut stopping, if stopped_at.is_none() => stopped_at = Some(Instant::now()),
                _ = &mut reading, if !read_all => read_all = true,
                () = sleep_until(drain_until), if !read_all && drain_until.is_some() => {
                    tracing::warn!("a tool's output pipes stayed open after its process group was gone; its output is cut short");
                    break;
                }
            }
        }
        status
    };
    group.remove_dir().await;
    match status {
        Some(status) => Ok(ProcessOutput {
            status: status?,
            stdout: out.into_string(),
            stderr: err.into_string(),
        }),
        None => {
            let reason = crate::cancel_reason().unwrap_or(CancelReason::Parent);
            Err(Cancelled::new(reason).into())
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// One captured output stream: the first `limit` bytes, and how many there were in all.
struct Capture {
    bytes: Vec<u8>,
    limit: usize,
    total: u64,
}

impl Capture {
    fn new(limit: usize) -> Self {
        Capture {
            bytes: Vec::new(),
            limit,
            total: 0,
        }
    }

    /// Reads `pipe` to its end (or to a read error), keeping what fits.
    async fn read_from(&mut self, pipe: Option<impl AsyncRead + Unpin>) {
        let Some(mut pipe) = pipe else {
            return;
        };
        let mut buffer = vec![0; 16 * 1024];
        loop {
            match pipe.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    self.total += n as u64;
                    let room = self.limit.saturating_sub(self.bytes.len());
                    self.bytes.extend_from_slice(&buffer[..n.min(room)]);
                }
            }
        }
    }

    fn into_string(self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.total > self.bytes.len() as u64 {
            text.push_str(&format!(
                "\n[... output truncated after {} bytes]",
                self.bytes.len()
            ));
        }
        text
    }
}

/// Removes a temporary directory on the blocking pool (a large tree takes a while).
async fn remove_dir(dir: tempfile::TempDir) {
    let path = dir.path().to_owned();
    match tokio::task::spawn_blocking(move || dir.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = ?super::shown(&e.to_string()), dir = ?path, "cannot remove a tool's temporary directory");
        }
        Err(e) => {
            tracing::warn!(error = ?super::shown(&e.to_string()), dir = ?path, "removing a tool's temporary directory failed");
        }
    }
}

/// A running process group (with its leader, so it can be reaped) and its directory;
/// terminated and removed when dropped armed.
struct Group {
    pgid: Option<Pid>,
    grace: Duration,
    dir: Option<tempfile::TempDir>,
    child: Option<tokio::process::Child>,
}

/// SIGTERM to the group, up to `grace` for all of it to exit (the leader, if given, is reaped
/// meanwhile), SIGKILL for whatever is left. The grace period is the group's, not the
/// leader's: members keep it even when the leader exits at once.
async fn stop_group(pgid: Pid, grace: Duration, mut child: Option<&mut tokio::process::Child>) {
    let _ = killpg(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(leader) = child.as_mut()
            && matches!(leader.try_wait(), Ok(Some(_)))
        {
            child = None; // reaped: it no longer counts as a member
        }
        if !group_alive(pgid).await {
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    let _ = killpg(pgid, Signal::SIGKILL);
    if let Some(leader) = child {
        let _ = tokio::time::timeout(Duration::from_secs(1), leader.wait()).await;
    }
}

/// Whether any process of the group is still running (zombies do not count: they have exited
/// and only wait for their parent, or for an init that may never reap them, to collect them).
async fn group_alive(pgid: Pid) -> bool {
    if killpg(pgid, None).is_err() {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let raw = pgid.as_raw();
        tokio::task::spawn_blocking(move || procfs_group_alive(raw))
            .await
            .unwrap_or(Some(true))
            .unwrap_or(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// Whether `/proc` shows a process of group `pgid` that is not a zombie; `None` if `/proc`
/// cannot be read.
#[cfg(target_os = "linux")]
fn procfs_group_alive(pgid: i32) -> Option<bool> {
    let pgid = pgid.to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue; // exited meanwhile
        };
        // "pid (comm) state ppid pgrp ...": comm may hold anything, so split after its ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let group = fields.nth(1);
        if group == Some(pgid.as_str()) && !matches!(state, Some("Z" | "X")) {
            return Some(true);
        }
    }
    Some(false)
}

impl Group {
    /// SIGTERM, up to `grace` for the group to exit, SIGKILL for whatever is left.
    ///
    /// The group stays armed until the end, so if this future is dropped half-way (the call's
    /// future dropped while waiting out the grace period), `Drop` finishes the job.
    async fn stop(&mut self) {
        if let Some(pgid) = self.pgid {
            stop_group(pgid, self.grace, self.child.as_mut()).await;
            self.pgid = None;
            tracing::info!(
                pgid = pgid.as_raw(),
                "terminated a cancelled tool's process group"
            );
        }
    }

    async fn remove_dir(&mut self) {
        if let Some(dir) = self.dir.take() {
            remove_dir(dir).await;
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = self.pgid.take();
        let dir = self.dir.take();
        if pgid.is_none() && dir.is_none() {
            return;
        }
        // Dropped while running (the call's future was dropped): finish in the background.
        if let Some(pgid) = pgid {
            let _ = killpg(pgid, Signal::SIGTERM);
        }
        let (grace, mut child) = (self.grace, self.child.take());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Some(pgid) = pgid {
                        stop_group(pgid, grace, child.as_mut()).await;
                    }
                    if let Some(dir) = dir {
                        remove_dir(dir).await;
                    }
                });
            }
            Err(_) => {
                if let Some(pgid) = pgid {
                    let _ = killpg(pgid, Signal::SIGKILL);
                }
                drop(dir);
            }
        }
    }
}
