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
//! carrying the run id and `partial: false`; and the client keeps working. The SDK resumes the
//! stream of each cancelled call and of the one answered -32800 (`GET` with `Last-Event-ID`,
//! about 1 s after it ended): the client stays in the session past that, each resume must be
//! answered 405, none repeated more than twice, the SDK's `onerror` must never be called, and
//! the client still works afterwards.
//!
//! The scenario runs through each upstream under test ([`UpstreamUnderTest`]): the demo upstream
//! on stdio, and rmcp's Streamable HTTP server with the demo's tools ([`HttpDemo`]), spoken to
//! at 2026-07-28 (the gateway cancels a call upstream by closing its response stream) and,
//! limited to 2025-11-25, at 2025-11-25 (the gateway POSTs `notifications/cancelled` with its
//! own id for the call); there the upstream's tap shows each stop arrived that way. One test
//! runs them, all at once.
//!
//! And through third-party upstreams ([`ThirdParty`], one test, its servers started once):
//! server-everything on stdio and over Streamable HTTP, FastMCP over Streamable HTTP, each
//! cancelled by the client's abort and by the API. This SDK speaks 2025-11-25 at the latest
//! (1.32.2's `LATEST_PROTOCOL_VERSION`): a closed stream is no cancel there, so the cancel by a
//! closed stream (2026-07-28) is the Python SDK's test.
//! Node and npm are required: without them these tests fail, they never skip.

mod support;

use support::sdk::{
    CancelBy, Case, Demo, Era, Expected, Resumes, Script, ThirdParty, UpstreamUnderTest, Which,
    run_cases, run_scenarios, start_gateway,
};
use support::token;

/// The TypeScript SDK against a gateway in front of `upstream`.
async fn typescript_sdk(upstream: &dyn UpstreamUnderTest, cancel_by: CancelBy) {
    let gateway = start_gateway(upstream);
    let url = gateway.url("/mcp");
    let tools = upstream.tools().script_arg();
    let script = Script::node("gateway_client.mjs", &[&url, &token("alice"), &tools]);
    let expected = Expected {
        era: Era::V2025,
        // The AbortSignal's reason, which the SDK puts in notifications/cancelled.
        abort_reason: "user pressed stop",
        // The SDK rejects an aborted call at once, by itself.
        abort_outcome: "rejected",
        cancel_by,
        // It resumes a stream that ended without a result, the one answered -32800 too.
        resumes: Resumes::WithoutResult,
    };
    run_scenarios(&gateway, upstream, script, &expected).await;
}

/// Through the demo upstreams: on stdio, and over Streamable HTTP at 2026-07-28 and at
/// 2025-11-25, all at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn typescript_sdk_2025_11_25_through_the_demo_upstreams() {
    let mut cases: Vec<Case> = Vec::new();
    for (demo, cancel_by) in [
        (Demo::Stdio, CancelBy::BareId),
        (Demo::Http(Era::V2026), CancelBy::RunId),
        (Demo::Http(Era::V2025), CancelBy::BareId),
    ] {
        cases.push((
            format!("TypeScript SDK at 2025-11-25 through {demo:?}"),
            Box::pin(async move {
                let upstream = demo.start().await;
                typescript_sdk(&*upstream, cancel_by).await;
            }),
        ));
    }
    run_cases(3, cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn typescript_sdk_2025_11_25_third_party_upstreams() {
    let servers = std::sync::Arc::new(ThirdParty::start().await);
    let mut cases: Vec<Case> = Vec::new();
    for (which, cancel_by) in
        Which::ALL
            .into_iter()
            .zip([CancelBy::BareId, CancelBy::RunId, CancelBy::BareId])
    {
        let servers = std::sync::Arc::clone(&servers);
        cases.push((
            format!("TypeScript SDK at 2025-11-25 through {which:?}"),
            Box::pin(async move {
                let upstream = servers.upstream(which).await;
                typescript_sdk(&*upstream, cancel_by).await;
            }),
        ));
    }
    run_cases(3, cases).await;
}
