//! `cancelkit check mcp --url` run as a real process against real Streamable HTTP servers on
//! 127.0.0.1 (OS-chosen ports): rmcp 3.11 in-process at 2026-07-28 (a closed response stream is
//! the cancel), forced to 2025-11-25 (a POSTed `notifications/cancelled`) and without
//! 2026-07-28 (negotiated by `initialize` after `server/discover`), the official Python SDK
//! 2.3.0 under uvicorn at both revisions, cancelkit's own `McpHttpServer` (the `mcp_server`
//! example with `--http`) at every revision; and URLs that cannot be spoken to (exit code 2).

#[path = "support/rmcp_http.rs"]
mod rmcp_http;
mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use support::{MCP_CHECK_IDS, check_mcp, evidence, explain};

/// Short waits and 1 s slow calls (twice the calibration's minimum) keep each run to seconds.
const FAST: [&str; 4] = ["--timeout", "2", "--args", r#"{"seconds": 1}"#];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `cancelkit check mcp --json FILE ARGS`; the output and the report.
fn check(args: &[&str]) -> (Output, Option<Value>) {
    check_mcp::<&str>(args, &[])
}

/// Each check's id and result, in order.
fn results(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let id = c["id"].as_str().unwrap().to_owned();
            (id, c["result"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// The check ids in order: the cancellation checks `pass` and the progress, task and
/// subscription checks `not_applicable` (none of these servers reports progress or offers tasks
/// over HTTP), except those named in `others`.
fn expected(others: &[(&str, &str)]) -> Vec<(String, String)> {
    let others: BTreeMap<&str, &str> = others.iter().copied().collect();
    // none of these servers reports progress for `sleep`: there is no progress to stop
    let optional = |id: &str| {
        id.starts_with("mcp.tasks.")
            || id.starts_with("mcp.subscriptions.")
            || id == "mcp.cancel.progress_stops"
    };
    MCP_CHECK_IDS
        .into_iter()
        .map(|id| {
            let default = if optional(id) {
                "not_applicable"
            } else {
                "pass"
            };
            (
                id.to_owned(),
                others.get(id).unwrap_or(&default).to_string(),
            )
        })
        .collect()
}

/// Waits (at most 5 s) until every sleep that started has finished or been cancelled, and
/// returns (finished, cancelled).
fn settled(server: &rmcp_http::Server) -> (usize, usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (started, finished, cancelled) = (
            server.count("started"),
            server.count("finished"),
            server.count("cancelled"),
        );
        if started == finished + cancelled || Instant::now() > deadline {
            return (finished, cancelled);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn rmcp_at_2026_07_28_passes_and_a_closed_stream_stops_the_tool() {
    let runtime = runtime();
    let server = rmcp_http::Server::start(&runtime);
    let (output, report) = check(&[&FAST[..], &["--url", &server.url]].concat());
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let report = report.expect("--json wrote the report");
    assert_eq!(report["revision"], "2026-07-28");
    assert_eq!(report["negotiated_by"], "server/discover");
    assert_eq!(report["url"], server.url.as_str());
    let na = [
        ("mcp.cancel.initialize_id", "not_applicable"),
        ("mcp.subscriptions.server_cancels_only_listen", "pass"),
    ];
    assert_eq!(results(&report), expected(&na), "{report:#}");
    // the in-flight cancel closed the stream; the ignored ones were POSTed and accepted
    let closed = "closed the response stream of request";
    assert!(evidence(&report, "mcp.cancel.no_response").contains(closed));
    assert!(evidence(&report, "mcp.cancel.id_types").contains(closed));
    let malformed = evidence(&report, "mcp.cancel.malformed");
    assert!(
        malformed.contains("answered HTTP 202 Accepted"),
        "{malformed}"
    );
    // rmcp stopped every cancelled sleep: only the calibration's call, the 4 kept calls of the
    // id pairs and the 50 kept parallel calls finished
    let (finished, cancelled) = settled(&server);
    assert_eq!(finished, 55, "{:?}", server.log.lock().unwrap());
    assert!(cancelled >= 70, "{cancelled} sleeps cancelled");
}

#[test]
fn rmcp_forced_to_2025_11_25_passes_with_posted_cancels() {
    let runtime = runtime();
    let server = rmcp_http::Server::start(&runtime);
    let args = [
        &FAST[..],
        &["--revision", "2025-11-25", "--url", &server.url],
    ]
    .concat();
    let (output, report) = check(&args);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2025-11-25");
    assert_eq!(report["negotiated_by"], "forced");
    assert_eq!(results(&report), expected(&[]), "{report:#}");
    let no_response = evidence(&report, "mcp.cancel.no_response");
    assert!(
        no_response.contains("notifications/cancelled answered HTTP 202 Accepted"),
        "{no_response}"
    );
    let (finished, cancelled) = settled(&server);
    assert_eq!(finished, 55, "{:?}", server.log.lock().unwrap());
    assert!(cancelled >= 70, "{cancelled} sleeps cancelled");
}

#[test]
fn rmcp_without_2026_07_28_is_checked_after_initialize() {
    let runtime = runtime();
    let server = rmcp_http::Server::legacy(&runtime);
    let (output, report) = check(&[&FAST[..], &["--url", &server.url]].concat());
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2025-11-25");
    assert_eq!(report["negotiated_by"], "initialize");
    assert_eq!(results(&report), expected(&[]), "{report:#}");
    let (finished, _) = settled(&server);
    assert_eq!(finished, 55, "{:?}", server.log.lock().unwrap());
}

/// A Python server script that prints its port: killed when dropped (and it exits by itself
/// when its stdin closes).
struct PythonServer {
    child: Child,
    url: String,
}

impl PythonServer {
    /// `tests/python/check_http_server.py` on the pinned Python SDK.
    fn sdk() -> PythonServer {
        let python = cancelkit_tests::python::sdk_python();
        let script = cancelkit_tests::python::script("check_http_server.py");
        PythonServer::start(python.as_os_str(), script.as_os_str())
    }

    /// `fixtures/broken_http_mcp_server.py` (the standard library only).
    fn broken() -> PythonServer {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/broken_http_mcp_server.py"
        );
        PythonServer::start(
            cancelkit_tests::external::python3().as_ref(),
            script.as_ref(),
        )
    }

    fn start(python: &std::ffi::OsStr, script: &std::ffi::OsStr) -> PythonServer {
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the Python server starts");
        // The first line is the port (or nothing, if the script failed: then EOF).
        let mut port = String::new();
        let stdout = child.stdout.take().unwrap();
        BufReader::new(stdout).read_line(&mut port).unwrap();
        let port: u16 = port
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the server printed no port: {port:?}"));
        PythonServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

/// The runtime's `mcp_server` example serving Streamable HTTP (`--http 127.0.0.1:0`).
struct ExampleServer {
    child: Child,
    url: String,
}

impl ExampleServer {
    fn start() -> ExampleServer {
        let mut child = Command::new(cancelkit_tests::example("mcp_server"))
            .args(["--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the example starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the example printed no address: {line:?}"))
            .to_owned();
        ExampleServer { child, url }
    }
}

impl Drop for ExampleServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// cancelkit's own HTTP server (`McpHttpServer`, the example's router) passes at 2026-07-28
/// (closed streams) and at every legacy revision (POSTed cancels in a session), tasks included.
#[test]
fn our_http_server_passes_at_every_revision() {
    let server = ExampleServer::start();
    let revisions = [
        "2026-07-28",
        "2025-11-25",
        "2025-06-18",
        "2025-03-26",
        "2024-11-05",
    ];
    // one check per revision, all at once (each in its own session): they mostly wait
    let reports: Vec<(&str, Output, Option<Value>)> = std::thread::scope(|scope| {
        let runs: Vec<_> = revisions
            .map(|revision| {
                let url = &server.url;
                scope.spawn(move || {
                    let args = [&FAST[..], &["--revision", revision, "--url", url]].concat();
                    let (output, report) = check(&args);
                    (revision, output, report)
                })
            })
            .into_iter()
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    for (revision, output, report) in reports {
        assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
        let report = report.unwrap();
        assert_eq!(report["revision"], revision);
        let results = results(&report);
        assert!(
            results.iter().all(|(_, result)| result != "fail"),
            "{report:#}"
        );
        let passed = |id: &str| results.iter().any(|(i, r)| i == id && r == "pass");
        assert!(passed("mcp.cancel.no_response"), "{report:#}");
        assert!(passed("mcp.cancel.parallel.cancelled_silent"), "{report:#}");
        if revision == "2025-11-25" {
            assert!(passed("mcp.tasks.cancel"), "{report:#}");
        }
        if revision == "2026-07-28" {
            assert!(passed("mcp.tasks.ext.cancel_acknowledged"), "{report:#}");
        }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn python_sdk_at_2026_07_28_passes() {
    let server = PythonServer::sdk();
    let (output, report) = check(&[&FAST[..], &["--url", &server.url]].concat());
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2026-07-28");
    assert_eq!(report["negotiated_by"], "server/discover");
    // its subscriptions/listen stream ends when the check closes it
    let na = [
        ("mcp.cancel.initialize_id", "not_applicable"),
        ("mcp.subscriptions.listen_acknowledged", "pass"),
        ("mcp.subscriptions.listen_cancel", "pass"),
        ("mcp.subscriptions.server_cancels_only_listen", "pass"),
    ];
    assert_eq!(results(&report), expected(&na), "{report:#}");
    let unknown = evidence(&report, "mcp.cancel.unknown_id");
    assert!(unknown.contains("answered HTTP 202 Accepted"), "{unknown}");
}

/// At the handshake revisions the Python SDK's HTTP transport answers a cancelled request with
/// -32800 (on purpose: that era's stream ends only with a response), and keys its response
/// streams by `str(id)`, so ids `1` and `"1"` share one and `1` loses its answer.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn python_sdk_forced_to_2025_11_25_answers_cancels_and_mixes_up_1_and_string_1() {
    let server = PythonServer::sdk();
    let args = [
        &FAST[..],
        &["--revision", "2025-11-25", "--url", &server.url],
    ]
    .concat();
    let (output, report) = check(&args);
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2025-11-25");
    let failed = [
        ("mcp.cancel.no_response", "fail"),
        ("mcp.cancel.id_types", "fail"),
        ("mcp.cancel.parallel.cancelled_silent", "fail"),
    ];
    assert_eq!(results(&report), expected(&failed), "{report:#}");
    let answered = r#"\"error\":{\"code\":-32800,\"message\":\"Request cancelled\"}"#;
    for id in [
        "mcp.cancel.no_response",
        "mcp.cancel.parallel.cancelled_silent",
    ] {
        assert!(evidence(&report, id).contains(answered), "{report:#}");
    }
    let id_types = evidence(&report, "mcp.cancel.id_types");
    assert!(id_types.contains(r#"\"id\":\"1\""#), "{id_types}");
}

/// The broken server answers cancelled calls (-32800) and a cancel for an id it never saw
/// (HTTP 500): exactly those checks fail. Its 400 to a malformed cancel is the transport's way
/// to refuse a notification, and passes. It also insists on `Content-Length`, the session and
/// the protocol version header, and answers `ping` after a notification event.
#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_broken_http_server_fails_exactly_its_faults() {
    let server = PythonServer::broken();
    let (output, report) = check(&[&FAST[..], &["--url", &server.url]].concat());
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let report = report.unwrap();
    assert_eq!(report["revision"], "2025-11-25");
    assert_eq!(report["negotiated_by"], "initialize");
    let failed = [
        ("mcp.cancel.no_response", "fail"),
        ("mcp.cancel.unknown_id", "fail"),
        ("mcp.cancel.parallel.cancelled_silent", "fail"),
    ];
    assert_eq!(results(&report), expected(&failed), "{report:#}");
    let unknown = evidence(&report, "mcp.cancel.unknown_id");
    assert!(unknown.contains(r#"\"http_status\":500"#), "{unknown}");
    let malformed = evidence(&report, "mcp.cancel.malformed");
    assert!(
        malformed.contains("answered HTTP 400 Bad Request"),
        "{malformed}"
    );
}

#[test]
fn a_url_nobody_listens_on_exits_2() {
    // a port that was free a moment ago: nothing listens there now
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (output, report) = check(&["--timeout", "2", "--url", &url]);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    assert!(report.is_none());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot POST server/discover to {url}")),
        "{stderr}"
    );
    assert!(stderr.contains("Connection refused"), "{stderr}");
}

#[test]
fn an_endpoint_that_refuses_initialize_exits_2() {
    let runtime = runtime();
    let app = axum::Router::new()
        .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "no MCP server here") });
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    runtime.spawn(async move { axum::serve(listener, app).await });
    let (output, report) = check(&["--timeout", "2", "--url", &url]);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    assert!(report.is_none());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no answer to initialize: initialize")
            && stderr.contains("HTTP 404 Not Found: no MCP server here"),
        "{stderr}"
    );
}

#[test]
fn url_and_command_together_other_schemes_and_a_lone_ca_file_are_refused() {
    let refused = [
        (
            vec!["--url", "http://127.0.0.1:1/mcp", "--", "cat"],
            "cannot be used with",
        ),
        (
            vec!["--url", "ftp://127.0.0.1:1/mcp"],
            "an http:// or https:// URL",
        ),
        (
            vec!["--ca-file", "ca.pem", "--", "cat"],
            "cannot be used with",
        ),
        (
            vec![
                "--url",
                "https://127.0.0.1:1/mcp",
                "--ca-file",
                "/nonexistent/ca.pem",
            ],
            "cannot read /nonexistent/ca.pem",
        ),
    ];
    for (args, says) in refused {
        let (output, _) = check(&args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            explain(&output)
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // https:// is spoken: a closed port is unreachable, as over http://.
    let (output, _) = check(&["--url", "https://127.0.0.1:1/mcp"]);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("only http://"), "{stderr}");
}

#[test]
fn headers_must_be_well_formed_and_go_with_a_url() {
    let url = "http://127.0.0.1:1/mcp";
    let refused = [
        (vec!["--url", url, "--header", "no colon"], "`Name: value`"),
        (
            vec!["--url", url, "--header", "Bad Name: x"],
            "is not a header name",
        ),
        (
            vec!["--url", url, "-H", "X-Token: a\u{7f}b"],
            "cannot be sent as a header",
        ),
        (
            vec!["--header", "X-Token: 1", "--", "cat"],
            "cannot be used with",
        ),
    ];
    for (args, why) in refused {
        let (output, _) = check(&args);
        assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
}
