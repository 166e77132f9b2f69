//! The Gemini API (`generativelanguage`, v1beta) as gemini-cli's `@google/genai` client speaks
//! it: `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` (SSE `data:` lines, each a
//! `GenerateContentResponse`), `:generateContent` (one JSON answer: gemini-cli's model router
//! and its other side questions ask for JSON matching a `responseJsonSchema`) and `:countTokens`.

use axum::http::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::mock::{AFTER_TOOL, COMMAND, Frame, Mode, Reply, Request, not_found, sse, ticks};

/// Answers one request gemini-cli made.
pub fn answer(mode: Mode, request: &Request) -> (&'static str, Reply) {
    let path = request.path.split('?').next().unwrap_or_default();
    let Some(rest) = path.strip_prefix("/v1beta/models") else {
        return not_found(request);
    };
    let action = rest.rsplit_once(':').map(|(_, action)| action);
    match (&request.method, action) {
        (&Method::POST, Some("streamGenerateContent")) => turn(mode, &request.body),
        (&Method::POST, Some("generateContent")) => (
            "json answer",
            Reply::Json(StatusCode::OK, side_answer(&request.body)),
        ),
        (&Method::POST, Some("countTokens")) => (
            "token count",
            Reply::Json(StatusCode::OK, json!({"totalTokens": 10})),
        ),
        (&Method::GET, None) => ("models", Reply::Json(StatusCode::OK, json!({"models": []}))),
        _ => not_found(request),
    }
}

fn turn(mode: Mode, body: &Value) -> (&'static str, Reply) {
    let last = body["contents"].as_array().and_then(|c| c.last());
    let after_tool = last
        .and_then(|content| content["parts"].as_array())
        .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()));
    match mode {
        Mode::Slow => ("slow text", Reply::Sse(slow_text())),
        Mode::Permission if after_tool => ("text after tool", Reply::Sse(text(AFTER_TOOL))),
        Mode::Permission => ("tool call", Reply::Sse(vec![tool_call()])),
    }
}

/// One streamed chunk with these parts; the last one carries `finishReason` and usage.
fn chunk(parts: Value, last: bool) -> String {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    let mut data = json!({"modelVersion": "gemini-2.5-flash", "responseId": "survey"});
    if last {
        candidate["finishReason"] = json!("STOP");
        data["usageMetadata"] = json!({
            "promptTokenCount": 10,
            "candidatesTokenCount": 10,
            "totalTokenCount": 20
        });
    }
    data["candidates"] = json!([candidate]);
    sse(None, &data)
}

fn slow_text() -> Vec<Frame> {
    let mut frames: Vec<Frame> = ticks()
        .map(|token| Frame::tick(chunk(json!([{"text": token}]), false)))
        .collect();
    // An empty last part carries the finish reason (as the real API's last chunk often does).
    frames.push(Frame::now(chunk(json!([{"text": ""}]), true)));
    frames
}

fn text(text: &str) -> Vec<Frame> {
    vec![Frame::now(chunk(json!([{"text": text}]), true))]
}

fn tool_call() -> Frame {
    let call = json!({
        "functionCall": {
            "name": "run_shell_command",
            "args": {"command": COMMAND, "description": "Create the survey's file."}
        }
    });
    Frame::now(chunk(json!([call]), true))
}

/// A non-streamed answer: JSON text matching the request's schema when it has one (the
/// router's `complexity_score`, the next-speaker check's `next_speaker`, …), else plain text.
fn side_answer(body: &Value) -> Value {
    let config = &body["generationConfig"];
    let schema = config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"));
    let text = match schema {
        Some(schema) => example(schema).to_string(),
        None => "ok".to_owned(),
    };
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
        "modelVersion": "gemini-2.5-flash"
    })
}

/// A small value matching a JSON schema (Gemini's upper-case type names too): an enum's first
/// value, every property of an object, one item of an array. Bounded by the schema's depth.
fn example(schema: &Value) -> Value {
    example_at(schema, 0)
}

fn example_at(schema: &Value, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let kind = schema["type"].as_str().unwrap_or("object").to_lowercase();
    match kind.as_str() {
        "string" => json!("user"),
        "integer" | "number" => json!(10),
        "boolean" => json!(false),
        "array" => json!([example_at(&schema["items"], depth + 1)]),
        _ => {
            let mut object = Map::new();
            if let Some(properties) = schema["properties"].as_object() {
                for (name, property) in properties {
                    object.insert(name.clone(), example_at(property, depth + 1));
                }
            }
            Value::Object(object)
        }
    }
}
