//! `cancelkit trace` and `cancelkit trace view` as a client runs them: the real binary, real
//! children, real pipes and signals.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

mod support;

use support::{BIN, view};

/// `cancelkit trace --out OUT -- CMD...` with every stdio stream piped.
fn proxy(out: &Path, command: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("trace")
        .arg("--out")
        .arg(out)
        .arg("--")
        .args(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs the proxy with `input` on its stdin, closed afterwards.
fn run_with_input(mut command: Command, input: &[u8]) -> Output {
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    output
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The bytes of a frame record: its `line`, or its decoded `base64`.
fn frame_bytes(record: &Value) -> Vec<u8> {
    match (record.get("line"), record.get("base64")) {
        (Some(Value::String(line)), None) => line.as_bytes().to_vec(),
        (None, Some(Value::String(b64))) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
        _ => panic!("not a frame record: {record}"),
    }
}

fn assert_t_us_non_decreasing(records: &[Value]) {
    let times: Vec<u64> = records
        .iter()
        .map(|r| r["t_us"].as_u64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[test]
fn bytes_pass_unchanged_and_every_frame_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    let input: &[u8] =
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n\xff\xfe not utf-8\n\nno newline at the end";
    let output = run_with_input(proxy(&out, &["cat"]), input);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(output.stdout, input);

    let records = records(&out);
    assert_t_us_non_decreasing(&records);
    let frames = |dir: &str| -> Vec<Value> {
        records
            .iter()
            .filter(|r| r["dir"] == dir)
            .map(|r| {
                let mut r = r.clone();
                r.as_object_mut().unwrap().remove("t_us");
                r
            })
            .collect()
    };
    let expected = |dir: &str| {
        vec![
            json!({"dir": dir, "line": "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"}),
            json!({"dir": dir, "base64": base64::engine::general_purpose::STANDARD.encode(b"\xff\xfe not utf-8")}),
            json!({"dir": dir, "line": ""}),
            json!({"dir": dir, "line": "no newline at the end"}),
        ]
    };
    assert_eq!(frames("in"), expected("in"));
    assert_eq!(frames("out"), expected("out"));
    assert_eq!(records.len(), 8, "{records:?}");
}

#[test]
fn a_megabyte_of_arbitrary_bytes_passes_unchanged_and_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    // deterministic pseudo-random bytes, newlines included
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let input: Vec<u8> = (0..1 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        })
        .collect();
    let output = run_with_input(proxy(&out, &["cat"]), &input);
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout == input, "stdout differs from stdin");

    let records = records(&out);
    assert_t_us_non_decreasing(&records);
    assert!(records.iter().all(|r| r.get("dropped").is_none()));
    for dir in ["in", "out"] {
        let rebuilt: Vec<u8> = records
            .iter()
            .filter(|r| r["dir"] == dir)
            .map(frame_bytes)
            .collect::<Vec<_>>()
            .join(&b'\n');
        assert!(
            rebuilt == input,
            "the {dir} frames do not rebuild the input"
        );
    }
}

#[test]
fn stderr_and_the_exit_code_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    let output = run_with_input(
        proxy(&out, &["sh", "-c", "echo to-stdout; echo oops >&2; exit 7"]),
        b"",
    );
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "oops\n");
    assert_eq!(output.stdout, b"to-stdout\n");
}

#[test]
fn a_command_that_does_not_exist_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    let output = run_with_input(proxy(&out, &["/nonexistent/cancelkit-no-such-server"]), b"");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot start `/nonexistent/cancelkit-no-such-server`")
            && stderr.contains("No such file"),
        "{stderr}"
    );
    assert!(!out.exists(), "no trace is left behind");
}

/// Starts the proxy in front of `script`, which prints `ready` once its traps are set, and
/// waits for that line.
fn start_ready(out: &Path, script: &str) -> Child {
    let mut child = proxy(out, &["sh", "-c", script]).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    child.stdout = Some(stdout.into_inner());
    child
}

fn wait_with_deadline(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the proxy did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, sig).unwrap();
}

#[test]
fn sigterm_to_the_proxy_reaches_the_child_and_its_exit_code_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    let mut child = start_ready(
        &out,
        "trap 'echo got-term >&2; exit 42' TERM; echo ready; while :; do sleep 0.05; done",
    );
    signal(&child, nix::sys::signal::Signal::SIGTERM);
    let status = wait_with_deadline(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(42));
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("got-term"), "{stderr}");
}

#[test]
fn a_child_killed_by_a_forwarded_signal_exits_128_plus_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    // the shell replaces itself with sleep, which SIGHUP kills
    let mut child = start_ready(&out, "echo ready; exec sleep 30");
    signal(&child, nix::sys::signal::Signal::SIGHUP);
    let status = wait_with_deadline(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(128 + 1));
}

#[test]
fn a_signal_ends_the_wait_for_a_stdout_held_open_after_the_child_exited() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    // the child exits at once (a SIGTERM that reaches it first is ignored); the background
    // sleep keeps its stdout open for 5 s
    let mut child = start_ready(&out, "trap '' TERM; sleep 5 & echo ready; exit 3");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "the proxy still waits for the held stdout"
        );
        signal(&child, nix::sys::signal::Signal::SIGTERM);
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(3));
}

/// A JSON-RPC server in Python: `fast` is answered at once, `slow` only when cancelled.
const SERVER: &str = r#"
import json, sys
pending = None
while True:
    line = sys.stdin.readline()
    if not line:
        break
    m = json.loads(line)
    method = m.get("method")
    if method == "fast":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"ok": True}}), flush=True)
    elif method == "slow":
        pending = m["id"]
    elif method == "notifications/cancelled" and m["params"]["requestId"] == pending:
        print(json.dumps({"jsonrpc": "2.0", "id": pending,
                          "error": {"code": -32800, "message": "Request cancelled"}}), flush=True)
        pending = None
"#;

#[test]
#[ignore = "external: a Python 3 fixture (`cargo xtask setup` installs Python 3)"]
fn a_session_with_a_cancel_renders_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("session.jsonl");
    let mut child = proxy(&out, &[cancelkit_tests::external::python3(), "-c", SERVER])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |m: Value| {
        stdin.write_all(format!("{m}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut receive = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "slow"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "fast"}));
    assert_eq!(receive()["id"], 2);
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    );
    let answer = receive();
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(1), json!(-32800))
    );
    drop(stdin);
    let status = wait_with_deadline(&mut child, Duration::from_secs(20));
    assert!(status.success());
    assert_eq!(records(&out).len(), 5);

    let html_path = dir.path().join("timeline.html");
    let html = view(&out, &html_path);
    let rows: Vec<&str> = html.split("<div class=\"row\"").skip(1).collect();
    assert_eq!(rows.len(), 2, "{html}");
    assert!(
        rows[0].starts_with(" data-method=\"slow\" data-id=\"1\""),
        "{}",
        rows[0]
    );
    assert!(rows[0].contains("class=\"cancel\""), "{}", rows[0]);
    assert!(rows[0].contains("class=\"bar late\""), "{}", rows[0]);
    assert!(
        rows[1].starts_with(" data-method=\"fast\" data-id=\"2\""),
        "{}",
        rows[1]
    );
    assert!(rows[1].contains("class=\"bar\""), "{}", rows[1]);
    assert!(!rows[1].contains("class=\"cancel\""), "{}", rows[1]);
    assert!(html.contains("<input id=\"filter\""), "{html}");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "self-contained"
    );
}
