//! The cause of a cancellation as the handler sees it: the routes that report it, and each
//! cause.

use std::time::Duration;

use cancelkit::peer::{Context, Protocol, Router};
use cancelkit::protocol::jsonrpc::RequestId;
use cancelkit::{CancelReason, CancellationToken, Cancelled, JsonRpcError, cancellable};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::common::{Served, serve_extended};
use crate::{MCP, request, wait_in_flight};

type Causes = mpsc::UnboundedReceiver<Option<CancelReason>>;

/// `watch` waits for its cancellation and reports the cause it sees through
/// `cancelkit::cancel_reason()`; `timeout` does the same inside a 100 ms `#[cancellable]`
/// timeout; `parent` reports what a scope over a plainly cancelled token sees.
pub fn cause_routes(router: Router, tx: mpsc::UnboundedSender<Option<CancelReason>>) -> Router {
    let (watch_tx, timeout_tx, parent_tx) = (tx.clone(), tx.clone(), tx);
    router
        .request("watch", move |_: Value, _cx: Context| {
            watch(watch_tx.clone())
        })
        .request("timeout", move |_: Value, _cx: Context| {
            timed(timeout_tx.clone())
        })
        .request("parent", move |_: Value, _cx: Context| {
            let tx = parent_tx.clone();
            async move {
                let token = CancellationToken::new();
                token.cancel();
                let cause =
                    cancelkit::with_token(token, async { cancelkit::cancel_reason() }).await;
                let _ = tx.send(cause);
                Ok::<_, JsonRpcError>(json!("reported"))
            }
        })
}

/// The causes channel is the tests' unbounded one (one cause per cancelled request, a few per
/// test).
#[cancellable(cooperative)]
async fn watch(tx: mpsc::UnboundedSender<Option<CancelReason>>) -> Result<Value, JsonRpcError> {
    cancelkit::cancelled().await;
    let cause = cancelkit::cancel_reason();
    let _ = tx.send(cause.clone());
    Err(Cancelled::new(cause.expect("cancelled")).into())
}

#[cancellable(cooperative, timeout = "100ms")]
async fn timed(tx: mpsc::UnboundedSender<Option<CancelReason>>) -> Result<Value, JsonRpcError> {
    cancelkit::cancelled().await;
    let _ = tx.send(cancelkit::cancel_reason());
    Ok(json!("timed out"))
}

fn serve_causes(
    protocol: Protocol,
    configure: impl FnOnce(cancelkit::peer::PeerBuilder) -> cancelkit::peer::PeerBuilder,
) -> (Served, Causes) {
    let (tx, rx) = mpsc::unbounded_channel();
    let served = serve_extended(
        protocol,
        move |router, _| cause_routes(router, tx),
        configure,
    );
    (served, rx)
}

pub async fn next_cause(causes: &mut Causes) -> Option<CancelReason> {
    tokio::time::timeout(Duration::from_secs(5), causes.recv())
        .await
        .expect("a cause within 5 s")
        .expect("causes channel open")
}

#[tokio::test]
async fn each_cause_is_visible_to_the_handler() {
    // The peer's cancel, with its text.
    let (mut s, mut causes) = serve_causes(MCP, |b| b);
    s.wire.send(request(1, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user pressed stop"}}))
        .await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::Peer(Some("user pressed stop".into())))
    );

    // A timeout.
    s.wire.send(request(2, "timeout", json!({}))).await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::Timeout(Duration::from_millis(100)))
    );

    // A parent cancelled without a recorded reason.
    s.wire.send(request(3, "parent", json!({}))).await;
    assert_eq!(next_cause(&mut causes).await, Some(CancelReason::Parent));

    // An API: someone asked on our side, and we know who.
    s.wire.send(request(4, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    assert!(s.peer.cancel_inbound(
        &RequestId::from(4),
        CancelReason::Api(Some("ops@example.com".into()))
    ));
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::Api(Some("ops@example.com".into())))
    );
    // The peer did not cancel it, so even MCP answers it; who asked stays with us.
    let answer = loop {
        let message = s.wire.recv().await;
        if message["id"] == 4 {
            break message;
        }
    };
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(4), json!(-32800))
    );
    assert_eq!(
        answer["error"]["data"]["reason"], "cancelled through the API",
        "{answer}"
    );
    assert!(
        !s.peer
            .cancel_inbound(&RequestId::from(4), CancelReason::Api(None))
    );

    // The peer hung up.
    s.wire.send(request(5, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    s.wire.hang_up().await;
    assert_eq!(
        next_cause(&mut causes).await,
        Some(CancelReason::ConnectionClosed)
    );

    // We shut down.
    let (mut s, mut causes) = serve_causes(MCP, |b| b);
    s.wire.send(request(1, "watch", json!({}))).await;
    wait_in_flight(&s, 1).await;
    s.peer.close();
    assert_eq!(next_cause(&mut causes).await, Some(CancelReason::Shutdown));
}
