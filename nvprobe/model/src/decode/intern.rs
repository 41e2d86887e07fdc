//! Names and numbers as recordings write them, read back: the bounded
//! interner that gives a recorded name the `&'static str` decoding gives
//! a table's (so a hostile file cannot grow memory without end), and the
//! hex numbers. The `deserialize_with` helpers of `event.rs`.

use std::{
    collections::HashSet,
    sync::{Mutex, OnceLock},
};

use serde::{Deserialize, Deserializer, de::Error as _};

/// The bytes of names the interner keeps, all recordings together: far
/// more than every name this nvprobe's tables hold (a few hundred KiB).
const INTERNED_MAX: usize = 4 << 20;

/// Said in place of a name once the interner is full.
const TOO_MANY: &str = "(name not kept: too many distinct names)";

/// The one `&'static str` for `s`: a name of this nvprobe's tables or a
/// recorded one (kept once, at most [`INTERNED_MAX`] bytes of them).
pub fn intern(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<(HashSet<&'static str>, usize)>> = OnceLock::new();
    let mut g = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(n) = g.0.get(s) {
        return n;
    }
    if g.1 + s.len() > INTERNED_MAX {
        return TOO_MANY;
    }
    let n: &'static str = Box::leak(s.into());
    g.1 += n.len();
    g.0.insert(n);
    n
}

pub(crate) fn static_str<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    Ok(intern(&String::deserialize(d)?))
}

pub(super) fn static_opt<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<&'static str>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(|s| intern(&s)))
}

/// A number written as hex ("0x1f").
pub(super) fn hex_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let s = String::deserialize(d)?;
    parse_hex(&s)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| D::Error::custom(format!("{s:?} is not a 32-bit hex number")))
}

pub(super) fn hex_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = String::deserialize(d)?;
    parse_hex(&s).ok_or_else(|| D::Error::custom(format!("{s:?} is not a hex number")))
}

/// A hex number written with or without "0x" (a hash's 16 digits), or
/// null.
pub(super) fn hex_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let Some(s) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    let digits = s.strip_prefix("0x").unwrap_or(&s);
    u64::from_str_radix(digits, 16)
        .map(Some)
        .map_err(|_| D::Error::custom(format!("{s:?} is not a hex number")))
}

pub(super) fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}
