//! DNS-rebinding protection at the gateway (Streamable HTTP requires it): a request whose
//! `Origin` is neither loopback nor in `allowed_origins` is refused with 403 before its token
//! is looked at, and so is one whose `Host` is not loopback (nor in `allowed_hosts`) on a
//! gateway bound to loopback, as a rebound page's same-origin requests are; `/health` stays
//! open to probes.

mod support;

use std::process::Command;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{Gateway, Options, client, config, token, tools_call};

/// POSTs a `demo-echo` call to `/mcp`'s sibling `/rpc` with `headers`, as alice.
async fn call(gateway: &Gateway, headers: &[(&str, &str)]) -> (StatusCode, Value) {
    let mut request = client()
        .post(gateway.url("/rpc"))
        .bearer_auth(token("alice"))
        .json(&tools_call(json!(1), "demo-echo", json!({"text": "hi"})));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origins_and_hosts_are_refused_and_loopback_and_listed_ones_served() {
    let gateway = Gateway::with(Options {
        config: config(
            "allowed_origins = [\"https://inspector.example.com\"]\nallowed_hosts = [\"mcp.example.com\"]\n",
        ),
        ..Options::default()
    });
    let port = gateway.base.rsplit(':').next().unwrap().to_owned();

    let served = [
        vec![],
        vec![("origin", "http://localhost:6274")],
        vec![("origin", "http://127.0.0.1:3000")],
        vec![("origin", "https://inspector.example.com")],
        vec![("host", "mcp.example.com")],
    ];
    for headers in served {
        let (status, body) = call(&gateway, &headers).await;
        assert_eq!(status, StatusCode::OK, "{headers:?}: {body}");
        assert_eq!(
            body["result"]["content"][0]["text"], "hi",
            "{headers:?}: {body}"
        );
    }

    let evil_host = format!("evil.example:{port}");
    let refused = [
        (
            vec![("origin", "http://evil.example")],
            "origin `http://evil.example`",
        ),
        (vec![("origin", "null")], "origin `null`"),
        (vec![("host", evil_host.as_str())], "host `evil.example:"),
        (
            vec![("host", evil_host.as_str()), ("origin", "http://localhost")],
            "host `evil.example:",
        ),
    ];
    for (headers, says) in refused {
        let (status, body) = call(&gateway, &headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{headers:?}: {body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{headers:?}: {detail}");
    }

    // Refused before authentication: no token, still 403 rather than 401.
    let anonymous = client()
        .post(gateway.url("/mcp"))
        .header("origin", "http://evil.example")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::FORBIDDEN);

    let health = client()
        .get(gateway.url("/health"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
}

#[test]
fn an_allowed_origin_that_is_not_one_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(
        &path,
        config("allowed_origins = [\"inspector.example.com\"]\n"),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cancelkit-gateway"))
        .arg("--config")
        .arg(&path)
        .env("JWT_SECRET_KEY", support::SECRET)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`allowed_origins`") && stderr.contains("is not an origin"),
        "{stderr}"
    );
}
