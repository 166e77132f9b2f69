//! Keep-alive comments on `/mcp` event streams. At 2026-07-28 a closed `tools/call` stream is
//! the call's cancel, so a proxy that cuts idle connections would cancel real work: behind a
//! proxy that closes a connection after 500 ms without a byte from the gateway, a 1.5 s call
//! completes when the gateway sends a comment every 200 ms (`keep_alive = "200ms"`), and is
//! cancelled (the demo upstream logs its sleep as cancelled) when keep-alives are off.

mod support;

use std::time::Duration;

use cancelkit::wire::sse;
use futures_util::StreamExt;
use serde_json::{Value, json};
use support::http::{routing_headers, sleep_call, stamped, until_stderr};
use support::{Gateway, Options, client, config, token};

/// How long the proxy lets the gateway stay silent.
const IDLE_CUT: Duration = Duration::from_millis(500);

async fn idle_cutting_proxy(target: String) -> String {
    cancelkit_tests::proxy::idle_cutting(target, IDLE_CUT).await
}

/// POSTs a stamped (2026-07-28) 1.5 s `demo-sleep` to `/mcp` at `base`; the messages and the
/// number of comments the stream carried before it ended.
async fn sleep_through(base: &str) -> (Vec<Value>, u64) {
    let message = stamped(sleep_call(json!(7), 1.5), "2026-07-28");
    let response = client()
        .post(format!("{base}/mcp"))
        .bearer_auth(token("alice"))
        .header("accept", "application/json, text/event-stream")
        .headers(routing_headers(&message).into_iter().collect())
        .json(&message)
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut events = Vec::new();
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(10), body.next()).await
    {
        parser.feed(&chunk, &mut events).unwrap();
    }
    let messages = events
        .iter()
        .filter_map(|e| serde_json::from_str(&e.data).ok())
        .collect();
    (messages, parser.comments())
}

fn start(keep_alive: &str) -> Gateway {
    Gateway::with(Options {
        config: config(&format!("keep_alive = \"{keep_alive}\"\n")),
        ..Options::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alives_hold_a_long_call_open_through_an_idle_cutting_proxy() {
    let gateway = start("200ms");
    let proxy = idle_cutting_proxy(gateway.base.trim_start_matches("http://").to_owned()).await;
    let (messages, comments) = sleep_through(&proxy).await;
    let response = messages.iter().find(|m| m["id"] == 7);
    assert!(
        response.is_some_and(|r| r["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("slept"))),
        "{messages:?}\n{}",
        gateway.stderr()
    );
    assert!(comments >= 3, "{comments} keep-alive comments in 1.5 s");
    assert_eq!(gateway.count_stderr("cancelled tools/call sleep"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keep_alives_the_proxy_cuts_the_stream_and_the_call_is_cancelled() {
    let gateway = start("off");
    let proxy = idle_cutting_proxy(gateway.base.trim_start_matches("http://").to_owned()).await;
    let (messages, comments) = sleep_through(&proxy).await;
    assert_eq!(comments, 0);
    assert!(!messages.iter().any(|m| m["id"] == 7), "{messages:?}");
    until_stderr(&gateway, "cancelled tools/call sleep").await;
}
