//! The Anthropic Messages API as Claude Code (inside claude-agent-acp's SDK) speaks it:
//! `POST /v1/messages?beta=true` with `stream: true` (SSE: `message_start`,
//! `content_block_start`, `content_block_delta`, `content_block_stop`, `message_delta`,
//! `message_stop`), the same without `stream` (one JSON message), `POST
//! /v1/messages/count_tokens`, and the `HEAD /` reachability probe.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::mock::{
    AFTER_TOOL, COMMAND, Frame, Mode, Reply, Request, next_id, not_found, sse, ticks,
};

/// Answers one request Claude Code made.
pub fn answer(mode: Mode, request: &Request) -> (&'static str, Reply) {
    let path = request.path.split('?').next().unwrap_or_default();
    match (&request.method, path) {
        (&Method::HEAD | &Method::GET, "/") => ("probe", Reply::Json(StatusCode::OK, json!({}))),
        (&Method::POST, "/v1/messages") => messages(mode, &request.body),
        (&Method::POST, "/v1/messages/count_tokens") => (
            "token count",
            Reply::Json(StatusCode::OK, json!({"input_tokens": 10})),
        ),
        _ => not_found(request),
    }
}

/// What the model says to one `/v1/messages` request.
enum Say {
    Slow,
    Text(&'static str),
    Tool,
}

fn messages(mode: Mode, body: &Value) -> (&'static str, Reply) {
    // The agent's turns carry its tools; a request without them is a side question (a title,
    // a summary): answered at once in every mode.
    let turn = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    // The turn is after a tool when the last assistant message ends with a tool use and the
    // last message answers it. Claude Code sends the next prompt in the same user message as the
    // last tool result, and after a refused tool it keeps that prompt last (`[tool_result...,
    // text]`, the tool's use appended to the assistant's merged message), so neither the last
    // block nor the presence of a result alone tells.
    let messages = body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let pending_use = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .and_then(|m| m["content"].as_array())
        .and_then(|blocks| blocks.last())
        .filter(|block| block["type"] == "tool_use")
        .map(|block| &block["id"]);
    let after_tool = match (pending_use, messages.last()) {
        (Some(id), Some(last)) if last["role"] == "user" => {
            last["content"].as_array().is_some_and(|blocks| {
                blocks
                    .iter()
                    .any(|b| b["type"] == "tool_result" && &b["tool_use_id"] == id)
            })
        }
        _ => false,
    };
    let (label, say) = match (turn, mode) {
        (false, _) => ("side text", Say::Text("Survey.")),
        (true, Mode::Slow) => ("slow text", Say::Slow),
        (true, Mode::Permission) if after_tool => ("text after tool", Say::Text(AFTER_TOOL)),
        (true, Mode::Permission) => ("tool call", Say::Tool),
    };
    let model = body["model"]
        .as_str()
        .unwrap_or("claude-sonnet-4-6")
        .to_owned();
    if body["stream"] == true {
        (label, Reply::Sse(stream(&model, say)))
    } else {
        let (content, stop) = match say {
            Say::Slow => (
                json!([{"type": "text", "text": ticks().collect::<String>()}]),
                "end_turn",
            ),
            Say::Text(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
            Say::Tool => (json!([tool_use()]), "tool_use"),
        };
        let message = json!({
            "id": "msg_survey",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 10}
        });
        (label, Reply::Json(StatusCode::OK, message))
    }
}

fn event(data: &Value) -> String {
    sse(data["type"].as_str(), data)
}

fn tool_use() -> Value {
    json!({
        "type": "tool_use",
        "id": format!("toolu_survey_{}", next_id()),
        "name": "Bash",
        "input": {"command": COMMAND, "description": "Create the survey's file"}
    })
}

fn stream(model: &str, say: Say) -> Vec<Frame> {
    let mut frames = vec![Frame::now(event(&json!({
        "type": "message_start",
        "message": {
            "id": "msg_survey",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}
        }
    })))];
    let text_start = json!({
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""}
    });
    let text_delta = |text: &str| {
        event(&json!({
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text}
        }))
    };
    let stop = match say {
        Say::Slow => {
            frames.push(Frame::now(event(&text_start)));
            frames.extend(ticks().map(|token| Frame::tick(text_delta(&token))));
            "end_turn"
        }
        Say::Text(text) => {
            frames.push(Frame::now(event(&text_start)));
            frames.push(Frame::now(text_delta(text)));
            "end_turn"
        }
        Say::Tool => {
            let mut block = tool_use();
            let input = block["input"].take().to_string();
            block["input"] = json!({});
            frames.push(Frame::now(event(&json!({
                "type": "content_block_start",
                "index": 0,
                "content_block": block
            }))));
            frames.push(Frame::now(event(&json!({
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": input}
            }))));
            "tool_use"
        }
    };
    frames.push(Frame::now(event(
        &json!({"type": "content_block_stop", "index": 0}),
    )));
    frames.push(Frame::now(event(&json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": 10}
    }))));
    frames.push(Frame::now(event(&json!({"type": "message_stop"}))));
    frames
}
