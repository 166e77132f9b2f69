//! `cargo xtask bench load`: the full-size run of the load test in
//! `tests/tests/load_mcp_server.rs` — the `mcp_server` example (release build, default
//! settings) flooded with 1,000,000 slow `tools/call` requests by a client that reads nothing
//! for five seconds, then reads again, cancels, and pings.

use std::time::Duration;

use cancelkit::peer::DEFAULT_MAX_IN_FLIGHT;
use cancelkit_tests::load::{CANCELLED, mcp_server_backlog};

use serde_json::json;

use crate::report::{Report, Table, number};

const REQUESTS: usize = 1_000_000;
const STALL: Duration = Duration::from_secs(5);
const RSS_BOUND: u64 = 256 << 20;

/// Runs the benchmark (one full-size run) and writes `target/bench/load.json`.
pub fn run() {
    let server = cancelkit_tests::example_in_profile("mcp_server", &[], "release");
    let run = mcp_server_backlog(&server, REQUESTS, STALL);
    let mut report = Report::new(
        "load",
        format!(
            "The `mcp_server` example (release build, default settings, concurrency limit {}) \
             over stdio pipes, flooded with {} `tools/call` requests that each sleep an hour, by \
             a client that reads nothing for {} s, then reads again, cancels the first \
             {CANCELLED} requests and sends a ping and an echo call. One full-size run, not \
             rounds: the figures are that run's. The same scenario runs smaller in \
             `tests/tests/load_mcp_server.rs`.",
            number(DEFAULT_MAX_IN_FLIGHT as f64, 0),
            number(REQUESTS as f64, 0),
            STALL.as_secs()
        ),
    );
    let mib = |bytes: u64| number(bytes as f64 / (1024.0 * 1024.0), 1);
    let expected_refused = REQUESTS - DEFAULT_MAX_IN_FLIGHT;
    let mut table = Table::new(
        format!(
            "load: mcp_server (release, defaults), {} slow tools/call, client not reading for {} s (one run)",
            number(REQUESTS as f64, 0),
            STALL.as_secs()
        ),
        &["measure", "value", "target"],
    );
    table.row(vec![
        "client's writes stalled while it read nothing".into(),
        if run.writes_stalled {
            format!(
                "yes, after {} requests",
                number(run.written_when_stalled as f64, 0)
            )
        } else {
            "no".into()
        },
        "yes".into(),
    ]);
    table.row(vec![
        "server peak RSS while not read, MiB".into(),
        mib(run.peak_rss_stalled),
        "< 256".into(),
    ]);
    table.row(vec![
        "server peak RSS over the run, MiB".into(),
        mib(run.peak_rss),
        "< 256".into(),
    ]);
    table.row(vec![
        "refused with -32050".into(),
        number(run.refused as f64, 0),
        number(expected_refused as f64, 0),
    ]);
    table.row(vec![
        "other answers before the end".into(),
        number(run.other_answers as f64, 0),
        "-".into(),
    ]);
    table.row(vec![
        "reading again → ping answered, s".into(),
        number(run.ping_after.as_secs_f64(), 2),
        "-".into(),
    ]);
    table.row(vec![
        "ping/echo refused right after the cancels, sent again".into(),
        run.retries_after_cancel.to_string(),
        "-".into(),
    ]);
    table.row(vec![
        "echo served after the cancels".into(),
        if run.echo_served { "yes" } else { "no" }.into(),
        "yes".into(),
    ]);
    table.row(vec![
        "cancelled requests answered / stopped".into(),
        format!(
            "{} / {}",
            run.answered_after_cancel, run.stopped_after_cancel
        ),
        format!("0 / {CANCELLED}"),
    ]);
    table.note(
        "The requests past the concurrency limit are refused at once with -32050 Server \
         overloaded; the ones under it sleep until cancelled or the end of the run.",
    );
    report.tables.push(table);

    report.target(
        "the server stops reading when its answers are not read (the client's writes stall)",
        if run.writes_stalled {
            format!(
                "stalled after {} requests",
                number(run.written_when_stalled as f64, 0)
            )
        } else {
            "never stalled".into()
        },
        run.writes_stalled,
    );
    report.target(
        "server peak RSS < 256 MiB while not read",
        format!("{} MiB", mib(run.peak_rss_stalled)),
        run.peak_rss_stalled < RSS_BOUND,
    );
    report.target(
        "server peak RSS < 256 MiB over the run",
        format!("{} MiB", mib(run.peak_rss)),
        run.peak_rss < RSS_BOUND,
    );
    report.target(
        format!(
            "every request past the limit refused with -32050 ({})",
            number(expected_refused as f64, 0)
        ),
        number(run.refused as f64, 0),
        run.refused == expected_refused,
    );
    report.target(
        format!("the {CANCELLED} cancelled requests get no answer and their tools stop"),
        format!(
            "{} answered, {} stopped",
            run.answered_after_cancel, run.stopped_after_cancel
        ),
        run.answered_after_cancel == 0 && run.stopped_after_cancel == CANCELLED,
    );
    report.data = json!({
        "requests": run.requests,
        "stall_s": STALL.as_secs_f64(),
        "max_in_flight": DEFAULT_MAX_IN_FLIGHT,
        "writes_stalled": run.writes_stalled,
        "written_when_stalled": run.written_when_stalled,
        "peak_rss_stalled_bytes": run.peak_rss_stalled,
        "peak_rss_bytes": run.peak_rss,
        "refused": run.refused,
        "other_answers": run.other_answers,
        "ping_after_s": run.ping_after.as_secs_f64(),
        "retries_after_cancel": run.retries_after_cancel,
        "echo_served": run.echo_served,
        "answered_after_cancel": run.answered_after_cancel,
        "stopped_after_cancel": run.stopped_after_cancel,
    });
    report.finish();
}
