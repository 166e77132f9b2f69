//! Schema-driven Rust bindings for cancellation protocols.
//!
//! `cancelkit-codegen` reads a directory of hand-written JSON Schema (2020-12, `$defs` only) files
//! and returns one formatted Rust module per file. The conversion of ordinary definitions is done
//! by [typify]; this crate adds what typify cannot express:
//!
//! - per-definition method constants and per-module method tables, taken from the `x-method` and
//!   `x-cancel` keywords;
//! - per-message markers tying method, params and result together (`request::SessionPrompt`
//!   implementing `cancelkit_protocol::Request`, `notification::SessionCancel` implementing
//!   `cancelkit_protocol::Notification`), from `x-message` on a params definition:
//!   `{"kind": "request", "name": "SessionPrompt", "result": "PromptResult"}` or
//!   `{"kind": "notification", "name": "SessionCancel"}` (the generated code names
//!   `::cancelkit_protocol`, so a crate generated elsewhere depends on it for these traits);
//! - a module's `PROTOCOL_VERSION` constant, from the file's top-level `x-protocol-version`;
//! - a `RequestId` (`x-codegen: "request-id"`) that is `Eq + Hash + Ord + Display` and converts
//!   from integers and strings;
//! - an `ErrorCode` (`x-codegen: "error-code"`) with one variant per named code, an `Other(i64)`
//!   fallback, `code()` and `message()`.
//!
//! The function is pure: it reads the schema directory and returns the files' contents; writing
//! them (or checking them) is the caller's business, as `cargo xtask codegen` does for cancelkit.
//! Output is deterministic and starts with a one-line `@generated` header naming the schema file
//! and its SHA-256 digest.
//!
//! ```no_run
//! let files = cancelkit_codegen::generate(std::path::Path::new("schema"))?;
//! for file in &files {
//!     println!("{} ({} bytes) from {}", file.path.display(), file.contents.len(), file.schema);
//! }
//! # Ok::<(), cancelkit_codegen::Error>(())
//! ```
//!
//! # Schema conventions
//!
//! - One file per protocol; `$ref` is either local (`#/$defs/Name`) or points at another file of
//!   the same directory (`jsonrpc.json#/$defs/Name`), which becomes a path into that file's module.
//! - Literal values are written as single-value `enum`s (typify keeps them; it drops `const`).
//! - Every definition and every property carries a `description`; it becomes the Rust doc comment.
//! - Unknown keywords are rejected with the file and JSON pointer, so nothing is silently dropped.
//!
//! [typify]: https://docs.rs/typify

#![forbid(unsafe_code)]

mod emit;
mod message;
mod schema;
mod types;

use std::path::{Path, PathBuf};

pub use schema::MessageKind;

/// One generated Rust source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Where the file belongs, relative to the output crate's `src/` directory
    /// (`acp.rs`, `mcp/v2025_11_25.rs`).
    pub path: PathBuf,
    /// The schema it was generated from, as named in its header (`schema/acp.json`).
    pub schema: String,
    /// The complete file text, header included, formatted by prettyplease.
    pub contents: String,
}

/// Why a schema directory could not be turned into Rust.
///
/// Every variant names the offending file; schema problems also carry the JSON pointer of the
/// offending value, so the message reads like `schema/acp.json#/$defs/Foo/properties/bar: ...`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path that failed.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A schema file is not valid JSON.
    #[error("{file}:{line}:{column}: invalid JSON: {message}")]
    Json {
        /// The schema file, as `schema/<name>`.
        file: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the JSON parser reported.
        message: String,
    },
    /// A schema file is valid JSON but not a schema this generator supports.
    #[error("{file}#{pointer}: {message}")]
    Schema {
        /// The schema file, as `schema/<name>`.
        file: String,
        /// JSON pointer (RFC 6901) to the offending value inside the file; empty for the root.
        pointer: String,
        /// What is wrong and, where possible, how to fix it.
        message: String,
    },
}

/// Convenience alias for this crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Settings for [`generate_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The name of the crate the modules are compiled into, as written in a `use` path. Doc
    /// examples on generated items import from it. Default: `cancelkit_protocol`.
    pub crate_name: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            crate_name: "cancelkit_protocol".to_owned(),
        }
    }
}

/// Generates one Rust module per `*.json` file directly inside `schema_dir`, for the
/// `cancelkit-protocol` crate (see [`generate_with`] to target another crate).
///
/// Files are processed in name order and the result is sorted by output path, so two runs over
/// the same input return byte-identical files. Subdirectories (such as `examples/`) are ignored.
pub fn generate(schema_dir: &Path) -> Result<Vec<GeneratedFile>> {
    generate_with(schema_dir, &Options::default())
}

/// Like [`generate`], with explicit [`Options`].
pub fn generate_with(schema_dir: &Path, options: &Options) -> Result<Vec<GeneratedFile>> {
    generate_set(&schema::SchemaSet::load(schema_dir)?, options)
}

/// Like [`generate_with`], for schema files held in memory rather than in a directory.
///
/// `files` are (file name, contents) pairs, as [`generate`] would find them directly inside a
/// schema directory: names not ending in `.json` are skipped, the rest are processed in name
/// order, and a name given twice is an error. `label` plays the part of the directory's name in
/// headers and error messages (`<label>/<name>`). The result is the same as writing the files
/// into a directory called `label` and calling [`generate_with`] on it.
///
/// ```
/// let jsonrpc = br#"{
///   "$schema": "https://json-schema.org/draft/2020-12/schema",
///   "$defs": {"Ping": {"description": "A ping.", "type": "object", "x-method": "ping"}}
/// }"#;
/// let options = cancelkit_codegen::Options::default();
/// let files = cancelkit_codegen::generate_from_sources("schema", &[("ping.json", jsonrpc)], &options)?;
/// assert_eq!(files[0].path, std::path::Path::new("ping.rs"));
/// assert!(files[0].contents.contains("pub struct Ping"));
///
/// let broken = cancelkit_codegen::generate_from_sources("schema", &[("ping.json", b"{")], &options);
/// assert!(broken.unwrap_err().to_string().starts_with("schema/ping.json:1:"));
/// # Ok::<(), cancelkit_codegen::Error>(())
/// ```
pub fn generate_from_sources(
    label: &str,
    files: &[(&str, &[u8])],
    options: &Options,
) -> Result<Vec<GeneratedFile>> {
    let mut sources: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter(|(name, _)| name.ends_with(".json"))
        .map(|(name, bytes)| ((*name).to_owned(), bytes.to_vec()))
        .collect();
    sources.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(pair) = sources.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        return Err(Error::Schema {
            file: format!("{label}/{}", pair[0].0),
            pointer: String::new(),
            message: "this file name is given more than once".into(),
        });
    }
    generate_set(&schema::SchemaSet::from_sources(label, sources)?, options)
}

fn generate_set(set: &schema::SchemaSet, options: &Options) -> Result<Vec<GeneratedFile>> {
    let mut files = set
        .files()
        .iter()
        .map(|file| {
            let body = types::module_tokens(set, file, options)?;
            let contents = emit::render(file, body)?;
            Ok(GeneratedFile {
                path: file.output_path(),
                schema: file.display.clone(),
                contents,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// A message definition found in a schema: a definition that carries `x-method`.
///
/// Tools use this to list the messages of a schema directory without generating code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The schema file, as `schema/<name>`.
    pub schema: String,
    /// The definition's name (also the Rust type's name).
    pub definition: String,
    /// The `x-method` value: a JSON-RPC method name or an HTTP route such as `POST /cancel_tool_call`.
    pub method: String,
    /// Whether the definition is the whole JSON-RPC message, its params, or an HTTP body.
    pub kind: MessageKind,
    /// The `x-cancel` value, if the message cancels something (`request`, `session`, `task`, ...).
    pub cancels: Option<String>,
}

/// Lists every message definition (those with `x-method`) in `schema_dir`, after validating it.
pub fn messages(schema_dir: &Path) -> Result<Vec<Message>> {
    let set = schema::SchemaSet::load(schema_dir)?;
    Ok(set
        .files()
        .iter()
        .flat_map(|file| {
            file.definitions().filter_map(move |def| {
                let method = def.method.clone()?;
                Some(Message {
                    schema: file.display.clone(),
                    definition: def.name.clone(),
                    kind: MessageKind::of(&method, def.schema),
                    method,
                    cancels: def.cancels.clone(),
                })
            })
        })
        .collect())
}
