//! Test support: the gateway binary as a real process on loopback, tokens for any user, and
//! the gateway's stderr (where the demo upstream logs its cancels) to wait on.
#![allow(dead_code)]

pub mod events;
pub mod http;
pub mod rmcp_server;
pub mod sdk;
pub mod workers;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The secret every test gateway shares, so tests can mint tokens for any subject.
pub const SECRET: &str = "cancelkit-gateway-test-secret-0123456789";

/// A config with the demo upstream and two users besides admin: alice and bob may call
/// tools; neither is an admin.
pub fn config(extra: &str) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
{extra}
[auth.permissions]
admin = ["admin.system_config", "tools.execute"]
alice = ["tools.execute"]
bob = ["tools.execute"]
carol = ["tools.execute"]
mallory = ["tools.execute"]
ops = ["admin.system_config"]

[[upstream]]
name = "demo"
command = "@self"
args = ["demo-upstream"]
"#
    )
}

/// A running gateway process.
pub struct Gateway {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stderr: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

/// How to start one.
#[derive(Default)]
pub struct Options<'a> {
    /// The config file's text (see [`config`]).
    pub config: String,
    /// Extra environment.
    pub env: Vec<(&'a str, String)>,
    /// `--worker-id`.
    pub worker: Option<&'a str>,
    /// Leave JWT_SECRET_KEY unset.
    pub no_secret: bool,
    /// Do not wait for "upstream ready" (which a stdio upstream logs once started): a
    /// Streamable HTTP upstream is reached at its first use.
    pub lazy_upstreams: bool,
    /// Start the gateway in a process group of its own (as a shell job is), so a signal can
    /// be sent to the whole group, as Ctrl-C in a terminal does.
    pub own_group: bool,
    /// Start it under this descriptor limit (`ulimit -n`, soft and hard).
    pub nofile: Option<u64>,
}

impl Gateway {
    /// Starts the gateway with the default test config.
    pub fn start() -> Gateway {
        Gateway::with(Options {
            config: config(""),
            ..Options::default()
        })
    }

    /// Starts the gateway and waits until it listens (and its demo upstream answers).
    pub fn with(options: Options<'_>) -> Gateway {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, &options.config).expect("write config");
        let binary = env!("CARGO_BIN_EXE_cancelkit-gateway");
        let mut command = match options.nofile {
            None => Command::new(binary),
            Some(limit) => {
                let mut shell = Command::new("sh");
                shell
                    .arg("-c")
                    .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
                    .arg(binary);
                shell
            }
        };
        command
            .arg("--config")
            .arg(&path)
            .env_remove("REDIS_URL")
            .env_remove("MCPGATEWAY_TOOL_CANCELLATION_ENABLED")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if options.no_secret {
            command.env_remove("JWT_SECRET_KEY");
        } else {
            command.env("JWT_SECRET_KEY", SECRET);
        }
        if let Some(worker) = options.worker {
            command.args(["--worker-id", worker]);
        }
        for (key, value) in &options.env {
            command.env(key, value);
        }
        if options.own_group {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        let mut child = command.spawn().expect("start the gateway binary");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        pump(child.stdout.take().unwrap(), Arc::clone(&stdout));
        pump(child.stderr.take().unwrap(), Arc::clone(&stderr));
        let deadline = Instant::now() + Duration::from_secs(30);
        let base = loop {
            if let Some(line) = stdout
                .lock()
                .unwrap()
                .lines()
                .find(|l| l.starts_with("listening on "))
            {
                let url = line["listening on ".len()..]
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .to_owned();
                break url;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the gateway exited ({status}) before listening:\n{}",
                    stderr.lock().unwrap()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not listen within 30 s:\n{}",
                stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let gateway = Gateway {
            child,
            base,
            stderr,
            stdout,
            _dir: dir,
        };
        if !options.lazy_upstreams {
            gateway.wait_for_stderr("upstream ready", Duration::from_secs(30));
        }
        gateway
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Everything the process wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Everything the process wrote on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// Waits until stderr contains `needle`; panics with stderr after `within`.
    pub fn wait_for_stderr(&self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let text = self.stderr();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "`{needle}` not on the gateway's stderr within {within:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// How many times stderr contains `needle`.
    pub fn count_stderr(&self, needle: &str) -> usize {
        self.stderr().matches(needle).count()
    }

    /// The gateway's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process ids of the gateway's children whose command line contains `needle`
    /// (Linux: read from /proc).
    pub fn children(&self, needle: &str) -> Vec<u32> {
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return found;
        };
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // The parent pid is the second field after the parenthesised command name.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if ppid == Some(self.child.id()) && String::from_utf8_lossy(&cmdline).contains(needle) {
                found.push(pid);
            }
        }
        found
    }

    /// Sends SIGTERM to the gateway's whole process group (see [`Options::own_group`]).
    pub fn terminate_group(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.child.id())])
            .status();
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    /// Waits for the process to exit (at most `within`).
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process now.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
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

/// A token for `sub` signed with [`SECRET`], valid for an hour.
pub fn token(sub: &str) -> String {
    token_with(sub, 3600, SECRET)
}

/// A token for `sub`, expiring `valid_for` seconds from now (negative: already expired),
/// signed with `secret`.
pub fn token_with(sub: &str, valid_for: i64, secret: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": sub, "exp": now + valid_for}),
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

/// A plain HTTP client (no proxy, loopback only).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("http client")
}

/// The gateway's `/metrics` text.
pub async fn metrics(gateway: &Gateway) -> String {
    client()
        .get(gateway.url("/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text")
}

/// A `tools/call` JSON-RPC request.
pub fn tools_call(id: Value, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}

/// `cancelkit check mcp` (built from `cli/`) against `gateway`'s `/mcp` at `revision`, as alice
/// with her token in `--header`: a 1 s `demo-sleep` as the slow call, `demo-echo` as the fast
/// one, 3 s waits.
pub fn cancelkit_check(gateway: &Gateway, revision: &str) -> std::process::Command {
    let cancelkit = cancelkit_tests::package_binary("cancelkit-cli", "cancelkit");
    let mut command = std::process::Command::new(cancelkit);
    command
        .args(["check", "mcp", "--url", &gateway.url("/mcp")])
        .args([
            "--header",
            &format!("Authorization: Bearer {}", token("alice")),
        ])
        .args(["--revision", revision, "--timeout", "3"])
        .args(["--tool", "demo-sleep", "--args", r#"{"seconds": 1}"#])
        .args([
            "--fast-tool",
            "demo-echo",
            "--fast-args",
            r#"{"text": "x"}"#,
        ]);
    command
}
