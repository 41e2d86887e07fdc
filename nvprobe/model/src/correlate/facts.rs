//! The typed facts the correlator keeps of a call: what it was (numbers,
//! names beside them for display), the process name, the GPU it named.
//! Below every handler, rule and record, which all read them.

use crate::decode::{Call, Ioctl, PathCall, Status, errno_name, signal, status};

/// A call as numbers (the command, unwrapped from XFER, and the RM
/// control), with the names the tables gave, for display only: rules
/// compare the numbers ([`CallRef::is`], [`CallRef::same`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CallRef {
    pub(crate) call: Call,
    pub(crate) control: Option<u32>,
    request: u32,
    name: Option<&'static str>,
    control_name: Option<&'static str>,
}

impl CallRef {
    pub(crate) fn of(i: &Ioctl) -> Self {
        let control = i.args.known().control;
        Self {
            call: i.call,
            control: control.map(|c| c.code),
            request: i.request,
            name: i.xfer.as_ref().and_then(|x| x.name).or(i.name),
            control_name: control.and_then(|c| c.name),
        }
    }
    /// The call is this command.
    pub(crate) fn is(&self, call: Call) -> bool {
        self.call == call
    }
    /// The same call as `other`: the same command and control (an unnamed
    /// command by its whole request word).
    pub(crate) fn same(&self, other: &CallRef) -> bool {
        self.call == other.call
            && self.control == other.control
            && (self.name.is_some() || self.request == other.request)
    }
    /// "NV_ESC_RM_CONTROL NV0000_CTRL_CMD_…", or the request in hex.
    pub(crate) fn text(&self) -> String {
        let base = self
            .name
            .map_or_else(|| format!("{:#x}", self.request), str::to_owned);
        match self.control_name {
            Some(c) => format!("{base} {c}"),
            None => base,
        }
    }
}

/// What a failed call returned: an errno, or the NV_STATUS the driver
/// wrote back into the parameters while the ioctl returned 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallResult {
    Errno(i32),
    Status(u32),
}

/// The kernel's restart codes (include/linux/errno.h): seen at the
/// syscall's exit, never by the caller.
pub(crate) const ERESTARTSYS: i32 = 512;
pub(crate) const ERESTARTNOINTR: i32 = 513;
pub(crate) const ERESTARTNOHAND: i32 = 514;
pub(crate) const ERESTART_RESTARTBLOCK: i32 = 516;

impl CallResult {
    /// The result of a call that failed (`ret` its return value, `status`
    /// the NV_STATUS it carried).
    pub(crate) fn of(ret: i64, status: Option<&Status>) -> Self {
        match status {
            Some(s) if !(-4095..0).contains(&ret) => CallResult::Status(s.code),
            _ => CallResult::Errno(errno_of(ret)),
        }
    }
    pub(crate) fn errno(self) -> Option<i32> {
        match self {
            CallResult::Errno(e) => Some(e),
            CallResult::Status(_) => None,
        }
    }
    /// EINTR or a restart code: a signal interrupted the call.
    pub(crate) fn interrupted(self) -> bool {
        matches!(
            self.errno(),
            Some(
                libc::EINTR | ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND | ERESTART_RESTARTBLOCK
            )
        )
    }
    /// The errno's name ("EINTR", "ERESTARTSYS") or the status's
    /// ("NV_ERR_BUSY_RETRY", its number in hex when the table has none).
    pub(crate) fn text(self) -> String {
        match self {
            CallResult::Errno(e) => errno_name(-i64::from(e)).unwrap_or_else(|| e.to_string()),
            CallResult::Status(s) => {
                status::name(s).map_or_else(|| format!("{s:#x}"), str::to_owned)
            }
        }
    }
}

/// The errno of a failed system call's return value.
pub(crate) fn errno_of(ret: i64) -> i32 {
    ret.saturating_neg().clamp(0, i64::from(i32::MAX)) as i32
}

/// A device number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DevNo(pub(crate) u32, pub(crate) u32);

impl std::fmt::Display for DevNo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.0, self.1)
    }
}

/// Why a call on an NVIDIA path failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PathWhy {
    Errno(i32),
    /// The path names an NVIDIA node and the file is something else (the
    /// decoder's words: "… is device 1:3 (/dev/null, no NVIDIA device), not the NVIDIA uvm node").
    Mismatch(String),
    /// A mknod of the node (the device it would make) failed.
    Mknod(Option<DevNo>, Box<PathWhy>),
}

impl PathWhy {
    /// Why the path call `p` failed (`mknod`: it was one).
    pub(crate) fn of(p: &PathCall, mknod: bool) -> Self {
        let why = match &p.mismatch {
            Some(m) => PathWhy::Mismatch(m.clone()),
            None => PathWhy::Errno(errno_of(p.ret)),
        };
        if mknod {
            PathWhy::Mknod(
                p.device.as_ref().map(|d| DevNo(d.major, d.minor)),
                Box::new(why),
            )
        } else {
            why
        }
    }
    /// The errno behind it (a failed mknod's own).
    pub(crate) fn errno(&self) -> Option<i32> {
        match self {
            PathWhy::Errno(e) => Some(*e),
            PathWhy::Mismatch(_) => None,
            PathWhy::Mknod(_, why) => why.errno(),
        }
    }
    pub(crate) fn text(&self) -> String {
        match self {
            PathWhy::Errno(e) => CallResult::Errno(*e).text(),
            PathWhy::Mismatch(m) => m.clone(),
            PathWhy::Mknod(Some(d), why) => format!("mknod {d} failed: {}", why.text()),
            PathWhy::Mknod(None, why) => format!("mknod failed: {}", why.text()),
        }
    }
}

/// How a process ended, from its wait status (or an exec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// exit(N).
    Status(i32),
    /// Killed by this signal.
    Signal(i32),
    /// It exec'd another program: this one's start-up is over.
    Exec,
}

impl Exit {
    /// From a wait(2)-style status.
    pub(crate) fn of_code(code: i32) -> Self {
        if code & 0x7f != 0 {
            Exit::Signal(code & 0x7f)
        } else {
            Exit::Status((code >> 8) & 0xff)
        }
    }
    /// The fatal signal's number (0: none).
    pub(crate) fn signal(self) -> i32 {
        match self {
            Exit::Signal(s) => s,
            _ => 0,
        }
    }
    pub(crate) fn text(self) -> String {
        match self {
            Exit::Status(n) => format!("exited with status {n}"),
            Exit::Signal(s) => format!("killed by {}", signal::name(s)),
            Exit::Exec => "exec'd a new program".to_owned(),
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

/// Each fact displays as the text it is shown with (`text()`: made once,
/// where a record or a verdict says it).
macro_rules! display_as_text {
    ($($t:ty),+) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.text())
            }
        }
    )+};
}
display_as_text!(CallRef, CallResult, PathWhy, Exit);
