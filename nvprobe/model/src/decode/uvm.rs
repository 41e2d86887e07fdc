//! nvidia-uvm commands (/dev/nvidia-uvm, /dev/nvidia-uvm-tools). They are
//! plain numbers, not `_IOC` words, so the size of each parameter struct
//! (and the place of `rmStatus`) comes from this table and the driver
//! version.
//!
//! Sources: kernel-open/nvidia-uvm/uvm_ioctl.h, uvm_linux_ioctl.h, uvm.c,
//! uvm_tools.c (515.43.04 … 595.45.04); docs/NVIDIA-ABI.md §5.3–§5.5.

use super::{
    args::{Arg, Args},
    bytes::Bytes,
    context::StatusLoc,
    version::{DriverVersion, LayoutBasis, VersionCtx},
};

/// The numbers the kernel side needs too are the contract's.
pub use nvprobe_common::ioctl::{UVM_DEINITIALIZE, UVM_INITIALIZE};
pub const UVM_REGISTER_GPU: u32 = 37;
pub const UVM_REGISTER_GPU_VASPACE: u32 = 25;
pub const UVM_MM_INITIALIZE: u32 = 75;
pub const UVM_PAGEABLE_MEM_ACCESS: u32 = 39;

/// Where uvm_ioctl() sends a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Handled on the main fd.
    Main,
    /// Handled on the tools fd (/dev/nvidia-uvm-tools).
    Tools,
    /// Legacy/Windows-only number: falls through to uvm_test_ioctl, -ENOSYS.
    Legacy,
}

/// (first driver version with this layout, struct size, rmStatus offset),
/// newest first. A command absent before its oldest entry has no layout there.
pub type Layouts = &'static [(DriverVersion, u32, u32)];

pub struct UvmCmd {
    pub cmd: u32,
    pub name: &'static str,
    pub route: Route,
    pub layouts: Layouts,
}

const ANY: DriverVersion = DriverVersion::new(0, 0, 0);

// Version-dependent structs (§5.5).
const FREE_LAYOUTS: Layouts = &[(DriverVersion::new(590, 44, 1), 16, 8), (ANY, 24, 16)];
const MAP_EXT_LAYOUTS: Layouts = &[
    (DriverVersion::new(550, 40, 53), 9264, 9260),
    (ANY, 1200, 1196),
];
const SEMA_LAYOUTS: Layouts = &[
    (DriverVersion::new(550, 40, 53), 9248, 9240),
    (ANY, 1184, 1176),
];
const PREF_LOC_LAYOUTS: Layouts = &[(DriverVersion::new(550, 40, 7), 40, 36), (ANY, 40, 32)];
/// UVM_MM_INITIALIZE was added in 535.43.02.
const MM_INIT_LAYOUTS: Layouts = &[(DriverVersion::new(535, 43, 2), 8, 4)];

const fn u(cmd: u32, name: &'static str, route: Route, layouts: Layouts) -> UvmCmd {
    UvmCmd {
        cmd,
        name,
        route,
        layouts,
    }
}

/// Every UVM command, once, sorted by number.
#[rustfmt::skip]
pub const COMMANDS: &[UvmCmd] = &[
    u(1, "UVM_RESERVE_VA", Route::Legacy, &[(ANY, 24, 16)]),
    u(2, "UVM_RELEASE_VA", Route::Legacy, &[(ANY, 24, 16)]),
    u(3, "UVM_REGION_COMMIT", Route::Legacy, &[(ANY, 48, 40)]),
    u(4, "UVM_REGION_DECOMMIT", Route::Legacy, &[(ANY, 24, 16)]),
    u(5, "UVM_REGION_SET_STREAM", Route::Legacy, &[(ANY, 48, 40)]),
    u(6, "UVM_SET_STREAM_RUNNING", Route::Legacy, &[(ANY, 16, 8)]),
    u(7, "UVM_SET_STREAM_STOPPED", Route::Legacy, &[(ANY, 272, 264)]),
    u(10, "UVM_ADD_SESSION", Route::Legacy, &[(ANY, 8, 4)]),
    u(12, "UVM_ENABLE_COUNTERS", Route::Legacy, &[(ANY, 904, 900)]),
    u(13, "UVM_MAP_COUNTER", Route::Legacy, &[(ANY, 40, 32)]),
    u(14, "UVM_CREATE_EVENT_QUEUE", Route::Legacy, &[(ANY, 40, 36)]),
    u(15, "UVM_REMOVE_EVENT_QUEUE", Route::Legacy, &[(ANY, 8, 4)]),
    u(16, "UVM_MAP_EVENT_QUEUE", Route::Legacy, &[(ANY, 56, 48)]),
    u(17, "UVM_EVENT_CTRL", Route::Legacy, &[(ANY, 16, 12)]),
    u(20, "UVM_GET_GPU_UUID_TABLE", Route::Legacy, &[(ANY, 520, 516)]),
    u(21, "UVM_REGION_SET_BACKING", Route::Legacy, &[]),
    u(22, "UVM_REGION_UNSET_BACKING", Route::Legacy, &[]),
    u(23, "UVM_CREATE_RANGE_GROUP", Route::Main, &[(ANY, 16, 8)]),
    u(24, "UVM_DESTROY_RANGE_GROUP", Route::Main, &[(ANY, 16, 8)]),
    u(25, "UVM_REGISTER_GPU_VASPACE", Route::Main, &[(ANY, 32, 28)]),
    u(26, "UVM_UNREGISTER_GPU_VASPACE", Route::Main, &[(ANY, 20, 16)]),
    u(27, "UVM_REGISTER_CHANNEL", Route::Main, &[(ANY, 56, 48)]),
    u(28, "UVM_UNREGISTER_CHANNEL", Route::Main, &[(ANY, 12, 8)]),
    u(29, "UVM_ENABLE_PEER_ACCESS", Route::Main, &[(ANY, 36, 32)]),
    u(30, "UVM_DISABLE_PEER_ACCESS", Route::Main, &[(ANY, 36, 32)]),
    u(31, "UVM_SET_RANGE_GROUP", Route::Main, &[(ANY, 32, 24)]),
    u(33, "UVM_MAP_EXTERNAL_ALLOCATION", Route::Main, MAP_EXT_LAYOUTS),
    u(34, "UVM_FREE", Route::Main, FREE_LAYOUTS),
    u(35, "UVM_MEM_MAP", Route::Legacy, &[(ANY, 24, 16)]),
    u(37, "UVM_REGISTER_GPU", Route::Main, &[(ANY, 40, 36)]),
    u(38, "UVM_UNREGISTER_GPU", Route::Main, &[(ANY, 20, 16)]),
    u(39, "UVM_PAGEABLE_MEM_ACCESS", Route::Main, &[(ANY, 8, 4)]),
    u(40, "UVM_PREVENT_MIGRATION_RANGE_GROUPS", Route::Main, &[(ANY, 272, 264)]),
    u(41, "UVM_ALLOW_MIGRATION_RANGE_GROUPS", Route::Main, &[(ANY, 272, 264)]),
    u(42, "UVM_SET_PREFERRED_LOCATION", Route::Main, PREF_LOC_LAYOUTS),
    u(43, "UVM_UNSET_PREFERRED_LOCATION", Route::Main, &[(ANY, 24, 16)]),
    u(44, "UVM_ENABLE_READ_DUPLICATION", Route::Main, &[(ANY, 24, 16)]),
    u(45, "UVM_DISABLE_READ_DUPLICATION", Route::Main, &[(ANY, 24, 16)]),
    u(46, "UVM_SET_ACCESSED_BY", Route::Main, &[(ANY, 40, 32)]),
    u(47, "UVM_UNSET_ACCESSED_BY", Route::Main, &[(ANY, 40, 32)]),
    u(51, "UVM_MIGRATE", Route::Main, &[(ANY, 80, 72)]),
    u(53, "UVM_MIGRATE_RANGE_GROUP", Route::Main, &[(ANY, 32, 24)]),
    u(56, "UVM_TOOLS_INIT_EVENT_TRACKER", Route::Tools, &[(ANY, 56, 48)]),
    u(57, "UVM_TOOLS_SET_NOTIFICATION_THRESHOLD", Route::Tools, &[(ANY, 8, 4)]),
    u(58, "UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS", Route::Tools, &[(ANY, 16, 8)]),
    u(59, "UVM_TOOLS_EVENT_QUEUE_DISABLE_EVENTS", Route::Tools, &[(ANY, 16, 8)]),
    u(60, "UVM_TOOLS_ENABLE_COUNTERS", Route::Tools, &[(ANY, 16, 8)]),
    u(61, "UVM_TOOLS_DISABLE_COUNTERS", Route::Tools, &[(ANY, 16, 8)]),
    u(62, "UVM_TOOLS_READ_PROCESS_MEMORY", Route::Main, &[(ANY, 40, 32)]),
    u(63, "UVM_TOOLS_WRITE_PROCESS_MEMORY", Route::Main, &[(ANY, 40, 32)]),
    u(64, "UVM_TOOLS_GET_PROCESSOR_UUID_TABLE", Route::Main, &[(ANY, 16, 8)]),
    u(65, "UVM_MAP_DYNAMIC_PARALLELISM_REGION", Route::Main, &[(ANY, 40, 32)]),
    u(66, "UVM_UNMAP_EXTERNAL", Route::Main, &[(ANY, 40, 32)]),
    u(67, "UVM_TOOLS_FLUSH_EVENTS", Route::Main, &[(ANY, 4, 0)]),
    u(68, "UVM_ALLOC_SEMAPHORE_POOL", Route::Main, SEMA_LAYOUTS),
    u(69, "UVM_CLEAN_UP_ZOMBIE_RESOURCES", Route::Main, &[(ANY, 4, 0)]),
    u(70, "UVM_PAGEABLE_MEM_ACCESS_ON_GPU", Route::Main, &[(ANY, 24, 20)]),
    u(71, "UVM_POPULATE_PAGEABLE", Route::Main, &[(ANY, 24, 20)]),
    u(72, "UVM_VALIDATE_VA_RANGE", Route::Main, &[(ANY, 24, 16)]),
    u(73, "UVM_CREATE_EXTERNAL_RANGE", Route::Main, &[(ANY, 24, 16)]),
    u(74, "UVM_MAP_EXTERNAL_SPARSE", Route::Main, &[(ANY, 40, 32)]),
    u(75, "UVM_MM_INITIALIZE", Route::Main, MM_INIT_LAYOUTS),
    u(76, "UVM_TOOLS_INIT_EVENT_TRACKER_V2", Route::Tools, &[(ANY, 56, 48)]),
    u(77, "UVM_TOOLS_GET_PROCESSOR_UUID_TABLE_V2", Route::Main, &[(ANY, 16, 8)]),
    u(78, "UVM_ALLOC_DEVICE_P2P", Route::Main, &[(ANY, 56, 52)]),
    u(79, "UVM_CLEAR_ALL_ACCESS_COUNTERS", Route::Main, &[(ANY, 4, 0)]),
    u(80, "UVM_DISCARD", Route::Main, &[(ANY, 32, 24)]),
    u(2047, "UVM_IS_8_SUPPORTED", Route::Legacy, &[(ANY, 8, 4)]),
    u(0x30000001, "UVM_INITIALIZE", Route::Main, &[(ANY, 16, 8)]),
    u(0x30000002, "UVM_DEINITIALIZE", Route::Main, &[]),
];

pub fn lookup(cmd: u32) -> Option<&'static UvmCmd> {
    COMMANDS
        .binary_search_by_key(&cmd, |c| c.cmd)
        .ok()
        .map(|i| &COMMANDS[i])
}

/// The layout of `cmd` for the driver in `v`: (size, rmStatus offset, basis).
pub fn layout(cmd: &UvmCmd, v: &VersionCtx) -> Option<(u32, u32, LayoutBasis)> {
    let &(_, size, status) = cmd.layouts.iter().find(|(min, _, _)| v.version >= *min)?;
    let basis = if cmd.layouts.len() > 1 || cmd.layouts[0].0 != ANY {
        v.by_version()
    } else {
        v.stable()
    };
    Some((size, status, basis))
}

/// Parameter sizes to load into the BPF side's UVM_SIZES map.
pub fn sizes(v: &VersionCtx) -> impl Iterator<Item = (u32, u32)> + '_ {
    COMMANDS
        .iter()
        .filter_map(move |c| layout(c, v).map(|(size, _, _)| (c.cmd, size)))
}

/// The `STATUS_AT` entries of the UVM commands (nvprobe_common::status_at)
/// whose layout does not rest on an assumed driver version.
pub fn status_at_entries(v: &VersionCtx) -> Vec<(u32, u32)> {
    let mut out = vec![(UVM_DEINITIALIZE, nvprobe_common::status_at::NO_STATUS)];
    for c in COMMANDS {
        if let Ok(loc) = status_loc(c.cmd, v)
            && loc.basis != super::version::LayoutBasis::Assumed
            && layout(c, v).is_some_and(|(size, off, _)| off + 4 <= size)
        {
            out.push((c.cmd, loc.offset));
        }
    }
    out
}

pub fn status_loc(cmd: u32, v: &VersionCtx) -> Result<StatusLoc, String> {
    let Some(c) = lookup(cmd) else {
        return Err("unknown UVM command: no layout".into());
    };
    if c.cmd == UVM_DEINITIALIZE {
        return Err("no parameters: the errno is the result".into());
    }
    match layout(c, v) {
        Some((_, status, basis)) => Ok(StatusLoc {
            offset: status,
            basis,
        }),
        None if c.layouts.is_empty() => Err("struct layout not in nvprobe's tables".into()),
        None => Err(format!("{} does not exist in driver {}", c.name, v.version)),
    }
}

/// `NvProcessorUuid` as nvidia-smi prints GPU UUIDs.
pub fn uuid(b: &[u8; 16]) -> String {
    format!(
        "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        b[0],
        b[1],
        b[2],
        b[3],
        b[4],
        b[5],
        b[6],
        b[7],
        b[8],
        b[9],
        b[10],
        b[11],
        b[12],
        b[13],
        b[14],
        b[15]
    )
}

/// Fields that identify a UVM call (§5.2, §5.4).
pub fn args(cmd: u32, head: &Bytes, tail: &Bytes, tail_off: u32) -> Args {
    let mut m = Args::new();
    match cmd {
        UVM_INITIALIZE => {
            if let Some(f) = head.u64(0) {
                m.insert("flags", Arg::Hex(f));
                let mut names = Vec::new();
                if f & 1 != 0 {
                    names.push("DISABLE_HMM".to_owned());
                }
                if f & 2 != 0 {
                    names.push("MULTI_PROCESS_SHARING_MODE".to_owned());
                }
                if f & !3 != 0 {
                    names.push(format!("{:#x}", f & !3));
                }
                m.insert("flag_names", Arg::StrList(names));
            }
        }
        UVM_MM_INITIALIZE => {
            if let Some(fd) = head.i32(0) {
                m.insert("uvmFd", Arg::from(fd));
            }
        }
        UVM_PAGEABLE_MEM_ACCESS => {
            if let Some(b) = head.u8(0) {
                m.pageable(b != 0);
            }
        }
        UVM_REGISTER_GPU => {
            if let Some(id) = head.array16(0) {
                m.gpu_uuid(uuid(&id));
            }
            if let (Some(numa), Some(node), Some(fd), Some(hc)) =
                (head.u8(16), head.i32(20), head.i32(24), head.u32(28))
            {
                m.insert("numaEnabled", Arg::from(numa != 0));
                m.insert("numaNodeId", Arg::from(node));
                m.insert("rmCtrlFd", Arg::from(fd));
                m.insert("hClient", Arg::Hex(hc.into()));
            }
        }
        // REGISTER_GPU_VASPACE, REGISTER_CHANNEL: uuid, rmCtrlFd, hClient, handle.
        25 | 27 => {
            if let Some(id) = head.array16(0) {
                m.gpu_uuid(uuid(&id));
            }
            if let (Some(fd), Some(hc), Some(h)) = (head.i32(16), head.u32(20), head.u32(24)) {
                m.insert("rmCtrlFd", Arg::from(fd));
                m.insert("hClient", Arg::Hex(hc.into()));
                let key = if cmd == 25 { "hVaSpace" } else { "hChannel" };
                m.insert(key, Arg::Hex(h.into()));
            }
        }
        // UNREGISTER_GPU, PAGEABLE_MEM_ACCESS_ON_GPU, MAP_DYNAMIC_PARALLELISM_REGION's uuid at 16.
        38 | 70 => {
            if let Some(id) = head.array16(0) {
                m.gpu_uuid(uuid(&id));
            }
            if cmd == 70
                && let Some(b) = head.u8(16)
            {
                m.pageable(b != 0);
            }
        }
        23 => {
            if let Some(id) = head.u64(0) {
                m.insert("rangeGroupId", Arg::Hex(id));
            }
        }
        // base/length structs.
        33 | 34 | 65 | 66 | 68 | 71 | 72 | 73 | 74 | 80 | 51 => {
            if let Some(b) = head.u64(0) {
                m.insert("base", Arg::Hex(b));
            }
            if cmd != 34
                && let Some(l) = head.u64(8)
            {
                m.insert("length", Arg::Hex(l));
            }
            if cmd == 33 {
                // rmCtrlFd, hClient, hMemory sit just before rmStatus at the end.
                let rel = |abs: u32| abs.checked_sub(tail_off);
                if let (Some(a), Some(b), Some(c)) = (rel(9248), rel(9252), rel(9256))
                    && let (Some(fd), Some(hc), Some(hm)) = (tail.i32(a), tail.u32(b), tail.u32(c))
                {
                    m.insert("rmCtrlFd", Arg::from(fd));
                    m.insert("hClient", Arg::Hex(hc.into()));
                    m.insert("hMemory", Arg::Hex(hm.into()));
                }
            }
        }
        _ => {}
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(a: u32, b: u32, c: u32) -> VersionCtx {
        VersionCtx::from_version(Some(DriverVersion::new(a, b, c)))
    }

    #[test]
    fn table_sorted_and_consistent() {
        assert!(COMMANDS.windows(2).all(|w| w[0].cmd < w[1].cmd));
        for c in COMMANDS {
            for &(_, size, status) in c.layouts {
                assert!(status + 4 <= size, "{}", c.name);
            }
        }
        assert_eq!(lookup(37).map(|c| c.name), Some("UVM_REGISTER_GPU"));
        assert_eq!(
            lookup(UVM_INITIALIZE).map(|c| c.name),
            Some("UVM_INITIALIZE")
        );
        assert!(lookup(36).is_none());
    }

    #[test]
    fn version_matrix() {
        let at = |cmd, v: &VersionCtx| status_loc(cmd, v).map(|s| s.offset);
        let v580 = ctx(580, 159, 4);
        let v595 = ctx(595, 45, 4);
        let v545 = ctx(545, 29, 6);
        let v525 = ctx(525, 60, 13);
        assert_eq!(at(UVM_INITIALIZE, &v580), Ok(8));
        assert_eq!(at(UVM_REGISTER_GPU, &v580), Ok(36));
        assert_eq!(at(34, &v580), Ok(16));
        assert_eq!(at(34, &v595), Ok(8));
        assert_eq!(at(33, &v580), Ok(9260));
        assert_eq!(at(33, &v545), Ok(1196));
        assert_eq!(at(68, &ctx(550, 54, 14)), Ok(9240));
        assert_eq!(at(68, &ctx(550, 40, 7)), Ok(1176));
        assert_eq!(at(42, &v545), Ok(32));
        assert_eq!(at(42, &v580), Ok(36));
        assert_eq!(at(UVM_MM_INITIALIZE, &v545), Ok(4));
        assert!(at(UVM_MM_INITIALIZE, &v525).is_err());
        assert!(at(UVM_DEINITIALIZE, &v580).is_err());
        assert!(at(1234, &v580).is_err());
        let sizes: std::collections::HashMap<u32, u32> = sizes(&v580).collect();
        assert_eq!(sizes[&33], 9264);
        assert_eq!(sizes[&UVM_INITIALIZE], 16);
        assert!(!sizes.contains_key(&UVM_DEINITIALIZE));
    }

    #[test]
    fn decodes_register_gpu() {
        let mut b = [0u8; 40];
        b[..16].copy_from_slice(&[0x8a, 0x1b, 0x2c, 0x3d, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        b[20..24].copy_from_slice(&(-1i32).to_le_bytes());
        b[24..28].copy_from_slice(&7i32.to_le_bytes());
        let m = args(UVM_REGISTER_GPU, &Bytes::new(&b), &Bytes::new(&[]), 0).to_json();
        assert_eq!(m["gpu_uuid"], "GPU-8a1b2c3d-0001-0203-0405-060708090a0b");
        assert_eq!(m["rmCtrlFd"], 7);
        assert_eq!(m["numaNodeId"], -1);
        let init = args(
            UVM_INITIALIZE,
            &Bytes::new(&3u64.to_le_bytes()),
            &Bytes::new(&[]),
            0,
        )
        .to_json();
        assert_eq!(
            init["flag_names"],
            json!(["DISABLE_HMM", "MULTI_PROCESS_SHARING_MODE"])
        );
    }
}
