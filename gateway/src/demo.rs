//! The demo upstream bundled with the gateway (hidden subcommand `demo-upstream`): an MCP
//! server on stdio with tools `echo {text}` and `sleep {seconds}`, speaking 2024-11-05,
//! 2025-11-25 and 2026-07-28 (chosen by the client's first message).
//!
//! `sleep` reports progress every 100 ms when the caller gave a `progressToken`, and a `sleep`
//! that is cancelled logs one line on stderr, so a cancel's arrival is visible from outside:
//!
//! ```text
//! demo-upstream: cancelled tools/call sleep (request id 3) after 1.2s: cancelled by the peer: cancelled through the API [unix_us=1795456594140312]
//! ```
//!
//! (`unix_us`: the wall-clock time of the stop, which `cargo xtask bench gateway` reads.)
//!
//! It also answers a tool it does not list, `env`: the names (not the values) of its
//! environment variables, one a line, so a test can see what a stdio upstream inherits. Each
//! call logs `demo-upstream: tools/call env` on stderr, so a test can also see that a call
//! for a tool the upstream never listed did not reach it (the gateway refuses unlisted tools
//! unless the upstream has `allow_unlisted_tools`).

use std::time::{Duration, Instant};

use cancelkit::mcp::schemars::{self, JsonSchema};
use cancelkit::mcp::{Args, McpServer, Progress, Tool};
use cancelkit::peer::Context;
use cancelkit::{JsonRpcError, cancellable};
use serde::Deserialize;

/// The prefix of every line the demo upstream writes on stderr.
pub const LOG_PREFIX: &str = "demo-upstream:";

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
    /// How long to sleep, in seconds (0 to 3600).
    seconds: f64,
}

/// The names (not the values) of the environment variables, one a line.
async fn env() -> String {
    log_line(&format!("{LOG_PREFIX} tools/call env"));
    let mut names: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.join("\n")
}

/// Writes `line` and its newline to stderr in one write: the demo shares its stderr with the
/// gateway, whose log lines would otherwise land in the middle of a line written piece by piece
/// (as `eprintln!` does with its arguments), and readers of the log match whole lines.
fn log_line(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Writes the stderr line when a sleep ends early.
struct StopLog {
    id: String,
    started: Instant,
    done: bool,
}

impl Drop for StopLog {
    fn drop(&mut self) {
        if !self.done {
            let reason = cancelkit::cancel_reason()
                .map(|r| r.to_string())
                .unwrap_or_else(|| "cancelled".into());
            let now_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or(0);
            log_line(&format!(
                "{LOG_PREFIX} cancelled tools/call sleep (request id {}) after {:.1?}: {reason} [unix_us={now_us}]",
                self.id,
                self.started.elapsed()
            ));
        }
    }
}

#[cancellable]
async fn sleep(
    Args(Sleep { seconds }): Args<Sleep>,
    progress: Progress,
    cx: Context,
) -> Result<String, JsonRpcError> {
    if !(0.0..=3600.0).contains(&seconds) {
        return Err(JsonRpcError::invalid_params(
            "sleep needs `seconds` between 0 and 3600",
        ));
    }
    let duration = Duration::from_secs_f64(seconds);
    let id = cx
        .request_id()
        .map(std::string::ToString::to_string)
        .unwrap_or_default();
    log_line(&format!(
        "{LOG_PREFIX} started tools/call sleep (request id {id}) for {duration:?}"
    ));
    let mut log = StopLog {
        id,
        started: Instant::now(),
        done: false,
    };
    let deadline = tokio::time::Instant::now() + duration;
    if progress.wanted() {
        let step = Duration::from_millis(100);
        let total = duration.as_secs_f64();
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + step, step);
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                _ = ticks.tick() => {
                    let done = log.started.elapsed().as_secs_f64().min(total);
                    let message = format!("slept {done:.1}s of {total}s");
                    progress.report(done, Some(total), Some(&message)).await;
                }
            }
        }
    } else {
        tokio::time::sleep_until(deadline).await;
    }
    log.done = true;
    Ok(format!("slept {duration:?}"))
}

/// The demo upstream: `echo` and `sleep` listed, `env` answered but not listed.
pub fn server() -> McpServer {
    McpServer::new("cancelkit-gateway-demo-upstream", env!("CARGO_PKG_VERSION"))
        .tool(Tool::new("echo", "Returns its text.", echo))
        .tool(Tool::new(
            "sleep",
            "Sleeps for the given number of seconds (reporting progress every 100 ms when asked); cancellable.",
            sleep,
        ))
        .tool(Tool::new("env", "The names of the environment variables.", env).unlisted())
}

/// Serves the demo upstream on stdin/stdout until the client hangs up.
pub async fn serve() {
    server().serve_stdio().await;
}
