//! A `tools/call` through the gateway: registered as a run, forwarded to the upstream that owns
//! the tool, raced against every way it can be cancelled, answered once.
//!
//! The call runs in a task of its own; the front end holds a [`Call`] and awaits its
//! [`Outcome`]. What a front end does when its caller goes away is its choice
//! ([`Call::cancel_on_drop`]): `/rpc` and a 2026-07-28 stream cancel the run, a 2025-11-25
//! stream does not (its client cancels with `notifications/cancelled`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cancelkit::protocol::jsonrpc::{ErrorCode, RequestId};
use cancelkit::{CancelReason, JsonRpcError, Scope};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::app::App;
use crate::auth::Caller;
use crate::runs::record::{CancelSource, RunKey, RunState};
use crate::runs::{RegisterError, Run, Runs};
use crate::shares::{Refused, Slot};
use crate::upstream::{PROGRESS_BUFFER, ToolCall, Upstream};

/// The key of `_meta` under which a result names its run.
pub const RUN_ID_META: &str = "io.cancelkit/runId";

/// Who asks, and where their answer goes.
#[derive(Debug)]
pub struct CallRequest {
    /// The authenticated caller.
    pub caller: Caller,
    /// The session or connection (part of the run's key).
    pub channel: Arc<str>,
    /// The caller's JSON-RPC id.
    pub id: RequestId,
    /// The `tools/call` params.
    pub params: Value,
    /// Where progress notifications for the caller go (whole JSON-RPC notifications carrying
    /// the caller's own `progressToken`), if it gave one.
    pub progress: Option<mpsc::Sender<Value>>,
    /// The run id the front end has already given the client (`/mcp` names it in the
    /// response's headers before the call starts); a new one when `None`.
    pub run_id: Option<Arc<str>>,
}

/// How a call ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Answer with this JSON-RPC response.
    Respond(Value),
    /// The run was cancelled: `source` says by whom. [`cancelled_response`] is the answer
    /// where one is owed.
    Cancelled {
        /// Who cancelled it.
        source: CancelSource,
        /// Why.
        reason: Option<String>,
    },
}

/// A call in flight.
#[derive(Debug)]
pub struct Call {
    id: RequestId,
    run_id: Option<String>,
    runs: Option<Arc<Runs>>,
    answer: oneshot::Receiver<Outcome>,
    task: tokio::task::AbortHandle,
    on_drop: Option<CancelSource>,
    done: bool,
}

impl Call {
    /// The run id, when runs are tracked.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// If this handle is dropped before the answer arrives, cancel the run with `source`.
    pub fn cancel_on_drop(&mut self, source: CancelSource) {
        self.on_drop = Some(source);
    }

    /// Waits for the outcome.
    pub async fn outcome(&mut self) -> Outcome {
        let outcome = (&mut self.answer).await.unwrap_or_else(|_| {
            Outcome::Respond(error_response(
                &self.id,
                JsonRpcError::internal("the call ended without an answer"),
                self.run_id.as_deref(),
            ))
        });
        self.done = true;
        outcome
    }

    /// The answer owed for an outcome: the response, or -32800 for a cancelled run.
    pub fn response(&self, outcome: &Outcome) -> Value {
        match outcome {
            Outcome::Respond(response) => response.clone(),
            Outcome::Cancelled { reason, .. } => {
                cancelled_response(&self.id, self.run_id.as_deref(), reason.as_deref())
            }
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Some(source) = self.on_drop else { return };
        match (&self.runs, &self.run_id) {
            (Some(runs), Some(run_id)) => {
                runs.cancel_live(
                    run_id,
                    source,
                    Some(format!("{}: the caller went away", source.as_str())),
                );
            }
            _ => self.task.abort(),
        }
    }
}

/// Starts a `tools/call`: resolves the tool, registers the run, spawns its task. An error
/// that needs no run (draining, unknown tool, bad params, duplicate id, overload) is returned
/// as the JSON-RPC response to send.
pub async fn start(app: &Arc<App>, request: CallRequest) -> Result<Call, Value> {
    let CallRequest {
        caller,
        channel,
        id,
        params,
        progress,
        run_id: reserved,
    } = request;
    if app.draining() {
        return Err(error_response(
            &id,
            JsonRpcError::new(
                ErrorCode::ServerOverloaded,
                "Server overloaded: the gateway is shutting down",
            ),
            None,
        ));
    }
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err(error_response(
            &id,
            JsonRpcError::invalid_params("tools/call needs a string `name`"),
            None,
        ));
    };
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(a)) => Some(Value::Object(a.clone())),
        Some(_) => {
            return Err(error_response(
                &id,
                JsonRpcError::invalid_params("tools/call `arguments` must be an object"),
                None,
            ));
        }
    };
    // Only a tool its upstream listed (names over the length bound refused first).
    let (upstream, tool) = match app.upstreams.admit(name).await {
        Ok(found) => found,
        Err(error) => return Err(error_response(&id, error, None)),
    };
    // The bounds on calls in flight hold whether runs are tracked or not.
    let slots = match take_slots(app, &caller, upstream.name()) {
        Ok(slots) => slots,
        Err(response) => return Err(error_response(&id, response, None)),
    };
    let progress = progress.and_then(|sink| {
        let token = params.get("_meta")?.get("progressToken")?.clone();
        (token.is_string() || token.is_i64()).then_some((token, sink))
    });
    let run = match &app.runs {
        Some(runs) => {
            let key = RunKey {
                user: Arc::clone(&caller.sub),
                channel,
                id: id.clone(),
            };
            match runs.register(key, Some(name.to_owned()), reserved).await {
                Ok(run) => Some(run),
                Err(RegisterError::Duplicate) => {
                    return Err(error_response(
                        &id,
                        JsonRpcError::new(
                            ErrorCode::InvalidRequest,
                            "Invalid request: this id is already in use by a call in flight",
                        ),
                        None,
                    ));
                }
                Err(RegisterError::Full) => {
                    return Err(error_response(
                        &id,
                        JsonRpcError::new(
                            ErrorCode::ServerOverloaded,
                            "Server overloaded: too many tool calls in flight; retry later",
                        ),
                        None,
                    ));
                }
            }
        }
        None => None,
    };
    let run_id = run.as_ref().map(|r| r.id().to_owned());
    let (tx, rx) = oneshot::channel();
    let job = Job {
        id: id.clone(),
        upstream,
        tool: tool.to_owned(),
        arguments,
        progress,
        timeout: app.config.cancellation.tool_timeout,
    };
    let task = tokio::spawn(async move {
        let outcome = job.run(run).await;
        // The slots go back before the answer does: a caller that starts its next call on
        // reading this one's answer finds its share free.
        drop(slots);
        let _ = tx.send(outcome);
    });
    Ok(Call {
        id,
        run_id,
        runs: app.runs.clone(),
        answer: rx,
        task: task.abort_handle(),
        on_drop: None,
        done: false,
    })
}

/// A slot of the worker's calls and one of the upstream's, for `caller`; or the -32050 error
/// naming the limit that refused it.
fn take_slots(app: &App, caller: &Caller, upstream: &str) -> Result<[Slot; 2], JsonRpcError> {
    let refused = |refused: Refused, what: &str| {
        let text = match &refused {
            Refused::User { key, limit } => format!(
                "Server overloaded: you have {limit} {what} in flight, your share ({key}); \
                 retry when one ends"
            ),
            Refused::Global { key, limit } => format!(
                "Server overloaded: {limit} {what} are in flight, the gateway's bound ({key}); \
                 retry later"
            ),
        };
        JsonRpcError::new(ErrorCode::ServerOverloaded, text)
    };
    let call = app
        .shares
        .calls
        .take(&caller.sub)
        .map_err(|r| refused(r, "tool calls"))?;
    let Some(share) = app.shares.upstreams.get(upstream) else {
        return Err(JsonRpcError::internal(format!(
            "upstream `{upstream}` has no bound of calls"
        )));
    };
    let to_upstream = share
        .take(&caller.sub)
        .map_err(|r| refused(r, &format!("calls to upstream `{upstream}`")))?;
    Ok([call, to_upstream])
}

struct Job {
    id: RequestId,
    upstream: Arc<Upstream>,
    tool: String,
    arguments: Option<Value>,
    progress: Option<(Value, mpsc::Sender<Value>)>,
    timeout: Option<Duration>,
}

impl Job {
    async fn run(self, run: Option<Run>) -> Outcome {
        let Job {
            id,
            upstream,
            tool,
            arguments,
            progress,
            timeout,
        } = self;
        let (scope, canceller) = Scope::root();
        let (progress_tx, mut progress_rx) = mpsc::channel(PROGRESS_BUFFER);
        let call = ToolCall {
            tool,
            arguments,
            progress: progress.is_some().then_some(progress_tx),
        };
        // Boxed so that dropping it (below) really drops it; `polled` says whether the call
        // was ever handed to the upstream (a run cancelled before it started never was).
        let polled = AtomicBool::new(false);
        let mut upstream_call = Box::pin(async {
            polled.store(true, Ordering::Relaxed);
            scope.run(upstream.call(call)).await
        });
        let token = run.as_ref().map(|r| r.token().clone()).unwrap_or_default();
        let deadline = tokio::time::sleep(timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
        tokio::pin!(deadline);
        let mut timed_out = false;
        let result = loop {
            tokio::select! {
                biased;
                () = token.cancelled() => break None,
                result = &mut upstream_call => break Some(result),
                () = &mut deadline, if !timed_out => {
                    timed_out = true;
                    let after = timeout.unwrap_or_default();
                    match &run {
                        Some(run) => run.cancel(CancelSource::Timeout, Some(format!("tool timeout of {after:?} exceeded"))),
                        None => break None,
                    }
                }
                Some(update) = progress_rx.recv() => {
                    if let Some((token, sink)) = &progress {
                        let mut params = update;
                        if let Some(object) = params.as_object_mut() {
                            object.insert("progressToken".into(), token.clone());
                        }
                        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params});
                        let _ = sink.try_send(note);
                    }
                }
            }
        };
        // The answer stands only if no cancel came first: whichever takes the registry's lock
        // first wins, so a cancel answered `cancelled` is never followed by the result, and a
        // status never says `cancelled` for a run whose client got its result.
        let result = result.filter(|_| run.as_ref().is_none_or(Run::settle));
        let run_id = run.as_ref().map(|r| r.id().to_owned());
        match result {
            Some(result) => {
                let (response, state) = match result {
                    Ok(result) => (
                        ok_response(&id, with_run_id(result, run_id.as_deref())),
                        RunState::Completed,
                    ),
                    Err(e) => (
                        error_response(&id, e.to_jsonrpc(upstream.name()), run_id.as_deref()),
                        RunState::Failed,
                    ),
                };
                if let Some(run) = run {
                    run.finish(state);
                }
                Outcome::Respond(response)
            }
            None => {
                let (at, source, reason) = match run.as_ref().and_then(Run::cancellation) {
                    Some(c) => c,
                    None => (
                        std::time::Instant::now(),
                        CancelSource::Timeout,
                        Some("tool timeout exceeded".into()),
                    ),
                };
                canceller.cancel(match source {
                    CancelSource::Client => CancelReason::Peer(reason.clone()),
                    CancelSource::Api => CancelReason::Api(reason.clone()),
                    CancelSource::Timeout => CancelReason::Timeout(timeout.unwrap_or_default()),
                    CancelSource::Disconnect => CancelReason::ConnectionClosed,
                    CancelSource::Shutdown => CancelReason::Shutdown,
                });
                // Dropping the unanswered upstream call is what tells the upstream.
                drop(upstream_call);
                if polled.load(Ordering::Relaxed) {
                    metrics::counter!("cancelkit_gateway_upstream_cancels_total", "upstream" => upstream.name().to_owned()).increment(1);
                }
                metrics::histogram!("cancelkit_gateway_cancel_to_stopped_seconds")
                    .record(at.elapsed().as_secs_f64());
                if let Some(run) = run {
                    run.finish(RunState::Cancelled);
                }
                Outcome::Cancelled { source, reason }
            }
        }
    }
}

fn with_run_id(mut result: Value, run_id: Option<&str>) -> Value {
    if let (Some(run_id), Some(object)) = (run_id, result.as_object_mut()) {
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RUN_ID_META.into(), json!(run_id));
        }
    }
    result
}

/// A JSON-RPC result response.
pub fn ok_response(id: &RequestId, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The JSON-RPC error object of `error`.
fn error_object(error: &JsonRpcError) -> Value {
    let mut object = json!({"code": error.code.code(), "message": error.message});
    if let Some(data) = &error.data {
        object["data"] = data.clone();
    }
    object
}

/// A JSON-RPC error response; with a run, `error.data.runId` names it.
pub fn error_response(id: &RequestId, error: JsonRpcError, run_id: Option<&str>) -> Value {
    let mut error = error_object(&error);
    if let Some(run_id) = run_id {
        let data = error.get("data").cloned();
        error["data"] = match data {
            Some(Value::Object(mut data)) => {
                data.insert("runId".into(), json!(run_id));
                Value::Object(data)
            }
            None | Some(Value::Null) => json!({"runId": run_id}),
            Some(other) => json!({"runId": run_id, "upstream": other}),
        };
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// The answer to a cancelled call: -32800 `Request cancelled`, with the caller's id as it sent
/// it, the run id (absent when runs are not tracked), the reason, and `partial: false`.
pub fn cancelled_response(id: &RequestId, run_id: Option<&str>, reason: Option<&str>) -> Value {
    let mut data = json!({"requestId": id, "reason": reason, "partial": false});
    if let Some(run_id) = run_id {
        data["runId"] = json!(run_id);
    }
    let error = JsonRpcError::from_code(ErrorCode::RequestCancelled).with_data(data);
    json!({"jsonrpc": "2.0", "id": id, "error": error_object(&error)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_call_is_answered_as_ever() {
        let id = RequestId::from(7);
        let response = cancelled_response(&id, Some("r1"), Some("client"));
        // Compared as JSON values: the key order of the written bytes depends on whether
        // serde_json's `preserve_order` is on, which feature unification decides (on in the
        // workspace, off for this crate alone).
        let expected: Value = serde_json::from_str(
            r#"{"error":{"code":-32800,"data":{"partial":false,"reason":"client","requestId":7,"runId":"r1"},"message":"Request cancelled"},"id":7,"jsonrpc":"2.0"}"#,
        )
        .unwrap();
        assert_eq!(response, expected);
    }

    #[test]
    fn an_overloaded_refusal_is_code_minus_32050() {
        let id = RequestId::from("a");
        let error = JsonRpcError::new(ErrorCode::ServerOverloaded, "Server overloaded: busy");
        let expected: Value = serde_json::from_str(
            r#"{"error":{"code":-32050,"message":"Server overloaded: busy"},"id":"a","jsonrpc":"2.0"}"#,
        )
        .unwrap();
        assert_eq!(error_response(&id, error, None), expected);
    }
}
