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
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use cancelkit::JsonRpcError;
use cancelkit::protocol::jsonrpc::RequestId;
use serde_json::{Value, json};

use super::{detail, parse_json};
use crate::app::App;
use crate::auth::Caller;
use crate::calls::{self, CallRequest, ok_response};
use crate::runs::record::{CancelSource, RunKey};

/// The response header naming a `tools/call`'s run.
pub const RUN_ID_HEADER: &str = "cancelkit-run-id";
/// The channel name of runs started through `/rpc`.
pub const CHANNEL: &str = "rpc";

/// A JSON-RPC message as `/rpc` reads it.
pub(crate) enum Message {
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// Reads one JSON-RPC request or notification, or explains (422) what is wrong with it.
pub(crate) fn read_message(value: Value) -> Result<Message, String> {
    let Value::Object(mut object) = value else {
        return Err("expected one JSON-RPC message (an object); batches are not accepted".into());
    };
    match object.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        _ => return Err("`jsonrpc` must be \"2.0\"".into()),
    }
    let method = match object.remove("method") {
        Some(Value::String(m)) if !m.is_empty() => m,
        Some(_) => return Err("`method` must be a non-empty string".into()),
        None => return Err("`method` is missing (responses are not accepted here)".into()),
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p,
        Some(_) => return Err("`params` must be an object".into()),
    };
    match object.remove("id") {
        None => Ok(Message::Notification { method, params }),
        Some(id) => match serde_json::from_value::<RequestId>(id) {
            Ok(RequestId::String(id)) if id.len() > super::api::MAX_REQUEST_ID_LEN => Err(format!(
                "`id` is {} bytes long; at most {} are accepted",
                id.len(),
                super::api::MAX_REQUEST_ID_LEN
            )),
            Ok(id) => Ok(Message::Request { id, method, params }),
            Err(_) => Err("`id` must be a string or an integer".into()),
        },
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
    let message = match parse_json(&body).and_then(read_message) {
        Ok(m) => m,
        Err(e) => return super::unprocessable(e),
    };
    match message {
        Message::Notification { method, params } => {
            if method == "notifications/cancelled" {
                client_cancel(&app, &caller, &params);
            }
            StatusCode::ACCEPTED.into_response()
        }
        Message::Request { id, method, params } => match method.as_str() {
            "tools/call" => {
                let request = CallRequest {
                    caller: caller.clone(),
                    channel: Arc::from(CHANNEL),
                    id,
                    params,
                    progress: None,
                    run_id: None,
                };
                let mut call = match calls::start(&app, request).await {
                    Ok(call) => call,
                    Err(response) => return json_response(response),
                };
                call.cancel_on_drop(CancelSource::Disconnect);
                let outcome = call.outcome().await;
                let mut response = json_response(call.response(&outcome));
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
            "initialize" => json_response(ok_response(&id, app.initialize_result(&params))),
            _ => json_response(calls::error_response(
                &id,
                JsonRpcError::method_not_found(),
                None,
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
