//! The guide (`docs/`, an mdBook) and the README hold together: every page is in the book's
//! summary and among the doctests of `tests/src/guide.rs` (so its Rust samples are compiled),
//! every local link goes to a file that exists, every code block names its language (an
//! unnamed one would be compiled as Rust by rustdoc and shown as plain text by mdBook), no Rust
//! sample is skipped with `ignore`, and the generated blocks are where their writers look.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is one level below the workspace root")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The guide's pages, by file name (`SUMMARY.md` aside).
fn pages() -> BTreeSet<String> {
    std::fs::read_dir(root().join("docs/src"))
        .expect("docs/src")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
        .collect()
}

/// The targets of the markdown links `[text](target)` in `text`, outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (i, _) in line.match_indices("](") {
            let rest = &line[i + 2..];
            if let Some(end) = rest.find(')') {
                found.push(rest[..end].to_owned());
            }
        }
    }
    found
}

/// The info strings of the code blocks that open in `text` (empty for an unnamed block).
fn fences(text: &str) -> Vec<String> {
    let mut infos = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            if !fenced {
                infos.push(info.trim().to_owned());
            }
            fenced = !fenced;
        }
    }
    infos
}

#[test]
fn every_page_is_in_the_summary_and_among_the_doctests() {
    let summary = read(&root().join("docs/src/SUMMARY.md"));
    let doctests = read(&root().join("tests/src/guide.rs"));
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let mut problems = Vec::new();
    for page in pages() {
        if !listed.contains(&page) {
            problems.push(format!("docs/src/{page} is not in SUMMARY.md"));
        }
        let include = format!("include_str!(\"../../docs/src/{page}\")");
        if !doctests.contains(&include) {
            problems.push(format!(
                "docs/src/{page} is not included in tests/src/guide.rs"
            ));
        }
    }
    for entry in &listed {
        if !root().join("docs/src").join(entry).is_file() {
            problems.push(format!("SUMMARY.md lists {entry}, which does not exist"));
        }
    }
    if !doctests.contains("include_str!(\"../../README.md\")") {
        problems.push("README.md is not included in tests/src/guide.rs".to_owned());
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn local_links_lead_to_files_that_exist() {
    let mut documents = vec![root().join("README.md")];
    documents.extend(
        pages()
            .iter()
            .map(|page| root().join("docs/src").join(page)),
    );
    let mut broken = Vec::new();
    for document in &documents {
        let base = document.parent().expect("a directory");
        for target in links(&read(document)) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let file = target
                .split('#')
                .next()
                .unwrap_or_default()
                .replace("%20", " ");
            if !base.join(&file).exists() {
                broken.push(format!("{}: ({target})", document.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_code_block_names_its_language_and_no_rust_sample_is_skipped() {
    let mut documents = vec![root().join("README.md")];
    documents.extend(
        pages()
            .iter()
            .map(|page| root().join("docs/src").join(page)),
    );
    let mut problems = Vec::new();
    let mut rust = 0;
    for document in &documents {
        for info in fences(&read(document)) {
            if info.is_empty() {
                problems.push(format!(
                    "{}: a code block without a language (```text?)",
                    document.display()
                ));
            }
            if info.split(',').next() == Some("rust") {
                rust += 1;
                if info.split(',').any(|a| a == "ignore") {
                    problems.push(format!(
                        "{}: a Rust sample marked ignore",
                        document.display()
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        rust >= 20,
        "only {rust} Rust samples found: is the guide there?"
    );
}

#[test]
fn the_generated_blocks_are_where_their_writers_look() {
    let performance = read(&root().join("docs/src/performance.md"));
    let survey = read(&root().join("docs/src/survey.md"));
    let readme = read(&root().join("README.md"));
    assert!(performance.contains("<!-- bench:") && performance.contains(":begin -->"));
    assert!(
        survey.contains("<!-- survey:acp:begin -->") && survey.contains("<!-- survey:acp:end -->")
    );
    assert!(
        !readme.contains("<!-- bench:") && !readme.contains("<!-- survey:"),
        "cargo xtask bench/survey --readme write into the guide, not the README"
    );
}
