//! `cargo xtask bench macro`: what `#[cancellable]` costs per call, next to a plain async fn and
//! the same cancellation wiring written by hand (child token + scope + `select!`).

use std::hint::black_box;
use std::time::Instant;

use cancelkit::{CancelReason, CancellationToken, Cancelled, JsonRpcError, Scope, cancellable};
use serde_json::{Value, json};

use crate::alloc;
use crate::report::{Report, Spread, Table, number, ratio};

/// The baseline: no cancellation at all.
async fn plain(n: u64) -> Result<u64, JsonRpcError> {
    Ok(black_box(n))
}

/// Best-practice wiring by hand: a child of the ambient token, the body run inside a scope over
/// it, and a biased `select!` between the body and the token.
async fn hand_written(n: u64) -> Result<u64, JsonRpcError> {
    let child = match cancelkit::current() {
        Some(parent) => parent.child_token(),
        None => CancellationToken::new(),
    };
    let body = cancelkit::with_token(child.clone(), async move { Ok(black_box(n)) });
    tokio::select! {
        biased;
        result = body => result,
        () = child.cancelled() => Err(Cancelled::new(CancelReason::Parent).into()),
    }
}

#[cancellable]
async fn with_macro(n: u64) -> Result<u64, JsonRpcError> {
    Ok(black_box(n))
}

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Plain,
    HandWritten,
    Macro,
}

const VARIANTS: [Variant; 3] = [Variant::Plain, Variant::HandWritten, Variant::Macro];
const NAMES: [&str; 3] = ["plain async fn", "hand-written wiring", "#[cancellable]"];
const CALLS_PER_ROUND: u64 = 200_000;
const ROUNDS: usize = 9;

/// Runs `CALLS_PER_ROUND` calls; returns (nanoseconds per call, allocations per call).
async fn round(variant: Variant) -> (f64, f64) {
    let allocations = alloc::allocations();
    let start = Instant::now();
    let mut sum = 0u64;
    for n in 0..CALLS_PER_ROUND {
        sum = sum.wrapping_add(
            match variant {
                Variant::Plain => plain(n).await,
                Variant::HandWritten => hand_written(n).await,
                Variant::Macro => with_macro(n).await,
            }
            .unwrap_or(0),
        );
    }
    let elapsed = start.elapsed();
    black_box(sum);
    let calls = CALLS_PER_ROUND as f64;
    (
        elapsed.as_nanos() as f64 / calls,
        (alloc::allocations() - allocations) as f64 / calls,
    )
}

/// Every round of the three variants (indexed like [`VARIANTS`]).
struct Rounds {
    /// Nanoseconds per call, one value per round.
    ns: [Vec<f64>; 3],
    /// Allocations per call, one value per round.
    allocations: [Vec<f64>; 3],
}

/// Measures the three variants, interleaved round by round (the order rotated each round),
/// after one un-measured round each; `ambient` runs them inside a long-lived root scope.
fn measure(ambient: bool) -> Rounds {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let work = async move {
        for variant in VARIANTS {
            round(variant).await; // warm-up
        }
        let mut rounds = Rounds {
            ns: Default::default(),
            allocations: Default::default(),
        };
        for r in 0..ROUNDS {
            for k in 0..VARIANTS.len() {
                let i = (r + k) % VARIANTS.len();
                let (ns, allocations) = round(VARIANTS[i]).await;
                rounds.ns[i].push(ns);
                rounds.allocations[i].push(allocations);
            }
        }
        rounds
    };
    if ambient {
        let (root, _canceller) = Scope::root();
        runtime.block_on(root.run(work))
    } else {
        runtime.block_on(work)
    }
}

/// Runs the benchmark and writes `target/bench/macro.json`.
pub fn run() {
    let mut report = Report::new(
        "macro",
        format!(
            "What `#[cancellable]` costs per call, next to a plain async fn (no cancellation) and \
             the same wiring written by hand (a child of the ambient token, a scope over it, a \
             biased `select!`). Each body returns at once, so the figures are the wiring alone. \
             One current-thread tokio runtime; {ROUNDS} rounds of {} calls per variant, the \
             variants interleaved round by round with their order rotated each round, after one \
             un-measured round each. Figures are the median (min–max) of the rounds; ratios are \
             taken on the medians. Run once without an ambient scope and once inside a root scope \
             (where each call's token is a child of the scope's).",
            number(CALLS_PER_ROUND as f64, 0)
        ),
    );
    let mut data = Vec::new();
    for ambient in [false, true] {
        let rounds = measure(ambient);
        let context = if ambient {
            "inside an ambient scope"
        } else {
            "no ambient scope"
        };
        let ns: Vec<Spread> = rounds.ns.iter().map(|r| Spread::of(r)).collect();
        let allocations: Vec<Spread> = rounds.allocations.iter().map(|r| Spread::of(r)).collect();
        let (plain, hand, ours) = (0, 1, 2);
        let mut table = Table::new(
            format!("#[cancellable] overhead, {context}"),
            &[
                "variant",
                "ns/call",
                "vs hand-written",
                "allocs/call",
                "allocs vs plain",
            ],
        );
        for (i, name) in NAMES.iter().enumerate() {
            table.row(vec![
                (*name).to_owned(),
                ns[i].show(1),
                ratio(ns[i].median, ns[hand].median),
                number(allocations[i].median, 2),
                format!("{:+.2}", allocations[i].median - allocations[plain].median),
            ]);
        }
        if allocations.iter().any(|a| a.min != a.max) {
            table.note("allocations per call differed between rounds; the median is shown");
        }
        report.tables.push(table);

        let times = ns[ours].median / ns[hand].median;
        report.target(
            format!("#[cancellable] ≤ 1.10× the hand-written wiring ({context})"),
            format!(
                "{times:.2}× ({} vs {} ns/call)",
                number(ns[ours].median, 1),
                number(ns[hand].median, 1)
            ),
            times <= 1.10,
        );
        let extra = allocations[ours].median - allocations[plain].median;
        report.target(
            format!("#[cancellable] ≤ +1 allocation per call over a plain async fn ({context})"),
            format!(
                "{extra:+.2} (hand-written wiring: {:+.2})",
                allocations[hand].median - allocations[plain].median
            ),
            extra <= 1.0 + 1e-9,
        );
        for (i, name) in NAMES.iter().enumerate() {
            data.push(json!({
                "variant": name,
                "ambient": ambient,
                "ns_per_call_rounds": rounds.ns[i],
                "allocations_per_call_rounds": rounds.allocations[i],
            }));
        }
    }
    report.data = json!({
        "rounds": ROUNDS,
        "calls_per_round": CALLS_PER_ROUND,
        "variants": Value::Array(data),
    });
    report.finish();
}
