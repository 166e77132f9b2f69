//! Target `rap`: the RAP tool server's endpoints through its axum router, in process.
//!
//! Input: byte 0 configures the server — bit 0: a bearer token is required; bit 1: the body
//! limit is 64 bytes (else 1 MiB); bit 2: a rate limit of 1 a second in bursts of 3 (else none).
//! The rest is a sequence of requests separated by `0xFF` bytes; each starts with a byte whose
//! bits 0-1 pick the route (0: `POST /invoke`, 1: `POST /cancel_tool_call`, 2: `GET
//! /.well-known/rap-toolset`, 3: `GET /invoke`), bit 2 sends the right bearer token and bit 3
//! a wrong one; the remaining bytes are the body. The server's tools (`run`, `wait`) never
//! finish by themselves, so they run until cancelled and never post a result anywhere.
//!
//! Checks, besides no panic:
//!
//! - `/invoke` answers 200, 400 (with a JSON `{"error": ...}` body), 401, 409, 413 or 429
//!   (callbacks are allowed to [`CALLBACK_ORIGIN`] only);
//!   `/cancel_tool_call` answers an empty 200, or 401, 413 or 429; the toolset answers 200 with
//!   its JSON document; a wrong method gets 405;
//! - authentication comes first: a request without the right token gets 401 and nothing else;
//! - a body over the limit is never accepted;
//! - a model of the running calls agrees with the server: an invocation is accepted (200)
//!   only if its body is a valid invocation with valid ids and a known operation, and never
//!   while a call runs under the same ids (409 then, or 400 for a refused callback URL); a
//!   cancel stops the call it names; and
//!   `ToolServer::running()` always equals the model's count.

use std::collections::HashSet;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use cancelkit::protocol::rap::{ToolCancellation, ToolInvocation};
use cancelkit::rap::{ClientKey, ToolCall, ToolError, ToolOutput, ToolServer, valid_id};
use serde_json::Value;
use tower::ServiceExt;

const TOKEN: &str = "fuzz-token";
/// The one callback origin allowed (nothing listens there; no tool ever finishes anyway).
pub const CALLBACK_ORIGIN: &str = "http://127.0.0.1:1";
/// Separates requests in the input.
pub const SEPARATOR: u8 = 0xFF;

/// Option bits of the first byte.
pub mod options {
    /// A bearer token is required.
    pub const AUTH: u8 = 1;
    /// The body limit is 64 bytes.
    pub const SMALL_BODIES: u8 = 2;
    /// 1 request a second, bursts of 3.
    pub const RATE_LIMIT: u8 = 4;
}

/// Route and header bits of a request's first byte.
pub mod request {
    /// `POST /invoke`.
    pub const INVOKE: u8 = 0;
    /// `POST /cancel_tool_call`.
    pub const CANCEL: u8 = 1;
    /// `GET /.well-known/rap-toolset`.
    pub const TOOLSET: u8 = 2;
    /// `GET /invoke` (a wrong method).
    pub const WRONG_METHOD: u8 = 3;
    /// Sends `Authorization: Bearer <the right token>`.
    pub const RIGHT_TOKEN: u8 = 4;
    /// Sends `Authorization: Bearer <a wrong token>` (too).
    pub const WRONG_TOKEN: u8 = 8;
}

/// Builds an input from server options and (request byte, body) pairs.
pub fn input(options: u8, requests: &[(u8, &str)]) -> Vec<u8> {
    let mut data = vec![options];
    for (i, (head, body)) in requests.iter().enumerate() {
        if i > 0 {
            data.push(SEPARATOR);
        }
        data.push(*head);
        data.extend_from_slice(body.as_bytes());
    }
    data
}

/// Target `rap`.
pub fn check(data: &[u8]) {
    crate::panics::install();
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let before = crate::panics::unexpected();
    // A runtime per input: dropping it drops the tool calls left running.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    runtime.block_on(session(flags, rest));
    drop(runtime);
    assert_eq!(
        crate::panics::unexpected(),
        before,
        "a panic escaped (see the panic message above)"
    );
}

fn never(_: Value, _: ToolCall) -> impl Future<Output = Result<ToolOutput, ToolError>> {
    std::future::pending()
}

async fn session(flags: u8, rest: &[u8]) {
    let auth = flags & options::AUTH != 0;
    let body_limit = if flags & options::SMALL_BODIES != 0 {
        64
    } else {
        1024 * 1024
    };
    let limited = flags & options::RATE_LIMIT != 0;
    let mut builder = ToolServer::builder("fuzz")
        .operation(
            "run",
            "Runs until cancelled",
            serde_json::json!({"type": "object"}),
            never,
        )
        .operation(
            "wait",
            "Waits until cancelled",
            serde_json::json!({}),
            never,
        )
        .body_limit(body_limit)
        .allow_callback_origin(CALLBACK_ORIGIN)
        .expect("a valid origin");
    builder = if limited {
        // No client addresses in process: every request shares one budget.
        builder.rate_limit(1, 3).client_key(ClientKey::Shared)
    } else {
        builder.rate_limit(0, 0)
    };
    if auth {
        builder = builder.bearer_token(TOKEN);
    }
    let server = builder.build();
    let router = server.router();
    let mut running: HashSet<(String, String)> = HashSet::new();

    for segment in rest.split(|b| *b == SEPARATOR) {
        let Some((&head, body)) = segment.split_first() else {
            continue;
        };
        let route = head & 3;
        let (method, path) = match route {
            request::INVOKE => (Method::POST, "/invoke"),
            request::CANCEL => (Method::POST, "/cancel_tool_call"),
            request::TOOLSET => (Method::GET, "/.well-known/rap-toolset"),
            _ => (Method::GET, "/invoke"),
        };
        let mut request = Request::builder().method(method).uri(path);
        if head & request::RIGHT_TOKEN != 0 {
            request = request.header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        }
        if head & request::WRONG_TOKEN != 0 {
            request = request.header(header::AUTHORIZATION, "Bearer nope");
        }
        let request = request
            .body(Body::from(body.to_vec()))
            .expect("a request builds");
        let response = router
            .clone()
            .oneshot(request)
            .await
            .expect("axum routers are infallible");
        let status = response.status();
        let answer = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a response body reads");
        // Let started or cancelled calls reach their first await.
        tokio::time::sleep(Duration::from_millis(1)).await;

        // With both headers, the first one (the right token) is the one read.
        let authorized = !auth || head & request::RIGHT_TOKEN != 0;
        let context = || {
            format!(
                "route {route}, body {:?}: {status} {:?}",
                String::from_utf8_lossy(body),
                String::from_utf8_lossy(&answer)
            )
        };
        if route == request::WRONG_METHOD {
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{}", context());
            continue;
        }
        if route == request::TOOLSET {
            assert_eq!(status, StatusCode::OK, "{}", context());
            let toolset: Value = serde_json::from_slice(&answer).expect("the toolset is JSON");
            assert_eq!(toolset["endpoint"], "/invoke", "{}", context());
            assert_eq!(
                toolset["cancel_endpoint"],
                "/cancel_tool_call",
                "{}",
                context()
            );
            assert_eq!(
                toolset["tools"].as_array().map(Vec::len),
                Some(2),
                "{}",
                context()
            );
            continue;
        }
        // The rate limit comes first, then authentication, then the body limit.
        let admitted = match status {
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(limited, "429 without a rate limit: {}", context());
                false
            }
            StatusCode::PAYLOAD_TOO_LARGE => {
                assert!(
                    body.len() > body_limit,
                    "413 for a small body: {}",
                    context()
                );
                false
            }
            StatusCode::UNAUTHORIZED => {
                assert!(!authorized, "401 with the right token: {}", context());
                false
            }
            _ => {
                assert!(
                    authorized,
                    "{status} without the right token: {}",
                    context()
                );
                assert!(
                    body.len() <= body_limit,
                    "a body over the limit accepted: {}",
                    context()
                );
                true
            }
        };
        if route == request::CANCEL {
            assert!(
                [
                    StatusCode::OK,
                    StatusCode::UNAUTHORIZED,
                    StatusCode::TOO_MANY_REQUESTS,
                    StatusCode::PAYLOAD_TOO_LARGE
                ]
                .contains(&status),
                "{}",
                context()
            );
            if status == StatusCode::OK {
                assert!(
                    answer.is_empty(),
                    "a cancel answered with a body: {}",
                    context()
                );
            }
            if admitted
                && let Ok(cancel) = serde_json::from_slice::<ToolCancellation>(body)
                && valid_id(&cancel.thread_id)
                && valid_id(&cancel.tool_call_id)
            {
                running.remove(&(cancel.thread_id, cancel.tool_call_id));
            }
        } else if admitted {
            let invocation = serde_json::from_slice::<ToolInvocation>(body)
                .ok()
                .filter(|i| {
                    valid_id(&i.group_id)
                        && valid_id(&i.id)
                        && ["run", "wait"].contains(&i.operation.as_str())
                });
            match invocation {
                Some(invocation) => {
                    // The callback origin is checked (400) before a running call (409).
                    let key = (invocation.group_id, invocation.id);
                    match status {
                        StatusCode::OK => {
                            assert!(
                                !running.contains(&key),
                                "a second call under one key: {}",
                                context()
                            );
                            running.insert(key);
                        }
                        StatusCode::CONFLICT => {
                            assert!(running.contains(&key), "409 for a free key: {}", context());
                        }
                        StatusCode::BAD_REQUEST => {}
                        _ => panic!("unexpected status: {}", context()),
                    }
                }
                None => {
                    assert_eq!(status, StatusCode::BAD_REQUEST, "{}", context());
                    let error: Value = serde_json::from_slice(&answer).expect("a 400 body is JSON");
                    assert!(error["error"].is_string(), "{}", context());
                }
            }
        }
        assert_eq!(
            server.running(),
            running.len(),
            "running calls after {}",
            context()
        );
    }
}
