//! The guide's small server, written twice (`examples/side_by_side_rmcp.rs` with rmcp's
//! `#[tool]`, `examples/side_by_side_cancelkit.rs` on `cancelkit::mcp`): both are run as
//! processes and given the same session on stdio — the handshake, the listing, a call, a
//! cancelled call — and must answer it alike; and ours is not the longer program.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

struct Server {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Server {
    fn start(example: &str) -> Self {
        let binary = cancelkit_tests::package_example("cancelkit-tests", example);
        let mut child = Command::new(binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the example starts");
        let stdin = child.stdin.take().expect("piped");
        let lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        Self {
            _child: child,
            stdin,
            lines,
        }
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.stdin.write_all(line.as_bytes()).await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    /// The next message, or `None` after `within`.
    async fn next(&mut self, within: Duration) -> Option<Value> {
        let line = tokio::time::timeout(within, self.lines.next_line())
            .await
            .ok()?
            .expect("read")?;
        Some(serde_json::from_str(&line).expect("a JSON line"))
    }

    /// The answer to request `id`, and every other message before it.
    async fn answer(&mut self, id: i64) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self
                .next(Duration::from_secs(10))
                .await
                .unwrap_or_else(|| panic!("an answer to {id} within 10 s; before it: {before:?}"));
            if message["id"] == id {
                return (message, before);
            }
            before.push(message);
        }
    }

    async fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.answer(id).await.0
    }
}

/// What a session with one of the servers showed.
#[derive(Debug, PartialEq)]
struct Seen {
    version: Value,
    server: Value,
    /// Each tool's name, description and the schema of its arguments' properties.
    tools: Vec<(Value, Value, Value, Value)>,
    echo: Value,
    /// Messages that answered the cancelled call (none is owed).
    after_cancel: Vec<Value>,
    slept: Value,
}

async fn session(example: &str) -> Seen {
    let mut s = Server::start(example);
    let init = s
        .call(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        )
        .await;
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let list = s.call(1, "tools/list", json!({})).await;
    let mut tools: Vec<(Value, Value, Value, Value)> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{example}: {list}"))
        .iter()
        .map(|t| {
            let schema = &t["inputSchema"];
            (
                t["name"].clone(),
                t["description"].clone(),
                schema["properties"].clone(),
                schema["required"].clone(),
            )
        })
        .collect();
    tools.sort_by_key(|t| t.0.to_string());
    let echo = s
        .call(
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .await;
    s.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"seconds": 60}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 3, "reason": "no longer needed"}}),
    )
    .await;
    // The next call's answer comes after anything the cancelled one got.
    let (slept, before) = {
        s.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"seconds": 0.5}}}))
            .await;
        s.answer(4).await
    };
    let after_cancel = before.into_iter().filter(|m| m["id"] == 3).collect();
    Seen {
        version: init["result"]["protocolVersion"].clone(),
        server: init["result"]["serverInfo"]["name"].clone(),
        tools,
        echo: echo["result"]["content"][0]["text"].clone(),
        after_cancel,
        slept: slept["result"]["content"][0]["text"].clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_servers_answer_the_same_session_alike() {
    let rmcp = session("side_by_side_rmcp").await;
    let ours = session("side_by_side_cancelkit").await;
    assert_eq!(rmcp.version, "2025-11-25");
    assert_eq!(rmcp.server, "demo");
    assert_eq!(rmcp.echo, "hi");
    assert_eq!(rmcp.slept, "slept 0.5s");
    assert_eq!(rmcp.after_cancel, Vec::<Value>::new());
    assert_eq!(rmcp.tools.len(), 2, "{:?}", rmcp.tools);
    assert_eq!(ours, rmcp);
}

/// Lines of code: not blank, not a comment.
fn code_lines(path: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .count()
}

#[test]
fn ours_is_not_the_longer_program() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let rmcp = code_lines(&format!("{dir}/examples/side_by_side_rmcp.rs"));
    let ours = code_lines(&format!("{dir}/examples/side_by_side_cancelkit.rs"));
    println!("lines of code: rmcp {rmcp}, cancelkit {ours}");
    assert!(ours <= rmcp, "cancelkit {ours} lines, rmcp {rmcp}");
}

/// The guide's page shows both programs as they are, with the counts [`code_lines`] gives, and
/// the README quotes the same counts.
#[test]
fn the_guide_shows_both_programs_and_their_counts() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let read =
        |path: String| std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let page = read(format!("{dir}/../docs/src/side-by-side.md"));
    let readme = read(format!("{dir}/../README.md"));
    let mut counts = Vec::new();
    for (name, file) in [
        ("rmcp", "side_by_side_rmcp.rs"),
        ("cancelkit", "side_by_side_cancelkit.rs"),
    ] {
        let path = format!("{dir}/examples/{file}");
        let source = read(path.clone());
        let fenced = format!("```rust,no_run\n{}\n```", source.trim_end());
        assert!(
            page.contains(&fenced),
            "docs/src/side-by-side.md does not show {file} as it is"
        );
        let code = code_lines(&path);
        let total = source.trim_end().lines().count();
        let row = format!("| {name} | {code} | {total} |");
        assert!(
            page.contains(&row),
            "docs/src/side-by-side.md lacks the row `{row}`"
        );
        counts.push(code);
    }
    let quoted = format!(
        "{} lines of code with rmcp and {} with cancelkit",
        counts[0], counts[1]
    );
    assert!(
        readme.contains(&quoted),
        "the README does not say `{quoted}`"
    );
}
