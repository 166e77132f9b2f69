//! The MCP cancellation scenarios of `cancelkit check mcp`, each yielding one or more checks with
//! a stable id. A calibration ([`super::calibrate`]) comes first; every scenario that needs a
//! slow call starts from a quiet server ([`Session::quiesce`]) and judges only what it observed:
//! a call answered before its cancel could be sent is not counted, and a check none of whose
//! trials held is `n/a` with the reason.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use cancelkit_wire::McpRevision;
use serde_json::{Value, json};

use super::session::Session;
use super::watch::{self, ProgressWatch};
use super::{Check, Evidence, Options, Outcome, Report, Unreachable, Word, check, pass_if};
use super::{calibrate, concurrent, subscriptions, tasks};

/// Every published revision.
pub(super) const ALL: &[&str] = &McpRevision::VERSIONS;
/// The revisions with the `initialize` handshake (all but the newest).
const LEGACY: &[&str] = McpRevision::VERSIONS.split_at(1).1;

pub(super) const NO_RESPONSE: &str = "MCP cancellation: the receiver should stop the work and send no response for the cancelled request";
pub(super) const ANSWERED: &str = "JSON-RPC 2.0: the server must reply to every request";
const NOT_ANSWERED: &str =
    "JSON-RPC 2.0: the server must not reply to a notification; MCP: invalid cancels are ignored";
const PROGRESS_STOPS: &str = "MCP cancellation: the receiver should stop processing the cancelled request; MCP progress: notifications reference only in-progress operations, and stop when the operation ends";

/// The check a cancelled call's answer counts against, wherever it was cancelled.
pub(super) const NO_RESPONSE_ID: &str = "mcp.cancel.no_response";
const PROGRESS_ID: &str = "mcp.cancel.progress_stops";

/// How long a cancelled call is watched for a response that must not come (2026-07-28 over
/// HTTP: once its stream is closed nothing more can come).
pub(super) const QUIET: Duration = Duration::from_secs(1);
/// How long an ignored cancel is watched for a reply before the liveness check.
const IGNORE_QUIET: Duration = Duration::from_millis(300);
/// How often a scenario tries again when its slow call was answered before the cancel.
pub(super) const TRIALS: usize = 3;

/// Starts the server, calibrates, runs every scenario, watches to the end, and reports.
pub async fn run(options: &Options, command: &[OsString]) -> Result<Report, Unreachable> {
    let mut s = Session::open(options, command).await?;
    let calibration = calibrate::run(&mut s).await?;
    let slow_call = json!({
        "tool": options.tool,
        "arguments": options.args,
        "calibration": calibration.describe(),
    });
    s.calibration = Some(calibration);
    let mut checks = Vec::new();
    let mut progress = Vec::new();
    in_flight(&mut s, &mut checks, &mut progress).await;
    ignored(&mut s, &mut checks).await;
    concurrent::id_types(&mut s, &mut checks).await;
    concurrent::parallel(&mut s, &mut checks).await;
    concurrent::responsiveness(&mut s, &mut checks).await;
    tasks::run(&mut s, &mut checks).await;
    let listens = subscriptions::listen(&mut s, &mut checks).await;
    // Every cancelled call and every kept one, until the run ends; progress after a cancel.
    watch::sweep(&mut s, &mut checks).await;
    watch::judge_progress(&s, &progress, &mut checks);
    // Judged last: every notifications/cancelled the server sent during the whole run.
    subscriptions::server_cancels(&s, &listens, &mut checks);
    let verdict = Report::decide(&checks, options.musts_only);
    let report = Report {
        target: "mcp",
        command: command.iter().map(|a| a.to_string_lossy().into()).collect(),
        url: options.url.clone(),
        revision: s.version.clone(),
        negotiated_by: s.by.into(),
        slow_call,
        fast_call: json!({"method": s.fast().0, "params": s.fast().1}),
        agent: None,
        verdict,
        musts_only: options.musts_only,
        checks,
    };
    s.client.shutdown().await;
    Ok(report)
}

/// `n/a` checks for a scenario that needs a slow call there is not.
pub(super) fn not_applicable(
    checks: &mut Vec<Check>,
    list: &[(&'static str, Word, &'static str)],
    why: &str,
) {
    super::not_applicable(checks, ALL, list, why);
}

/// Scenario 1: a cancelled in-flight call gets no response, its progress stops, and the server
/// keeps serving. The call is watched until the run ends; its progress is judged then.
async fn in_flight(s: &mut Session, checks: &mut Vec<Check>, progress: &mut Vec<ProgressWatch>) {
    let list = [
        (NO_RESPONSE_ID, Word::Should, NO_RESPONSE),
        (PROGRESS_ID, Word::Should, PROGRESS_STOPS),
        ("mcp.cancel.keeps_serving", Word::Must, ANSWERED),
    ];
    let m = match s.usable() {
        Ok(m) => m,
        Err(why) => return not_applicable(checks, &list, &why),
    };
    let mut ev = Evidence::default();
    let mut held = None;
    for trial in 1..=TRIALS {
        s.quiesce().await;
        let mut call = s.call_slow(&mut ev).await;
        tokio::time::sleep(m.lead()).await;
        if let Some((early, at)) = call.pending.now_timed() {
            ev.got(&early);
            ev.note(format!(
                "trial {trial}: answered {} ms in, before the cancel (calibrated: {} ms)",
                at.saturating_duration_since(call.sent).as_millis(),
                m.duration.as_millis()
            ));
            continue;
        }
        let closed = s
            .cancel(
                json!({"requestId": call.id, "reason": "cancelkit check"}),
                &mut ev,
            )
            .await;
        held = Some((call, Instant::now(), closed));
        break;
    }
    let Some((mut call, cancelled, closed)) = held else {
        let why = format!(
            "in {TRIALS} trials the slow call was answered before the cancel, {} ms in, though \
             it took {} ms when calibrated",
            m.lead().as_millis(),
            m.duration.as_millis()
        );
        return not_applicable(checks, &list[..2], &why);
    };
    let until = if closed {
        Instant::now() + QUIET
    } else {
        call.sent + m.duration + m.slack()
    };
    let (result, detail) = match call.pending.wait_until(until).await {
        Some((frame, at)) => {
            ev.got(&frame);
            let after = at.saturating_duration_since(cancelled).as_millis();
            let what = if frame.get("error").is_some() {
                "an error"
            } else {
                "a result"
            };
            (
                Outcome::Fail,
                format!("the cancelled call was answered with {what}, {after} ms after the cancel"),
            )
        }
        None if closed => (
            Outcome::Pass,
            "the call's response stream was closed (the cancel); nothing came on it".to_owned(),
        ),
        None => (
            Outcome::Pass,
            format!(
                "no response by {} ms after the call (it ends by itself after {} ms; watched until \
                 the run ended)",
                (m.duration + m.slack()).as_millis(),
                m.duration.as_millis()
            ),
        ),
    };
    checks.push(check(
        NO_RESPONSE_ID,
        Word::Should,
        ALL,
        NO_RESPONSE,
        result,
        detail,
        ev,
    ));
    let (token, sent) = (call.token.clone(), call.sent);
    s.watch(NO_RESPONSE_ID, call, false);
    let mut pev = Evidence::default();
    let (result, detail) = match (m.progress, closed) {
        (0, _) => (
            Outcome::NotApplicable,
            "the slow call sent no notifications/progress when calibrated (with a progressToken)"
                .to_owned(),
        ),
        (_, true) => (
            Outcome::NotApplicable,
            "the cancel closed the call's response stream, which carried its progress".to_owned(),
        ),
        (n, false) => {
            pev.note(format!(
                "calibrated: {n} notifications/progress for the uncancelled call"
            ));
            progress.push(ProgressWatch {
                check: PROGRESS_ID,
                token,
                sent,
                cancelled,
                every: m.progress_every,
            });
            (Outcome::Pass, "judged at the end of the run".to_owned())
        }
    };
    checks.push(check(
        PROGRESS_ID,
        Word::Should,
        ALL,
        PROGRESS_STOPS,
        result,
        detail,
        pev,
    ));
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
