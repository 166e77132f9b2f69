//! The peer benchmark's tables, targets and plots, from what [`measure`](fn@super::measure)
//! found.

mod data;
mod figures;
mod latency;
mod tables;

use crate::report::{Report, number};

use super::{Config, Results, Stack};
use figures::heap_total;
use latency::Worst;

/// Builds the report.
pub fn report(results: &Results) -> Report {
    let sizes = results.sizes;
    let mut report = Report::new(
        "peer",
        format!(
            "cancelkit's `Peer` against rmcp 3.11 (MCP 2025-11-25, `tools/call`) and the official ACP \
             SDK 5.2 (`session/prompt`). Every stack sends the same request bytes, its server \
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

    let worst_throughput = tables::round_trips(&mut report, results, &configs);
    tables::wire_bytes(&mut report, results);
    let worst = latency::stopped(&mut report, results, &configs);
    latency::answered(&mut report, results, &configs);
    tables::limited(&mut report, results);
    tables::heap(&mut report, results);
    tables::floors(&mut report, results);
    targets(&mut report, results, worst_throughput, worst);

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
    report.data = data::data(results);
    report
}

/// The report's targets, from the worst ratios the tables found and the heap figures.
fn targets(
    report: &mut Report,
    results: &Results,
    worst_throughput: Option<(f64, String)>,
    worst: Worst,
) {
    let Worst {
        idle: worst_idle,
        loaded_vs_idle: worst_loaded_vs_idle,
        loaded_vs_peer: worst_loaded_vs_peer,
        floor: worst_floor,
    } = worst;
    let better_peer_heap = heap_total(results, Stack::Rmcp)
        .median
        .min(heap_total(results, Stack::AcpSdk).median);
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
    let ours_heap = heap_total(results, Stack::CancelkitMcp)
        .median
        .max(heap_total(results, Stack::CancelkitAcp).median);
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
}
