//! MCP tasks: a task-augmented `tools/call` is answered at once with a task, runs on, and is
//! observed with `tasks/get`, collected with `tasks/result` and stopped with `tasks/cancel`.
//!
//! The same tasks serve both forms: 2025-11-25 (the client asks with `params.task`; `tasks/cancel`
//! answers with the cancelled task, -32602 for a terminal one) and the 2026-07-28 extension
//! `io.modelcontextprotocol/tasks` (`resultType: "task"`, `ttlMs`; `tasks/get` carries the
//! outcome inline; `tasks/cancel` is an empty acknowledgement, also for a terminal task, since
//! cancellation there is cooperative and eventually consistent).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cancelkit_protocol::jsonrpc::ErrorCode;
use cancelkit_protocol::mcp::v2025_11_25::{Task, TaskStatus};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::peer::router::Reply;
use crate::peer::wire::to_raw;
use crate::sync::lock;
use crate::{CancelReason, Cancelled, Canceller, JsonRpcError};

/// The request that may be task-augmented on this side.
pub(crate) const AUGMENTABLE: &str = "tools/call";
/// `tasks/get`: a task's status, answered on the reader.
pub(crate) const GET: &str = "tasks/get";
/// `tasks/result`: waits for a task's outcome.
pub(crate) const RESULT: &str = "tasks/result";
/// `tasks/cancel`, answered on the reader.
pub(crate) const CANCEL: &str =
    cancelkit_protocol::mcp::v2025_11_25::CancelTaskRequestParams::METHOD;

/// How long a task is kept when the requester asks for no particular `ttl`.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);

/// Suggested polling interval for `tasks/get`.
const POLL_INTERVAL_MS: u64 = 500;

/// The bounds on one connection's tasks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskLimits {
    /// At most this many tasks (working or finished, until their `ttl` ends).
    pub(crate) max_tasks: usize,
    /// A requested `ttl` above this is granted as this (the receiver may shorten it).
    pub(crate) max_ttl: Duration,
}

#[derive(Debug)]
struct Entry {
    task: Task,
    canceller: Canceller,
    /// The handler's answer once it finished (`None` while working or when cancelled first).
    reply: Option<Reply>,
    /// Ticks whenever the task reaches a terminal status.
    done: watch::Sender<bool>,
}

/// The tasks of one connection.
#[derive(Debug)]
pub(crate) struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
    next: std::sync::atomic::AtomicU64,
    limits: TaskLimits,
}

/// A task just created: its id, when it expires, and the `CreateTaskResult` to answer with.
pub(crate) struct Created {
    pub(crate) id: String,
    pub(crate) expires: Instant,
    pub(crate) reply: Reply,
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
    let params = params.filter(|p| crate::peer::wire::may_have_key(p, "task"))?;
    let params: TaskParam = serde_json::from_str(params.get()).ok()?;
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

/// The `ttl` granted for a requested one: the default when none is asked for, never more than
/// `max` (so it always fits the `ttl` member's signed 64-bit milliseconds).
fn granted_ttl(requested: Option<u64>, max: Duration) -> Duration {
    requested
        .map_or(DEFAULT_TASK_TTL, Duration::from_millis)
        .min(max)
}

impl Tasks {
    pub(crate) fn new(limits: TaskLimits) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            next: std::sync::atomic::AtomicU64::new(0),
            limits,
        }
    }

    /// Creates a working task, or refuses (-32050) when the connection already keeps
    /// `max_tasks` of them.
    pub(crate) fn create(
        &self,
        ttl: Option<u64>,
        canceller: Canceller,
        extension: bool,
    ) -> Result<Created, JsonRpcError> {
        let mut entries = lock(&self.entries);
        if entries.len() >= self.limits.max_tasks {
            return Err(
                JsonRpcError::new(ErrorCode::ServerOverloaded, "Server overloaded").with_data(
                    format!(
                        "this connection already keeps {} tasks; retry once some have expired",
                        self.limits.max_tasks
                    ),
                ),
            );
        }
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("task-{n}");
        let ttl = granted_ttl(ttl, self.limits.max_ttl);
        let stamp = timestamp();
        let task = Task {
            task_id: id.clone(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: stamp.clone(),
            last_updated_at: stamp,
            ttl: Some(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)),
            poll_interval: Some(POLL_INTERVAL_MS),
        };
        let reply = if extension {
            to_raw(&extension_task(&task, "task"))
        } else {
            to_raw(&serde_json::json!({ "task": task }))
        };
        let (done, _) = watch::channel(false);
        entries.insert(
            id.clone(),
            Entry {
                task,
                canceller,
                reply: None,
                done,
            },
        );
        let now = Instant::now();
        // A ttl beyond what the clock can represent is, in effect, forever.
        let expires = now
            .checked_add(ttl)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        Ok(Created { id, expires, reply })
    }

    /// Runs a task's handler until it finishes, is cancelled, or its `ttl` ends (then it is
    /// dropped), keeps the outcome until the `ttl` ends, and forgets the task. Ends early when
    /// the connection closes (`closed`).
    pub(crate) async fn drive(
        &self,
        created: Created,
        handler: impl Future<Output = Reply>,
        closed: CancellationToken,
    ) {
        let Created { id, expires, .. } = created;
        tokio::select! {
            reply = handler => self.finish(&id, reply),
            () = tokio::time::sleep_until(expires) => {}
            () = closed.cancelled() => {}
        }
        tokio::select! {
            () = tokio::time::sleep_until(expires) => {}
            () = closed.cancelled() => {}
        }
        self.expire(&id);
    }

    /// Forgets a task whose `ttl` ended; one still working is cancelled (reason: timeout) and
    /// its `tasks/result` waiters get "unknown, or expired".
    fn expire(&self, id: &str) {
        let Some(entry) = lock(&self.entries).remove(id) else {
            return;
        };
        if !is_terminal(entry.task.status) {
            let ttl = entry.task.ttl.unwrap_or(0).max(0) as u64;
            entry
                .canceller
                .cancel(CancelReason::Timeout(Duration::from_millis(ttl)));
            tracing::info!(task_id = %id, "a task reached its ttl while working; stopped it");
        }
    }

    /// How many tasks the connection keeps.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// Records a handler's answer: `completed` or `failed`, unless the task was cancelled.
    fn finish(&self, id: &str, reply: Reply) {
        let mut entries = lock(&self.entries);
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

    /// `tasks/get`; in the extension, with the outcome of a terminal task inline.
    pub(crate) fn get(&self, params: Option<&RawValue>, extension: bool) -> Reply {
        let id = task_id(params)?;
        let entries = lock(&self.entries);
        let entry = entries.get(&id).ok_or_else(|| unknown(&id))?;
        if !extension {
            return to_raw(&entry.task);
        }
        let mut task = extension_task(&entry.task, "complete");
        match &entry.reply {
            Some(Ok(result)) if entry.task.status == TaskStatus::Completed => {
                task["result"] = serde_json::from_str(result.get()).unwrap_or_default();
            }
            Some(Err(error)) if entry.task.status == TaskStatus::Failed => {
                let error = cancelkit_protocol::jsonrpc::ErrorObject::from(error.clone());
                task["error"] = serde_json::to_value(error).unwrap_or_default();
            }
            _ => {}
        }
        to_raw(&task)
    }

    /// `tasks/cancel`: the status is `cancelled` before this returns. In 2025-11-25 the
    /// answer is the task, and a terminal task is an error (-32602); in the extension the
    /// answer is an empty acknowledgement either way.
    pub(crate) fn cancel(&self, params: Option<&RawValue>, extension: bool) -> Reply {
        let id = task_id(params)?;
        let mut entries = lock(&self.entries);
        let entry = entries.get_mut(&id).ok_or_else(|| unknown(&id))?;
        if is_terminal(entry.task.status) && extension {
            tracing::debug!(task_id = %id, status = %entry.task.status, "acknowledged a cancel for a task that already ended");
            return acknowledged();
        }
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
        if extension {
            acknowledged()
        } else {
            to_raw(&entry.task)
        }
    }

    /// `tasks/result`: waits for a terminal status, then answers with the handler's result,
    /// its error, or -32800 for a cancelled task.
    pub(crate) async fn result(&self, params: Option<&RawValue>) -> Reply {
        let id = task_id(params)?;
        let mut done = {
            let entries = lock(&self.entries);
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
        let entries = lock(&self.entries);
        let entry = entries.get(&id).ok_or_else(|| unknown(&id))?;
        match (&entry.reply, entry.task.status) {
            (Some(reply), _) => reply.clone(),
            (None, _) => {
                Err(Cancelled::new(CancelReason::Peer(Some("tasks/cancel".into()))).into())
            }
        }
    }
}

/// The extension's empty acknowledgement of `tasks/cancel`.
fn acknowledged() -> Reply {
    use cancelkit_protocol::mcp::v2026_07_28::{CancelTaskResult, CancelTaskResultResultType};
    to_raw(&CancelTaskResult {
        meta: serde_json::Map::new(),
        result_type: CancelTaskResultResultType::Complete,
    })
}

/// A task as the 2026-07-28 extension writes it: `ttlMs` and `pollIntervalMs`, with its
/// `resultType` (`"task"` when created, `"complete"` for `tasks/get`).
fn extension_task(task: &Task, result_type: &str) -> serde_json::Value {
    let mut value = serde_json::json!({
        "resultType": result_type,
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.last_updated_at,
        "ttlMs": task.ttl,
    });
    if let Some(message) = &task.status_message {
        value["statusMessage"] = message.clone().into();
    }
    if let Some(poll) = task.poll_interval {
        value["pollIntervalMs"] = poll.into();
    }
    value
}

/// Declares `capabilities.tasks.cancel` and task-augmented `tools/call` in an `initialize`
/// result, keeping whatever the application declared.
pub(crate) fn declare_task_cancellation(result: &mut serde_json::Value) {
    use serde_json::{Map, Value};
    /// `parent[key]` as an object, created empty if missing; `None` if it holds something else.
    fn object<'a>(
        parent: &'a mut Map<String, Value>,
        key: &str,
    ) -> Option<&'a mut Map<String, Value>> {
        parent
            .entry(key)
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
    }
    let Some(capabilities) = result
        .as_object_mut()
        .and_then(|r| object(r, "capabilities"))
    else {
        return;
    };
    let Some(tasks) = object(capabilities, "tasks") else {
        return;
    };
    object(tasks, "cancel");
    if let Some(tools) = object(tasks, "requests").and_then(|r| object(r, "tools")) {
        object(tools, "call");
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
    fn granted_ttls_are_capped_and_fit_the_wire() {
        let max = Duration::from_secs(86_400);
        assert_eq!(granted_ttl(None, max), DEFAULT_TASK_TTL);
        assert_eq!(granted_ttl(Some(5), max), Duration::from_millis(5));
        assert_eq!(granted_ttl(Some(u64::MAX), max), max);
        let created = Tasks::new(TaskLimits {
            max_tasks: 1,
            max_ttl: Duration::MAX,
        })
        .create(Some(u64::MAX), crate::Scope::root().1, false);
        let task: serde_json::Value =
            serde_json::from_str(created.ok().unwrap().reply.unwrap().get()).unwrap();
        assert_eq!(task["task"]["ttl"], i64::MAX);
    }

    #[test]
    fn the_task_count_is_capped() {
        let tasks = Tasks::new(TaskLimits {
            max_tasks: 2,
            max_ttl: Duration::from_secs(60),
        });
        for _ in 0..2 {
            assert!(tasks.create(None, crate::Scope::root().1, false).is_ok());
        }
        let refused = tasks
            .create(None, crate::Scope::root().1, false)
            .err()
            .unwrap();
        assert_eq!(refused.code, ErrorCode::ServerOverloaded);
        assert_eq!(tasks.len(), 2);
    }

    #[test]
    fn declaring_task_cancellation_keeps_the_application_s_capabilities() {
        let mut result = serde_json::json!({"capabilities": {"tools": {}, "tasks": {"list": {}}}});
        declare_task_cancellation(&mut result);
        assert_eq!(
            result,
            serde_json::json!({"capabilities": {"tools": {}, "tasks": {
                "list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}
            }}})
        );
        let mut odd = serde_json::json!({"capabilities": {"tasks": true}});
        declare_task_cancellation(&mut odd);
        assert_eq!(odd, serde_json::json!({"capabilities": {"tasks": true}}));
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
