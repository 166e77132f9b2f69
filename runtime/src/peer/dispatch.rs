//! The life of an inbound request or notification: admission at the bounds, a task and a scope
//! of its own, the concurrency slot, and exactly one answer.
//!
//! The reader calls [`request`] and [`notification`] (in `notifications.rs`); they do only what must happen in order
//! with the cancels around them (admission, registration, the protocol's reader-side rules) and
//! leave the rest — parsing the params into the handler's type, running it, answering — to the
//! request's own task, so a big message never holds up the cancels behind it.

use std::sync::Arc;

use cancelkit_protocol::jsonrpc::{ErrorCode, RequestId};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::disconnect::Answer;
use super::handle::PeerHandle;
use super::policy::Kind;
use super::policy::tasks::{self, Tasks};
use super::registry::{self};
use super::router::{BoxFuture, Context, Reply, RequestRoute};
use super::run::{Slots, guarded, run_handler};
use super::transport::{Outbound, OutboundKind, Owner};
use super::wire;
use crate::{CancelReason, JsonRpcError, Scope};

pub(crate) use super::limits::Limits;
use super::limits::{Admitted, Ticket, check_identifiers};
pub(crate) use super::notifications::{
    QueuedNotification, apply_cancel, notification, notification_loop,
};

/// MCP `notifications/progress`: resets the progress timeout of the request of ours it names.
pub(super) const PROGRESS: &str = "notifications/progress";

/// What serves an admitted request.
enum Handler {
    /// The application's route.
    Route(Arc<RequestRoute>),
    /// MCP `tasks/result`, served by the connection's tasks.
    TaskResult(Arc<Tasks>),
}

impl Handler {
    /// The method it serves.
    fn method(&self) -> Arc<str> {
        match self {
            Handler::Route(route) => Arc::clone(&route.method),
            Handler::TaskResult(_) => Arc::from(tasks::RESULT),
        }
    }

    /// Parses the params and starts the handler.
    fn start(self, params: Option<Box<RawValue>>, cx: Context) -> BoxFuture<Reply> {
        match self {
            Handler::Route(route) => route.call(params.as_deref(), cx),
            Handler::TaskResult(tasks) => {
                Box::pin(async move { tasks.result(params.as_deref()).await })
            }
        }
    }
}

/// Reader side of a request: answers it at once (an id or progress token over the bound,
/// protocol rules, unknown method, over the bounds, a reused id) or registers it and spawns its
/// task.
pub(crate) async fn request(
    peer: &PeerHandle,
    id: RequestId,
    method: &str,
    params: Option<&RawValue>,
    owner: Option<Owner>,
) {
    let shared = &peer.shared;
    let mcp = matches!(shared.rules.protocol, super::Protocol::Mcp(_));
    if let Err(refused) = check_identifiers(&id, params, mcp, shared.limits.max_id_len) {
        // Logged by length: the identifier itself may be megabytes.
        tracing::warn!(
            length = refused.len,
            max = shared.limits.max_id_len,
            method = wire::truncate(method, 64),
            "refused a request whose id or progress token is over the bound"
        );
        let answer_to = refused.echo_id.then_some(&id);
        let answer = Outbound::new(
            OutboundKind::Response {
                id: answer_to.cloned(),
            },
            wire::error(answer_to, &refused.error),
        )
        .on(peer.channel);
        if !shared.outbox.send(answer).await {
            tracing::debug!("the connection closed before the answer could be sent");
        }
        return;
    }
    if let Some(reply) = shared.rules.answer_now(method, params) {
        send_reply(peer, id, &reply).await;
        return;
    }
    let handler = if let Some(tasks) = shared.rules.task_result(method) {
        Handler::TaskResult(Arc::clone(tasks))
    } else if let Some(route) = shared.router.request_route(method) {
        Handler::Route(Arc::clone(route))
    } else if let Some(reply) = shared.rules.default_discover(method) {
        send_reply(peer, id, &reply).await;
        return;
    } else {
        let error = JsonRpcError::method_not_found()
            .with_data(format!("no handler for `{}`", wire::truncate(method, 256)));
        send_reply(peer, id, &Err(error)).await;
        return;
    };
    let ticket = match shared
        .limits
        .admit(params.map_or(0, |p| p.get().len()), owner)
    {
        Ok(ticket) => ticket,
        Err(refused) => {
            shared.limits.log_refusal(&id, method, &refused);
            send_reply(peer, id, &Err(refused)).await;
            return;
        }
    };
    let kind = shared.rules.kind(method);
    let session = shared.rules.session_of(kind, params);
    let (scope, canceller) = shared.parent_scope(method).child().with_canceller();
    let generation = match shared.registry.insert(
        (peer.channel, id.clone()),
        canceller,
        kind != Kind::Initialize,
        session,
    ) {
        Ok(generation) => generation,
        Err(registry::Duplicate) => {
            shared.limits.release(ticket);
            tracing::warn!(request_id = %id, method, "rejected a request reusing an id still in flight");
            let error = JsonRpcError::new(ErrorCode::InvalidRequest, "Invalid request").with_data(
                format!("request id {id} is already in use by a request in flight"),
            );
            send_reply(peer, id, &Err(error)).await;
            return;
        }
    };
    if kind == Kind::Listen {
        shared.rules.track_listen(&id, true);
    }
    let request = Request {
        peer: peer.clone(),
        id,
        method: handler.method(),
        generation,
        kind,
    };
    let params = params.map(ToOwned::to_owned);
    // Every request in flight is this task. Its future is 648 bytes in a release build, so
    // tokio's cell for it (128-byte aligned) is 768 bytes; from 665 it would be 896, 128 more
    // per request in flight (`cargo xtask bench peer`, target 4, would show it).
    tokio::spawn(
        scope
            .clone()
            .run(request.run(handler, params, scope, ticket)),
    );
}

/// An admitted, registered request.
struct Request {
    peer: PeerHandle,
    id: RequestId,
    /// For the log line of a cancelled request.
    method: Arc<str>,
    generation: u64,
    kind: Kind,
}

impl Request {
    /// The request's task: parse, run (cancellably), answer once.
    async fn run(
        self,
        handler: Handler,
        params: Option<Box<RawValue>>,
        scope: Scope,
        ticket: Ticket,
    ) {
        let shared = Arc::clone(&self.peer.shared);
        let mut admitted = Admitted {
            limits: &shared.limits,
            ticket: Some(ticket),
        };
        let admission = match shared.rules.admit(params.as_deref()) {
            Ok(admission) => admission,
            Err(refused) => {
                Box::pin(self.finish(Err(refused), None)).await;
                return;
            }
        };
        if self.kind == Kind::TaskAugmentable
            && let Some(mcp) = shared.rules.mcp()
            && let Some(tasks) = mcp.tasks.clone()
            && let Some((ttl, extension)) = task_requested(mcp, admission, params.as_deref())
        {
            if !extension && let Some(tool) = mcp.refuses_legacy_task(params.as_deref()) {
                let error = JsonRpcError::method_not_found().with_data(format!(
                    "tool `{}` does not run as a task",
                    wire::truncate(&tool, 128)
                ));
                Box::pin(self.finish(Err(error), None)).await;
                return;
            }
            // Boxed: only task-augmented requests pay for its future (the task of every
            // request would otherwise be sized for it: 1,840 bytes instead of 736).
            let cx = self.context();
            Box::pin(self.run_as_task(tasks, (ttl, extension), handler, params, cx, &mut admitted))
                .await;
            return;
        }
        let owner_slots = admitted.ticket.as_ref().and_then(Ticket::owner_slots);
        let concurrency = Slots::of(owner_slots, shared.limits.concurrency.as_ref());
        let kind = self.kind;
        let reply = guarded(async {
            shared.rules.before_request(kind, params.as_deref());
            let cx = self.context();
            run_handler(handler.start(params, cx), &scope, concurrency).await
        })
        .await;
        let cause = scope.cancel_reason();
        if let Some(cause) = &cause {
            log_cancelled(&self.id, &self.method, cause);
        }
        Box::pin(self.finish(reply, cause)).await;
    }

    /// What its handler is given. Made as the handler starts, not before: every request's task
    /// would otherwise hold it across the waits before (and what the transport tells is looked
    /// up as the handler starts).
    fn context(&self) -> Context {
        Context {
            peer: self.peer.clone(),
            id: Some(self.id.clone()),
            transport: self
                .peer
                .shared
                .transport
                .as_ref()
                .and_then(|data| data(self.peer.channel, &self.id)),
        }
    }

    /// MCP 2025-11-25 task-augmented `tools/call`: answered with the task at once; the handler
    /// runs on in the task's own scope, bounded by the connection's task limits instead of its
    /// request limits, until it finishes, is cancelled (`tasks/cancel`) or its `ttl` ends.
    async fn run_as_task(
        self,
        tasks: Arc<Tasks>,
        (ttl, extension): (Option<u64>, bool),
        handler: Handler,
        params: Option<Box<RawValue>>,
        cx: Context,
        admitted: &mut Admitted<'_>,
    ) {
        let shared = Arc::clone(&self.peer.shared);
        if let Some(reason) = crate::cancel_reason() {
            // Cancelled (`notifications/cancelled`) before it became a task.
            log_cancelled(&self.id, &self.method, &reason);
            self.finish(
                Err(crate::Cancelled::new(reason.clone()).into()),
                Some(reason),
            )
            .await;
            return;
        }
        // A task runs on after a disconnect if the disconnect policy says so.
        let parent = if shared.disconnect.tasks_survive() {
            &shared.survivors
        } else {
            &shared.connection
        };
        let closed: CancellationToken = parent.token().clone();
        let (scope, canceller) = parent.child().with_canceller();
        let created = match tasks.create(ttl, canceller, extension) {
            Ok(created) => created,
            Err(refused) => {
                self.finish(Err(refused), None).await;
                return;
            }
        };
        let (id, method) = (self.id.clone(), Arc::clone(&self.method));
        self.finish(created.reply.clone(), None).await;
        admitted.release();
        let handler = handler.start(params, cx);
        let run = async {
            let reply = guarded(run_handler(
                handler,
                &scope,
                Slots::of(None, shared.limits.concurrency.as_ref()),
            ))
            .await;
            if let Some(cause) = scope.cancel_reason() {
                log_cancelled(&id, &method, &cause);
            }
            reply
        };
        scope.clone().run(tasks.drive(created, run, closed)).await;
    }

    /// Sends the answer, as the protocol wants it — unless the peer cancelled the request and
    /// is owed nothing (MCP). `cause`: why the request's own scope was cancelled, if it was.
    async fn finish(self, reply: Reply, cause: Option<crate::CancelReason>) {
        let shared = &self.peer.shared;
        if self.kind == Kind::Listen {
            shared.rules.track_listen(&self.id, false);
        }
        let Some(finished) = shared
            .registry
            .finish((self.peer.channel, &self.id), self.generation)
        else {
            tracing::info!(request_id = %self.id, "no response for a request the peer cancelled");
            return;
        };
        if self.kind == Kind::Listen
            && let Err(error) = &reply
            && error.is_cancelled()
            && shared.rules.is_2026()
        {
            // MCP 2026-07-28: a server ends a subscription stream it stops with
            // `notifications/cancelled` naming the `subscriptions/listen` request.
            // The cause stays in our log; what leaves the process is a fixed text.
            let reason = "the server ended the subscription";
            tracing::info!(request_id = %self.id, cause = ?error.data, "ended a subscriptions/listen stream");
            let params = serde_json::json!({ "requestId": self.id, "reason": reason });
            let message = wire::notification(
                cancelkit_protocol::mcp::v2026_07_28::CancelledNotificationParams::METHOD,
                wire::params(&params).as_deref(),
            );
            let message = Outbound::new(OutboundKind::Notification, message).on(self.peer.channel);
            shared.outbox.send(message).await;
            return;
        }
        let reply = shared.rules.edit_reply(self.kind, finished, reply);
        let own = finished.peer_cancelled;
        let reply = match reply {
            Err(error) if error.is_cancelled() => Err(outgoing_reason(
                error,
                shared.reason_policy.answer(cause.as_ref(), own),
            )),
            reply => reply,
        };
        send_reply(&self.peer, self.id, &reply).await;
    }
}

/// Logs a cancelled inbound request, once, with its cause.
fn log_cancelled(id: &RequestId, method: &str, cause: &CancelReason) {
    match cause {
        CancelReason::Peer(reason) => tracing::info!(
            request_id = %id,
            reason = reason.as_deref().unwrap_or("none given"),
            method,
            cause = %cause,
            "the peer cancelled a request"
        ),
        _ => tracing::info!(request_id = %id, method, cause = %cause, "a request was cancelled"),
    }
}

/// A -32800 answer with its `data.reason` as the [`ReasonPolicy`](super::ReasonPolicy) wants.
fn outgoing_reason(mut error: JsonRpcError, answer: Answer) -> JsonRpcError {
    match answer {
        Answer::Keep => {}
        Answer::Remove => {
            if let Some(serde_json::Value::Object(data)) = &mut error.data {
                data.remove("reason");
            }
        }
        Answer::Set(text) => match &mut error.data {
            Some(serde_json::Value::Object(data)) => {
                data.insert("reason".into(), text.into());
            }
            _ => error.data = Some(serde_json::json!({ "reason": text })),
        },
    }
    error
}

/// Whether a `tools/call` runs as a task, and in which form: `Some((requested ttl, extension))`.
fn task_requested(
    rules: &super::policy::McpRules,
    admission: super::policy::Admission,
    params: Option<&RawValue>,
) -> Option<(Option<u64>, bool)> {
    if rules.runs_as_extension_task(admission, params) {
        Some((None, true))
    } else if rules.legacy_tasks() {
        tasks::requested(params).map(|ttl| (ttl, false))
    } else {
        None
    }
}

async fn send_reply(peer: &PeerHandle, id: RequestId, reply: &Reply) {
    let message = match reply {
        Ok(result) => wire::result(&id, result),
        Err(error) => wire::error(Some(&id), error),
    };
    // The id moves into the message's kind: no copy per answer.
    let message = Outbound::new(OutboundKind::Response { id: Some(id) }, message).on(peer.channel);
    if !peer.shared.outbox.send(message).await {
        tracing::debug!("the connection closed before an answer could be sent");
    }
}
