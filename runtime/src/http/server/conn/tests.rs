use cancelkit_protocol::jsonrpc::RequestId;

use super::{Conn, Kind};
use crate::http::server::stream::{SessionBytes, StreamLimits};
use crate::peer::{McpRevision, Message, Peer, Protocol};

fn session_conn() -> std::sync::Arc<Conn> {
    let limits = StreamLimits {
        replay_events: 8,
        replay_bytes: 1 << 20,
        unread_bytes: 1 << 20,
        session: SessionBytes::new(1 << 20),
    };
    let builder = Peer::builder(Protocol::Mcp(McpRevision::Negotiated));
    Conn::start(Kind::Session, builder, limits, 16).0
}

fn cancel_of(id: i64) -> Message {
    Message::Notification {
        method: "notifications/cancelled".into(),
        params: serde_json::value::to_raw_value(&serde_json::json!({ "requestId": id })).ok(),
    }
}

/// The cancel `written` gave back, as text.
fn kept(message: Option<Message>) -> Option<String> {
    message.map(|m| format!("{m:?}"))
}

/// A session's request and its cancel come on two HTTP requests: the cancel goes into the
/// peer only after its request has, whichever came first.
#[tokio::test]
async fn a_cancel_goes_into_the_peer_only_after_its_request() {
    let conn = session_conn();
    // Admitted but not written yet: the cancel ends its stream and waits for the request.
    let id = RequestId::Number(7);
    let admitted = conn.admit(&id, None, true, None).unwrap();
    let mut events = admitted.stream.attach(None).unwrap();
    assert!(!conn.cancel(&id, cancel_of(7)), "not before its request");
    assert!(events.recv().await.is_none(), "its stream ends, unanswered");
    assert_eq!(
        kept(conn.written(&(0, id))),
        kept(Some(cancel_of(7))),
        "it follows the request"
    );
    // Written: the cancel goes in at once.
    let id = RequestId::Number(8);
    conn.admit(&id, None, true, None).unwrap();
    assert_eq!(kept(conn.written(&(0, id.clone()))), None);
    assert!(conn.cancel(&id, cancel_of(8)));
    assert_eq!(kept(conn.written(&(0, id))), None, "nothing kept");
    // Not arrived yet: kept for it.
    let id = RequestId::Number(9);
    assert!(!conn.cancel(&id, cancel_of(9)));
    conn.admit(&id, None, true, None).unwrap();
    assert_eq!(kept(conn.written(&(0, id))), kept(Some(cancel_of(9))));
}
