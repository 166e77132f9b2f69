//! An upstream MCP server over Streamable HTTP: the gateway as an MCP client.
//!
//! # Eras
//!
//! Nothing is sent until the first use. Then, once (concurrent first calls wait for the same
//! handshake), the connector asks `server/discover` stamped for 2026-07-28. A server that
//! answers it listing 2026-07-28 is spoken to at 2026-07-28 from then on: no session, every
//! request stamped with `_meta` (protocol version, the client's capabilities and info) and
//! the `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` headers (the
//! arguments whose schema says `x-mcp-header`, as the last `tools/list` gave them; a call
//! refused with HeaderMismatch -32020 lists the tools again and, if the tool's annotations
//! changed, is sent once more). A server
//! that refuses it (an HTTP 4xx, or any JSON-RPC error: method not found, -32022 without
//! 2026-07-28 in its list, ...) gets the legacy handshake: `initialize` asking for 2025-11-25,
//! then `notifications/initialized`; its `Mcp-Session-Id` and the version it chose travel on
//! every later request. A 404 on a request carrying the session means the session expired:
//! the connector performs the handshake again and sends the request once more.
//!
//! # Calls and their cancellation
//!
//! Each request gets an id of the connector's own (the caller's id never goes upstream). The
//! answer is read as JSON or as an SSE stream; `notifications/progress` for the call's token
//! go to the [`ProgressSink`] with `try_send`: when the caller's buffer is
//! full the notification is dropped (progress is advisory), never held.
//!
//! Dropping a call's future before its answer cancels it upstream:
//! - at 2026-07-28 by closing its response stream: the HTTP/1 connection the request used is
//!   closed (hyper never returns a connection whose body was left unread to its pool), which
//!   the server must take as the cancellation;
//! - at 2025-11-25 by POSTing `notifications/cancelled` with the upstream request's id, from a
//!   spawned task bounded by [`CANCEL_TIMEOUT`], so the drop never waits. The reason is the
//!   summary of the cause when the call ran inside a cancelled [`cancelkit::Scope`], else
//!   "cancelled by the gateway". `initialize` is never cancelled. A call's POST is sent from a
//!   task of its own, which goes on when the call is dropped before the server answered it
//!   (its status and headers), for up to [`CANCEL_TIMEOUT`]: a cancel sent before then may
//!   overtake the call on another connection (a server ignores a cancel for a request it does
//!   not know yet, then runs the call), so once the server answers the POST it is sent again.
//!
//! A legacy call whose response stream broke is given up ([`CallError::Lost`]) and cancelled
//! the same way, since the server may still be running it.
//!
//! # Bounds
//!
//! A JSON answer, and each SSE event, is at most [`MAX_MESSAGE_BYTES`]; beyond, the call is
//! [`CallError::Lost`]. At most [`MAX_IN_FLIGHT`] requests are in flight per upstream; beyond,
//! calls fail at once with [`CallError::Unavailable`] rather than queue. Connecting is bounded
//! by [`CONNECT_TIMEOUT`], the handshake by [`HANDSHAKE_TIMEOUT`]. A call itself has no time
//! limit here: the caller's timeout drops the future, which cancels it.
//!
//! The standalone GET stream is not opened: the gateway declares no client capabilities, so a
//! server has nothing to ask it outside a call; a `ping` arriving on a call's stream is
//! answered, any other server request gets -32601.

mod cancel;
mod handshake;
mod wire;

use cancel::{CancelOnDrop, InFlight};
use handshake::{Connection, Era};
use wire::*;

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::peer::McpRevision;
use cancelkit::protocol::jsonrpc::{ErrorCode, ErrorObject};
use cancelkit::wire::headers::{self, PROTOCOL_VERSION, SESSION_ID};
use cancelkit::wire::{chain, meta, sse};
use futures_util::{FutureExt, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio::sync::{Mutex, Semaphore, oneshot};

use super::{CallError, ProgressSink, ToolCall};

/// The largest JSON answer, or SSE event, read from an upstream (16 MiB).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// How many requests may be in flight to one upstream at once; beyond, calls fail at once
/// with [`CallError::Unavailable`].
pub const MAX_IN_FLIGHT: usize = 256;
/// How long opening a TCP connection to an upstream may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the handshake (`server/discover`, else `initialize` and
/// `notifications/initialized`) may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the spawned task sending a `notifications/cancelled` (or the `DELETE` ending a
/// session) may take.
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// How much of an error answer's body is read (to find a JSON-RPC error in it).
const ERROR_BODY_LIMIT: usize = 64 << 10;
/// HeaderMismatch (2026-07-28): the HTTP headers disagree with the body, or lack one.
const HEADER_MISMATCH: i64 = headers::HEADER_MISMATCH;
/// How many `tools/list` pages are followed.
const MAX_TOOL_PAGES: usize = 100;

/// The revision spoken when the upstream answers `server/discover`.
const V2026: McpRevision = McpRevision::V2026_07_28;
const DEFAULT_REASON: &str = "cancelled by the gateway";

/// For each tool, the arguments mirrored into `Mcp-Param-*` headers.
type ParamHeaders = std::collections::HashMap<String, Vec<headers::ParamHeader>>;

/// A Streamable HTTP upstream.
pub struct HttpUpstream {
    name: String,
    /// Where requests go, or why they cannot (a bad URL).
    endpoint: Result<Endpoint, String>,
    /// The handshake's outcome; `None` until the first use and after the session expired.
    state: Mutex<Option<Arc<Connection>>>,
    generations: AtomicU64,
    next_id: AtomicI64,
    in_flight: Arc<Semaphore>,
    /// The `x-mcp-header` annotations of the tools last listed (2026-07-28).
    param_headers: std::sync::Mutex<ParamHeaders>,
}

impl fmt::Debug for HttpUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpUpstream")
            .field("name", &self.name)
            .field(
                "url",
                &self
                    .endpoint
                    .as_ref()
                    .map(|e| &*e.url)
                    .unwrap_or("<invalid>"),
            )
            .finish_non_exhaustive()
    }
}

/// The HTTP client and the MCP endpoint (what a spawned cancel needs).
#[derive(Debug, Clone)]
struct Endpoint {
    client: reqwest::Client,
    url: Arc<str>,
    upstream: Arc<str>,
}

/// Where one call's progress goes.
struct Progress<'a> {
    token: Value,
    sink: &'a ProgressSink,
}

impl HttpUpstream {
    /// A connector for the MCP endpoint `url` (nothing is sent until the first use).
    pub fn new(name: &str, url: &str) -> HttpUpstream {
        HttpUpstream::with_headers(name, url, &std::collections::BTreeMap::new())
    }

    /// [`new`](Self::new), sending `headers` with every request (an `Authorization` the
    /// upstream wants; the MCP headers of a request are set per request and win).
    pub fn with_headers(
        name: &str,
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> HttpUpstream {
        HttpUpstream::with_trust(name, url, headers, Vec::new())
    }

    /// [`with_headers`](Self::with_headers), trusting `trusted` for an `https://` URL beside
    /// the platform's roots (and `SSL_CERT_FILE`).
    pub fn with_trust(
        name: &str,
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
        trusted: Vec<reqwest::Certificate>,
    ) -> HttpUpstream {
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
        let endpoint = reqwest::Url::parse(url)
            .map_err(|e| format!("invalid URL `{url}`: {e}"))
            .and_then(|_| {
                reqwest::Client::builder()
                    .tls_certs_merge(trusted)
                    .default_headers(defaults)
                    .connect_timeout(CONNECT_TIMEOUT)
                    .tcp_nodelay(true)
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("cancelkit-gateway/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {}", chain(&e)))
            })
            .map(|client| Endpoint {
                client,
                url: url.into(),
                upstream: name.into(),
            });
        if let Err(why) = &endpoint {
            tracing::error!(upstream = name, "{why}");
        }
        HttpUpstream {
            name: name.to_owned(),
            endpoint,
            state: Mutex::new(None),
            generations: AtomicU64::new(0),
            next_id: AtomicI64::new(1),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            param_headers: std::sync::Mutex::default(),
        }
    }

    /// Its configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its tools (every page of `tools/list`).
    ///
    /// # Errors
    ///
    /// The upstream cannot be reached or refused the handshake ([`CallError::Unavailable`]),
    /// answered with an error ([`CallError::Rpc`]), or the answer broke off
    /// ([`CallError::Lost`]).
    pub async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0.. {
            if page == MAX_TOOL_PAGES {
                tracing::warn!(
                    upstream = self.name,
                    "tools/list has more than {MAX_TOOL_PAGES} pages; the rest are left out"
                );
                break;
            }
            let mut params = Map::new();
            if let Some(cursor) = cursor.take() {
                params.insert("cursor".into(), cursor.into());
            }
            let result = self.request("tools/list", &params, None, None).await?;
            let Some(page) = result.get("tools").and_then(Value::as_array) else {
                return Err(CallError::Unavailable(
                    "the upstream's tools/list result has no `tools` array".into(),
                ));
            };
            tools.extend(page.iter().cloned());
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => break,
            }
        }
        let annotated = tools
            .iter()
            .filter_map(|tool| {
                let name = tool.get("name")?.as_str()?;
                let found = headers::annotations(tool.get("inputSchema")?);
                (!found.is_empty()).then(|| (name.to_owned(), found))
            })
            .collect();
        *self
            .param_headers
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = annotated;
        Ok(tools)
    }

    /// Calls a tool; dropping the future before it resolves cancels the call upstream (see the
    /// [module documentation](self)).
    ///
    /// # Errors
    ///
    /// The upstream's JSON-RPC error ([`CallError::Rpc`]); it cannot be reached, answered 5xx
    /// or has [`MAX_IN_FLIGHT`] calls already ([`CallError::Unavailable`]); the answer broke
    /// off or was too large ([`CallError::Lost`]).
    pub async fn call(&self, call: ToolCall) -> Result<Value, CallError> {
        let ToolCall {
            tool,
            arguments,
            progress,
        } = call;
        let mut params = Map::new();
        params.insert("name".into(), Value::String(tool.clone()));
        if let Some(arguments) = &arguments {
            params.insert("arguments".into(), arguments.clone());
        }
        let tool_and_arguments = Some((tool.as_str(), arguments.as_ref()));
        let outcome = self
            .request("tools/call", &params, tool_and_arguments, progress.as_ref())
            .await;
        match outcome {
            // The server wants `Mcp-Param-*` headers this connector did not know of (the call
            // came before `tools/list`, or the tool changed): it refused the request before
            // running it, so it is sent again once the tools are listed anew.
            Err(CallError::Rpc(error)) if error.code.code() == HEADER_MISMATCH => {
                let known = self.annotations_of(&tool);
                if self.list_tools().await.is_ok() && self.annotations_of(&tool) != known {
                    tracing::info!(
                        upstream = self.name,
                        tool,
                        "the tool's headers changed; the call is sent again"
                    );
                    self.request("tools/call", &params, tool_and_arguments, progress.as_ref())
                        .await
                } else {
                    Err(CallError::Rpc(error))
                }
            }
            outcome => outcome,
        }
    }

    fn annotations_of(&self, tool: &str) -> Option<Vec<headers::ParamHeader>> {
        self.param_headers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool)
            .cloned()
    }

    /// Ends the session, if one is open (`DELETE`, bounded by [`CANCEL_TIMEOUT`]). A later
    /// use connects again.
    pub async fn shutdown(&self) {
        let Ok(endpoint) = &self.endpoint else {
            return;
        };
        let Some(connection) = self.state.lock().await.take() else {
            return;
        };
        let Era::Legacy {
            version,
            session: Some(session),
        } = &connection.era
        else {
            return;
        };
        let mut request = endpoint
            .client
            .delete(&*endpoint.url)
            .header(SESSION_ID, session.clone());
        if let Some(version) = version {
            request = request.header(PROTOCOL_VERSION, version.clone());
        }
        match tokio::time::timeout(CANCEL_TIMEOUT, request.send()).await {
            Ok(Ok(response))
                if response.status().is_success()
                    || response.status() == StatusCode::METHOD_NOT_ALLOWED =>
            {
                tracing::debug!(upstream = self.name, status = %response.status(), "session ended");
            }
            Ok(Ok(response)) => {
                tracing::warn!(upstream = self.name, status = %response.status(), "DELETE of the session refused");
            }
            Ok(Err(e)) => {
                tracing::warn!(
                    upstream = self.name,
                    "DELETE of the session failed: {}",
                    chain(&e)
                );
            }
            Err(_) => {
                tracing::warn!(
                    upstream = self.name,
                    "DELETE of the session took over {CANCEL_TIMEOUT:?}"
                );
            }
        }
    }

    fn endpoint(&self) -> Result<&Endpoint, CallError> {
        self.endpoint
            .as_ref()
            .map_err(|why| CallError::Unavailable(why.clone()))
    }

    fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// One request (not `initialize`), cancelled upstream if dropped unanswered; the session
    /// is renewed once if it expired.
    async fn request(
        &self,
        method: &str,
        params: &Map<String, Value>,
        tool: Option<(&str, Option<&Value>)>,
        progress: Option<&ProgressSink>,
    ) -> Result<Value, CallError> {
        let scope = cancelkit::current_scope();
        let endpoint = self.endpoint()?;
        let _permit = Arc::clone(&self.in_flight)
            .try_acquire_owned()
            .map_err(|_| {
                CallError::Unavailable(format!(
                    "{MAX_IN_FLIGHT} requests are already in flight to this upstream"
                ))
            })?;
        let mut renewed = false;
        loop {
            let connection = self.connection(endpoint).await?;
            let id = self.next_id();
            let mut params = Value::Object(params.clone());
            if progress.is_some() {
                // Our own id is the token; a `_meta` that is not an object is replaced.
                let meta = &mut params["_meta"];
                if !meta.is_object() {
                    *meta = json!({});
                }
                meta["progressToken"] = id.into();
            }
            let mut extra = Vec::new();
            if matches!(connection.era, Era::V2026) {
                stamp(&mut params);
                extra = headers::routing(method, &params);
                if let Some((tool, arguments)) = tool {
                    let annotated = self
                        .param_headers
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    if let Some(annotations) = annotated.get(tool) {
                        extra.extend(headers::params(annotations, arguments));
                    }
                }
            }
            let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let mut guard = CancelOnDrop {
                endpoint: endpoint.clone(),
                connection: Arc::clone(&connection),
                id,
                scope: scope.clone(),
                armed: true,
                in_flight: None,
            };
            let legacy = !matches!(connection.era, Era::V2026);
            let progress = progress.map(|sink| Progress {
                token: id.into(),
                sink,
            });
            let outcome = exchange(
                endpoint,
                &connection,
                id,
                &message,
                extra,
                progress.as_ref(),
                legacy.then_some(&mut guard.in_flight),
            )
            .await;
            match outcome {
                Ok(answer) => {
                    guard.armed = false;
                    return Ok(answer.result);
                }
                Err(Failure::SessionExpired) => {
                    guard.armed = false;
                    self.forget(&connection).await;
                    if renewed {
                        return Err(CallError::Unavailable(
                            "the upstream's new session expired at once".into(),
                        ));
                    }
                    tracing::info!(
                        upstream = self.name,
                        "the session expired; performing the handshake again"
                    );
                    renewed = true;
                }
                Err(Failure::Lost(why)) => {
                    guard.fire("the gateway lost the call's response".into());
                    return Err(CallError::Lost(why));
                }
                Err(other) => {
                    guard.armed = false;
                    return Err(other.into());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
