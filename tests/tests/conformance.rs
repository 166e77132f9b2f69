//! The official MCP conformance suite, `@modelcontextprotocol/conformance` (pinned in
//! tests/node/package.json, installed under target/interop/node), run as its CLI against two
//! Streamable HTTP servers of ours:
//!
//! - the `mcp_server` example, started with `--http 127.0.0.1:0`;
//! - the gateway's `/mcp` (binary `cancelkit-gateway` with its demo upstream), through a
//!   reverse proxy in this file that adds the gateway's bearer token, which the CLI cannot send.
//!
//! Both are tools-only servers, so only the scenarios that need nothing but tools run (see
//! [`SCENARIOS`]; why each other scenario does not apply is written there too). Each runs once
//! per revision it covers — 2025-11-25 (`initialize`, sessions) and 2026-07-28 (no handshake,
//! `_meta` on every request) are different wires — and every check of it must pass: no check
//! `FAILURE` (a `WARNING` is a SHOULD the suite reports but does not fail), and at least one
//! `SUCCESS`. A check the suite cannot exercise on a tools-only server (it calls a fixture tool
//! such as `test_logging_tool`) is listed with the reason, and not counted. A check a target
//! fails because of a bug of its own is listed in that target's known bugs ([`GATEWAY_BUGS`]),
//! printed on every run, and must keep failing: once it passes, the test fails until the entry
//! is removed.
//!
//! The CLI needs `fs.globSync` (Node 22); tests/node/conformance_shim.mjs, preloaded with
//! `--import`, supplies it from the pinned `glob` package on Node 20. No Node, or no npm, fails
//! the test: it never skips.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// The CLI's entry point, under the installed `node_modules`.
const CLI: &str = "node_modules/@modelcontextprotocol/conformance/dist/index.js";
/// The `--import` preload that gives Node 20 `fs.globSync` (copied next to `node_modules`).
const SHIM: &str = "./conformance_shim.mjs";
/// How long one scenario may take, CLI start included.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);

/// The stateful revision: `initialize`, `Mcp-Session-Id`.
const V2025: &str = "2025-11-25";
/// The stateless revision: `server/discover`, `_meta` on every request.
const V2026: &str = "2026-07-28";

/// One server scenario of the suite that a tools-only server can pass.
struct Scenario {
    /// Its name in `conformance list --server`.
    name: &'static str,
    /// The revisions (`--spec-version`) it runs at.
    revisions: &'static [&'static str],
    /// Checks of it that need more than tools (the check id, then why); not counted.
    not_applicable: &'static [(&'static str, &'static str)],
}

/// Why the `server-stateless` checks that call a fixture tool do not apply.
const FIXTURE_TOOL: &str = "calls a fixture tool of the suite's reference server (test_*), which a \
                            tools-only server with echo/sleep/ask_client does not have";
/// Why the `caching` checks of prompts and resources do not apply.
const NO_PROMPTS_OR_RESOURCES: &str =
    "a tools-only server has no prompts or resources: the method is not found";

/// Every scenario that applies to a server whose only feature is tools (`echo {text}`,
/// `sleep {seconds}`, `ask_client {timeout_ms}`), at the revisions it covers.
///
/// The suite's other server scenarios (0.2.0-alpha.12) do not apply:
/// - `logging-set-level`: `logging/setLevel` needs the logging capability;
///   `completion-complete`: the completions capability and a prompt `test_prompt_with_arguments`.
/// - `tools-call-simple-text`, `-image`, `-audio`, `-embedded-resource`, `-mixed-content`,
///   `-with-logging`, `-error`, `-with-progress`, `-sampling`, `-elicitation`: each calls a fixture
///   tool (`test_simple_text`, `test_image_content`, ...) of the reference server.
/// - `json-schema-2020-12`: a tool `json_schema_2020_12_tool` with a 2020-12 input schema.
/// - `elicitation-sep1034-defaults`, `elicitation-sep1330-enums`: fixture tools that elicit.
/// - `server-sse-polling` (pending in the suite): a tool `test_reconnection` that closes its
///   stream mid-call so the client resumes with `Last-Event-ID`.
/// - `resources-list`, `resources-read-text`, `resources-read-binary`,
///   `resources-templates-read`, `resources-subscribe`, `resources-unsubscribe`,
///   `sep-2164-resource-not-found`: resources; `prompts-list`, `prompts-get-simple`,
///   `prompts-get-with-args`, `prompts-get-embedded-resource`, `prompts-get-with-image`: prompts.
/// - `sep-2640-skills-directory`, `-enumeration`, `-manifest`: the skills extension (resources).
/// - `tasks-*` (ten, the `io.modelcontextprotocol/tasks` extension): fixture tools
///   (`slow_compute`, `greet`, `failing_job`, `confirm_delete`, ...); `tasks-status-notifications`
///   is a placeholder that only reports SKIPPED in this release.
/// - `input-required-result-*` except `-unsupported-methods`: fixture tools and a prompt
///   (`test_input_required_result_*`) that answer with an InputRequiredResult. (Three of them,
///   `-missing-input-response`, `-ignore-extra-params` and `-validate-input`, report no failure
///   against a server without those tools, only because they never reach what they test.)
/// - `http-custom-header-server-validation`: a tool whose input schema annotates a string
///   parameter with `x-mcp-header`.
const SCENARIOS: &[Scenario] = &[
    // initialize answers with server info, version and capabilities; the session id is
    // visible ASCII.
    Scenario {
        name: "server-initialize",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // DELETE with the session id ends the session; the id then gets 404.
    Scenario {
        name: "server-session-lifecycle",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // ping answers {}.
    Scenario {
        name: "ping",
        revisions: &[V2025],
        not_applicable: &[],
    },
    // tools/list: every tool has a name (SEP-986 format), a description and an input schema;
    // at 2026-07-28 the order is the same on every call.
    Scenario {
        name: "tools-list",
        revisions: &[V2025, V2026],
        not_applicable: &[],
    },
    // Three concurrent POSTs (tools/list) on one session each get their answer (SSE or JSON).
    Scenario {
        name: "server-sse-multiple-streams",
        revisions: &[V2025, V2026],
        not_applicable: &[],
    },
    // A non-loopback Host/Origin gets 4xx, a loopback one is served.
    Scenario {
        name: "dns-rebinding-protection",
        revisions: &[V2025, V2026],
        not_applicable: &[],
    },
    // SEP-2575: _meta validation (-32602 and 400), server/discover, UnsupportedProtocolVersion
    // (400), HeaderMismatch -32020 (400), removed and unknown methods (404 and -32601), error ids.
    Scenario {
        name: "server-stateless",
        revisions: &[V2026],
        not_applicable: &[
            // tools/call test_missing_capability (needs the client's sampling capability)
            (
                "sep-2575-server-rejects-undeclared-capability",
                FIXTURE_TOOL,
            ),
            ("sep-2575-missing-capability-http-400", FIXTURE_TOOL),
            // tools/call test_streaming_elicitation
            (
                "sep-2575-http-server-no-independent-requests-on-stream",
                FIXTURE_TOOL,
            ),
            // tools/call test_logging_tool
            ("sep-2575-server-no-log-without-loglevel", FIXTURE_TOOL),
        ],
    },
    // SEP-2549: tools/list carries ttlMs (an integer >= 0) and cacheScope (public/private).
    Scenario {
        name: "caching",
        revisions: &[V2026],
        not_applicable: &[
            (
                "sep-2549-prompts-list-caching-hints",
                NO_PROMPTS_OR_RESOURCES,
            ),
            (
                "sep-2549-resources-list-caching-hints",
                NO_PROMPTS_OR_RESOURCES,
            ),
            (
                "sep-2549-resources-templates-list-caching-hints",
                NO_PROMPTS_OR_RESOURCES,
            ),
            (
                "sep-2549-resources-read-caching-hints",
                NO_PROMPTS_OR_RESOURCES,
            ),
        ],
    },
    // SEP-2243: Mcp-Method / Mcp-Name that are missing or disagree with the body get 400
    // (HeaderMismatch -32020 is a SHOULD); header names are case-insensitive, values are not,
    // whitespace around a value is trimmed. Uses the first listed tool.
    Scenario {
        name: "http-header-validation",
        revisions: &[V2026],
        not_applicable: &[],
    },
    // SEP-2322: tools/list and prompts/list never answer with an InputRequiredResult.
    Scenario {
        name: "input-required-result-unsupported-methods",
        revisions: &[V2026],
        not_applicable: &[],
    },
];

/// A check a target is known to fail, because of a bug of the target (not of the suite, and not
/// because the check does not apply). Strict: once the check passes, the test fails until the
/// entry is removed.
struct KnownFailure {
    revision: &'static str,
    scenario: &'static str,
    /// The check id (every check with this id in the scenario).
    check: &'static str,
    /// What the target does wrong.
    bug: &'static str,
}

/// The gateway's `/mcp` at 2026-07-28 (`gateway/src/front/mcp.rs`, on `McpHttpServer`).
const GATEWAY_BUGS: &[KnownFailure] = &[];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_server_example_over_streamable_http_passes_the_conformance_suite() {
    let suite = Suite::install();
    let mut server = Process::start(
        Command::new(cancelkit_tests::example("mcp_server"))
            .args(["--http", "127.0.0.1:0"])
            .env("RUST_LOG", "info"),
        "the mcp_server example",
    );
    let line = server.wait_for_stdout("listening on ", Duration::from_secs(60));
    let url = line["listening on ".len()..].trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "expected `listening on http://<bound addr>/mcp`, got {line:?}"
    );
    let outcome = suite.run_all("the mcp_server example", &url, &[]).await;
    outcome.assert_passed(&server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_mcp_endpoint_passes_the_conformance_suite() {
    let suite = Suite::install();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("gateway.toml");
    // No jwt_secret: the gateway makes one and prints a token for `admin`, who may call tools.
    std::fs::write(
        &config,
        r#"
listen = "127.0.0.1:0"

[auth.permissions]
admin = ["admin.system_config", "tools.execute"]

[[upstream]]
name = "demo"
command = "@self"
args = ["demo-upstream"]
"#,
    )
    .expect("write the gateway config");
    let mut gateway = Process::start(
        Command::new(cancelkit_tests::package_binary(
            "cancelkit-gateway",
            "cancelkit-gateway",
        ))
        .arg("--config")
        .arg(&config)
        .env_remove("JWT_SECRET_KEY")
        .env_remove("REDIS_URL")
        .env_remove("MCPGATEWAY_TOOL_CANCELLATION_ENABLED")
        .env("RUST_LOG", "info"),
        "the gateway",
    );
    let token = gateway.wait_for_stdout("admin token: ", Duration::from_secs(60))
        ["admin token: ".len()..]
        .trim()
        .to_owned();
    let listening = gateway.wait_for_stdout("listening on ", Duration::from_secs(60));
    let base = listening["listening on ".len()..]
        .split_whitespace()
        .next()
        .expect("listening on <url> (worker <id>)")
        .to_owned();
    gateway.wait_for_stderr("upstream ready", Duration::from_secs(60));

    let proxy = token_proxy(base, token).await;
    let url = format!("http://{proxy}/mcp");
    let outcome = suite
        .run_all("the gateway's /mcp", &url, GATEWAY_BUGS)
        .await;
    outcome.assert_passed(&gateway);
}

// ---------------------------------------------------------------------------------------------
// The suite: one CLI run per scenario and revision, its checks read from checks.json.

/// The installed CLI.
struct Suite {
    /// target/interop/node: `node_modules` and the shim.
    node_dir: PathBuf,
}

impl Suite {
    /// Installs the pinned npm peers (panics if npm is missing or fails) and checks Node runs.
    fn install() -> Suite {
        let node_dir = cancelkit_tests::node::install();
        let version = Command::new("node")
            .arg("--version")
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run node, which the MCP conformance suite needs (Node 20 or later): {e}"
                )
            });
        assert!(
            version.status.success(),
            "`node --version` failed: {}",
            String::from_utf8_lossy(&version.stderr)
        );
        for file in [CLI, SHIM] {
            assert!(
                node_dir.join(file).exists(),
                "{} is missing: is @modelcontextprotocol/conformance in tests/node/package.json?",
                node_dir.join(file).display()
            );
        }
        Suite { node_dir }
    }

    /// Runs every scenario of [`SCENARIOS`] at each of its revisions against `url`.
    async fn run_all(&self, target: &str, url: &str, known: &'static [KnownFailure]) -> Outcome {
        let out = tempfile::tempdir().expect("a temporary directory");
        let mut outcome = Outcome {
            target: target.to_owned(),
            url: url.to_owned(),
            summary: String::new(),
            failures: Vec::new(),
            known,
            known_seen: BTreeSet::new(),
        };
        for scenario in SCENARIOS {
            for revision in scenario.revisions {
                let dir = out.path().join(format!("{revision}-{}", scenario.name));
                let run = self.run(url, scenario.name, revision, &dir).await;
                outcome.judge(scenario, revision, run);
            }
        }
        outcome
    }

    /// Runs one scenario at one revision; its checks, or why there are none.
    async fn run(&self, url: &str, scenario: &str, revision: &str, dir: &Path) -> Run {
        let mut command = tokio::process::Command::new("node");
        command
            .args(["--import", SHIM, CLI, "server"])
            .args(["--url", url, "--scenario", scenario])
            .args(["--spec-version", revision, "--output-dir"])
            .arg(dir)
            .current_dir(&self.node_dir)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let output = match tokio::time::timeout(SCENARIO_TIMEOUT, command.output()).await {
            Ok(output) => output.unwrap_or_else(|e| panic!("cannot run node: {e}")),
            Err(_) => {
                return Run::Broken(format!(
                    "the conformance CLI did not finish within {SCENARIO_TIMEOUT:?}"
                ));
            }
        };
        let log = format!(
            "exit status {}\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let Some(file) = find_checks(dir) else {
            return Run::Broken(format!("the CLI wrote no checks.json\n{log}"));
        };
        let text = std::fs::read_to_string(&file).expect("read checks.json");
        match serde_json::from_str::<Vec<Value>>(&text) {
            Ok(checks) => Run::Checks(checks),
            Err(e) => Run::Broken(format!("checks.json does not parse: {e}\n{text}\n{log}")),
        }
    }
}

/// `checks.json` somewhere under `dir` (the CLI writes `<dir>/server-<scenario>-<time>/`).
fn find_checks(dir: &Path) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_checks(&path) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == "checks.json") {
            return Some(path);
        }
    }
    None
}

/// What one CLI run produced.
enum Run {
    Checks(Vec<Value>),
    /// It crashed, timed out, skipped the scenario or wrote nothing readable.
    Broken(String),
}

/// Every run's verdict for one target.
struct Outcome {
    target: String,
    url: String,
    /// One line per run, plus each warning and each not-applicable check that did not pass.
    summary: String,
    /// What makes the test fail, in full.
    failures: Vec<String>,
    /// The target's known bugs.
    known: &'static [KnownFailure],
    /// Those that failed as known (their indexes in `known`).
    known_seen: BTreeSet<usize>,
}

impl Outcome {
    fn judge(&mut self, scenario: &Scenario, revision: &str, run: Run) {
        let label = format!("{} @ {revision}", scenario.name);
        let checks = match run {
            Run::Checks(checks) => checks,
            Run::Broken(why) => {
                let _ = writeln!(self.summary, "BROKEN  {label}: see below");
                self.failures.push(format!("{label}: {why}"));
                return;
            }
        };
        let status = |c: &Value| c["status"].as_str().unwrap_or("?").to_owned();
        let id = |c: &Value| c["id"].as_str().unwrap_or("?").to_owned();
        let (mut passed, mut failed, mut known_failed, mut warned) = (0, 0, 0, 0);
        let mut details = String::new();
        for check in &checks {
            let (id, status) = (id(check), status(check));
            if let Some((_, why)) = scenario.not_applicable.iter().find(|(n, _)| *n == id) {
                if status != "SUCCESS" {
                    let _ = writeln!(details, "    n/a     {id} ({status}): {why}");
                }
                continue;
            }
            match status.as_str() {
                "SUCCESS" => passed += 1,
                "FAILURE" => {
                    let bug = self.known.iter().position(|k| {
                        k.revision == revision && k.scenario == scenario.name && k.check == id
                    });
                    if let Some(bug) = bug {
                        known_failed += 1;
                        self.known_seen.insert(bug);
                        let _ = writeln!(details, "    KNOWN   {id}: {}", self.known[bug].bug);
                    } else {
                        failed += 1;
                        self.failures.push(format!(
                            "{label}: check {id} failed:\n{}",
                            serde_json::to_string_pretty(check).unwrap()
                        ));
                    }
                }
                "WARNING" => {
                    warned += 1;
                    let _ = writeln!(
                        details,
                        "    warning {id}: {}",
                        check["errorMessage"].as_str().unwrap_or("")
                    );
                }
                // INFO and SKIPPED (a feature the server does not advertise) count neither way.
                _ => {}
            }
        }
        if passed == 0 {
            self.failures.push(format!(
                "{label}: no applicable check passed, so the scenario tested nothing:\n{}",
                serde_json::to_string_pretty(&checks).unwrap()
            ));
        }
        let verdict = if failed == 0 && passed > 0 {
            "ok     "
        } else {
            "FAILED "
        };
        let _ = writeln!(
            self.summary,
            "{verdict} {label}: {passed} passed, {failed} failed, {known_failed} known bugs, \
             {warned} warnings"
        );
        self.summary.push_str(&details);
    }

    /// Prints the summary; panics with it, every failure in full, and each known bug that no
    /// longer fails.
    fn assert_passed(mut self, process: &Process) {
        for (index, known) in self.known.iter().enumerate() {
            if !self.known_seen.contains(&index) {
                self.failures.push(format!(
                    "{} @ {}: check {} is listed as a known bug ({}) but did not fail: if it is \
                     fixed, remove it from the list",
                    known.scenario, known.revision, known.check, known.bug
                ));
            }
        }
        if self.failures.is_empty() {
            println!("{} ({}):\n{}", self.target, self.url, self.summary);
        } else {
            panic!(
                "{} ({}) fails the MCP conformance suite:\n\n{}\n\n{}\n\n--- its stderr (the end)\n{}",
                self.target,
                self.url,
                self.summary,
                self.failures.join("\n\n"),
                process.stderr_tail(200)
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The token-adding reverse proxy in front of the gateway.

/// Where the proxy sends requests, and the token it adds.
struct Upstream {
    client: reqwest::Client,
    /// `http://127.0.0.1:PORT`, without a path.
    base: String,
    authorization: HeaderValue,
}

/// Starts a reverse proxy on 127.0.0.1 that forwards every request to `base` (same method, path,
/// query, headers and body; `Host` and `Origin` too, so the gateway judges them as sent) with
/// `Authorization: Bearer <token>` set, and streams the response back as it comes (SSE
/// included) with its status and headers. A client that goes away drops the upstream response,
/// which closes that connection too. Returns its address.
async fn token_proxy(base: String, token: String) -> std::net::SocketAddr {
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let upstream = Arc::new(Upstream {
        client,
        base,
        authorization: HeaderValue::from_str(&format!("Bearer {token}"))
            .expect("a token is a header value"),
    });
    let app = axum::Router::new().fallback(forward).with_state(upstream);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let address = listener.local_addr().expect("the proxy's address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

async fn forward(State(upstream): State<Arc<Upstream>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(body) => body,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers;
    let has_body = headers.contains_key(header::CONTENT_LENGTH)
        || headers.contains_key(header::TRANSFER_ENCODING);
    strip_hop_by_hop(&mut headers);
    // reqwest sets the length of the body it sends.
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(header::AUTHORIZATION, upstream.authorization.clone());
    let mut outgoing = upstream
        .client
        .request(parts.method, format!("{}{path}", upstream.base))
        .headers(headers);
    if has_body {
        outgoing = outgoing.body(body);
    }
    match outgoing.send().await {
        Ok(response) => {
            let mut response = axum::http::Response::from(response).map(Body::new);
            strip_hop_by_hop(response.headers_mut());
            response
        }
        Err(e) => (StatusCode::BAD_GATEWAY, format!("proxy: {e}")).into_response(),
    }
}

/// Removes the headers that describe one connection rather than the message (RFC 9110 §7.6.1).
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    for name in named {
        headers.remove(name.as_str());
    }
    for name in [
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        headers.remove(name);
    }
}

// ---------------------------------------------------------------------------------------------
// A server under test as a child process.

/// A child process whose stdout and stderr are collected; killed when dropped.
struct Process {
    child: Child,
    what: &'static str,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Process {
    fn start(command: &mut Command, what: &'static str) -> Process {
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

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The last `lines` lines of stderr.
    fn stderr_tail(&self, lines: usize) -> String {
        let stderr = self.stderr();
        let all: Vec<&str> = stderr.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The first stdout line that starts with `prefix`; panics if none comes `within`, or the
    /// process exits first.
    fn wait_for_stdout(&mut self, prefix: &str, within: Duration) -> String {
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
    fn wait_for_stderr(&mut self, needle: &str, within: Duration) {
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
