//! The connection: a failed write closes it, ids are free again after an MCP cancel,
//! notifications in arrival order, panicking handlers, pending requests when it closes.

use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::peer::{Context, Peer, Protocol, RequestError, Router};
use serde_json::{Value, json};

use crate::common::{Event, next_event, serve};
use crate::{MCP, SHORT, common, sleep_request};

/// A writer that always fails, as stdout does once the other side has gone.
struct BrokenPipe;

impl tokio::io::AsyncWrite for BrokenPipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        _buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// When answers can no longer be written, the connection closes and cancels what is in flight.
#[tokio::test]
async fn a_failed_write_closes_the_connection() {
    use tokio::io::AsyncWriteExt;
    let (events, mut rx) = common::events_channel();
    let (mut client, server_io) = tokio::io::duplex(1 << 16);
    let server = Peer::builder(Protocol::Acp)
        .router(common::router(events))
        .connect(server_io, BrokenPipe);
    let line = |value: Value| format!("{value}\n");
    client
        .write_all(line(sleep_request(json!(1), "waiting", 60_000)).as_bytes())
        .await
        .unwrap();
    assert_eq!(next_event(&mut rx).await, Event::Started("waiting".into()));
    client
        .write_all(
            line(json!({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"text": "x"}}))
                .as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(next_event(&mut rx).await, Event::Dropped("waiting".into()));
    tokio::time::timeout(Duration::from_secs(5), server.closed())
        .await
        .expect("the connection closes");
}

/// MCP owes no response after a cancel, so a client may reuse the id at once: the new request
/// is served, not rejected as a duplicate, and the old handler's late end sends nothing.
#[tokio::test]
async fn mcp_ids_are_free_again_right_after_a_cancel() {
    let mut s = serve(MCP, |b| b);
    s.wire.send(sleep_request(json!(5), "old", 60_000)).await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("old".into())
    );
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}))
        .await;
    let answer = s.wire.call(json!(5), "echo", json!({"text": "new"})).await;
    assert_eq!(answer["result"], "new", "{answer}");
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("old".into())
    );
    s.wire.assert_silent(SHORT).await;
    assert_eq!(s.peer.in_flight(), 0);
}

/// Notifications are handled in the order they arrived, even when handlers take time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_are_handled_in_arrival_order() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let router = Router::new().notification("session/update", move |n: u64, _cx: Context| {
        let tx = tx.clone();
        async move {
            // Uneven work: later updates would overtake earlier ones if run concurrently.
            for _ in 0..(n % 7) {
                tokio::task::yield_now().await;
            }
            let _ = tx.send(n);
        }
    });
    let (_server, client) = common::pair(
        Peer::builder(Protocol::Acp).router(router),
        Peer::builder(Protocol::Acp),
    );
    for n in 0..1_000u64 {
        client.handle().notify("session/update", n).await.unwrap();
    }
    for expected in 0..1_000u64 {
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, expected);
    }
}

/// A handler that panics still answers (-32603), leaves nothing in flight, and the connection
/// goes on; so does a notification handler that panics.
#[tokio::test]
async fn a_panicking_handler_is_answered_and_the_connection_goes_on() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let router = Router::new()
        .request("boom", |_: Value, _cx: Context| async {
            if true {
                panic!("handler bug");
            }
            Ok::<Value, JsonRpcError>(Value::Null)
        })
        .request("echo", |text: String, _cx: Context| async move {
            Ok::<_, JsonRpcError>(text)
        })
        .notification("tick", move |n: u32, _cx: Context| {
            let tx = tx.clone();
            async move {
                assert!(n != 1, "notification handler bug");
                let _ = tx.send(n);
            }
        });
    let (server, client) = common::pair(
        Peer::builder(Protocol::Acp).router(router),
        Peer::builder(Protocol::Acp),
    );
    match client.handle().request::<_, Value>("boom", json!({})).await {
        Err(RequestError::Rpc(error)) => assert_eq!(error.code.code(), -32603),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.handle().in_flight(), 0);
    client.handle().notify("tick", 1).await.unwrap();
    client.handle().notify("tick", 2).await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap(),
        Some(2)
    );
    let echo: String = client.handle().request("echo", "alive").await.unwrap();
    assert_eq!(echo, "alive");
}

/// A request waiting for an answer fails with `Closed` when the connection ends.
#[tokio::test]
async fn pending_requests_fail_when_the_connection_closes() {
    let mut s = serve(Protocol::Acp, |b| b);
    let request = tokio::spawn({
        let peer = s.peer.clone();
        async move { peer.request::<_, Value>("client/never", json!({})).await }
    });
    assert_eq!(s.wire.recv().await["method"], "client/never");
    s.wire.hang_up().await;
    let outcome = tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(outcome, Err(RequestError::Closed)), "{outcome:?}");
    assert!(matches!(
        s.peer.request::<_, Value>("client/late", json!({})).await,
        Err(RequestError::Closed)
    ));
    assert!(s.peer.is_closed());
}
