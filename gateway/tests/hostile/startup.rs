//! The binary's start-up refusals (a bad config file, Redis without a shared secret) and the
//! admin token it prints without any secret.

use serde_json::json;

use crate::support;
use crate::support::http::{Reply, WAIT, run_to_exit, sleep_call, status, until_stderr};
use crate::support::{Gateway, Options, client, config};

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
    // An unknown id is 404.
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

/// Under a descriptor limit of 256 the default reserve (256) would leave no connection: the
/// gateway fits its reserve to the limit instead, starts, says what it lowered, and serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_descriptor_limit_fits_the_reserve_and_the_gateway_starts() {
    let gateway = Gateway::with(Options {
        config: config(""),
        nofile: Some(256),
        ..Options::default()
    });
    let stderr = support::sdk::plain(&gateway.stderr());
    assert!(
        stderr.contains("connections.max_connections lowered to fit the descriptor limit")
            && stderr.contains("fitted=128")
            && stderr.contains("fd_reserve=64"),
        "{stderr}"
    );
    let reply = support::http::rpc(
        &gateway,
        "alice",
        &support::http::echo_call(json!(1), "served"),
    )
    .await;
    assert_eq!(
        reply.body["result"]["content"][0]["text"], "served",
        "{}",
        reply.text
    );
}

/// A per-user share not below its bound lets one user take all of it: the gateway starts,
/// and says so.
#[tokio::test]
async fn a_share_at_its_bound_is_warned_about_at_start() {
    let gateway = Gateway::with(Options {
        config: config("[limits]\nmax_runs = 4\nmax_runs_per_user = 4\n"),
        ..Options::default()
    });
    let stderr = gateway.stderr();
    assert!(
        stderr
            .contains("warning: `limits.max_runs_per_user` (4) is not below `limits.max_runs` (4)"),
        "{stderr}"
    );
}
