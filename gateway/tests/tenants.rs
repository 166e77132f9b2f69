//! One user cannot take the gateway away from the others: every bound has a per-user share,
//! a user at their share is refused with an error naming it while everyone else is served, the
//! bounds hold with cancellation switched off, a token that grants nothing is refused before any
//! work, a run id names only its run, and an admin's cancel of a bare id that names no run yet
//! waits for the race window, for the user it names if it names one. Real gateway processes on
//! loopback.

mod support;

use serde_json::{Value, json};
use support::http::{
    assert_cancelled, cancel, cancel_with, echo_call, join, mcp_post, mcp_session, metric, rpc,
    run_id_of, sleep_call, spawn_rpc, status, until_stderr_count,
};
use support::{Gateway, Options, client, config, token};

const STARTED: &str = "demo-upstream: started tools/call sleep";

fn gateway_with(extra: &str) -> Gateway {
    Gateway::with(Options {
        config: config(extra),
        ..Options::default()
    })
}

fn error_message(reply: &support::http::Reply) -> String {
    reply.body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `user`'s share of calls in flight is full: their next call is -32050 naming the share, and
/// bob's call still runs.
async fn a_full_share_refuses_only_its_user(gateway: &Gateway, share_key: &str, held: usize) {
    let slow: Vec<_> = (0..held)
        .map(|i| spawn_rpc(gateway, "alice", sleep_call(json!(100 + i), 30.0)))
        .collect();
    until_stderr_count(gateway, STARTED, held).await;
    let refused = rpc(gateway, "alice", &echo_call(json!(1), "one too many")).await;
    assert_eq!(refused.body["error"]["code"], -32050, "{}", refused.text);
    let message = error_message(&refused);
    assert!(
        message.contains(share_key) && message.contains("your share"),
        "{message}"
    );
    let served = rpc(gateway, "bob", &echo_call(json!(1), "still served")).await;
    assert_eq!(
        served.body["result"]["content"][0]["text"], "still served",
        "{}",
        served.text
    );
    let metrics = support::metrics(gateway).await;
    assert_eq!(
        metric(
            &metrics,
            "cancelkit_gateway_limit_refused_total",
            &format!("limit=\"{share_key}\",scope=\"user\"")
        ),
        1.0,
        "{metrics}"
    );
    for call in slow {
        call.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_at_their_share_of_calls_is_refused_while_others_are_served() {
    let gateway = gateway_with("[limits]\nmax_runs = 10\nmax_runs_per_user = 2\n");
    a_full_share_refuses_only_its_user(&gateway, "limits.max_runs_per_user", 2).await;
}

/// The operator configured only the bound: the per-user share follows it (a tenth, at least
/// 1), so one user never holds every slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_only_the_bound_configured_one_user_still_gets_only_a_share() {
    let gateway = gateway_with("[limits]\nmax_runs = 8\n");
    a_full_share_refuses_only_its_user(&gateway, "limits.max_runs_per_user", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bounds_on_calls_hold_with_cancellation_switched_off() {
    let gateway = Gateway::with(Options {
        config: config("[limits]\nmax_runs = 10\nmax_runs_per_user = 2\n"),
        env: vec![("MCPGATEWAY_TOOL_CANCELLATION_ENABLED", "false".into())],
        ..Options::default()
    });
    a_full_share_refuses_only_its_user(&gateway, "limits.max_runs_per_user", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_cannot_take_every_slot_of_an_upstream() {
    let gateway = gateway_with(
        "[limits]\nmax_runs_per_user = 5\nmax_upstream_calls = 10\nmax_upstream_calls_per_user = 1\n",
    );
    a_full_share_refuses_only_its_user(&gateway, "limits.max_upstream_calls_per_user", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_bound_names_itself_and_slots_come_back_when_calls_end() {
    let gateway = gateway_with("[limits]\nmax_runs = 2\nmax_runs_per_user = 1\n");
    let a = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 1.0));
    let b = spawn_rpc(&gateway, "bob", sleep_call(json!(1), 1.0));
    until_stderr_count(&gateway, STARTED, 2).await;
    let refused = rpc(&gateway, "carol", &echo_call(json!(1), "x")).await;
    assert_eq!(refused.body["error"]["code"], -32050, "{}", refused.text);
    let message = error_message(&refused);
    assert!(
        message.contains("limits.max_runs") && message.contains("the gateway's bound"),
        "{message}"
    );
    for call in [a, b] {
        let reply = join(call).await;
        assert!(reply.body["result"].is_object(), "{}", reply.text);
    }
    let served = rpc(&gateway, "carol", &echo_call(json!(2), "after")).await;
    assert_eq!(served.body["result"]["content"][0]["text"], "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_finished_calls_never_push_out_another_users_status() {
    let gateway = gateway_with("[limits]\nmax_retained = 6\nmax_retained_per_user = 3\n");
    let bobs = rpc(&gateway, "bob", &echo_call(json!("b"), "keep me")).await;
    let bob_run = bobs.run_id.clone().expect("Cancelkit-Run-Id");
    let mut alices = Vec::new();
    for i in 0..20 {
        let reply = rpc(&gateway, "alice", &echo_call(json!(i), "many")).await;
        alices.push(reply.run_id.expect("Cancelkit-Run-Id"));
    }
    let kept = status(&gateway, "bob", &bob_run).await;
    assert_eq!(kept.status, 200, "{}", kept.text);
    assert_eq!(kept.body["state"], "completed");
    // Alice keeps her newest three; her oldest went.
    assert_eq!(status(&gateway, "alice", &alices[19]).await.status, 200);
    assert_eq!(status(&gateway, "alice", &alices[16]).await.status, 404);
    let metrics = support::metrics(&gateway).await;
    assert_eq!(
        metric(
            &metrics,
            "cancelkit_gateway_statuses_forgotten_total",
            "limit=\"limits.max_retained_per_user\""
        ),
        17.0,
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_cancels_have_a_share_per_user_and_are_never_evicted() {
    let gateway = gateway_with("[limits]\nmax_tombstones = 3\nmax_tombstones_per_user = 2\n");
    let wait = |by: &'static str, id: &'static str| {
        let gateway = &gateway;
        async move { cancel_with(gateway, by, json!({"requestId": id, "user": "carol"})).await }
    };
    for id in ["a", "b"] {
        let reply = wait("ops", id).await;
        assert_eq!(reply.body["status"], "queued", "{}", reply.text);
    }
    let over = wait("ops", "c").await;
    assert_eq!(over.status, 429, "{}", over.text);
    assert!(
        over.detail().contains("limits.max_tombstones_per_user"),
        "{}",
        over.text
    );
    // Another admin is not held back by the first one's share...
    let other = wait("admin", "d").await;
    assert_eq!(other.body["status"], "queued", "{}", other.text);
    // ... until the gateway's own bound, which refuses rather than forgets a queued cancel.
    let full = wait("admin", "e").await;
    assert_eq!(full.status, 503, "{}", full.text);
    assert!(
        full.detail().contains("limits.max_tombstones"),
        "{}",
        full.text
    );
    for id in ["a", "d"] {
        let reply = rpc(&gateway, "carol", &echo_call(json!(id), "x")).await;
        assert_eq!(reply.body["error"]["code"], -32800, "{id}: {}", reply.text);
    }
    let unqueued = rpc(&gateway, "carol", &echo_call(json!("c"), "ran")).await;
    assert_eq!(unqueued.body["result"]["content"][0]["text"], "ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_queued_cancel_holds_for_the_race_window_and_waits_for_the_user_it_names() {
    let gateway = gateway_with("[cancellation]\ntombstone_ttl = \"2s\"\n");
    // Seed 004's body, no user: queued, and it stops the next run so named, whoever's.
    let unscoped = cancel(&gateway, "admin", "later", Some("early")).await;
    assert_eq!(unscoped.status, 200, "{}", unscoped.text);
    assert_eq!(
        unscoped.body,
        json!({"status": "queued", "requestId": "later", "reason": "early"})
    );
    let mallorys = rpc(&gateway, "mallory", &sleep_call(json!("later"), 30.0)).await;
    let hit = mallorys.run_id.clone().expect("Cancelkit-Run-Id");
    assert_cancelled(&mallorys, &json!("later"), &hit, Some("early"));
    // The status says which run the queued cancel hit, and when it was queued.
    let after = status(&gateway, "admin", "later").await;
    assert_eq!(after.body["run_id"], hit.as_str(), "{}", after.text);
    assert_eq!(after.body["cancel_source"], "api");
    let queued_at = after.body["cancel_queued_at"]
        .as_f64()
        .expect("cancel_queued_at");
    assert!(queued_at <= after.body["registered_at"].as_f64().unwrap());
    // It stopped one run only.
    let carols = rpc(&gateway, "carol", &echo_call(json!("later"), "mine")).await;
    assert_eq!(
        carols.body["result"]["content"][0]["text"], "mine",
        "{}",
        carols.text
    );
    // Past the race window, a queued cancel stops nothing.
    let stale = cancel(&gateway, "admin", "gone", None).await;
    assert_eq!(stale.body["status"], "queued", "{}", stale.text);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let late = rpc(&gateway, "mallory", &echo_call(json!("gone"), "ran")).await;
    assert_eq!(
        late.body["result"]["content"][0]["text"], "ran",
        "{}",
        late.text
    );
    let scoped = cancel_with(
        &gateway,
        "admin",
        json!({"requestId": "later", "reason": "early", "user": "bob"}),
    )
    .await;
    assert_eq!(scoped.body["status"], "queued", "{}", scoped.text);
    let carols = rpc(&gateway, "carol", &echo_call(json!("later"), "mine too")).await;
    assert_eq!(carols.body["result"]["content"][0]["text"], "mine too");
    let bobs = rpc(&gateway, "bob", &sleep_call(json!("later"), 30.0)).await;
    let run_id = bobs.run_id.clone().expect("Cancelkit-Run-Id");
    assert_cancelled(&bobs, &json!("later"), &run_id, Some("early"));
    // Only an admin may name a user.
    let named = cancel_with(&gateway, "alice", json!({"requestId": "x", "user": "bob"})).await;
    assert_eq!(named.status, 403, "{}", named.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_id_never_names_a_clients_call_whose_string_id_equals_it() {
    let gateway = Gateway::start();
    let victim = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 30.0));
    until_stderr_count(&gateway, STARTED, 1).await;
    let run_id = run_id_of(&gateway, "alice", "1").await;
    // Mallory names her own call after alice's run, hoping the admin's cancel turns ambiguous.
    let decoy = spawn_rpc(&gateway, "mallory", sleep_call(json!(run_id.clone()), 30.0));
    until_stderr_count(&gateway, STARTED, 2).await;
    let reply = cancel(&gateway, "admin", &run_id, Some("operator")).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["status"], "cancelled", "{}", reply.text);
    assert_cancelled(&join(victim).await, &json!(1), &run_id, Some("operator"));
    // Mallory's call runs on; her status by that id is hers, and by run id only alice's run.
    let s = status(&gateway, "admin", &run_id).await;
    assert_eq!(s.body["run_id"], run_id.as_str(), "{}", s.text);
    assert!(!decoy.is_finished());
    decoy.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_grants_nothing_is_refused_before_any_work() {
    let gateway = Gateway::start();
    let http = client();
    for (method, path, body) in [
        ("GET", "/cancellation/status/1", None),
        (
            "POST",
            "/cancellation/cancel",
            Some(json!({"requestId": "1"})),
        ),
        ("POST", "/rpc", Some(echo_call(json!(1), "x"))),
        (
            "POST",
            "/mcp",
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
        ),
    ] {
        let mut request = match method {
            "GET" => http.get(gateway.url(path)),
            _ => http.post(gateway.url(path)),
        }
        .bearer_auth(token("nobody"))
        .header("accept", "application/json, text/event-stream");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 403, "{method} {path}");
        let body: Value = response.json().await.unwrap();
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("grants no permission"),
            "{body}"
        );
    }
    let metrics = support::metrics(&gateway).await;
    assert_eq!(
        metric(
            &metrics,
            "cancelkit_gateway_requests_without_permission_total",
            ""
        ),
        4.0,
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_client_id_is_refused_naming_the_limit() {
    let gateway = Gateway::start();
    let long = "x".repeat(257);
    let reply = rpc(&gateway, "alice", &echo_call(json!(long), "x")).await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert!(reply.detail().contains("at most 256"), "{}", reply.text);
    let at_limit = rpc(&gateway, "alice", &echo_call(json!("y".repeat(256)), "ok")).await;
    assert_eq!(at_limit.body["result"]["content"][0]["text"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_at_their_share_of_sessions_is_refused_while_others_open_theirs() {
    let gateway = gateway_with("[limits]\nmax_sessions = 10\nmax_sessions_per_user = 2\n");
    let first = mcp_session(&gateway, "alice").await;
    mcp_session(&gateway, "alice").await;
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "cancelkit-tests", "version": "0"}}});
    let refused = mcp_post(&gateway, "alice", None, &initialize).await;
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert_eq!(refused.body["error"]["code"], -32050, "{}", refused.text);
    let message = error_message(&refused);
    assert!(message.contains("you have 2 sessions"), "{message}");
    mcp_session(&gateway, "bob").await;
    // Ending one of hers gives her share back.
    let ended = client()
        .delete(gateway.url("/mcp"))
        .bearer_auth(token("alice"))
        .header("mcp-session-id", &first)
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    mcp_session(&gateway, "alice").await;
}
