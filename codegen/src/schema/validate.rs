//! Validation of a schema file, before typify sees anything: every problem is reported with the
//! file and JSON pointer of the offending value.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{HTTP_VERBS, SchemaFile, SchemaSet, http_route, pointer};
use crate::Result;

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

impl SchemaSet {
    /// Checks one file: its top-level keywords, its definitions and every node below them.
    pub(super) fn validate(&self, file: &SchemaFile) -> Result<()> {
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
                    self.validate_node(file, &here, value, false)?;
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

/// Whether `name` is an UpperCamelCase Rust type name (ASCII letters and digits).
pub(crate) fn is_type_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_ascii_alphanumeric())
}
