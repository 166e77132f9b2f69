//! The figures the tables are made of: a quantile of samples, the spread over rounds, the
//! samples of one stack in one condition, and how ratios and microseconds are shown.

use crate::report::Spread;

use super::super::{Config, Flavor, Results, Round, Stack, Transport};

/// The `q` quantile (0..=1) of `samples`, nearest rank.
pub fn quantile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i]
}

/// The spread over rounds of one quantile of each round's samples.
pub(super) fn spread_of(rounds: &[Vec<f64>], q: f64) -> Spread {
    let per_round: Vec<f64> = rounds.iter().map(|s| quantile(s, q)).collect();
    Spread::of(&per_round)
}

/// The rounds of `stack` in `config`.
fn rounds_of(results: &Results, config: Config, stack: Stack) -> &[Round] {
    &results
        .rounds
        .iter()
        .find(|(c, s, _)| *c == config && *s == stack)
        .expect("every pair was measured")
        .2
}

/// The round trips per second of `stack` in `config`, over the rounds.
pub(super) fn throughput(results: &Results, config: Config, stack: Stack) -> Spread {
    let rates: Vec<f64> = rounds_of(results, config, stack)
        .iter()
        .map(|r| r.throughput)
        .collect();
    Spread::of(&rates)
}

/// Whether cancels were sent on an idle connection or on top of running handlers.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Load {
    /// On an idle connection.
    Idle,
    /// On top of `in_flight` running handlers.
    Loaded,
}

/// Which latency of a cancel.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Measure {
    /// Cancel → handler stopped.
    Stopped,
    /// Cancel → -32800 read by the client (ACP).
    Answered,
}

/// The samples (µs) of one latency of `stack` in `config`, one vector per round.
pub(super) fn samples(
    results: &Results,
    config: Config,
    stack: Stack,
    load: Load,
    m: Measure,
) -> Vec<Vec<f64>> {
    rounds_of(results, config, stack)
        .iter()
        .map(|r| {
            let cancels = if load == Load::Idle {
                &r.idle
            } else {
                &r.loaded
            };
            if m == Measure::Stopped {
                cancels.stopped.clone()
            } else {
                cancels.answered.clone()
            }
        })
        .collect()
}

/// The floor that goes with `config`'s rows, one vector of samples (µs) per round.
pub(super) fn floor_rounds(results: &Results, config: Config) -> &[Vec<f64>] {
    match (config.transport, config.flavor) {
        (Transport::Duplex, Flavor::Current) => &results.floors.channel_current,
        (Transport::Duplex, Flavor::Multi) => &results.floors.channel_multi,
        (Transport::Pipes, _) => &results.floors.pipe_tokio,
    }
}

/// A spread of microseconds, shown.
pub(super) fn us(spread: Spread) -> String {
    spread.show(1)
}

/// A ratio, shown.
pub(super) fn x(ratio: f64) -> String {
    format!("{ratio:.2}×")
}

/// The stacks of one protocol: ours first, then the peer.
pub(super) fn pair(acp: bool) -> [Stack; 2] {
    if acp {
        [Stack::CancelkitAcp, Stack::AcpSdk]
    } else {
        [Stack::CancelkitMcp, Stack::Rmcp]
    }
}

/// The heap bytes per in-flight request of `stack`, client plus server, over the rounds.
pub(super) fn heap_total(results: &Results, stack: Stack) -> Spread {
    let rounds = &results
        .heap
        .iter()
        .find(|(s, _)| *s == stack)
        .expect("measured")
        .1;
    Spread::of(&rounds.iter().map(|(c, s)| c + s).collect::<Vec<_>>())
}
