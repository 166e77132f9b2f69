//! The cancel-latency tables and plots: cancel → handler stopped for each protocol against its
//! peer and the floor, and for ACP cancel → -32800 read by the client.

use crate::report::{Cdf, Report, Table, number};

use super::super::{Config, Results};
use super::figures::{Load, Measure, floor_rounds, pair, samples, spread_of, us, x};

/// The worst ratio found for each cancel-latency target, and the row it was found in.
#[derive(Default)]
pub(super) struct Worst {
    /// Our idle p99 over the better peer's.
    pub idle: Option<(f64, String)>,
    /// Our loaded p99 over our idle p99.
    pub loaded_vs_idle: Option<(f64, String)>,
    /// Our loaded p99 over the better peer's loaded p99.
    pub loaded_vs_peer: Option<(f64, String)>,
    /// Our p50 over the floor's p50.
    pub floor: Option<(f64, String)>,
}

/// Keeps `r` and `what` in `slot` when `r` is worse (higher) than the ratio there.
fn keep_worst(slot: &mut Option<(f64, String)>, r: f64, what: String) {
    if slot.as_ref().is_none_or(|(w, _)| r > *w) {
        *slot = Some((r, what));
    }
}

/// Cancel → handler stopped: a table per protocol, ours against its peer and the floor, and a
/// plot per row. Returns the worst ratios, for the targets.
pub(super) fn stopped(report: &mut Report, results: &Results, configs: &[Config]) -> Worst {
    let sizes = results.sizes;
    let mut worst = Worst::default();
    for acp in [false, true] {
        let [ours, peer] = pair(acp);
        let protocol = if acp { "ACP" } else { "MCP" };
        let mut table = Table::new(
            format!("{protocol}: cancel → handler stopped, µs (lower is better)"),
            &[
                "condition",
                "load",
                &format!("{} p50", ours.name()),
                &format!("{} p99", ours.name()),
                &format!("{} p50", peer.name()),
                &format!("{} p99", peer.name()),
                "p99 ratio",
                "floor p50",
                "ours p50 ÷ floor",
            ],
        );
        for config in configs {
            let floor = spread_of(floor_rounds(results, *config), 0.5);
            for load in [Load::Idle, Load::Loaded] {
                let o = samples(results, *config, ours, load, Measure::Stopped);
                let p = samples(results, *config, peer, load, Measure::Stopped);
                let (o50, o99, p50, p99) = (
                    spread_of(&o, 0.5),
                    spread_of(&o, 0.99),
                    spread_of(&p, 0.5),
                    spread_of(&p, 0.99),
                );
                // The better peer of the same row: the lower p99 of rmcp and the ACP SDK.
                let other = pair(!acp)[1];
                let p_other = spread_of(
                    &samples(results, *config, other, load, Measure::Stopped),
                    0.99,
                );
                let better = p99.median.min(p_other.median);
                let what = format!(
                    "{}, {}, {}",
                    ours.name(),
                    config.label(),
                    if load == Load::Idle { "idle" } else { "loaded" }
                );
                match load {
                    Load::Idle => keep_worst(&mut worst.idle, o99.median / better, what.clone()),
                    Load::Loaded => {
                        let idle99 = spread_of(
                            &samples(results, *config, ours, Load::Idle, Measure::Stopped),
                            0.99,
                        );
                        keep_worst(
                            &mut worst.loaded_vs_idle,
                            o99.median / idle99.median,
                            what.clone(),
                        );
                        keep_worst(&mut worst.loaded_vs_peer, o99.median / better, what.clone());
                    }
                }
                keep_worst(&mut worst.floor, o50.median / floor.median, what);
                table.row(vec![
                    config.label(),
                    if load == Load::Idle {
                        "idle".into()
                    } else {
                        format!("{} running", number(sizes.in_flight as f64, 0))
                    },
                    us(o50),
                    us(o99),
                    us(p50),
                    us(p99),
                    x(o99.median / p99.median),
                    number(floor.median, 1),
                    x(o50.median / floor.median),
                ]);
                let title = format!(
                    "{protocol} cancel → handler stopped: {}, {}",
                    config.label(),
                    if load == Load::Idle {
                        "idle".to_owned()
                    } else {
                        format!("{} running", number(sizes.in_flight as f64, 0))
                    }
                );
                let slug = format!(
                    "{}-{}-{}",
                    protocol.to_lowercase(),
                    if load == Load::Idle { "idle" } else { "loaded" },
                    config.slug()
                );
                report.cdfs.push(Cdf {
                    slug,
                    title,
                    x_label: "cancel → handler stopped (µs)".into(),
                    series: vec![
                        (ours.name().into(), o.concat()),
                        (format!("{} (token observed)", peer.name()), p.concat()),
                        ("floor".into(), floor_rounds(results, *config).concat()),
                    ],
                });
            }
        }
        table.note(format!(
            "{} never stops a handler: its figure is the moment a handler that awaits the stack's \
             cancellation observes it. cancelkit drops the handler's future. Floor: {}.",
            peer.name(),
            "a tokio channel hand-off on the same runtime (duplex rows) or one line over a pipe \
             between two processes with tokio's reactor on both sides (pipe rows)"
        ));
        report.tables.push(table);
    }
    worst
}

/// ACP's cancel → -32800 read by the client, ours against the ACP SDK.
pub(super) fn answered(report: &mut Report, results: &Results, configs: &[Config]) {
    let sizes = results.sizes;
    let [ours, peer] = pair(true);
    let mut table = Table::new(
        "ACP: cancel → -32800 read by the client, µs",
        &[
            "condition",
            "load",
            "cancelkit ACP p50",
            "cancelkit ACP p99",
            "ACP SDK p50",
            "ACP SDK p99",
            "p99 ratio",
        ],
    );
    for config in configs {
        for load in [Load::Idle, Load::Loaded] {
            let o = samples(results, *config, ours, load, Measure::Answered);
            let p = samples(results, *config, peer, load, Measure::Answered);
            let (o99, p99) = (spread_of(&o, 0.99), spread_of(&p, 0.99));
            table.row(vec![
                config.label(),
                if load == Load::Idle {
                    "idle".into()
                } else {
                    format!("{} running", number(sizes.in_flight as f64, 0))
                },
                us(spread_of(&o, 0.5)),
                us(o99),
                us(spread_of(&p, 0.5)),
                us(p99),
                x(o99.median / p99.median),
            ]);
        }
    }
    table.note("MCP answers nothing to a cancelled request, so there is no MCP row.");
    report.tables.push(table);
}
