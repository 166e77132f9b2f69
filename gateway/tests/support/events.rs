//! Reading a response's event stream as it arrives.

use std::time::Duration;

use cancelkit::wire::sse;
use serde_json::Value;

/// Reads SSE messages from a response until `count` have arrived, the stream ends or
/// `within` passes (then what came). Events without data (a priming event) carry only an id.
/// Gives the messages and the last event id seen.
pub async fn read_messages(
    response: reqwest::Response,
    count: usize,
    within: Duration,
) -> (Vec<Value>, Option<String>) {
    let mut body = futures_util::StreamExt::boxed(response.bytes_stream());
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut events = Vec::new();
    let mut messages = Vec::new();
    let mut last_id = None;
    let deadline = tokio::time::Instant::now() + within;
    while messages.len() < count {
        let Ok(chunk) =
            tokio::time::timeout_at(deadline, futures_util::StreamExt::next(&mut body)).await
        else {
            break;
        };
        let Some(chunk) = chunk else { break };
        let chunk = chunk.expect("a chunk");
        parser
            .feed(&chunk, &mut events)
            .expect("events within the limits");
        for event in events.drain(..) {
            last_id = event.id.clone().or(last_id);
            if !event.data.is_empty() {
                messages.push(serde_json::from_str(&event.data).expect("JSON in data"));
            }
        }
    }
    (messages, last_id)
}
