//! `cargo xtask bench macro`: what `#[cancellable]` costs per call, next to a plain async fn and
//! the same cancellation wiring written by hand (child token + scope + `select!`).

use std::hint::black_box;
use std::time::Instant;

use cancelkit::{CancelReason, CancellationToken, Cancelled, JsonRpcError, Scope, cancellable};

use crate::alloc;
use crate::report::{Row, print_table, save_json};

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
    let body = cancelkit::scope(child.clone(), async move { Ok(black_box(n)) });
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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Measures the three variants, interleaved round by round; `ambient` runs them inside a
/// long-lived root scope.
fn measure(ambient: bool) -> [(f64, f64); 3] {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let variants = [Variant::Plain, Variant::HandWritten, Variant::Macro];
    let work = async move {
        let mut times = [Vec::new(), Vec::new(), Vec::new()];
        let mut allocs = [0.0; 3];
        for (i, variant) in variants.iter().enumerate() {
            round(*variant).await; // warm-up
            allocs[i] = round(*variant).await.1;
        }
        for _ in 0..ROUNDS {
            for (i, variant) in variants.iter().enumerate() {
                times[i].push(round(*variant).await.0);
            }
        }
        let [a, b, c] = times;
        [
            (median(a), allocs[0]),
            (median(b), allocs[1]),
            (median(c), allocs[2]),
        ]
    };
    if ambient {
        let (root, _canceller) = Scope::root();
        runtime.block_on(root.run(work))
    } else {
        runtime.block_on(work)
    }
}

pub fn run() {
    println!(
        "#[cancellable] overhead: {ROUNDS} rounds of {CALLS_PER_ROUND} calls per variant, median ns per call"
    );
    let mut rows = Vec::new();
    let mut json = Vec::new();
    let mut verdicts = Vec::new();
    for ambient in [false, true] {
        let [plain, hand, ours] = measure(ambient);
        let context = if ambient {
            "ambient scope"
        } else {
            "no ambient scope"
        };
        for (name, (ns, allocs)) in [
            ("plain async fn", plain),
            ("hand-written wiring", hand),
            ("#[cancellable]", ours),
        ] {
            rows.push(Row {
                name: format!("{name} ({context})"),
                cells: vec![
                    format!("{ns:.1}"),
                    format!("{:.2}x", ns / hand.0),
                    format!("{allocs:.2}"),
                    format!("{:+.2}", allocs - plain.1),
                ],
            });
            json.push(serde_json::json!({
                "variant": name, "ambient": ambient, "ns_per_call": ns,
                "vs_hand_written": ns / hand.0, "allocations_per_call": allocs,
                "allocations_over_plain": allocs - plain.1,
            }));
        }
        let ratio = ours.0 / hand.0;
        let extra = ours.1 - plain.1;
        verdicts.push(format!(
            "{context}: #[cancellable] is {ratio:.2}x the hand-written wiring (target <= 1.10x: {}), \
             {extra:+.2} allocations per call over the plain fn ({:+.2} for the hand-written wiring; target <= +1: {})",
            if ratio <= 1.10 { "met" } else { "MISSED" },
            hand.1 - plain.1,
            if extra <= 1.0 + 1e-9 { "met" } else { "MISSED" },
        ));
    }
    print_table(
        "",
        &[
            "variant",
            "ns/call",
            "vs hand-written",
            "allocs/call",
            "allocs vs plain",
        ],
        &rows,
    );
    println!();
    for verdict in &verdicts {
        println!("{verdict}");
    }
    save_json("macro", &serde_json::Value::Array(json));
}
