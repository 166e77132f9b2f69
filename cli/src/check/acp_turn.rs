//! `acp.session_cancel.*`: `session/cancel` during a running prompt turn. The turn must end
//! with a result whose `stopReason` is `cancelled` (MUST); the `session/update` notifications
//! of its work (message, thought, tool call, plan) should stop (SHOULD, judged from the outside against the uncancelled turn: none later than
//! a grace of 500 ms plus one update interval, none after the answer, watched until the turn's
//! natural end has passed); the agent may cancel its own requests to the client (MAY); and it
//! still answers `session/new`.
//!
//! The client does what ACP asks of it: the agent's requests stay held for a short window in
//! which the agent may cancel them itself, then every one still pending, and any that comes
//! later in the turn, is answered `cancelled`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::acp::{self, AcpOptions, KEEPS_SERVING, QUIET, check, not_applicable};
use super::acp_calibrate::{Turn, is_work};
use super::acp_session::{AcpSession, Answering, Reply};
use super::ms;
use super::watch::grace;
use super::{Check, Evidence, Outcome, Word};

const STOP_REASON: &str = "ACP 1c (session/cancel): the pending session/prompt MUST be answered with a result whose stopReason is \"cancelled\" (schema: StopReason cancelled MUST be returned)";
const UPDATES_STOP: &str = "ACP session/cancel: the agent SHOULD stop all language model requests and tool calls as soon as possible, send any pending session/update, then answer the prompt with stopReason cancelled";
const CASCADE: &str = "ACP 1a: on cancellation the receiver MAY cancel all nested activity; the cascading example of 1c shows the agent sending $/cancel_request for its own outstanding requests, but no MUST/SHOULD asks for it (the client MUST answer pending permission requests with outcome cancelled anyway), so MAY";

/// How long after `session/cancel` the agent may take to cancel its own requests to the client
/// before the client answers them.
const CASCADE_WINDOW: Duration = Duration::from_millis(500);
/// How long after the prompt's answer a `$/cancel_request` of the agent's own may still come.
const AFTER_ANSWER: Duration = Duration::from_millis(100);

/// The checks of the scenario, in order (keeps_serving comes last).
const IDS: [(&str, Word, &str); 3] = [
    ("acp.session_cancel.stop_reason", Word::Must, STOP_REASON),
    (
        "acp.session_cancel.updates_stop",
        Word::Should,
        UPDATES_STOP,
    ),
    ("acp.session_cancel.cascade", Word::May, CASCADE),
];

/// Runs the scenario; returns the session to use next.
pub async fn session_cancel(
    s: &mut AcpSession,
    options: &AcpOptions,
    turn: &Result<Turn, String>,
    session: Option<String>,
    checks: &mut Vec<Check>,
) -> Option<String> {
    let serving = (
        "acp.session_cancel.keeps_serving",
        Word::Must,
        KEEPS_SERVING,
    );
    let (Some(session), Ok(turn)) = (session.clone(), turn) else {
        let why = match turn {
            Err(why) => why.as_str(),
            Ok(_) => "no session to prompt in (session/new was not answered)",
        };
        not_applicable(checks, &IDS, why);
        not_applicable(checks, &[serving], why);
        return session;
    };
    s.cancelled_by_agent.clear();
    let mut ev = Evidence::default();
    let mut run = match acp::start(s, &session, &options.prompt, turn, &mut ev).await {
        Ok(run) => run,
        Err(why) => {
            checks.push(check(
                IDS[0].0,
                IDS[0].1,
                IDS[0].2,
                Outcome::NotApplicable,
                &why,
                ev,
            ));
            not_applicable(checks, &IDS[1..], &why);
            return acp::keeps_serving(s, serving.0, checks).await;
        }
    };
    let asked = s.outstanding.clone();
    s.notify("session/cancel", json!({"sessionId": session}), &mut ev)
        .await;
    let cancelled = Instant::now();
    let mut answer = s
        .wait_until(&mut run.pending, cancelled + CASCADE_WINDOW, &mut ev)
        .await;
    if answer.is_some() {
        // a cancel of the agent's own request may follow its answer closely
        s.idle(AFTER_ANSWER, &mut ev).await;
    }
    let by_agent = s.cancelled_by_agent.clone();
    if !s.outstanding.is_empty() {
        ev.note("the client answers the agent's pending requests as cancelled, as ACP requires after session/cancel");
        s.answer_outstanding(Reply::Cancelled, &mut ev).await;
    }
    s.answering = Answering::Now(Reply::Cancelled);
    if answer.is_none() {
        let last = acp::last_chance(turn, &run, cancelled, options.timeout);
        answer = s.wait_until(&mut run.pending, last, &mut ev).await;
    }
    // updates are watched until the turn's natural end has passed
    let watched = (run.sent + turn.natural + turn.slack())
        .max(answer.as_ref().map_or(cancelled, |(_, at)| *at + QUIET));
    s.idle(watched.saturating_duration_since(Instant::now()), &mut ev)
        .await;
    s.answering = Answering::Hold;
    let stop = judge_stop_reason(answer.as_ref().map(|(f, _)| f), options.timeout, &mut ev);
    let updates = judge_updates(
        s,
        turn,
        &session,
        run.sent,
        cancelled,
        answer.as_ref().map(|(_, at)| *at),
        watched,
    );
    let cascade = judge_cascade(&asked, &by_agent);
    checks.push(check(IDS[0].0, IDS[0].1, IDS[0].2, stop.0, stop.1, ev));
    checks.push(check(
        IDS[1].0, IDS[1].1, IDS[1].2, updates.0, updates.1, updates.2,
    ));
    checks.push(check(
        IDS[2].0, IDS[2].1, IDS[2].2, cascade.0, cascade.1, cascade.2,
    ));
    acp::keeps_serving(s, serving.0, checks).await
}

/// Whether the prompt was answered with a result whose `stopReason` is `cancelled`.
fn judge_stop_reason(
    answer: Option<&Value>,
    timeout: Duration,
    ev: &mut Evidence,
) -> (Outcome, String) {
    let Some(answer) = answer else {
        return (
            Outcome::Fail,
            format!(
                "no answer after session/cancel, waited past the turn's natural end and \
                 {timeout:?} more"
            ),
        );
    };
    ev.got(answer);
    if let Some(code) = answer["error"]["code"].as_i64() {
        return (
            Outcome::Fail,
            format!("answered with error {code}, not a result with stopReason cancelled"),
        );
    }
    match answer["result"]["stopReason"].as_str() {
        Some("cancelled") => (Outcome::Pass, "answered with stopReason cancelled".into()),
        Some(other) => (
            Outcome::Fail,
            format!("answered with stopReason {other}, not cancelled"),
        ),
        None => (Outcome::Fail, "answered without a stopReason".into()),
    }
}

/// Whether the session's updates stopped: none later than the grace after `session/cancel`,
/// and none after the prompt's answer.
fn judge_updates(
    s: &AcpSession,
    turn: &Turn,
    session: &str,
    sent: Instant,
    cancelled: Instant,
    answered: Option<Instant>,
    watched: Instant,
) -> (Outcome, String, Evidence) {
    let mut ev = Evidence::default();
    if turn.updates == 0 {
        let why = "uncancelled, the turn sent no session/update of its work (message, thought, \
                   tool call or plan): there is no work to see stop";
        return (Outcome::NotApplicable, why.into(), ev);
    }
    let grace = grace(turn.update_every);
    let all: Vec<(Value, Instant)> = s
        .client
        .updates(session)
        .into_iter()
        .filter(|(frame, at)| *at >= sent && is_work(frame))
        .collect();
    let before = all.iter().filter(|(_, at)| *at <= cancelled).count();
    let late: Vec<&(Value, Instant)> = all
        .iter()
        .filter(|(_, at)| *at > cancelled + grace || answered.is_some_and(|a| *at > a))
        .collect();
    ev.note(format!(
        "uncancelled, the turn sent {} session/update of its work over {} ms (one each {} ms); \
         updates that describe the session (commands, modes, usage) are not counted",
        turn.updates,
        ms(turn.natural),
        turn.update_every.map_or(0, ms)
    ));
    let Some((_, last)) = late.last() else {
        let detail = format!(
            "{before} session/update of the turn's work before session/cancel, {} within {} ms \
             after it, none later (watched until {} ms after the prompt)",
            all.len() - before,
            grace.as_millis(),
            ms(watched.saturating_duration_since(sent))
        );
        return (Outcome::Pass, detail, ev);
    };
    for (frame, _) in late.iter().take(3) {
        ev.got(frame);
    }
    let after_answer = late
        .iter()
        .filter(|(_, at)| answered.is_some_and(|a| *at > a))
        .count();
    let detail = format!(
        "{} session/update of the turn's work came later than {} ms after session/cancel \
         ({after_answer} of them after the prompt was answered), the last {} ms after it: the \
         work went on",
        late.len(),
        grace.as_millis(),
        ms(last.saturating_duration_since(cancelled))
    );
    (Outcome::Fail, detail, ev)
}

/// Whether the agent sent `$/cancel_request` for each of its requests pending at the cancel.
fn judge_cascade(
    asked: &[super::acp_session::AgentRequest],
    by_agent: &[Value],
) -> (Outcome, String, Evidence) {
    let mut ev = Evidence::default();
    let names: Vec<String> = asked
        .iter()
        .map(super::acp_session::AgentRequest::name)
        .collect();
    ev.note(format!(
        "the agent's requests pending at the cancel: {names:?}"
    ));
    if asked.is_empty() {
        let why = "the agent had no request to the client pending at the cancel: a prompt that \
                   makes it ask for permission exercises this check (cancelkit's example agent: \
                   --prompt ask)";
        return (Outcome::NotApplicable, why.into(), ev);
    }
    let named: Vec<String> = by_agent.iter().map(Value::to_string).collect();
    ev.note(format!("ids the agent cancelled: [{}]", named.join(", ")));
    let missed: Vec<String> = asked
        .iter()
        .filter(|r| !by_agent.contains(&r.id))
        .map(super::acp_session::AgentRequest::name)
        .collect();
    if missed.is_empty() {
        let detail = format!(
            "the agent sent $/cancel_request for all {} of its requests",
            asked.len()
        );
        (Outcome::Pass, detail, ev)
    } else {
        let detail = format!(
            "no $/cancel_request within {CASCADE_WINDOW:?} of session/cancel for: {}",
            missed.join(", ")
        );
        (Outcome::Info, detail, ev)
    }
}
