//! The cancellation API of a single worker, as ContextForge documents it (seed 004) and as the
//! issue sharpens it: cancel and status for known and unknown ids, idempotence, reasons, the
//! status body before and after a cancel and after the run ends, `/v1`, the switch, tokens and
//! permissions, the -32800 answer, disconnects, the client's own cancel, timeouts, `/metrics`
//! and the retention of finished runs.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::http::{
    SLEEP_CANCELLED, WAIT, assert_cancelled, cancel, cancel_at, cancel_with, echo_call, eventually,
    join, metric, rpc, run_id_of, sleep_call, spawn_rpc, status, status_at, until_stderr,
    until_stderr_count,
};
use support::{Gateway, Options, SECRET, client, config, token, token_with};

fn gateway_with(extra: &str) -> Gateway {
    Gateway::with(Options {
        config: config(extra),
        ..Options::default()
    })
}

/// The status body's keys, exactly.
fn assert_status_keys(body: &Value) {
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "cancel_reason",
            "cancel_source",
            "cancelled",
            "cancelled_at",
            "name",
            "registered_at",
            "run_id",
            "state"
        ],
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_cancel_stops_the_run_answers_minus_32800_and_is_idempotent() {
    let gateway = Gateway::start();
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!(7), 30.0));
    until_stderr(&gateway, "started tools/call sleep").await;
    let run_id = run_id_of(&gateway, "alice", "7").await;

    // Before the cancel: running, nothing cancelled, the nulls present.
    let before = status(&gateway, "admin", &run_id).await;
    assert_eq!(before.status, 200, "{}", before.text);
    assert_status_keys(&before.body);
    assert_eq!(before.body["name"], "demo-sleep");
    assert_eq!(before.body["state"], "running");
    assert_eq!(before.body["run_id"], run_id.as_str());
    assert_eq!(before.body["cancelled"], false);
    assert_eq!(before.body["cancelled_at"], Value::Null);
    assert_eq!(before.body["cancel_reason"], Value::Null);
    assert_eq!(before.body["cancel_source"], Value::Null);
    let registered_at = before.body["registered_at"].as_f64().expect("a float");

    let reply = cancel(&gateway, "admin", &run_id, Some("operator says stop")).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.body,
        json!({"status": "cancelled", "requestId": run_id, "reason": "operator says stop"})
    );

    // The caller's pending call gets -32800 with its own id, the run id and the reason.
    let answer = join(call).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.run_id.as_deref(), Some(run_id.as_str()));
    assert_cancelled(&answer, &json!(7), &run_id, Some("operator says stop"));
    // The upstream work stopped.
    until_stderr(&gateway, SLEEP_CANCELLED).await;

    let after = status(&gateway, "admin", &run_id).await;
    assert_eq!(after.status, 200, "{}", after.text);
    assert_status_keys(&after.body);
    assert_eq!(after.body["cancelled"], true);
    assert_eq!(after.body["cancel_reason"], "operator says stop");
    assert_eq!(after.body["cancel_source"], "api");
    assert_eq!(after.body["state"], "cancelled");
    assert_eq!(after.body["registered_at"].as_f64(), Some(registered_at));
    let cancelled_at = after.body["cancelled_at"].as_f64().expect("a float");
    assert!(cancelled_at >= registered_at, "{}", after.text);

    // Again: still `cancelled`, its own reason echoed; the first cancel's reason stays.
    let again = cancel(&gateway, "admin", &run_id, Some("twice")).await;
    assert_eq!(
        again.body,
        json!({"status": "cancelled", "requestId": run_id, "reason": "twice"})
    );
    let owner_again = cancel(&gateway, "alice", "7", None).await;
    assert_eq!(
        owner_again.body,
        json!({"status": "cancelled", "requestId": "7", "reason": null})
    );
    let last = status(&gateway, "alice", "7").await;
    assert_eq!(last.body["cancel_reason"], "operator says stop");
    assert_eq!(last.body["cancelled_at"].as_f64(), Some(cancelled_at));
    assert_eq!(gateway.count_stderr(SLEEP_CANCELLED), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_id_cancels_with_a_null_reason() {
    let gateway = Gateway::start();
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!("job-1"), 30.0));
    until_stderr(&gateway, "started tools/call sleep").await;
    let run_id = run_id_of(&gateway, "admin", "job-1").await;
    // No `reason` at all: echoed as null.
    let response = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token("admin"))
        .json(&json!({"requestId": "job-1"}))
        .send()
        .await
        .unwrap();
    let reply = support::http::Reply::read(response).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.body,
        json!({"status": "cancelled", "requestId": "job-1", "reason": null})
    );
    assert_cancelled(&join(call).await, &json!("job-1"), &run_id, None);
    let after = status(&gateway, "admin", "job-1").await;
    assert_eq!(after.body["cancelled"], true);
    assert_eq!(after.body["cancel_reason"], Value::Null);
    until_stderr(&gateway, SLEEP_CANCELLED).await;
}

#[tokio::test]
async fn unknown_ids_are_404_for_an_admin_and_403_for_anyone_else() {
    let gateway = Gateway::start();
    let missing = status(&gateway, "admin", "no-such-run").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body, json!({"detail": "Run not found"}));
    let missing_run = status(&gateway, "admin", "run-0123456789abcdef0123456789abcdef").await;
    assert_eq!(missing_run.status, 404);
    assert_eq!(missing_run.body, json!({"detail": "Run not found"}));
    // An admin's cancel of an unknown bare id waits for the run of the user it names:
    // queued; without a user it is refused (it would cancel the next run so named of anyone).
    let unscoped = cancel(&gateway, "admin", "no-such-run", Some("r")).await;
    assert_eq!(unscoped.status, 404, "{}", unscoped.text);
    assert!(unscoped.detail().contains("\"user\""), "{}", unscoped.text);
    let queued = cancel_with(
        &gateway,
        "admin",
        json!({"requestId": "no-such-run", "reason": "r", "user": "alice"}),
    )
    .await;
    assert_eq!(
        queued.body,
        json!({"status": "queued", "requestId": "no-such-run", "reason": "r"})
    );
    for user in ["alice", "bob"] {
        let s = status(&gateway, user, "no-such-run").await;
        assert_eq!(s.status, 403, "{}", s.text);
        assert!(!s.detail().is_empty());
        let c = cancel(&gateway, user, "no-such-run", None).await;
        assert_eq!(c.status, 403, "{}", c.text);
    }
}

#[tokio::test]
async fn a_finished_run_keeps_its_status_and_a_late_cancel_is_queued() {
    let gateway = Gateway::start();
    let reply = rpc(&gateway, "alice", &echo_call(json!(3), "hello")).await;
    assert_eq!(reply.status, 200);
    let run_id = reply.run_id.clone().expect("Cancelkit-Run-Id");
    assert_eq!(reply.body["result"]["content"][0]["text"], "hello");
    assert_eq!(
        reply.body["result"]["_meta"]["io.cancelkit/runId"],
        run_id.as_str()
    );

    let done = status(&gateway, "admin", &run_id).await;
    assert_eq!(done.status, 200, "{}", done.text);
    assert_status_keys(&done.body);
    assert_eq!(done.body["state"], "completed");
    assert_eq!(done.body["cancelled"], false);
    assert_eq!(done.body["cancelled_at"], Value::Null);
    assert_eq!(done.body["name"], "demo-echo");
    // The owner reads it by its bare id too.
    let own = status(&gateway, "alice", "3").await;
    assert_eq!(own.body, done.body);

    // Nothing live to stop: queued, and the status still says completed.
    let late = cancel(&gateway, "admin", &run_id, Some("too late")).await;
    assert_eq!(
        late.body,
        json!({"status": "queued", "requestId": run_id, "reason": "too late"})
    );
    let still = status(&gateway, "admin", &run_id).await;
    assert_eq!(still.body["state"], "completed");
    assert_eq!(still.body["cancelled"], false);
    // A call that fails keeps a `failed` status.
    let failed = rpc(&gateway, "alice", &sleep_call(json!(4), -1.0)).await;
    assert!(failed.body["error"].is_object(), "{}", failed.text);
    let failed_run = failed.run_id.clone().expect("Cancelkit-Run-Id on an error");
    assert_eq!(failed.body["error"]["data"]["runId"], failed_run.as_str());
    let s = status(&gateway, "admin", &failed_run).await;
    assert_eq!(s.body["state"], "failed", "{}", s.text);
    assert_eq!(s.body["cancelled"], false);
    // And the late cancel left nothing behind: the same id runs normally again.
    let next = rpc(&gateway, "alice", &echo_call(json!(3), "again")).await;
    assert_eq!(
        next.body["result"]["content"][0]["text"], "again",
        "{}",
        next.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1_aliases_serve_the_same_api() {
    let gateway = Gateway::start();
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!(11), 30.0));
    until_stderr(&gateway, "started tools/call sleep").await;
    let run_id = run_id_of(&gateway, "alice", "11").await;
    let s = status_at(&gateway, "/v1", "alice", &run_id).await;
    assert_eq!(s.status, 200, "{}", s.text);
    assert_eq!(s.body["state"], "running");
    let missing = status_at(&gateway, "/v1", "admin", "nothing").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body, json!({"detail": "Run not found"}));
    let forbidden = cancel_at(&gateway, "/v1", "bob", &run_id, None).await;
    assert_eq!(forbidden.status, 403);
    let c = cancel_at(&gateway, "/v1", "alice", &run_id, Some("v1")).await;
    assert_eq!(
        c.body,
        json!({"status": "cancelled", "requestId": run_id, "reason": "v1"})
    );
    assert_cancelled(&join(call).await, &json!(11), &run_id, Some("v1"));
    let after = status_at(&gateway, "/v1", "admin", &run_id).await;
    assert_eq!(after.body["state"], "cancelled");
}

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

    // bob gets the same 403 for alice's run (by run id or bare id) as for runs that do not
    // exist: nothing tells him which exist.
    let forbidden = cancel(&gateway, "bob", &run_id, Some("mine now")).await;
    assert_eq!(forbidden.status, 403, "{}", forbidden.text);
    for id in [
        run_id.as_str(),
        "1",
        "run-0123456789abcdef0123456789abcdef",
        "never-was",
    ] {
        let c = cancel(&gateway, "bob", id, None).await;
        assert_eq!((c.status, &c.body), (403, &forbidden.body), "cancel {id}");
        let s = status(&gateway, "bob", id).await;
        assert_eq!((s.status, &s.body), (403, &forbidden.body), "status {id}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_disconnects_cancels_its_run() {
    let gateway = Gateway::start();
    let body = sleep_call(json!(21), 30.0).to_string();
    let request = format!(
        "POST /rpc HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        token("alice"),
        body.len()
    );
    let address = gateway.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
        .await
        .unwrap();
    until_stderr(&gateway, "started tools/call sleep").await;
    let run_id = run_id_of(&gateway, "alice", "21").await;
    drop(stream);

    until_stderr(&gateway, SLEEP_CANCELLED).await;
    let s = eventually(WAIT, "the run ends cancelled", || async {
        let s = status(&gateway, "admin", &run_id).await;
        (s.body["state"] == "cancelled").then_some(s)
    })
    .await;
    assert_eq!(s.body["cancelled"], true);
    assert!(s.body["cancelled_at"].is_f64());
    let metrics = client()
        .get(gateway.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        metric(
            &metrics,
            "cancelkit_gateway_cancels_total",
            "source=\"disconnect\""
        ),
        1.0,
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_own_notification_on_rpc_cancels_its_run() {
    let gateway = Gateway::start();
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!(5), 30.0));
    until_stderr(&gateway, "started tools/call sleep").await;
    let run_id = run_id_of(&gateway, "alice", "5").await;
    let note = |id: Value| {
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": id, "reason": "changed my mind"}})
    };

    // bob's notification for the same id, and alice's for the id typed as a string, reach
    // nothing.
    for (user, id) in [("bob", json!(5)), ("alice", json!("5"))] {
        let reply = rpc(&gateway, user, &note(id)).await;
        assert_eq!(reply.status, 202);
        assert_eq!(reply.text, "");
    }
    let s = status(&gateway, "alice", &run_id).await;
    assert_eq!(s.body["state"], "running", "{}", s.text);

    let reply = rpc(&gateway, "alice", &note(json!(5))).await;
    assert_eq!(reply.status, 202);
    assert_eq!(reply.text, "", "a notification gets no body");
    assert_cancelled(
        &join(call).await,
        &json!(5),
        &run_id,
        Some("changed my mind"),
    );
    until_stderr(&gateway, SLEEP_CANCELLED).await;
    let s = status(&gateway, "alice", &run_id).await;
    assert_eq!(s.body["state"], "cancelled");
    assert_eq!(s.body["cancel_reason"], "changed my mind");
    assert_eq!(s.body["cancel_source"], "client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_timeout_cancels_the_run() {
    let gateway = gateway_with("[cancellation]\ntool_timeout = \"1s\"\n");
    let started = std::time::Instant::now();
    let reply = rpc(&gateway, "alice", &sleep_call(json!(8), 30.0)).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let run_id = reply.run_id.clone().expect("Cancelkit-Run-Id");
    let response = reply.response();
    assert_eq!(response["error"]["code"], -32800, "{response}");
    assert_eq!(response["error"]["data"]["runId"], run_id.as_str());
    assert_eq!(response["error"]["data"]["requestId"], 8);
    assert!(
        response["error"]["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("timeout")),
        "{response}"
    );
    until_stderr(&gateway, SLEEP_CANCELLED).await;
    let s = status(&gateway, "alice", &run_id).await;
    assert_eq!(s.body["state"], "cancelled");
    assert_eq!(s.body["cancelled"], true);
    // A quick call is not touched by the timeout.
    let echo = rpc(&gateway, "alice", &echo_call(json!(9), "quick")).await;
    assert_eq!(echo.body["result"]["content"][0]["text"], "quick");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_by_source_and_name_no_run_nor_user() {
    let gateway = gateway_with("[cancellation]\ntool_timeout = \"3s\"\n");
    let mut run_ids = Vec::new();

    // api
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!("api"), 30.0));
    until_stderr_count(&gateway, "started tools/call sleep", 1).await;
    let id = run_id_of(&gateway, "alice", "api").await;
    assert_eq!(
        cancel(&gateway, "admin", &id, None).await.body["status"],
        "cancelled"
    );
    join(call).await;
    run_ids.push(id);
    // client
    let call = spawn_rpc(&gateway, "bob", sleep_call(json!("client"), 30.0));
    until_stderr_count(&gateway, "started tools/call sleep", 2).await;
    let id = run_id_of(&gateway, "bob", "client").await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "client"}});
    assert_eq!(rpc(&gateway, "bob", &note).await.status, 202);
    join(call).await;
    run_ids.push(id);
    // disconnect
    let body = sleep_call(json!("gone"), 30.0).to_string();
    let request = format!(
        "POST /rpc HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        token("alice"),
        body.len()
    );
    let address = gateway.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
        .await
        .unwrap();
    until_stderr_count(&gateway, "started tools/call sleep", 3).await;
    run_ids.push(run_id_of(&gateway, "alice", "gone").await);
    drop(stream);
    until_stderr_count(&gateway, SLEEP_CANCELLED, 3).await;
    // completed
    let echo = rpc(&gateway, "alice", &echo_call(json!("ok"), "fine")).await;
    run_ids.push(echo.run_id.unwrap());
    // failed (the demo refuses a negative sleep)
    let failed = rpc(&gateway, "bob", &sleep_call(json!("bad"), -1.0)).await;
    assert!(failed.body["error"].is_object(), "{}", failed.text);
    run_ids.push(failed.run_id.unwrap());
    // timeout
    let timed = rpc(&gateway, "alice", &sleep_call(json!("slow"), 30.0)).await;
    assert_eq!(timed.response()["error"]["code"], -32800);
    run_ids.push(timed.run_id.unwrap());
    until_stderr_count(&gateway, SLEEP_CANCELLED, 4).await;

    // No token needed.
    let response = client().get(gateway.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    for source in ["api", "client", "disconnect", "timeout"] {
        let value = metric(
            &text,
            "cancelkit_gateway_cancels_total",
            &format!("source=\"{source}\""),
        );
        assert_eq!(value, 1.0, "cancels by {source}:\n{text}");
    }
    assert_eq!(
        metric(&text, "cancelkit_gateway_runs_started_total", ""),
        6.0,
        "{text}"
    );
    for (outcome, n) in [("completed", 1.0), ("failed", 1.0), ("cancelled", 4.0)] {
        let value = metric(
            &text,
            "cancelkit_gateway_runs_finished_total",
            &format!("outcome=\"{outcome}\""),
        );
        assert_eq!(value, n, "runs {outcome}:\n{text}");
    }
    assert_eq!(
        metric(
            &text,
            "cancelkit_gateway_cancel_to_stopped_seconds_count",
            ""
        ),
        4.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "cancelkit_gateway_upstream_cancels_total",
            "upstream=\"demo\""
        ),
        4.0,
        "{text}"
    );
    for id in &run_ids {
        assert!(!text.contains(id.as_str()), "{id} in /metrics");
    }
    for word in ["alice", "bob", "admin", "\"gone\"", "\"slow\"", "\"bad\""] {
        assert!(!text.contains(word), "{word} in /metrics:\n{text}");
    }
    assert!(!text.contains("run-"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_runs_status_expires_after_the_retention() {
    let gateway = gateway_with("[cancellation]\nstatus_retention = \"1s\"\n");
    let reply = rpc(&gateway, "alice", &echo_call(json!(1), "short-lived")).await;
    let run_id = reply.run_id.unwrap();
    let kept = status(&gateway, "admin", &run_id).await;
    assert_eq!(kept.status, 200);
    assert_eq!(kept.body["state"], "completed");
    let started = std::time::Instant::now();
    eventually(Duration::from_secs(5), "the status expires", || async {
        let s = status(&gateway, "admin", &run_id).await;
        (s.status == 404).then_some(())
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "expired too early"
    );
    assert_eq!(
        status(&gateway, "admin", &run_id).await.body,
        json!({"detail": "Run not found"})
    );
    assert_eq!(status(&gateway, "alice", "1").await.status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_off_the_timeout_still_cancels_but_names_no_run() {
    let gateway = gateway_with("[cancellation]\nenabled = false\ntool_timeout = \"300ms\"\n");
    let reply = rpc(&gateway, "alice", &sleep_call(json!(4), 30.0)).await;
    assert_eq!(reply.run_id, None, "no Cancelkit-Run-Id header");
    let response = reply.response();
    assert_eq!(response["id"], 4);
    assert_eq!(response["error"]["code"], -32800, "{response}");
    assert_eq!(response["error"]["message"], "Request cancelled");
    let data = &response["error"]["data"];
    assert_eq!(data["requestId"], 4);
    assert_eq!(data["partial"], false);
    assert!(
        data["reason"]
            .as_str()
            .is_some_and(|r| r.contains("timeout")),
        "{response}"
    );
    assert!(
        data.get("runId").is_none(),
        "untracked, yet named: {response}"
    );
    until_stderr(&gateway, SLEEP_CANCELLED).await;
}
