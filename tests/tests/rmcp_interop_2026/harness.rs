//! The wire tap (every JSON-RPC line that crossed a duplex pipe, per direction) and the events
//! tools report on both sides: started, stopped (dropped unfinished), finished.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

pub(crate) const V2026: &str = "2026-07-28";
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

// ---------------------------------------------------------------------------------------------
// The wire tap.

/// Every JSON-RPC line that crossed the pipe, per direction.
#[derive(Clone, Default)]
pub(crate) struct Tap {
    pub(crate) to_server: Arc<Mutex<Vec<Value>>>,
    to_client: Arc<Mutex<Vec<Value>>>,
}

impl Tap {
    pub(crate) fn to_server(&self) -> Vec<Value> {
        self.to_server.lock().unwrap().clone()
    }

    fn to_client(&self) -> Vec<Value> {
        self.to_client.lock().unwrap().clone()
    }

    /// The requests the client sent (messages with both `method` and `id`).
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.to_server()
            .into_iter()
            .filter(|m| m.get("method").is_some() && m.get("id").is_some())
            .collect()
    }

    /// The methods the client sent, requests and notifications, in order.
    pub(crate) fn client_methods(&self) -> Vec<String> {
        self.to_server()
            .iter()
            .filter_map(|m| m["method"].as_str().map(str::to_owned))
            .collect()
    }

    /// The first `n` methods the client sent, once it has sent that many (the tap forwards
    /// asynchronously, so a line just written may not be recorded yet).
    pub(crate) async fn first_methods(&self, n: usize) -> Vec<String> {
        for _ in 0..500 {
            let methods = self.client_methods();
            if methods.len() >= n {
                return methods[..n].to_vec();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "fewer than {n} methods on the wire: {:?}",
            self.client_methods()
        );
    }

    /// The server's responses to request `id`.
    pub(crate) fn responses_for(&self, id: &Value) -> Vec<Value> {
        self.to_client()
            .into_iter()
            .filter(|m| m.get("method").is_none() && &m["id"] == id)
            .collect()
    }

    /// The one response to the client's only request of `method` (or the last one).
    pub(crate) fn response_to(&self, method: &str) -> Value {
        let request = self
            .requests()
            .into_iter()
            .rfind(|m| m["method"] == method)
            .unwrap_or_else(|| panic!("no {method} on the wire"));
        let responses = self.responses_for(&request["id"]);
        assert_eq!(
            responses.len(),
            1,
            "one response to {method}: {responses:?}"
        );
        responses.into_iter().next().unwrap()
    }

    /// The `notifications/cancelled` the server sent the client.
    pub(crate) fn cancels_to_client(&self) -> Vec<Value> {
        self.to_client()
            .into_iter()
            .filter(|m| m["method"] == "notifications/cancelled")
            .collect()
    }

    /// Every request the client sent carries 2026-07-28 `_meta`.
    pub(crate) fn assert_every_request_stamped(&self) {
        let requests = self.requests();
        assert!(!requests.is_empty());
        for request in &requests {
            let meta = &request["params"]["_meta"];
            assert_eq!(meta[VERSION_KEY], V2026, "not stamped: {request}");
            assert!(
                meta[CAPABILITIES_KEY].is_object(),
                "no capabilities: {request}"
            );
        }
    }

    /// No request the client sent after the legacy handshake carries a 2026-07-28 version.
    pub(crate) fn assert_no_request_stamped_after_initialize(&self) {
        let requests = self.requests();
        let start = requests
            .iter()
            .position(|m| m["method"] == "initialize")
            .expect("an initialize");
        for request in &requests[start..] {
            assert!(
                request["params"]["_meta"].get(VERSION_KEY).is_none(),
                "a legacy-era request stamped with 2026-07-28: {request}"
            );
        }
    }

    /// Waits until the client has sent a request matching `pick`; returns its id.
    pub(crate) async fn wait_for_request(&self, pick: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..500 {
            if let Some(request) = self.requests().into_iter().find(|m| pick(m)) {
                return request["id"].clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no such request on the wire: {:?}", self.to_server());
    }
}

/// A pipe with a tap in the middle: (client end, server end, tap).
pub(crate) fn tapped_pipe() -> (DuplexStream, DuplexStream, Tap) {
    let (client, client_inner) = tokio::io::duplex(1 << 16);
    let (server_inner, server) = tokio::io::duplex(1 << 16);
    let tap = Tap::default();
    let (client_read, client_write) = tokio::io::split(client_inner);
    let (server_read, server_write) = tokio::io::split(server_inner);
    tokio::spawn(forward(
        client_read,
        server_write,
        Arc::clone(&tap.to_server),
    ));
    tokio::spawn(forward(
        server_read,
        client_write,
        Arc::clone(&tap.to_client),
    ));
    (client, server, tap)
}

async fn forward(
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    seen: Arc<Mutex<Vec<Value>>>,
) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not a JSON line on the wire ({e}): {line}"));
        seen.lock().unwrap().push(message);
        if to.write_all(format!("{line}\n").as_bytes()).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Prints the wire when the test fails, to show what actually crossed it.
pub(crate) struct DumpOnPanic(pub(crate) Tap);

impl Drop for DumpOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for message in self.0.to_server() {
                eprintln!("client → server: {message}");
            }
            for message in self.0.to_client() {
                eprintln!("server → client: {message}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events from tools (both sides): started / stopped (dropped unfinished) / finished.

pub(crate) type Events = mpsc::UnboundedSender<&'static str>;

pub(crate) struct DropGuard {
    pub(crate) events: Events,
    pub(crate) finished: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self
            .events
            .send(if self.finished { "finished" } else { "stopped" });
    }
}

pub(crate) async fn next(rx: &mut mpsc::UnboundedReceiver<&'static str>) -> &'static str {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a tool event within 5 s")
        .expect("the event channel is open")
}
