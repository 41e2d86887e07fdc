//! nvidia.ko escapes (`_IOWR('F', nr, size)` on /dev/nvidiactl and
//! /dev/nvidiaN): names, where each parameter struct keeps its status, and
//! the fields worth showing.
//!
//! Sources: kernel-open/common/inc/nv-ioctl-numbers.h, nv-ioctl.h,
//! src/nvidia/arch/nvalloc/unix/include/nv_escape.h,
//! src/common/sdk/nvidia/inc/nvos.h (515.43.04 … 595.45.04); docs/NVIDIA-ABI.md
//! §1.2, §2.1, §2.2, §2.4.

use super::{
    args::Args,
    bytes::Bytes,
    context::StatusLoc,
    escape_args,
    version::{DriverVersion, VersionCtx},
};

/// The numbers the kernel side needs too are the contract's.
pub use nvprobe_common::ioctl::{NV_ESC_IOCTL_XFER_CMD, NV_ESC_RM_CONTROL, NV_IOCTL_MAGIC};
pub const NV_ESC_RM_ALLOC: u32 = 0x2B;
pub const NV_ESC_RM_ALLOC_MEMORY: u32 = 0x27;
pub const NV_ESC_RM_FREE: u32 = 0x29;
pub const NV_ESC_REGISTER_FD: u32 = 0xC9;
pub const NV_ESC_CHECK_VERSION_STR: u32 = 0xD2;

/// Where the status of an escape lives.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// The struct has no NV_STATUS: the errno is the result.
    ErrnoOnly,
    /// Same size and offset in every version the tables cover.
    Fixed { size: u32, status: u32 },
    /// Layouts told apart by `_IOC_SIZE`: (size, status offset).
    BySize(&'static [(u32, u32)]),
    /// NV_ESC_RM_ALLOC: NVOS21 or NVOS64, with version-dependent offsets.
    RmAlloc,
    /// Defined in nv_escape.h but handled by no driver switch: the driver
    /// answers -EINVAL.
    Unhandled,
    /// An escape whose struct the tables do not describe.
    Unknown,
}

/// An escape's argument decoder: fills the fields it can read from the
/// captured head of the parameters (`size` is `_IOC_SIZE`).
pub type ArgsFn = fn(&mut Args, u32, &Bytes, &VersionCtx);

pub struct Escape {
    pub nr: u32,
    pub name: &'static str,
    pub layout: Layout,
    /// The decoder of its fields (escape_args.rs), if nvprobe has one.
    pub args: Option<ArgsFn>,
}

const fn e(nr: u32, name: &'static str, layout: Layout) -> Escape {
    Escape {
        nr,
        name,
        layout,
        args: None,
    }
}

impl Escape {
    const fn with(mut self, f: ArgsFn) -> Self {
        self.args = Some(f);
        self
    }
}

use Layout::*;

/// Every escape number, once, sorted by number.
#[rustfmt::skip]
pub const ESCAPES: &[Escape] = &[
    e(0x27, "NV_ESC_RM_ALLOC_MEMORY", Fixed { size: 56, status: 40 }).with(escape_args::args_alloc_memory),
    e(0x28, "NV_ESC_RM_ALLOC_OBJECT", Fixed { size: 20, status: 16 }),
    e(0x29, "NV_ESC_RM_FREE", Fixed { size: 16, status: 12 }).with(escape_args::args_rm_free),
    e(0x2A, "NV_ESC_RM_CONTROL", Fixed { size: 32, status: 28 }).with(escape_args::args_rm_control),
    e(0x2B, "NV_ESC_RM_ALLOC", RmAlloc).with(escape_args::args_rm_alloc),
    // CONFIG_GET/SET(_EX) existed until 590.x (removed in 595.44.02); their
    // structs are not in the tables.
    e(0x32, "NV_ESC_RM_CONFIG_GET", Unknown),
    e(0x33, "NV_ESC_RM_CONFIG_SET", Unknown),
    e(0x34, "NV_ESC_RM_DUP_OBJECT", Fixed { size: 28, status: 24 }),
    e(0x35, "NV_ESC_RM_SHARE", Fixed { size: 24, status: 20 }),
    e(0x37, "NV_ESC_RM_CONFIG_GET_EX", Unknown),
    e(0x38, "NV_ESC_RM_CONFIG_SET_EX", Unknown),
    e(0x39, "NV_ESC_RM_I2C_ACCESS", Fixed { size: 32, status: 24 }),
    e(0x41, "NV_ESC_RM_IDLE_CHANNELS", Fixed { size: 56, status: 48 }),
    e(0x4A, "NV_ESC_RM_VID_HEAP_CONTROL", Fixed { size: 184, status: 20 }),
    e(0x4D, "NV_ESC_RM_ACCESS_REGISTRY", Fixed { size: 72, status: 64 }),
    e(0x4E, "NV_ESC_RM_MAP_MEMORY", Fixed { size: 56, status: 40 }).with(escape_args::args_map_memory),
    e(0x4F, "NV_ESC_RM_UNMAP_MEMORY", Fixed { size: 32, status: 24 }),
    e(0x52, "NV_ESC_RM_GET_EVENT_DATA", Fixed { size: 16, status: 12 }),
    e(0x54, "NV_ESC_RM_ALLOC_CONTEXT_DMA2", Fixed { size: 56, status: 48 }),
    e(0x56, "NV_ESC_RM_ADD_VBLANK_CALLBACK", Unhandled),
    // NVOS46 grew in 580 (64 B, status @56); before: 56 B, status @48.
    e(0x57, "NV_ESC_RM_MAP_MEMORY_DMA", BySize(&[(64, 56), (56, 48)])),
    // NVOS47 grew in 550 (48 B, status @40); before: 40 B, status @32.
    e(0x58, "NV_ESC_RM_UNMAP_MEMORY_DMA", BySize(&[(48, 40), (40, 32)])),
    e(0x59, "NV_ESC_RM_BIND_CONTEXT_DMA", Fixed { size: 16, status: 12 }),
    e(0x5C, "NV_ESC_RM_EXPORT_OBJECT_TO_FD", Unhandled),
    e(0x5D, "NV_ESC_RM_IMPORT_OBJECT_FROM_FD", Unhandled),
    e(0x5E, "NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO", Fixed { size: 40, status: 32 }),
    // 0x5F is RM_NVLOG_CTRL in 525/535 (see `name_for`).
    e(0x5F, "NV_ESC_RM_LOCKLESS_DIAGNOSTIC", Fixed { size: 15412, status: 4 }),
    e(0xC8, "NV_ESC_CARD_INFO", ErrnoOnly).with(escape_args::args_card_info),
    e(0xC9, "NV_ESC_REGISTER_FD", ErrnoOnly).with(escape_args::args_register_fd),
    e(0xCE, "NV_ESC_ALLOC_OS_EVENT", Fixed { size: 16, status: 12 }).with(escape_args::args_os_event),
    e(0xCF, "NV_ESC_FREE_OS_EVENT", Fixed { size: 16, status: 12 }).with(escape_args::args_os_event),
    e(0xD1, "NV_ESC_STATUS_CODE", Fixed { size: 12, status: 8 }),
    e(0xD2, "NV_ESC_CHECK_VERSION_STR", ErrnoOnly).with(escape_args::args_check_version_str),
    e(0xD3, "NV_ESC_IOCTL_XFER_CMD", ErrnoOnly),
    e(0xD4, "NV_ESC_ATTACH_GPUS_TO_FD", ErrnoOnly).with(escape_args::args_attach_gpus_to_fd),
    e(0xD5, "NV_ESC_QUERY_DEVICE_INTR", Fixed { size: 8, status: 4 }),
    e(0xD6, "NV_ESC_SYS_PARAMS", ErrnoOnly).with(escape_args::args_sys_params),
    // nv_ioctl_numa_info_t.status is a NUMA state, not an NV_STATUS.
    e(0xD7, "NV_ESC_NUMA_INFO", ErrnoOnly).with(escape_args::args_numa_info),
    e(0xD8, "NV_ESC_SET_NUMA_STATUS", ErrnoOnly),
    e(0xD9, "NV_ESC_EXPORT_TO_DMABUF_FD", Fixed { size: 2608, status: 2600 }),
    // adapterStatus @4 is an NV_STATUS; rc @0 is an errno-style int.
    e(0xDA, "NV_ESC_WAIT_OPEN_COMPLETE", Fixed { size: 8, status: 4 }).with(escape_args::args_wait_open_complete),
];

pub fn lookup(nr: u32) -> Option<&'static Escape> {
    ESCAPES
        .binary_search_by_key(&nr, |e| e.nr)
        .ok()
        .map(|i| &ESCAPES[i])
}

/// The escape's name for the running driver: 0x5F changed meaning in 545.
pub fn name_for(nr: u32, v: &VersionCtx) -> Option<&'static str> {
    if nr == 0x5F && v.known && v.version < DriverVersion::new(545, 0, 0) {
        return Some("NV_ESC_RM_NVLOG_CTRL");
    }
    lookup(nr).map(|e| e.name)
}

/// Where the NV_STATUS of escape `nr` with parameter size `size` is, or why
/// none is shown. Never invents a status field the ABI does not have.
pub fn status_loc(nr: u32, size: u32, v: &VersionCtx) -> Result<StatusLoc, String> {
    let Some(esc) = lookup(nr) else {
        return Err("unknown escape: no layout".into());
    };
    match esc.layout {
        ErrnoOnly => Err("no status field: the errno is the result".into()),
        Unhandled => Err("escape not handled by the driver".into()),
        Unknown => Err("struct layout not in nvprobe's tables".into()),
        Fixed { size: want, status } if size == want => Ok(StatusLoc {
            offset: status,
            basis: v.stable(),
        }),
        Fixed { size: want, .. } => Err(format!(
            "parameter size {size} differs from the known layout ({want} bytes): status not read"
        )),
        BySize(table) => table
            .iter()
            .find(|(s, _)| *s == size)
            .map(|&(_, status)| StatusLoc {
                offset: status,
                basis: super::version::LayoutBasis::IocSize,
            })
            .ok_or_else(|| {
                format!("parameter size {size} matches no known layout: status not read")
            }),
        RmAlloc => rm_alloc_status(size, v),
    }
}

/// The `STATUS_AT` entries of the escapes (nvprobe_common::status_at):
/// every (layout size, status offset) whose offset does not rest on an
/// assumed driver version, directly and behind an XFER wrapper.
pub fn status_at_entries(v: &VersionCtx) -> Vec<(u32, u32)> {
    use nvprobe_common::status_at::{escape_key, xfer_key};
    let mut out = Vec::new();
    for esc in ESCAPES {
        let sizes: Vec<u32> = match esc.layout {
            Fixed { size, .. } => vec![size],
            BySize(t) => t.iter().map(|&(s, _)| s).collect(),
            RmAlloc => vec![32, 40, 48],
            ErrnoOnly | Unhandled | Unknown => continue,
        };
        for size in sizes {
            let Ok(loc) = status_loc(esc.nr, size, v) else {
                continue;
            };
            if loc.basis == super::version::LayoutBasis::Assumed || loc.offset + 4 > size {
                continue;
            }
            if size < 1 << 14 {
                out.push((escape_key(esc.nr, size), loc.offset));
            }
            if esc.nr != NV_ESC_IOCTL_XFER_CMD {
                out.push((xfer_key(esc.nr, size), loc.offset));
            }
        }
    }
    out
}

/// NV_ESC_RM_ALLOC takes NVOS21 (32 B) or NVOS64 (40 B before 535, 48 B
/// from 535). Size 48 alone decides; 32 and 40 need the version (§2.4).
fn rm_alloc_status(size: u32, v: &VersionCtx) -> Result<StatusLoc, String> {
    use super::version::LayoutBasis;
    let r535 = DriverVersion::new(535, 0, 0);
    let r525 = DriverVersion::new(525, 0, 0);
    match size {
        48 => Ok(StatusLoc {
            offset: 40,
            basis: LayoutBasis::IocSize,
        }),
        32 => Ok(StatusLoc {
            offset: if v.version >= r535 { 28 } else { 24 },
            basis: v.by_version(),
        }),
        40 => {
            // A 40-byte NVOS64 only exists before 535. With no trusted
            // version, assume the 525–530 layout.
            let offset = if v.known && v.version < r525 { 32 } else { 36 };
            Ok(StatusLoc {
                offset,
                basis: if v.known && v.version < r535 {
                    LayoutBasis::DriverVersion
                } else {
                    LayoutBasis::Assumed
                },
            })
        }
        _ => Err(format!(
            "parameter size {size} is neither NVOS21 nor NVOS64: status not read"
        )),
    }
}

/// Decode the fields that identify an escape call, from the bytes captured
/// at syscall exit (`head` starts at offset 0 of the struct); RM control
/// and class names are those of `v`'s release.
/// The escape's fields from the captured head of its parameters: the
/// decoder of its table row, if it has one.
pub fn args(nr: u32, size: u32, head: &Bytes, v: &VersionCtx) -> Args {
    let mut m = Args::new();
    if let Some(f) = lookup(nr).and_then(|e| e.args) {
        f(&mut m, size, head, v);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::version::LayoutBasis;

    fn v580() -> VersionCtx {
        VersionCtx::from_version(Some(DriverVersion::new(580, 159, 4)))
    }

    #[test]
    fn table_sorted_unique_and_in_range() {
        assert!(ESCAPES.windows(2).all(|w| w[0].nr < w[1].nr));
        // `_IOC_NR` is 8 bits; NV_IOCTL_BASE (200) + 18 is the top escape.
        assert!(ESCAPES.iter().all(|e| e.nr <= 0xFF));
        for e in ESCAPES {
            if let Fixed { size, status } = e.layout {
                assert!(status + 4 <= size, "{}: status beyond struct", e.name);
            }
        }
    }

    #[test]
    fn status_offsets_follow_the_abi() {
        let v = v580();
        let at = |nr, size| status_loc(nr, size, &v).map(|s| (s.offset, s.basis));
        assert_eq!(at(0x2A, 32), Ok((28, LayoutBasis::Stable)));
        assert_eq!(at(0x2B, 48), Ok((40, LayoutBasis::IocSize)));
        assert_eq!(at(0x2B, 32), Ok((28, LayoutBasis::DriverVersion)));
        assert_eq!(at(0x29, 16), Ok((12, LayoutBasis::Stable)));
        assert_eq!(at(0x57, 64), Ok((56, LayoutBasis::IocSize)));
        assert_eq!(at(0x57, 56), Ok((48, LayoutBasis::IocSize)));
        assert_eq!(at(0x58, 40), Ok((32, LayoutBasis::IocSize)));
        assert_eq!(at(0xCE, 16), Ok((12, LayoutBasis::Stable)));
        assert_eq!(at(0xD9, 2608), Ok((2600, LayoutBasis::Stable)));
        // No status field: never invent one.
        for nr in [0xC8, 0xC9, 0xD2, 0xD4, 0xD6, 0xD7, 0xD8] {
            assert!(status_loc(nr, 8, &v).is_err(), "{nr:#x}");
        }
        // Wrong size for a fixed struct: no status.
        assert!(status_loc(0x2A, 40, &v).is_err());
        assert!(status_loc(0x2B, 24, &v).is_err());
        assert!(status_loc(0x99, 16, &v).is_err());
    }

    #[test]
    fn old_drivers_and_unknown_versions() {
        let v530 = VersionCtx::from_version(Some(DriverVersion::new(530, 30, 2)));
        assert_eq!(status_loc(0x2B, 32, &v530).map(|s| s.offset), Ok(24));
        assert_eq!(status_loc(0x2B, 40, &v530).map(|s| s.offset), Ok(36));
        let v515 = VersionCtx::from_version(Some(DriverVersion::new(515, 43, 4)));
        assert_eq!(status_loc(0x2B, 40, &v515).map(|s| s.offset), Ok(32));
        assert_eq!(name_for(0x5F, &v515), Some("NV_ESC_RM_NVLOG_CTRL"));
        assert_eq!(
            name_for(0x5F, &v580()),
            Some("NV_ESC_RM_LOCKLESS_DIAGNOSTIC")
        );
        let unknown = VersionCtx::assumed();
        let s = status_loc(0x2A, 32, &unknown).expect("control has a status");
        assert_eq!((s.offset, s.basis), (28, LayoutBasis::Assumed));
        let s = status_loc(0x2B, 32, &unknown).expect("alloc has a status");
        assert_eq!((s.offset, s.basis), (28, LayoutBasis::Assumed));
    }

    #[test]
    fn control_and_alloc_fields() {
        let mut b = [0u8; 32];
        b[0..4].copy_from_slice(&0xc1d0_0004u32.to_le_bytes());
        b[4..8].copy_from_slice(&0xc1d0_0004u32.to_le_bytes());
        b[8..12].copy_from_slice(&0x101u32.to_le_bytes());
        b[24..28].copy_from_slice(&40u32.to_le_bytes());
        let m = args(0x2A, 32, &Bytes::new(&b), &v580()).to_json();
        assert_eq!(m["control"], "0x101");
        assert_eq!(
            m["control_name"],
            "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"
        );
        assert_eq!(m["hClient"], "0xc1d00004");
        assert_eq!(m["paramsSize"], 40);

        let mut a = [0u8; 48];
        a[12..16].copy_from_slice(&0x41u32.to_le_bytes());
        let m = args(0x2B, 48, &Bytes::new(&a), &v580()).to_json();
        assert_eq!(m["hClass_name"], "NV01_ROOT_CLIENT");
        assert_eq!(m["struct"], "NVOS64");
        // Truncated capture: no fields rather than garbage.
        let m = args(0x2A, 32, &Bytes::new(&b[..6]), &v580()).to_json();
        assert!(m.get("control").is_none());
    }

    #[test]
    fn control_names_and_sizes_follow_the_release() {
        let mut b = [0u8; 32];
        b[8..12].copy_from_slice(&0x107u32.to_le_bytes());
        b[24..28].copy_from_slice(&4u32.to_le_bytes());
        let v535 = VersionCtx::from_version(Some(DriverVersion::new(535, 183, 1)));
        let m = args(0x2A, 32, &Bytes::new(&b), &v535).to_json();
        assert_eq!(m["control_name"], "NV0000_CTRL_CMD_SYSTEM_SET_MEMORY_SIZE");
        assert!(m.get("params_size_expected").is_none(), "{m}");
        // On 580 the number means GET_VRR_COOKIE_PRESENT, whose params are
        // 1 byte: the recorded 4 is a mismatch worth showing.
        let m = args(0x2A, 32, &Bytes::new(&b), &v580()).to_json();
        assert_eq!(
            m["control_name"],
            "NV0000_CTRL_SYSTEM_GET_VRR_COOKIE_PRESENT"
        );
        assert_eq!(m["params_size_expected"], 1);
        let keys: Vec<&str> = m
            .as_object()
            .expect("map")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "hClient",
                "hObject",
                "control",
                "control_name",
                "paramsSize",
                "params_size_expected"
            ]
        );
        // Not with an assumed version, nor with FINN-serialized params.
        let m = args(0x2A, 32, &Bytes::new(&b), &VersionCtx::assumed()).to_json();
        assert!(m.get("params_size_expected").is_none());
        b[12..16].copy_from_slice(&4u32.to_le_bytes());
        let m = args(0x2A, 32, &Bytes::new(&b), &v580()).to_json();
        assert!(m.get("params_size_expected").is_none());
        // Unknown numbers stay raw.
        b[8..12].copy_from_slice(&0x2080_8159u32.to_le_bytes());
        let m = args(0x2A, 32, &Bytes::new(&b), &v580()).to_json();
        assert_eq!(m["control"], "0x20808159");
        assert!(m.get("control_name").is_none());
    }
}
