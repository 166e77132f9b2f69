//! The typed MCP server (`cancelkit::mcp`) on the raw wire: the lifecycle of each revision,
//! the listing with derived schemas, arguments that do not fit, the extractors, cancellation
//! as the handler's attribute says, and tasks for the tools that allow them.

mod common;

use std::time::Duration;

use cancelkit::mcp::schemars::{self, JsonSchema};
use cancelkit::mcp::{Args, Json, McpRevision, McpServer, Meta, Progress, TaskSupport, Tool};
use cancelkit::peer::{Context, Framing, Peer};
use cancelkit::{JsonRpcError, cancellable};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use common::Wire;

#[derive(Deserialize, JsonSchema)]
struct Echo {
    /// The text to return.
    text: String,
}

async fn echo(Args(Echo { text }): Args<Echo>) -> String {
    text
}

#[derive(Deserialize, JsonSchema)]
struct Sleep {
    /// How long, in milliseconds.
    ms: u64,
}

/// Reports its start and whether it finished or was dropped. The events channel is unbounded
/// on purpose (a `Drop` cannot wait for room): each call sends two events and each test makes a
/// handful of calls, so what it holds is bounded by the test itself.
struct Watch(mpsc::UnboundedSender<&'static str>, bool);

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.0.send(if self.1 { "finished" } else { "dropped" });
    }
}

#[cancellable]
async fn sleep(
    Args(Sleep { ms }): Args<Sleep>,
    progress: Progress,
    events: mpsc::UnboundedSender<&'static str>,
) -> Result<String, JsonRpcError> {
    let mut watch = Watch(events.clone(), false);
    let _ = events.send("started");
    progress.report(0.0, Some(ms as f64), Some("started")).await;
    // Not further along: never sent.
    progress.report(0.0, Some(ms as f64), None).await;
    tokio::time::sleep(Duration::from_millis(ms)).await;
    progress.report(ms as f64, Some(ms as f64), None).await;
    watch.1 = true;
    Ok(format!("slept {ms} ms"))
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    total: i64,
}

#[derive(Deserialize, JsonSchema)]
struct Numbers {
    values: Vec<i64>,
}

async fn sum(Args(n): Args<Numbers>) -> Json<Sum> {
    Json(Sum {
        total: n.values.iter().sum(),
    })
}

async fn whoami(Meta(meta): Meta, revision: McpRevision, cx: Context) -> String {
    format!(
        "{revision} {} {}",
        meta.get("note").and_then(Value::as_str).unwrap_or("-"),
        cx.request_id().map(ToString::to_string).unwrap_or_default()
    )
}

/// `sleep` takes a channel, which is no extractor: it is given through a closure.
fn server(events: mpsc::UnboundedSender<&'static str>) -> McpServer {
    McpServer::new("test-server", "1.2.3")
        .instructions("Use echo.")
        .tool(Tool::new("echo", "Returns its text.", echo))
        .tool(
            Tool::new(
                "sleep",
                "Sleeps; cancellable.",
                move |args: Args<Sleep>, progress: Progress| sleep(args, progress, events.clone()),
            )
            .task_support(TaskSupport::Optional),
        )
        .tool(Tool::new("sum", "Adds numbers.", sum).title("Sum"))
        .tool(Tool::new("whoami", "Says who asks.", whoami))
        .tool(Tool::new("hidden", "Not listed.", echo).unlisted())
}

fn served(revision: McpRevision) -> (Peer, Wire, mpsc::UnboundedReceiver<&'static str>) {
    // Unbounded: see `Watch`.
    let (tx, rx) = mpsc::unbounded_channel();
    let (peer, wire) = common::connect(server(tx).builder_for(revision), Framing::Lines);
    (peer, wire, rx)
}

async fn initialized(wire: &mut Wire, version: &str) -> Value {
    let answer = wire
        .call(
            json!(0),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        )
        .await;
    wire.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    answer
}

fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}
    })
}

#[tokio::test]
async fn initialize_answers_each_legacy_revision_as_itself() {
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let (_peer, mut wire, _rx) = served(McpRevision::Negotiated);
        let answer = initialized(&mut wire, asked).await;
        let result = &answer["result"];
        assert_eq!(result["protocolVersion"], answered, "{answer}");
        assert_eq!(
            result["serverInfo"],
            json!({"name": "test-server", "version": "1.2.3"})
        );
        assert_eq!(
            result["capabilities"]["tools"],
            json!({"listChanged": false})
        );
        assert_eq!(result["instructions"], "Use echo.");
        let pong = wire.call(json!(1), "ping", json!({})).await;
        assert_eq!(pong["result"], json!({}), "{pong}");
    }
}

#[tokio::test]
async fn server_discover_answers_2026() {
    let (_peer, mut wire, _rx) = served(McpRevision::Negotiated);
    let answer = wire
        .call(json!(1), "server/discover", json!({"_meta": meta_2026()}))
        .await;
    let result = &answer["result"];
    assert_eq!(
        result["capabilities"]["tools"],
        json!({"listChanged": false}),
        "{answer}"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "test-server"
    );
    assert!(
        result["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "{answer}"
    );
    assert_eq!(result["instructions"], "Use echo.");
}

#[tokio::test]
async fn tools_are_listed_with_derived_schemas() {
    let (_peer, mut wire, _rx) = served(McpRevision::Negotiated);
    initialized(&mut wire, "2025-11-25").await;
    let answer = wire.call(json!(1), "tools/list", json!({})).await;
    let tools = answer["result"]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["echo", "sleep", "sum", "whoami"]);
    let echo = &tools[0];
    assert_eq!(echo["description"], "Returns its text.");
    assert_eq!(echo["inputSchema"]["type"], "object");
    assert_eq!(echo["inputSchema"]["required"], json!(["text"]));
    assert_eq!(
        echo["inputSchema"]["properties"]["text"],
        json!({"type": "string", "description": "The text to return."})
    );
    assert!(echo.get("execution").is_none(), "{echo}");
    assert_eq!(tools[1]["execution"], json!({"taskSupport": "optional"}));
    assert_eq!(tools[2]["title"], "Sum");
    assert_eq!(
        tools[2]["outputSchema"]["properties"]["total"]["type"],
        "integer"
    );
    // No extractor reads the arguments: an object without properties.
    assert_eq!(
        tools[3]["inputSchema"],
        json!({"type": "object", "properties": {}})
    );
    // A cursor this server never gave.
    let answer = wire
        .call(json!(2), "tools/list", json!({"cursor": "page-2"}))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

#[tokio::test]
async fn a_2024_client_gets_the_2024_listing() {
    let (_peer, mut wire, _rx) = served(McpRevision::Negotiated);
    initialized(&mut wire, "2024-11-05").await;
    let answer = wire.call(json!(1), "tools/list", json!({})).await;
    let tools = &answer["result"]["tools"];
    assert!(tools[1].get("execution").is_none(), "{answer}");
    assert!(tools[2].get("outputSchema").is_none(), "{answer}");
    assert!(tools[2].get("title").is_none(), "{answer}");
}

#[tokio::test]
async fn calls_reach_their_tools_and_bad_calls_get_clear_answers() {
    let (_peer, mut wire, _rx) = served(McpRevision::Negotiated);
    initialized(&mut wire, "2025-11-25").await;
    let answer = wire
        .call(
            json!(1),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .await;
    assert_eq!(
        answer["result"],
        json!({"content": [{"type": "text", "text": "hi"}], "isError": false})
    );
    let answer = wire
        .call(
            json!(2),
            "tools/call",
            json!({"name": "sum", "arguments": {"values": [1, 2, 3]}}),
        )
        .await;
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"total": 6}),
        "{answer}"
    );
    assert_eq!(answer["result"]["content"][0]["text"], r#"{"total":6}"#);
    // Arguments that do not fit: a tool error the model can read.
    let answer = wire
        .call(
            json!(3),
            "tools/call",
            json!({"name": "echo", "arguments": {"txt": "hi"}}),
        )
        .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("invalid arguments for `echo`") && text.contains("text"),
        "{text}"
    );
    // No arguments at all, for a tool that needs some.
    let answer = wire
        .call(json!(4), "tools/call", json!({"name": "echo"}))
        .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    // A tool that does not exist: a protocol error.
    let answer = wire
        .call(
            json!(5),
            "tools/call",
            json!({"name": "ech0", "arguments": {}}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("ech0")
    );
    // Params without a name.
    let answer = wire
        .call(json!(6), "tools/call", json!({"arguments": {}}))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // A tool served but not listed.
    let answer = wire
        .call(
            json!(8),
            "tools/call",
            json!({"name": "hidden", "arguments": {"text": "h"}}),
        )
        .await;
    assert_eq!(answer["result"]["content"][0]["text"], "h", "{answer}");
    // The extractors: `_meta`, the revision, the request id.
    let answer = wire
        .call(
            json!(7),
            "tools/call",
            json!({"name": "whoami", "_meta": {"note": "n"}}),
        )
        .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "2025-11-25 n 7",
        "{answer}"
    );
}

#[tokio::test]
async fn progress_goes_to_a_client_that_asked_and_only_forward() {
    let (_peer, mut wire, _rx) = served(McpRevision::Negotiated);
    initialized(&mut wire, "2025-11-25").await;
    let (answer, before) = wire
        .call_seeing(
            json!(1),
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 10}, "_meta": {"progressToken": "p"}}),
        )
        .await;
    assert_eq!(answer["result"]["content"][0]["text"], "slept 10 ms");
    let progress: Vec<(Value, Value)> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            (
                m["params"]["progressToken"].clone(),
                m["params"]["progress"].clone(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [(json!("p"), json!(0.0)), (json!("p"), json!(10.0))]
    );
    // Without a token: none.
    let (_, before) = wire
        .call_seeing(
            json!(2),
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 1}}),
        )
        .await;
    assert!(before.is_empty(), "{before:?}");
}

#[tokio::test]
async fn a_cancelled_tool_is_dropped_and_owed_nothing() {
    let (_peer, mut wire, mut rx) = served(McpRevision::Negotiated);
    initialized(&mut wire, "2025-11-25").await;
    wire.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 60_000}}}))
        .await;
    assert_eq!(rx.recv().await, Some("started"));
    wire.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "changed my mind"}}),
    )
    .await;
    let stopped = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert_eq!(stopped.ok().flatten(), Some("dropped"));
    wire.assert_silent(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_task_tool_runs_as_a_2025_task_and_tasks_cancel_stops_it() {
    let (_peer, mut wire, mut rx) = served(McpRevision::Negotiated);
    initialized(&mut wire, "2025-11-25").await;
    let answer = wire
        .call(
            json!(1),
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60_000}, "task": {}}),
        )
        .await;
    let task = answer["result"]["task"]["taskId"].clone();
    assert!(task.is_string(), "{answer}");
    assert_eq!(rx.recv().await, Some("started"));
    let answer = wire
        .call(json!(2), "tasks/cancel", json!({"taskId": task}))
        .await;
    assert_eq!(answer["result"]["status"], "cancelled", "{answer}");
    let stopped = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert_eq!(stopped.ok().flatten(), Some("dropped"));
    // A tool without task support, asked for as a task: refused.
    let answer = wire
        .call(
            json!(3),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}, "task": {}}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(
        answer["error"]["data"],
        "tool `echo` does not run as a task"
    );
}

#[tokio::test]
async fn a_task_tool_is_a_2026_extension_task_for_a_client_that_declares_it() {
    let (_peer, mut wire, _rx) = served(McpRevision::Negotiated);
    let mut meta = meta_2026();
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let answer = wire
        .call(json!(1), "server/discover", json!({"_meta": meta.clone()}))
        .await;
    assert!(
        answer["result"]["capabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some(),
        "{answer}"
    );
    let answer = wire
        .call(
            json!(2),
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60_000}, "_meta": meta.clone()}),
        )
        .await;
    assert_eq!(answer["result"]["resultType"], "task", "{answer}");
    // Not a task tool: an ordinary result.
    let answer = wire
        .call(
            json!(3),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}, "_meta": meta}),
        )
        .await;
    assert_eq!(answer["result"]["content"][0]["text"], "x", "{answer}");
}

#[test]
#[should_panic(expected = "a tool named `echo` is added twice")]
fn a_tool_name_used_twice_is_refused_at_startup() {
    let _ = McpServer::new("s", "1")
        .tool(Tool::new("echo", "One.", echo))
        .tool(Tool::new("echo", "Two.", echo));
}

#[test]
#[should_panic(expected = "tool `n`: its arguments must be an object")]
fn arguments_that_are_not_an_object_are_refused_at_startup() {
    async fn number(Args(n): Args<u32>) -> String {
        n.to_string()
    }
    let _ = Tool::new("n", "A number.", number);
}

#[test]
#[should_panic(expected = "tool `list`: its structured result must be an object")]
fn structured_results_that_are_not_an_object_are_refused_at_startup() {
    async fn list() -> Json<Vec<u32>> {
        Json(vec![1, 2])
    }
    let _ = Tool::new("list", "A list.", list);
}
