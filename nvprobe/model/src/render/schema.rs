//! The NDJSON schema (version [`SCHEMA_VERSION`]) as a JSON Schema
//! document, generated from the record types themselves (schemars), so it
//! cannot drift from what the outputs write. Printed by `nvprobe schema`;
//! [`validate`] checks a record against it with an independent validator
//! (the `jsonschema` crate). docs/SCHEMA.md explains the fields.

use std::{collections::HashSet, sync::OnceLock};

use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use super::note::{Note, SCHEMA_VERSION};
use crate::{correlate::Record, decode::Event};

/// The envelope every line carries before its type's fields.
fn envelope() -> Map<String, Value> {
    let v = json!({
        "v": { "const": SCHEMA_VERSION, "description": "schema version" },
        "time": { "type": "string", "description": "wall-clock time of the record, RFC 3339, UTC, microseconds" },
        "mono_ns": { "type": "integer", "minimum": 0, "description": "CLOCK_MONOTONIC ns (the kernel's bpf_ktime_get_ns for kernel events)" },
        "severity": { "enum": ["debug", "info", "warn", "error"], "description": "how serious the record is, as OpenTelemetry's severity text (absent in recordings made before it was added)" },
        "severity_number": { "enum": [5, 9, 13, 17], "description": "OpenTelemetry SeverityNumber of `severity`: DEBUG 5, INFO 9, WARN 13, ERROR 17" }
    });
    v.as_object().cloned().unwrap_or_default()
}

/// Close every object schema that lists its properties (a field the types
/// do not have is an error), recursively.
fn close_objects(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.contains_key("properties") && !m.contains_key("additionalProperties") {
                m.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (_, x) in m.iter_mut() {
                close_objects(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(close_objects),
        _ => {}
    }
}

/// The variants of one internally tagged enum (`oneOf`, each with a
/// `type` const), with the envelope added to each.
fn variants<T: JsonSchema>(
    gen_: &mut schemars::SchemaGenerator,
    defs: &mut Map<String, Value>,
) -> Vec<Value> {
    let root = gen_.root_schema_for::<T>().to_value();
    if let Some(Value::Object(d)) = root.get("$defs") {
        defs.extend(d.clone());
    }
    let list = root
        .get("oneOf")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    list.into_iter()
        .map(|mut var| {
            inline_ref(&mut var, defs);
            if let Some(Value::Object(props)) = var.get_mut("properties") {
                let mut all = envelope();
                all.extend(std::mem::take(props));
                *props = all;
            }
            if let Some(Value::Array(req)) = var.get_mut("required") {
                let mut r: Vec<Value> = ["v", "time", "mono_ns"].map(Value::from).into();
                r.append(req);
                *req = r;
            }
            var
        })
        .collect()
}

/// A newtype variant refers to its struct (`$ref`) beside its `type`
/// const: inline the struct's fields so that the variant is one closed
/// object (`additionalProperties: false` cannot see through a `$ref`).
fn inline_ref(var: &mut Value, defs: &Map<String, Value>) {
    let Some(Value::String(r)) = var.as_object_mut().and_then(|m| m.remove("$ref")) else {
        return;
    };
    let Some(def) = r.strip_prefix("#/$defs/").and_then(|n| defs.get(n)) else {
        return;
    };
    if let (Some(Value::Object(props)), Some(Value::Object(more))) =
        (var.get_mut("properties"), def.get("properties"))
    {
        for (k, v) in more {
            props.insert(k.clone(), v.clone());
        }
    }
    if let (Some(Value::Array(req)), Some(Value::Array(more))) =
        (var.get_mut("required"), def.get("required"))
    {
        req.extend(more.iter().cloned());
    }
    if let (Some(d), Some(m)) = (def.get("description"), var.as_object_mut()) {
        m.entry("description").or_insert_with(|| d.clone());
    }
}

/// The whole schema document: one line is exactly one of the record types.
pub fn schema() -> Value {
    let mut gen_ = SchemaSettings::draft2020_12().into_generator();
    let mut defs = Map::new();
    let mut one_of = variants::<Note<'static>>(&mut gen_, &mut defs);
    one_of.extend(variants::<Event>(&mut gen_, &mut defs));
    one_of.extend(variants::<Record>(&mut gen_, &mut defs));
    let mut doc = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.invalid/nvprobe/schema/v1",
        "title": "nvprobe NDJSON record",
        "description": "One line of `nvprobe watch --json` or `nvprobe decode --json`: an envelope (v, time, mono_ns) and a record whose `type` names it. Generated from nvprobe's record types.",
        "version": SCHEMA_VERSION,
        "type": "object",
        "oneOf": one_of,
        "$defs": defs,
    });
    close_objects(&mut doc);
    doc
}

/// Check one record against the schema. Used by the tests on real and
/// recorded output, so that what the outputs write and what the schema
/// says stay one thing.
pub fn validate(record: &Value) -> Result<(), String> {
    static VALIDATOR: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    let v = VALIDATOR
        .get_or_init(|| jsonschema::validator_for(&schema()).map_err(|e| e.to_string()))
        .as_ref()?;
    let t = record["type"].as_str().unwrap_or("?");
    // oneOf reports every branch; say which record type failed and why.
    if v.is_valid(record) {
        return Ok(());
    }
    let one = schema()["oneOf"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|s| s["properties"]["type"]["const"] == t)
                .cloned()
        })
        .ok_or_else(|| format!("record: unknown type {t:?}"))?;
    // The record's own branch, with the definitions it refers to.
    let mut single = one;
    single["$defs"] = schema()["$defs"].clone();
    let why: Vec<String> = jsonschema::validator_for(&single)
        .map_err(|e| e.to_string())?
        .iter_errors(record)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    Err(format!("{t}: {}", why.join("; ")))
}

/// The `type` consts of a schema's `oneOf`.
fn types_of(s: &Value) -> HashSet<String> {
    s["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["properties"]["type"]["const"].as_str())
        .map(str::to_owned)
        .collect()
}

/// The `type` of every record nvprobe writes: from the schema, so from
/// the record types themselves.
pub fn record_types() -> &'static HashSet<String> {
    static TYPES: OnceLock<HashSet<String>> = OnceLock::new();
    TYPES.get_or_init(|| types_of(&schema()))
}

/// The `type` of every kernel event (the variants of [`Event`]).
pub fn kernel_types() -> &'static HashSet<String> {
    static TYPES: OnceLock<HashSet<String>> = OnceLock::new();
    TYPES.get_or_init(|| {
        let mut g = SchemaSettings::draft2020_12().into_generator();
        types_of(&g.root_schema_for::<Event>().to_value())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validator_accepts_and_rejects() {
        let good = json!({"v": 1, "time": "2026-11-30T00:00:00.000000Z", "mono_ns": 5, "type": "warning", "id": "x", "message": "m"});
        assert_eq!(validate(&good), Ok(()));
        let mut extra = good.clone();
        extra["surprise"] = json!(1);
        assert!(validate(&extra).unwrap_err().contains("surprise"));
        let mut missing = good.clone();
        missing.as_object_mut().expect("object").remove("message");
        assert!(validate(&missing).unwrap_err().contains("message"));
        let mut wrong = good;
        wrong["v"] = json!(2);
        assert!(validate(&wrong).is_err());
    }

    /// The lists the replay and the fuzzer use come from the types: every
    /// kernel event type is a record type, and each variant's name as the
    /// decoder gives it is one of them.
    #[test]
    fn the_record_types_come_from_the_types() {
        let all = record_types();
        let kernel = kernel_types();
        assert!(kernel.is_subset(all));
        for t in ["mknod", "proc", "ioctl", "driver", "nccl"] {
            assert!(kernel.contains(t), "{t} in {kernel:?}");
        }
        for t in [
            "process", "cuinit", "stage", "start", "summary", "stall", "warning", "hang",
            "hang_end",
        ] {
            assert!(all.contains(t) && !kernel.contains(t), "{t}");
        }
    }
}
