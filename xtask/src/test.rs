//! `cargo xtask test`: the whole suite, in the order CI runs it.

use crate::codegen::{self, Mode, Paths};

/// Runs every check; stops at the first failure.
pub fn main() -> Result<(), String> {
    step("codegen --check", || {
        let report = codegen::run(&Paths::project(), Mode::Check)?;
        if report.is_clean() {
            Ok(())
        } else {
            Err(format!(
                "generated code is stale ({:?} {:?}); run `cargo xtask codegen`",
                report.changed, report.orphaned
            ))
        }
    })?;
    cargo("fmt", &["fmt", "--all", "--check"], &[])?;
    cargo(
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    let totals = step("test", cargo_test)?;
    cargo(
        "doc",
        &["doc", "--workspace", "--no-deps", "--locked"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    println!("xtask test: all steps passed");
    println!("tests: {} passed, {} failed", totals.passed, totals.failed);
    Ok(())
}

/// Summed `test result:` lines of a `cargo test` run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Totals {
    passed: u64,
    failed: u64,
}

impl Totals {
    /// Adds one `test result: ok. 12 passed; 0 failed; ...` line, if `line` is one.
    fn add(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        let count = |word: &str| {
            rest.split(';')
                .filter_map(|part| part.trim().strip_suffix(word))
                .filter_map(|n| n.trim().rsplit(' ').next()?.parse::<u64>().ok())
                .sum::<u64>()
        };
        self.passed += count("passed");
        self.failed += count("failed");
    }
}

/// `cargo test --workspace`, passed through line by line, counting the results.
fn cargo_test() -> Result<Totals, String> {
    use std::io::BufRead;
    let mut child = crate::cargo()
        .args(["test", "--workspace", "--locked"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let mut totals = Totals::default();
    let stdout = child.stdout.take().expect("piped");
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("cannot read cargo's output: {e}"))?;
        println!("{line}");
        totals.add(&line);
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for cargo: {e}"))?;
    if status.success() {
        Ok(totals)
    } else {
        Err(format!(
            "`cargo test --workspace --locked` exited with {status} ({} passed, {} failed)",
            totals.passed, totals.failed
        ))
    }
}

fn step<T>(name: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    println!("==> {name}");
    f().map_err(|e| format!("{name} failed: {e}"))
}

fn cargo(name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    step(name, || {
        let status = crate::cargo()
            .args(args)
            .envs(env.iter().copied())
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`cargo {}` exited with {status}", args.join(" ")))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::Totals;

    #[test]
    fn result_lines_are_summed() {
        let mut totals = Totals::default();
        totals.add("test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s");
        totals
            .add("test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out");
        totals.add("running 5 tests");
        totals.add("test passed_thing ... ok");
        assert_eq!(
            totals,
            Totals {
                passed: 15,
                failed: 2
            }
        );
    }
}
