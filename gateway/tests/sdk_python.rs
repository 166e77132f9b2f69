//! The official MCP Python SDK (`mcp` 2.3.0, pinned with every dependency in
//! tests/python/requirements.txt, installed into a venv under target/interop/python on first use)
//! as a client of the gateway's `/mcp` over Streamable HTTP, with a bearer token for alice on its
//! HTTP client. The client is tests/python/gateway_client.py; it taps the HTTP exchanges below
//! the SDK, so what the gateway really sent is asserted on, not what the SDK made of it.
//!
//! In both eras the SDK speaks — 2026-07-28 (`ClientSession.discover()`: no session, stamped
//! requests; the SDK cancels by closing the call's POST stream) and 2025-11-25
//! (`ClientSession.initialize()`: a session; the SDK cancels with a POSTed
//! `notifications/cancelled`) — the client lists the tools, calls echo, gets `demo-sleep`'s
//! progress; aborts a slow sleep (anyio cancel scope): the upstream tool stops, the run is
//! cancelled by the client and gets no response; an admin cancels another slow sleep through the
//! cancellation API: the SDK's call fails with -32800 carrying the run id and `partial: false`;
//! and the client keeps working. At 2025-11-25 the SDK resumes each cancelled call's stream
//! (`GET` with `Last-Event-ID`, about 1 s and 2 s after it ended): the client stays in the
//! session past them, each must be answered 405, none resumed more than twice, and the client
//! still works afterwards; in both eras the SDK must log nothing at WARNING or above.
//!
//! Each scenario runs through each upstream under test ([`UpstreamUnderTest`]): the demo upstream
//! on stdio, and rmcp's Streamable HTTP server with the demo's tools ([`HttpDemo`]), spoken to
//! at 2026-07-28 (the gateway cancels a call upstream by closing its response stream) and,
//! limited to 2025-11-25, at 2025-11-25 (the gateway POSTs `notifications/cancelled` with its
//! own id for the call); there the upstream's tap shows each stop arrived that way. One test
//! runs them, 3 cases at a time.
//!
//! And through third-party upstreams ([`ThirdParty`], one test, its servers started once):
//! server-everything on stdio and over Streamable HTTP (the gateway speaks 2025-11-25 to it and
//! cancels with `notifications/cancelled`), and FastMCP over Streamable HTTP (2026-07-28: the
//! gateway cancels by closing the call's stream), each in both eras — so each is cancelled by
//! the client's `notifications/cancelled` (2025-11-25), by the client's closed stream
//! (2026-07-28) and by the API (both). FastMCP's log shows its tool stopped; server-everything's
//! wire shows it was told and dropped the result; the client gets no progress after a cancel.
//! Python is required: without it these tests fail, they never skip.

mod support;

use support::sdk::{
    CancelBy, Case, Demo, Era, Expected, Resumes, Script, ThirdParty, UpstreamUnderTest, Which,
    run_cases, run_scenarios, start_gateway,
};
use support::token;

/// The Python SDK against a gateway in front of `upstream`, in `era`.
async fn python_sdk(upstream: &dyn UpstreamUnderTest, era: Era, cancel_by: CancelBy) {
    let gateway = start_gateway(upstream);
    let url = gateway.url("/mcp");
    let how = match era {
        Era::V2025 => "initialize",
        Era::V2026 => "discover",
    };
    let tools = upstream.tools().script_arg();
    let script = Script::python("gateway_client.py", &[&url, &token("alice"), how, &tools]);
    let expected = Expected {
        era,
        abort_reason: match era {
            // The reason the SDK's notifications/cancelled gives.
            Era::V2025 => "caller cancelled",
            // A closed stream has no reason: the gateway says what happened.
            Era::V2026 => "the client closed the response stream",
        },
        abort_outcome: "cancelled",
        cancel_by,
        // It resumes a stream that ended without any response: not the one answered -32800.
        resumes: Resumes::WithoutResponse,
    };
    run_scenarios(&gateway, upstream, script, &expected).await;
}

/// Through the demo upstreams: on stdio, and over Streamable HTTP at 2026-07-28 and at
/// 2025-11-25, each in both eras (the 2025-11-25 cases first: they wait longest, for the
/// SDK's resumes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn python_sdk_2025_11_25_and_2026_07_28_through_the_demo_upstreams() {
    let mut cases: Vec<Case> = Vec::new();
    for (demo, era, cancel_by) in [
        (Demo::Stdio, Era::V2025, CancelBy::BareId),
        (Demo::Http(Era::V2026), Era::V2025, CancelBy::RunId),
        (Demo::Http(Era::V2025), Era::V2025, CancelBy::BareId),
        (Demo::Stdio, Era::V2026, CancelBy::RunId),
        (Demo::Http(Era::V2026), Era::V2026, CancelBy::BareId),
        (Demo::Http(Era::V2025), Era::V2026, CancelBy::RunId),
    ] {
        cases.push((
            format!("Python SDK at {} through {demo:?}", era.version()),
            Box::pin(async move {
                let upstream = demo.start().await;
                python_sdk(&*upstream, era, cancel_by).await;
            }),
        ));
    }
    run_cases(3, cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn python_sdk_2025_11_25_and_2026_07_28_through_third_party_upstreams() {
    let servers = std::sync::Arc::new(ThirdParty::start().await);
    let mut cases: Vec<Case> = Vec::new();
    for which in Which::ALL {
        for (era, cancel_by) in [
            (Era::V2025, CancelBy::BareId),
            (Era::V2026, CancelBy::RunId),
        ] {
            let servers = std::sync::Arc::clone(&servers);
            cases.push((
                format!("Python SDK at {} through {which:?}", era.version()),
                Box::pin(async move {
                    let upstream = servers.upstream(which).await;
                    python_sdk(&*upstream, era, cancel_by).await;
                }),
            ));
        }
    }
    run_cases(3, cases).await;
}
