//! Path tests for the open/stat/access tracepoints.

use aya_ebpf::helpers::generated;
use nvprobe_common::{PathEvent, PathOp};

const PROBE: usize = 24;

use nvprobe_common::NVIDIA_PATH_PREFIXES as PREFIXES;

#[inline(always)]
fn starts_with(buf: &[u8; PROBE], p: &[u8]) -> bool {
    let mut i = 0;
    while i < p.len() && i < PROBE {
        if buf[i] != p[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Does the user string at `ptr` start with one of [`PREFIXES`]?
#[inline(always)]
pub fn nvidia_path(ptr: u64) -> bool {
    nvidia_path_kind(ptr) != NvPath::None
}

/// Which of [`PREFIXES`] the user string at `ptr` starts with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NvPath {
    None,
    /// A node: `/dev/nvidia*`, `/dev/char/195:*`.
    Node,
    /// The driver's `/proc` and `/sys` files.
    Info,
}

/// [`nvidia_path`], saying which kind of path it is.
#[inline(always)]
pub fn nvidia_path_kind(ptr: u64) -> NvPath {
    if ptr == 0 {
        return NvPath::None;
    }
    let mut buf = [0u8; PROBE];
    // SAFETY: bounded user string read through the helper.
    let n = unsafe {
        generated::bpf_probe_read_user_str(buf.as_mut_ptr().cast(), PROBE as u32, ptr as *const _)
    };
    if n <= 0 {
        return NvPath::None;
    }
    if starts_with(&buf, PREFIXES[0]) || starts_with(&buf, PREFIXES[1]) {
        NvPath::Node
    } else if starts_with(&buf, PREFIXES[2]) || starts_with(&buf, PREFIXES[3]) {
        NvPath::Info
    } else {
        NvPath::None
    }
}

/// After a successful stat, record the mode and device number the caller
/// saw. x86_64 `struct stat`: st_mode u32 @24, st_rdev u64 @40.
/// `struct statx`: stx_mode u16 @28, stx_rdev_major @128, stx_rdev_minor @132.
#[inline(always)]
pub unsafe fn read_stat(op: PathOp, buf: u64, ev: &mut PathEvent) {
    // SAFETY: user reads through the helper.
    unsafe {
        match op {
            PathOp::Stat | PathOp::Lstat | PathOp::Newfstatat => {
                if let (Ok(mode), Ok(rdev)) = (
                    aya_ebpf::helpers::bpf_probe_read_user((buf + 24) as *const u32),
                    aya_ebpf::helpers::bpf_probe_read_user((buf + 40) as *const u64),
                ) {
                    ev.st_mode = mode;
                    ev.st_rdev = rdev;
                    ev.stat_valid = 1;
                }
            }
            PathOp::Statx => {
                if let (Ok(mode), Ok(rdev)) = (
                    aya_ebpf::helpers::bpf_probe_read_user((buf + 28) as *const u16),
                    aya_ebpf::helpers::bpf_probe_read_user((buf + 128) as *const [u32; 2]),
                ) {
                    ev.st_mode = mode as u32;
                    ev.st_rdev = ((rdev[0] as u64) << 32) | rdev[1] as u64;
                    ev.stat_valid = 2;
                }
            }
            _ => {}
        }
    }
}

/// What the dynamic loader loads with an open.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    /// Not a library nvprobe follows (or not the loader's open).
    None,
    Cuda,
    Nccl,
}

/// Whether an open is the dynamic loader loading a libcuda or a libnccl:
/// the flags glibc's ld.so and musl use for libraries (O_RDONLY |
/// O_CLOEXEC, nothing else) and a last path component that starts with
/// `libcuda.so` or `libnccl.so`. Opens
/// with other flags cost one test; the many `O_RDONLY|O_CLOEXEC` opens of
/// the host (the loader's, Go's, Rust's, Python's) also a read of up to
/// 128 bytes of their path.
#[inline(always)]
pub fn libcuda_open(ptr: u64, flags: u64) -> Lib {
    const O_CLOEXEC: u64 = 0o2_000_000;
    const NAME: &[u8; 10] = b"libcuda.so";
    const NCCL: &[u8; 10] = b"libnccl.so";
    const LEN: usize = nvprobe_common::PATH_LEN;
    if flags != O_CLOEXEC || ptr == 0 {
        return Lib::None;
    }
    let mut buf = [0u8; LEN];
    // SAFETY: bounded user string read through the helper.
    let n = unsafe {
        generated::bpf_probe_read_user_str(buf.as_mut_ptr().cast(), LEN as u32, ptr as *const _)
    };
    if n <= 1 {
        return Lib::None;
    }
    // Bytes before the NUL.
    let len = (n - 1) as usize;
    // The last '/', searched backwards over the last 32 bytes (a libcuda's
    // name is at most "libcuda.so.NNN.NNN.NN"): each step either stops or
    // goes on with nothing else changed, which keeps the verifier linear.
    let mut slash = usize::MAX;
    let mut j = 0usize;
    while j < 32 {
        if j >= len {
            break;
        }
        let idx = (len - 1 - j) & (LEN - 1);
        if buf[idx] == b'/' {
            slash = idx;
            break;
        }
        j += 1;
    }
    if slash == usize::MAX {
        return Lib::None;
    }
    let base = slash + 1;
    if base + NAME.len() > len {
        return Lib::None;
    }
    // "libcuda.so" or "libnccl.so": the same length, told apart by
    // bytes 3 to 6.
    let (mut cuda, mut nccl) = (true, true);
    let mut j = 0usize;
    while j < NAME.len() {
        let b = buf[(base + j) & (LEN - 1)];
        cuda &= b == NAME[j];
        nccl &= b == NCCL[j];
        j += 1;
    }
    if cuda {
        Lib::Cuda
    } else if nccl {
        Lib::Nccl
    } else {
        Lib::None
    }
}
