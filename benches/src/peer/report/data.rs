//! The report's raw data: the per-round figures as JSON (percentiles per round, not every
//! sample).

use serde_json::{Value, json};

use super::super::Results;
use super::figures::quantile;

/// The raw per-round figures (percentiles per round, not every sample).
pub(super) fn data(results: &Results) -> Value {
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
