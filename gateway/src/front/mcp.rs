//! `/mcp`: MCP over Streamable HTTP, served by the runtime's
//! [`McpHttpServer`] — the same sessions, streams, resumption,
//! keep-alive, admission and bounds as any cancelkit server. What is the gateway's own lives
//! here: a [`Router`] whose `tools/call` is a gateway run, and the per-user rules around it.
//!
//! - Sessions (2025-11-25 and earlier) belong to the user whose token opened them: anyone
//!   else is told the session does not exist.
//! - A caller without `tools.execute` is refused (403) before anything is read.
//! - A `tools/call` is a run keyed by (user, session — or, at 2026-07-28, a channel of its
//!   own —, the client's id), so the cancellation API finds it by the id the client gave.
//!   The server cancels the handler when the client does (`notifications/cancelled`; at
//!   2026-07-28 a closed stream), and when the session ends (`DELETE`, expiry); the handler
//!   cancels the run with the matching source (`client`, `disconnect`). A run cancelled from
//!   the API is answered -32800.
//! - A `tools/call`'s response names its run from its first byte: the header
//!   `Cancelkit-Run-Id` (as on `/rpc`), and `_meta["io.cancelkit/runId"]` in every progress
//!   event and in the result, so the API can cancel it by run id while it runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use cancelkit::http::server::{HttpRequest, McpHttpServer};
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, Router};
use cancelkit::protocol::jsonrpc::ErrorCode;
use cancelkit::wire::members::edit_object;
use cancelkit::wire::meta::SERVER_INFO;
use cancelkit::{CancelReason, JsonRpcError, cancellable};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::app::{App, server_info};
use crate::auth::Caller;
use crate::calls::{self, CallRequest, RUN_ID_META};
use crate::front::rpc::RUN_ID_HEADER;
use crate::runs::record::{CancelSource, new_run_id};
use crate::upstream::PROGRESS_BUFFER;

/// Requests beside its runs one user may have in flight on `/mcp` (`tools/list`, `ping`).
const QUICK_REQUESTS: usize = 64;

/// A session unused this long (nothing in flight, no stream open) is ended.
pub const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// The axum service of `/mcp` for `app` (behind the gateway's origin and token layers, which
/// put the [`Caller`] in each request's extensions).
pub fn service(app: &Arc<App>) -> axum::Router {
    let config = &app.config;
    let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .router(router(app))
        .max_frame_len(config.limits.max_body_bytes)
        // Runs have their own bound (`limits.max_runs`, answered -32050); the peer's must not
        // be the lower one. Every 2026-07-28 request is served by one peer, each user with a
        // share of it (the server names the user: `session_owner`): its runs' share plus room
        // for the quick requests beside them, and a share of the params' bytes.
        .max_in_flight(config.limits.max_runs)
        .max_in_flight_bytes(config.limits.max_in_flight_bytes)
        .max_in_flight_per_owner(
            config
                .limits
                .max_runs_per_user
                .saturating_add(QUICK_REQUESTS),
            config.limits.max_in_flight_bytes_per_user,
            None,
        );
    McpHttpServer::new(builder)
        .keep_alive(config.keep_alive)
        .origin_policy(config.origins.clone())
        .max_sessions(config.limits.max_sessions)
        .max_sessions_per_owner(config.limits.max_sessions_per_user)
        .session_idle(SESSION_IDLE)
        .session_owner(|parts| {
            parts
                .extensions
                .get::<Caller>()
                .map(|caller| caller.sub.to_string())
        })
        .stop_streams_on(app.stopping.clone())
        .on_request({
            let tracked = app.runs.is_some();
            move |method, parts| reserve_run_id(tracked, method, parts)
        })
        .into_router()
        .layer(axum::middleware::from_fn(require_execute))
}

/// The run id a `tools/call` will run under, chosen before its handler starts so that the
/// response's head names it (`Cancelkit-Run-Id`, as on `/rpc`): a client learns it when the
/// call starts, not only from its answer. A call refused before it runs (an unknown tool, a
/// limit) never registers it: its status is then 404.
#[derive(Debug, Clone)]
struct ReservedRunId(Arc<str>);

fn reserve_run_id(tracked: bool, method: &str, parts: &mut Parts) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if tracked && method == "tools/call" {
        let run_id = new_run_id();
        if let Ok(value) = HeaderValue::from_str(&run_id) {
            headers.insert(RUN_ID_HEADER, value);
        }
        parts.extensions.insert(ReservedRunId(run_id));
    }
    headers
}

/// 403 for a caller without `tools.execute`.
async fn require_execute(request: Request, next: Next) -> Response {
    match request.extensions().get::<Caller>() {
        Some(caller) if caller.may_execute() => next.run(request).await,
        _ => super::detail(
            StatusCode::FORBIDDEN,
            "Forbidden: permission tools.execute is required",
        ),
    }
}

fn router(app: &Arc<App>) -> Router {
    let initialize = {
        let app = Arc::clone(app);
        move |params: Value, _cx: Context| {
            let result = app.initialize_result(&params);
            async move { Ok::<_, JsonRpcError>(result) }
        }
    };
    let list = {
        let app = Arc::clone(app);
        move |_: Value, _cx: Context| {
            let app = Arc::clone(&app);
            async move { Ok::<_, JsonRpcError>(json!({"tools": app.upstreams.list_tools().await})) }
        }
    };
    let call = {
        let app = Arc::clone(app);
        move |params: Box<RawValue>, cx: Context| tools_call(Arc::clone(&app), params, cx)
    };
    Router::new()
        .request("initialize", initialize)
        // The runtime adds `supportedVersions`, the cache fields and `resultType`.
        .request("server/discover", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({
                "capabilities": {"tools": {"listChanged": false}},
                "_meta": {SERVER_INFO: server_info()},
            }))
        })
        .request("ping", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({}))
        })
        .request("tools/list", list)
        .request("tools/call", call)
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        )
}

/// How a call's wait ended.
enum Waited {
    Outcome(calls::Outcome),
    Cancelled(CancelSource, Option<String>),
}

/// A `tools/call`: a run of the gateway, its progress forwarded to the client, cancelled when
/// the server cancels the handler.
#[cancellable(cooperative)]
async fn tools_call(
    app: Arc<App>,
    params: Box<RawValue>,
    cx: Context,
) -> Result<Box<RawValue>, JsonRpcError> {
    static NEXT_CHANNEL: AtomicU64 = AtomicU64::new(1);
    let http = HttpRequest::of(&cx).ok_or_else(|| {
        // Only when the request was cancelled before its handler started.
        JsonRpcError::internal("tools/call reached the gateway without its HTTP request")
    })?;
    let caller =
        http.extensions().get::<Caller>().cloned().ok_or_else(|| {
            JsonRpcError::internal("tools/call reached the gateway unauthenticated")
        })?;
    // A session's runs share its channel (its id); a 2026-07-28 request has one of its own.
    let legacy = http.session_id().is_some();
    let channel: Arc<str> = match http.session_id() {
        Some(session) => Arc::from(session),
        None => Arc::from(format!(
            "stream-{}",
            NEXT_CHANNEL.fetch_add(1, Ordering::Relaxed)
        )),
    };
    let reserved = http
        .extensions()
        .get::<ReservedRunId>()
        .map(|r| Arc::clone(&r.0));
    let (progress_tx, mut progress) = mpsc::channel(PROGRESS_BUFFER);
    let request = CallRequest {
        caller,
        channel,
        id: http.client_id().clone(),
        params,
        progress: Some(progress_tx),
        run_id: reserved,
    };
    let mut call = match calls::start(&app, request).await {
        Ok(call) => call,
        Err(error) => return Err(error),
    };
    let run_id = call.run_id().map(str::to_owned);
    let waited = loop {
        tokio::select! {
            biased;
            () = cancelkit::cancelled() => {
                let (source, reason) = match cancelkit::cancel_reason() {
                    Some(CancelReason::Peer(reason)) => (CancelSource::Client, reason),
                    other => (
                        CancelSource::Disconnect,
                        other.map(|r| format!("disconnect: {r}")),
                    ),
                };
                break Waited::Cancelled(source, reason);
            }
            Some(note) = progress.recv() => forward_progress(&cx, note, run_id.as_deref()).await,
            outcome = call.outcome() => break Waited::Outcome(outcome),
        }
    };
    match waited {
        Waited::Outcome(outcome) => {
            // Progress the run sent before its answer goes first.
            while let Ok(note) = progress.try_recv() {
                forward_progress(&cx, note, run_id.as_deref()).await;
            }
            answer(call.reply(outcome), legacy)
        }
        Waited::Cancelled(source, reason) => {
            match (&app.runs, call.run_id()) {
                (Some(runs), Some(run_id)) => {
                    runs.cancel_live(run_id, source, reason);
                }
                // Nothing tracked: dropping the call stops its task.
                _ => call.cancel_on_drop(source),
            }
            // Nobody reads it: the client cancelled, or its session is gone.
            Err(JsonRpcError::from_code(ErrorCode::RequestCancelled))
        }
    }
}

/// A progress notification of the run (with the token the handler was given) to the client,
/// its `_meta` naming the run (`io.cancelkit/runId`, as in the result): a client that reads
/// no headers learns the run id from the call's first progress event.
async fn forward_progress(cx: &Context, note: Value, run_id: Option<&str>) {
    let mut params = note.get("params").cloned().unwrap_or(Value::Null);
    if let (Some(run_id), Some(object)) = (run_id, params.as_object_mut()) {
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RUN_ID_META.to_owned(), Value::String(run_id.to_owned()));
        }
    }
    if cx
        .peer()
        .notify("notifications/progress", params)
        .await
        .is_err()
    {
        tracing::debug!("a progress notification after the client went away; dropped");
    }
}

/// A call's reply as the handler's answer. For a client on 2025-11-25 or earlier, without
/// 2026-07-28's `resultType` (an upstream of that revision puts it in); nothing else of the
/// result is parsed or written again.
fn answer(reply: calls::Reply, legacy: bool) -> Result<Box<RawValue>, JsonRpcError> {
    let result = reply?;
    if !legacy {
        return Ok(result);
    }
    Ok(edit_object(result, |members| members.remove("resultType")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn a_legacy_client_gets_the_result_without_result_type_and_otherwise_as_written() {
        let written =
            r#"{"resultType":"complete","content":[{"type":"text","text":"1.50"}],"n":1.50}"#;
        assert_eq!(answer(Ok(raw(written)), false).unwrap().get(), written);
        assert_eq!(
            answer(Ok(raw(written)), true).unwrap().get(),
            r#"{"content":[{"type":"text","text":"1.50"}],"n":1.50}"#
        );
        assert_eq!(answer(Ok(raw("[1]")), true).unwrap().get(), "[1]");
        let error = JsonRpcError::new(ErrorCode::from(-32020), "m");
        assert_eq!(answer(Err(error.clone()), true).unwrap_err(), error);
    }
}
