//! `cargo xtask codegen` as a user runs it: the real binary, in a copy of the project.

use std::path::Path;
use std::process::{Command, Output};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs `xtask codegen <args>` against copies of schema/ and generated/src, after `edit`.
fn codegen_in_copy(edit: impl FnOnce(&Path), args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&root.join("schema"), &tmp.path().join("schema"));
    copy_dir(
        &root.join("generated/src"),
        &tmp.path().join("generated/src"),
    );
    edit(tmp.path());
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .current_dir(tmp.path())
        .arg("codegen")
        .args(args)
        .args(["--schema-dir", "schema", "--src-dir", "generated/src"])
        // Even with backtraces requested, a bad schema must not print one.
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

#[test]
fn up_to_date_copy_says_so() {
    let out = codegen_in_copy(|_| {}, &["--check"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("up to date"));
    let out = codegen_in_copy(|_| {}, &[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("up to date"));
}

#[test]
fn check_names_the_stale_file_and_exits_1() {
    let edit = |dir: &Path| {
        let path = dir.join("schema/gateway.json");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            text.replacen("\"description\": \"", "\"description\": \"Changed. ", 1),
        )
        .unwrap();
    };
    let out = codegen_in_copy(edit, &["--check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("generated/src/gateway.rs"), "{stderr}");
    assert!(!stderr.contains("acp.rs"), "{stderr}");

    let out = codegen_in_copy(edit, &[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("updated generated/src/gateway.rs"));
}

/// A broken schema fails with the file and JSON pointer, exit code 1, and no panic.
#[test]
fn bad_schemas_fail_cleanly() {
    let cases = [
        ("{ not json", "schema/acp.json:1:3: invalid JSON"),
        (
            r##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"A": {"description": "a", "$ref": "#/$defs/Missing"}}}"##,
            "schema/acp.json#/$defs/A/$ref: `$ref` \"#/$defs/Missing\" does not name a definition",
        ),
        (
            r##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"A": {"description": "a", "allOf": []}}}"##,
            "schema/acp.json#/$defs/A/allOf: unsupported keyword `allOf`",
        ),
        (
            r##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"A": {"description": "a", "type": ["string", "integer"], "enum": [1, "a"]}}}"##,
            "schema/acp.json#/$defs/A: typify does not support this construct",
        ),
    ];
    for (text, expected) in cases {
        let out = codegen_in_copy(
            |dir| std::fs::write(dir.join("schema/acp.json"), text).unwrap(),
            &["--check"],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(expected),
            "expected {expected:?} in {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!stderr.contains("stack backtrace"), "{stderr}");
    }
}
