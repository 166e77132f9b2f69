//! 2025-11-25 via `initialize()`: the SDK's `notifications/cancelled` in a session (and its
//! resumption of the cancelled call's stream), and the server cancelling its own
//! `sampling/createMessage`.

use serde_json::{Value, json};

use crate::harness::{Report, assert_client_cancel_honoured, assert_quiet, reported, run};

/// c. 2025-11-25 via `initialize()`: a session, and the cancel is the SDK's
/// `notifications/cancelled`, POSTed in it. The SDK resumes the cancelled call's stream (it
/// ended without a response, after an event with an id): told it has ended (405), it gives up,
/// logging nothing at WARNING or above, and the session serves the next call. A call answered
/// with a JSON-RPC error, also on its event stream, is one the SDK does not resume.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn c_initialize_2025_11_25_notifications_cancelled_stops_the_tool_without_a_response() {
    let report = run("initialize");
    let all = report.lines();
    let exchanges = report.exchanges();

    // initialize opened the session: no session header on it, one on its answer.
    let initialize = report.posts("initialize");
    assert_eq!(initialize.len(), 1, "{all}");
    assert_eq!(
        initialize[0]["body"]["params"]["protocolVersion"],
        "2025-11-25"
    );
    assert!(
        initialize[0]["headers"].get("mcp-session-id").is_none(),
        "{all}"
    );
    assert_eq!(
        initialize[0]["json"]["result"]["protocolVersion"],
        "2025-11-25"
    );
    let session = initialize[0]["responseHeaders"]["mcp-session-id"]
        .as_str()
        .unwrap_or_else(|| panic!("initialize was answered without Mcp-Session-Id:\n{all}"));
    assert!(!session.is_empty(), "{all}");

    // Everything after it names the session and the revision.
    for exchange in &exchanges[1..] {
        assert_eq!(exchange["headers"]["mcp-session-id"], session, "{exchange}");
        assert_eq!(
            exchange["headers"]["mcp-protocol-version"], "2025-11-25",
            "{exchange}"
        );
    }
    // The SDK opened the session's GET stream after notifications/initialized (202).
    assert_eq!(report.posts("notifications/initialized")[0]["status"], 202);
    // (Any other GET is a reconnection, which the tests account for.)
    let get = report.session_stream().expect("the session's GET stream");
    assert_eq!(get["status"], 200, "{all}");
    assert_eq!(get["responseHeaders"]["content-type"], "text/event-stream");

    // The SDK POSTed notifications/cancelled for the sleep, in the session; it was accepted.
    let id = &report.event("sleep")["requestId"];
    let cancels = report.posts("notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{all}");
    assert_eq!(cancels[0]["body"]["params"]["requestId"], *id, "{all}");
    assert_eq!(cancels[0]["status"], 202, "{all}");
    let reason = cancels[0]["body"]["params"]["reason"]
        .as_str()
        .expect("a reason")
        .to_owned();

    let line = assert_client_cancel_honoured(&report, "2025-11-25", &reason);
    assert!(
        line.contains(&format!("sleep tool stopped request_id={id} ")),
        "{line}"
    );
    assert!(
        report.server_log.contains(&format!(
            "the peer cancelled a request request_id={id} reason={}",
            json!(reason)
        )),
        "{all}"
    );

    // The server ended the sleep's stream itself, without a response, after the cancel.
    let post = report.tool_post("sleep");
    assert_eq!(post["end"], "eof", "{all}");
    let ended = post["endMs"].as_f64().expect("endMs");
    let cancelled = cancels[0]["ms"].as_f64().expect("ms");
    assert!(
        ended >= cancelled,
        "the stream ended before the cancel:\n{all}"
    );

    // The SDK resumed the stream about 1 s after it ended and, that failing, 1 s later (and for
    // ever, about once a second, if it got a stream that ended again); each resumption was told
    // the stream has ended, which the SDK logs at DEBUG only.
    assert_quiet(&report);
    let reported = reported(&report);

    // The unknown tool's call was answered with a JSON-RPC error, on its event stream; the SDK
    // took it as the response (if it resumed the stream, that too was told it has ended).
    let unknown = report.event("unknown_tool");
    assert_eq!(unknown["state"], "error", "{all}");
    assert_eq!(unknown["code"], -32602, "{all}");
    let errored = report.tool_post("no_such_tool");
    assert_eq!(
        errored["responseHeaders"]["content-type"], "text/event-stream",
        "{all}"
    );
    let answer = errored["events"].as_array().expect("an SSE answer").last();
    assert_eq!(
        answer.map(|e| &e["data"]["id"]),
        Some(&errored["body"]["id"]),
        "{all}"
    );
    let resumed = report.assert_resumptions_told_ended(
        &[
            (post, "cancelled call's", 1..=2),
            (errored, "error-answered call's", 0..=2),
        ],
        &reported,
    );
    // The session served the next call after the resumptions.
    report.assert_served_after(&resumed.concat());

    // The session ended with the client's DELETE.
    let last = exchanges.last().expect("exchanges");
    assert_eq!(last["method"], "DELETE", "{all}");
    assert_eq!(last["status"], 200, "{all}");
}

/// d. 2025-11-25: the server gives up on the `sampling/createMessage` it sent; its
/// `notifications/cancelled`, on the stream that carried the request, interrupts the Python
/// sampling callback (which would sleep 30 s), the client answers nothing for it, and the tool
/// result arrives.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn d_server_cancelling_its_sampling_request_interrupts_the_python_callback() {
    let report = run("server_cancels");
    let all = report.lines();
    assert_eq!(
        report.event("connected")["protocolVersion"],
        "2025-11-25",
        "{all}"
    );

    let asked = report.received_method("sampling/createMessage");
    assert_eq!(asked.len(), 1, "{all}");
    let id = &asked[0]["id"];

    // The server gave up after timeout_ms and told the client, naming its request, on the
    // stream its request went on (the session's GET stream, or the tool call's), after it.
    let cancels = report.received_method("notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{all}");
    assert_eq!(cancels[0]["params"]["requestId"], *id, "{all}");
    let carrier = report
        .exchanges()
        .iter()
        .find(|e| {
            e["events"]
                .as_array()
                .is_some_and(|events| events.iter().any(|ev| ev["data"] == *asked[0]))
        })
        .expect("the stream that carried sampling/createMessage");
    let datas: Vec<_> = carrier["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["data"])
        .collect();
    let at = |m: &Value| datas.iter().position(|d| *d == m);
    assert!(
        at(cancels[0]).is_some_and(|c| at(asked[0]).is_some_and(|a| c > a)),
        "the cancel did not follow the request on its stream:\n{all}"
    );

    // The SDK cancelled the callback's scope: it saw the cancellation about timeout_ms after it
    // started, not its 30 s sleep running out.
    let calls = report.event("sampling_callbacks")["calls"]
        .as_array()
        .expect("calls")
        .clone();
    assert_eq!(calls.len(), 1, "{all}");
    assert_eq!(calls[0]["requestId"], *id, "{all}");
    assert_eq!(calls[0]["state"], "cancelled", "{all}");
    let after = calls[0]["afterMs"].as_f64().unwrap();
    println!("[server_cancels] sampling callback interrupted after {after} ms (timeout_ms 500)");
    assert!((400.0..3_000.0).contains(&after), "{all}");

    // The client POSTed no response for the cancelled request.
    assert_eq!(
        Report::responses(report.sent(), id),
        Vec::<&Value>::new(),
        "{all}"
    );

    // The tool result arrived on the tool call's stream, saying the server gave up.
    let tool = report.event("ask_client");
    assert_eq!(tool["isError"], false, "{all}");
    assert!(
        tool["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("gave up after")),
        "{all}"
    );
    let post = report.tool_post("ask_client");
    let answered = post["events"]
        .as_array()
        .expect("an SSE answer")
        .iter()
        .any(|e| e["data"]["id"] == post["body"]["id"] && e["data"].get("result").is_some());
    assert!(answered, "{all}");
    assert!(
        report
            .server_log
            .contains("gave up on sampling/createMessage; the client was told"),
        "{all}"
    );
    assert_eq!(
        report
            .events_named("echo")
            .into_iter()
            .last()
            .map(|e| &e["text"]),
        Some(&json!("still serving")),
        "{all}"
    );
    // Every stream carried its response: nothing to resume, nothing worth a warning.
    assert_eq!(report.reconnects(), Vec::<&Value>::new(), "{all}");
    assert_quiet(&report);
}
