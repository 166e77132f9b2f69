//! The user-facing handle of a connection ([`PeerHandle`]) and the state its tasks share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit_protocol::jsonrpc::RequestId;
use futures_util::task::AtomicWaker;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::disconnect::{DisconnectPolicy, Extras, OutgoingCause, ReasonPolicy};
use super::dispatch::{Limits, QueuedNotification};
use super::outgoing::{OutgoingRequest, RequestError};
use super::policy::{Protocol, Rules, tasks};
use super::registry::{Cancel, Registry};
use super::router::{Reply, Router};
use super::wire;
use super::writer::{Outbox, TrySend};
use crate::sync::lock;
use crate::{CancelReason, Canceller, Scope};

/// Outgoing task-augmented requests given up before their task id arrived, kept at most so
/// that `tasks/cancel` can be sent once it does; beyond this, such a request is forgotten (and
/// its task, if one is created, runs until its `ttl`) with a warning.
pub const MAX_ABANDONED_TASKS: usize = 1024;

/// Outgoing requests whose timeout resets on progress, watched at most at once; beyond this,
/// [`OutgoingRequest::progress_timeout`] falls back to a plain timeout of its maximum.
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
    /// [`OutgoingRequest`] it holds, removed when that future completes or is dropped.
    pending: Mutex<HashMap<RequestId, Pending>>,
    next_id: AtomicI64,
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
    fn method_name(&self, method: &str) -> Arc<str> {
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
        let mut params = serde_json::json!({ "taskId": task });
        if self.rules.edits_outgoing(tasks::CANCEL) {
            self.rules.outgoing_params(tasks::CANCEL, &mut params);
        }
        tracing::debug!(request_id = %request, task_id = task, "sending tasks/cancel for the task our request created");
        let message = wire::request(&id, tasks::CANCEL, wire::params(&params).as_deref());
        self.outbox.send_anyway(message);
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
            self.outbox.send_anyway(message);
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
fn is_task_request(rules: &Rules, method: &str, params: Option<&RawValue>) -> bool {
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

/// Sends requests and notifications on a connection; cheap to clone.
#[derive(Clone)]
pub struct PeerHandle {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for PeerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerHandle")
            .field("protocol", &self.shared.rules.protocol)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl PeerHandle {
    /// Sends a request and returns its future. The request is queued for writing at once (or,
    /// when our output queue is full because the peer is not reading, as soon as the future is
    /// awaited and there is room); awaiting the future waits for the answer, and dropping it
    /// unanswered cancels it (see [`OutgoingRequest`]).
    pub fn request<P: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: P,
    ) -> OutgoingRequest<R> {
        let shared = &self.shared;
        let id = RequestId::Number(shared.next_id.fetch_add(1, Ordering::Relaxed));
        let name = shared.method_name(method);
        let shared_arc = Arc::clone(shared);
        if let Some(why) = shared.rules.refuse_request(method) {
            tracing::warn!(method, "{why}");
            return OutgoingRequest::failed(shared_arc, id, name, RequestError::NotAllowed(why));
        }
        let params = if shared.rules.edits_outgoing(method) {
            serde_json::to_value(params).map(|mut params| {
                shared.rules.outgoing_params(method, &mut params);
                wire::params(&params)
            })
        } else {
            serde_json::value::to_raw_value(&params).map(|raw| (raw.get() != "null").then_some(raw))
        };
        let params = match params {
            Ok(params) => params,
            Err(e) => {
                return OutgoingRequest::failed(shared_arc, id, name, RequestError::Encode(e));
            }
        };
        let task = if is_task_request(&shared.rules, method, params.as_deref()) {
            TaskCancel::Task
        } else {
            TaskCancel::No
        };
        let progress_token = matches!(shared.rules.protocol, Protocol::Mcp(_))
            .then(|| progress_token_of(params.as_deref()))
            .flatten();
        let message = wire::request(&id, method, params.as_deref());
        let (tx, rx) = oneshot::channel();
        lock(&shared.pending).insert(
            id.clone(),
            Pending {
                tx,
                method: Arc::clone(&name),
                task,
                orphan: false,
            },
        );
        let unsent = match (shared.closed(), shared.outbox.try_send(message)) {
            (false, TrySend::Sent) => None,
            (false, TrySend::Full(message)) => Some(message),
            _ => {
                shared.forget(&id);
                return OutgoingRequest::failed(shared_arc, id, name, RequestError::Closed);
            }
        };
        OutgoingRequest::new(shared_arc, id, name, rx, unsent)
            .with_task(task != TaskCancel::No)
            .with_progress_token(progress_token)
    }

    /// [`request`](Self::request) with a timeout that restarts whenever the peer reports
    /// progress for it, up to `max` in all (MCP `notifications/progress`; MCP 2026-07-28
    /// recommends this to clients). Adds `_meta.progressToken` to the params unless they carry
    /// one already. See [`OutgoingRequest::progress_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(peer: cancelkit::peer::PeerHandle) -> Result<(), cancelkit::peer::RequestError> {
    /// let result: serde_json::Value = peer
    ///     .request_with_progress(
    ///         "tools/call",
    ///         serde_json::json!({"name": "build", "arguments": {}}),
    ///         Duration::from_secs(10),  // no progress for 10 s: cancelled
    ///         Duration::from_secs(600), // never more than 10 min
    ///     )
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn request_with_progress<P: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: P,
        idle: Duration,
        max: Duration,
    ) -> OutgoingRequest<R> {
        let mut params = match serde_json::to_value(params) {
            Ok(params) => params,
            Err(e) => {
                let id = RequestId::Number(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
                return OutgoingRequest::failed(
                    Arc::clone(&self.shared),
                    id,
                    Arc::from(method),
                    RequestError::Encode(e),
                );
            }
        };
        static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
        if params.is_null() {
            params = serde_json::json!({});
        }
        if let Some(object) = params.as_object_mut() {
            let meta = object
                .entry("_meta")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.entry("progressToken").or_insert_with(|| {
                    let n = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
                    format!("cancelkit-progress-{n}").into()
                });
            }
        }
        self.request(method, params).progress_timeout(idle, max)
    }

    /// Cancels the inbound request `id` in flight from our side — an operator, or a gateway's
    /// HTTP API, asked — with `reason` as its cause (typically [`CancelReason::Api`] with who
    /// asked). The handler sees the reason through [`crate::cancel_reason`]; the request is
    /// still answered (-32800, or the handler's result), since the peer did not cancel it.
    /// Returns whether a cancellable request with that id was in flight and not yet cancelled.
    pub fn cancel_inbound(&self, id: &RequestId, reason: CancelReason) -> bool {
        let outcome = self.shared.registry.cancel_ours(id, reason);
        tracing::debug!(request_id = %id, ?outcome, "cancel of an inbound request asked from our side");
        outcome == Cancel::Cancelled
    }

    /// Sends a notification, waiting for room in our output queue if the peer is slow to read.
    /// Fails only if the connection is closed.
    pub async fn notify<P: Serialize>(&self, method: &str, params: P) -> Result<(), RequestError> {
        let params = serde_json::to_value(params).map_err(RequestError::Encode)?;
        if let Some(why) = self.shared.rules.refuse_notification(method, &params) {
            tracing::warn!(method, "{why}");
            return Err(RequestError::NotAllowed(why));
        }
        let message = wire::notification(method, wire::params(&params).as_deref());
        if !self.shared.closed() && self.shared.outbox.send(message).await {
            Ok(())
        } else {
            Err(RequestError::Closed)
        }
    }

    /// How many inbound requests are registered and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.shared.registry.len()
    }

    /// How many of our requests are waiting for an answer.
    pub fn pending_requests(&self) -> usize {
        lock(&self.shared.pending).len()
    }

    /// How many bytes of output wait to be written (each message counted with a small fixed
    /// overhead); at most [`PeerBuilder::max_output_bytes`](super::PeerBuilder::max_output_bytes).
    pub fn queued_output_bytes(&self) -> usize {
        self.shared.outbox.queued()
    }

    /// Whether the peer declared the draft `cancellation: {request: true}` capability (ACP).
    pub fn peer_accepts_draft_cancel(&self) -> bool {
        self.shared.rules.peer_accepts_draft()
    }

    /// Stops reading: everything in flight is cancelled (reason: shutdown), pending requests
    /// fail with [`RequestError::Closed`], and the connection ends once owed answers are sent —
    /// or once the shutdown grace has passed, whichever comes first.
    pub fn close(&self) {
        self.shared.closing.store(true, Ordering::Relaxed);
        self.shared.stop_reading.cancel();
    }

    /// Whether the connection has stopped reading.
    pub fn is_closed(&self) -> bool {
        self.shared.closed()
    }
}
