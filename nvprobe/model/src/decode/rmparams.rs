//! The parameters of the few RM controls whose answers a person needs at
//! start-up (the driver's build version, each GPU's UUID, name, PCI
//! address and NUMA node, the GPUs probed and excluded, the confidential
//! computing state). The kernel side copies them from behind NVOS54.params
//! at syscall exit for the controls listed here ([`kernel_entries`] fills
//! its `RM_PARAMS` map); [`decode`] turns them into `args` fields.
//!
//! Offsets are those of the structs in NVIDIA's headers
//! (`src/common/sdk/nvidia/inc/ctrl/ctrl0000/ctrl0000{system,gpu}.h`,
//! `ctrl2080/ctrl2080gpu.h`, `ctrlcb33.h`), the same in every release of
//! the tables (535 to 595, `cargo xtask gen-tables --layout STRUCT`); a
//! test checks each field against the params size the generated table
//! gives the control in every release.

use super::{
    args::{Arg, Args},
    bytes::{Bytes, escape_bytes},
    uvm::uuid,
    version::VersionCtx,
};
use nvprobe_common::rm_params;

/// One control whose parameters are copied.
pub struct Spec {
    pub control: u32,
    /// Bytes of the parameters the kernel side copies.
    pub copy: u32,
    /// Offset of a user pointer to a string, followed by the kernel side.
    pub deref: Option<u32>,
    /// End of the last fixed-size field [`decode`] reads: every release's
    /// params struct must be at least this big.
    pub needs: u32,
    decode: fn(&Bytes, &[u8], &mut Args),
}

const INVALID_ID: u32 = 0xffff_ffff;

/// The controls, by number.
pub const SPECS: &[Spec] = &[
    // NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION (40 B): pDriverVersionBuffer
    // @8 is a pointer to the string; changelistNumber @32.
    Spec {
        control: 0x101,
        copy: 40,
        deref: Some(8),
        needs: 40,
        decode: |p, deref, m| {
            // With any of the three buffer pointers NULL the RM answers
            // the strings' size only (sizeOfStrings @0) and writes neither
            // strings nor changelist: nothing here is then its answer.
            let set = |o| p.u64(o).is_some_and(|v| v != 0);
            if !(p.u32(0).is_some_and(|n| n > 0) && set(8) && set(16) && set(24)) {
                return;
            }
            if !deref.is_empty() {
                m.driver_version(escape_bytes(deref));
            }
            if let Some(cl) = p.u32(32) {
                m.insert("changelist", Arg::from(cl));
            }
        },
    },
    // NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2: driverVersionBuffer[256]
    // inline @0 (the first 64 bytes are copied).
    Spec {
        control: 0x13e,
        copy: 64,
        deref: None,
        needs: 256,
        decode: |p, _, m| {
            if let Some(s) = p.cstr(0, 64).filter(|s| !s.is_empty()) {
                m.driver_version(s);
            }
        },
    },
    // NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS: gpuIds[32] @0, INVALID_ID ends.
    Spec {
        control: 0x201,
        copy: 128,
        deref: None,
        needs: 128,
        decode: |p, _, m| {
            if p.u32(0).is_some() {
                m.insert("gpu_ids", Arg::HexList(ids(p, 0)));
            }
        },
    },
    // NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 (32 B): gpuId @0, deviceInstance
    // @8, subDeviceInstance @12, numaId @28 (NvS32, -1: none).
    Spec {
        control: 0x205,
        copy: 32,
        deref: None,
        needs: 32,
        decode: |p, _, m| {
            if let (Some(id), Some(dev), Some(sub), Some(numa)) =
                (p.u32(0), p.u32(8), p.u32(12), p.i32(28))
            {
                m.insert("gpu_id", Arg::Hex(id.into()));
                m.insert("device_instance", Arg::from(dev));
                m.insert("subdevice_instance", Arg::from(sub));
                m.insert("numa_id", Arg::from(numa));
            }
        },
    },
    // NV0000_CTRL_CMD_GPU_GET_PROBED_IDS: gpuIds[32] @0, excludedGpuIds[32]
    // @128 (gpuFlags[32] @256 from 580, not copied).
    Spec {
        control: 0x214,
        copy: 256,
        deref: None,
        needs: 256,
        decode: |p, _, m| {
            if p.u32(0).is_some() {
                m.insert("gpu_ids", Arg::HexList(ids(p, 0)));
            }
            if p.u32(128).is_some() {
                m.insert("excluded_gpu_ids", Arg::HexList(ids(p, 128)));
            }
        },
    },
    // NV0000_CTRL_CMD_GPU_GET_PCI_INFO (12 B): gpuId @0, domain @4, bus @8
    // (NvU16), slot @10 (NvU16).
    Spec {
        control: 0x21b,
        copy: 12,
        deref: None,
        needs: 12,
        decode: |p, _, m| {
            if let (Some(id), Some(dom), Some(bus), Some(slot)) =
                (p.u32(0), p.u32(4), p.u16(8), p.u16(10))
            {
                m.insert("gpu_id", Arg::Hex(id.into()));
                m.insert("pci", Arg::Text(format!("{dom:04x}:{bus:02x}:{slot:02x}")));
            }
        },
    },
    // NV0000_CTRL_CMD_GPU_GET_UUID_FROM_GPU_ID (268 B): gpuId @0, flags @4
    // (FORMAT 1:0, BINARY = 2), gpuUuid[256] @8.
    Spec {
        control: 0x275,
        copy: 72,
        deref: None,
        needs: 268,
        decode: |p, _, m| {
            if let (Some(id), Some(flags)) = (p.u32(0), p.u32(4)) {
                m.insert("gpu_id", Arg::Hex(id.into()));
                if let Some(u) = gpu_uuid(p, 8, flags, 64) {
                    m.gpu_uuid(u);
                }
            }
        },
    },
    // NV2080_CTRL_CMD_GPU_GET_NAME_STRING (132 B; 68 from 595):
    // gpuNameStringFlags @0 (0 ASCII, 1 UNICODE), the name @4.
    Spec {
        control: 0x2080_0110,
        copy: 68,
        deref: None,
        needs: 68,
        decode: |p, _, m| {
            let name = match p.u32(0) {
                Some(0) => p.cstr(4, 64),
                Some(1) => utf16(p, 4, 32),
                _ => None,
            };
            if let Some(n) = name.filter(|n| !n.is_empty()) {
                m.insert("gpu_name", Arg::Text(n));
            }
        },
    },
    // NV2080_CTRL_CMD_GPU_GET_GID_INFO (268 B): index @0, flags @4 (FORMAT
    // 1:0, BINARY = 2), length @8, data[256] @12.
    Spec {
        control: 0x2080_014a,
        copy: 76,
        deref: None,
        needs: 268,
        decode: |p, _, m| {
            if let (Some(flags), Some(len)) = (p.u32(4), p.u32(8))
                && let Some(u) = gpu_uuid(p, 12, flags, len.min(64) as usize)
            {
                m.gpu_uuid(u);
            }
        },
    },
    // NV_CONF_COMPUTE_CTRL_CMD_SYSTEM_GET_CAPABILITIES (5 B in 535, 6 B
    // from 550): one byte each.
    Spec {
        control: 0xcb33_0101,
        copy: 6,
        deref: None,
        needs: 5,
        decode: |p, _, m| {
            let names: [(&'static str, &[&'static str]); 6] = [
                (
                    "cc_cpu",
                    &[
                        "none",
                        "amd_sev",
                        "intel_tdx",
                        "amd_sev_snp",
                        "amd_snp_vtom",
                    ],
                ),
                ("cc_gpus", &["none", "apm", "hcc"]),
                ("cc_environment", &["unavailable", "sim", "prod"]),
                ("cc_feature", &["disabled", "apm_enabled", "hcc_enabled"]),
                ("cc_devtools", &["disabled", "enabled"]),
                ("cc_multi_gpu", &["none", "protected_pcie", "nvle"]),
            ];
            for (i, (key, vals)) in names.iter().enumerate() {
                if let Some(b) = p.u8(i as u32) {
                    m.insert(
                        key,
                        match vals.get(usize::from(b)) {
                            Some(s) => Arg::Str(s),
                            None => Arg::Hex(b.into()),
                        },
                    );
                }
            }
        },
    },
];

/// The valid ids of a 32-entry id array at `off` (INVALID_ID and 0 end
/// it, as the RM fills it).
fn ids(p: &Bytes, off: u32) -> Vec<u64> {
    (0..32)
        .map_while(|i| p.u32(off + 4 * i))
        .take_while(|&id| id != INVALID_ID && id != 0)
        .map(u64::from)
        .collect()
}

/// A GPU UUID at `off`: 16 bytes in binary format, else ASCII text.
fn gpu_uuid(p: &Bytes, off: u32, flags: u32, max: usize) -> Option<String> {
    if flags & 3 == 2 {
        return p.array16(off).map(|b| uuid(&b));
    }
    p.cstr(off, max).filter(|s| !s.is_empty())
}

/// A NUL-terminated UTF-16LE string of at most `chars` units at `off`.
fn utf16(p: &Bytes, off: u32, chars: u32) -> Option<String> {
    let units: Vec<u16> = (0..chars)
        .map_while(|i| p.u16(off + 2 * i))
        .take_while(|&u| u != 0)
        .collect();
    let s = String::from_utf16_lossy(&units);
    Some(escape_bytes(s.as_bytes()))
}

/// The spec of `control`, if its parameters are copied.
pub fn spec(control: u32) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.control == control)
}

/// The `RM_PARAMS` map's entries: control → what to copy. The same for
/// every release the tables know (see the module's comment); `_v` is there
/// for the release whose layouts differ, when one does.
pub fn kernel_entries(_v: &VersionCtx) -> Vec<(u32, u32)> {
    SPECS
        .iter()
        .map(|s| {
            (
                s.control,
                rm_params::pack(s.copy, s.deref.unwrap_or(rm_params::NO_DEREF)),
            )
        })
        .collect()
}

/// Add the fields of `control`'s parameters to `m`. `params` are the bytes
/// the kernel side copied, `deref` the string the spec's pointer led to.
pub fn decode(control: u32, params: &[u8], deref: &[u8], m: &mut Args) {
    if let Some(s) = spec(control) {
        (s.decode)(&Bytes::new(params), deref, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::control;

    fn fields(control: u32, params: &[u8], deref: &[u8]) -> serde_json::Value {
        let mut m = Args::new();
        decode(control, params, deref, &mut m);
        m.to_json()
    }

    #[test]
    fn every_field_lies_inside_the_struct_of_every_release() {
        let t = control::table();
        for s in SPECS {
            let rows = t.rows_of(s.control);
            assert!(!rows.is_empty(), "{:#x} is in no table", s.control);
            let exact = t
                .releases()
                .iter()
                .filter(|&&r| t.lookup(s.control, r).is_some_and(|h| h.exact))
                .count();
            assert!(
                exact >= 5,
                "{:#x}: valid in {exact} releases only",
                s.control
            );
            for &rel in t.releases() {
                let Some(hit) = t.lookup(s.control, rel) else {
                    continue;
                };
                if !hit.exact {
                    continue;
                }
                let size = hit.row.size_for(rel).expect("a size");
                assert!(
                    size >= s.needs,
                    "{} in {rel}: {size} B < {} B read",
                    hit.row.name,
                    s.needs
                );
                assert!(s.copy <= nvprobe_common::RM_PARAMS_LEN as u32);
                if let Some(d) = s.deref {
                    assert!(d + 8 <= s.copy.min(size));
                }
            }
        }
    }

    #[test]
    fn kernel_entries_pack_what_the_specs_say() {
        let e = kernel_entries(&VersionCtx::assumed());
        assert_eq!(e.len(), SPECS.len());
        let (_, v) = e.iter().find(|(c, _)| *c == 0x101).unwrap();
        assert_eq!(rm_params::copy(*v), 40);
        assert_eq!(rm_params::deref_off(*v), 8);
        let (_, v) = e.iter().find(|(c, _)| *c == 0x205).unwrap();
        assert_eq!(rm_params::deref_off(*v), rm_params::NO_DEREF);
    }

    #[test]
    fn build_version_uuid_name_numa_pci() {
        let mut p = vec![0u8; 40];
        p[0..4].copy_from_slice(&256u32.to_le_bytes());
        for o in [8, 16, 24] {
            p[o..o + 8].copy_from_slice(&0x7ffd_0000_1000u64.to_le_bytes());
        }
        p[32..36].copy_from_slice(&36_412_345u32.to_le_bytes());
        let j = fields(0x101, &p, b"580.159.04");
        assert_eq!(j["driver_version"], "580.159.04");
        assert_eq!(j["changelist"], 36_412_345);
        // A size query (a NULL title pointer): the RM wrote no string.
        p[24..32].fill(0);
        assert_eq!(fields(0x101, &p, b"junk"), serde_json::json!({}));

        let mut p = vec![0u8; 28];
        p[4..8].copy_from_slice(&2u32.to_le_bytes());
        p[8..12].copy_from_slice(&16u32.to_le_bytes());
        p[12..28].copy_from_slice(&[
            0x1f, 0x2e, 0x3d, 0x4c, 0x5b, 0x6a, 0x79, 0x88, 0x97, 0xa6, 0xb5, 0xc4, 0xd3, 0xe2,
            0xf1, 0x00,
        ]);
        assert_eq!(
            fields(0x2080_014a, &p, b"")["gpu_uuid"],
            "GPU-1f2e3d4c-5b6a-7988-97a6-b5c4d3e2f100"
        );
        let mut p = vec![0u8; 76];
        p[8..12].copy_from_slice(&41u32.to_le_bytes());
        p[12..52].copy_from_slice(b"GPU-00000000-1111-2222-3333-444444444444");
        assert_eq!(
            fields(0x2080_014a, &p, b"")["gpu_uuid"],
            "GPU-00000000-1111-2222-3333-444444444444"
        );

        let mut p = vec![0u8; 68];
        p[4..15].copy_from_slice(b"NVIDIA H200");
        assert_eq!(fields(0x2080_0110, &p, b"")["gpu_name"], "NVIDIA H200");
        let mut p = vec![0u8; 68];
        p[0] = 1;
        for (i, c) in "H200".encode_utf16().enumerate() {
            p[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_le_bytes());
        }
        assert_eq!(fields(0x2080_0110, &p, b"")["gpu_name"], "H200");

        let mut p = vec![0u8; 32];
        p[0..4].copy_from_slice(&0x1800u32.to_le_bytes());
        p[28..32].copy_from_slice(&(-1i32).to_le_bytes());
        let j = fields(0x205, &p, b"");
        assert_eq!(j["gpu_id"], "0x1800");
        assert_eq!(j["numa_id"], -1);

        let mut p = vec![0u8; 12];
        p[0..4].copy_from_slice(&0x1800u32.to_le_bytes());
        p[8..10].copy_from_slice(&0x18u16.to_le_bytes());
        assert_eq!(fields(0x21b, &p, b"")["pci"], "0000:18:00");
    }

    #[test]
    fn id_lists_stop_at_the_first_invalid_id() {
        let mut p = vec![0xffu8; 256];
        p[0..4].copy_from_slice(&0x100u32.to_le_bytes());
        p[4..8].copy_from_slice(&0x200u32.to_le_bytes());
        p[128..132].copy_from_slice(&0x300u32.to_le_bytes());
        let j = fields(0x214, &p, b"");
        assert_eq!(j["gpu_ids"], serde_json::json!(["0x100", "0x200"]));
        assert_eq!(j["excluded_gpu_ids"], serde_json::json!(["0x300"]));
        // A short copy: the ids that are there, no excluded list.
        let j = fields(0x214, &p[..6], b"");
        assert_eq!(j["gpu_ids"], serde_json::json!(["0x100"]));
        assert!(j.get("excluded_gpu_ids").is_none());
        // Nothing copied is not "no GPU".
        assert_eq!(fields(0x201, &[], b""), serde_json::json!({}));
        assert_eq!(fields(0x214, &[], b""), serde_json::json!({}));
    }

    #[test]
    fn confidential_computing_names_known_values_and_shows_others_raw() {
        let j = fields(0xcb33_0101, &[0, 2, 2, 2, 0, 9], b"");
        assert_eq!(j["cc_cpu"], "none");
        assert_eq!(j["cc_gpus"], "hcc");
        assert_eq!(j["cc_feature"], "hcc_enabled");
        assert_eq!(j["cc_multi_gpu"], "0x9");
        // 535's 5-byte struct: no multi-GPU mode.
        assert!(
            fields(0xcb33_0101, &[0, 0, 0, 0, 0], b"")
                .get("cc_multi_gpu")
                .is_none()
        );
    }

    #[test]
    fn hostile_or_empty_parameters_give_no_field_and_no_panic() {
        for s in SPECS {
            for len in [0usize, 1, 7, 31, 255, 256] {
                let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
                let mut m = Args::new();
                decode(s.control, &junk, b"\x1b[2J\xff", &mut m);
                let j = serde_json::to_string(&m.to_json()).unwrap();
                assert!(!j.contains('\u{1b}'), "{j}");
            }
        }
        assert_eq!(fields(0x12345, &[0; 64], b""), serde_json::json!({}));
    }
}
