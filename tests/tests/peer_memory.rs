//! Hostile input leaves nothing behind: after the inputs of `runtime/tests/peer_hostile.rs`
//! (and floods of them), a connection holds no registry entry, no pending request and no more
//! heap than before, and a closed connection gives back all of its memory.
//!
//! Heap is counted with the counting allocator of `cancelkit-tests` on the test's own thread;
//! the peers run on a current-thread runtime on that thread, so every byte they allocate or
//! free is counted and libtest's own threads are not. Each protocol gets a first connection
//! that goes through everything once and is closed (so the runtime's and the process's lazy
//! one-time allocations happen before any baseline), then a measured one.

use std::time::Duration;

use cancelkit::peer::{Context, Framing, McpRevision, Peer, PeerHandle, Protocol, Router};
use cancelkit::{JsonRpcError, cancellable};
use cancelkit_tests::alloc::{self, Counting};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf,
};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Rounds of every hostile input before the baseline, so buffers reach their steady size.
const WARM_UP_ROUNDS: usize = 5;
/// Measured rounds of every hostile input.
const ROUNDS: usize = 40;
/// Cancels for unknown ids per round.
const FLOOD: usize = 2_000;

/// How far live heap may move over the measured rounds of one open connection.
///
/// Measured: exactly 0 bytes, the same in every run (a current-thread runtime makes the whole
/// exchange deterministic). The margin is for buffers whose spare capacity could legitimately
/// differ from one moment to the next after a change elsewhere (a read buffer, a queue), which
/// the warm-up rounds otherwise settle. A leak cannot hide in it: one allocation kept per hostile
/// message is at least 40 rounds x ~2,050 messages x 8 bytes = 656 KB, and anything kept per
/// round shows once it exceeds 1,024 / 40 = 25 bytes a round.
const TOLERANCE_OPEN: isize = 1024;

#[derive(Deserialize)]
struct Echo {
    text: String,
}

#[derive(Deserialize)]
struct Sleep {
    ms: u64,
}

#[cancellable]
async fn sleep(p: Sleep, _cx: Context) -> Result<u64, JsonRpcError> {
    tokio::time::sleep(Duration::from_millis(p.ms)).await;
    Ok(p.ms)
}

fn router() -> Router {
    Router::new()
        .request("echo", |p: Echo, _cx: Context| async move {
            Ok::<_, JsonRpcError>(p.text)
        })
        .request("session/prompt", |p: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(p)
        })
        .request("sleep", sleep)
}

/// The raw client side of a connection.
struct Wire {
    writer: WriteHalf<DuplexStream>,
    reader: BufReader<ReadHalf<DuplexStream>>,
    framing: Framing,
}

impl Wire {
    async fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
        self.writer.flush().await.unwrap();
    }

    async fn send(&mut self, message: Value) {
        let body = serde_json::to_vec(&message).unwrap();
        let frame = frame(self.framing, &body);
        self.send_raw(&frame).await;
    }

    async fn recv(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(10), self.read_message())
            .await
            .expect("a message from the peer within 10 s")
            .expect("the peer is still connected")
    }

    async fn read_message(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.framing {
            Framing::Lines => {
                if self.reader.read_line(&mut line).await.ok()? == 0 {
                    return None;
                }
                Some(serde_json::from_str(&line).expect("the peer writes JSON"))
            }
            Framing::ContentLength => {
                let mut length = None;
                loop {
                    line.clear();
                    if self.reader.read_line(&mut line).await.ok()? == 0 {
                        return None;
                    }
                    let header = line.trim_end();
                    if header.is_empty() {
                        break;
                    }
                    if let Some(value) = header.strip_prefix("Content-Length: ") {
                        length = Some(value.parse::<usize>().unwrap());
                    }
                }
                let mut body = vec![0; length.expect("a Content-Length header")];
                self.reader.read_exact(&mut body).await.ok()?;
                Some(serde_json::from_slice(&body).unwrap())
            }
        }
    }

    /// Sends a request and returns its answer; returns the other messages read on the way.
    async fn call(&mut self, id: Value, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut others = Vec::new();
        loop {
            let message = self.recv().await;
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return (message, others);
            }
            others.push(message);
        }
    }
}

fn frame(framing: Framing, body: &[u8]) -> Vec<u8> {
    match framing {
        Framing::Lines => [body, b"\n"].concat(),
        Framing::ContentLength => [
            format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
            body,
        ]
        .concat(),
    }
}

/// `protocol`'s cancel notification for request `id`.
fn cancel(protocol: Protocol, id: Value) -> Value {
    let (method, params) = match protocol {
        Protocol::Acp => ("$/cancel_request", json!({"requestId": id})),
        Protocol::Mcp(_) => (
            "notifications/cancelled",
            json!({"requestId": id, "reason": "test"}),
        ),
        Protocol::Lsp => ("$/cancelRequest", json!({"id": id})),
    };
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

fn connect(protocol: Protocol) -> (Peer, Wire) {
    let (client, server) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server);
    let peer = Peer::builder(protocol)
        .router(router())
        .max_frame_len(1024 * 1024)
        .connect(read, write);
    let (read, write) = tokio::io::split(client);
    let wire = Wire {
        writer: write,
        reader: BufReader::new(read),
        framing: protocol.default_framing(),
    };
    (peer, wire)
}

/// Framed hostile messages for `protocol`: each is answered with at most one error, or not at
/// all (the cases of `peer_hostile.rs`, with the 10 MB lines at 2 MB, over the 1 MB limit).
fn hostile_frames(protocol: Protocol) -> Vec<Vec<u8>> {
    let framing = protocol.default_framing();
    let mut without_params = cancel(protocol, Value::Null);
    without_params.as_object_mut().unwrap().remove("params");
    let mut without_id = cancel(protocol, Value::Null);
    without_id["params"] = json!({"reason": "?"});
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let bodies: Vec<Vec<u8>> = [
        "{not json".to_owned(),
        r#"{"jsonrpc":"2.0","id":1,"method":"echo""#.to_owned(),
        "{}".to_owned(),
        "42".to_owned(),
        r#""hello""#.to_owned(),
        "null".to_owned(),
        r#"[{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"a"}}]"#.to_owned(),
        r#"{"jsonrpc":"1.0","id":4,"method":"echo","params":{"text":"a"}}"#.to_owned(),
        r#"{"id":4,"method":"echo","params":{"text":"a"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":4,"method":17}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":"p","method":"echo","params":"text"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":"p","method":"echo"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":null,"method":"echo","params":{"text":"a"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":1.5,"method":"echo","params":{"text":"a"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"echo","params":{"text":"a"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":{"n":1},"method":"echo","params":{"text":"a"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":8}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/explode"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"$/setTrace","params":{"value":"off"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#.to_owned(),
        cancel(protocol, Value::Null).to_string(),
        cancel(protocol, json!({"x": 1})).to_string(),
        without_params.to_string(),
        without_id.to_string(),
        r#"{"jsonrpc":"2.0","id":999,"result":{"x":1}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":"nope","error":{"code":-32000,"message":"x"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#.to_owned(),
        nested.clone(),
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"echo","params":{{"text":{nested}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{nested}}}"#),
        "x".repeat(2 * 1024 * 1024),
        "{".repeat(2 * 1024 * 1024),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect();
    let mut frames: Vec<Vec<u8>> = bodies.iter().map(|body| frame(framing, body)).collect();
    match framing {
        Framing::Lines => {
            frames.push(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"e\xff\xfe\"}\n".to_vec());
            frames.push(b"\n\r\n   \n\t\n".to_vec());
        }
        Framing::ContentLength => {
            frames.push(b"Content-Type: application/json\r\n\r\n".to_vec());
            frames.push(b"Content-Length: abc\r\n\r\n".to_vec());
        }
    }
    // A flood of cancels for ids that do not exist, in one write.
    let flood: Vec<u8> = (0..FLOOD)
        .flat_map(|id| {
            let body = cancel(protocol, json!(format!("flood-{id}"))).to_string();
            frame(framing, body.as_bytes())
        })
        .collect();
    frames.push(flood);
    frames
}

/// One round: every hostile frame, then requests that are cancelled (once, and a hundred
/// times), a late cancel, and our own requests, answered and abandoned. Checks the registry
/// and the pending requests are empty afterwards.
async fn round(protocol: Protocol, peer: &PeerHandle, wire: &mut Wire, frames: &[Vec<u8>]) {
    for (n, bytes) in frames.iter().enumerate() {
        wire.send_raw(bytes).await;
        // A request after each frame: everything the frame caused is done once it is answered.
        let (answer, _errors) = wire
            .call(json!(format!("alive-{n}")), "echo", json!({"text": "ok"}))
            .await;
        assert_eq!(answer["result"], "ok", "{answer}");
    }

    // Requests cancelled while running, once and many times.
    for label in ["once", "often"] {
        wire.send(
            json!({"jsonrpc": "2.0", "id": label, "method": "sleep", "params": {"ms": 60_000}}),
        )
        .await;
        let times = if label == "once" { 1 } else { 100 };
        for _ in 0..times {
            wire.send(cancel(protocol, json!(label))).await;
        }
    }
    // A cancel for a request that has finished.
    let (answer, mut others) = wire
        .call(json!("done"), "echo", json!({"text": "done"}))
        .await;
    assert_eq!(answer["result"], "done");
    wire.send(cancel(protocol, json!("done"))).await;
    let (_, more) = wire
        .call(json!("sync"), "echo", json!({"text": "sync"}))
        .await;
    others.extend(more);
    let expected = if matches!(protocol, Protocol::Mcp(_)) {
        0
    } else {
        2
    };
    assert_eq!(
        others.len(),
        expected,
        "{protocol:?}: one -32800 per cancelled request, except under MCP: {others:?}"
    );

    // Our own requests: one answered, one abandoned (its drop sends a cancel).
    let answered = peer.request::<_, Value>("client/thing", json!({"n": 1}));
    let sent = wire.recv().await;
    wire.send(json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"ok": true}}))
        .await;
    assert_eq!(answered.await.unwrap(), json!({"ok": true}));
    let abandoned = peer.request::<_, Value>("client/thing", json!({"n": 2}));
    let sent = wire.recv().await;
    drop(abandoned);
    assert_eq!(
        peer.pending_requests(),
        0,
        "an abandoned request is forgotten at once"
    );
    // A response to the abandoned request, and a cancel for an id of our direction.
    wire.send(json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"late": true}}))
        .await;
    wire.send(cancel(protocol, sent["id"].clone())).await;
    let (_, others) = wire
        .call(json!("sync"), "echo", json!({"text": "sync"}))
        .await;
    assert!(
        others.iter().all(|m| m.get("method").is_some()),
        "only our cancel notification in between: {others:?}"
    );

    assert_eq!(peer.in_flight(), 0, "the registry is empty after the round");
    assert_eq!(peer.pending_requests(), 0, "no outgoing request is pending");
}

/// A connection through `rounds` rounds; returns the heap counters' change over them (after
/// `warm_up` unmeasured rounds) and closes it.
async fn connection(protocol: Protocol, warm_up: usize, rounds: usize) -> alloc::Delta {
    let frames = hostile_frames(protocol);
    let (peer, mut wire) = connect(protocol);
    let handle = peer.handle();
    for _ in 0..warm_up {
        round(protocol, &handle, &mut wire, &frames).await;
    }
    let before = alloc::thread_snapshot();
    for _ in 0..rounds {
        round(protocol, &handle, &mut wire, &frames).await;
    }
    let grown = alloc::thread_snapshot().since(before);
    assert!(!handle.is_closed(), "{protocol:?}: the connection survived");
    wire.writer.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), peer.closed())
        .await
        .expect("the peer stops at EOF");
    assert!(handle.is_closed());
    grown
}

#[test]
fn hostile_input_leaves_no_registry_entry_and_no_memory_behind() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for protocol in [
            Protocol::Acp,
            Protocol::Mcp(McpRevision::V2025_11_25),
            Protocol::Lsp,
        ] {
            // Once through everything, so lazy one-time allocations exist before the baseline.
            connection(protocol, 1, 0).await;
            let start = alloc::thread_snapshot();
            let rounds = connection(protocol, WARM_UP_ROUNDS, ROUNDS).await;
            let left = alloc::thread_snapshot().since(start).live_bytes;
            let grown = rounds.live_bytes;
            eprintln!(
                "{protocol:?}: live heap {grown:+} bytes over {ROUNDS} rounds of an open \
                 connection ({} allocations), {left:+} bytes after it closed",
                rounds.allocations
            );
            // The peer's work is counted here: it runs on this thread.
            assert!(
                rounds.allocations >= (ROUNDS * FLOOD) as u64,
                "{protocol:?}: only {} allocations counted; is the peer on another thread?",
                rounds.allocations
            );
            assert!(
                grown.abs() <= TOLERANCE_OPEN,
                "{protocol:?}: live heap moved by {grown} bytes over {ROUNDS} rounds of hostile \
                 input (tolerance {TOLERANCE_OPEN})"
            );
            assert_eq!(
                left, 0,
                "{protocol:?}: {left} bytes still allocated after the connection closed"
            );
        }
    });
}
