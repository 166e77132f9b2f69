//! The tool server's router: its callback origins, and the order of its layers (the rate
//! limit's budget of failed authentications is in `tests/throttle.rs`).

use super::*;

mod throttle;

#[test]
fn callback_origins_are_checked_when_configured() {
    let builder = || ToolServer::builder("t");
    for bad in [
        "not a url",
        "file:///etc/passwd",
        "http://runtime.example/callbacks",
        "http://runtime.example/?q",
        "http://user:pw@runtime.example",
        "mailto:someone@example.com",
    ] {
        assert!(builder().allow_callback_origin(bad).is_err(), "{bad}");
    }
    let server = builder()
        .allow_callback_origin("http://127.0.0.1:8080")
        .unwrap()
        .allow_callback_origin("https://Runtime.Example")
        .unwrap()
        .build();
    let inner = &server.inner;
    assert!(
        inner
            .callback("http://127.0.0.1:8080/results?x=1")
            .is_some()
    );
    assert!(inner.callback("https://runtime.example:443/cb").is_some());
    for refused in [
        "http://127.0.0.1:8081/results",
        "https://127.0.0.1:8080/results",
        "http://127.0.0.2:8080/results",
        "http://runtime.example/cb",
        "https://runtime.example.evil/cb",
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "/relative",
        "",
    ] {
        assert!(inner.callback(refused).is_none(), "{refused}");
    }
    let default = builder().build();
    assert!(
        default
            .inner
            .callback("http://127.0.0.1:8080/results")
            .is_none()
    );
}

mod layers {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use axum::body::{Body, Bytes};
    use axum::extract::ConnectInfo;
    use axum::http::{Method, Request, StatusCode, header};
    use futures_util::{StreamExt, stream};
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use crate::rap::{ClientKey, ToolCall, ToolError, ToolOutput, ToolServer, ToolServerBuilder};

    pub(super) const TOKEN: &str = "s3cret";
    pub(super) const ORIGIN: &str = "http://127.0.0.1:9";

    /// A server with one operation that runs until cancelled, no rate limit unless the test
    /// sets one.
    pub(super) fn builder() -> ToolServerBuilder {
        ToolServer::builder("layers")
            .operation("wait", "Waits", json!({}), |_: Value, _: ToolCall| async {
                std::future::pending::<Result<ToolOutput, ToolError>>().await
            })
            .allow_callback_origin(ORIGIN)
            .unwrap()
            .rate_limit(0, 0)
    }

    /// A request from `address` (as `into_make_service_with_connect_info` would mark it), with
    /// `token` as its bearer token if any.
    pub(super) fn request(
        method: Method,
        path: &str,
        address: Option<&str>,
        token: Option<&str>,
        body: Body,
    ) -> Request<Body> {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let mut request = request.body(body).unwrap();
        if let Some(address) = address {
            let address: SocketAddr = address.parse().unwrap();
            request.extensions_mut().insert(ConnectInfo(address));
        }
        request
    }

    pub(super) fn cancel(token: Option<&str>, body: Body) -> Request<Body> {
        let path = "/cancel_tool_call";
        request(Method::POST, path, Some("192.0.2.1:4000"), token, body)
    }

    pub(super) fn invocation(id: &str) -> Body {
        Body::from(
            json!({
                "group_id": "thread",
                "id": id,
                "operation": "wait",
                "arguments": {},
                "callback_url": format!("{ORIGIN}/results"),
            })
            .to_string(),
        )
    }

    pub(super) async fn send(router: &axum::Router, request: Request<Body>) -> (StatusCode, Bytes) {
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, body)
    }

    #[tokio::test]
    async fn a_wrong_token_spends_the_budget_and_is_then_refused_429_not_401() {
        let server = builder().rate_limit(1, 2).bearer_token(TOKEN).build();
        let router = server.router();
        for _ in 0..2 {
            let (status, _) = send(&router, cancel(Some("nope"), Body::empty())).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
        }
        // One request a second refills the budget: a slow machine may see another 401 first.
        let mut refused = None;
        for _ in 0..10 {
            let (status, _) = send(&router, cancel(Some("nope"), Body::empty())).await;
            if status != StatusCode::UNAUTHORIZED {
                refused = Some(status);
                break;
            }
        }
        assert_eq!(refused, Some(StatusCode::TOO_MANY_REQUESTS));
        let (status, _) = send(&router, cancel(Some(TOKEN), Body::empty())).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "the right token too");
        let other = request(
            Method::POST,
            "/cancel_tool_call",
            Some("192.0.2.2:4000"),
            Some(TOKEN),
            Body::empty(),
        );
        assert_eq!(send(&router, other).await.0, StatusCode::OK);
        // Only the client that failed authentication is remembered.
        assert_eq!(server.rate_limited_clients(), 1);
    }

    #[tokio::test]
    async fn an_over_long_body_with_the_token_is_413_with_or_without_a_length() {
        let router = builder()
            .bearer_token(TOKEN)
            .body_limit(16)
            .build()
            .router();
        let at_limit = send(&router, cancel(Some(TOKEN), Body::from(vec![b' '; 16]))).await;
        assert_eq!(at_limit.0, StatusCode::OK);
        let mut declared = cancel(Some(TOKEN), Body::from(vec![b' '; 17]));
        declared
            .headers_mut()
            .insert(header::CONTENT_LENGTH, "17".parse().unwrap());
        let chunks = (0..3).map(|_| Ok::<_, std::io::Error>(Bytes::from_static(b"12345678")));
        let streamed = cancel(Some(TOKEN), Body::from_stream(stream::iter(chunks)));
        for over in [declared, streamed] {
            let (status, body) = send(&router, over).await;
            assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
            assert!(body.is_empty(), "{body:?}");
        }
    }

    #[tokio::test]
    async fn a_body_limit_above_axums_default_of_2_mib_is_the_one_applied() {
        let router = builder().body_limit(3 << 20).build().router();
        let big = cancel(None, Body::from(vec![b' '; 5 << 19]));
        assert_eq!(send(&router, big).await.0, StatusCode::OK);
        let over = cancel(None, Body::from(vec![b' '; (3 << 20) + 1]));
        assert_eq!(send(&router, over).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn without_the_token_the_body_is_not_read() {
        let router = builder()
            .bearer_token(TOKEN)
            .body_limit(16)
            .build()
            .router();
        // A body far over the limit (a finite one, so that a server reading it all fails the
        // test instead of hanging it) that says when it is read.
        let endless = |read: Arc<AtomicBool>| {
            let chunks = stream::repeat_with(move || {
                read.store(true, Ordering::SeqCst);
                Ok::<_, std::io::Error>(Bytes::from_static(b"12345678"))
            });
            Body::from_stream(chunks.take(1 << 16))
        };
        let read = Arc::new(AtomicBool::new(false));
        let (status, _) = send(&router, cancel(None, endless(Arc::clone(&read)))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(
            !read.load(Ordering::SeqCst),
            "the body was read before the 401"
        );
        let (status, _) = send(&router, cancel(Some(TOKEN), endless(Arc::clone(&read)))).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(read.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn the_client_is_identified_only_where_a_limit_needs_it() {
        let anonymous = |path: &str, body: Body| request(Method::POST, path, None, None, body);
        // Neither a rate limit nor a share: no peer address needed.
        let open = builder().build().router();
        let (status, body) = send(&open, anonymous("/invoke", Body::from("{}"))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
        let unknown = json!({"error": "the server cannot identify the client for its rate limit"});
        // A rate limit without a bearer token never refuses: no client needed either.
        let unguarded = builder().rate_limit(50, 100).build().router();
        let (status, body) = send(&unguarded, anonymous("/invoke", Body::from("{}"))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
        let limited = builder()
            .rate_limit(50, 100)
            .bearer_token(TOKEN)
            .build()
            .router();
        let shared = builder().max_running_per_client(1).build().router();
        for (router, path) in [
            (&limited, "/invoke"),
            (&limited, "/cancel_tool_call"),
            (&shared, "/invoke"),
        ] {
            let (status, body) = send(router, anonymous(path, Body::from("{}"))).await;
            assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{path}");
            assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), unknown);
        }
        // A share concerns running calls: a cancel does not need the client.
        let (status, _) = send(&shared, anonymous("/cancel_tool_call", Body::from("{}"))).await;
        assert_eq!(status, StatusCode::OK);
        let toolset = request(
            Method::GET,
            "/.well-known/rap-toolset",
            None,
            None,
            Body::empty(),
        );
        assert_eq!(send(&limited, toolset).await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn the_share_of_running_calls_gets_the_client_from_its_layer() {
        let router = builder().max_running_per_client(1).build().router();
        let invoke = |address: &str, id: &str| {
            request(Method::POST, "/invoke", Some(address), None, invocation(id))
        };
        assert_eq!(
            send(&router, invoke("192.0.2.1:1", "a")).await.0,
            StatusCode::OK
        );
        let (status, body) = send(&router, invoke("192.0.2.1:2", "b")).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["limit"], "max_running_per_client");
        assert_eq!(
            send(&router, invoke("192.0.2.2:1", "c")).await.0,
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn the_toolset_and_a_wrong_method_pass_no_layer() {
        let server = builder()
            .rate_limit(1, 1)
            .bearer_token(TOKEN)
            .client_key(ClientKey::Shared)
            .build();
        let router = server.router();
        for _ in 0..3 {
            let toolset = request(
                Method::GET,
                "/.well-known/rap-toolset",
                None,
                None,
                Body::empty(),
            );
            assert_eq!(send(&router, toolset).await.0, StatusCode::OK);
            let wrong = request(Method::GET, "/invoke", None, None, Body::empty());
            assert_eq!(send(&router, wrong).await.0, StatusCode::METHOD_NOT_ALLOWED);
        }
        // The one request of the budget is still there.
        assert_eq!(server.rate_limited_clients(), 0);
        let (status, _) = send(&router, cancel(Some("nope"), Body::empty())).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _) = send(&router, cancel(Some("nope"), Body::empty())).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    }
}
