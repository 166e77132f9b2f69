//! Hostile input, one test per case: after each, the connection still serves requests, the
//! server has not panicked, only the answers the protocol allows were sent, and nothing is
//! retained: no registry entry (`in_flight`) and no pending outgoing request. That no heap is
//! retained either is checked by `tests/tests/peer_memory.rs`, which runs these inputs many
//! times under a counting allocator (a global allocator does not fit this many-test binary).

mod common;

use std::time::Duration;

use cancelkit::peer::{McpRevision, PeerHandle, Protocol};
use common::{Event, next_event, serve};
use serde_json::{Value, json};

const ACP: Protocol = Protocol::Acp;
const MCP: Protocol = Protocol::Mcp(McpRevision::V2025_11_25);

/// What the peer must answer to the hostile input.
enum Expect {
    /// One error response with this id (`null` when unreadable) and code.
    Error(Value, i64),
    /// Nothing at all.
    Silence,
}

fn line(text: &str) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    bytes.push(b'\n');
    bytes
}

async fn check(protocol: Protocol, input: Vec<u8>, expect: Expect) {
    let mut s = serve(protocol, |b| b);
    s.wire.send_raw(&input).await;
    match expect {
        Expect::Error(id, code) => {
            let answer = s.wire.recv().await;
            assert_eq!(answer["id"], id, "{answer}");
            assert_eq!(answer["error"]["code"], code, "{answer}");
            assert!(answer["error"]["message"].is_string(), "{answer}");
        }
        Expect::Silence => s.wire.assert_silent(Duration::from_millis(100)).await,
    }
    s.wire.assert_alive().await;
    assert_nothing_retained(&s.peer);
}

/// The registry is empty, no request of ours waits for an answer, and the connection is open.
fn assert_nothing_retained(peer: &PeerHandle) {
    assert_eq!(peer.in_flight(), 0, "registry entries left behind");
    assert_eq!(peer.pending_requests(), 0, "outgoing requests left pending");
    assert!(!peer.is_closed());
}

macro_rules! hostile {
    ($($name:ident: $protocol:expr, $input:expr => $expect:expr;)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                check($protocol, $input, $expect).await;
            }
        )*
    };
}

hostile! {
    invalid_json: ACP, line("{not json") => Expect::Error(Value::Null, -32700);
    truncated_json: ACP, line(r#"{"jsonrpc":"2.0","id":1,"method":"echo""#) => Expect::Error(Value::Null, -32700);
    invalid_utf8: ACP, [b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"e\xff\xfe\"}".as_slice(), b"\n"].concat() => Expect::Error(Value::Null, -32700);
    empty_object: ACP, line("{}") => Expect::Error(Value::Null, -32600);
    top_level_number: ACP, line("42") => Expect::Error(Value::Null, -32600);
    top_level_string: MCP, line(r#""hello""#) => Expect::Error(Value::Null, -32600);
    top_level_null: MCP, line("null") => Expect::Error(Value::Null, -32600);
    batch_array: MCP, line(r#"[{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"a"}}]"#) => Expect::Error(Value::Null, -32600);
    wrong_version: ACP, line(r#"{"jsonrpc":"1.0","id":4,"method":"echo","params":{"text":"a"}}"#) => Expect::Error(json!(4), -32600);
    missing_version: ACP, line(r#"{"id":4,"method":"echo","params":{"text":"a"}}"#) => Expect::Error(json!(4), -32600);
    method_of_wrong_type: ACP, line(r#"{"jsonrpc":"2.0","id":4,"method":17}"#) => Expect::Error(Value::Null, -32600);
    params_of_wrong_type: ACP, line(r#"{"jsonrpc":"2.0","id":"p","method":"echo","params":"text"}"#) => Expect::Error(json!("p"), -32602);
    missing_params: MCP, line(r#"{"jsonrpc":"2.0","id":"p","method":"echo"}"#) => Expect::Error(json!("p"), -32602);
    null_id: MCP, line(r#"{"jsonrpc":"2.0","id":null,"method":"echo","params":{"text":"a"}}"#) => Expect::Error(Value::Null, -32600);
    float_id: ACP, line(r#"{"jsonrpc":"2.0","id":1.5,"method":"echo","params":{"text":"a"}}"#) => Expect::Error(Value::Null, -32600);
    huge_id: ACP, line(r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"echo","params":{"text":"a"}}"#) => Expect::Error(Value::Null, -32600);
    object_id: ACP, line(r#"{"jsonrpc":"2.0","id":{"n":1},"method":"echo","params":{"text":"a"}}"#) => Expect::Error(Value::Null, -32600);
    neither_request_nor_response: ACP, line(r#"{"jsonrpc":"2.0","id":8}"#) => Expect::Error(json!(8), -32600);
    unknown_method: MCP, line(r#"{"jsonrpc":"2.0","id":9,"method":"tools/explode"}"#) => Expect::Error(json!(9), -32601);
    unknown_dollar_notification: ACP, line(r#"{"jsonrpc":"2.0","method":"$/setTrace","params":{"value":"off"}}"#) => Expect::Silence;
    unknown_notification: MCP, line(r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#) => Expect::Silence;
    cancel_for_unknown_id: ACP, line(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":12345}}"#) => Expect::Silence;
    cancel_with_null_id: ACP, line(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":null}}"#) => Expect::Silence;
    cancel_with_object_id: MCP, line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"x":1}}}"#) => Expect::Silence;
    cancel_without_params: MCP, line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#) => Expect::Silence;
    cancel_without_request_id: MCP, line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"?"}}"#) => Expect::Silence;
    response_to_a_request_never_sent: ACP, line(r#"{"jsonrpc":"2.0","id":999,"result":{"x":1}}"#) => Expect::Silence;
    error_response_to_a_request_never_sent: MCP, line(r#"{"jsonrpc":"2.0","id":"nope","error":{"code":-32000,"message":"x"}}"#) => Expect::Silence;
    response_with_null_id: ACP, line(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#) => Expect::Silence;
    blank_lines: ACP, b"\n\r\n   \n\t\n".to_vec() => Expect::Silence;
    deep_nesting: ACP, line(&format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))) => Expect::Error(Value::Null, -32600);
    deep_nesting_in_params: ACP, line(&format!(r#"{{"jsonrpc":"2.0","id":2,"method":"echo","params":{{"text":{}{}}}}}"#, "[".repeat(100_000), "]".repeat(100_000))) => Expect::Error(json!(2), -32602);
    deep_nesting_into_a_value: ACP, line(&format!(r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000))) => Expect::Error(json!(3), -32602);
    ten_megabyte_garbage_line: ACP, line(&"x".repeat(10 * 1024 * 1024)) => Expect::Error(Value::Null, -32700);
}

/// A 10 MB line over a peer whose limit is 1 MB is skipped with one error, and the next line
/// is read normally.
#[tokio::test]
async fn oversized_line_beyond_the_limit_is_skipped() {
    let mut s = serve(ACP, |b| b.max_frame_len(1024 * 1024));
    let mut input = vec![b'{'; 10 * 1024 * 1024];
    input.push(b'\n');
    s.wire.send_raw(&input).await;
    let answer = s.wire.recv().await;
    assert_eq!(answer["error"]["code"], -32600);
    assert_eq!(
        answer["error"]["data"],
        "message exceeds the maximum frame size"
    );
    s.wire.assert_alive().await;
    assert_nothing_retained(&s.peer);
}

/// A flood of cancels for ids that do not exist: no answers, nothing retained, still serving.
#[tokio::test]
async fn a_cancel_flood_is_absorbed() {
    let mut s = serve(MCP, |b| b);
    let mut input = Vec::new();
    for id in 0..20_000 {
        input.extend(line(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"flood"}}}}"#
        )));
    }
    s.wire.send_raw(&input).await;
    s.wire.assert_alive().await;
    s.wire.assert_silent(Duration::from_millis(100)).await;
    assert_nothing_retained(&s.peer);
}

/// A cancel flood while a request is running: the request is cancelled once, everything else is
/// ignored.
#[tokio::test]
async fn repeated_cancels_for_one_request_cancel_it_once() {
    let mut s = serve(ACP, |b| b);
    s.wire.send(json!({"jsonrpc": "2.0", "id": 1, "method": "sleep", "params": {"label": "x", "ms": 60_000}})).await;
    assert_eq!(next_event(&mut s.events).await, Event::Started("x".into()));
    let mut input = Vec::new();
    for _ in 0..1_000 {
        input.extend(line(
            r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#,
        ));
    }
    s.wire.send_raw(&input).await;
    assert_eq!(s.wire.recv().await["error"]["code"], -32800);
    s.wire.assert_silent(Duration::from_millis(100)).await;
    s.wire.assert_alive().await;
    assert_nothing_retained(&s.peer);
}

/// A cancel for a request that already finished does not touch a later request reusing the id.
#[tokio::test]
async fn a_late_cancel_does_not_hit_a_reused_id() {
    let mut s = serve(ACP, |b| b);
    assert_eq!(
        s.wire
            .call(json!(3), "echo", json!({"text": "first"}))
            .await["result"],
        "first"
    );
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 3}}))
        .await;
    let answer = s
        .wire
        .call(json!(3), "sleep", json!({"label": "second", "ms": 50}))
        .await;
    assert_eq!(answer["result"], "second");
    assert_nothing_retained(&s.peer);
}

/// A cancel for an id our side used for an outgoing request does not cancel anything of ours.
#[tokio::test]
async fn a_cancel_for_an_other_direction_id_is_ignored() {
    let mut s = serve(ACP, |b| b);
    let outgoing = s.peer.request::<_, Value>("client/thing", json!({}));
    let sent = s.wire.recv().await;
    s.wire.send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": sent["id"]}})).await;
    s.wire.assert_silent(Duration::from_millis(100)).await;
    assert_eq!(s.peer.pending_requests(), 1);
    assert_eq!(s.peer.in_flight(), 0);
    drop(outgoing);
    s.wire.assert_alive().await;
    assert_nothing_retained(&s.peer);
}

/// Content-Length framing with a broken header block: one error, then the next frame is read.
#[tokio::test]
async fn lsp_bad_headers_are_skipped() {
    let mut s = serve(Protocol::Lsp, |b| b);
    s.wire
        .send_raw(b"Content-Type: application/json\r\n\r\n")
        .await;
    let answer = s.wire.recv().await;
    assert_eq!(answer["error"]["code"], -32600);
    s.wire.send_raw(b"Content-Length: abc\r\n\r\n").await;
    assert_eq!(s.wire.recv().await["error"]["code"], -32600);
    s.wire.assert_alive().await;
    assert_nothing_retained(&s.peer);
}
