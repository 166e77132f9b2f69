//! The runtime side of a tool call: invoke a tool over HTTP and wait for its result at the
//! runtime's callback URL, cancelling the call at the tool servers when the wait is given up.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use cancelkit_protocol::rap::{ToolInvocation, ToolResult};
use reqwest::Url;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::notifier::{CallTracker, ToolServerTarget, TrackerFull};
use super::{shown, valid_id};
use crate::sync::lock;
use crate::{CancelReason, Cancelled, JsonRpcError, Scope};

mod binding;
mod call;

use binding::{Secret, Waiting};
pub use call::{Delivered, Invocation, InvokeError};

/// How many calls an [`Invoker`] lets wait for their results at once by default.
pub const DEFAULT_MAX_PENDING: usize = 1024;

/// How long `POST /invoke` may take by default (the tool's answer is immediate; its result
/// comes later, through the callback, and has no time limit of its own).
pub const DEFAULT_INVOKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of a refusal's body [`InvokeError::Refused`] keeps.
const REFUSAL_BODY_LIMIT: usize = 512;

type CallKey = (String, String);

struct Inner {
    tracker: Arc<CallTracker>,
    http: reqwest::Client,
    callback_url: String,
    /// `callback_url`, parsed: each call's callback URL is this plus its secret.
    callback_base: Url,
    callback_path: String,
    max_pending: usize,
    /// The calls waiting for their results, at most `max_pending`, with their secrets.
    waiting: Mutex<HashMap<CallKey, Waiting>>,
    /// Where call secrets come from.
    random: &'static dyn tokio_rustls::rustls::crypto::SecureRandom,
}

/// Invokes RAP tools and waits for their results, cancelling them when the wait is given up.
///
/// [`invoke`](Self::invoke) posts the invocation to a tool server's `/invoke` with a callback
/// URL of its own (the invoker's callback URL plus a per-call secret), and returns a future
/// ([`Invoke`]) that resolves with the `tool_result` the server later posts there.
/// [`callback_router`](Self::callback_router) is the route that receives those results; the
/// runtime serves it at the callback URL. A result is accepted only with its call's secret
/// and only once, and goes through the [`CallTracker`], so a result that crosses a
/// cancellation is dropped.
///
/// When the future is dropped before the result arrives, or when the cancellation scope it was
/// created in is cancelled (a `#[cancellable]` caller, a peer's cancel), the call is cancelled
/// through [`CallTracker::cancel`]: the tracker records the synthetic `interrupted` result, and
/// its [`Notifier`](super::Notifier) sends `/cancel_tool_call` to every tool server at once,
/// without waiting. No cancellation code is needed in the caller.
///
/// Bounded: at most [`max_pending`](InvokerBuilder::max_pending) calls wait at once
/// ([`InvokeError::Full`] beyond), and the tracker has its own bound.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use cancelkit::rap::{CallTracker, Invocation, Invoker, Notifier, ToolServerTarget};
///
/// let tools = ToolServerTarget::new("http://127.0.0.1:8701").with_bearer_token("token");
/// let notifier = Notifier::new([tools.clone()], Duration::from_secs(2));
/// let tracker = Arc::new(CallTracker::new(Some(notifier)));
/// let invoker = Invoker::new(tracker, "http://127.0.0.1:8700/tool_result")?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8700").await?;
/// tokio::spawn(axum::serve(listener, invoker.callback_router()).into_future());
///
/// let call = Invocation::new("run", "thread-1", "call-1")
///     .arguments(serde_json::json!({"script": "sleep 1; echo done"}));
/// let result = invoker.invoke(&tools, call).await?; // dropped or cancelled: /cancel_tool_call
/// println!("{:?}", result.text);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Invoker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Invoker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invoker")
            .field("callback_url", &self.inner.callback_url)
            .field("pending", &self.pending())
            .field("max_pending", &self.inner.max_pending)
            .finish()
    }
}

/// Configures an [`Invoker`] ([`Invoker::builder`]).
#[derive(Debug)]
pub struct InvokerBuilder {
    tracker: Arc<CallTracker>,
    callback_url: String,
    max_pending: usize,
    invoke_timeout: Duration,
    trusted: Vec<reqwest::Certificate>,
}

impl InvokerBuilder {
    /// Trusts the certificates of the PEM CA file `path` for `https://` tool servers, beside
    /// the platform's roots (and `SSL_CERT_FILE`), which are always trusted.
    ///
    /// # Errors
    ///
    /// The file cannot be read or holds no certificate.
    pub fn ca_file(mut self, path: &std::path::Path) -> Result<Self, crate::tls::TlsError> {
        self.trusted.extend(crate::tls::ca_certificates(path)?);
        Ok(self)
    }

    /// Lets at most `max_pending` calls (at least one) wait for their results at once
    /// (default [`DEFAULT_MAX_PENDING`]); more are refused with [`InvokeError::Full`].
    pub fn max_pending(mut self, max_pending: usize) -> Self {
        self.max_pending = max_pending.max(1);
        self
    }

    /// Gives up on `POST /invoke` after `timeout` (default [`DEFAULT_INVOKE_TIMEOUT`]).
    pub fn invoke_timeout(mut self, timeout: Duration) -> Self {
        self.invoke_timeout = timeout;
        self
    }

    /// The invoker; refused if the callback URL is not an absolute `http`/`https` URL without
    /// a fragment, or is so long that a call's URL (33 bytes more) would pass a tool server's
    /// [`MAX_CALLBACK_URL_LEN`](crate::rap::MAX_CALLBACK_URL_LEN).
    pub fn build(self) -> Result<Invoker, InvalidCallbackUrl> {
        let callback_url = self.callback_url;
        let url = Url::parse(&callback_url)
            .ok()
            .filter(|url| {
                matches!(url.scheme(), "http" | "https")
                    && url.has_host()
                    && url.fragment().is_none()
                    && url.as_str().len() + 33 <= crate::rap::MAX_CALLBACK_URL_LEN
            })
            .ok_or_else(|| InvalidCallbackUrl(callback_url.clone()))?;
        Ok(Invoker {
            inner: Arc::new(Inner {
                tracker: self.tracker,
                http: http_client(self.invoke_timeout, self.trusted),
                callback_path: url.path().to_owned(),
                callback_base: url,
                callback_url,
                max_pending: self.max_pending,
                waiting: Mutex::new(HashMap::new()),
                random: binding::random_source(),
            }),
        })
    }
}

/// A callback URL given to [`Invoker::new`] that is not an absolute `http`/`https` URL
/// without a fragment, or is too long.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not an absolute http or https callback URL without a fragment, of at most 2015 bytes"
)]
pub struct InvalidCallbackUrl(pub String);

impl Invoker {
    /// An invoker whose tool servers post results under `callback_url` (serve
    /// [`callback_router`](Self::callback_router) there: each call's URL is `callback_url`
    /// plus `/{secret}`), tracking calls with `tracker` (give it a
    /// [`Notifier`](super::Notifier), or cancellations reach no tool server).
    pub fn new(
        tracker: Arc<CallTracker>,
        callback_url: impl Into<String>,
    ) -> Result<Self, InvalidCallbackUrl> {
        Self::builder(tracker, callback_url).build()
    }

    /// An invoker with other limits than the defaults; [`InvokerBuilder::build`] checks the
    /// callback URL as [`new`](Self::new) does.
    pub fn builder(tracker: Arc<CallTracker>, callback_url: impl Into<String>) -> InvokerBuilder {
        InvokerBuilder {
            tracker,
            callback_url: callback_url.into(),
            max_pending: DEFAULT_MAX_PENDING,
            invoke_timeout: DEFAULT_INVOKE_TIMEOUT,
            trusted: Vec::new(),
        }
    }

    /// How many calls may wait for their results at once.
    pub fn max_pending(&self) -> usize {
        self.inner.max_pending
    }

    /// The call tracker.
    pub fn tracker(&self) -> &Arc<CallTracker> {
        &self.inner.tracker
    }

    /// The URL under which tool servers post results: each call's callback URL is this plus
    /// one path segment, the call's secret.
    pub fn callback_url(&self) -> &str {
        &self.inner.callback_url
    }

    /// How many calls are waiting for their results.
    pub fn pending(&self) -> usize {
        lock(&self.inner.waiting).len()
    }

    /// Invokes `invocation` on `server` (`POST {base_url}/invoke`, with the server's bearer
    /// token) and returns a future that resolves with the call's `tool_result`.
    ///
    /// The call is registered with the tracker and as waiting before anything is sent, so a
    /// result that arrives before `/invoke` is answered is not lost. The future takes the
    /// ambient cancellation scope of the task that calls `invoke`: when that scope is
    /// cancelled, or the future is dropped unanswered, the call is cancelled at the tool
    /// servers (see [`Invoker`]).
    pub fn invoke(&self, server: &ToolServerTarget, invocation: Invocation) -> Invoke {
        let scope = crate::current_scope();
        let inner = Arc::clone(&self.inner);
        let server = server.clone();
        Invoke {
            future: Box::pin(run(inner, server, invocation, scope)),
        }
    }
}

fn http_client(timeout: Duration, trusted: Vec<reqwest::Certificate>) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_certs_merge(trusted)
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a plain HTTP client builds")
}

/// A tool call waiting for its result; from [`Invoker::invoke`].
///
/// Dropping it before it resolves cancels the call: the tracker records `interrupted` and
/// every tool server gets `/cancel_tool_call`.
#[must_use = "dropping an invocation cancels the tool call"]
pub struct Invoke {
    future: Pin<Box<dyn Future<Output = Result<ToolResult, InvokeError>> + Send>>,
}

impl std::fmt::Debug for Invoke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invoke").finish_non_exhaustive()
    }
}

impl Future for Invoke {
    type Output = Result<ToolResult, InvokeError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.future.as_mut().poll(cx)
    }
}

/// A registered call: while armed, dropping it forgets the waiting slot and cancels the call.
struct Registered {
    inner: Arc<Inner>,
    key: CallKey,
    armed: bool,
    /// `POST /invoke`, while it has not been answered.
    posting: Option<JoinHandle<reqwest::Result<reqwest::Response>>>,
}

impl Registered {
    /// Cancels the call now (the tracker records "interrupted" and notifies every tool server);
    /// the synthetic result the tracker recorded, if the call was running.
    ///
    /// A cancel may overtake the invocation it cancels, and a server ignores a cancel for a
    /// call it does not know yet. So while `POST /invoke` is unanswered, the servers are told
    /// once more as soon as it is answered (a duplicate cancel is harmless), so that the cancel
    /// reaches a call the server has registered.
    fn cancel(&mut self) -> Option<Value> {
        self.armed = false;
        lock(&self.inner.waiting).remove(&self.key);
        let interrupted = self.inner.tracker.cancel(&self.key.0, &self.key.1);
        if let Some(posting) = self.posting.take()
            && let Some(notifier) = self.inner.tracker.notifier()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (notifier, key) = (notifier.clone(), self.key.clone());
            runtime.spawn(async move {
                if let Ok(Ok(response)) = posting.await
                    && response.status().is_success()
                {
                    drop(notifier.notify(&key.0, &key.1));
                }
            });
        }
        interrupted
    }

    /// The call ended without a result (the server refused it): forget it, cancelling nothing.
    fn forget(&mut self, why: &str) {
        self.armed = false;
        lock(&self.inner.waiting).remove(&self.key);
        // Closing the tracker's record with the failure as the call's result.
        let _ = self.inner.tracker.deliver(json!({
            "type": "tool_result",
            "group_id": self.key.0,
            "id": self.key.1,
            "text": why,
            "is_error": true,
        }));
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if self.armed {
            tracing::info!(thread_id = ?shown(&self.key.0), tool_call_id = ?shown(&self.key.1), "a tool call's result is no longer awaited; cancelling it");
            self.cancel();
        }
    }
}

/// The synthetic result of a cancelled call, as [`CallTracker::cancel`] records it.
fn interrupted(key: &CallKey) -> Value {
    json!({"type": "tool_result", "group_id": key.0, "id": key.1, "text": "interrupted", "is_error": true})
}

/// Completes when `scope` is cancelled; never without a scope.
async fn scope_cancelled(scope: Option<&Scope>) -> Cancelled {
    match scope {
        Some(scope) => {
            scope.token().cancelled().await;
            Cancelled::new(scope.cancel_reason().unwrap_or(CancelReason::Parent))
        }
        None => std::future::pending().await,
    }
}

async fn run(
    inner: Arc<Inner>,
    server: ToolServerTarget,
    invocation: Invocation,
    scope: Option<Scope>,
) -> Result<ToolResult, InvokeError> {
    if !valid_id(&invocation.thread_id) || !valid_id(&invocation.tool_call_id) {
        return Err(InvokeError::InvalidId);
    }
    let key = (
        invocation.thread_id.clone(),
        invocation.tool_call_id.clone(),
    );
    if let Some(scope) = &scope
        && scope.token().is_cancelled()
    {
        // Cancelled before anything was sent: nothing to tell the tool servers.
        return Err(InvokeError::Cancelled {
            cancelled: Cancelled::new(scope.cancel_reason().unwrap_or(CancelReason::Parent)),
            interrupted: interrupted(&key),
        });
    }
    let secret = Secret::new(inner.random).ok_or(InvokeError::NoSecret)?;
    let (tx, mut rx) = oneshot::channel();
    {
        let mut waiting = lock(&inner.waiting);
        if waiting.contains_key(&key) {
            return Err(InvokeError::Duplicate {
                thread_id: key.0,
                tool_call_id: key.1,
            });
        }
        if waiting.len() >= inner.max_pending {
            tracing::warn!(
                limit = inner.max_pending,
                "refused a tool call: too many waiting for results"
            );
            return Err(InvokeError::Full {
                pending: waiting.len(),
                limit: inner.max_pending,
            });
        }
        inner.tracker.start(&key.0, &key.1)?;
        waiting.insert(key.clone(), Waiting { secret, tx });
    }
    let mut call = Registered {
        inner: Arc::clone(&inner),
        key,
        armed: true,
        posting: None,
    };
    let cancelled = |call: &mut Registered, cancelled: Cancelled| InvokeError::Cancelled {
        interrupted: call.cancel().unwrap_or_else(|| interrupted(&call.key)),
        cancelled,
    };

    let body = ToolInvocation {
        arguments: invocation.arguments,
        call_id: invocation.call_id,
        callback_url: secret.url(&inner.callback_base),
        group_id: invocation.thread_id,
        id: invocation.tool_call_id,
        operation: invocation.operation,
        thread_ancestors: Vec::new(),
        user_id: invocation.user_id,
    };
    let url = format!("{}/invoke", server.base_url.trim_end_matches('/'));
    let mut request = inner.http.post(url).json(&body);
    if let Some(token) = &server.bearer_token {
        request = request.bearer_auth(token);
    }
    // Sent from its own task, so that a cancel can wait for the answer (see
    // `Registered::cancel`) even when this future is dropped.
    let posting = call.posting.insert(tokio::spawn(request.send()));
    let sent = tokio::select! {
        biased;
        why = scope_cancelled(scope.as_ref()) => Err(why),
        sent = posting => Ok(sent),
    };
    let sent = match sent {
        Err(why) => return Err(cancelled(&mut call, why)),
        Ok(sent) => {
            call.posting = None;
            sent.map_err(|e| e.to_string())
                .and_then(|sent| sent.map_err(|e| cancelkit_wire::chain(&e).to_string()))
        }
    };
    match sent {
        Ok(response) if response.status().is_success() => {}
        Ok(mut response) => {
            let status = response.status().as_u16();
            // The start of the body only: a tool server's error page could be of any size.
            let mut start = Vec::new();
            while start.len() < REFUSAL_BODY_LIMIT
                && let Ok(Some(chunk)) = response.chunk().await
            {
                start.extend_from_slice(&chunk);
            }
            start.truncate(REFUSAL_BODY_LIMIT);
            let body = String::from_utf8_lossy(&start).into_owned();
            call.forget(&format!(
                "the tool server refused the invocation with HTTP {status}"
            ));
            return Err(InvokeError::Refused { status, body });
        }
        Err(e) => {
            // The server may have started the call before the connection failed: cancel it.
            call.cancel();
            return Err(InvokeError::Unreachable(e));
        }
    }
    tokio::select! {
        biased;
        result = &mut rx => {
            call.armed = false;
            result.map_err(|_| InvokeError::Closed)
        }
        why = scope_cancelled(scope.as_ref()) => Err(cancelled(&mut call, why)),
    }
}
