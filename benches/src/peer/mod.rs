//! `cargo xtask bench peer`: cancelkit's `Peer` against rmcp 3.9 (MCP) and the official ACP SDK
//! 5.0 (ACP), like for like: every stack sends the same bytes, its server deserializes them into
//! the same typed params and does the same work, and every scenario is run the same way for
//! every stack, rounds interleaved.
//!
//! Conditions (eight, every stack in each): an in-memory duplex in one process, or real OS pipes
//! to a child process that serves on its standard input and output; a current-thread or a
//! multi-thread runtime (`#[tokio::main]`'s default, one worker per core); a no-op request or
//! one carrying a 4 KiB prompt / tool argument.
//!
//! Measures: round trips per second; cancel → handler stopped on an idle connection and on top
//! of 10,000 running handlers (no limit on any stack); for ACP, cancel → -32800 read by the
//! client; heap bytes per in-flight request in the client's and the server's process; and the
//! floors (a channel hand-off, a pipe hand-off) measured in the same run.

mod conn;
mod floor;
mod limited;
mod report;
mod stacks;
mod transport;
mod work;

use std::sync::Arc;
use std::sync::atomic::Ordering;

pub use floor::echo as floor_echo;

use conn::Conn;
use stacks::{acp_sdk, cancelkit, rmcp};
use transport::Link;
use work::payload;

/// One of the four stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stack {
    /// cancelkit's Peer speaking MCP 2025-11-25.
    CancelkitMcp,
    /// rmcp 3.9.
    Rmcp,
    /// cancelkit's Peer speaking ACP.
    CancelkitAcp,
    /// agent-client-protocol 5.0.
    AcpSdk,
}

impl Stack {
    /// Every stack, in table order.
    pub const ALL: [Stack; 4] = [
        Stack::CancelkitMcp,
        Stack::Rmcp,
        Stack::CancelkitAcp,
        Stack::AcpSdk,
    ];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Stack::CancelkitMcp => "cancelkit MCP",
            Stack::Rmcp => "rmcp 3.9",
            Stack::CancelkitAcp => "cancelkit ACP",
            Stack::AcpSdk => "ACP SDK 5.0",
        }
    }

    /// Its name on the command line of `serve`.
    pub fn arg(self) -> &'static str {
        match self {
            Stack::CancelkitMcp => "cancelkit-mcp",
            Stack::Rmcp => "rmcp",
            Stack::CancelkitAcp => "cancelkit-acp",
            Stack::AcpSdk => "acp-sdk",
        }
    }

    /// The stack named `arg`.
    pub fn from_arg(arg: &str) -> Option<Stack> {
        Stack::ALL.into_iter().find(|s| s.arg() == arg)
    }
}

/// The runtime a run is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `new_current_thread`.
    Current,
    /// `new_multi_thread` with its default workers (one per core), as `#[tokio::main]`.
    Multi,
}

impl Flavor {
    /// Its name on the command line and in tables.
    pub fn arg(self) -> &'static str {
        match self {
            Flavor::Current => "current-thread",
            Flavor::Multi => "multi-thread",
        }
    }

    /// The flavor named `arg`.
    pub fn from_arg(arg: &str) -> Option<Flavor> {
        [Flavor::Current, Flavor::Multi]
            .into_iter()
            .find(|f| f.arg() == arg)
    }

    /// A fresh runtime of this flavor.
    pub fn runtime(self) -> tokio::runtime::Runtime {
        match self {
            Flavor::Current => tokio::runtime::Builder::new_current_thread(),
            Flavor::Multi => tokio::runtime::Builder::new_multi_thread(),
        }
        .enable_all()
        .build()
        .expect("a tokio runtime")
    }
}

/// How client and server are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// `tokio::io::duplex`, both in one process.
    Duplex,
    /// The client spawns the server; they talk over its standard input and output.
    Pipes,
}

/// One condition: every stack is measured in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Config {
    /// How client and server are connected.
    pub transport: Transport,
    /// The runtime of both.
    pub flavor: Flavor,
    /// Bytes of text in each request (0: the no-op rows).
    pub payload: usize,
}

impl Config {
    /// Every condition, in table order.
    pub fn all() -> Vec<Config> {
        let mut all = Vec::new();
        for transport in [Transport::Duplex, Transport::Pipes] {
            for flavor in [Flavor::Current, Flavor::Multi] {
                for payload in [0, 4096] {
                    all.push(Config {
                        transport,
                        flavor,
                        payload,
                    });
                }
            }
        }
        all
    }

    /// e.g. `duplex, current-thread, 4 KiB`.
    pub fn label(self) -> String {
        format!(
            "{}, {}, {}",
            match self.transport {
                Transport::Duplex => "in-memory duplex",
                Transport::Pipes => "OS pipes, 2 processes",
            },
            self.flavor.arg(),
            if self.payload == 0 {
                "no-op".to_owned()
            } else {
                format!("{} KiB", self.payload / 1024)
            }
        )
    }

    /// A file-name-safe form of [`Config::label`].
    pub fn slug(self) -> String {
        format!(
            "{}-{}-{}",
            match self.transport {
                Transport::Duplex => "duplex",
                Transport::Pipes => "pipes",
            },
            match self.flavor {
                Flavor::Current => "current",
                Flavor::Multi => "multi",
            },
            if self.payload == 0 {
                "noop".to_owned()
            } else {
                format!("{}k", self.payload / 1024)
            }
        )
    }
}

/// How much of everything: the full run, or the short one the test command runs.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Rounds; every figure is the median (min–max) of the rounds.
    pub rounds: usize,
    /// Requests per throughput measurement.
    pub throughput_requests: usize,
    /// Concurrent callers of the throughput measurement.
    pub window: usize,
    /// Cancels per idle measurement.
    pub idle_cancels: usize,
    /// Handlers running under the loaded measurement.
    pub in_flight: usize,
    /// Cancels per loaded measurement.
    pub loaded_cancels: usize,
    /// Samples per floor measurement.
    pub floor_samples: usize,
}

impl Sizes {
    /// The full run of `cargo xtask bench peer`.
    pub const FULL: Sizes = Sizes {
        rounds: 5,
        throughput_requests: 20_000,
        window: 32,
        idle_cancels: 1_000,
        in_flight: 10_000,
        loaded_cancels: 1_000,
        floor_samples: 2_000,
    };

    /// The short run (`CANCELKIT_BENCH_QUICK=1`): every code path, small counts.
    pub const QUICK: Sizes = Sizes {
        rounds: 1,
        throughput_requests: 640,
        window: 32,
        idle_cancels: 40,
        in_flight: 300,
        loaded_cancels: 40,
        floor_samples: 100,
    };

    /// QUICK if `CANCELKIT_BENCH_QUICK` is set, else FULL; `CANCELKIT_BENCH_ROUNDS=N` sets the
    /// rounds.
    pub fn from_env() -> Sizes {
        let mut sizes = if std::env::var_os("CANCELKIT_BENCH_QUICK").is_some() {
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

/// What one stack measured in one condition in one round.
#[derive(Debug, Default, Clone)]
pub struct Round {
    /// Round trips per second.
    pub throughput: f64,
    /// Bytes written per round trip by the client and by the server (in-memory duplex only).
    pub bytes: Option<(f64, f64)>,
    /// Idle cancels.
    pub idle: conn::Cancels,
    /// Cancels on top of `in_flight` running handlers.
    pub loaded: conn::Cancels,
}

/// A fresh server of `stack` and a client connected to it, in `config`'s transport.
fn link(stack: Stack, config: Config) -> Link {
    match config.transport {
        Transport::Duplex => transport::duplex(stack),
        Transport::Pipes => transport::pipes(stack, config.flavor),
    }
}

/// Which part of a round to run on a fresh connection (each in a fresh runtime).
#[derive(Debug, Clone, Copy)]
enum Part {
    Throughput,
    Idle,
    Loaded,
    Heap,
}

/// What a part measured.
enum Measured {
    Throughput(f64, Option<(f64, f64)>),
    Cancels(conn::Cancels),
    Heap(f64, f64),
}

async fn run_part<C: Conn>(
    conn: C,
    link: &mut Link,
    part: Part,
    text: &Arc<str>,
    sizes: Sizes,
) -> Measured {
    match part {
        Part::Throughput => {
            // One warm-up pass, then the measured one; bytes are counted over the measured one.
            let warm = sizes.throughput_requests / 10;
            conn::throughput(&conn, text, warm.max(sizes.window), sizes.window).await;
            let before = link
                .bytes
                .as_ref()
                .map(|(c, s)| (c.load(Ordering::Relaxed), s.load(Ordering::Relaxed)));
            let rate = conn::throughput(&conn, text, sizes.throughput_requests, sizes.window).await;
            let requests = (sizes.throughput_requests / sizes.window * sizes.window) as f64;
            let bytes = link.bytes.as_ref().zip(before).map(|((c, s), (c0, s0))| {
                (
                    (c.load(Ordering::Relaxed) - c0) as f64 / requests,
                    (s.load(Ordering::Relaxed) - s0) as f64 / requests,
                )
            });
            Measured::Throughput(rate, bytes)
        }
        Part::Idle => {
            conn::idle(&conn, &mut link.rx, 10, text).await; // warm-up
            Measured::Cancels(conn::idle(&conn, &mut link.rx, sizes.idle_cancels, text).await)
        }
        Part::Loaded => Measured::Cancels(
            conn::loaded(
                &conn,
                &mut link.rx,
                sizes.in_flight,
                sizes.loaded_cancels,
                text,
            )
            .await,
        ),
        Part::Heap => {
            let (client, server) = conn::heap(&conn, &mut link.rx, sizes.in_flight).await;
            Measured::Heap(client, server)
        }
    }
}

/// Runs `part` for `stack` in `config`, on a fresh runtime and a fresh connection.
fn part(stack: Stack, config: Config, part: Part, sizes: Sizes) -> Measured {
    config.flavor.runtime().block_on(async move {
        let text = payload(config.payload);
        let mut link = link(stack, config);
        let (read, write) = (
            std::mem::replace(&mut link.read, Box::pin(tokio::io::empty())),
            std::mem::replace(&mut link.write, Box::pin(tokio::io::sink())),
        );
        match stack {
            Stack::CancelkitMcp => {
                let conn = cancelkit::connect(false, read, write);
                run_part(conn, &mut link, part, &text, sizes).await
            }
            Stack::CancelkitAcp => {
                let conn = cancelkit::connect(true, read, write);
                run_part(conn, &mut link, part, &text, sizes).await
            }
            Stack::Rmcp => {
                let conn = rmcp::connect(read, write).await;
                run_part(conn, &mut link, part, &text, sizes).await
            }
            Stack::AcpSdk => {
                let conn = acp_sdk::connect(read, write).await;
                run_part(conn, &mut link, part, &text, sizes).await
            }
        }
    })
}

/// One round of one stack in one condition.
fn round(stack: Stack, config: Config, sizes: Sizes) -> Round {
    let mut round = Round::default();
    if let Measured::Throughput(rate, bytes) = part(stack, config, Part::Throughput, sizes) {
        round.throughput = rate;
        round.bytes = bytes;
    }
    if let Measured::Cancels(cancels) = part(stack, config, Part::Idle, sizes) {
        round.idle = cancels;
    }
    if let Measured::Cancels(cancels) = part(stack, config, Part::Loaded, sizes) {
        round.loaded = cancels;
    }
    round
}

/// Heap bytes per in-flight request (client, server) of `stack`, over pipes on a current-thread
/// runtime: each process counts its own heap.
fn heap(stack: Stack, sizes: Sizes) -> (f64, f64) {
    let config = Config {
        transport: Transport::Pipes,
        flavor: Flavor::Current,
        payload: 0,
    };
    match part(stack, config, Part::Heap, sizes) {
        Measured::Heap(client, server) => (client, server),
        _ => unreachable!("a heap part measures heap"),
    }
}

/// Everything the benchmark measured, for the tables.
pub struct Results {
    /// The sizes it ran with.
    pub sizes: Sizes,
    /// Per condition and stack, one entry per round.
    pub rounds: Vec<(Config, Stack, Vec<Round>)>,
    /// Per stack, one (client, server) per round.
    pub heap: Vec<(Stack, Vec<(f64, f64)>)>,
    /// The floors: name and samples (µs) of all rounds.
    pub floors: Floors,
    /// The cancelkit-only limited rows: (acp, samples per round).
    pub limited: Vec<(bool, Vec<Vec<f64>>)>,
}

/// The floors' samples per round (µs).
#[derive(Default)]
pub struct Floors {
    /// Channel hand-off on a current-thread runtime.
    pub channel_current: Vec<Vec<f64>>,
    /// Channel hand-off on a multi-thread runtime.
    pub channel_multi: Vec<Vec<f64>>,
    /// A line over a pipe, blocking reads.
    pub pipe_blocking: Vec<Vec<f64>>,
    /// A line over a pipe, tokio's reactor on both sides.
    pub pipe_tokio: Vec<Vec<f64>>,
}

/// Runs every measurement, rounds interleaved: in each round, every condition runs every stack
/// in turn (the order rotated from round to round), then the floors, the heap and the limited
/// rows.
pub fn measure(sizes: Sizes) -> Results {
    // `CANCELKIT_BENCH_ONLY=duplex-current` keeps the conditions whose slug contains it (the
    // report of such a run is partial: for looking into one condition, not for the README).
    let only = std::env::var("CANCELKIT_BENCH_ONLY").unwrap_or_default();
    let configs: Vec<Config> = Config::all()
        .into_iter()
        .filter(|c| c.slug().contains(&only))
        .collect();
    let mut results = Results {
        sizes,
        rounds: configs
            .iter()
            .flat_map(|c| Stack::ALL.map(|s| (*c, s, Vec::new())))
            .collect(),
        heap: Stack::ALL.map(|s| (s, Vec::new())).to_vec(),
        floors: Floors::default(),
        limited: vec![(false, Vec::new()), (true, Vec::new())],
    };
    for r in 0..sizes.rounds {
        eprintln!("peer bench: round {} of {}", r + 1, sizes.rounds);
        for config in &configs {
            eprintln!("  {}", config.label());
            for k in 0..Stack::ALL.len() {
                let stack = Stack::ALL[(k + r) % Stack::ALL.len()];
                let measured = round(stack, *config, sizes);
                let entry = results
                    .rounds
                    .iter_mut()
                    .find(|(c, s, _)| c == config && *s == stack)
                    .expect("every pair has an entry");
                entry.2.push(measured);
            }
        }
        eprintln!("  floors, heap, limited rows");
        let floors = &mut results.floors;
        floors
            .channel_current
            .push(floor::channel(Flavor::Current, sizes.floor_samples));
        floors
            .channel_multi
            .push(floor::channel(Flavor::Multi, sizes.floor_samples));
        floors
            .pipe_blocking
            .push(floor::pipe(true, sizes.floor_samples));
        floors
            .pipe_tokio
            .push(floor::pipe(false, sizes.floor_samples));
        for k in 0..Stack::ALL.len() {
            let stack = Stack::ALL[(k + r) % Stack::ALL.len()];
            let measured = heap(stack, sizes);
            let entry = results
                .heap
                .iter_mut()
                .find(|(s, _)| *s == stack)
                .expect("every stack has an entry");
            entry.1.push(measured);
        }
        for (acp, samples) in results.limited.iter_mut() {
            samples.push(limited::cancels(
                *acp,
                sizes.in_flight,
                sizes.loaded_cancels,
            ));
        }
    }
    results
}

/// `cargo xtask bench peer`.
pub fn run() {
    let sizes = Sizes::from_env();
    let results = measure(sizes);
    report::report(&results).finish();
}

/// The child's side of the pipe rows: `cancelkit-bench serve STACK FLAVOR`.
pub fn serve_main(args: &[String]) {
    let stack = args.first().and_then(|a| Stack::from_arg(a));
    let flavor = args.get(1).and_then(|a| Flavor::from_arg(a));
    match (stack, flavor) {
        (Some(stack), Some(flavor)) => transport::serve_stdio(stack, flavor),
        _ => {
            eprintln!("usage: cancelkit-bench serve STACK FLAVOR");
            std::process::exit(2);
        }
    }
}
