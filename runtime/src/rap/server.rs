//! The tool-server side: an axum router a user mounts in their own server.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cancelkit_protocol::rap::{ToolCancellation, ToolInvocation};
use futures_util::FutureExt;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use reqwest::Url;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::valid_id;
use crate::sync::lock;
use crate::{CancelReason, Cancelled, Canceller, Scope};

/// The context a tool handler runs in.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The invocation's `group_id`: the conversation thread.
    pub thread_id: String,
    /// The invocation's `id`: the tool call.
    pub tool_call_id: String,
    /// The user on whose behalf the call runs, if the runtime said.
    pub user_id: Option<String>,
}

/// What a tool produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// Plain text.
    Text(String),
    /// Structured content blocks.
    Content(Vec<Value>),
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        ToolOutput::Text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        ToolOutput::Text(text.to_owned())
    }
}

/// A tool's failure, reported to the runtime as an `is_error` result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl From<Cancelled> for ToolError {
    fn from(cancelled: Cancelled) -> Self {
        ToolError(cancelled.to_string())
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError(message.to_owned())
    }
}

impl From<super::process::ProcessError> for ToolError {
    fn from(error: super::process::ProcessError) -> Self {
        ToolError(error.to_string())
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Handler =
    Arc<dyn Fn(Value, ToolCall) -> BoxFuture<Result<ToolOutput, ToolError>> + Send + Sync>;

struct Operation {
    description: String,
    input_schema: Value,
    handler: Handler,
}

/// How the rate limiter tells clients apart ([`ToolServerBuilder::client_key`]).
///
/// IPv6 addresses are grouped by their /64 prefix, since one host usually owns a whole /64;
/// IPv4-mapped IPv6 addresses count as the IPv4 address.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientKey {
    /// The TCP peer address from axum's [`ConnectInfo<SocketAddr>`]: serve the router with
    /// `into_make_service_with_connect_info::<SocketAddr>()`. A request that arrives without it
    /// is refused with 500 and an error log, so a server wired without client addresses fails
    /// loudly instead of putting every client in one bucket. The default.
    PeerAddress,
    /// The client address a trusted reverse proxy writes into this header (for example
    /// `x-forwarded-for` or `x-real-ip`): its last comma-separated entry, the one the proxy
    /// appended, parsed as an IP address (a port after it is ignored). Only for a server that
    /// nothing but the proxy can reach, since clients can set the header themselves. A request
    /// without a parsable value is refused with 500 and an error log.
    TrustedHeader(HeaderName),
    /// Every client shares one budget, on purpose: for a server that only one runtime can
    /// reach (a Unix socket, a private network). One guessing or busy client then throttles
    /// everyone.
    Shared,
}

/// The rate limiter's key for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    Address(IpAddr),
    Everyone,
}

/// The limiter sweeps out clients whose budget is full again every this many requests...
const PRUNE_EVERY_CHECKS: u64 = 1024;
/// ...and on the first request after this long without a sweep.
const PRUNE_INTERVAL: Duration = Duration::from_secs(1);

/// A callback origin: scheme, host and port (the port made explicit).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// The origin of an absolute `http`/`https` URL with a host.
    fn of(url: &Url) -> Option<Origin> {
        if !matches!(url.scheme(), "http" | "https") {
            return None;
        }
        Some(Origin {
            scheme: url.scheme().to_owned(),
            host: url.host_str()?.to_owned(),
            port: url.port_or_known_default()?,
        })
    }
}

/// A callback origin given to [`ToolServerBuilder::allow_callback_origin`] that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{origin}` is not a callback origin: {reason}")]
pub struct InvalidCallbackOrigin {
    origin: String,
    reason: &'static str,
}

/// Configures a [`ToolServer`].
pub struct ToolServerBuilder {
    name: String,
    operations: BTreeMap<String, Operation>,
    bearer_token: Option<String>,
    rate: Option<(NonZeroU32, NonZeroU32)>,
    client_key: ClientKey,
    callback_origins: Vec<Origin>,
    body_limit: usize,
    callback_timeout: Duration,
    trusted: Vec<reqwest::Certificate>,
}

impl std::fmt::Debug for ToolServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServerBuilder")
            .field("name", &self.name)
            .field("operations", &self.operations.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ToolServerBuilder {
    /// Adds an operation (a tool). Its handler runs in a cancellation scope per call: make it
    /// `#[cancellable]` (with `ToolError` as its error) or use [`process::run`](super::process::run)
    /// so a `/cancel_tool_call` stops it.
    pub fn operation<F, Fut>(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |args, call| Box::pin(handler(args, call)));
        self.operations.insert(
            name.into(),
            Operation {
                description: description.into(),
                input_schema,
                handler,
            },
        );
        self
    }

    /// Requires `Authorization: Bearer <token>` on `/invoke` and `/cancel_tool_call`
    /// (401 otherwise). The token is compared in constant time (SHA-256 digests compared with
    /// [`subtle`]), so response timing reveals neither its bytes nor its length.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// Allows each client `per_second` requests a second, in bursts of up to `burst` (429
    /// beyond); `0` for either turns the limit off. Default: 50 a second, bursts of 100.
    ///
    /// The limit is checked before authentication and counts every request on `/invoke` and
    /// `/cancel_tool_call`, refused ones included, so guessing the bearer token is throttled
    /// like anything else. Clients are told apart by [`client_key`](Self::client_key); the
    /// limiter forgets a client once its budget is full again (it sweeps every 1,024 requests
    /// and at least once a second while requests arrive), so its memory is bounded by the
    /// clients active in the last refill period (`burst / per_second` seconds) plus 1,024.
    pub fn rate_limit(mut self, per_second: u32, burst: u32) -> Self {
        self.rate = NonZeroU32::new(per_second).zip(NonZeroU32::new(burst));
        self
    }

    /// How the rate limit tells clients apart. Default [`ClientKey::PeerAddress`]: the router
    /// must be served with `into_make_service_with_connect_info::<SocketAddr>()`, and requests
    /// without a peer address are refused with 500.
    pub fn client_key(mut self, key: ClientKey) -> Self {
        self.client_key = key;
        self
    }

    /// Allows `/invoke` to name a `callback_url` on `origin` (`scheme://host[:port]`, `http` or
    /// `https`; a missing port is the scheme's default). Call it once per origin.
    ///
    /// The tool server posts each result to its invocation's `callback_url`, so an unchecked
    /// URL would let anyone who may invoke a tool make the server send requests into its own
    /// network. By default no origin is allowed and every `/invoke` is refused with 400 (before
    /// anything runs) until the runtime's callback origin is configured here. Only the origin
    /// is matched, not the path; redirects from a callback are not followed.
    pub fn allow_callback_origin(mut self, origin: &str) -> Result<Self, InvalidCallbackOrigin> {
        let invalid = |reason| InvalidCallbackOrigin {
            origin: origin.to_owned(),
            reason,
        };
        let url = Url::parse(origin).map_err(|_| invalid("not an absolute URL"))?;
        let parsed = Origin::of(&url).ok_or(invalid("not an http or https URL with a host"))?;
        if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
            return Err(invalid("an origin has no path, query or fragment"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("an origin has no user name or password"));
        }
        self.callback_origins.push(parsed);
        Ok(self)
    }

    /// The largest request body accepted (413 beyond). Default 1 MiB.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// How long posting a result to a callback URL may take. Default 10 s.
    pub fn callback_timeout(mut self, timeout: Duration) -> Self {
        self.callback_timeout = timeout;
        self
    }

    /// Trusts the certificates of the PEM CA file `path` for `https://` callbacks, beside the
    /// platform's roots (and `SSL_CERT_FILE`), which are always trusted.
    ///
    /// # Errors
    ///
    /// The file cannot be read or holds no certificate.
    pub fn callback_ca_file(
        mut self,
        path: &std::path::Path,
    ) -> Result<Self, crate::tls::TlsError> {
        self.trusted.extend(crate::tls::ca_certificates(path)?);
        Ok(self)
    }

    /// Builds the server.
    pub fn build(self) -> ToolServer {
        let limiter = self.rate.map(|(per_second, burst)| Limiter {
            keyed: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
            key: self.client_key,
            started: Instant::now(),
            checks: AtomicU64::new(0),
            next_prune_ms: AtomicU64::new(PRUNE_INTERVAL.as_millis() as u64),
            reported_missing_key: AtomicBool::new(false),
        });
        if self.callback_origins.is_empty() {
            tracing::warn!(
                server = %self.name,
                "no callback origin is allowed: every /invoke will be refused (see ToolServerBuilder::allow_callback_origin)"
            );
        }
        let http = reqwest::Client::builder()
            .tls_certs_merge(self.trusted)
            .timeout(self.callback_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a plain HTTP client builds");
        ToolServer {
            inner: Arc::new(Inner {
                name: self.name,
                operations: self.operations,
                bearer: self.bearer_token.as_deref().map(Bearer::new),
                limiter,
                callback_origins: self.callback_origins,
                body_limit: self.body_limit,
                http,
                calls: Mutex::new(HashMap::new()),
            }),
        }
    }
}

/// A RAP tool server; [`router`](Self::router) gives the axum routes to mount.
///
/// Serve the router with `into_make_service_with_connect_info::<SocketAddr>()` so the rate
/// limit can tell clients apart by address; without it, requests are refused with 500 unless
/// another [`ClientKey`] is configured.
#[derive(Clone)]
pub struct ToolServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServer")
            .field("name", &self.inner.name)
            .field("running", &self.running())
            .finish()
    }
}

struct Inner {
    name: String,
    operations: BTreeMap<String, Operation>,
    bearer: Option<Bearer>,
    limiter: Option<Limiter>,
    callback_origins: Vec<Origin>,
    body_limit: usize,
    http: reqwest::Client,
    /// Running calls, keyed by (thread, call).
    calls: Mutex<HashMap<(String, String), Canceller>>,
}

impl ToolServer {
    /// A builder for a server named `name` (shown in the toolset).
    pub fn builder(name: impl Into<String>) -> ToolServerBuilder {
        ToolServerBuilder {
            name: name.into(),
            operations: BTreeMap::new(),
            bearer_token: None,
            rate: NonZeroU32::new(50).zip(NonZeroU32::new(100)),
            client_key: ClientKey::PeerAddress,
            callback_origins: Vec::new(),
            body_limit: 1024 * 1024,
            callback_timeout: Duration::from_secs(10),
            trusted: Vec::new(),
        }
    }

    /// `POST /invoke`, `POST /cancel_tool_call` and `GET /.well-known/rap-toolset`.
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
            .route("/invoke", post(invoke))
            .route("/cancel_tool_call", post(cancel_tool_call))
            .route("/.well-known/rap-toolset", get(toolset))
            .with_state(Arc::clone(&self.inner))
    }

    /// How many calls are running.
    pub fn running(&self) -> usize {
        lock(&self.inner.calls).len()
    }

    /// How many clients the rate limiter remembers right now (0 without a rate limit). It
    /// forgets clients whose budget is full again, so this stays bounded (see
    /// [`ToolServerBuilder::rate_limit`]).
    pub fn rate_limited_clients(&self) -> usize {
        self.inner.limiter.as_ref().map_or(0, |l| l.keyed.len())
    }
}

/// The expected bearer token, kept as a SHA-256 digest so that comparing it with what a client
/// sent takes the same time whatever the client sent.
struct Bearer {
    digest: [u8; 32],
}

impl Bearer {
    fn new(token: &str) -> Self {
        Bearer {
            digest: Sha256::digest(token.as_bytes()).into(),
        }
    }

    /// Whether an `Authorization` header value carries the token. The scheme is not secret and
    /// is checked first; the token part is hashed and the digests compared in constant time.
    fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        const SCHEME: &[u8] = b"Bearer ";
        let Some(value) = authorization else {
            return false;
        };
        if value.len() < SCHEME.len() || !value[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
            return false;
        }
        let given: [u8; 32] = Sha256::digest(&value[SCHEME.len()..]).into();
        given.ct_eq(&self.digest).into()
    }
}

/// The per-client rate limit, and when to sweep it.
struct Limiter {
    keyed: DefaultKeyedRateLimiter<Client>,
    key: ClientKey,
    started: Instant,
    /// Requests checked so far (every [`PRUNE_EVERY_CHECKS`]-th sweeps).
    checks: AtomicU64,
    /// When the next timed sweep is due, in milliseconds since `started`.
    next_prune_ms: AtomicU64,
    /// Whether the first request without a client key has been logged as an error.
    reported_missing_key: AtomicBool,
}

impl Limiter {
    /// The key for a request; `None` (logged) for one the configured [`ClientKey`] cannot
    /// place.
    fn client(&self, request: &Request) -> Option<Client> {
        let address = match &self.key {
            ClientKey::Shared => return Some(Client::Everyone),
            ClientKey::PeerAddress => request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|info| info.0.ip()),
            ClientKey::TrustedHeader(name) => header_address(request.headers(), name),
        };
        if address.is_none() {
            let message = match &self.key {
                ClientKey::TrustedHeader(name) => format!(
                    "refused a request without a client address in the `{name}` header (ClientKey::TrustedHeader)"
                ),
                _ => "refused a request without a peer address: serve the router with into_make_service_with_connect_info::<SocketAddr>(), or choose another ClientKey".to_owned(),
            };
            // Once as an error (a deployment mistake), then quietly, so it cannot flood the log.
            if self.reported_missing_key.swap(true, Ordering::Relaxed) {
                tracing::debug!("{message}");
            } else {
                tracing::error!("{message}");
            }
        }
        address.map(|address| Client::Address(bucket_of(address)))
    }

    /// Spends one request of `client`'s budget; sweeps forgotten clients now and then.
    fn admit(&self, client: Client) -> bool {
        let admitted = self.keyed.check_key(&client).is_ok();
        let count = self.checks.fetch_add(1, Ordering::Relaxed) + 1;
        let now_ms = self.started.elapsed().as_millis() as u64;
        let due = self.next_prune_ms.load(Ordering::Relaxed);
        if (count.is_multiple_of(PRUNE_EVERY_CHECKS) || now_ms >= due)
            && self
                .next_prune_ms
                .compare_exchange(
                    due,
                    now_ms + PRUNE_INTERVAL.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.keyed.retain_recent();
            self.keyed.shrink_to_fit();
        }
        admitted
    }
}

/// The last comma-separated entry of `name`, as an IP address (an `ip:port` or `[ipv6]:port`
/// form is accepted too).
fn header_address(headers: &HeaderMap, name: &HeaderName) -> Option<IpAddr> {
    let value = headers.get_all(name).iter().next_back()?.to_str().ok()?;
    let last = value.rsplit(',').next()?.trim();
    last.parse::<IpAddr>()
        .ok()
        .or_else(|| last.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

/// One rate-limit bucket per IPv4 address and per IPv6 /64.
fn bucket_of(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

impl Inner {
    /// The rate limit, then authentication, then the body. The limit comes first so that
    /// every attempt, a wrong token included, spends the client's budget: token guessing is
    /// throttled, and a throttled client learns nothing about its token (429 either way).
    async fn admit(&self, request: Request) -> Result<axum::body::Bytes, Response> {
        if let Some(limiter) = &self.limiter {
            let Some(client) = limiter.client(&request) else {
                return Err((
                    StatusCode::INTERNAL_SERVER_ERROR,
                    axum::Json(json!({
                        "error": "the server cannot identify the client for its rate limit"
                    })),
                )
                    .into_response());
            };
            if !limiter.admit(client) {
                return Err(StatusCode::TOO_MANY_REQUESTS.into_response());
            }
        }
        if let Some(bearer) = &self.bearer {
            let given = request
                .headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            if !bearer.accepts(given) {
                return Err(StatusCode::UNAUTHORIZED.into_response());
            }
        }
        axum::body::to_bytes(request.into_body(), self.body_limit)
            .await
            .map_err(|_| StatusCode::PAYLOAD_TOO_LARGE.into_response())
    }

    /// The callback URL, if it is on an allowed origin.
    fn callback(&self, callback_url: &str) -> Option<Url> {
        let url = Url::parse(callback_url).ok()?;
        let origin = Origin::of(&url)?;
        self.callback_origins.contains(&origin).then_some(url)
    }
}

fn bad_request(message: impl Into<String>) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": message.into()})),
    )
        .into_response()
}

async fn invoke(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let body = match inner.admit(request).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let invocation: ToolInvocation = match serde_json::from_slice(&body) {
        Ok(invocation) => invocation,
        Err(e) => return bad_request(format!("not a tool invocation: {e}")),
    };
    if !valid_id(&invocation.group_id) || !valid_id(&invocation.id) {
        return bad_request("group_id and id must be 1-256 characters of [A-Za-z0-9._:-]");
    }
    let Some(operation) = inner.operations.get(&invocation.operation) else {
        return bad_request(format!("no operation `{}`", invocation.operation));
    };
    let Some(callback) = inner.callback(&invocation.callback_url) else {
        tracing::warn!(url = %invocation.callback_url, "refused an /invoke whose callback_url is not on an allowed origin");
        return bad_request("callback_url is not on an allowed origin");
    };
    let key = (invocation.group_id.clone(), invocation.id.clone());
    let (scope, canceller) = Scope::root();
    {
        let mut calls = lock(&inner.calls);
        if calls.contains_key(&key) {
            return (
                StatusCode::CONFLICT,
                axum::Json(json!({"error": "this tool call is already running"})),
            )
                .into_response();
        }
        calls.insert(key.clone(), canceller);
    }
    let call = ToolCall {
        thread_id: invocation.group_id.clone(),
        tool_call_id: invocation.id.clone(),
        user_id: invocation.user_id.clone(),
    };
    let work = (operation.handler)(Value::Object(invocation.arguments.clone()), call);
    let token = scope.token().clone();
    tokio::spawn(scope.run(async move {
        // A panicking tool is reported as a failed call; the server goes on.
        let work = std::panic::AssertUnwindSafe(work)
            .catch_unwind()
            .map(|outcome| outcome.unwrap_or_else(|_| Err(ToolError("the tool panicked".into()))));
        let outcome = tokio::select! {
            biased;
            outcome = work => Some(outcome),
            () = token.cancelled() => None,
        };
        lock(&inner.calls).remove(&key);
        match outcome {
            Some(_) if token.is_cancelled() => {
                tracing::info!(thread_id = %key.0, tool_call_id = %key.1, "tool call cancelled; its result is not sent");
            }
            Some(outcome) => deliver(&inner, &invocation, callback, outcome).await,
            None => {
                tracing::info!(thread_id = %key.0, tool_call_id = %key.1, "tool call cancelled and stopped");
            }
        }
    }));
    StatusCode::OK.into_response()
}

/// Posts a finished call's `tool_result` to its (allowed) callback URL, once; failures are
/// logged.
async fn deliver(
    inner: &Inner,
    invocation: &ToolInvocation,
    callback: Url,
    outcome: Result<ToolOutput, ToolError>,
) {
    let mut result = json!({
        "type": "tool_result",
        "group_id": invocation.group_id,
        "id": invocation.id,
    });
    if let Some(call_id) = &invocation.call_id {
        result["call_id"] = json!(call_id);
    }
    match outcome {
        Ok(ToolOutput::Text(text)) => result["text"] = json!(text),
        Ok(ToolOutput::Content(content)) => result["content"] = json!(content),
        Err(error) => {
            result["text"] = json!(error.0);
            result["is_error"] = json!(true);
        }
    }
    match inner.http.post(callback).json(&result).send().await {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => {
            tracing::warn!(status = %response.status(), url = %invocation.callback_url, "the callback refused a tool result")
        }
        Err(e) => {
            tracing::warn!(error = %e, url = %invocation.callback_url, "cannot deliver a tool result")
        }
    }
}

async fn cancel_tool_call(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let body = match inner.admit(request).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    // From here on the answer is always the same empty 200: it never tells whether the call
    // was known, unknown, finished or already cancelled.
    match serde_json::from_slice::<ToolCancellation>(&body) {
        Err(e) => tracing::warn!(error = %e, "ignored a malformed /cancel_tool_call"),
        Ok(cancel) if !valid_id(&cancel.thread_id) || !valid_id(&cancel.tool_call_id) => {
            tracing::warn!("ignored a /cancel_tool_call with invalid ids");
        }
        Ok(cancel) => {
            let key = (cancel.thread_id, cancel.tool_call_id);
            match lock(&inner.calls).get(&key) {
                Some(canceller) if !canceller.is_cancelled() => {
                    canceller.cancel(CancelReason::Peer(Some("/cancel_tool_call".into())));
                    tracing::info!(thread_id = %key.0, tool_call_id = %key.1, "cancelling a tool call");
                }
                Some(_) => {
                    tracing::info!(thread_id = %key.0, tool_call_id = %key.1, "duplicate cancel for a tool call")
                }
                None => {
                    tracing::info!(thread_id = %key.0, tool_call_id = %key.1, "cancel for an unknown or finished tool call")
                }
            }
        }
    }
    Response::builder()
        .status(StatusCode::OK)
        .body(Body::empty())
        .expect("a static response builds")
}

async fn toolset(State(inner): State<Arc<Inner>>) -> Response {
    let tools: Vec<Value> = inner
        .operations
        .iter()
        .map(|(name, operation)| {
            json!({
                "name": name,
                "description": operation.description,
                "input_schema": operation.input_schema,
            })
        })
        .collect();
    axum::Json(json!({
        "name": inner.name,
        "endpoint": "/invoke",
        "cancel_endpoint": "/cancel_tool_call",
        "tools": tools,
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn the_bearer_check_accepts_only_the_token() {
        let bearer = Bearer::new("s3cret");
        assert!(bearer.accepts(Some(b"Bearer s3cret")));
        assert!(
            bearer.accepts(Some(b"bearer s3cret")),
            "the scheme is case-insensitive"
        );
        for wrong in [
            &b"Bearer s3cre"[..],
            b"Bearer s3cret ",
            b"Bearer S3cret",
            b"Basic s3cret",
            b"s3cret",
            b"Bearer",
            b"",
        ] {
            assert!(
                !bearer.accepts(Some(wrong)),
                "{:?}",
                String::from_utf8_lossy(wrong)
            );
        }
        assert!(!bearer.accepts(None));
    }

    /// A guess wrong in its first byte and one wrong only in its last take the same time: a
    /// byte-by-byte comparison would answer the first at once and the second after reading
    /// the whole token, which lets a client find the token byte by byte.
    #[test]
    fn the_bearer_check_takes_as_long_wherever_a_guess_goes_wrong() {
        let token = "t".repeat(256 * 1024);
        let bearer = Bearer::new(&token);
        let wrong_first = format!("Bearer x{}", &token[1..]);
        let wrong_last = format!("Bearer {}x", &token[..token.len() - 1]);
        let once = |guess: &str| {
            let started = Instant::now();
            assert!(!black_box(
                bearer.accepts(Some(black_box(guess.as_bytes())))
            ));
            started.elapsed()
        };
        let (mut first, mut last) = (Duration::MAX, Duration::MAX);
        for _ in 0..15 {
            first = first.min(once(&wrong_first));
            last = last.min(once(&wrong_last));
        }
        let ratio = last.as_secs_f64() / first.as_secs_f64();
        assert!(
            (0.5..2.0).contains(&ratio),
            "wrong in the first byte: {first:?}, in the last: {last:?}"
        );
    }

    #[test]
    fn clients_are_bucketed_by_ipv4_address_and_ipv6_prefix() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(bucket_of(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(bucket_of(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(bucket_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            bucket_of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            bucket_of(ip("2001:db8:1:2::9"))
        );
        assert_ne!(
            bucket_of(ip("2001:db8:1:3::1")),
            bucket_of(ip("2001:db8:1:2::1"))
        );
    }

    #[test]
    fn a_trusted_header_gives_its_last_entry() {
        let name = HeaderName::from_static("x-forwarded-for");
        let mut headers = HeaderMap::new();
        assert_eq!(header_address(&headers, &name), None);
        headers.insert(&name, "203.0.113.9, 198.51.100.4".parse().unwrap());
        assert_eq!(
            header_address(&headers, &name),
            Some("198.51.100.4".parse().unwrap())
        );
        headers.insert(&name, "[2001:db8::1]:4711".parse().unwrap());
        assert_eq!(
            header_address(&headers, &name),
            Some("2001:db8::1".parse().unwrap())
        );
        headers.insert(&name, "198.51.100.4:80".parse().unwrap());
        assert_eq!(
            header_address(&headers, &name),
            Some("198.51.100.4".parse().unwrap())
        );
        headers.insert(&name, "unknown".parse().unwrap());
        assert_eq!(header_address(&headers, &name), None);
    }

    #[test]
    fn callback_origins_are_checked_when_configured() {
        let builder = || ToolServer::builder("t");
        for bad in [
            "not a url",
            "file:///etc/passwd",
            "http://runtime.example/callbacks",
            "http://runtime.example/?q",
            "http://user:pw@runtime.example",
            "mailto:someone@example.com",
        ] {
            assert!(builder().allow_callback_origin(bad).is_err(), "{bad}");
        }
        let server = builder()
            .allow_callback_origin("http://127.0.0.1:8080")
            .unwrap()
            .allow_callback_origin("https://Runtime.Example")
            .unwrap()
            .build();
        let inner = &server.inner;
        assert!(
            inner
                .callback("http://127.0.0.1:8080/results?x=1")
                .is_some()
        );
        assert!(inner.callback("https://runtime.example:443/cb").is_some());
        for refused in [
            "http://127.0.0.1:8081/results",
            "https://127.0.0.1:8080/results",
            "http://127.0.0.2:8080/results",
            "http://runtime.example/cb",
            "https://runtime.example.evil/cb",
            "http://169.254.169.254/latest/meta-data/",
            "file:///etc/passwd",
            "/relative",
            "",
        ] {
            assert!(inner.callback(refused).is_none(), "{refused}");
        }
        let default = builder().build();
        assert!(
            default
                .inner
                .callback("http://127.0.0.1:8080/results")
                .is_none()
        );
    }
}
