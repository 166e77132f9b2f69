//! What the router refuses: authentication, the rate and body limits, client keys, and callback
//! URLs off the allow-list.

use std::time::Duration;

use axum::routing::post;
use cancelkit::rap::ClientKey;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::harness::{Callbacks, Rig, TOKEN, origin_of, rig, serve, tool_server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_rate_limit_and_body_limit() {
    let r = rig(|b| b.rate_limit(1, 3).body_limit(1024)).await;
    let body = json!({"thread_id": "t", "tool_call_id": "c"}).to_string();
    assert_eq!(r.post("/cancel_tool_call", None, body.clone()).await.0, 401);
    assert_eq!(
        r.post("/cancel_tool_call", Some("wrong"), body.clone())
            .await
            .0,
        401
    );
    assert_eq!(r.post("/invoke", None, "{}").await.0, 401);
    // Three failed authentications spent the burst: now every request of this client is
    // refused alike, the right token included, and guessing goes on being throttled.
    for token in [Some(TOKEN), Some("wrong"), None] {
        assert_eq!(
            r.post("/cancel_tool_call", token, body.clone()).await.0,
            429,
            "{token:?}"
        );
    }

    // Requests with the right token spend nothing: far beyond the burst, all served.
    let r = rig(|b| b.rate_limit(1, 3)).await;
    for _ in 0..30 {
        assert_eq!(r.cancel("t", "c").await.0, 200);
    }
    assert_eq!(r.server.rate_limited_clients(), 0);

    let r = rig(|b| b.body_limit(1024)).await;
    let huge = json!({"thread_id": "t", "tool_call_id": "x".repeat(4096)}).to_string();
    assert_eq!(
        r.post("/cancel_tool_call", Some(TOKEN), huge.clone())
            .await
            .0,
        413
    );
    assert_eq!(r.post("/invoke", Some(TOKEN), huge).await.0, 413);
    assert_eq!(r.cancel("t", "c").await.0, 200);
}

/// Serves `router` on loopback without client addresses (no `ConnectInfo`).
async fn serve_without_addresses(router: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// Without `ConnectInfo` the default client key refuses requests instead of pooling every
/// client in one bucket; the other keys are explicit choices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_client_addresses_refuses_instead_of_sharing_one_bucket() {
    let http = reqwest::Client::new();
    let body = json!({"thread_id": "t", "tool_call_id": "c"}).to_string();
    let cancel = |base: &str, token: &str, forwarded_for: Option<&str>| {
        let mut request = http
            .post(format!("{base}/cancel_tool_call"))
            .bearer_auth(token)
            .body(body.clone());
        if let Some(address) = forwarded_for {
            request = request.header("x-forwarded-for", address);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };

    let base = serve_without_addresses(tool_server(|b| b).router()).await;
    for _ in 0..3 {
        let (status, text) = cancel(&base, TOKEN, None).await;
        assert_eq!(status, 500);
        assert!(text.contains("cannot identify the client"), "{text}");
    }

    // A trusted proxy's header: one bucket per forwarded address; no header, no service.
    let server = tool_server(|b| {
        b.rate_limit(1, 2)
            .client_key(ClientKey::TrustedHeader("x-forwarded-for".parse().unwrap()))
    });
    let base = serve_without_addresses(server.router()).await;
    for _ in 0..2 {
        let forwarded = Some("198.51.100.1, 192.0.2.1");
        assert_eq!(cancel(&base, "wrong", forwarded).await.0, 401);
    }
    assert_eq!(cancel(&base, TOKEN, Some("192.0.2.1")).await.0, 429);
    assert_eq!(cancel(&base, "wrong", Some("192.0.2.2")).await.0, 401);
    assert_eq!(cancel(&base, TOKEN, Some("192.0.2.2")).await.0, 200);
    assert_eq!(server.rate_limited_clients(), 2);
    assert_eq!(cancel(&base, TOKEN, None).await.0, 500);
    assert_eq!(cancel(&base, TOKEN, Some("not an address")).await.0, 500);

    // One shared bucket, chosen on purpose.
    let server = tool_server(|b| b.rate_limit(1, 2).client_key(ClientKey::Shared));
    let base = serve_without_addresses(server.router()).await;
    assert_eq!(cancel(&base, "wrong", Some("192.0.2.1")).await.0, 401);
    assert_eq!(cancel(&base, "wrong", Some("192.0.2.2")).await.0, 401);
    assert_eq!(cancel(&base, TOKEN, None).await.0, 429);
}

/// A `callback_url` outside the allow-list is refused with 400 before the tool runs; the
/// default allows none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callback_urls_off_the_allow_list_are_refused_before_anything_runs() {
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let arguments = json!({ "script": script });

    // The default: no origin allowed, not even loopback.
    let callbacks = Callbacks::default();
    let callback_url = callbacks.start().await;
    let server = tool_server(|b| b);
    let r = Rig {
        base: format!("http://{}", serve(server.router()).await),
        server,
        callbacks,
        callback_url: callback_url.clone(),
        http: reqwest::Client::new(),
    };
    let (status, text) = r
        .invoke_to("run", "call_default", &arguments, &callback_url)
        .await;
    assert_eq!(
        (status, text.contains("allowed origin")),
        (400, true),
        "{text}"
    );

    // Only the configured origin, exactly.
    let r = rig(|b| b).await;
    let port = reqwest::Url::parse(&r.callback_url)
        .unwrap()
        .port()
        .unwrap();
    for refused in [
        format!("http://127.0.0.1:{}/results", port + 1),
        format!("https://127.0.0.1:{port}/results"),
        format!("http://localhost:{port}/results"),
        format!("http://127.0.0.2:{port}/results"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "file:///etc/passwd".to_owned(),
        "results".to_owned(),
    ] {
        assert_eq!(
            r.invoke_to("run", "call_refused", &arguments, &refused)
                .await
                .0,
            400,
            "{refused}"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(r.server.running(), 0);
    assert!(!marker.exists(), "no refused invocation ran its tool");
    assert_eq!(r.callbacks.all(), Vec::<Value>::new());

    // The allowed origin, any path.
    let elsewhere = format!("http://127.0.0.1:{port}/results?from=tools");
    assert_eq!(
        r.invoke_to("run", "call_allowed", &arguments, &elsewhere)
            .await
            .0,
        200
    );
    assert_eq!(r.callbacks.wait_for(1).await[0]["id"], "call_allowed");
    assert!(marker.exists());
}

/// A callback that answers with a redirect does not send the result anywhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirecting_callback_is_not_followed() {
    let elsewhere = Callbacks::default();
    let elsewhere_url = elsewhere.start().await;
    let redirect = axum::Router::new().route(
        "/results",
        post(move || {
            let to = elsewhere_url.clone();
            async move { axum::response::Redirect::temporary(&to) }
        }),
    );
    let redirect_url = format!("http://{}/results", serve(redirect).await);
    let origin = origin_of(&redirect_url);
    let server = tool_server(|b| b.allow_callback_origin(&origin).unwrap());
    let r = Rig {
        base: format!("http://{}", serve(server.router()).await),
        server,
        callbacks: Callbacks::default(),
        callback_url: redirect_url,
        http: reqwest::Client::new(),
    };
    assert_eq!(r.invoke("echo", "call_r", json!({"text": "hi"})).await, 200);
    r.wait_running(0).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(elsewhere.all(), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_validates_and_the_toolset_lists_operations() {
    let r = rig(|b| b).await;
    assert_eq!(r.invoke("nope", "call_1", json!({})).await, 400);
    assert_eq!(r.invoke("echo", "bad id", json!({})).await, 400);
    assert_eq!(r.post("/invoke", Some(TOKEN), "{}").await.0, 400);
    assert_eq!(r.invoke("sleep", "dup", json!({"ms": 60_000})).await, 200);
    assert_eq!(r.invoke("sleep", "dup", json!({"ms": 60_000})).await, 409);
    let toolset: Value = reqwest::get(format!("{}/.well-known/rap-toolset", r.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = toolset["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "panic", "run", "sleep"]);
    assert_eq!(toolset["name"], "test-tools");
}
