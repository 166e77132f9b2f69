//! `cargo xtask fuzz [TARGET] [--time S] [-- LIBFUZZER_ARGS...]`: coverage-guided fuzzing with
//! cargo-fuzz (libFuzzer, address sanitizer), one target or each in turn.
//! `cargo xtask fuzz cmin [TARGET] [-- LIBFUZZER_ARGS...]`: minimises the committed corpus of one
//! target or each (see [`cmin`]).
//!
//! The targets are the `[[bin]]`s of `fuzz/Cargo.toml`; each calls one check of the
//! `cancelkit-fuzz` crate (`fuzz/harness`), whose replay test runs the committed corpus
//! `fuzz/corpus/<target>/` under `cargo test`. The fuzzer reads that corpus but writes what it
//! finds to `target/fuzz-corpus/<target>/`, so a run never changes committed files; crashes
//! land in `fuzz/artifacts/<target>/` (git-ignored). cargo-fuzz needs nightly features: they
//! are enabled on the stable toolchain with `RUSTC_BOOTSTRAP=1`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
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
    if let ["cmin", rest @ ..] = args {
        return cmin(rest);
    }
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
    let targets = select(&all, only)?;
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

/// The one target named, or all of them.
fn select<'a>(all: &'a [String], only: Option<&'a str>) -> Result<Vec<&'a str>, String> {
    match only {
        Some(name) if all.iter().any(|t| t == name) => Ok(vec![name]),
        Some(name) => Err(format!(
            "no fuzz target `{name}`; the targets are {}",
            all.join(", ")
        )),
        None => Ok(all.iter().map(String::as_str).collect()),
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

/// How the merge chooses: a small set of inputs (a greedy set cover, not libFuzzer's default of
/// every input, smallest first, that adds anything) that covers every edge the corpus covers. Hit
/// counts are not told apart (`-use_counters=0`): nearly every input reaches some edge a
/// different number of times than the others, so with them `wire` alone kept 1,799 of its 3,255
/// inputs (and libFuzzer's default merge 3,084).
const CMIN_FLAGS: &[&str] = &["-set_cover_merge=1", "-use_counters=0"];

/// `cargo xtask fuzz cmin [TARGET] [--sanitizer S] [-- LIBFUZZER_ARGS...]`: minimises the
/// committed corpus `fuzz/corpus/<target>/` of one target or each, keeping only the inputs that
/// add coverage.
///
/// It is `cargo fuzz cmin` made safe for the named inputs: the hand-written seeds (`seed-*`, which
/// `the_seeds_are_in_the_corpus` wants byte for byte) and the findings the regression tests read
/// by name (`regression-*`) are copied first into a fresh directory, `target/fuzz-cmin/<target>/`;
/// libFuzzer's merge (the same build as `cargo xtask fuzz`: address sanitizer unless told
/// otherwise; flags [`CMIN_FLAGS`], then `LIBFUZZER_ARGS`, the later winning) keeps those and adds
/// to them only the corpus inputs needed to cover the edges they do not. Only when the merge
/// succeeds is the corpus replaced by that directory's files: the rest are deleted, and the named
/// inputs stay whatever coverage they add; a copy of one under another name is dropped. The kept
/// inputs keep their names (libFuzzer names its inputs by their SHA-1), so git sees deletions only.
fn cmin(args: &[&str]) -> Result<(), String> {
    let (args, libfuzzer) = match args.iter().position(|a| *a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let mut sanitizer = "address";
    let mut only = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match *arg {
            "--sanitizer" => {
                sanitizer = rest
                    .next()
                    .ok_or("--sanitizer needs a name (address, none, ...)")?;
            }
            name if !name.starts_with('-') && only.is_none() => only = Some(name),
            other => return Err(format!("fuzz cmin: unexpected argument `{other}`")),
        }
    }
    let all = targets()?;
    let targets = select(&all, only)?;
    ensure_cargo_fuzz()?;
    let mut counts = Vec::new();
    for target in &targets {
        println!("==> fuzz cmin {target}");
        counts.push((*target, minimise(target, sanitizer, libfuzzer)?));
    }
    println!("fuzz cmin summary (files, bytes):");
    let (mut before, mut after) = (Size::default(), Size::default());
    for (target, (b, a)) in &counts {
        println!(
            "  {target}: {} files, {} bytes -> {} files, {} bytes",
            b.files, b.bytes, a.files, a.bytes
        );
        before.add(b);
        after.add(a);
    }
    println!(
        "  total: {} files, {} bytes -> {} files, {} bytes",
        before.files, before.bytes, after.files, after.bytes
    );
    Ok(())
}

/// A corpus directory's file count and size.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Size {
    files: u64,
    bytes: u64,
}

impl Size {
    fn of(dir: &Path) -> Result<Self, String> {
        let mut size = Self::default();
        for name in file_names(dir)? {
            let meta = std::fs::metadata(dir.join(&name))
                .map_err(|e| format!("cannot read {}: {e}", dir.join(&name).display()))?;
            size.files += 1;
            size.bytes += meta.len();
        }
        Ok(size)
    }

    fn add(&mut self, other: &Self) {
        self.files += other.files;
        self.bytes += other.bytes;
    }
}

/// Whether a corpus file is one kept by name whatever its coverage: a hand-written seed or an
/// input a regression test reads.
fn is_named(name: &str) -> bool {
    name.starts_with("seed-") || name.starts_with("regression-")
}

/// The names of the files (not directories) in `dir`, sorted.
fn file_names(dir: &Path) -> Result<Vec<String>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// What replacing a corpus by the merge's output changes: the files to delete from the corpus and
/// those to copy into it.
fn replacement<'a>(corpus: &'a [String], merged: &'a [String]) -> (Vec<&'a str>, Vec<&'a str>) {
    let delete = corpus
        .iter()
        .filter(|name| !merged.contains(name))
        .map(String::as_str)
        .collect();
    let copy = merged
        .iter()
        .filter(|name| !corpus.contains(name))
        .map(String::as_str)
        .collect();
    (delete, copy)
}

/// Minimises one target's corpus; its size before and after.
fn minimise(target: &str, sanitizer: &str, libfuzzer: &[&str]) -> Result<(Size, Size), String> {
    let root = crate::project_root();
    let corpus = root.join("fuzz/corpus").join(target);
    let fresh = root.join("target/fuzz-cmin").join(target);
    let before = Size::of(&corpus)?;
    if fresh.exists() {
        std::fs::remove_dir_all(&fresh)
            .map_err(|e| format!("cannot empty {}: {e}", fresh.display()))?;
    }
    std::fs::create_dir_all(&fresh)
        .map_err(|e| format!("cannot create {}: {e}", fresh.display()))?;
    let names = file_names(&corpus)?;
    for name in names.iter().filter(|n| is_named(n)) {
        std::fs::copy(corpus.join(name), fresh.join(name))
            .map_err(|e| format!("cannot copy {target}/{name}: {e}"))?;
    }
    let status = crate::cargo()
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["fuzz", "run", "--sanitizer", sanitizer, target])
        .arg(&fresh)
        .arg(&corpus)
        .arg("--")
        .args(CMIN_FLAGS)
        .args(libfuzzer)
        .status()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    if !status.success() {
        return Err(format!(
            "the merge of {target} exited with {status}; fuzz/corpus/{target}/ is unchanged"
        ));
    }
    // The merge reads the named inputs twice (they are in the corpus too), and a target whose
    // coverage varies from run to run (the peers' tasks) can take a second copy under its SHA-1.
    let read = |path: PathBuf| {
        std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let named = names
        .iter()
        .filter(|n| is_named(n))
        .map(|n| read(corpus.join(n)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut merged = Vec::new();
    for name in file_names(&fresh)? {
        if is_named(&name) || !named.contains(&read(fresh.join(&name))?) {
            merged.push(name);
        }
    }
    let lost: Vec<&String> = names
        .iter()
        .filter(|n| is_named(n) && !merged.contains(n))
        .collect();
    if !lost.is_empty() {
        return Err(format!(
            "the merge of {target} lost {lost:?}; fuzz/corpus/{target}/ is unchanged"
        ));
    }
    let (delete, copy) = replacement(&names, &merged);
    for name in copy {
        std::fs::copy(fresh.join(name), corpus.join(name))
            .map_err(|e| format!("cannot copy {name} into fuzz/corpus/{target}/: {e}"))?;
    }
    for name in delete {
        std::fs::remove_file(corpus.join(name))
            .map_err(|e| format!("cannot delete fuzz/corpus/{target}/{name}: {e}"))?;
    }
    Ok((before, Size::of(&corpus)?))
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
    fn cmin_keeps_the_named_inputs_and_replaces_the_rest() {
        for name in ["seed-0", "seed-acp", "regression-eof-error-with-no-grace"] {
            assert!(is_named(name), "{name}");
        }
        assert!(!is_named("ea79dbb8ff808d1db6b2093e5b7f52ca789c0130"));
        let corpus = ["a1", "b2", "seed-0"].map(str::to_owned);
        let merged = ["b2", "c3", "seed-0"].map(str::to_owned);
        assert_eq!(replacement(&corpus, &merged), (vec!["a1"], vec!["c3"]));
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
