//! The x axis of a CDF plot: linear or logarithmic, with "nice" ticks.

use crate::report::number;

/// Above this ratio of the largest to the smallest positive sample, the x axis is logarithmic.
const LOG_ABOVE: f64 = 20.0;

/// The share of the axis' length left empty at each end.
const MARGIN: f64 = 0.02;

/// How values map to positions along the axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    /// Evenly spaced values.
    Linear,
    /// Logarithmic; values below `floor` (the smallest positive sample), zero and negative ones
    /// included, are drawn at `floor`.
    Log { floor: f64 },
}

/// A mark on the axis; minor ticks have no label.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tick {
    /// Where the tick is, in the samples' unit.
    pub value: f64,
    /// What is printed under it; `None` for a minor tick.
    pub label: Option<String>,
}

/// An x axis: its scale, its range (both ends are ticks) and its ticks.
#[derive(Debug, Clone)]
pub(super) struct Axis {
    /// Linear or logarithmic.
    pub kind: Kind,
    /// The first tick's value (drawn [`MARGIN`] right of the left edge).
    pub lo: f64,
    /// The last tick's value (drawn [`MARGIN`] left of the right edge).
    pub hi: f64,
    /// The ticks, left to right.
    pub ticks: Vec<Tick>,
}

impl Axis {
    /// The axis for samples between `min` and `max` (finite, `min <= max`), whose smallest
    /// positive value is `min_positive` (if any): logarithmic when they span more than a factor
    /// of 20, linear otherwise.
    pub fn for_samples(min: f64, max: f64, min_positive: Option<f64>) -> Axis {
        match min_positive {
            Some(floor) if max / floor > LOG_ABOVE => Axis::log(floor, max),
            _ => Axis::linear(min, max),
        }
    }

    /// Where `value` falls along the axis, from 0 (the left edge) to 1 (the right), clamped to
    /// that range. `lo` and `hi` are [`MARGIN`] inside the edges, so that no line is drawn over
    /// the frame.
    pub fn fraction(&self, value: f64) -> f64 {
        let at = match self.kind {
            Kind::Linear => (value - self.lo) / (self.hi - self.lo),
            Kind::Log { floor } => {
                (value.max(floor).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
            }
        };
        if at.is_nan() {
            MARGIN
        } else {
            MARGIN + at.clamp(0.0, 1.0) * (1.0 - 2.0 * MARGIN)
        }
    }

    /// A linear axis from a round number at or below `min` to one at or above `max`, about
    /// five steps of 1, 2 or 5 × 10^k apart. Equal ends are widened by 10% (or by 1 around 0).
    fn linear(min: f64, max: f64) -> Axis {
        let (min, max) = if max - min > max.abs().max(min.abs()) * 1e-9 {
            (min, max)
        } else {
            let pad = if min == 0.0 { 1.0 } else { min.abs() * 0.1 };
            (min - pad, max + pad)
        };
        let step = nice_step((max - min) / 5.0);
        let first = (min / step).floor();
        let last = (max / step).ceil();
        let decimals = decimals_for(step);
        let count = ((last - first).round() as i64).clamp(1, 50);
        let ticks = (0..=count)
            .map(|i| {
                let value = (first + i as f64) * step;
                Tick {
                    value,
                    label: Some(number(value, decimals)),
                }
            })
            .collect();
        Axis {
            kind: Kind::Linear,
            lo: first * step,
            hi: (first + count as f64) * step,
            ticks,
        }
    }

    /// A logarithmic axis (`0 < floor < max`) from the largest 1, 2 or 5 × 10^k at or below
    /// `floor` to the smallest at or above `max`. Over at most three decades 1, 2 and 5 are
    /// labelled; beyond, only the powers of ten, with 2 and 5 as minor ticks.
    fn log(floor: f64, max: f64) -> Axis {
        let lo = nice_below(floor);
        let hi = nice_above(max);
        let label_all = (hi / lo).log10() <= 3.0 + 1e-9;
        let (first, last) = (exponent(lo), exponent(hi));
        let mut ticks = Vec::new();
        for k in first..=last {
            for m in [1.0, 2.0, 5.0] {
                let value = m * 10f64.powi(k);
                if value < lo * (1.0 - 1e-9) || value > hi * (1.0 + 1e-9) {
                    continue;
                }
                let label = (label_all || m == 1.0).then(|| number(value, (-k).max(0) as usize));
                ticks.push(Tick { value, label });
            }
        }
        Axis {
            kind: Kind::Log { floor },
            lo,
            hi,
            ticks,
        }
    }
}

/// The k of the largest 10^k at or below `value` (> 0), safe against rounding in `log10`.
fn exponent(value: f64) -> i32 {
    let mut k = value.log10().floor() as i32;
    if 10f64.powi(k) > value * (1.0 + 1e-9) {
        k = k.saturating_sub(1);
    }
    if 10f64.powi(k.saturating_add(1)) <= value * (1.0 + 1e-9) {
        k = k.saturating_add(1);
    }
    k
}

/// The largest 1, 2 or 5 × 10^k at or below `value` (> 0).
fn nice_below(value: f64) -> f64 {
    let unit = 10f64.powi(exponent(value));
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * unit)
        .find(|v| *v <= value * (1.0 + 1e-9))
        .unwrap_or(unit)
}

/// The smallest 1, 2 or 5 × 10^k at or above `value` (> 0).
fn nice_above(value: f64) -> f64 {
    let unit = 10f64.powi(exponent(value));
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * unit)
        .find(|v| *v >= value * (1.0 - 1e-9))
        .unwrap_or(10.0 * unit)
}

/// The smallest 1, 2, 5 or 10 × 10^k at or above `raw` (> 0).
fn nice_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    nice_above(raw)
}

/// Enough digits after the point to tell ticks `step` apart.
fn decimals_for(step: f64) -> usize {
    (-exponent(step)).max(0) as usize
}

/// `value` with about two significant digits below 100, none after the point above, grouped
/// by thousands: `0.23`, `2.1`, `18.0`, `465`, `5,052`.
pub(super) fn short(value: f64) -> String {
    let size = value.abs();
    if size >= 100.0 || size == 0.0 {
        number(value, 0)
    } else if size >= 1.0 {
        number(value, 1)
    } else {
        number(value, (1 - exponent(size)).max(0) as usize)
    }
}
