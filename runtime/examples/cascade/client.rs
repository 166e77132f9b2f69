//! The ACP client: this process. It starts the agent, sends `session/prompt` then
//! `session/cancel`, reads the events its children report and prints when each hop was
//! observed.

use std::process::{ExitCode, Stdio};
use std::time::Duration;

use cancelkit::peer::{Peer, Protocol};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};

use crate::shared::{EVENT, Error, MAX_EVENTS, MAX_LINE, TOOL_SECONDS, WAIT, gone, me, now_us};

/// The events the children report, read from their shared stderr.
struct Events {
    rx: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Events {
    /// The first event called `name` matching `filter`, waiting until `deadline`.
    async fn wait_for(
        &mut self,
        name: &str,
        deadline: Instant,
        filter: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let matches = |e: &Value| e["event"] == name && filter(e);
        if let Some(found) = self.seen.iter().find(|e| matches(e)) {
            return Some(found.clone());
        }
        loop {
            let next = tokio::time::timeout_at(deadline, self.rx.recv()).await;
            let event = next.ok().flatten()?;
            if self.seen.len() < MAX_EVENTS {
                self.seen.push(event.clone());
            }
            if matches(&event) {
                return Some(event);
            }
        }
    }
}

/// Reads the children's stderr: event lines go to `tx`, the rest to our stderr.
async fn read_stderr(stderr: tokio::process::ChildStderr, tx: mpsc::Sender<Value>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await;
        if !matches!(read, Ok(n) if n > 0) {
            return;
        }
        let text = String::from_utf8_lossy(&line);
        match text.trim_end().strip_prefix(EVENT) {
            Some(json) => match serde_json::from_str(json) {
                Ok(event) => {
                    let _ = tx.send(event).await;
                }
                Err(_) => eprint!("{text}"),
            },
            None => eprint!("{text}"),
        }
    }
}

/// One row of the table: what was observed, when, and since what.
struct Hop {
    what: String,
    at_us: Option<u64>,
    since: Option<u64>,
}

fn ms(us: u64) -> String {
    format!("{:.3} ms", us as f64 / 1000.0)
}

pub async fn client(print_events: bool) -> Result<ExitCode, Error> {
    let started = Instant::now();
    let mut agent = tokio::process::Command::new(me()?);
    if std::env::var_os("RUST_LOG").is_none() {
        agent.env("RUST_LOG", "warn"); // the children's logs; the table is on stdout
    }
    let mut agent = agent
        .arg("agent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let agent_pid = agent.id().ok_or("the agent has no pid")? as i32;
    let (tx, rx) = mpsc::channel(MAX_EVENTS);
    tokio::spawn(read_stderr(agent.stderr.take().ok_or("no stderr")?, tx));
    let mut events = Events {
        rx,
        seen: Vec::new(),
    };
    let (stdin, stdout) = (
        agent.stdin.take().ok_or("no stdin")?,
        agent.stdout.take().ok_or("no stdout")?,
    );
    let peer = Peer::builder(Protocol::Acp).connect(stdout, stdin);
    let acp = peer.handle();

    let _: Value = timeout(
        WAIT,
        acp.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        ),
    )
    .await??;
    let session: Value = timeout(
        WAIT,
        acp.request("session/new", json!({"cwd": "/", "mcpServers": []})),
    )
    .await??;
    let session_id = session["sessionId"].as_str().unwrap_or_default().to_owned();
    let deadline = Instant::now() + WAIT;
    let mcp_ready = events
        .wait_for("mcp_server_ready", deadline, |_| true)
        .await;
    let tools_ready = events
        .wait_for("tool_server_ready", deadline, |_| true)
        .await;
    let (Some(mcp_ready), Some(tools_ready)) = (mcp_ready, tools_ready) else {
        return Err("the MCP server or the tool server did not start".into());
    };
    let mcp_pid = mcp_ready["pid"].as_i64().unwrap_or(0) as i32;
    let tools_pid = tools_ready["pid"].as_i64().unwrap_or(0) as i32;
    println!(
        "ACP client (pid {}) → agent (pid {agent_pid}) → MCP server (pid {mcp_pid}) → RAP tool server (pid {tools_pid}, {})",
        std::process::id(),
        tools_ready["url"].as_str().unwrap_or("?")
    );

    // The prompt turn: the agent calls the MCP tool, which invokes the RAP tool.
    let prompt = acp.request::<_, Value>(
        "session/prompt",
        json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "run the tool"}]}),
    );
    let answered = tokio::spawn(async move {
        let outcome = timeout(WAIT, prompt).await;
        (outcome, now_us())
    });
    let deadline = Instant::now() + WAIT;
    let sent = events
        .wait_for("mcp_request_sent", deadline, |_| true)
        .await;
    let invoked = events.wait_for("rap_invoked", deadline, |_| true).await;
    let running = events.wait_for("process_started", deadline, |_| true).await;
    let (Some(sent), Some(invoked), Some(running)) = (sent, invoked, running) else {
        return Err("the tool did not start".into());
    };
    let pgid = running["pgid"].as_i64().unwrap_or(0) as i32;
    if pgid <= 1 || gone(-pgid) {
        return Err(format!("the tool's process group {pgid} is not running").into());
    }
    println!(
        "session/prompt → tools/call (MCP request id {}) → /invoke (thread_id {}, tool_call_id {}) → `sleep {TOOL_SECONDS}` (process group {pgid})",
        sent["request_id"], invoked["thread_id"], invoked["tool_call_id"]
    );
    // Let the tool run a moment, as a real one would.
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The cancel, and the process group watch: kill(-pgid, 0) every millisecond.
    let watch = tokio::spawn(async move {
        let until = Instant::now() + WAIT;
        while Instant::now() < until {
            if gone(-pgid) {
                return Some(now_us());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        None
    });
    let cancel_at = now_us();
    acp.notify("session/cancel", json!({"sessionId": session_id}))
        .await?;
    println!("session/cancel sent");

    let (prompt_outcome, answered_at) = answered.await?;
    let deadline = Instant::now() + WAIT;
    let mcp_request_id = sent["request_id"].clone();
    let mcp_cancel = events
        .wait_for("mcp_got_cancelled", deadline, |e| {
            e["request_id"] == mcp_request_id
        })
        .await;
    let rap_cancel = events
        .wait_for("rap_got_cancel", deadline, |e| {
            e["thread_id"] == invoked["thread_id"] && e["tool_call_id"] == invoked["tool_call_id"]
        })
        .await;
    let gone_at = watch.await?;

    let mut failures = Vec::new();
    let prompt_result = match prompt_outcome {
        Ok(Ok(result)) => {
            println!("session/prompt answered: result {result}");
            Some(result)
        }
        Ok(Err(e)) => {
            println!("session/prompt answered with an error: {e}");
            None
        }
        Err(_) => {
            println!("session/prompt not answered within {WAIT:?}");
            None
        }
    };
    if prompt_result.as_ref().map(|r| &r["stopReason"]) != Some(&json!("cancelled")) {
        failures.push("the prompt was not answered with stopReason \"cancelled\"");
    }
    if mcp_cancel.is_none() {
        failures.push("the MCP server did not get notifications/cancelled for its call");
    }
    if rap_cancel.is_none() {
        failures.push("the tool server did not get /cancel_tool_call for its call");
    }
    if gone_at.is_none() {
        failures.push("the tool's process group is still there");
    }

    let at = |e: &Option<Value>| e.as_ref().and_then(|e| e["at_us"].as_u64());
    let (mcp_at, rap_at) = (at(&mcp_cancel), at(&rap_cancel));
    let hops = [
        Hop {
            what: format!(
                "ACP agent answered session/prompt ({})",
                prompt_result
                    .as_ref()
                    .map_or("no result".into(), |r| format!(
                        "stopReason {}",
                        r["stopReason"]
                    ))
            ),
            at_us: prompt_result.is_some().then_some(answered_at),
            since: Some(cancel_at),
        },
        Hop {
            what: format!("MCP server read notifications/cancelled (requestId {mcp_request_id})"),
            at_us: mcp_at,
            since: Some(cancel_at),
        },
        Hop {
            what: format!(
                "RAP tool server got /cancel_tool_call ({})",
                invoked["tool_call_id"].as_str().unwrap_or("?")
            ),
            at_us: rap_at,
            since: mcp_at,
        },
        Hop {
            what: format!("process group {pgid} gone (kill(-pgid, 0) = ESRCH)"),
            at_us: gone_at,
            since: rap_at,
        },
    ];
    println!();
    println!(
        "{:<62} {:>16} {:>14}",
        "hop", "since the cancel", "hop latency"
    );
    for hop in &hops {
        let (total, latency) = match hop.at_us {
            Some(at) => (
                ms(at.saturating_sub(cancel_at)),
                hop.since
                    .map_or("-".into(), |since| ms(at.saturating_sub(since))),
            ),
            None => ("not observed".into(), "-".into()),
        };
        println!("{:<62} {total:>16} {latency:>14}", hop.what);
    }
    let last = hops.iter().filter_map(|h| h.at_us).max();
    if hops.iter().all(|h| h.at_us.is_some())
        && let Some(last) = last
    {
        println!(
            "{:<62} {:>16}",
            "total: session/cancel sent → last hop",
            ms(last.saturating_sub(cancel_at))
        );
    }
    println!();

    // Shut down: closing the ACP connection ends the agent, which closes the MCP server's
    // stdin, which closes the tool server's stdin; each waits for its child.
    acp.close();
    let _ = timeout(WAIT, peer.closed()).await;
    if timeout(WAIT, agent.wait()).await.is_err() {
        failures.push("the agent did not exit");
        let _ = agent.kill().await;
    }
    let until = Instant::now() + Duration::from_secs(3);
    let mut left: Vec<(&str, i32)> = vec![
        ("agent", agent_pid),
        ("MCP server", mcp_pid),
        ("tool server", tools_pid),
    ];
    while !left.is_empty() && Instant::now() < until {
        left.retain(|&(_, pid)| !gone(pid));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if !gone(-pgid) {
        left.push(("process group", pgid));
    }
    if left.is_empty() {
        println!(
            "no process left: agent {agent_pid}, MCP server {mcp_pid}, tool server {tools_pid} and process group {pgid} are gone"
        );
    } else {
        println!("still running: {left:?}");
        failures.push("a process outlived the example");
    }
    if print_events {
        while let Ok(Some(event)) = timeout(Duration::from_millis(100), events.rx.recv()).await {
            if events.seen.len() < MAX_EVENTS {
                events.seen.push(event);
            }
        }
        for event in &events.seen {
            println!("event {event}");
        }
        println!(
            "event {}",
            json!({"event": "cancel_sent", "at_us": cancel_at, "pid": std::process::id()})
        );
        println!(
            "event {}",
            json!({"event": "prompt_answered", "at_us": answered_at, "result": prompt_result})
        );
        if let Some(at) = gone_at {
            println!(
                "event {}",
                json!({"event": "group_gone", "at_us": at, "pgid": pgid})
            );
        }
    }
    println!("finished in {:?}", started.elapsed());
    if failures.is_empty() {
        println!("every hop observed");
        Ok(ExitCode::SUCCESS)
    } else {
        for failure in failures {
            println!("FAILED: {failure}");
        }
        Ok(ExitCode::FAILURE)
    }
}
