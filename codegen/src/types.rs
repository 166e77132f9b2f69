//! The typify pass: ordinary definitions become serde structs and enums.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use proc_macro2::TokenStream;
use serde_json::Value;
use typify::{TypeSpace, TypeSpaceSettings};

use crate::schema::{SchemaFile, SchemaSet, pointer};
use crate::{Error, Options, Result, emit};

/// Everything a module contains: typify's types plus the hand-written emitters' items.
pub(crate) fn module_tokens(
    set: &SchemaSet,
    file: &SchemaFile,
    options: &Options,
) -> Result<TokenStream> {
    let mut settings = TypeSpaceSettings::default();
    settings
        .with_struct_builder(false)
        .with_derive("PartialEq".to_owned());

    // Own definitions, with every `$ref` rewritten to typify's flat `#/definitions/Name` form,
    // and definitions from other files referenced by name, replaced by a path into their module.
    let mut defs: BTreeMap<String, schemars::schema::Schema> = BTreeMap::new();
    let mut external: BTreeMap<String, String> = BTreeMap::new();
    for def in file.definitions() {
        let at = pointer("/$defs", &def.name);
        if def.special.is_some() {
            // Emitted by hand below; typify only needs to know the name exists.
            settings.with_replacement(&def.name, &def.name, std::iter::empty());
            defs.insert(def.name.clone(), schemars::schema::Schema::Bool(true));
            continue;
        }
        let rewritten = rewrite(set, file, def.schema, &mut external);
        let schema = serde_json::from_value(rewritten).map_err(|e| Error::Schema {
            file: file.display.clone(),
            pointer: at.clone(),
            message: format!("not a schema typify can read: {e}"),
        })?;
        defs.insert(def.name.clone(), schema);
    }
    for (name, path) in &external {
        if defs.contains_key(name) {
            return Err(Error::Schema {
                file: file.display.clone(),
                pointer: pointer("/$defs", name),
                message: format!(
                    "`{name}` is defined here and also referenced from another schema file as `{path}`; rename one of them"
                ),
            });
        }
        settings.with_replacement(name, path, std::iter::empty());
        defs.insert(name.clone(), schemars::schema::Schema::Bool(true));
    }

    let types = convert(&settings, defs.clone()).map_err(|failure| {
        // Pin the failure on one definition: convert each alone, the others standing in as
        // opaque values, and report the first that fails on its own.
        let culprit = file.definitions().find(|def| {
            let mut alone = settings.clone();
            for other in defs.keys().filter(|name| **name != def.name) {
                alone.with_replacement(other, "::serde_json::Value", std::iter::empty());
            }
            convert(&alone, defs.clone()).is_err()
        });
        Error::Schema {
            file: file.display.clone(),
            pointer: culprit
                .map_or_else(|| "/$defs".to_owned(), |def| pointer("/$defs", &def.name)),
            message: failure,
        }
    })?;

    let mut tokens = types;
    for def in file.definitions() {
        tokens.extend(emit::definition_items(file, &def, options)?);
    }
    tokens.extend(emit::protocol_version(file));
    tokens.extend(emit::method_tables(file));
    tokens.extend(crate::message::markers(file));
    Ok(tokens)
}

/// Runs typify over one file's definitions. typify reports some unsupported schemas by
/// panicking; those panics are caught and returned as errors like any other.
fn convert(
    settings: &TypeSpaceSettings,
    defs: BTreeMap<String, schemars::schema::Schema>,
) -> Result<TokenStream, String> {
    let converted = catch_unwind(AssertUnwindSafe(|| {
        let mut space = TypeSpace::new(settings);
        space.add_ref_types(defs)?;
        Ok::<_, typify::Error>(space.to_stream())
    }));
    match converted {
        Ok(Ok(tokens)) => Ok(tokens),
        Ok(Err(e)) => Err(format!("typify cannot convert this schema: {e}")),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown failure");
            Err(format!("typify does not support this construct: {what}"))
        }
    }
}

/// Copies a schema node for typify: drops cancelkit's `x-` keywords and rewrites `$ref`s.
///
/// Walks only schema positions, so a property that happens to be named `x-...`, or an `enum`
/// value that is an object, is copied as it is.
fn rewrite(
    set: &SchemaSet,
    file: &SchemaFile,
    node: &Value,
    external: &mut BTreeMap<String, String>,
) -> Value {
    let Value::Object(obj) = node else {
        return node.clone();
    };
    let mut out = serde_json::Map::new();
    for (key, value) in obj {
        if key.starts_with("x-") {
            continue;
        }
        let value = match key.as_str() {
            "$ref" => {
                let reference = value.as_str().unwrap_or_default();
                let (target, name) = set
                    .resolve(file, reference)
                    .expect("validated: every $ref resolves");
                if !std::ptr::eq(target, file) {
                    external.insert(name.clone(), format!("{}::{name}", target.rust_path()));
                }
                Value::String(format!("#/definitions/{name}"))
            }
            "properties" => Value::Object(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, prop)| (name.clone(), rewrite(set, file, prop, external)))
                    .collect(),
            ),
            "anyOf" | "oneOf" => Value::Array(
                value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|branch| rewrite(set, file, branch, external))
                    .collect(),
            ),
            "items" | "additionalProperties" => rewrite(set, file, value, external),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}
