//! The HTTP gateway benchmark's report: tables, targets and the raw data.

use serde_json::json;

use crate::gateway_bench::{per_round, quantile};
use crate::report::{Report, Spread, Table, number, ratio};

use super::contextforge;
use super::measure::{Cancel, Door, Round};
use super::stacks::Kind;
use super::{CONCURRENCY, Sizes};

/// Every cancel of one stack through one door, by round.
pub struct CancelSeries {
    /// The stack's name.
    pub stack: String,
    /// Its door.
    pub door: Door,
    /// When in the run (before or after the load rounds).
    pub phase: String,
    /// The samples of each round.
    pub rounds: Vec<Vec<Cancel>>,
}

/// Everything measured.
pub struct Results {
    /// The sizes of the run.
    pub sizes: Sizes,
    /// Whether this is the short run.
    pub quick: bool,
    /// Each stack's name and kind, in table order.
    pub stacks: Vec<(String, Kind)>,
    /// `[stack][round]`: the round trips at one client, µs.
    pub latency: Vec<Vec<Vec<f64>>>,
    /// `[stack][concurrency][round]`.
    pub throughput: Vec<Vec<Vec<Round>>>,
    /// The API cancels.
    pub cancels: Vec<CancelSeries>,
    /// ContextForge's cancel API on a call made at its MCP endpoint (one probe).
    pub forge_mcp_probe: Option<Cancel>,
    /// Why a ContextForge variant is not in the run, for each one that is not.
    pub forge_missing: Vec<String>,
    /// The `tools/call` runs the gateway had finished before each cancel phase (before and
    /// after the load rounds).
    pub gateway_runs: [u64; 2],
    /// `/proc/loadavg` when the run started and when it ended (other work on the machine).
    pub load: [String; 2],
}

fn door_name(door: Door) -> &'static str {
    match door {
        Door::Mcp => "call at its MCP endpoint",
        Door::Rpc => "call at `/rpc`",
    }
}

fn ms(us: f64) -> f64 {
    us / 1000.0
}

/// The report.
pub fn build(results: &Results) -> Report {
    let sizes = results.sizes;
    let names: Vec<&str> = results.stacks.iter().map(|(n, _)| n.as_str()).collect();
    let find = |kind: Kind| results.stacks.iter().position(|(_, k)| *k == kind);
    let direct = find(Kind::Direct).expect("direct is always measured");
    let proxy = find(Kind::Proxy).expect("the proxy is always measured");
    let gateway = find(Kind::Gateway).expect("the gateway is always measured");
    let concurrency = CONCURRENCY
        .iter()
        .map(std::string::ToString::to_string)
        .collect::<Vec<_>>()
        .join(" and ");
    let mut report = Report::new(
        "http-gateway",
        format!(
            "{}One Streamable HTTP MCP upstream (rmcp 3.11's server, in its own process, tools \
             `echo` and `sleep`, Nagle off) called by the same Rust load generator (reqwest, \
             keep-alive, HTTP/1.1, a 2025-11-25 session per client, the same `initialize` and \
             `tools/call` bytes but for the tool's name): directly; through a bare pass-through \
             proxy (axum + reqwest, no logic, its own process); through the cancelkit gateway \
             (release build, the upstream as its `url` upstream, called at `/mcp` with a JWT); \
             and through IBM ContextForge {} (PyPI, one uvicorn process, SQLite, the upstream \
             registered as a gateway in a virtual server, called at `/servers/ID/mcp` with its \
             login token), once with its defaults (stateless Streamable HTTP, where each call \
             opens a session of its own upstream) and once with `USE_STATEFUL_SESSIONS=true` \
             (an upstream session kept per client session). Everything on loopback on one \
             machine: the load generator, the stack and the upstream share its cores. {} \
             rounds, interleaved (in each round every stack is measured in turn, the order \
             rotated by round); each figure is the median (min–max) of the rounds. Latency: {} echo calls one after another per round. \
             Throughput: {concurrency} clients calling back to back for {} s per round. CPU: \
             user + system time of the stack's process (from /proc) over each throughput round, \
             per call answered. Cancel: a `sleep` through the stack, `POST \
             /cancellation/cancel` with its request id once the upstream runs it, to the \
             upstream logging the tool's stop (wall clock, same machine). Load average (1, 5, \
             15 min) at the start: {}; at the end: {}.",
            if results.quick {
                "QUICK RUN (small sizes; not for the README). "
            } else {
                ""
            },
            contextforge::VERSION,
            sizes.rounds,
            number(sizes.latency_calls as f64, 0),
            sizes.throughput_secs,
            results.load[0],
            results.load[1],
        ),
    );

    // (a) latency at one client.
    let p50: Vec<Vec<f64>> = results
        .latency
        .iter()
        .map(|rounds| rounds.iter().map(|r| quantile(r, 0.5)).collect())
        .collect();
    let p99: Vec<Vec<f64>> = results
        .latency
        .iter()
        .map(|rounds| rounds.iter().map(|r| quantile(r, 0.99)).collect())
        .collect();
    let added = |q: &[Vec<f64>], s: usize| -> Spread {
        Spread::of(
            &q[s]
                .iter()
                .zip(&q[direct])
                .map(|(a, d)| a - d)
                .collect::<Vec<_>>(),
        )
    };
    let mut table = Table::new(
        format!(
            "tools/call echo at 1 client: round trip, µs ({} rounds of {} calls)",
            sizes.rounds,
            number(sizes.latency_calls as f64, 0)
        ),
        &["stack", "p50", "p99", "added p50", "added p99"],
    );
    for (s, name) in names.iter().enumerate() {
        let (a50, a99) = if s == direct {
            ("—".to_owned(), "—".to_owned())
        } else {
            (added(&p50, s).show(0), added(&p99, s).show(0))
        };
        table.row(vec![
            (*name).to_owned(),
            Spread::of(&p50[s]).show(0),
            Spread::of(&p99[s]).show(0),
            a50,
            a99,
        ]);
    }
    table.note(
        "Added = the stack's figure minus direct's in the same round (the extra hop and \
         whatever the stack does), then the median (min–max) over rounds.",
    );
    report.tables.push(table);

    // (b) throughput.
    let rate = |s: usize, c: usize| {
        Spread::of(
            &results.throughput[s][c]
                .iter()
                .map(Round::rate)
                .collect::<Vec<_>>(),
        )
    };
    let mut header = vec!["stack".to_owned()];
    for c in CONCURRENCY {
        header.push(format!("{c} clients, calls/s"));
        header.push("vs direct".into());
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = Table::new(
        format!(
            "tools/call echo throughput ({} rounds of {} s per concurrency)",
            sizes.rounds, sizes.throughput_secs
        ),
        &header,
    );
    for (s, name) in names.iter().enumerate() {
        let mut row = vec![(*name).to_owned()];
        for c in 0..CONCURRENCY.len() {
            row.push(rate(s, c).show(0));
            row.push(ratio(rate(s, c).median, rate(direct, c).median));
        }
        table.row(row);
    }
    table.note(
        "Every process competes for the same cores: a stack that spends more CPU per call also \
         leaves less to the load generator and the upstream.",
    );
    report.tables.push(table);

    // (c) CPU per call.
    let stack_cpu = |s: usize, c: usize| -> Option<Spread> {
        let per: Option<Vec<f64>> = results.throughput[s][c]
            .iter()
            .map(Round::stack_us_per_call)
            .collect();
        per.map(|p| Spread::of(&p))
    };
    let upstream_cpu = |s: usize, c: usize| {
        Spread::of(
            &results.throughput[s][c]
                .iter()
                .map(Round::upstream_us_per_call)
                .collect::<Vec<_>>(),
        )
    };
    let mut header = vec!["stack".to_owned()];
    for c in CONCURRENCY {
        header.push(format!("stack CPU µs/call, {c} clients"));
        header.push("vs bare proxy".into());
    }
    for c in CONCURRENCY {
        header.push(format!("upstream CPU µs/call, {c} clients"));
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = Table::new(
        "CPU per call (user + system, from /proc), over the throughput rounds",
        &header,
    );
    for (s, name) in names.iter().enumerate() {
        let mut row = vec![(*name).to_owned()];
        for c in 0..CONCURRENCY.len() {
            match (stack_cpu(s, c), stack_cpu(proxy, c)) {
                (Some(ours), Some(floor)) => {
                    row.push(ours.show(1));
                    row.push(ratio(ours.median, floor.median));
                }
                _ => {
                    row.push("— (no process)".into());
                    row.push("—".into());
                }
            }
        }
        for c in 0..CONCURRENCY.len() {
            row.push(upstream_cpu(s, c).show(1));
        }
        table.row(row);
    }
    table.note(
        "The stack's CPU is its process and any children (ContextForge: the uvicorn process). \
         The upstream's column is the same upstream's CPU per call as each stack drives it: \
         work a stack causes upstream (sessions opened per call, extra requests) shows there. \
         Each ContextForge also health-checks the upstream every 60 s (its default).",
    );
    report.tables.push(table);

    // (d) cancels.
    let mut table = Table::new(
        "API cancel → upstream tool stopped, ms",
        &[
            "stack, door, when",
            "samples",
            "cancel API said",
            "API answered, p50",
            "stopped",
            "p50",
            "p99",
            "session DELETE reached upstream, p50",
        ],
    );
    let mut cancel_data = Vec::new();
    for series in &results.cancels {
        let all: Vec<&Cancel> = series.rounds.iter().flatten().collect();
        let stopped_rounds: Vec<Vec<f64>> = series
            .rounds
            .iter()
            .map(|r| r.iter().filter_map(|c| c.stopped_us).map(ms).collect())
            .filter(|r: &Vec<f64>| !r.is_empty())
            .collect();
        let stopped = all.iter().filter(|c| c.stopped_us.is_some()).count();
        let mut statuses: Vec<&str> = all.iter().map(|c| c.status.as_str()).collect();
        statuses.sort_unstable();
        statuses.dedup();
        let deleted: Vec<f64> = all.iter().filter_map(|c| c.deleted_us).map(ms).collect();
        let (q50, q99) = if stopped_rounds.is_empty() {
            ("—".to_owned(), "—".to_owned())
        } else {
            (
                per_round(&stopped_rounds, 0.5).show(2),
                per_round(&stopped_rounds, 0.99).show(2),
            )
        };
        let answered: Vec<f64> = all.iter().map(|c| ms(c.answered_us)).collect();
        table.row(vec![
            format!(
                "{}, {}, {}",
                series.stack,
                door_name(series.door),
                series.phase
            ),
            number(all.len() as f64, 0),
            statuses.join(", "),
            number(quantile(&answered, 0.5), 2),
            format!("{stopped} of {}", all.len()),
            q50,
            q99,
            if 2 * deleted.len() < all.len() {
                // Not how this stack cancels: a stray DELETE (another client's) at most.
                "—".into()
            } else {
                format!(
                    "{} ({} samples)",
                    number(quantile(&deleted, 0.5), 2),
                    deleted.len()
                )
            },
        ]);
        cancel_data.push(json!({
            "stack": series.stack,
            "door": series.door,
            "phase": series.phase,
            "samples": series.rounds,
        }));
    }
    if let Some(probe) = &results.forge_mcp_probe {
        table.row(vec![
            "ContextForge, call at its MCP endpoint".into(),
            "1 (probe)".into(),
            probe.status.clone(),
            number(ms(probe.answered_us), 2),
            if probe.stopped_us.is_some() {
                "1 of 1".into()
            } else {
                "0 of 1: not available".into()
            },
            probe.stopped_us.map_or("—".into(), |us| number(ms(us), 2)),
            "—".into(),
            "—".into(),
        ]);
        table.note(format!(
            "ContextForge {}'s cancel API finds only runs its `/rpc` handler registered \
             (mcpgateway/main.py, `_execute_rpc_tools_call` calls \
             `cancellation_service.register_run`); a `tools/call` at its MCP endpoint goes \
             through `call_tool` in mcpgateway/transports/streamablehttp_transport.py, which \
             registers nothing, so the API answers `queued` and the call runs on (probe: a {} s \
             sleep; the caller got: {}).",
            contextforge::VERSION,
            super::PROBE_SLEEP_SECS,
            probe.answer
        ));
    }
    table.note(
        "ContextForge's `/rpc` opens an upstream MCP session per call and cancels by ending it \
         (a `DELETE` of the session; no `notifications/cancelled`). rmcp 3.11 lets the handlers \
         of a closed session run on for up to 5 s (rmcp src/service.rs: the drain timeout for \
         `QuitReason::Closed`) before it cancels them, so the tool's stop lands about 5 s \
         later; the DELETE column is when ContextForge's cancel reached the upstream.",
    );
    table.note(
        "The cancelkit gateway speaks 2026-07-28 to this upstream (rmcp serves it) and cancels \
         a call by closing its response stream.",
    );
    let answered = |phase: &str| {
        let samples: Vec<f64> = results
            .cancels
            .iter()
            .filter(|c| c.phase == phase && c.stack == names[gateway])
            .flat_map(|c| c.rounds.iter().flatten().map(|c| ms(c.answered_us)))
            .collect();
        (!samples.is_empty()).then(|| quantile(&samples, 0.5))
    };
    let slowed = match (answered(super::BEFORE_LOAD), answered(super::AFTER_LOAD)) {
        (Some(before), Some(after)) if after > 2.0 * before => format!(
            " Here its answer took {} ms (p50) after the load rounds against {} ms before.",
            number(after, 2),
            number(before, 2)
        ),
        _ => String::new(),
    };
    table.note(format!(
        "Before the load rounds the gateway had finished {} tool calls, after them {}. It keeps \
         the status of up to 100,000 finished runs for 300 s (its defaults `max_retained` and \
         `cancellation.status_retention`); its cancel API finds the request id in an index of the \
         runs by id (gateway/src/runs/mod.rs, `local_matches`), so the answer should not slow \
         with their number.{slowed}",
        number(results.gateway_runs[0] as f64, 0),
        number(results.gateway_runs[1] as f64, 0)
    ));
    report.tables.push(table);
    if !results.forge_missing.is_empty() {
        let mut table = Table::new("ContextForge not measured", &["why"]);
        for missing in &results.forge_missing {
            table.row(vec![missing.lines().next().unwrap_or("").to_owned()]);
        }
        report.tables.push(table);
    }

    // Targets.
    let gateway_added = added(&p50, gateway);
    report.target(
        "cancelkit gateway adds ≤ 0.1 ms p50 over direct at 1 client",
        format!(
            "{} µs (bare proxy: {} µs)",
            number(gateway_added.median, 0),
            number(added(&p50, proxy).median, 0)
        ),
        gateway_added.median <= 100.0,
    );
    for (c, clients) in CONCURRENCY.iter().enumerate() {
        if let (Some(ours), Some(floor)) = (stack_cpu(gateway, c), stack_cpu(proxy, c)) {
            report.target(
                format!(
                    "cancelkit gateway CPU per call ≤ 1.5 × the bare proxy's, {clients} clients"
                ),
                format!(
                    "{} µs vs {} µs = {}",
                    number(ours.median, 1),
                    number(floor.median, 1),
                    ratio(ours.median, floor.median)
                ),
                ours.median <= 1.5 * floor.median,
            );
        }
    }

    report.data = json!({
        "sizes": {
            "rounds": sizes.rounds,
            "latency_calls": sizes.latency_calls,
            "throughput_seconds": sizes.throughput_secs,
            "concurrency": CONCURRENCY,
            "cancels_per_round": sizes.cancels_per_round,
            "slow_cancels_per_round": sizes.slow_cancels_per_round,
        },
        "stacks": names,
        "loadavg": results.load,
        "gateway_runs_before_cancels": results.gateway_runs,
        "contextforge": {
            "version": contextforge::VERSION,
            "settings": contextforge::ENV.iter().map(|(k, v, why)| json!({"name": k, "value": v, "why": why})).collect::<Vec<_>>(),
            "missing": results.forge_missing,
            "mcp_cancel_probe": results.forge_mcp_probe,
        },
        "latency_us": results.latency,
        "throughput": results.throughput,
        "cancels": cancel_data,
    });
    report
}
