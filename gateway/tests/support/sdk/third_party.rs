//! Third-party upstreams under test: the reference server `@modelcontextprotocol/server-everything`
//! (npm, pinned in tests/node/package.json; on stdio, or over Streamable HTTP, where it speaks
//! 2025-11-25) and a FastMCP 4.1.2 server (tests/python/fastmcp_server.py, pinned in
//! tests/python/requirements-fastmcp.txt; over Streamable HTTP, where it speaks 2026-07-28),
//! installed and started by the `cancelkit-tests` crate, on loopback only.
//!
//! How each shows a stop. FastMCP's own log: tests/python/fastmcp_server.py logs each `wait` it
//! started, finished or had cancelled. server-everything logs nothing of it, and its
//! `trigger-long-running-operation` ignores its abort signal (it runs to its natural end,
//! reporting progress as long as it has somewhere to send it); what shows the stop is what
//! crossed the wire between the gateway and it — on stdio a `tee` of each direction, over HTTP a
//! recording proxy (`wire_tap.rs`): the gateway's
//! `notifications/cancelled` naming the call, and no response to the call from the server
//! (its SDK drops a cancelled request's result) even past the call's natural end.

use std::sync::Arc;

use cancelkit_tests::http_peer::HttpPeer;

use super::everything::Everything;
use super::fastmcp::FastMcp;
use super::upstream::UpstreamUnderTest;

/// The abort burst's size through a third-party upstream: enough for cancels that race their
/// calls, and every call that reached the upstream is checked stopped; fewer than the demo's 60,
/// to keep the test short.
pub const THIRD_PARTY_BURST: u64 = 20;

/// The third-party Streamable HTTP servers, each started once and shared by every gateway of a
/// test (each gateway has its own sessions, or none at 2026-07-28).
pub struct ThirdParty {
    everything: Arc<HttpPeer>,
    fastmcp: Arc<HttpPeer>,
}

/// Which third-party upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// server-everything on stdio, a child of the gateway.
    EverythingStdio,
    /// server-everything over Streamable HTTP, behind a [`WireTap`].
    EverythingHttp,
    /// FastMCP over Streamable HTTP.
    FastMcpHttp,
}

impl Which {
    /// All of them.
    pub const ALL: [Which; 3] = [
        Which::EverythingStdio,
        Which::EverythingHttp,
        Which::FastMcpHttp,
    ];
}

impl ThirdParty {
    /// Installs what is missing and starts both servers (at once: FastMCP imports for seconds).
    pub async fn start() -> ThirdParty {
        tokio::task::spawn_blocking(|| {
            std::thread::scope(|s| {
                let fastmcp = s.spawn(cancelkit_tests::python::start_fastmcp_http);
                let everything = cancelkit_tests::node::start_server_everything_http();
                ThirdParty {
                    everything: Arc::new(everything),
                    fastmcp: Arc::new(fastmcp.join().expect("FastMCP starts")),
                }
            })
        })
        .await
        .expect("the servers start")
    }

    /// A fresh upstream under test of this kind (a server-everything on stdio is started by the
    /// gateway; the HTTP servers are shared).
    pub async fn upstream(&self, which: Which) -> Box<dyn UpstreamUnderTest> {
        match which {
            Which::EverythingStdio => Box::new(Everything::stdio()),
            Which::EverythingHttp => Box::new(Everything::http(&self.everything).await),
            Which::FastMcpHttp => Box::new(FastMcp::new(Arc::clone(&self.fastmcp))),
        }
    }
}
