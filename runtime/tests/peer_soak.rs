//! Soak: 100,000 requests with random cancel timing under a concurrency limit; the registry
//! drains to zero.
//!
//! Every ACP request gets exactly one response. An MCP request gets exactly one unless the
//! server applied its cancel, and then none: the server's log says which. Its reader logs "the
//! peer cancelled a request" (field `request_id`) when it removes a still-registered request,
//! after which the handler's end finds no entry and sends nothing, and logs "ignored a cancel
//! ..." when the request had already finished (and been answered). The test captures those
//! events with a `tracing` layer on the server's runtime and requires zero responses for every
//! id of the first kind and exactly one for every other id, with enough of both kinds for the
//! check to mean something.

mod common;

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::{JsonRpcError, cancellable};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tracing::field::{Field, Visit};
use tracing::{Dispatch, Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context as LayerContext, Layer, SubscriberExt};

const REQUESTS: usize = 100_000;
/// The fewest cancels of each kind (applied, ignored) a run must see.
const MIN_OF_EACH: usize = 1_000;

#[derive(Deserialize)]
struct Work {
    spins: u32,
}

#[cancellable]
async fn work(p: Work, _cx: Context) -> Result<u32, JsonRpcError> {
    for _ in 0..p.spins {
        tokio::task::yield_now().await;
    }
    Ok(p.spins)
}

/// A small deterministic PRNG (xorshift64*), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The server's log about cancels, by request id.
#[derive(Default)]
struct CancelLog {
    /// "the peer cancelled a request": removed while still registered; owes no response (MCP).
    applied: Vec<u64>,
    /// "ignored a cancel ...": the request had already finished.
    ignored: Vec<u64>,
}

/// A `tracing` layer that records the server's cancel events into a [`CancelLog`].
struct CaptureCancels(Arc<Mutex<CancelLog>>);

#[derive(Default)]
struct Fields {
    message: String,
    request_id: Option<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "request_id" => self.request_id = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

impl<S: Subscriber> Layer<S> for CaptureCancels {
    fn register_callsite(
        &self,
        metadata: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        // The cancel events are INFO; nothing more verbose needs building during the soak.
        if metadata.is_event() && *metadata.level() <= tracing::Level::INFO {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn on_event(&self, event: &Event<'_>, _cx: LayerContext<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let applied = fields.message == "the peer cancelled a request";
        if !applied && !fields.message.starts_with("ignored a cancel") {
            return;
        }
        let id = fields
            .request_id
            .as_deref()
            .unwrap_or_else(|| panic!("a cancel event without request_id: {}", fields.message));
        let id: u64 = id
            .parse()
            .unwrap_or_else(|_| panic!("request_id {id} is one of ours (a number)"));
        let mut log = self.0.lock().unwrap();
        if applied {
            log.applied.push(id);
        } else {
            log.ignored.push(id);
        }
    }
}

/// Runs the soak on a 2-worker runtime whose threads log to a [`CaptureCancels`] layer (as their
/// thread's default, so the other soak running in parallel in this process logs elsewhere).
fn run_soak(protocol: Protocol) {
    let log = Arc::new(Mutex::new(CancelLog::default()));
    let dispatch =
        Dispatch::new(tracing_subscriber::registry().with(CaptureCancels(Arc::clone(&log))));
    let on_start = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            // The thread keeps this default until it ends.
            std::mem::forget(tracing::dispatcher::set_default(&on_start));
        })
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || runtime.block_on(soak(protocol, log)));
}

/// What the client read: responses per id, and which of them were -32800 errors.
struct Responses {
    counts: Vec<u8>,
    cancelled_errors: Vec<bool>,
}

async fn soak(protocol: Protocol, log: Arc<Mutex<CancelLog>>) {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    let server = Peer::builder(protocol)
        .router(Router::new().request("work", work))
        .max_concurrency(64)
        .connect(read, write);
    let (read, mut writer) = tokio::io::split(client_io);
    let handle = server.handle();

    // Reader: count responses per id, until every ACP request is answered, or (MCP) until the
    // server has nothing in flight and the wire has been quiet for a moment.
    let expect_all = !matches!(protocol, Protocol::Mcp(_));
    let in_flight = server.handle();
    let reader = tokio::spawn(async move {
        let mut reader = tokio::io::BufReader::new(read);
        let mut counts = vec![0u8; REQUESTS];
        let mut cancelled_errors = vec![false; REQUESTS];
        let mut total = 0;
        // `read_until`, not `read_line`: under a timeout only `read_until` is cancel-safe (a
        // line cut by the timeout stays in `line`, and the next read completes it;
        // `read_line` empties its buffer when cancelled, losing the line's head).
        let mut line = Vec::new();
        loop {
            if expect_all && total == REQUESTS {
                // Everything is answered; anything more would be a second answer.
                line.clear();
                if let Ok(Ok(n)) = tokio::time::timeout(
                    Duration::from_millis(200),
                    reader.read_until(b'\n', &mut line),
                )
                .await
                    && n > 0
                {
                    panic!(
                        "an extra message after every request was answered: {}",
                        String::from_utf8_lossy(&line)
                    );
                }
                break;
            }
            // `line` is cleared only once a whole line has been taken.
            match tokio::time::timeout(
                Duration::from_millis(500),
                reader.read_until(b'\n', &mut line),
            )
            .await
            {
                Ok(Ok(0)) => break,
                Err(_) if !expect_all && in_flight.in_flight() == 0 => break,
                Err(_) => continue, // still working
                Ok(Ok(_)) => {
                    total += 1;
                    let message: Value = serde_json::from_slice(&line).unwrap();
                    line.clear();
                    let id = message["id"].as_u64().expect("every message is a response") as usize;
                    counts[id] += 1;
                    if message["error"]["code"] == -32800 {
                        cancelled_errors[id] = true;
                    }
                }
                Ok(Err(e)) => panic!("{e}"),
            }
        }
        Responses {
            counts,
            cancelled_errors,
        }
    });

    // Writer: requests, and cancels for about a third of them at random distances.
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    // Whether a cancel for the id was written (one scheduled past the last request never is).
    let mut cancelled = vec![false; REQUESTS];
    let mut due: Vec<(usize, usize)> = Vec::new(); // (send the cancel after request n, for id)
    let mut buffer = Vec::new();
    for id in 0..REQUESTS {
        let spins = rng.below(4);
        buffer.extend_from_slice(
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"work","params":{{"spins":{spins}}}}}"#
            )
            .as_bytes(),
        );
        buffer.push(b'\n');
        if rng.below(3) == 0 {
            due.push((id + rng.below(50) as usize, id));
        }
        due.retain(|(at, target)| {
            if *at > id {
                return true;
            }
            let line = match protocol {
                Protocol::Mcp(_) => format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{target},"reason":"soak"}}}}"#
                ),
                _ => format!(r#"{{"jsonrpc":"2.0","method":"$/cancel_request","params":{{"requestId":{target}}}}}"#),
            };
            buffer.extend_from_slice(line.as_bytes());
            cancelled[*target] = true;
            buffer.push(b'\n');
            false
        });
        if buffer.len() > 64 * 1024 {
            writer.write_all(&buffer).await.unwrap();
            buffer.clear();
        }
    }
    writer.write_all(&buffer).await.unwrap();
    writer.flush().await.unwrap();

    let responses = tokio::time::timeout(Duration::from_secs(300), reader)
        .await
        .expect("the soak finishes")
        .unwrap();
    assert_eq!(handle.in_flight(), 0, "the registry drains to zero");
    // Once the server has read everything, every cancel has been logged one way or the other.
    writer.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server.closed())
        .await
        .unwrap();

    let log = std::mem::take(&mut *log.lock().unwrap());
    let applied: HashSet<u64> = log.applied.iter().copied().collect();
    let ignored: HashSet<u64> = log.ignored.iter().copied().collect();
    let sent: HashSet<u64> = (0..REQUESTS as u64)
        .filter(|&id| cancelled[id as usize])
        .collect();
    assert_eq!(applied.len(), log.applied.len(), "a cancel applied twice");
    assert_eq!(ignored.len(), log.ignored.len(), "a cancel ignored twice");
    assert!(
        applied.is_disjoint(&ignored),
        "a cancel both applied and ignored"
    );
    let logged = &applied | &ignored;
    let mut unlogged: Vec<u64> = sent.difference(&logged).copied().collect();
    let mut never_sent: Vec<u64> = logged.difference(&sent).copied().collect();
    unlogged.sort_unstable();
    never_sent.sort_unstable();
    assert!(
        unlogged.is_empty() && never_sent.is_empty(),
        "{protocol:?}: {} cancels sent, {} logged; sent but not logged: {} (first {:?}); \
         logged but not sent: {} (first {:?})",
        sent.len(),
        logged.len(),
        unlogged.len(),
        &unlogged[..unlogged.len().min(10)],
        never_sent.len(),
        &never_sent[..never_sent.len().min(10)],
    );

    let answers_cancelled = !matches!(protocol, Protocol::Mcp(_));
    let mut cancelled_errors = 0;
    for (id, &count) in responses.counts.iter().enumerate() {
        let was_applied = applied.contains(&(id as u64));
        let expected = if was_applied && !answers_cancelled {
            0
        } else {
            1
        };
        assert_eq!(
            count,
            expected,
            "{protocol:?}: request {id} got {count} responses (cancel applied: {was_applied}, \
             cancel ignored: {})",
            ignored.contains(&(id as u64))
        );
        if responses.cancelled_errors[id] {
            // Only a cancel the server applied turns into -32800.
            assert!(
                was_applied,
                "{protocol:?}: request {id} answered -32800 without an applied cancel"
            );
            cancelled_errors += 1;
        }
    }
    // Enough cancels of both kinds for the checks above to mean something (about a third of the
    // requests are cancelled, most while running or queued).
    assert!(
        applied.len() >= MIN_OF_EACH && ignored.len() >= MIN_OF_EACH,
        "{protocol:?}: only {} cancels applied and {} ignored (of {} sent); need {MIN_OF_EACH} of each",
        applied.len(),
        ignored.len(),
        sent.len()
    );
    if answers_cancelled {
        assert!(
            cancelled_errors >= MIN_OF_EACH,
            "{protocol:?}: only {cancelled_errors} -32800 answers"
        );
    }
    eprintln!(
        "{protocol:?}: {} cancels sent, {} applied, {} ignored (finished first), {cancelled_errors} answered -32800",
        sent.len(),
        applied.len(),
        ignored.len()
    );
}

#[test]
fn acp_soak_every_request_gets_exactly_one_response() {
    run_soak(Protocol::Acp);
}

#[test]
fn mcp_soak_cancelled_requests_get_no_response() {
    run_soak(Protocol::Mcp(McpRevision::V2025_11_25));
}
