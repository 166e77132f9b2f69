//! The HTTP front: authentication as a layer, and thin handlers for `/mcp`, `/rpc`, the
//! cancellation API, `/health` and `/metrics`.

pub mod api;
pub mod mcp;
pub mod rpc;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cancelkit::protocol::jsonrpc::RequestId;
use serde_json::{Value, json};

use crate::app::App;
use crate::auth::AuthError;

/// The counter of requests with a valid token that grants no permission on the gateway.
pub const METRIC_NO_PERMISSION: &str = "cancelkit_gateway_requests_without_permission_total";

/// A JSON body `{"detail": ...}` with a status, as every refusal of the gateway is written.
pub fn detail(status: StatusCode, detail: impl Into<String>) -> Response {
    (status, axum::Json(json!({"detail": detail.into()}))).into_response()
}

/// DNS-rebinding protection, before anything else: 403 for a request whose `Origin` is neither
/// loopback nor in `allowed_origins`, or (on a gateway bound to loopback) whose `Host` is
/// neither loopback nor in `allowed_hosts`.
pub async fn check_origin(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let origin = headers.get(header::ORIGIN).map(HeaderValue::as_bytes);
    let host = headers.get(header::HOST).map(HeaderValue::as_bytes);
    match app.config.origins.check(origin, host) {
        Ok(()) => next.run(request).await,
        Err(refused) => {
            tracing::info!(%refused, "request refused");
            detail(StatusCode::FORBIDDEN, refused.to_string())
        }
    }
}

/// Checks the bearer token and puts the [`Caller`](crate::auth::Caller) into the request's
/// extensions; 401 (with `WWW-Authenticate: Bearer`) without a valid one.
pub async fn authenticate(
    State(app): State<Arc<App>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match app.verifier.check_header(header) {
        // A valid token that grants nothing here is refused before any work is done for it.
        Ok(caller) if !caller.may_execute() && !caller.is_admin() => {
            metrics::counter!(METRIC_NO_PERMISSION).increment(1);
            detail(
                StatusCode::FORBIDDEN,
                "Forbidden: this token grants no permission on this gateway \
                 (tools.execute or admin.system_config)",
            )
        }
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => {
            let mut response = detail(
                StatusCode::UNAUTHORIZED,
                match e {
                    AuthError::Missing => "Not authenticated: a bearer token is required",
                    AuthError::Invalid => "Invalid or expired token",
                },
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// Reads a JSON body, or says why it is not one (the `detail` of a 422).
pub fn parse_json(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| format!("the body is not valid JSON: {e}"))
}

/// A 422 with `detail`.
pub fn unprocessable(detail_text: String) -> Response {
    detail(StatusCode::UNPROCESSABLE_ENTITY, detail_text)
}

/// The typed `requestId` and the reason (cut to the API's limit) of a client's
/// `notifications/cancelled`; `None` for a malformed one, which MCP says to ignore.
pub fn cancelled_params(params: &Value) -> Option<(RequestId, Option<String>)> {
    let id = serde_json::from_value::<RequestId>(params.get("requestId")?.clone()).ok()?;
    let reason = params
        .get("reason")
        .and_then(Value::as_str)
        .map(|r| r.chars().take(api::MAX_REASON_LEN).collect());
    Some((id, reason))
}

/// `GET /health`.
pub async fn health(State(app): State<Arc<App>>) -> Response {
    let redis = match app.runs.as_ref().and_then(|r| r.cluster()) {
        None => "off",
        Some(c) if c.is_connected() => "connected",
        Some(_) => "disconnected",
    };
    axum::Json(json!({
        "status": if app.draining() { "draining" } else { "ok" },
        "worker": app.config.worker_id,
        "redis": redis,
        "runs_in_flight": app.runs.as_ref().map(|r| r.in_flight()).unwrap_or(0),
    }))
    .into_response()
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(),
    )
        .into_response()
}

/// 404 `{"detail":"Not Found"}` for every path the gateway does not serve.
pub async fn not_found() -> Response {
    detail(StatusCode::NOT_FOUND, "Not Found")
}
