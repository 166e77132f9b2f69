//! The calibration that comes before the MCP scenarios: the server's tools are listed, `--tool`
//! and `--fast-tool` must be among them and `--args` must satisfy the tool's input schema (a
//! clear exit-2 error otherwise), and the slow call is made once, uncancelled, to measure how
//! long it lasts by itself and whether it reports progress. Every wait of the scenarios is
//! derived from what was measured, never from the name of an argument; a slow call that is
//! refused, returns an error, needs a task or ends too soon to be cancelled while it runs makes
//! every check that needs one `n/a`, with the reason.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::session::{Session, V2025};
use super::{Evidence, Unreachable};

/// A slow call shorter than this ends too soon to be cancelled while it surely still runs.
pub const MIN_SLOW: Duration = Duration::from_millis(500);
/// The longest the calibration waits for the slow call to end by itself.
pub const LIMIT: Duration = Duration::from_secs(60);
/// At most this many `tools/list` pages are read.
const MAX_PAGES: usize = 20;
/// How often `tasks/get` is asked while a task-only tool's task runs.
const POLL: Duration = Duration::from_millis(100);

/// What the calibration found.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// How many tools the server lists.
    pub tools: usize,
    /// The slow tool's `execution.taskSupport` (2025-11-25; `forbidden` when absent).
    pub task_support: String,
    /// The slow call as measured, or why it cannot serve as one.
    pub slow: Result<Measured, String>,
    /// How long a task of a task-only tool took to end by itself, if it was measured.
    pub task_natural: Option<Duration>,
}

/// A slow call measured uncancelled.
#[derive(Debug, Clone)]
pub struct Measured {
    /// How long it took to be answered.
    pub duration: Duration,
    /// How many `notifications/progress` it sent for its token.
    pub progress: usize,
    /// The median time between them (from the call to the first, when there was one).
    pub progress_every: Option<Duration>,
}

/// How long after the start of work measured to last `natural` it is cancelled: a fifth of its
/// length, between 50 and 500 ms, so that the cancel surely lands while it runs.
pub fn lead(natural: Duration) -> Duration {
    (natural / 5).clamp(Duration::from_millis(50), Duration::from_millis(500))
}

/// How long past its natural end work measured to last `natural` is still given: half its
/// length, at least 500 ms.
pub fn slack(natural: Duration) -> Duration {
    (natural / 2).max(Duration::from_millis(500))
}

impl Measured {
    /// When the scenarios cancel the slow call ([`lead`]).
    pub fn lead(&self) -> Duration {
        lead(self.duration)
    }

    /// How long past its natural end the slow call is still given ([`slack`]).
    pub fn slack(&self) -> Duration {
        slack(self.duration)
    }
}

impl Calibration {
    /// What the report says of the slow call.
    pub fn describe(&self) -> Value {
        let ms = |d: Duration| (d.as_secs_f64() * 1000.0).round();
        match &self.slow {
            Ok(m) => json!({
                "usable": true,
                "natural_ms": ms(m.duration),
                "progress_notifications": m.progress,
                "progress_every_ms": m.progress_every.map(ms),
                "task_support": self.task_support,
            }),
            Err(why) => json!({
                "usable": false,
                "why_not": why,
                "task_support": self.task_support,
                "task_natural_ms": self.task_natural.map(ms),
            }),
        }
    }
}

/// Lists the server's tools (following `nextCursor`).
pub async fn list_tools(s: &mut Session) -> Result<Vec<Value>, Unreachable> {
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let (_, mut pending) = s.call("tools/list", params, &mut Evidence::default()).await;
        let answer = pending.wait(s.options.timeout).await.ok_or_else(|| {
            Unreachable(format!(
                "tools/list got no answer within {:?}",
                s.options.timeout
            ))
        })?;
        let Some(page) = answer["result"]["tools"].as_array() else {
            return Err(Unreachable(format!(
                "tools/list was not answered with tools: {answer}"
            )));
        };
        tools.extend(page.iter().cloned());
        match answer["result"].get("nextCursor") {
            Some(next) if !next.is_null() => cursor = Some(next.clone()),
            _ => return Ok(tools),
        }
    }
    Ok(tools)
}

/// The tool named `name`, or an exit-2 error naming the tools there are.
fn find<'a>(tools: &'a [Value], name: &str, flag: &str) -> Result<&'a Value, Unreachable> {
    tools.iter().find(|t| t["name"] == name).ok_or_else(|| {
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        Unreachable(format!(
            "{flag} `{name}` is not one of the server's {} tools ({}); `cancelkit check mcp \
             --list-tools` shows them with their arguments",
            names.len(),
            names.join(", ")
        ))
    })
}

/// Checks `args` against `tool`'s input schema: every error, or none.
pub fn schema_errors(tool: &Value, args: &Value) -> Result<(), String> {
    let Some(schema) = tool.get("inputSchema") else {
        return Ok(());
    };
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("the tool's inputSchema is not a valid JSON Schema: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Lists the tools, checks the options against them, and measures the slow call.
pub async fn run(s: &mut Session) -> Result<Calibration, Unreachable> {
    let tools = list_tools(s).await?;
    let tool = find(&tools, &s.options.tool, "--tool")?.clone();
    schema_errors(&tool, &s.options.args).map_err(|why| {
        Unreachable(format!(
            "--args {} do not fit `{}`'s input schema: {why} (the schema: {})",
            s.options.args, s.options.tool, tool["inputSchema"]
        ))
    })?;
    if let Some(fast) = s.options.fast_tool.clone() {
        let fast_tool = find(&tools, &fast, "--fast-tool")?;
        schema_errors(fast_tool, &s.options.fast_args).map_err(|why| {
            Unreachable(format!(
                "--fast-args {} do not fit `{fast}`'s input schema: {why}",
                s.options.fast_args
            ))
        })?;
    }
    let task_support = tool["execution"]["taskSupport"]
        .as_str()
        .unwrap_or("forbidden")
        .to_owned();
    let (slow, task_natural) = if task_support == "required" {
        let natural = if s.version == V2025 {
            measure_task(s).await
        } else {
            None
        };
        let why = format!(
            "`{}` only runs as a task (execution.taskSupport: required): a plain tools/call \
             cannot be cancelled with notifications/cancelled",
            s.options.tool
        );
        (Err(why), natural)
    } else {
        (measure(s).await, None)
    };
    Ok(Calibration {
        tools: tools.len(),
        task_support,
        slow,
        task_natural,
    })
}

/// Makes the slow call once, uncancelled, and measures it.
async fn measure(s: &mut Session) -> Result<Measured, String> {
    let mut ev = Evidence::default();
    let mut call = s.call_slow(&mut ev).await;
    let Some((answer, at)) = call.pending.wait_timed(LIMIT).await else {
        return Err(format!(
            "the slow call did not end by itself within {LIMIT:?}: give --args for a call of a \
             few seconds"
        ));
    };
    let duration = at.saturating_duration_since(call.sent);
    if let Some(error) = answer.get("error") {
        return Err(format!(
            "the slow call was refused ({} {}), so no call is in flight to cancel",
            error["code"], error["message"]
        ));
    }
    let result = &answer["result"];
    if result["isError"] == true {
        let text = result["content"][0]["text"].as_str().unwrap_or("");
        return Err(format!(
            "the slow call returned an error result ({}), so no call is in flight to cancel",
            super::cut(text)
        ));
    }
    if result["resultType"] == "task" || result.get("task").is_some() {
        return Err("the slow call was answered with a task, not a result".into());
    }
    if duration < MIN_SLOW {
        return Err(format!(
            "the slow call ends by itself after {} ms, too soon to be cancelled while it surely \
             runs (at least {} ms are needed): give --tool/--args for a call of a few seconds",
            duration.as_millis(),
            MIN_SLOW.as_millis()
        ));
    }
    let times: Vec<Instant> = s
        .client
        .progress(&call.token)
        .into_iter()
        .map(|(_, at)| at)
        .collect();
    Ok(Measured {
        duration,
        progress: times.len(),
        progress_every: median_gap(call.sent, &times),
    })
}

/// The median time between reports that came at `times` (from `start` to the first, then
/// between each two); `None` without reports.
pub fn median_gap(start: Instant, times: &[Instant]) -> Option<Duration> {
    let mut gaps: Vec<Duration> = std::iter::once(start)
        .chain(times.iter().copied())
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .collect();
    gaps.sort();
    gaps.get(gaps.len() / 2).copied()
}

/// A task-only tool at 2025-11-25: runs one task to its end and measures it.
async fn measure_task(s: &mut Session) -> Option<Duration> {
    let mut ev = Evidence::default();
    let mut params = s.slow(None);
    params["task"] = json!({ "ttl": 60_000 });
    let started = Instant::now();
    let (_, mut pending) = s.call("tools/call", params, &mut ev).await;
    let created = pending.wait(s.options.timeout).await?;
    let task = json!({ "taskId": created["result"]["task"]["taskId"].as_str()? });
    while started.elapsed() < LIMIT {
        let (_, mut got) = s.call("tasks/get", task.clone(), &mut ev).await;
        let status = got.wait(s.options.timeout).await?;
        if matches!(
            status["result"]["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ) {
            return Some(started.elapsed());
        }
        tokio::time::sleep(POLL).await;
    }
    None
}

/// `cancelkit check mcp --list-tools`: the handshake, then every tool, as [`tool_table`] shows
/// them (exit code 2 when the server cannot be spoken to).
pub async fn list(
    options: &super::Options,
    command: &[std::ffi::OsString],
) -> Result<String, Unreachable> {
    let mut s = Session::open(options, command).await?;
    let tools = list_tools(&mut s).await;
    s.client.shutdown().await;
    let tools = tools?;
    Ok(format!(
        "{} tools (revision {}):\n\n{}",
        tools.len(),
        s.version,
        tool_table(&tools)
    ))
}

/// The table `cancelkit check mcp --list-tools` prints: each tool, whether it runs as a task,
/// its description's first line and its arguments.
pub fn tool_table(tools: &[Value]) -> String {
    let mut out = String::new();
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or("?");
        let task = tool["execution"]["taskSupport"].as_str();
        let first = tool["description"]
            .as_str()
            .and_then(|d| d.lines().next())
            .unwrap_or("");
        out.push_str(name);
        if let Some(task) = task.filter(|t| *t != "forbidden") {
            out.push_str(&format!("  [task: {task}]"));
        }
        out.push('\n');
        if !first.is_empty() {
            out.push_str(&format!("    {first}\n"));
        }
        let schema = &tool["inputSchema"];
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(properties) = schema["properties"].as_object() {
            for (arg, spec) in properties {
                let kind = spec["type"].as_str().map_or_else(
                    || spec["type"].to_string().replace("null", "any"),
                    str::to_owned,
                );
                let mut line = format!("    {arg}: {kind}");
                if required.contains(&arg.as_str()) {
                    line.push_str(" (required)");
                }
                if let Some(default) = spec.get("default") {
                    line.push_str(&format!(" = {default}"));
                }
                if let Some(about) = spec["description"].as_str() {
                    line.push_str(&format!("  {about}"));
                }
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn long_running() -> Value {
        json!({"name": "trigger-long-running-operation", "inputSchema": {"type": "object",
            "properties": {"duration": {"type": "number", "default": 10},
                           "steps": {"type": "number", "default": 5}}}})
    }

    #[test]
    fn arguments_are_checked_against_the_input_schema() {
        let tool = long_running();
        assert!(schema_errors(&tool, &json!({"duration": 2})).is_ok());
        let wrong = schema_errors(&tool, &json!({"duration": "two"})).unwrap_err();
        assert!(wrong.contains("/duration"), "{wrong}");
        let required = json!({"name": "t", "inputSchema": {"type": "object",
            "properties": {"topic": {"type": "string"}}, "required": ["topic"]}});
        let missing = schema_errors(&required, &json!({})).unwrap_err();
        assert!(missing.contains("topic"), "{missing}");
    }

    #[test]
    fn an_unknown_tool_is_named_with_the_tools_there_are() {
        let tools = [long_running(), json!({"name": "echo"})];
        let Unreachable(why) = find(&tools, "sleep", "--tool").unwrap_err();
        assert!(
            why.contains("`sleep`") && why.contains("trigger-long-running-operation, echo"),
            "{why}"
        );
        assert!(find(&tools, "echo", "--tool").is_ok());
    }

    #[test]
    fn the_waits_follow_the_measured_length() {
        let m = |ms| Measured {
            duration: Duration::from_millis(ms),
            progress: 0,
            progress_every: None,
        };
        assert_eq!(m(10_000).lead(), Duration::from_millis(500));
        assert_eq!(m(1_000).lead(), Duration::from_millis(200));
        assert_eq!(m(100).lead(), Duration::from_millis(50));
        assert_eq!(m(10_000).slack(), Duration::from_secs(5));
        assert_eq!(m(600).slack(), Duration::from_millis(500));
    }

    #[test]
    fn the_tool_table_shows_arguments_and_tasks() {
        let mut task = json!({"name": "research", "description": "Research.\nMore.",
            "execution": {"taskSupport": "required"},
            "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}},
                            "required": ["topic"]}});
        let table = tool_table(&[long_running(), task.clone()]);
        assert!(table.contains("    duration: number = 10"), "{table}");
        assert!(
            table.contains("research  [task: required]\n    Research.\n"),
            "{table}"
        );
        assert!(table.contains("topic: string (required)"), "{table}");
        task["execution"]["taskSupport"] = json!("forbidden");
        assert!(!tool_table(&[task]).contains("[task"));
    }
}
