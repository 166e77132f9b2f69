//! Against rmcp's server: with sessions, at 2026-07-28, stateless JSON; cancels, resumption with
//! `Last-Event-ID`, and HTTPS with a private CA.

use std::time::Duration;

use axum::http::Method;
use cancelkit::http::client::{HttpClient, TransportFailure};
use cancelkit::peer::{McpRevision, PeerHandle};
use serde_json::{Value, json};

use crate::harness::{call, connect, eventually, header_of, negotiate, rpc_error, text};
use crate::rmcp_server::{self, Mode};

/// The request ids of the `tools/call` POSTs of sleeps labelled `label`.
fn call_id(tap: &rmcp_server::Tap, label: &str) -> Value {
    tap.posts("tools/call")
        .into_iter()
        .find(|s| s.body["params"]["arguments"]["label"] == label)
        .map(|s| s.body["id"].clone())
        .unwrap_or_else(|| panic!("no call of sleep `{label}` was POSTed"))
}

/// Starts a sleep labelled `label`, waits until the rmcp tool runs it, then drops the call's
/// future, and waits until the tool records its cancellation.
async fn cancel_a_sleep(server: &rmcp_server::Server, handle: &PeerHandle, label: &str) -> Value {
    let pending = handle.request::<_, Value>(
        "tools/call",
        json!({"name": "sleep", "arguments": {"seconds": 30, "label": label}}),
    );
    eventually("the sleep started", || server.log.find("started", label)).await;
    drop(pending);
    eventually("the rmcp tool saw its cancellation", || {
        server.log.find("cancelled", label)
    })
    .await
}

#[tokio::test]
async fn rmcp_session_negotiates_lists_calls_and_cancels_with_a_notification() {
    let server = rmcp_server::Server::start(Mode::Session).await;
    let client = connect(HttpClient::new(&server.url).unwrap());
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);

    let tools: Value = handle.request("tools/list", json!({})).await.unwrap();
    let mut names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["echo", "roots", "sleep"]);
    let echoed = call(&handle, "echo", json!({"text": "hello"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hello");
    // The server's own request, answered by our router and POSTed back.
    let roots = call(&handle, "roots", json!({})).await.unwrap();
    assert_eq!(text(&roots), "file:///work");

    let cancelled = cancel_a_sleep(&server, &handle, "c").await;
    assert_eq!(cancelled["how"], "token", "{cancelled}");
    let id = call_id(&server.tap, "c");
    let notification = eventually("notifications/cancelled reached rmcp", || {
        server
            .log
            .all()
            .into_iter()
            .find(|e| e["event"] == "notifications/cancelled")
    })
    .await;
    assert_eq!(notification["requestId"], id);

    // The session and the negotiated version travel on everything after initialize.
    let initialize = &server.tap.posts("initialize")[0];
    assert_eq!(header_of(&initialize.headers, "mcp-session-id"), None);
    assert_eq!(header_of(&initialize.headers, "mcp-protocol-version"), None);
    let session = server
        .tap
        .posts("tools/list")
        .first()
        .and_then(|s| header_of(&s.headers, "mcp-session-id").map(str::to_owned))
        .expect("tools/list carried the session");
    for method in [
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "notifications/cancelled",
    ] {
        for post in server.tap.posts(method) {
            assert_eq!(
                header_of(&post.headers, "mcp-session-id"),
                Some(session.as_str()),
                "{method}"
            );
            assert_eq!(
                header_of(&post.headers, "mcp-protocol-version"),
                Some("2025-11-25"),
                "{method}"
            );
        }
    }
    // The session's GET stream was opened, with the session.
    let gets = eventually("the GET stream was opened", || {
        Some(server.tap.of(Method::GET)).filter(|g| !g.is_empty())
    })
    .await;
    assert_eq!(
        header_of(&gets[0].headers, "mcp-session-id"),
        Some(session.as_str())
    );
    assert_eq!(
        header_of(&gets[0].headers, "accept"),
        Some("text/event-stream")
    );

    client.close().await;
    let deletes = server.tap.of(Method::DELETE);
    assert_eq!(deletes.len(), 1, "the session is ended");
    assert_eq!(
        header_of(&deletes[0].headers, "mcp-session-id"),
        Some(session.as_str())
    );
}

#[tokio::test]
async fn rmcp_2026_negotiates_lists_calls_and_cancels_by_closing_the_stream() {
    let server = rmcp_server::Server::start(Mode::Modern).await;
    let client = connect(HttpClient::new(&server.url).unwrap());
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2026_07_28);

    let tools: Value = handle.request("tools/list", json!({})).await.unwrap();
    assert_eq!(tools["tools"].as_array().unwrap().len(), 3);
    let echoed = call(&handle, "echo", json!({"text": "hi 2026"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hi 2026");

    let cancelled = cancel_a_sleep(&server, &handle, "c").await;
    assert_eq!(cancelled["label"], "c");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        server.tap.posts("notifications/cancelled").is_empty(),
        "no notification at 2026-07-28: the closed stream is the cancel"
    );
    assert!(server.tap.posts("initialize").is_empty());

    for post in server.tap.of(Method::POST) {
        let method = post.body["method"].as_str().unwrap_or_default();
        assert_eq!(header_of(&post.headers, "mcp-session-id"), None, "{method}");
        assert_eq!(
            header_of(&post.headers, "mcp-protocol-version"),
            Some("2026-07-28"),
            "{method}"
        );
        assert_eq!(header_of(&post.headers, "mcp-method"), Some(method));
        assert_eq!(
            post.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
            "{method}"
        );
    }
    let call = &server.tap.posts("tools/call")[0];
    assert_eq!(header_of(&call.headers, "mcp-name"), Some("echo"));
    assert!(
        server.tap.of(Method::GET).is_empty(),
        "no GET stream at 2026-07-28"
    );
    client.close().await;
    assert!(
        server.tap.of(Method::DELETE).is_empty(),
        "no session to end"
    );
}

#[tokio::test]
async fn rmcp_stateless_json_answers_and_a_cancel_that_drops_the_connection() {
    let server = rmcp_server::Server::start(Mode::StatelessJson).await;
    // A long send timeout: the cancel must not wait for the POST's answer (which, in JSON
    // mode, comes only with the result) — without a session the connection is dropped at once.
    let client = connect(
        HttpClient::new(&server.url)
            .unwrap()
            .send_timeout(Duration::from_secs(30)),
    );
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);
    let echoed = call(&handle, "echo", json!({"text": "json"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "json");
    let answered = server.tap.posts("tools/call")[0].answered_as.clone();
    assert!(
        answered
            .as_deref()
            .is_some_and(|t| t.starts_with("application/json")),
        "{answered:?}"
    );

    cancel_a_sleep(&server, &handle, "c").await;
    let cancel = eventually("notifications/cancelled was POSTed", || {
        server
            .tap
            .posts("notifications/cancelled")
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        cancel.body["params"]["requestId"],
        call_id(&server.tap, "c")
    );
    for post in server.tap.of(Method::POST) {
        assert_eq!(
            header_of(&post.headers, "mcp-session-id"),
            None,
            "stateless: no session"
        );
    }
    client.close().await;
}

#[tokio::test]
async fn rmcp_session_stream_cut_after_its_first_event_id_is_resumed_with_last_event_id() {
    let server = rmcp_server::Server::start(Mode::Session).await;
    let client = connect(HttpClient::new(&server.url).unwrap());
    let handle = client.handle();
    negotiate(&handle).await;
    server.tap.cut_calls();

    // rmcp replays a request's stream only while the request runs: the sleep outlasts the
    // server's retry time.
    let slept = call(&handle, "sleep", json!({"seconds": 1.0, "label": "r"}))
        .await
        .expect("the cut call still gets its result");
    assert_eq!(text(&slept), "slept");
    assert!(server.tap.cut() >= 1, "the call's stream was cut");
    let resumed: Vec<String> = server
        .tap
        .of(Method::GET)
        .iter()
        .filter_map(|g| header_of(&g.headers, "last-event-id").map(str::to_owned))
        .collect();
    assert!(!resumed.is_empty(), "resumed with GET and Last-Event-ID");
    client.close().await;
}

#[tokio::test]
async fn without_resumption_the_cut_call_fails_with_a_clear_error() {
    // The control for the test above: the cut really loses the response.
    let server = rmcp_server::Server::start(Mode::Session).await;
    let client = connect(
        HttpClient::new(&server.url)
            .unwrap()
            .resume_attempts(0)
            .listen(false),
    );
    let handle = client.handle();
    negotiate(&handle).await;
    server.tap.cut_calls();
    let error = rpc_error(call(&handle, "sleep", json!({"seconds": 0.4, "label": "r"})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::Lost),
        "{error:?}"
    );
    assert!(
        error.message.contains("ended before the response"),
        "{}",
        error.message
    );
    client.close().await;
}

#[tokio::test]
async fn https_with_a_private_ca_just_works() {
    let ca = cancelkit_tests::tls::TestCa::generate();
    let server = rmcp_server::Server::start_tls(&ca).await;
    assert!(server.url.starts_with("https://"));
    let http = cancelkit::tls::client_builder(Some(&ca.ca_file()))
        .unwrap()
        .build()
        .unwrap();
    let client = connect(HttpClient::new(&server.url).unwrap().with_http_client(http));
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2026_07_28);
    let echoed = call(&handle, "echo", json!({"text": "over tls"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "over tls");
    cancel_a_sleep(&server, &handle, "tls").await;
    client.close().await;
}
