//! rmcp client → our server at 2026-07-28: a call cancelled by its handle or by dropping it, and
//! the tasks extension with rmcp as the client.

use std::time::Duration;

use cancelkit::peer::McpRevision;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
    ClientConfig, ClientRequest, CreateTaskResult, GetTaskParams, GetTaskResult, Implementation,
    ProtocolVersion, TASKS_EXTENSION_ID, TaskAckResult, TaskPayload, TaskStatus,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::harness::{CAPABILITIES_KEY, DumpOnPanic, Tap, next, tapped_pipe};
use crate::our_server::our_server;

type RmcpClient<S> = RunningService<RoleClient, S>;

fn discover_mode() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

pub(crate) fn auto_mode() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    }
}

pub(crate) fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap())
}

pub(crate) async fn echo<S: rmcp::Service<RoleClient>>(client: &RmcpClient<S>, text: &str) {
    let answer = client
        .call_tool(call("echo", json!({"text": text})))
        .await
        .expect("echo is answered");
    assert_eq!(answer.content[0].as_text().unwrap().text, text);
}

/// How the rmcp client gives up on a call.
#[derive(Clone, Copy)]
pub(crate) enum RmcpCancel {
    /// `RequestHandle::cancel(reason)`.
    Handle,
    /// Dropping the `call_tool` future (rmcp sends `notifications/cancelled` on drop).
    Drop,
}

/// Starts `slow` through rmcp, cancels it the given way once our handler runs; returns the
/// request id rmcp used.
pub(crate) async fn start_and_cancel_slow<S: rmcp::Service<RoleClient>>(
    client: &RmcpClient<S>,
    tap: &Tap,
    events: &mut mpsc::UnboundedReceiver<&'static str>,
    how: RmcpCancel,
) -> Value {
    match how {
        RmcpCancel::Handle => {
            let handle = client
                .peer()
                .send_request_with_option(
                    ClientRequest::CallToolRequest(CallToolRequest::new(call(
                        "slow",
                        json!({"seconds": 30}),
                    ))),
                    PeerRequestOptions::no_options(),
                )
                .await
                .expect("rmcp sends the call");
            assert_eq!(next(events).await, "started");
            let id = serde_json::to_value(&handle.id).unwrap();
            handle
                .cancel(Some("the user pressed stop".into()))
                .await
                .expect("rmcp sends the cancel");
            id
        }
        RmcpCancel::Drop => {
            let pending = client.call_tool(call("slow", json!({"seconds": 30})));
            tokio::select! {
                outcome = pending => panic!("the slow call finished: {outcome:?}"),
                event = next(events) => assert_eq!(event, "started"),
            }
            tap.wait_for_request(|m| m["params"]["arguments"]["seconds"] == 30)
                .await
        }
    }
}

/// Our handler for `id` was dropped, the cancel is on the wire, nothing answers `id`, the
/// connection still serves, and our server never sent `notifications/cancelled`.
pub(crate) async fn assert_cancelled_without_response<S: rmcp::Service<RoleClient>>(
    client: &RmcpClient<S>,
    tap: &Tap,
    events: &mut mpsc::UnboundedReceiver<&'static str>,
    id: &Value,
) {
    assert_eq!(next(events).await, "stopped", "our handler was dropped");
    assert!(
        tap.to_server()
            .iter()
            .any(|m| m["method"] == "notifications/cancelled" && &m["params"]["requestId"] == id),
        "rmcp sent notifications/cancelled for {id}"
    );
    echo(client, "after the cancel").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        tap.responses_for(id),
        Vec::<Value>::new(),
        "no response for the cancelled call"
    );
    assert_eq!(
        tap.cancels_to_client(),
        Vec::<Value>::new(),
        "a server sends no notifications/cancelled"
    );
}

async fn rmcp_modern_client_against_us(lifecycle: ClientLifecycleMode, how: RmcpCancel) {
    let (client_end, server_end, tap) = tapped_pipe();
    let _wire = DumpOnPanic(tap.clone());
    let (_server, mut events) = our_server(McpRevision::Negotiated, true, server_end);
    let client =
        ().serve_with_lifecycle(tokio::io::split(client_end), lifecycle)
            .await
            .expect("rmcp starts against our server");
    let info = client.peer_info().expect("rmcp knows the server");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("cancelkit-test-server")
    );

    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 2);
    echo(&client, "hello").await;
    // A 2026-07-28 server sends `notifications/cancelled` only to end `subscriptions/listen`:
    // our runtime refuses it to a handler rather than sending it.
    let refused = client
        .call_tool(call("cancel_client", json!({})))
        .await
        .expect("cancel_client is answered");
    let refused = &refused.content[0].as_text().unwrap().text;
    assert!(refused.starts_with("refused"), "{refused}");
    // `slow` is a task tool, but this client did not declare the tasks extension: a plain
    // result.
    let plain = client
        .call_tool(call("slow", json!({"seconds": 0})))
        .await
        .expect("slow without the tasks extension is answered as usual");
    assert_eq!(plain.content[0].as_text().unwrap().text, "slept");
    assert_eq!(next(&mut events).await, "started");
    assert_eq!(next(&mut events).await, "finished");
    for method in ["server/discover", "tools/list", "tools/call"] {
        let answer = tap.response_to(method);
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    }

    let id = start_and_cancel_slow(&client, &tap, &mut events, how).await;
    assert_cancelled_without_response(&client, &tap, &mut events, &id).await;

    assert!(
        !tap.client_methods()
            .iter()
            .any(|m| m == "initialize" || m == "notifications/initialized" || m == "ping"),
        "no handshake at 2026-07-28: {:?}",
        tap.client_methods()
    );
    assert_eq!(tap.client_methods()[0], "server/discover");
    tap.assert_every_request_stamped();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_discover_client_cancelling_with_its_handle_drops_our_handler_unanswered() {
    rmcp_modern_client_against_us(discover_mode(), RmcpCancel::Handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_client_dropping_a_call_drops_our_handler_unanswered() {
    rmcp_modern_client_against_us(auto_mode(), RmcpCancel::Drop).await;
}

// ---------------------------------------------------------------------------------------------
// The tasks extension, rmcp as the client.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_tasks_client_cancels_our_task_tool() {
    let (client_end, server_end, tap) = tapped_pipe();
    let _wire = DumpOnPanic(tap.clone());
    let (_server, mut events) = our_server(McpRevision::Negotiated, true, server_end);
    let config = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("rmcp-tasks-client", "0"),
    );
    let client = config
        .serve_with_lifecycle(tokio::io::split(client_end), discover_mode())
        .await
        .expect("rmcp starts against our server");
    let info = client.peer_info().unwrap();
    assert!(
        info.capabilities
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(TASKS_EXTENSION_ID)),
        "our discover declares the tasks extension: {info:?}"
    );

    let created = match client
        .call_tool_once(call("slow", json!({"seconds": 30})))
        .await
        .expect("tools/call")
    {
        CallToolResponse::Task(created) => created,
        other => panic!("expected a task handle, got {other:?}"),
    };
    assert!(created.result_type.is_task());
    assert_eq!(created.task.status, TaskStatus::Working);
    assert_eq!(next(&mut events).await, "started");
    let task_id = created.task.task_id.clone();

    client
        .cancel_task(CancelTaskParams::new(task_id.clone()))
        .await
        .expect("tasks/cancel is acknowledged");
    assert_eq!(
        next(&mut events).await,
        "stopped",
        "our handler was dropped"
    );
    let got = client
        .get_task(GetTaskParams::new(task_id.clone()))
        .await
        .expect("tasks/get");
    assert_eq!(got.task.status(), TaskStatus::Cancelled);
    assert_eq!(got.task.task.task_id, task_id);
    // Cancelling a task that already ended is acknowledged too (cooperative, eventually
    // consistent), not an error as in 2025-11-25.
    client
        .cancel_task(CancelTaskParams::new(task_id.clone()))
        .await
        .expect("a second tasks/cancel is acknowledged");

    // The same answers, read from the wire with rmcp's own types.
    let created_wire = tap.response_to("tools/call")["result"].clone();
    assert_eq!(created_wire["resultType"], "task");
    assert!(created_wire.get("ttlMs").is_some(), "{created_wire}");
    let parsed: CreateTaskResult = serde_json::from_value(created_wire).unwrap();
    assert_eq!(parsed.task.task_id, task_id);
    let ack_wire = tap.response_to("tasks/cancel")["result"].clone();
    assert_eq!(ack_wire["resultType"], "complete", "{ack_wire}");
    let _: TaskAckResult = serde_json::from_value(ack_wire).unwrap();
    let get_wire = tap.response_to("tasks/get")["result"].clone();
    assert_eq!(get_wire["resultType"], "complete");
    assert_eq!(get_wire["status"], "cancelled");
    let parsed: GetTaskResult = serde_json::from_value(get_wire).unwrap();
    assert_eq!(parsed.task.status(), TaskStatus::Cancelled);

    // A task that runs to its end: `tasks/get` carries the tool's result inline, which rmcp
    // reads as `TaskPayload::Completed`.
    let CallToolResponse::Task(quick) = client
        .call_tool_once(call("slow", json!({"seconds": 0})))
        .await
        .expect("tools/call")
    else {
        panic!("expected a task handle");
    };
    assert_eq!(next(&mut events).await, "started");
    assert_eq!(next(&mut events).await, "finished");
    let mut polled = None;
    for _ in 0..100 {
        let got = client
            .get_task(GetTaskParams::new(quick.task.task_id.clone()))
            .await
            .expect("tasks/get");
        if got.task.status().is_terminal() {
            polled = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let polled = polled.expect("the quick task ends");
    match &polled.task.payload {
        TaskPayload::Completed { result } => {
            assert_eq!(result["content"][0]["text"], "slept", "{result:?}");
        }
        other => panic!("expected a completed task, got {other:?}"),
    }

    // Every request declared the extension in its own `_meta`; nobody sent a cancel
    // notification for the task (tasks are cancelled with `tasks/cancel`).
    tap.assert_every_request_stamped();
    for request in tap.requests() {
        assert!(
            request["params"]["_meta"][CAPABILITIES_KEY]["extensions"]
                .get(TASKS_EXTENSION_ID)
                .is_some(),
            "{request}"
        );
    }
    assert!(
        !tap.client_methods()
            .iter()
            .any(|m| m == "notifications/cancelled")
    );
    assert_eq!(tap.cancels_to_client(), Vec::<Value>::new());
    client.cancel().await.unwrap();
}
