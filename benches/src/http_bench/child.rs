//! A server child ([`server`](super::server)) seen from the bench: its address, and its sleeps'
//! starts and stops read from its stderr on a thread of its own. The child is killed when this
//! is dropped (also while a panic unwinds), and by the kernel if the bench process dies first.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::sync::mpsc;

use super::Stack;
use super::server::TAG;

/// How long the bench waits for a sleep to start before it gives up on the stack.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long the bench waits for a cancelled sleep to stop before it counts the cancel as lost
/// (its sleep then runs to its end, 10 s or more, and reports nothing).
pub const LOST_AFTER: Duration = Duration::from_secs(2);

/// A running server of one stack.
pub struct Server {
    /// Which stack it serves.
    pub stack: Stack,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The `ms` of each sleep that started.
    started: mpsc::UnboundedReceiver<u64>,
    /// The `ms` of each sleep that was stopped, and when (ns since the epoch).
    stopped: mpsc::UnboundedReceiver<(u64, u64)>,
    child: Child,
}

/// One signal line of the child: `TAG: started ms=MS` or `TAG: stopped ms=MS unix_ns=N`.
enum Signal {
    Started(u64),
    Stopped(u64, u64),
}

fn signal(line: &str) -> Option<Signal> {
    let rest = line.strip_prefix(TAG)?.strip_prefix(": ")?;
    if let Some(ms) = rest.strip_prefix("started ms=") {
        return Some(Signal::Started(ms.parse().ok()?));
    }
    let (ms, at) = rest.strip_prefix("stopped ms=")?.split_once(" unix_ns=")?;
    Some(Signal::Stopped(ms.parse().ok()?, at.parse().ok()?))
}

impl Server {
    /// Starts `stack` with `workers` runtime threads and waits until it listens.
    #[allow(unsafe_code)] // see the SAFETY comment inside
    pub fn start(stack: Stack, workers: usize) -> Server {
        let mut command = Command::new(std::env::current_exe().expect("the bench binary's path"));
        command
            .args(["serve-http", stack.arg(), &workers.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe, and the closure touches nothing else. The signal
        // follows the thread that forks, which is the one driving the bench (it outlives every
        // child).
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the {} server: {e}", stack.name()));
        let (started_tx, started) = mpsc::unbounded_channel();
        let (stopped_tx, stopped) = mpsc::unbounded_channel();
        let stderr = child.stderr.take().expect("piped");
        let name = stack.name();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = match signal(&line) {
                    Some(Signal::Started(ms)) => started_tx.send(ms).map_err(drop),
                    Some(Signal::Stopped(ms, at)) => stopped_tx.send((ms, at)).map_err(drop),
                    None => {
                        eprintln!("{name} server: {line}");
                        Ok(())
                    }
                };
            }
        });
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let url = stdout
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("listening on ").map(str::to_owned))
            .unwrap_or_else(|| panic!("the {} server printed no address", stack.name()));
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        Server {
            stack,
            url,
            addr,
            started,
            stopped,
            child,
        }
    }

    /// Waits for the sleep of `ms` to start (starts of other sleeps are passed over); false if
    /// it did not within the patience.
    pub async fn started_in_time(&mut self, ms: u64) -> bool {
        let wait = async {
            while let Some(started) = self.started.recv().await {
                if started == ms {
                    return true;
                }
            }
            false
        };
        tokio::time::timeout(PATIENCE, wait).await.unwrap_or(false)
    }

    /// Waits for the sleep of `ms` to start.
    pub async fn started(&mut self, ms: u64) {
        if !self.started_in_time(ms).await {
            panic!("the {} server started no sleep {ms}", self.stack.name());
        }
    }

    /// Waits (at most [`LOST_AFTER`]) for the sleep of `ms` to stop (stops of other sleeps are
    /// passed over): the wall-clock time of its stop (ns since the epoch), `None` if it did not.
    pub async fn stopped(&mut self, ms: u64) -> Option<u64> {
        let wait = async {
            while let Some((stopped, at)) = self.stopped.recv().await {
                if stopped == ms {
                    return Some(at);
                }
            }
            None
        };
        tokio::time::timeout(LOST_AFTER, wait).await.ok().flatten()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_lines_name_their_sleep() {
        assert!(matches!(
            signal("http-bench: started ms=10042"),
            Some(Signal::Started(10042))
        ));
        assert!(matches!(
            signal("http-bench: stopped ms=10042 unix_ns=1795529812668446117"),
            Some(Signal::Stopped(10042, 1_795_529_812_668_446_117))
        ));
        assert!(signal("http-bench: stopped ms=10042").is_none());
        assert!(signal("thread 'main' panicked").is_none());
    }
}
