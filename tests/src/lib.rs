//! Shared helpers for cancelkit's cross-crate tests: loading `schema/`, validating instances
//! against one definition with the `jsonschema` crate, and comparing JSON the way the wire does.

pub mod node;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use jsonschema::{Registry, Validator};
use serde_json::Value;

/// The workspace's `schema/` directory.
pub fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .join("schema")
}

/// Every schema file of `schema/`, keyed by file stem (`acp`, `mcp-2025-11-25`).
pub struct Schemas {
    files: BTreeMap<String, Value>,
    registry: Registry<'static>,
}

impl Schemas {
    /// Loads and registers every `schema/*.json`, so cross-file `$ref`s resolve offline.
    pub fn load() -> Self {
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(schema_dir()).expect("schema/ exists") {
            let path = entry.expect("readable directory entry").path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).expect("readable schema");
                let value: Value = serde_json::from_str(&text).expect("schema is JSON");
                let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
                files.insert(stem, value);
            }
        }
        let mut registry = Registry::new();
        for value in files.values() {
            let id = value["$id"]
                .as_str()
                .expect("every schema has an $id")
                .to_owned();
            registry = registry.add(id, value.clone()).expect("schema registers");
        }
        let registry = registry.prepare().expect("registry resolves");
        Self { files, registry }
    }

    /// The file stems, sorted.
    pub fn stems(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// The definition names of one file, sorted.
    pub fn definitions(&self, stem: &str) -> Vec<String> {
        self.files[stem]["$defs"]
            .as_object()
            .map(|defs| defs.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// One definition's schema.
    pub fn definition(&self, stem: &str, name: &str) -> Option<&Value> {
        self.files.get(stem)?.get("$defs")?.get(name)
    }

    /// A validator for `stem.json#/$defs/name` (draft 2020-12, no network).
    pub fn validator(&self, stem: &str, name: &str) -> Validator {
        let id = self.files[stem]["$id"].as_str().unwrap();
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .with_registry(&self.registry)
            .build(&serde_json::json!({ "$ref": format!("{id}#/$defs/{name}") }))
            .unwrap_or_else(|e| panic!("cannot build a validator for {stem}#{name}: {e}"))
    }
}

/// JSON equality as the wire sees it: numbers compare by value (`1` equals `1.0`), objects
/// ignore member order.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Builds one of the runtime's examples and returns the path of its binary.
pub fn example(name: &str) -> PathBuf {
    example_with_features(name, &[])
}

/// Like [`example`], for an example that needs some of the runtime's features.
pub fn example_with_features(name: &str, features: &[&str]) -> PathBuf {
    let features = features.join(",");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "cancelkit", "--example", name])
        .args(if features.is_empty() {
            vec![]
        } else {
            vec!["--features", features.as_str()]
        })
        .current_dir(schema_dir().parent().expect("the workspace root"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the {name} example builds");
    let me = std::env::current_exe().expect("the test binary's path");
    me.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join("examples")
        .join(name)
}
