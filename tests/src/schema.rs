//! `schema/` loaded into a `jsonschema` registry, so one definition can be validated offline.

use std::collections::BTreeMap;

use jsonschema::{Registry, Validator};
use serde_json::Value;

use crate::schema_dir;

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
