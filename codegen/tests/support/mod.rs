//! Shared by the generator's tests: a schema directory written from text, and error checks.

#![allow(dead_code)]

use cancelkit_codegen::{Error, generate};

/// Writes `files` into a fresh `schema/` directory and runs the generator on it.
pub fn generate_from(
    files: &[(&str, &str)],
) -> Result<Vec<cancelkit_codegen::GeneratedFile>, Error> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("schema");
    std::fs::create_dir(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    generate(&dir)
}

pub fn schema_with(defs: &str) -> String {
    format!(r#"{{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {{{defs}}}}}"#)
}

/// Asserts the error message is exactly `expected` (file, pointer and explanation).
pub fn fails_with(files: &[(&str, &str)], expected: &str) {
    match generate_from(files) {
        Ok(_) => panic!("expected an error: {expected}"),
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.starts_with(expected),
                "expected {expected:?}\n     got {message:?}"
            );
        }
    }
}
