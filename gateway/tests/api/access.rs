//! Who may use the API: the switch (by the environment or the config), tokens and
//! permissions, and an owner cancelling its own run.

use serde_json::{Value, json};

use crate::support::http::{
    SLEEP_CANCELLED, assert_cancelled, cancel, echo_call, join, rpc, run_id_of, sleep_call,
    spawn_rpc, status, until_stderr,
};
use crate::support::{Gateway, Options, SECRET, client, config, token, token_with};
use crate::{gateway_with, support};

/// With the switch off: both endpoints (and their `/v1` aliases) are 404 before any token is
/// looked at, and calls are not tracked.
async fn assert_switched_off(gateway: &Gateway) {
    let paths = [
        "/cancellation/cancel",
        "/v1/cancellation/cancel",
        "/cancellation/status/1",
        "/v1/cancellation/status/1",
    ];
    let admin = token("admin");
    for path in paths {
        for auth in [None, Some("garbage"), Some(admin.as_str())] {
            for post in [true, false] {
                let mut request = if post {
                    client()
                        .post(gateway.url(path))
                        .json(&json!({"requestId": "1", "reason": null}))
                } else {
                    client().get(gateway.url(path))
                };
                if let Some(auth) = auth {
                    request = request.bearer_auth(auth);
                }
                let reply = support::http::Reply::read(request.send().await.unwrap()).await;
                assert_eq!(reply.status, 404, "{path} {auth:?}: {}", reply.text);
                assert_eq!(reply.body, json!({"detail": "Not Found"}), "{path}");
            }
        }
    }
    let reply = rpc(gateway, "alice", &echo_call(json!(1), "untracked")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["result"]["content"][0]["text"], "untracked");
    assert_eq!(reply.run_id, None, "no Cancelkit-Run-Id header");
    assert!(
        reply.body["result"]
            .get("_meta")
            .is_none_or(|m| m.get("io.cancelkit/runId").is_none()),
        "{}",
        reply.text
    );
    let health: Value = client()
        .get(gateway.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["runs_in_flight"], 0);
}

#[tokio::test]
async fn switched_off_by_the_environment_the_api_is_404_and_nothing_is_tracked() {
    let gateway = Gateway::with(Options {
        config: config(""),
        env: vec![("MCPGATEWAY_TOOL_CANCELLATION_ENABLED", "false".into())],
        ..Options::default()
    });
    assert_switched_off(&gateway).await;
}

#[tokio::test]
async fn switched_off_by_the_config_the_api_is_404_and_nothing_is_tracked() {
    let gateway = gateway_with("[cancellation]\nenabled = false\n");
    assert_switched_off(&gateway).await;
}

#[tokio::test]
async fn tokens_that_do_not_check_out_get_401_and_no_permission_gets_403() {
    let gateway = Gateway::start();
    // An HS256 token with an alg of none, and one signed with another secret.
    let none = {
        use std::time::{SystemTime, UNIX_EPOCH};
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3600;
        let b64 = |v: &Value| base64url(v.to_string().as_bytes());
        format!(
            "{}.{}.",
            b64(&json!({"alg": "none", "typ": "JWT"})),
            b64(&json!({"sub": "admin", "exp": exp}))
        )
    };
    let forged = token_with("admin", 3600, "not-the-gateway-secret-at-all");
    let expired = token_with("admin", -3600, SECRET);
    let bad: Vec<(&str, Option<String>)> = vec![
        ("missing", None),
        ("forged", Some(format!("Bearer {forged}"))),
        ("expired", Some(format!("Bearer {expired}"))),
        ("alg none", Some(format!("Bearer {none}"))),
        ("garbage", Some("Bearer not.a.token".into())),
        ("basic", Some("Basic YWRtaW46YWRtaW4=".into())),
    ];
    for (what, header) in &bad {
        for (post, path) in [
            (true, "/cancellation/cancel"),
            (false, "/cancellation/status/1"),
            (true, "/v1/cancellation/cancel"),
            (false, "/v1/cancellation/status/1"),
        ] {
            let mut request = if post {
                client()
                    .post(gateway.url(path))
                    .json(&json!({"requestId": "1", "reason": null}))
            } else {
                client().get(gateway.url(path))
            };
            if let Some(header) = header {
                request = request.header("authorization", header);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{what} on {path}");
            assert_eq!(
                response
                    .headers()
                    .get("www-authenticate")
                    .map(|v| v.to_str().unwrap()),
                Some("Bearer"),
                "{what} on {path}"
            );
            let body: Value = response.json().await.unwrap();
            assert!(body["detail"].is_string(), "{what} on {path}: {body}");
        }
    }

    // nobody has a valid token but no permission at all.
    let call = rpc(&gateway, "alice", &echo_call(json!(1), "x")).await;
    let run_id = call.run_id.unwrap();
    for id in [run_id.as_str(), "1", "nothing"] {
        assert_eq!(status(&gateway, "nobody", id).await.status, 403, "{id}");
        assert_eq!(
            cancel(&gateway, "nobody", id, None).await.status,
            403,
            "{id}"
        );
    }
    let denied = rpc(&gateway, "nobody", &echo_call(json!(2), "x")).await;
    assert_eq!(denied.status, 403, "{}", denied.text);
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_may_cancel_its_own_run_and_nobody_else_may() {
    let gateway = Gateway::start();
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 30.0));
    until_stderr(&gateway, "started tools/call sleep").await;
    let run_id = run_id_of(&gateway, "alice", "1").await;

    // bob gets the same answers for alice's run (by run id or bare id) as for runs that do
    // not exist: a cancel is queued for a run of his own (seed 004's `queued`), a status read
    // is 404. Nothing tells him which exist, and nothing of his stops her run.
    for id in [
        run_id.as_str(),
        "1",
        "run-0123456789abcdef0123456789abcdef",
        "never-was",
    ] {
        let c = cancel(&gateway, "bob", id, Some("mine now")).await;
        assert_eq!(c.status, 200, "cancel {id}: {}", c.text);
        assert_eq!(
            c.body,
            json!({"status": "queued", "requestId": id, "reason": "mine now"}),
            "cancel {id}"
        );
        let s = status(&gateway, "bob", id).await;
        assert_eq!(
            (s.status, &s.body),
            (404, &json!({"detail": "Run not found"})),
            "status {id}"
        );
    }
    // alice's run goes on.
    let s = status(&gateway, "alice", &run_id).await;
    assert_eq!(s.body["state"], "running", "{}", s.text);
    assert_eq!(s.body["cancelled"], false);
    assert_eq!(gateway.count_stderr(SLEEP_CANCELLED), 0);
    assert!(!call.is_finished());

    // alice cancels her own.
    let own = cancel(&gateway, "alice", &run_id, Some("mine")).await;
    assert_eq!(
        own.body,
        json!({"status": "cancelled", "requestId": run_id, "reason": "mine"})
    );
    assert_cancelled(&join(call).await, &json!(1), &run_id, Some("mine"));
    until_stderr(&gateway, SLEEP_CANCELLED).await;
}
