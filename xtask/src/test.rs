//! `cargo xtask test`: the whole suite, in the order CI runs it.
//!
//! Setup ([`crate::setup`]: the external tests' tools) waits on the network, so it runs beside
//! the checks that keep the CPU busy (codegen, fmt, clippy). Then the test binaries are built,
//! and every test, hermetic and external, runs with cargo-nextest (`--run-ignored all`: the
//! external tests are the ignored ones). The tests mostly wait — on their peers, child
//! processes and timers — so the remaining checks compile beside them: the doctests (nextest
//! does not run them: they compile the README's and the guide's samples), `cargo doc`, `cargo
//! package` of the publishable crates and the newest compatible rmcp and ACP SDK
//! ([`crate::latest`]); their output is printed after the tests'.

use std::time::Instant;

use crate::codegen::{self, Mode, Paths};

/// Runs every check; stops at the first failure.
pub fn main() -> Result<(), String> {
    let started = Instant::now();
    let setup = std::thread::spawn(crate::setup::run);
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
    step("setup", || {
        setup
            .join()
            .unwrap_or_else(|_| Err("setup panicked".to_owned()))
    })?;
    cargo(
        "build the tests",
        &["nextest", "run", "--workspace", "--locked", "--no-run"],
        &[],
    )?;
    let beside = std::thread::spawn(beside_the_tests);
    let tests = step("tests (nextest: hermetic and external)", || {
        counted(
            &[
                "nextest",
                "run",
                "--workspace",
                "--locked",
                "--run-ignored",
                "all",
                "--profile",
                "ci",
            ],
            true,
        )
    });
    let (log, doctests) = beside.join().unwrap_or_else(|_| {
        (
            String::new(),
            Err("the checks beside the tests panicked".into()),
        )
    });
    print!("{log}");
    let mut totals = tests?;
    let doctests = doctests?;
    totals.passed += doctests.passed;
    totals.failed += doctests.failed;
    println!(
        "xtask test: all steps passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    println!("tests: {} passed, {} failed", totals.passed, totals.failed);
    Ok(())
}

/// The doctests, `cargo doc`, `cargo package` and the newest-versions check, one after
/// another while the tests run; what they printed (cargo's output is kept, to be shown after
/// the tests'), and the doctests' count, or the first failure.
fn beside_the_tests() -> (String, Result<Totals, String>) {
    let mut log = String::new();
    let result = (|| {
        let doctests = kept(
            &mut log,
            "doctests",
            &["test", "--workspace", "--locked", "--doc"],
            &[],
        )?;
        kept(
            &mut log,
            "doc",
            &["doc", "--workspace", "--no-deps", "--locked"],
            &[("RUSTDOCFLAGS", "-D warnings")],
        )?;
        step("package", crate::package::check)?;
        step(
            "latest (the newest compatible rmcp and ACP SDK)",
            crate::latest::check,
        )?;
        Ok(doctests)
    })();
    (log, result)
}

/// `cargo ARGS` with its output kept in `log` (and its libtest results counted).
fn kept(
    log: &mut String,
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<Totals, String> {
    let started = Instant::now();
    let output = crate::cargo()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("{name}: cannot run cargo: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut totals = Totals::default();
    stdout.lines().for_each(|line| totals.add(line));
    log.push_str(&format!("==> {name}\n{stderr}{stdout}"));
    log.push_str(&format!(
        "==> {name}: {:.0} s\n",
        started.elapsed().as_secs_f64()
    ));
    if output.status.success() {
        Ok(totals)
    } else {
        Err(format!(
            "{name} failed: `cargo {}` exited with {} ({} passed, {} failed); its output is above",
            args.join(" "),
            output.status,
            totals.passed,
            totals.failed
        ))
    }
}

/// Summed `test result:` lines of a `cargo test` run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Totals {
    passed: u64,
    failed: u64,
}

impl Totals {
    /// Adds one `test result: ok. 12 passed; 0 failed; ...` line (libtest's), or one
    /// `Summary [ 12.3s] 14 tests run: 12 passed, 2 failed, 3 skipped` line (nextest's), if
    /// `line` is one.
    fn add(&mut self, line: &str) {
        let line = line.trim();
        let rest = if let Some(rest) = line.strip_prefix("test result: ") {
            rest
        } else if line.starts_with("Summary [") {
            match line.split_once("tests run:") {
                Some((_, rest)) => rest,
                None => return,
            }
        } else {
            return;
        };
        // "12 passed", also followed by a note: nextest's "887 passed (4 slow)"
        let count = |word: &str| {
            rest.split([';', ','])
                .filter_map(|part| {
                    let words: Vec<&str> = part.split_whitespace().collect();
                    let at = words.iter().position(|w| *w == word)?;
                    words.get(at.checked_sub(1)?)?.parse::<u64>().ok()
                })
                .sum::<u64>()
        };
        self.passed += count("passed");
        self.failed += count("failed");
    }
}

/// `cargo ARGS`, its output passed through line by line, counting the results (from stderr
/// for nextest, which reports there; from stdout for libtest).
fn counted(args: &[&str], from_stderr: bool) -> Result<Totals, String> {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut command = crate::cargo();
    command.args(args);
    if from_stderr {
        command.stderr(Stdio::piped());
    } else {
        command.stdout(Stdio::piped());
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let mut totals = Totals::default();
    let output: Box<dyn std::io::Read> = if from_stderr {
        Box::new(child.stderr.take().expect("piped"))
    } else {
        Box::new(child.stdout.take().expect("piped"))
    };
    for line in std::io::BufReader::new(output).lines() {
        let line = line.map_err(|e| format!("cannot read cargo's output: {e}"))?;
        if from_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
        // nextest echoes a failed test's own libtest lines; only its summary counts
        if !from_stderr || line.trim_start().starts_with("Summary [") {
            totals.add(&line);
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for cargo: {e}"))?;
    if status.success() {
        Ok(totals)
    } else {
        Err(format!(
            "`cargo {}` exited with {status} ({} passed, {} failed)",
            args.join(" "),
            totals.passed,
            totals.failed
        ))
    }
}

fn step<T>(name: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    println!("==> {name}");
    let started = Instant::now();
    let result = f().map_err(|e| format!("{name} failed: {e}"));
    println!("==> {name}: {:.0} s", started.elapsed().as_secs_f64());
    result
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
        totals.add("     Summary [ 312.004s] 940 tests run: 936 passed, 4 failed, 2 skipped");
        totals.add("     Summary [ 400.216s] 887 tests run: 887 passed (4 slow), 0 skipped");
        totals.add("        PASS [   0.010s] (1/940) cancelkit tests::passed");
        assert_eq!(
            totals,
            Totals {
                passed: 1838,
                failed: 6
            }
        );
    }
}
