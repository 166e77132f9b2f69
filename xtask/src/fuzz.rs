//! `cargo xtask fuzz [TARGET] [--time S] [-- LIBFUZZER_ARGS...]`: coverage-guided fuzzing with
//! cargo-fuzz (libFuzzer, address sanitizer), one target or each in turn.
//!
//! The targets are the `[[bin]]`s of `fuzz/Cargo.toml`; each calls one check of the
//! `cancelkit-fuzz` crate (`fuzz/harness`), whose replay test runs the committed corpus
//! `fuzz/corpus/<target>/` under `cargo test`. The fuzzer reads that corpus but writes what it
//! finds to `target/fuzz-corpus/<target>/`, so a run never changes committed files; crashes
//! land in `fuzz/artifacts/<target>/` (git-ignored). cargo-fuzz needs nightly features: they
//! are enabled on the stable toolchain with `RUSTC_BOOTSTRAP=1`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Seconds per target when `--time` is not given.
const DEFAULT_SECONDS: u64 = 60;

/// One target's outcome.
#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    executions: Option<u64>,
    crashed: bool,
}

pub fn main(args: &[&str]) -> Result<(), String> {
    let (ours, libfuzzer) = match args.iter().position(|a| *a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let mut seconds = DEFAULT_SECONDS;
    let mut sanitizer = "address";
    let mut only = None;
    let mut rest = ours.iter();
    while let Some(arg) = rest.next() {
        match *arg {
            "--time" => {
                let value = rest.next().ok_or("--time needs a number of seconds")?;
                seconds = value
                    .parse()
                    .map_err(|_| format!("--time {value}: not a number of seconds"))?;
            }
            "--sanitizer" => {
                sanitizer = rest
                    .next()
                    .ok_or("--sanitizer needs a name (address, none, ...)")?;
            }
            name if !name.starts_with('-') && only.is_none() => only = Some(name),
            other => return Err(format!("fuzz: unexpected argument `{other}`")),
        }
    }
    let all = targets()?;
    let targets: Vec<&str> = match only {
        Some(name) if all.iter().any(|t| t == name) => vec![name],
        Some(name) => {
            return Err(format!(
                "no fuzz target `{name}`; the targets are {}",
                all.join(", ")
            ));
        }
        None => all.iter().map(String::as_str).collect(),
    };
    ensure_cargo_fuzz()?;
    let mut outcomes = Vec::new();
    for target in &targets {
        println!("==> fuzz {target} for {seconds} s");
        outcomes.push((*target, run(target, seconds, sanitizer, libfuzzer)?));
    }
    println!("fuzz summary ({seconds} s per target):");
    for (target, outcome) in &outcomes {
        let executions = outcome
            .executions
            .map_or_else(|| "?".to_owned(), |n| n.to_string());
        let verdict = if outcome.crashed {
            format!("CRASH (input in fuzz/artifacts/{target}/)")
        } else {
            "no crash".to_owned()
        };
        println!("  {target}: {executions} executions, {verdict}");
    }
    let crashed: Vec<&str> = outcomes
        .iter()
        .filter(|(_, o)| o.crashed)
        .map(|(t, _)| *t)
        .collect();
    if crashed.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzz targets crashed: {}", crashed.join(", ")))
    }
}

/// The `[[bin]]` names of `fuzz/Cargo.toml`, in file order.
fn targets() -> Result<Vec<String>, String> {
    let path = crate::project_root().join("fuzz/Cargo.toml");
    let manifest = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(bin_names(&manifest))
}

fn bin_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(value) = line.strip_prefix("name") {
            let value = value.trim_start().trim_start_matches('=').trim();
            names.push(value.trim_matches('"').to_owned());
        }
    }
    names
}

/// Installs cargo-fuzz unless `cargo fuzz` already works.
fn ensure_cargo_fuzz() -> Result<(), String> {
    let present = crate::cargo()
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        return Ok(());
    }
    println!("==> cargo install cargo-fuzz --locked");
    let status = crate::cargo()
        .args(["install", "cargo-fuzz", "--locked"])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo install cargo-fuzz --locked` exited with {status}"
        ))
    }
}

/// Runs one target for `seconds`, passing libFuzzer's output through and reading its final
/// statistics.
fn run(target: &str, seconds: u64, sanitizer: &str, libfuzzer: &[&str]) -> Result<Outcome, String> {
    let root = crate::project_root();
    let scratch = root.join("target/fuzz-corpus").join(target);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let corpus = root.join("fuzz/corpus").join(target);
    let mut command: Command = crate::cargo();
    command
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["fuzz", "run", "--sanitizer", sanitizer, target])
        .arg(&scratch)
        .arg(&corpus)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg("-print_final_stats=1")
        .args(libfuzzer)
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    let stderr = child.stderr.take().expect("piped");
    let mut outcome = Outcome::default();
    for line in BufReader::new(stderr).lines() {
        let line = line.map_err(|e| format!("cannot read cargo fuzz's output: {e}"))?;
        eprintln!("{line}");
        outcome.read(&line);
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for cargo fuzz: {e}"))?;
    outcome.crashed |= !status.success();
    Ok(outcome)
}

impl Outcome {
    /// Takes what it needs from one line of libFuzzer's output.
    fn read(&mut self, line: &str) {
        if let Some(n) = line.strip_prefix("stat::number_of_executed_units:") {
            self.executions = n.trim().parse().ok();
        } else if line.starts_with("==") && line.contains("ERROR: libFuzzer")
            || line.starts_with("SUMMARY: libFuzzer")
        {
            self.crashed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_from_the_manifest_in_order() {
        let manifest = "[package]\nname = \"pkg\"\n\n[[bin]]\nname = \"b\"\npath = \"x\"\n\n[[bin]]\nname=\"a\"\n";
        assert_eq!(bin_names(manifest), ["b", "a"]);
        let real = targets().unwrap();
        assert!(real.contains(&"framing_lines".to_owned()), "{real:?}");
        for target in &real {
            let source = crate::project_root().join(format!("fuzz/fuzz_targets/{target}.rs"));
            assert!(source.is_file(), "{}", source.display());
            let corpus = crate::project_root().join(format!("fuzz/corpus/{target}"));
            assert!(corpus.is_dir(), "{target} has no committed corpus");
        }
    }

    #[test]
    fn final_stats_are_read() {
        let mut outcome = Outcome::default();
        for line in [
            "#1048576\tpulse  cov: 812 ft: 2301 corp: 231/18Kb exec/s: 52428 rss: 61Mb",
            "Done 1234567 runs in 61 second(s)",
            "stat::number_of_executed_units: 1234567",
            "stat::average_exec_per_sec:     20238",
        ] {
            outcome.read(line);
        }
        assert_eq!(
            outcome,
            Outcome {
                executions: Some(1_234_567),
                crashed: false
            }
        );
        outcome.read("==12==ERROR: libFuzzer: deadly signal");
        assert!(outcome.crashed);
    }
}
