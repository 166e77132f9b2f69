//! The official TypeScript MCP SDK (@modelcontextprotocol/sdk 1.32.2, pinned with its lock file
//! in tests/node, installed under target/interop/node on first use) as a client of the
//! gateway's `/mcp`: `StreamableHTTPClientTransport` with alice's bearer token in
//! `requestInit.headers`, at 2025-11-25 (the revision this SDK speaks). The client is
//! tests/node/gateway_client.mjs; it taps the HTTP exchanges below the SDK (its `fetch`
//! option), so what the gateway really sent is asserted on.
//!
//! The client lists the tools, calls echo, gets `demo-sleep`'s progress through `onprogress`;
//! aborts a slow sleep with an AbortController: the SDK sends `notifications/cancelled`, the
//! upstream tool stops, the run is cancelled by the client and gets no response; an admin
//! cancels another slow sleep through the cancellation API: the call rejects with -32800
//! carrying the run id and `partial: false`; and the client keeps working.
//!
//! The scenario takes the upstream under test ([`UpstreamUnderTest`]): today the demo upstream
//! on stdio; a Streamable HTTP upstream is one more implementation and one more test.
//! Node and npm are required: without them this test fails, it never skips.

mod support;

use support::sdk::{
    CancelBy, Era, Expected, Script, StdioDemo, UpstreamUnderTest, run_scenarios, start_gateway,
};
use support::token;

/// The TypeScript SDK against a gateway in front of `upstream`.
async fn typescript_sdk(upstream: &dyn UpstreamUnderTest, cancel_by: CancelBy) {
    let gateway = start_gateway(upstream);
    let url = gateway.url("/mcp");
    let script = Script::node("gateway_client.mjs", &[&url, &token("alice")]);
    let expected = Expected {
        era: Era::V2025,
        // The AbortSignal's reason, which the SDK puts in notifications/cancelled.
        abort_reason: "user pressed stop",
        // The SDK rejects an aborted call at once, by itself.
        abort_outcome: "rejected",
        cancel_by,
    };
    run_scenarios(&gateway, upstream, script, &expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_2025_11_25_through_a_stdio_upstream() {
    typescript_sdk(&StdioDemo, CancelBy::BareId).await;
}
