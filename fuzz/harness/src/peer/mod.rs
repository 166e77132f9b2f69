//! Targets `peer_acp`, `peer_mcp_2024_11_05`, `peer_mcp_2025_11_25`, `peer_mcp_negotiated`,
//! `peer_lsp`: a whole [`Peer`] fed an arbitrary byte stream over an in-memory duplex.
//!
//! Input: byte 0 holds options — bit 0: `max_concurrency(2)`; bit 1: the opposite of the
//! protocol's default `answer_cancelled`; bit 2: `max_frame_len(256)`; bit 3: the other framing.
//! The rest is what the client sends; each `0xFF` byte is not sent but marks a pause, during
//! which the (paused, auto-advancing) clock moves on by [`PAUSE`] and every task runs until it
//! waits for something. The stream ends with a pause, then end of file.
//!
//! The router has request handlers `echo`, `initialize`, `server/discover` and `tools/call`
//! (answer at once),
//! `panic` (panics), `slow` and `session/prompt` (sleep an hour, longer than any input lasts,
//! so they never finish by themselves), `coop` (cooperative: waits for its cancellation, then
//! answers), and notification handlers `note`, `note/slow` (sleeps 1 ms) and `note/panic`.
//!
//! A model follows the frames (decoded with the peer's own decoder, chunk by chunk) and keeps,
//! per request id, how many responses are certainly owed and how many more may come. It is
//! exact where the order of events is certain and gives way (owed becomes "may come") where it
//! depends on timing, such as an answer-at-once request that may or may not have finished
//! before a later frame reuses its id. Checks:
//!
//! - no panic escapes (a panicking handler is answered -32603; nothing else panics, in any task);
//! - everything the peer writes is a JSON-RPC 2.0 response with a valid id (or `null`) and
//!   exactly one of `result` and a well-formed `error`;
//! - at every pause and at the end: per id, responses ≤ owed + may-come (at most one response
//!   per request; never a response for an id nobody sent; for MCP, never a response for a
//!   request once its `notifications/cancelled` took effect, as slow requests cannot finish
//!   first), and responses ≥ owed (no owed answer is lost: -32600/-32601/-32603, answers of
//!   quick handlers, and for ACP/LSP the answer to every cancelled request);
//! - `null`-id errors: exactly one per rejected frame, unreadable message, or request or
//!   invalid message whose string id is over the bound (`DEFAULT_MAX_ID_LEN`);
//! - notification handlers see `note*` notifications in arrival order, all of them by the end;
//! - the peer reads the whole input (bad input never stops it), and after
//!   [`Peer::closed`] (with `shutdown_grace(0)`) the registry drains to zero and no task is
//!   left alive on the runtime.
//!
//! `peer_mcp_negotiated` (a server built with [`McpRevision::Negotiated`]): the model follows
//! the era. Undecided until the first `initialize` (legacy: the rules of 2025-11-25) or the
//! first request stamped with 2026-07-28 `_meta` (`io.modelcontextprotocol/protocolVersion`
//! `"2026-07-28"` and `io.modelcontextprotocol/clientCapabilities`, an object), which decides
//! 2026-07-28; an unstamped `server/discover` is refused at once while undecided (-32602) and
//! decides nothing. At 2026-07-28, `initialize` and `ping` are answered at once (-32601) and so is
//! every unstamped request (-32602 or -32022, in its task, before its handler: owed even with
//! the concurrency limit); stamped requests behave as before. A request read while undecided
//! is checked against the era in force when its task starts, so a slow request read in the
//! same chunk before the frame that decides 2026-07-28 may be refused or may be held: the model
//! gives way (it may or may not answer). Every object result to an id only ever used at
//! 2026-07-28 has a top-level `resultType`. Its findings (fixed in 3dc3ae2, tests in
//! `tests/regressions.rs`): the runtime took `_meta` given as arrays for stamped, and missed a
//! protocol version written with an escape.
//!
//! One current-thread runtime with a paused clock serves every input of a thread.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit::__fuzz::{Classified, DecodedFrame, classify, decode_chunks};
use cancelkit::peer::{
    Context, DEFAULT_MAX_FRAME_LEN, Framing, McpRevision, Peer, Protocol, Router,
};
use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit::protocol::{acp, mcp};
use cancelkit::{JsonRpcError, cancellable};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod model;
mod output;
mod reading;
mod seeds;

use model::Model;
use output::Output;
pub use seeds::negotiated_seeds;

/// How far the clock moves on at each pause.
pub const PAUSE: Duration = Duration::from_millis(5);
/// How long a slow handler sleeps: longer than any input (at most one pause per byte) lasts.
const SLOW: Duration = Duration::from_secs(3600);
/// Marks a pause in the input.
pub const PAUSE_BYTE: u8 = 0xFF;

/// Target `peer_acp`.
pub fn acp(data: &[u8]) {
    run(Protocol::Acp, data);
}

/// Target `peer_mcp_2024_11_05`.
pub fn mcp_2024_11_05(data: &[u8]) {
    run(Protocol::Mcp(McpRevision::V2024_11_05), data);
}

/// Target `peer_mcp_2025_11_25`.
pub fn mcp_2025_11_25(data: &[u8]) {
    run(Protocol::Mcp(McpRevision::V2025_11_25), data);
}

/// Target `peer_mcp_negotiated`: a server that speaks whichever MCP era the client picks.
pub fn mcp_negotiated(data: &[u8]) {
    run(Protocol::Mcp(McpRevision::Negotiated), data);
}

/// Target `peer_lsp`.
pub fn lsp(data: &[u8]) {
    run(Protocol::Lsp, data);
}

/// Option bits of an input's first byte.
pub mod options {
    /// `max_concurrency(2)`.
    pub const LIMITED: u8 = 1;
    /// The opposite of the protocol's default `answer_cancelled`.
    pub const FLIP_ANSWER_CANCELLED: u8 = 2;
    /// `max_frame_len(256)`.
    pub const SMALL_FRAMES: u8 = 4;
    /// The other framing than the protocol's default.
    pub const OTHER_FRAMING: u8 = 8;
}

/// Builds an input: `options`, then each message framed for `framing` (`lines`), with a pause
/// after each group.
pub fn input(options: u8, lines: bool, groups: &[&[&str]]) -> Vec<u8> {
    let mut data = vec![options];
    for group in groups {
        for message in *group {
            data.extend_from_slice(&crate::framing::encode(lines, message.as_bytes()));
        }
        data.push(PAUSE_BYTE);
    }
    data
}

/// Notification params seen by the `note` handlers, in order.
type Seen = Arc<Mutex<Vec<Value>>>;

thread_local! {
    /// Taken out while an input runs and put back only if it passed, so that a failed input
    /// (tasks left behind) does not spoil the next one.
    static RUNTIME: std::cell::RefCell<Option<tokio::runtime::Runtime>> = const { std::cell::RefCell::new(None) };
    static ROUTER: (Router, Seen) = router();
}

fn router() -> (Router, Seen) {
    let seen: Seen = Arc::default();
    let (note, slow_note) = (Arc::clone(&seen), Arc::clone(&seen));
    let router = Router::new()
        .request("echo", |params: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(params)
        })
        .request("initialize", |params: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(params)
        })
        .request("tools/call", |params: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(params)
        })
        .request("server/discover", |_: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(serde_json::json!({"capabilities": {}}))
        })
        .request("panic", |_: Value, _cx: Context| async move {
            crate::panics::expected::<Result<Value, JsonRpcError>>()
        })
        .request("slow", |_: Value, _cx: Context| async move {
            tokio::time::sleep(SLOW).await;
            Ok::<_, JsonRpcError>(Value::from("slept"))
        })
        .request("session/prompt", |_: Value, _cx: Context| async move {
            tokio::time::sleep(SLOW).await;
            Ok::<_, JsonRpcError>(serde_json::json!({"stopReason": "end_turn"}))
        })
        .request("coop", |_: Value, _cx: Context| coop())
        .notification("note", move |params: Value, _cx: Context| {
            let seen = Arc::clone(&note);
            async move { lock(&seen).push(params) }
        })
        .notification("note/slow", move |params: Value, _cx: Context| {
            let seen = Arc::clone(&slow_note);
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                lock(&seen).push(params);
            }
        })
        .notification("note/panic", |_: Value, _cx: Context| async move {
            crate::panics::expected::<()>();
        });
    (router, seen)
}

/// Waits for its cancel and answers with a partial result.
#[cancellable(cooperative)]
async fn coop() -> Result<Value, JsonRpcError> {
    cancelkit::cancelled().await;
    Ok(Value::from("partial"))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn run(protocol: Protocol, data: &[u8]) {
    crate::panics::install();
    let Some((&flags, stream)) = data.split_first() else {
        return;
    };
    let before = crate::panics::unexpected();
    let (router, seen) = ROUTER.with(|(router, seen)| (router.clone(), Arc::clone(seen)));
    lock(&seen).clear();
    let runtime = RUNTIME
        .with(|cell| cell.borrow_mut().take())
        .unwrap_or_else(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .expect("a current-thread runtime builds")
        });
    runtime.block_on(async {
        let session = session(protocol, flags, stream, router, &seen);
        // A hang shows up as the paused clock running far past any input's duration.
        if tokio::time::timeout(SLOW * 24, session).await.is_err() {
            panic!("the peer hung");
        }
    });
    RUNTIME.with(|cell| *cell.borrow_mut() = Some(runtime));
    assert_eq!(
        crate::panics::unexpected(),
        before,
        "a panic escaped (see the panic message above)"
    );
}

async fn session(protocol: Protocol, flags: u8, stream: &[u8], router: Router, seen: &Seen) {
    let limited = flags & options::LIMITED != 0;
    let answers = matches!(protocol, Protocol::Acp | Protocol::Lsp)
        != (flags & options::FLIP_ANSWER_CANCELLED != 0);
    let max_frame_len = if flags & options::SMALL_FRAMES != 0 {
        256
    } else {
        DEFAULT_MAX_FRAME_LEN
    };
    let default_lines = protocol.default_framing() == Framing::Lines;
    let lines = default_lines != (flags & options::OTHER_FRAMING != 0);

    let (client, server) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server);
    let mut builder = Peer::builder(protocol)
        .router(router)
        .shutdown_grace(Duration::ZERO)
        .answer_cancelled(answers)
        .max_frame_len(max_frame_len)
        .framing(if lines {
            Framing::Lines
        } else {
            Framing::ContentLength
        });
    if limited {
        builder = builder.max_concurrency(2);
    }
    let peer = builder.connect(server_read, server_write);
    let handle = peer.handle();
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let written: Arc<Mutex<Vec<u8>>> = Arc::default();
    let drainer = tokio::spawn({
        let written = Arc::clone(&written);
        async move {
            let mut buf = vec![0; 8192];
            while let Ok(n @ 1..) = client_read.read(&mut buf).await {
                lock(&written).extend_from_slice(&buf[..n]);
            }
        }
    });

    let chunks: Vec<&[u8]> = stream.split(|b| *b == PAUSE_BYTE).collect();
    let frames = decode_chunks(lines, max_frame_len, &chunks);
    let mut model = Model::new(protocol, answers, limited);
    let mut output = Output::new(lines);
    let (last, per_chunk) = frames
        .split_last()
        .expect("one entry per chunk and one at EOF");
    for (chunk, frames) in chunks.iter().zip(per_chunk) {
        if !chunk.is_empty() {
            client_write
                .write_all(chunk)
                .await
                .expect("the peer stopped reading before the end of its input");
        }
        model.frames(frames);
        tokio::time::sleep(PAUSE).await;
        output.read(&written);
        model.check(&output, true, "at a pause");
        let seen = lock(seen);
        assert!(
            model.notes.starts_with(&seen),
            "notifications handled out of order or twice: {seen:?} vs {:?}",
            model.notes
        );
    }
    // Let every queued notification run, then end the stream.
    tokio::time::sleep(PAUSE + Duration::from_millis(model.notes.len() as u64)).await;
    assert_eq!(*lock(seen), model.notes, "a notification was not handled");
    client_write
        .shutdown()
        .await
        .expect("the peer stopped reading before the end of its input");
    model.frames(last);
    model.close();
    peer.closed().await;
    tokio::time::sleep(PAUSE).await;
    assert_eq!(
        handle.in_flight(),
        0,
        "requests still registered after the connection closed"
    );
    drainer.await.expect("the drainer does not panic");
    output.read(&written);
    output.finish();
    model.check(&output, false, "at the end");
    drop(handle);
    tokio::task::yield_now().await;
    let alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert_eq!(alive, 0, "tasks outlive their connection");
}
