//! Loading the schema directory: the files, their definitions and cancelkit keywords, and
//! references between files. Validation (`validate.rs`) happens before typify sees anything, so
//! that every problem is reported with the file and JSON pointer of the offending value instead of
//! surfacing as a typify error (or panic) about some derived type name.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::{Error, Result};

mod validate;

pub(crate) use validate::is_type_name;

/// HTTP verbs recognised at the start of an `x-method` route.
pub(crate) const HTTP_VERBS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

/// What kind of message a definition with `x-method` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MessageKind {
    /// A whole JSON-RPC message (it has a `jsonrpc` member).
    JsonRpcMessage,
    /// The params or result of a JSON-RPC message.
    JsonRpcBody,
    /// A request or response body of an HTTP route (`x-method` is `VERB /path`).
    HttpBody,
}

impl MessageKind {
    pub(crate) fn of(method: &str, schema: &Value) -> Self {
        if http_route(method).is_some() {
            MessageKind::HttpBody
        } else if schema
            .get("properties")
            .and_then(|p| p.get("jsonrpc"))
            .is_some()
        {
            MessageKind::JsonRpcMessage
        } else {
            MessageKind::JsonRpcBody
        }
    }
}

/// Splits `POST /cancel_tool_call` into its verb and path; `None` for JSON-RPC method names.
pub(crate) fn http_route(method: &str) -> Option<(&str, &str)> {
    let (verb, path) = method.split_once(' ')?;
    (HTTP_VERBS.contains(&verb) && (path.starts_with('/') || path.starts_with('{')))
        .then_some((verb, path))
}

/// Which hand-written emitter replaces typify for a definition (`x-codegen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    RequestId,
    ErrorCode,
}

/// One `$defs` entry of a schema file, with the cancelkit keywords already read.
#[derive(Debug)]
pub(crate) struct Definition<'a> {
    pub name: String,
    pub schema: &'a Value,
    pub method: Option<String>,
    pub cancels: Option<String>,
    pub special: Option<Special>,
}

/// A parsed and validated schema file.
#[derive(Debug)]
pub(crate) struct SchemaFile {
    /// File name inside the schema directory (`acp.json`).
    pub name: String,
    /// Name used in headers and messages (`schema/acp.json`).
    pub display: String,
    /// Rust module path inside the output crate (`["mcp", "v2025_11_25"]`).
    pub module: Vec<String>,
    /// Lower-case hex SHA-256 of the file's bytes.
    pub digest: String,
    root: Value,
}

impl SchemaFile {
    pub fn defs(&self) -> &Map<String, Value> {
        self.root["$defs"]
            .as_object()
            .expect("validated: $defs is an object")
    }

    /// The definitions in name order, with their cancelkit keywords.
    pub fn definitions(&self) -> impl Iterator<Item = Definition<'_>> {
        let mut names: Vec<&String> = self.defs().keys().collect();
        names.sort();
        names.into_iter().map(|name| {
            let schema = &self.defs()[name];
            let text = |key: &str| schema.get(key).and_then(Value::as_str).map(str::to_owned);
            Definition {
                name: name.clone(),
                schema,
                method: text("x-method"),
                cancels: text("x-cancel"),
                special: match schema.get("x-codegen").and_then(Value::as_str) {
                    Some("request-id") => Some(Special::RequestId),
                    Some("error-code") => Some(Special::ErrorCode),
                    _ => None,
                },
            }
        })
    }

    /// The file's `x-protocol-version`: the protocol revision string its module exports as
    /// `PROTOCOL_VERSION`.
    pub fn protocol_version(&self) -> Option<&str> {
        self.root.get("x-protocol-version").and_then(Value::as_str)
    }

    /// The module's doc comment: the file's `title` as a heading, then its `description`.
    pub fn module_doc(&self) -> String {
        let text = |key: &str| {
            self.root
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let title = match text("title") {
            "" => self.display.clone(),
            title => title.to_owned(),
        };
        format!(
            " {title}\n\n{}\n\nGenerated from `{}`.",
            text("description"),
            self.display
        )
    }

    /// `acp.rs`, `mcp/v2025_11_25.rs`.
    pub fn output_path(&self) -> PathBuf {
        let mut path: PathBuf = self.module.iter().collect();
        path.set_extension("rs");
        path
    }

    /// `crate::mcp::v2025_11_25`.
    pub fn rust_path(&self) -> String {
        std::iter::once("crate")
            .chain(self.module.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("::")
    }

    pub(crate) fn error(&self, pointer: &str, message: impl Into<String>) -> Error {
        Error::Schema {
            file: self.display.clone(),
            pointer: pointer.to_owned(),
            message: message.into(),
        }
    }
}

/// Every schema file of a directory, validated together (cross-file `$ref`s are checked).
#[derive(Debug)]
pub(crate) struct SchemaSet {
    files: Vec<SchemaFile>,
}

impl SchemaSet {
    pub fn load(dir: &Path) -> Result<Self> {
        let label = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        let io = |path: &Path, source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let entry = entry.map_err(|e| io(dir, e))?;
            let path = entry.path();
            if path.is_file() && path.extension().is_some_and(|ext| ext == "json") {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        let mut sources = Vec::with_capacity(names.len());
        for name in names {
            let path = dir.join(&name);
            let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
            sources.push((name, bytes));
        }
        Self::from_sources(&label, sources)
    }

    /// Parses and validates schema files already read: (file name, contents) pairs, sorted by
    /// name. `label` stands for the directory's name in messages and headers.
    pub fn from_sources(label: &str, sources: Vec<(String, Vec<u8>)>) -> Result<Self> {
        if sources.is_empty() {
            return Err(Error::Schema {
                file: label.to_owned(),
                pointer: String::new(),
                message: "no *.json schema files in this directory".into(),
            });
        }

        let mut files = Vec::with_capacity(sources.len());
        for (name, bytes) in sources {
            let display = format!("{label}/{name}");
            let root: Value = serde_json::from_slice(&bytes).map_err(|e| Error::Json {
                file: display.clone(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })?;
            let stem = name.trim_end_matches(".json");
            let module = module_path(stem).ok_or_else(|| Error::Schema {
                file: display.clone(),
                pointer: String::new(),
                message: format!(
                    "cannot derive a Rust module from the file name `{name}`: use `name.json` or \
                     `name-YYYY-MM-DD.json` with a lower-case name"
                ),
            })?;
            files.push(SchemaFile {
                name,
                display,
                module,
                digest: hex(&Sha256::digest(&bytes)),
                root,
            });
        }

        let set = SchemaSet { files };
        for file in &set.files {
            set.validate(file)?;
        }
        Ok(set)
    }

    pub fn files(&self) -> &[SchemaFile] {
        &self.files
    }

    pub fn file(&self, name: &str) -> Option<&SchemaFile> {
        self.files.iter().find(|f| f.name == name)
    }

    /// Resolves a `$ref` written in `from` to the file and definition it names.
    pub fn resolve<'a>(
        &'a self,
        from: &'a SchemaFile,
        reference: &str,
    ) -> Option<(&'a SchemaFile, String)> {
        let (file, fragment) = reference.split_once('#')?;
        let name = fragment.strip_prefix("/$defs/")?;
        if name.contains('/') {
            return None;
        }
        let target = if file.is_empty() {
            from
        } else {
            self.file(file)?
        };
        target
            .defs()
            .contains_key(name)
            .then(|| (target, name.to_owned()))
    }
}

/// Appends one RFC 6901-escaped segment to a JSON pointer.
pub(crate) fn pointer(base: &str, segment: &str) -> String {
    format!("{base}/{}", segment.replace('~', "~0").replace('/', "~1"))
}

/// `acp` → `[acp]`; `mcp-2025-11-25` → `[mcp, v2025_11_25]`.
fn module_path(stem: &str) -> Option<Vec<String>> {
    let is_ident = |s: &str| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    if is_ident(stem) {
        return Some(vec![stem.to_owned()]);
    }
    let (name, date) = stem.split_once('-')?;
    let parts: Vec<&str> = date.split('-').collect();
    let is_date = parts.len() == 3
        && [4, 2, 2]
            .iter()
            .zip(&parts)
            .all(|(len, part)| part.len() == *len && part.chars().all(|c| c.is_ascii_digit()));
    (is_ident(name) && is_date).then(|| vec![name.to_owned(), format!("v{}", parts.join("_"))])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_paths() {
        assert_eq!(module_path("acp"), Some(vec!["acp".into()]));
        assert_eq!(
            module_path("mcp-2025-11-25"),
            Some(vec!["mcp".into(), "v2025_11_25".into()])
        );
        assert_eq!(module_path("Acp"), None);
        assert_eq!(module_path("mcp-2025-11"), None);
        assert_eq!(module_path("mcp-latest"), None);
    }

    #[test]
    fn routes() {
        assert_eq!(
            http_route("POST /cancel_tool_call"),
            Some(("POST", "/cancel_tool_call"))
        );
        assert_eq!(http_route("$/cancel_request"), None);
        assert_eq!(http_route("FETCH /x"), None);
    }

    #[test]
    fn pointers_are_escaped() {
        assert_eq!(pointer("/$defs", "a/b~c"), "/$defs/a~1b~0c");
    }
}
