//! Command-specific fields of a decoded call, kept as typed values with
//! static keys (no per-field allocation on the per-event path), serialized
//! as a JSON object: handles and numbers as hex strings, fds as integers,
//! `*_name` keys naming the number before them.

use serde::{Serialize, Serializer, ser::SerializeMap};
use serde_json::Value;

#[derive(Clone, Debug)]
pub enum Arg {
    Hex(u64),
    Int(i64),
    Bool(bool),
    Str(&'static str),
    Text(String),
    HexList(Vec<u64>),
    StrList(Vec<String>),
}

/// A number from the RM tables, with its name when the table knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    pub code: u32,
    pub name: Option<&'static str>,
}

/// What the correlator and the views read of a call's arguments, as
/// values: set by the decoders together with the JSON keys that show them
/// to people, so nothing reads a key back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Known {
    /// The RM control of an `NV_ESC_RM_CONTROL` (`control`, `control_name`).
    pub control: Option<Named>,
    /// The class an RM allocation creates (`hClass`, `hClass_name`).
    pub class: Option<Named>,
    /// UVM's answer on pageable memory access (`pageableMemAccess`).
    pub pageable: Option<bool>,
    /// The GPU a UVM command or an RM control names (`gpu_uuid`).
    pub gpu_uuid: Option<String>,
    /// The driver's build version an RM control answered
    /// (`driver_version`: NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION(_V2)).
    pub driver_version: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Args {
    items: Vec<(&'static str, Arg)>,
    known: Known,
}

impl Args {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn insert(&mut self, key: &'static str, v: Arg) {
        self.items.push((key, v));
    }
    /// The typed facts (see [`Known`]).
    pub fn known(&self) -> &Known {
        &self.known
    }
    /// The typed facts, for a reader that sets them from the keys.
    pub(super) fn known_mut(&mut self) -> &mut Known {
        &mut self.known
    }
    /// An RM control: `control` and `control_name`.
    pub fn control(&mut self, code: u32, name: Option<&'static str>) {
        self.named("control", "control_name", code, name);
        self.known.control = Some(Named { code, name });
    }
    /// An RM class: `hClass` and `hClass_name`.
    pub fn class(&mut self, code: u32, name: Option<&'static str>) {
        self.named("hClass", "hClass_name", code, name);
        self.known.class = Some(Named { code, name });
    }
    /// `pageableMemAccess`.
    pub fn pageable(&mut self, on: bool) {
        self.insert("pageableMemAccess", Arg::from(on));
        self.known.pageable = Some(on);
    }
    /// `driver_version`.
    pub fn driver_version(&mut self, v: String) {
        self.known.driver_version = Some(v.clone());
        self.insert("driver_version", Arg::Text(v));
    }
    /// `gpu_uuid`.
    pub fn gpu_uuid(&mut self, uuid: String) {
        self.known.gpu_uuid = Some(uuid.clone());
        self.insert("gpu_uuid", Arg::Text(uuid));
    }
    /// `key` = the number, `name_key` = its name when the table knows it.
    fn named(
        &mut self,
        key: &'static str,
        name_key: &'static str,
        code: u32,
        name: Option<&'static str>,
    ) {
        self.insert(key, Arg::Hex(code.into()));
        if let Some(n) = name {
            self.insert(name_key, Arg::Str(n));
        }
    }
    pub fn get(&self, key: &str) -> Option<&Arg> {
        self.items.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Arg)> {
        self.items.iter().map(|(k, v)| (*k, v))
    }
    /// The JSON object, for tests and tools.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl PartialEq for Arg {
    /// A table's name and a text are the same value when they say the same,
    /// and so are two empty lists (the JSON cannot tell them apart).
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Arg::Hex(a), Arg::Hex(b)) => a == b,
            (Arg::HexList(a), Arg::HexList(b)) => a == b,
            (Arg::Int(a), Arg::Int(b)) => a == b,
            (Arg::Bool(a), Arg::Bool(b)) => a == b,
            (Arg::StrList(a), Arg::StrList(b)) => a == b,
            // `[]` either way.
            (Arg::HexList(h), Arg::StrList(s)) | (Arg::StrList(s), Arg::HexList(h)) => {
                h.is_empty() && s.is_empty()
            }
            (Arg::Str(_) | Arg::Text(_), Arg::Str(_) | Arg::Text(_)) => self.text() == other.text(),
            _ => false,
        }
    }
}

impl Arg {
    /// The value as text mode shows it.
    pub fn text(&self) -> String {
        match self {
            Arg::Hex(v) => format!("{v:#x}"),
            Arg::Int(v) => v.to_string(),
            Arg::Bool(b) => b.to_string(),
            Arg::Str(s) => (*s).to_owned(),
            Arg::Text(s) => s.clone(),
            Arg::HexList(v) => format!(
                "[{}]",
                v.iter()
                    .map(|x| format!("{x:#x}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Arg::StrList(v) => format!("[{}]", v.join(",")),
        }
    }
}

struct HexStr(u64);

impl Serialize for HexStr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#x}", self.0))
    }
}

impl Serialize for Arg {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Arg::Hex(v) => HexStr(*v).serialize(s),
            Arg::Int(v) => s.serialize_i64(*v),
            Arg::Bool(b) => s.serialize_bool(*b),
            Arg::Str(v) => s.serialize_str(v),
            Arg::Text(v) => s.serialize_str(v),
            Arg::HexList(v) => s.collect_seq(v.iter().map(|x| HexStr(*x))),
            Arg::StrList(v) => s.collect_seq(v.iter()),
        }
    }
}

impl Serialize for Args {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.items.len()))?;
        for (k, v) in &self.items {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl From<i32> for Arg {
    fn from(v: i32) -> Self {
        Arg::Int(v.into())
    }
}
impl From<u32> for Arg {
    fn from(v: u32) -> Self {
        Arg::Int(v.into())
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(v)
    }
}

impl schemars::JsonSchema for Args {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Args".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "the command's decoded fields: handles and numbers as hex strings, fds and counts as integers, `*_name` naming the number before it",
            "additionalProperties": {
                "type": ["string", "integer", "boolean", "array"],
                "items": { "type": ["string", "integer"] }
            }
        })
    }
}
