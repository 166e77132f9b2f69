//! `cargo xtask package [--verify]`: `cargo package` of every publishable crate.
//!
//! The publishable crates are the workspace members whose manifest does not say
//! `publish = false`, read from `cargo metadata`, so a new crate is packaged as soon as it is
//! a member and a crate made unpublishable drops out by its manifest alone. They are packaged
//! by one `cargo package -p … -p …`: none of them is on crates.io yet, and cargo resolves their
//! path dependencies on each other (`cancelkit` on `cancelkit-protocol`, the gateway on
//! `cancelkit`, …) through a local registry of the packages being made. `cargo package
//! --workspace` would also take the `publish = false` members, and stops at `cancelkit-bench`,
//! whose path dependency on the gateway has no version (it never leaves the repository).
//!
//! Without `--verify` the packages are only assembled (`--no-verify`): the manifests are
//! normalised, the dependencies resolved and the files selected — the check
//! `cargo xtask test` runs ([`check`]). With `--verify` cargo also builds each package from its
//! extracted sources, as `cargo publish` would (several minutes on 2 cores).
//!
//! The working tree may hold uncommitted work (a `cargo xtask test` before a commit), so the
//! packages are made with `--allow-dirty`: what is checked is what the tree holds. Cargo's
//! warnings about test targets a manifest's `exclude` leaves out of a package are counted, not
//! repeated: those test suites run from the repository (they need the workspace and third-party
//! peers). Each `.crate` must stay under [`MAX_CRATE_BYTES`], so a corpus, a screenshot or a
//! build directory that slips into a package fails the check instead of being published.

use std::io::{BufRead, BufReader, IsTerminal};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Instant;

/// The largest `.crate` file (compressed) a package may be: 1 MiB. The largest today, the
/// runtime's, is about 280 KiB; crates.io refuses anything over 10 MiB.
pub const MAX_CRATE_BYTES: u64 = 1024 * 1024;

/// `cargo xtask package [--verify]`: packages every publishable crate and lists them, with
/// `--verify` also building each from its packaged sources.
pub fn main(args: &[&str]) -> Result<(), String> {
    match args {
        [] => check(),
        ["--verify"] => run(true),
        _ => Err(format!(
            "package takes only --verify, got: {}",
            args.join(" ")
        )),
    }
}

/// The packaging step of `cargo xtask test`: `cargo package --no-verify` of every publishable
/// crate (see the module docs), and every `.crate` under [`MAX_CRATE_BYTES`]. Builds nothing,
/// so it costs seconds; `cargo xtask package --verify` is the build from the packaged sources.
pub fn check() -> Result<(), String> {
    run(false)
}

/// A workspace member that `cargo package` makes a `.crate` of.
#[derive(Debug, PartialEq, Eq)]
struct Crate {
    name: String,
    version: String,
}

/// Packages the publishable crates, verifying them or not, and prints what each package holds.
fn run(verify: bool) -> Result<(), String> {
    let started = Instant::now();
    let (crates, target_dir) = publishable()?;
    if crates.is_empty() {
        return Err("no workspace member is publishable".to_owned());
    }
    let mut args = vec!["package", "--locked", "--allow-dirty"];
    if !verify {
        args.push("--no-verify");
    }
    let colour = std::io::stderr().is_terminal();
    if colour {
        args.extend(["--color", "always"]);
    }
    for krate in &crates {
        args.extend(["-p", krate.name.as_str()]);
    }
    println!("==> cargo {}", args.join(" "));
    let mut child = crate::cargo()
        .args(&args)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut summary = Summary::default();
    for line in BufReader::new(stderr).lines() {
        let line = line.map_err(|e| format!("cannot read cargo's output: {e}"))?;
        if summary.read(&line) {
            eprintln!("{line}");
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for cargo: {e}"))?;
    if summary.left_out > 0 {
        eprintln!(
            "({} test targets left out of the packages by their manifests' exclude: they run \
             from the repository)",
            summary.left_out
        );
    }
    if !status.success() {
        return Err(format!("`cargo {}` exited with {status}", args.join(" ")));
    }
    let mut too_big = Vec::new();
    println!("packages in {}:", target_dir.join("package").display());
    for krate in &crates {
        let file = target_dir
            .join("package")
            .join(format!("{}-{}.crate", krate.name, krate.version));
        let bytes = std::fs::metadata(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?
            .len();
        let contents = summary
            .packaged
            .iter()
            .find(|(name, _)| *name == krate.name)
            .map_or("", |(_, contents)| contents.as_str());
        println!("  {:<20} {:<8} {contents}", krate.name, krate.version);
        if bytes > MAX_CRATE_BYTES {
            too_big.push(format!("{} ({bytes} bytes)", file.display()));
        }
    }
    if !too_big.is_empty() {
        return Err(format!(
            "over {MAX_CRATE_BYTES} bytes: {} — look at `cargo package --list -p NAME` and \
             exclude what does not belong in the package",
            too_big.join(", ")
        ));
    }
    println!(
        "xtask package: {} crates packaged{} in {:.0} s",
        crates.len(),
        if verify {
            " and built from their packages"
        } else {
            ""
        },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The publishable workspace members, by name, and the target directory (`cargo metadata`).
fn publishable() -> Result<(Vec<Crate>, PathBuf), String> {
    let output = crate::cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!("`cargo metadata` exited with {}", output.status));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cannot read cargo metadata's output: {e}"))?;
    let target_dir = metadata["target_directory"]
        .as_str()
        .ok_or("cargo metadata names no target_directory")?;
    Ok((publishable_in(&metadata), PathBuf::from(target_dir)))
}

/// The members of `metadata` (`cargo metadata --no-deps` output) that may be published,
/// sorted by name: `publish` is null (anywhere) or a non-empty list of registries.
fn publishable_in(metadata: &serde_json::Value) -> Vec<Crate> {
    let mut crates: Vec<Crate> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|package| match &package["publish"] {
            serde_json::Value::Null => true,
            serde_json::Value::Array(registries) => !registries.is_empty(),
            _ => false,
        })
        .filter_map(|package| {
            Some(Crate {
                name: package["name"].as_str()?.to_owned(),
                version: package["version"].as_str()?.to_owned(),
            })
        })
        .collect();
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    crates
}

/// What `cargo package` said, read line by line from its stderr.
#[derive(Debug, Default)]
struct Summary {
    /// The crate of the last `Packaging NAME vX.Y.Z (PATH)` line.
    current: Option<String>,
    /// Each crate and its `Packaged` line (`58 files, 576.6KiB (154.4KiB compressed)`).
    packaged: Vec<(String, String)>,
    /// How many `warning: ignoring test …` lines were left out of the output.
    left_out: usize,
}

impl Summary {
    /// Takes in one line of cargo's stderr; false when it is a test target left out of a
    /// package by an `exclude` (counted, not shown).
    fn read(&mut self, line: &str) -> bool {
        let plain = strip_ansi(line);
        let text = plain.trim();
        if text.starts_with("warning: ignoring test ")
            && text.ends_with("is not included in the published package")
        {
            self.left_out += 1;
            return false;
        }
        if let Some(rest) = text.strip_prefix("Packaging ") {
            self.current = rest.split_whitespace().next().map(str::to_owned);
        } else if let Some(rest) = text.strip_prefix("Packaged ")
            && let Some(name) = self.current.take()
        {
            self.packaged.push((name, rest.to_owned()));
        }
        true
    }
}

/// `line` without its ANSI escape sequences (cargo's colours, `ESC [ … letter`).
fn strip_ansi(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

#[cfg(test)]
mod tests {
    use super::{Crate, Summary, publishable_in, strip_ansi};

    #[test]
    fn only_publishable_members_are_packaged() {
        let metadata = serde_json::json!({ "packages": [
            { "name": "cancelkit-gateway", "version": "0.1.0", "publish": null },
            { "name": "cancelkit-bench", "version": "0.1.0", "publish": [] },
            { "name": "cancelkit", "version": "0.1.0", "publish": null },
            { "name": "internal", "version": "0.2.0", "publish": ["company"] },
        ]});
        let names: Vec<Crate> = publishable_in(&metadata);
        assert_eq!(
            names,
            [
                ("cancelkit", "0.1.0"),
                ("cancelkit-gateway", "0.1.0"),
                ("internal", "0.2.0")
            ]
            .map(|(name, version)| Crate {
                name: name.to_owned(),
                version: version.to_owned()
            })
        );
    }

    #[test]
    fn left_out_tests_are_counted_and_packages_summed() {
        let mut summary = Summary::default();
        let lines = [
            "   \u{1b}[1m\u{1b}[32mPackaging\u{1b}[0m cancelkit-gateway v0.1.0 (/w/gateway)",
            "\u{1b}[1m\u{1b}[33mwarning\u{1b}[0m\u{1b}[1m:\u{1b}[0m ignoring test `api` as \
             `tests/api/main.rs` is not included in the published package",
            "warning: ignoring test `smoke` as `tests/smoke.rs` is not included in the \
             published package",
            "    Packaged 58 files, 576.6KiB (154.4KiB compressed)",
            "warning: manifest has no documentation, homepage or repository",
        ];
        let shown: Vec<bool> = lines.iter().map(|line| summary.read(line)).collect();
        assert_eq!(shown, [true, false, false, true, true]);
        assert_eq!(summary.left_out, 2);
        assert_eq!(
            summary.packaged,
            [(
                "cancelkit-gateway".to_owned(),
                "58 files, 576.6KiB (154.4KiB compressed)".to_owned()
            )]
        );
    }

    #[test]
    fn colours_are_stripped() {
        assert_eq!(
            strip_ansi("\u{1b}[1m\u{1b}[33mwarning\u{1b}[0m: x"),
            "warning: x"
        );
        assert_eq!(strip_ansi("plain"), "plain");
    }
}
