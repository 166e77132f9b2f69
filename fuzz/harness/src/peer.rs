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
use cancelkit::JsonRpcError;
use cancelkit::peer::{
    Context, DEFAULT_MAX_FRAME_LEN, Framing, McpRevision, Peer, Protocol, Router,
};
use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit::protocol::{acp, mcp};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        .cooperative_request("coop", |_: Value, _cx: Context| async move {
            cancelkit::cancelled().await;
            Ok::<_, JsonRpcError>(Value::from("partial"))
        })
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
            crate::panics::expected::<()>()
        });
    (router, seen)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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

/// Where a request id stands in the registry, as far as the model can tell.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Certainly not registered.
    Free,
    /// Maybe registered by a request that answers at once (gone by the next pause unless
    /// the concurrency limit holds it).
    Short,
    /// Maybe registered by a request that may never finish.
    Unsure,
    /// Certainly registered by a slow request.
    Held {
        peer_cancelled: bool,
        session: Option<String>,
        session_cancelled: bool,
    },
}

#[derive(Debug)]
struct Expect {
    /// Responses certainly owed.
    owed: u64,
    /// Further responses that may come.
    maybe: u64,
    state: State,
}

impl Default for Expect {
    fn default() -> Self {
        Expect {
            owed: 0,
            maybe: 0,
            state: State::Free,
        }
    }
}

/// How the peer treats a request method.
enum Kind {
    /// Answered on the reader, never registered (unknown methods, `tasks/get`, `tasks/cancel`).
    Quick,
    /// Registered; its handler answers at once.
    Short,
    /// Registered; refused in its task before its handler (MCP 2026-07-28 without `_meta`):
    /// answered at once even under the concurrency limit.
    Refused,
    /// Registered; its handler never finishes by itself.
    Slow { session: Option<String> },
    /// Registered; may or may not finish (`tasks/result`).
    Unsure,
}

struct Model {
    protocol: Protocol,
    answers: bool,
    limited: bool,
    ids: HashMap<RequestId, Expect>,
    /// `null`-id errors owed.
    null_owed: u64,
    /// Params of the `note` and `note/slow` notifications sent, in order.
    notes: Vec<Value>,
    /// The MCP era in force (fixed unless the protocol is negotiated).
    era: Era,
    /// Slow requests registered in the current chunk while the era was undecided: their tasks
    /// may start after a later frame of the chunk decides 2026-07-28.
    undecided_held: Vec<RequestId>,
    /// Ids of requests read at 2026-07-28, and of those read before it (or in another era).
    modern_ids: HashSet<RequestId>,
    other_ids: HashSet<RequestId>,
}

/// An MCP connection's era, as the model follows it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Era {
    /// Negotiated, nothing decided yet (served as 2025-11-25).
    Undecided,
    /// A handshake revision, fixed or chosen by `initialize` (and every other protocol).
    Legacy,
    /// MCP 2026-07-28.
    Modern,
}

/// Whether a request's params carry the `_meta` of 2026-07-28: an object `_meta` whose
/// protocol version is `"2026-07-28"` and whose client capabilities are an object (with
/// `extensions`, if given, an object too). A name given twice (JSON leaves its meaning open)
/// among those the runtime reads — `_meta`, the version, the capabilities, `extensions` —
/// counts as unstamped, as the runtime reads it.
fn stamped(params: Option<&str>) -> bool {
    let Some(params) = params.and_then(|p| read_object(p, &["_meta"])) else {
        return false;
    };
    let Some(meta) = params
        .get("_meta")
        .and_then(|raw| read_object(raw.get(), &[PROTOCOL_VERSION, CLIENT_CAPABILITIES]))
    else {
        return false;
    };
    let version: Option<Value> = meta
        .get(PROTOCOL_VERSION)
        .and_then(|raw| serde_json::from_str(raw.get()).ok());
    let capabilities = meta
        .get(CLIENT_CAPABILITIES)
        .and_then(|raw| read_object(raw.get(), &["extensions"]));
    let extensions_ok = capabilities.is_some_and(|caps| match caps.get("extensions") {
        None => true,
        Some(raw) => matches!(
            serde_json::from_str::<Value>(raw.get()),
            Ok(Value::Null | Value::Object(_))
        ),
    });
    version.as_ref().and_then(Value::as_str) == Some("2026-07-28") && extensions_ok
}

const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// A JSON object's members as raw text, or `None` if `text` is not an object or names one of
/// `unique` twice.
fn read_object(
    text: &str,
    unique: &[&str],
) -> Option<HashMap<String, Box<serde_json::value::RawValue>>> {
    struct Members(Vec<(String, Box<serde_json::value::RawValue>)>);
    impl<'de> serde::Deserialize<'de> for Members {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Members;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Members, A::Error> {
                    let mut members = Vec::new();
                    while let Some(member) = map.next_entry()? {
                        members.push(member);
                    }
                    Ok(Members(members))
                }
            }
            d.deserialize_map(Visitor)
        }
    }
    let Members(members) = serde_json::from_str(text).ok()?;
    let mut object = HashMap::new();
    for (name, value) in members {
        if object.insert(name.clone(), value).is_some() && unique.contains(&name.as_str()) {
            return None;
        }
    }
    Some(object)
}

impl Model {
    fn new(protocol: Protocol, answers: bool, limited: bool) -> Self {
        Model {
            protocol,
            answers,
            limited,
            ids: HashMap::new(),
            null_owed: 0,
            notes: Vec::new(),
            era: if protocol == Protocol::Mcp(McpRevision::Negotiated) {
                Era::Undecided
            } else {
                Era::Legacy
            },
            undecided_held: Vec::new(),
            modern_ids: HashSet::new(),
            other_ids: HashSet::new(),
        }
    }

    fn negotiated(&self) -> bool {
        self.protocol == Protocol::Mcp(McpRevision::Negotiated)
    }

    /// Whether `tasks/get` and `tasks/cancel` are answered on the reader.
    fn tasks(&self) -> bool {
        self.protocol == Protocol::Mcp(McpRevision::V2025_11_25) || self.negotiated()
    }

    /// Whether `tasks/result` is served by the tasks (2025-11-25, or maybe so).
    fn task_result(&self) -> bool {
        self.protocol == Protocol::Mcp(McpRevision::V2025_11_25)
            || (self.negotiated() && self.era != Era::Modern)
    }

    /// A negotiated connection learns its era from the first telling request (on the reader,
    /// before anything else is done with it).
    fn detect(&mut self, method: &str, params: Option<&str>) {
        if self.era != Era::Undecided {
            return;
        }
        if method == "initialize" {
            self.era = Era::Legacy;
        } else if stamped(params) {
            self.era = Era::Modern;
            for id in std::mem::take(&mut self.undecided_held) {
                let Some(expect) = self.ids.get_mut(&id) else {
                    continue;
                };
                if matches!(
                    expect.state,
                    State::Held {
                        peer_cancelled: false,
                        session_cancelled: false,
                        ..
                    }
                ) {
                    // Its task may start now, and be refused for want of `_meta`.
                    expect.maybe += 1;
                    expect.state = State::Unsure;
                }
            }
        }
    }

    fn kind(&self, method: &str, params: Option<&str>) -> Kind {
        let routed = matches!(
            method,
            "echo"
                | "initialize"
                | "panic"
                | "tools/call"
                | "server/discover"
                | "slow"
                | "coop"
                | "session/prompt"
        );
        match self.era {
            Era::Modern if matches!(method, "initialize" | "ping") => return Kind::Quick,
            Era::Modern | Era::Undecided if method == "server/discover" && !stamped(params) => {
                return Kind::Quick;
            }
            Era::Modern if routed && !stamped(params) => return Kind::Refused,
            _ => {}
        }
        match method {
            "tasks/get" | "tasks/cancel" if self.tasks() => Kind::Quick,
            "tasks/result" if self.task_result() => Kind::Unsure,
            "echo" | "initialize" | "panic" | "tools/call" | "server/discover" => Kind::Short,
            "slow" | "coop" => Kind::Slow { session: None },
            "session/prompt" => Kind::Slow {
                session: (self.protocol == Protocol::Acp)
                    .then(|| {
                        let params: Value = serde_json::from_str(params?).ok()?;
                        Some(params.get("sessionId")?.as_str()?.to_owned())
                    })
                    .flatten(),
            },
            _ => Kind::Quick,
        }
    }

    fn frames(&mut self, frames: &[DecodedFrame]) {
        self.undecided_held.clear();
        for frame in frames {
            match frame {
                Err(_) => self.null_owed += 1,
                Ok(bytes) => self.message(classify(bytes)),
            }
        }
    }

    fn message(&mut self, message: Classified) {
        match message {
            // An id over the bound: refused at once to `null`, before anything else looks at it.
            Classified::Request { id, .. } if id_over_bound(&id) => self.null_owed += 1,
            // An MCP progress token over the bound: refused at once under the request's id.
            Classified::Request { id, params, .. }
                if matches!(self.protocol, Protocol::Mcp(_))
                    && token_over_bound(params.as_deref()) =>
            {
                self.ids.entry(id).or_default().owed += 1;
            }
            Classified::Request { id, method, params } => {
                self.detect(&method, params.as_deref());
                if self.era == Era::Modern {
                    self.modern_ids.insert(id.clone());
                } else {
                    self.other_ids.insert(id.clone());
                }
                let kind = self.kind(&method, params.as_deref());
                self.request(id, kind);
            }
            Classified::Notification { method, params } => {
                self.notification(&method, params.as_deref())
            }
            Classified::Invalid { id: Some(id), .. } if id_over_bound(&id) => self.null_owed += 1,
            Classified::Invalid { id: Some(id), .. } => self.ids.entry(id).or_default().owed += 1,
            Classified::Invalid { id: None, .. } => self.null_owed += 1,
            Classified::Response { .. } | Classified::Ignored(_) => {}
        }
    }

    fn request(&mut self, id: RequestId, kind: Kind) {
        let limited = self.limited;
        let undecided = self.era == Era::Undecided;
        let expect = self.ids.entry(id.clone()).or_default();
        let held_uncancelled = matches!(
            expect.state,
            State::Held {
                peer_cancelled: false,
                session_cancelled: false,
                ..
            }
        );
        match kind {
            Kind::Quick => expect.owed += 1,
            // A taken id is refused at once (-32600).
            _ if held_uncancelled => expect.owed += 1,
            Kind::Refused => {
                expect.owed += 1;
                expect.state = match expect.state {
                    State::Free | State::Short => State::Short,
                    _ => State::Unsure,
                };
            }
            Kind::Short => {
                // One answer either way: refused, or the handler's (or the created task's).
                if limited {
                    expect.maybe += 1;
                } else {
                    expect.owed += 1;
                }
                expect.state = match expect.state {
                    State::Free | State::Short => State::Short,
                    _ => State::Unsure,
                };
            }
            Kind::Slow { session } if expect.state == State::Free => {
                expect.state = State::Held {
                    peer_cancelled: false,
                    session,
                    session_cancelled: false,
                };
                if undecided {
                    self.undecided_held.push(id);
                }
            }
            Kind::Slow { .. } | Kind::Unsure => {
                expect.maybe += 1;
                expect.state = State::Unsure;
            }
        }
    }

    fn notification(&mut self, method: &str, params: Option<&str>) {
        if let Some(cancel) = self.cancel_target(method, params) {
            if let Some(id) = cancel {
                self.cancel(id);
            }
            return;
        }
        if self.protocol == Protocol::Acp && method == acp::SessionCancelParams::METHOD {
            let session =
                serde_json::from_str::<acp::SessionCancelParams>(params.unwrap_or("null"));
            if let Ok(session) = session {
                self.cancel_session(&session.session_id);
            }
        }
        if matches!(method, "note" | "note/slow") {
            let value = params.map_or(Some(Value::Null), |p| serde_json::from_str(p).ok());
            self.notes.extend(value);
        }
    }

    /// `Some` for this protocol's cancel notifications: `Some(id)` when it names a request.
    fn cancel_target(&self, method: &str, params: Option<&str>) -> Option<Option<RequestId>> {
        fn read<T: serde::de::DeserializeOwned>(params: Option<&str>) -> Option<T> {
            serde_json::from_str(params.unwrap_or("null")).ok()
        }
        Some(match (self.protocol, method) {
            (Protocol::Acp, acp::CancelRequestParams::METHOD) => {
                read::<acp::CancelRequestParams>(params).and_then(|p| p.request_id)
            }
            (Protocol::Acp | Protocol::Lsp, acp::DraftCancelRequestParams::METHOD) => {
                read::<acp::DraftCancelRequestParams>(params).map(|p| p.id)
            }
            (Protocol::Mcp(_), mcp::v2025_11_25::CancelledNotificationParams::METHOD) => {
                read::<mcp::v2025_11_25::CancelledNotificationParams>(params)
                    .and_then(|p| p.request_id)
            }
            _ => return None,
        })
    }

    fn cancel(&mut self, id: RequestId) {
        let answers = self.answers;
        let Some(expect) = self.ids.get_mut(&id) else {
            return;
        };
        match &mut expect.state {
            State::Free => {}
            State::Short | State::Unsure => {
                // A quick request may be cancelled before it answered; without answers for
                // cancelled requests, its owed answer may not come.
                if !answers && expect.owed > 0 {
                    expect.owed -= 1;
                    expect.maybe += 1;
                }
            }
            State::Held {
                peer_cancelled: true,
                ..
            } => {}
            State::Held {
                peer_cancelled,
                session_cancelled,
                ..
            } => {
                if answers {
                    if !*session_cancelled {
                        expect.owed += 1;
                    }
                    *peer_cancelled = true;
                } else {
                    if *session_cancelled {
                        // Its stopReason answer may or may not have gone out first.
                        expect.owed -= 1;
                        expect.maybe += 1;
                    }
                    // Forgotten at once: never answered.
                    expect.state = State::Free;
                }
            }
        }
    }

    fn cancel_session(&mut self, session_id: &str) {
        for expect in self.ids.values_mut() {
            if let State::Held {
                peer_cancelled,
                session: Some(session),
                session_cancelled,
            } = &mut expect.state
                && session == session_id
                && !*session_cancelled
            {
                if !*peer_cancelled {
                    expect.owed += 1;
                }
                *session_cancelled = true;
            }
        }
    }

    /// After a pause: cancelled slow requests have answered and left the registry, and so have
    /// quick ones unless the concurrency limit may hold them.
    fn settle(&mut self) {
        for expect in self.ids.values_mut() {
            match expect.state {
                State::Held {
                    peer_cancelled,
                    session_cancelled,
                    ..
                } if peer_cancelled || session_cancelled => expect.state = State::Free,
                State::Short if !self.limited => expect.state = State::Free,
                _ => {}
            }
        }
    }

    /// The connection closes: slow requests are cancelled, and may or may not be answered in
    /// the (zero) grace period.
    fn close(&mut self) {
        for expect in self.ids.values_mut() {
            if matches!(
                expect.state,
                State::Held {
                    peer_cancelled: false,
                    session_cancelled: false,
                    ..
                }
            ) {
                expect.maybe += 1;
            }
        }
    }

    fn check(&mut self, output: &Output, settle: bool, when: &str) {
        for (id, &count) in &output.responses {
            let (owed, maybe) = self
                .ids
                .get(id)
                .map_or((0, 0), |expect| (expect.owed, expect.maybe));
            assert!(
                count <= owed + maybe,
                "{when}: {count} responses for id {id}, at most {owed} + {maybe} expected"
            );
        }
        for (id, expect) in &self.ids {
            let count = output.responses.get(id).copied().unwrap_or(0);
            assert!(
                count >= expect.owed,
                "{when}: {count} responses for id {id}, {} owed",
                expect.owed
            );
        }
        for id in &output.untyped_results {
            assert!(
                !self.modern_ids.contains(id) || self.other_ids.contains(id),
                "{when}: an MCP 2026-07-28 object result without `resultType`, id {id}"
            );
        }
        assert_eq!(
            output.null_errors, self.null_owed,
            "{when}: null-id errors vs rejected or unreadable frames"
        );
        if settle {
            self.settle();
        }
    }
}

/// What the peer wrote, read as it arrives.
struct Output {
    lines: bool,
    buf: Vec<u8>,
    responses: HashMap<RequestId, u64>,
    null_errors: u64,
    /// Ids answered with an object result that has no top-level `resultType`.
    untyped_results: Vec<RequestId>,
}

impl Output {
    fn new(lines: bool) -> Self {
        Output {
            lines,
            buf: Vec::new(),
            responses: HashMap::new(),
            null_errors: 0,
            untyped_results: Vec::new(),
        }
    }

    /// Takes what was written so far and reads every complete frame.
    fn read(&mut self, written: &Mutex<Vec<u8>>) {
        self.buf.append(&mut lock(written));
        let mut used = 0;
        while let Some((frame, len)) = next_frame(self.lines, &self.buf[used..]) {
            let frame = frame.to_vec();
            used += len;
            self.response(&frame);
        }
        self.buf.drain(..used);
    }

    fn finish(&self) {
        assert!(
            self.buf.is_empty(),
            "the peer's output ends inside a frame: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
    }

    fn response(&mut self, frame: &[u8]) {
        let text = String::from_utf8_lossy(frame);
        let message: serde_json::Map<String, Value> = serde_json::from_slice(frame)
            .unwrap_or_else(|e| panic!("the peer wrote a non-object ({e}): {text}"));
        assert_eq!(message.get("jsonrpc"), Some(&Value::from("2.0")), "{text}");
        assert!(
            !message.contains_key("method"),
            "the peer sent a request or notification: {text}"
        );
        assert!(
            message.contains_key("result") != message.contains_key("error"),
            "a response needs exactly one of result and error: {text}"
        );
        if let Some(error) = message.get("error") {
            assert!(error.get("code").is_some_and(Value::is_i64), "{text}");
            assert!(error.get("message").is_some_and(Value::is_string), "{text}");
        }
        match message.get("id") {
            Some(Value::Null) => {
                assert!(message.contains_key("error"), "a null-id result: {text}");
                self.null_errors += 1;
            }
            Some(id) => {
                let id: RequestId = serde_json::from_value(id.clone())
                    .unwrap_or_else(|e| panic!("an invalid response id ({e}): {text}"));
                if let Some(Value::Object(result)) = message.get("result")
                    && !result.contains_key("resultType")
                {
                    self.untyped_results.push(id.clone());
                }
                *self.responses.entry(id).or_default() += 1;
            }
            None => panic!("a response without an id: {text}"),
        }
    }
}

/// One complete frame at the start of `buf` and the bytes it takes, as the peer frames its
/// output (a plain reading, independent of the decoder under test).
fn next_frame(lines: bool, buf: &[u8]) -> Option<(&[u8], usize)> {
    if lines {
        let end = buf.iter().position(|b| *b == b'\n')?;
        return Some((&buf[..end], end + 1));
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let headers = std::str::from_utf8(&buf[..end]).expect("the peer writes ASCII headers");
    let len: usize = headers
        .strip_prefix("Content-Length: ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the peer wrote the headers {headers:?}"));
    let body = buf.get(end + 4..end + 4 + len)?;
    Some((body, end + 4 + len))
}

/// The hand-written seeds of `peer_mcp_negotiated` (name without the `seed-` prefix, input):
/// both eras, the requests that decide them and those that do not, and what each era refuses.
pub fn negotiated_seeds() -> Vec<(String, Vec<u8>)> {
    use options::*;
    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let stamp = |text: &str| text.replace("META", META);
    let legacy: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"d","method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":{"text":"hi"}}"#,
        r#"{"jsonrpc":"2.0","method":"note","params":{"n":1}}"#,
    ];
    let legacy_more: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{},"task":{"ttl":60000}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"nope"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{}}}"#,
    ]
    .map(stamp)
    .to_vec();
    let modern: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"d","method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","id":"f","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        r#"{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"slow","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":"c","method":"coop","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"slow"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"echo","params":{"text":"no meta"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"echo","params":{"text":"hi",META}}"#,
        r#"{"jsonrpc":"2.0","method":"note","params":{"n":1}}"#,
    ]
    .map(stamp)
    .to_vec();
    let modern_more: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"nope"}}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":"nope",META}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"tasks/result","params":{"taskId":"nope",META}}"#,
        r#"{"jsonrpc":"2.0","id":10,"method":"panic","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":11,"method":"panic"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
    ]
    .map(stamp)
    .to_vec();
    // Undecided requests in the chunk that decides 2026-07-28, and the ids they hold.
    let race: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"echo"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"slow","params":{META}}"#,
    ]
    .map(stamp)
    .to_vec();
    let race_more: &[&str] = &[
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#,
    ];
    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let (legacy_more, modern, modern_more, race) = (
        strs(&legacy_more),
        strs(&modern),
        strs(&modern_more),
        strs(&race),
    );
    let mut seeds = Vec::new();
    for options in [
        0,
        LIMITED,
        FLIP_ANSWER_CANCELLED,
        SMALL_FRAMES | OTHER_FRAMING,
    ] {
        let lines = options & OTHER_FRAMING == 0;
        seeds.push((
            format!("legacy-{options}"),
            input(options, lines, &[legacy, &legacy_more]),
        ));
        seeds.push((
            format!("modern-{options}"),
            input(options, lines, &[&modern, &modern_more]),
        ));
        seeds.push((
            format!("race-{options}"),
            input(options, lines, &[&race, race_more]),
        ));
    }
    seeds
}

/// Whether a string id is longer than the peer's default bound (integers never are).
fn id_over_bound(id: &RequestId) -> bool {
    matches!(id, RequestId::String(s) if s.len() > cancelkit::peer::DEFAULT_MAX_ID_LEN)
}

/// Whether params carry an MCP `_meta.progressToken` longer than the peer's default bound.
fn token_over_bound(params: Option<&str>) -> bool {
    let Some(params) = params.and_then(|p| serde_json::from_str::<Value>(p).ok()) else {
        return false;
    };
    params
        .get("_meta")
        .and_then(|meta| meta.get("progressToken"))
        .and_then(|token| serde_json::from_value::<RequestId>(token.clone()).ok())
        .is_some_and(|token| id_over_bound(&token))
}
