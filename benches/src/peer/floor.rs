//! The floors: what the fastest possible hand-off costs on the same machine, in the same run, so
//! every latency has a physical reference.
//!
//! - in one process: a tokio channel send → the receiving task woken and running;
//! - between two processes: one line written to a pipe → read by the other process, with a
//!   blocking read (the kernel's floor) and with tokio's reactor on non-blocking pipes (the
//!   transport every stack's pipe rows use).

use std::io::{BufRead, Write};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::Flavor;
use super::work::mono_ns;

/// Channel send → receiving task running, in microseconds, `samples` times one at a time.
pub fn channel(flavor: Flavor, samples: usize) -> Vec<f64> {
    flavor.runtime().block_on(async move {
        let (tx, mut rx) = mpsc::channel::<u64>(1);
        let (ack, mut acked) = mpsc::channel::<()>(1);
        let receiver = tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(samples);
            while let Some(sent) = rx.recv().await {
                latencies.push((mono_ns() - sent) as f64 / 1e3);
                if ack.send(()).await.is_err() {
                    break;
                }
            }
            latencies
        });
        for _ in 0..samples {
            tx.send(mono_ns()).await.expect("the receiver runs");
            acked.recv().await.expect("the receiver acknowledges");
        }
        drop(tx);
        receiver.await.expect("the receiver ends")
    })
}

/// One line over a pipe to a child process → read there, in microseconds: `blocking` reads with
/// a plain blocking `read` on both sides, otherwise both sides use tokio's reactor.
pub fn pipe(blocking: bool, samples: usize) -> Vec<f64> {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let mode = if blocking { "blocking" } else { "tokio" };
    if blocking {
        let mut child = std::process::Command::new(exe)
            .args(["floor", mode])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the benchmark starts its own echo");
        let mut stdin = child.stdin.take().expect("piped");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut latencies = Vec::with_capacity(samples);
        let mut line = String::new();
        for _ in 0..samples {
            let sent = mono_ns();
            stdin.write_all(b"x\n").expect("the echo reads");
            line.clear();
            stdout.read_line(&mut line).expect("the echo answers");
            let read: u64 = line.trim().parse().expect("a time");
            latencies.push(read.saturating_sub(sent) as f64 / 1e3);
        }
        drop(stdin);
        let _ = child.wait();
        latencies
    } else {
        Flavor::Current.runtime().block_on(async move {
            let mut child = tokio::process::Command::new(exe)
                .args(["floor", mode])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("the benchmark starts its own echo");
            let mut stdin = child.stdin.take().expect("piped");
            let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
            let mut latencies = Vec::with_capacity(samples);
            let mut line = String::new();
            for _ in 0..samples {
                let sent = mono_ns();
                stdin.write_all(b"x\n").await.expect("the echo reads");
                line.clear();
                stdout.read_line(&mut line).await.expect("the echo answers");
                let read: u64 = line.trim().parse().expect("a time");
                latencies.push(read.saturating_sub(sent) as f64 / 1e3);
            }
            drop(stdin);
            let _ = child.wait().await;
            latencies
        })
    }
}

/// The child's side of [`pipe`]: `cancelkit-bench floor blocking|tokio` answers every line it
/// reads with the time it read it.
pub fn echo(blocking: bool) {
    if blocking {
        let stdin = std::io::stdin();
        let mut stdout = std::io::stdout();
        let mut line = String::new();
        let mut input = stdin.lock();
        while input.read_line(&mut line).is_ok_and(|n| n > 0) {
            let read = mono_ns();
            line.clear();
            if writeln!(stdout, "{read}")
                .and_then(|()| stdout.flush())
                .is_err()
            {
                break;
            }
        }
    } else {
        Flavor::Current.runtime().block_on(async {
            let (read, mut write) = super::transport::stdio();
            let mut input = BufReader::new(read);
            let mut line = String::new();
            while input.read_line(&mut line).await.is_ok_and(|n| n > 0) {
                let read = mono_ns();
                line.clear();
                if write
                    .write_all(format!("{read}\n").as_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
    }
}
