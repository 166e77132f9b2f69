//! An upstream MCP server as a child process on stdio, on the cancelkit [`Peer`](cancelkit::peer::Peer).
//!
//! A supervisor task spawns the child, negotiates (`server/discover`, else `initialize`), and
//! serves calls until the child exits or its connection closes; then it restarts it with
//! backoff (100 ms doubling to 10 s; back to 100 ms after a minute of health). Calls in flight
//! when the child dies fail at once with [`CallError::Lost`] — the answers they were owed are
//! errors, never silence. A call made while the child is (re)starting waits up to
//! [`START_WAIT`] for it.
//!
//! Cancelling a call is dropping its future: the runtime sends `notifications/cancelled` with
//! the upstream's own request id (and the cause of the enclosing scope's cancel as reason).
//!
//! **Environment.** The child does not inherit the gateway's environment, which holds the
//! gateway's own secrets (`JWT_SECRET_KEY`, `REDIS_URL`): it starts from an empty one plus the
//! harmless variables of [`INHERITED_BY_DEFAULT`], those its `inherit_env` names, and its
//! `env` table ([`child_env`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, PeerHandle, RequestError};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::peer::{Calls, client_info};
use super::{CallError, ToolCall};

pub use super::peer::MAX_PROGRESS_WATCHES;

/// How long a call waits for a (re)starting child.
pub const START_WAIT: Duration = Duration::from_secs(10);

/// The gateway's environment variables every stdio child inherits (when they are set): where
/// programs are found, who and where the user is, the locale, the time zone and the temporary
/// directory. Nothing that usually holds a credential.
pub const INHERITED_BY_DEFAULT: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
];

/// A child's whole environment: the variables of [`INHERITED_BY_DEFAULT`] and `inherit` that
/// `lookup` (the gateway's environment) has, then `set` (which wins).
pub fn child_env(
    inherit: &[String],
    set: &BTreeMap<String, String>,
    lookup: impl Fn(&str) -> Option<OsString>,
) -> BTreeMap<OsString, OsString> {
    let mut env = BTreeMap::new();
    let inherited = INHERITED_BY_DEFAULT
        .iter()
        .copied()
        .chain(inherit.iter().map(String::as_str));
    for name in inherited {
        if let Some(value) = lookup(name) {
            env.insert(OsString::from(name), value);
        }
    }
    for (name, value) in set {
        env.insert(OsString::from(name), OsString::from(value));
    }
    env
}

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(10);
const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// A supervised stdio child.
#[derive(Debug)]
pub struct StdioUpstream {
    name: String,
    current: watch::Receiver<Option<PeerHandle>>,
    calls: Arc<Calls>,
    stop: CancellationToken,
    stopped: Arc<tokio::sync::Notify>,
    restarts: Arc<AtomicU64>,
}

impl StdioUpstream {
    /// Spawns and supervises the child with exactly the environment `env` (see
    /// [`child_env`]), in the background: this never fails; a child that cannot start is
    /// retried with backoff, and calls meanwhile get [`CallError::Unavailable`].
    pub fn start(
        name: &str,
        program: PathBuf,
        args: Vec<String>,
        env: BTreeMap<OsString, OsString>,
    ) -> StdioUpstream {
        let (tx, rx) = watch::channel(None);
        let calls = Arc::new(Calls::new(name));
        let stop = CancellationToken::new();
        let stopped = Arc::new(tokio::sync::Notify::new());
        let restarts = Arc::new(AtomicU64::new(0));
        let supervisor = Supervisor {
            name: name.to_owned(),
            program,
            args,
            env,
            current: tx,
            calls: Arc::clone(&calls),
            stop: stop.clone(),
            restarts: Arc::clone(&restarts),
        };
        let done = Arc::clone(&stopped);
        tokio::spawn(async move {
            supervisor.run().await;
            done.notify_waiters();
        });
        StdioUpstream {
            name: name.to_owned(),
            current: rx,
            calls,
            stop,
            stopped,
            restarts,
        }
    }

    /// Its configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many `notifications/tools/list_changed` its children sent.
    pub fn list_changes(&self) -> u64 {
        self.calls.list_changes()
    }

    /// How many times the child was started again after it went away.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    async fn connection(&self) -> Result<PeerHandle, CallError> {
        let mut current = self.current.clone();
        let wait = current.wait_for(|c| c.as_ref().is_some_and(|h| !h.is_closed()));
        match tokio::time::timeout(START_WAIT, wait).await {
            Ok(Ok(handle)) => Ok(handle.clone().expect("waited for Some")),
            Ok(Err(_)) => Err(CallError::Unavailable(
                "the gateway is shutting down".into(),
            )),
            Err(_) => Err(CallError::Unavailable(format!(
                "not running (still starting after {START_WAIT:?})"
            ))),
        }
    }

    /// Its tools.
    pub async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        let handle = self.connection().await?;
        self.calls
            .list_tools(&handle)
            .await
            .map_err(lost)?
            .map_err(|why| CallError::Rpc(cancelkit::JsonRpcError::internal(why)))
    }

    /// Calls a tool; dropping the future unanswered sends `notifications/cancelled` upstream.
    pub async fn call(&self, call: ToolCall) -> Result<Box<RawValue>, CallError> {
        let handle = self.connection().await?;
        self.calls
            .call(
                &handle,
                &call.tool,
                call.arguments.as_deref(),
                call.progress.as_ref(),
            )
            .await
            .map_err(lost)
    }

    /// Stops the child: its connection is closed (calls in flight are cancelled), and the
    /// child is killed if it has not exited after `grace`.
    pub async fn shutdown(&self, grace: Duration) {
        let stopped = self.stopped.notified();
        self.stop.cancel();
        let _ = tokio::time::timeout(grace + Duration::from_secs(1), stopped).await;
    }
}

fn lost(error: RequestError) -> CallError {
    match error {
        RequestError::Rpc(e) => CallError::Rpc(e),
        RequestError::Closed => {
            CallError::Lost("its connection closed (the process exited)".into())
        }
        other => CallError::Lost(other.to_string()),
    }
}

struct Supervisor {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: BTreeMap<OsString, OsString>,
    current: watch::Sender<Option<PeerHandle>>,
    calls: Arc<Calls>,
    stop: CancellationToken,
    restarts: Arc<AtomicU64>,
}

impl Supervisor {
    async fn run(self) {
        let mut backoff = BACKOFF_MIN;
        let mut first = true;
        while !self.stop.is_cancelled() {
            if !first {
                self.restarts.fetch_add(1, Ordering::Relaxed);
            }
            first = false;
            let started = Instant::now();
            match self.serve_once().await {
                Ok(()) if self.stop.is_cancelled() => break,
                Ok(()) => {
                    tracing::warn!(upstream = %self.name, "upstream exited; restarting in {backoff:?}");
                }
                Err(e) => {
                    tracing::warn!(upstream = %self.name, "upstream failed: {e}; restarting in {backoff:?}");
                }
            }
            if started.elapsed() >= HEALTHY_AFTER {
                backoff = BACKOFF_MIN;
            }
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
        self.current.send_replace(None);
    }

    /// Runs the child once, until it exits, its connection closes, or we stop.
    async fn serve_once(&self) -> Result<(), String> {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        // Its own process group: a Ctrl-C or a SIGTERM sent to the gateway's group must not
        // kill the upstream before the gateway has drained the calls it owes. (If the gateway
        // dies, the child's stdin closes and an MCP server exits.)
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.program.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let peer = self.calls.builder().connect(stdout, stdin);
        let handle = peer.handle();
        let negotiated = tokio::select! {
            n = handle.discover_or_initialize(client_info(), DEFAULT_DISCOVER_TIMEOUT) => n,
            () = self.stop.cancelled() => { handle.close(); return Ok(()); }
            status = child.wait() => return Err(format!("exited while starting ({})", status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string()))),
        };
        let negotiated = match negotiated {
            Ok(n) => n,
            Err(e) => {
                handle.close();
                let _ = child.kill().await;
                return Err(format!("handshake failed: {e}"));
            }
        };
        tracing::info!(upstream = %self.name, revision = ?negotiated.revision, "upstream ready");
        self.current.send_replace(Some(handle.clone()));
        let closed = peer.closed();
        tokio::pin!(closed);
        let outcome = tokio::select! {
            () = self.stop.cancelled() => {
                handle.close();
                let _ = tokio::time::timeout(Duration::from_secs(2), &mut closed).await;
                Ok(())
            }
            status = child.wait() => {
                handle.close();
                Err(format!("exited ({})", status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())))
            }
            () = &mut closed => Err("its connection closed".to_owned()),
        };
        self.current.send_replace(None);
        let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        let _ = child.kill().await;
        match outcome {
            Ok(()) => Ok(()),
            Err(e) if self.stop.is_cancelled() => {
                tracing::debug!(upstream = %self.name, "stopped: {e}");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_gets_the_defaults_its_inherit_env_and_its_env_only() {
        let gateway = |name: &str| {
            let value = match name {
                "PATH" => "/bin",
                "JWT_SECRET_KEY" => "gateway-secret",
                "REDIS_URL" => "redis://:pw@h/",
                "PROXY" => "http://proxy",
                "LANG" => "C.UTF-8",
                _ => return None,
            };
            Some(OsString::from(value))
        };
        let set = BTreeMap::from([
            ("API_KEY".to_owned(), "k".to_owned()),
            ("LANG".to_owned(), "de_DE.UTF-8".to_owned()),
        ]);
        let env = child_env(&["PROXY".to_owned(), "MISSING".to_owned()], &set, gateway);
        let names: Vec<_> = env
            .keys()
            .map(|k| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["API_KEY", "LANG", "PATH", "PROXY"]);
        assert_eq!(env[&OsString::from("LANG")], "de_DE.UTF-8", "env wins");
        let listed = child_env(&["JWT_SECRET_KEY".to_owned()], &BTreeMap::new(), gateway);
        assert!(
            listed.contains_key(&OsString::from("JWT_SECRET_KEY")),
            "only when listed"
        );
        assert!(!listed.contains_key(&OsString::from("REDIS_URL")));
    }
}
