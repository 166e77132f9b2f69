//! The MCP cancellation scenarios of `cancelkit check mcp`, each yielding one or more checks with
//! a stable id.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use cancelkit_wire::McpRevision;
use serde_json::{Value, json};

use super::session::Session;
use super::wire::Pending;
use super::{Check, Evidence, Options, Outcome, Report, Unreachable, Word, check, pass_if};
use super::{subscriptions, tasks};

/// Every published revision.
const ALL: &[&str] = &McpRevision::VERSIONS;
/// The revisions with the `initialize` handshake (all but the newest).
const LEGACY: &[&str] = McpRevision::VERSIONS.split_at(1).1;

pub(super) const NO_RESPONSE: &str = "MCP cancellation: the receiver should stop the work and send no response for the cancelled request";
pub(super) const ANSWERED: &str = "JSON-RPC 2.0: the server must reply to every request";
const NOT_ANSWERED: &str =
    "JSON-RPC 2.0: the server must not reply to a notification; MCP: invalid cancels are ignored";

/// How long a cancel is given to land before the slow call it names is expected in flight.
pub(super) const SETTLE: Duration = Duration::from_millis(100);
/// How long a cancelled call is watched for a response that must not come.
pub(super) const QUIET: Duration = Duration::from_secs(1);
/// How long an ignored cancel is watched for a reply before the liveness check.
const IGNORE_QUIET: Duration = Duration::from_millis(300);
/// The slow call's `seconds` in the scenarios that run many of them.
const SHORT_SECONDS: f64 = 1.0;
/// The calls of the parallel scenario; every second one is cancelled.
const PARALLEL: usize = 100;
/// The repeats of the responsiveness scenario.
const REPEATS: usize = 20;

/// Starts the server, runs every scenario, and reports.
pub async fn run(options: &Options, command: &[OsString]) -> Result<Report, Unreachable> {
    let mut s = Session::open(options, command).await?;
    let mut checks = Vec::new();
    let cancelled = in_flight(&mut s, &mut checks).await;
    ignored(&mut s, &mut checks).await;
    id_types(&mut s, &mut checks).await;
    parallel(&mut s, &mut checks).await;
    responsiveness(&mut s, &mut checks).await;
    tasks::run(&mut s, &mut checks).await;
    let listens = subscriptions::listen(&mut s, &mut checks).await;
    // The first scenario's cancelled call may have been answered late, while the others ran.
    if let Some((at, mut pending)) = cancelled
        && let Some(frame) = pending.now()
    {
        let late = &mut checks[at];
        late.result = Outcome::Fail;
        late.detail = "the cancelled call was answered later, while other scenarios ran".into();
        late.evidence
            .push(format!("<- {}", super::cut(&frame.to_string())));
    }
    // Judged last: every notifications/cancelled the server sent during the whole run.
    subscriptions::server_cancels(&s, &listens, &mut checks);
    let verdict = Report::decide(&checks, options.musts_only);
    let report = Report {
        target: "mcp",
        command: command.iter().map(|a| a.to_string_lossy().into()).collect(),
        url: options.url.clone(),
        revision: s.version.clone(),
        negotiated_by: s.by.into(),
        slow_call: s.slow(None),
        fast_call: json!({"method": s.fast().0, "params": s.fast().1}),
        agent: None,
        verdict,
        musts_only: options.musts_only,
        checks,
    };
    s.client.shutdown().await;
    Ok(report)
}

/// Scenario 1: a cancelled in-flight call gets no response, and the server keeps serving. Returns
/// the index of the no-response check and the call, to look again for a late answer at the end.
async fn in_flight(s: &mut Session, checks: &mut Vec<Check>) -> Option<(usize, Pending)> {
    let mut ev = Evidence::default();
    let (id, mut slow) = s.call("tools/call", s.slow(None), &mut ev).await;
    tokio::time::sleep(SETTLE).await;
    let (result, detail, keep) = if let Some(early) = slow.now() {
        ev.got(&early);
        let detail = "the slow call was answered before the cancel: give a slower --args";
        (Outcome::NotApplicable, detail.to_owned(), None)
    } else {
        let reason = json!({"requestId": id, "reason": "cancelkit check"});
        s.cancel(reason, &mut ev).await;
        match slow.wait(QUIET).await {
            Some(frame) => {
                ev.got(&frame);
                let detail = "the cancelled call was answered";
                (Outcome::Fail, detail.to_owned(), None)
            }
            None => {
                let detail = format!("no response within {QUIET:?} of the cancel");
                (Outcome::Pass, detail, Some(slow))
            }
        }
    };
    checks.push(check(
        "mcp.cancel.no_response",
        Word::Should,
        ALL,
        NO_RESPONSE,
        result,
        detail,
        ev,
    ));
    let at = checks.len() - 1;
    let mut ev = Evidence::default();
    let alive = s.alive(&mut ev).await;
    let detail = match &alive {
        Ok(()) if s.legacy => "a ping and the fast call were answered after the cancel".into(),
        Ok(()) => "the fast call was answered after the cancel (2026-07-28 has no ping)".into(),
        Err(why) => why.clone(),
    };
    checks.push(check(
        "mcp.cancel.keeps_serving",
        Word::Must,
        ALL,
        ANSWERED,
        pass_if(alive.is_ok()),
        detail,
        ev,
    ));
    keep.map(|pending| (at, pending))
}

/// Scenario 2: cancels for an unknown id, a completed request, `initialize` (legacy eras) and
/// malformed cancels are ignored: no reply of any kind, and the server still answers.
async fn ignored(s: &mut Session, checks: &mut Vec<Check>) {
    let mut ev = Evidence::default();
    let (done, mut pending) = s.call(s.fast().0, s.fast().1, &mut ev).await;
    let completed = match pending.wait(s.options.timeout).await {
        Some(frame) => {
            ev.got(&frame);
            vec![json!({"requestId": done})]
        }
        None => vec![],
    };
    let unknown = vec![json!({"requestId": "cancelkit-check-never-sent"})];
    let initialize = s
        .init_id
        .iter()
        .map(|id| json!({"requestId": id}))
        .collect();
    let malformed = vec![
        json!({}),
        json!({"requestId": {}}),
        json!({"requestId": true}),
    ];
    let cases: [(&'static str, &'static [&'static str], Vec<Value>, Evidence); 4] = [
        ("mcp.cancel.unknown_id", ALL, unknown, Evidence::default()),
        ("mcp.cancel.completed_id", ALL, completed, ev),
        (
            "mcp.cancel.initialize_id",
            LEGACY,
            initialize,
            Evidence::default(),
        ),
        ("mcp.cancel.malformed", ALL, malformed, Evidence::default()),
    ];
    for (id, revisions, cancels, mut ev) in cases {
        if cancels.is_empty() {
            let why = if id == "mcp.cancel.initialize_id" {
                format!("{} has no initialize", s.version)
            } else {
                "the request to cancel was never answered".into()
            };
            checks.push(check(
                id,
                Word::Must,
                revisions,
                NOT_ANSWERED,
                Outcome::NotApplicable,
                why,
                ev,
            ));
            continue;
        }
        s.client.others();
        for params in cancels {
            s.cancel(params, &mut ev).await;
        }
        tokio::time::sleep(IGNORE_QUIET).await;
        let alive = s.alive(&mut ev).await;
        let replies: Vec<Value> = s
            .client
            .others()
            .into_iter()
            .filter(|f| f.get("method").is_none())
            .collect();
        replies.iter().for_each(|f| ev.got(f));
        let detail = match (&alive, replies.len()) {
            (_, n @ 1..) => format!("{n} reply frame(s) to the cancel"),
            (Ok(()), _) => "ignored: no reply, and the server still answers".to_owned(),
            (Err(why), _) => why.clone(),
        };
        let ok = alive.is_ok() && replies.is_empty();
        checks.push(check(
            id,
            Word::Must,
            revisions,
            NOT_ANSWERED,
            pass_if(ok),
            detail,
            ev,
        ));
    }
}

/// Scenario 3: ids `1` and `"1"` are different requests: cancelling `"1"` leaves `1` alone.
async fn id_types(s: &mut Session, checks: &mut Vec<Check>) {
    let mut ev = Evidence::default();
    let params = s.slow(Some(SHORT_SECONDS));
    let mut number = s
        .call_as(json!(1), "tools/call", params.clone(), &mut ev)
        .await;
    let mut string = s.call_as(json!("1"), "tools/call", params, &mut ev).await;
    tokio::time::sleep(SETTLE).await;
    s.cancel(
        json!({"requestId": "1", "reason": "cancelkit check"}),
        &mut ev,
    )
    .await;
    let wait = s.options.timeout + s.slow_duration(Some(SHORT_SECONDS));
    let answered = number.wait(wait).await;
    if let Some(frame) = &answered {
        ev.got(frame);
    }
    let other = string.wait(SETTLE * 3).await;
    if let Some(frame) = &other {
        ev.got(frame);
    }
    let silent = match other {
        Some(_) => "; \"1\" was answered too (see mcp.cancel.no_response)",
        None => "; \"1\" got no response",
    };
    let detail = match answered {
        Some(_) => format!("id 1 answered after \"1\" was cancelled{silent}"),
        None => format!("id 1 got no answer after \"1\" was cancelled{silent}"),
    };
    checks.push(check(
        "mcp.cancel.id_types",
        Word::Must,
        ALL,
        ANSWERED,
        pass_if(answered.is_some()),
        detail,
        ev,
    ));
}

/// Scenario 4: 100 slow calls in parallel, every second one cancelled: exactly the others are
/// answered.
async fn parallel(s: &mut Session, checks: &mut Vec<Check>) {
    // Only the first call and cancel are quoted: the rest are alike.
    let (mut ev, mut alike) = (Evidence::default(), Evidence::default());
    let params = s.slow(Some(SHORT_SECONDS));
    let mut calls = Vec::with_capacity(PARALLEL);
    for n in 0..PARALLEL {
        let quoted = if n == 0 { &mut ev } else { &mut alike };
        calls.push(s.call("tools/call", params.clone(), quoted).await);
    }
    tokio::time::sleep(SETTLE).await;
    for (n, (id, _)) in calls.iter().enumerate().step_by(2) {
        let quoted = if n == 0 { &mut ev } else { &mut alike };
        s.cancel(json!({"requestId": id}), quoted).await;
    }
    ev.note(format!(
        "{PARALLEL} such calls, ids {} to {}; every second one cancelled, from the first",
        calls[0].0,
        calls[PARALLEL - 1].0
    ));
    let deadline = Instant::now() + s.options.timeout + s.slow_duration(Some(SHORT_SECONDS));
    let mut kept_answered = 0;
    for (_, pending) in calls.iter_mut().skip(1).step_by(2) {
        let left = deadline.saturating_duration_since(Instant::now());
        kept_answered += usize::from(pending.wait(left).await.is_some());
    }
    tokio::time::sleep(SETTLE * 3).await;
    let mut cancelled_answered = 0;
    for (_, pending) in calls.iter_mut().step_by(2) {
        if let Some(frame) = pending.now() {
            cancelled_answered += 1;
            ev.got(&frame);
        }
    }
    let half = PARALLEL / 2;
    checks.push(check(
        "mcp.cancel.parallel.others_answered",
        Word::Must,
        ALL,
        ANSWERED,
        pass_if(kept_answered == half),
        format!("{kept_answered} of the {half} calls not cancelled were answered"),
        ev.clone(),
    ));
    checks.push(check(
        "mcp.cancel.parallel.cancelled_silent",
        Word::Should,
        ALL,
        NO_RESPONSE,
        pass_if(cancelled_answered == 0),
        format!("{cancelled_answered} of the {half} cancelled calls were answered"),
        ev,
    ));
}

/// Scenario 5: responsiveness: the time from a cancel to the answer of the next fast request.
async fn responsiveness(s: &mut Session, checks: &mut Vec<Check>) {
    let mut ev = Evidence::default();
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let (id, _slow) = s
            .call("tools/call", s.slow(Some(SHORT_SECONDS)), &mut ev)
            .await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        s.cancel(json!({"requestId": id}), &mut ev).await;
        let start = Instant::now();
        if s.fast_call(&mut ev).await.is_some() {
            times.push(start.elapsed());
        }
    }
    times.sort();
    let ms = |d: Option<&Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
    let p50 = ms(times.get(times.len() / 2));
    let p99 = ms(times.get((times.len() * 99).div_ceil(100).saturating_sub(1)));
    let mut done = check(
        "mcp.cancel.responsiveness",
        Word::Must,
        ALL,
        ANSWERED,
        pass_if(times.len() == REPEATS),
        format!(
            "{} of {REPEATS} fast calls answered after a cancel: p50 {p50:.1} ms, p99 {p99:.1} ms",
            times.len()
        ),
        ev,
    );
    done.metrics = Some(json!({
        "repeats": REPEATS,
        "answered": times.len(),
        "p50_ms": if times.is_empty() { Value::Null } else { json!(p50) },
        "p99_ms": if times.is_empty() { Value::Null } else { json!(p99) },
    }));
    checks.push(done);
}
