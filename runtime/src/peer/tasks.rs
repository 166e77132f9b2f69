//! MCP 2025-11-25 tasks: a task-augmented `tools/call` is answered at once with a task, runs on,
//! and is observed with `tasks/get`, collected with `tasks/result` and stopped with
//! `tasks/cancel`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cancelkit_protocol::jsonrpc::ErrorCode;
use cancelkit_protocol::mcp::v2025_11_25::{Task, TaskStatus};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::watch;

use super::router::Reply;
use crate::{CancelReason, Cancelled, Canceller, JsonRpcError};

/// The requests that may be task-augmented on this side.
pub(crate) const AUGMENTABLE: &[&str] = &["tools/call"];

/// How long a task is kept when the requester asks for no particular `ttl`.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// Suggested polling interval for `tasks/get`.
const POLL_INTERVAL_MS: u64 = 500;

#[derive(Debug)]
struct Entry {
    task: Task,
    expires: Instant,
    canceller: Canceller,
    /// The handler's answer once it finished (`None` while working or when cancelled first).
    reply: Option<Reply>,
    /// Ticks whenever the task reaches a terminal status.
    done: watch::Sender<bool>,
}

/// The tasks of one connection.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
    next: std::sync::atomic::AtomicU64,
}

#[derive(Deserialize)]
struct TaskParam {
    task: Option<TaskMetadata>,
}

#[derive(Deserialize)]
struct TaskMetadata {
    ttl: Option<u64>,
}

#[derive(Deserialize)]
struct TaskIdParams {
    #[serde(rename = "taskId")]
    task_id: String,
}

/// The `task` member of a request's params, if it asks for task-augmented execution:
/// `Some(requested ttl)`.
pub(crate) fn requested(params: Option<&RawValue>) -> Option<Option<u64>> {
    let params: TaskParam = serde_json::from_str(params?.get()).ok()?;
    params.task.map(|task| task.ttl)
}

fn is_terminal(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
    )
}

fn task_id(params: Option<&RawValue>) -> Result<String, JsonRpcError> {
    serde_json::from_str::<TaskIdParams>(params.map_or("null", RawValue::get))
        .map(|p| p.task_id)
        .map_err(|e| JsonRpcError::invalid_params(format!("Invalid params: {e}")))
}

fn unknown(id: &str) -> JsonRpcError {
    JsonRpcError::invalid_params(format!("no task `{id}` (unknown, or expired)"))
}

fn to_raw<T: serde::Serialize>(value: &T) -> Reply {
    serde_json::value::to_raw_value(value).map_err(|e| JsonRpcError::internal(e.to_string()))
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a working task; returns its id and the `CreateTaskResult` to answer with.
    pub(crate) fn create(&self, ttl: Option<u64>, canceller: Canceller) -> (String, Reply) {
        let now = Instant::now();
        let mut entries = self.lock();
        entries.retain(|_, entry| entry.expires > now);
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("task-{n}");
        let ttl_ms = ttl.unwrap_or(DEFAULT_TTL.as_millis() as u64);
        let stamp = timestamp();
        let task = Task {
            task_id: id.clone(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: stamp.clone(),
            last_updated_at: stamp,
            ttl: Some(ttl_ms as i64),
            poll_interval: Some(POLL_INTERVAL_MS),
        };
        let reply = to_raw(&serde_json::json!({ "task": task }));
        let (done, _) = watch::channel(false);
        entries.insert(
            id.clone(),
            Entry {
                task,
                expires: now + Duration::from_millis(ttl_ms),
                canceller,
                reply: None,
                done,
            },
        );
        (id, reply)
    }

    /// Records a handler's answer: `completed` or `failed`, unless the task was cancelled.
    pub(crate) fn finish(&self, id: &str, reply: Reply) {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(id) else {
            return;
        };
        if is_terminal(entry.task.status) {
            return; // cancelled while the handler was finishing
        }
        entry.task.status = if reply.is_ok() {
            TaskStatus::Completed
        } else {
            TaskStatus::Failed
        };
        if let Err(error) = &reply {
            entry.task.status_message = Some(error.message.clone());
        }
        entry.task.last_updated_at = timestamp();
        entry.reply = Some(reply);
        entry.done.send_replace(true);
    }

    /// `tasks/get`.
    pub(crate) fn get(&self, params: Option<&RawValue>) -> Reply {
        let id = task_id(params)?;
        let entries = self.lock();
        let entry = entries.get(&id).ok_or_else(|| unknown(&id))?;
        to_raw(&entry.task)
    }

    /// `tasks/cancel`: the status is `cancelled` before this returns; a terminal task is an
    /// error (-32602).
    pub(crate) fn cancel(&self, params: Option<&RawValue>) -> Reply {
        let id = task_id(params)?;
        let mut entries = self.lock();
        let entry = entries.get_mut(&id).ok_or_else(|| unknown(&id))?;
        if is_terminal(entry.task.status) {
            return Err(JsonRpcError::new(
                ErrorCode::InvalidParams,
                format!("task `{id}` is already {}", entry.task.status),
            ));
        }
        entry.task.status = TaskStatus::Cancelled;
        entry.task.status_message = Some("Cancelled by the requester".into());
        entry.task.last_updated_at = timestamp();
        entry
            .canceller
            .cancel(CancelReason::Peer(Some("tasks/cancel".into())));
        entry.done.send_replace(true);
        tracing::info!(task_id = %id, "the peer cancelled a task");
        to_raw(&entry.task)
    }

    /// `tasks/result`: waits for a terminal status, then answers with the handler's result,
    /// its error, or -32800 for a cancelled task.
    pub(crate) async fn result(self: Arc<Self>, params: Option<Box<RawValue>>) -> Reply {
        let id = task_id(params.as_deref())?;
        let mut done = {
            let entries = self.lock();
            entries
                .get(&id)
                .ok_or_else(|| unknown(&id))?
                .done
                .subscribe()
        };
        // `wait_for` returns at once if the task is already terminal.
        if done.wait_for(|done| *done).await.is_err() {
            return Err(unknown(&id));
        }
        let entries = self.lock();
        let entry = entries.get(&id).ok_or_else(|| unknown(&id))?;
        match (&entry.reply, entry.task.status) {
            (Some(reply), _) => reply.clone(),
            (None, _) => {
                Err(Cancelled::new(CancelReason::Peer(Some("tasks/cancel".into()))).into())
            }
        }
    }
}

/// Now, as an ISO 8601 / RFC 3339 UTC timestamp with milliseconds.
pub(crate) fn timestamp() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs() as i64, since.subsec_millis())
}

/// `secs` since the Unix epoch (plus `millis`) as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn rfc3339(secs: i64, millis: u32) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's days_from_civil, inverted).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_763_768_297, 5), "2025-11-21T23:38:17.005Z");
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(4_102_444_800, 999), "2100-01-01T00:00:00.999Z");
        assert_eq!(timestamp().len(), "2026-11-21T23:38:17.000Z".len());
    }

    #[test]
    fn task_requests_are_recognised() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        assert_eq!(
            requested(Some(&raw(r#"{"name":"x","task":{"ttl":5}}"#))),
            Some(Some(5))
        );
        assert_eq!(
            requested(Some(&raw(r#"{"name":"x","task":{}}"#))),
            Some(None)
        );
        assert_eq!(requested(Some(&raw(r#"{"name":"x"}"#))), None);
        assert_eq!(requested(None), None);
    }
}
