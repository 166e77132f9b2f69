//! An upstream MCP server over Streamable HTTP: the gateway as an MCP client, on the cancelkit
//! [`Peer`](cancelkit::peer::Peer) joined to the server by [`HttpClient`] — the way
//! [`stdio`](super::stdio) wraps a child's stdio.
//!
//! Nothing is sent until the first use. Then, once (concurrent first calls wait for the same
//! handshake), the peer asks `server/discover` and falls back to `initialize` for a legacy
//! server; everything the runtime's HTTP client does follows from there (see
//! [`cancelkit::http::client`]): the era of each request and its headers, the `Mcp-Param-*`
//! headers of annotated arguments, sessions, resumption of a broken stream, and the cancel of
//! a dropped call — a closed stream at 2026-07-28, `notifications/cancelled` with the
//! upstream's own id (sent again if it may have overtaken its call) at 2025-11-25, with the
//! cause of the enclosing scope's cancel as the reason.
//!
//! What the gateway adds:
//!
//! - **Unavailable or lost.** A request that never reached the server (it could not be
//!   reached, or the session had expired) is tried once more on a connection made anew — a
//!   new session, after an expiry — and then fails with [`CallError::Unavailable`]; one that
//!   reached it and broke off fails with [`CallError::Lost`], since the server may still run
//!   it. A server's own JSON-RPC error passes through as [`CallError::Rpc`].
//! - **HeaderMismatch.** A call refused with -32020 (its `Mcp-Param-*` headers unknown or
//!   stale) lists the tools again, which teaches the client the annotations, and is sent once
//!   more.
//! - **Shutdown** closes the peer and waits for the client to end the session (`DELETE`).
//! - **Credentials.** A user and password in the URL are sent as `Authorization: Basic` and
//!   never reach the runtime's client; what an [`CallError::Unavailable`] or
//!   [`CallError::Lost`] says has the URL's password and query hidden (see
//!   [`UpstreamUrl`]).
//!
//! Bounds: each answer and event is at most [`MAX_MESSAGE_BYTES`] (beyond, the call is lost);
//! requests beyond the client's in-flight and concurrency bounds wait their turn; connecting
//! takes at most [`CONNECT_TIMEOUT`], the handshake [`HANDSHAKE_TIMEOUT`]. A call has no time
//! limit here: the caller's timeout drops the future, which cancels it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::http::client::{Bridge, HttpClient, TransportFailure};
use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, PeerHandle, RequestError};
use cancelkit::wire::{chain, headers::HEADER_MISMATCH};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::Mutex;

use super::peer::{Calls, client_info};
use super::redact::UpstreamUrl;
use super::{CallError, ToolCall};

/// The largest JSON answer, or SSE event, read from an upstream (16 MiB).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// How long opening a TCP connection to an upstream may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the handshake (`server/discover`, else `initialize` and
/// `notifications/initialized`) may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutting down waits for the session's `DELETE`.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// A Streamable HTTP upstream.
pub struct HttpUpstream {
    name: String,
    /// The configured URL, and how to speak of it.
    target: UpstreamUrl,
    /// The client for the endpoint, or why there is none (a bad URL).
    client: Result<HttpClient, String>,
    calls: Calls,
    /// The connected peer; `None` until the first use, and after it closed.
    connection: Mutex<Option<Connection>>,
}

struct Connection {
    handle: PeerHandle,
    bridge: Bridge,
}

impl fmt::Debug for HttpUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpUpstream")
            .field("name", &self.name)
            .field("url", &self.target.redacted())
            .finish_non_exhaustive()
    }
}

/// What became of one attempt.
enum Attempt<T> {
    Done(Result<T, CallError>),
    /// It never reached the server: try once more on a new connection.
    Again(CallError),
    /// The server wants the tools listed again (HeaderMismatch).
    Relist(CallError),
}

fn classify<T>(outcome: Result<T, RequestError>) -> Attempt<T> {
    let error = match outcome {
        Ok(value) => return Attempt::Done(Ok(value)),
        Err(RequestError::Rpc(error)) => error,
        Err(RequestError::Closed) => {
            return Attempt::Again(CallError::Unavailable("its connection closed".into()));
        }
        Err(other) => return Attempt::Done(Err(CallError::Lost(other.to_string()))),
    };
    match TransportFailure::of(&error) {
        Some(failure) if failure.never_reached_the_server() => {
            Attempt::Again(CallError::Unavailable(error.message))
        }
        Some(_) => Attempt::Done(Err(CallError::Lost(error.message))),
        None if error.code.code() == HEADER_MISMATCH => Attempt::Relist(CallError::Rpc(error)),
        None => Attempt::Done(Err(CallError::Rpc(error))),
    }
}

impl HttpUpstream {
    /// A connector for the MCP endpoint `url` (nothing is sent until the first use).
    pub fn new(name: &str, url: &str) -> HttpUpstream {
        HttpUpstream::with_headers(name, url, &BTreeMap::new())
    }

    /// [`new`](Self::new), sending `headers` with every request (an `Authorization` the
    /// upstream wants; the MCP headers of a request are set per request and win).
    pub fn with_headers(name: &str, url: &str, headers: &BTreeMap<String, String>) -> HttpUpstream {
        HttpUpstream::with_trust(name, url, headers, Vec::new())
    }

    /// [`with_headers`](Self::with_headers), trusting `trusted` for an `https://` URL beside
    /// the platform's roots (and `SSL_CERT_FILE`).
    pub fn with_trust(
        name: &str,
        url: &str,
        headers: &BTreeMap<String, String>,
        trusted: Vec<reqwest::Certificate>,
    ) -> HttpUpstream {
        let target = UpstreamUrl::new(url);
        let mut defaults = HeaderMap::new();
        for (key, value) in headers {
            match (
                HeaderName::from_bytes(key.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                (Ok(key), Ok(mut value)) => {
                    value.set_sensitive(true);
                    defaults.insert(key, value);
                }
                _ => tracing::error!(upstream = name, header = %key, "invalid header left out"),
            }
        }
        if let Some(basic) = target.basic_auth() {
            if defaults.contains_key(AUTHORIZATION) {
                tracing::warn!(
                    upstream = name,
                    "the user and password of the URL replace the `Authorization` header"
                );
            }
            defaults.insert(AUTHORIZATION, basic.clone());
        }
        let client = reqwest::Client::builder()
            .tls_certs_merge(trusted)
            .default_headers(defaults)
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("cancelkit-gateway/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {}", chain(&e)))
            .and_then(|http| {
                let endpoint = target
                    .endpoint()
                    .map_err(|why| format!("invalid URL: {why}"))?;
                HttpClient::new(endpoint.clone())
                    .map(|client| {
                        client
                            .with_http_client(http)
                            .max_event_bytes(MAX_MESSAGE_BYTES)
                    })
                    .map_err(|e| target.scrub(&format!("invalid URL {}: {e}", target.redacted())))
            });
        if let Err(why) = &client {
            tracing::error!(upstream = name, "{why}");
        }
        HttpUpstream {
            name: name.to_owned(),
            target,
            client,
            calls: Calls::new(name),
            connection: Mutex::new(None),
        }
    }

    /// Its configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many `notifications/tools/list_changed` it sent.
    pub fn list_changes(&self) -> u64 {
        self.calls.list_changes()
    }

    /// `error` with the URL's password and query hidden from what it says.
    fn scrubbed(&self, error: CallError) -> CallError {
        match error {
            CallError::Unavailable(why) => CallError::Unavailable(self.target.scrub(&why)),
            CallError::Lost(why) => CallError::Lost(self.target.scrub(&why)),
            rpc @ CallError::Rpc(_) => rpc,
        }
    }

    /// The connected peer: the one in use, or a new one once its handshake succeeded.
    async fn connection(&self) -> Result<PeerHandle, CallError> {
        let client = self
            .client
            .as_ref()
            .map_err(|why| CallError::Unavailable(why.clone()))?;
        let mut connection = self.connection.lock().await;
        if let Some(current) = connection.as_ref()
            && !current.handle.is_closed()
        {
            return Ok(current.handle.clone());
        }
        let (peer, bridge) = client.clone().connect_with_bridge(self.calls.builder());
        let handle = peer.handle();
        let negotiated = tokio::time::timeout(
            HANDSHAKE_TIMEOUT,
            handle.discover_or_initialize(client_info(), DEFAULT_DISCOVER_TIMEOUT),
        )
        .await;
        let why = match negotiated {
            Ok(Ok(negotiated)) => {
                tracing::info!(upstream = %self.name, revision = ?negotiated.revision, "upstream ready");
                *connection = Some(Connection {
                    handle: handle.clone(),
                    bridge,
                });
                return Ok(handle);
            }
            Ok(Err(RequestError::Rpc(error))) if TransportFailure::of(&error).is_some() => {
                error.message
            }
            Ok(Err(error)) => format!("the handshake failed: {error}"),
            Err(_) => format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
        };
        handle.close();
        Err(CallError::Unavailable(why))
    }

    /// Runs `attempt` on the connection, once more on a new one if it never reached the server,
    /// and once more after listing the tools if the server asks for it.
    async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, CallError>
    where
        F: FnMut(PeerHandle) -> Fut,
        Fut: Future<Output = Result<T, RequestError>>,
    {
        let (mut again, mut relisted) = (false, false);
        loop {
            let handle = self.connection().await?;
            match classify(attempt(handle).await) {
                Attempt::Done(outcome) => return outcome,
                Attempt::Again(error) if again => return Err(error),
                Attempt::Again(_) => again = true,
                Attempt::Relist(error) if relisted => return Err(error),
                Attempt::Relist(_) => {
                    relisted = true;
                    self.list_tools().await?;
                }
            }
        }
    }

    /// Its tools (every page of `tools/list`).
    ///
    /// # Errors
    ///
    /// The upstream cannot be reached or refused the handshake ([`CallError::Unavailable`]),
    /// answered with an error ([`CallError::Rpc`]), or the answer broke off
    /// ([`CallError::Lost`]).
    pub async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        let listed =
            Box::pin(self.run(|handle| async move { self.calls.list_tools(&handle).await }))
                .await
                .map_err(|e| self.scrubbed(e))?;
        listed.map_err(|why| CallError::Rpc(JsonRpcError::internal(why)))
    }

    /// Calls a tool; dropping the future before it resolves cancels the call upstream.
    ///
    /// # Errors
    ///
    /// As [`list_tools`](Self::list_tools).
    pub async fn call(&self, call: ToolCall) -> Result<Box<RawValue>, CallError> {
        let call = &call;
        self.run(|handle| async move {
            self.calls
                .call(
                    &handle,
                    &call.tool,
                    call.arguments.as_deref(),
                    call.progress.as_ref(),
                )
                .await
        })
        .await
        .map_err(|e| self.scrubbed(e))
    }

    /// Closes the connection: what is in flight is cancelled, and a session is ended
    /// (`DELETE`), waiting at most [`SHUTDOWN_TIMEOUT`].
    pub async fn shutdown(&self) {
        let Some(connection) = self.connection.lock().await.take() else {
            return;
        };
        connection.handle.close();
        if tokio::time::timeout(SHUTDOWN_TIMEOUT, connection.bridge.stopped())
            .await
            .is_err()
        {
            tracing::warn!(upstream = %self.name, "the session did not end within {SHUTDOWN_TIMEOUT:?}");
        }
    }
}
