//! Soak: 100,000 requests with random cancel timing under a concurrency limit. Every ACP request
//! gets exactly one response; every MCP request exactly one unless it was cancelled (then at
//! most one, when it finished before the cancel arrived); the registry drains to zero.

mod common;

use std::time::Duration;

use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::{JsonRpcError, cancellable};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const REQUESTS: usize = 100_000;

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

async fn soak(protocol: Protocol) {
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
        let mut total = 0;
        let mut line = String::new();
        loop {
            if expect_all && total == REQUESTS {
                // Everything is answered; anything more would be a second answer.
                line.clear();
                if let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_millis(200), reader.read_line(&mut line))
                        .await
                    && n > 0
                {
                    panic!("an extra message after every request was answered: {line}");
                }
                break;
            }
            line.clear();
            match tokio::time::timeout(Duration::from_millis(500), reader.read_line(&mut line))
                .await
            {
                Ok(Ok(0)) => break,
                Err(_) if !expect_all && in_flight.in_flight() == 0 => break,
                Err(_) => continue, // still working
                Ok(Ok(_)) => {
                    total += 1;
                    let message: Value = serde_json::from_str(&line).unwrap();
                    let id = message["id"].as_u64().expect("every message is a response") as usize;
                    counts[id] += 1;
                }
                Ok(Err(e)) => panic!("{e}"),
            }
        }
        counts
    });

    // Writer: requests, and cancels for about a third of them at random distances.
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let mut cancelled = Vec::with_capacity(REQUESTS);
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
        let cancel = rng.below(3) == 0;
        cancelled.push(cancel);
        if cancel {
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

    let counts = tokio::time::timeout(Duration::from_secs(300), reader)
        .await
        .expect("the soak finishes")
        .unwrap();
    let answers_cancelled = !matches!(protocol, Protocol::Mcp(_));
    let mut unanswered_cancelled = 0;
    for (id, (&count, &was_cancelled)) in counts.iter().zip(&cancelled).enumerate() {
        match (count, was_cancelled) {
            (1, _) => {}
            (0, true) if !answers_cancelled => unanswered_cancelled += 1,
            (n, was_cancelled) => {
                panic!("{protocol:?}: request {id} got {n} responses (cancelled: {was_cancelled})")
            }
        }
    }
    if !answers_cancelled {
        assert!(unanswered_cancelled > 0, "some MCP cancels arrived in time");
    }
    assert_eq!(handle.in_flight(), 0, "the registry drains to zero");
    writer.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server.closed())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_soak_every_request_gets_exactly_one_response() {
    soak(Protocol::Acp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_soak_cancelled_requests_get_no_response() {
    soak(Protocol::Mcp(McpRevision::V2025_11_25)).await;
}
