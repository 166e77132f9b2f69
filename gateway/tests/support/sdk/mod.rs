//! The official MCP SDKs as clients of the gateway's `/mcp`: the upstream under test, a driver
//! for the client scripts of `tests/python` and `tests/node` (JSON lines out, a go-ahead line
//! in, a hard time limit), and the admin's view of a run (status, metrics).
//!
//! The scenarios of `sdk_python.rs` and `sdk_typescript.rs` take an [`UpstreamUnderTest`]: the
//! demo upstream on stdio ([`StdioDemo`]), or rmcp's Streamable HTTP server in the test process
//! with the demo's tools ([`HttpDemo`]), which the gateway speaks to at 2026-07-28 or, when it
//! is limited to 2025-11-25, at 2025-11-25; or a third-party server ([`Everything`]: the
//! reference server-everything on stdio or over Streamable HTTP; [`FastMcp`]: a FastMCP server
//! over Streamable HTTP), several of them run at once by [`run_cases`].

mod cases;
mod everything;
mod fastmcp;
mod resumes;
mod scenarios;
mod script;
mod third_party;
mod upstream;
mod wire;
mod wire_tap;

// Re-exported whole: each test binary that includes `support` uses a part, or none.
#[allow(unused_imports)]
pub use cases::{Case, run_cases};
#[allow(unused_imports)]
pub use everything::Everything;
#[allow(unused_imports)]
pub use fastmcp::FastMcp;
#[allow(unused_imports)]
pub use resumes::{RESUME_WAIT_MS, Resumes};
#[allow(unused_imports)]
pub use scenarios::{
    CancelBy, Era, Expected, run_scenarios, wait_for_idle_upstream, wait_for_no_runs,
};
#[allow(unused_imports)]
pub use script::{Report, SCRIPT_LIMIT, Script};
#[allow(unused_imports)]
pub use third_party::{ThirdParty, Which};
#[allow(unused_imports)]
pub use upstream::{Demo, HttpDemo, STOP_LINE, StdioDemo, Tools, UpstreamUnderTest};

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Gateway, Options, client, token};

/// Starts a gateway (users admin, alice, bob as in [`super::config`]) in front of `upstream`.
pub fn start_gateway(upstream: &dyn UpstreamUnderTest) -> Gateway {
    let config = format!(
        r#"
listen = "127.0.0.1:0"

[auth.permissions]
admin = ["admin.system_config", "tools.execute"]
alice = ["tools.execute"]
bob = ["tools.execute"]

{}"#,
        upstream.config()
    );
    Gateway::with(Options {
        config,
        lazy_upstreams: !upstream.connects_at_start(),
        ..Options::default()
    })
}

/// Waits until `upstream` reported `count` stops; panics with its log after `within`.
pub async fn wait_for_stops(
    upstream: &dyn UpstreamUnderTest,
    gateway: &Gateway,
    count: usize,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    loop {
        let stops = upstream.stops(gateway);
        if stops >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the {} reported {stops} stopped slow calls, not {count}, within {within:?}:\n{}",
            upstream.kind(),
            plain(&upstream.log(gateway))
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `text` without ANSI escape sequences (the gateway's log is coloured).
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte (a letter).
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `GET /cancellation/status/{selector}` as admin: the HTTP status and the body.
pub async fn status(gateway: &Gateway, selector: &str) -> (u16, Value) {
    let response = client()
        .get(gateway.url(&format!("/cancellation/status/{selector}")))
        .bearer_auth(token("admin"))
        .send()
        .await
        .expect("status request");
    let code = response.status().as_u16();
    (code, response.json().await.unwrap_or(Value::Null))
}

/// `POST /cancellation/cancel` as admin: the HTTP status and the body.
pub async fn cancel(gateway: &Gateway, selector: &str, reason: &str) -> (u16, Value) {
    let response = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token("admin"))
        .json(&json!({"requestId": selector, "reason": reason}))
        .send()
        .await
        .expect("cancel request");
    let code = response.status().as_u16();
    (code, response.json().await.unwrap_or(Value::Null))
}

/// `cancelkit_gateway_cancels_total{source="<source>"}` from `/metrics`.
pub async fn cancels_total(gateway: &Gateway, source: &str) -> f64 {
    let text = client()
        .get(gateway.url("/metrics"))
        .send()
        .await
        .expect("metrics request")
        .text()
        .await
        .expect("metrics body");
    let series = format!("cancelkit_gateway_cancels_total{{source=\"{source}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
        .trim()
        .parse()
        .expect("a number")
}

/// `cancelkit_gateway_upstream_cancels_total{upstream="<name>"}` from `/metrics`: the cancels
/// the gateway sent that upstream (0 before the first).
pub async fn upstream_cancels(gateway: &Gateway, name: &str) -> f64 {
    let text = super::metrics(gateway).await;
    let series = format!("cancelkit_gateway_upstream_cancels_total{{upstream=\"{name}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map_or(0.0, |n| n.trim().parse().expect("a number"))
}

/// Waits (at most 5 s) until the gateway counted `count` cancels sent to the upstream `name`.
pub async fn wait_for_upstream_cancels(gateway: &Gateway, name: &str, count: f64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let sent = upstream_cancels(gateway, name).await;
        if sent == count {
            return;
        }
        assert!(
            sent < count && Instant::now() < deadline,
            "the gateway counted {sent} cancels sent to the upstream `{name}`, not {count}:\n{}",
            plain(&gateway.stderr())
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A `requestId` as the cancellation API takes it.
fn selector(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
