//! The driver of a client script of `tests/python` or `tests/node` (JSON lines out, a go-ahead
//! line in, a hard time limit), and what it saw on the wire.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// A client script running against the gateway: its JSON lines as they come, a way to let it
/// go on, and a hard time limit (it is killed when the limit passes or the driver is dropped).
pub struct Script {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    events: Vec<Value>,
    deadline: Instant,
}

/// How long a script may run in all.
pub const SCRIPT_LIMIT: Duration = Duration::from_secs(45);

impl Script {
    /// `python tests/python/<script> args...` in the pinned venv (installed on first use).
    pub fn python(script: &str, args: &[&str]) -> Script {
        let python = cancelkit_tests::python::sdk_python();
        let mut command = Command::new(python);
        command
            .arg(cancelkit_tests::python::script(script))
            .args(args)
            .env("PYTHONUNBUFFERED", "1");
        Script::spawn(format!("python {script}"), command)
    }

    /// `node tests/node/<script> args...` with the pinned packages (installed on first use).
    pub fn node(script: &str, args: &[&str]) -> Script {
        let dir = cancelkit_tests::node::dir();
        let mut command = Command::new("node");
        command.arg(script).args(args).current_dir(dir);
        Script::spawn(format!("node {script}"), command)
    }

    fn spawn(name: String, mut command: Command) -> Script {
        command
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("http_proxy")
            .env_remove("https_proxy")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
        // Bounded: a script that writes faster than the test reads waits on its pipe.
        let (tx, lines) = mpsc::channel(1024);
        let stdout = child.stdout.take().expect("piped stdout");
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).await.is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped stderr");
        let sink = Arc::clone(&stderr);
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Script {
            name,
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            events: Vec::new(),
            deadline: Instant::now() + SCRIPT_LIMIT,
        }
    }

    /// Everything the script printed so far, and its stderr: for failure messages.
    pub fn transcript(&self) -> String {
        let lines: Vec<String> = self.events.iter().map(Value::to_string).collect();
        format!(
            "[{}] stdout:\n{}\n[{}] stderr:\n{}",
            self.name,
            lines.join("\n"),
            self.name,
            self.stderr.lock().unwrap()
        )
    }

    /// The next line; `None` at the end of the output. Panics past the time limit.
    async fn next_event(&mut self) -> Option<Value> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, self.lines.recv()).await {
            Ok(Some(line)) => {
                let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("not a JSON line ({e}): {line}\n{}", self.transcript())
                });
                self.events.push(event.clone());
                Some(event)
            }
            Ok(None) => None,
            Err(_) => {
                let _ = self.child.start_kill();
                panic!(
                    "the script ran past its limit of {SCRIPT_LIMIT:?}\n{}",
                    self.transcript()
                );
            }
        }
    }

    /// Waits for the next line whose `event` is `name` (skipping none: the scripts print their
    /// events in a fixed order, so any other line here is a failure).
    pub async fn expect(&mut self, name: &str) -> Value {
        match self.next_event().await {
            Some(event) if event["event"] == name => event,
            Some(_) => panic!("expected {name:?} next\n{}", self.transcript()),
            None => {
                // Let stderr catch up before reporting.
                tokio::time::sleep(Duration::from_millis(200)).await;
                panic!(
                    "the script ended before {name:?} ({:?})\n{}",
                    self.child.try_wait(),
                    self.transcript()
                )
            }
        }
    }

    /// Lets a script waiting on stdin go on.
    pub async fn go(&mut self) {
        let waiting = self.expect("waiting").await;
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin
            .write_all(b"go\n")
            .await
            .unwrap_or_else(|e| panic!("stdin: {e} ({waiting})"));
        stdin.flush().await.expect("flush stdin");
    }

    /// Reads the rest of the output (the last line is `wire`) and waits for a clean exit.
    pub async fn finish(mut self) -> Report {
        let wire = self.expect("wire").await;
        while self.next_event().await.is_some() {}
        let left = self.deadline.saturating_duration_since(Instant::now());
        let status = tokio::time::timeout(left, self.child.wait()).await;
        match status {
            Ok(Ok(status)) if status.success() => {}
            other => panic!(
                "the script did not exit cleanly: {other:?}\n{}",
                self.transcript()
            ),
        }
        Report {
            transcript: self.transcript(),
            exchanges: wire["exchanges"].as_array().cloned().unwrap_or_default(),
            transport_errors: wire["transportErrors"].clone(),
        }
    }
}

/// What a script saw on the wire: every HTTP exchange with the gateway, each with the JSON-RPC
/// messages the gateway sent on its body.
pub struct Report {
    /// The whole output, for failure messages.
    pub transcript: String,
    /// `{method, request, session, lastEventId, status, contentType, allow, messages,
    /// messageTimes, eventIds, ended, startedAt, endedAt}` each.
    pub exchanges: Vec<Value>,
    /// What the SDK reported as errors (Python: logged at WARNING or above; TypeScript: its
    /// `onerror`): there must be none (see `resumes.rs`).
    pub transport_errors: Value,
}

impl Report {
    /// The exchange that POSTed the request with this id (not a notification naming it).
    pub fn post_of(&self, id: &Value) -> &Value {
        self.exchanges
            .iter()
            .find(|e| e["request"]["id"] == *id && e["request"].get("method").is_some())
            .unwrap_or_else(|| panic!("no POST of request {id}\n{}", self.transcript))
    }

    /// Every response (result or error) the gateway sent for the request with this id, on any
    /// stream.
    pub fn responses_to(&self, id: &Value) -> Vec<&Value> {
        self.messages()
            .filter(|m| m.get("method").is_none() && m["id"] == *id)
            .collect()
    }

    /// Every message the gateway sent.
    pub fn messages(&self) -> impl Iterator<Item = &Value> {
        self.exchanges
            .iter()
            .flat_map(|e| e["messages"].as_array().into_iter().flatten())
    }

    /// Every message the gateway sent, with when it reached the client (Unix ms).
    pub fn timed_messages(&self) -> impl Iterator<Item = (&Value, Option<f64>)> {
        self.exchanges.iter().flat_map(|e| {
            let times = e["messageTimes"].as_array();
            e["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(move |(i, m)| (m, times.and_then(|t| t.get(i)).and_then(Value::as_f64)))
        })
    }

    /// The notifications the client POSTed with this method.
    pub fn notifications_sent(&self, method: &str) -> Vec<&Value> {
        self.exchanges
            .iter()
            .filter(|e| e["request"]["method"] == method && e["request"].get("id").is_none())
            .map(|e| &e["request"])
            .collect()
    }
}
