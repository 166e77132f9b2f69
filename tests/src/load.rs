//! Load against a real MCP server process: a client that floods it with slow `tools/call`
//! requests while it reads none of the answers, then reads again.
//!
//! Shared by the short load test (`cargo xtask test`) and the full-size run in
//! `cargo xtask bench load`, so both measure the same thing the same way. Plain threads and
//! pipes, no async runtime: the client must not be the bottleneck or hide one.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How many of the first requests are cancelled once the client reads again.
pub const CANCELLED: usize = 16;

/// What one run observed.
#[derive(Debug, Clone)]
pub struct BacklogReport {
    /// Requests written.
    pub requests: usize,
    /// Whether the client's writes stalled while it read nothing: the server stopped reading.
    pub writes_stalled: bool,
    /// Requests the client had written when its writes stalled.
    pub written_when_stalled: usize,
    /// The server's peak resident memory while the client read nothing, in bytes.
    pub peak_rss_stalled: u64,
    /// The server's peak resident memory over the whole run, in bytes.
    pub peak_rss: u64,
    /// Requests answered with -32050 Server overloaded.
    pub refused: usize,
    /// Requests answered with anything else before the end (the slow ones never finish).
    pub other_answers: usize,
    /// From the client reading again to the answer of a `ping` written after the backlog.
    pub ping_after: Duration,
    /// Pings and echoes refused (-32050) and sent again right after the cancels: the cancelled
    /// handlers free their places as they unwind, a moment after the cancels are read.
    pub retries_after_cancel: usize,
    /// Whether a `tools/call` echo sent after the cancels was served.
    pub echo_served: bool,
    /// Cancelled requests that still got a response (MCP wants none).
    pub answered_after_cancel: usize,
    /// Cancelled requests whose tool the server logged as stopped.
    pub stopped_after_cancel: usize,
}

fn rss_and_peak(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn ping(n: usize) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":\"ping-{n}\",\"method\":\"ping\"}}\n")
}

fn echo(n: usize) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"echo-{n}\",\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"after\"}}}}}}\n"
    )
}

fn slow_call(id: usize) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"sleep\",\"arguments\":{{\"seconds\":3600}}}}}}\n"
    )
}

/// Kills the server if the run panics half-way.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the scenario against the MCP server binary `server` (the `mcp_server` example):
///
/// 1. write `requests` slow `tools/call` requests (each sleeps an hour) without reading;
/// 2. once the writes stall (or all are written), keep not reading for `stall`, sampling the
///    server's memory;
/// 3. read again; after the last request, cancel the first [`CANCELLED`] ones, then send a
///    `ping`, then an echo `tools/call`, each sent again while refused with -32050, and wait
///    for their answers;
/// 4. hang up and check the server's log for the stopped tools.
///
/// Every wait is bounded; a server that never answers fails the run with a panic.
pub fn mcp_server_backlog(server: &Path, requests: usize, stall: Duration) -> BacklogReport {
    let log_path = std::env::temp_dir().join(format!(
        "cancelkit-load-{}-{}.log",
        std::process::id(),
        requests
    ));
    let log = std::fs::File::create(&log_path).expect("a log file in the temp dir");
    let child = Command::new(server)
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", server.display()));
    let mut child = Reaper(child);
    let pid = child.0.id();
    let mut stdin = child.0.stdin.take().expect("piped");
    let stdout = child.0.stdout.take().expect("piped");

    // The writer: all requests, then (when told) the cancels and a first ping.
    let written = Arc::new(AtomicUsize::new(0));
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let writer = {
        let written = Arc::clone(&written);
        std::thread::spawn(move || {
            let mut chunk = String::with_capacity(64 * 1024);
            for id in 0..requests {
                chunk.push_str(&slow_call(id));
                if chunk.len() >= 60 * 1024 || id + 1 == requests {
                    stdin.write_all(chunk.as_bytes()).expect("the server reads");
                    written.store(id + 1, Ordering::Relaxed);
                    chunk.clear();
                }
            }
            go_rx.recv().expect("told to go on");
            let mut tail = String::new();
            for id in 0..CANCELLED {
                tail.push_str(&format!(
                    "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{id},\"reason\":\"load test\"}}}}\n"
                ));
            }
            tail.push_str(&ping(1));
            stdin.write_all(tail.as_bytes()).expect("the server reads");
            stdin
        })
    };

    // Not reading: wait until the writes stall (no progress for 500 ms) or all are written.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = usize::MAX;
    let mut quiet_since = Instant::now();
    let mut peak_rss_stalled = 0;
    loop {
        assert!(
            Instant::now() < deadline,
            "the client's writes neither stall nor finish"
        );
        std::thread::sleep(Duration::from_millis(50));
        if let Some((_, peak)) = rss_and_peak(pid) {
            peak_rss_stalled = peak_rss_stalled.max(peak);
        }
        let now = written.load(Ordering::Relaxed);
        if now == requests {
            break;
        }
        if now != last {
            last = now;
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= Duration::from_millis(500) {
            break;
        }
    }
    let written_when_stalled = written.load(Ordering::Relaxed);
    let writes_stalled = written_when_stalled < requests;
    let stall_end = Instant::now() + stall;
    while Instant::now() < stall_end {
        std::thread::sleep(Duration::from_millis(50));
        if let Some((_, peak)) = rss_and_peak(pid) {
            peak_rss_stalled = peak_rss_stalled.max(peak);
        }
    }
    assert_eq!(
        written.load(Ordering::Relaxed),
        written_when_stalled,
        "nothing more was written while the client read nothing"
    );

    // Reading again.
    let reading_from = Instant::now();
    let (answers_tx, answers_rx) = mpsc::channel::<Value>();
    let reader = std::thread::spawn(move || -> Result<(), String> {
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| format!("cannot read the server's output: {e}"))?;
            let message: Value = serde_json::from_str(&line).map_err(|e| {
                format!("the server wrote a line that is not JSON ({e}): {line:.200}")
            })?;
            if answers_tx.send(message).is_err() {
                break;
            }
        }
        Ok(())
    });
    let mut refused = 0;
    let mut other_answers = 0;
    let mut answered_after_cancel = 0;
    let mut ping_after = None;
    let mut echo_served = false;
    let mut retries_after_cancel = 0;
    let mut told = false;
    let mut stdin = None;
    let mut writer = Some(writer);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !echo_served {
        if !told && written.load(Ordering::Relaxed) == requests {
            go_tx.send(()).expect("the writer waits");
            told = true;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        assert!(
            !remaining.is_zero(),
            "the server drains its backlog, answers a ping and serves an echo: {refused} \
             refused and {other_answers} other answers read, {} of {requests} requests \
             written, ping answered: {}, {retries_after_cancel} retries",
            written.load(Ordering::Relaxed),
            ping_after.is_some()
        );
        let message = match answers_rx.recv_timeout(remaining.min(Duration::from_millis(100))) {
            Ok(message) => message,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let why = match reader.join() {
                    Ok(Ok(())) => "the server closed its output".to_owned(),
                    Ok(Err(why)) => why,
                    Err(_) => "the reading thread panicked".to_owned(),
                };
                panic!(
                    "no answer to the ping: {why} ({refused} refused and {other_answers} other \
                     answers read, {} of {requests} requests written)",
                    written.load(Ordering::Relaxed)
                );
            }
        };
        let overloaded = message["error"]["code"] == -32050;
        let next = match &message["id"] {
            // The cancelled handlers free their places as they unwind, just after the cancels
            // are read: a ping or echo sent at once may still be refused, and is sent again,
            // as the -32050 error asks.
            Value::String(id) if id.starts_with("ping-") || id.starts_with("echo-") => {
                let pinging = id.starts_with("ping-");
                if overloaded {
                    retries_after_cancel += 1;
                    assert!(retries_after_cancel < 200, "still refused after 200 tries");
                    std::thread::sleep(Duration::from_millis(10));
                    Some(if pinging {
                        ping(retries_after_cancel + 1)
                    } else {
                        echo(retries_after_cancel + 1)
                    })
                } else if pinging {
                    assert_eq!(message["result"], serde_json::json!({}), "{message}");
                    ping_after = Some(reading_from.elapsed());
                    Some(echo(1))
                } else {
                    assert_eq!(
                        message["result"]["content"][0]["text"], "after",
                        "{message}"
                    );
                    echo_served = true;
                    None
                }
            }
            Value::Number(id) if (id.as_u64().unwrap_or(u64::MAX) as usize) < CANCELLED => {
                answered_after_cancel += 1;
                None
            }
            _ if overloaded => {
                refused += 1;
                None
            }
            _ => {
                other_answers += 1;
                None
            }
        };
        if let Some(line) = next {
            let stdin = stdin.get_or_insert_with(|| {
                writer
                    .take()
                    .expect("one writer")
                    .join()
                    .expect("the writer finished")
            });
            stdin.write_all(line.as_bytes()).expect("the server reads");
        }
    }
    let peak_rss = rss_and_peak(pid).map_or(peak_rss_stalled, |(_, peak)| peak);
    drop(stdin); // hang up: the server cancels everything and exits
    let exit_deadline = Instant::now() + Duration::from_secs(15);
    while child.0.try_wait().expect("waitable").is_none() {
        assert!(
            Instant::now() < exit_deadline,
            "the server exits after the client hangs up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Whatever arrived after the ping still counts (answers are drained before exit).
    for message in answers_rx.try_iter() {
        if message["id"]
            .as_u64()
            .is_some_and(|id| (id as usize) < CANCELLED)
        {
            answered_after_cancel += 1;
        }
    }
    reader.join().ok();
    let mut text = String::new();
    std::fs::File::open(&log_path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .expect("the server's log");
    let _ = std::fs::remove_file(&log_path);
    let stopped_after_cancel = (0..CANCELLED)
        .filter(|id| {
            text.lines().any(|line| {
                line.contains("sleep tool stopped")
                    && line.contains(&format!("request_id={id} "))
                    && line.contains("load test")
            })
        })
        .count();
    BacklogReport {
        requests,
        writes_stalled,
        written_when_stalled,
        peak_rss_stalled,
        peak_rss,
        refused,
        other_answers,
        ping_after: ping_after.expect("the echo is sent after the ping's answer"),
        retries_after_cancel,
        echo_served,
        answered_after_cancel,
        stopped_after_cancel,
    }
}
