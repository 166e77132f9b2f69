//! Replays the committed corpus `fuzz/corpus/<target>/` through each target's check, exactly as
//! the fuzzer runs it (no fuzzer needed). A failure names every failing file.

use std::path::{Path, PathBuf};

use cancelkit_fuzz::{TARGETS, Target, panics, peer};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harness lives in fuzz/harness")
        .to_path_buf()
}

/// Targets not (yet) in [`TARGETS`], which belongs to another file: their cargo-fuzz targets
/// and corpora exist, and their corpora replay here all the same.
const MORE_TARGETS: &[Target] = &[Target {
    name: "peer_mcp_negotiated",
    check: peer::mcp_negotiated,
}];

fn replay(name: &str) {
    let target = TARGETS
        .iter()
        .chain(MORE_TARGETS)
        .find(|t| t.name == name)
        .expect("a known target");
    let dir = fuzz_dir().join("corpus").join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no inputs", dir.display());
    let failures: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let data = std::fs::read(path).expect("a corpus file reads");
            panics::judged_by_caller(|| (target.check)(&data))
                .err()
                .map(|panic| format!("{}: {}", path.display(), panics::describe(panic.as_ref())))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} inputs of {name} fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn every_target_has_a_test_here() {
    let source = include_str!("replay.rs");
    for target in TARGETS.iter().chain(MORE_TARGETS) {
        assert!(
            source.contains(&format!("fn {}()", target.name)),
            "no replay test for {}",
            target.name
        );
    }
}

#[test]
fn framing_lines() {
    replay("framing_lines");
}

#[test]
fn framing_content_length() {
    replay("framing_content_length");
}

#[test]
fn wire() {
    replay("wire");
}

#[test]
fn peer_acp() {
    replay("peer_acp");
}

#[test]
fn peer_mcp_2024_11_05() {
    replay("peer_mcp_2024_11_05");
}

#[test]
fn peer_mcp_2025_11_25() {
    replay("peer_mcp_2025_11_25");
}

#[test]
fn peer_mcp_negotiated() {
    replay("peer_mcp_negotiated");
}

#[test]
fn peer_lsp() {
    replay("peer_lsp");
}

#[test]
fn rap() {
    replay("rap");
}

#[test]
fn schema() {
    replay("schema");
}

#[test]
fn sse() {
    replay("sse");
}

/// The hand-written seeds are all in the committed corpus, byte for byte. With
/// `CANCELKIT_WRITE_SEEDS=1` the test writes them there instead (then commit the corpus).
#[test]
fn the_seeds_are_in_the_corpus() {
    let write = std::env::var_os("CANCELKIT_WRITE_SEEDS").is_some();
    let schema_dir = fuzz_dir().join("../schema");
    let mut stale = Vec::new();
    for (target, name, data) in cancelkit_fuzz::seeds::all(&schema_dir) {
        let dir = fuzz_dir().join("corpus").join(target);
        let path = dir.join(&name);
        if write {
            std::fs::create_dir_all(&dir).expect("the corpus directory is writable");
            std::fs::write(&path, &data).expect("a seed is written");
        } else if std::fs::read(&path).ok().as_deref() != Some(data.as_slice()) {
            stale.push(format!("{target}/{name}"));
        }
    }
    assert!(
        stale.is_empty(),
        "seeds missing from the corpus or different: {stale:?}; refresh with \
         CANCELKIT_WRITE_SEEDS=1 cargo test -p cancelkit-fuzz --test replay the_seeds_are_in_the_corpus"
    );
}

/// The seeds of `peer_mcp_negotiated` ([`peer::negotiated_seeds`], not yet among
/// `cancelkit_fuzz::seeds::all`) are in its corpus, byte for byte, and pass. With
/// `CANCELKIT_WRITE_SEEDS=1` the test writes them there instead.
#[test]
fn the_negotiated_seeds_are_in_the_corpus() {
    let write = std::env::var_os("CANCELKIT_WRITE_SEEDS").is_some();
    let dir = fuzz_dir().join("corpus/peer_mcp_negotiated");
    let mut stale = Vec::new();
    for (name, data) in peer::negotiated_seeds() {
        let path = dir.join(format!("seed-{name}"));
        let outcome = panics::judged_by_caller(|| peer::mcp_negotiated(&data));
        assert!(outcome.is_ok(), "seed {name} fails");
        if write {
            std::fs::create_dir_all(&dir).expect("the corpus directory is writable");
            std::fs::write(&path, &data).expect("a seed is written");
        } else if std::fs::read(&path).ok().as_deref() != Some(data.as_slice()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "seeds of peer_mcp_negotiated missing from the corpus or different: {stale:?}; refresh \
         with CANCELKIT_WRITE_SEEDS=1 cargo test -p cancelkit-fuzz --test replay the_negotiated_seeds"
    );
}
