//! A gateway worker process for the benchmark, with what its demo upstream logs on stderr.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The release gateway binary, beside the bench binary (both under `$CARGO_TARGET_DIR/release`
/// when that is set, `target/release` otherwise).
pub fn gateway_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let path = exe.with_file_name("cancelkit-gateway");
    assert!(
        path.exists(),
        "{} is missing: `cargo xtask bench gateway` builds it first",
        path.display()
    );
    path
}

/// What the demo upstream reported on the worker's stderr so far.
#[derive(Default)]
struct Upstream {
    /// `demo-upstream: started` lines.
    started: usize,
    /// The wall-clock time (µs since the epoch) of each `demo-upstream: cancelled` line.
    stopped: Vec<u128>,
}

/// A gateway process whose stderr is watched.
pub struct Worker {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    upstream: Arc<Mutex<Upstream>>,
    _dir: tempfile::TempDir,
}

impl Worker {
    /// Starts a worker named `name` with the demo upstream, on Redis at `redis` if given.
    pub fn start(name: &str, redis: Option<&str>) -> Worker {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("gateway.toml");
        std::fs::write(
            &config,
            "listen = \"127.0.0.1:0\"\n[limits]\nmax_runs = 20000\n[[upstream]]\nname = \"demo\"\ncommand = \"@self\"\nargs = [\"demo-upstream\"]\n",
        )
        .expect("write the config");
        let mut command = Command::new(gateway_binary());
        command
            .arg("--config")
            .arg(&config)
            .args(["--worker-id", name])
            .env("JWT_SECRET_KEY", super::SECRET)
            .env("RUST_LOG", "warn")
            .env_remove("MCPGATEWAY_TOOL_CANCELLATION_ENABLED")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match redis {
            Some(url) => command.env("REDIS_URL", url),
            None => command.env_remove("REDIS_URL"),
        };
        let mut child = command.spawn().expect("start the gateway");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let upstream = Arc::new(Mutex::new(Upstream::default()));
        let seen = Arc::clone(&upstream);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("demo-upstream: started") {
                    seen.lock().unwrap().started += 1;
                } else if line.contains("demo-upstream: cancelled") {
                    let at = line
                        .split("[unix_us=")
                        .nth(1)
                        .and_then(|t| t.trim_end_matches(']').parse().ok())
                        .expect("a stop line carries its time");
                    seen.lock().unwrap().stopped.push(at);
                }
            }
        });
        let mut base = None;
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("listening on ") {
                base = rest.split_whitespace().next().map(str::to_owned);
                break;
            }
        }
        Worker {
            child,
            base: base.expect("the gateway printed its address"),
            upstream,
            _dir: dir,
        }
    }

    /// The worker's URL for `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// How many upstream tools stopped so far.
    pub fn stopped(&self) -> usize {
        self.upstream.lock().unwrap().stopped.len()
    }

    /// How many upstream tools started so far.
    pub fn started(&self) -> usize {
        self.upstream.lock().unwrap().started
    }

    /// Waits for the `n`th stop and returns its wall-clock time (µs since the epoch).
    pub async fn stop_time(&self, n: usize) -> u128 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(&at) = self.upstream.lock().unwrap().stopped.get(n - 1) {
                return at;
            }
            assert!(
                Instant::now() < deadline,
                "the upstream did not stop within 10 s"
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// Waits until `n` upstream tools have started.
    pub async fn wait_started(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.started() < n {
            assert!(
                Instant::now() < deadline,
                "the upstream did not start the call"
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// The worker's resident set (Linux `/proc`), 0 if unknown.
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
