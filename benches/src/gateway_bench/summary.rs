//! The gateway benchmark's report: tables, targets, the cancel-latency plot and the raw data.

mod scale;

use serde_json::json;

use crate::report::{Cdf, Report, Spread, Table, number, ratio};

use super::capped::{AtCap, BEYOND, CAP};
use super::lookups::{FILL_USERS, LOOKUP_ROUNDS, LOOKUPS_PER_ROUND, Lookups, RETAINED};
use super::measure::Memory;
use super::{
    CANCEL_ROUNDS, CANCELS_PER_ROUND, Cancels, IN_FLIGHT_RUNS, THROUGHPUT_CALLS, THROUGHPUT_ROUNDS,
    Throughput, WARM_UP_CALLS, WINDOW,
};

/// The `q` quantile of `samples` (nearest rank).
pub fn quantile(samples: &[f64], q: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// `1st`, `2nd`, `3rd`, `4th`, ...
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The spread over rounds of each round's `q` quantile.
pub fn per_round(rounds: &[Vec<f64>], q: f64) -> Spread {
    Spread::of(&rounds.iter().map(|r| quantile(r, q)).collect::<Vec<_>>())
}

/// The gateway report from the measurements.
pub fn build(
    cancels: &Cancels,
    throughput: &Throughput,
    memory: &Memory,
    lookups: &[Lookups],
    at_cap: &AtCap,
) -> Report {
    let mut report = Report::new(
        "gateway",
        format!(
            "cancelkit-gateway (release build) in its own processes on loopback: two workers on \
             one `redis-server`, each with the bundled demo upstream as a stdio child; the bench \
             client (reqwest over HTTP/1.1, tokio with 2 worker threads) in another process, all \
             on the same machine. Cancel latency is from sending `POST /cancellation/cancel` to \
             the demo upstream logging its tool's stop (wall-clock, same machine): {CANCEL_ROUNDS} \
             rounds of {CANCELS_PER_ROUND} samples each of a same-worker cancel, a cross-worker \
             cancel (the run on worker A, the cancel sent to worker B) and a raw Redis `PUBLISH` \
             → subscriber round trip, interleaved sample by sample with the order rotated. \
             Throughput: {THROUGHPUT_ROUNDS} rounds of {} echo `tools/call`s, {WINDOW} in flight, \
             through `/rpc` of the worker with Redis, of a worker alone, and straight to a demo \
             upstream over stdio with the cancelkit `Peer`, the three interleaved round by round \
             with the order rotated, each warmed first with {WARM_UP_CALLS} un-measured calls. \
             Lookups: on a fresh worker alone, then on one with a `redis-server` of its own, \
             {LOOKUP_ROUNDS} rounds of {LOOKUPS_PER_ROUND} samples of three API requests \
             (interleaved sample by sample) with almost no finished run retained, then again \
             once echo calls of {FILL_USERS} users have filled it to {} retained runs. Connections: a worker with \
             `max_connections = {CAP}`, that many idle keep-alive connections, and {BEYOND} \
             more beyond the cap. Figures are the median (min–max) of the rounds; ratios are \
             taken on the medians. Memory is one measurement on a fresh worker. The workers' \
             configs raise `max_runs`, `max_runs_per_user`, `max_upstream_calls` and \
             `max_upstream_calls_per_user` to 20,000 and `max_connections_per_ip` to 4,096 (the \
             bench is one user on 127.0.0.1) and grant `admin` `admin.system_config` and \
             `tools.execute`; every other setting is the default unless a table says otherwise.",
            number(THROUGHPUT_CALLS as f64, 0),
            number(RETAINED as f64, 0)
        ),
    );

    let kinds = [
        ("same worker", &cancels.same),
        ("across workers (Redis)", &cancels.cross),
        ("raw Redis PUBLISH → subscriber", &cancels.raw),
    ];
    let p50: Vec<Spread> = kinds.iter().map(|(_, r)| per_round(r, 0.50)).collect();
    let p99: Vec<Spread> = kinds.iter().map(|(_, r)| per_round(r, 0.99)).collect();
    let (same, cross, raw) = (0, 1, 2);
    let goal_p50 = 2.0 * p50[raw].median + p50[same].median;
    let goal_p99 = 2.0 * p99[raw].median + p99[same].median;

    let mut table = Table::new(
        format!(
            "API cancel → upstream stopped, µs ({CANCEL_ROUNDS} rounds of {CANCELS_PER_ROUND} samples)"
        ),
        &["path", "p50", "p99"],
    );
    for (i, (name, _)) in kinds.iter().enumerate() {
        table.row(vec![(*name).to_owned(), p50[i].show(0), p99[i].show(0)]);
    }
    table.row(vec![
        "goal for across workers: 2 × PUBLISH + same worker".into(),
        format!("≤ {}", number(goal_p50, 0)),
        format!("≤ {}", number(goal_p99, 0)),
    ]);
    let p99_rank = CANCELS_PER_ROUND - ((CANCELS_PER_ROUND as f64 - 1.0) * 0.99).round() as usize;
    table.note(format!(
        "Each round's p50 and p99 are taken over its {CANCELS_PER_ROUND} samples (its p99 is \
         its {}-largest sample); the goal is computed on the medians.",
        ordinal(p99_rank)
    ));
    table.note(
        "The raw round trip is timed inside the bench process (Instant); the cancels from the \
         bench's send to the upstream's log line (wall clock).",
    );
    report.tables.push(table);

    for (q, measured, goal) in [
        ("p50", p50[cross].median, goal_p50),
        ("p99", p99[cross].median, goal_p99),
    ] {
        report.target(
            format!("cross-worker cancel {q} ≤ 2 × raw PUBLISH {q} + same-worker {q}"),
            format!("{} µs (goal ≤ {} µs)", number(measured, 0), number(goal, 0)),
            measured <= goal,
        );
    }

    let rates = [
        (
            "through the gateway /rpc, worker with Redis",
            &throughput.redis,
        ),
        (
            "through the gateway /rpc, one worker alone",
            &throughput.alone,
        ),
        ("straight to the upstream over stdio", &throughput.direct),
    ];
    let spreads: Vec<Spread> = rates.iter().map(|(_, r)| Spread::of(r)).collect();
    let mut table = Table::new(
        format!(
            "tools/call (echo) throughput, calls/s, {WINDOW} in flight ({THROUGHPUT_ROUNDS} rounds of {} calls)",
            number(THROUGHPUT_CALLS as f64, 0)
        ),
        &["path", "calls/s", "vs direct"],
    );
    for (i, (name, _)) in rates.iter().enumerate() {
        table.row(vec![
            (*name).to_owned(),
            spreads[i].show(0),
            ratio(spreads[i].median, spreads[2].median),
        ]);
    }
    table.note(
        "The gateway adds HTTP, authentication, the run registry (and its Redis records) and a \
         hop to the same upstream; the direct path is the floor.",
    );
    report.tables.push(table);

    let mib = |b: u64| number(b as f64 / 1_048_576.0, 1);
    let mut table = Table::new(
        format!(
            "gateway resident memory, {} connections (one measurement)",
            number(IN_FLIGHT_RUNS as f64, 0)
        ),
        &["measure", "bytes", "resident set"],
    );
    table.row(vec![
        "per open idle HTTP/1.1 connection".into(),
        number(memory.per_connection, 0),
        format!("{} → {} MiB", mib(memory.rss[0]), mib(memory.rss[1])),
    ]);
    table.row(vec![
        "per in-flight run (on an open connection)".into(),
        number(memory.per_run, 0),
        format!("{} → {} MiB", mib(memory.rss[1]), mib(memory.rss[2])),
    ]);
    table.note("The upstream's own memory is not counted.");
    report.tables.push(table);

    let scale = scale::add(&mut report, lookups, at_cap);

    report.cdfs.push(Cdf {
        slug: "cancel".into(),
        title: "API cancel → upstream stopped: same worker, across workers, and the raw PUBLISH \
                floor"
            .into(),
        x_label: "cancel sent → upstream tool stopped (µs)".into(),
        series: kinds
            .iter()
            .map(|(name, rounds)| ((*name).to_owned(), rounds.concat()))
            .collect(),
    });

    report.data = json!({
        "cancel_rounds": CANCEL_ROUNDS,
        "cancels_per_round": CANCELS_PER_ROUND,
        "same_worker_cancel_us": cancels.same,
        "cross_worker_cancel_us": cancels.cross,
        "raw_publish_round_trip_us": cancels.raw,
        "cross_worker_goal_us": {"p50": goal_p50, "p99": goal_p99},
        "throughput_rounds": THROUGHPUT_ROUNDS,
        "throughput_calls_per_round": THROUGHPUT_CALLS,
        "throughput_window": WINDOW,
        "throughput_calls_per_s": {
            "gateway_rpc_redis": throughput.redis,
            "gateway_rpc_alone": throughput.alone,
            "direct_stdio": throughput.direct,
        },
        "memory_per_idle_connection_bytes": memory.per_connection,
        "memory_per_in_flight_run_bytes": memory.per_run,
        "rss_bytes": {
            "start": memory.rss[0],
            "connections_open": memory.rss[1],
            "runs_in_flight": memory.rss[2],
            "count": IN_FLIGHT_RUNS,
        },
        "lookups": scale["lookups"],
        "idle_connections_at_cap": scale["idle_connections_at_cap"],
    });
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let samples: Vec<f64> = (1..=400).rev().map(f64::from).collect();
        assert_eq!(quantile(&samples, 0.5), 201.0);
        assert_eq!(quantile(&samples, 0.99), 396.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn ordinals_have_their_suffixes() {
        let shown: Vec<String> = [1, 2, 3, 4, 5, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            shown,
            [
                "1st", "2nd", "3rd", "4th", "5th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }
}
