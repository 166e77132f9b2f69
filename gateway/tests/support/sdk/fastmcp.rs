//! The FastMCP server behind the gateway (see `third_party.rs`): its own log shows each stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cancelkit_tests::http_peer::HttpPeer;
use serde_json::json;

use super::third_party::THIRD_PARTY_BURST;
use super::upstream::{Tools, UpstreamUnderTest};
use crate::support::Gateway;

/// How long (ms) FastMCP's slow tool may run before a cancel stops it: the client aborts at its
/// first progress (200 ms), the admin cancels a few ms after it.
const STOPPED_WITHIN_MS: u64 = 2_000;

/// Tells the gateways sharing one FastMCP server apart in its log: each upstream under test's
/// slow call waits a different number of milliseconds.
static NEXT_DELAY: AtomicU64 = AtomicU64::new(30_000);

/// The FastMCP server behind the gateway, named `fastmcp`; its log shows each stop.
pub struct FastMcp {
    server: Arc<HttpPeer>,
    delay_ms: u64,
}

impl FastMcp {
    /// `server`, shared; this upstream's slow calls wait a number of ms of their own.
    pub fn new(server: Arc<HttpPeer>) -> FastMcp {
        FastMcp {
            server,
            delay_ms: NEXT_DELAY.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The lines of FastMCP's log with `event` (`started`, `finished`, `cancelled`) for this
    /// upstream's slow calls.
    fn events(&self, event: &str) -> Vec<String> {
        let needle = format!(
            "fastmcp-server: {event} tools/call wait(delay_ms={})",
            self.delay_ms
        );
        self.server
            .log()
            .lines()
            .filter(|l| l.contains(&needle))
            .map(str::to_owned)
            .collect()
    }
}

impl UpstreamUnderTest for FastMcp {
    fn kind(&self) -> &'static str {
        "FastMCP 4.1.2 over Streamable HTTP (2026-07-28)"
    }

    fn name(&self) -> &'static str {
        "fastmcp"
    }

    fn config(&self) -> String {
        format!(
            "[[upstream]]\nname = \"fastmcp\"\nurl = \"{}\"\n",
            self.server.url()
        )
    }

    fn connects_at_start(&self) -> bool {
        false
    }

    fn tools(&self) -> Tools {
        Tools {
            slow: "fastmcp-wait".into(),
            slow_args: json!({"delay_ms": self.delay_ms}),
            progress_args: json!({"delay_ms": 500}),
            progress_total: 500.0,
            progress_text: "waited 500 ms".into(),
            fast: "fastmcp-add".into(),
            fast_args: json!({"a": 2, "b": 3}),
            fast_text: |_| "5".into(),
            settle_ms: 0,
            burst: THIRD_PARTY_BURST,
        }
    }

    fn log(&self, _gateway: &Gateway) -> String {
        self.server.log()
    }

    fn stops(&self, _gateway: &Gateway) -> usize {
        self.events("cancelled").len()
    }

    fn stops_seen(&self, _gateway: &Gateway) -> Vec<String> {
        let mut seen = self.events("cancelled");
        seen.truncate(2);
        seen.push(format!(
            "{} of its slow calls started, {} cancelled, {} finished",
            self.events("started").len(),
            self.events("cancelled").len(),
            self.events("finished").len()
        ));
        seen
    }

    fn sleeps_running(&self) -> Option<usize> {
        let started = self.events("started").len();
        Some(started.saturating_sub(self.events("cancelled").len() + self.events("finished").len()))
    }

    fn check_stops(&self, gateway: &Gateway) {
        let log = super::plain(&gateway.stderr());
        // The gateway spoke 2026-07-28 to it: it cancelled by closing the call's stream.
        assert!(
            log.lines().any(|l| l.contains("upstream ready")
                && l.contains("upstream=fastmcp")
                && l.contains("2026")),
            "the gateway's handshake with FastMCP:\n{log}"
        );
        // The client abort and the API cancel (then the burst's), each soon after the tool's
        // first progress (at 200 ms): FastMCP logs how long the tool ran.
        let cancelled = self.events("cancelled");
        assert!(cancelled.len() >= 2, "{}", self.server.log());
        for line in &cancelled[..2] {
            let ran: u64 = line
                .rsplit_once(" after ")
                .and_then(|(_, after)| after.strip_suffix(" ms"))
                .and_then(|ms| ms.parse().ok())
                .unwrap_or_else(|| panic!("no time in {line}"));
            assert!(ran < STOPPED_WITHIN_MS, "{line}\n{}", self.server.log());
        }
        assert_eq!(self.events("finished"), Vec::<String>::new());
    }
}
