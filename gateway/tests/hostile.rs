//! Hostile input on every endpoint: bodies that do not parse or have the wrong types, bodies
//! over the limit, tokens that do not check out, odd ids in the status path, batches and
//! unknown methods on `/rpc`, `/mcp` without a session or with the wrong protocol version.
//! Every response is checked: never a 5xx, never a word about another user's run; afterwards
//! the gateway still serves and its process is alive. And the binary's start-up refusals: a bad
//! config file, Redis without a shared secret; without any secret it prints an admin token.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::http::{
    Reply, SLEEP_CANCELLED, WAIT, echo_call, mcp_session, raw, raw_status, routing_headers, rpc,
    run_id_of, run_to_exit, sleep_call, spawn_rpc, stamped, status, until_stderr,
};
use support::{Gateway, Options, SECRET, client, config, token, token_with};

/// `[limits] max_body_bytes` of the hostile gateway.
const LIMIT: usize = 8192;

/// A gateway with a small body limit, where alice has a run in flight that bob attacks.
struct Target {
    gateway: Gateway,
    victim_run: String,
    victim_call: tokio::task::JoinHandle<Reply>,
    seen: Vec<(String, u16, String)>,
}

impl Target {
    async fn start() -> Target {
        let gateway = Gateway::with(Options {
            config: config(&format!("[limits]\nmax_body_bytes = {LIMIT}\n")),
            ..Options::default()
        });
        let victim_call = spawn_rpc(&gateway, "alice", sleep_call(json!("victim-7"), 30.0));
        until_stderr(&gateway, "started tools/call sleep").await;
        let victim_run = run_id_of(&gateway, "alice", "victim-7").await;
        Target {
            gateway,
            victim_run,
            victim_call,
            seen: Vec::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        self.gateway.url(path)
    }

    /// Sends a request; asserts it is not answered 5xx; keeps the answer for the leak check.
    async fn send(&mut self, label: &str, request: reqwest::RequestBuilder) -> Reply {
        let reply = Reply::read(
            request
                .send()
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}")),
        )
        .await;
        assert!(
            reply.status < 500,
            "{label}: {} {}",
            reply.status,
            reply.text
        );
        self.seen
            .push((label.to_owned(), reply.status, reply.text.clone()));
        reply
    }

    /// Sends raw bytes; asserts an HTTP answer that is not 5xx.
    async fn send_raw(&mut self, label: &str, request: String) -> u16 {
        let response = raw(&self.gateway, request.as_bytes(), Duration::from_secs(3)).await;
        let code = raw_status(&response);
        assert!((100..500).contains(&code), "{label}: {response}");
        self.seen.push((label.to_owned(), code, response));
        code
    }

    /// Nothing bob saw names alice or her run; her run is untouched; the gateway still serves.
    async fn finish(mut self) {
        for (label, code, text) in &self.seen {
            for secret in [
                self.victim_run.as_str(),
                "alice",
                "victim-7",
                "registered_at",
            ] {
                assert!(
                    !text.contains(secret),
                    "{label} ({code}) reveals `{secret}`: {text}"
                );
            }
        }
        let s = status(&self.gateway, "alice", &self.victim_run).await;
        assert_eq!(s.body["state"], "running", "{}", s.text);
        assert_eq!(self.gateway.count_stderr(SLEEP_CANCELLED), 0);
        assert!(!self.victim_call.is_finished());
        let echo = rpc(&self.gateway, "bob", &echo_call(json!(1), "still here")).await;
        assert_eq!(echo.status, 200);
        assert_eq!(
            echo.body["result"]["content"][0]["text"], "still here",
            "{}",
            echo.text
        );
        let health = client().get(self.url("/health")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        assert!(self.gateway.is_alive(), "the gateway process exited");
        let stderr = self.gateway.stderr();
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

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
                .body(format!(r#"{{"requestId": "{}"}}"#, target.victim_run)),
        )
        .await;
    assert_eq!(reply.status, 403, "{}", reply.text);
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

fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// A token with any header and claims, signed with HS256 and `secret` (or unsigned).
fn jwt(header: Value, claims: Value, secret: Option<&str>) -> String {
    use jsonwebtoken::crypto::sign;
    let head = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    match secret {
        Some(secret) => {
            let signature = sign(
                head.as_bytes(),
                &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
                jsonwebtoken::Algorithm::HS256,
            )
            .unwrap();
            format!("{head}.{signature}")
        }
        None => format!("{head}."),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_that_do_not_check_out_get_401_everywhere() {
    let mut target = Target::start().await;
    let exp = json!(4_000_000_000u64);
    let hs256 = json!({"alg": "HS256", "typ": "JWT"});
    let valid_shape = jwt(
        hs256.clone(),
        json!({"sub": "admin", "exp": exp}),
        Some(SECRET),
    );
    // The control: that hand-made token is accepted, so the refusals below are about what
    // each one changes.
    let ok = target
        .send(
            "hand-made token",
            client()
                .get(target.url("/cancellation/status/nothing"))
                .bearer_auth(&valid_shape),
        )
        .await;
    assert_eq!(ok.status, 404, "{}", ok.text);

    let headers: Vec<(&str, String)> = vec![
        ("no scheme", valid_shape.clone()),
        ("empty bearer", "Bearer ".into()),
        ("bearer only", "Bearer".into()),
        ("basic", "Basic YWRtaW46YWRtaW4=".into()),
        ("garbage", "Bearer garbage".into()),
        ("three dots", "Bearer ...".into()),
        (
            "forged",
            format!(
                "Bearer {}",
                token_with("admin", 3600, "another-secret-0123456789")
            ),
        ),
        (
            "expired",
            format!("Bearer {}", token_with("admin", -3600, SECRET)),
        ),
        (
            "alg none",
            format!(
                "Bearer {}",
                jwt(
                    json!({"alg": "none"}),
                    json!({"sub": "admin", "exp": exp}),
                    None
                )
            ),
        ),
        (
            "alg none signed",
            format!(
                "Bearer {}",
                jwt(
                    json!({"alg": "none"}),
                    json!({"sub": "admin", "exp": exp}),
                    Some(SECRET)
                )
            ),
        ),
        (
            "alg HS512 label",
            format!(
                "Bearer {}",
                jwt(
                    json!({"alg": "HS512"}),
                    json!({"sub": "admin", "exp": exp}),
                    Some(SECRET)
                )
            ),
        ),
        (
            "no sub",
            format!(
                "Bearer {}",
                jwt(hs256.clone(), json!({"exp": exp}), Some(SECRET))
            ),
        ),
        (
            "empty sub",
            format!(
                "Bearer {}",
                jwt(hs256.clone(), json!({"sub": "", "exp": exp}), Some(SECRET))
            ),
        ),
        (
            "numeric sub",
            format!(
                "Bearer {}",
                jwt(hs256.clone(), json!({"sub": 7, "exp": exp}), Some(SECRET))
            ),
        ),
        (
            "no exp",
            format!(
                "Bearer {}",
                jwt(hs256.clone(), json!({"sub": "admin"}), Some(SECRET))
            ),
        ),
        (
            "string exp",
            format!(
                "Bearer {}",
                jwt(
                    hs256.clone(),
                    json!({"sub": "admin", "exp": "never"}),
                    Some(SECRET)
                )
            ),
        ),
        ("tampered claims", {
            let good = token("bob");
            let mut parts: Vec<&str> = good.split('.').collect();
            let claims = b64(json!({"sub": "admin", "exp": exp}).to_string().as_bytes());
            parts[1] = &claims;
            format!("Bearer {}", parts.join("."))
        }),
        ("huge", format!("Bearer {}", "a".repeat(20_000))),
    ];
    let endpoints: [(&str, &str); 7] = [
        ("POST", "/cancellation/cancel"),
        ("GET", "/cancellation/status/1"),
        ("POST", "/v1/cancellation/cancel"),
        ("GET", "/v1/cancellation/status/1"),
        ("POST", "/rpc"),
        ("POST", "/mcp"),
        ("GET", "/mcp"),
    ];
    for (what, header) in &headers {
        for (method, path) in endpoints {
            let request = match method {
                "GET" => client().get(target.url(path)),
                _ => client()
                    .post(target.url(path))
                    .json(&json!({"requestId": target.victim_run, "jsonrpc": "2.0", "id": 1, "method": "ping"})),
            };
            let reply = target
                .send(
                    &format!("{what} on {method} {path}"),
                    request.header("authorization", header),
                )
                .await;
            assert_eq!(
                reply.status, 401,
                "{what} on {method} {path}: {}",
                reply.text
            );
        }
    }
    // Bytes that are not even a header value.
    let code = target
        .send_raw(
            "non-ASCII authorization",
            "GET /cancellation/status/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \u{e9}\u{1f600}\r\nConnection: close\r\n\r\n".into(),
        )
        .await;
    assert_eq!(code, 401);
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
        (max.clone(), 404, 403),
        ("%E2%9C%93%20ok".into(), 404, 403),
        ("%F0%9F%98%80".into(), 404, 403),
        ("a%2Fb".into(), 404, 403),
        ("%00".into(), 422, 422),
        ("a%0Ab".into(), 422, 422),
        ("%1B%5B31m".into(), 422, 422),
        ("%7F".into(), 422, 422),
        ("%FF%FE".into(), 400, 400),
        ("%".into(), 404, 403),
        ("%zz".into(), 404, 403),
        ("run-".into(), 404, 403),
        ("-1".into(), 404, 403),
        ("99999999999999999999999".into(), 404, 403),
        (target.victim_run.to_uppercase(), 404, 403),
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
        assert_eq!(s.status, 403);
    }
    target.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_rpc_messages_are_refused_without_harm() {
    let mut target = Target::start().await;
    let refused: Vec<(&str, String)> = vec![
        (
            "batch",
            json!([echo_call(json!(1), "a"), echo_call(json!(2), "b")]).to_string(),
        ),
        ("empty batch", "[]".into()),
        ("not json", "{\"jsonrpc\": \"2.0\",".into()),
        ("no jsonrpc", json!({"id": 1, "method": "ping"}).to_string()),
        (
            "jsonrpc 1.0",
            json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}).to_string(),
        ),
        (
            "method number",
            json!({"jsonrpc": "2.0", "id": 1, "method": 7}).to_string(),
        ),
        (
            "method empty",
            json!({"jsonrpc": "2.0", "id": 1, "method": ""}).to_string(),
        ),
        (
            "params array",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1]}).to_string(),
        ),
        (
            "id null",
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}).to_string(),
        ),
        (
            "id float",
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}).to_string(),
        ),
        (
            "id object",
            json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}).to_string(),
        ),
        (
            "id bool",
            json!({"jsonrpc": "2.0", "id": true, "method": "ping"}).to_string(),
        ),
        (
            "id too big",
            r#"{"jsonrpc": "2.0", "id": 123456789012345678901234567890, "method": "ping"}"#.into(),
        ),
        (
            "a response",
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string(),
        ),
        (
            "deep nesting",
            format!("{}{}", "[".repeat(1500), "]".repeat(1500)),
        ),
    ];
    for (label, body) in &refused {
        let reply = target
            .send(
                &format!("rpc {label}"),
                client()
                    .post(target.url("/rpc"))
                    .bearer_auth(token("bob"))
                    .header("content-type", "application/json")
                    .body(body.clone()),
            )
            .await;
        assert_eq!(reply.status, 422, "{label}: {}", reply.text);
        assert!(reply.body["detail"].is_string(), "{label}: {}", reply.text);
    }
    // JSON-RPC errors, answered 200.
    let errors: Vec<(&str, Value, i64)> = vec![
        (
            "unknown method",
            json!({"jsonrpc": "2.0", "id": 1, "method": "no/such"}),
            -32601,
        ),
        (
            "unknown tool",
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope-nope"}}),
            -32602,
        ),
        (
            "no tool name",
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}),
            -32602,
        ),
        (
            "arguments a string",
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "demo-echo", "arguments": "x"}}),
            -32602,
        ),
        (
            "a tool name with control characters",
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "demo-\u{0}\u{1b}[31m"}}),
            -32602,
        ),
        ("negative sleep", sleep_call(json!(6), -5.0), -32602),
    ];
    for (label, message, code) in &errors {
        let reply = target
            .send(
                &format!("rpc {label}"),
                client()
                    .post(target.url("/rpc"))
                    .bearer_auth(token("bob"))
                    .json(message),
            )
            .await;
        assert_eq!(reply.status, 200, "{label}: {}", reply.text);
        assert_eq!(
            reply.body["error"]["code"], *code,
            "{label}: {}",
            reply.text
        );
        assert_eq!(reply.body["id"], message["id"], "{label}");
    }
    // Ids that are odd but legal are echoed as they came (up to 256 bytes: a longer one is
    // refused, see tests/tenants.rs).
    for id in [
        json!(""),
        json!("\u{0}\u{7}\n"),
        json!("x".repeat(256)),
        json!(i64::MIN),
        json!("日本語"),
    ] {
        let reply = target
            .send(
                "rpc odd id",
                client()
                    .post(target.url("/rpc"))
                    .bearer_auth(token("bob"))
                    .json(&echo_call(id.clone(), "odd")),
            )
            .await;
        assert_eq!(reply.body["id"], id, "{}", reply.text);
        assert_eq!(
            reply.body["result"]["content"][0]["text"], "odd",
            "{}",
            reply.text
        );
    }
    // Notifications bob may send, about alice's call or nonsense: 202, and nothing happens.
    for params in [
        json!({"requestId": "victim-7", "reason": "bob says so"}),
        json!({"requestId": target.victim_run}),
        json!({"requestId": null}),
        json!({"requestId": [1, 2]}),
        json!({"reason": 5}),
        json!({}),
    ] {
        let reply = target
            .send(
                "rpc hostile notification",
                client()
                    .post(target.url("/rpc"))
                    .bearer_auth(token("bob"))
                    .json(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})),
            )
            .await;
        assert_eq!(reply.status, 202, "{}", reply.text);
    }
    // Other methods on /rpc.
    for method in ["GET", "PUT", "DELETE"] {
        let reply = target
            .send(
                &format!("{method} /rpc"),
                client()
                    .request(method.parse().unwrap(), target.url("/rpc"))
                    .bearer_auth(token("bob")),
            )
            .await;
        assert_eq!(reply.status, 405, "{method}: {}", reply.text);
    }
    target.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_mcp_requests_are_refused_without_harm() {
    let mut target = Target::start().await;
    let bob = token("bob");
    let get = target
        .send(
            "GET /mcp without a session",
            client().get(target.url("/mcp")).bearer_auth(&bob),
        )
        .await;
    assert_eq!(get.status, 405, "{}", get.text);
    let delete = target
        .send(
            "DELETE /mcp without a session",
            client().delete(target.url("/mcp")).bearer_auth(&bob),
        )
        .await;
    assert_eq!(delete.status, 400, "{}", delete.text);
    for (method, expected) in [("GET", 404), ("DELETE", 404)] {
        let reply = target
            .send(
                &format!("{method} /mcp unknown session"),
                client()
                    .request(method.parse().unwrap(), target.url("/mcp"))
                    .bearer_auth(&bob)
                    .header("mcp-session-id", "no-such-session"),
            )
            .await;
        assert_eq!(reply.status, expected, "{method}: {}", reply.text);
    }
    // alice's session is not bob's: as if it did not exist.
    let alice_session = mcp_session(&target.gateway, "alice").await;
    for method in ["GET", "DELETE"] {
        let reply = target
            .send(
                &format!("{method} /mcp on alice's session"),
                client()
                    .request(method.parse().unwrap(), target.url("/mcp"))
                    .bearer_auth(&bob)
                    .header("mcp-session-id", &alice_session),
            )
            .await;
        assert_eq!(reply.status, 404, "{method}: {}", reply.text);
    }
    let mcp_url = target.url("/mcp");
    // A stamped request goes with the headers a 2026-07-28 client sends (its version, method
    // and tool), so each case below reaches the rung it is about.
    let post = |message: Value| {
        client()
            .post(&mcp_url)
            .bearer_auth(&bob)
            .header("accept", "application/json, text/event-stream")
            .headers(routing_headers(&message).into_iter().collect())
            .json(&message)
    };
    let reply = target
        .send(
            "cancel on alice's session",
            post(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "victim-7"}}))
                .header("mcp-session-id", &alice_session),
        )
        .await;
    assert_eq!(reply.status, 404, "{}", reply.text);

    for sid in ["x".repeat(4000), "../../etc".into(), "\u{e9}t\u{e9}".into()] {
        let reply = target
            .send(
                "odd session id",
                client()
                    .post(target.url("/mcp"))
                    .bearer_auth(&bob)
                    .header("mcp-session-id", sid.as_bytes())
                    .json(&echo_call(json!(1), "x")),
            )
            .await;
        assert!([400, 404].contains(&reply.status), "{}", reply.text);
    }
    let unstamped = target
        .send("unstamped tools/call", post(echo_call(json!(1), "x")))
        .await;
    assert_eq!(unstamped.status, 400, "{}", unstamped.text);
    for version in ["2025-11-25", "2099-01-01", "", "2026-07-28\u{0}"] {
        let reply = target
            .send(
                &format!("2026 request with version {version:?}"),
                post(stamped(echo_call(json!(2), "x"), version)),
            )
            .await;
        assert_eq!(reply.status, 400, "{version:?}: {}", reply.text);
        if version.contains('\u{0}') {
            // No header can name it: the headers disagree with the body.
            assert_eq!(reply.body["error"]["code"], -32020, "{}", reply.text);
            continue;
        }
        assert_eq!(reply.body["error"]["code"], -32022, "{}", reply.text);
        assert_eq!(
            reply.body["error"]["data"]["supported"],
            json!(["2026-07-28"]),
            "{}",
            reply.text
        );
        assert_eq!(reply.body["id"], 2);
    }
    // A version that is not a string, and missing capabilities: invalid params.
    let mut odd = stamped(echo_call(json!(3), "x"), "2026-07-28");
    odd["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(20260728);
    let reply = target.send("numeric version", post(odd)).await;
    assert_eq!(reply.body["error"]["code"], -32602, "{}", reply.text);
    let mut bare = stamped(echo_call(json!(4), "x"), "2026-07-28");
    bare["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let reply = target.send("no capabilities", post(bare)).await;
    assert_eq!(reply.body["error"]["code"], -32602, "{}", reply.text);
    // Malformed messages.
    for (label, body, code) in [
        (
            "batch",
            json!([echo_call(json!(5), "x")]).to_string(),
            -32600,
        ),
        ("not json", "{".to_owned(), -32700),
        (
            "deep",
            format!("{}{}", "{\"a\":".repeat(1000), "}".repeat(1000)),
            -32700,
        ),
    ] {
        let reply = target
            .send(
                &format!("mcp {label}"),
                client()
                    .post(target.url("/mcp"))
                    .bearer_auth(&bob)
                    .header("content-type", "application/json")
                    .body(body),
            )
            .await;
        assert_eq!(reply.status, 400, "{label}: {}", reply.text);
        assert_eq!(reply.body["error"]["code"], code, "{label}: {}", reply.text);
    }
    // An unknown method inside bob's own stamped request, and a 2026 request's cancel that
    // names alice's id: nothing reaches her run.
    let reply = target
        .send(
            "unknown 2026 method",
            post(stamped(
                json!({"jsonrpc": "2.0", "id": 6, "method": "no/such", "params": {}}),
                "2026-07-28",
            )),
        )
        .await;
    assert_eq!(reply.body["error"]["code"], -32601, "{}", reply.text);
    let reply = target
        .send(
            "2026 notification",
            post(stamped(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "victim-7"}}), "2026-07-28")),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    target.finish().await;
}

#[tokio::test]
async fn a_bad_config_file_stops_the_binary_naming_the_file_and_the_key() {
    for (text, key) in [
        (
            config("[cancellation]\nenabeld = true\n"),
            "cancellation.enabeld",
        ),
        (
            config("[limits]\nmax_body_bytes = \"big\"\n"),
            "limits.max_body_bytes",
        ),
        (
            config("[cancellation]\nstatus_retention = 5\n"),
            "cancellation.status_retention",
        ),
        (
            config("[cancellation]\ntombstone_ttl = \"soon\"\n"),
            "cancellation.tombstone_ttl",
        ),
        (config("colour = \"blue\"\n"), "colour"),
    ] {
        let (status, stdout, stderr) = run_to_exit(
            Options {
                config: text,
                ..Options::default()
            },
            WAIT,
        );
        let status = status.expect("the binary exits");
        assert!(!status.success(), "{key}: {status}");
        assert!(
            stderr.contains("gateway.toml: key `") && stderr.contains(&format!("`{key}`")),
            "{key}: {stderr}"
        );
        assert!(!stdout.contains("listening on"), "{stdout}");
    }
}

#[tokio::test]
async fn redis_without_a_jwt_secret_refuses_to_start() {
    let (status, stdout, stderr) = run_to_exit(
        Options {
            config: config(""),
            env: vec![("REDIS_URL", "redis://127.0.0.1:1/".into())],
            no_secret: true,
            ..Options::default()
        },
        WAIT,
    );
    let status = status.expect("the binary exits");
    assert!(!status.success(), "{status}");
    assert!(
        stderr.contains("REDIS_URL") && stderr.contains("JWT_SECRET_KEY"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("listening on") && !stdout.contains("admin token"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_secret_the_printed_admin_token_works_as_admin() {
    let gateway = Gateway::with(Options {
        config: config(""),
        no_secret: true,
        ..Options::default()
    });
    let stdout = gateway.stdout();
    let admin = stdout
        .lines()
        .find_map(|l| l.strip_prefix("admin token: "))
        .unwrap_or_else(|| panic!("no admin token printed: {stdout}"))
        .trim()
        .to_owned();
    // An admin's answer for an unknown id is 404 (anyone else's is 403).
    let reply = Reply::read(
        client()
            .get(gateway.url("/cancellation/status/nothing"))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_eq!(reply.body, json!({"detail": "Run not found"}));
    // It calls tools and cancels runs as admin.
    let url = gateway.url("/rpc");
    let bearer = admin.clone();
    let call = tokio::spawn(async move {
        let response = client()
            .post(url)
            .bearer_auth(bearer)
            .json(&sleep_call(json!(1), 30.0))
            .send()
            .await
            .unwrap();
        Reply::read(response).await
    });
    until_stderr(&gateway, "started tools/call sleep").await;
    let cancelled = Reply::read(
        client()
            .post(gateway.url("/cancellation/cancel"))
            .bearer_auth(&admin)
            .json(&json!({"requestId": "1", "reason": null}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(cancelled.body["status"], "cancelled", "{}", cancelled.text);
    let answer = support::http::join(call).await;
    assert_eq!(
        answer.response()["error"]["code"],
        -32800,
        "{}",
        answer.text
    );
    // Tokens signed with the test secret mean nothing to it.
    let other = status(&gateway, "admin", "nothing").await;
    assert_eq!(other.status, 401, "{}", other.text);
}
