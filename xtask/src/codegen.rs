//! `cargo xtask codegen [--check]`: keep `generated/src` in step with `schema/`.
//!
//! One function decides each generated file's fate: compare it with what the generator
//! produces, then rewrite it (and say so) or, in check mode, report it as stale.

use std::path::{Path, PathBuf};

use crate::project_root;

/// Whether to write files or only compare them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Rewrite stale files and delete files no schema produces any more.
    Write,
    /// Change nothing; report what `Write` would change.
    Check,
}

/// Where the schemas are and where their modules go.
#[derive(Debug, Clone)]
pub struct Paths {
    /// Directory holding `*.json` schemas.
    pub schema_dir: PathBuf,
    /// The protocol crate's `src/` directory.
    pub src_dir: PathBuf,
    /// Paths in messages are shown relative to this directory.
    pub root: PathBuf,
}

impl Paths {
    pub fn project() -> Self {
        let root = project_root();
        Self {
            schema_dir: root.join("schema"),
            src_dir: root.join("generated").join("src"),
            root,
        }
    }

    fn show(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// What a run found (check mode) or did (write mode), as paths relative to the root.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Files whose contents differ from the generator's output (rewritten in write mode).
    pub changed: Vec<String>,
    /// `@generated` files that no schema produces any more (deleted in write mode).
    pub orphaned: Vec<String>,
    /// How many files the generator produced.
    pub total: usize,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.changed.is_empty() && self.orphaned.is_empty()
    }
}

pub fn main(args: &[&str]) -> Result<(), String> {
    let mut mode = Mode::Write;
    let mut paths = Paths::project();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            "--check" => mode = Mode::Check,
            // For tests and other workspaces: point the task at other directories.
            "--schema-dir" | "--src-dir" => {
                let value = args
                    .next()
                    .ok_or_else(|| format!("{arg} needs a directory"))?;
                let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
                let dir = cwd.join(value);
                paths.root = cwd;
                if *arg == "--schema-dir" {
                    paths.schema_dir = dir;
                } else {
                    paths.src_dir = dir;
                }
            }
            other => return Err(format!("codegen: unknown argument `{other}`")),
        }
    }
    let report = run(&paths, mode)?;
    match mode {
        Mode::Write if report.is_clean() => {
            println!("codegen: up to date ({} files)", report.total);
        }
        Mode::Write => {
            for file in &report.changed {
                println!("codegen: updated {file}");
            }
            for file in &report.orphaned {
                println!("codegen: removed {file} (no schema produces it any more)");
            }
        }
        Mode::Check if report.is_clean() => {
            println!("codegen: up to date ({} files)", report.total);
        }
        Mode::Check => {
            let mut message = String::from("generated code is stale:\n");
            for file in &report.changed {
                message.push_str(&format!("  {file}\n"));
            }
            for file in &report.orphaned {
                message.push_str(&format!("  {file} (no schema produces it any more)\n"));
            }
            message.push_str("run `cargo xtask codegen` and commit the result");
            return Err(message);
        }
    }
    Ok(())
}

/// Generates every module and compares it with (or writes it to) `paths.src_dir`.
pub fn run(paths: &Paths, mode: Mode) -> Result<Report, String> {
    let files = cancelkit_codegen::generate(&paths.schema_dir).map_err(|e| e.to_string())?;
    let lib_rs = paths.src_dir.join("lib.rs");
    let lib =
        std::fs::read_to_string(&lib_rs).map_err(|e| format!("{}: {e}", paths.show(&lib_rs)))?;

    let mut report = Report {
        total: files.len(),
        ..Report::default()
    };
    let mut expected = Vec::new();
    for file in &files {
        let target = paths.src_dir.join(&file.path);
        let module = file
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !lib.contains(&format!("pub mod {module};")) {
            return Err(format!(
                "{}: declare `pub mod {module};` for {} (generated from {})",
                paths.show(&lib_rs),
                paths.show(&target),
                file.schema
            ));
        }
        if ensure_contents(&target, &file.contents, mode)? {
            report.changed.push(paths.show(&target));
        }
        expected.push(target);
    }

    for path in generated_files(&paths.src_dir)? {
        if !expected.contains(&path) {
            if mode == Mode::Write {
                std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", paths.show(&path)))?;
            }
            report.orphaned.push(paths.show(&path));
        }
    }
    Ok(report)
}

/// Returns whether `path` was (or, in check mode, would be) changed.
fn ensure_contents(path: &Path, contents: &str, mode: Mode) -> Result<bool, String> {
    if let Ok(old) = std::fs::read_to_string(path)
        && normalize_newlines(&old) == normalize_newlines(contents)
    {
        return Ok(false);
    }
    if mode == Mode::Write {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, contents).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(true)
}

fn normalize_newlines(s: &str) -> String {
    s.replace("\r\n", "\n")
}

/// Every `.rs` file below `dir` whose first line marks it as generated by us.
fn generated_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && std::fs::read_to_string(&path)
                    .is_ok_and(|text| text.starts_with("// @generated by cargo xtask codegen"))
            {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed bindings match the schemas, so `cargo test` alone (xtask is a default
    /// member of the workspace: plain `cargo test` in the root runs this) catches a schema edit
    /// that was not regenerated.
    #[test]
    fn generated_code_is_fresh() {
        let report = run(&Paths::project(), Mode::Check).unwrap();
        assert!(
            report.is_clean(),
            "stale generated files: {report:?}; run `cargo xtask codegen`"
        );
        assert_eq!(report.total, 7);
    }

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

    /// A sandbox holding copies of schema/ and generated/src.
    fn sandbox() -> (tempfile::TempDir, Paths) {
        let project = Paths::project();
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths {
            schema_dir: tmp.path().join("schema"),
            src_dir: tmp.path().join("generated").join("src"),
            root: tmp.path().to_path_buf(),
        };
        copy_dir(&project.schema_dir, &paths.schema_dir);
        copy_dir(&project.src_dir, &paths.src_dir);
        (tmp, paths)
    }

    #[test]
    fn check_catches_a_changed_description_and_write_fixes_it() {
        let (_tmp, paths) = sandbox();
        let acp = paths.schema_dir.join("acp.json");
        let text = std::fs::read_to_string(&acp).unwrap();
        let edited = text.replacen("\"description\": \"", "\"description\": \"Edited. ", 1);
        assert_ne!(text, edited);
        std::fs::write(&acp, edited).unwrap();

        let before = std::fs::read(paths.src_dir.join("acp.rs")).unwrap();
        let report = run(&paths, Mode::Check).unwrap();
        assert_eq!(report.changed, vec!["generated/src/acp.rs".to_owned()]);
        assert!(report.orphaned.is_empty());
        // Check mode writes nothing.
        assert_eq!(std::fs::read(paths.src_dir.join("acp.rs")).unwrap(), before);

        let written = run(&paths, Mode::Write).unwrap();
        assert_eq!(written.changed, report.changed);
        assert!(run(&paths, Mode::Check).unwrap().is_clean());
        let regenerated = std::fs::read_to_string(paths.src_dir.join("acp.rs")).unwrap();
        assert!(regenerated.contains("Edited."));
    }

    #[test]
    fn orphaned_generated_files_are_reported_and_removed() {
        let (_tmp, paths) = sandbox();
        let orphan = paths.src_dir.join("old.rs");
        std::fs::write(
            &orphan,
            "// @generated by cargo xtask codegen from schema/old.json (sha256 0). Do not edit.\n",
        )
        .unwrap();
        let report = run(&paths, Mode::Check).unwrap();
        assert_eq!(report.orphaned, vec!["generated/src/old.rs".to_owned()]);
        assert!(orphan.exists());
        run(&paths, Mode::Write).unwrap();
        assert!(!orphan.exists());
    }

    #[test]
    fn crlf_checkouts_are_not_stale() {
        let (_tmp, paths) = sandbox();
        let acp = paths.src_dir.join("acp.rs");
        let text = std::fs::read_to_string(&acp).unwrap();
        std::fs::write(&acp, text.replace('\n', "\r\n")).unwrap();
        assert!(run(&paths, Mode::Check).unwrap().is_clean());
    }

    #[test]
    fn an_undeclared_module_is_an_error() {
        let (_tmp, paths) = sandbox();
        let lib = paths.src_dir.join("lib.rs");
        let text = std::fs::read_to_string(&lib).unwrap();
        std::fs::write(&lib, text.replace("pub mod rap;", "")).unwrap();
        let err = run(&paths, Mode::Check).unwrap_err();
        assert!(err.contains("declare `pub mod rap;`"), "{err}");
    }
}
