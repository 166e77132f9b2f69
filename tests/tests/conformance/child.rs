//! A server under test as a child process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A child process whose stdout and stderr are collected; killed when dropped.
pub(crate) struct Process {
    pub(crate) child: Child,
    what: &'static str,
    pub(crate) stdout: Arc<Mutex<String>>,
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl Process {
    pub(crate) fn start(command: &mut Command, what: &'static str) -> Process {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        pump(child.stdout.take().unwrap(), Arc::clone(&stdout));
        pump(child.stderr.take().unwrap(), Arc::clone(&stderr));
        Process {
            child,
            what,
            stdout,
            stderr,
        }
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The last `lines` lines of stderr.
    pub(crate) fn stderr_tail(&self, lines: usize) -> String {
        let stderr = self.stderr();
        let all: Vec<&str> = stderr.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The first stdout line that starts with `prefix`; panics if none comes `within`, or the
    /// process exits first.
    pub(crate) fn wait_for_stdout(&mut self, prefix: &str, within: Duration) -> String {
        let stdout = Arc::clone(&self.stdout);
        self.wait(within, &format!("a stdout line `{prefix}...`"), || {
            let stdout = stdout.lock().unwrap();
            stdout
                .lines()
                .find(|l| l.starts_with(prefix))
                .map(str::to_owned)
        })
    }

    /// Waits until stderr contains `needle`.
    pub(crate) fn wait_for_stderr(&mut self, needle: &str, within: Duration) {
        let stderr = Arc::clone(&self.stderr);
        self.wait(within, &format!("`{needle}` on stderr"), || {
            stderr.lock().unwrap().contains(needle).then_some(())
        });
    }

    /// Polls `found` until it has a value; panics with the output so far once `within` has
    /// passed or the process has exited.
    fn wait<T>(&mut self, within: Duration, what: &str, mut found: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(value) = found() {
                return value;
            }
            let exited = self.child.try_wait().ok().flatten();
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "{} did not print {what} within {within:?} (exit status: {exited:?}):\n--- stdout\n{}\n--- stderr\n{}",
                self.what,
                self.stdout.lock().unwrap(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pump(stream: impl std::io::Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let mut text = into.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
}
