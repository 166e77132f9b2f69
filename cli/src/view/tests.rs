//! The viewer's tests: traces analysed and rendered, end to end.

use serde_json::{Value, json};

use super::*;

/// A trace file from `(t_us, dir, message)` triples.
fn trace(frames: &[(u64, &str, Value)]) -> String {
    frames
        .iter()
        .map(|(t, dir, m)| json!({"t_us": t, "dir": dir, "line": m.to_string()}).to_string() + "\n")
        .collect()
}

fn timeline(text: &str) -> Timeline {
    analyze(text.as_bytes()).unwrap()
}

#[test]
fn ids_1_and_string_1_are_different_requests() {
    let t = timeline(&trace(&[
        (1, "in", json!({"jsonrpc": "2.0", "id": 1, "method": "a"})),
        (2, "in", json!({"jsonrpc": "2.0", "id": "1", "method": "b"})),
        (3, "out", json!({"jsonrpc": "2.0", "id": "1", "result": {}})),
    ]));
    assert_eq!(t.rows.len(), 2);
    assert_eq!(
        (t.rows[0].method.as_str(), t.rows[0].id.as_str()),
        ("a", "1")
    );
    assert_eq!(t.rows[0].response, None);
    assert_eq!(
        (t.rows[1].method.as_str(), t.rows[1].id.as_str()),
        ("b", "\"1\"")
    );
    assert_eq!(t.rows[1].response.as_ref().map(|r| r.t_us), Some(3));
    let html = render(&t, "t");
    assert!(html.contains("data-id=\"1\""), "{html}");
    assert!(html.contains("data-id=\"&quot;1&quot;\""), "{html}");
}

#[test]
fn a_response_after_a_cancel_is_late() {
    let t = timeline(&trace(&[
        (
            10,
            "in",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
        ),
        (
            20,
            "in",
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ),
        (30, "out", json!({"jsonrpc": "2.0", "id": 2, "result": {}})),
        (
            40,
            "in",
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        ),
        (
            1040,
            "out",
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32800, "message": "cancelled"}}),
        ),
    ]));
    assert!(t.rows[0].is_late());
    assert!(!t.rows[1].is_late());
    assert_eq!(t.rows[0].cancels.len(), 1);
    let html = render(&t, "t");
    assert_eq!(html.matches("class=\"bar late\"").count(), 1, "{html}");
    assert_eq!(html.matches("class=\"bar\"").count(), 1, "{html}");
    assert_eq!(html.matches("class=\"cancel\"").count(), 1, "{html}");
    assert!(html.contains("response 1.0 ms after the cancel"), "{html}");
}

#[test]
fn every_cancel_form_finds_its_request() {
    let t = timeline(&trace(&[
        (1, "in", json!({"id": "a", "method": "x"})),
        (
            2,
            "in",
            json!({"method": "$/cancel_request", "params": {"requestId": "a"}}),
        ),
        (3, "in", json!({"id": 7, "method": "y"})),
        (
            4,
            "in",
            json!({"method": "$/cancelRequest", "params": {"id": 7}}),
        ),
        (
            5,
            "in",
            json!({"id": 8, "method": "session/prompt", "params": {"sessionId": "s"}}),
        ),
        (
            6,
            "in",
            json!({"id": 9, "method": "session/prompt", "params": {"sessionId": "other"}}),
        ),
        (
            7,
            "in",
            json!({"method": "session/cancel", "params": {"sessionId": "s"}}),
        ),
        // a cancel travelling the wrong way names nothing
        (
            8,
            "out",
            json!({"method": "$/cancelRequest", "params": {"id": 9}}),
        ),
    ]));
    let cancelled: Vec<usize> = t.rows.iter().map(|r| r.cancels.len()).collect();
    assert_eq!(cancelled, [1, 1, 1, 0]);
    assert_eq!(t.unmatched_cancels, 1);
    let html = render(&t, "t");
    assert_eq!(html.matches("class=\"bar open\"").count(), 4, "{html}");
    assert!(html.contains("no response"), "{html}");
}

#[test]
fn malformed_lines_are_counted_not_fatal() {
    let mut text = trace(&[(1, "in", json!({"id": 1, "method": "ok"}))]);
    text.push_str("not json\n[1,2]\n{\"t_us\":-1,\"dir\":\"in\",\"line\":\"x\"}\n");
    text.push_str(
        "{\"t_us\":2,\"dir\":\"sideways\",\"line\":\"{}\"}\n{\"t_us\":3,\"dir\":\"in\"}\n",
    );
    text.push_str("{\"t_us\":4,\"dir\":\"out\",\"line\":\"plain log line\"}\n");
    text.push_str("{\"t_us\":5,\"dir\":\"out\",\"base64\":\"/w==\"}\n{\"t_us\":6,\"dropped\":3}\n");
    text.push_str("\u{0}\u{ffff}\n{\"t_us\":");
    let t = timeline(&text);
    assert_eq!(t.rows.len(), 1);
    assert_eq!(t.malformed, 7);
    assert_eq!(t.not_json_rpc, 2);
    assert_eq!(t.dropped, 3);
    let html = render(&t, "t");
    assert!(html.contains("7 malformed lines"), "{html}");
    assert!(html.contains("dropped 3 chunks"), "{html}");
    // not UTF-8 at all
    let t = analyze(&b"\xff\xfe\n"[..]).unwrap();
    assert_eq!(t.malformed, 1);
}

#[test]
fn everything_from_the_trace_is_escaped() {
    let t = timeline(&trace(&[
        (
            1,
            "in",
            json!({"id": "<script>alert(1)</script>", "method": "<script>alert('m')</script>"}),
        ),
        (
            2,
            "in",
            json!({"method": "notifications/cancelled", "params": {"requestId": "<script>alert(1)</script>"}}),
        ),
    ]));
    let html = render(&t, "<script>title</script>");
    assert_eq!(
        html.matches("<script>").count(),
        1,
        "only our own script: {html}"
    );
    assert!(
        html.contains("data-method=\"&lt;script&gt;alert(&#39;m&#39;)&lt;/script&gt;\""),
        "{html}"
    );
    assert!(html.contains("&lt;script&gt;title"), "{html}");
}

#[test]
fn rows_are_capped_with_a_note() {
    let frames: Vec<_> = (0..5)
        .map(|i| (i, "in", json!({"id": i, "method": "m"})))
        .collect();
    let t = analyze_with_limit(trace(&frames).as_bytes(), 3).unwrap();
    assert_eq!((t.rows.len(), t.rows_not_shown), (3, 2));
    let html = render(&t, "t");
    assert!(
        html.contains("only the first 3 requests are drawn; 2 more"),
        "{html}"
    );
    assert_eq!(html.matches("class=\"row\"").count(), 3);
}
