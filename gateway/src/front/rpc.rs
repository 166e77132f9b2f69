//! `POST /rpc`: one JSON-RPC message per POST, answered with the JSON-RPC response as the body
//! (as ContextForge's `/rpc`). A notification gets 202 with no body, so a caller can cancel its
//! own run by posting `notifications/cancelled`. A caller that disconnects before its answer
//! cancels the run. A `tools/call`'s response carries the header `Cancelkit-Run-Id`.
//!
//! Runs started here are keyed by (user, `rpc`, typed id): the same user cannot have two calls
//! with one id in flight through `/rpc`, and its `notifications/cancelled` finds its run from
//! any connection.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use cancelkit::JsonRpcError;
use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit::wire::members::Members;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::detail;
use crate::app::App;
use crate::auth::Caller;
use crate::calls::{self, CallRequest, ok_response, reply_response};
use crate::runs::record::{CancelSource, RunKey};

/// The response header naming a `tools/call`'s run.
pub const RUN_ID_HEADER: &str = "cancelkit-run-id";
/// The channel name of runs started through `/rpc`.
pub const CHANNEL: &str = "rpc";

/// A JSON-RPC message as `/rpc` reads it: its params as the caller wrote them.
pub(crate) enum Message {
    Request {
        id: RequestId,
        method: String,
        params: Box<RawValue>,
    },
    Notification {
        method: String,
        params: Box<RawValue>,
    },
}

/// Reads one JSON-RPC request or notification, or explains (422) what is wrong with it. Only
/// the envelope is read: the params stay as written.
pub(crate) fn read_message(body: &[u8]) -> Result<Message, String> {
    let whole = serde_json::from_slice::<&RawValue>(body)
        .map_err(|e| format!("the body is not valid JSON: {e}"))?;
    // A member written as `null` is there: an `id` of null is refused, not a notification.
    let Some(envelope) = Members::read(whole.get()) else {
        return Err("expected one JSON-RPC message (an object); batches are not accepted".into());
    };
    let text = |key: &str| {
        envelope
            .get(key)
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
    };
    if text("jsonrpc").as_deref() != Some("2.0") {
        return Err("`jsonrpc` must be \"2.0\"".into());
    }
    let method = match (envelope.get("method"), text("method")) {
        (_, Some(m)) if !m.is_empty() => m,
        (Some(_), _) => return Err("`method` must be a non-empty string".into()),
        (None, _) => return Err("`method` is missing (responses are not accepted here)".into()),
    };
    let params = match envelope.get("params") {
        None => None,
        Some(p) if p.get() == "null" => None,
        Some(p) if p.get().starts_with('{') => Some(p.to_owned()),
        Some(_) => return Err("`params` must be an object".into()),
    };
    let params =
        params.unwrap_or_else(|| RawValue::from_string("{}".to_owned()).expect("valid JSON"));
    let Some(id) = envelope.get("id") else {
        return Ok(Message::Notification { method, params });
    };
    match serde_json::from_str::<RequestId>(id.get()) {
        Ok(RequestId::String(id)) if id.len() > super::api::MAX_REQUEST_ID_LEN => Err(format!(
            "`id` is {} bytes long; at most {} are accepted",
            id.len(),
            super::api::MAX_REQUEST_ID_LEN
        )),
        Ok(id) => Ok(Message::Request { id, method, params }),
        Err(_) => Err("`id` must be a string or an integer".into()),
    }
}

/// `POST /rpc`.
pub async fn rpc(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Response {
    if !caller.may_execute() {
        return detail(
            StatusCode::FORBIDDEN,
            "Forbidden: permission tools.execute is required",
        );
    }
    let message = match read_message(&body) {
        Ok(m) => m,
        Err(e) => return super::unprocessable(e),
    };
    match message {
        Message::Notification { method, params } => {
            if method == "notifications/cancelled"
                && let Ok(params) = serde_json::from_str::<Value>(params.get())
            {
                client_cancel(&app, &caller, &params);
            }
            StatusCode::ACCEPTED.into_response()
        }
        Message::Request { id, method, params } => match method.as_str() {
            "tools/call" => {
                let request = CallRequest {
                    caller: caller.clone(),
                    channel: Arc::from(CHANNEL),
                    id: id.clone(),
                    params,
                    progress: None,
                    run_id: None,
                };
                let mut call = match calls::start(&app, request).await {
                    Ok(call) => call,
                    Err(error) => return written_response(reply_response(&id, &Err(error))),
                };
                call.cancel_on_drop(CancelSource::Disconnect);
                let outcome = call.outcome().await;
                let reply = call.reply(outcome);
                let mut response = written_response(reply_response(&id, &reply));
                if let Some(run_id) = call.run_id()
                    && let Ok(value) = HeaderValue::from_str(run_id)
                {
                    response.headers_mut().insert(RUN_ID_HEADER, value);
                }
                response
            }
            "tools/list" => json_response(ok_response(
                &id,
                json!({"tools": app.upstreams.list_tools().await}),
            )),
            "ping" => json_response(ok_response(&id, json!({}))),
            "initialize" => {
                let params = serde_json::from_str(params.get()).unwrap_or(Value::Null);
                json_response(ok_response(&id, app.initialize_result(&params)))
            }
            _ => json_response(calls::error_response(
                &id,
                &JsonRpcError::method_not_found(),
            )),
        },
    }
}

/// The caller's own `notifications/cancelled`: finds its run by its typed id (MCP says an
/// unknown or malformed one is ignored).
fn client_cancel(app: &App, caller: &Caller, params: &Value) {
    let Some(runs) = &app.runs else { return };
    let Some((id, reason)) = super::cancelled_params(params) else {
        return;
    };
    let key = RunKey {
        user: Arc::clone(&caller.sub),
        channel: Arc::from(CHANNEL),
        id,
    };
    runs.cancel_key(&key, CancelSource::Client, reason);
}

fn json_response(body: Value) -> Response {
    axum::Json(body).into_response()
}

/// A response whose JSON body is already written.
fn written_response(body: Vec<u8>) -> Response {
    (
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}
