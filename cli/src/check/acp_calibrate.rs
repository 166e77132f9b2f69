//! The calibration before the ACP scenarios: the `--prompt` turn is run once, uncancelled, with
//! the agent's requests answered at once as the user decides (`--permission`), to measure how
//! long the turn lasts by itself, how often it sends `session/update`, and whether it asks the
//! client anything. Every wait of the scenarios comes from what was measured, and whether a
//! cancel had any effect is judged against it; a turn that is refused, or ends too soon to be
//! cancelled while it surely runs, makes every check that needs one `n/a`, with the reason.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::acp_session::{AcpSession, Answering, Reply};
use super::calibrate::{self, LIMIT, MIN_SLOW, median_gap};
use super::{Evidence, ms};

/// The `--prompt` turn, measured uncancelled.
#[derive(Debug, Clone)]
pub struct Turn {
    /// How long it took to be answered.
    pub natural: Duration,
    /// Its `stopReason`.
    pub stop_reason: String,
    /// How many `session/update` of its work it sent ([`WORK`]).
    pub updates: usize,
    /// The median time between them (from the prompt to the first, when there was one).
    pub update_every: Option<Duration>,
    /// The methods of the requests it sent to the client, in order.
    pub asked: Vec<String>,
    /// How long after the prompt its first request to the client came.
    pub first_ask: Option<Duration>,
}

impl Turn {
    /// Whether the agent asks the client something during the turn: then a cancel sent while
    /// the client holds that request surely lands while the turn runs.
    pub fn asks(&self) -> bool {
        self.first_ask.is_some()
    }

    /// How long after the prompt a turn that asks nothing is cancelled ([`calibrate::lead`]).
    pub fn lead(&self) -> Duration {
        calibrate::lead(self.natural)
    }

    /// How long past its natural end a turn is still given ([`calibrate::slack`]).
    pub fn slack(&self) -> Duration {
        calibrate::slack(self.natural)
    }

    /// Whether a cancelled turn answered `elapsed` after the prompt, without the client having
    /// answered any request of the agent's since the cancel, ended sooner than it does by itself:
    /// a turn that asks the client something surely did (it did not wait for the answer), one
    /// that does not if it ended well before its natural length.
    pub fn ended_early(&self, elapsed: Duration) -> bool {
        self.asks() || elapsed < self.natural * 3 / 4
    }

    /// What the report says of the turn.
    pub fn describe(&self) -> Value {
        json!({
            "usable": true,
            "natural_ms": ms(self.natural),
            "stop_reason": self.stop_reason,
            "updates": self.updates,
            "update_every_ms": self.update_every.map(ms),
            "asked": self.asked,
            "first_ask_ms": self.first_ask.map(ms),
        })
    }
}

/// The `session/update` kinds that report the turn's work: what it says and thinks, its tool
/// calls and its plan. The others (`available_commands_update`, `current_mode_update`,
/// `config_option_update`, `session_info_update`, `usage_update`, `user_message_chunk`) describe
/// the session, and may come at any time.
pub const WORK: [&str; 5] = [
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
];

/// Whether a `session/update` notification reports the turn's work.
pub fn is_work(frame: &Value) -> bool {
    frame["params"]["update"]["sessionUpdate"]
        .as_str()
        .is_some_and(|kind| WORK.contains(&kind))
}

/// Runs `prompt` once in `session`, uncancelled, and measures the turn; or why it cannot be
/// cancelled while it surely runs.
pub async fn measure(s: &mut AcpSession, session: &str, prompt: &str) -> Result<Turn, String> {
    let mut ev = Evidence::default();
    let before = s.asked.len();
    s.answering = Answering::Now(Reply::Decide(s.permission));
    let (_, mut pending) = s.prompt(session, prompt, &mut ev).await;
    let sent = Instant::now();
    let answer = s.wait_until(&mut pending, sent + LIMIT, &mut ev).await;
    s.answering = Answering::Hold;
    let Some((answer, at)) = answer else {
        return Err(if s.client.closed() {
            "the agent closed its stdout during the uncancelled prompt".into()
        } else {
            format!(
                "the prompt did not end by itself within {LIMIT:?} (with the agent's requests \
                 answered as --permission {} says): give a prompt of a few seconds",
                s.permission.name()
            )
        });
    };
    let natural = at.saturating_duration_since(sent);
    if let Some(error) = answer.get("error") {
        return Err(format!(
            "the prompt was refused ({} {}), so no turn is in flight to cancel",
            error["code"], error["message"]
        ));
    }
    let asked: Vec<_> = s.asked.iter().skip(before).cloned().collect();
    let first_ask = asked.first().map(|r| r.at.saturating_duration_since(sent));
    if natural < MIN_SLOW && first_ask.is_none() {
        return Err(format!(
            "the prompt was answered {} ms after it was sent, too soon to be cancelled while it \
             surely runs (at least {} ms are needed): give a slower --prompt",
            ms(natural),
            MIN_SLOW.as_millis()
        ));
    }
    let times: Vec<Instant> = s
        .client
        .updates(session)
        .into_iter()
        .filter(|(frame, at)| *at >= sent && is_work(frame))
        .map(|(_, at)| at)
        .collect();
    Ok(Turn {
        natural,
        stop_reason: answer["result"]["stopReason"]
            .as_str()
            .unwrap_or("none")
            .to_owned(),
        updates: times.len(),
        update_every: median_gap(sent, &times),
        asked: asked.into_iter().map(|r| r.method).collect(),
        first_ask,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(natural_ms: u64, asks: bool) -> Turn {
        Turn {
            natural: Duration::from_millis(natural_ms),
            stop_reason: "end_turn".into(),
            updates: 0,
            update_every: None,
            asked: Vec::new(),
            first_ask: asks.then_some(Duration::from_millis(5)),
        }
    }

    #[test]
    fn the_waits_follow_the_measured_length() {
        assert_eq!(turn(10_000, false).lead(), Duration::from_millis(500));
        assert_eq!(turn(1_000, false).lead(), Duration::from_millis(200));
        assert_eq!(turn(10_000, false).slack(), Duration::from_secs(5));
        assert_eq!(turn(100, true).slack(), Duration::from_millis(500));
    }

    #[test]
    fn an_early_end_is_judged_by_what_the_turn_does() {
        let slow = turn(4_000, false);
        assert!(slow.ended_early(Duration::from_millis(400)));
        assert!(!slow.ended_early(Duration::from_millis(3_900)));
        // a turn that asks the client and ended without its answer did not wait for it
        assert!(turn(100, true).ended_early(Duration::from_secs(3)));
    }
}
