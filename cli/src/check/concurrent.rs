//! The MCP scenarios with several slow calls in flight at once: ids `1` and `"1"` side by side,
//! a hundred calls with every second one cancelled, and the fast call's answer after each of a
//! series of cancels. Each starts from a quiet server, waits as long as the calibrated call
//! lasts, and counts only the calls that were still in flight when their cancel was sent.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::mcp::{ALL, ANSWERED, NO_RESPONSE, NO_RESPONSE_ID, not_applicable};
use super::session::{Session, SlowCall};
use super::{Check, Evidence, Outcome, Word, check, pass_if};

/// The calls of the parallel scenario; every second one is cancelled.
const PARALLEL: usize = 100;
/// The repeats of the responsiveness scenario.
const REPEATS: usize = 20;

const ID_TYPES: &str = "JSON-RPC 2.0: ids 1 and \"1\" are different requests; cancelling one must leave the other to run to its answer";

/// The four pairs of the id-types scenario: the id's number, whether the number is sent
/// first, and whether the number is the one cancelled. Every order and every choice is tried,
/// so a server that keys requests by the id's text is caught whichever way it breaks.
const PAIRS: [(u8, bool, bool); 4] = [
    (1, true, false),
    (2, false, false),
    (3, true, true),
    (4, false, true),
];

fn is_error(frame: &Value) -> bool {
    frame.get("error").is_some() || frame["result"]["isError"] == true
}

/// Scenario 3: ids `n` and `"n"` are different requests: cancelling one leaves the other to
/// run to its result, in both orders and whichever is cancelled.
pub async fn id_types(s: &mut Session, checks: &mut Vec<Check>) {
    let list = [("mcp.cancel.id_types", Word::Must, ID_TYPES)];
    let m = match s.usable() {
        Ok(m) => m,
        Err(why) => return not_applicable(checks, &list, &why),
    };
    s.quiesce().await;
    let mut ev = Evidence::default();
    let mut pairs: Vec<(String, SlowCall, SlowCall)> = Vec::new();
    for (n, number_first, cancel_number) in PAIRS {
        let (number, text) = (json!(n), json!(n.to_string()));
        let (first, second) = if number_first {
            (number, text)
        } else {
            (text, number)
        };
        let a = s.call_slow_as(Some(first), &mut ev).await;
        let b = s.call_slow_as(Some(second), &mut ev).await;
        let sent_first = a.id.clone();
        let (cancelled, kept) = if number_first == cancel_number {
            (a, b)
        } else {
            (b, a)
        };
        let name = format!(
            "{} and {} (sent first: {sent_first})",
            cancelled.id, kept.id
        );
        pairs.push((name, cancelled, kept));
    }
    tokio::time::sleep(m.lead()).await;
    let (mut judged, mut faults, mut early) = (0, Vec::new(), 0);
    let mut waiting = Vec::new();
    for (name, mut cancelled, mut kept) in pairs {
        let answered: Vec<Value> = [cancelled.pending.now(), kept.pending.now()]
            .into_iter()
            .flatten()
            .collect();
        answered.iter().for_each(|f| ev.got(f));
        if let Some(refused) = answered.iter().find(|f| is_error(f)) {
            judged += 1;
            faults.push(format!(
                "{name}: {} was answered with an error while both were in flight",
                refused["id"]
            ));
            continue;
        }
        if !answered.is_empty() {
            early += 1;
            continue;
        }
        judged += 1;
        s.cancel(
            json!({"requestId": cancelled.id, "reason": "cancelkit check"}),
            &mut ev,
        )
        .await;
        waiting.push((name, kept));
        s.watch(NO_RESPONSE_ID, cancelled, false);
    }
    for (name, mut kept) in waiting {
        let deadline = kept.sent + m.duration + m.slack() + s.options.timeout;
        match kept.pending.wait_until(deadline).await {
            Some((frame, _)) if is_error(&frame) => {
                ev.got(&frame);
                faults.push(format!(
                    "{name}: {} was answered with an error after the other was cancelled",
                    kept.id
                ));
            }
            Some((frame, _)) => ev.got(&frame),
            None => faults.push(format!(
                "{name}: {} got no answer after the other was cancelled",
                kept.id
            )),
        }
    }
    let (result, detail) = match (judged, faults.is_empty()) {
        (0, _) => (
            Outcome::NotApplicable,
            format!(
                "in all {} pairs a call was answered before the cancel",
                PAIRS.len()
            ),
        ),
        (n, true) => (
            Outcome::Pass,
            format!(
                "in {n} pairs (both orders, either one cancelled) the call not cancelled was \
                 answered with its result{}",
                if early > 0 {
                    format!("; {early} pair(s) answered too soon to judge")
                } else {
                    String::new()
                }
            ),
        ),
        (_, false) => (Outcome::Fail, faults.join("; ")),
    };
    checks.push(check(
        "mcp.cancel.id_types",
        Word::Must,
        ALL,
        ID_TYPES,
        result,
        detail,
        ev,
    ));
}

/// Scenario 4: 100 slow calls in parallel, every second one cancelled: every other one is
/// answered, and none of those cancelled in flight is, up to the end of the run.
pub async fn parallel(s: &mut Session, checks: &mut Vec<Check>) {
    const OTHERS: &str = "mcp.cancel.parallel.others_answered";
    const SILENT: &str = "mcp.cancel.parallel.cancelled_silent";
    let list = [
        (OTHERS, Word::Must, ANSWERED),
        (SILENT, Word::Should, NO_RESPONSE),
    ];
    let m = match s.usable() {
        Ok(m) => m,
        Err(why) => return not_applicable(checks, &list, &why),
    };
    s.quiesce().await;
    // Only the first call and cancel are quoted: the rest are alike.
    let (mut ev, mut alike) = (Evidence::default(), Evidence::default());
    let mut calls = Vec::with_capacity(PARALLEL);
    for n in 0..PARALLEL {
        let quoted = if n == 0 { &mut ev } else { &mut alike };
        calls.push(s.call_slow(quoted).await);
    }
    tokio::time::sleep(m.lead()).await;
    let (first, last) = (calls[0].id.clone(), calls[PARALLEL - 1].id.clone());
    let (mut cancelled, mut kept, mut early) = (Vec::new(), Vec::new(), 0);
    for (n, mut call) in calls.into_iter().enumerate() {
        if n % 2 == 1 {
            kept.push(call);
        } else if call.pending.now().is_some() {
            early += 1;
        } else {
            let quoted = if n == 0 { &mut ev } else { &mut alike };
            s.cancel(json!({"requestId": call.id}), quoted).await;
            cancelled.push(call);
        }
    }
    ev.note(format!(
        "{PARALLEL} such calls, ids {first} to {last}; every second one cancelled, from the first"
    ));
    let deadline = Instant::now() + m.duration + m.slack() + s.options.timeout;
    let (mut answered, mut errors) = (0, 0);
    let half = kept.len();
    for mut call in kept {
        match call.pending.wait_until(deadline).await {
            Some((frame, _)) => {
                answered += 1;
                errors += usize::from(is_error(&frame));
            }
            None => s.watch(OTHERS, call, true),
        }
    }
    let waiting = half - answered;
    let mut detail = format!(
        "{answered} of the {half} calls not cancelled were answered within {} ms",
        (m.duration + m.slack() + s.options.timeout).as_millis()
    );
    if errors > 0 {
        detail.push_str(&format!(" ({errors} of them with an error)"));
    }
    if waiting > 0 {
        detail.push_str(&format!(
            "; the other {waiting} are watched until the run ends"
        ));
    }
    checks.push(check(
        OTHERS,
        Word::Must,
        ALL,
        ANSWERED,
        Outcome::Pass,
        detail,
        ev.clone(),
    ));
    let judged = cancelled.len();
    let mut silent_ev = ev;
    let mut got = 0;
    for mut call in cancelled {
        match call.pending.now() {
            Some(frame) => {
                got += 1;
                silent_ev.got(&frame);
            }
            None => s.watch(SILENT, call, false),
        }
    }
    let (result, detail) = match judged {
        0 => (
            Outcome::NotApplicable,
            "every call to cancel was answered before its cancel".to_owned(),
        ),
        n => (
            pass_if(got == 0),
            format!(
                "{got} of the {n} calls cancelled in flight were answered by the time the others \
                 were{}",
                if early > 0 {
                    format!(" ({early} answered before their cancel, not counted)")
                } else {
                    String::new()
                }
            ),
        ),
    };
    checks.push(check(
        SILENT,
        Word::Should,
        ALL,
        NO_RESPONSE,
        result,
        detail,
        silent_ev,
    ));
}

/// Scenario 5: responsiveness: the fast call is answered after each of a series of cancels;
/// the time from the cancel to its answer is measured.
pub async fn responsiveness(s: &mut Session, checks: &mut Vec<Check>) {
    const ID: &str = "mcp.cancel.responsiveness";
    let m = match s.usable() {
        Ok(m) => m,
        Err(why) => return not_applicable(checks, &[(ID, Word::Must, ANSWERED)], &why),
    };
    s.quiesce().await;
    let mut ev = Evidence::default();
    let (mut times, mut early, mut unanswered) = (Vec::with_capacity(REPEATS), 0, 0);
    let wait = s.options.timeout + m.duration;
    for _ in 0..REPEATS {
        let mut call = s.call_slow(&mut ev).await;
        tokio::time::sleep(m.lead()).await;
        if call.pending.now().is_some() {
            early += 1;
            continue;
        }
        s.cancel(json!({"requestId": call.id}), &mut ev).await;
        s.watch(NO_RESPONSE_ID, call, false);
        let start = Instant::now();
        let (method, params) = s.fast();
        let (_, mut fast) = s.call(method, params, &mut ev).await;
        match fast.wait(wait).await {
            Some(_) => times.push(start.elapsed()),
            None => unanswered += 1,
        }
    }
    times.sort();
    let ms = |d: Option<&Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
    let p50 = ms(times.get(times.len() / 2));
    let p99 = ms(times.get((times.len() * 99).div_ceil(100).saturating_sub(1)));
    let judged = REPEATS - early;
    let (result, detail) = if judged == 0 {
        (
            Outcome::NotApplicable,
            format!("in all {REPEATS} repeats the slow call was answered before its cancel"),
        )
    } else {
        (
            pass_if(unanswered == 0),
            format!(
                "{} of {judged} fast calls answered after a cancel (each waited up to {} ms): \
                 p50 {p50:.1} ms, p99 {p99:.1} ms",
                times.len(),
                wait.as_millis()
            ),
        )
    };
    let mut done = check(ID, Word::Must, ALL, ANSWERED, result, detail, ev);
    done.metrics = Some(json!({
        "repeats": judged,
        "answered": times.len(),
        "p50_ms": if times.is_empty() { Value::Null } else { json!(p50) },
        "p99_ms": if times.is_empty() { Value::Null } else { json!(p99) },
    }));
    checks.push(done);
}
