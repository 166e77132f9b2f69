//! The mocks' choices of answer, and the mock server's pacing and records, over a real socket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::mock::{Frame, Mock, Mode, Reply, Request, TICKS};
use super::{anthropic, gemini, openai};

fn post(path: &str, body: Value) -> Request {
    Request {
        method: Method::POST,
        path: path.to_owned(),
        body,
    }
}

#[test]
fn codex_gets_a_tool_call_then_text_after_its_output() {
    let path = "/v1/responses";
    let user = json!({"input": [{"type": "message", "role": "user", "content": []}]});
    let output = json!({"input": [
        {"type": "message", "role": "user", "content": []},
        {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"}
    ]});
    let (label, _) = openai::answer(Mode::Permission, &post(path, user.clone()));
    assert_eq!(label, "tool call");
    let (label, _) = openai::answer(Mode::Permission, &post(path, output));
    assert_eq!(label, "text after tool");
    let (label, reply) = openai::answer(Mode::Slow, &post(path, user));
    assert_eq!(label, "slow text");
    let Reply::Sse(frames) = reply else {
        panic!("a streamed answer")
    };
    assert!(frames.len() > TICKS);
    assert!(frames.last().unwrap().text.contains("response.completed"));
}

#[test]
fn gemini_gets_a_function_call_and_json_for_its_side_questions() {
    let stream = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    let user = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let result = json!({"contents": [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command"}}]}
    ]});
    assert_eq!(
        gemini::answer(Mode::Permission, &post(stream, user)).0,
        "tool call"
    );
    assert_eq!(
        gemini::answer(Mode::Permission, &post(stream, result)).0,
        "text after tool"
    );
    let router = json!({"generationConfig": {"responseJsonSchema": {
        "type": "OBJECT",
        "properties": {
            "complexity_reasoning": {"type": "STRING"},
            "complexity_score": {"type": "INTEGER"},
            "next_speaker": {"type": "STRING", "enum": ["user", "model"]}
        }
    }}});
    let path = "/v1beta/models/gemini-3.5-flash-lite:generateContent";
    let (_, reply) = gemini::answer(Mode::Slow, &post(path, router));
    let Reply::Json(StatusCode::OK, body) = reply else {
        panic!("a JSON answer")
    };
    let text = body["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    let answer: Value = serde_json::from_str(text).unwrap();
    assert_eq!(answer["complexity_score"], 10);
    assert_eq!(answer["next_speaker"], "user");
}

#[test]
fn claude_gets_a_tool_use_unless_its_pending_tool_use_is_answered() {
    let path = "/v1/messages?beta=true";
    let tools = json!([{"name": "Bash"}]);
    let turn = |messages: Value| {
        let body = json!({"stream": true, "tools": tools, "messages": messages});
        anthropic::answer(Mode::Permission, &post(path, body)).0
    };
    let user = |content: Value| json!({"role": "user", "content": content});
    let assistant = |content: Value| json!({"role": "assistant", "content": content});
    let used = |id: &str| json!({"type": "tool_use", "id": id, "name": "Bash", "input": {}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "no"});
    let said = json!({"type": "text", "text": "The file is there."});
    let prompt = json!({"type": "text", "text": "Create it."});
    assert_eq!(turn(json!([user(json!([prompt]))])), "tool call");
    let first = [user(json!([prompt])), assistant(json!([used("1")]))];
    assert_eq!(
        turn(json!([first[0], first[1], user(json!([result("1")]))])),
        "text after tool"
    );
    // the next turn: Claude Code sends its prompt in the message of the last tool result
    let done = assistant(json!([used("1"), said]));
    let second = user(json!([result("1"), prompt]));
    assert_eq!(turn(json!([first[0], done, second])), "tool call");
    // a refused tool in that turn: the prompt stays last, the new use is answered
    let merged = assistant(json!([used("1"), said, used("2")]));
    let refused = user(json!([result("1"), result("2"), prompt]));
    assert_eq!(turn(json!([first[0], merged, refused])), "text after tool");
    let side = json!({"messages": [{"role": "user", "content": "title?"}]});
    assert_eq!(
        anthropic::answer(Mode::Slow, &post(path, side)).0,
        "side text"
    );
}

fn three_frames(_: Mode, request: &Request) -> (&'static str, Reply) {
    if request.path == "/slow" {
        let frames = (0..50).map(|n| Frame::tick(format!("data: {n}\n\n")));
        return ("slow", Reply::Sse(frames.collect()));
    }
    let frames = ["one", "two", "three"].map(|t| Frame::now(format!("data: {t}\n\n")));
    ("three", Reply::Sse(frames.into()))
}

fn get(mock: &Mock, path: &str) -> TcpStream {
    let address = mock.url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

#[test]
fn the_mock_streams_and_records_each_request_and_a_hang_up() {
    let mock = Mock::start(three_frames, Mode::Slow).unwrap();
    let mut whole = String::new();
    get(&mock, "/three?x=1").read_to_string(&mut whole).unwrap();
    assert!(whole.contains("text/event-stream"), "{whole}");
    assert!(whole.contains("data: three"), "{whole}");

    let mut slow = get(&mock, "/slow");
    let mut first = [0u8; 64];
    let read = slow.read(&mut first).unwrap();
    assert!(read > 0);
    drop(slow);
    let started = Instant::now();
    let records = loop {
        let records = mock.records();
        if records.len() == 2 && records[1].ended_ms.is_some() {
            break records;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{records:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(records[0].path, "/three?x=1");
    assert_eq!((records[0].sent, records[0].frames), (3, 3));
    assert!(!records[0].cut);
    assert_eq!(records[1].answer, "slow");
    assert!(records[1].cut, "{records:?}");
    assert!(records[1].sent < 50);
}

#[test]
fn the_readme_table_has_a_row_per_check_and_the_details_of_what_did_not_plainly_pass() {
    use super::agents::Agent;
    use super::readme::{Run, render};
    let report = |honoured: &str, detail: &str| {
        json!({"checks": [
            {"id": "acp.cancel_request.answered_once", "result": "pass", "detail": "once"},
            {"id": "acp.cancel_request.honoured", "result": honoured, "detail": detail},
            {"id": "acp.cancel_request_draft.answered_once", "result": "not_applicable",
             "detail": "the agent did not declare it"},
        ]})
    };
    let mut runs = Vec::new();
    for agent in Agent::ALL {
        for mode in Mode::ALL {
            let report = match (agent, mode) {
                (Agent::Gemini, Mode::Permission) => report("fail", "no | answer"),
                _ => report("info", "ran to its end"),
            };
            runs.push(Run {
                agent,
                mode,
                report,
            });
        }
    }
    let versions = json!({"@zed-industries/codex-acp": "0.16.0"});
    let block = render(&runs[..5], &versions);
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(
        lines[0],
        "| check | @zed-industries/codex-acp 0.16.0: slow / permission | @google/gemini-cli ?: \
         slow / permission | @zed-industries/claude-agent-acp ?: slow / permission |"
    );
    assert_eq!(
        lines[2],
        "| `acp.cancel_request.answered_once` | pass / pass | pass / pass | pass / — |"
    );
    assert_eq!(
        lines[3],
        "| `acp.cancel_request.honoured` | info / info | info / **fail** | info / — |"
    );
    assert_eq!(
        lines[4],
        "| `acp.cancel_request_draft.answered_once` | n/a / n/a | n/a / n/a | n/a / — |"
    );
    assert!(block.contains("- @google/gemini-cli, permission mode, `acp.cancel_request.honoured` (**fail**): no \\| answer"), "{block}");
    // a pass, and a not-declared n/a, have no note
    assert!(!block.contains("answered_once` (pass)"), "{block}");
    assert!(!block.contains("did not declare"), "{block}");
    assert_eq!(block.matches("\n- ").count(), 5, "{block}");
}
