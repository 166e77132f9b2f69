//! A `tools/call` through the gateway: registered as a run, forwarded to the upstream that owns
//! the tool, raced against every way it can be cancelled, answered once.
//!
//! The call runs in a task of its own; the front end holds a [`Call`] and awaits its
//! [`Outcome`].
//!
//! A call crosses the gateway as JSON text: its arguments go to the upstream as the client
//! wrote them, and the upstream's result comes back as it wrote it, with only its `_meta`
//! edited to name the run ([`cancelkit::wire::members`]). Neither is parsed into a tree or
//! written again. What a front end does when its caller goes away is its choice
//! ([`Call::cancel_on_drop`]): `/rpc` and a 2026-07-28 stream cancel the run, a 2025-11-25
//! stream does not (its client cancels with `notifications/cancelled`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cancelkit::protocol::jsonrpc::{ErrorCode, RequestId};
use cancelkit::wire::members::Members;
use cancelkit::{CancelReason, JsonRpcError, Scope};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::app::App;
use crate::auth::Caller;
use crate::runs::record::{CancelSource, RunKey, RunState};
use crate::runs::{RegisterError, Run, Runs};
use crate::shares::{Refused, Slot};
use crate::upstream::{PROGRESS_BUFFER, ToolCall, Upstream};

mod reply;
use reply::with_run_id;
pub use reply::{cancelled_error, error_response, ok_response, reply_response, with_run};

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
    /// The `tools/call` params, as the client wrote them.
    pub params: Box<RawValue>,
    /// Where progress notifications for the caller go (whole JSON-RPC notifications carrying
    /// the caller's own `progressToken`), if it gave one.
    pub progress: Option<mpsc::Sender<Value>>,
    /// The run id the front end has already given the client (`/mcp` names it in the
    /// response's headers before the call starts); a new one when `None`.
    pub run_id: Option<Arc<str>>,
}

/// A call's answer: the result as the upstream wrote it (its `_meta` naming the run), or the
/// error (its `data.runId` naming the run).
pub type Reply = Result<Box<RawValue>, JsonRpcError>;

/// How a call ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Answer with this.
    Respond(Reply),
    /// The run was cancelled: `source` says by whom. [`cancelled_error`] is the answer where
    /// one is owed.
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
            Outcome::Respond(Err(with_run(
                JsonRpcError::internal("the call ended without an answer"),
                self.run_id.as_deref(),
            )))
        });
        self.done = true;
        outcome
    }

    /// The answer owed for an outcome: the reply, or -32800 for a cancelled run.
    pub fn reply(&self, outcome: Outcome) -> Reply {
        match outcome {
            Outcome::Respond(reply) => reply,
            Outcome::Cancelled { reason, .. } => Err(cancelled_error(
                &self.id,
                self.run_id.as_deref(),
                reason.as_deref(),
            )),
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

/// What the gateway reads of a `tools/call`'s params.
#[derive(Debug)]
struct Read {
    /// The tool, as the client named it.
    name: String,
    /// An object, as the client wrote it; `None` for none (or `null`).
    arguments: Option<Box<RawValue>>,
    /// The client's `_meta.progressToken`, when it is a string or an integer.
    progress_token: Option<Value>,
}

/// Reads a `tools/call`'s params without parsing its arguments. A `name` that is missing or not
/// a string, and `arguments` that are not an object, are refused; a `_meta` or progress token
/// of another type is no progress token (the call goes on without progress).
fn read_params(params: &RawValue) -> Result<Read, JsonRpcError> {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "progressToken")]
        progress_token: Option<Value>,
    }
    let members = Members::read(params.get());
    let member = |key: &str| members.as_ref().and_then(|m| m.get(key));
    let Some(name) = member("name").and_then(|n| serde_json::from_str::<String>(n.get()).ok())
    else {
        return Err(JsonRpcError::invalid_params(
            "tools/call needs a string `name`",
        ));
    };
    let arguments = match member("arguments") {
        None => None,
        Some(a) if a.get() == "null" => None,
        Some(a) if a.get().starts_with('{') => Some(a.to_owned()),
        Some(_) => {
            return Err(JsonRpcError::invalid_params(
                "tools/call `arguments` must be an object",
            ));
        }
    };
    let progress_token = member("_meta")
        .and_then(|m| serde_json::from_str::<Meta>(m.get()).ok())
        .and_then(|m| m.progress_token)
        .filter(|t| t.is_string() || t.is_i64());
    Ok(Read {
        name,
        arguments,
        progress_token,
    })
}

/// Starts a `tools/call`: resolves the tool, registers the run, spawns its task. An error
/// that needs no run (draining, unknown tool, bad params, duplicate id, overload) is returned,
/// to be answered to the caller's id.
pub async fn start(app: &Arc<App>, request: CallRequest) -> Result<Call, JsonRpcError> {
    let CallRequest {
        caller,
        channel,
        id,
        params,
        progress,
        run_id: reserved,
    } = request;
    if app.draining() {
        return Err(JsonRpcError::new(
            ErrorCode::ServerOverloaded,
            "Server overloaded: the gateway is shutting down",
        ));
    }
    let Read {
        name,
        arguments,
        progress_token,
    } = read_params(&params)?;
    // Only a tool its upstream listed (names over the length bound refused first).
    let (upstream, tool) = app.upstreams.admit(&name).await?;
    // The bounds on calls in flight hold whether runs are tracked or not.
    let slots = take_slots(app, &caller, upstream.name())?;
    let progress = progress
        .zip(progress_token)
        .map(|(sink, token)| (token, sink));
    let run = match &app.runs {
        Some(runs) => {
            let key = RunKey {
                user: Arc::clone(&caller.sub),
                channel,
                id: id.clone(),
            };
            match runs.register(key, Some(name.clone()), reserved).await {
                Ok(run) => Some(run),
                Err(RegisterError::Duplicate) => {
                    return Err(JsonRpcError::new(
                        ErrorCode::InvalidRequest,
                        "Invalid request: this id is already in use by a call in flight",
                    ));
                }
                Err(RegisterError::Full) => {
                    return Err(JsonRpcError::new(
                        ErrorCode::ServerOverloaded,
                        "Server overloaded: too many tool calls in flight; retry later",
                    ));
                }
            }
        }
        None => None,
    };
    let run_id = run.as_ref().map(|r| r.id().to_owned());
    let (tx, rx) = oneshot::channel();
    let job = Job {
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
    upstream: Arc<Upstream>,
    tool: String,
    arguments: Option<Box<RawValue>>,
    progress: Option<(Value, mpsc::Sender<Value>)>,
    timeout: Option<Duration>,
}

impl Job {
    async fn run(self, run: Option<Run>) -> Outcome {
        let Job {
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
                let (reply, state) = match result {
                    Ok(result) => (
                        Ok(with_run_id(result, run_id.as_deref())),
                        RunState::Completed,
                    ),
                    Err(e) => (
                        Err(with_run(e.to_jsonrpc(upstream.name()), run_id.as_deref())),
                        RunState::Failed,
                    ),
                };
                if let Some(run) = run {
                    run.finish(state);
                }
                Outcome::Respond(reply)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Read, JsonRpcError> {
        read_params(&RawValue::from_string(text.to_owned()).unwrap())
    }

    #[test]
    fn params_are_read_without_their_arguments_and_bad_ones_are_refused_clearly() {
        let call =
            read(r#"{"name":"echo","arguments":{"n":1.50},"_meta":{"progressToken":7}}"#).unwrap();
        assert_eq!(call.name, "echo");
        assert_eq!(call.arguments.unwrap().get(), r#"{"n":1.50}"#);
        assert_eq!(call.progress_token, Some(json!(7)));
        for (text, why) in [
            (r#"{"arguments":{}}"#, "needs a string `name`"),
            (r#"{"name":5}"#, "needs a string `name`"),
            ("[1]", "needs a string `name`"),
            (r#"{"name":"echo","arguments":[1]}"#, "must be an object"),
            (r#"{"name":"echo","arguments":"{}"}"#, "must be an object"),
        ] {
            let error = read(text).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidParams, "{text}");
            assert!(error.message.contains(why), "{text}: {}", error.message);
        }
        // What carries no progress token is a call without progress, not a refused call.
        for text in [
            r#"{"name":"echo","arguments":null,"_meta":"m"}"#,
            r#"{"name":"echo","_meta":{"progressToken":1.5}}"#,
            r#"{"name":"echo","_meta":{"progressToken":{"a":1}}}"#,
        ] {
            let call = read(text).unwrap();
            assert_eq!(
                (call.arguments.is_none(), call.progress_token),
                (true, None),
                "{text}"
            );
        }
    }
}
