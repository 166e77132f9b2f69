//! One test per defect of ContextForge's cancellation (PROTOCOLS.md §4) that cancelkit's gateway
//! must not have: colliding ids of two users, `1` and `"1"` as one run, cancels that arrive
//! before their run, cancels fanned out to every upstream call, `/mcp` calls that are not runs,
//! and a finished run that vanishes (or shows who started it).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::http::{
    SLEEP_CANCELLED, WAIT, assert_cancelled, cancel, cancel_with, cancelled_upstream_ids,
    echo_call, join, mcp_post, mcp_session, metric, rpc, run_id_of, sleep_call, spawn_mcp,
    spawn_rpc, stamped, started_upstream_ids, status, until_stderr, until_stderr_count,
};
use support::{Gateway, Options, config};

const STARTED: &str = "started tools/call sleep";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_id_1_are_two_runs_and_a_bare_1_is_ambiguous_for_an_admin() {
    let gateway = Gateway::start();
    let alice_call = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 30.0));
    let bob_call = spawn_rpc(&gateway, "bob", sleep_call(json!(1), 30.0));
    until_stderr_count(&gateway, STARTED, 2).await;
    let alice_run = run_id_of(&gateway, "alice", "1").await;
    let bob_run = run_id_of(&gateway, "bob", "1").await;
    assert_ne!(alice_run, bob_run);

    // An admin sees both: a bare 1 is refused, never guessed.
    let ambiguous = cancel(&gateway, "admin", "1", Some("which?")).await;
    assert_eq!(ambiguous.status, 409, "{}", ambiguous.text);
    assert!(ambiguous.detail().contains("run id"), "{}", ambiguous.text);
    assert_eq!(ambiguous.body["run_ids"].as_array().map(Vec::len), Some(2));
    // A status read reports one of them and names the other.
    let both = status(&gateway, "admin", "1").await;
    assert_eq!(both.status, 200, "{}", both.text);
    let reported = both.body["run_id"].as_str().unwrap().to_owned();
    let other = if reported == alice_run {
        &bob_run
    } else {
        &alice_run
    };
    assert_eq!(both.body["other_run_ids"], json!([other]), "{}", both.text);
    assert_eq!(
        gateway.count_stderr(SLEEP_CANCELLED),
        0,
        "nothing was cancelled"
    );

    // Cancelling alice's by its run id leaves bob's running.
    let c = cancel(&gateway, "admin", &alice_run, Some("alice's only")).await;
    assert_eq!(c.body["status"], "cancelled", "{}", c.text);
    assert_cancelled(
        &join(alice_call).await,
        &json!(1),
        &alice_run,
        Some("alice's only"),
    );
    until_stderr(&gateway, SLEEP_CANCELLED).await;
    let bob = status(&gateway, "bob", &bob_run).await;
    assert_eq!(bob.body["state"], "running", "{}", bob.text);
    assert_eq!(bob.body["cancelled"], false);
    assert!(!bob_call.is_finished());
    assert_eq!(gateway.count_stderr(SLEEP_CANCELLED), 1);

    // bob's bare 1 names only his own run (alice's is not his to see).
    let own = cancel(&gateway, "bob", "1", None).await;
    assert_eq!(
        own.body,
        json!({"status": "cancelled", "requestId": "1", "reason": null})
    );
    assert_cancelled(&join(bob_call).await, &json!(1), &bob_run, None);
    let alice = status(&gateway, "admin", &alice_run).await;
    assert_eq!(
        alice.body["cancel_reason"], "alice's only",
        "{}",
        alice.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_integer_1_and_the_string_1_are_two_runs() {
    let gateway = Gateway::start();
    let number = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 30.0));
    until_stderr_count(&gateway, STARTED, 1).await;
    // Same user, same channel, same id spelled as a string: not a duplicate.
    let string = spawn_rpc(&gateway, "alice", sleep_call(json!("1"), 29.0));
    let stderr = until_stderr_count(&gateway, STARTED, 2).await;
    let number_upstream = started_upstream_ids(&stderr, "30s");
    let string_upstream = started_upstream_ids(&stderr, "29s");
    assert_eq!(
        (number_upstream.len(), string_upstream.len()),
        (1, 1),
        "{stderr}"
    );

    // "1" names both of alice's runs: refused, and neither is touched.
    let ambiguous = cancel(&gateway, "alice", "1", None).await;
    assert_eq!(ambiguous.status, 409, "{}", ambiguous.text);
    assert_eq!(
        status(&gateway, "alice", "1").await.body["other_run_ids"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(gateway.count_stderr(SLEEP_CANCELLED), 0);

    // Spellings of 1 that no JSON-RPC id has name neither run.
    for other in ["01", "+1", "1.0", " 1", "1e0"] {
        let s = status(&gateway, "admin", other).await;
        assert_eq!(s.status, 404, "{other:?} named a run: {}", s.text);
    }

    // Her notification for the string "1" cancels the string one only.
    let note = |id: Value| json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
    assert_eq!(rpc(&gateway, "alice", &note(json!("1"))).await.status, 202);
    let string_reply = join(string).await;
    let response = string_reply.response();
    assert_eq!(response["id"], json!("1"), "{response}");
    assert_eq!(
        response["error"]["data"]["requestId"],
        json!("1"),
        "{response}"
    );
    let string_run = string_reply.run_id.clone().unwrap();
    assert_cancelled(&string_reply, &json!("1"), &string_run, None);
    let stderr = until_stderr(&gateway, SLEEP_CANCELLED).await;
    assert_eq!(cancelled_upstream_ids(&stderr), string_upstream, "{stderr}");
    assert!(!number.is_finished(), "the integer 1 goes on");

    // And the integer 1 by its own notification.
    assert_eq!(rpc(&gateway, "alice", &note(json!(1))).await.status, 202);
    let number_reply = join(number).await;
    let number_run = number_reply.run_id.clone().unwrap();
    assert_ne!(number_run, string_run);
    assert_cancelled(&number_reply, &json!(1), &number_run, None);
    let stderr = until_stderr_count(&gateway, SLEEP_CANCELLED, 2).await;
    let mut both = [number_upstream[0].clone(), string_upstream[0].clone()];
    both.sort();
    let mut cancelled = cancelled_upstream_ids(&stderr);
    cancelled.sort();
    assert_eq!(cancelled, both);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_arrives_first_cancels_the_run_when_it_registers() {
    let gateway = Gateway::start();
    let early = cancel_with(
        &gateway,
        "admin",
        json!({"requestId": "42", "reason": "before you start", "user": "alice"}),
    )
    .await;
    assert_eq!(
        early.body,
        json!({"status": "queued", "requestId": "42", "reason": "before you start"})
    );
    let started = Instant::now();
    let reply = rpc(&gateway, "alice", &sleep_call(json!(42), 30.0)).await;
    assert!(
        started.elapsed() < WAIT,
        "cancelled at once: {:?}",
        started.elapsed()
    );
    let run_id = reply.run_id.clone().expect("Cancelkit-Run-Id");
    assert_cancelled(&reply, &json!(42), &run_id, Some("before you start"));
    let s = status(&gateway, "alice", &run_id).await;
    assert_eq!(s.body["state"], "cancelled", "{}", s.text);
    assert_eq!(s.body["cancel_reason"], "before you start");
    // It never reached the upstream, so nothing was sent there to stop it.
    assert_eq!(gateway.count_stderr(STARTED), 0, "{}", gateway.stderr());
    let metrics = support::client()
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
            "source=\"api\""
        ),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "cancelkit_gateway_upstream_cancels_total",
            "upstream=\"demo\""
        ),
        0.0,
        "no upstream call was cancelled: {metrics}"
    );
    // The tombstone is spent: the next call with that id runs.
    let next = rpc(&gateway, "alice", &echo_call(json!(42), "runs")).await;
    assert_eq!(
        next.body["result"]["content"][0]["text"], "runs",
        "{}",
        next.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_arrives_first_expires_after_its_ttl() {
    let gateway = Gateway::with(Options {
        config: config("[cancellation]\ntombstone_ttl = \"1s\"\n"),
        ..Options::default()
    });
    let early = cancel_with(
        &gateway,
        "admin",
        json!({"requestId": "43", "user": "alice"}),
    )
    .await;
    assert_eq!(early.body["status"], "queued", "{}", early.text);
    let left = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(left.elapsed() >= Duration::from_millis(1500));
    let reply = rpc(
        &gateway,
        "alice",
        &echo_call(json!(43), "too late to cancel"),
    )
    .await;
    assert_eq!(
        reply.body["result"]["content"][0]["text"], "too late to cancel",
        "{}",
        reply.text
    );
    // Within its ttl it does apply (the same gateway, another id).
    assert_eq!(
        cancel_with(
            &gateway,
            "admin",
            json!({"requestId": "44", "user": "alice"})
        )
        .await
        .body["status"],
        "queued"
    );
    let reply = rpc(&gateway, "alice", &echo_call(json!(44), "x")).await;
    assert_eq!(reply.response()["error"]["code"], -32800, "{}", reply.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_cannot_leave_a_cancel_for_another_users_run() {
    let gateway = Gateway::start();
    // Queued (seed 004), for a run of alice's own only.
    let queued = cancel(&gateway, "alice", "77", Some("sabotage")).await;
    assert_eq!(queued.body["status"], "queued", "{}", queued.text);
    let reply = rpc(&gateway, "bob", &echo_call(json!(77), "untouched")).await;
    assert_eq!(
        reply.body["result"]["content"][0]["text"], "untouched",
        "{}",
        reply.text
    );
    let s = status(&gateway, "bob", "77").await;
    assert_eq!(s.body["state"], "completed");
    assert_eq!(s.body["cancelled"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_its_own_upstream_call_and_no_other() {
    let gateway = Gateway::start();
    let long = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 30.0));
    let short = spawn_rpc(&gateway, "alice", sleep_call(json!(2), 1.5));
    let stderr = until_stderr_count(&gateway, STARTED, 2).await;
    let long_upstream = started_upstream_ids(&stderr, "30s");
    let short_upstream = started_upstream_ids(&stderr, "1.5s");
    assert_eq!(
        (long_upstream.len(), short_upstream.len()),
        (1, 1),
        "{stderr}"
    );
    assert_ne!(long_upstream, short_upstream);

    let run_id = run_id_of(&gateway, "alice", "1").await;
    let c = cancel(&gateway, "alice", "1", Some("just the long one")).await;
    assert_eq!(c.body["status"], "cancelled", "{}", c.text);
    assert_cancelled(
        &join(long).await,
        &json!(1),
        &run_id,
        Some("just the long one"),
    );
    let stderr = until_stderr(&gateway, SLEEP_CANCELLED).await;
    assert_eq!(cancelled_upstream_ids(&stderr), long_upstream, "{stderr}");

    let done = join(short).await;
    assert_eq!(done.status, 200);
    assert_eq!(
        done.body["result"]["content"][0]["text"], "slept 1.5s",
        "{}",
        done.text
    );
    assert_eq!(
        gateway.count_stderr(SLEEP_CANCELLED),
        1,
        "{}",
        gateway.stderr()
    );
    let s = status(&gateway, "alice", "2").await;
    assert_eq!(s.body["state"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_on_a_2025_11_25_mcp_session_is_a_run_the_api_cancels() {
    let gateway = Gateway::start();
    let session = mcp_session(&gateway, "alice").await;
    // A completed call names its run.
    let echo = mcp_post(
        &gateway,
        "alice",
        Some(&session),
        &echo_call(json!(8), "over mcp"),
    )
    .await;
    assert_eq!(echo.status, 200, "{}", echo.text);
    let result = echo.response();
    assert_eq!(
        result["result"]["content"][0]["text"], "over mcp",
        "{result}"
    );
    let echo_run = result["result"]["_meta"]["io.cancelkit/runId"]
        .as_str()
        .expect("a run id in _meta")
        .to_owned();
    assert_eq!(
        status(&gateway, "alice", &echo_run).await.body["state"],
        "completed"
    );

    let call = spawn_mcp(
        &gateway,
        "alice",
        Some(&session),
        sleep_call(json!(9), 30.0),
    );
    until_stderr(&gateway, STARTED).await;
    let run_id = run_id_of(&gateway, "alice", "9").await;
    let s = status(&gateway, "admin", &run_id).await;
    assert_eq!(s.body["state"], "running");
    assert_eq!(s.body["name"], "demo-sleep");
    let c = cancel(&gateway, "admin", &run_id, Some("from the api")).await;
    assert_eq!(c.body["status"], "cancelled", "{}", c.text);
    let reply = join(call).await;
    assert_cancelled(&reply, &json!(9), &run_id, Some("from the api"));
    until_stderr(&gateway, SLEEP_CANCELLED).await;
    assert_eq!(
        status(&gateway, "alice", "9").await.body["state"],
        "cancelled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_stamped_call_is_a_run_the_api_cancels() {
    let gateway = Gateway::start();
    let echo = mcp_post(
        &gateway,
        "alice",
        None,
        &stamped(echo_call(json!(8), "stamped"), "2026-07-28"),
    )
    .await;
    assert_eq!(echo.status, 200, "{}", echo.text);
    let result = echo.response();
    assert_eq!(
        result["result"]["content"][0]["text"], "stamped",
        "{result}"
    );
    assert!(
        result["result"]["_meta"]["io.cancelkit/runId"].is_string(),
        "{result}"
    );

    let call = spawn_mcp(
        &gateway,
        "alice",
        None,
        stamped(sleep_call(json!("s-1"), 30.0), "2026-07-28"),
    );
    until_stderr(&gateway, STARTED).await;
    let run_id = run_id_of(&gateway, "alice", "s-1").await;
    let c = cancel(&gateway, "admin", "s-1", Some("stop the stream")).await;
    assert_eq!(c.body["status"], "cancelled", "{}", c.text);
    let reply = join(call).await;
    assert_cancelled(&reply, &json!("s-1"), &run_id, Some("stop the stream"));
    until_stderr(&gateway, SLEEP_CANCELLED).await;
    let s = status(&gateway, "admin", &run_id).await;
    assert_eq!(s.body["state"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_runs_status_stays_and_never_names_its_owner() {
    let gateway = Gateway::start();
    let done = rpc(&gateway, "alice", &echo_call(json!("done"), "x")).await;
    let done_run = done.run_id.unwrap();
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!("sleeping"), 30.0));
    until_stderr(&gateway, STARTED).await;
    let cancelled_run = run_id_of(&gateway, "alice", "sleeping").await;
    cancel(&gateway, "admin", &cancelled_run, None).await;
    join(call).await;

    for (run, state) in [(&done_run, "completed"), (&cancelled_run, "cancelled")] {
        for user in ["admin", "alice"] {
            let s = status(&gateway, user, run).await;
            assert_eq!(s.status, 200, "{}", s.text);
            assert_eq!(s.body["state"], state);
            assert!(!s.text.contains("alice"), "{}", s.text);
            assert!(
                !s.text.contains("owner") && !s.text.contains("sub"),
                "{}",
                s.text
            );
        }
    }
}
