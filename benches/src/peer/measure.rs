//! Running the measurements: each part of a round on a fresh runtime and connection, the rounds
//! interleaved across stacks and conditions, and everything collected in [`Results`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::conn::{self, Conn};
use super::stacks::{acp_sdk, cancelkit, rmcp};
use super::transport::{self, Link};
use super::work::payload;
use super::{Config, Flavor, Sizes, Stack, Transport, floor, limited};

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
        for (acp, samples) in &mut results.limited {
            samples.push(limited::cancels(
                *acp,
                sizes.in_flight,
                sizes.loaded_cancels,
            ));
        }
    }
    results
}
