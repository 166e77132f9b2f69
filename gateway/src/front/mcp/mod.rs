//! `/mcp`: MCP over Streamable HTTP, for clients on 2025-11-25 (and the earlier legacy
//! revisions) and on 2026-07-28.
//!
//! - **2025-11-25**: `initialize` opens a session (`Mcp-Session-Id`), which every later POST
//!   names; `GET` opens the session's stream, `DELETE` ends the session (and cancels its
//!   runs). A closed response stream is not a cancel; `notifications/cancelled` is, and the
//!   cancelled call gets no response.
//! - **2026-07-28**: no sessions and no handshake: every request carries its protocol version
//!   and capabilities in `params._meta`; `server/discover` says what the gateway speaks. Closing
//!   a `tools/call`'s response stream is its cancel.
//!
//! A POST without a session that is neither `initialize` nor stamped for 2026-07-28 is refused
//! (400). `tools/call` answers with an SSE stream (progress, then the response); everything
//! else with JSON.

pub mod session;
pub mod stream;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cancelkit::JsonRpcError;
use cancelkit::peer::McpRevision;
use cancelkit::protocol::jsonrpc::{ErrorCode, RequestId};
use cancelkit::wire::meta::SERVER_INFO;
use cancelkit::wire::{admission, headers};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::rpc::{Message, read_message};
use crate::app::{App, server_info};
use crate::auth::Caller;
use crate::calls::{self, CallRequest, ok_response};
use crate::runs::record::{CancelSource, RunKey};
use crate::upstream::PROGRESS_BUFFER;
pub use session::Sessions;
use session::{Session, TooManySessions};
use stream::CallStream;

/// The header naming a legacy session.
const SESSION_HEADER: HeaderName = headers::SESSION_ID;
/// The MCP 2026-07-28 revision.
const V2026: &str = McpRevision::V2026_07_28.text();

/// The era of one POST.
enum Era {
    Session(Arc<Session>),
    V2026,
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn rpc_error(status: StatusCode, id: Option<&RequestId>, error: JsonRpcError) -> Response {
    json_response(
        status,
        json!({"jsonrpc": "2.0", "id": id, "error": calls::error_object(&error)}),
    )
}

/// Completes a 2026-07-28 result: `resultType` where it is missing.
fn complete_2026(mut response: Value) -> Value {
    if let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) {
        result
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
    }
    response
}

/// Writes a result for a legacy (2025-11-25 and earlier) client: without 2026-07-28's
/// `resultType`, which an upstream speaking 2026-07-28 puts in its results.
fn legacy(mut response: Value) -> Value {
    if let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) {
        result.remove("resultType");
    }
    response
}

/// `POST /mcp`.
pub async fn post(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !caller.may_execute() {
        return super::detail(
            StatusCode::FORBIDDEN,
            "Forbidden: permission tools.execute is required",
        );
    }
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return json_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"detail": format!("the body is not valid JSON: {e}"), "jsonrpc": "2.0", "id": null,
                       "error": {"code": -32700, "message": "Parse error"}}),
            );
        }
    };
    // A response or error from the client (to a request we never send) is accepted and dropped.
    if value.get("method").is_none()
        && (value.get("result").is_some() || value.get("error").is_some())
    {
        return StatusCode::ACCEPTED.into_response();
    }
    let message = match read_message(value) {
        Ok(m) => m,
        Err(e) => {
            return json_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"detail": e, "jsonrpc": "2.0", "id": null,
                       "error": {"code": -32600, "message": "Invalid Request"}}),
            );
        }
    };
    let session_id = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (method, id, params) = match message {
        Message::Request { id, method, params } => (method, Some(id), params),
        Message::Notification { method, params } => (method, None, params),
    };

    let is_2026 = session_id.is_none() && admission::is_2026(&headers, &method, &params);
    if method == "initialize" && !is_2026 {
        let Some(id) = id else {
            return StatusCode::ACCEPTED.into_response();
        };
        return initialize(&app, &caller, &id, &params);
    }
    let era = match &session_id {
        Some(sid) => match app.sessions.get(sid, &caller.sub) {
            Some(session) => Era::Session(session),
            None => {
                return rpc_error(
                    StatusCode::NOT_FOUND,
                    id.as_ref(),
                    JsonRpcError::new(ErrorCode::from(-32001), "Session not found"),
                );
            }
        },
        None if is_2026 => Era::V2026,
        None => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                id.as_ref(),
                JsonRpcError::new(
                    ErrorCode::from(-32600),
                    "Bad Request: no Mcp-Session-Id header; send initialize first, or stamp the \
                     request for MCP 2026-07-28 (params._meta)",
                ),
            );
        }
    };
    match &era {
        Era::Session(session) => {
            if let Some(refused) = refuse_protocol_version(&headers, session, id.as_ref()) {
                return refused;
            }
        }
        // A 2026-07-28 request: its envelope, its headers, its version — as every server of
        // that revision admits it.
        Era::V2026 => {
            if let Some(id) = &id
                && let Err(rejection) = admission::admit(&headers, &method, &params, &[V2026])
            {
                let mut error =
                    JsonRpcError::new(ErrorCode::from(rejection.code), rejection.message);
                error.data = rejection.data;
                let status =
                    StatusCode::from_u16(rejection.status).unwrap_or(StatusCode::BAD_REQUEST);
                return rpc_error(status, Some(id), error);
            }
        }
    }
    let Some(id) = id else {
        return notification(&app, &caller, &era, &method, &params);
    };
    match era {
        Era::Session(session) => legacy_request(&app, caller, session, id, &method, params).await,
        Era::V2026 => request_2026(&app, caller, id, &method, params).await,
    }
}

/// `MCP-Protocol-Version`, when a client sends it (from 2025-06-18 on it must), names the
/// session's revision; anything else is refused with 400 and -32600. The refusal, if any.
fn refuse_protocol_version(
    headers: &HeaderMap,
    session: &Session,
    id: Option<&RequestId>,
) -> Option<Response> {
    let sent = headers.get(headers::PROTOCOL_VERSION)?;
    let sent = String::from_utf8_lossy(sent.as_bytes());
    let expected = session.version.as_str();
    if sent == expected {
        return None;
    }
    let error = JsonRpcError::new(
        ErrorCode::from(-32600),
        format!(
            "Bad Request: MCP-Protocol-Version `{sent}` is not the revision in force, `{expected}`"
        ),
    );
    Some(rpc_error(StatusCode::BAD_REQUEST, id, error))
}

fn initialize(app: &App, caller: &Caller, id: &RequestId, params: &Value) -> Response {
    let result = app.initialize_result(params);
    let latest = McpRevision::LATEST_LEGACY.as_str().unwrap_or_default();
    let version = result["protocolVersion"].as_str().unwrap_or(latest);
    match app.sessions.create(&caller.sub, version) {
        Ok(session) => {
            let mut response = json_response(StatusCode::OK, ok_response(id, result));
            if let Ok(value) = HeaderValue::from_str(&session.id) {
                response.headers_mut().insert(SESSION_HEADER, value);
            }
            response
        }
        Err(TooManySessions) => {
            let mut response = rpc_error(
                StatusCode::TOO_MANY_REQUESTS,
                Some(id),
                JsonRpcError::new(
                    ErrorCode::from(calls::OVERLOADED),
                    "Too many MCP sessions are open on this worker; retry later",
                ),
            );
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("5"));
            response
        }
    }
}

fn notification(app: &App, caller: &Caller, era: &Era, method: &str, params: &Value) -> Response {
    if method == "notifications/cancelled"
        && let Era::Session(session) = era
        && let Some(runs) = &app.runs
        && let Some((id, reason)) = super::cancelled_params(params)
    {
        let key = RunKey {
            user: Arc::clone(&caller.sub),
            channel: Arc::clone(&session.id),
            id,
        };
        // The notification may overtake its tools/call (another POST): then the call is
        // cancelled as soon as it registers.
        session.cancel_or_remember(&key.id, reason, |reason| {
            runs.cancel_key(&key, CancelSource::Client, reason)
        });
    }
    // Every other notification (initialized, progress, roots changed...) is accepted.
    StatusCode::ACCEPTED.into_response()
}

async fn legacy_request(
    app: &Arc<App>,
    caller: Caller,
    session: Arc<Session>,
    id: RequestId,
    method: &str,
    params: Value,
) -> Response {
    match method {
        "ping" => json_response(StatusCode::OK, ok_response(&id, json!({}))),
        "tools/list" => json_response(
            StatusCode::OK,
            ok_response(&id, json!({"tools": app.upstreams.list_tools().await})),
        ),
        "tools/call" => {
            let channel = Arc::clone(&session.id);
            tools_call(app, caller, channel, id, params, Some(session), legacy).await
        }
        _ => json_response(
            StatusCode::OK,
            calls::error_response(&id, JsonRpcError::method_not_found(), None),
        ),
    }
}

async fn request_2026(
    app: &Arc<App>,
    caller: Caller,
    id: RequestId,
    method: &str,
    params: Value,
) -> Response {
    // Admitted already (`admission::admit`): its envelope, headers and version are right.
    match method {
        "server/discover" => json_response(
            StatusCode::OK,
            complete_2026(ok_response(
                &id,
                json!({
                    "supportedVersions": [V2026],
                    "capabilities": {"tools": {"listChanged": false}},
                    "ttlMs": 0,
                    "cacheScope": "private",
                    "_meta": {SERVER_INFO: server_info()},
                }),
            )),
        ),
        "tools/list" => json_response(
            StatusCode::OK,
            complete_2026(ok_response(
                &id,
                json!({"tools": app.upstreams.list_tools().await, "ttlMs": 0, "cacheScope": "private"}),
            )),
        ),
        "tools/call" => {
            static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);
            let channel: Arc<str> = Arc::from(format!(
                "stream-{}",
                NEXT_STREAM.fetch_add(1, Ordering::Relaxed)
            ));
            tools_call(app, caller, channel, id, params, None, complete_2026).await
        }
        // `initialize` and `ping` included: 2026-07-28 has neither.
        _ => json_response(
            StatusCode::NOT_FOUND,
            calls::error_response(&id, JsonRpcError::method_not_found(), None),
        ),
    }
}

/// A `tools/call` as an SSE stream: progress, then the response.
async fn tools_call(
    app: &Arc<App>,
    caller: Caller,
    channel: Arc<str>,
    id: RequestId,
    params: Value,
    session: Option<Arc<Session>>,
    finish: fn(Value) -> Value,
) -> Response {
    let (progress_tx, progress_rx) = mpsc::channel(PROGRESS_BUFFER);
    let request = CallRequest {
        caller,
        channel,
        id: id.clone(),
        params,
        progress: Some(progress_tx),
    };
    let call = match calls::start(app, request).await {
        Ok(call) => call,
        Err(response) => return json_response(StatusCode::OK, finish(response)),
    };
    // 2025-11-25: the client's notifications/cancelled for this call came first.
    if let (Some(session), Some(runs), Some(run_id)) = (&session, &app.runs, call.run_id())
        && let Some(reason) = session.take_early_cancel(&id)
    {
        runs.cancel_live(run_id, CancelSource::Client, reason);
    }
    let stream = CallStream::new(call, progress_rx, session, finish);
    with_keep_alive(app, Sse::new(stream))
}

/// An event stream with keep-alive comments every `keep_alive` of the configuration, if any:
/// at 2026-07-28 a `tools/call` stream that a proxy cuts for being idle would cancel the call.
fn with_keep_alive<S>(app: &App, sse: Sse<S>) -> Response
where
    S: futures_util::Stream<Item = Result<Event, std::convert::Infallible>> + Send + 'static,
{
    match app.config.keep_alive {
        Some(interval) => sse
            .keep_alive(KeepAlive::new().interval(interval).text("keep-alive"))
            .into_response(),
        None => sse.into_response(),
    }
}

/// `GET /mcp`: the session's stream (2025-11-25). 405 without a session: 2026-07-28 has none.
pub async fn get(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let Some(sid) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return super::detail(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /mcp needs an Mcp-Session-Id (MCP 2026-07-28 has no GET stream)",
        );
    };
    let Some(session) = app.sessions.get(sid, &caller.sub) else {
        return super::detail(StatusCode::NOT_FOUND, "Session not found");
    };
    let rx = session.open_stream();
    let stopping = app.stopping.clone();
    let events = futures_util::stream::unfold((rx, stopping), |(mut rx, stopping)| async move {
        tokio::select! {
            message = rx.recv() => {
                let message: Value = message?;
                let event = Event::default().event("message").data(message.to_string());
                Some((Ok::<_, std::convert::Infallible>(event), (rx, stopping)))
            }
            _ = stopping.cancelled() => None,
        }
    });
    with_keep_alive(&app, Sse::new(events))
}

/// `DELETE /mcp`: ends the session; its runs in flight are cancelled.
pub async fn delete(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let Some(sid) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return super::detail(
            StatusCode::BAD_REQUEST,
            "DELETE /mcp needs an Mcp-Session-Id",
        );
    };
    match app.sessions.remove(sid, &caller.sub) {
        Some(session) => {
            if let Some(runs) = &app.runs {
                runs.cancel_channel(&caller.sub, &session.id, CancelSource::Disconnect);
            }
            StatusCode::NO_CONTENT.into_response()
        }
        None => super::detail(StatusCode::NOT_FOUND, "Session not found"),
    }
}
