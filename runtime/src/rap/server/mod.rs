//! The tool-server side: an axum router a user mounts in their own server.

use std::collections::BTreeMap;
use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderName;
use axum::routing::{get, post};
use reqwest::Url;
use serde_json::Value;

mod admission;
mod handlers;
mod limiter;
mod running;
#[cfg(test)]
mod tests;
mod tool;

use admission::{Admission, WhenThrottled};
use running::Running;
use tool::{Handler, Operation};
pub use tool::{ToolCall, ToolError, ToolOutput};

/// How many calls a [`ToolServer`] runs at once by default ([`ToolServerBuilder::max_running`]).
pub const DEFAULT_MAX_RUNNING: usize = 1024;

/// How the server tells clients apart ([`ToolServerBuilder::client_key`]), for its rate limit
/// and for the per-client share of running calls.
///
/// IPv6 addresses are grouped by their /64 prefix, since one host usually owns a whole /64;
/// IPv4-mapped IPv6 addresses count as the IPv4 address.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientKey {
    /// The TCP peer address from axum's
    /// [`ConnectInfo<SocketAddr>`](axum::extract::ConnectInfo): serve the router with
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
    /// reach (a Unix socket, a private network). One guessing client then throttles everyone
    /// (the runtime's cancels are still applied behind the 429, its invocations refused), and the per-client share of running calls does not apply (the server does
    /// not know its callers; only [`max_running`](ToolServerBuilder::max_running) bounds them).
    Shared,
}

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
    max_running: usize,
    max_running_per_client: Option<usize>,
}

impl std::fmt::Debug for ToolServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServerBuilder")
            .field("name", &self.name)
            .field("operations", &self.operations.keys().collect::<Vec<_>>())
            .field("max_running", &self.max_running)
            .field("max_running_per_client", &self.max_running_per_client)
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
    /// (401 otherwise; each refusal spends its client's [`rate_limit`](Self::rate_limit)
    /// budget, 429 once it is spent). The token is compared in constant time (SHA-256 digests
    /// compared with [`subtle`]), so response timing reveals neither its bytes nor its length.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// Allows each client `per_second` failed authentications a second, in bursts of up to
    /// `burst` (429 beyond); `0` for either turns the limit off. Default: 50 a second, bursts
    /// of 100. It throttles bearer-token guessing, so it applies only with a
    /// [`bearer_token`](Self::bearer_token): without one nothing fails authentication and the
    /// limit never refuses.
    ///
    /// Only a request on `/invoke` or `/cancel_tool_call` with a wrong or missing token
    /// spends its client's budget (401 while there was budget). A request with the right token
    /// spends nothing, so a runtime holding the token is never throttled by its own requests
    /// (a burst of cancels for many calls in flight included) and gets 200 as long as nobody
    /// from its address guesses. A client whose budget is exhausted gets 429 for every request,
    /// the right token included, until one request's worth has refilled: otherwise a guesser
    /// could ignore the 429s and watch for the one guess without one. The token is still
    /// checked, in constant time, and the 429 is the same either way (no code path before it
    /// depends on the token): behind it a `/cancel_tool_call` with the right token is still
    /// applied (on its body as far as it arrived with the request, as a runtime sends it; the
    /// runtime reads no answer and never retries), while an `/invoke` is not run.
    ///
    /// Clients are told apart by [`client_key`](Self::client_key); the limiter remembers only
    /// clients that spent budget and forgets each once its budget is full again (it sweeps
    /// every 1,024 requests and at least once a second while requests arrive), so its memory
    /// is bounded by the clients that failed authentication in the last refill period
    /// (`burst / per_second` seconds) plus 1,024.
    pub fn rate_limit(mut self, per_second: u32, burst: u32) -> Self {
        self.rate = NonZeroU32::new(per_second).zip(NonZeroU32::new(burst));
        self
    }

    /// How the rate limit and the per-client share tell clients apart. Default
    /// [`ClientKey::PeerAddress`]: the router must be served with
    /// `into_make_service_with_connect_info::<SocketAddr>()`, and requests without a peer
    /// address are refused with 500 where a limit needs the client (the rate limit, which
    /// needs a bearer token, or the share).
    pub fn client_key(mut self, key: ClientKey) -> Self {
        self.client_key = key;
        self
    }

    /// Runs at most `max` calls at once (at least one; default [`DEFAULT_MAX_RUNNING`],
    /// 1,024), all clients together.
    ///
    /// A call holds its place from the `200` that accepts it until its handler has stopped
    /// and its result has been posted to the callback (or given up after the
    /// [`callback_timeout`](Self::callback_timeout)). An `/invoke` that finds every place held
    /// is refused before anything runs with `503 Service Unavailable`, `Retry-After: 1` and
    /// the body `{"error": "...", "limit": "max_running", "max": N}`. A call once accepted is
    /// never dropped to make room. RAP itself defines no error form for `/invoke`; this is the
    /// server's `{"error": ...}` form, as for its other refusals.
    pub fn max_running(mut self, max: usize) -> Self {
        self.max_running = max.max(1);
        self
    }

    /// Lets each client run at most `share` of the calls at once; `0` turns the share off (the
    /// default: only [`max_running`](Self::max_running) applies).
    ///
    /// A client is what [`client_key`](Self::client_key) makes of a request: its address (IPv6
    /// by /64), or the address a trusted proxy names. Under [`ClientKey::Shared`] the server
    /// does not know its callers and the share does not apply. The RAP `user_id` is not used:
    /// whoever may invoke could name any user. An `/invoke` beyond the share is refused with
    /// `429 Too Many Requests`, `Retry-After: 1` and `{"error": "...", "limit":
    /// "max_running_per_client", "max": N}`. The share is off by default because the usual
    /// client is a single runtime that should be able to use every place.
    pub fn max_running_per_client(mut self, share: usize) -> Self {
        self.max_running_per_client = (share > 0).then_some(share);
        self
    }

    /// Allows `/invoke` to name a `callback_url` on `origin` (`scheme://host[:port]`, `http` or
    /// `https`; a missing port is the scheme's default). Call it once per origin.
    ///
    /// The tool server posts each result to its invocation's `callback_url`, so an unchecked
    /// URL would let anyone who may invoke a tool make the server send requests into its own
    /// network. By default no origin is allowed and every `/invoke` is refused with 400 (before
    /// anything runs) until the runtime's callback origin is configured here. Only the origin
    /// is matched, not the path; redirects from a callback are not followed. A `callback_url`
    /// longer than [`MAX_CALLBACK_URL_LEN`](super::MAX_CALLBACK_URL_LEN) bytes, or holding
    /// whitespace or control characters, is refused with 400 too.
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
        if self.callback_origins.is_empty() {
            tracing::warn!(
                server = ?self.name,
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
                admission: Admission::new(
                    self.rate,
                    self.client_key,
                    self.bearer_token.as_deref(),
                    self.body_limit,
                ),
                callback_origins: self.callback_origins,
                http,
                running: Arc::new(Running::new(self.max_running, self.max_running_per_client)),
            }),
        }
    }
}

/// A RAP tool server; [`router`](Self::router) gives the axum routes to mount.
///
/// Serve the router with `into_make_service_with_connect_info::<SocketAddr>()` so the rate
/// limit can tell clients apart by address; without it, requests are refused with 500 where a
/// limit needs the client, unless another [`ClientKey`] is configured.
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
    /// The rate limit, bearer check and body limit in front of `/invoke` and
    /// `/cancel_tool_call`.
    admission: Admission,
    callback_origins: Vec<Origin>,
    http: reqwest::Client,
    /// The running calls and their bounded places.
    running: Arc<Running>,
}

impl Inner {
    /// The callback URL, if it is on an allowed origin.
    fn callback(&self, callback_url: &str) -> Option<Url> {
        let url = Url::parse(callback_url).ok()?;
        let origin = Origin::of(&url)?;
        self.callback_origins.contains(&origin).then_some(url)
    }
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
            max_running: DEFAULT_MAX_RUNNING,
            max_running_per_client: None,
        }
    }

    /// `POST /invoke`, `POST /cancel_tool_call` and `GET /.well-known/rap-toolset`.
    ///
    /// The two `POST` routes sit behind layers, in this order: the client's identity (500
    /// if it cannot be told, where a limit needs it), the
    /// [bearer token](ToolServerBuilder::bearer_token) (401) with the per-client
    /// [rate limit](ToolServerBuilder::rate_limit) of failed authentications (429 for every
    /// request of a client that spent it) and the [body limit](ToolServerBuilder::body_limit)
    /// (413). The toolset is open.
    pub fn router(&self) -> axum::Router {
        let admission = &self.inner.admission;
        let share = self.inner.running.needs_client();
        axum::Router::new()
            .route(
                "/invoke",
                admission.guard(post(handlers::invoke), share, WhenThrottled::Refuse),
            )
            .route(
                "/cancel_tool_call",
                admission.guard(
                    post(handlers::cancel_tool_call),
                    false,
                    WhenThrottled::ApplyBehind429,
                ),
            )
            .route("/.well-known/rap-toolset", get(handlers::toolset))
            .with_state(Arc::clone(&self.inner))
    }

    /// How many calls hold a place: running, or posting their result (see
    /// [`ToolServerBuilder::max_running`]).
    pub fn running(&self) -> usize {
        self.inner.running.held()
    }

    /// How many clients the rate limiter remembers right now: those that failed
    /// authentication recently (0 without a rate limit or a bearer token). It forgets clients
    /// whose budget is full again, so this stays bounded (see
    /// [`ToolServerBuilder::rate_limit`]).
    pub fn rate_limited_clients(&self) -> usize {
        self.inner.admission.rate_limited_clients()
    }
}
