//! A RAP tool server on loopback with one process tool, `run {script}` (a shell script in its
//! own process group and temporary directory), and `sleep {seconds}`. A `/cancel_tool_call`
//! terminates the script's whole process group and removes its directory.
//!
//! Results are posted only to callback URLs on the allowed origins (scheme://host:port) given
//! after the token; by default only `http://127.0.0.1:8080`.
//!
//! Prints `listening on http://127.0.0.1:PORT` first, then logs to stderr.
//!
//! ```text
//! cargo run -p cancelkit --features rap --example rap_tool_server -- [PORT] [TOKEN] [ORIGIN...]
//! ```
//!
//! Unix only, like the `rap` module.

#![cfg_attr(not(unix), allow(unused))]

#[cfg(unix)]
use std::net::SocketAddr;
#[cfg(unix)]
use std::time::Duration;

#[cfg(unix)]
use cancelkit::cancellable;
#[cfg(unix)]
use cancelkit::rap::{ToolCall, ToolError, ToolOutput, ToolServer, process};
#[cfg(unix)]
use serde_json::{Value, json};

#[cfg(unix)]
#[path = "support/log.rs"]
mod log;

#[cfg(not(unix))]
fn main() {
    eprintln!("the rap feature is Unix only");
    std::process::exit(2);
}

#[cfg(unix)]
async fn run_script(args: Value, call: ToolCall) -> Result<ToolOutput, ToolError> {
    let script = args["script"].as_str().ok_or("`run` needs a `script`")?;
    tracing::info!(tool_call_id = %call.tool_call_id, script, "running");
    let mut command = tokio::process::Command::new("sh");
    command.arg("-c").arg(script);
    let output = process::run(command, Duration::from_secs(2)).await?;
    Ok(ToolOutput::Text(format!(
        "{}{}",
        output.stdout, output.stderr
    )))
}

#[cfg(unix)]
#[cancellable]
async fn sleep(args: Value, _call: ToolCall) -> Result<ToolOutput, ToolError> {
    let seconds = args["seconds"].as_f64().unwrap_or(1.0).clamp(0.0, 3600.0);
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    Ok(ToolOutput::Text(format!("slept {seconds} s")))
}

#[cfg(unix)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    log::init();
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let token = args.next().unwrap_or_else(|| "example-token".into());
    let mut origins: Vec<String> = args.collect();
    if origins.is_empty() {
        origins.push("http://127.0.0.1:8080".into());
    }
    let mut builder = ToolServer::builder("cancelkit-example-tools");
    for origin in &origins {
        builder = builder.allow_callback_origin(origin)?;
    }
    let server = builder
        .bearer_token(token)
        .operation(
            "run",
            "Runs a shell script; cancellable (the whole process group stops).",
            json!({"type": "object", "properties": {"script": {"type": "string"}}, "required": ["script"]}),
            run_script,
        )
        .operation(
            "sleep",
            "Sleeps; cancellable.",
            json!({"type": "object", "properties": {"seconds": {"type": "number"}}}),
            sleep,
        )
        .build();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        server
            .router()
            .into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
