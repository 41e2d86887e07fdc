//! Bounds-checked reads of captured bytes, and byte-string escaping.

/// A bounds-checked little-endian view of captured bytes. Reads past the
/// end give None, so a truncated capture decodes to fewer fields, never to
/// garbage or a panic.
#[derive(Clone, Copy)]
pub struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Self(b)
    }
    fn get<const N: usize>(&self, off: u32) -> Option<[u8; N]> {
        let off = usize::try_from(off).ok()?;
        self.0.get(off..off.checked_add(N)?)?.try_into().ok()
    }
    pub fn u8(&self, off: u32) -> Option<u8> {
        self.get::<1>(off).map(|b| b[0])
    }
    pub fn u16(&self, off: u32) -> Option<u16> {
        self.get(off).map(u16::from_le_bytes)
    }
    pub fn u32(&self, off: u32) -> Option<u32> {
        self.get(off).map(u32::from_le_bytes)
    }
    pub fn i32(&self, off: u32) -> Option<i32> {
        self.get(off).map(i32::from_le_bytes)
    }
    pub fn u64(&self, off: u32) -> Option<u64> {
        self.get(off).map(u64::from_le_bytes)
    }
    pub fn array16(&self, off: u32) -> Option<[u8; 16]> {
        self.get(off)
    }
    /// A NUL-terminated string of at most `max` bytes at `off`, printable
    /// ASCII only (anything else is escaped).
    pub fn cstr(&self, off: u32, max: usize) -> Option<String> {
        let off = usize::try_from(off).ok()?;
        let b = self.0.get(off..)?;
        let b = &b[..b.len().min(max)];
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Some(escape_bytes(&b[..end]))
    }
}

/// Render bytes from an untrusted source (process names, paths, strings
/// from parameter structs) so that they are safe on a terminal and in JSON:
/// valid UTF-8 stays as it is, except control characters, which become
/// `\xNN`; invalid bytes become `\xNN` too.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() || c == '\\' || reorders(c) {
                if (c as u32) < 0x100 {
                    out.push_str(&format!("\\x{:02x}", c as u32));
                } else {
                    out.push_str(&format!("\\u{{{:x}}}", c as u32));
                }
            } else {
                out.push(c);
            }
        }
        for &x in chunk.invalid() {
            out.push_str(&format!("\\x{x:02x}"));
        }
    }
    out
}

/// How much of one field a traced process controls is kept (docs/SCHEMA.md,
/// `process`): a path ([`PATH_FIELD`]), any other value ([`VALUE_FIELD`]),
/// a command line in all ([`CMDLINE_FIELD`]). Past it the field is cut at
/// a character and ends with a marker saying how long it was, so that one
/// process cannot make a record too long for a log shipper's line limit.
pub const PATH_FIELD: usize = 4096;
pub const VALUE_FIELD: usize = 1024;
pub const CMDLINE_FIELD: usize = 4096;

/// [`escape_bytes`], cut to `max` bytes with a marker: "…[cut: 122880
/// bytes]" (the raw length).
pub fn escape_capped(b: &[u8], max: usize) -> String {
    let mut s = escape_bytes(b);
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str(&format!("…[cut: {} bytes]", b.len()));
    }
    s
}

/// A character that must not reach a terminal as it is: a control
/// character, or one that reorders the text around it.
pub fn terminal_unsafe(c: char) -> bool {
    c.is_control() || reorders(c)
}

/// The characters that reorder how a terminal shows the text around them
/// (bidirectional marks, embeddings, overrides and isolates): a name holding
/// U+202E shows its tail reversed.
fn reorders(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Text that may hold what a traced process wrote, made safe for a
/// terminal: control and reordering characters become `\xNN` / `\u{N}`;
/// everything else (backslashes of text already escaped included) stays.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || reorders(c)) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() || reorders(c) {
            if (c as u32) < 0x100 {
                out.push_str(&format!("\\x{:02x}", c as u32));
            } else {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

pub fn hex_encode(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(DIGITS[(x >> 4) as usize] as char);
        s.push(DIGITS[(x & 0xf) as usize] as char);
    }
    s
}

pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    fn nib(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks(2)
        .map(|p| Some(nib(p[0])? << 4 | nib(p[1])?))
        .collect()
}
