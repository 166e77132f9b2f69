//! `cargo xtask survey --readme`: the table, on the guide's survey page (`docs/src/survey.md`), of what the real ACP agents do with
//! cancellation, rendered from the reports of the last survey (`target/survey/AGENT-MODE.json`)
//! without running any agent, between `<!-- survey:acp:begin -->` and `<!-- survey:acp:end -->`.
//! Every cell is a verdict of `cancelkit check acp` as it was reached; the details of every
//! outcome that is not a plain pass are listed under the table, as the check wrote them.

#[path = "../../../benches/src/report/readme/blocks.rs"]
mod blocks;

use std::path::Path;

use serde_json::Value;

use super::agents::Agent;
use super::mock::Mode;

/// The block's kind and name in the survey page's markers.
const KIND: &str = "survey";
const NAME: &str = "acp";

/// One survey run's report.
pub struct Run {
    /// The agent.
    pub agent: Agent,
    /// The mock's mode.
    pub mode: Mode,
    /// `cancelkit check acp --json`'s report.
    pub report: Value,
}

/// Reads every run's report from `out`; an error naming the ones missing.
pub fn load(out: &Path) -> Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    let mut missing = Vec::new();
    for agent in Agent::ALL {
        for mode in Mode::ALL {
            let file = out.join(format!("{}-{}.json", agent.name(), mode.name()));
            match std::fs::read(&file) {
                Ok(bytes) => {
                    let report = serde_json::from_slice(&bytes)
                        .map_err(|e| format!("{} is not a report: {e}", file.display()))?;
                    runs.push(Run {
                        agent,
                        mode,
                        report,
                    });
                }
                Err(_) => missing.push(file.display().to_string()),
            }
        }
    }
    if missing.is_empty() {
        Ok(runs)
    } else {
        Err(format!(
            "no survey report in {}: run `cargo xtask survey` first",
            missing.join(", ")
        ))
    }
}

/// A check's result in `report`, with its detail.
fn outcome<'a>(report: &'a Value, id: &str) -> Option<(&'a str, &'a str)> {
    let check = report["checks"]
        .as_array()?
        .iter()
        .find(|c| c["id"] == id)?;
    Some((check["result"].as_str()?, check["detail"].as_str()?))
}

/// How a result reads in a cell.
fn word(result: &str) -> &str {
    match result {
        "fail" => "**fail**",
        "not_applicable" => "n/a",
        other => other,
    }
}

/// The block: one row per check id (in the order the check reports them), one column per
/// agent with its two modes, then the details of what did not plainly pass.
pub fn render(runs: &[Run], versions: &Value) -> String {
    let ids: Vec<&str> = runs
        .first()
        .and_then(|r| r.report["checks"].as_array())
        .map(|checks| checks.iter().filter_map(|c| c["id"].as_str()).collect())
        .unwrap_or_default();
    let modes: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
    let mut header = vec!["check".to_owned()];
    for agent in Agent::ALL {
        let package = agent.package();
        let version = versions[package].as_str().unwrap_or("?");
        header.push(format!("{package} {version}: {}", modes.join(" / ")));
    }
    let mut lines = vec![
        format!("| {} |", header.join(" | ")),
        format!("|{}", "---|".repeat(header.len())),
    ];
    let mut notes = Vec::new();
    for id in &ids {
        let mut row = vec![format!("`{id}`")];
        for agent in Agent::ALL {
            let cells: Vec<&str> = Mode::ALL
                .iter()
                .map(|mode| {
                    let run = runs.iter().find(|r| r.agent == agent && r.mode == *mode);
                    match run.and_then(|r| outcome(&r.report, id)) {
                        Some((result, detail)) => {
                            let plain = result == "pass" || detail.contains("did not declare");
                            if !plain {
                                notes.push(format!(
                                    "- {}, {} mode, `{id}` ({}): {}",
                                    agent.package(),
                                    mode.name(),
                                    word(result),
                                    detail.replace('|', "\\|")
                                ));
                            }
                            word(result)
                        }
                        None => "—",
                    }
                })
                .collect();
            row.push(cells.join(" / "));
        }
        lines.push(format!("| {} |", row.join(" | ")));
    }
    let mut block = lines.join("\n");
    if !notes.is_empty() {
        block.push_str("\n\nWhat the check wrote for each outcome that is not a plain pass:\n\n");
        block.push_str(&notes.join("\n"));
    }
    block
}

/// Renders the block into `readme` from the reports in `out`, with the pinned versions of
/// `package_json`.
pub fn update(readme: &Path, out: &Path, package_json: &Path) -> Result<(), String> {
    let runs = load(out)?;
    let package: Value = std::fs::read(package_json)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| format!("cannot read {}", package_json.display()))?;
    let text = std::fs::read_to_string(readme)
        .map_err(|e| format!("cannot read {}: {e}", readme.display()))?;
    let block = render(&runs, &package["dependencies"]);
    let new_text = blocks::splice(&text, KIND, NAME, &block)?;
    std::fs::write(readme, new_text).map_err(|e| format!("cannot write {}: {e}", readme.display()))
}
