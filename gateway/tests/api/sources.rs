//! The other causes of a cancel (a disconnect, the caller's own notification, the tool
//! timeout), `/metrics` by source, and the retention of finished runs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::gateway_with;
use crate::support::http::{
    SLEEP_CANCELLED, WAIT, assert_cancelled, cancel, echo_call, eventually, join, metric, rpc,
    run_id_of, sleep_call, spawn_rpc, status, until_stderr, until_stderr_count,
};
use crate::support::{Gateway, client, token};

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
    assert_eq!(status(&gateway, "alice", "1").await.status, 404);
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
