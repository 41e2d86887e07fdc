//! `NV_PROCS` values: a followed process, and one whose successful calls
//! the kernel drops (`--events failures|verdicts`, set by the kernel side
//! itself at the process's first context: no race with an exec or a
//! reused pid; or by user space for a process that held an NVIDIA
//! descriptor when nvprobe started, see HELD). An exec makes a quiet
//! process followed again; an exit removes it.

pub const FOLLOWED: u8 = 1;
pub const QUIET: u8 = 2;
/// Past its start-up (its first context worked): the calls it needs
/// besides the NVIDIA ones are no longer watched for failures.
pub const STARTED: u8 = 4;
/// `--events failures|verdicts`, a process not yet quiet: its next
/// NVIDIA call is sent whatever it is (a failed call was sent, whose
/// retry tells a recovered failure; or a signal came, and the call it
/// came during must be seen). Cleared when that call is sent.
pub const SHIP_NEXT: u8 = 8;
/// It made an NVIDIA call of its own (opened an NVIDIA path or made a
/// node, had the loader open a libcuda, found or not, made an ioctl on
/// an NVIDIA file, called libcuda; a stat or access of a path is a
/// look only): its start-up
/// has begun, and its failed system calls are
/// sent from now until STARTED. A process followed only because its
/// parent was (a shell's commands, an interpreter's own start-up) is
/// not in a CUDA start-up. Cleared by an exec.
pub const CALLER: u8 = 16;
/// Set by user space (never by the kernel side), with STARTED: the
/// process already held an NVIDIA descriptor when nvprobe started, so
/// its start-up was not seen. With QUIET (`--events failures|verdicts`)
/// only its failures are sent and, as for a start-up, the call after a
/// failure or a signal (SHIP_NEXT). An open of an NVIDIA node, the
/// loader's open of a libcuda or cuInit's entry ends it (and STARTED,
/// QUIET): what it starts then is followed call by call.
pub const HELD: u8 = 32;
