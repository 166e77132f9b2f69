//! What every benchmark reports, the same way: tables of figures (each the median of the rounds
//! with the min–max beside it), the targets and whether they are met, cancel-latency CDF plots,
//! and the raw data. [`Report::finish`] prints it and writes `target/bench/NAME.json` (and the
//! plots as `target/bench/NAME-PLOT.svg`); `cargo xtask bench --readme` renders the README's
//! tables from those files.

pub mod machine;
pub mod readme;
pub mod svg;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One figure over the rounds of a benchmark: its median and the smallest and largest round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The median of the rounds (the upper median for an even count).
    pub median: f64,
    /// The smallest round.
    pub min: f64,
    /// The largest round.
    pub max: f64,
}

impl Spread {
    /// The spread of `rounds` (one value per round). Panics on an empty slice: a figure
    /// without a round is a bug in the benchmark.
    pub fn of(rounds: &[f64]) -> Spread {
        assert!(!rounds.is_empty(), "a figure needs at least one round");
        let mut sorted = rounds.to_vec();
        sorted.sort_by(f64::total_cmp);
        Spread {
            median: sorted[sorted.len() / 2],
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        }
    }

    /// `median (min–max)` with `decimals` digits after the point and thousands separators.
    pub fn show(&self, decimals: usize) -> String {
        format!(
            "{} ({}–{})",
            number(self.median, decimals),
            number(self.min, decimals),
            number(self.max, decimals)
        )
    }
}

/// `value` with `decimals` digits after the point and a comma between thousands.
pub fn number(value: f64, decimals: usize) -> String {
    if !value.is_finite() {
        return "—".into();
    }
    let text = format!("{:.*}", decimals, value.abs());
    let (whole, fraction) = match text.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (text.as_str(), None),
    };
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let sign = if value < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    match fraction {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// A ratio such as `0.44×`.
pub fn ratio(ours: f64, theirs: f64) -> String {
    format!("{:.2}×", ours / theirs)
}

/// One table: a header row and rows of already formatted cells, with notes printed under it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Table {
    /// A line printed above the table (may be empty).
    pub title: String,
    /// The column headings.
    pub header: Vec<String>,
    /// The rows, each as many cells as the header.
    pub rows: Vec<Vec<String>>,
    /// Footnotes, printed (and rendered in the README) under the table.
    pub notes: Vec<String>,
}

impl Table {
    /// A table with `header` and no rows yet.
    pub fn new(title: impl Into<String>, header: &[&str]) -> Table {
        Table {
            title: title.into(),
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Adds a row; panics if it has a different number of cells than the header.
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.header.len(),
            "a row of table `{}` has the wrong number of cells",
            self.title
        );
        self.rows.push(cells);
    }

    /// Adds a footnote.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Prints the table, aligned, to standard output.
    pub fn print(&self) {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        if !self.title.is_empty() {
            println!("\n{}\n", self.title);
        } else {
            println!();
        }
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (i, cell) in cells.iter().enumerate() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                if i == 0 {
                    out.push_str(&format!("| {cell}{} ", " ".repeat(pad)));
                } else {
                    out.push_str(&format!("| {}{cell} ", " ".repeat(pad)));
                }
            }
            out.push('|');
            println!("{out}");
        };
        line(&self.header);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule);
        for row in &self.rows {
            line(row);
        }
        for note in &self.notes {
            println!("  {note}");
        }
    }
}

/// A target of the benchmark's issue, what was measured against it, and the verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Target {
    /// What the target asks, e.g. `cancel p99 <= 0.5x the better peer (in-memory, current-thread)`.
    pub name: String,
    /// What was measured, e.g. `2.8 us = 0.44x`.
    pub measured: String,
    /// Whether the target is met.
    pub met: bool,
}

/// One cumulative-distribution plot: latency samples of several stacks in one scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cdf {
    /// A short file-name-safe identifier, unique within the report (`idle-duplex-current`).
    pub slug: String,
    /// The chart's title.
    pub title: String,
    /// The x axis' label, e.g. `cancel -> handler stopped (µs)`.
    pub x_label: String,
    /// One series per stack: its name and its samples (any order; all rounds together).
    pub series: Vec<(String, Vec<f64>)>,
}

/// Everything one benchmark reports.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// The benchmark's name (`peer`, `rap`, ...): the JSON is `target/bench/NAME.json`.
    pub name: String,
    /// A paragraph saying what was measured and how (rendered above the tables).
    pub description: String,
    /// The tables, in order.
    pub tables: Vec<Table>,
    /// The targets and their verdicts.
    pub targets: Vec<Target>,
    /// The plots (written as SVG beside the JSON; the JSON keeps only their slugs and titles).
    #[serde(skip)]
    pub cdfs: Vec<Cdf>,
    /// The plots' file names, filled in by [`Report::finish`].
    pub plots: Vec<Plot>,
    /// The slugs of the plots the README shows (`None`: all of them); the others are only
    /// written under `target/bench/`.
    #[serde(skip)]
    pub readme_plots: Option<Vec<String>>,
    /// The machine the run was on (filled in by [`Report::finish`]).
    pub machine: Option<machine::Machine>,
    /// The UTC date and time of the run, RFC 3339 (filled in by [`Report::finish`]).
    pub date: String,
    /// The raw measurements, for anyone who wants more than the tables.
    pub data: Value,
}

/// A plot written beside the JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plot {
    /// The SVG's file name, relative to `target/bench/`.
    pub file: String,
    /// The chart's title.
    pub title: String,
    /// Whether the README shows it.
    #[serde(default = "shown")]
    pub readme: bool,
}

fn shown() -> bool {
    true
}

impl Report {
    /// An empty report named `name`.
    pub fn new(name: &str, description: impl Into<String>) -> Report {
        Report {
            name: name.to_owned(),
            description: description.into(),
            ..Report::default()
        }
    }

    /// Adds a target and its verdict.
    pub fn target(&mut self, name: impl Into<String>, measured: impl Into<String>, met: bool) {
        self.targets.push(Target {
            name: name.into(),
            measured: measured.into(),
            met,
        });
    }

    /// Prints the tables and targets, writes the plots and `target/bench/NAME.json`.
    pub fn finish(self) {
        self.finish_in(&bench_dir());
    }

    /// [`Report::finish`], writing the plots and the JSON into `dir` (a short run's, kept out
    /// of `target/bench/` and so out of the README).
    pub fn finish_in(mut self, dir: &std::path::Path) {
        self.machine = Some(machine::Machine::this());
        self.date = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        println!("\n{}", self.description);
        for table in &self.tables {
            table.print();
        }
        if !self.targets.is_empty() {
            println!();
        }
        for target in &self.targets {
            let verdict = if target.met { "met" } else { "MISSED" };
            println!("target: {}: {}: {verdict}", target.name, target.measured);
        }
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("could not create {}: {e}", dir.display());
            return;
        }
        for cdf in std::mem::take(&mut self.cdfs) {
            let file = format!("{}-{}.svg", self.name, cdf.slug);
            let path = dir.join(&file);
            match std::fs::write(&path, svg::cdf(&cdf)) {
                Ok(()) => println!("plot {}", path.display()),
                Err(e) => eprintln!("could not write {}: {e}", path.display()),
            }
            let readme = self
                .readme_plots
                .as_ref()
                .is_none_or(|slugs| slugs.contains(&cdf.slug));
            self.plots.push(Plot {
                file,
                title: cdf.title,
                readme,
            });
        }
        let path = dir.join(format!("{}.json", self.name));
        let text = serde_json::to_string_pretty(&self).expect("a report serializes");
        match std::fs::write(&path, text) {
            Ok(()) => println!("\nsaved {}", path.display()),
            Err(e) => eprintln!("\ncould not save {}: {e}", path.display()),
        }
    }
}

/// `target/bench/` (or `CANCELKIT_BENCH_DIR`), where reports and plots are written.
pub fn bench_dir() -> PathBuf {
    std::env::var_os("CANCELKIT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("bench"))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_dir().join("target"))
}

/// The workspace's root (where README.md is).
pub fn workspace_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_is_the_median_and_the_extremes_of_the_rounds() {
        let spread = Spread::of(&[3.0, 1.0, 2.0, 10.0, 4.0]);
        assert_eq!(
            spread,
            Spread {
                median: 3.0,
                min: 1.0,
                max: 10.0
            }
        );
        assert_eq!(spread.show(1), "3.0 (1.0–10.0)");
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(number(326_700.4, 0), "326,700");
        assert_eq!(number(1234.5, 1), "1,234.5");
        assert_eq!(number(999.0, 0), "999");
        assert_eq!(number(-1234.0, 0), "-1,234");
        assert_eq!(number(f64::NAN, 0), "—");
    }
}
