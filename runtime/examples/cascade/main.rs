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
        Some("agent") => runtime.block_on(agent::agent()),
        Some("mcp-server") => runtime.block_on(mcp_server::mcp_server()),
        Some("tool-server") => runtime.block_on(tool_server::tool_server(&args[1..])),
        _ => runtime.block_on(client::client(args.iter().any(|a| a == "--events"))),
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
#[path = "../support/log.rs"]
mod log;

#[cfg(all(unix, feature = "rap"))]
mod agent;
#[cfg(all(unix, feature = "rap"))]
mod client;
#[cfg(all(unix, feature = "rap"))]
mod mcp_server;
#[cfg(all(unix, feature = "rap"))]
mod shared;
#[cfg(all(unix, feature = "rap"))]
mod tool_server;
