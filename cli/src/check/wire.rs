//! A raw line-level JSON-RPC client over a child's stdin and stdout.
//!
//! Raw on purpose: `cancelkit check` must send frames a conforming client never would (malformed
//! cancels, ids `1` and `"1"` side by side) and watch for frames that must not come. Each frame is
//! one line. A reader task routes each response to the waiter registered for its id (ids compare
//! by their JSON text, so `1` and `"1"` are different) and keeps every other frame — responses
//! nobody waits for, notifications, the server's requests — in a bounded queue of
//! [`Client::others`]. Every wait has a timeout; the waiters, the queue and a line are bounded.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

/// The longest frame kept; a longer line is cut to this many bytes (and will not parse).
pub const MAX_LINE: usize = 4 << 20;
/// At most this many requests wait for their response at once.
pub const MAX_PENDING: usize = 4096;
/// At most this many unrouted frames are kept; older ones are dropped first.
pub const MAX_OTHERS: usize = 1024;
/// At most this many `notifications/cancelled` from the server are kept for [`Client::cancels`].
pub const MAX_CANCELS: usize = 256;
/// How long a write to the child's stdin may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The key a response is routed by: its id's JSON text (`1` and `"1"` differ).
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// What the reader task and the client share.
#[derive(Default)]
struct Routes {
    pending: HashMap<String, oneshot::Sender<Value>>,
    others: VecDeque<Value>,
    dropped: usize,
    /// Every `notifications/cancelled` the server sent (the first [`MAX_CANCELS`]), whoever
    /// took the frame.
    cancels: Vec<Value>,
    closed: bool,
}

impl Routes {
    /// Routes one frame from the server.
    fn route(&mut self, frame: Value) {
        if frame.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
            && self.cancels.len() < MAX_CANCELS
        {
            self.cancels.push(frame.clone());
        }
        let is_response = frame.get("method").is_none()
            && (frame.get("result").is_some() || frame.get("error").is_some());
        if is_response
            && let Some(id) = frame.get("id")
            && let Some(waiter) = self.pending.remove(&id_key(id))
        {
            // The waiter may have given up: then the frame is kept with the others.
            match waiter.send(frame) {
                Ok(()) => return,
                Err(frame) => return self.keep(frame),
            }
        }
        self.keep(frame);
    }

    fn keep(&mut self, frame: Value) {
        if self.others.len() == MAX_OTHERS {
            self.others.pop_front();
            self.dropped += 1;
        }
        self.others.push_back(frame);
    }
}

/// A JSON-RPC peer on the other end of a child's stdio.
pub struct Client {
    child: Child,
    stdin: tokio::sync::Mutex<ChildStdin>,
    routes: Arc<Mutex<Routes>>,
}

impl Client {
    /// Starts `command` with piped stdin and stdout (stderr is discarded) and the reader task.
    pub fn spawn(command: &[OsString]) -> io::Result<Client> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command"))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let routes = Arc::new(Mutex::new(Routes::default()));
        tokio::spawn(read(BufReader::new(stdout), Arc::clone(&routes)));
        Ok(Client {
            child,
            stdin: tokio::sync::Mutex::new(stdin),
            routes,
        })
    }

    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one frame as a line.
    pub async fn send(&self, frame: &Value) -> io::Result<()> {
        let mut line = frame.to_string().into_bytes();
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
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
        let (tx, rx) = oneshot::channel();
        {
            let mut routes = self.routes();
            if routes.closed {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            if routes.pending.len() >= MAX_PENDING {
                return Err(io::Error::other("too many requests in flight"));
            }
            routes.pending.insert(id_key(id), tx);
        }
        self.send(frame).await?;
        Ok(Pending(Some(rx)))
    }

    /// Takes the frames no waiter took, oldest first.
    pub fn others(&self) -> Vec<Value> {
        self.routes().others.drain(..).collect()
    }

    /// Every `notifications/cancelled` the server has sent so far (at most [`MAX_CANCELS`]),
    /// oldest first; unlike [`Client::others`], it does not take them.
    pub fn cancels(&self) -> Vec<Value> {
        self.routes().cancels.clone()
    }

    /// Whether the server's stdout has ended.
    pub fn closed(&self) -> bool {
        self.routes().closed
    }

    /// Ends the child.
    pub async fn shutdown(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_millis(500), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// A response still to come. Once it has come, or can no longer come, it is spent: later waits
/// give `None` at once.
pub struct Pending(Option<oneshot::Receiver<Value>>);

impl Pending {
    /// A response that never comes (for a request that could not be sent).
    pub fn never() -> Pending {
        Pending(None)
    }

    /// The response, if it comes within `timeout` (`None` too when the server has gone).
    pub async fn wait(&mut self, timeout: Duration) -> Option<Value> {
        let receiver = self.0.as_mut()?;
        let outcome = tokio::time::timeout(timeout, receiver).await.ok()?;
        self.0 = None;
        outcome.ok()
    }

    /// The response if it has already come.
    pub fn now(&mut self) -> Option<Value> {
        let outcome = self.0.as_mut()?.try_recv();
        match outcome {
            Err(oneshot::error::TryRecvError::Empty) => None,
            outcome => {
                self.0 = None;
                outcome.ok()
            }
        }
    }
}

/// The reader task: routes each line until EOF, then wakes every waiter with nothing.
async fn read(mut stdout: impl AsyncBufRead + Unpin, routes: Arc<Mutex<Routes>>) {
    let mut line = Vec::new();
    while let Ok(true) = read_line(&mut stdout, &mut line).await {
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let frame = serde_json::from_str(text).unwrap_or_else(|_| json!({ "unparsed": text }));
        routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .route(frame);
    }
    let mut routes = routes.lock().unwrap_or_else(|e| e.into_inner());
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

    fn response(id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    }

    #[test]
    fn one_and_string_one_are_routed_apart() {
        let mut routes = Routes::default();
        let (tx_num, mut rx_num) = oneshot::channel();
        let (tx_str, mut rx_str) = oneshot::channel();
        routes.pending.insert(id_key(&json!(1)), tx_num);
        routes.pending.insert(id_key(&json!("1")), tx_str);
        routes.route(response(json!("1")));
        assert_eq!(rx_str.try_recv().unwrap()["id"], json!("1"));
        assert!(rx_num.try_recv().is_err(), "the numeric waiter got nothing");
        routes.route(response(json!(1)));
        assert_eq!(rx_num.try_recv().unwrap()["id"], json!(1));
        assert!(routes.others.is_empty());
    }

    #[test]
    fn unrouted_frames_are_kept_and_bounded() {
        let mut routes = Routes::default();
        routes.route(response(json!(7)));
        routes.route(json!({"jsonrpc": "2.0", "method": "notifications/message"}));
        routes.route(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600}}));
        assert_eq!(routes.others.len(), 3);
        for n in 0..MAX_OTHERS {
            routes.route(response(json!(n)));
        }
        assert_eq!(routes.others.len(), MAX_OTHERS);
        assert_eq!(routes.dropped, 3);
    }

    #[test]
    fn the_servers_cancels_are_recorded_and_bounded() {
        let mut routes = Routes::default();
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}});
        routes.route(cancel.clone());
        routes.others.clear();
        assert_eq!(routes.cancels, std::slice::from_ref(&cancel));
        for _ in 0..MAX_CANCELS + 5 {
            routes.route(cancel.clone());
        }
        assert_eq!(routes.cancels.len(), MAX_CANCELS);
    }

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
