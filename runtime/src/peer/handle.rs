//! The state a connection's tasks share; its user-facing handle, [`PeerHandle`], is in
//! `peer_handle.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cancelkit_protocol::jsonrpc::RequestId;
use futures_util::task::AtomicWaker;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::disconnect::{DisconnectPolicy, Extras, OutgoingCause, ReasonPolicy};
use super::dispatch::{Limits, QueuedNotification};
use super::policy::{Protocol, Rules, tasks};
use super::registry::Registry;
use super::router::{Reply, Router};
use super::transport::{Outbound, OutboundKind};
use super::wire;
use super::writer::Outbox;
use crate::sync::lock;
use crate::{Canceller, Scope};

pub use super::peer_handle::PeerHandle;

/// Outgoing task-augmented requests given up before their task id arrived, kept at most so
/// that `tasks/cancel` can be sent once it does; beyond this, such a request is forgotten (and
/// its task, if one is created, runs until its `ttl`) with a warning.
pub const MAX_ABANDONED_TASKS: usize = 1024;

/// Outgoing requests whose timeout resets on progress, watched at most at once; beyond this,
/// [`OutgoingRequest::progress_timeout`](super::outgoing::OutgoingRequest::progress_timeout) falls back to a plain timeout of its maximum.
pub const MAX_PROGRESS_TOKENS: usize = 4096;

/// Whether an outgoing request must be told to cancel its task once the task id arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskCancel {
    /// Not a task-augmented request.
    No,
    /// A task-augmented request (MCP `tools/call` with `params.task`), still wanted.
    Task,
    /// Given up before its `CreateTaskResult` arrived: send `tasks/cancel` when it does.
    OnAnswer,
}

/// One of our requests, waiting for its answer.
/// An answer on its way to the request's future: the error boxed, so that the channel of every
/// request in flight is sized for the usual answer (a 16-byte result), not for an error.
pub(crate) type PendingReply = Result<Box<serde_json::value::RawValue>, Box<crate::JsonRpcError>>;

pub(crate) struct Pending {
    pub(crate) tx: oneshot::Sender<PendingReply>,
    /// Shared with the request's future: one allocation for both.
    pub(crate) method: Arc<str>,
    pub(crate) task: TaskCancel,
    /// Its future is gone; the entry waits only for the task id, to cancel the task.
    pub(crate) orphan: bool,
}

/// Progress seen for one of our requests (MCP `notifications/progress` with its token).
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub(crate) count: AtomicU64,
    pub(crate) waker: AtomicWaker,
}

/// What the reader, the writer, the handlers and every [`PeerHandle`] of a connection share.
pub(crate) struct Shared {
    pub(crate) rules: Rules,
    pub(crate) outbox: Outbox,
    pub(crate) registry: Registry,
    /// Our requests awaiting an answer. Bounded by the application: one entry per
    /// [`OutgoingRequest`](super::outgoing::OutgoingRequest) it holds, removed when that future completes or is dropped.
    pub(super) pending: Mutex<HashMap<RequestId, Pending>>,
    pub(super) next_id: AtomicI64,
    /// The method of our last request, shared by the next ones of the same method (a
    /// connection mostly sends one or two), so a request in flight costs no name of its own.
    last_method: Mutex<Option<Arc<str>>>,
    pub(crate) router: Router,
    pub(crate) limits: Limits,
    /// Notification handlers, run one after another in arrival order. Unbounded as a channel,
    /// bounded by the notification budget in `limits`, taken before anything is queued.
    pub(crate) notifications: mpsc::UnboundedSender<QueuedNotification>,
    /// Parent of every handler's scope; cancelled (shutdown) when the connection closes.
    pub(crate) connection: Scope,
    pub(crate) canceller: Canceller,
    /// Parent of the scopes of requests that run on after the peer went away
    /// ([`DisconnectPolicy`]); cancelled at the policy's bound, or with `connection` on
    /// shutdown.
    pub(crate) survivors: Scope,
    pub(crate) survivors_canceller: Canceller,
    pub(crate) stop_reading: CancellationToken,
    /// [`PeerHandle::close`] was called: the reason is shutdown, not a closed connection.
    pub(crate) closing: AtomicBool,
    pub(crate) reason_policy: ReasonPolicy,
    pub(crate) disconnect: DisconnectPolicy,
    /// What the transport tells handlers about their requests, if it tells anything.
    pub(crate) transport: Option<super::disconnect::TransportData>,
    /// Entries of `pending` left only to cancel a task; at most [`MAX_ABANDONED_TASKS`].
    orphans: AtomicUsize,
    /// Progress tokens of our requests with a progress timeout; at most
    /// [`MAX_PROGRESS_TOKENS`].
    progress: Mutex<HashMap<RequestId, Arc<Progress>>>,
}

impl Shared {
    /// `method` as a shared name: the last one's if it is the same.
    pub(super) fn method_name(&self, method: &str) -> Arc<str> {
        let mut last = lock(&self.last_method);
        match &*last {
            Some(name) if &**name == method => Arc::clone(name),
            _ => {
                let name: Arc<str> = Arc::from(method);
                *last = Some(Arc::clone(&name));
                name
            }
        }
    }

    pub(crate) fn new(
        rules: Rules,
        outbox: Outbox,
        router: Router,
        limits: Limits,
        notifications: mpsc::UnboundedSender<QueuedNotification>,
        extras: Extras,
    ) -> Self {
        let (connection, canceller) = Scope::root();
        let (survivors, survivors_canceller) = Scope::root();
        Self {
            rules,
            outbox,
            registry: Registry::default(),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            last_method: Mutex::new(None),
            router,
            limits,
            notifications,
            connection,
            canceller,
            survivors,
            survivors_canceller,
            stop_reading: CancellationToken::new(),
            closing: AtomicBool::new(false),
            reason_policy: extras.reason,
            disconnect: extras.disconnect,
            transport: extras.transport,
            orphans: AtomicUsize::new(0),
            progress: Mutex::new(HashMap::new()),
        }
    }

    /// The scope inbound requests for `method` run under: the connection's, or, when they run
    /// on after a disconnect, the survivors'.
    pub(crate) fn parent_scope(&self, method: &str) -> &Scope {
        if self.disconnect.survives(method) {
            &self.survivors
        } else {
            &self.connection
        }
    }

    pub(crate) fn closed(&self) -> bool {
        self.canceller.is_cancelled()
    }

    /// Forgets an outgoing request (its answer, if any, will be dropped) — unless it is a task
    /// request given up before its task id arrived: that entry stays, within
    /// [`MAX_ABANDONED_TASKS`], until the id arrives and `tasks/cancel` can be sent.
    pub(crate) fn forget(&self, id: &RequestId) {
        let mut pending = lock(&self.pending);
        let Some(entry) = pending.get_mut(id) else {
            return;
        };
        if entry.task != TaskCancel::OnAnswer || entry.orphan {
            if entry.orphan {
                self.orphans.fetch_sub(1, Ordering::Relaxed);
            }
            pending.remove(id);
            return;
        }
        if self.orphans.load(Ordering::Relaxed) >= MAX_ABANDONED_TASKS {
            pending.remove(id);
            tracing::warn!(request_id = %id, "too many task requests await their task id to be cancelled; this one is forgotten and its task runs until its ttl");
            return;
        }
        entry.orphan = true;
        self.orphans.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets an abandoned task request that never got its answer (MCP 2026-07-28: the server
    /// honoured our `notifications/cancelled` before it made a task, so no answer will come).
    pub(crate) fn drop_orphan(&self, id: &RequestId) {
        let mut pending = lock(&self.pending);
        if pending.get(id).is_some_and(|entry| entry.orphan) {
            pending.remove(id);
            self.orphans.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Marks our task request `id` to be cancelled with `tasks/cancel` once its task id
    /// arrives; `false` if its answer has already been taken from the map (then it is in the
    /// request's channel, or the connection closed).
    pub(crate) fn cancel_task_on_answer(&self, id: &RequestId) -> bool {
        match lock(&self.pending).get_mut(id) {
            Some(entry) => {
                entry.task = TaskCancel::OnAnswer;
                true
            }
            None => false,
        }
    }

    /// Hands the peer's answer to the request waiting for it; for a task request given up
    /// before, sends `tasks/cancel` for the task it names.
    pub(crate) fn answer(&self, id: RequestId, outcome: Reply) {
        let mut pending = lock(&self.pending);
        let Some(entry) = pending.remove(&id) else {
            drop(pending);
            tracing::debug!(
                request_id = %id,
                "dropped a response to a request we never sent, already cancelled or gave up on"
            );
            return;
        };
        if entry.orphan {
            self.orphans.fetch_sub(1, Ordering::Relaxed);
        }
        self.rules.on_response(&entry.method, &outcome);
        let task = (entry.task == TaskCancel::OnAnswer)
            .then(|| task_id_of(&outcome))
            .flatten();
        // Sent under the lock: a request given up concurrently either finds its entry here
        // (and marks it) or its answer in its channel.
        let _ = entry.tx.send(outcome.map_err(Box::new));
        drop(pending);
        if let Some(task) = task {
            self.send_task_cancel(&id, &task);
        }
    }

    /// Sends `tasks/cancel {taskId}` for the task our request `request` created. Like a cancel
    /// notification it is never refused or queued behind the output bound, and its answer is
    /// not waited for.
    pub(crate) fn send_task_cancel(&self, request: &RequestId, task: &str) {
        if self.closed() {
            return;
        }
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        let params = wire::params(&serde_json::json!({ "taskId": task }))
            .and_then(|params| self.rules.outgoing_params(tasks::CANCEL, params));
        tracing::debug!(request_id = %request, task_id = task, "sending tasks/cancel for the task our request created");
        let message = wire::request(&id, tasks::CANCEL, params.as_deref());
        self.outbox
            .send_anyway(Outbound::new(OutboundKind::Request { id }, message));
    }

    /// Starts watching `token` for progress; `None` if it is watched already or the map is full.
    pub(crate) fn watch_progress(&self, token: &RequestId) -> Option<Arc<Progress>> {
        let mut progress = lock(&self.progress);
        if progress.len() >= MAX_PROGRESS_TOKENS || progress.contains_key(token) {
            return None;
        }
        let watched = Arc::new(Progress::default());
        progress.insert(token.clone(), Arc::clone(&watched));
        Some(watched)
    }

    /// Stops watching `token`.
    pub(crate) fn unwatch_progress(&self, token: &RequestId) {
        lock(&self.progress).remove(token);
    }

    /// MCP `notifications/progress`: wakes the request of ours whose token it names, if any.
    pub(crate) fn on_progress(&self, params: Option<&RawValue>) {
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(rename = "progressToken")]
            token: RequestId,
        }
        let progress = lock(&self.progress);
        if progress.is_empty() {
            return;
        }
        let Some(Ok(params)) = params.map(|p| serde_json::from_str::<Params>(p.get())) else {
            return;
        };
        if let Some(watched) = progress.get(&params.token) {
            watched.count.fetch_add(1, Ordering::Relaxed);
            watched.waker.wake();
        }
    }

    /// MCP 2026-07-28 client: the server ended our `subscriptions/listen` request `id` with
    /// `notifications/cancelled`; its future completes with -32800. Whether it named one.
    pub(crate) fn end_listen(&self, id: &RequestId, reason: Option<String>) -> bool {
        let mut pending = lock(&self.pending);
        if pending
            .get(id)
            .is_none_or(|p| &*p.method != super::policy::era::LISTEN)
        {
            return false;
        }
        let Some(ended) = pending.remove(id) else {
            return false;
        };
        drop(pending);
        let error = crate::Cancelled::new(crate::CancelReason::Peer(reason));
        let _ = ended.tx.send(Err(Box::new(error.into())));
        true
    }

    /// Fails every request still waiting for an answer ([`RequestError::Closed`]).
    pub(crate) fn fail_pending(&self) {
        let pending: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        self.orphans.store(0, Ordering::Relaxed);
        drop(pending);
    }

    /// Tells the peer to cancel one of our requests (never `initialize`), with the reason text
    /// the [`ReasonPolicy`] lets out; logs the cause in full.
    pub(crate) fn send_cancel(&self, id: &RequestId, method: &str, cause: &OutgoingCause) {
        if self.closed() {
            return;
        }
        tracing::info!(request_id = %id, method, cause = %cause.full(), "cancelled a request of ours");
        let reason = self.reason_policy.outgoing(cause);
        if let Some(message) = self.rules.cancel_message(id, method, reason.as_deref()) {
            let kind = OutboundKind::Cancel { id: id.clone() };
            self.outbox.send_anyway(Outbound::new(kind, message));
        }
    }
}

/// The task id in the answer to a task-augmented request: 2025-11-25's `CreateTaskResult`
/// (`{"task": {"taskId"}}`) or the 2026-07-28 extension's (`{"resultType": "task", "taskId"}`).
pub(crate) fn task_id_of<E>(
    outcome: &Result<Box<serde_json::value::RawValue>, E>,
) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Created {
        task: Option<Task>,
        #[serde(rename = "taskId")]
        task_id: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Task {
        #[serde(rename = "taskId")]
        task_id: String,
    }
    let created: Created = serde_json::from_str(outcome.as_ref().ok()?.get()).ok()?;
    created.task.map(|t| t.task_id).or(created.task_id)
}

/// Whether our `method` request with these params is an MCP task-augmented request.
pub(super) fn is_task_request(rules: &Rules, method: &str, params: Option<&RawValue>) -> bool {
    matches!(rules.protocol, Protocol::Mcp(_))
        && method == tasks::AUGMENTABLE
        && (tasks::requested(params).is_some()
            // 2026-07-28: the server decides; a client declaring the extension may get a task.
            || (rules.is_2026() && super::policy::era::declares_tasks(params)))
}

/// The `_meta.progressToken` of a request's params, if they carry one.
pub(crate) fn progress_token_of(params: Option<&RawValue>) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "progressToken")]
        token: Option<RequestId>,
    }
    let params = params?;
    if !super::wire::may_have_key(params, "progressToken") {
        return None;
    }
    serde_json::from_str::<Params>(params.get())
        .ok()?
        .meta?
        .token
}
