//! Requests we send: a future per request that sends the protocol's cancel notification when it
//! is dropped unanswered.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use cancelkit_protocol::jsonrpc::RequestId;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;
use tokio::time::Sleep;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::disconnect::OutgoingCause;
use super::handle::{PendingReply, Progress, Shared, task_id_of};
use super::transport::Outbound;
use crate::{CancelReason, Cancelled, JsonRpcError, Scope};

/// MCP 2026-07-28: how long a `tools/call` given up before its answer is remembered, in case
/// the answer is a task to cancel (`tasks/cancel`). A server that honours the
/// `notifications/cancelled` sent with it never answers; one that made a task first answers
/// within a round trip.
const MAYBE_TASK_WAIT: Duration = Duration::from_secs(60);

/// Why an outgoing request produced no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The peer answered with an error.
    #[error("the peer answered with an error: {0}")]
    Rpc(JsonRpcError),
    /// The scope the request was made in was cancelled; the peer was told.
    #[error(transparent)]
    Cancelled(Cancelled),
    /// No answer within the request's timeout; the peer was told to cancel.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The connection closed before an answer arrived.
    #[error("the connection closed before the peer answered")]
    Closed,
    /// The params could not be serialized.
    #[error("cannot serialize the params: {0}")]
    Encode(serde_json::Error),
    /// The answer did not deserialize into the expected type.
    #[error("cannot deserialize the result: {0}")]
    Decode(serde_json::Error),
    /// The protocol forbids sending this (an MCP 2026-07-28 server issues no requests and
    /// cancels nothing but its own `subscriptions/listen` streams); nothing was sent.
    #[error("not sent: {0}")]
    NotAllowed(String),
}

impl From<RequestError> for JsonRpcError {
    /// Lets a handler forward a failed nested request with `?`: cancellations and timeouts stay
    /// -32800, the peer's errors pass through, the rest become -32603.
    fn from(error: RequestError) -> Self {
        match error {
            RequestError::Rpc(error) => error,
            RequestError::Cancelled(cancelled) => cancelled.into(),
            RequestError::Timeout(after) => Cancelled::new(CancelReason::Timeout(after)).into(),
            other => JsonRpcError::internal(other.to_string()),
        }
    }
}

/// An outgoing request. Await it for the result.
///
/// Dropping it before the answer arrives tells the peer (ACP `$/cancel_request`, MCP
/// `notifications/cancelled`, LSP `$/cancelRequest`) — except for `initialize`, which is never
/// cancelled — unless [`detach`](Self::detach) was called. If it was made inside a cancellation
/// scope (a `#[cancellable]` handler, say), cancelling that scope cancels the request the same
/// way, so one cancel cascades across hops.
///
/// An MCP task-augmented request (`tools/call` with `params.task`) is never cancelled with
/// `notifications/cancelled`: given up before its `CreateTaskResult` arrives, it sends
/// `tasks/cancel {taskId}` as soon as the task id does (at most
/// [`MAX_ABANDONED_TASKS`](super::MAX_ABANDONED_TASKS) such requests wait for their id);
/// given up once it has arrived, at once.
#[must_use = "dropping an outgoing request cancels it"]
pub struct OutgoingRequest<R> {
    shared: Arc<Shared>,
    id: RequestId,
    method: Arc<str>,
    rx: oneshot::Receiver<PendingReply>,
    scope: Option<Scope>,
    waiter: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    /// MCP task-augmented: cancelled with `tasks/cancel`, once its task id is known.
    task: bool,
    state: State,
    /// What only some requests need, boxed so that a plain request in flight stays small
    /// (96 bytes instead of 336).
    extra: Option<Box<Extra>>,
    _result: PhantomData<fn() -> R>,
}

/// The parts of an [`OutgoingRequest`] that most requests never use.
#[derive(Default)]
struct Extra {
    timeout: Option<(Duration, Pin<Box<Sleep>>)>,
    /// A timeout that restarts on progress, up to a maximum.
    progress: Option<ProgressTimeout>,
    /// The `_meta.progressToken` its params carry, if any.
    progress_token: Option<RequestId>,
    /// An answer taken from `rx` early (by [`cancel`](OutgoingRequest::cancel) of a task
    /// request), for `poll` to return.
    ready: Option<Result<PendingReply, oneshot::error::RecvError>>,
    /// Why the request could not even be sent.
    early: Option<RequestError>,
    /// Not queued yet (our output queue was full): the message, and the room being waited for.
    unsent: Option<Unsent>,
}

/// The state of [`OutgoingRequest::progress_timeout`].
struct ProgressTimeout {
    idle: Duration,
    max: Duration,
    idle_timer: Pin<Box<Sleep>>,
    max_timer: Pin<Box<Sleep>>,
    /// Progress seen for the request's token (`None`: no token, or too many watched).
    watched: Option<(RequestId, Arc<Progress>)>,
    seen: u64,
}

/// A request waiting for room in our output queue.
struct Unsent {
    message: Outbound,
    cost: u32,
    room: Pin<Box<dyn Future<Output = bool> + Send>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Sent, no answer yet: dropping it cancels.
    Waiting,
    /// The caller gave up on cancelling it: dropping it only forgets it.
    Detached,
    /// Answered, cancelled or failed: nothing left to do.
    Done,
}

impl<R> std::fmt::Debug for OutgoingRequest<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutgoingRequest")
            .field("id", &self.id)
            .field("method", &self.method)
            .field("state", &self.state)
            .finish()
    }
}

impl<R> OutgoingRequest<R> {
    pub(crate) fn new(
        shared: Arc<Shared>,
        id: RequestId,
        method: Arc<str>,
        rx: oneshot::Receiver<PendingReply>,
        unsent: Option<Outbound>,
    ) -> Self {
        let unsent = unsent.map(|message| {
            let (cost, room) = shared.outbox.room_for(&message);
            Unsent {
                message,
                cost,
                room: Box::pin(room),
            }
        });
        Self {
            shared,
            id,
            method,
            rx,
            scope: crate::current_scope(),
            waiter: None,
            task: false,
            state: State::Waiting,
            extra: unsent.map(|unsent| {
                Box::new(Extra {
                    unsent: Some(unsent),
                    ..Extra::default()
                })
            }),
            _result: PhantomData,
        }
    }

    /// A request that failed before it was sent.
    pub(crate) fn failed(
        shared: Arc<Shared>,
        id: RequestId,
        method: Arc<str>,
        error: RequestError,
    ) -> Self {
        let (_, rx) = oneshot::channel();
        let mut request = Self::new(shared, id, method, rx, None);
        request.state = State::Done;
        request.extra().early = Some(error);
        request
    }

    pub(crate) fn with_task(mut self, task: bool) -> Self {
        self.task = task;
        self
    }

    pub(crate) fn with_progress_token(mut self, token: Option<RequestId>) -> Self {
        if token.is_some() {
            self.extra().progress_token = token;
        }
        self
    }

    /// The rarely used parts, made on first use.
    fn extra(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// Takes one of the rarely used parts, if there is any.
    fn take<T>(&mut self, part: impl FnOnce(&mut Extra) -> Option<T>) -> Option<T> {
        self.extra.as_deref_mut().and_then(part)
    }

    /// The id the request was sent with.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// Gives up waiting after `after`: the peer is told to cancel and the request fails with
    /// [`RequestError::Timeout`].
    pub fn timeout(mut self, after: Duration) -> Self {
        self.extra().timeout = Some((after, Box::pin(tokio::time::sleep(after))));
        self
    }

    /// Gives up after `idle` without progress, or after `max` in all, whichever comes first:
    /// the timer restarts on each MCP `notifications/progress` whose `progressToken` is the one
    /// in this request's `_meta.progressToken` (MCP 2026-07-28 recommends exactly this to
    /// clients). On expiry the peer is told to cancel, as with [`timeout`](Self::timeout), and
    /// the request fails with [`RequestError::Timeout`] of `idle` or `max`.
    ///
    /// The params must carry the token: [`PeerHandle::request_with_progress`] adds one. Without
    /// one (nothing can reset the timer), it times out after `idle`; when
    /// [`MAX_PROGRESS_TOKENS`](super::MAX_PROGRESS_TOKENS) requests are already watched, it
    /// falls back to a plain timeout of `max` with a warning.
    ///
    /// [`PeerHandle::request_with_progress`]: super::PeerHandle::request_with_progress
    pub fn progress_timeout(mut self, idle: Duration, max: Duration) -> Self {
        if self.state == State::Done {
            return self;
        }
        let idle = idle.min(max);
        self.stop_watching(); // called again: the new timeout replaces the old one
        let token = self.extra.as_ref().and_then(|e| e.progress_token.clone());
        let watched = match token {
            Some(token) => match self.shared.watch_progress(&token) {
                Some(progress) => Some((token, progress)),
                None => {
                    tracing::warn!(request_id = %self.id, "cannot watch this request's progress (too many watched, or its token is in use); a plain timeout of the maximum applies");
                    self.extra().timeout = Some((max, Box::pin(tokio::time::sleep(max))));
                    return self;
                }
            },
            None => None,
        };
        self.extra().progress = Some(ProgressTimeout {
            idle,
            max,
            idle_timer: Box::pin(tokio::time::sleep(idle)),
            max_timer: Box::pin(tokio::time::sleep(max)),
            watched,
            seen: 0,
        });
        self
    }

    /// Opts out of cancellation: dropping the request (or cancelling its scope) no longer tells
    /// the peer, whose answer is then ignored.
    pub fn detach(mut self) -> Self {
        if self.state == State::Waiting {
            self.state = State::Detached;
        }
        self.scope = None;
        self
    }

    /// Tells the peer to cancel the request now, and keeps waiting for its answer.
    ///
    /// ACP and LSP peers still answer a cancelled request (-32800, or a partial result), which
    /// this future then resolves to; an MCP peer sends nothing, so combine it with
    /// [`timeout`](Self::timeout). Calling it again, or dropping the request afterwards, sends
    /// no second cancel.
    ///
    /// For an MCP task-augmented request this sends `tasks/cancel` once the task id is known
    /// (at once if it is), and the future still resolves to the `CreateTaskResult`.
    pub fn cancel(&mut self) {
        if self.state == State::Waiting {
            if self.task {
                tracing::info!(request_id = %self.id, method = &*self.method, cause = "cancelled by the caller", "cancelling the task of a request of ours");
                if self.shared.cancel_task_on_answer(&self.id) {
                    if self.shared.rules.is_2026() {
                        // It may still be an ordinary request (see `give_up_task`).
                        self.shared
                            .send_cancel(&self.id, &self.method, &OutgoingCause::Explicit);
                    }
                } else {
                    // Already answered: the answer waits in our channel.
                    let ready = self.rx.try_recv().map_err(|_| ());
                    if let Ok(reply) = &ready
                        && let Some(task) = task_id_of(reply)
                    {
                        self.shared.send_task_cancel(&self.id, &task);
                    }
                    if let Ok(reply) = ready {
                        self.extra().ready = Some(Ok(reply));
                    }
                }
            } else {
                self.shared
                    .send_cancel(&self.id, &self.method, &OutgoingCause::Explicit);
            }
            self.state = State::Detached;
            self.scope = None;
        }
    }

    /// Tells the peer to cancel (unless that already happened, or the request never left our
    /// queue) and forgets the request.
    fn give_up(&mut self, cause: OutgoingCause) {
        if self.state == State::Waiting && self.take(|e| e.unsent.take()).is_none() {
            if self.task {
                self.give_up_task(&cause);
            } else {
                self.shared.send_cancel(&self.id, &self.method, &cause);
            }
        }
        self.state = State::Done;
        self.shared.forget(&self.id);
        self.stop_watching();
    }

    /// A task request given up: `tasks/cancel` when its task id arrives, or now if it has.
    fn give_up_task(&mut self, cause: &OutgoingCause) {
        tracing::info!(request_id = %self.id, method = &*self.method, cause = %cause.full(), "cancelling the task of a request of ours");
        if self.shared.cancel_task_on_answer(&self.id) {
            if self.shared.rules.is_2026() {
                // 2026-07-28: it may still be an ordinary request; the server stops it (and
                // makes no task) on `notifications/cancelled`, and then never answers.
                self.shared.send_cancel(&self.id, &self.method, cause);
                self.expire_orphan();
            }
            return; // `forget` keeps the entry until the task id arrives
        }
        let reply = match self.take(|e| e.ready.take()) {
            Some(Ok(reply)) => Some(reply),
            _ => self.rx.try_recv().ok(),
        };
        if let Some(task) = reply.as_ref().and_then(task_id_of) {
            self.shared.send_task_cancel(&self.id, &task);
        }
    }

    /// A 2026-07-28 request kept only to cancel the task it may have made: forgotten after
    /// [`MAYBE_TASK_WAIT`] if no answer came (the server honoured the cancel instead).
    fn expire_orphan(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = Arc::downgrade(&self.shared);
        let id = self.id.clone();
        runtime.spawn(async move {
            tokio::time::sleep(MAYBE_TASK_WAIT).await;
            if let Some(shared) = shared.upgrade() {
                shared.drop_orphan(&id);
            }
        });
    }

    fn stop_watching(&mut self) {
        if let Some(progress) = self.take(|e| e.progress.take())
            && let Some((token, _)) = &progress.watched
        {
            self.shared.unwatch_progress(token);
        }
    }

    /// Polls the progress timeout: `Some(after)` once it expired.
    fn poll_progress(&mut self, cx: &mut TaskContext<'_>) -> Option<Duration> {
        let progress = self.extra.as_deref_mut()?.progress.as_mut()?;
        if let Some((_, watched)) = &progress.watched {
            watched.waker.register(cx.waker());
            let count = watched.count.load(std::sync::atomic::Ordering::Relaxed);
            if count != progress.seen {
                progress.seen = count;
                let deadline = tokio::time::Instant::now() + progress.idle;
                progress.idle_timer.as_mut().reset(deadline);
            }
        }
        if progress.max_timer.as_mut().poll(cx).is_ready() {
            return Some(progress.max);
        }
        if progress.idle_timer.as_mut().poll(cx).is_ready() {
            return Some(progress.idle);
        }
        None
    }
}

impl<R: DeserializeOwned> Future for OutgoingRequest<R> {
    type Output = Result<R, RequestError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.state == State::Done {
            return Poll::Ready(Err(this
                .take(|e| e.early.take())
                .unwrap_or(RequestError::Closed)));
        }
        if let Some(unsent) = this.extra.as_deref_mut().and_then(|e| e.unsent.as_mut())
            && let Poll::Ready(room) = unsent.room.as_mut().poll(cx)
        {
            let Unsent { message, cost, .. } = this.take(|e| e.unsent.take()).expect("just polled");
            if !(room && this.shared.outbox.send_taken(message, cost)) {
                this.state = State::Done;
                this.shared.forget(&this.id);
                return Poll::Ready(Err(RequestError::Closed));
            }
        }
        let reply = match this.take(|e| e.ready.take()) {
            Some(reply) => Poll::Ready(reply),
            None => Pin::new(&mut this.rx).poll(cx),
        };
        if let Poll::Ready(reply) = reply {
            this.state = State::Done;
            this.stop_watching();
            return Poll::Ready(match reply {
                Ok(Ok(raw)) => serde_json::from_str(raw.get()).map_err(RequestError::Decode),
                Ok(Err(error)) => Err(RequestError::Rpc(*error)),
                Err(_) => Err(RequestError::Closed),
            });
        }
        if let Some(scope) = &this.scope {
            let waiter = this
                .waiter
                .get_or_insert_with(|| Box::pin(scope.token().clone().cancelled_owned()));
            if waiter.as_mut().poll(cx).is_ready() {
                let reason = scope.cancel_reason().unwrap_or(CancelReason::Parent);
                this.give_up(OutgoingCause::Reason(reason.clone()));
                return Poll::Ready(Err(RequestError::Cancelled(Cancelled::new(reason))));
            }
        }
        if let Some((after, sleep)) = this.extra.as_deref_mut().and_then(|e| e.timeout.as_mut())
            && sleep.as_mut().poll(cx).is_ready()
        {
            let after = *after;
            this.give_up(OutgoingCause::Reason(CancelReason::Timeout(after)));
            return Poll::Ready(Err(RequestError::Timeout(after)));
        }
        if let Some(after) = this.poll_progress(cx) {
            this.give_up(OutgoingCause::Reason(CancelReason::Timeout(after)));
            return Poll::Ready(Err(RequestError::Timeout(after)));
        }
        Poll::Pending
    }
}

impl<R> Drop for OutgoingRequest<R> {
    fn drop(&mut self) {
        match self.state {
            State::Waiting => {
                // Dropped because its scope was cancelled (a handler stopped at an `.await`):
                // that is the cause, not the drop.
                let cause = match self.scope.as_ref().and_then(Scope::cancel_reason) {
                    Some(reason) => OutgoingCause::Reason(reason),
                    None => OutgoingCause::Dropped,
                };
                self.give_up(cause);
            }
            State::Detached => {
                self.shared.forget(&self.id);
                self.stop_watching();
            }
            State::Done => self.stop_watching(),
        }
    }
}

#[cfg(test)]
mod tests {
    /// A plain request in flight is held by the caller for as long as it waits: what only some
    /// requests use lives behind one box.
    #[test]
    fn a_plain_outgoing_request_stays_small() {
        let size = std::mem::size_of::<super::OutgoingRequest<serde_json::Value>>();
        assert!(size <= 96, "OutgoingRequest is {size} bytes");
    }
}
