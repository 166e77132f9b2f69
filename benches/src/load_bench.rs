//! `cargo xtask bench load`: the full-size run of the load test in
//! `tests/tests/load_mcp_server.rs` — the `mcp_server` example (release build, default
//! settings) flooded with 1,000,000 slow `tools/call` requests by a client that reads nothing
//! for five seconds, then reads again, cancels, and pings.

use std::time::Duration;

use cancelkit::peer::DEFAULT_MAX_IN_FLIGHT;
use cancelkit_tests::load::{CANCELLED, mcp_server_backlog};

use crate::report::{Row, print_table, save_json};

const REQUESTS: usize = 1_000_000;

pub fn run() {
    let server = cancelkit_tests::example_in_profile("mcp_server", &[], "release");
    let report = mcp_server_backlog(&server, REQUESTS, Duration::from_secs(5));
    let mib = |bytes: u64| format!("{:.1}", bytes as f64 / (1024.0 * 1024.0));
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" }.to_owned();
    let rows = vec![
        Row {
            name: "client's writes stalled while it read nothing".into(),
            cells: vec![
                format!(
                    "{} (after {} requests)",
                    report.writes_stalled, report.written_when_stalled
                ),
                "yes".into(),
                verdict(report.writes_stalled),
            ],
        },
        Row {
            name: "server peak RSS while not read, MiB".into(),
            cells: vec![
                mib(report.peak_rss_stalled),
                "< 256".into(),
                verdict(report.peak_rss_stalled < 256 << 20),
            ],
        },
        Row {
            name: "server peak RSS over the run, MiB".into(),
            cells: vec![
                mib(report.peak_rss),
                "< 256".into(),
                verdict(report.peak_rss < 256 << 20),
            ],
        },
        Row {
            name: "refused with -32050".into(),
            cells: vec![
                report.refused.to_string(),
                (REQUESTS - DEFAULT_MAX_IN_FLIGHT).to_string(),
                verdict(report.refused == REQUESTS - DEFAULT_MAX_IN_FLIGHT),
            ],
        },
        Row {
            name: "reading again -> ping answered, s".into(),
            cells: vec![
                format!("{:.2}", report.ping_after.as_secs_f64()),
                "-".into(),
                "-".into(),
            ],
        },
        Row {
            name: "ping/echo refused right after the cancels, sent again".into(),
            cells: vec![
                report.retries_after_cancel.to_string(),
                "-".into(),
                "-".into(),
            ],
        },
        Row {
            name: "cancelled requests answered / stopped".into(),
            cells: vec![
                format!(
                    "{} / {}",
                    report.answered_after_cancel, report.stopped_after_cancel
                ),
                format!("0 / {CANCELLED}"),
                verdict(
                    report.answered_after_cancel == 0 && report.stopped_after_cancel == CANCELLED,
                ),
            ],
        },
    ];
    print_table(
        "load: mcp_server (release, defaults), 1,000,000 slow tools/call, client not reading for 5 s",
        &["measure", "value", "target", ""],
        &rows,
    );
    save_json(
        "load",
        &serde_json::json!({
            "requests": report.requests,
            "writes_stalled": report.writes_stalled,
            "written_when_stalled": report.written_when_stalled,
            "peak_rss_stalled_bytes": report.peak_rss_stalled,
            "peak_rss_bytes": report.peak_rss,
            "refused": report.refused,
            "ping_after_s": report.ping_after.as_secs_f64(),
            "retries_after_cancel": report.retries_after_cancel,
            "answered_after_cancel": report.answered_after_cancel,
            "stopped_after_cancel": report.stopped_after_cancel,
        }),
    );
}
