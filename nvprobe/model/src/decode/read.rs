//! A recorded event read back into the types decoding makes: for a
//! recording made without `--raw`, whose decoded fields are all there is.
//! The derived `Deserialize` impls of `event.rs` read the fields the JSON
//! shows; [`recorded`] then sets the facts it leaves out (the call as
//! numbers, the CUDA function's number, an open that creates, a failed
//! start-up call's kind and errno) from those fields, as decoding sets
//! them from the raw record. Names become `&'static str` through the
//! bounded interner of `intern.rs`.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{
    args::{Arg, Args, Named},
    callkind::SysKind,
    context::errno_name,
    event::{Call, Event, Family, ProcKind},
    intern::{intern, parse_hex},
};

impl<'de> Deserialize<'de> for Args {
    /// The object `Serialize` writes: hex strings, integers, booleans,
    /// text and lists; the typed facts set from the keys that show them.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = serde_json::Map::<String, Value>::deserialize(d)?;
        let mut a = Args::new();
        let text = |v: &Value| v.as_str().map(str::to_owned);
        for (k, v) in &m {
            let key = intern(k);
            let arg = match v {
                Value::Bool(b) => Arg::Bool(*b),
                Value::Number(n) => Arg::Int(n.as_i64().unwrap_or_default()),
                Value::String(s) => match parse_hex(s) {
                    Some(h) => Arg::Hex(h),
                    None => Arg::Text(s.clone()),
                },
                Value::Array(l) => match l.iter().map(|x| x.as_str().and_then(parse_hex)).collect()
                {
                    Some(hex) if !l.is_empty() => Arg::HexList(hex),
                    _ => Arg::StrList(l.iter().filter_map(text).collect()),
                },
                Value::Null | Value::Object(_) => continue,
            };
            a.insert(key, arg);
        }
        let named = |code: &str, name: &str| {
            let c = m.get(code)?.as_str().and_then(parse_hex)?;
            Some((
                u32::try_from(c).ok()?,
                m.get(name).and_then(Value::as_str).map(intern),
            ))
        };
        let k = a.known_mut();
        k.control = named("control", "control_name").map(|(code, name)| Named { code, name });
        k.class = named("hClass", "hClass_name").map(|(code, name)| Named { code, name });
        k.pageable = m.get("pageableMemAccess").and_then(Value::as_bool);
        k.gpu_uuid = m.get("gpu_uuid").and_then(text);
        k.driver_version = m.get("driver_version").and_then(text);
        Ok(a)
    }
}

/// A recorded event line (its envelope's `v`, `time`, `mono_ns` are
/// ignored), with the facts the JSON leaves out set from what it shows.
pub fn recorded(v: Value) -> Result<Event, String> {
    let mut ev = Event::deserialize(v).map_err(|e| format!("bad recorded event: {e}"))?;
    match &mut ev {
        Event::Ioctl(i) => {
            i.call = match i.family {
                Family::Uvm => Call::Uvm(i.request),
                Family::Nvkms => Call::Nvkms,
                Family::Escape => Call::Escape(nvprobe_common::ioctl::ioc_nr(
                    i.xfer.as_ref().map_or(i.request, |x| x.cmd),
                )),
                Family::Unknown => Call::Unknown,
            };
        }
        Event::Open(p) => p.creates = p.flags.split('|').any(|f| f == "O_CREAT"),
        Event::Cuda(c) => {
            c.func_id = nvprobe_common::cuda_func_number(c.func).unwrap_or(u32::MAX);
        }
        Event::Proc(p) if p.op == ProcKind::CallFailed => {
            let errno = p.errno.as_deref().and_then(errno_number).unwrap_or(0);
            p.failed = Some((SysKind::of(p.call.as_deref().unwrap_or("")), errno));
        }
        _ => {}
    }
    Ok(ev)
}

/// The number of an errno name as `errno_name` writes it.
fn errno_number(name: &str) -> Option<i32> {
    (1..4096).find(|n| errno_name(-i64::from(*n)).as_deref() == Some(name))
}
