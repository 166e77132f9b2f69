//! The tool-server side: an axum router a user mounts in their own server.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cancelkit_protocol::rap::{ToolCancellation, ToolInvocation};
use futures_util::FutureExt;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde_json::{Value, json};

use super::valid_id;
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

/// Configures a [`ToolServer`].
pub struct ToolServerBuilder {
    name: String,
    operations: BTreeMap<String, Operation>,
    bearer_token: Option<String>,
    rate: Option<(NonZeroU32, NonZeroU32)>,
    body_limit: usize,
    callback_timeout: Duration,
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
    /// (401 otherwise).
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// Allows each client (by address) `per_second` requests a second, in bursts of up to
    /// `burst` (429 beyond). Default: 50 a second, bursts of 100.
    pub fn rate_limit(mut self, per_second: u32, burst: u32) -> Self {
        self.rate = NonZeroU32::new(per_second).zip(NonZeroU32::new(burst));
        self
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

    /// Builds the server.
    pub fn build(self) -> ToolServer {
        let limiter = self.rate.map(|(per_second, burst)| {
            RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst))
        });
        let http = reqwest::Client::builder()
            .timeout(self.callback_timeout)
            .build()
            .expect("a plain HTTP client builds");
        ToolServer {
            inner: Arc::new(Inner {
                name: self.name,
                operations: self.operations,
                bearer: self.bearer_token.map(|t| format!("Bearer {t}")),
                limiter,
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
/// limit is per client address; without it all clients share one budget.
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
    bearer: Option<String>,
    limiter: Option<DefaultKeyedRateLimiter<String>>,
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
            body_limit: 1024 * 1024,
            callback_timeout: Duration::from_secs(10),
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
        self.inner.lock_calls().len()
    }
}

impl Inner {
    fn lock_calls(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Canceller>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Authentication, then the rate limit, then the body (in that order: an unauthenticated
    /// client learns nothing and spends nothing).
    async fn admit(&self, request: Request) -> Result<axum::body::Bytes, Response> {
        if let Some(expected) = &self.bearer {
            let given = request
                .headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            if given != Some(expected.as_bytes()) {
                return Err(StatusCode::UNAUTHORIZED.into_response());
            }
        }
        if let Some(limiter) = &self.limiter {
            let client = request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|info| info.0.ip().to_string())
                .unwrap_or_default();
            if limiter.check_key(&client).is_err() {
                return Err(StatusCode::TOO_MANY_REQUESTS.into_response());
            }
        }
        axum::body::to_bytes(request.into_body(), self.body_limit)
            .await
            .map_err(|_| StatusCode::PAYLOAD_TOO_LARGE.into_response())
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
    let key = (invocation.group_id.clone(), invocation.id.clone());
    let (scope, canceller) = Scope::root();
    {
        let mut calls = inner.lock_calls();
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
        inner.lock_calls().remove(&key);
        match outcome {
            Some(_) if token.is_cancelled() => {
                tracing::info!(thread_id = %key.0, tool_call_id = %key.1, "tool call cancelled; its result is not sent");
            }
            Some(outcome) => deliver(&inner, &invocation, outcome).await,
            None => {
                tracing::info!(thread_id = %key.0, tool_call_id = %key.1, "tool call cancelled and stopped");
            }
        }
    }));
    StatusCode::OK.into_response()
}

/// Posts a finished call's `tool_result` to its callback URL (once; failures are logged).
async fn deliver(
    inner: &Inner,
    invocation: &ToolInvocation,
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
    match inner
        .http
        .post(&invocation.callback_url)
        .json(&result)
        .send()
        .await
    {
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
            match inner.lock_calls().get(&key) {
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
