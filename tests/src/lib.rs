//! Test support for nvprobe.
//!
//! [`fakedrv`] is a FUSE file system whose files answer `_IOWR('F', …)`
//! ioctls the way nvidia.ko does: ret 0 with an NV_STATUS written back into
//! the parameter struct, or an errno for the escapes that have no status.
//! It is a test fixture, not a driver model: it cannot serve UVM commands
//! (not `_IOC`-encoded) or a real major number. [`harness`] runs the nvprobe
//! binary and collects its NDJSON. [`scenario`] is what the root tests
//! (tests/tests/root_*.rs) share: the stand-in mounted, nvfixture's
//! scenarios run, a trace checked.

pub mod deployfiles;
pub mod doctortest;
pub mod fakedrv;
pub mod harness;
pub mod pyenv;
pub mod scenario;
pub mod unitcost;
