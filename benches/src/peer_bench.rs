//! `cargo xtask bench peer`: cancelkit's `Peer` against rmcp and the official ACP SDK, each
//! stack talking to itself over an in-memory duplex, in one process:
//!
//! 1. round-trip throughput with a no-op handler;
//! 2. cancel latency: from the moment the client cancels to the moment the server's handler
//!    stops (and, for ACP, until the client has read the -32800 answer), p50 and p99;
//! 3. the same with 10,000 requests in flight (cancelkit with its concurrency limit full);
//! 4. heap bytes per in-flight request (client and server together).
//!
//! rmcp and the ACP SDK never stop a handler themselves: their handlers must watch a token. For
//! them "handler stopped" is the moment a handler awaiting that token observes it; cancelkit's
//! handler is dropped at its `.await`.

use std::future::Future;

use std::task::Poll;
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, InitializeRequest, InitializeResponse, PromptRequest, PromptResponse,
    StopReason,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use cancelkit::peer::{Context, McpRevision, OutgoingRequest, Peer, Protocol, Router};
use cancelkit::{JsonRpcError, cancellable};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::alloc;
use crate::report::{Row, print_table, save_json};

const THROUGHPUT_REQUESTS: usize = 20_000;
const WINDOW: usize = 32;
const IDLE_CANCELS: usize = 1_000;
const LOADED_CANCELS: usize = 1_000;
const IN_FLIGHT: usize = 10_000;
const LIMIT: usize = 64;

/// Signals from server handlers: a parked handler started (with its label), or stopped.
#[derive(Clone)]
struct Signals {
    started: mpsc::UnboundedSender<u64>,
    stopped: mpsc::UnboundedSender<Instant>,
}

struct Receivers {
    started: mpsc::UnboundedReceiver<u64>,
    stopped: mpsc::UnboundedReceiver<Instant>,
}

fn new_signals() -> (Signals, Receivers) {
    let (started, started_rx) = mpsc::unbounded_channel();
    let (stopped, stopped_rx) = mpsc::unbounded_channel();
    (
        Signals { started, stopped },
        Receivers {
            started: started_rx,
            stopped: stopped_rx,
        },
    )
}

/// Records the moment it is dropped: when a parked handler stops.
struct StopClock(mpsc::UnboundedSender<Instant>);

impl Drop for StopClock {
    fn drop(&mut self) {
        let _ = self.0.send(Instant::now());
    }
}

/// Drives a lazily sent request until its handler reports that it started.
async fn send_until_started<F: Future + Unpin>(
    call: &mut F,
    started: &mut mpsc::UnboundedReceiver<u64>,
) {
    tokio::select! {
        biased;
        label = started.recv() => { label.expect("the handler starts"); }
        _ = &mut *call => panic!("a parked request completed"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// p50 and p99 in microseconds.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    (at(0.50), at(0.99))
}

/// What one stack measured.
#[derive(Default, Clone)]
struct Measured {
    throughput: f64,
    idle_stop: (f64, f64),
    idle_answer: Option<(f64, f64)>,
    loaded_stop: (f64, f64),
    bytes_per_in_flight: f64,
}

// ---------------------------------------------------------------------------------------------
// cancelkit

#[derive(serde::Deserialize)]
struct Label {
    label: u64,
}

#[cancellable]
async fn parked(label: Label, signals: Signals) -> Result<Value, JsonRpcError> {
    let _clock = StopClock(signals.stopped.clone());
    let _ = signals.started.send(label.label);
    std::future::pending::<()>().await;
    Ok(Value::Null)
}

fn cancelkit_router(method: &'static str, signals: Signals) -> Router {
    let noop_result = match method {
        "tools/call" => json!({"content": []}),
        _ => json!({"stopReason": "end_turn"}),
    };
    Router::new()
        .request(method, move |_: Value, _cx: Context| {
            let result = noop_result.clone();
            async move { Ok::<_, JsonRpcError>(result) }
        })
        .request("park", move |label: Label, _cx: Context| {
            parked(label, signals.clone())
        })
}

fn cancelkit_pair(
    protocol: Protocol,
    method: &'static str,
    signals: Signals,
    limit: Option<usize>,
) -> (Peer, Peer) {
    let (a, b) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(a);
    // The loaded rows keep 10,000 requests in flight, beyond the default bound of 4,096 (which
    // would refuse the rest with -32050); rmcp and the ACP SDK have no such bound.
    let mut server = Peer::builder(protocol)
        .router(cancelkit_router(method, signals))
        .max_in_flight(2 * IN_FLIGHT);
    if let Some(limit) = limit {
        server = server.max_concurrency(limit);
    }
    let server = server.connect(read, write);
    let (read, write) = tokio::io::split(b);
    let client = Peer::builder(protocol).connect(read, write);
    (server, client)
}

fn measure_cancelkit(protocol: Protocol) -> Measured {
    let method = match protocol {
        Protocol::Mcp(_) => "tools/call",
        _ => "session/prompt",
    };
    let acp = protocol == Protocol::Acp;
    runtime().block_on(async move {
        let mut measured = Measured::default();

        // 1. Throughput.
        eprintln!("  {protocol:?}: throughput");
        let (signals, _rx) = new_signals();
        let (_server, client) = cancelkit_pair(protocol, method, signals, None);
        let handle = client.handle();
        let start = Instant::now();
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..WINDOW {
            let handle = handle.clone();
            workers.spawn(async move {
                for _ in 0..THROUGHPUT_REQUESTS / WINDOW {
                    let _: Value = handle
                        .request(method, json!({}))
                        .await
                        .expect("no-op answers");
                }
            });
        }
        workers.join_all().await;
        measured.throughput =
            (THROUGHPUT_REQUESTS / WINDOW * WINDOW) as f64 / start.elapsed().as_secs_f64();

        // 2. Idle cancel latency.
        eprintln!("  {protocol:?}: idle cancels");
        let (signals, mut rx) = new_signals();
        let (_server, client) = cancelkit_pair(protocol, method, signals, None);
        let handle = client.handle();
        let (mut stops, mut answers) = (Vec::new(), Vec::new());
        for i in 0..IDLE_CANCELS as u64 {
            let mut request: OutgoingRequest<Value> = handle.request("park", json!({"label": i}));
            rx.started.recv().await.expect("the handler starts");
            let t0 = Instant::now();
            if acp {
                request.cancel();
                let answer = request.await;
                answers.push(t0.elapsed());
                assert!(
                    answer.is_err(),
                    "a cancelled request is answered with -32800"
                );
            } else {
                drop(request);
            }
            let stopped = rx.stopped.recv().await.expect("the handler stops");
            stops.push(stopped - t0);
        }
        measured.idle_stop = percentiles(stops);
        measured.idle_answer = acp.then(|| percentiles(answers));

        // 3. Loaded cancel latency: IN_FLIGHT parked requests, LIMIT of them running.
        eprintln!("  {protocol:?}: loaded cancels");
        let (signals, mut rx) = new_signals();
        let (server, client) = cancelkit_pair(protocol, method, signals, Some(LIMIT));
        let handle = client.handle();
        let mut in_flight: Vec<Option<OutgoingRequest<Value>>> = (0..IN_FLIGHT as u64)
            .map(|i| Some(handle.request("park", json!({"label": i}))))
            .collect();
        let mut running = Vec::new();
        while running.len() < LIMIT {
            running.push(rx.started.recv().await.unwrap());
        }
        // Every request read and queued: a cancel now has to find its way past all of them.
        let server_handle = server.handle();
        while server_handle.in_flight() < IN_FLIGHT {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Steady state: let the runtime give every queued request its first poll, so the
        // measurement is of cancels under load, not of the burst that created the load.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut stops = Vec::new();
        for _ in 0..LOADED_CANCELS {
            let label = running.remove(0);
            let t0 = Instant::now();
            in_flight[label as usize] = None;
            let stopped = rx.stopped.recv().await.expect("the handler stops");
            stops.push(stopped - t0);
            running.push(
                rx.started
                    .recv()
                    .await
                    .expect("a queued request takes the slot"),
            );
        }
        measured.loaded_stop = percentiles(stops);
        drop(in_flight);

        // 4. Heap bytes per in-flight request (no limit: every handler running).
        eprintln!("  {protocol:?}: heap per request");
        let (signals, mut rx) = new_signals();
        let (_server, client) = cancelkit_pair(protocol, method, signals, None);
        let handle = client.handle();
        let _: Value = handle.request(method, json!({})).await.unwrap(); // warm
        let before = alloc::live_bytes();
        let requests: Vec<OutgoingRequest<Value>> = (0..IN_FLIGHT as u64)
            .map(|i| handle.request("park", json!({"label": i})))
            .collect();
        for k in 0..IN_FLIGHT {
            if tokio::time::timeout(Duration::from_secs(5), rx.started.recv())
                .await
                .is_err()
            {
                panic!(
                    "only {k} of {IN_FLIGHT} handlers started; server in flight {}",
                    _server.handle().in_flight()
                );
            }
        }
        measured.bytes_per_in_flight = (alloc::live_bytes() - before) as f64 / IN_FLIGHT as f64;
        drop(requests);
        measured
    })
}

// ---------------------------------------------------------------------------------------------
// rmcp

#[derive(Clone)]
struct RmcpServer {
    signals: Signals,
}

impl rmcp::ServerHandler for RmcpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "noop" {
            return Ok(CallToolResult::success(vec![]).into());
        }
        let label = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("label"))
            .and_then(Value::as_u64)
            .unwrap_or_default();
        let _ = self.signals.started.send(label);
        // rmcp does not stop a handler: it cancels `ct`, which the handler must watch.
        context.ct.cancelled().await;
        let _ = self.signals.stopped.send(Instant::now());
        Err(ErrorData::internal_error("cancelled", None))
    }
}

async fn rmcp_pair(signals: Signals) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let (a, b) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(a);
    tokio::spawn(async move {
        if let Ok(running) = (RmcpServer { signals }).serve((read, write)).await {
            let _ = running.waiting().await;
        }
    });
    let (read, write) = tokio::io::split(b);
    ().serve((read, write))
        .await
        .expect("rmcp client initializes")
}

fn park_params(label: u64) -> CallToolRequestParams {
    CallToolRequestParams::new("park").with_arguments(
        json!({"label": label})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

fn measure_rmcp() -> Measured {
    runtime().block_on(async {
        let mut measured = Measured::default();
        eprintln!("  rmcp: throughput, idle cancels, loaded cancels, heap per request");

        let (signals, _rx) = new_signals();
        let client = rmcp_pair(signals).await;
        let start = Instant::now();
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..WINDOW {
            let peer = client.peer().clone();
            workers.spawn(async move {
                for _ in 0..THROUGHPUT_REQUESTS / WINDOW {
                    peer.call_tool(CallToolRequestParams::new("noop"))
                        .await
                        .expect("no-op answers");
                }
            });
        }
        workers.join_all().await;
        measured.throughput =
            (THROUGHPUT_REQUESTS / WINDOW * WINDOW) as f64 / start.elapsed().as_secs_f64();

        let (signals, mut rx) = new_signals();
        let client = rmcp_pair(signals).await;
        let mut stops = Vec::new();
        for i in 0..IDLE_CANCELS as u64 {
            let peer = client.peer().clone();
            let mut call = Box::pin(async move { peer.call_tool(park_params(i)).await });
            send_until_started(&mut call, &mut rx.started).await;
            let t0 = Instant::now();
            drop(call); // rmcp's call_tool sends notifications/cancelled when dropped
            let stopped = rx.stopped.recv().await.expect("the handler observes ct");
            stops.push(stopped - t0);
        }
        measured.idle_stop = percentiles(stops);

        let (signals, mut rx) = new_signals();
        let client = rmcp_pair(signals).await;
        let mut background = Vec::new();
        for i in 0..IN_FLIGHT as u64 {
            let peer = client.peer().clone();
            background.push(tokio::spawn(
                async move { peer.call_tool(park_params(i)).await },
            ));
        }
        for _ in 0..IN_FLIGHT {
            rx.started.recv().await.unwrap();
        }
        let mut stops = Vec::new();
        for i in 0..LOADED_CANCELS as u64 {
            let peer = client.peer().clone();
            let mut call =
                Box::pin(async move { peer.call_tool(park_params(1_000_000 + i)).await });
            send_until_started(&mut call, &mut rx.started).await;
            let t0 = Instant::now();
            drop(call);
            let stopped = rx.stopped.recv().await.expect("the handler observes ct");
            stops.push(stopped - t0);
        }
        measured.loaded_stop = percentiles(stops);
        for task in &background {
            task.abort();
        }
        drop(background);

        let (signals, mut rx) = new_signals();
        let client = rmcp_pair(signals).await;
        client
            .peer()
            .call_tool(CallToolRequestParams::new("noop"))
            .await
            .unwrap();
        let before = alloc::live_bytes();
        let mut calls: Vec<_> = (0..IN_FLIGHT as u64)
            .map(|i| {
                let peer = client.peer().clone();
                Box::pin(async move { peer.call_tool(park_params(i)).await })
            })
            .collect();
        // Poll every call (as an application holding the futures would) until all have started.
        let mut started = 0;
        std::future::poll_fn(|cx| {
            for call in calls.iter_mut() {
                let _ = call.as_mut().poll(cx);
            }
            while let Poll::Ready(Some(_)) = rx.started.poll_recv(cx) {
                started += 1;
            }
            if started == IN_FLIGHT {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        measured.bytes_per_in_flight = (alloc::live_bytes() - before) as f64 / IN_FLIGHT as f64;
        drop(calls);
        measured
    })
}

// ---------------------------------------------------------------------------------------------
// The official ACP SDK

type Half<T> = Compat<T>;
type AcpTransport = ByteStreams<
    Half<tokio::io::WriteHalf<tokio::io::DuplexStream>>,
    Half<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
>;

fn acp_transport(io: tokio::io::DuplexStream) -> AcpTransport {
    let (read, write) = tokio::io::split(io);
    ByteStreams::new(write.compat_write(), read.compat())
}

fn prompt_text(prompt: &PromptRequest) -> String {
    serde_json::to_value(&prompt.prompt)
        .ok()
        .and_then(|v| v[0]["text"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

async fn serve_acp_sdk_agent(io: tokio::io::DuplexStream, signals: Signals) {
    let _ = Agent
        .v1()
        .on_receive_request(
            async move |initialize: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(initialize.protocol_version)
                        .agent_capabilities(AgentCapabilities::new()),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |prompt: PromptRequest,
                        responder: agent_client_protocol::v1::Responder<PromptResponse>,
                        cx: agent_client_protocol::v1::ConnectionTo<Client>| {
                let text = prompt_text(&prompt);
                if text == "noop" {
                    return responder.respond(PromptResponse::new(StopReason::EndTurn));
                }
                let label: u64 = text.parse().unwrap_or_default();
                let signals = signals.clone();
                let cancellation = responder.cancellation();
                // The SDK does not stop a handler: it fires a cancellation the handler watches.
                cx.spawn(async move {
                    let _ = signals.started.send(label);
                    cancellation.cancelled().await;
                    let _ = signals.stopped.send(Instant::now());
                    responder.respond_with_error(agent_client_protocol::Error::request_cancelled())
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(acp_transport(io))
        .await;
}

fn prompt(text: String) -> PromptRequest {
    PromptRequest::new("s", vec![text.into()])
}

fn measure_acp_sdk() -> Measured {
    eprintln!("  ACP SDK: throughput, idle cancels, loaded cancels, heap per request");
    runtime().block_on(async {
        let (signals, mut rx) = new_signals();
        let (a, b) = tokio::io::duplex(1 << 20);
        tokio::spawn(serve_acp_sdk_agent(b, signals));
        Client
            .v1()
            .connect_with(acp_transport(a), async |cx| {
                let mut measured = Measured::default();
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;

                let start = Instant::now();
                let mut workers = tokio::task::JoinSet::new();
                for _ in 0..WINDOW {
                    let cx = cx.clone();
                    workers.spawn(async move {
                        for _ in 0..THROUGHPUT_REQUESTS / WINDOW {
                            cx.send_request(prompt("noop".into()))
                                .block_task()
                                .await
                                .expect("no-op answers");
                        }
                    });
                }
                workers.join_all().await;
                measured.throughput =
                    (THROUGHPUT_REQUESTS / WINDOW * WINDOW) as f64 / start.elapsed().as_secs_f64();

                let (mut stops, mut answers) = (Vec::new(), Vec::new());
                for i in 0..IDLE_CANCELS as u64 {
                    let request = cx.send_request(prompt(i.to_string()));
                    rx.started.recv().await.expect("the handler starts");
                    let t0 = Instant::now();
                    request.cancel()?;
                    let answer = request.block_task().await;
                    answers.push(t0.elapsed());
                    assert!(answer.is_err(), "-32800");
                    let stopped = rx.stopped.recv().await.expect("the handler observes it");
                    stops.push(stopped - t0);
                }
                measured.idle_stop = percentiles(stops);
                measured.idle_answer = Some(percentiles(answers));

                let mut background = Vec::new();
                for i in 0..IN_FLIGHT as u64 {
                    background.push(cx.send_request(prompt((1_000_000 + i).to_string())));
                }
                for _ in 0..IN_FLIGHT {
                    rx.started.recv().await.unwrap();
                }
                let mut stops = Vec::new();
                for i in 0..LOADED_CANCELS as u64 {
                    let request = cx.send_request(prompt((2_000_000 + i).to_string()));
                    rx.started.recv().await.unwrap();
                    let t0 = Instant::now();
                    request.cancel()?;
                    let stopped = rx.stopped.recv().await.expect("the handler observes it");
                    stops.push(stopped - t0);
                    let _ = request.block_task().await;
                }
                measured.loaded_stop = percentiles(stops);
                for request in background {
                    request.cancel()?;
                    let _ = request.block_task().await;
                }
                while rx.stopped.try_recv().is_ok() {}

                let before = alloc::live_bytes();
                let mut held = Vec::new();
                for i in 0..IN_FLIGHT as u64 {
                    held.push(cx.send_request(prompt((3_000_000 + i).to_string())));
                }
                for _ in 0..IN_FLIGHT {
                    rx.started.recv().await.unwrap();
                }
                measured.bytes_per_in_flight =
                    (alloc::live_bytes() - before) as f64 / IN_FLIGHT as f64;
                for request in held {
                    request.detach();
                }
                Ok(measured)
            })
            .await
            .expect("the ACP SDK benchmark runs")
    })
}

// ---------------------------------------------------------------------------------------------

fn us((p50, p99): (f64, f64)) -> String {
    format!("{p50:.1} / {p99:.1}")
}

pub fn run() {
    println!(
        "Peer benchmark: in-memory duplex, current-thread runtime; throughput = {THROUGHPUT_REQUESTS} no-op \
         requests, {WINDOW} in flight; latencies in microseconds (p50 / p99) over {IDLE_CANCELS} idle and \
         {LOADED_CANCELS} loaded cancels; load = {IN_FLIGHT} requests in flight (cancelkit: concurrency \
         limit {LIMIT}, full)."
    );
    let ours_mcp = measure_cancelkit(Protocol::Mcp(McpRevision::V2025_11_25));
    let rmcp = measure_rmcp();
    let ours_acp = measure_cancelkit(Protocol::Acp);
    let acp_sdk = measure_acp_sdk();

    let rows = vec![
        Row {
            name: "1. round trips per second (higher is better)".into(),
            cells: vec![
                format!("{:.0}", ours_mcp.throughput),
                format!("{:.0}", rmcp.throughput),
                format!("{:.2}x", ours_mcp.throughput / rmcp.throughput),
                format!("{:.0}", ours_acp.throughput),
                format!("{:.0}", acp_sdk.throughput),
                format!("{:.2}x", ours_acp.throughput / acp_sdk.throughput),
            ],
        },
        Row {
            name: "2. cancel -> handler stopped, idle".into(),
            cells: vec![
                us(ours_mcp.idle_stop),
                format!("{} (ct observed)", us(rmcp.idle_stop)),
                format!("{:.2}x p99", ours_mcp.idle_stop.1 / rmcp.idle_stop.1),
                us(ours_acp.idle_stop),
                format!("{} (cancellation observed)", us(acp_sdk.idle_stop)),
                format!("{:.2}x p99", ours_acp.idle_stop.1 / acp_sdk.idle_stop.1),
            ],
        },
        Row {
            name: "2b. cancel -> -32800 read by the client (ACP)".into(),
            cells: vec![
                "no response (MCP)".into(),
                "no response (MCP)".into(),
                "-".into(),
                us(ours_acp.idle_answer.unwrap_or_default()),
                us(acp_sdk.idle_answer.unwrap_or_default()),
                format!(
                    "{:.2}x p99",
                    ours_acp.idle_answer.unwrap_or_default().1
                        / acp_sdk.idle_answer.unwrap_or_default().1
                ),
            ],
        },
        Row {
            name: format!("3. cancel -> handler stopped, {IN_FLIGHT} in flight"),
            cells: vec![
                us(ours_mcp.loaded_stop),
                format!("{} (no limit)", us(rmcp.loaded_stop)),
                format!("{:.2}x p99", ours_mcp.loaded_stop.1 / rmcp.loaded_stop.1),
                us(ours_acp.loaded_stop),
                format!("{} (no limit)", us(acp_sdk.loaded_stop)),
                format!("{:.2}x p99", ours_acp.loaded_stop.1 / acp_sdk.loaded_stop.1),
            ],
        },
        Row {
            name: "4. heap bytes per in-flight request".into(),
            cells: vec![
                format!("{:.0}", ours_mcp.bytes_per_in_flight),
                format!("{:.0}", rmcp.bytes_per_in_flight),
                format!(
                    "{:.2}x",
                    ours_mcp.bytes_per_in_flight / rmcp.bytes_per_in_flight
                ),
                format!("{:.0}", ours_acp.bytes_per_in_flight),
                format!("{:.0}", acp_sdk.bytes_per_in_flight),
                format!(
                    "{:.2}x",
                    ours_acp.bytes_per_in_flight / acp_sdk.bytes_per_in_flight
                ),
            ],
        },
    ];
    print_table(
        "",
        &[
            "measure",
            "cancelkit MCP",
            "rmcp 3.9",
            "cancelkit / rmcp",
            "cancelkit ACP",
            "ACP SDK 5.0",
            "cancelkit / ACP SDK",
        ],
        &rows,
    );

    let best_peer_p99 = rmcp.idle_stop.1.min(acp_sdk.idle_stop.1);
    let ours_p99 = ours_mcp.idle_stop.1.max(ours_acp.idle_stop.1);
    let loaded_p99 = ours_mcp.loaded_stop.1.max(ours_acp.loaded_stop.1);
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!();
    println!(
        "target 1, throughput >= 1.0x rmcp: {:.2}x, {}",
        ours_mcp.throughput / rmcp.throughput,
        verdict(ours_mcp.throughput >= rmcp.throughput)
    );
    println!(
        "target 2, cancel p99 <= 0.5x the better peer ({best_peer_p99:.1} us): {ours_p99:.1} us = {:.2}x, {}",
        ours_p99 / best_peer_p99,
        verdict(ours_p99 <= 0.5 * best_peer_p99)
    );
    println!(
        "target 3, loaded p99 within 2x of idle p99: {loaded_p99:.1} us vs {ours_p99:.1} us = {:.2}x, {}",
        loaded_p99 / ours_p99,
        verdict(loaded_p99 <= 2.0 * ours_p99)
    );
    println!(
        "target 4, heap per in-flight request <= 0.5x rmcp: {:.2}x, {}",
        ours_mcp.bytes_per_in_flight / rmcp.bytes_per_in_flight,
        verdict(ours_mcp.bytes_per_in_flight <= 0.5 * rmcp.bytes_per_in_flight)
    );

    let json = |name: &str, m: &Measured| {
        json!({
            "stack": name,
            "round_trips_per_second": m.throughput,
            "idle_cancel_to_handler_stop_us": {"p50": m.idle_stop.0, "p99": m.idle_stop.1},
            "idle_cancel_to_client_answer_us": m.idle_answer.map(|(p50, p99)| json!({"p50": p50, "p99": p99})),
            "loaded_cancel_to_handler_stop_us": {"p50": m.loaded_stop.0, "p99": m.loaded_stop.1},
            "heap_bytes_per_in_flight_request": m.bytes_per_in_flight,
        })
    };
    save_json(
        "peer",
        &json!([
            json("cancelkit MCP", &ours_mcp),
            json("rmcp", &rmcp),
            json("cancelkit ACP", &ours_acp),
            json("agent-client-protocol", &acp_sdk),
        ]),
    );
}
