//! The paths the kernel side's open/stat/access tracepoints report even
//! when the call fails: the device nodes, their /dev/char links, and the
//! driver's /proc and /sys trees (what libcuda and nvidia-modprobe look
//! at). User space uses the same list to know a failed call of such a path
//! (call_failed) repeats the path record.

pub const NVIDIA_PATH_PREFIXES: [&[u8]; 4] = [
    b"/dev/nvidia",
    b"/dev/char/195:",
    b"/proc/driver/nvidia",
    b"/sys/module/nvidia",
];
