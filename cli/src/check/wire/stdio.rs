//! The stdio transport: a child's stdin and stdout, one JSON-RPC frame per line. A reader task
//! routes each line until EOF, then wakes every waiter with nothing.

use std::ffi::OsString;
use std::io;
use std::process::Stdio as Piped;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::{MAX_LINE, Pending, Shared, lock};

/// How long a write to the child's stdin may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A JSON-RPC peer on the other end of a child's stdio.
pub struct Stdio {
    child: Child,
    stdin: tokio::sync::Mutex<ChildStdin>,
    pub(super) routes: Shared,
}

impl Stdio {
    /// Starts `command` with piped stdin and stdout (stderr is discarded) and the reader task.
    pub fn spawn(command: &[OsString]) -> io::Result<Stdio> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command"))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Piped::piped())
            .stdout(Piped::piped())
            .stderr(Piped::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let routes = Shared::default();
        tokio::spawn(read(BufReader::new(stdout), Arc::clone(&routes)));
        Ok(Stdio {
            child,
            stdin: tokio::sync::Mutex::new(stdin),
            routes,
        })
    }

    /// Writes one frame as a line.
    pub async fn send(&self, frame: &Value) -> io::Result<()> {
        let mut line = frame.to_string().into_bytes();
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let write = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        tokio::time::timeout(WRITE_TIMEOUT, write)
            .await
            .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
    }

    /// Registers a waiter for `id`, then sends `frame` (a request with that id).
    pub async fn request(&self, id: &Value, frame: &Value) -> io::Result<Pending> {
        let pending = lock(&self.routes).register(id)?;
        self.send(frame).await?;
        Ok(pending)
    }

    /// Ends the child: closes its stdin, and kills it if it has not exited 500 ms later.
    pub async fn shutdown(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_millis(500), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// The reader task: routes each line until EOF, then wakes every waiter with nothing.
async fn read(mut stdout: impl AsyncBufRead + Unpin, routes: Shared) {
    let mut line = Vec::new();
    while let Ok(true) = read_line(&mut stdout, &mut line).await {
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let frame = serde_json::from_str(text).unwrap_or_else(|_| json!({ "unparsed": text }));
        lock(&routes).route(frame);
    }
    let mut routes = lock(&routes);
    routes.closed = true;
    routes.pending.clear();
}

/// Reads one line into `line` (without its newline), keeping at most [`MAX_LINE`] bytes of it.
/// `Ok(false)` at EOF with nothing read.
async fn read_line(
    input: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> io::Result<bool> {
    line.clear();
    let mut any = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(any);
        }
        any = true;
        let (chunk, used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], at + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        input.consume(used);
        if done {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_cut_and_the_next_one_is_whole() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{}\nlast");
        let mut reader = BufReader::new(&input[..]);
        let mut line = Vec::new();
        assert!(read_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line.len(), MAX_LINE);
        assert!(read_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line, b"{}");
        assert!(read_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line, b"last");
        assert!(!read_line(&mut reader, &mut line).await.unwrap());
    }
}
