//! Plays the RAP runtime: starts the `rap_tool_server` example, invokes its `run` process tool
//! with a 30 s script, cancels the call after one second (a synthetic "interrupted" result and
//! `/cancel_tool_call` to every tool server, without waiting), and shows that no real result
//! arrives and the script's processes are gone.
//!
//! ```text
//! cargo run -p cancelkit --features rap --example rap_runtime
//! ```
//!
//! Unix only, like the `rap` module.

#![cfg_attr(not(unix), allow(unused))]

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
#[cfg(unix)]
use cancelkit::rap::{CallTracker, Notifier, ToolServerTarget};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

#[path = "support/child.rs"]
mod child;

const TOKEN: &str = "example-token";

#[cfg(not(unix))]
fn main() {
    eprintln!("the rap feature is Unix only");
    std::process::exit(2);
}

#[cfg(unix)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Our callback endpoint's address first: the tool server only posts results to origins it
    // was told to allow.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let callback_origin = format!("http://{}", listener.local_addr()?);
    let callback_url = format!("{callback_origin}/tool_result");

    // The tool server, as a child process on a free loopback port.
    let mut server = child::example_command("rap_tool_server")?
        .args(["0", TOKEN, &callback_origin])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next_line().await?.unwrap_or_default();
    let base = first
        .strip_prefix("listening on ")
        .ok_or("the tool server did not report its address")?
        .to_owned();
    println!("tool server at {base}");

    // Our callback endpoint, where tool results arrive.
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let tracker = Arc::new(CallTracker::new(Some(Notifier::new(
        [ToolServerTarget::new(base.clone()).with_bearer_token(TOKEN)],
        Duration::from_secs(2),
    ))));
    let callback = {
        let (received, tracker) = (received.clone(), tracker.clone());
        axum::Router::new().route(
            "/tool_result",
            post(move |axum::Json(result): axum::Json<Value>| {
                let (received, tracker) = (received.clone(), tracker.clone());
                async move {
                    match tracker.deliver(result.clone()) {
                        Some(result) => received.lock().unwrap().push(result),
                        None => println!("  dropped a late result: {result}"),
                    }
                }
            }),
        )
    };
    tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            callback.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });

    // Invoke a slow process tool.
    let http = reqwest::Client::new();
    let marker = std::env::temp_dir().join(format!("rap-runtime-example-{}", std::process::id()));
    let script = format!(
        "echo $$ > {}; sleep 30 & sleep 30 & wait; echo done",
        marker.display()
    );
    let started = Instant::now();
    tracker.start("thread_1", "call_1")?;
    let status = http
        .post(format!("{base}/invoke"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "operation": "run", "arguments": {"script": script}, "id": "call_1", "call_id": "c1",
            "callback_url": callback_url, "group_id": "thread_1"
        }))
        .send()
        .await?
        .status();
    println!(
        "invoked `run` (a 30 s script): HTTP {status} after {:?}",
        started.elapsed()
    );

    // Cancel it after a second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cancelled = Instant::now();
    let interrupted = tracker
        .cancel("thread_1", "call_1")
        .ok_or("the call was not running")?;
    println!(
        "cancelled after {:?}: recorded {} at once ({:?}), /cancel_tool_call sent in the background",
        started.elapsed(),
        interrupted["text"],
        cancelled.elapsed()
    );

    // Give a late result every chance to arrive, then report.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let results = received.lock().unwrap().clone();
    println!(
        "real results received for the cancelled call: {}",
        results.len()
    );
    let group = std::fs::read_to_string(&marker).unwrap_or_default();
    let _ = std::fs::remove_file(&marker);
    let pids = std::process::Command::new("pgrep")
        .args(["-g", group.trim()])
        .output();
    match pids {
        Ok(out) if out.stdout.is_empty() => {
            println!("the script's process group {} is gone", group.trim());
        }
        Ok(out) => println!(
            "still running: {}",
            String::from_utf8_lossy(&out.stdout).trim()
        ),
        Err(_) => println!("(pgrep not available to check the processes)"),
    }
    server.kill().await?;
    Ok(())
}
