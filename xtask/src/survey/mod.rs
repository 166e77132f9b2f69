//! `cargo xtask survey`: runs `cancelkit check acp` against three real ACP agents (codex-acp,
//! gemini-cli `--acp`, claude-agent-acp), offline: each talks to a mock of its model API on
//! 127.0.0.1, in two modes (a slow streamed answer; a tool call that needs the client's
//! permission). Writes `target/survey/AGENT-MODE.json` (the check's report), `.stderr` (the
//! agent's), `.out` (the check's own output) and `.mock.json` (what the mock received).
//!
//! `cargo xtask survey serve AGENT MODE` starts one mock and one configured home and prints the
//! command that runs the agent against it, to drive it by hand with raw JSON-RPC.
//!
//! `cargo xtask survey --readme` renders the table of the agents' outcomes on the guide's survey
//! page (`docs/src/survey.md`) from the last survey's reports ([`readme`]), running nothing.

mod agents;
mod anthropic;
mod gemini;
mod install;
mod mock;
mod openai;
mod readme;
mod run;
#[cfg(test)]
mod tests;

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Instant;

use agents::Agent;
use mock::{Mock, Mode};
use run::{Outcome, Paths};

/// Runs the survey (`[AGENT|MODE...]` narrows it) or `serve AGENT MODE`.
pub fn main(args: &[&str]) -> Result<(), String> {
    if let ["serve", agent, mode] = args {
        return serve(agent_named(agent)?, mode_named(mode)?);
    }
    if let ["--readme"] = args {
        let root = crate::project_root();
        let readme = root.join("docs").join("src").join("survey.md");
        let package = root.join("xtask").join("survey").join("package.json");
        readme::update(&readme, &target_dir().join("survey"), &package)?;
        println!(
            "survey: rendered the agents' table into {}",
            readme.display()
        );
        return Ok(());
    }
    let mut agents = Vec::new();
    let mut modes = Vec::new();
    for arg in args {
        match (Agent::from_name(arg), mode_named(arg)) {
            (Some(agent), _) => agents.push(agent),
            (None, Ok(mode)) => modes.push(mode),
            (None, Err(_)) => return Err(format!("survey: unknown agent or mode {arg:?}")),
        }
    }
    if agents.is_empty() {
        agents = Agent::ALL.to_vec();
    }
    if modes.is_empty() {
        modes = Mode::ALL.to_vec();
    }
    let paths = prepare()?;
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for agent in &agents {
        for mode in &modes {
            println!("survey: {} in {} mode", agent.name(), mode.name());
            let outcome = run::run(*agent, *mode, &paths)?;
            println!("  {}", summary(&outcome, &paths));
            outcomes.push(outcome);
        }
    }
    println!(
        "\nsurvey: {} runs in {:.0?}",
        outcomes.len(),
        started.elapsed()
    );
    for outcome in &outcomes {
        println!("{}", summary(outcome, &paths));
    }
    let unreached: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.records.iter().any(mock::Record::is_turn))
        .map(|o| format!("{}-{}", o.agent.name(), o.mode.name()))
        .collect();
    if unreached.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the agent never asked the mock for a model turn in {}",
            unreached.join(", ")
        ))
    }
}

/// Installs the agents and builds the cli; returns where everything is.
fn prepare() -> Result<Paths, String> {
    let target = target_dir();
    let node = install::install(&crate::project_root(), &target)?;
    let built = crate::cargo()
        .args(["build", "--locked", "--package", "cancelkit-cli"])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !built.success() {
        return Err(format!("building cancelkit-cli exited with {built}"));
    }
    let out = target.join("survey");
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    Ok(Paths {
        cancelkit: target.join("debug").join("cancelkit"),
        node,
        out,
    })
}

/// The cargo target directory (`CARGO_TARGET_DIR` or the workspace's `target`).
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => crate::project_root().join(dir),
        _ => crate::project_root().join("target"),
    }
}

fn agent_named(name: &str) -> Result<Agent, String> {
    Agent::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Agent::ALL.iter().map(|a| a.name()).collect();
        format!("unknown agent {name:?} (one of {})", names.join(", "))
    })
}

fn mode_named(name: &str) -> Result<Mode, String> {
    Mode::ALL
        .into_iter()
        .find(|m| m.name() == name)
        .ok_or_else(|| format!("unknown mode {name:?} (slow or permission)"))
}

/// One line about a run: how the check exited, how long it took, what the mock received.
fn summary(outcome: &Outcome, paths: &Paths) -> String {
    let exit = outcome.exit.map_or_else(
        || "killed at the deadline".to_owned(),
        |c| format!("exit {c}"),
    );
    let mut answers: Vec<(&str, usize)> = Vec::new();
    for record in &outcome.records {
        match answers.iter_mut().find(|(a, _)| *a == record.answer) {
            Some((_, n)) => *n += 1,
            None => answers.push((record.answer, 1)),
        }
    }
    let answers: Vec<String> = answers.iter().map(|(a, n)| format!("{n} {a}")).collect();
    let cut = outcome.records.iter().filter(|r| r.cut).count();
    let verdict = std::fs::read(paths.out.join(format!(
        "{}-{}.json",
        outcome.agent.name(),
        outcome.mode.name()
    )))
    .ok()
    .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    .and_then(|report| report["verdict"].as_str().map(str::to_owned))
    .unwrap_or_else(|| "no report".to_owned());
    let mut line = format!(
        "{:<7} {:<11} {exit}, {verdict}, {:.1} s; mock: {} requests ({}), {cut} streams cut; {} processes left over",
        outcome.agent.name(),
        outcome.mode.name(),
        outcome.took.as_secs_f64(),
        outcome.records.len(),
        answers.join(", "),
        outcome.leftovers.len(),
    );
    for process in &outcome.leftovers {
        line.push_str(&format!("\n    left over (ended): {process}"));
    }
    line
}

/// Starts the mock and a configured home, prints the agent's command line, and serves until
/// standard input ends (or a line is entered); then prints what the mock received.
fn serve(agent: Agent, mode: Mode) -> Result<(), String> {
    let target = target_dir();
    let node = install::install(&crate::project_root(), &target)?;
    let mock = Mock::start(agent.api(), mode)?;
    let scratch = tempfile::Builder::new()
        .prefix(&format!("cancelkit-survey-{}-", agent.name()))
        .tempdir()
        .map_err(|e| format!("cannot create a temporary home: {e}"))?
        .keep();
    let home = scratch.join("home");
    let work = scratch.join("work");
    for dir in [&home, &work] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let launch = agent.launch(&mock.url, &home, &node)?;
    println!(
        "mock: {} ({} mode); session cwd: {}",
        mock.url,
        mode.name(),
        work.display()
    );
    let env: Vec<String> = launch
        .env
        .iter()
        .map(|(k, v)| format!("{k}='{v}'"))
        .collect();
    println!("env -i {} {}", env.join(" "), launch.command.join(" "));
    println!("(press Enter to stop the mock)");
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    for record in mock.records() {
        println!(
            "{:>7} ms {} {} -> {} (frames {}/{}{})",
            record.at_ms,
            record.method,
            record.path,
            record.answer,
            record.sent,
            record.frames,
            if record.cut { ", cut" } else { "" }
        );
    }
    Ok(())
}
