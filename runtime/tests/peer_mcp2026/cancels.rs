//! Client-only cancellation: a client's cancel stops the call, a 2026-07-28 server issues no
//! requests and sends `notifications/cancelled` only to end `subscriptions/listen`.

use std::time::Duration;

use cancelkit::peer::RequestError;
use serde_json::{Value, json};

use crate::common::{Event, next_event};
use crate::{SHORT, discover, meta, serve_negotiated, sleep_call};

#[tokio::test]
async fn a_client_cancel_stops_the_call_and_nothing_is_answered() {
    let mut s = serve_negotiated(|b| b);
    discover(&mut s).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": sleep_call("slow", 60_000, meta())}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("slow".into())
    );
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "user"}}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("slow".into())
    );
    s.wire.assert_silent(SHORT).await;
    let next = s
        .wire
        .call(json!(8), "tools/call", sleep_call("next", 0, meta()))
        .await;
    assert_eq!(next["result"]["content"][0]["text"], "next");
}

#[tokio::test]
async fn a_2026_server_issues_no_requests_and_cancels_only_its_listen_streams() {
    let mut s = serve_negotiated(|b| b);
    discover(&mut s).await;
    let asked = tokio::time::timeout(
        Duration::from_secs(5),
        s.peer
            .request::<_, Value>("sampling/createMessage", json!({})),
    )
    .await
    .expect("refused at once, not sent and waited for");
    assert!(
        matches!(&asked, Err(RequestError::NotAllowed(why)) if why.contains("issues no requests")),
        "{asked:?}"
    );
    let stray = s
        .peer
        .notify("notifications/cancelled", json!({"requestId": 5}))
        .await;
    assert!(
        matches!(stray, Err(RequestError::NotAllowed(_))),
        "{stray:?}"
    );
    s.wire.assert_silent(SHORT).await;

    // A listen stream the server ends: notifications/cancelled naming it, and no response.
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": "sub", "method": "subscriptions/listen", "params": {"ms": 200, "_meta": meta()}}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("listen".into())
    );
    s.peer
        .notify(
            "notifications/progress",
            json!({"progressToken": 1, "progress": 1}),
        )
        .await
        .unwrap();
    let ended = loop {
        let message = s.wire.recv().await;
        if message["method"] == "notifications/cancelled" {
            break message;
        }
    };
    assert_eq!(ended["params"]["requestId"], "sub", "{ended}");
    assert!(ended["params"]["reason"].is_string());
    s.wire.assert_silent(SHORT).await;
    // Once it ended, it cannot be cancelled again.
    let again = s
        .peer
        .notify("notifications/cancelled", json!({"requestId": "sub"}))
        .await;
    assert!(
        matches!(again, Err(RequestError::NotAllowed(_))),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_server_may_end_an_open_listen_stream_itself() {
    let mut s = serve_negotiated(|b| b);
    discover(&mut s).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": {"ms": 60_000, "_meta": meta()}}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("listen".into())
    );
    s.peer
        .notify(
            "notifications/cancelled",
            json!({"requestId": 3, "reason": "bye"}),
        )
        .await
        .expect("allowed for an open subscriptions/listen");
    let sent = s.wire.recv().await;
    assert_eq!(sent["params"]["requestId"], 3, "{sent}");
}
