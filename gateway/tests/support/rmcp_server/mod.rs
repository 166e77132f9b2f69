//! rmcp 3.11's Streamable HTTP MCP server, in-process on 127.0.0.1:0, with these tools:
//! `echo {text}`, `big {bytes}`, `routed {region}` (its `region` annotated `x-mcp-header`),
//! `sleep {seconds, label?}` (progress every 100 ms when asked; records its
//! start, its end, and its cancellation — token fired or future dropped) and `fail` (a
//! JSON-RPC error). A tap in front records every POST body and DELETE, and how the SSE stream
//! answering each request ended; the listener counts the TCP connections the server closed.
//!
//! [`Server::demo`] serves only `echo` and `sleep`, behaving as the gateway's stdio demo
//! upstream does (`sleep`'s progress in seconds slept of its total, its answer
//! `slept {duration:?}`), for the SDK tests' Streamable HTTP upstream (`support::sdk::HttpDemo`).
//! Used by tests/upstream_http/ and, through `support::sdk`, tests/sdk_*.rs.

mod tap;
mod tools;

// Re-exported whole: each test binary that includes `support` uses a part, or none.
#[allow(unused_imports)]
pub use tap::{Ended, Log, Post, Tap, wait_for};

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::tap::{Counting, record};
use self::tools::Tools;

/// Which revisions the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Every revision rmcp knows: 2026-07-28 statelessly, the older ones with sessions.
    Both,
    /// As `Both`, answering with `application/json` rather than an SSE stream where it can
    /// (a response with no notification before it).
    Json,
    /// Only up to 2025-11-25 (a server from before 2026-07-28).
    Legacy,
}

/// The running server.
pub struct Server {
    /// Its MCP endpoint.
    pub url: String,
    /// What its tools did.
    pub log: Log,
    /// What it received.
    pub tap: Tap,
    sessions: Arc<LocalSessionManager>,
    stop: CancellationToken,
}

impl Server {
    /// Starts a server speaking `era`, with every tool.
    pub async fn start(era: Era) -> Server {
        Server::serve(era, false, None).await
    }

    /// Starts a server speaking every revision over HTTPS (cancelkit's TLS listener) with the
    /// server certificate of `ca`; its URL is `https://127.0.0.1:PORT/mcp`. Closed connections
    /// are not counted.
    pub async fn start_tls(ca: &cancelkit_tests::tls::TestCa) -> Server {
        let tls = cancelkit::tls::server_config(&ca.cert_file(), &ca.key_file())
            .expect("the test CA's server certificate loads");
        Server::serve(Era::Both, false, Some(tls)).await
    }

    /// Starts a server speaking `era` with the demo upstream's tools only, behaving as it does.
    pub async fn demo(era: Era) -> Server {
        Server::serve(era, true, None).await
    }

    async fn serve(
        era: Era,
        demo: bool,
        tls: Option<Arc<cancelkit::tls::rustls::ServerConfig>>,
    ) -> Server {
        let log = Log::default();
        let tap = Tap::default();
        let stop = CancellationToken::new();
        let sessions = Arc::new(LocalSessionManager::default());
        let mut router = Tools::tool_router();
        if demo {
            for other in ["big", "routed", "fail"] {
                router.remove_route(other);
            }
        }
        let tools = Tools {
            log: log.clone(),
            legacy: era == Era::Legacy,
            demo,
            router,
        };
        let config = StreamableHttpServerConfig::default()
            // hyper notices a closed SSE stream on its next write
            .with_sse_keep_alive(Some(Duration::from_millis(100)))
            .with_json_response(era == Era::Json)
            .with_cancellation_token(stop.child_token());
        let service: StreamableHttpService<Tools, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(tools.clone()), Arc::clone(&sessions), config);
        let recording = tap.clone();
        let router =
            axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(move |request, next| {
                    record(recording.clone(), request, next)
                }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stopped = stop.clone();
        let scheme = if tls.is_some() { "https" } else { "http" };
        match tls {
            Some(tls) => {
                let listener = cancelkit::tls::TlsListener::new(listener, tls);
                tokio::spawn(async move {
                    let _ = axum::serve(listener, router)
                        .with_graceful_shutdown(stopped.cancelled_owned())
                        .await;
                });
            }
            None => {
                let listener = Counting {
                    inner: listener,
                    closed: Arc::clone(&tap.closed),
                };
                tokio::spawn(async move {
                    let _ = axum::serve(listener, router)
                        .with_graceful_shutdown(stopped.cancelled_owned())
                        .await;
                });
            }
        }
        Server {
            url: format!("{scheme}://{addr}/mcp"),
            log,
            tap,
            sessions,
            stop,
        }
    }

    /// From now on, holds each `tools/call` POST for `hold` (recorded at once) before rmcp
    /// gets it, so that a message sent after it on another connection overtakes it.
    pub fn hold_calls(&self, hold: Duration) {
        self.tap
            .hold_ms
            .store(hold.as_millis() as usize, Ordering::SeqCst);
    }

    /// Forgets every session, as a server does when they expire.
    pub async fn expire_sessions(&self) {
        self.sessions.sessions.write().await.clear();
    }

    /// Stops the server.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
