//! The Xid table: what an NVIDIA Xid number means and what a node operator
//! should do about it.
//!
//! The driver prints an Xid to the kernel log as
//! `NVRM: Xid (PCI:dddd:bb:dd): N, pid=…, name=…, <message>` (with
//! ` GPU-I:nn GPU-CI:nn` after the PCI address when a MIG instance is
//! attributed, and without `pid=…, name=…` when there is no process;
//! `src/nvidia/src/kernel/gpu/rc/kernel_rc.c`, `XID_PRINT_WITH_ATTR`). This
//! module only says what `N` means; it does not parse the line.
//!
//! # The table
//!
//! The rows are `docs/XID.md`'s table, the one for people, read when
//! nvprobe is built (`include_str!`) and parsed once: one source, so the
//! two cannot disagree. That page names the sources (NVIDIA's Xid
//! catalogue, the r5xx Xid page, the memory error guide, `nverror.h`) and
//! how each column is filled, the action's rules included.

use std::sync::LazyLock;

use serde::Serialize;

// Derived rather than a `named_enum!`: the JSON Schema keeps each value's
// description.
/// What a node operator should do about an Xid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum XidAction {
    /// The program's own GPU code is at fault (a bad pointer, an illegal
    /// instruction, a trap/assert): fix the program; the node is fine.
    FixProgram,
    /// Restart the application (the GPU recovered; e.g. a channel the
    /// driver reset).
    RestartApp,
    /// Reset the GPU (nvidia-smi -r or a reboot) before it is used again.
    ResetGpu,
    /// Hardware: drain the node and have it checked (ECC double-bit, fallen
    /// off the bus, NVLink, row-remap failure...).
    DrainNode,
    /// A driver or firmware (GSP) fault: collect a bug report
    /// (nvidia-bug-report.sh), update the driver; may need a GPU reset.
    DriverFault,
    /// Informational / follows another error; nothing on its own.
    Informational,
}

impl XidAction {
    const ALL: [Self; 6] = [
        Self::FixProgram,
        Self::RestartApp,
        Self::ResetGpu,
        Self::DrainNode,
        Self::DriverFault,
        Self::Informational,
    ];

    /// The serialized (snake_case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FixProgram => "fix_program",
            Self::RestartApp => "restart_app",
            Self::ResetGpu => "reset_gpu",
            Self::DrainNode => "drain_node",
            Self::DriverFault => "driver_fault",
            Self::Informational => "informational",
        }
    }

    /// The action `as_str` names.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

crate::decode::named_enum!(
    /// A possible cause the catalogue names for an Xid.
    Cause {
        UserApp => "user_app",
        Driver => "driver",
        Hardware => "hardware",
        Firmware => "firmware",
        Thermal => "thermal",
        Bus => "bus",
        Nvlink => "nvlink",
        Memory => "memory",
        Power => "power",
        SystemMemory => "system_memory",
    }
);

/// One Xid's row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct XidInfo {
    pub number: u32,
    /// NVIDIA's name (nverror.h, e.g. "ROBUST_CHANNEL_GR_EXCEPTION") when
    /// known.
    pub name: Option<&'static str>,
    /// One line: what it means (from the catalogue).
    pub meaning: &'static str,
    /// The catalogue's possible causes, in short: which of user app /
    /// driver / hardware / thermal / bus ... it lists.
    pub causes: Vec<Cause>,
    pub action: XidAction,
    /// One or two sentences: what to do, from the catalogue's recommended
    /// action.
    pub what_to_do: &'static str,
}

/// docs/XID.md.
const DOC: &str = include_str!("../../../../docs/XID.md");

/// The doc's rows, sorted by number.
static ROWS: LazyLock<Vec<XidInfo>> = LazyLock::new(|| {
    let mut rows: Vec<XidInfo> = DOC.lines().filter_map(parse_row).collect();
    rows.sort_by_key(|r| r.number);
    rows
});

/// A row of the doc's table (`| N | `NAME` | meaning | causes | `action` |
/// what to do |`), None for any other line.
fn parse_row(line: &'static str) -> Option<XidInfo> {
    let inner = line.strip_prefix("| ")?.strip_suffix(" |")?;
    let cells: Vec<&'static str> = inner.split(" | ").collect();
    let [number, name, meaning, causes, action, what_to_do] = cells[..] else {
        return None;
    };
    let dash = |c: &'static str| (c != "—").then_some(c);
    Some(XidInfo {
        number: number.parse().ok()?,
        name: dash(name).map(|n| n.trim_matches('`')),
        meaning,
        causes: dash(causes)
            .map_or(Ok(Vec::new()), |c| {
                c.split(", ")
                    .map(Cause::from_name)
                    .collect::<Option<_>>()
                    .ok_or(())
            })
            .ok()?,
        action: XidAction::from_name(action.trim_matches('`'))?,
        what_to_do,
    })
}

/// The row of Xid `n`, None when the table has no row.
pub fn info(n: u32) -> Option<&'static XidInfo> {
    let rows: &'static [XidInfo] = &ROWS;
    rows.binary_search_by_key(&n, |r| r.number)
        .ok()
        .map(|i| &rows[i])
}

/// Whether Xid `n` means the node should be drained (action DrainNode).
pub fn drains(n: u32) -> bool {
    info(n).is_some_and(|r| r.action == XidAction::DrainNode)
}

/// All rows, sorted by number (for docs and tests).
pub fn all() -> &'static [XidInfo] {
    &ROWS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_numbered_row_of_the_doc_parses() {
        let numbered: Vec<&str> = DOC
            .lines()
            .filter(|l| {
                l.strip_prefix("| ")
                    .and_then(|rest| rest.split(' ').next())
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .collect();
        for l in &numbered {
            assert!(
                parse_row(l).is_some(),
                "docs/XID.md: a row nvprobe cannot read: {l}"
            );
        }
        assert_eq!(all().len(), numbered.len());
        assert!(all().len() > 90, "{} rows", all().len());
        assert!(parse_row("| 13 | x | y | bogus | `fix_program` | z |").is_none());
        assert!(parse_row("| 13 | x | y | — | `nothing` | z |").is_none());
    }

    #[test]
    fn rows_are_sorted_and_unique() {
        assert!(all().windows(2).all(|w| w[0].number < w[1].number));
        assert!(all().iter().all(|r| info(r.number) == Some(r)));
    }

    #[test]
    fn lookup() {
        for r in all() {
            assert_eq!(info(r.number).map(|i| i.number), Some(r.number));
        }
        assert!(info(0).is_none());
        assert!(info(14).is_none(), "the catalogue marks 14 unused");
        assert!(info(u32::MAX).is_none());
        assert_eq!(info(13).unwrap().name, Some("ROBUST_CHANNEL_GR_EXCEPTION"));
        assert_eq!(info(79).unwrap().action, XidAction::DrainNode);
    }

    #[test]
    fn drain_set() {
        let drained: Vec<u32> = all()
            .iter()
            .map(|r| r.number)
            .filter(|&n| drains(n))
            .collect();
        // 48, 74, 79 as the issue says; 54 (CHECK_MECHANICALS) and 110 (cold
        // reset, hardware vendor) from the catalogue. Not 64 (RESET_GPU) nor
        // 119 (RESET_GPU → INVESTIGATE_SW, a GSP fault): the catalogue wins.
        assert_eq!(drained, [48, 54, 74, 79, 110]);
        assert!(!drains(64));
        assert!(!drains(119));
        assert!(!drains(0));
        assert_eq!(info(64).unwrap().action, XidAction::ResetGpu);
        assert_eq!(info(119).unwrap().action, XidAction::DriverFault);
        assert_eq!(info(120).unwrap().action, XidAction::DriverFault);
    }

    #[test]
    fn covers_the_asked_for_xids() {
        let asked = [
            8, 13, 31, 32, 38, 43, 44, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109,
            119, 120, 121, 122, 123, 136, 140, 143, 144, 145, 146, 147, 148, 149, 150, 154, 155,
        ];
        for n in asked {
            assert!(info(n).is_some(), "no row for Xid {n}");
        }
    }

    #[test]
    fn rows_are_well_formed() {
        for r in all() {
            let n = r.number;
            assert!(r.name.is_some_and(|s| !s.is_empty()), "{n}: name");
            for text in [r.meaning, r.what_to_do] {
                assert!(!text.is_empty(), "{n}: empty text");
                assert!(
                    !text.contains('|') && !text.contains('\n'),
                    "{n}: breaks the table"
                );
            }
            assert!(
                r.what_to_do.contains('['),
                "{n}: what_to_do names the catalogue's bucket"
            );
            for (i, c) in r.causes.iter().enumerate() {
                assert!(!r.causes[..i].contains(c), "{n}: {c:?} twice");
            }
        }
    }

    #[test]
    fn serializes_snake_case() {
        for a in XidAction::ALL {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
            assert_eq!(XidAction::from_name(a.as_str()), Some(a));
        }
        let v = serde_json::to_value(info(48).unwrap()).unwrap();
        assert_eq!(v["action"], "drain_node");
        assert_eq!(v["causes"], serde_json::json!(["memory", "hardware"]));
    }
}
