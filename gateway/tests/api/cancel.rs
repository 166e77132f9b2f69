//! Cancel and status: known, unknown and bare ids, idempotence, reasons, the status body
//! before and after a cancel and after the run ends, and the `/v1` aliases.

use serde_json::{Value, json};

use crate::support::http::{
    SLEEP_CANCELLED, assert_cancelled, cancel, cancel_at, cancel_with, echo_call, join, rpc,
    run_id_of, sleep_call, spawn_rpc, status, status_at, until_stderr,
};
use crate::support::{Gateway, client, token};
use crate::{assert_status_keys, support};

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
async fn unknown_ids_are_404_and_their_cancels_are_queued() {
    let gateway = Gateway::start();
    for who in ["admin", "alice"] {
        let missing = status(&gateway, who, "no-such-run").await;
        assert_eq!(missing.status, 404, "{who}");
        assert_eq!(missing.body, json!({"detail": "Run not found"}));
        let missing_run = status(&gateway, who, "run-0123456789abcdef0123456789abcdef").await;
        assert_eq!(missing_run.status, 404, "{who}");
        assert_eq!(missing_run.body, json!({"detail": "Run not found"}));
    }
    // A cancel that finds no run is queued, by anyone, with or without a reason and a user.
    let unscoped = cancel(&gateway, "admin", "no-such-run", Some("r")).await;
    assert_eq!(
        unscoped.body,
        json!({"status": "queued", "requestId": "no-such-run", "reason": "r"}),
        "{}",
        unscoped.text
    );
    let scoped = cancel_with(
        &gateway,
        "admin",
        json!({"requestId": "no-such-run-2", "reason": "r", "user": "alice"}),
    )
    .await;
    assert_eq!(
        scoped.body,
        json!({"status": "queued", "requestId": "no-such-run-2", "reason": "r"})
    );
    for user in ["alice", "bob"] {
        let c = cancel(&gateway, user, "no-such-run-3", None).await;
        assert_eq!(
            c.body,
            json!({"status": "queued", "requestId": "no-such-run-3", "reason": null}),
            "{user}: {}",
            c.text
        );
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
    let not_bobs = cancel_at(&gateway, "/v1", "bob", &run_id, None).await;
    assert_eq!(not_bobs.body["status"], "queued", "{}", not_bobs.text);
    let c = cancel_at(&gateway, "/v1", "alice", &run_id, Some("v1")).await;
    assert_eq!(
        c.body,
        json!({"status": "cancelled", "requestId": run_id, "reason": "v1"})
    );
    assert_cancelled(&join(call).await, &json!(11), &run_id, Some("v1"));
    let after = status_at(&gateway, "/v1", "admin", &run_id).await;
    assert_eq!(after.body["state"], "cancelled");
}
