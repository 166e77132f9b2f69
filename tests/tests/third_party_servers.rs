//! The two third-party MCP servers the tests install themselves answer at all: the reference
//! server `@modelcontextprotocol/server-everything` (npm, pinned in tests/node/package.json) and
//! a FastMCP server (tests/python/fastmcp_server.py on FastMCP 4.1.2, pinned in
//! tests/python/requirements-fastmcp.txt), each over stdio and over Streamable HTTP on
//! 127.0.0.1. Each test installs what it needs (a broken install fails it), runs the handshake
//! at 2025-11-25 and finds the server's slow tool, with its arguments, in `tools/list`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use cancelkit_tests::{node, python};
use serde_json::{Value, json};

/// How long one answer may take (FastMCP imports for a few seconds before its first answer).
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

const VERSION: &str = "2025-11-25";

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "cancelkit-tests", "version": "0"}
        }
    })
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn tools_list() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
}

/// The tool named `name` in a `tools/list` response, with the names of its arguments.
fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .find(|tool| tool["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {list}"))
}

fn assert_arguments(list: &Value, name: &str, arguments: &[&str]) {
    let properties = &tool(list, name)["inputSchema"]["properties"];
    for argument in arguments {
        assert!(
            properties.get(argument).is_some(),
            "{name} has no argument {argument}: {list}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// stdio

/// A server on stdio: requests written as lines, every line it prints read by a thread.
struct StdioServer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl StdioServer {
    fn start(mut command: Command) -> StdioServer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        StdioServer {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write to the server");
        self.stdin.flush().expect("flush to the server");
    }

    /// Sends `request` and returns the response with its id (notifications in between skipped).
    fn request(&mut self, request: &Value) -> Value {
        self.send(request);
        loop {
            let line = self
                .lines
                .recv_timeout(ANSWER_WITHIN)
                .unwrap_or_else(|e| panic!("no answer to {request} ({e})"));
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON on the server's stdout ({e}): {line}"));
            if message.get("method").is_none() && message["id"] == request["id"] {
                return message;
            }
        }
    }

    /// Handshake, then `tools/list`.
    fn list_tools(&mut self) -> Value {
        let answer = self.request(&initialize());
        assert_eq!(answer["result"]["protocolVersion"], VERSION, "{answer}");
        self.send(&initialized());
        self.request(&tools_list())
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn server_everything_over_stdio() {
    let mut command = Command::new("node");
    command.arg(node::server_everything()).arg("stdio");
    let list = StdioServer::start(command).list_tools();
    assert_arguments(
        &list,
        "trigger-long-running-operation",
        &["duration", "steps"],
    );
}

#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn fastmcp_over_stdio() {
    let mut command = Command::new(python::fastmcp_python());
    command.arg(python::script("fastmcp_server.py"));
    let list = StdioServer::start(command).list_tools();
    assert_arguments(&list, "wait", &["delay_ms"]);
    assert_arguments(&list, "wait_task", &["delay_ms"]);
    assert_arguments(&list, "add", &["a", "b"]);
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP

/// POSTs `message` to `url` (in `session`, if any); the response's session id and the
/// JSON-RPC messages of its body (one JSON object, or an event stream read to its end).
async fn post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    message: &Value,
) -> (Option<String>, Vec<Value>) {
    let mut request = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(message);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", VERSION);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {message} to {url}: {e}"));
    let status = response.status();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let event_stream = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    let body = response.text().await.expect("the response body");
    assert!(status.is_success(), "POST {message}: {status}\n{body}");
    let messages = if event_stream {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .filter(|data| !data.is_empty())
            .map(|data| serde_json::from_str(data).expect("a JSON event"))
            .collect()
    } else if body.trim().is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&body).expect("a JSON body")]
    };
    (session, messages)
}

/// The server does not listen on IPv6 loopback: it bound 127.0.0.1 only, not every interface
/// (server-everything on its own listens on `::`, which takes `[::1]` too).
fn assert_not_on_ipv6(port: u16) {
    let v6 = std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
    assert!(
        std::net::TcpStream::connect_timeout(&v6, Duration::from_secs(1)).is_err(),
        "the server listens on [::1]:{port} too, not on 127.0.0.1 only"
    );
}

/// The response to `request` among `messages`.
fn response_to(request: &Value, messages: Vec<Value>) -> Value {
    messages
        .into_iter()
        .find(|message| message.get("method").is_none() && message["id"] == request["id"])
        .unwrap_or_else(|| panic!("no response to {request}"))
}

/// Handshake (the session from its response), then `tools/list`, over Streamable HTTP.
async fn list_tools_over_http(url: &str) -> Value {
    let client = reqwest::Client::builder()
        .timeout(ANSWER_WITHIN)
        .build()
        .expect("an HTTP client");
    let (session, messages) = post(&client, url, None, &initialize()).await;
    let answer = response_to(&initialize(), messages);
    assert_eq!(answer["result"]["protocolVersion"], VERSION, "{answer}");
    let session = session.expect("the initialize response names a session");
    post(&client, url, Some(&session), &initialized()).await;
    let (_, messages) = post(&client, url, Some(&session), &tools_list()).await;
    response_to(&tools_list(), messages)
}

#[tokio::test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn server_everything_over_http_on_loopback() {
    let server = node::start_server_everything_http();
    assert!(
        server.url().starts_with("http://127.0.0.1:"),
        "{}",
        server.url()
    );
    assert!(server.url().ends_with("/mcp"), "{}", server.url());
    assert_not_on_ipv6(server.port());
    let list = list_tools_over_http(server.url()).await;
    assert_arguments(
        &list,
        "trigger-long-running-operation",
        &["duration", "steps"],
    );
}

#[tokio::test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn fastmcp_over_http_on_loopback() {
    let server = python::start_fastmcp_http();
    assert!(
        server.url().starts_with("http://127.0.0.1:"),
        "{}",
        server.url()
    );
    let list = list_tools_over_http(server.url()).await;
    assert_arguments(&list, "wait", &["delay_ms"]);
}
