//! The cancellation API: `POST /cancellation/cancel` and `GET /cancellation/status/{id}`
//! (also under `/v1/`), with the seed's bodies.
//!
//! Permission `admin.system_config` acts on every run. A caller without it acts on its own
//! runs only and gets 403 for every other id, whether a run exists under it or not, so nothing
//! about other users' runs is revealed. A bare JSON-RPC id that names several runs the caller
//! may see is refused with 409: the run id (`result._meta["io.cancelkit/runId"]`) says which.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cancelkit::protocol::gateway::{CancelRunRequest, CancelRunResponse, CancelStatus};

use super::{detail, parse_json};
use crate::app::App;
use crate::auth::Caller;
use crate::runs::{ApiError, CancelOutcome};

/// The longest `requestId` accepted: the bound the runtime puts on a JSON-RPC id (`/mcp`), so
/// that every id a client can give its call can also name it here (and `/rpc` uses it too).
pub const MAX_REQUEST_ID_LEN: usize = cancelkit::peer::DEFAULT_MAX_ID_LEN;
/// The longest reason accepted.
pub const MAX_REASON_LEN: usize = 4096;

fn refuse(error: ApiError) -> Response {
    match error {
        ApiError::Forbidden => detail(
            StatusCode::FORBIDDEN,
            "Forbidden: you may cancel and read only your own runs",
        ),
        ApiError::NotFound => detail(StatusCode::NOT_FOUND, "Run not found"),
        ApiError::NoRunYet => detail(
            StatusCode::NOT_FOUND,
            "No run has this requestId yet. A cancel by bare id that waits for its run must say \
             whose run it is: add \"user\": \"<subject>\" (or cancel by run id)",
        ),
        ApiError::UserNotAllowed => detail(
            StatusCode::FORBIDDEN,
            "Forbidden: only admin.system_config may name a `user`",
        ),
        ApiError::TooManyWaiting { key, limit, user } => detail(
            if user {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            },
            if user {
                format!(
                    "Too many cancels waiting for their run: you have {limit}, your share \
                     ({key}); retry when one has applied or expired"
                )
            } else {
                format!(
                    "Too many cancels waiting for their run: the gateway holds {limit}, its \
                     bound ({key}); retry later"
                )
            },
        ),
        ApiError::Ambiguous(n) => detail(
            StatusCode::CONFLICT,
            format!(
                "requestId names {n} runs; use the run id (result._meta[\"io.cancelkit/runId\"], \
                 error.data.runId or the Cancelkit-Run-Id header) to say which"
            ),
        ),
    }
}

fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_REQUEST_ID_LEN || id.chars().any(char::is_control) {
        return Err(format!(
            "requestId must be 1 to {MAX_REQUEST_ID_LEN} bytes without control characters"
        ));
    }
    Ok(())
}

/// `POST /cancellation/cancel`.
pub async fn cancel(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Response {
    let Some(runs) = &app.runs else {
        return super::not_found().await;
    };
    let value = match parse_json(&body) {
        Ok(v) => v,
        Err(e) => return super::unprocessable(e),
    };
    let request: CancelRunRequest = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => {
            return detail(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("expected {{\"requestId\": string, \"reason\": string|null}}: {e}"),
            );
        }
    };
    if let Err(e) = check_id(&request.request_id) {
        return super::unprocessable(e);
    }
    if let Some(user) = &request.user
        && (user.is_empty() || user.len() > MAX_REQUEST_ID_LEN)
    {
        return super::unprocessable(format!("user must be 1 to {MAX_REQUEST_ID_LEN} bytes"));
    }
    if request
        .reason
        .as_ref()
        .is_some_and(|r| r.len() > MAX_REASON_LEN)
    {
        return detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("reason must be at most {MAX_REASON_LEN} bytes"),
        );
    }
    match runs
        .cancel(
            &request.request_id,
            &caller,
            request.reason.clone(),
            request.user.as_deref(),
        )
        .await
    {
        Ok(outcome) => axum::Json(CancelRunResponse {
            status: match outcome {
                CancelOutcome::Cancelled => CancelStatus::Cancelled,
                CancelOutcome::Queued => CancelStatus::Queued,
            },
            request_id: request.request_id,
            reason: request.reason,
        })
        .into_response(),
        Err(e) => refuse(e),
    }
}

/// `GET /cancellation/status/{request_id}`.
pub async fn status(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    Path(request_id): Path<String>,
) -> Response {
    let Some(runs) = &app.runs else {
        return super::not_found().await;
    };
    if let Err(e) = check_id(&request_id) {
        return super::unprocessable(e);
    }
    match runs.status(&request_id, &caller).await {
        Ok(record) => axum::Json(record.status_body()).into_response(),
        Err(e) => refuse(e),
    }
}
