//! One cancel across three protocols, end to end, in four processes:
//!
//! ```text
//! this process           ACP client: session/prompt, then session/cancel
//!   └ cascade agent       ACP agent (stdio); its #[cancellable] session/prompt calls an MCP tool
//!       └ cascade mcp-server   MCP server (stdio); its #[cancellable] tools/call invokes a RAP tool
//!           └ cascade tool-server  RAP tool server (HTTP on loopback); `run` is `sleep 60`
//!               └ sleep 60       in its own process group (cancelkit::rap::process)
//! ```
//!
//! The client sends `session/cancel`. Nothing in the handlers handles cancellation beyond
//! `#[cancellable]`: the agent's runtime answers the prompt `stopReason: "cancelled"` and drops
//! the handler, and with it the outgoing `tools/call`, which sends `notifications/cancelled`;
//! the MCP server's runtime drops its handler, and with it the `Invoker` future, which sends
//! `/cancel_tool_call`; the tool server cancels the call's scope, and `process::run` stops the
//! process group. The example prints when each hop was observed and exits non-zero if one is
//! missing, or if any of its processes outlives it.
//!
//! ```text
//! cargo run -p cancelkit --example cascade            # builds and runs it with --features rap
//! cargo run -p cancelkit --features rap --example cascade [-- --events]
//! ```
//!
//! `--events` also prints every event the processes reported (one JSON object a line).
//!
//! How each hop is measured. All timestamps are wall-clock microseconds since the Unix epoch
//! (`SystemTime`), taken on the same machine, so they compare across the processes; each is
//! reported by the process that observed it, as a `cascade-event {json}` line on stderr (which
//! all the children share with the client's pipe):
//!
//! - *session/cancel sent*: the client, just before it hands `session/cancel` to its
//!   connection (so every latency below includes writing it);
//! - *prompt answered*: the client, when the `session/prompt` response has been read;
//! - *MCP server read notifications/cancelled*: the MCP server, when the line is read from its
//!   stdin (a tap between stdin and its `Peer` looks at each line, then passes it on);
//! - *tool server got /cancel_tool_call*: the tool server, when the request's body has been
//!   read (an axum middleware in front of the `ToolServer` router);
//! - *process group gone*: the client, which polls `kill(-pgid, 0)` every millisecond from
//!   the moment it sends `session/cancel`, until it fails with ESRCH (a zombie still counts
//!   until its parent reaps it, so ESRCH means every process of the group exited and was
//!   reaped).
//!
//! Unix only, like the `rap` feature.

#![cfg_attr(not(all(unix, feature = "rap")), allow(unused))]

/// Without the `rap` feature (plain `cargo run -p cancelkit --example cascade`): build and run
/// this example again with it, in the same profile.
#[cfg(not(all(unix, feature = "rap")))]
fn main() {
    if cfg!(not(unix)) {
        eprintln!("the cascade example needs the rap feature, which is Unix only");
        std::process::exit(2);
    }
    let profile = std::env::current_exe()
        .ok()
        .and_then(|me| {
            let dir = me.parent()?.parent()?.file_name()?.to_str()?.to_owned();
            Some(if dir == "debug" {
                "dev".to_owned()
            } else {
                dir
            })
        })
        .unwrap_or_else(|| "dev".to_owned());
    eprintln!("the cascade example needs the rap feature: running it with --features rap");
    let status = std::process::Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--profile", &profile, "-p", "cancelkit"])
        .args(["--features", "rap", "--example", "cascade", "--"])
        .args(std::env::args_os().skip(1))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status();
    match status {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("cannot run cargo: {e}");
            std::process::exit(2);
        }
    }
}

#[cfg(all(unix, feature = "rap"))]
fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let outcome = match args.first().map(String::as_str) {
        Some("agent") => runtime.block_on(cascade::agent()),
        Some("mcp-server") => runtime.block_on(cascade::mcp_server()),
        Some("tool-server") => runtime.block_on(cascade::tool_server(&args[1..])),
        _ => runtime.block_on(cascade::client(args.iter().any(|a| a == "--events"))),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cascade: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(all(unix, feature = "rap"))]
#[path = "support/log.rs"]
mod log;

#[cfg(all(unix, feature = "rap"))]
mod cascade {
    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::process::{ExitCode, Stdio};
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use cancelkit::peer::{Context, McpRevision, Peer, PeerHandle, Protocol, Router};
    use cancelkit::rap::{
        CallTracker, Invocation, Invoker, Notifier, ToolCall, ToolError, ToolOutput, ToolServer,
        ToolServerTarget, process,
    };
    use cancelkit::{JsonRpcError, cancellable};
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::sync::mpsc;
    use tokio::time::{Instant, timeout};

    type Error = Box<dyn std::error::Error + Send + Sync>;

    /// The bearer token between the MCP server (the RAP runtime) and its tool server.
    const TOKEN: &str = "cascade-token";
    /// How long the tool would run if nobody cancelled it.
    const TOOL_SECONDS: u64 = 60;
    /// How long the client waits for each thing it waits for.
    const WAIT: Duration = Duration::from_secs(10);
    /// The prefix of an event line on stderr.
    const EVENT: &str = "cascade-event ";
    /// The longest stderr line the client reads from its children.
    const MAX_LINE: usize = 64 * 1024;
    /// How many events the client keeps (it needs about ten).
    const MAX_EVENTS: usize = 256;

    /// Wall-clock microseconds since the Unix epoch: comparable across processes on one machine.
    fn now_us() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64)
    }

    /// Reports an event on stderr for the client: `cascade-event {"event": name, ...}`.
    fn event(name: &str, mut fields: Value) {
        fields["event"] = json!(name);
        fields["pid"] = json!(std::process::id());
        fields["at_us"] = json!(now_us());
        write_event(&fields);
    }

    /// Writes one event line to stderr in a single `write` (the children share one pipe, and a
    /// pipe keeps writes of up to 4 KiB whole; `eprintln!` may split a line into several).
    fn write_event(fields: &Value) {
        use std::io::Write;
        let line = format!("{EVENT}{fields}\n");
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    /// This binary, to start the other roles with. On Linux `/proc/self/exe`, which still runs
    /// this very file if a rebuild has replaced it on disk meanwhile.
    fn me() -> std::io::Result<PathBuf> {
        let proc_self = PathBuf::from("/proc/self/exe");
        if proc_self.exists() {
            return Ok(proc_self);
        }
        std::env::current_exe()
    }

    /// Whether a process (`pid > 0`) or a process group (`-pgid`) has no member left.
    fn gone(pid: i32) -> bool {
        kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH)
    }

    // ---------------------------------------------------------------------------------------
    // The ACP client: this process.

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
                e["thread_id"] == invoked["thread_id"]
                    && e["tool_call_id"] == invoked["tool_call_id"]
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
                what: format!(
                    "MCP server read notifications/cancelled (requestId {mcp_request_id})"
                ),
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
            while let Ok(Some(event)) = timeout(Duration::from_millis(100), events.rx.recv()).await
            {
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

    // ---------------------------------------------------------------------------------------
    // The ACP agent: an MCP client of the MCP server it starts.

    static MCP: OnceLock<PeerHandle> = OnceLock::new();

    async fn initialize(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
        Ok(json!({
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": false, "promptCapabilities": {}},
            "authMethods": [],
            "agentInfo": {"name": "cancelkit-cascade-agent", "version": env!("CARGO_PKG_VERSION")}
        }))
    }

    async fn new_session(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
        Ok(json!({"sessionId": "sess-1"}))
    }

    /// One prompt turn: call the MCP server's `run` tool. No cancellation code: on
    /// `session/cancel` the runtime answers `stopReason: "cancelled"` and drops this future,
    /// and with it the `tools/call` request, which sends `notifications/cancelled`.
    #[cancellable]
    async fn prompt(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
        let mcp = MCP
            .get()
            .ok_or_else(|| JsonRpcError::internal("no MCP server"))?;
        let call = mcp.request::<_, Value>(
            "tools/call",
            json!({"name": "run", "arguments": {"seconds": TOOL_SECONDS}}),
        );
        event("mcp_request_sent", json!({"request_id": call.id()}));
        let result = call.await?;
        Ok(json!({"stopReason": "end_turn", "_meta": {"tool": result}}))
    }

    pub async fn agent() -> Result<ExitCode, Error> {
        super::log::init();
        let mut server = tokio::process::Command::new(me()?)
            .arg("mcp-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let (stdin, stdout) = (
            server.stdin.take().ok_or("no stdin")?,
            server.stdout.take().ok_or("no stdout")?,
        );
        let mcp_peer =
            Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25)).connect(stdout, stdin);
        let mcp = mcp_peer.handle();
        let _: Value = timeout(
            WAIT,
            mcp.request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "cancelkit-cascade-agent", "version": "0"}}),
            ),
        )
        .await??;
        mcp.notify("notifications/initialized", json!({})).await?;
        MCP.set(mcp.clone()).map_err(|_| "set twice")?;

        let router = Router::new()
            .request("initialize", initialize)
            .request("session/new", new_session)
            .request("session/prompt", prompt);
        let acp = Peer::builder(Protocol::Acp)
            .router(router)
            .connect(tokio::io::stdin(), tokio::io::stdout());
        acp.closed().await;

        mcp.close();
        let _ = timeout(WAIT, mcp_peer.closed()).await;
        if timeout(WAIT, server.wait()).await.is_err() {
            let _ = server.kill().await;
        }
        Ok(ExitCode::SUCCESS)
    }

    // ---------------------------------------------------------------------------------------
    // The MCP server: the RAP runtime of the tool server it starts.

    static TOOLS: OnceLock<(Invoker, ToolServerTarget)> = OnceLock::new();
    static CALLS: AtomicU64 = AtomicU64::new(1);

    async fn mcp_initialize(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
        Ok(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "cancelkit-cascade-mcp-server", "version": env!("CARGO_PKG_VERSION")}
        }))
    }

    /// `tools/call run {seconds}`: invokes the RAP tool server's `run`. No cancellation code:
    /// on `notifications/cancelled` the runtime drops this future, and with it the invocation,
    /// which sends `/cancel_tool_call` (and the tracker records "interrupted").
    #[cancellable]
    async fn call_tool(params: Value, cx: Context) -> Result<Value, JsonRpcError> {
        let (invoker, target) = TOOLS
            .get()
            .ok_or_else(|| JsonRpcError::internal("no tool server"))?;
        let call = Invocation::new(
            "run",
            "mcp-thread",
            format!("call-{}", CALLS.fetch_add(1, Ordering::Relaxed)),
        )
        .arguments(params["arguments"].clone());
        event(
            "rap_invoked",
            json!({"thread_id": call.thread_id, "tool_call_id": call.tool_call_id,
                   "mcp_request_id": cx.request_id()}),
        );
        let result = invoker.invoke(target, call).await?;
        Ok(json!({
            "content": [{"type": "text", "text": result.text.unwrap_or_default()}],
            "isError": result.is_error.unwrap_or(false)
        }))
    }

    /// Passes stdin on to `into` line by line, reporting each `notifications/cancelled` as it
    /// is read. Lines longer than the peer's frame limit are passed on whole in pieces.
    async fn tap(into: tokio::io::DuplexStream) {
        let mut into = into;
        let mut reader = BufReader::new(tokio::io::stdin());
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
            let read_at = now_us();
            if let Ok(message) = serde_json::from_slice::<Value>(&line)
                && message["method"] == "notifications/cancelled"
            {
                let params = &message["params"];
                write_event(
                    &json!({"event": "mcp_got_cancelled", "pid": std::process::id(),
                    "at_us": read_at, "request_id": params["requestId"], "reason": params["reason"]}),
                );
            }
            if into.write_all(&line).await.is_err() {
                return;
            }
        }
    }

    pub async fn mcp_server() -> Result<ExitCode, Error> {
        super::log::init();
        // Our callback route first: the tool server only posts results to origins it allows.
        let callbacks = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let origin = format!("http://{}", callbacks.local_addr()?);
        let mut tool_server = tokio::process::Command::new(me()?)
            .args(["tool-server", &origin, TOKEN])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let mut lines = BufReader::new(tool_server.stdout.take().ok_or("no stdout")?).lines();
        let first = timeout(WAIT, lines.next_line()).await??.unwrap_or_default();
        let base = first
            .strip_prefix("listening on ")
            .ok_or("the tool server did not report its address")?
            .to_owned();
        let target = ToolServerTarget::new(base).with_bearer_token(TOKEN);
        let notifier = Notifier::new([target.clone()], Duration::from_secs(2));
        let tracker = std::sync::Arc::new(CallTracker::new(Some(notifier)));
        let invoker = Invoker::new(tracker, format!("{origin}/tool_result"))?;
        let router = invoker.callback_router();
        tokio::spawn(async move {
            let _ = axum::serve(callbacks, router).await;
        });
        TOOLS.set((invoker, target)).map_err(|_| "set twice")?;

        let (tapped, peer_input) = tokio::io::duplex(64 * 1024);
        tokio::spawn(tap(tapped));
        let router = Router::new()
            .request("initialize", mcp_initialize)
            .request("tools/call", call_tool);
        let peer = Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25))
            .router(router)
            .connect(peer_input, tokio::io::stdout());
        event("mcp_server_ready", json!({}));
        peer.closed().await;

        drop(tool_server.stdin.take()); // the tool server exits when its stdin closes
        if timeout(WAIT, tool_server.wait()).await.is_err() {
            let _ = tool_server.kill().await;
        }
        Ok(ExitCode::SUCCESS)
    }

    // ---------------------------------------------------------------------------------------
    // The RAP tool server.

    /// Removes a file when dropped.
    struct RemoveOnDrop(PathBuf);

    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// `run {seconds}`: `sleep` in its own process group (`process::run`), which reports its
    /// process group id through a file for the client to watch. No cancellation code:
    /// `/cancel_tool_call` cancels the call's scope, and `process::run` stops the group.
    async fn run_tool(args: Value, call: ToolCall) -> Result<ToolOutput, ToolError> {
        let seconds = args["seconds"].as_u64().unwrap_or(TOOL_SECONDS).min(3600);
        let marker = RemoveOnDrop(std::env::temp_dir().join(format!(
            "cancelkit-cascade-{}-{}.pgid",
            std::process::id(),
            call.tool_call_id
        )));
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(r#"echo $$ > "$1"; exec sleep "$2""#)
            .arg("sh")
            .arg(&marker.0)
            .arg(seconds.to_string());
        let report = async {
            for _ in 0..1000 {
                if let Ok(text) = std::fs::read_to_string(&marker.0)
                    && let Ok(pgid) = text.trim().parse::<i32>()
                {
                    event(
                        "process_started",
                        json!({"pgid": pgid, "thread_id": call.thread_id, "tool_call_id": call.tool_call_id}),
                    );
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let (output, ()) = tokio::join!(process::run(command, Duration::from_secs(2)), report);
        let output = output?;
        Ok(ToolOutput::Text(format!(
            "slept {seconds} s{}",
            output.stdout
        )))
    }

    /// Reports every `/cancel_tool_call` when its body has been read, then passes it on.
    async fn observe(
        request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        if request.uri().path() != "/cancel_tool_call" {
            return next.run(request).await;
        }
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, 64 * 1024)
            .await
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        event(
            "rap_got_cancel",
            json!({"thread_id": body["thread_id"], "tool_call_id": body["tool_call_id"]}),
        );
        let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        next.run(request).await
    }

    pub async fn tool_server(args: &[String]) -> Result<ExitCode, Error> {
        super::log::init();
        let origin = args.first().ok_or("tool-server ORIGIN TOKEN")?;
        let token = args.get(1).ok_or("tool-server ORIGIN TOKEN")?;
        let server = ToolServer::builder("cancelkit-cascade-tools")
            .bearer_token(token.as_str())
            .allow_callback_origin(origin)?
            .operation(
                "run",
                "Sleeps in its own process group; cancellable.",
                json!({"type": "object", "properties": {"seconds": {"type": "integer"}}}),
                run_tool,
            )
            .build();
        let router = server.router().layer(axum::middleware::from_fn(observe));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        println!("listening on {url}");
        event("tool_server_ready", json!({"url": url}));
        // Until our stdin closes: the MCP server closes it, or is gone.
        let parent_gone = async {
            let mut sink = Vec::new();
            let _ = tokio::io::stdin()
                .take(1 << 20)
                .read_to_end(&mut sink)
                .await;
        };
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(parent_gone)
        .await?;
        Ok(ExitCode::SUCCESS)
    }
}
