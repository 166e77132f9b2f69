//! The tool server's endpoints: `POST /invoke`, `POST /cancel_tool_call` and
//! `GET /.well-known/rap-toolset`, and the posting of a finished call's result.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use cancelkit_protocol::rap::{ToolCancellation, ToolInvocation};
use futures_util::FutureExt;
use reqwest::Url;
use serde_json::{Value, json};

use super::admission::Client;
use super::running::{CancelOutcome, Refusal};
use super::{Inner, ToolCall, ToolError, ToolOutput};
use crate::rap::{MAX_CALLBACK_URL_LEN, MAX_ID_LEN, shown, valid_id};
use crate::{CancelReason, Scope};

fn bad_request(message: impl Into<String>) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": message.into()})),
    )
        .into_response()
}

/// The first bound an invocation's client-chosen text breaks, as the 400 message.
fn over_a_limit(invocation: &ToolInvocation) -> Option<String> {
    if !valid_id(&invocation.group_id) || !valid_id(&invocation.id) {
        return Some(format!(
            "group_id and id must be 1-{MAX_ID_LEN} characters of [A-Za-z0-9._:-]"
        ));
    }
    let fields = [
        ("operation", Some(&invocation.operation)),
        ("call_id", invocation.call_id.as_ref()),
        ("user_id", invocation.user_id.as_ref()),
    ];
    for (name, value) in fields {
        if value.is_some_and(|v| v.len() > MAX_ID_LEN) {
            return Some(format!(
                "{name} is longer than the limit of {MAX_ID_LEN} bytes"
            ));
        }
    }
    if invocation.callback_url.len() > MAX_CALLBACK_URL_LEN {
        return Some(format!(
            "callback_url is longer than the limit of {MAX_CALLBACK_URL_LEN} bytes"
        ));
    }
    None
}

/// The answer to an invocation that found no place (or a running twin).
fn refused(refusal: Refusal) -> Response {
    let (status, body) = match refusal {
        Refusal::Duplicate => (
            StatusCode::CONFLICT,
            json!({"error": "this tool call is already running"}),
        ),
        Refusal::Full(max) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({
                "error": format!("the tool server is running its limit of {max} calls (max_running); try again later"),
                "limit": "max_running",
                "max": max,
            }),
        ),
        Refusal::ClientFull(max) => (
            StatusCode::TOO_MANY_REQUESTS,
            json!({
                "error": format!("this client is running its share of {max} calls (max_running_per_client); try again later"),
                "limit": "max_running_per_client",
                "max": max,
            }),
        ),
    };
    let mut response = (status, axum::Json(body)).into_response();
    if refusal != Refusal::Duplicate {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}

/// `POST /invoke`, behind the server's layers: `client` is who sent it (when the server tells
/// clients apart), `body` the whole body within the limit.
pub(super) async fn invoke(
    State(inner): State<Arc<Inner>>,
    client: Option<Extension<Client>>,
    body: Bytes,
) -> Response {
    let invocation: ToolInvocation = match serde_json::from_slice(&body) {
        Ok(invocation) => invocation,
        Err(e) => return bad_request(format!("not a tool invocation: {e}")),
    };
    if let Some(message) = over_a_limit(&invocation) {
        return bad_request(message);
    }
    let Some(operation) = inner.operations.get(&invocation.operation) else {
        tracing::debug!(operation = ?shown(&invocation.operation), "refused an /invoke of an unknown operation");
        return bad_request(format!("no operation `{}`", invocation.operation));
    };
    if invocation
        .callback_url
        .chars()
        .any(|c| c.is_control() || c.is_whitespace())
    {
        tracing::warn!(url = ?shown(&invocation.callback_url), "refused an /invoke whose callback_url holds whitespace or control characters");
        return bad_request("callback_url must not contain whitespace or control characters");
    }
    let Some(callback) = inner.callback(&invocation.callback_url) else {
        tracing::warn!(url = ?shown(&invocation.callback_url), "refused an /invoke whose callback_url is not on an allowed origin");
        return bad_request("callback_url is not on an allowed origin");
    };
    let key = (invocation.group_id.clone(), invocation.id.clone());
    let (scope, canceller) = Scope::root();
    let mut slot = match inner.running.start(
        key.clone(),
        client.map(|Extension(client)| client),
        canceller,
    ) {
        Ok(slot) => slot,
        Err(refusal) => {
            if refusal != Refusal::Duplicate {
                tracing::warn!(thread_id = ?shown(&key.0), tool_call_id = ?shown(&key.1), ?refusal, "refused an /invoke: no place for another call");
            }
            return refused(refusal);
        }
    };
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
        slot.unlist();
        match outcome {
            Some(_) if token.is_cancelled() => {
                tracing::info!(thread_id = ?shown(&key.0), tool_call_id = ?shown(&key.1), "tool call cancelled; its result is not sent");
            }
            Some(outcome) => deliver(&inner, &invocation, callback, outcome).await,
            None => {
                tracing::info!(thread_id = ?shown(&key.0), tool_call_id = ?shown(&key.1), "tool call cancelled and stopped");
            }
        }
        // The place is freed only now, after the result was posted (or given up).
        drop(slot);
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
    // Only the origin is logged: the path may hold a secret binding the result to its call.
    let origin = callback.origin().ascii_serialization();
    match inner.http.post(callback).json(&result).send().await {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => {
            tracing::warn!(status = response.status().as_u16(), callback = ?shown(&origin), "the callback refused a tool result");
        }
        Err(e) => {
            // Without the URL: reqwest's message would quote it, secret and all.
            let error = cancelkit_wire::chain(&e.without_url()).to_string();
            tracing::warn!(error = ?shown(&error), callback = ?shown(&origin), "cannot deliver a tool result");
        }
    }
}

/// `POST /cancel_tool_call`, behind the server's layers.
pub(super) async fn cancel_tool_call(State(inner): State<Arc<Inner>>, body: Bytes) -> Response {
    // From here on the answer is always the same empty 200: it never tells whether the call
    // was known, unknown, finished or already cancelled.
    match serde_json::from_slice::<ToolCancellation>(&body) {
        // The parser's message can quote the body.
        Err(e) => {
            tracing::warn!(error = ?shown(&e.to_string()), "ignored a malformed /cancel_tool_call");
        }
        Ok(cancel) if !valid_id(&cancel.thread_id) || !valid_id(&cancel.tool_call_id) => {
            tracing::warn!(thread_id = ?shown(&cancel.thread_id), tool_call_id = ?shown(&cancel.tool_call_id), "ignored a /cancel_tool_call with invalid ids");
        }
        Ok(cancel) => {
            let key = (cancel.thread_id, cancel.tool_call_id);
            let reason = CancelReason::Peer(Some("/cancel_tool_call".into()));
            let what = match inner.running.cancel(&key, reason) {
                CancelOutcome::Cancelled => "cancelling a tool call",
                CancelOutcome::AlreadyCancelled => "duplicate cancel for a tool call",
                CancelOutcome::Unknown => "cancel for an unknown or finished tool call",
            };
            tracing::info!(thread_id = ?shown(&key.0), tool_call_id = ?shown(&key.1), "{what}");
        }
    }
    Response::builder()
        .status(StatusCode::OK)
        .body(Body::empty())
        .expect("a static response builds")
}

/// `GET /.well-known/rap-toolset`: the operations, open to anyone.
pub(super) async fn toolset(State(inner): State<Arc<Inner>>) -> Response {
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
