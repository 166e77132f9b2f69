//! `cargo xtask bench http-gateway`: the cancelkit gateway over Streamable HTTP against the
//! floor (the upstream called directly, and through a bare pass-through proxy) and against IBM
//! ContextForge, all in front of the same upstream MCP server, driven by the same Rust load
//! generator.
//!
//! - **the upstream**: rmcp 3.11's Streamable HTTP server in a child process of the bench binary
//!   (`upstream-http`, see [`upstream::command`] to swap it), tools `echo` and `sleep`;
//! - **the stacks**: direct; the bare proxy (`proxy-http`, axum + reqwest, no logic); the
//!   gateway (`target/release/cancelkit-gateway`, the upstream as its `url` upstream);
//!   ContextForge (installed by the bench into a venv under `target/bench/contextforge/`);
//! - **measured**, rounds interleaved with the stack order rotated: (a) echo round trip at one
//!   client, p50 and p99, and what each stack adds over direct; (b) throughput at 16 and 64
//!   clients; (c) CPU per call of the stack's process (and the upstream's); (d) API cancel →
//!   upstream stopped, for the gateway and ContextForge.
//!
//! `cargo xtask bench http-gateway --quick` runs it small (a couple of minutes) and writes its
//! report under `target/bench/quick/`, out of the README's way. Every child process is killed
//! when the bench ends, panics, or dies.

mod client;
mod contextforge;
mod measure;
mod process;
mod proxy;
mod stacks;
mod summary;
mod upstream;

use std::time::Duration;

pub use proxy::main as proxy_main;
pub use upstream::main as upstream_main;

use measure::{Cancel, Door, latency_round, one_cancel, throughput_round};
use stacks::{Kind, Running, Target};
use summary::{CancelSeries, Results};
use upstream::Upstream;

/// The concurrencies of the throughput rounds.
pub const CONCURRENCY: [usize; 2] = [16, 64];
/// How long the sleep of the ContextForge MCP-endpoint cancel probe is.
pub const PROBE_SLEEP_SECS: f64 = 2.0;
/// Settings given to a process beside its defaults: names and values.
type Settings = &'static [(&'static str, &'static str)];

/// ContextForge as configured in the run: its defaults (stateless Streamable HTTP: each call
/// opens its own session upstream), and with stateful sessions (an upstream session kept per
/// client session). Its label, its name in the tables, and the settings beside [`contextforge::ENV`].
const FORGE_VARIANTS: [(&str, &str, Settings); 2] = [
    ("default", "ContextForge 1.0.7 (defaults)", &[]),
    (
        "stateful",
        "ContextForge 1.0.7 (USE_STATEFUL_SESSIONS)",
        &[("USE_STATEFUL_SESSIONS", "true")],
    ),
];
/// Names another build's gateway binary to measure beside this one's, in the same rounds
/// (say, one built from the commit before a change); it is named in the tables by its path.
pub const BASELINE_ENV: &str = "CANCELKIT_BENCH_BASELINE_GATEWAY";
/// When set, ContextForge is left out of the run (a comparison of two gateway builds needs
/// neither its install nor its minutes).
pub const NO_FORGE_ENV: &str = "CANCELKIT_BENCH_NO_CONTEXTFORGE";
/// How long a cancelled tool's stop is waited for.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// How much of everything.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Rounds; every figure is the median (min–max) of the rounds.
    pub rounds: usize,
    /// Echo calls per latency round.
    pub latency_calls: usize,
    /// Seconds per throughput round.
    pub throughput_secs: f64,
    /// Cancels per round through each door of the gateway.
    pub cancels_per_round: usize,
    /// Cancels per round for a stack whose cancels take seconds (ContextForge).
    pub slow_cancels_per_round: usize,
    /// Un-measured echo calls that warm each stack first.
    pub warm_up: usize,
}

const FULL: Sizes = Sizes {
    rounds: 5,
    latency_calls: 500,
    throughput_secs: 3.0,
    cancels_per_round: 100,
    slow_cancels_per_round: 3,
    warm_up: 300,
};

const QUICK: Sizes = Sizes {
    rounds: 2,
    latency_calls: 100,
    throughput_secs: 1.0,
    cancels_per_round: 10,
    slow_cancels_per_round: 1,
    warm_up: 30,
};

/// `targets` in the order of round `round`: rotated by it.
fn rotated<T>(targets: &[T], round: usize) -> impl Iterator<Item = (usize, &T)> {
    let n = targets.len();
    (0..n).map(move |i| {
        let s = (i + round) % n;
        (s, &targets[s])
    })
}

/// The phase of the cancels measured before the load rounds.
pub const BEFORE_LOAD: &str = "before the load rounds";
/// The phase of the cancels measured after them.
pub const AFTER_LOAD: &str = "after the load rounds";

/// `sizes.rounds` rounds of API cancels through each of `doors` (a stack and its door),
/// interleaved sample by sample with the order rotated; ContextForge's, which take seconds,
/// only `slow_cancels_per_round` a round.
async fn cancel_rounds(
    doors: &[(&Target, Door)],
    upstream: &Upstream,
    sizes: Sizes,
    phase: &str,
) -> Vec<CancelSeries> {
    let mut series: Vec<CancelSeries> = doors
        .iter()
        .map(|(target, door)| CancelSeries {
            stack: target.name.clone(),
            door: *door,
            phase: phase.to_owned(),
            rounds: Vec::new(),
        })
        .collect();
    for round in 0..sizes.rounds {
        let mut samples: Vec<Vec<Cancel>> = vec![Vec::new(); doors.len()];
        for k in 0..sizes.cancels_per_round {
            for i in 0..doors.len() {
                let i = (i + k + round) % doors.len();
                let (target, door) = doors[i];
                if target.kind == Kind::ContextForge && k >= sizes.slow_cancels_per_round {
                    continue;
                }
                samples[i].push(one_cancel(target, upstream, door, 60.0, STOP_WAIT).await);
            }
        }
        for (i, s) in samples.into_iter().enumerate() {
            series[i].rounds.push(s);
        }
        println!("  cancel round {} of {} done", round + 1, sizes.rounds);
    }
    series
}

/// The 1, 5 and 15 minute load averages, `a, b, c`.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(", ")
}

async fn warm(target: &Target, calls: usize) {
    for _ in 0..calls {
        target.echo(0, 1).await;
    }
    for client in 1..target.sessions.len() {
        target.echo(client, 1).await;
    }
}

/// Runs the benchmark (`quick`: the short run).
pub fn run(quick: bool) {
    let sizes = if quick { QUICK } else { FULL };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let load_at_start = loadavg();
        let clients = *CONCURRENCY.iter().max().expect("a concurrency");
        let upstream = Upstream::start();
        println!("http-gateway bench: upstream at {}", upstream.url);
        let mut targets: Vec<Target> = Vec::new();
        let mut running: Vec<Running> = Vec::new();
        for (target, keep) in [
            stacks::direct(&upstream, clients).await,
            stacks::proxy(&upstream, clients).await,
            stacks::gateway(&upstream, clients).await,
        ] {
            targets.push(target);
            running.push(keep);
        }
        if let Some(binary) = std::env::var_os(BASELINE_ENV) {
            // Another build of the gateway, measured in the same rounds as this one.
            let binary = std::path::PathBuf::from(binary);
            let name = format!("cancelkit gateway (baseline: {})", binary.display());
            let (target, keep) = stacks::gateway_at(&binary, name, &upstream, clients).await;
            targets.push(target);
            running.push(keep);
        }
        let mut forge_missing = Vec::new();
        let forge_variants = if std::env::var_os(NO_FORGE_ENV).is_some() {
            forge_missing.push(format!("ContextForge: left out ({NO_FORGE_ENV} is set)"));
            &[][..]
        } else {
            &FORGE_VARIANTS[..]
        };
        for &(label, name, extra) in forge_variants {
            println!("starting ContextForge {} ({label})", contextforge::VERSION);
            match stacks::contextforge(&upstream, clients, (label, name), extra).await {
                Ok((target, keep)) => {
                    targets.push(target);
                    running.push(keep);
                }
                Err(e) => {
                    eprintln!("ContextForge ({label}) is left out of this run: {e}");
                    forge_missing.push(format!("{name}: {e}"));
                }
            }
        }
        for target in &targets {
            warm(target, sizes.warm_up).await;
        }

        let gateway = targets
            .iter()
            .find(|t| t.kind == Kind::Gateway)
            .expect("the gateway");
        println!("cancels through the gateway, before the load rounds");
        let mut cancels = cancel_rounds(
            &[(gateway, Door::Mcp), (gateway, Door::Rpc)],
            &upstream,
            sizes,
            BEFORE_LOAD,
        )
        .await;

        println!(
            "{} rounds: {} echo calls at 1 client, then {} s at each of {CONCURRENCY:?} clients, per stack",
            sizes.rounds, sizes.latency_calls, sizes.throughput_secs
        );
        let mut latency = vec![Vec::new(); targets.len()];
        let mut throughput = vec![vec![Vec::new(); CONCURRENCY.len()]; targets.len()];
        for round in 0..sizes.rounds {
            for (s, target) in rotated(&targets, round) {
                latency[s].push(latency_round(target, sizes.latency_calls).await);
            }
            for (c, &n) in CONCURRENCY.iter().enumerate() {
                for (s, target) in rotated(&targets, round) {
                    let measured = throughput_round(
                        target,
                        &upstream,
                        n,
                        Duration::from_secs_f64(sizes.throughput_secs),
                    )
                    .await;
                    throughput[s][c].push(measured);
                }
            }
            println!("  round {} of {} done", round + 1, sizes.rounds);
        }

        let g = targets
            .iter()
            .position(|t| t.kind == Kind::Gateway)
            .expect("the gateway");
        let before_runs = (sizes.warm_up + clients - 1) as u64;
        let after_runs = before_runs
            + (2 * sizes.cancels_per_round * sizes.rounds) as u64
            + (sizes.latency_calls * sizes.rounds) as u64
            + throughput[g].iter().flatten().map(|r| r.calls).sum::<u64>();
        println!("cancels, after the load rounds");
        let forge = targets.iter().find(|t| t.kind == Kind::ContextForge);
        let mut after = vec![(gateway, Door::Mcp), (gateway, Door::Rpc)];
        after.extend(forge.map(|f| (f, Door::Rpc)));
        cancels.extend(cancel_rounds(&after, &upstream, sizes, AFTER_LOAD).await);
        let forge_mcp_probe = match forge {
            Some(forge) => Some(
                one_cancel(
                    forge,
                    &upstream,
                    Door::Mcp,
                    PROBE_SLEEP_SECS,
                    Duration::from_secs_f64(PROBE_SLEEP_SECS + 1.0),
                )
                .await,
            ),
            None => None,
        };

        let results = Results {
            sizes,
            quick,
            stacks: targets.iter().map(|t| (t.name.clone(), t.kind)).collect(),
            latency,
            throughput,
            cancels,
            forge_mcp_probe,
            forge_missing,
            load: [load_at_start, loadavg()],
            gateway_runs: [before_runs, after_runs],
        };
        let report = summary::build(&results);
        if quick {
            report.finish_in(&crate::report::bench_dir().join("quick"));
        } else {
            report.finish();
        }
        drop(targets);
        drop(running);
        drop(upstream);
    });
}
