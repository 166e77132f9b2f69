//! A tool's child process, in its own process group and temporary directory.
//!
//! ```no_run
//! # async fn tool() -> Result<(), cancelkit::rap::process::ProcessError> {
//! use std::time::Duration;
//! let mut command = tokio::process::Command::new("make");
//! command.arg("test");
//! let output = cancelkit::rap::process::run(command, Duration::from_secs(5)).await?;
//! println!("{}", output.stdout);
//! # Ok(()) }
//! ```

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

use crate::{CancelReason, Cancelled};

/// What a finished process produced.
#[derive(Debug, Clone)]
pub struct ProcessOutput {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output (lossy UTF-8).
    pub stdout: String,
    /// Its standard error (lossy UTF-8).
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

/// Runs `command` in a new process group, with a fresh temporary directory as its working
/// directory and `TMPDIR`, collecting its output.
///
/// When the ambient scope is cancelled (the call was cancelled), the whole group gets SIGTERM,
/// then SIGKILL if anything is left after `grace`; the directory is removed and the result is
/// [`ProcessError::Cancelled`]. If the future is dropped instead (abort mode), the same happens
/// in the background. On normal exit the directory is removed too.
pub async fn run(
    mut command: tokio::process::Command,
    grace: Duration,
) -> Result<ProcessOutput, ProcessError> {
    let dir = tempfile::Builder::new()
        .prefix("cancelkit-tool-")
        .tempdir()?;
    command
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    let mut child = command.spawn()?;
    let pgid = child.id().map(|id| Pid::from_raw(id as i32));
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let mut group = Group {
        pgid,
        grace,
        dir: Some(dir),
        child: Some(child),
    };
    let read_out = async {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes).await;
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let read_err = async {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes).await;
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let leader = group.child.as_mut().expect("just spawned");
    let finished = async { tokio::join!(leader.wait(), read_out, read_err) };
    tokio::select! {
        biased;
        (status, stdout, stderr) = finished => {
            group.pgid = None; // exited normally: nothing to terminate
            Ok(ProcessOutput { status: status?, stdout, stderr })
        }
        () = crate::cancelled() => {
            group.terminate().await;
            let reason = crate::cancel_reason().unwrap_or(CancelReason::Parent);
            Err(Cancelled::new(reason).into())
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

/// SIGTERM to the group, up to `grace` for the leader to exit (and be reaped), SIGKILL for
/// whatever is left.
async fn stop_group(pgid: Pid, grace: Duration, child: Option<&mut tokio::process::Child>) {
    let _ = killpg(pgid, Signal::SIGTERM);
    match child {
        Some(child) => {
            if tokio::time::timeout(grace, child.wait()).await.is_err() || alive(pgid) {
                let _ = killpg(pgid, Signal::SIGKILL);
                let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
            }
        }
        None => {
            let deadline = tokio::time::Instant::now() + grace;
            while alive(pgid) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

fn alive(pgid: Pid) -> bool {
    killpg(pgid, None).is_ok()
}

impl Group {
    /// SIGTERM, up to `grace` for the leader to exit, SIGKILL for whatever is left, then the
    /// directory goes.
    ///
    /// The group stays armed until the end, so if this future is dropped half-way (the call's
    /// future dropped while waiting out the grace period), `Drop` finishes the job.
    async fn terminate(&mut self) {
        if let Some(pgid) = self.pgid {
            stop_group(pgid, self.grace, self.child.as_mut()).await;
            self.pgid = None;
            tracing::info!(
                pgid = pgid.as_raw(),
                "terminated a cancelled tool's process group"
            );
        }
        self.dir.take();
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let Some(pgid) = self.pgid.take() else {
            return;
        };
        // Dropped while running (the call's future was dropped): terminate in the background.
        let _ = killpg(pgid, Signal::SIGTERM);
        let (dir, grace, mut child) = (self.dir.take(), self.grace, self.child.take());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    stop_group(pgid, grace, child.as_mut()).await;
                    drop(dir);
                });
            }
            Err(_) => {
                let _ = killpg(pgid, Signal::SIGKILL);
                drop(dir);
            }
        }
    }
}
