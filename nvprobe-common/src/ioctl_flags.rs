//! Flags in [`crate::IoctlEvent::flags`].

/// The command was `NV_ESC_IOCTL_XFER_CMD`; `xfer_*` hold the inner call.
pub const XFER: u32 = 1;
/// The XFER wrapper could not be read at entry.
pub const XFER_FAULT: u32 = 2;
/// The parameter head could not be read at exit.
pub const HEAD_FAULT: u32 = 4;
/// The parameter tail could not be read at exit.
pub const TAIL_FAULT: u32 = 8;
/// The kernel side knew no parameter size for this command (UVM command
/// missing from the size table), so nothing was read.
pub const SIZE_UNKNOWN: u32 = 16;
/// Made by the driver layer (kprobe on the module's ioctl entry point),
/// not the syscall tracepoints: `fd` is unknown (-1).
pub const FROM_DRIVER: u32 = 32;
/// The call's start was not read (`start_ns` 0 in flight; in the
/// record, the exit's time and `duration_ns` 0): a quiet process's call
/// at `--events failures|verdicts`, counted, not sent, unless it fails.
/// The stall detector times it from when it first sees it in flight
/// (by `Inflight::seq`).
pub const UNTIMED: u32 = 64;
/// The process was first seen at this call: it got its NVIDIA
/// descriptor without nvprobe seeing an open (it held it when nvprobe
/// started, or was handed it), so its start-up was not seen. It is
/// followed from here as the start's scan of /proc follows one
/// (`nv_procs::HELD`).
pub const FIRST_UNSEEN: u32 = 128;
/// The call's start is a tick count (jiffies), not a time: at `--events
/// verdicts`, a call of a process not yet quiet, which is mostly counted,
/// not sent (the fine clock is the dearest read of such a call; the
/// coarse clock's helper is refused to tracing programs). In flight,
/// `start_ns` holds the tick count and the stall detector times the call
/// from when it first sees it, as an [`UNTIMED`] one. In a record, a call
/// that took at least two ticks starts as many ticks
/// ([`crate::Config::coarse_tick_ns`]) before its end, within a tick; a
/// shorter one is made [`UNTIMED`].
pub const COARSE: u32 = 256;
