//! What upstreams get and what clients are told: a stdio upstream starts without the gateway's
//! secrets (only harmless defaults, its `inherit_env` and its `env`); an unreachable HTTP
//! upstream is named to clients without its URL, password or query token, which the log
//! keeps hidden too; a tool the upstream did not list is refused without reaching it (unless
//! `allow_unlisted_tools`); an over-long tool name is refused naming the limit.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::http::{Reply, mcp_post, mcp_session, rpc};
use support::{Gateway, Options, client, config, tools_call};

/// The demo upstream as `name`, forwarding any tool name (its `env` tool is not listed).
fn probe(name: &str, extra: &str) -> String {
    format!(
        "[[upstream]]\nname = \"{name}\"\ncommand = \"@self\"\nargs = [\"demo-upstream\"]\n\
         allow_unlisted_tools = true\n{extra}\n"
    )
}

/// The names the demo upstream `upstream` sees in its environment (its `env` tool).
async fn env_names(gateway: &Gateway, upstream: &str) -> Vec<String> {
    let reply = rpc(
        gateway,
        "alice",
        &tools_call(json!("env"), &format!("{upstream}-env"), json!({})),
    )
    .await;
    let text = reply.body["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("env answered {}\n{}", reply.text, gateway.stderr()));
    text.lines().map(str::to_owned).collect()
}

fn error_of(reply: &Reply) -> (i64, String) {
    (
        reply.body["error"]["code"].as_i64().unwrap_or_default(),
        reply.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_upstream_sees_neither_the_gateway_secrets_nor_its_other_variables() {
    let extra = probe(
        "probe",
        "inherit_env = [\"CANCELKIT_TEST_INHERITED\"]\n[upstream.env]\n\
         CANCELKIT_TEST_SET = \"set-${CANCELKIT_TEST_SOURCE}\"",
    );
    let gateway = Gateway::with(Options {
        config: config(&extra),
        env: vec![
            // Beside JWT_SECRET_KEY, which every test gateway has.
            ("REDIS_PASSWORD", "redis-hunter2".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "aws-hunter2".to_owned()),
            ("CANCELKIT_TEST_INHERITED", "inherited".to_owned()),
            ("CANCELKIT_TEST_SOURCE", "source".to_owned()),
        ],
        ..Options::default()
    });
    let names = env_names(&gateway, "probe").await;
    for expected in ["CANCELKIT_TEST_INHERITED", "CANCELKIT_TEST_SET", "PATH"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing: {names:?}"
        );
    }
    for hidden in [
        "JWT_SECRET_KEY",
        "REDIS_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "CANCELKIT_TEST_SOURCE",
        "RUST_LOG",
        "CARGO_MANIFEST_DIR",
    ] {
        assert!(
            !names.iter().any(|n| n == hidden),
            "{hidden} leaked: {names:?}"
        );
    }
    // The gateway itself has them all (it is the child that does not).
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());

    // Naming a gateway secret in inherit_env passes it, with a warning at start.
    let extra = probe("probe", "inherit_env = [\"JWT_SECRET_KEY\"]");
    let gateway = Gateway::with(Options {
        config: config(&extra),
        ..Options::default()
    });
    let names = env_names(&gateway, "probe").await;
    assert!(names.iter().any(|n| n == "JWT_SECRET_KEY"), "{names:?}");
    let stderr = gateway.stderr();
    assert!(
        stderr.contains("inherit_env hands the gateway's own secret JWT_SECRET_KEY"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_http_upstream_is_named_without_its_url_password_or_token() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let (password, token) = ("pw-HUNTER2-x", "tok-SECRET-42");
    let url = format!("http://operator:{password}@127.0.0.1:{port}/mcp?token={token}");
    let extra = format!(
        "[[upstream]]\nname = \"down\"\nurl = \"{url}\"\n\n\
         [[upstream]]\nname = \"downany\"\nurl = \"{url}\"\nallow_unlisted_tools = true\n"
    );
    let gateway = Gateway::with(Options {
        config: config(&extra),
        ..Options::default()
    });
    let secrets = [password, token, &format!("127.0.0.1:{port}")];
    let leaks = |what: &str, text: &str| {
        for secret in secrets {
            assert!(!text.contains(secret), "{what} shows `{secret}`: {text}");
        }
    };

    // Listing it to admit the call fails: /rpc, then /mcp.
    let reply = rpc(
        &gateway,
        "alice",
        &tools_call(json!(1), "down-echo", json!({"text": "x"})),
    )
    .await;
    leaks("/rpc", &reply.text);
    assert_eq!(
        error_of(&reply),
        (-32603, "upstream `down` is unavailable".to_owned()),
        "{}",
        reply.text
    );
    assert_eq!(reply.body["error"]["data"]["upstream"], "down");
    let session = mcp_session(&gateway, "alice").await;
    let reply = mcp_post(
        &gateway,
        "alice",
        Some(&session),
        &tools_call(json!(2), "down-echo", json!({"text": "x"})),
    )
    .await;
    leaks("/mcp tools/call", &reply.text);
    assert_eq!(
        reply.response()["error"]["message"],
        "upstream `down` is unavailable",
        "{}",
        reply.text
    );
    // Forwarded without a list: the call itself fails, and says as little.
    let reply = rpc(
        &gateway,
        "alice",
        &tools_call(json!(3), "downany-echo", json!({"text": "x"})),
    )
    .await;
    leaks("/rpc forwarded", &reply.text);
    let (code, message) = error_of(&reply);
    assert_eq!(
        (code, message.as_str()),
        (-32603, "upstream `downany` is unavailable"),
        "{}",
        reply.text
    );
    assert!(
        reply.body["error"]["data"]["runId"].is_string(),
        "{}",
        reply.text
    );
    // tools/list leaves it out; /health says nothing of it.
    let listed = mcp_post(
        &gateway,
        "alice",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
    )
    .await;
    leaks("tools/list", &listed.text);
    assert_eq!(
        listed.response()["result"]["tools"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{}",
        listed.text
    );
    let health = client()
        .get(gateway.url("/health"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    leaks("/health", &health);

    // The log names the upstream and why, with the password and the token hidden.
    let stderr = gateway.wait_for_stderr("tools/call failed", Duration::from_secs(10));
    // The password never reaches the runtime's HTTP client (it travels as a Basic header), so
    // nothing logs it. The query must stay in the URL requests go to, and every log line, the
    // gateway's and the runtime's HTTP client's alike, hides it.
    assert!(
        !stderr.contains(password),
        "the log shows the password:\n{stderr}"
    );
    for line in stderr.lines() {
        assert!(!line.contains(token), "the log shows the token: {line}");
    }
    // The runtime's client never had the user (it travels as a Basic header): the URL it
    // names is the host, port and path, the query hidden.
    let redacted = format!("http://127.0.0.1:{port}/mcp?***");
    let listing = stderr
        .lines()
        .find(|l| l.contains("cannot list its tools"))
        .unwrap_or_else(|| panic!("no listing failure logged:\n{stderr}"));
    assert!(
        listing.contains("down") && listing.contains(&redacted),
        "{listing}"
    );
    let call = stderr
        .lines()
        .find(|l| l.contains("tools/call failed"))
        .unwrap();
    assert!(
        call.contains("downany") && call.contains(&redacted),
        "{call}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlisted_tool_is_refused_without_reaching_the_upstream_unless_allowed() {
    let gateway = Gateway::start();
    let reply = rpc(
        &gateway,
        "alice",
        &tools_call(json!(1), "demo-env", json!({})),
    )
    .await;
    assert_eq!(
        error_of(&reply),
        (-32602, "Unknown tool: demo-env".to_owned()),
        "{}",
        reply.text
    );
    let session = mcp_session(&gateway, "alice").await;
    let reply = mcp_post(
        &gateway,
        "alice",
        Some(&session),
        &tools_call(json!(2), "demo-env", json!({})),
    )
    .await;
    assert_eq!(reply.response()["error"]["code"], -32602, "{}", reply.text);
    // A listed tool goes through; by the time it is answered, the upstream would have logged
    // an env call it had received.
    let echo = rpc(
        &gateway,
        "alice",
        &tools_call(json!(3), "demo-echo", json!({"text": "listed"})),
    )
    .await;
    assert_eq!(
        echo.body["result"]["content"][0]["text"], "listed",
        "{}",
        echo.text
    );
    let stderr = gateway.stderr();
    assert!(
        !stderr.contains("demo-upstream: tools/call env"),
        "the upstream was asked:\n{stderr}"
    );

    // With allow_unlisted_tools, the same call reaches it.
    let gateway = Gateway::with(Options {
        config: config(&probe("open", "")),
        ..Options::default()
    });
    let names = env_names(&gateway, "open").await;
    assert!(!names.is_empty());
    gateway.wait_for_stderr("demo-upstream: tools/call env", Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_tool_name_is_refused_naming_the_limit_before_any_lookup() {
    // `down` cannot be listed: a name under its prefix that were looked up would say so.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let extra = format!("[[upstream]]\nname = \"down\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let gateway = Gateway::with(Options {
        config: config(&extra),
        ..Options::default()
    });
    let long = format!("down-{}", "x".repeat(300));
    let reply = rpc(&gateway, "alice", &tools_call(json!(1), &long, json!({}))).await;
    let (code, message) = error_of(&reply);
    assert_eq!(code, -32602, "{}", reply.text);
    assert!(message.contains("256"), "{message}");
    assert!(
        !message.contains(&long),
        "the name is not echoed: {message}"
    );
    assert!(
        !gateway.stderr().contains("cannot list its tools"),
        "{}",
        gateway.stderr()
    );
    // At the limit, the name is looked up (and the demo did not list it).
    let at_limit = format!("demo-{}", "e".repeat(251));
    let reply = rpc(
        &gateway,
        "alice",
        &tools_call(json!(2), &at_limit, json!({})),
    )
    .await;
    assert_eq!(
        error_of(&reply),
        (-32602, format!("Unknown tool: {at_limit}")),
        "{}",
        reply.text
    );
    let reply: Value = reply.body;
    assert!(reply["result"].is_null());
}
