//! One round of each measurement, the same procedure for every stack: echo round trips at one
//! client, a timed throughput round at N clients (with the CPU the stack's process and the
//! upstream used in it), and one API cancel.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::process::tree_cpu_seconds;
use super::stacks::Target;
use super::upstream::Upstream;
use crate::gateway_bench::unix_us;

/// How long a cancelled call's answer is waited for once its tool stopped.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// Request ids, unique over the run (the cancel API finds a run by its id).
static NEXT_ID: AtomicU64 = AtomicU64::new(1_000);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// `calls` echo calls one after another on client 0's session: each round trip, µs.
pub async fn latency_round(target: &Target, calls: usize) -> Vec<f64> {
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        target.echo(0, next_id()).await;
        samples.push(started.elapsed().as_secs_f64() * 1e6);
    }
    samples
}

/// One throughput round.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Round {
    /// Calls answered.
    pub calls: u64,
    /// From the first call sent to the last answer, s.
    pub seconds: f64,
    /// CPU seconds of the stack's process (and its children) over the round.
    pub stack_cpu: Option<f64>,
    /// CPU seconds of the upstream over the round.
    pub upstream_cpu: f64,
}

impl Round {
    /// Calls per second.
    pub fn rate(&self) -> f64 {
        self.calls as f64 / self.seconds
    }

    /// The stack process' CPU µs per call.
    pub fn stack_us_per_call(&self) -> Option<f64> {
        self.stack_cpu.map(|s| s * 1e6 / self.calls as f64)
    }

    /// The upstream's CPU µs per call.
    pub fn upstream_us_per_call(&self) -> f64 {
        self.upstream_cpu * 1e6 / self.calls as f64
    }
}

/// `clients` clients, each on its own session, calling echo back to back until `duration` has
/// passed (then each finishes the call it is in).
pub async fn throughput_round(
    target: &Target,
    upstream: &Upstream,
    clients: usize,
    duration: Duration,
) -> Round {
    let stack_before = target.pid.map(tree_cpu_seconds);
    let upstream_before = tree_cpu_seconds(upstream.proc.pid());
    let started = Instant::now();
    let deadline = started + duration;
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients {
        let session = target.sessions[client].clone();
        let (echo, name, done) = (target.echo.clone(), target.name.clone(), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let answer = session
                    .call(next_id(), &echo, json!({"text": "x"}))
                    .await
                    .unwrap_or_else(|e| panic!("{name}: echo failed: {e}"));
                assert_eq!(super::client::text(&answer), Some("x"), "{name}: {answer}");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.expect("a client");
    }
    let seconds = started.elapsed().as_secs_f64();
    Round {
        calls: done.load(Ordering::Relaxed),
        seconds,
        stack_cpu: target
            .pid
            .zip(stack_before)
            .map(|(pid, before)| tree_cpu_seconds(pid) - before),
        upstream_cpu: tree_cpu_seconds(upstream.proc.pid()) - upstream_before,
    }
}

/// Which front door a cancelled call came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Door {
    /// The MCP endpoint, on the client's session.
    Mcp,
    /// The gateway's JSON-RPC endpoint `/rpc`.
    Rpc,
}

/// One API cancel.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Cancel {
    /// The cancel API's `status` (`cancelled`, `queued`, ...), or its error.
    pub status: String,
    /// From sending the cancel to the API's answer, µs.
    pub answered_us: f64,
    /// From sending the cancel to the upstream's tool stopping, µs (`None`: not within the wait).
    pub stopped_us: Option<f64>,
    /// From sending the cancel to the upstream receiving a session `DELETE`, µs, if one came
    /// before the stop (or the end of the wait).
    pub deleted_us: Option<f64>,
    /// What the caller got for the cancelled call (the first 200 bytes), or `(no answer)`.
    pub answer: String,
}

/// A `sleep` of `seconds` through `door`; once the upstream runs it, `POST
/// /cancellation/cancel` with its request id; waits at most `wait` for the upstream's stop.
pub async fn one_cancel(
    target: &Target,
    upstream: &Upstream,
    door: Door,
    seconds: f64,
    wait: Duration,
) -> Cancel {
    let base = target.base.as_deref().expect("a stack with a cancel API");
    let token = target.endpoint.token.clone().unwrap_or_default();
    let id = next_id();
    let (started, stopped) = (upstream.log.started(), upstream.log.stopped());
    let arguments = json!({"seconds": seconds});
    let pending = match door {
        Door::Mcp => {
            let session = target.sessions[0].clone();
            let sleep = target.sleep.clone();
            tokio::spawn(async move {
                match session.call(id, &sleep, arguments).await {
                    Ok(answer) => answer.to_string(),
                    Err(e) => e,
                }
            })
        }
        Door::Rpc => {
            let request = target
                .http
                .post(format!("{base}/rpc"))
                .bearer_auth(&token)
                .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": target.sleep, "arguments": arguments}}));
            tokio::spawn(async move {
                match request.send().await {
                    Ok(response) => response.text().await.unwrap_or_else(|e| e.to_string()),
                    Err(e) => e.to_string(),
                }
            })
        }
    };
    upstream.log.wait_started(started + 1).await;
    let sent = unix_us();
    let status = match target
        .http
        .post(format!("{base}/cancellation/cancel"))
        .bearer_auth(&token)
        .json(&json!({"requestId": id.to_string(), "reason": "bench"}))
        .send()
        .await
    {
        Ok(response) => {
            let code = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            match body["status"].as_str() {
                Some(status) => status.to_owned(),
                None => format!("{code} {body}"),
            }
        }
        Err(e) => e.to_string(),
    };
    let answered_us = unix_us().saturating_sub(sent) as f64;
    let stop = upstream.log.stop_within(stopped + 1, wait).await;
    let deleted = upstream.log.deleted_since(sent);
    let mut pending = pending;
    let answer = match tokio::time::timeout(ANSWER_WAIT, &mut pending).await {
        Ok(Ok(answer)) => answer.chars().take(200).collect(),
        _ => {
            pending.abort();
            "(no answer)".to_owned()
        }
    };
    if stop.is_none() {
        // Not stopped: let it end before the next sample, so each starts alone.
        upstream
            .log
            .stop_within(stopped + 1, Duration::from_secs_f64(seconds))
            .await;
    }
    let since = |at: u128| at.saturating_sub(sent) as f64;
    Cancel {
        status,
        answered_us,
        stopped_us: stop.map(since),
        deleted_us: deleted.filter(|&d| stop.is_none_or(|s| d <= s)).map(since),
        answer,
    }
}
