//! A JSON object read one level deep: its top-level members in order, each value kept as the
//! raw JSON text it was written as.
//!
//! For the edits a runtime or a gateway makes to a message it passes on — add `resultType` to a
//! result, name a run in its `_meta`, drop a member an older client does not know — without
//! parsing what it does not touch. A member is found by its name (escapes decoded), never by
//! searching the text; a value is parsed only when an edit reaches into it ([`Members::edit`]),
//! and every other value is written back exactly as it was read.
//!
//! ```
//! use cancelkit_wire::members::Members;
//!
//! let mut result = Members::read(r#"{"content":[{"type":"text","text":"1.50"}],"n":1.50}"#).unwrap();
//! result.insert_first("resultType", "complete");
//! assert!(result.remove("n"));
//! assert_eq!(
//!     result.to_raw().unwrap().get(),
//!     r#"{"resultType":"complete","content":[{"type":"text","text":"1.50"}]}"#
//! );
//! ```

use std::borrow::Cow;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A JSON object read one level deep: its members in order, each value raw.
#[derive(Debug)]
pub struct Members<'a> {
    members: Vec<(Cow<'a, str>, Cow<'a, RawValue>)>,
}

impl<'a> Members<'a> {
    /// The members of `text`, if it is an object.
    pub fn read(text: &'a str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.members.iter().position(|(name, _)| name == key)
    }

    /// The raw value of `key`, if the object has it (the first, if it has it twice).
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.position(key).map(|at| &*self.members[at].1)
    }

    /// Removes `key`; whether it was there.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.members.len();
        self.members.retain(|(name, _)| name != key);
        self.members.len() != before
    }

    /// Adds `key: value` at the end unless `key` is there; whether it was added.
    pub fn insert(&mut self, key: &'static str, value: impl Serialize) -> bool {
        self.insert_at(None, key, value)
    }

    /// Adds `key: value` first unless `key` is there; whether it was added.
    pub fn insert_first(&mut self, key: &'static str, value: impl Serialize) -> bool {
        self.insert_at(Some(0), key, value)
    }

    fn insert_at(&mut self, at: Option<usize>, key: &'static str, value: impl Serialize) -> bool {
        if self.position(key).is_some() {
            return false;
        }
        let Ok(value) = serde_json::value::to_raw_value(&value) else {
            return false;
        };
        let member = (Cow::Borrowed(key), Cow::Owned(value));
        match at {
            Some(at) => self.members.insert(at, member),
            None => self.members.push(member),
        }
        true
    }

    /// Edits one member as a JSON value (`{}` when missing); whether `edit` changed it. A
    /// member that does not parse is left alone.
    pub fn edit(&mut self, key: &'static str, edit: impl FnOnce(&mut Value) -> bool) -> bool {
        let at = self.position(key);
        let mut value = match at {
            Some(at) => match serde_json::from_str(self.members[at].1.get()) {
                Ok(value) => value,
                Err(_) => return false,
            },
            None => Value::Object(Map::new()),
        };
        if !edit(&mut value) {
            return false;
        }
        let Ok(raw) = serde_json::value::to_raw_value(&value) else {
            return false;
        };
        match at {
            Some(at) => self.members[at].1 = Cow::Owned(raw),
            None => self.members.push((Cow::Borrowed(key), Cow::Owned(raw))),
        }
        true
    }

    /// The object, serialised again: each member's value as it was read.
    pub fn to_raw(&self) -> Option<Box<RawValue>> {
        serde_json::value::to_raw_value(self).ok()
    }
}

/// Edits the members of `value`, an object, with `edit`, which says whether it changed
/// anything; what it changed is written back, each other value as it was read. `value` is
/// returned as it is when it is not an object or nothing changed.
pub fn edit_object(
    value: Box<RawValue>,
    edit: impl FnOnce(&mut Members<'_>) -> bool,
) -> Box<RawValue> {
    let edited = Members::read(value.get()).and_then(|mut members| {
        if edit(&mut members) {
            members.to_raw()
        } else {
            None
        }
    });
    edited.unwrap_or(value)
}

/// A member's name, borrowed from the text unless it holds escapes.
#[derive(Deserialize)]
#[serde(transparent)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4).min(64) + 3);
                while let Some((key, value)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    members.push((key.0, Cow::Borrowed(value)));
                }
                Ok(Members { members })
            }
        }
        deserializer.deserialize_map(Object)
    }
}

impl Serialize for Members<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.members.len()))?;
        for (key, value) in &self.members {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_object_is_read() {
        for text in [
            "[1]",
            "\"s\"",
            "null",
            "1",
            "",
            "{",
            "{\"a\":}",
            "{\"a\":1}x",
        ] {
            assert!(Members::read(text).is_none(), "{text:?}");
        }
        assert!(Members::read(" {} ").is_some());
    }

    #[test]
    fn names_are_decoded_and_values_are_kept_as_written() {
        let mut members = Members::read(r#"{"a\u0062":[1, 2.50],"c":{"d" :1}}"#).unwrap();
        assert_eq!(members.get("ab").map(RawValue::get), Some("[1, 2.50]"));
        assert!(!members.insert("ab", 0), "present under its escaped name");
        assert!(members.edit("c", |c| {
            c["e"] = Value::Bool(true);
            true
        }));
        assert!(
            !members.edit("c", |_| false),
            "an edit that changes nothing"
        );
        assert_eq!(
            members.to_raw().unwrap().get(),
            r#"{"ab":[1, 2.50],"c":{"d":1,"e":true}}"#
        );
    }

    #[test]
    fn an_object_is_written_again_only_when_an_edit_changed_it() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).unwrap();
        let written = r#"{ "a" : 1.50 }"#;
        assert_eq!(edit_object(raw(written), |m| m.remove("b")).get(), written);
        assert_eq!(edit_object(raw(written), |m| m.remove("a")).get(), "{}");
        assert_eq!(edit_object(raw("[1]"), |m| m.insert("a", 1)).get(), "[1]");
    }

    #[test]
    fn a_name_given_twice_is_removed_everywhere() {
        let mut members = Members::read(r#"{"x":1,"y":2,"x":3}"#).unwrap();
        assert_eq!(members.get("x").map(RawValue::get), Some("1"));
        assert!(members.remove("x"));
        assert!(!members.remove("x"));
        assert_eq!(members.to_raw().unwrap().get(), r#"{"y":2}"#);
    }
}
