//! `cargo xtask bench --readme`: the benchmark sections of the guide's performance page
//! ([`PAGE`]) rendered from `target/bench/*.json`, without running any benchmark.
//!
//! Each report has a block in the page between `<!-- bench:NAME:begin -->` and
//! `<!-- bench:NAME:end -->`; everything between the two markers is replaced by [`render`]'s
//! output, and the report's plots are copied next to the page ([`PLOTS`]) so it can show them.
//! The figures in the guide are thus only ever those of a run, with its machine and date. (The
//! functions say "readme" for the page they write: any markdown file with the markers will do.)

#[cfg(test)]
mod tests;

pub mod blocks;

/// The guide's page that holds the benchmark blocks, relative to the workspace root.
pub const PAGE: &str = "docs/src/performance.md";

/// Where `--readme` copies the plots the page shows, relative to the workspace root.
pub const PLOTS: &str = "docs/src/bench";

/// The marker kind of the benchmark blocks: `<!-- bench:NAME:begin -->`.
const KIND: &str = "bench";

use std::path::{Component, Path, PathBuf};

use super::{Report, Table};

/// Where [`render`] links the plots, relative to the README.
#[allow(dead_code)] // render is what the tests and other callers use; update links by path
const DOCS_LINK: &str = "docs/bench";

/// The README block of `report`: its description, the machine and date of the run, each table
/// (title, GitHub table, notes), the targets with their verdicts, and the plots as images under
/// `docs/bench/`.
#[allow(dead_code)] // update_readme renders with the link it works out from the paths
pub fn render(report: &Report) -> String {
    render_linking(report, DOCS_LINK)
}

/// [`render`], with the plots linked under `docs` (relative to the README, `/`-separated).
fn render_linking(report: &Report, docs: &str) -> String {
    let mut paragraphs = Vec::new();
    if !report.description.trim().is_empty() {
        paragraphs.push(report.description.trim().to_owned());
    }
    paragraphs.push(measured_on(report));
    for table in &report.tables {
        paragraphs.extend(render_table(table));
    }
    if !report.targets.is_empty() {
        let lines: Vec<String> = report
            .targets
            .iter()
            .map(|t| {
                let verdict = if t.met { "**met**" } else { "**MISSED**" };
                format!("- {}: {} — {verdict}", t.name, t.measured)
            })
            .collect();
        paragraphs.push(lines.join("\n"));
    }
    for plot in report.plots.iter().filter(|p| p.readme) {
        paragraphs.push(format!(
            "![{}]({docs}/{})",
            plot.title.replace('[', "\\[").replace(']', "\\]"),
            plot.file.replace(' ', "%20")
        ));
    }
    paragraphs.join("\n\n")
}

/// `Measured on 2 cores of ..., 2026-11-23 20:16 UTC.`
fn measured_on(report: &Report) -> String {
    let machine = match &report.machine {
        Some(machine) => machine.describe(),
        None => "an unrecorded machine".to_owned(),
    };
    match humantime::parse_rfc3339_weak(&report.date) {
        Ok(time) => {
            let utc = humantime::format_rfc3339_seconds(time).to_string();
            format!(
                "Measured on {machine}, {} {} UTC.",
                &utc[..10],
                &utc[11..16]
            )
        }
        Err(_) if report.date.trim().is_empty() => format!("Measured on {machine}."),
        Err(_) => format!("Measured on {machine}, {}.", report.date.trim()),
    }
}

/// The paragraphs of one table: its title in bold (if any), the table, and its notes.
fn render_table(table: &Table) -> Vec<String> {
    let mut paragraphs = Vec::new();
    if !table.title.trim().is_empty() {
        paragraphs.push(format!("**{}**", table.title.trim()));
    }
    if !table.header.is_empty() {
        let width = table.header.len();
        let row = |cells: &[String]| {
            let cells: Vec<String> = (0..width)
                .map(|i| cell(cells.get(i).map_or("", String::as_str)))
                .collect();
            format!("| {} |", cells.join(" | "))
        };
        let rule: Vec<&str> = (0..width)
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        let mut lines = vec![row(&table.header), format!("|{}|", rule.join("|"))];
        lines.extend(table.rows.iter().map(|r| row(r)));
        paragraphs.push(lines.join("\n"));
    }
    if !table.notes.is_empty() {
        paragraphs.push(table.notes.join("\n"));
    }
    paragraphs
}

/// A cell made safe for a GitHub table: `|` escaped, line breaks as spaces.
fn cell(text: &str) -> String {
    text.trim().replace('|', "\\|").replace(['\r', '\n'], " ")
}

/// The markers around `name`'s block.
fn markers(name: &str) -> (String, String) {
    blocks::markers(KIND, name)
}

/// The range of `text` between `name`'s markers.
fn block_range(text: &str, name: &str) -> Result<std::ops::Range<usize>, String> {
    blocks::block_range(text, KIND, name)
}

/// `readme_text` with everything between `name`'s markers replaced by `block` (see
/// [`blocks::splice`]).
pub fn splice(readme_text: &str, name: &str, block: &str) -> Result<String, String> {
    blocks::splice(readme_text, KIND, name, block)
}

/// The names of the README's blocks (those with a begin marker), in order, each once.
fn block_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for rest in text.split("<!-- bench:").skip(1) {
        let Some((name, _)) = rest.split_once(":begin -->") else {
            continue;
        };
        if !name.contains(char::is_whitespace) && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// What [`update`] did.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// The reports whose blocks were rendered, by name.
    updated: Vec<String>,
    /// The README's blocks without a report, left as they were.
    left: Vec<String>,
}

/// Renders every report of `bench_dir` (`*.json`, as written by [`Report::finish`]) into its
/// block of `readme`, copies its plots into `docs_dir` (which must be inside the README's
/// directory), and returns the names of the blocks rendered. Nothing is written unless every
/// report parses and has its two markers in the README. Blocks without a report are left as
/// they are, with a warning on standard error.
pub fn update_readme(
    readme: &Path,
    bench_dir: &Path,
    docs_dir: &Path,
) -> Result<Vec<String>, String> {
    let outcome = update(readme, bench_dir, docs_dir)?;
    if !outcome.left.is_empty() {
        eprintln!(
            "warning: no report in {} for the README's {} block(s), left as they were",
            bench_dir.display(),
            outcome.left.join(", ")
        );
    }
    Ok(outcome.updated)
}

/// [`update_readme`], telling which blocks were left.
fn update(readme: &Path, bench_dir: &Path, docs_dir: &Path) -> Result<Outcome, String> {
    let text = std::fs::read_to_string(readme)
        .map_err(|e| format!("cannot read {}: {e}", readme.display()))?;
    let reports = load_reports(bench_dir)?;
    let blocks = block_names(&text);
    let unplaced: Vec<String> = reports
        .iter()
        .filter(|r| !blocks.contains(&r.name))
        .map(|r| {
            let (begin, end) = markers(&r.name);
            format!("`{begin}` and `{end}`")
        })
        .collect();
    if !unplaced.is_empty() {
        return Err(format!(
            "{} has reports without a place: add {} where their tables go",
            readme.display(),
            unplaced.join(", ")
        ));
    }
    let link = docs_link(readme, docs_dir)?;
    let mut new_text = text.clone();
    let mut copies = Vec::new();
    let mut old_plots = Vec::new();
    for report in &reports {
        let range = block_range(&new_text, &report.name)?;
        old_plots.extend(linked_plots(&new_text[range], &link));
        new_text = splice(&new_text, &report.name, &render_linking(report, &link))?;
        for plot in report.plots.iter().filter(|p| p.readme) {
            let source = bench_dir.join(&plot.file);
            if !is_plain_file_name(&plot.file) || !source.is_file() {
                return Err(format!(
                    "{} lists the plot `{}`, which is not in {}",
                    bench_dir.join(format!("{}.json", report.name)).display(),
                    plot.file,
                    bench_dir.display()
                ));
            }
            copies.push((source, docs_dir.join(&plot.file)));
        }
    }
    if !copies.is_empty() {
        std::fs::create_dir_all(docs_dir)
            .map_err(|e| format!("cannot create {}: {e}", docs_dir.display()))?;
    }
    for (source, target) in &copies {
        std::fs::copy(source, target).map_err(|e| {
            format!(
                "cannot copy {} to {}: {e}",
                source.display(),
                target.display()
            )
        })?;
    }
    // Plots the README showed and shows no more (a renamed or dropped plot) go too.
    let shown = linked_plots(&new_text, &link);
    for file in old_plots {
        if !shown.contains(&file) {
            let path = docs_dir.join(&file);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
            }
        }
    }
    if new_text != text {
        std::fs::write(readme, &new_text)
            .map_err(|e| format!("cannot write {}: {e}", readme.display()))?;
    }
    let updated: Vec<String> = reports.into_iter().map(|r| r.name).collect();
    let left = blocks
        .into_iter()
        .filter(|name| !updated.contains(name))
        .collect();
    Ok(Outcome { updated, left })
}

/// Every `*.json` of `dir` as a report, by file name. An error naming each file that is not a
/// report, or whose report has another name.
fn load_reports(dir: &Path) -> Result<Vec<Report>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "cannot read {}: {e}; run `cargo xtask bench` first",
            dir.display()
        )
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json") && path.is_file())
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(format!(
            "no reports (*.json) in {}; run `cargo xtask bench` first",
            dir.display()
        ));
    }
    let mut reports = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        let stem = path.file_stem().unwrap_or_default().to_string_lossy();
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Report>(&text).map_err(|e| e.to_string()));
        match parsed {
            Ok(report) if report.name == stem => reports.push(report),
            Ok(report) => errors.push(format!(
                "{} holds the report `{}`, not `{stem}`",
                path.display(),
                report.name
            )),
            Err(e) => errors.push(format!(
                "{} is not a benchmark report ({e}); run `cargo xtask bench {stem}` again, \
                 or delete it",
                path.display()
            )),
        }
    }
    if errors.is_empty() {
        Ok(reports)
    } else {
        Err(errors.join("\n"))
    }
}

/// `docs_dir` relative to the README's directory, `/`-separated, for links in the README.
fn docs_link(readme: &Path, docs_dir: &Path) -> Result<String, String> {
    let home = readme.parent().unwrap_or(Path::new(""));
    let relative = docs_dir.strip_prefix(home).map_err(|_| {
        format!(
            "{} is not inside {}, so the README cannot show the plots copied there",
            docs_dir.display(),
            home.display()
        )
    })?;
    let parts: Vec<String> = relative
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.is_empty() {
        Ok(".".to_owned())
    } else {
        Ok(parts.join("/"))
    }
}

/// The plot files that `text` shows from under `link`.
fn linked_plots(text: &str, link: &str) -> Vec<String> {
    let opening = format!("]({link}/");
    text.match_indices(&opening)
        .filter_map(|(at, _)| text[at + opening.len()..].split_once(')'))
        .map(|(file, _)| file.replace("%20", " "))
        .filter(|file| is_plain_file_name(file))
        .collect()
}

/// Whether `file` names a file directly in its directory (no path, nothing hidden).
fn is_plain_file_name(file: &str) -> bool {
    !file.is_empty() && !file.starts_with('.') && !file.contains(['/', '\\'])
}
