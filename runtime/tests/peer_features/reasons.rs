//! Where a cause goes: one log line per cancelled request, and what each outgoing-reason
//! policy lets out on the wire.

use std::time::Duration;

use cancelkit::CancelReason;
use cancelkit::peer::ReasonPolicy;
use cancelkit::protocol::jsonrpc::RequestId;
use serde_json::{Value, json};

use crate::common::{Event, next_event};
use crate::{MCP, common, request};

/// Collects what the fmt subscriber writes.
#[derive(Clone, Default)]
struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    /// The INFO lines that name request `id`.
    fn lines_for(&self, id: &str) -> Vec<String> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .filter(|line| line.contains(" INFO ") && line.contains(&format!("request_id={id} ")))
            .map(str::to_owned)
            .collect()
    }
}

/// One INFO line per cancelled request, with its id, its method and its cause — whether the
/// peer cancelled it or the connection closed under it.
#[tokio::test]
async fn each_cancellation_is_logged_once_with_its_cause() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    // A current-thread test: the peer's tasks run on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);
    let mut s = common::serve(MCP, |b| b);
    s.wire
        .send(request(1, "sleep", json!({"label": "a", "ms": 60_000})))
        .await;
    s.wire
        .send(request(2, "sleep", json!({"label": "b", "ms": 60_000})))
        .await;
    for _ in 0..2 {
        next_event(&mut s.events).await;
    }
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user pressed stop"}}))
        .await;
    assert_eq!(next_event(&mut s.events).await, Event::Dropped("a".into()));
    s.wire.hang_up().await;
    assert_eq!(next_event(&mut s.events).await, Event::Dropped("b".into()));
    tokio::time::timeout(Duration::from_secs(5), s.server.closed())
        .await
        .unwrap();

    let one = log.lines_for("1");
    assert_eq!(one.len(), 1, "{one:#?}");
    assert!(one[0].contains("method=\"sleep\""), "{}", one[0]);
    assert!(
        one[0].contains("reason=\"user pressed stop\""),
        "{}",
        one[0]
    );
    assert!(
        one[0].contains("cause=cancelled by the peer: user pressed stop"),
        "{}",
        one[0]
    );
    let two = log.lines_for("2");
    assert_eq!(two.len(), 1, "{two:#?}");
    assert!(two[0].contains("method=\"sleep\""), "{}", two[0]);
    assert!(
        two[0].contains("cause=cancelled: the connection closed"),
        "{}",
        two[0]
    );
}

/// What each outgoing-reason policy lets out: in the `notifications/cancelled` of a request we
/// made from a handler the peer cancelled with a text of its own, and in the -32800 answer to a
/// request cancelled through the API by a named operator.
#[tokio::test]
async fn each_reason_policy_on_the_wire() {
    let secret = "db password rejected for admin";
    for (policy, nested_reason, answer_reason) in [
        (
            None,
            Some("cancelled by the peer"),
            Some("cancelled through the API"),
        ),
        (Some(ReasonPolicy::None), None, None),
        (
            Some(ReasonPolicy::Fixed("cancelled by the gateway".into())),
            Some("cancelled by the gateway"),
            Some("cancelled by the gateway"),
        ),
        (
            Some(ReasonPolicy::Forward),
            Some("cancelled by the peer: db password rejected for admin"),
            Some("cancelled through the API by alice"),
        ),
    ] {
        let label = format!("{policy:?}");
        let mut s = common::serve(MCP, |b| match policy {
            Some(policy) => b.outgoing_reason(policy),
            None => b,
        });
        s.wire
            .send(request(10, "ask", json!({"label": "q", "ms": 0})))
            .await;
        let nested = s.wire.recv().await;
        assert_eq!(nested["method"], "client/confirm", "{label}");
        s.wire
            .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10, "reason": secret}}))
            .await;
        let cancel = s.wire.recv().await;
        assert_eq!(
            cancel["method"], "notifications/cancelled",
            "{label}: {cancel}"
        );
        assert_eq!(cancel["params"]["requestId"], nested["id"], "{label}");
        assert_eq!(
            cancel["params"].get("reason").and_then(Value::as_str),
            nested_reason,
            "{label}: {cancel}"
        );

        s.wire
            .send(request(11, "sleep", json!({"label": "s", "ms": 60_000})))
            .await;
        loop {
            if next_event(&mut s.events).await == Event::Started("s".into()) {
                break;
            }
        }
        assert!(s.peer.cancel_inbound(
            &RequestId::from(11),
            CancelReason::Api(Some("alice".into()))
        ));
        let answer = s.wire.recv().await;
        assert_eq!(answer["id"], 11, "{label}: {answer}");
        assert_eq!(answer["error"]["code"], -32800, "{label}: {answer}");
        assert_eq!(
            answer["error"]["data"]
                .get("reason")
                .and_then(Value::as_str),
            answer_reason,
            "{label}: {answer}"
        );
    }
}
