//! The tables besides cancel latency: round trips per second, bytes on the wire, the
//! cancelkit-only limited rows, heap per in-flight request and the floors.

use crate::report::{Report, Spread, Table, number};

use super::super::{Config, Flavor, Results, Stack, Transport};
use super::figures::{heap_total, spread_of, throughput, us, x};

/// Round trips per second, ours against the peers. Returns the worst ratio of ours to the better
/// peer, and the row it was found in.
pub(super) fn round_trips(
    report: &mut Report,
    results: &Results,
    configs: &[Config],
) -> Option<(f64, String)> {
    let mut table = Table::new(
        "Round trips per second (higher is better)",
        &[
            "condition",
            "cancelkit MCP",
            "rmcp 3.11",
            "ratio",
            "cancelkit ACP",
            "ACP SDK 5.2",
            "ratio",
        ],
    );
    let mut worst_throughput: Option<(f64, String)> = None;
    for config in configs {
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
    worst_throughput
}

/// Bytes written per round trip by each stack (in-memory duplex, current-thread).
pub(super) fn wire_bytes(report: &mut Report, results: &Results) {
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
}

/// The cancelkit-only rows: cancel → handler stopped with the concurrency limit full.
pub(super) fn limited(report: &mut Report, results: &Results) {
    let sizes = results.sizes;
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
        super::super::limited::LIMIT,
        number(sizes.in_flight as f64, 0)
    ));
    report.tables.push(table);
}

/// Heap bytes per in-flight request, client and server, against the better peer.
pub(super) fn heap(report: &mut Report, results: &Results) {
    let sizes = results.sizes;
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
    let heap_total = |stack: Stack| heap_total(results, stack);
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
}

/// The floors: the cheapest hand-offs on this machine, measured in the same run.
pub(super) fn floors(report: &mut Report, results: &Results) {
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
}
