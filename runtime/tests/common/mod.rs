//! Test harness: a cancelkit `Peer` on one end of an in-memory duplex and a raw JSON-RPC wire
//! on the other, so tests see exactly the bytes the peer writes.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use cancelkit::peer::{Context, Framing, Peer, PeerBuilder, PeerHandle, Protocol, Router};
use cancelkit::{JsonRpcError, cancellable};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf,
};
use tokio::sync::mpsc;

/// What handlers report, so tests can see a handler start and its future get dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Started(String),
    Dropped(String),
    Finished(String),
}

#[derive(Clone)]
pub struct Events(pub mpsc::UnboundedSender<Event>);

struct Guard {
    events: Events,
    label: String,
    finished: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let event = if self.finished {
            Event::Finished(self.label.clone())
        } else {
            Event::Dropped(self.label.clone())
        };
        let _ = self.events.0.send(event);
    }
}

#[derive(Deserialize)]
pub struct Sleep {
    pub label: String,
    pub ms: u64,
}

#[derive(Deserialize)]
pub struct Echo {
    pub text: String,
}

/// The standard test router: `echo`, `sleep` (abort mode, reports start/drop), `coop`
/// (cooperative, returns how far it got), `initialize`, `session/prompt` and `ask` (which asks
/// the other side `client/confirm` and waits).
pub fn router(events: Events) -> Router {
    let sleep_events = events.clone();
    let coop_events = events.clone();
    let init_events = events.clone();
    let prompt_events = events.clone();
    let ask_events = events.clone();
    let tool_events = events;
    Router::new()
        .request("echo", |p: Echo, _cx: Context| async move {
            Ok::<_, JsonRpcError>(p.text)
        })
        .request("sleep", move |p: Sleep, _cx: Context| {
            sleep(p, sleep_events.clone())
        })
        .request("coop", move |p: Sleep, _cx: Context| {
            coop(p, coop_events.clone())
        })
        .request("initialize", move |p: Sleep, _cx: Context| {
            initialize(p, init_events.clone())
        })
        .request("session/prompt", move |p: Value, cx: Context| {
            prompt(p, cx, prompt_events.clone())
        })
        .request("ask", move |p: Sleep, cx: Context| {
            ask(p, cx, ask_events.clone())
        })
        .request("tools/call", move |p: ToolCall, _cx: Context| {
            let events = tool_events.clone();
            async move {
                let text = sleep(p.arguments, events).await?;
                Ok::<_, JsonRpcError>(json!({"content": [{"type": "text", "text": text}]}))
            }
        })
}

#[derive(Deserialize)]
pub struct ToolCall {
    pub arguments: Sleep,
}

#[cancellable]
async fn sleep(p: Sleep, events: Events) -> Result<String, JsonRpcError> {
    let _ = events.0.send(Event::Started(p.label.clone()));
    let mut guard = Guard {
        events,
        label: p.label.clone(),
        finished: false,
    };
    tokio::time::sleep(Duration::from_millis(p.ms)).await;
    guard.finished = true;
    Ok(p.label)
}

#[cancellable(cooperative)]
async fn coop(p: Sleep, events: Events) -> Result<Value, JsonRpcError> {
    let _ = events.0.send(Event::Started(p.label.clone()));
    let mut steps = 0;
    for _ in 0..p.ms {
        if cancelkit::is_cancelled() {
            return Ok(json!({"partial": true, "steps": steps}));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        steps += 1;
    }
    Ok(json!({"partial": false, "steps": steps}))
}

async fn initialize(p: Sleep, events: Events) -> Result<Value, JsonRpcError> {
    let _ = events.0.send(Event::Started(p.label.clone()));
    tokio::time::sleep(Duration::from_millis(p.ms)).await;
    Ok(json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true}}))
}

#[cancellable]
async fn prompt(p: Value, cx: Context, events: Events) -> Result<Value, JsonRpcError> {
    let label = p["sessionId"].as_str().unwrap_or_default().to_owned();
    let _ = events.0.send(Event::Started(label.clone()));
    let _guard = Guard {
        events,
        label,
        finished: false,
    };
    let _: Value = cx
        .peer()
        .request(
            "session/request_permission",
            json!({"sessionId": p["sessionId"]}),
        )
        .await?;
    std::future::pending::<()>().await;
    Ok(json!({"stopReason": "end_turn"}))
}

#[cancellable]
async fn ask(p: Sleep, cx: Context, events: Events) -> Result<Value, JsonRpcError> {
    let _ = events.0.send(Event::Started(p.label.clone()));
    let _guard = Guard {
        events,
        label: p.label.clone(),
        finished: false,
    };
    let answer: Value = cx
        .peer()
        .request("client/confirm", json!({"label": p.label}))
        .await?;
    Ok(answer)
}

/// The raw side of a connection: writes bytes, reads JSON messages.
pub struct Wire {
    writer: WriteHalf<DuplexStream>,
    reader: BufReader<ReadHalf<DuplexStream>>,
    framing: Framing,
}

impl Wire {
    pub async fn send(&mut self, message: Value) {
        let text = serde_json::to_vec(&message).unwrap();
        self.send_frame(&text).await;
    }

    pub async fn send_frame(&mut self, body: &[u8]) {
        match self.framing {
            Framing::Lines => {
                self.writer.write_all(body).await.unwrap();
                self.writer.write_all(b"\n").await.unwrap();
            }
            Framing::ContentLength => {
                let header = format!("Content-Length: {}\r\n\r\n", body.len());
                self.writer.write_all(header.as_bytes()).await.unwrap();
                self.writer.write_all(body).await.unwrap();
            }
        }
        self.writer.flush().await.unwrap();
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
        self.writer.flush().await.unwrap();
    }

    /// Closes our writing side: the peer reads EOF.
    pub async fn hang_up(&mut self) {
        self.writer.shutdown().await.unwrap();
    }

    /// The next message, or `None` if nothing arrives within `within`.
    pub async fn try_recv(&mut self, within: Duration) -> Option<Value> {
        tokio::time::timeout(within, self.read_message())
            .await
            .ok()
            .flatten()
    }

    /// The next message; fails the test after 5 s.
    pub async fn recv(&mut self) -> Value {
        self.try_recv(Duration::from_secs(5))
            .await
            .expect("a message from the peer within 5 s")
    }

    /// Asserts nothing arrives for a while.
    pub async fn assert_silent(&mut self, within: Duration) {
        if let Some(message) = self.try_recv(within).await {
            panic!("expected no message, got {message}");
        }
    }

    async fn read_message(&mut self) -> Option<Value> {
        match self.framing {
            Framing::Lines => {
                let mut line = String::new();
                let n = self.reader.read_line(&mut line).await.ok()?;
                if n == 0 {
                    return None;
                }
                Some(serde_json::from_str(&line).expect("the peer writes valid JSON"))
            }
            Framing::ContentLength => {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    if self.reader.read_line(&mut line).await.ok()? == 0 {
                        return None;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(value) = line.strip_prefix("Content-Length: ") {
                        length = Some(value.parse::<usize>().unwrap());
                    }
                }
                let mut body = vec![0; length.expect("a Content-Length header")];
                self.reader.read_exact(&mut body).await.ok()?;
                Some(serde_json::from_slice(&body).unwrap())
            }
        }
    }

    /// Sends a request and returns its answer, skipping any other message in between.
    pub async fn call(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.recv().await;
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// Sends a request and returns its answer together with every message that arrived before
    /// it, in arrival order, so a test can check what was (and was not) sent in between.
    pub async fn call_seeing(
        &mut self,
        id: Value,
        method: &str,
        params: Value,
    ) -> (Value, Vec<Value>) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut before = Vec::new();
        loop {
            let message = self.recv().await;
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return (message, before);
            }
            before.push(message);
        }
    }

    /// The writing and reading halves, for tests that write and read concurrently.
    pub fn into_split(self) -> (WriteHalf<DuplexStream>, BufReader<ReadHalf<DuplexStream>>) {
        (self.writer, self.reader)
    }

    /// Asserts the connection still serves requests.
    pub async fn assert_alive(&mut self) {
        let answer = self
            .call(json!("alive"), "echo", json!({"text": "still here"}))
            .await;
        assert_eq!(answer["result"], "still here", "{answer}");
    }
}

pub struct Served {
    pub wire: Wire,
    pub peer: PeerHandle,
    pub events: mpsc::UnboundedReceiver<Event>,
    pub server: Peer,
}

/// A server `Peer` with the standard router, configured by `configure`, and the raw wire to it.
pub fn serve(protocol: Protocol, configure: impl FnOnce(PeerBuilder) -> PeerBuilder) -> Served {
    serve_extended(protocol, |router, _| router, configure)
}

/// [`serve`] with routes added to the standard router (`extend` gets the events too).
pub fn serve_extended(
    protocol: Protocol,
    extend: impl FnOnce(Router, Events) -> Router,
    configure: impl FnOnce(PeerBuilder) -> PeerBuilder,
) -> Served {
    let (tx, events) = mpsc::unbounded_channel();
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    let events_tx = Events(tx);
    let router = extend(router(events_tx.clone()), events_tx);
    let builder = configure(Peer::builder(protocol).router(router));
    let framing = protocol.default_framing();
    let server = builder.connect(read, write);
    let (read, write) = tokio::io::split(client_io);
    Served {
        wire: Wire {
            writer: write,
            reader: BufReader::new(read),
            framing,
        },
        peer: server.handle(),
        events,
        server,
    }
}

/// Two cancelkit peers connected to each other.
pub fn pair(server: PeerBuilder, client: PeerBuilder) -> (Peer, Peer) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(a);
    let server = server.connect(read, write);
    let (read, write) = tokio::io::split(b);
    let client = client.connect(read, write);
    (server, client)
}

pub async fn next_event(events: &mut mpsc::UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("an event within 5 s")
        .expect("events channel open")
}

pub fn events_channel() -> (Events, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Events(tx), rx)
}

pub fn shared<T>(value: T) -> Arc<T> {
    Arc::new(value)
}

/// A server `Peer` built by `builder` on one end of a duplex, and the raw wire to it.
pub fn connect(builder: PeerBuilder, framing: Framing) -> (Peer, Wire) {
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    let server = builder.connect(read, write);
    let (read, write) = tokio::io::split(client_io);
    let wire = Wire {
        writer: write,
        reader: BufReader::new(read),
        framing,
    };
    (server, wire)
}
