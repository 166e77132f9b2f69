//! Target `schema`: the codegen's schema reader and generator on one fuzzed schema file.
//!
//! Input: the text of a schema file, generated as `schema/fuzz.json` next to the real
//! `schema/jsonrpc.json` (included only when the input mentions it, so that `$ref`s into it
//! resolve without paying for its conversion every time). Checks: no panic escapes
//! [`cancelkit_codegen::generate_from_sources`] (typify's own panics are caught inside and
//! become errors); a success is deterministic (a second run gives byte-identical files) and
//! every file starts with its `@generated` header.

use cancelkit_codegen::{Options, generate_from_sources};

/// The real JSON-RPC schema, the one other file a schema may refer to.
const JSONRPC: &[u8] = include_bytes!("../../../schema/jsonrpc.json");

/// Target `schema`.
pub fn check(data: &[u8]) {
    crate::panics::install();
    let mut files: Vec<(&str, &[u8])> = vec![("fuzz.json", data)];
    if data.windows(12).any(|w| w == b"jsonrpc.json") {
        files.push(("jsonrpc.json", JSONRPC));
    }
    let options = Options::default();
    let generate = || {
        crate::panics::judged_by_caller(|| generate_from_sources("schema", &files, &options))
            .unwrap_or_else(|panic| {
                panic!(
                    "the codegen panicked: {}",
                    crate::panics::describe(panic.as_ref())
                )
            })
    };
    if let Ok(generated) = generate() {
        for file in &generated {
            assert!(
                file.contents.starts_with("// @generated"),
                "{} has no @generated header",
                file.path.display()
            );
        }
        let again = generate().expect("the second run of a successful input succeeds");
        assert_eq!(generated, again, "the output is not deterministic");
    }
}
