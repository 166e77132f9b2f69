//! The scenarios every SDK client runs against the gateway through any upstream under test,
//! and what differs between the SDKs (the checks of what crossed the wire are in `wire.rs`).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::resumes::{Cancelled, Resumes, check_resumes};
use super::script::{Report, Script};
use super::upstream::UpstreamUnderTest;
use super::wire::{Quiet, check_wire, now_ms};
use super::{
    cancel, cancels_total, plain, selector, status, upstream_cancels, wait_for_stops,
    wait_for_upstream_cancels,
};
use crate::support::{Gateway, client};

/// The MCP revision a client speaks with the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: a session; `notifications/cancelled` is the cancel, a closed stream is not.
    V2025,
    /// 2026-07-28: no session; closing the request's response stream is the cancel.
    V2026,
}

impl Era {
    /// The revision's name.
    pub fn version(self) -> &'static str {
        match self {
            Era::V2025 => "2025-11-25",
            Era::V2026 => "2026-07-28",
        }
    }
}

/// How the admin's API cancel names the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelBy {
    /// The bare JSON-RPC id the SDK gave the call.
    BareId,
    /// The run id, read from the run's status (looked up by the bare id).
    RunId,
}

/// What differs between the SDKs in the scenarios of [`run_scenarios`].
pub struct Expected {
    /// The revision the client speaks.
    pub era: Era,
    /// The `cancel_reason` of the run the client aborted.
    pub abort_reason: &'static str,
    /// How the client's own aborted call ended, as the script reports it.
    pub abort_outcome: &'static str,
    /// How the API cancel names the run.
    pub cancel_by: CancelBy,
    /// Which streams the SDK resumes after its calls were cancelled (2025-11-25).
    pub resumes: Resumes,
}

/// The scenarios every SDK client runs against the gateway, in the order its script runs them
/// (see tests/python/gateway_client.py and tests/node/gateway_client.mjs): connect, list, echo
/// (the upstream's fast tool), progress (its slow tool, briefly), a client abort, an API cancel,
/// echo again, a burst of aborts, echo once more after the SDK's resumes of the cancelled calls'
/// streams; then what crossed the wire (the resumes too), and what the upstream saw. The
/// script must have been given `upstream.tools()`'s [`super::Tools::script_arg`]. Prints what
/// was observed of each stop.
pub async fn run_scenarios(
    gateway: &Gateway,
    upstream: &dyn UpstreamUnderTest,
    mut script: Script,
    expected: &Expected,
) -> Report {
    let era = expected.era;
    let tools = upstream.tools();
    let name = upstream.name();
    let connected = script.expect("connected").await;
    assert_eq!(
        connected["protocolVersion"],
        era.version(),
        "{}",
        script.transcript()
    );

    let listed = script.expect("list_tools").await;
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        names.contains(&tools.slow.as_str())
            && names.contains(&tools.fast.as_str())
            && names.iter().all(|n| n.starts_with(&format!("{name}-"))),
        "{}",
        script.transcript()
    );

    let echo = script.expect("echo").await;
    assert_eq!(
        echo["text"],
        (tools.fast_text)("hello"),
        "{}",
        script.transcript()
    );
    assert!(
        echo["meta"]["io.cancelkit/runId"]
            .as_str()
            .is_some_and(|r| r.starts_with("run-")),
        "a result names its run: {}",
        script.transcript()
    );

    // Progress from the upstream reaches the SDK's progress callback, in order, then the result.
    let progress = script.expect("progress").await;
    let updates = progress["updates"].as_array().cloned().unwrap_or_default();
    assert!(
        updates.len() >= 2,
        "progress notifications reach the client: {}",
        script.transcript()
    );
    let values: Vec<f64> = updates
        .iter()
        .map(|u| u["progress"].as_f64().unwrap_or(-1.0))
        .collect();
    let total = tools.progress_total;
    assert!(
        values.windows(2).all(|w| w[0] < w[1]) && values.iter().all(|v| *v > 0.0 && *v <= total),
        "{values:?}: {}",
        script.transcript()
    );
    assert!(
        updates.iter().all(|u| u["total"].as_f64() == Some(total)),
        "{updates:?}"
    );
    assert_eq!(
        progress["text"],
        tools.progress_text.as_str(),
        "{}",
        script.transcript()
    );

    // The client aborts a slow call once it runs upstream.
    // Nothing was cancelled before (the gateway is this client's alone, and so is what the
    // upstream reports). Not read here: the script does not wait for the test before its abort,
    // which may already have happened.
    let aborted = script.expect("client_abort").await;
    assert_eq!(
        aborted["outcome"],
        expected.abort_outcome,
        "{}",
        script.transcript()
    );
    assert!(
        aborted["progressBeforeAbort"].as_u64() >= Some(1),
        "{}",
        script.transcript()
    );
    let aborted_id = aborted["requestId"].clone();
    assert!(
        aborted_id.is_number() || aborted_id.is_string(),
        "{}",
        script.transcript()
    );
    let aborted_quiet = Quiet {
        what: "the call the client aborted",
        id: aborted_id.clone(),
        cancelled_at: aborted["abortedAt"].as_f64().expect("abortedAt"),
        acknowledged_at: None,
        progress_seen: aborted["progressTimes"].as_array().map_or(0, Vec::len),
    };
    // ...the gateway cancels it upstream, and the upstream tool stops...
    wait_for_upstream_cancels(gateway, name, 1.0).await;
    wait_for_stops(upstream, gateway, 1, Duration::from_secs(5)).await;
    // ...and the gateway says the run was cancelled, by the client.
    let (code, run) = status(gateway, &selector(&aborted_id)).await;
    assert_eq!(code, 200, "status of the aborted call: {run}");
    assert_eq!(run["cancelled"], true, "{run}");
    assert_eq!(run["state"], "cancelled", "{run}");
    assert_eq!(run["cancel_source"], "client", "{run}");
    assert_eq!(run["name"], tools.slow.as_str(), "{run}");
    assert_eq!(run["cancel_reason"], expected.abort_reason, "{run}");
    let aborted_run = run["run_id"].as_str().expect("run_id").to_owned();
    let log = plain(&gateway.stderr());
    assert!(
        log.contains(&format!(
            "run cancelled run_id=\"{aborted_run}\" source=\"client\""
        )),
        "the gateway logs the run's cancel as the client's:\n{log}"
    );
    assert_eq!(cancels_total(gateway, "client").await, 1.0);
    assert_eq!(cancels_total(gateway, "api").await, 0.0);
    script.go().await;

    // An admin cancels a slow call through the API: the SDK's call fails with -32800.
    let ready = script.expect("api_cancel_ready").await;
    let api_id = ready["requestId"].clone();
    let (code, run) = status(gateway, &selector(&api_id)).await;
    assert_eq!(code, 200, "status of the running call: {run}");
    assert_eq!(run["state"], "running", "{run}");
    assert_eq!(run["cancelled"], false, "{run}");
    let api_run = run["run_id"].as_str().expect("run_id").to_owned();
    let target = match expected.cancel_by {
        CancelBy::BareId => selector(&api_id),
        CancelBy::RunId => api_run.clone(),
    };
    let cancelled_at = now_ms();
    let (code, body) = cancel(gateway, &target, "operator stop").await;
    let answered_at = now_ms();
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], "cancelled", "{body}");
    let cancelled = script.expect("api_cancel").await;
    assert_eq!(cancelled["requestId"], api_id, "{}", script.transcript());
    assert_eq!(cancelled["outcome"], "rejected", "{}", script.transcript());
    let error = &cancelled["error"];
    assert_eq!(error["code"], -32800, "{}", script.transcript());
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("Request cancelled")),
        "{}",
        script.transcript()
    );
    assert_eq!(error["data"]["runId"], api_run.as_str(), "{error}");
    assert_eq!(error["data"]["partial"], false, "{error}");
    assert_eq!(error["data"]["requestId"], api_id, "{error}");
    assert_eq!(error["data"]["reason"], "operator stop", "{error}");
    let api_quiet = Quiet {
        what: "the call the API cancelled",
        id: api_id.clone(),
        cancelled_at,
        acknowledged_at: Some(answered_at),
        progress_seen: cancelled["progressTimes"].as_array().map_or(0, Vec::len),
    };
    wait_for_upstream_cancels(gateway, name, 2.0).await;
    wait_for_stops(upstream, gateway, 2, Duration::from_secs(5)).await;
    let (_, run) = status(gateway, &api_run).await;
    assert_eq!(run["state"], "cancelled", "{run}");
    assert_eq!(run["cancel_source"], "api", "{run}");
    assert_eq!(run["cancel_reason"], "operator stop", "{run}");
    assert_eq!(cancels_total(gateway, "api").await, 1.0);
    assert_eq!(cancels_total(gateway, "client").await, 1.0);
    script.go().await;

    // The client goes on working.
    let echo = script.expect("echo").await;
    assert_eq!(
        echo["text"],
        (tools.fast_text)("still serving"),
        "{}",
        script.transcript()
    );

    // A burst of calls aborted right after they are sent, some cancels racing their calls:
    // every run still ends (none is left running its 30 s), before the client closes (ending a
    // 2025-11-25 session would cancel its runs anyway).
    let burst = script.expect("abort_burst").await;
    assert_eq!(
        burst["outcomes"].get("completed"),
        None,
        "{}",
        script.transcript()
    );
    let burst_ids = burst["ids"].as_array().cloned().unwrap_or_default();
    assert!(!burst_ids.is_empty(), "{}", script.transcript());
    wait_for_no_runs(gateway, Duration::from_secs(5)).await;
    wait_for_idle_upstream(upstream, gateway, Duration::from_secs(5)).await;
    script.go().await;

    // The client still works once it is done resuming the cancelled calls' streams.
    let echo = script.expect("echo").await;
    assert_eq!(
        echo["text"],
        (tools.fast_text)("after the resumes"),
        "{}",
        script.transcript()
    );

    let report = script.finish().await;
    upstream.check_stops(gateway);
    check_wire(&report, era, &aborted_id, &api_id);
    let aborted_progress = aborted_quiet.check(&report);
    let api_progress = api_quiet.check(&report);
    for id in &burst_ids {
        assert_eq!(
            report.responses_to(id),
            Vec::<&Value>::new(),
            "no response for an aborted call\n{}",
            report.transcript
        );
    }
    let cancelled = Cancelled {
        aborted: &aborted_id,
        api: &api_id,
        burst: &burst_ids,
    };
    let resumes = check_resumes(&report, era, expected.resumes, &cancelled);
    println!(
        "[{} at {} through the {}] client abort (run {aborted_run}, cancel_source client, reason \
         {:?}): {aborted_progress}; API cancel (run {api_run}, cancel_source api): \
         {api_progress}; upstream cancels sent (gateway metric): {}; the upstream showed:\n  {}\n  \
         after the cancels: {resumes}",
        script_name(&report),
        era.version(),
        upstream.kind(),
        expected.abort_reason,
        upstream_cancels(gateway, name).await,
        upstream.stops_seen(gateway).join("\n  "),
    );
    report
}

/// `[python gateway_client.py]` → `python gateway_client.py`.
fn script_name(report: &Report) -> &str {
    report
        .transcript
        .strip_prefix('[')
        .and_then(|t| t.split_once(']'))
        .map_or("the client", |(name, _)| name)
}

/// Waits until no run is in flight (`/health`); panics after `within`.
pub async fn wait_for_no_runs(gateway: &Gateway, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let health: Value = client()
            .get(gateway.url("/health"))
            .send()
            .await
            .expect("health request")
            .json()
            .await
            .expect("health body");
        if health["runs_in_flight"] == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "runs still in flight {within:?} after their clients aborted them: {health}\n{}",
            plain(&gateway.stderr())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until no `sleep` runs upstream, where the upstream can tell; panics after `within`.
pub async fn wait_for_idle_upstream(
    upstream: &dyn UpstreamUnderTest,
    gateway: &Gateway,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    while let Some(running) = upstream.sleeps_running() {
        if running == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{running} slow calls still run in the {} {within:?} after their runs ended:\n{}",
            upstream.kind(),
            upstream.log(gateway)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
