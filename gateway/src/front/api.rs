//! The cancellation API: `POST /cancellation/cancel` and `GET /cancellation/status/{id}`
//! (also under `/v1/`), with the seed's bodies.
//!
//! Permission `admin.system_config` acts on every run. A caller without it acts on its own
//! runs only: for every other id, whether a run exists under it or not, its cancel is
//! `queued` (waiting for a run of its own) and its status read 404, so nothing about other
//! users' runs is revealed. A bare JSON-RPC id names the one run of it still live (finished
//! ones never make it ambiguous); several live ones get 409 with their run ids.

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
        ApiError::NotFound => detail(StatusCode::NOT_FOUND, "Run not found"),
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
        ApiError::Ambiguous(runs) => (
            StatusCode::CONFLICT,
            axum::Json(serde_json::json!({
                "detail": format!(
                    "requestId names {} live runs; cancel one by its run id (listed in run_ids; \
                     a call's run id is in its Cancelkit-Run-Id header, \
                     result._meta[\"io.cancelkit/runId\"] and error.data.runId)",
                    runs.len()
                ),
                "run_ids": runs,
            })),
        )
            .into_response(),
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
        Ok(status) => axum::Json(status.body()).into_response(),
        Err(e) => refuse(e),
    }
}
