//! What no SDK offers yet: the cause of a cancellation as the handler sees it and the reason
//! text that leaves the process, `tasks/cancel` across the task boundary, the disconnect
//! policy, and timeouts that restart on progress. Real peers over an in-memory duplex.

mod common;

use std::time::{Duration, Instant};

use cancelkit::peer::{
    Context, DisconnectPolicy, McpRevision, Peer, Protocol, ReasonPolicy, RequestError, Router,
};
use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit::{CancelReason, CancellationToken, Cancelled, JsonRpcError, cancellable};
use common::{Event, Served, next_event, serve_extended};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const MCP: Protocol = Protocol::Mcp(McpRevision::V2025_11_25);
const SHORT: Duration = Duration::from_millis(150);

type Causes = mpsc::UnboundedReceiver<Option<CancelReason>>;

/// `watch` waits for its cancellation and reports the cause it sees through
/// `cancelkit::cancel_reason()`; `timeout` does the same inside a 100 ms `#[cancellable]`
/// timeout; `parent` reports what a scope over a plainly cancelled token sees.
fn cause_routes(router: Router, tx: mpsc::UnboundedSender<Option<CancelReason>>) -> Router {
    let (watch_tx, timeout_tx, parent_tx) = (tx.clone(), tx.clone(), tx);
    router
        .request("watch", move |_: Value, _cx: Context| {
            watch(watch_tx.clone())
        })
        .request("timeout", move |_: Value, _cx: Context| {
            timed(timeout_tx.clone())
        })
        .request("parent", move |_: Value, _cx: Context| {
            let tx = parent_tx.clone();
            async move {
                let token = CancellationToken::new();
                token.cancel();
                let cause = cancelkit::scope(token, async { cancelkit::cancel_reason() }).await;
                let _ = tx.send(cause);
                Ok::<_, JsonRpcError>(json!("reported"))
            }
        })
}

/// The causes channel is the tests' unbounded one (one cause per cancelled request, a few per
/// test).
#[cancellable(cooperative)]
async fn watch(tx: mpsc::UnboundedSender<Option<CancelReason>>) -> Result<Value, JsonRpcError> {
    cancelkit::cancelled().await;
    let cause = cancelkit::cancel_reason();
    let _ = tx.send(cause.clone());
    Err(Cancelled::new(cause.expect("cancelled")).into())
}

#[cancellable(cooperative, timeout = "100ms")]
async fn timed(tx: mpsc::UnboundedSender<Option<CancelReason>>) -> Result<Value, JsonRpcError> {
    cancelkit::cancelled().await;
    let _ = tx.send(cancelkit::cancel_reason());
    Ok(json!("timed out"))
}

fn serve_causes(
    protocol: Protocol,
    configure: impl FnOnce(cancelkit::peer::PeerBuilder) -> cancelkit::peer::PeerBuilder,
) -> (Served, Causes) {
    let (tx, rx) = mpsc::unbounded_channel();
    let served = serve_extended(
        protocol,
        move |router, _| cause_routes(router, tx),
        configure,
    );
    (served, rx)
}

async fn next_cause(causes: &mut Causes) -> Option<CancelReason> {
    tokio::time::timeout(Duration::from_secs(5), causes.recv())
        .await
        .expect("a cause within 5 s")
        .expect("causes channel open")
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Waits until the server has registered `n` requests in flight.
async fn wait_in_flight(s: &Served, n: usize) {
    for _ in 0..500 {
        if s.peer.in_flight() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{} requests in flight, expected {n}", s.peer.in_flight());
}

#[tokio::test]
async fn each_cause_is_visible_to_the_handler() {
    // The peer's cancel, with its text.
    let (mut s, mut causes) = serve_causes(MCP, |b| b);
    s.wire.send(request(1, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user pressed stop"}}))
        .await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::Peer(Some("user pressed stop".into())))
    );

    // A timeout.
    s.wire.send(request(2, "timeout", json!({}))).await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::Timeout(Duration::from_millis(100)))
    );

    // A parent cancelled without a recorded reason.
    s.wire.send(request(3, "parent", json!({}))).await;
    assert_eq!(next_cause(&mut causes).await, Some(CancelReason::Parent));

    // An API: someone asked on our side, and we know who.
    s.wire.send(request(4, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    assert!(s.peer.cancel_inbound(
        &RequestId::from(4),
        CancelReason::Api(Some("ops@example.com".into()))
    ));
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::Api(Some("ops@example.com".into())))
    );
    // The peer did not cancel it, so even MCP answers it; who asked stays with us.
    let answer = loop {
        let message = s.wire.recv().await;
        if message["id"] == 4 {
            break message;
        }
    };
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(4), json!(-32800))
    );
    assert_eq!(
        answer["error"]["data"]["reason"], "cancelled through the API",
        "{answer}"
    );
    assert!(
        !s.peer
            .cancel_inbound(&RequestId::from(4), CancelReason::Api(None))
    );

    // The peer hung up.
    s.wire.send(request(5, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    s.wire.hang_up().await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::ConnectionClosed)
    );

    // We shut down.
    let (mut s, mut causes) = serve_causes(MCP, |b| b);
    s.wire.send(request(1, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    s.peer.close();
    assert_eq!(next_cause(&mut causes).await, Some(CancelReason::Shutdown));
}

/// Collects what the fmt subscriber writes.
#[derive(Clone, Default)]
struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    /// The INFO lines that name request `id`.
    fn lines_for(&self, id: &str) -> Vec<String> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .filter(|line| line.contains(" INFO ") && line.contains(&format!("request_id={id} ")))
            .map(str::to_owned)
            .collect()
    }
}

/// One INFO line per cancelled request, with its id, its method and its cause — whether the
/// peer cancelled it or the connection closed under it.
#[tokio::test]
async fn each_cancellation_is_logged_once_with_its_cause() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    // A current-thread test: the peer's tasks run on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);
    let mut s = common::serve(MCP, |b| b);
    s.wire
        .send(request(1, "sleep", json!({"label": "a", "ms": 60_000})))
        .await;
    s.wire
        .send(request(2, "sleep", json!({"label": "b", "ms": 60_000})))
        .await;
    for _ in 0..2 {
        next_event(&mut s.events).await;
    }
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user pressed stop"}}))
        .await;
    assert_eq!(next_event(&mut s.events).await, Event::Dropped("a".into()));
    s.wire.hang_up().await;
    assert_eq!(next_event(&mut s.events).await, Event::Dropped("b".into()));
    tokio::time::timeout(Duration::from_secs(5), s.server.closed())
        .await
        .unwrap();

    let one = log.lines_for("1");
    assert_eq!(one.len(), 1, "{one:#?}");
    assert!(one[0].contains("method=\"sleep\""), "{}", one[0]);
    assert!(
        one[0].contains("reason=\"user pressed stop\""),
        "{}",
        one[0]
    );
    assert!(
        one[0].contains("cause=cancelled by the peer: user pressed stop"),
        "{}",
        one[0]
    );
    let two = log.lines_for("2");
    assert_eq!(two.len(), 1, "{two:#?}");
    assert!(two[0].contains("method=\"sleep\""), "{}", two[0]);
    assert!(
        two[0].contains("cause=cancelled: the connection closed"),
        "{}",
        two[0]
    );
}

/// What each outgoing-reason policy lets out: in the `notifications/cancelled` of a request we
/// made from a handler the peer cancelled with a text of its own, and in the -32800 answer to a
/// request cancelled through the API by a named operator.
#[tokio::test]
async fn each_reason_policy_on_the_wire() {
    let secret = "db password rejected for admin";
    for (policy, nested_reason, answer_reason) in [
        (
            None,
            Some("cancelled by the peer"),
            Some("cancelled through the API"),
        ),
        (Some(ReasonPolicy::None), None, None),
        (
            Some(ReasonPolicy::Fixed("cancelled by the gateway".into())),
            Some("cancelled by the gateway"),
            Some("cancelled by the gateway"),
        ),
        (
            Some(ReasonPolicy::Forward),
            Some("cancelled by the peer: db password rejected for admin"),
            Some("cancelled through the API by alice"),
        ),
    ] {
        let label = format!("{policy:?}");
        let mut s = common::serve(MCP, |b| match policy {
            Some(policy) => b.outgoing_reason(policy),
            None => b,
        });
        s.wire
            .send(request(10, "ask", json!({"label": "q", "ms": 0})))
            .await;
        let nested = s.wire.recv().await;
        assert_eq!(nested["method"], "client/confirm", "{label}");
        s.wire
            .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10, "reason": secret}}))
            .await;
        let cancel = s.wire.recv().await;
        assert_eq!(
            cancel["method"], "notifications/cancelled",
            "{label}: {cancel}"
        );
        assert_eq!(cancel["params"]["requestId"], nested["id"], "{label}");
        assert_eq!(
            cancel["params"].get("reason").and_then(Value::as_str),
            nested_reason,
            "{label}: {cancel}"
        );

        s.wire
            .send(request(11, "sleep", json!({"label": "s", "ms": 60_000})))
            .await;
        loop {
            if next_event(&mut s.events).await == Event::Started("s".into()) {
                break;
            }
        }
        assert!(s.peer.cancel_inbound(
            &RequestId::from(11),
            CancelReason::Api(Some("alice".into()))
        ));
        let answer = s.wire.recv().await;
        assert_eq!(answer["id"], 11, "{label}: {answer}");
        assert_eq!(answer["error"]["code"], -32800, "{label}: {answer}");
        assert_eq!(
            answer["error"]["data"]
                .get("reason")
                .and_then(Value::as_str),
            answer_reason,
            "{label}: {answer}"
        );
    }
}

fn task_call(label: &str, ms: u64) -> Value {
    json!({"name": "sleep", "arguments": {"label": label, "ms": ms}, "task": {"ttl": 60_000}})
}

/// Dropped before its `CreateTaskResult` arrives, a task-augmented request sends nothing at
/// once (never `notifications/cancelled`), then `tasks/cancel` as soon as the task id arrives.
#[tokio::test]
async fn a_task_request_dropped_before_its_task_id_sends_tasks_cancel_when_it_arrives() {
    let mut s = common::serve(MCP, |b| b);
    let call = s
        .peer
        .request::<_, Value>("tools/call", task_call("t", 60_000));
    let sent = s.wire.recv().await;
    assert_eq!(sent["method"], "tools/call");
    drop(call);
    s.wire.assert_silent(SHORT).await;
    s.wire
        .send(
            json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"task": {
            "taskId": "task-7", "status": "working", "createdAt": "2026-11-23T00:00:00.000Z",
            "lastUpdatedAt": "2026-11-23T00:00:00.000Z", "ttl": 60000}}}),
        )
        .await;
    let cancel = s.wire.recv().await;
    assert_eq!(cancel["method"], "tasks/cancel", "{cancel}");
    assert_eq!(cancel["params"], json!({"taskId": "task-7"}));
    assert!(cancel["id"].is_number());
    assert_eq!(s.peer.pending_requests(), 0);
    s.wire.assert_silent(SHORT).await;
}

/// Dropped once its task id has arrived (but before the caller took the result), it sends
/// `tasks/cancel` at once.
#[tokio::test]
async fn a_task_request_dropped_after_its_task_id_sends_tasks_cancel_at_once() {
    let mut s = common::serve(MCP, |b| b);
    let call = s
        .peer
        .request::<_, Value>("tools/call", task_call("t", 60_000));
    let sent = s.wire.recv().await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"task": {"taskId": "task-9", "status": "working"}}}))
        .await;
    for _ in 0..500 {
        if s.peer.pending_requests() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(s.peer.pending_requests(), 0, "the answer was read");
    drop(call);
    let cancel = s.wire.recv().await;
    assert_eq!(cancel["method"], "tasks/cancel", "{cancel}");
    assert_eq!(cancel["params"], json!({"taskId": "task-9"}));
}

/// Against our own server-side tasks: the client drops the call before the server's answer,
/// and the server's task ends `cancelled`, its handler stopped (or never started: the
/// `tasks/cancel` may reach the server before the handler's first poll).
#[tokio::test]
async fn a_dropped_task_request_ends_the_servers_task_cancelled() {
    let (events, mut rx) = common::events_channel();
    let (_server, client) = common::pair(
        Peer::builder(MCP).router(common::router(events)),
        Peer::builder(MCP),
    );
    drop(
        client
            .handle()
            .request::<_, Value>("tools/call", task_call("job", 60_000)),
    );
    let mut task = Value::Null;
    for _ in 0..500 {
        // Unknown (-32602) until the server has created it.
        if let Ok(seen) = client
            .handle()
            .request::<_, Value>("tasks/get", json!({"taskId": "task-0"}))
            .await
        {
            task = seen;
            if task["status"] != "working" {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(task["status"], "cancelled", "{task}");
    assert_eq!(task["statusMessage"], "Cancelled by the requester");
    tokio::time::sleep(SHORT).await;
    let mut seen = Vec::new();
    while let Ok(event) = rx.try_recv() {
        seen.push(event);
    }
    assert!(
        seen.is_empty() || seen == [Event::Started("job".into()), Event::Dropped("job".into())],
        "{seen:?}"
    );
}

/// At most `MAX_ABANDONED_TASKS` abandoned task requests wait for their task id; the one
/// beyond is forgotten (its task would run until its ttl), and only the kept ones are cancelled.
#[tokio::test]
async fn abandoned_task_requests_are_bounded() {
    let mut s = common::serve(MCP, |b| b);
    let n = cancelkit::peer::MAX_ABANDONED_TASKS + 1;
    let mut ids = Vec::new();
    for _ in 0..n {
        drop(
            s.peer
                .request::<_, Value>("tools/call", task_call("t", 60_000)),
        );
        ids.push(s.wire.recv().await["id"].clone());
    }
    assert_eq!(s.peer.pending_requests(), n - 1);
    for (i, id) in ids.iter().enumerate() {
        s.wire
            .send(json!({"jsonrpc": "2.0", "id": id, "result": {"task": {"taskId": format!("task-{i}")}}}))
            .await;
    }
    for i in 0..n - 1 {
        let cancel = s.wire.recv().await;
        assert_eq!(cancel["params"]["taskId"], format!("task-{i}"), "{cancel}");
    }
    s.wire.assert_silent(SHORT).await;
    assert_eq!(s.peer.pending_requests(), 0);
}

#[tokio::test]
async fn by_default_a_hang_up_cancels_everything() {
    let mut s = common::serve(Protocol::Acp, |b| b);
    s.wire
        .send(request(1, "sleep", json!({"label": "a", "ms": 60_000})))
        .await;
    assert_eq!(next_event(&mut s.events).await, Event::Started("a".into()));
    s.wire.hang_up().await;
    assert_eq!(next_event(&mut s.events).await, Event::Dropped("a".into()));
}

/// A named method runs to completion after the client hangs up (seen through its handler's
/// events: it finished, it was not dropped); the others are cancelled with the cause
/// `ConnectionClosed`.
#[tokio::test]
async fn a_named_method_finishes_after_the_client_hangs_up() {
    let (tx, mut causes) = mpsc::unbounded_channel();
    let mut s = serve_extended(
        MCP,
        move |router, _| cause_routes(router, tx),
        |b| b.on_disconnect(DisconnectPolicy::finish(["sleep"]).max(Duration::from_secs(5))),
    );
    s.wire
        .send(request(1, "sleep", json!({"label": "keep", "ms": 300})))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("keep".into())
    );
    s.wire.send(request(2, "watch", json!({}))).await;
    wait_in_flight(&s, 2).await;
    s.wire.hang_up().await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::ConnectionClosed)
    );
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Finished("keep".into())
    );
    // Its task ends too: nothing is left in flight, nothing waits forever to be written.
    wait_in_flight(&s, 0).await;
    tokio::time::timeout(Duration::from_secs(5), s.server.closed())
        .await
        .unwrap();
}

/// Methods that run on after a disconnect are still cancelled at the policy's bound, with the
/// cause `ConnectionClosed`.
#[tokio::test]
async fn methods_that_run_on_stop_at_the_bound() {
    let (tx, mut causes) = mpsc::unbounded_channel();
    let mut s = serve_extended(
        MCP,
        move |router, _| cause_routes(router, tx),
        |b| b.on_disconnect(DisconnectPolicy::finish(["watch"]).max(Duration::from_millis(300))),
    );
    s.wire.send(request(1, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    let hung_up = Instant::now();
    s.wire.hang_up().await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::ConnectionClosed)
    );
    let after = hung_up.elapsed();
    assert!(
        after >= Duration::from_millis(280),
        "cancelled after {after:?}, before the bound"
    );
    // The bound is the policy's 300 ms, not the 2 s shutdown grace.
    assert!(
        after < Duration::from_millis(1500),
        "cancelled after {after:?}"
    );
}

/// MCP tasks run on after a hang-up when the policy says so, and are stopped otherwise.
#[tokio::test]
async fn tasks_finish_after_a_hang_up_when_the_policy_says_so() {
    for (finish, expected) in [
        (true, Event::Finished("job".into())),
        (false, Event::Dropped("job".into())),
    ] {
        let mut s = common::serve(MCP, |b| {
            b.on_disconnect(
                DisconnectPolicy::finish(Vec::<String>::new())
                    .tasks(finish)
                    .max(Duration::from_secs(5)),
            )
        });
        let created = s
            .wire
            .call(json!(1), "tools/call", task_call("job", 300))
            .await;
        assert_eq!(created["result"]["task"]["status"], "working", "{created}");
        assert_eq!(
            next_event(&mut s.events).await,
            Event::Started("job".into())
        );
        s.wire.hang_up().await;
        assert_eq!(
            next_event(&mut s.events).await,
            expected,
            "finish tasks: {finish}"
        );
    }
}

#[derive(Deserialize)]
struct Work {
    /// Progress every this many ms (0: none).
    every_ms: u64,
    /// Finish after this many ms (0: never).
    total_ms: u64,
    #[serde(rename = "_meta")]
    meta: Option<Value>,
}

/// Reports `"dropped"` when a `work` handler stops unfinished.
struct Unfinished(Option<mpsc::UnboundedSender<&'static str>>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send("dropped");
        }
    }
}

/// A server with `work`: sends `notifications/progress` for its `_meta.progressToken` every
/// `every_ms`, finishes after `total_ms`.
fn progress_pair() -> (Peer, Peer, mpsc::UnboundedReceiver<&'static str>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let router = Router::new().request("work", move |p: Work, cx: Context| {
        let tx = tx.clone();
        async move {
            let mut guard = Unfinished(Some(tx));
            let token = p.meta.and_then(|m| m.get("progressToken").cloned());
            let start = Instant::now();
            let mut n = 0;
            while p.total_ms == 0 || start.elapsed() < Duration::from_millis(p.total_ms) {
                let step = if p.every_ms == 0 {
                    p.total_ms
                } else {
                    p.every_ms
                };
                tokio::time::sleep(Duration::from_millis(step)).await;
                n += 1;
                if let Some(token) = token.as_ref().filter(|_| p.every_ms > 0) {
                    let progress = json!({"progressToken": token, "progress": n});
                    let _ = cx.peer().notify("notifications/progress", progress).await;
                }
            }
            guard.0 = None;
            Ok::<_, JsonRpcError>(json!("done"))
        }
    });
    let (server, client) = common::pair(Peer::builder(MCP).router(router), Peer::builder(MCP));
    (server, client, rx)
}

const IDLE: Duration = Duration::from_millis(150);

#[tokio::test]
async fn progress_keeps_a_request_alive_past_its_idle_timeout() {
    let (_server, client, _dropped) = progress_pair();
    let started = Instant::now();
    let done: Value = client
        .handle()
        .request_with_progress(
            "work",
            json!({"every_ms": 50, "total_ms": 400}),
            IDLE,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(done, "done");
    assert!(started.elapsed() >= Duration::from_millis(400));
    // The caller's own token works the same, and a second `progress_timeout` replaces the
    // first.
    let done: Value = client
        .handle()
        .request(
            "work",
            json!({"every_ms": 50, "total_ms": 400, "_meta": {"progressToken": "mine"}}),
        )
        .progress_timeout(Duration::from_millis(10), Duration::from_millis(20))
        .progress_timeout(IDLE, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(done, "done");
}

#[tokio::test]
async fn a_silent_request_times_out_at_idle() {
    let (_server, client, mut dropped) = progress_pair();
    let started = Instant::now();
    let error = client
        .handle()
        .request_with_progress::<_, Value>(
            "work",
            json!({"every_ms": 0, "total_ms": 10_000}),
            IDLE,
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
    let after = started.elapsed();
    assert!(
        matches!(error, RequestError::Timeout(d) if d == IDLE),
        "{error:?}"
    );
    assert!(after >= IDLE && after < Duration::from_secs(3), "{after:?}");
    // The server was told (notifications/cancelled) and dropped its handler.
    let seen = tokio::time::timeout(Duration::from_secs(5), dropped.recv()).await;
    assert_eq!(seen.unwrap(), Some("dropped"));
}

/// At most `MAX_PROGRESS_TOKENS` requests are watched for progress; beyond, the request gets
/// a plain timeout of its maximum (not its idle time).
#[tokio::test]
async fn watched_progress_tokens_are_bounded() {
    let s = common::serve(MCP, |b| b);
    let long = Duration::from_secs(60);
    let held: Vec<_> = (0..cancelkit::peer::MAX_PROGRESS_TOKENS)
        .map(|_| {
            s.peer
                .request_with_progress::<_, Value>("client/slow", json!({}), long, long)
        })
        .collect();
    let max = Duration::from_millis(400);
    let error = s
        .peer
        .request_with_progress::<_, Value>("client/slow", json!({}), Duration::from_millis(20), max)
        .await
        .unwrap_err();
    assert!(
        matches!(error, RequestError::Timeout(d) if d == max),
        "{error:?}"
    );
    drop(held);
}

#[tokio::test]
async fn progress_forever_is_cancelled_at_the_maximum() {
    let (_server, client, mut dropped) = progress_pair();
    let max = Duration::from_millis(700);
    let started = Instant::now();
    let error = client
        .handle()
        .request_with_progress::<_, Value>(
            "work",
            json!({"every_ms": 50, "total_ms": 0}),
            IDLE,
            max,
        )
        .await
        .unwrap_err();
    let after = started.elapsed();
    assert!(
        matches!(error, RequestError::Timeout(d) if d == max),
        "{error:?}"
    );
    assert!(after >= max && after < Duration::from_secs(4), "{after:?}");
    let seen = tokio::time::timeout(Duration::from_secs(5), dropped.recv()).await;
    assert_eq!(seen.unwrap(), Some("dropped"));
    assert_eq!(client.handle().pending_requests(), 0);
}
