//! The OpenAI Responses API (`POST /v1/responses`, `stream: true`) as codex speaks it: SSE events
//! whose `data` carries a `type` (`response.created`, `response.output_item.added`,
//! `response.output_text.delta`, `response.output_item.done`, `response.completed`). codex 0.137
//! (inside codex-acp 0.16) speaks no other wire API (`wire_api = "chat"` is refused).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::mock::{
    AFTER_TOOL, COMMAND, Frame, Mode, Reply, Request, next_id, not_found, sse, ticks,
};

/// Answers one request codex made.
pub fn answer(mode: Mode, request: &Request) -> (&'static str, Reply) {
    let path = request.path.split('?').next().unwrap_or_default();
    match (&request.method, path) {
        (&Method::POST, "/v1/responses") => turn(mode, &request.body),
        (&Method::GET, "/v1/models") => (
            "models",
            Reply::Json(StatusCode::OK, json!({"object": "list", "data": []})),
        ),
        _ => not_found(request),
    }
}

fn turn(mode: Mode, body: &Value) -> (&'static str, Reply) {
    let last = body["input"].as_array().and_then(|items| items.last());
    let after_tool = last.is_some_and(|item| {
        matches!(
            item["type"].as_str(),
            Some("function_call_output" | "custom_tool_call_output")
        )
    });
    match mode {
        Mode::Slow => ("slow text", Reply::Sse(slow_text())),
        Mode::Permission if after_tool => ("text after tool", Reply::Sse(text(AFTER_TOOL))),
        Mode::Permission => ("tool call", Reply::Sse(tool_call())),
    }
}

fn event(data: &Value) -> String {
    sse(data["type"].as_str(), data)
}

fn created() -> Frame {
    Frame::now(event(&json!({
        "type": "response.created",
        "response": {"id": "resp_survey"}
    })))
}

fn completed() -> Frame {
    Frame::now(event(&json!({
        "type": "response.completed",
        "response": {
            "id": "resp_survey",
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 20
            }
        }
    })))
}

fn message_added() -> Frame {
    Frame::now(event(&json!({
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"type": "message", "id": "msg_survey", "role": "assistant", "content": []}
    })))
}

fn delta(text: &str) -> String {
    event(&json!({
        "type": "response.output_text.delta",
        "item_id": "msg_survey",
        "output_index": 0,
        "content_index": 0,
        "delta": text
    }))
}

fn message_done(text: &str) -> Frame {
    Frame::now(event(&json!({
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {
            "type": "message",
            "id": "msg_survey",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]
        }
    })))
}

fn slow_text() -> Vec<Frame> {
    let mut frames = vec![created(), message_added()];
    let mut whole = String::new();
    for token in ticks() {
        frames.push(Frame::tick(delta(&token)));
        whole.push_str(&token);
    }
    frames.push(message_done(&whole));
    frames.push(completed());
    frames
}

fn text(text: &str) -> Vec<Frame> {
    vec![
        created(),
        message_added(),
        Frame::now(delta(text)),
        message_done(text),
        completed(),
    ]
}

fn tool_call() -> Vec<Frame> {
    let arguments = json!({
        "cmd": COMMAND,
        "justification": "The survey asks to create a file."
    })
    .to_string();
    let id = next_id();
    let item = json!({
        "type": "function_call",
        "id": format!("fc_survey_{id}"),
        "call_id": format!("call_survey_{id}"),
        "name": "exec_command",
        "arguments": arguments
    });
    vec![
        created(),
        Frame::now(event(&json!({
            "type": "response.output_item.added",
            "output_index": 0,
            "item": item
        }))),
        Frame::now(event(&json!({
            "type": "response.output_item.done",
            "output_index": 0,
            "item": item
        }))),
        completed(),
    ]
}
