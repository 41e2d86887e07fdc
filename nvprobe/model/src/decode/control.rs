//! RM control commands (NVOS54.cmd). cmd = (class << 16) | (category << 8) | index.
//!
//! Names and params sizes come from `nvprobe/model/data/rm-controls.tsv`,
//! which `cargo xtask gen-tables` writes from the SDK headers
//! (`src/common/sdk/nvidia/inc/ctrl/**`) of one open-gpu-kernel-modules
//! tag per release branch (535 … 595); docs/RM-TABLES.md says how, and
//! which release a driver version gets. Numbers no table names stay raw.

use std::sync::LazyLock;

use super::{
    rmtable::RmTable,
    version::{DriverVersion, VersionCtx},
};

/// The generated table, as shipped.
pub const TSV: &str = include_str!("../../data/rm-controls.tsv");

static TABLE: LazyLock<RmTable<'static>> = LazyLock::new(|| RmTable::parse(TSV, true));

/// The parsed generated table.
pub fn table() -> &'static RmTable<'static> {
    &TABLE
}

/// Controls that the open-source RM handles but no public header names:
/// the names are made from the RM handler names in
/// `src/nvidia/generated/g_subdevice_nvoc.c` (580.142:
/// `subdeviceCtrlCmdGpuAcquireComputeModeReservation`,
/// `subdeviceCtrlCmdGpuReleaseComputeModeReservation`, both without params).
/// Consulted after the generated table, for every release. Sorted.
pub const HAND: &[(u32, &str)] = &[
    (
        0x2080_0145,
        "NV2080_CTRL_CMD_GPU_ACQUIRE_COMPUTE_MODE_RESERVATION",
    ),
    (
        0x2080_0146,
        "NV2080_CTRL_CMD_GPU_RELEASE_COMPUTE_MODE_RESERVATION",
    ),
];

/// Where a control's name came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The generated table's row for the release the driver maps to.
    Release,
    /// The generated table, from the nearest release (below, else above)
    /// that names the number; the driver's own release does not.
    OtherRelease,
    /// [`HAND`].
    Hand,
}

/// A named control for one driver version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control {
    pub name: &'static str,
    /// The table release (major) the driver version maps to.
    pub release: u32,
    pub source: Source,
    /// sizeof(params) in that release, where the table knows it and the row
    /// is valid for that release (0: the control takes no params).
    pub size: Option<u32>,
    /// The params struct in that release, under the same conditions.
    pub params: Option<&'static str>,
}

/// The table release whose names apply to `v` (see docs/RM-TABLES.md).
pub fn release_for(v: DriverVersion) -> Option<u32> {
    TABLE.release_for(v)
}

/// The control `cmd` for the driver of `v`, or None: never a guess.
pub fn lookup(cmd: u32, v: &VersionCtx) -> Option<Control> {
    let release = TABLE.release_for(v.version);
    if let Some(release) = release
        && let Some(hit) = TABLE.lookup(cmd, release)
    {
        return Some(Control {
            name: hit.row.name,
            release,
            source: if hit.exact {
                Source::Release
            } else {
                Source::OtherRelease
            },
            size: hit.row.size_for(release),
            params: hit.row.params_for(release),
        });
    }
    HAND.binary_search_by_key(&cmd, |(c, _)| *c)
        .ok()
        .map(|i| Control {
            name: HAND[i].1,
            release: release.unwrap_or(v.version.major),
            source: Source::Hand,
            size: None,
            params: None,
        })
}

/// The name of control `cmd` for the driver of `v`.
pub fn name(cmd: u32, v: &VersionCtx) -> Option<&'static str> {
    lookup(cmd, v).map(|c| c.name)
}

/// The params size the headers of `v`'s release give `cmd`, when the
/// recorded `params_size` differs from it and the comparison means
/// something: the version is trusted (not assumed), the row is valid for
/// that release, and the params are not FINN-serialized (then paramsSize is
/// the serialized buffer's size). A mismatch is what RM answers with
/// NV_ERR_INVALID_PARAM_STRUCT: libcuda and the kernel headers disagree.
pub fn size_mismatch(cmd: u32, flags: u32, params_size: u32, v: &VersionCtx) -> Option<u32> {
    const NVOS54_FLAGS_FINN_SERIALIZED: u32 = 0x4;
    if !v.known || flags & NVOS54_FLAGS_FINN_SERIALIZED != 0 {
        return None;
    }
    let c = lookup(cmd, v)?;
    c.size
        .filter(|&want| c.source == Source::Release && want != params_size)
}

/// The class interface a control belongs to (bits 31:16).
pub fn interface(cmd: u32) -> u32 {
    cmd >> 16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u32, minor: u32, patch: u32) -> VersionCtx {
        VersionCtx::from_version(Some(DriverVersion::new(major, minor, patch)))
    }

    #[test]
    fn hand_table_sorted_unique_and_not_in_the_headers() {
        assert!(HAND.windows(2).all(|w| w[0].0 < w[1].0));
        for (cmd, _) in HAND {
            assert!(TABLE.rows_of(*cmd).is_empty(), "{cmd:#x} is generated now");
        }
    }

    #[test]
    fn the_shipped_table_parses_whole() {
        // Every non-comment line of the shipped file is a row.
        let lines = TSV
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        assert_eq!(TABLE.rows().len(), lines);
        assert_eq!(TABLE.releases(), &[535, 550, 570, 580, 590, 595]);
        assert!(
            TSV.lines()
                .any(|l| l == "# columns: control, name, versions, size, params, aliases"),
            "the parser's column positions"
        );
        // gen-tables' promise: never two rows of one number for one release.
        for w in TABLE.rows().windows(2) {
            if w[0].number == w[1].number {
                assert!(
                    !w[0].releases.iter().any(|r| w[1].releases.contains(r)),
                    "{:#x}",
                    w[0].number
                );
            }
        }
    }

    #[test]
    fn the_names_the_correlator_relies_on() {
        let v580 = v(580, 159, 4);
        for (cmd, want) in [
            (0x101, "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"),
            (0x215, "NV0000_CTRL_CMD_GPU_ATTACH_IDS"),
            (0x289, "NV0000_CTRL_CMD_GPU_ASYNC_ATTACH_ID"),
        ] {
            assert_eq!(name(cmd, &v580), Some(want));
            assert_eq!(lookup(cmd, &v580).map(|c| c.source), Some(Source::Release));
        }
        assert_eq!(
            name(0x2080_014A, &v580),
            Some("NV2080_CTRL_CMD_GPU_GET_GID_INFO")
        );
        assert_eq!(interface(0x2080_014A), 0x2080);
    }

    #[test]
    fn names_follow_the_release() {
        // 0x107 was SYSTEM_SET_MEMORY_SIZE in 535 and is
        // SYSTEM_GET_VRR_COOKIE_PRESENT from 570.
        assert_eq!(
            name(0x107, &v(535, 261, 3)),
            Some("NV0000_CTRL_CMD_SYSTEM_SET_MEMORY_SIZE")
        );
        assert_eq!(
            name(0x107, &v(580, 159, 4)),
            Some("NV0000_CTRL_SYSTEM_GET_VRR_COOKIE_PRESENT")
        );
        // 550 has neither: the nearest release below (535) names it.
        let c = lookup(0x107, &v(550, 54, 14)).expect("named");
        assert_eq!(
            (c.name, c.release, c.source, c.size),
            (
                "NV0000_CTRL_CMD_SYSTEM_SET_MEMORY_SIZE",
                550,
                Source::OtherRelease,
                None
            )
        );
        // 560 maps to 550, 610 to 595, 470 to 535.
        assert_eq!(lookup(0x101, &v(560, 35, 3)).map(|c| c.release), Some(550));
        assert_eq!(lookup(0x101, &v(610, 1, 0)).map(|c| c.release), Some(595));
        assert_eq!(lookup(0x101, &v(470, 1, 0)).map(|c| c.release), Some(535));
        assert_eq!(
            lookup(0x101, &VersionCtx::assumed()).map(|c| c.release),
            Some(595)
        );
        // NVC36F_CTRL_GET_CLASS_ENGINEID left the headers in 570: 580 keeps
        // the 550 name.
        let c = lookup(0xC36F_0101, &v(580, 159, 4)).expect("named");
        assert_eq!(
            (c.name, c.source),
            ("NVC36F_CTRL_GET_CLASS_ENGINEID", Source::OtherRelease)
        );
    }

    #[test]
    fn unknown_numbers_stay_raw_and_hand_names_come_last() {
        let v580 = v(580, 159, 4);
        for cmd in [
            0x2080_8161,
            0x2080_8159,
            0x2081_0108,
            0xFFFF_FFFF,
            0x0000_0001,
        ] {
            assert_eq!(name(cmd, &v580), None, "{cmd:#x}");
        }
        let c = lookup(0x2080_0145, &v580).expect("hand");
        assert_eq!(
            (c.name, c.source),
            (
                "NV2080_CTRL_CMD_GPU_ACQUIRE_COMPUTE_MODE_RESERVATION",
                Source::Hand
            )
        );
        assert_eq!(
            name(0x2080_0146, &v(535, 1, 1)),
            Some("NV2080_CTRL_CMD_GPU_RELEASE_COMPUTE_MODE_RESERVATION")
        );
    }

    #[test]
    fn size_mismatches() {
        let v580 = v(580, 159, 4);
        // GET_BUILD_VERSION: 40 bytes in every release.
        assert_eq!(size_mismatch(0x101, 0, 40, &v580), None);
        assert_eq!(size_mismatch(0x101, 0, 32, &v580), Some(40));
        // FINN-serialized params, an assumed version, an unknown or hand
        // control, or a name from another release: no comparison.
        assert_eq!(size_mismatch(0x101, 4, 32, &v580), None);
        assert_eq!(size_mismatch(0x101, 0, 32, &VersionCtx::assumed()), None);
        assert_eq!(size_mismatch(0x2080_8159, 0, 1, &v580), None);
        assert_eq!(size_mismatch(0x2080_0145, 0, 9, &v580), None);
        assert_eq!(size_mismatch(0xC36F_0101, 0, 999, &v580), None);
        // GET_CPU_INFO grew from 104 to 108 bytes in 570.
        assert_eq!(size_mismatch(0x102, 0, 104, &v(535, 261, 3)), None);
        assert_eq!(size_mismatch(0x102, 0, 104, &v580), Some(108));
    }
}
