//! Loading and validating the schema directory.
//!
//! Validation happens before typify sees anything, so that every problem is reported with the
//! file and JSON pointer of the offending value instead of surfacing as a typify error (or panic)
//! about some derived type name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// Keywords a schema node may use. Anything else (other than the `x-` keywords below) is
/// rejected, because typify would silently ignore or mistranslate it.
const KEYWORDS: &[&str] = &[
    "$ref",
    "title",
    "description",
    "type",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "oneOf",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
];

/// Keywords allowed at the top of a schema file.
const ROOT_KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "x-protocol-version",
    "$defs",
];

const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// HTTP verbs recognised at the start of an `x-method` route.
const HTTP_VERBS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

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

    fn validate(&self, file: &SchemaFile) -> Result<()> {
        let root = file
            .root
            .as_object()
            .ok_or_else(|| file.error("", "a schema file must be a JSON object"))?;
        for key in root.keys() {
            if !ROOT_KEYWORDS.contains(&key.as_str()) {
                return Err(file.error(
                    &pointer("", key),
                    format!(
                        "unsupported top-level keyword `{key}`; a schema file holds only {}",
                        ROOT_KEYWORDS.join(", ")
                    ),
                ));
            }
        }
        if let Some(version) = root.get("x-protocol-version")
            && version.as_str().is_none_or(str::is_empty)
        {
            return Err(file.error(
                "/x-protocol-version",
                "`x-protocol-version` must be a non-empty string (the revision, such as \"2025-11-25\")",
            ));
        }
        match root.get("$schema") {
            Some(Value::String(s)) if s == DRAFT_2020_12 => {}
            _ => {
                return Err(
                    file.error("/$schema", format!("`$schema` must be \"{DRAFT_2020_12}\""))
                );
            }
        }
        let defs = root
            .get("$defs")
            .and_then(Value::as_object)
            .ok_or_else(|| file.error("/$defs", "a schema file needs a `$defs` object"))?;
        for (name, def) in defs {
            let at = pointer("/$defs", name);
            if !is_type_name(name) {
                return Err(file.error(
                    &at,
                    format!("definition name `{name}` must be UpperCamelCase ASCII, as it becomes a Rust type"),
                ));
            }
            let obj = def
                .as_object()
                .ok_or_else(|| file.error(&at, "a definition must be a schema object"))?;
            if !obj.get("description").is_some_and(Value::is_string) {
                return Err(file.error(
                    &at,
                    "every definition needs a `description` (it becomes the Rust doc comment)",
                ));
            }
            self.validate_definition_keywords(file, &at, obj)?;
            crate::message::validate(file, &at, obj)?;
            let special = obj.get("x-codegen").and_then(Value::as_str);
            self.validate_node(file, &at, def, special == Some("error-code"))?;
        }
        Ok(())
    }

    fn validate_definition_keywords(
        &self,
        file: &SchemaFile,
        at: &str,
        obj: &Map<String, Value>,
    ) -> Result<()> {
        if let Some(method) = obj.get("x-method") {
            let method = method
                .as_str()
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| {
                    file.error(
                        &pointer(at, "x-method"),
                        "`x-method` must be a non-empty string",
                    )
                })?;
            if method.contains(' ') && http_route(method).is_none() {
                return Err(file.error(
                    &pointer(at, "x-method"),
                    format!("`{method}` is neither a JSON-RPC method name nor an HTTP route like `POST /path` (verbs: {})", HTTP_VERBS.join(", ")),
                ));
            }
        }
        if let Some(cancels) = obj.get("x-cancel") {
            if cancels.as_str().is_none_or(str::is_empty) {
                return Err(file.error(
                    &pointer(at, "x-cancel"),
                    "`x-cancel` must name what the message cancels, e.g. \"request\"",
                ));
            }
            if !obj.contains_key("x-method") {
                return Err(file.error(
                    &pointer(at, "x-cancel"),
                    "`x-cancel` needs an `x-method` on the same definition",
                ));
            }
        }
        if let Some(codegen) = obj.get("x-codegen") {
            match codegen.as_str() {
                Some("request-id") => check_request_id(file, at, obj)?,
                Some("error-code") => check_error_code(file, at, obj)?,
                _ => {
                    return Err(file.error(
                        &pointer(at, "x-codegen"),
                        "`x-codegen` must be \"request-id\" or \"error-code\"",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks one schema node and everything below it.
    fn validate_node(
        &self,
        file: &SchemaFile,
        at: &str,
        node: &Value,
        in_error_code: bool,
    ) -> Result<()> {
        let obj = match node {
            Value::Bool(_) => return Ok(()),
            Value::Object(obj) => obj,
            _ => return Err(file.error(at, "a schema must be an object or a boolean")),
        };
        let is_definition = at.matches('/').count() == 2 && at.starts_with("/$defs/");
        for (key, value) in obj {
            let here = pointer(at, key);
            match key.as_str() {
                "x-method" | "x-cancel" | "x-codegen" | "x-message" if is_definition => {}
                "x-name" if in_error_code => {}
                "const" => {
                    return Err(file.error(&here, "`const` is not supported (typify drops it); write a single-value `enum` instead"));
                }
                k if k.starts_with("x-") => {
                    return Err(file.error(&here, format!("unknown extension keyword `{k}` here; cancelkit reads x-method, x-cancel, x-codegen and x-message on definitions and x-name inside an error-code table")));
                }
                k if !KEYWORDS.contains(&k) => {
                    return Err(file.error(
                        &here,
                        format!(
                            "unsupported keyword `{k}`; the generator understands {}",
                            KEYWORDS.join(", ")
                        ),
                    ));
                }
                _ => {}
            }
            match key.as_str() {
                "$ref" => {
                    let reference = value
                        .as_str()
                        .ok_or_else(|| file.error(&here, "`$ref` must be a string"))?;
                    if self.resolve(file, reference).is_none() {
                        return Err(file.error(&here, format!("`$ref` \"{reference}\" does not name a definition: use \"#/$defs/Name\" or \"other.json#/$defs/Name\" for a definition that exists")));
                    }
                }
                "type" => {
                    let ok = match value {
                        Value::String(t) => TYPES.contains(&t.as_str()),
                        Value::Array(ts) => {
                            !ts.is_empty()
                                && ts
                                    .iter()
                                    .all(|t| t.as_str().is_some_and(|t| TYPES.contains(&t)))
                        }
                        _ => false,
                    };
                    if !ok {
                        return Err(file.error(
                            &here,
                            format!(
                                "`type` must be one of {} or a non-empty array of them",
                                TYPES.join(", ")
                            ),
                        ));
                    }
                }
                "enum" => check_enum(file, &here, value, obj.get("type"))?,
                "description" | "title" if !value.is_string() => {
                    return Err(file.error(&here, format!("`{key}` must be a string")));
                }
                "properties" => {
                    let props = value
                        .as_object()
                        .ok_or_else(|| file.error(&here, "`properties` must be an object"))?;
                    for (name, prop) in props {
                        let prop_at = pointer(&here, name);
                        if !prop.get("description").is_some_and(Value::is_string) {
                            return Err(file.error(&prop_at, "every property needs a `description` (it becomes the field's doc comment)"));
                        }
                        self.validate_node(file, &prop_at, prop, false)?;
                    }
                }
                "required" => {
                    let names = value.as_array().ok_or_else(|| {
                        file.error(&here, "`required` must be an array of property names")
                    })?;
                    for (i, name) in names.iter().enumerate() {
                        let known = name.as_str().is_some_and(|n| {
                            obj.get("properties").and_then(|p| p.get(n)).is_some()
                        });
                        if !known {
                            return Err(file.error(
                                &pointer(&here, &i.to_string()),
                                format!("required property {name} is not declared in `properties`"),
                            ));
                        }
                    }
                }
                "additionalProperties" | "items" => {
                    self.validate_node(file, &here, value, false)?
                }
                "anyOf" | "oneOf" => {
                    let branches = value.as_array().filter(|b| !b.is_empty()).ok_or_else(|| {
                        file.error(
                            &here,
                            format!("`{key}` must be a non-empty array of schemas"),
                        )
                    })?;
                    for (i, branch) in branches.iter().enumerate() {
                        self.validate_node(
                            file,
                            &pointer(&here, &i.to_string()),
                            branch,
                            in_error_code,
                        )?;
                    }
                }
                "minimum" | "maximum" if !value.is_number() => {
                    return Err(file.error(&here, format!("`{key}` must be a number")));
                }
                "minLength" | "maxLength" | "minItems" | "maxItems" if !value.is_u64() => {
                    return Err(
                        file.error(&here, format!("`{key}` must be a non-negative integer"))
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The JSON type name of a value, as `type` spells it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// An `enum` is non-empty and its values fit `type`; without `type`, all non-null values share
/// one JSON type (typify cannot build a Rust enum over mixed types).
fn check_enum(file: &SchemaFile, at: &str, values: &Value, ty: Option<&Value>) -> Result<()> {
    let values = values
        .as_array()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| file.error(at, "`enum` must be a non-empty array"))?;
    let allowed: Vec<&str> = match ty {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let fits = |value: &Value| {
        let t = json_type(value);
        allowed.contains(&t) || (t == "integer" && allowed.contains(&"number"))
    };
    for (i, value) in values.iter().enumerate() {
        if !allowed.is_empty() && !fits(value) {
            return Err(file.error(
                &pointer(at, &i.to_string()),
                format!("{value} does not match the `type` ({})", allowed.join(", ")),
            ));
        }
    }
    let mut kinds: Vec<&str> = values
        .iter()
        .filter(|v| !v.is_null())
        .map(json_type)
        .collect();
    if kinds.contains(&"number") {
        kinds.retain(|k| *k != "integer");
    }
    kinds.sort_unstable();
    kinds.dedup();
    if allowed.is_empty() && kinds.len() > 1 {
        return Err(file.error(
            at,
            format!(
                "`enum` mixes {}; give it a `type` or split it with `anyOf`",
                kinds.join(" and ")
            ),
        ));
    }
    Ok(())
}

/// `x-codegen: "request-id"`: an `anyOf` of one integer and one string branch.
fn check_request_id(file: &SchemaFile, at: &str, obj: &Map<String, Value>) -> Result<()> {
    let types: Vec<&str> = obj
        .get("anyOf")
        .and_then(Value::as_array)
        .map(|branches| {
            branches
                .iter()
                .filter_map(|b| b.get("type")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    if types.len() == 2 && types.contains(&"integer") && types.contains(&"string") {
        Ok(())
    } else {
        Err(file.error(
            &pointer(at, "anyOf"),
            "a request-id definition must be an `anyOf` of exactly one {\"type\": \"integer\"} and one {\"type\": \"string\"} branch",
        ))
    }
}

/// `x-codegen: "error-code"`: an `anyOf` of named single-code branches plus one named fallback.
fn check_error_code(file: &SchemaFile, at: &str, obj: &Map<String, Value>) -> Result<()> {
    let branches = obj.get("anyOf").and_then(Value::as_array).ok_or_else(|| {
        file.error(
            &pointer(at, "anyOf"),
            "an error-code definition needs an `anyOf` table of codes",
        )
    })?;
    let mut fallbacks = 0;
    let mut seen_codes = BTreeMap::new();
    for (i, branch) in branches.iter().enumerate() {
        let here = pointer(&pointer(at, "anyOf"), &i.to_string());
        let name = branch.get("x-name").and_then(Value::as_str);
        if !name.is_some_and(is_type_name) {
            return Err(file.error(
                &here,
                "each error code needs an `x-name` in UpperCamelCase (the Rust variant)",
            ));
        }
        if !branch.get("title").is_some_and(Value::is_string) {
            return Err(file.error(
                &here,
                "each error code needs a `title`: the standard message returned by `message()`",
            ));
        }
        match branch.get("enum").and_then(Value::as_array).map(Vec::as_slice) {
            Some([code]) if code.is_i64() => {
                if let Some(previous) = seen_codes.insert(code.as_i64(), i) {
                    return Err(file.error(&here, format!("code {code} is already listed at index {previous}")));
                }
            }
            Some(_) => return Err(file.error(&pointer(&here, "enum"), "an error code branch lists exactly one integer code")),
            None if branch.get("type").and_then(Value::as_str) == Some("integer") => fallbacks += 1,
            None => return Err(file.error(&here, "an error code branch is either {\"enum\": [code]} or the {\"type\": \"integer\"} fallback")),
        }
    }
    if fallbacks != 1 {
        return Err(file.error(&pointer(at, "anyOf"), "an error-code table needs exactly one {\"type\": \"integer\"} fallback branch (the `Other(i64)` variant)"));
    }
    Ok(())
}

/// Appends one RFC 6901-escaped segment to a JSON pointer.
pub(crate) fn pointer(base: &str, segment: &str) -> String {
    format!("{base}/{}", segment.replace('~', "~0").replace('/', "~1"))
}

fn is_type_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_ascii_alphanumeric())
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
