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

/// What an upstream reported on a watched stderr: its `TAG: started` lines, and the wall-clock
/// time of each `TAG: cancelled ... [unix_us=N]` line and of each `TAG: session deleted
/// [unix_us=N]` line (the demo upstream's, or the HTTP benchmark's upstream's).
#[derive(Clone, Default)]
pub struct StopLog(Arc<Mutex<Seen>>);

#[derive(Default)]
struct Seen {
    /// `TAG: started` lines.
    started: usize,
    /// The wall-clock time (µs since the epoch) of each `TAG: cancelled` line.
    stopped: Vec<u128>,
    /// The wall-clock time (µs since the epoch) of each `TAG: session deleted` line.
    deleted: Vec<u128>,
}

/// The `[unix_us=N]` time a log line ends with.
fn line_time(line: &str) -> u128 {
    line.split("[unix_us=")
        .nth(1)
        .and_then(|t| t.trim_end_matches(']').parse().ok())
        .expect("a stop line carries its time")
}

impl StopLog {
    /// Reads `stderr` on a thread of its own until it closes, counting `TAG: started` and
    /// `TAG: cancelled` lines (`tag` without the colon).
    pub fn watch(stderr: impl std::io::Read + Send + 'static, tag: &str) -> StopLog {
        let log = StopLog::default();
        let seen = Arc::clone(&log.0);
        let started = format!("{tag}: started");
        let cancelled = format!("{tag}: cancelled");
        let deleted = format!("{tag}: session deleted");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains(&started) {
                    seen.lock().unwrap().started += 1;
                } else if line.contains(&cancelled) {
                    seen.lock().unwrap().stopped.push(line_time(&line));
                } else if line.contains(&deleted) {
                    seen.lock().unwrap().deleted.push(line_time(&line));
                }
            }
        });
        log
    }

    /// How many upstream tools stopped so far.
    pub fn stopped(&self) -> usize {
        self.0.lock().unwrap().stopped.len()
    }

    /// How many upstream tools started so far.
    pub fn started(&self) -> usize {
        self.0.lock().unwrap().started
    }

    /// The first `session deleted` time at or after `since` (µs since the epoch), if any yet.
    pub fn deleted_since(&self, since: u128) -> Option<u128> {
        self.0
            .lock()
            .unwrap()
            .deleted
            .iter()
            .copied()
            .find(|&at| at >= since)
    }

    /// Waits (at most `wait`) for the `n`th stop and returns its wall-clock time (µs since
    /// the epoch), `None` if it did not come.
    pub async fn stop_within(&self, n: usize, wait: Duration) -> Option<u128> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(&at) = self.0.lock().unwrap().stopped.get(n - 1) {
                return Some(at);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// Waits for the `n`th stop and returns its wall-clock time (µs since the epoch).
    pub async fn stop_time(&self, n: usize) -> u128 {
        self.stop_within(n, Duration::from_secs(10))
            .await
            .expect("the upstream did not stop within 10 s")
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
}

/// A gateway process whose stderr is watched.
pub struct Worker {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    upstream: StopLog,
    _dir: tempfile::TempDir,
}

/// The sections of a worker's config with the demo upstream, each with its lines. The bench runs
/// thousands of calls as one user and opens 2,000 connections from 127.0.0.1, so the run bounds
/// and the per-user shares are raised to 20,000 and the per-address connection cap to the
/// gateway-wide one; the subject `admin` (the bench's token) is granted what an admin has.
const DEMO_SECTIONS: [(&str, &str); 4] = [
    ("cancellation", ""),
    (
        "limits",
        "max_runs = 20000\nmax_runs_per_user = 20000\nmax_upstream_calls = 20000\n\
         max_upstream_calls_per_user = 20000\n",
    ),
    ("connections", "max_connections_per_ip = 4096\n"),
    (
        "auth.permissions",
        "admin = [\"admin.system_config\", \"tools.execute\"]\n",
    ),
];

/// The demo upstream, last in every worker's config.
const DEMO_UPSTREAM: &str =
    "[[upstream]]\nname = \"demo\"\ncommand = \"@self\"\nargs = [\"demo-upstream\"]\n";

/// A worker's config with the demo upstream: [`DEMO_SECTIONS`] with the lines of `extra` in
/// the section each names (`("limits", "max_retained = 100000")`); a line whose key a section
/// already sets replaces that line. Panics on a section that is not one of [`DEMO_SECTIONS`]
/// (a mistake in the bench, not an input).
pub fn demo_config(extra: &[(&str, &str)]) -> String {
    for (section, _) in extra {
        assert!(
            DEMO_SECTIONS.iter().any(|(name, _)| name == section),
            "the demo config has no [{section}] section"
        );
    }
    let key = |line: &str| line.split('=').next().unwrap_or("").trim().to_owned();
    let mut config = String::from("listen = \"127.0.0.1:0\"\n");
    for (section, lines) in DEMO_SECTIONS {
        let added: Vec<&str> = extra
            .iter()
            .filter(|(name, _)| *name == section)
            .map(|(_, line)| *line)
            .collect();
        config.push_str(&format!("[{section}]\n"));
        for line in lines.lines() {
            if !added.iter().any(|a| key(a) == key(line)) {
                config.push_str(line);
                config.push('\n');
            }
        }
        for line in added {
            config.push_str(line);
            config.push('\n');
        }
    }
    config.push_str(DEMO_UPSTREAM);
    config
}

impl Worker {
    /// Starts a worker named `name` with the demo upstream, on Redis at `redis` if given.
    pub fn start(name: &str, redis: Option<&str>) -> Worker {
        Worker::start_with(name, &demo_config(&[]), redis)
    }

    /// Starts a worker named `name` with the configuration file `config`, on Redis at `redis`
    /// if given; a demo upstream's stderr lines are watched.
    pub fn start_with(name: &str, config: &str, redis: Option<&str>) -> Worker {
        Self::start_binary(&gateway_binary(), name, config, redis)
    }

    /// [`start_with`](Self::start_with) for the gateway binary at `binary` (another build, to
    /// compare with).
    pub fn start_binary(
        binary: &std::path::Path,
        name: &str,
        config: &str,
        redis: Option<&str>,
    ) -> Worker {
        let dir = tempfile::tempdir().expect("tempdir");
        let config_path = dir.path().join("gateway.toml");
        std::fs::write(&config_path, config).expect("write the config");
        let mut command = Command::new(binary);
        command
            .arg("--config")
            .arg(&config_path)
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
        let upstream = StopLog::watch(child.stderr.take().unwrap(), "demo-upstream");
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

    /// The gateway's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The worker's URL for `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// How many upstream tools stopped so far.
    pub fn stopped(&self) -> usize {
        self.upstream.stopped()
    }

    /// How many upstream tools started so far.
    pub fn started(&self) -> usize {
        self.upstream.started()
    }

    /// Waits for the `n`th stop and returns its wall-clock time (µs since the epoch).
    pub async fn stop_time(&self, n: usize) -> u128 {
        self.upstream.stop_time(n).await
    }

    /// Waits until `n` upstream tools have started.
    pub async fn wait_started(&self, n: usize) {
        self.upstream.wait_started(n).await;
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
