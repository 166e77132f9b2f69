//! Client text in the log: only escaped.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::harness::{TOKEN, post, rig};

/// A writer that keeps what the log subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The log line holding `needle`; panics if none does.
    fn line_with(&self, needle: &str) -> String {
        let text = self.text();
        text.lines()
            .find(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no log line holds {needle:?}:\n{text}"))
            .to_owned()
    }
}

/// A `callback_url` with `%`, newlines and ANSI escapes, and ids with the same, reach the log
/// only escaped: one line each, no raw escape character. The subscriber's own ANSI
/// sanitization is off, so the escaping seen is the runtime's. (A current-thread runtime: the
/// servers' tasks run on this thread, under this thread's subscriber.)
#[tokio::test]
async fn client_text_reaches_the_log_escaped() {
    use tracing_subscriber::util::SubscriberInitExt;
    let log = Captured::default();
    let writer = log.clone();
    let _subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_ansi_sanitization(false)
        .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
        .with_writer(move || writer.clone())
        .finish()
        .set_default();

    let rig = rig().await;
    let base = rig.target.base_url.clone();
    let client = reqwest::Client::new();
    let origin = rig
        .invoker
        .callback_url()
        .trim_end_matches("/tool_result")
        .to_owned();
    // On the allowed origin, but with a line break and a colour escape that would forge a log
    // line; and off the allowed origin with `%` sequences.
    let injected = format!("{origin}/cb%0a%1b\r\n\u{1b}[31mFORGED-LINE level=ERROR\u{1b}[0m");
    let elsewhere = "http://evil.example/%s%n%0d%0a%x1b";
    for (id, callback_url) in [("c1", injected.as_str()), ("c2", elsewhere)] {
        let response = client
            .post(format!("{base}/invoke"))
            .bearer_auth(TOKEN)
            .json(&json!({
                "operation": "gate", "arguments": {}, "id": id, "group_id": "thread-1",
                "callback_url": callback_url,
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{callback_url:?}");
    }
    // An unknown operation named with a line break, and a forged callback whose ids carry one.
    let response = client
        .post(format!("{base}/invoke"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "operation": "no\nsuch\u{1b}[2Jtool", "arguments": {}, "id": "c3",
            "group_id": "thread-1", "callback_url": format!("{origin}/cb"),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let forged =
        json!({"type": "tool_result", "group_id": "g\n\u{1b}[2Jforged", "id": "x", "text": "x"});
    let url = format!("{}/{}", rig.invoker.callback_url(), "ab".repeat(16));
    assert_eq!(post(&url, &forged).await.0, 400);

    let text = log.text();
    assert!(
        !text.contains('\u{1b}'),
        "a raw escape reached the log:\n{text}"
    );
    assert!(
        !text.contains('\r'),
        "a raw carriage return reached the log:\n{text}"
    );
    assert!(
        !text
            .lines()
            .any(|line| line.starts_with("\u{1b}[31mFORGED") || line.starts_with("FORGED")),
        "a forged line:\n{text}"
    );
    let line = log.line_with("callback_url holds whitespace or control characters");
    assert!(
        line.contains(r"/cb%0a%1b\r\n\u{1b}[31mFORGED-LINE level=ERROR\u{1b}[0m"),
        "{line}"
    );
    let line = log.line_with("not on an allowed origin");
    assert!(
        line.contains(r#""http://evil.example/%s%n%0d%0a%x1b""#),
        "{line}"
    );
    let line = log.line_with("unknown operation");
    assert!(line.contains(r#""no\nsuch\u{1b}[2Jtool""#), "{line}");
    let line = log.line_with("invalid ids");
    assert!(line.contains(r#""g\n\u{1b}[2Jforged""#), "{line}");
}
