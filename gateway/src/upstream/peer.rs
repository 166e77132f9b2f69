//! What an upstream does once a cancelkit client [`Peer`] reaches it, whatever carries the
//! peer (a stdio child, a Streamable HTTP server): the builder of such peers, `tools/list`
//! page by page, `tools/call` with its progress forwarded to the caller, and a count of the
//! upstream's `notifications/tools/list_changed`.
//!
//! Cancelling a call is dropping its future: the runtime cancels the upstream request the way
//! the transport and the revision want (`notifications/cancelled` with the upstream's own id,
//! or a closed response stream at 2026-07-28), with the cause of the enclosing scope's cancel
//! as the reason.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit::peer::{
    Context, McpRevision, Peer, PeerBuilder, PeerHandle, Protocol, RequestError, Router,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::ProgressSink;

/// Most calls whose progress is forwarded at once, per upstream; beyond, a call runs without
/// progress.
pub const MAX_PROGRESS_WATCHES: usize = 10_000;
/// How many `tools/list` pages are followed.
const MAX_TOOL_PAGES: usize = 100;
/// How long one `tools/list` page may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

type Watches = Arc<Mutex<HashMap<String, ProgressSink>>>;

/// The calls of one upstream: where their progress goes.
#[derive(Debug)]
pub(super) struct Calls {
    name: String,
    watches: Watches,
    next_token: AtomicU64,
    list_changes: Arc<AtomicU64>,
}

/// The `clientInfo` the gateway gives upstreams.
pub(super) fn client_info() -> Value {
    json!({"name": "cancelkit-gateway", "version": env!("CARGO_PKG_VERSION")})
}

impl Calls {
    pub(super) fn new(name: &str) -> Calls {
        Calls {
            name: name.to_owned(),
            watches: Arc::default(),
            next_token: AtomicU64::new(1),
            list_changes: Arc::default(),
        }
    }

    /// How many `notifications/tools/list_changed` the upstream sent.
    pub(super) fn list_changes(&self) -> u64 {
        self.list_changes.load(Ordering::SeqCst)
    }

    /// A client peer for this upstream: any revision (`server/discover`, else `initialize`),
    /// no client capabilities, upstream progress forwarded to the call that asked for it,
    /// `notifications/tools/list_changed` counted.
    pub(super) fn builder(&self) -> PeerBuilder {
        let watches = Arc::clone(&self.watches);
        let list_changes = Arc::clone(&self.list_changes);
        let router = Router::new()
            .notification(
                "notifications/progress",
                move |mut params: Value, _cx: Context| {
                    let watches = Arc::clone(&watches);
                    async move { forward_progress(&watches, &mut params) }
                },
            )
            .notification(
                "notifications/tools/list_changed",
                move |_: Value, _cx: Context| {
                    list_changes.fetch_add(1, Ordering::SeqCst);
                    async {}
                },
            );
        Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
            .client_capabilities(json!({}))
            .answer_cancelled(false)
            .router(router)
    }

    /// Every page of `tools/list`.
    pub(super) async fn list_tools(
        &self,
        handle: &PeerHandle,
    ) -> Result<Result<Vec<Value>, String>, RequestError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let result: Value = handle
                .request("tools/list", params)
                .timeout(LIST_TIMEOUT)
                .await?;
            let Some(Value::Array(page)) = result.get("tools") else {
                return Ok(Err("its tools/list result has no `tools` array".into()));
            };
            tools.extend(page.iter().cloned());
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => return Ok(Ok(tools)),
            }
        }
        tracing::warn!(upstream = %self.name, "tools/list has over {MAX_TOOL_PAGES} pages; the rest are left out");
        Ok(Ok(tools))
    }

    /// `tools/call`, its arguments as the client wrote them and its result as the upstream
    /// wrote it; dropping the future unanswered cancels it upstream.
    pub(super) async fn call(
        &self,
        handle: &PeerHandle,
        tool: &str,
        arguments: Option<&RawValue>,
        progress: Option<&ProgressSink>,
    ) -> Result<Box<RawValue>, RequestError> {
        #[derive(Serialize)]
        struct Params<'a> {
            name: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            arguments: Option<&'a RawValue>,
            #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
            meta: Option<ProgressMeta<'a>>,
        }
        #[derive(Serialize)]
        struct ProgressMeta<'a> {
            #[serde(rename = "progressToken")]
            progress_token: &'a str,
        }
        let watch = progress.and_then(|sink| self.watch(sink));
        let params = Params {
            name: tool,
            arguments,
            meta: watch.as_ref().map(|w| ProgressMeta {
                progress_token: &w.token,
            }),
        };
        handle
            .request::<_, Box<RawValue>>("tools/call", params)
            .await
    }

    /// Forwards the progress of a call to `sink` while the guard lives; the guard holds the
    /// token the call's params carry.
    fn watch(&self, sink: &ProgressSink) -> Option<WatchGuard> {
        let token = format!(
            "gateway-progress-{}",
            self.next_token.fetch_add(1, Ordering::Relaxed)
        );
        let mut watches = self
            .watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if watches.len() >= MAX_PROGRESS_WATCHES {
            tracing::warn!(upstream = %self.name, "too many calls watching progress; this one runs without");
            return None;
        }
        watches.insert(token.clone(), sink.clone());
        Some(WatchGuard {
            watches: Arc::clone(&self.watches),
            token,
        })
    }
}

/// Stops forwarding a call's progress when the call ends.
struct WatchGuard {
    watches: Watches,
    token: String,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.token);
    }
}

/// Hands an upstream progress notification to the call that asked for it, without the
/// gateway's token (the front end puts back the caller's). A caller that is slow to read
/// loses progress rather than holding memory.
fn forward_progress(watches: &Watches, params: &mut Value) {
    let Some(token) = params
        .get("progressToken")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return;
    };
    let sink = watches
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&token)
        .cloned();
    if let Some(sink) = sink {
        if let Some(object) = params.as_object_mut() {
            object.remove("progressToken");
        }
        let _ = sink.try_send(params.take());
    }
}
