//! The `mcp_server` example with its default settings under a flood it cannot keep up with: a
//! client writes 300,000 slow `tools/call` requests and reads none of the answers for a while.
//! The server refuses what is beyond its in-flight bound, stops reading once its output is
//! full, stays small, and — once the client reads again — drains its backlog, answers a `ping`
//! sent after it, and applies cancels. `cargo xtask bench load` runs the same with 1,000,000.

use std::time::Duration;

use cancelkit::peer::DEFAULT_MAX_IN_FLIGHT;
use cancelkit_tests::load::{CANCELLED, mcp_server_backlog};

#[test]
fn a_flood_that_is_not_read_keeps_the_server_small_and_it_recovers() {
    const REQUESTS: usize = 300_000;
    let server = cancelkit_tests::example("mcp_server");
    let report = mcp_server_backlog(&server, REQUESTS, Duration::from_secs(1));
    eprintln!("{report:#?}");
    assert!(
        report.writes_stalled,
        "the server stopped reading: {report:?}"
    );
    assert!(
        report.peak_rss_stalled < 256 * 1024 * 1024,
        "peak RSS while not read: {} MiB",
        report.peak_rss_stalled >> 20
    );
    assert_eq!(
        report.refused,
        REQUESTS - DEFAULT_MAX_IN_FLIGHT,
        "every request beyond the bound refused, none dropped: {report:?}"
    );
    assert_eq!(report.other_answers, 0, "{report:?}");
    assert!(report.echo_served, "{report:?}");
    assert_eq!(report.answered_after_cancel, 0, "{report:?}");
    assert_eq!(report.stopped_after_cancel, CANCELLED, "{report:?}");
}
