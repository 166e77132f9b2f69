//! The tasks scenarios: a task-augmented `tools/call` of the slow tool, cancelled with the
//! request `tasks/cancel`.
//!
//! * 2025-11-25 (`capabilities.tasks` with `cancel` and `requests.tools.call`): the call asks for
//!   a task with `params.task: {ttl}`; `tasks/cancel` must move the task to `cancelled` before it
//!   answers (its answer and a `tasks/get` right after both say so), and a second `tasks/cancel`
//!   of the now terminal task gets -32602.
//! * 2026-07-28 (the extension `io.modelcontextprotocol/tasks` in `capabilities.extensions`):
//!   the client declares the extension in the request's `_meta` client capabilities and the
//!   server may answer with a task (`resultType: "task"`); `tasks/cancel` is an empty
//!   acknowledgement, the task ends in a terminal status (`cancelled`, or `completed`/`failed`
//!   if it got there first: cancellation is cooperative), and a repeated cancel is acknowledged
//!   again.
//!
//! Every check is always reported, as not applicable when the server does not offer tasks at the
//! revision spoken (or, at 2025-11-25, the tool does not run as a task: `execution.taskSupport`
//! forbidden), so that the list of ids is the same for every server. A task that had already
//! ended when it was cancelled proves nothing either way: the checks that need a working task
//! are then not applicable.

use std::time::{Duration, Instant};

use cancelkit_wire::McpRevision;
use serde_json::{Value, json};

use super::session::{Session, V2025, V2026};
use super::{Check, Evidence, Outcome, Word};
use super::{check, pass_if};

/// The revision of the `params.task` form.
const R2025: &[&str] = &[McpRevision::V2025_11_25.text()];
/// The revision of the tasks extension.
const R2026: &[&str] = &[McpRevision::V2026_07_28.text()];
/// The extension's identifier.
pub use cancelkit_wire::meta::TASKS_EXTENSION;
/// The `ttl` asked for, in milliseconds.
const TTL_MS: u64 = 60_000;
/// How often `tasks/get` is asked while waiting for a terminal status.
const POLL: Duration = Duration::from_millis(100);

const CANCEL_2025: &str = "MCP 2025-11-25 tasks: the receiver of tasks/cancel MUST move the task to cancelled before it responds";
const TERMINAL_2025: &str = "MCP 2025-11-25 tasks: tasks/cancel of a task in a terminal status MUST be rejected with -32602";
const ACK_2026: &str =
    "MCP tasks extension: tasks/cancel is answered with an empty acknowledgement";
const ENDS_2026: &str = "MCP tasks extension: cancellation is cooperative; the task still ends in a terminal status (cancelled, or completed/failed if it got there first)";
const REPEAT_2026: &str =
    "MCP tasks extension: a cancel of a task that already ended is acknowledged as well";

/// The check ids, in the order they are reported.
pub const IDS: [&str; 5] = [
    "mcp.tasks.cancel",
    "mcp.tasks.cancel_terminal",
    "mcp.tasks.ext.cancel_acknowledged",
    "mcp.tasks.ext.terminal",
    "mcp.tasks.ext.cancel_repeated",
];

/// Runs the tasks scenario of the revision spoken; the other revision's checks are not
/// applicable.
pub async fn run(s: &mut Session, checks: &mut Vec<Check>) {
    let other = |rev: &str| format!("the run speaks {rev}, not this revision");
    match s.version.as_str() {
        V2025 => {
            legacy(s, checks).await;
            extension_na(checks, &other(V2025), Evidence::default());
        }
        V2026 => {
            legacy_na(checks, &other(V2026), Evidence::default());
            extension(s, checks).await;
        }
        version => {
            let why = format!("{version} has no tasks");
            legacy_na(checks, &why, Evidence::default());
            extension_na(checks, &why, Evidence::default());
        }
    }
}

fn legacy_na(checks: &mut Vec<Check>, why: &str, ev: Evidence) {
    let (a, b) = (IDS[0], IDS[1]);
    let na = Outcome::NotApplicable;
    checks.push(check(
        a,
        Word::Must,
        R2025,
        CANCEL_2025,
        na,
        why,
        ev.clone(),
    ));
    checks.push(check(b, Word::Must, R2025, TERMINAL_2025, na, why, ev));
}

fn extension_na(checks: &mut Vec<Check>, why: &str, ev: Evidence) {
    let na = Outcome::NotApplicable;
    checks.push(check(
        IDS[2],
        Word::Must,
        R2026,
        ACK_2026,
        na,
        why,
        ev.clone(),
    ));
    checks.push(check(
        IDS[3],
        Word::Should,
        R2026,
        ENDS_2026,
        na,
        why,
        ev.clone(),
    ));
    checks.push(check(IDS[4], Word::Must, R2026, REPEAT_2026, na, why, ev));
}

/// How long after the task's creation it is cancelled: as for a plain slow call, or 100 ms when
/// the tool's length is not known.
fn lead(s: &Session) -> Duration {
    s.usable().map_or(POLL, |m| m.lead())
}

/// How long the slow tool's work lasts by itself, as calibrated (plain or as a task), else the
/// calibration's limit.
fn natural(s: &Session) -> Duration {
    let task = s.calibration.as_ref().and_then(|c| c.task_natural);
    s.usable()
        .map(|m| m.duration + m.slack())
        .ok()
        .or(task)
        .unwrap_or(super::calibrate::LIMIT)
}

/// Sends `method` and waits for its answer (noted in the evidence).
async fn ask(s: &mut Session, method: &str, params: Value, ev: &mut Evidence) -> Option<Value> {
    let (_, mut pending) = s.call(method, params, ev).await;
    let answer = pending.wait(s.options.timeout).await;
    match &answer {
        Some(frame) => ev.got(frame),
        None => ev.note(format!("no answer within {:?}", s.options.timeout)),
    }
    answer
}

/// The task's status in a 2025-11-25 `tasks/cancel` or `tasks/get` answer.
fn status(answer: Option<&Value>) -> Option<&str> {
    answer?.get("result")?.get("status")?.as_str()
}

fn error_code(answer: Option<&Value>) -> Option<i64> {
    answer?.get("error")?.get("code")?.as_i64()
}

/// 2025-11-25: `params.task`, `tasks/cancel`, `tasks/get`, and a second `tasks/cancel`.
async fn legacy(s: &mut Session, checks: &mut Vec<Check>) {
    let support = s
        .calibration
        .as_ref()
        .map_or("forbidden", |c| c.task_support.as_str());
    if support == "forbidden" {
        let why = format!(
            "`{}` does not run as a task (execution.taskSupport: {support})",
            s.options.tool
        );
        return legacy_na(checks, &why, Evidence::default());
    }
    let tasks = &s.capabilities["tasks"];
    if tasks.get("cancel").is_none() || tasks["requests"]["tools"].get("call").is_none() {
        let why = format!(
            "the server declares no capabilities.tasks with cancel and requests.tools.call \
             (tasks: {tasks})"
        );
        return legacy_na(checks, &why, Evidence::default());
    }
    let mut ev = Evidence::default();
    s.quiesce().await;
    let mut params = s.slow(None);
    params["task"] = json!({ "ttl": TTL_MS });
    let created = ask(s, "tools/call", params, &mut ev).await;
    let Some(task_id) = created
        .as_ref()
        .and_then(|c| c["result"]["task"]["taskId"].as_str())
    else {
        let why = "the task-augmented call was not answered with a CreateTaskResult";
        return legacy_na(checks, why, ev);
    };
    let id = json!({ "taskId": task_id });
    tokio::time::sleep(lead(s)).await;
    let cancelled = ask(s, "tasks/cancel", id.clone(), &mut ev).await;
    let got = ask(s, "tasks/get", id.clone(), &mut ev).await;
    let (said, then) = (status(cancelled.as_ref()), status(got.as_ref()));
    if said.is_none() && matches!(then, Some("completed" | "failed")) {
        let why = format!(
            "the task had already ended ({}) when it was cancelled",
            then.unwrap_or_default()
        );
        return legacy_na(checks, &why, ev);
    }
    let ok = said == Some("cancelled") && then == Some("cancelled");
    let detail = match (said, then) {
        _ if ok => {
            "tasks/cancel answered with the task cancelled; tasks/get right after: cancelled"
                .to_owned()
        }
        (None, _) => match error_code(cancelled.as_ref()) {
            Some(code) => format!("tasks/cancel of a working task was refused ({code})"),
            None => "tasks/cancel was not answered with a task".to_owned(),
        },
        (Some(said), then) => format!(
            "tasks/cancel answered with status {said}; tasks/get right after: {}",
            then.unwrap_or("no status")
        ),
    };
    checks.push(check(
        IDS[0],
        Word::Must,
        R2025,
        CANCEL_2025,
        pass_if(ok),
        detail,
        ev,
    ));

    let mut ev = Evidence::default();
    let again = ask(s, "tasks/cancel", id, &mut ev).await;
    let code = error_code(again.as_ref());
    let terminal = then.is_some_and(|t| ["completed", "failed", "cancelled"].contains(&t));
    let (result, detail) = match code {
        Some(-32602) => (
            Outcome::Pass,
            "the second tasks/cancel got -32602".to_owned(),
        ),
        _ if !terminal => (
            Outcome::NotApplicable,
            "the task was not terminal after the first cancel".to_owned(),
        ),
        Some(code) => (Outcome::Fail, format!("the second tasks/cancel got {code}")),
        None if again.is_some() => (
            Outcome::Fail,
            "the second tasks/cancel was answered with a result".to_owned(),
        ),
        None => (
            Outcome::Fail,
            "the second tasks/cancel got no answer".to_owned(),
        ),
    };
    checks.push(check(
        IDS[1],
        Word::Must,
        R2025,
        TERMINAL_2025,
        result,
        detail,
        ev,
    ));
}

/// Params that declare the tasks extension in this request's client capabilities.
fn declaring(mut params: Value) -> Value {
    let capabilities = json!({ "extensions": { TASKS_EXTENSION: {} } });
    params["_meta"][cancelkit_wire::meta::CLIENT_CAPABILITIES] = capabilities;
    params
}

/// 2026-07-28 extension: a task, `tasks/cancel`, `tasks/get` until terminal, `tasks/cancel`.
async fn extension(s: &mut Session, checks: &mut Vec<Check>) {
    let extensions = &s.capabilities["extensions"];
    if extensions.get(TASKS_EXTENSION).is_none() {
        let why = format!("the server does not offer the {TASKS_EXTENSION} extension");
        return extension_na(checks, &why, Evidence::default());
    }
    s.quiesce().await;
    let mut ev = Evidence::default();
    let created = ask(s, "tools/call", declaring(s.slow(None)), &mut ev).await;
    let task_id = created
        .as_ref()
        .filter(|c| c["result"]["resultType"] == "task")
        .and_then(|c| c["result"]["taskId"].as_str());
    let Some(task_id) = task_id else {
        let why = "the slow call was not answered with a task (resultType \"task\")";
        return extension_na(checks, why, ev);
    };
    let id = declaring(json!({ "taskId": task_id }));
    tokio::time::sleep(lead(s)).await;
    let acked = ask(s, "tasks/cancel", id.clone(), &mut ev).await;
    let ok = acked.as_ref().is_some_and(|a| a.get("result").is_some());
    let detail = match &acked {
        _ if ok => format!(
            "acknowledged (resultType {})",
            acked
                .as_ref()
                .map_or(Value::Null, |a| a["result"]["resultType"].clone())
        ),
        Some(a) => format!("refused: {}", a["error"]),
        None => "no answer".to_owned(),
    };
    checks.push(check(
        IDS[2],
        Word::Must,
        R2026,
        ACK_2026,
        pass_if(ok),
        detail,
        ev,
    ));

    let mut ev = Evidence::default();
    let deadline = Instant::now() + s.options.timeout + natural(s);
    let (mut polls, mut last) = (0, None);
    let terminal = loop {
        let (_, mut pending) = s.call("tasks/get", id.clone(), &mut ev).await;
        polls += 1;
        let got = pending.wait(s.options.timeout).await;
        let now = status(got.as_ref()).map(str::to_owned);
        if let Some(frame) = &got
            && (now != last || polls == 1)
        {
            ev.got(frame);
        }
        last = now;
        if let Some(status) = last
            .as_deref()
            .filter(|t| ["completed", "failed", "cancelled"].contains(t))
        {
            break Some(status.to_owned());
        }
        if Instant::now() >= deadline {
            break None;
        }
        tokio::time::sleep(POLL).await;
    };
    let detail = match &terminal {
        Some(status) => format!("the task ended {status} ({polls} tasks/get)"),
        None => format!(
            "the task was still {} after {polls} tasks/get",
            last.as_deref().unwrap_or("without a status")
        ),
    };
    checks.push(check(
        IDS[3],
        Word::Should,
        R2026,
        ENDS_2026,
        pass_if(terminal.is_some()),
        detail,
        ev,
    ));

    let mut ev = Evidence::default();
    let again = ask(s, "tasks/cancel", id, &mut ev).await;
    let ok = again.as_ref().is_some_and(|a| a.get("result").is_some());
    let detail = match &again {
        _ if ok => "the repeated cancel was acknowledged".to_owned(),
        Some(a) => format!("the repeated cancel was refused: {}", a["error"]),
        None => "the repeated cancel got no answer".to_owned(),
    };
    checks.push(check(
        IDS[4],
        Word::Must,
        R2026,
        REPEAT_2026,
        pass_if(ok),
        detail,
        ev,
    ));
}
