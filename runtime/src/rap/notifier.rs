//! The runtime side: fan a cancellation out to every tool server, and keep the conversation
//! consistent when results and cancellations cross.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cancelkit_protocol::rap::ToolCancellation;
use serde_json::{Value, json};
use tokio::task::JoinSet;

/// One tool server the runtime uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolServerTarget {
    /// The server's base URL (the one its `/.well-known/rap-toolset` hangs off).
    pub base_url: String,
    /// The bearer token the server expects, if any (the same as for invocations).
    pub bearer_token: Option<String>,
}

impl ToolServerTarget {
    /// A server at `base_url` without authentication.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            bearer_token: None,
        }
    }

    /// The same server, authenticated with `token`.
    pub fn with_bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }
}

/// The fate of one notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The server's base URL.
    pub server: String,
    /// The HTTP status it answered with, or why there was no answer.
    pub outcome: Result<u16, String>,
}

/// Sends `POST /cancel_tool_call` to every configured tool server.
///
/// [`notify`](Self::notify) returns at once: each server gets its own task, all start
/// together, each request has its own timeout, nothing is retried, and a failing server only
/// costs a log line.
#[derive(Debug, Clone)]
pub struct Notifier {
    servers: Arc<[ToolServerTarget]>,
    http: reqwest::Client,
}

/// The notifications of one [`Notifier::notify`], in flight. Dropping it lets them finish on
/// their own; awaiting [`outcomes`](Self::outcomes) collects what happened.
#[derive(Debug)]
pub struct NotifyHandle {
    tasks: JoinSet<Delivery>,
}

impl NotifyHandle {
    /// Waits for every server's answer (or timeout) and returns them, in completion order.
    pub async fn outcomes(mut self) -> Vec<Delivery> {
        let mut deliveries = Vec::with_capacity(self.tasks.len());
        while let Some(delivery) = self.tasks.join_next().await {
            if let Ok(delivery) = delivery {
                deliveries.push(delivery);
            }
        }
        deliveries
    }
}

impl Drop for NotifyHandle {
    fn drop(&mut self) {
        // Let in-flight notifications finish instead of aborting them with the set.
        self.tasks.detach_all();
    }
}

impl Notifier {
    /// A notifier for `servers`; each notification may take at most `timeout`.
    pub fn new(servers: impl IntoIterator<Item = ToolServerTarget>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .expect("a plain HTTP client builds");
        Self {
            servers: servers.into_iter().collect(),
            http,
        }
    }

    /// Tells every server to cancel `tool_call_id` of `thread_id`; returns without waiting.
    /// Must be called inside a tokio runtime.
    pub fn notify(&self, thread_id: &str, tool_call_id: &str) -> NotifyHandle {
        let body = ToolCancellation {
            thread_id: thread_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        };
        let mut tasks = JoinSet::new();
        for server in self.servers.iter() {
            let url = format!("{}/cancel_tool_call", server.base_url.trim_end_matches('/'));
            let mut request = self.http.post(url).json(&body);
            if let Some(token) = &server.bearer_token {
                request = request.bearer_auth(token);
            }
            let base_url = server.base_url.clone();
            tasks.spawn(async move {
                let outcome = match request.send().await {
                    Ok(response) => {
                        let status = response.status();
                        if !status.is_success() {
                            tracing::warn!(server = %base_url, %status, "a tool server refused a cancellation");
                        }
                        Ok(status.as_u16())
                    }
                    Err(e) => {
                        tracing::warn!(server = %base_url, error = %e, "cannot notify a tool server of a cancellation (not retried)");
                        Err(e.to_string())
                    }
                };
                Delivery {
                    server: base_url,
                    outcome,
                }
            });
        }
        NotifyHandle { tasks }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallState {
    Running,
    Cancelled,
    Done,
}

/// Keeps a runtime's view of its tool calls consistent when a cancellation and a result cross:
/// a cancelled call gets a synthetic "interrupted" result at once, and a real result that
/// arrives afterwards is dropped.
#[derive(Debug, Default)]
pub struct CallTracker {
    calls: Mutex<HashMap<(String, String), CallState>>,
    notifier: Option<Notifier>,
}

impl CallTracker {
    /// A tracker that also notifies the tool servers of each cancellation.
    pub fn new(notifier: Option<Notifier>) -> Self {
        Self {
            calls: Mutex::new(HashMap::new()),
            notifier,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), CallState>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `tool_call_id` of `thread_id` was invoked.
    pub fn start(&self, thread_id: &str, tool_call_id: &str) {
        self.lock().insert(
            (thread_id.to_owned(), tool_call_id.to_owned()),
            CallState::Running,
        );
    }

    /// Cancels a running call: notifies the tool servers (without waiting) and returns the
    /// synthetic "interrupted" result to record in its place. `None` if the call is not running
    /// (unknown, finished, or already cancelled).
    pub fn cancel(&self, thread_id: &str, tool_call_id: &str) -> Option<Value> {
        {
            let mut calls = self.lock();
            let state = calls.get_mut(&(thread_id.to_owned(), tool_call_id.to_owned()))?;
            if *state != CallState::Running {
                return None;
            }
            *state = CallState::Cancelled;
        }
        if let Some(notifier) = &self.notifier {
            drop(notifier.notify(thread_id, tool_call_id));
        }
        Some(json!({
            "type": "tool_result",
            "group_id": thread_id,
            "id": tool_call_id,
            "text": "interrupted",
            "is_error": true,
        }))
    }

    /// Accepts a `tool_result` from a tool server: `Some(result)` if its call was running,
    /// `None` (dropped, with a log line) if it was cancelled, already answered, or unknown.
    pub fn deliver(&self, result: Value) -> Option<Value> {
        let thread_id = result["group_id"].as_str().unwrap_or_default().to_owned();
        let tool_call_id = result["id"].as_str().unwrap_or_default().to_owned();
        let mut calls = self.lock();
        match calls.get_mut(&(thread_id.clone(), tool_call_id.clone())) {
            Some(state @ CallState::Running) => {
                *state = CallState::Done;
                Some(result)
            }
            Some(CallState::Cancelled) => {
                tracing::info!(%thread_id, %tool_call_id, "dropped the result of a cancelled tool call");
                None
            }
            Some(CallState::Done) => {
                tracing::info!(%thread_id, %tool_call_id, "dropped a second result for a tool call");
                None
            }
            None => {
                tracing::warn!(%thread_id, %tool_call_id, "dropped a result for an unknown tool call");
                None
            }
        }
    }
}
