//! The cancellation API: cancel bodies that do not parse or have the wrong types, bodies over
//! the limit on every endpoint, odd ids in the status path.

use serde_json::{Value, json};

use crate::support::http::echo_call;
use crate::support::{client, token};
use crate::target::{LIMIT, Target};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_bodies_that_do_not_parse_or_have_wrong_types_get_422() {
    let mut target = Target::start().await;
    let long_id = "x".repeat(300);
    let long_reason = "r".repeat(5000);
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        ("empty", b"".to_vec()),
        ("truncated", b"{\"requestId\": \"1\"".to_vec()),
        ("not json", b"requestId=1".to_vec()),
        ("invalid utf-8", b"{\"requestId\": \"\xff\xfe\"}".to_vec()),
        ("null", b"null".to_vec()),
        ("array", b"[{\"requestId\": \"1\"}]".to_vec()),
        ("string", b"\"1\"".to_vec()),
        ("missing requestId", br#"{"reason": "x"}"#.to_vec()),
        (
            "requestId number",
            br#"{"requestId": 1, "reason": null}"#.to_vec(),
        ),
        (
            "requestId array",
            br#"{"requestId": ["1"], "reason": null}"#.to_vec(),
        ),
        (
            "requestId null",
            br#"{"requestId": null, "reason": null}"#.to_vec(),
        ),
        ("requestId object", br#"{"requestId": {"id": 1}}"#.to_vec()),
        (
            "reason number",
            br#"{"requestId": "1", "reason": 5}"#.to_vec(),
        ),
        (
            "reason object",
            br#"{"requestId": "1", "reason": {"why": 1}}"#.to_vec(),
        ),
        ("empty requestId", br#"{"requestId": ""}"#.to_vec()),
        (
            "control characters",
            br#"{"requestId": "a\u0000b\n"}"#.to_vec(),
        ),
        (
            "requestId too long",
            format!(r#"{{"requestId": "{long_id}"}}"#).into_bytes(),
        ),
        (
            "reason too long",
            format!(r#"{{"requestId": "1", "reason": "{long_reason}"}}"#).into_bytes(),
        ),
        (
            "deep nesting",
            format!("{}{}", "[".repeat(1000), "]".repeat(1000)).into_bytes(),
        ),
    ];
    for prefix in ["", "/v1"] {
        for user in ["admin", "bob"] {
            for (label, body) in &bodies {
                let reply = target
                    .send(
                        &format!("{user} {prefix} cancel: {label}"),
                        client()
                            .post(target.url(&format!("{prefix}/cancellation/cancel")))
                            .bearer_auth(token(user))
                            .header("content-type", "application/json")
                            .body(body.clone()),
                    )
                    .await;
                assert_eq!(reply.status, 422, "{label}: {}", reply.text);
                assert!(
                    reply.body["detail"].as_str().is_some_and(|d| !d.is_empty()),
                    "{label}: {}",
                    reply.text
                );
            }
        }
    }
    // Content types are not trusted either way: a good body under a wrong one still parses.
    let reply = target
        .send(
            "text/plain",
            client()
                .post(target.url("/cancellation/cancel"))
                .bearer_auth(token("bob"))
                .header("content-type", "text/plain")
                .body(r#"{"requestId": "not-bobs"}"#),
        )
        .await;
    // Parsed: bob's cancel of an id that names none of his runs waits for one: queued.
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["status"], "queued", "{}", reply.text);
    target.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_get_413_on_every_endpoint() {
    let mut target = Target::start().await;
    let big = |message: Value| {
        let mut message = message;
        message["padding"] = json!("p".repeat(2 * LIMIT));
        message.to_string()
    };
    let cases = [
        ("/rpc", big(echo_call(json!(1), "x"))),
        ("/mcp", big(echo_call(json!(1), "x"))),
        ("/cancellation/cancel", big(json!({"requestId": "1"}))),
        ("/v1/cancellation/cancel", big(json!({"requestId": "1"}))),
    ];
    for (path, body) in &cases {
        for user in ["admin", "bob"] {
            let reply = target
                .send(
                    &format!("{user} {path} with a length"),
                    client()
                        .post(target.url(path))
                        .bearer_auth(token(user))
                        .header("content-type", "application/json")
                        .header("accept", "application/json, text/event-stream")
                        .body(body.clone()),
                )
                .await;
            assert_eq!(reply.status, 413, "{path}: {}", reply.text);
            // Chunked, so the length is known only by reading.
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body
                .as_bytes()
                .chunks(512)
                .map(|c| Ok(c.to_vec()))
                .collect();
            let reply = target
                .send(
                    &format!("{user} {path} chunked"),
                    client()
                        .post(target.url(path))
                        .bearer_auth(token(user))
                        .header("content-type", "application/json")
                        .header("accept", "application/json, text/event-stream")
                        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                            chunks,
                        ))),
                )
                .await;
            assert_eq!(reply.status, 413, "{path} chunked: {}", reply.text);
        }
    }
    // Just under the limit is fine.
    let mut message = echo_call(json!(2), "fits");
    message["padding"] = json!("p".repeat(LIMIT - 200));
    let reply = target
        .send(
            "under the limit",
            client()
                .post(target.url("/rpc"))
                .bearer_auth(token("bob"))
                .json(&message),
        )
        .await;
    assert_eq!(
        reply.body["result"]["content"][0]["text"], "fits",
        "{}",
        reply.text
    );
    target.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_ids_in_the_status_path_are_refused_or_not_found() {
    let mut target = Target::start().await;
    let long = "y".repeat(300);
    let max = "z".repeat(256);
    // (path after /cancellation/status/, admin's status, bob's status)
    let cases: Vec<(String, u16, u16)> = vec![
        (long.clone(), 422, 422),
        (max.clone(), 404, 404),
        ("%E2%9C%93%20ok".into(), 404, 404),
        ("%F0%9F%98%80".into(), 404, 404),
        ("a%2Fb".into(), 404, 404),
        ("%00".into(), 422, 422),
        ("a%0Ab".into(), 422, 422),
        ("%1B%5B31m".into(), 422, 422),
        ("%7F".into(), 422, 422),
        ("%FF%FE".into(), 400, 400),
        ("%".into(), 404, 404),
        ("%zz".into(), 404, 404),
        ("run-".into(), 404, 404),
        ("-1".into(), 404, 404),
        ("99999999999999999999999".into(), 404, 404),
        (target.victim_run.to_uppercase(), 404, 404),
    ];
    for (id, admin, bob) in &cases {
        for (user, expected) in [("admin", admin), ("bob", bob)] {
            let reply = target
                .send(
                    &format!("{user} status {id}"),
                    client()
                        .get(target.url(&format!("/cancellation/status/{id}")))
                        .bearer_auth(token(user)),
                )
                .await;
            assert_eq!(
                reply.status, *expected,
                "{user} status {id}: {}",
                reply.text
            );
        }
    }
    // Paths reqwest would normalise, sent raw.
    for path in [
        "/cancellation/status/..",
        "/cancellation/status/../cancel",
        "/cancellation/status/./x",
        "/cancellation/status//x",
        "/cancellation/status/x?y=%00",
        "/cancellation/status/x#frag",
    ] {
        target
            .send_raw(
                &format!("raw {path}"),
                format!(
                    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
                    token("bob")
                ),
            )
            .await;
    }
    // bob learns nothing from alice's run id in any spelling, or her bare id.
    for id in [target.victim_run.clone(), "victim-7".to_owned()] {
        let s = target
            .send(
                "bob status of alice's run",
                client()
                    .get(target.url(&format!("/cancellation/status/{id}")))
                    .bearer_auth(token("bob")),
            )
            .await;
        assert_eq!(
            (s.status, &s.body),
            (404, &serde_json::json!({"detail": "Run not found"}))
        );
    }
    target.finish().await;
}
