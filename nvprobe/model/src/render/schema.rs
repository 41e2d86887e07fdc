//! The NDJSON schema (version [`SCHEMA_VERSION`]) as a JSON Schema
//! document, printed by `nvprobe schema` and checked against real output in
//! the tests. docs/SCHEMA.md explains the fields.

use serde_json::{Value, json};

use super::SCHEMA_VERSION;

fn opt(t: &str) -> Value {
    json!({ "type": [t, "null"] })
}

fn proc_props() -> serde_json::Map<String, Value> {
    let v = json!({
        "pid": { "type": "integer", "description": "host pid (thread-group id)" },
        "tid": { "type": "integer", "description": "host thread id" },
        "ns_pid": { "type": "integer", "description": "pid in the task's own pid namespace; only when it differs (containers)" },
        "ns_tid": { "type": "integer", "description": "tid in the task's own pid namespace; only when it differs" },
        "comm": { "type": "string", "description": "task name; control characters and invalid UTF-8 escaped as \\xNN" },
        "uid": { "type": "integer" }
    });
    v.as_object().cloned().unwrap_or_default()
}

fn device() -> Value {
    json!({
        "type": "object",
        "required": ["major", "minor", "kind"],
        "additionalProperties": false,
        "properties": {
            "major": { "type": "integer" },
            "minor": { "type": "integer" },
            "kind": { "enum": ["ctl", "gpu", "uvm", "uvm-tools", "modeset", "caps", "other", "none"] },
            "node": { "type": "string", "description": "device node path, or the --device path" },
            "extra": { "type": "boolean", "description": "a file declared with --device" }
        }
    })
}

fn def(type_name: &str, required: &[&str], props: Value, with_proc: bool) -> Value {
    let mut p = if with_proc {
        proc_props()
    } else {
        serde_json::Map::new()
    };
    p.insert("type".into(), json!({ "const": type_name }));
    if let Value::Object(m) = props {
        p.extend(m);
    }
    let mut req: Vec<&str> = vec!["type"];
    if with_proc {
        req.extend(["pid", "tid", "comm", "uid"]);
    }
    req.extend(required);
    json!({ "type": "object", "required": req, "properties": p })
}

fn path_call(t: &str) -> Value {
    def(
        t,
        &[
            "syscall",
            "path",
            "flags",
            "start_ns",
            "duration_ns",
            "ret",
            "ok",
        ],
        json!({
            "syscall": { "type": "string" },
            "path": { "type": "string" },
            "path_truncated": { "type": "boolean" },
            "flags": { "type": "string", "description": "O_* flags, AT_* flags or the access mode" },
            "start_ns": { "type": "integer" },
            "duration_ns": { "type": "integer" },
            "ret": { "type": "integer" },
            "errno": { "type": "string" },
            "fd": { "type": "integer" },
            "device": device(),
            "mismatch": { "type": "string", "description": "the path names an NVIDIA node but the file is another device" },
            "ok": { "type": "boolean" },
            "raw": { "type": "string" }
        }),
        true,
    )
}

fn fd_call(t: &str) -> Value {
    def(
        t,
        &[
            "syscall",
            "fd",
            "device",
            "start_ns",
            "duration_ns",
            "ret",
            "ok",
        ],
        json!({
            "syscall": { "type": "string" },
            "fd": { "type": "integer" },
            "device": device(),
            "newfd": { "type": "integer" },
            "start_ns": { "type": "integer" },
            "duration_ns": { "type": "integer" },
            "ret": { "type": "integer" },
            "errno": { "type": "string" },
            "ok": { "type": "boolean" },
            "raw": { "type": "string" }
        }),
        true,
    )
}

/// The whole schema document.
pub fn schema() -> Value {
    let types = [
        "start",
        "warning",
        "lost",
        "summary",
        "ioctl",
        "open",
        "stat",
        "access",
        "close",
        "dup",
        "mmap",
        "proc",
        "stage",
        "cuinit",
        "cuda",
        "stall",
        "signal",
        "driver",
        "breakdown",
    ];
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("nvprobe/schema/v{SCHEMA_VERSION}"),
        "title": format!("nvprobe NDJSON record, schema version {SCHEMA_VERSION}"),
        "description": "One JSON object per line. Every record has the envelope (v, time, mono_ns, type); the rest depends on type. Fields marked optional are omitted when empty. New optional fields may appear without a version change.",
        "type": "object",
        "required": ["v", "time", "mono_ns", "type"],
        "properties": {
            "v": { "const": SCHEMA_VERSION },
            "time": { "type": "string", "format": "date-time", "description": "wall clock, RFC 3339, UTC, microseconds" },
            "mono_ns": { "type": "integer", "description": "CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns) when the record was made" },
            "type": { "enum": types }
        },
        "oneOf": types.iter().map(|t| json!({ "$ref": format!("#/$defs/{t}") })).collect::<Vec<_>>(),
        "$defs": {
            "start": def("start", &["tool_version", "driver", "decode_version", "layouts", "probes", "ringbuf_bytes", "filters", "tracefs"], json!({
                "tool_version": { "type": "string" },
                "kernel": { "type": "string" },
                "driver": { "type": ["object", "null"], "properties": { "version": { "type": "string" }, "flavor": { "type": "string" } } },
                "decode_version": { "type": "string", "description": "driver version whose struct layouts decode statuses" },
                "layouts": { "enum": ["known", "assumed"] },
                "nvidia_major": opt("integer"),
                "uvm_major": opt("integer"),
                "caps_major": opt("integer"),
                "probes": { "type": "array", "items": { "type": "object", "required": ["name", "target", "layer", "attached"] } },
                "ringbuf_bytes": { "type": "integer" },
                "filters": { "type": "object" },
                "tracefs": { "type": "string" },
                "tracefs_mounted_by_nvprobe": { "type": "boolean" },
                "nodes": { "type": "object", "description": "\"major:minor\" -> device node path, as found under /dev" },
                "extra_devices": { "type": "array", "description": "files declared with --device: path, kind, sdev, ino" },
                "libcuda": { "type": "array", "description": "libcuda files hooked at start: path, functions" },
                "ioctls_in_driver": { "type": "boolean", "description": "NVIDIA ioctls are traced by the driver layer's kprobes (ioctl records say via: driver, fd -1) and the ioctl syscall tracepoints are off" },
                "driver_layer": { "type": "object", "required": ["attached", "reason"], "description": "hooks inside nvidia/nvidia_uvm: attached, why not (null when attached), and each hook symbol (name, module, present, attached, required); hooks is null when kallsyms shows no module symbols" }
            }), false),
            "warning": def("warning", &["id", "message"], json!({
                "id": { "type": "string" },
                "message": { "type": "string" }
            }), false),
            "lost": def("lost", &["cpu", "kind", "count", "total"], json!({
                "cpu": { "type": "integer" },
                "kind": { "type": "string", "description": "record kind that could not be reserved in the ring buffer" },
                "count": { "type": "integer", "description": "lost since the previous lost record for this cpu and kind" },
                "total": { "type": "integer", "description": "lost so far, all CPUs and kinds" }
            }), false),
            "summary": def("summary", &["duration_s", "events", "failed", "lost", "decode_errors", "processes", "calls"], json!({
                "duration_s": { "type": "number" },
                "events": { "type": "object" },
                "failed": { "type": "integer" },
                "lost": { "type": "object", "required": ["total", "per_cpu", "per_kind"] },
                "decode_errors": { "type": "integer" },
                "processes": { "type": "array" },
                "calls": { "type": "array" },
                "bpf": { "type": "array", "description": "per BPF program: program, run_count, run_time_ns, ns_per_run (with --bpf-stats)" }
            }), false),
            "ioctl": def("ioctl", &["fd", "device", "request", "family", "size", "args", "start_ns", "duration_ns", "ret", "ok"], json!({
                "fd": { "type": "integer" },
                "device": device(),
                "request": { "type": "string", "description": "raw command word, hex" },
                "family": { "enum": ["escape", "uvm", "nvkms", "unknown"] },
                "name": { "type": "string", "description": "escape or UVM command name; absent for unknown numbers" },
                "xfer": { "type": "object", "required": ["cmd", "size"], "properties": { "cmd": { "type": "string" }, "name": { "type": "string" }, "size": { "type": "integer" } } },
                "size": { "type": "integer", "description": "parameter struct size" },
                "args": { "type": "object", "description": "command-specific fields (handles hex strings, fds integers; *_name keys name a number)" },
                "start_ns": { "type": "integer" },
                "duration_ns": { "type": "integer" },
                "ret": { "type": "integer" },
                "errno": { "type": "string" },
                "status": {
                    "type": "object",
                    "required": ["code", "offset", "layout"],
                    "properties": {
                        "code": { "type": "string" },
                        "name": { "type": "string" },
                        "offset": { "type": "integer" },
                        "layout": { "enum": ["ioc_size", "stable", "driver_version", "assumed"] }
                    }
                },
                "status_note": { "type": "string", "description": "why no status is shown" },
                "ok": { "type": "boolean" },
                "via": { "const": "driver", "description": "made by the driver layer (kprobe on the module's ioctl entry point); fd is then -1" },
                "raw": { "type": "string", "description": "the kernel record, hex (with --raw); `nvprobe decode` reads it" }
            }), true),
            "proc": def("proc", &["op", "target_pid", "time_ns"], json!({
                "op": { "enum": ["exit", "exec", "signal", "signal_delivered", "fork", "unknown"] },
                "target_pid": { "type": "integer", "description": "the process concerned (for op signal: the receiver; pid/comm are the sender)" },
                "target_tid": { "type": "integer" },
                "sig": { "type": "integer" },
                "signal": { "type": "string" },
                "code": { "type": "integer", "description": "siginfo si_code: 0 SI_USER (kill), 128 SI_KERNEL (alarm, itimer), -2 SI_TIMER, -6 SI_TKILL" },
                "exit_code": { "type": "integer", "description": "wait(2)-style: status << 8, or the fatal signal (| 0x80 with a core)" },
                "exit": { "type": "string" },
                "action": { "enum": ["default", "ignored", "handler"], "description": "signal_delivered: the receiver's disposition" },
                "sa_restart": { "type": "boolean", "description": "signal_delivered: the handler has SA_RESTART" },
                "time_ns": { "type": "integer" },
                "raw": { "type": "string" }
            }), true),
            "cuda": def("cuda", &["func", "phase", "start_ns"], json!({
                "func": { "type": "string" },
                "phase": { "enum": ["enter", "return"] },
                "start_ns": { "type": "integer" },
                "duration_ns": { "type": "integer" },
                "result": { "type": "integer", "description": "CUresult" },
                "result_name": { "type": "string" },
                "flags": { "type": "integer", "description": "cuInit's flags" },
                "value": { "type": "integer", "description": "what a getter wrote through its pointer" },
                "raw": { "type": "string" }
            }), true),
            "driver": def("driver", &["function", "module", "start_ns", "duration_ns", "ret", "result", "ok"], json!({
                "function": { "type": "string", "description": "the hooked function (nvprobe's driver-layer hook table)" },
                "module": { "enum": ["nvidia", "nvidia_uvm", "vmlinux", "unknown"] },
                "start_ns": { "type": "integer" },
                "duration_ns": { "type": "integer", "description": "time inside the function, entry to return" },
                "ret": { "type": "integer", "description": "raw return value" },
                "result": { "type": "string", "description": "0, errno, NV_STATUS name, true/false, pointer/NULL, void" },
                "ok": { "type": "boolean" },
                "call": { "type": "string", "description": "escape or UVM command (ioctl entry points, rm_ioctl)" },
                "device": { "type": "string", "description": "major:minor of the file (ioctl entry points)" },
                "rm_status": { "type": "object", "required": ["code", "offset", "layout"], "description": "rm_ioctl: the status in the kernel's copy of the parameters" },
                "raw": { "type": "string" }
            }), true),
            "breakdown": def("breakdown", &["pid", "tid", "comm", "call", "duration_ns", "spans", "text"], json!({
                "pid": { "type": "integer" },
                "tid": { "type": "integer" },
                "comm": { "type": "string" },
                "call": { "type": "string", "description": "the slow or failing NVIDIA call" },
                "duration_ns": { "type": "integer" },
                "spans": { "type": "array", "description": "driver functions inside the call, innermost first: function, duration_ns, result" },
                "text": { "type": "string" }
            }), false),
            "stall": def("stall", &["pid", "tid", "comm", "call", "elapsed_s", "state", "text"], json!({
                "pid": { "type": "integer" },
                "tid": { "type": "integer" },
                "comm": { "type": "string" },
                "call": { "type": "string", "description": "the call still running: escape/UVM name, or cuInit" },
                "fd": { "type": "integer" },
                "elapsed_s": { "type": "number" },
                "state": { "type": "string", "description": "task state from /proc: D, S, R, T, …" },
                "text": { "type": "string" },
                "wchan": { "type": "string" },
                "stack": { "type": "array", "description": "kernel stack (D state), innermost first" },
                "stopped_by": { "type": "string", "description": "for T: the stop signal and its sender" },
                "stage": { "type": "string", "description": "the last cuInit stage the process reached" },
                "driver_function": { "type": "string", "description": "innermost kernel-stack frame inside an NVIDIA module: the driver function the call is in" }
            }), false),
            "signal": def("signal", &["pid", "comm", "sig", "signal", "sender", "at_ms", "in_flight", "outcome", "text"], json!({
                "pid": { "type": "integer", "description": "the receiver" },
                "comm": { "type": "string" },
                "sig": { "type": "integer" },
                "signal": { "type": "string" },
                "sender": { "type": "string", "description": "comm[pid], or the kind of timer" },
                "sender_pid": { "type": ["integer", "null"] },
                "at_ms": { "type": "number", "description": "since the process's first NVIDIA call" },
                "stage": { "type": ["string", "null"], "description": "the last stage reached when it came" },
                "in_flight": { "type": "string", "description": "the NVIDIA call it landed in, or cuInit" },
                "outcome": { "enum": ["eintr", "eintr_retried", "restarted", "completed", "died_in_call", "interrupted", "in_user_space"] },
                "text": { "type": "string" }
            }), false),
            "stage": def("stage", &["pid", "comm", "stage", "name", "at_ms", "via"], json!({
                "pid": { "type": "integer" },
                "comm": { "type": "string" },
                "stage": { "enum": ["S0", "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8"] },
                "name": { "type": "string" },
                "at_ms": { "type": "number", "description": "since the process's first NVIDIA call" },
                "via": { "type": "string", "description": "the call that completed the stage" }
            }), false),
            "cuinit": def("cuinit", &["pid", "comm", "result", "source", "text", "total_ms", "stages", "calls", "diagnoses"], json!({
                "pid": { "type": "integer" },
                "comm": { "type": "string" },
                "result": { "enum": ["ok", "failed", "killed", "exited", "incomplete"] },
                "source": { "type": "string", "description": "what the verdict rests on" },
                "text": { "type": "string" },
                "total_ms": { "type": "number" },
                "stages": { "type": "array" },
                "calls": { "type": "integer" },
                "failed_call": { "type": "object" },
                "signal": { "type": "object" },
                "exit": { "type": "string" },
                "curesult": { "type": "string", "description": "what cuInit returned, when its uprobe saw it" },
                "diagnoses": { "type": "array", "description": "each {id, evidence, hint}" }
            }), false),
            "open": path_call("open"),
            "stat": path_call("stat"),
            "access": path_call("access"),
            "close": fd_call("close"),
            "dup": fd_call("dup"),
            "mmap": def("mmap", &["fd", "device", "addr", "length", "offset", "prot", "flags", "start_ns", "duration_ns", "ret", "ok"], json!({
                "fd": { "type": "integer" },
                "device": device(),
                "addr": { "type": "string" },
                "length": { "type": "integer" },
                "offset": { "type": "string" },
                "prot": { "type": "string" },
                "flags": { "type": "string" },
                "start_ns": { "type": "integer" },
                "duration_ns": { "type": "integer" },
                "ret": { "type": "string", "description": "mapped address (hex) or the negative errno" },
                "errno": { "type": "string" },
                "ok": { "type": "boolean" },
                "raw": { "type": "string" }
            }), true)
        }
    })
}

fn type_ok(want: &Value, v: &Value) -> bool {
    let one = |t: &str| match t {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        _ => true,
    };
    match want {
        Value::String(t) => one(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(one),
        _ => true,
    }
}

fn check_object(schema: &Value, v: &Value, path: &str, strict: bool) -> Result<(), String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("{path}: not an object"))?;
    if let Some(req) = schema.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            if !obj.contains_key(r) {
                return Err(format!("{path}: missing required field {r:?}"));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let closed = strict || schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (k, val) in obj {
        match props.and_then(|p| p.get(k)) {
            Some(ps) => {
                if let Some(t) = ps.get("type")
                    && !type_ok(t, val)
                {
                    return Err(format!("{path}.{k}: {val} is not of type {t}"));
                }
                if let Some(c) = ps.get("const")
                    && c != val
                {
                    return Err(format!("{path}.{k}: {val} is not {c}"));
                }
                if let Some(e) = ps.get("enum").and_then(Value::as_array)
                    && !e.contains(val)
                {
                    return Err(format!("{path}.{k}: {val} is not one of {e:?}"));
                }
                if ps.get("properties").is_some() && val.is_object() {
                    check_object(ps, val, &format!("{path}.{k}"), false)?;
                }
            }
            None if closed => return Err(format!("{path}: field {k:?} is not in the schema")),
            None => {}
        }
    }
    Ok(())
}

/// Check one record against the schema: the envelope, then the definition
/// for its type, with no field outside the schema. Used by the tests on real
/// and recorded output so that the documented schema stays true.
pub fn validate(record: &Value) -> Result<(), String> {
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let s = SCHEMA.get_or_init(schema);
    let env = json!({ "required": s["required"], "properties": s["properties"] });
    check_object(&env, record, "record", false)?;
    let t = record["type"]
        .as_str()
        .ok_or("record: type is not a string")?;
    let d = s["$defs"]
        .get(t)
        .ok_or_else(|| format!("record: unknown type {t:?}"))?;
    let mut props = d["properties"].as_object().cloned().unwrap_or_default();
    for k in ["v", "time", "mono_ns"] {
        props.insert(k.into(), s["properties"][k].clone());
    }
    let full = json!({ "required": d["required"], "properties": props });
    check_object(&full, record, t, true)
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
}
