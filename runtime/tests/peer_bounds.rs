//! Every queue of a connection is bounded, and what happens at each bound is the designed
//! behaviour: refusal at once (-32050) while reading, back-pressure when the peer does not read,
//! disconnection after the write timeout, a close that always ends within the grace period,
//! and MCP tasks that are capped and forgotten at their ttl.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cancelkit::JsonRpcError;
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use common::{Event, next_event, serve};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const ACP: Protocol = Protocol::Acp;
const MCP: Protocol = Protocol::Mcp(McpRevision::V2025_11_25);

fn sleep_request(id: &str, ms: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "sleep", "params": {"label": id, "ms": ms}})
}

#[tokio::test]
async fn a_request_beyond_max_in_flight_is_refused_at_once_and_cancels_behind_it_still_apply() {
    let mut s = serve(ACP, |b| b.max_in_flight(2));
    for id in ["a", "b", "c"] {
        s.wire.send(sleep_request(id, 60_000)).await;
    }
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "a"}}))
        .await;
    let refused = s.wire.recv().await;
    assert_eq!(refused["id"], "c", "{refused}");
    assert_eq!(refused["error"]["code"], -32050, "{refused}");
    assert_eq!(refused["error"]["message"], "Server overloaded");
    assert!(
        refused["error"]["data"]
            .as_str()
            .unwrap()
            .contains("2 requests are already in flight"),
        "{refused}"
    );
    let cancelled = s.wire.recv().await;
    assert_eq!(cancelled["id"], "a", "{cancelled}");
    assert_eq!(cancelled["error"]["code"], -32800, "{cancelled}");
    // `a` left: there is room for one more, and `b` still runs.
    s.wire.assert_alive().await;
    assert_eq!(s.peer.in_flight(), 1);
    let mut started = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(50), s.events.recv()).await
    {
        started.push(event);
    }
    assert!(
        !started.contains(&Event::Started("c".into())),
        "a refused request never runs: {started:?}"
    );
}

#[tokio::test]
async fn requests_beyond_max_in_flight_bytes_are_refused() {
    let mut s = serve(MCP, |b| b.max_in_flight_bytes(1_000));
    let big = "x".repeat(600);
    for id in ["first", "second"] {
        s.wire
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "sleep", "params": {"label": big, "ms": 60_000}}))
            .await;
    }
    let refused = s.wire.recv().await;
    assert_eq!(refused["id"], "second", "{refused}");
    assert_eq!(refused["error"]["code"], -32050, "{refused}");
    assert!(
        refused["error"]["data"]
            .as_str()
            .unwrap()
            .contains("1000 bytes"),
        "{refused}"
    );
    // Small requests still fit next to the first one.
    s.wire.assert_alive().await;
}

/// Params whose parsing records whether it ran inside the request's own scope (its task) —
/// the reader task has no scope.
struct Probe {
    parsed_in_request_task: bool,
}

impl<'de> Deserialize<'de> for Probe {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Probe {
            parsed_in_request_task: cancelkit::current().is_some(),
        })
    }
}

#[tokio::test]
async fn params_are_parsed_in_the_request_s_task_not_on_the_reader() {
    let probe = |p: Probe, _cx: Context| async move {
        Ok::<_, JsonRpcError>(json!({"inTask": p.parsed_in_request_task}))
    };
    let router = Router::new()
        .request("probe", probe)
        .request("session/prompt", probe);
    let (client, server) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server);
    let _server = Peer::builder(ACP).router(router).connect(read, write);
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    for (id, method) in [(1, "probe"), (2, "session/prompt")] {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method,
            "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}});
        write
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        let answer: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["result"]["inTask"], true, "{method}: {answer}");
    }
}

/// Writes `count` echo requests of about 150 bytes each, never reading; returns when all are
/// written.
fn write_echoes(
    mut write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    count: usize,
) -> tokio::task::JoinHandle<tokio::io::WriteHalf<tokio::io::DuplexStream>> {
    tokio::spawn(async move {
        let text = "y".repeat(100);
        for id in 0..count {
            let request =
                json!({"jsonrpc": "2.0", "id": id, "method": "echo", "params": {"text": text}});
            write
                .write_all(format!("{request}\n").as_bytes())
                .await
                .unwrap();
        }
        write
    })
}

#[tokio::test]
async fn a_peer_that_stops_reading_is_slowed_down_and_the_output_stays_within_its_bound() {
    const REQUESTS: usize = 5_000;
    // Requests beyond the 64 in flight are refused, so the refusals fill the output too.
    let s = serve(MCP, |b| b.max_output_bytes(16 * 1024).max_in_flight(64));
    let (write, mut read) = s.wire.into_split();
    let writer = write_echoes(write, REQUESTS);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        s.peer.queued_output_bytes() <= 16 * 1024,
        "{} bytes queued",
        s.peer.queued_output_bytes()
    );
    assert!(
        !writer.is_finished(),
        "the server stopped reading once its output was full, so our writes block"
    );
    // Reading again drains everything: every request answered exactly once (its result, or
    // -32050 for those refused at the in-flight bound).
    let mut answered = vec![0u8; REQUESTS];
    let mut line = String::new();
    for _ in 0..REQUESTS {
        line.clear();
        tokio::time::timeout(Duration::from_secs(10), read.read_line(&mut line))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        answered[answer["id"].as_u64().unwrap() as usize] += 1;
    }
    assert!(answered.iter().all(|n| *n == 1));
    writer.await.unwrap();
    assert!(!s.peer.is_closed());
}

#[tokio::test]
async fn a_peer_that_reads_nothing_for_the_write_timeout_is_disconnected_and_work_cancelled() {
    let mut s = serve(ACP, |b| {
        b.max_output_bytes(4 * 1024)
            .write_timeout(Duration::from_millis(300))
    });
    s.wire.send(sleep_request("slow", 60_000)).await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("slow".into())
    );
    let (write, _read) = s.wire.into_split();
    let _writer = write_echoes(write, 5_000);
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("slow".into()),
        "the connection closed and cancelled what was in flight"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !s.peer.is_closed() {
        assert!(Instant::now() < deadline, "the connection closes");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn closing_ends_within_the_grace_even_when_the_peer_reads_nothing() {
    let s = serve(ACP, |b| {
        b.max_output_bytes(4 * 1024)
            .shutdown_grace(Duration::from_millis(300))
    });
    let (write, _read) = s.wire.into_split();
    let _writer = write_echoes(write, 5_000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(s.peer.queued_output_bytes() > 0, "the output is stuck");
    let started = Instant::now();
    s.peer.close();
    tokio::time::timeout(Duration::from_secs(3), s.server.closed())
        .await
        .expect("closed() returns although the writer is stuck");
    assert!(
        started.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn notifications_behind_slow_handlers_hold_up_the_reader_within_their_bound() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let handler_gate = Arc::clone(&gate);
    let router = Router::new()
        .notification("slow", move |_: Value, _cx: Context| {
            let gate = Arc::clone(&handler_gate);
            async move {
                gate.acquire().await.unwrap().forget();
            }
        })
        .request("echo", |p: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(p)
        });
    let (client, server) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server);
    let _server = Peer::builder(ACP)
        .router(router)
        .max_notification_bytes(2 * 1024)
        .connect(read, write);
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    let filler = "z".repeat(100);
    let mut burst = String::new();
    for _ in 0..100 {
        burst.push_str(&json!({"jsonrpc": "2.0", "method": "slow", "params": filler}).to_string());
        burst.push('\n');
    }
    burst.push_str(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": "after"}).to_string(),
    );
    burst.push('\n');
    write.write_all(burst.as_bytes()).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), lines.next_line())
            .await
            .is_err(),
        "the reader waits for the notification handlers once 2 KiB of notifications are queued"
    );
    gate.add_permits(1_000);
    let answer: Value = serde_json::from_str(
        &tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("answered once the handlers catch up")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(answer["result"], "after");
}

async fn task_call(s: &mut common::Served, id: u64, label: &str, ms: u64, ttl: Value) -> Value {
    s.wire
        .call(
            json!(id),
            "tools/call",
            json!({"name": "sleep", "arguments": {"label": label, "ms": ms}, "task": {"ttl": ttl}}),
        )
        .await
}

#[tokio::test]
async fn a_task_still_working_at_its_ttl_is_stopped_and_forgotten() {
    let mut s = serve(MCP, |b| b);
    let created = task_call(&mut s, 1, "long", 60_000, json!(200)).await;
    let task_id = created["result"]["task"]["taskId"].clone();
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("long".into())
    );
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("long".into()),
        "the handler is stopped at the ttl"
    );
    let gone = s
        .wire
        .call(json!(2), "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
}

#[tokio::test]
async fn a_finished_task_is_forgotten_at_its_ttl_without_any_new_task() {
    let mut s = serve(MCP, |b| b);
    let created = task_call(&mut s, 1, "quick", 1, json!(300)).await;
    let task_id = created["result"]["task"]["taskId"].clone();
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("quick".into())
    );
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Finished("quick".into())
    );
    let kept = s
        .wire
        .call(json!(2), "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(kept["result"]["status"], "completed", "{kept}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let gone = s
        .wire
        .call(json!(3), "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
}

#[tokio::test]
async fn the_number_of_tasks_is_capped() {
    let mut s = serve(MCP, |b| b.max_tasks(2));
    for (id, label) in [(1, "one"), (2, "two")] {
        let created = task_call(&mut s, id, label, 60_000, json!(60_000)).await;
        assert_eq!(created["result"]["task"]["status"], "working", "{created}");
    }
    let refused = task_call(&mut s, 3, "three", 60_000, json!(60_000)).await;
    assert_eq!(refused["error"]["code"], -32050, "{refused}");
    s.wire.assert_alive().await;
}

#[tokio::test]
async fn a_huge_ttl_is_granted_as_the_maximum() {
    let mut s = serve(MCP, |b| b.max_task_ttl(Duration::from_secs(3_600)));
    let created = task_call(&mut s, 1, "t", 60_000, json!(u64::MAX)).await;
    assert_eq!(created["result"]["task"]["ttl"], 3_600_000, "{created}");
    let default = task_call(&mut s, 2, "u", 60_000, json!(i64::MAX)).await;
    assert_eq!(default["result"]["task"]["ttl"], 3_600_000, "{default}");
}

#[tokio::test(start_paused = true)]
async fn what_is_queued_when_the_peer_hangs_up_is_written_even_with_no_grace() {
    // Found by the peer_acp fuzzer: with a zero grace the writer was stopped before it ran once.
    let mut s = serve(ACP, |b| b.shutdown_grace(Duration::ZERO));
    s.wire.send_raw(b"{not json\n").await;
    s.wire.hang_up().await;
    let answer = s.wire.recv().await;
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
}
