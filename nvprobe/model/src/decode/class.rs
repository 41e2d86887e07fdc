//! RM object classes (hClass of NV_ESC_RM_ALLOC / RM_ALLOC_MEMORY).
//!
//! Names come from `nvprobe/model/data/rm-classes.tsv`, which
//! `cargo xtask gen-tables` writes from `src/nvidia/generated/g_allclasses.h`
//! and `src/common/sdk/nvidia/inc/class/cl*.h` of one open-gpu-kernel-modules
//! tag per release branch (535 … 595); the release is picked as for
//! controls (docs/RM-TABLES.md). Numbers no table names stay raw.

use std::sync::LazyLock;

use super::{rmtable::RmTable, version::VersionCtx};

/// The generated table, as shipped.
pub const TSV: &str = include_str!("../../data/rm-classes.tsv");

static TABLE: LazyLock<RmTable<'static>> = LazyLock::new(|| RmTable::parse(TSV, false));

/// The parsed generated table.
pub fn table() -> &'static RmTable<'static> {
    &TABLE
}

/// The name of class `class` for the driver of `v`: the row valid for the
/// release `v` maps to, else that of the nearest release below, else above.
pub fn name(class: u32, v: &VersionCtx) -> Option<&'static str> {
    let release = TABLE.release_for(v.version)?;
    TABLE.lookup(class, release).map(|h| h.row.name)
}

/// A memory class (device or system memory a process holds: the
/// NV01_MEMORY_* and *_MEMORY_* classes of cl003e.h, cl0040.h, cl0070.h,
/// cl00c2.h …), by the name the table gives it.
pub fn is_memory(class: crate::decode::args::Named) -> bool {
    class.name.is_some_and(|n| n.contains("MEMORY"))
}

/// Root-client classes: the kernel rewrites 0 and 1 to NV01_ROOT_CLIENT.
pub fn is_root_client(class: u32) -> bool {
    matches!(class, 0x0 | 0x1 | 0x41)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::version::DriverVersion;

    fn v(major: u32) -> VersionCtx {
        VersionCtx::from_version(Some(DriverVersion::new(major, 1, 2)))
    }

    #[test]
    fn the_shipped_table_parses_whole() {
        let lines = TSV
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        assert_eq!(TABLE.rows().len(), lines);
        assert_eq!(TABLE.releases(), &[535, 550, 570, 580, 590, 595]);
        assert!(
            TSV.lines()
                .any(|l| l == "# columns: class, name, versions, aliases")
        );
    }

    #[test]
    fn lookups() {
        let v580 = v(580);
        assert_eq!(name(0x41, &v580), Some("NV01_ROOT_CLIENT"));
        assert_eq!(name(0x2080, &v580), Some("NV20_SUBDEVICE_0"));
        assert_eq!(name(0xCBC0, &v580), Some("HOPPER_COMPUTE_A"));
        assert_eq!(name(0xC86F, &v580), Some("HOPPER_CHANNEL_GPFIFO_A"));
        assert_eq!(name(0x1234, &v580), None);
        // NV_MEMORY_EXTENDED_USER is in no 595 header: 595 keeps the 590
        // name; an unknown version reads the newest tables.
        assert_eq!(name(0x42, &v(595)), Some("NV_MEMORY_EXTENDED_USER"));
        assert_eq!(name(0x41, &VersionCtx::assumed()), Some("NV01_ROOT_CLIENT"));
        assert_eq!(name(0x41, &v(470)), Some("NV01_ROOT_CLIENT"));
        assert!(is_root_client(0) && is_root_client(0x41) && !is_root_client(0x80));
    }
}
