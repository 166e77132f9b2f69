//! IBM ContextForge (`mcp-contextforge-gateway`, PyPI), the peer gateway: installed by the
//! bench itself into a venv under `target/bench/contextforge/`, started on loopback with a fresh
//! SQLite database, logged into with its bootstrap admin, given the shared upstream as a
//! gateway (`POST /gateways`) and a virtual server holding its two tools (`POST /servers`), and
//! called at that server's MCP endpoint (`/servers/{id}/mcp`).
//!
//! Its settings are its defaults (one uvicorn process, stateless Streamable HTTP with JSON
//! answers, the in-process run registry of its cancellation API) except what a loopback
//! benchmark needs, listed in [`ENV`] with the reason for each.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::process::Proc;

/// The pinned release (1.1 needs Python 3.12).
pub const VERSION: &str = "1.0.7.post20260921";
const PACKAGE: &str = "mcp-contextforge-gateway";
const ADMIN_EMAIL: &str = "admin@example.com";
const ADMIN_PASSWORD: &str = "Bench-Admin-Passw0rd-0123456789!";

/// The settings given to ContextForge beside its defaults, each with why.
pub const ENV: &[(&str, &str, &str)] = &[
    (
        "JWT_SECRET_KEY",
        "cancelkit-bench-contextforge-jwt-secret-0123456789abcdef",
        "its JWT signing key (the default placeholder is refused)",
    ),
    (
        "AUTH_ENCRYPTION_SECRET",
        "cancelkit-bench-contextforge-encryption-0123456789abcdef",
        "its secret for stored credentials (the default is a placeholder)",
    ),
    (
        "BASIC_AUTH_USER",
        "bench",
        "not the default `admin` (basic auth stays off for the API)",
    ),
    (
        "BASIC_AUTH_PASSWORD",
        "Bench-Basic-Passw0rd-0123456789!",
        "not the default",
    ),
    ("PLATFORM_ADMIN_EMAIL", ADMIN_EMAIL, "the bootstrap admin"),
    (
        "PLATFORM_ADMIN_PASSWORD",
        ADMIN_PASSWORD,
        "its password, used once to log in (`POST /auth/email/login`)",
    ),
    (
        "ADMIN_REQUIRE_PASSWORD_CHANGE_ON_BOOTSTRAP",
        "false",
        "else the login is refused until the password is changed",
    ),
    (
        "TOKEN_EXPIRY",
        "240",
        "the login token's minutes (default 20, shorter than a full run)",
    ),
    (
        "SSRF_ALLOW_LOCALHOST",
        "true",
        "the upstream is on 127.0.0.1, which its SSRF guard refuses by default",
    ),
    (
        "RATE_LIMITING_ENABLED",
        "false",
        "its default limit is 100 MCP requests per minute per user; cancelkit's gateway has none",
    ),
    (
        "CACHE_TYPE",
        "memory",
        "one process, no Redis (the default `database` cache writes to SQLite)",
    ),
    ("MCPGATEWAY_UI_ENABLED", "false", "no admin UI"),
    ("LOG_LEVEL", "ERROR", "its default, stated"),
];

/// A running ContextForge with the upstream registered.
pub struct ContextForge {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The virtual server's MCP endpoint.
    pub mcp_url: String,
    /// The admin's bearer token.
    pub token: String,
    /// The names it gives the upstream's `echo` and `sleep`.
    pub echo: String,
    /// See `echo`.
    pub sleep: String,
    /// The server process (its group is killed when dropped).
    pub proc: Proc,
    /// Its log file (kept after the run).
    pub log: PathBuf,
}

/// `target/bench/contextforge/`.
fn home() -> PathBuf {
    crate::report::bench_dir().join("contextforge")
}

fn installed_version(python: &Path) -> Option<String> {
    let out = Command::new(python)
        .args([
            "-c",
            &format!("import importlib.metadata as m; print(m.version('{PACKAGE}'))"),
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Installs the pinned release into `target/bench/contextforge/venv` unless it is there;
/// returns the venv's `bin/`.
pub fn install() -> Result<PathBuf, String> {
    let venv = home().join("venv");
    let bin = venv.join("bin");
    if installed_version(&bin.join("python")).as_deref() == Some(VERSION) {
        return Ok(bin);
    }
    std::fs::create_dir_all(home()).map_err(|e| e.to_string())?;
    println!("installing {PACKAGE}=={VERSION} into {}", venv.display());
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .map_err(|e| format!("python3 -m venv: {e}"))?;
    if !status.success() {
        return Err(format!("python3 -m venv exited with {status}"));
    }
    let log = home().join("pip.log");
    let status = Command::new(bin.join("pip"))
        .args(["install", "--disable-pip-version-check", "--quiet"])
        .arg(format!("{PACKAGE}=={VERSION}"))
        .stdout(std::fs::File::create(&log).map_err(|e| e.to_string())?)
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| format!("pip: {e}"))?;
    if !status.success() {
        return Err(format!(
            "pip install exited with {status} (see {})",
            log.display()
        ));
    }
    match installed_version(&bin.join("python")) {
        Some(v) if v == VERSION => Ok(bin),
        other => Err(format!("after pip install the version is {other:?}")),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn json_ok(
    response: reqwest::Result<reqwest::Response>,
    what: &str,
) -> Result<Value, String> {
    let response = response.map_err(|e| format!("{what}: {e}"))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| format!("{what}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{what} answered {status}: {text:.500}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("{what}: {e}: {text:.500}"))
}

impl ContextForge {
    /// Installs (if needed) and starts ContextForge in `target/bench/contextforge/run-LABEL/`
    /// (emptied first; its database and log stay there after the run), then registers
    /// `upstream` (its MCP URL) as the gateway `up` and a virtual server `bench` with its tools.
    /// `extra` adds settings.
    pub async fn start(
        label: &str,
        upstream: &str,
        extra: &[(&str, &str)],
    ) -> Result<ContextForge, String> {
        let bin = tokio::task::block_in_place(install)?;
        let dir = home().join(format!("run-{label}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = free_port();
        let log = dir.join("contextforge.log");
        let mut command = Command::new(bin.join("mcpgateway"));
        command
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &dir)
            .env("LANG", "C.UTF-8")
            .env(
                "DATABASE_URL",
                format!("sqlite:///{}", dir.join("mcp.db").display()),
            )
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .stderr(Stdio::from(
                std::fs::File::options()
                    .append(true)
                    .open(&log)
                    .map_err(|e| e.to_string())?,
            ));
        for (name, value, _) in ENV {
            command.env(name, value);
        }
        for (name, value) in extra {
            command.env(name, value);
        }
        let proc = Proc::spawn(command, "ContextForge");
        let started = Self::register(&base_url(port), upstream).await;
        match started {
            Ok((mcp_url, token, echo, sleep)) => Ok(ContextForge {
                base: base_url(port),
                mcp_url,
                token,
                echo,
                sleep,
                proc,
                log,
            }),
            Err(e) => Err(format!("{e}\n{}", log_tail(&log))),
        }
    }

    /// The last lines of its log, to say why it failed.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }

    /// Waits for `/health`, logs in, registers the upstream and the virtual server; the MCP
    /// URL, the token, and the names of `echo` and `sleep`.
    async fn register(
        base: &str,
        upstream: &str,
    ) -> Result<(String, String, String, String), String> {
        let base = base.to_owned();
        let http = super::client::http_client();
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Ok(r) = http.get(format!("{base}/health")).send().await
                && r.status().is_success()
            {
                break;
            }
            if Instant::now() > deadline {
                return Err("ContextForge did not answer /health within 180 s".into());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let login = json_ok(
            http.post(format!("{base}/auth/email/login"))
                .json(&json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}))
                .send()
                .await,
            "POST /auth/email/login",
        )
        .await?;
        let token = login["access_token"]
            .as_str()
            .ok_or_else(|| format!("no access_token in {login}"))?
            .to_owned();
        json_ok(
            http.post(format!("{base}/gateways"))
                .bearer_auth(&token)
                .json(&json!({"name": "up", "url": upstream, "transport": "STREAMABLEHTTP"}))
                .send()
                .await,
            "POST /gateways",
        )
        .await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let tools = loop {
            let tools = json_ok(
                http.get(format!("{base}/tools"))
                    .bearer_auth(&token)
                    .send()
                    .await,
                "GET /tools",
            )
            .await?;
            let list = tools
                .as_array()
                .cloned()
                .or_else(|| tools["items"].as_array().cloned())
                .unwrap_or_default();
            let found = |original: &str| {
                list.iter()
                    .find(|t| t["originalName"] == original)
                    .map(|t| (t["id"].clone(), t["name"].as_str().unwrap_or("").to_owned()))
            };
            if let (Some(echo), Some(sleep)) = (found("echo"), found("sleep")) {
                break (echo, sleep);
            }
            if Instant::now() > deadline {
                return Err(format!("the upstream's tools never appeared: {tools:.500}"));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let ((echo_id, echo), (sleep_id, sleep)) = tools;
        let server = json_ok(
            http.post(format!("{base}/servers"))
                .bearer_auth(&token)
                .json(&json!({"server": {
                    "name": "bench",
                    "description": "cancelkit bench",
                    "associated_tools": [echo_id, sleep_id],
                }}))
                .send()
                .await,
            "POST /servers",
        )
        .await?;
        let id = server["id"]
            .as_str()
            .ok_or_else(|| format!("no server id in {server}"))?;
        Ok((format!("{base}/servers/{id}/mcp"), token, echo, sleep))
    }
}

fn base_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// The last 30 lines of the log at `path`.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    format!(
        "the last lines of {}:\n{}",
        path.display(),
        lines[lines.len().saturating_sub(30)..].join("\n")
    )
}
