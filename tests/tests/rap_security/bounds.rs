//! The tool server's bound on running calls (global and per client), and the bounds on
//! client-chosen text.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use cancelkit::rap::{self};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::harness::{Gates, TOKEN, gate_server, serve, until};

/// Collects the `tool_result`s posted to it, by tool call id.
#[derive(Clone, Default)]
struct Results(Arc<Mutex<HashMap<String, Value>>>);

impl Results {
    /// Serves the collector; its callback URL.
    async fn start(&self) -> String {
        let router = axum::Router::new()
            .route(
                "/results",
                axum::routing::post(
                    |State(seen): State<Results>, axum::Json(result): axum::Json<Value>| async move {
                        let id = result["id"].as_str().unwrap_or_default().to_owned();
                        seen.0.lock().unwrap().insert(id, result);
                    },
                ),
            )
            .with_state(self.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/results", listener.local_addr().unwrap());
        serve(listener, router);
        url
    }

    fn has(&self, id: &str) -> bool {
        self.0.lock().unwrap().contains_key(id)
    }
}

/// `/invoke` of `gate` as `id` from `client`; (status, Retry-After, JSON body or null).
async fn invoke_from(
    client: &reqwest::Client,
    base: &str,
    callback_url: &str,
    id: &str,
) -> (u16, Option<String>, Value) {
    let response = client
        .post(format!("{base}/invoke"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "operation": "gate", "arguments": {}, "id": id, "group_id": "thread-1",
            "callback_url": callback_url,
        }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.json().await.unwrap_or(Value::Null);
    (status, retry, body)
}

fn client_from(address: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(address.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// With `max_running(2)`, a third call is refused with 503 naming the limit while the first two
/// run, and both still complete; once one has posted its result there is room again. With a
/// per-client share of 1, a client's second call is refused with 429 naming the share while
/// another address is still served.
#[tokio::test]
async fn running_calls_beyond_the_bound_are_refused_and_accepted_ones_complete() {
    let results = Results::default();
    let callback_url = results.start().await;
    let origin = callback_url.trim_end_matches("/results").to_owned();
    let gates = Gates::default();
    let server = gate_server(&origin, &gates, |b| b.max_running(2));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    serve(listener, server.router());
    let client = reqwest::Client::new();

    for id in ["a", "b"] {
        let (status, _, body) = invoke_from(&client, &base, &callback_url, id).await;
        assert_eq!(status, 200, "{id}: {body}");
    }
    let (status, retry, body) = invoke_from(&client, &base, &callback_url, "c").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert_eq!(body["limit"], "max_running");
    assert_eq!(body["max"], 2);
    assert!(
        body["error"].as_str().unwrap().contains("max_running"),
        "{body}"
    );
    assert_eq!(server.running(), 2, "the refused call never ran");

    gates.open("a");
    until("a's result arrives", || results.has("a")).await;
    until("a frees its place", || server.running() == 1).await;
    let (status, _, body) = invoke_from(&client, &base, &callback_url, "d").await;
    assert_eq!(status, 200, "{body}");
    gates.open("b");
    gates.open("d");
    until("b's and d's results arrive", || {
        results.has("b") && results.has("d")
    })
    .await;
    until("every place is free", || server.running() == 0).await;
    assert!(!results.has("c"), "the refused call posted nothing");

    // The per-client share: one call per address, ten in all.
    let shared = gate_server(&origin, &gates, |b| {
        b.max_running(10).max_running_per_client(1)
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    serve(listener, shared.router());
    let (one, two) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    assert_eq!(invoke_from(&one, &base, &callback_url, "x").await.0, 200);
    let (status, retry, body) = invoke_from(&one, &base, &callback_url, "y").await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert_eq!(body["limit"], "max_running_per_client");
    assert_eq!(body["max"], 1);
    let (status, _, body) = invoke_from(&two, &base, &callback_url, "z").await;
    assert_eq!(status, 200, "another address has its own share: {body}");
    gates.open("x");
    gates.open("z");
    until("x's and z's results arrive", || {
        results.has("x") && results.has("z")
    })
    .await;
    until("every place is free", || shared.running() == 0).await;
    assert!(!results.has("y"));
}

/// Ids, operation names, `call_id`, `user_id` and `callback_url` are bounded; each refusal is a
/// 400 whose message names the limit, and nothing runs.
#[tokio::test]
async fn client_chosen_text_is_bounded() {
    let gates = Gates::default();
    let server = gate_server("http://127.0.0.1:1", &gates, |b| b);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    serve(listener, server.router());
    let long = "a".repeat(rap::MAX_ID_LEN + 1);
    let long_url = format!(
        "http://127.0.0.1:1/{}",
        "p".repeat(rap::MAX_CALLBACK_URL_LEN)
    );
    let valid = json!({
        "operation": "gate", "arguments": {}, "id": "c", "group_id": "thread-1",
        "callback_url": "http://127.0.0.1:1/cb",
    });
    let cases = [
        ("id", json!(long), "256"),
        ("group_id", json!(long), "256"),
        (
            "operation",
            json!(long),
            "operation is longer than the limit of 256 bytes",
        ),
        (
            "call_id",
            json!(long),
            "call_id is longer than the limit of 256 bytes",
        ),
        (
            "user_id",
            json!(long),
            "user_id is longer than the limit of 256 bytes",
        ),
        (
            "callback_url",
            json!(long_url),
            "callback_url is longer than the limit of 2048 bytes",
        ),
    ];
    let client = reqwest::Client::new();
    for (field, value, message) in cases {
        let mut invocation = valid.clone();
        invocation[field] = value;
        let response = client
            .post(format!("{base}/invoke"))
            .bearer_auth(TOKEN)
            .json(&invocation)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{field}");
        let body: Value = response.json().await.unwrap();
        assert!(
            body["error"].as_str().unwrap().contains(message),
            "{field}: {body}"
        );
    }
    assert_eq!(server.running(), 0);
}
