//! Two 2026-07-28 clients sharing an id and a progress token, a request of the server answered
//! through the session's stream, and short calls answered as JSON.

use cancelkit::wire::sse;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::harness::{WAIT, events, messages, post, session, stamped, start, tool};

#[tokio::test]
async fn clients_at_2026_sharing_an_id_and_a_progress_token_each_get_their_own() {
    let server = start(|s| s).await;
    let call = |tag: &str| {
        let mut message = stamped(tool(json!(1), "progress", json!({"tag": tag})));
        message["params"]["_meta"]["progressToken"] = json!("tok");
        message
    };
    let (a, b) = tokio::join!(
        post(&server.url, None, &call("a")).send(),
        post(&server.url, None, &call("b")).send()
    );
    let (a, b) = tokio::join!(events(a.unwrap(), |_| false), events(b.unwrap(), |_| false));
    for (got, tag) in [(messages(&a), "a"), (messages(&b), "b")] {
        assert_eq!(got.len(), 3, "{got:?}");
        for progress in &got[..2] {
            assert_eq!(progress["method"], "notifications/progress");
            assert_eq!(progress["params"]["progressToken"], "tok");
        }
        assert_eq!(got[2]["id"], 1);
        assert_eq!(got[2]["result"]["content"][0]["text"], tag);
    }
}

#[tokio::test]
async fn a_request_of_the_server_goes_on_the_session_stream_and_its_answer_comes_back() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let response = post(
        &server.url,
        Some(&session),
        &tool(json!(3), "ask", json!({})),
    )
    .send()
    .await
    .unwrap();
    let mut body = response.bytes_stream();
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut seen = Vec::new();
    let mut answered = false;
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(WAIT, body.next()).await {
        let mut events = Vec::new();
        parser.feed(&chunk, &mut events).unwrap();
        for message in messages(&events) {
            if message["method"] == "roots/list" {
                let answer = json!({"jsonrpc": "2.0", "id": message["id"],
                                    "result": {"roots": [{"uri": "file:///r"}]}});
                let accepted = post(&server.url, Some(&session), &answer)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(accepted.status(), 202);
                answered = true;
            }
            seen.push(message);
        }
    }
    assert!(answered, "{seen:?}");
    let last = seen.last().unwrap();
    assert_eq!(last["id"], 3);
    assert!(
        last["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("file:///r"),
        "{last}"
    );
}

#[tokio::test]
async fn short_calls_are_answered_as_json() {
    let server = start(|s| s.stream_methods(Vec::<String>::new())).await;
    let session = session(&server).await;
    let response = post(
        &server.url,
        Some(&session),
        &tool(json!(1), "echo", json!({"text": "j"})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "j");
}
