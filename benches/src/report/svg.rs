//! Cancel-latency CDF plots as self-contained SVG: every series' empirical CDF on one chart
//! (y: the fraction of samples at or below x, stretched above 0.9 so the tail shows), the x
//! axis logarithmic when the samples span more than a factor of 20, dashed guides at p50 and
//! p99, and a legend with each series' p50 and p99.
//!
//! Hand-written: no fonts, stylesheets or scripts are referenced, so the file renders the same
//! in a browser, on GitHub and in an image viewer.

mod axis;
#[cfg(test)]
mod tests;

use super::{Cdf, number};
use axis::{Axis, short};

/// The document's width; its height grows with the legend.
const WIDTH: f64 = 720.0;
/// The plot area's left edge (the y axis' labels are left of it).
const LEFT: f64 = 64.0;
/// The plot area's top edge (the title is above it).
const TOP: f64 = 48.0;
/// The plot area's width; the guides' names are right of it.
const PLOT_WIDTH: f64 = 600.0;
/// The plot area's height.
const PLOT_HEIGHT: f64 = 300.0;
/// Where the legend starts, below the x axis' label.
const LEGEND_TOP: f64 = TOP + PLOT_HEIGHT + 72.0;
/// The height of one row of the legend.
const LEGEND_ROW: f64 = 20.0;
/// A point of a curve is kept only this far (in x plus y) from the last kept one. The CDF
/// rises and moves right monotonically, so a curve has at most
/// (PLOT_WIDTH + PLOT_HEIGHT) / MIN_STEP + 2 points, whatever its number of samples.
const MIN_STEP: f64 = 2.0;
/// The y axis is stretched toward the tail, where cancel latencies differ most: each pair is a
/// fraction of samples and the share of the plot's height below it, linear in between. The
/// slowest 10% get 40% of the height, the slowest 1% 15%.
const Y_SCALE: [(f64, f64); 4] = [(0.0, 0.0), (0.9, 0.6), (0.99, 0.85), (1.0, 1.0)];
/// The fractions marked on the y axis.
const Y_TICKS: [f64; 7] = [0.0, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0];
/// The fractions with a dashed guide line across the plot, and their names.
const GUIDES: [(f64, &str); 2] = [(0.5, "p50"), (0.99, "p99")];
/// The Okabe–Ito palette (without its yellow, too pale on white), told apart by colour-blind
/// readers; past the seventh series the colours repeat, dashed.
const COLOURS: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];
/// The dash patterns of the first seven series, the next seven, and so on.
const DASHES: [&str; 3] = ["", "8 4", "2 3"];

/// One series, ready to draw: its finite samples, sorted.
struct Series<'a> {
    name: &'a str,
    sorted: Vec<f64>,
}

impl Series<'_> {
    /// The `q` quantile, as the benchmarks' tables compute it (the sample at rank
    /// round((n - 1) q)); `None` without samples.
    fn quantile(&self, q: f64) -> Option<f64> {
        let last = self.sorted.len().checked_sub(1)?;
        self.sorted.get((last as f64 * q).round() as usize).copied()
    }
}

/// The plot of `cdf` as a standalone SVG document: one line per series with samples, all on
/// one chart, and a legend naming each series with its p50 / p99 (or "no samples"). NaN and
/// infinite samples are left out; on a logarithmic axis, zero and negative ones are drawn at
/// the smallest positive sample.
pub fn cdf(cdf: &Cdf) -> String {
    let series: Vec<Series<'_>> = cdf
        .series
        .iter()
        .map(|(name, samples)| {
            let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
            sorted.sort_by(f64::total_cmp);
            Series { name, sorted }
        })
        .collect();
    let x = x_axis(&series);
    let height = LEGEND_TOP + LEGEND_ROW * (series.len() as f64 + 1.0) + 8.0;

    let mut out = String::new();
    out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out += &format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\" \
         role=\"img\">\n"
    );
    out += &format!("<title>{}</title>\n", escape(&cdf.title));
    out += &format!("<rect width=\"{WIDTH}\" height=\"{height}\" fill=\"#ffffff\"/>\n");
    out += &format!(
        "<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
        WIDTH / 2.0,
        escape(&cdf.title)
    );
    grid(&mut out, &x);
    labels(&mut out, &x, &cdf.x_label);
    if series.iter().all(|s| s.sorted.is_empty()) {
        out += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555555\">no samples</text>\n",
            LEFT + PLOT_WIDTH / 2.0,
            TOP + PLOT_HEIGHT / 2.0
        );
    }
    for (i, s) in series.iter().enumerate() {
        if s.sorted.is_empty() {
            continue;
        }
        let points: Vec<String> = curve(&s.sorted, &x)
            .into_iter()
            .map(|(px, py)| format!("{px:.1},{py:.1}"))
            .collect();
        out += &format!(
            "<polyline fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\"{} points=\"{}\"/>\n",
            stroke(i),
            points.join(" ")
        );
    }
    legend(&mut out, &series, &unit(&cdf.x_label));
    out += "</svg>\n";
    out
}

/// The x axis for all the series' samples together (0 to 1 if there are none).
fn x_axis(series: &[Series<'_>]) -> Axis {
    let all = || series.iter().flat_map(|s| s.sorted.iter().copied());
    let min = all().reduce(f64::min);
    let max = all().reduce(f64::max);
    let min_positive = all().filter(|v| *v > 0.0).reduce(f64::min);
    match (min, max) {
        (Some(min), Some(max)) => Axis::for_samples(min, max, min_positive),
        _ => Axis::for_samples(0.0, 1.0, None),
    }
}

/// The pixel column of `value`.
fn px(x: &Axis, value: f64) -> f64 {
    LEFT + x.fraction(value) * PLOT_WIDTH
}

/// The pixel row of the fraction `f` (0 at the bottom, 1 at the top), on the [`Y_SCALE`].
fn py(f: f64) -> f64 {
    let f = f.clamp(0.0, 1.0);
    let mut height = 1.0;
    for pair in Y_SCALE.windows(2) {
        let ((f0, h0), (f1, h1)) = (pair[0], pair[1]);
        if f <= f1 {
            height = h0 + (f - f0) / (f1 - f0) * (h1 - h0);
            break;
        }
    }
    TOP + (1.0 - height) * PLOT_HEIGHT
}

/// The empirical CDF of `sorted` (not empty) as a step line in pixels, thinned to points at
/// least [`MIN_STEP`] apart; the first point (lowest sample, 0) and the last (highest sample, 1)
/// are always kept, so the tail reaches as far right as the slowest sample.
fn curve(sorted: &[f64], x: &Axis) -> Vec<(f64, f64)> {
    let n = sorted.len() as f64;
    let first = (px(x, sorted[0]), py(0.0));
    let mut points = vec![first];
    let mut last = first;
    let mut keep = |point: (f64, f64)| {
        if (point.0 - last.0).abs() + (point.1 - last.1).abs() >= MIN_STEP {
            points.push(point);
            last = point;
        }
    };
    for (i, &value) in sorted.iter().enumerate() {
        let column = px(x, value);
        keep((column, py(i as f64 / n)));
        keep((column, py((i + 1) as f64 / n)));
    }
    let end = (px(x, sorted[sorted.len() - 1]), py(1.0));
    if points.last() != Some(&end) {
        points.push(end);
    }
    points
}

/// The frame, grid lines, ticks and their labels, and the dashed p50 / p99 guides.
fn grid(out: &mut String, x: &Axis) {
    let (right, bottom) = (LEFT + PLOT_WIDTH, TOP + PLOT_HEIGHT);
    for tick in &x.ticks {
        let at = px(x, tick.value);
        let (colour, length) = if tick.label.is_some() {
            ("#dddddd", 6.0)
        } else {
            ("#f0f0f0", 3.0)
        };
        *out += &format!(
            "<line x1=\"{at:.1}\" y1=\"{TOP}\" x2=\"{at:.1}\" y2=\"{bottom}\" stroke=\"{colour}\"/>\n\
             <line x1=\"{at:.1}\" y1=\"{bottom}\" x2=\"{at:.1}\" y2=\"{:.1}\" stroke=\"#333333\"/>\n",
            bottom + length
        );
        if let Some(label) = &tick.label {
            *out += &format!(
                "<text x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
                bottom + 20.0,
                escape(label)
            );
        }
    }
    for f in Y_TICKS {
        let at = py(f);
        *out += &format!(
            "<line x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{right}\" y2=\"{at:.1}\" stroke=\"#dddddd\"/>\n\
             <line x1=\"{:.1}\" y1=\"{at:.1}\" x2=\"{LEFT}\" y2=\"{at:.1}\" stroke=\"#333333\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            LEFT - 6.0,
            LEFT - 9.0,
            at + 4.0,
            f // 0, 0.25, ..., 1: the shortest form is the right one
        );
    }
    for (f, name) in GUIDES {
        let at = py(f);
        *out += &format!(
            "<line x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{right}\" y2=\"{at:.1}\" stroke=\"#777777\" \
             stroke-dasharray=\"5 4\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555555\">{name}</text>\n",
            right + 6.0,
            at + 4.0
        );
    }
    *out += &format!(
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{PLOT_WIDTH}\" height=\"{PLOT_HEIGHT}\" \
         fill=\"none\" stroke=\"#333333\"/>\n"
    );
}

/// The axes' labels: `x_label` (saying whether the scale is logarithmic) and the y axis'.
fn labels(out: &mut String, x: &Axis, x_label: &str) {
    let scale = match x.kind {
        axis::Kind::Log { .. } => ", log scale",
        axis::Kind::Linear => "",
    };
    *out += &format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}{scale}</text>\n",
        LEFT + PLOT_WIDTH / 2.0,
        TOP + PLOT_HEIGHT + 44.0,
        escape(x_label)
    );
    let (cx, cy) = (18.0, TOP + PLOT_HEIGHT / 2.0);
    *out += &format!(
        "<text x=\"{cx}\" y=\"{cy:.1}\" text-anchor=\"middle\" \
         transform=\"rotate(-90 {cx} {cy:.1})\">fraction of samples ≤ x (tail stretched)</text>\n"
    );
}

/// One row per series: a sample of its line, its name, and its p50 / p99 and sample count.
fn legend(out: &mut String, series: &[Series<'_>], unit: &str) {
    // No font metrics here: a column wide enough for the longest name at ~7 px a character.
    let longest = series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    let name_x = LEFT + 32.0;
    let figures_x = name_x + (longest as f64 * 7.0 + 16.0).max(80.0);
    if !series.is_empty() {
        *out += &format!(
            "<text x=\"{figures_x:.1}\" y=\"{LEGEND_TOP:.1}\" fill=\"#555555\">p50 / p99</text>\n"
        );
    }
    for (i, s) in series.iter().enumerate() {
        let y = LEGEND_TOP + LEGEND_ROW * (i as f64 + 1.0);
        let figures = match (s.quantile(0.5), s.quantile(0.99)) {
            (Some(p50), Some(p99)) => format!(
                "{} / {}{unit} <tspan fill=\"#555555\">(n = {})</tspan>",
                short(p50),
                short(p99),
                number(s.sorted.len() as f64, 0)
            ),
            _ => "<tspan fill=\"#555555\">no samples</tspan>".to_owned(),
        };
        *out += &format!(
            "<line x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke-width=\"3\"{}/>\n\
             <text x=\"{name_x:.1}\" y=\"{y:.1}\">{}</text>\n\
             <text x=\"{figures_x:.1}\" y=\"{y:.1}\">{figures}</text>\n",
            y - 4.0,
            LEFT + 24.0,
            y - 4.0,
            stroke(i),
            escape(s.name)
        );
    }
}

/// The stroke attributes of series `i`: its colour, and a dash pattern once colours repeat.
fn stroke(i: usize) -> String {
    let colour = COLOURS[i % COLOURS.len()];
    match DASHES[(i / COLOURS.len()) % DASHES.len()] {
        "" => format!(" stroke=\"{colour}\""),
        dashes => format!(" stroke=\"{colour}\" stroke-dasharray=\"{dashes}\""),
    }
}

/// The unit at the end of an axis label, as `" µs"` for `cancel -> stopped (µs)`; empty
/// without one. Escaped for XML.
fn unit(x_label: &str) -> String {
    x_label
        .trim_end()
        .strip_suffix(')')
        .and_then(|rest| rest.rsplit_once('('))
        .map(|(_, unit)| unit.trim())
        .filter(|unit| !unit.is_empty())
        .map(|unit| format!(" {}", escape(unit)))
        .unwrap_or_default()
}

/// `text` with the characters XML gives a meaning escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out += "&amp;",
            '<' => out += "&lt;",
            '>' => out += "&gt;",
            '"' => out += "&quot;",
            '\'' => out += "&apos;",
            c => out.push(c),
        }
    }
    out
}
