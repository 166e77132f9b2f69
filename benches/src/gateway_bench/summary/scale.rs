//! The gateway report's tables of lookups against retained runs and of idle connections at
//! the cap, their targets, and their raw data.

use cancelkit_gateway::listen::{OVERFLOW, OVERFLOW_PER_IP};
use serde_json::{Value, json};

use super::per_round;
use crate::gateway_bench::WINDOW;
use crate::gateway_bench::capped::{AtCap, BEYOND, CAP};
use crate::gateway_bench::lookups::{
    FILL_USERS, KEEP_EVERY, LOOKUP_ROUNDS, LOOKUPS_PER_ROUND, Level, Lookups, RETAINED,
};
use crate::report::{Report, Table, number, ratio};

/// How much slower a lookup's p50 may be with [`RETAINED`] runs retained than with almost
/// none (on the medians of the rounds) and still count as independent of their number.
const INDEPENDENT_WITHIN: f64 = 1.5;

/// The three lookups: their names in the tables and their rounds at a level.
fn kinds(level: &Level) -> [(&'static str, &Vec<Vec<f64>>); 3] {
    [
        (
            "`GET /cancellation/status/{bare id}` of a live run",
            &level.live_bare,
        ),
        (
            "`GET /cancellation/status/{run id}` of a retained run",
            &level.retained_run,
        ),
        (
            "`POST /cancellation/cancel` of a live run by its run id",
            &level.cancel_run,
        ),
    ]
}

/// `a → b MiB`.
fn mib(from: u64, to: u64) -> String {
    let m = |b: u64| number(b as f64 / 1_048_576.0, 1);
    format!("{} → {} MiB", m(from), m(to))
}

/// Adds the lookups' tables, the memory per retained run, the connections at the cap and
/// their targets to `report`; returns their raw data.
pub fn add(report: &mut Report, lookups: &[Lookups], at_cap: &AtCap) -> Value {
    for step in lookups {
        lookups_table(report, step);
    }
    memory_table(report, lookups);
    cap_table(report, at_cap);
    json!({
        "lookups": lookups.iter().map(lookups_data).collect::<Vec<_>>(),
        "idle_connections_at_cap": {
            "max_connections": CAP,
            "rss_bytes": {"before": at_cap.rss[0], "at_cap": at_cap.rss[1]},
            "bytes_per_idle_connection": at_cap.per_connection(),
            "served_gauge": at_cap.served,
            "beyond": BEYOND,
            "beyond_answered_503": at_cap.refused_503,
            "beyond_answered_otherwise": at_cap.answered_otherwise,
            "beyond_closed": at_cap.closed,
            "beyond_silent": at_cap.silent,
            "health_on_fresh_connection": {
                "http_status": at_cap.health.0,
                "status": at_cap.health.1,
                "connection_close": at_cap.health.2,
            },
            "still_served_after": at_cap.still_served,
        },
    })
}

fn lookups_table(report: &mut Report, step: &Lookups) {
    let (empty, full) = (kinds(&step.empty), kinds(&step.full));
    let retained = number(RETAINED as f64, 0);
    let mut table = Table::new(
        format!(
            "lookups against retained runs, {}: round trip, µs ({LOOKUP_ROUNDS} rounds of \
             {LOOKUPS_PER_ROUND} samples at each level)",
            step.worker
        ),
        &[
            "request",
            "p50, ~0 retained",
            &format!("p50, {retained} retained"),
            "p50 ratio",
            "p99, ~0 retained",
            &format!("p99, {retained} retained"),
        ],
    );
    for ((name, before), (_, after)) in empty.iter().zip(full.iter()) {
        let (p50_before, p50_after) = (per_round(before, 0.50), per_round(after, 0.50));
        table.row(vec![
            (*name).to_owned(),
            p50_before.show(0),
            p50_after.show(0),
            ratio(p50_after.median, p50_before.median),
            per_round(before, 0.99).show(0),
            per_round(after, 0.99).show(0),
        ]);
        if step.redis_memory.is_none() {
            report.target(
                format!(
                    "{name}: p50 at {retained} retained runs ≤ {INDEPENDENT_WITHIN} × at ~0 \
                     ({})",
                    step.worker
                ),
                format!(
                    "{} µs against {} µs ({})",
                    number(p50_after.median, 0),
                    number(p50_before.median, 0),
                    ratio(p50_after.median, p50_before.median)
                ),
                p50_after.median <= INDEPENDENT_WITHIN * p50_before.median,
            );
        }
    }
    let count =
        |[from, to]: [u64; 2]| format!("{} → {}", number(from as f64, 0), number(to as f64, 0));
    table.note(format!(
        "Retained runs during the rounds: ~0 is {} (the warm-up's calls, then the samples' own \
         cancelled runs), {retained} is {}.",
        count(step.empty.retained),
        count(step.full.retained)
    ));
    table.note(
        "Each sample starts a slow call (`demo-sleep`, as `admin`); once the upstream runs it, \
         its status by its bare JSON-RPC id and a retained run's status by its run id (the two \
         in alternating order), then its cancel by the run id its status gave. Each figure is \
         the API request's round trip to the end of its body; the slow call's own start and \
         end are not counted.",
    );
    table.note(format!(
        "The fill: {} echo calls through `/rpc`, {WINDOW} in flight, spread over {FILL_USERS} \
         users granted `tools.execute` (JSON-RPC ids 0–{}, so each bare id names \
         {FILL_USERS} retained runs of {FILL_USERS} users), in {} s ({} calls/s); the retained \
         runs read back after it are every {KEEP_EVERY}th of the fill. `max_retained` and \
         `max_retained_per_user` {retained}, `status_retention` 1 h.",
        number(step.filled as f64, 0),
        number(
            (step.filled.div_ceil(FILL_USERS)).saturating_sub(1) as f64,
            0
        ),
        number(step.fill_secs, 1),
        number(step.filled as f64 / step.fill_secs.max(1e-9), 0)
    ));
    report.tables.push(table);
}

fn memory_table(report: &mut Report, lookups: &[Lookups]) {
    let mut table = Table::new(
        format!(
            "memory per retained run, after the fill to {} (one measurement each)",
            number(RETAINED as f64, 0)
        ),
        &[
            "measure",
            "bytes per retained run",
            "before → after the fill",
        ],
    );
    for step in lookups {
        table.row(vec![
            format!("gateway resident set, {}", step.worker),
            number(step.bytes_per_retained(), 0),
            mib(step.rss[0], step.rss[1]),
        ]);
    }
    for step in lookups {
        if let (Some(per_run), Some([from, to])) =
            (step.redis_bytes_per_retained(), step.redis_memory)
        {
            table.row(vec![
                format!("`redis-server` used_memory, {}", step.worker),
                number(per_run, 0),
                mib(from, to),
            ]);
        }
    }
    table.note(
        "Bytes per run = the growth over the finished runs the fill added (the retained count \
         from `/metrics` before and after it). The resident set includes the allocator's slack \
         and the tables' spare room (a hash table grows by doubling), so this is what a run \
         costs at this count, not a floor. The upstream's own memory is not counted.",
    );
    report.tables.push(table);
}

fn cap_table(report: &mut Report, at_cap: &AtCap) {
    let cap = number(CAP as f64, 0);
    let mut table = Table::new(
        format!("idle connections at the cap, `max_connections = {CAP}` (one measurement)"),
        &["measure", "value"],
    );
    table.row(vec![
        "connections served with the cap reached (the gateway's gauge)".into(),
        number(at_cap.served as f64, 0),
    ]);
    table.row(vec![
        "resident set per idle HTTP/1.1 keep-alive connection at the cap".into(),
        format!(
            "{} bytes ({})",
            number(at_cap.per_connection(), 0),
            mib(at_cap.rss[0], at_cap.rss[1])
        ),
    ]);
    let mut beyond = vec![
        format!("{} answered 503 naming the cap", at_cap.refused_503),
        format!("{} closed without an answer", at_cap.closed),
    ];
    if !at_cap.answered_otherwise.is_empty() {
        beyond.push(format!(
            "{} answered otherwise ({:?})",
            at_cap.answered_otherwise.len(),
            at_cap.answered_otherwise
        ));
    }
    if at_cap.silent > 0 {
        beyond.push(format!("{} silent", at_cap.silent));
    }
    table.row(vec![
        format!("{BEYOND} more connections from 127.0.0.1, all made before any request"),
        beyond.join(", "),
    ]);
    let (code, status, closes) = &at_cap.health;
    table.row(vec![
        "`GET /health` on a fresh connection at the cap".into(),
        format!(
            "{code}, status `{status}`{}",
            if *closes { ", `Connection: close`" } else { "" }
        ),
    ]);
    table.row(vec![
        format!("the {cap} served connections afterwards"),
        format!("{} answer `/health`", number(at_cap.still_served as f64, 0)),
    ]);
    table.note(format!(
        "`max_connections_per_ip` is {cap} too (every connection comes from 127.0.0.1) and \
         `header_timeout` (also how long a kept-alive connection may idle) 60 s, so that none is \
         closed for idling during the step. Beyond a cap the gateway answers at most {OVERFLOW} \
         connections at once, {OVERFLOW_PER_IP} from one address, and closes the others at \
         once; a request beyond a cap other than `/health` is answered 503."
    ));
    report.tables.push(table);

    report.target(
        "`/health` answers on a fresh connection with the connection cap reached",
        format!("{code}, status `{status}`"),
        *code == 200 && status == "ok",
    );
    report.target(
        "every connection beyond the cap is answered 503 or closed, none left hanging",
        format!(
            "{} answered 503, {} closed, {} otherwise, {} silent",
            at_cap.refused_503,
            at_cap.closed,
            at_cap.answered_otherwise.len(),
            at_cap.silent
        ),
        at_cap.refused_503 + at_cap.closed == BEYOND,
    );
}

/// The raw data of one worker's lookups.
fn lookups_data(step: &Lookups) -> Value {
    let level = |level: &Level| {
        json!({
            "retained": {"start": level.retained[0], "end": level.retained[1]},
            "live_bare_id_status_us": level.live_bare,
            "retained_run_id_status_us": level.retained_run,
            "cancel_by_run_id_us": level.cancel_run,
        })
    };
    json!({
        "worker": step.worker,
        "rounds": LOOKUP_ROUNDS,
        "samples_per_round": LOOKUPS_PER_ROUND,
        "empty": level(&step.empty),
        "full": level(&step.full),
        "fill": {
            "calls": step.filled,
            "seconds": step.fill_secs,
            "users": FILL_USERS,
            "window": WINDOW,
        },
        "rss_bytes": {"before_fill": step.rss[0], "after_fill": step.rss[1]},
        "bytes_per_retained_run": step.bytes_per_retained(),
        "redis_used_memory_bytes": step.redis_memory.map(|[b, a]| json!({"before_fill": b, "after_fill": a})),
        "redis_bytes_per_retained_run": step.redis_bytes_per_retained(),
        "p50_us": per_level_p50(step),
    })
}

/// The medians of the rounds' p50 of each lookup at each level, for a quick look.
fn per_level_p50(step: &Lookups) -> Value {
    let medians = |level: &Level| -> Vec<f64> {
        kinds(level)
            .iter()
            .map(|(_, rounds)| per_round(rounds, 0.50).median)
            .collect()
    };
    json!({"empty": medians(&step.empty), "full": medians(&step.full)})
}
