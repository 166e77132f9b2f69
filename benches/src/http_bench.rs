//! `cargo xtask bench http`: cancelkit's Streamable HTTP server (`McpHttpServer`) against rmcp
//! 3.11's (`StreamableHttpService`), like for like.
//!
//! Each server runs alone in a child process of the bench binary (`serve-http`, see
//! [`server`]), on a multi-thread tokio runtime with as many workers as the machine has cores,
//! with the same two tools on the same typed params. The load generator (this process, a
//! runtime of the same size; see [`client`]) is the same code for both and sends the same
//! request bytes:
//!
//! 1. round trips per second of `tools/call echo` at 1, 16 and 64 concurrent clients, each a
//!    keep-alive HTTP/1.1 client with a 2025-11-25 session of its own, one call at a time,
//!    after a warm-up of a tenth;
//! 2. cancel → handler stopped in a session: `sleep` is started, and once its handler runs (it
//!    says so on stderr), `notifications/cancelled` is POSTed; the latency runs from just before
//!    that POST to the wall-clock time the handler wrote when it was stopped;
//! 3. the same at 2026-07-28 (no session; the request stamped in `params._meta`), where the
//!    cancel is the client closing the request's connection.
//!
//! Rounds: each starts fresh servers of both stacks; every measurement then runs each stack in
//! turn (cancels alternate sample by sample), the order rotated from round to round. Figures
//! are the median (min–max) of the rounds; ratios are taken on the medians. Prints the tables
//! and saves `target/bench/http.json` and the cancel-latency plots.
//!
//! `--quick` (or `CANCELKIT_BENCH_QUICK=1`) runs a short version, to check that everything
//! works, not for figures; `CANCELKIT_BENCH_ROUNDS=N` sets the rounds.

mod child;
mod client;
mod server;
mod summary;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use server::main as serve_main;

use child::Server;

/// The concurrent clients of the throughput rows.
pub const CLIENTS: [usize; 3] = [1, 16, 64];

/// One of the two servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stack {
    /// cancelkit's `McpHttpServer`.
    Cancelkit,
    /// rmcp 3.11's `StreamableHttpService`.
    Rmcp,
}

impl Stack {
    /// Both, in table order.
    pub const ALL: [Stack; 2] = [Stack::Cancelkit, Stack::Rmcp];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Cancelkit => "cancelkit",
            Stack::Rmcp => "rmcp 3.11",
        }
    }

    /// Its name on the command line of `serve-http`.
    pub fn arg(self) -> &'static str {
        match self {
            Stack::Cancelkit => "cancelkit",
            Stack::Rmcp => "rmcp",
        }
    }

    /// The stack named `arg`.
    pub fn from_arg(arg: &str) -> Option<Stack> {
        Stack::ALL.into_iter().find(|s| s.arg() == arg)
    }
}

/// How much of everything.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Sizes {
    /// Rounds; every figure is the median (min–max) of the rounds.
    pub rounds: usize,
    /// Echo calls per throughput measurement (split evenly among the clients).
    pub calls: usize,
    /// Cancels of each kind per stack per round.
    pub cancels: usize,
}

impl Sizes {
    /// The full run.
    pub const FULL: Sizes = Sizes {
        rounds: 5,
        calls: 20_000,
        cancels: 300,
    };

    /// The short run (`CANCELKIT_BENCH_QUICK`): every code path, small counts.
    pub const QUICK: Sizes = Sizes {
        rounds: 2,
        calls: 1_280,
        cancels: 20,
    };

    /// QUICK if `quick` (`--quick`) or `CANCELKIT_BENCH_QUICK` is set, else FULL;
    /// `CANCELKIT_BENCH_ROUNDS=N` sets the rounds.
    pub fn from_env(quick: bool) -> Sizes {
        let mut sizes = if quick || std::env::var_os("CANCELKIT_BENCH_QUICK").is_some() {
            Sizes::QUICK
        } else {
            Sizes::FULL
        };
        if let Some(rounds) = std::env::var("CANCELKIT_BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .filter(|r| *r > 0)
        {
            sizes.rounds = rounds;
        }
        sizes
    }
}

/// What one stack measured in one round.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Round {
    /// Round trips per second, one per entry of [`CLIENTS`].
    pub throughput: Vec<f64>,
    /// Session cancel → handler stopped (µs).
    pub session_cancels: Vec<f64>,
    /// Session cancels whose handler did not stop within 2 s (not in `session_cancels`).
    pub session_lost: usize,
    /// How many of the session cancels' request streams ended by themselves within 50 ms.
    pub streams_ended: usize,
    /// How many of those streams carried a response to the cancelled request.
    pub streams_answered: usize,
    /// 2026-07-28 closed stream → handler stopped (µs).
    pub closed_stream_cancels: Vec<f64>,
    /// Closed-stream cancels whose handler did not stop within 2 s.
    pub closed_stream_lost: usize,
}

/// Everything the benchmark measured.
pub struct Results {
    /// The sizes it ran with.
    pub sizes: Sizes,
    /// Runtime workers of each server and of the load generator.
    pub workers: usize,
    /// Per stack, one entry per round.
    pub rounds: Vec<(Stack, Vec<Round>)>,
    /// Per stack, what one checked echo answer was.
    pub answers: Vec<(Stack, client::Answer)>,
}

impl Results {
    /// `stack`'s rounds.
    pub fn of(&self, stack: Stack) -> &[Round] {
        &self
            .rounds
            .iter()
            .find(|(s, _)| *s == stack)
            .expect("both stacks were measured")
            .1
    }
}

/// The wall clock (`CLOCK_REALTIME`), ns since the epoch: one clock for the bench and its
/// children.
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Un-measured cancels of each kind before a round's samples.
const WARM_CANCELS: usize = 3;

async fn measure(sizes: Sizes, workers: usize) -> Results {
    let mut results = Results {
        sizes,
        workers,
        rounds: Stack::ALL.map(|s| (s, Vec::new())).to_vec(),
        answers: Vec::new(),
    };
    let max_clients = CLIENTS.iter().copied().max().unwrap_or(1);
    let mut stateless_id = 0u64;
    // Every sleep gets its own `ms`, so the server's lines name the sleep they are about.
    let mut next_ms = client::SLEEP_MS;
    let mut ms = || {
        next_ms += 1;
        next_ms
    };
    for r in 0..sizes.rounds {
        eprintln!("http bench: round {} of {}", r + 1, sizes.rounds);
        // This round's order; a fresh server of each stack, each alone in its process.
        let order: Vec<Stack> = (0..Stack::ALL.len())
            .map(|k| Stack::ALL[(k + r) % Stack::ALL.len()])
            .collect();
        let mut servers: Vec<Server> = order.iter().map(|s| Server::start(*s, workers)).collect();
        let mut sessions = Vec::new();
        for server in &servers {
            let opened = client::sessions(server, max_clients).await;
            if r == 0 {
                let answer = opened[0]
                    .echo_checked()
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e}", server.stack.name()));
                results.answers.push((server.stack, answer));
            }
            sessions.push(opened);
        }
        let mut rounds: Vec<Round> = order.iter().map(|_| Round::default()).collect();

        for clients in CLIENTS {
            eprintln!("  {clients} client(s)");
            for (k, opened) in sessions.iter().enumerate() {
                let opened = &opened[..clients];
                client::throughput(opened, (sizes.calls / 10).max(clients)).await;
                let rate = client::throughput(opened, sizes.calls).await;
                rounds[k].throughput.push(rate);
            }
        }

        eprintln!("  session cancels");
        for sample in 0..WARM_CANCELS + sizes.cancels {
            for (k, server) in servers.iter_mut().enumerate() {
                let cancel = sessions[k][0].cancel(server, ms()).await;
                if sample >= WARM_CANCELS {
                    let round = &mut rounds[k];
                    match cancel.latency {
                        Some(latency) => round.session_cancels.push(latency),
                        None => round.session_lost += 1,
                    }
                    round.streams_ended += usize::from(cancel.ended);
                    round.streams_answered += usize::from(cancel.answered);
                }
            }
        }

        eprintln!("  2026-07-28 closed-stream cancels");
        for sample in 0..WARM_CANCELS + sizes.cancels {
            for (k, server) in servers.iter_mut().enumerate() {
                stateless_id += 1;
                let latency = client::closed_stream_cancel(server, stateless_id, ms()).await;
                if sample >= WARM_CANCELS {
                    match latency {
                        Some(latency) => rounds[k].closed_stream_cancels.push(latency),
                        None => rounds[k].closed_stream_lost += 1,
                    }
                }
            }
        }

        drop(sessions);
        // Let each server see its clients go before it is killed.
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(servers);
        for (stack, round) in order.into_iter().zip(rounds) {
            let entry = results
                .rounds
                .iter_mut()
                .find(|(s, _)| *s == stack)
                .expect("every stack has an entry");
            entry.1.push(round);
        }
    }
    results
}

/// `cargo xtask bench http` (`quick`: `--quick`, the short run).
pub fn run(quick: bool) {
    let sizes = Sizes::from_env(quick);
    let workers = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    // The servers are started from this thread (the one block_on drives), which outlives them.
    let results = runtime.block_on(measure(sizes, workers));
    summary::report(&results).finish();
}
