//! The peer benchmark's tables, targets and plots, from what [`measure`](super::measure) found.

use serde_json::{Value, json};

use crate::report::{Cdf, Report, Spread, Table, number};

use super::{Config, Flavor, Results, Round, Stack, Transport};

/// The `q` quantile (0..=1) of `samples`, nearest rank.
pub fn quantile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i]
}

/// The spread over rounds of one quantile of each round's samples.
fn spread_of(rounds: &[Vec<f64>], q: f64) -> Spread {
    let per_round: Vec<f64> = rounds.iter().map(|s| quantile(s, q)).collect();
    Spread::of(&per_round)
}

fn rounds_of(results: &Results, config: Config, stack: Stack) -> &[Round] {
    &results
        .rounds
        .iter()
        .find(|(c, s, _)| *c == config && *s == stack)
        .expect("every pair was measured")
        .2
}

fn throughput(results: &Results, config: Config, stack: Stack) -> Spread {
    let rates: Vec<f64> = rounds_of(results, config, stack)
        .iter()
        .map(|r| r.throughput)
        .collect();
    Spread::of(&rates)
}

#[derive(Clone, Copy, PartialEq)]
enum Load {
    Idle,
    Loaded,
}

#[derive(Clone, Copy, PartialEq)]
enum Measure {
    Stopped,
    Answered,
}

fn samples(
    results: &Results,
    config: Config,
    stack: Stack,
    load: Load,
    m: Measure,
) -> Vec<Vec<f64>> {
    rounds_of(results, config, stack)
        .iter()
        .map(|r| {
            let cancels = if load == Load::Idle {
                &r.idle
            } else {
                &r.loaded
            };
            if m == Measure::Stopped {
                cancels.stopped.clone()
            } else {
                cancels.answered.clone()
            }
        })
        .collect()
}

fn floor_rounds(results: &Results, config: Config) -> &[Vec<f64>] {
    match (config.transport, config.flavor) {
        (Transport::Duplex, Flavor::Current) => &results.floors.channel_current,
        (Transport::Duplex, Flavor::Multi) => &results.floors.channel_multi,
        (Transport::Pipes, _) => &results.floors.pipe_tokio,
    }
}

fn us(spread: Spread) -> String {
    spread.show(1)
}

fn x(ratio: f64) -> String {
    format!("{ratio:.2}×")
}

/// The stacks of one protocol: ours first, then the peer.
fn pair(acp: bool) -> [Stack; 2] {
    if acp {
        [Stack::CancelkitAcp, Stack::AcpSdk]
    } else {
        [Stack::CancelkitMcp, Stack::Rmcp]
    }
}

/// Builds the report.
pub fn report(results: &Results) -> Report {
    let sizes = results.sizes;
    let mut report = Report::new(
        "peer",
        format!(
            "cancelkit's `Peer` against rmcp 3.9 (MCP 2025-11-25, `tools/call`) and the official ACP \
             SDK 5.0 (`session/prompt`). Every stack sends the same request bytes, its server \
             deserializes them into the same typed params (rmcp's `CallToolRequestParams`, the ACP \
             SDK's `PromptRequest`) and answers with the same typed result. Eight conditions: an \
             in-memory duplex in one process or OS pipes to a child process serving on its \
             standard input and output (non-blocking, on tokio's reactor, for every stack); a \
             current-thread or a multi-thread runtime (one worker per core); a no-op request or \
             one carrying 4 KiB of text. {} rounds; in each round every condition runs every stack \
             in turn (order rotated per round), each part on a fresh runtime and connection. \
             Figures are the median of the rounds with the min–max in brackets. Throughput: {} \
             requests from {} concurrent callers after a warm-up of a tenth. Cancels: {} per round \
             on an idle connection; {} per round each of a fresh request started on top of {} \
             running handlers (no limit on any stack; cancelkit's in-flight bound raised to 20,000 \
             for it). cancelkit drops the handler's future; rmcp and the ACP SDK never stop a \
             handler, so theirs \"stopped\" when a handler awaiting the stack's cancellation token \
             observes it.",
            sizes.rounds,
            number(sizes.throughput_requests as f64, 0),
            sizes.window,
            number(sizes.idle_cancels as f64, 0),
            number(sizes.loaded_cancels as f64, 0),
            number(sizes.in_flight as f64, 0),
        ),
    );
    let configs: Vec<Config> = Config::all()
        .into_iter()
        .filter(|c| {
            results
                .rounds
                .iter()
                .any(|(m, _, r)| m == c && !r.is_empty())
        })
        .collect();

    // Throughput.
    let mut table = Table::new(
        "Round trips per second (higher is better)",
        &[
            "condition",
            "cancelkit MCP",
            "rmcp 3.9",
            "ratio",
            "cancelkit ACP",
            "ACP SDK 5.0",
            "ratio",
        ],
    );
    let mut worst_throughput: Option<(f64, String)> = None;
    for config in &configs {
        let t = Stack::ALL.map(|s| throughput(results, *config, s));
        let better_peer = t[1].median.max(t[3].median);
        for (ours, stack) in [(t[0], Stack::CancelkitMcp), (t[2], Stack::CancelkitAcp)] {
            let r = ours.median / better_peer;
            if worst_throughput.as_ref().is_none_or(|(w, _)| r < *w) {
                worst_throughput = Some((r, format!("{}, {}", stack.name(), config.label())));
            }
        }
        table.row(vec![
            config.label(),
            t[0].show(0),
            t[1].show(0),
            x(t[0].median / t[1].median),
            t[2].show(0),
            t[3].show(0),
            x(t[2].median / t[3].median),
        ]);
    }
    report.tables.push(table);

    // Bytes on the wire.
    let mut table = Table::new(
        "Bytes written per no-op round trip (in-memory duplex, current-thread): the same work",
        &[
            "stack",
            "request, no-op",
            "answer, no-op",
            "request, 4 KiB",
            "answer, 4 KiB",
        ],
    );
    for stack in Stack::ALL {
        let mut cells = vec![stack.name().to_owned()];
        for payload in [0, 4096] {
            let config = Config {
                transport: Transport::Duplex,
                flavor: Flavor::Current,
                payload,
            };
            let bytes = results
                .rounds
                .iter()
                .find(|(c, s, _)| *c == config && *s == stack)
                .and_then(|(_, _, rounds)| rounds.first())
                .and_then(|r| r.bytes)
                .unwrap_or((f64::NAN, f64::NAN));
            cells.push(number(bytes.0, 0));
            cells.push(number(bytes.1, 0));
        }
        table.row(cells);
    }
    table.note(
        "Requests differ only in the JSON-RPC envelope each stack writes (id, key order); rmcp's \
         answer carries `isError` and the ACP SDK's its own field set.",
    );
    report.tables.push(table);

    // Cancel latency, per protocol.
    let mut worst_idle: Option<(f64, String)> = None;
    let mut worst_loaded_vs_idle: Option<(f64, String)> = None;
    let mut worst_loaded_vs_peer: Option<(f64, String)> = None;
    let mut worst_floor: Option<(f64, String)> = None;
    let keep_worst = |slot: &mut Option<(f64, String)>, r: f64, what: String| {
        if slot.as_ref().is_none_or(|(w, _)| r > *w) {
            *slot = Some((r, what));
        }
    };
    for acp in [false, true] {
        let [ours, peer] = pair(acp);
        let protocol = if acp { "ACP" } else { "MCP" };
        let mut table = Table::new(
            format!("{protocol}: cancel → handler stopped, µs (lower is better)"),
            &[
                "condition",
                "load",
                &format!("{} p50", ours.name()),
                &format!("{} p99", ours.name()),
                &format!("{} p50", peer.name()),
                &format!("{} p99", peer.name()),
                "p99 ratio",
                "floor p50",
                "ours p50 ÷ floor",
            ],
        );
        for config in &configs {
            let floor = spread_of(floor_rounds(results, *config), 0.5);
            for load in [Load::Idle, Load::Loaded] {
                let o = samples(results, *config, ours, load, Measure::Stopped);
                let p = samples(results, *config, peer, load, Measure::Stopped);
                let (o50, o99, p50, p99) = (
                    spread_of(&o, 0.5),
                    spread_of(&o, 0.99),
                    spread_of(&p, 0.5),
                    spread_of(&p, 0.99),
                );
                // The better peer of the same row: the lower p99 of rmcp and the ACP SDK.
                let other = pair(!acp)[1];
                let p_other = spread_of(
                    &samples(results, *config, other, load, Measure::Stopped),
                    0.99,
                );
                let better = p99.median.min(p_other.median);
                let what = format!(
                    "{}, {}, {}",
                    ours.name(),
                    config.label(),
                    if load == Load::Idle { "idle" } else { "loaded" }
                );
                match load {
                    Load::Idle => keep_worst(&mut worst_idle, o99.median / better, what.clone()),
                    Load::Loaded => {
                        let idle99 = spread_of(
                            &samples(results, *config, ours, Load::Idle, Measure::Stopped),
                            0.99,
                        );
                        keep_worst(
                            &mut worst_loaded_vs_idle,
                            o99.median / idle99.median,
                            what.clone(),
                        );
                        keep_worst(&mut worst_loaded_vs_peer, o99.median / better, what.clone());
                    }
                }
                keep_worst(&mut worst_floor, o50.median / floor.median, what);
                table.row(vec![
                    config.label(),
                    if load == Load::Idle {
                        "idle".into()
                    } else {
                        format!("{} running", number(sizes.in_flight as f64, 0))
                    },
                    us(o50),
                    us(o99),
                    us(p50),
                    us(p99),
                    x(o99.median / p99.median),
                    number(floor.median, 1),
                    x(o50.median / floor.median),
                ]);
                let title = format!(
                    "{protocol} cancel → handler stopped: {}, {}",
                    config.label(),
                    if load == Load::Idle {
                        "idle".to_owned()
                    } else {
                        format!("{} running", number(sizes.in_flight as f64, 0))
                    }
                );
                let slug = format!(
                    "{}-{}-{}",
                    protocol.to_lowercase(),
                    if load == Load::Idle { "idle" } else { "loaded" },
                    config.slug()
                );
                report.cdfs.push(Cdf {
                    slug,
                    title,
                    x_label: "cancel → handler stopped (µs)".into(),
                    series: vec![
                        (ours.name().into(), o.concat()),
                        (format!("{} (token observed)", peer.name()), p.concat()),
                        ("floor".into(), floor_rounds(results, *config).concat()),
                    ],
                });
            }
        }
        table.note(format!(
            "{} never stops a handler: its figure is the moment a handler that awaits the stack's \
             cancellation observes it. cancelkit drops the handler's future. Floor: {}.",
            peer.name(),
            "a tokio channel hand-off on the same runtime (duplex rows) or one line over a pipe \
             between two processes with tokio's reactor on both sides (pipe rows)"
        ));
        report.tables.push(table);
    }

    // ACP answers.
    let [ours, peer] = pair(true);
    let mut table = Table::new(
        "ACP: cancel → -32800 read by the client, µs",
        &[
            "condition",
            "load",
            "cancelkit ACP p50",
            "cancelkit ACP p99",
            "ACP SDK p50",
            "ACP SDK p99",
            "p99 ratio",
        ],
    );
    for config in &configs {
        for load in [Load::Idle, Load::Loaded] {
            let o = samples(results, *config, ours, load, Measure::Answered);
            let p = samples(results, *config, peer, load, Measure::Answered);
            let (o99, p99) = (spread_of(&o, 0.99), spread_of(&p, 0.99));
            table.row(vec![
                config.label(),
                if load == Load::Idle {
                    "idle".into()
                } else {
                    format!("{} running", number(sizes.in_flight as f64, 0))
                },
                us(spread_of(&o, 0.5)),
                us(o99),
                us(spread_of(&p, 0.5)),
                us(p99),
                x(o99.median / p99.median),
            ]);
        }
    }
    table.note("MCP answers nothing to a cancelled request, so there is no MCP row.");
    report.tables.push(table);

    // The cancelkit-only limited rows.
    let mut table = Table::new(
        "cancelkit only: cancel → handler stopped with the concurrency limit full, µs",
        &["stack", "p50", "p99"],
    );
    for (acp, rounds) in &results.limited {
        table.row(vec![
            if *acp {
                "cancelkit ACP"
            } else {
                "cancelkit MCP"
            }
            .into(),
            us(spread_of(rounds, 0.5)),
            us(spread_of(rounds, 0.99)),
        ]);
    }
    table.note(format!(
        "In-memory duplex, current-thread: limit {} running, the rest of {} requests queued \
         behind it; each sample cancels a running request and the next queued one takes its slot. \
         rmcp and the ACP SDK have no concurrency limit, so there is nothing to compare.",
        super::limited::LIMIT,
        number(sizes.in_flight as f64, 0)
    ));
    report.tables.push(table);

    // Heap.
    let mut table = Table::new(
        "Heap bytes per in-flight request (OS pipes, current-thread; each process counts its own)",
        &[
            "stack",
            "client",
            "server",
            "total",
            "total vs the better peer",
        ],
    );
    let heap_total = |stack: Stack| -> Spread {
        let rounds = &results
            .heap
            .iter()
            .find(|(s, _)| *s == stack)
            .expect("measured")
            .1;
        Spread::of(&rounds.iter().map(|(c, s)| c + s).collect::<Vec<_>>())
    };
    let better_peer_heap = heap_total(Stack::Rmcp)
        .median
        .min(heap_total(Stack::AcpSdk).median);
    for (stack, rounds) in &results.heap {
        let client = Spread::of(&rounds.iter().map(|r| r.0).collect::<Vec<_>>());
        let server = Spread::of(&rounds.iter().map(|r| r.1).collect::<Vec<_>>());
        let total = heap_total(*stack);
        table.row(vec![
            stack.name().into(),
            client.show(0),
            server.show(0),
            total.show(0),
            x(total.median / better_peer_heap),
        ]);
    }
    table.note(format!(
        "The same procedure for every stack: a fresh server process and connection, 32 round trips, \
         one cancelled request and one heap report to warm up, then {} parked requests held by the \
         client in a vector sized beforehand and polled until every handler runs; each process \
         reads its counting allocator's live bytes before and after (the server when asked by a \
         `heap` request, the same for both readings).",
        number(sizes.in_flight as f64, 0)
    ));
    report.tables.push(table);

    // Floors.
    let mut table = Table::new(
        "Floors, µs: the cheapest hand-off on this machine, measured in the same run",
        &["hand-off", "p50", "p99"],
    );
    for (name, rounds) in [
        (
            "tokio channel send → receiving task running, current-thread",
            &results.floors.channel_current,
        ),
        (
            "tokio channel send → receiving task running, multi-thread",
            &results.floors.channel_multi,
        ),
        (
            "one line over a pipe → read by another process, blocking read",
            &results.floors.pipe_blocking,
        ),
        (
            "one line over a pipe → read by another process, tokio reactor",
            &results.floors.pipe_tokio,
        ),
    ] {
        table.row(vec![
            name.into(),
            us(spread_of(rounds, 0.5)),
            us(spread_of(rounds, 0.99)),
        ]);
    }
    report.tables.push(table);

    // Targets.
    if let Some((r, what)) = worst_idle {
        report.target(
            "1. idle cancel p99 <= 0.5x the better peer, every row",
            format!("worst {r:.2}x ({what})"),
            r <= 0.5,
        );
    }
    if let Some((r, what)) = worst_loaded_vs_idle {
        report.target(
            "2a. loaded cancel p99 <= 2x our idle p99, every row",
            format!("worst {r:.2}x ({what})"),
            r <= 2.0,
        );
    }
    if let Some((r, what)) = worst_loaded_vs_peer {
        report.target(
            "2b. loaded cancel p99 <= 0.25x the better peer's loaded p99, every row",
            format!("worst {r:.2}x ({what})"),
            r <= 0.25,
        );
    }
    if let Some((r, what)) = worst_throughput {
        report.target(
            "3. round trips >= 1.5x the better peer, every row",
            format!("worst {r:.2}x ({what})"),
            r >= 1.5,
        );
    }
    let ours_heap = heap_total(Stack::CancelkitMcp)
        .median
        .max(heap_total(Stack::CancelkitAcp).median);
    report.target(
        "4. heap per in-flight request (client + server) <= 0.5x the better peer",
        format!(
            "{} B = {:.2}x of {} B",
            number(ours_heap, 0),
            ours_heap / better_peer_heap,
            number(better_peer_heap, 0)
        ),
        ours_heap <= 0.5 * better_peer_heap,
    );
    if let Some((r, what)) = worst_floor {
        report.target(
            "5. cancel -> handler stopped p50 <= 3x the floor, every row",
            format!("worst {r:.2}x ({what})"),
            r <= 3.0,
        );
    }

    // The README shows four of the plots (all are under target/bench): idle and loaded cancels
    // of each protocol, in one process and across two.
    report.readme_plots = Some(
        [
            "mcp-idle-duplex-current-noop",
            "mcp-loaded-duplex-current-noop",
            "acp-loaded-duplex-multi-noop",
            "mcp-loaded-pipes-current-4k",
        ]
        .map(str::to_owned)
        .to_vec(),
    );
    report.data = data(results);
    report
}

/// The raw per-round figures (percentiles per round, not every sample).
fn data(results: &Results) -> Value {
    let quantiles =
        |s: &[f64]| json!({"p50": quantile(s, 0.5), "p99": quantile(s, 0.99), "n": s.len()});
    let rows: Vec<Value> = results
        .rounds
        .iter()
        .map(|(config, stack, rounds)| {
            json!({
                "condition": config.label(),
                "stack": stack.name(),
                "rounds": rounds.iter().map(|r| json!({
                    "round_trips_per_second": r.throughput,
                    "bytes_per_round_trip": r.bytes.map(|(c, s)| json!({"client": c, "server": s})),
                    "idle_stopped_us": quantiles(&r.idle.stopped),
                    "idle_answered_us": (!r.idle.answered.is_empty()).then(|| quantiles(&r.idle.answered)),
                    "loaded_stopped_us": quantiles(&r.loaded.stopped),
                    "loaded_answered_us": (!r.loaded.answered.is_empty()).then(|| quantiles(&r.loaded.answered)),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "sizes": {
            "rounds": results.sizes.rounds,
            "throughput_requests": results.sizes.throughput_requests,
            "window": results.sizes.window,
            "idle_cancels": results.sizes.idle_cancels,
            "in_flight": results.sizes.in_flight,
            "loaded_cancels": results.sizes.loaded_cancels,
        },
        "rows": rows,
        "heap_bytes_per_in_flight": results.heap.iter().map(|(s, r)| json!({
            "stack": s.name(),
            "rounds": r.iter().map(|(c, sv)| json!({"client": c, "server": sv})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "floors_us": {
            "channel_current_thread": results.floors.channel_current.iter().map(|s| quantiles(s)).collect::<Vec<_>>(),
            "channel_multi_thread": results.floors.channel_multi.iter().map(|s| quantiles(s)).collect::<Vec<_>>(),
            "pipe_blocking": results.floors.pipe_blocking.iter().map(|s| quantiles(s)).collect::<Vec<_>>(),
            "pipe_tokio": results.floors.pipe_tokio.iter().map(|s| quantiles(s)).collect::<Vec<_>>(),
        },
        "limited_us": results.limited.iter().map(|(acp, r)| json!({
            "stack": if *acp { "cancelkit ACP" } else { "cancelkit MCP" },
            "rounds": r.iter().map(|s| quantiles(s)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
