//! What a recorded line says of a call, read from its JSON: for a
//! recording made without --raw, where the recorded fields are all there
//! is. `typed.rs` says the same of a decoded event; a test holds the two
//! to the same answers on every fixture.

use serde_json::Value;

pub(super) fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// What a driver call is, without handles, fds or addresses: the escape or
/// UVM command with its RM control or class ("NV_ESC_RM_CONTROL
/// NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"), a path call with its path
/// ("open /dev/nvidia-uvm"), an mmap with the device kind, a driver-layer
/// function. None for other records. Shared by `diff` and the Perfetto
/// export's slice names.
pub fn call_label(v: &Value) -> Option<String> {
    let t = str_of(v, "type")?;
    Some(match t {
        "ioctl" => {
            let name = v
                .pointer("/xfer/name")
                .and_then(Value::as_str)
                .or_else(|| str_of(v, "name"))
                .map_or_else(
                    || {
                        format!(
                            "{} {}",
                            str_of(v, "family").unwrap_or("?"),
                            str_of(v, "request").unwrap_or("?")
                        )
                    },
                    str::to_owned,
                );
            let args = &v["args"];
            match ["control_name", "hClass_name", "hClass", "control"]
                .iter()
                .find_map(|k| args.get(*k).and_then(Value::as_str))
            {
                Some(w) => format!("{name} {w}"),
                None => name,
            }
        }
        "open" | "stat" | "access" | "mknod" => {
            format!("{t} {}", str_of(v, "path").unwrap_or("?"))
        }
        "mmap" => format!(
            "mmap {}",
            v.pointer("/device/kind")
                .and_then(Value::as_str)
                .unwrap_or("?")
        ),
        "driver" => str_of(v, "function")?.to_owned(),
        _ => return None,
    })
}

/// What a step of a process is: a driver call ([`call_label`]; ioctls
/// prefixed), a CUDA call, a signal, fork, exec or exit.
pub(super) fn call_name(v: &Value) -> Option<String> {
    let t = str_of(v, "type")?;
    Some(match t {
        "ioctl" => format!("ioctl {}", call_label(v)?),
        "cuda" => format!(
            "cuda {} {}",
            str_of(v, "func").unwrap_or("?"),
            str_of(v, "phase").unwrap_or("")
        ),
        "proc" => match str_of(v, "op")? {
            "signal" | "signal_delivered" => format!(
                "{} {}",
                str_of(v, "op").unwrap_or("signal"),
                str_of(v, "signal").unwrap_or("?")
            ),
            "fork" | "exec" | "exit" => str_of(v, "op")?.to_owned(),
            "call_failed" => format!("call_failed {}", str_of(v, "call").unwrap_or("?")),
            _ => return None,
        },
        // close, dup: bookkeeping; driver: the driver layer's own spans.
        "close" | "dup" | "driver" => return None,
        _ => call_label(v)?,
    })
}

/// The GPU node of a call on a GPU.
pub(super) fn gpu_node(v: &Value) -> Option<String> {
    if v.pointer("/device/kind").and_then(Value::as_str) != Some("gpu") {
        return None;
    }
    Some(match v.pointer("/device/node").and_then(Value::as_str) {
        Some(n) => n.to_owned(),
        None => format!(
            "{}:{}",
            v.pointer("/device/major")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            v.pointer("/device/minor")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        ),
    })
}

/// What GPU a call was about: the UUID its arguments name (false), else
/// the GPU node it was made on (true).
pub(super) fn detail_of(v: &Value) -> Option<(String, bool)> {
    match v.pointer("/args/gpu_uuid").and_then(Value::as_str) {
        Some(u) => Some((u.to_owned(), false)),
        None => gpu_node(v).map(|n| (n, true)),
    }
}

pub(super) fn result_of(v: &Value) -> String {
    if let Some(n) = v.pointer("/status/name").and_then(Value::as_str) {
        return n.to_owned();
    }
    if let Some(e) = str_of(v, "errno") {
        return e.to_owned();
    }
    if let Some(r) = str_of(v, "result_name") {
        return r.to_owned();
    }
    let mut r = if v["ok"] == false { "failed" } else { "ok" }.to_owned();
    // An open or stat that found another device where an NVIDIA node
    // should be.
    if let Some(k) = v.pointer("/device/kind").and_then(Value::as_str)
        && str_of(v, "type").is_some_and(|t| t == "open" || t == "stat")
        && str_of(v, "path").is_some_and(|p| p.starts_with("/dev/nvidia"))
    {
        r.push_str(&format!(", device {k}"));
    }
    r
}
