//! The calls watched until the run ends. A check judges its calls when its scenario ends, but a
//! server may answer a cancelled call tens of seconds later, or answer a kept one only after
//! other scenarios ran: every cancelled call is watched until the end of the run (and a settle
//! window past every slow call's natural end), and every late answer, or kept call never
//! answered, is reported against the check it belongs to. So is progress that goes on after a
//! cancel.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::ms;
use super::session::{Session, SlowCall};
use super::{Check, Outcome};

/// At most this many calls are watched.
pub const MAX_WATCHED: usize = 1024;
/// Progress that comes this soon after a cancel (plus one interval of the call's progress, at
/// most [`MAX_GRACE`] in all) may have been on its way already.
pub const PROGRESS_GRACE: Duration = Duration::from_millis(500);
/// The longest grace given to progress after a cancel.
pub const MAX_GRACE: Duration = Duration::from_secs(2);

/// How long after a cancel reports of the work may still come: [`PROGRESS_GRACE`] plus one
/// interval between reports (`every`, when measured), at most [`MAX_GRACE`].
pub fn grace(every: Option<Duration>) -> Duration {
    (PROGRESS_GRACE + every.unwrap_or_default()).min(MAX_GRACE)
}

/// A call watched until the run ends.
pub struct Watched {
    /// The check it is judged against.
    pub check: &'static str,
    /// The call.
    pub call: SlowCall,
    /// Whether it must be answered (a kept call) or must not be (a cancelled one).
    pub expect_answer: bool,
}

/// A cancelled call whose progress must stop, judged at the end of the run.
pub struct ProgressWatch {
    /// The check it is judged against.
    pub check: &'static str,
    /// The call's progress token.
    pub token: Value,
    /// When the call was sent.
    pub sent: Instant,
    /// When it was cancelled.
    pub cancelled: Instant,
    /// How often the call reported progress when calibrated.
    pub every: Option<Duration>,
}

/// A watched call's check, whether it had to be answered, and its answer with how long after the
/// call it came.
type Seen = (&'static str, bool, Option<(Value, Duration)>);

/// Turns a passing check into a failing one, with why.
fn fail(check: &mut Check, why: String) {
    if check.result == Outcome::Pass {
        check.result = Outcome::Fail;
        check.detail = format!("{}; but {why}", check.detail);
    } else if check.result == Outcome::Fail {
        check.detail = format!("{}; and {why}", check.detail);
    }
}

/// Waits until every slow call of the run is past its natural end and slack (and, while a kept
/// call is still unanswered, up to `--timeout` more), then reports every late answer of a
/// cancelled call and every kept call never answered against its check.
pub async fn sweep(s: &mut Session, checks: &mut [Check]) {
    s.quiesce().await;
    let kept_deadline = s.busy_until + s.options.timeout;
    let mut outcomes: Vec<Seen> = Vec::new();
    for w in &mut s.watched {
        let got = if w.expect_answer {
            w.call.pending.wait_until(kept_deadline).await
        } else {
            w.call.pending.now_timed()
        };
        let got = got.map(|(frame, at)| (frame, at.saturating_duration_since(w.call.sent)));
        outcomes.push((w.check, w.expect_answer, got));
    }
    for check in checks.iter_mut() {
        let mine = outcomes.iter().filter(|(id, ..)| *id == check.id);
        let (mut late, mut never, mut last) = (0, 0, None::<Duration>);
        for (_, expect, got) in mine {
            match (expect, got) {
                (false, Some((frame, after))) => {
                    if late < 3 {
                        check
                            .evidence
                            .push(format!("<- {} (late)", super::cut(&frame.to_string())));
                    }
                    late += 1;
                    last = last.max(Some(*after));
                }
                (true, None) => never += 1,
                _ => {}
            }
        }
        if late > 0 {
            let last = last.map_or(0, ms);
            fail(
                check,
                format!(
                    "{late} cancelled call(s) were answered later, while the run went on (the \
                     last {last} ms after it was sent)"
                ),
            );
        }
        if never > 0 {
            fail(
                check,
                format!("{never} call(s) not cancelled were never answered before the run ended"),
            );
        }
    }
}

/// Judges each progress watch: no `notifications/progress` for a cancelled call's token may
/// come later than [`PROGRESS_GRACE`] and one progress interval after its cancel, up to the end
/// of the run.
pub fn judge_progress(s: &Session, watches: &[ProgressWatch], checks: &mut [Check]) {
    for w in watches {
        let Some(check) = checks.iter_mut().find(|c| c.id == w.check) else {
            continue;
        };
        if check.result != Outcome::Pass {
            continue;
        }
        let all = s.client.progress(&w.token);
        let grace = grace(w.every);
        let after: Vec<&(Value, Instant)> = all
            .iter()
            .filter(|(_, at)| *at > w.cancelled + grace)
            .collect();
        let before = all.len() - after.len();
        if let Some((_, last)) = after.last() {
            for (frame, _) in after.iter().take(3) {
                check
                    .evidence
                    .push(format!("<- {}", super::cut(&frame.to_string())));
            }
            check.result = Outcome::Fail;
            check.detail = format!(
                "{} notifications/progress for the cancelled call came more than {} ms after the \
                 cancel ({before} before that), the last {} ms after it: the work went on",
                after.len(),
                grace.as_millis(),
                ms(last.saturating_duration_since(w.cancelled))
            );
        } else {
            check.detail = format!(
                "{before} notifications/progress before the cancel, none after it (watched until \
                 the run ended, {} ms after the call was sent)",
                ms(Instant::now().saturating_duration_since(w.sent))
            );
        }
    }
}
