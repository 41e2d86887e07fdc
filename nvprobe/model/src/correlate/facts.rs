//! The typed facts the correlator keeps of a call: what it was (numbers,
//! names beside them for display), the process name, the GPU it named.
//! Below every handler, rule and record, which all read them.

use crate::decode::Ioctl;

/// A call, named without allocating (this runs for every event).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallRef {
    pub(crate) name: Option<&'static str>,
    pub(crate) control: Option<&'static str>,
    request: u32,
}

impl CallRef {
    pub(crate) fn of(i: &Ioctl) -> Self {
        Self {
            name: i.xfer.as_ref().and_then(|x| x.name).or(i.name),
            control: i.args.known().control.and_then(|c| c.name),
            request: i.request,
        }
    }
    pub(crate) fn text(&self) -> String {
        let base = self
            .name
            .map_or_else(|| format!("{:#x}", self.request), str::to_owned);
        match self.control {
            Some(c) => format!("{base} {c}"),
            None => base,
        }
    }
}

/// A process name kept inline (no allocation per event).
#[derive(Clone, Copy, Debug)]
pub struct Comm([u8; 64], u8);

impl Comm {
    pub(crate) fn new(s: &str) -> Self {
        let mut b = [0u8; 64];
        let mut n = s.len().min(64);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        Self(b, n as u8)
    }
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0[..self.1 as usize]).into_owned()
    }
}

/// A GPU as a call names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GpuRef {
    Minor(u32),
    Uuid(String),
}
