//! The NVIDIA driver version, which picks struct layouts where the ioctl
//! command does not (docs/NVIDIA-ABI.md §2.4, §5.5).

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

/// A driver version such as 580.159.04. Ordered numerically.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriverVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl DriverVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }
}

/// Oldest and newest versions whose headers the decode tables were computed
/// from (open-gpu-kernel-modules tags 515.43.04 … 595.45.04).
pub const TABLES_OLDEST: DriverVersion = DriverVersion::new(515, 43, 4);
pub const TABLES_NEWEST: DriverVersion = DriverVersion::new(595, 45, 4);

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{:02}", self.major, self.minor, self.patch)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a driver version: {0:?} (expected MAJOR.MINOR[.PATCH], e.g. 580.159.04)")]
pub struct BadVersion(pub String);

impl FromStr for DriverVersion {
    type Err = BadVersion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadVersion(s.to_owned());
        let mut it = s.trim().split('.');
        let mut num = |req: bool| -> Result<u32, BadVersion> {
            match it.next() {
                Some(p)
                    if !p.is_empty() && p.len() <= 6 && p.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    p.parse().map_err(|_| bad())
                }
                None if !req => Ok(0),
                _ => Err(bad()),
            }
        };
        let v = DriverVersion::new(num(true)?, num(true)?, num(false)?);
        if it.next().is_some() {
            return Err(bad());
        }
        Ok(v)
    }
}

impl Serialize for DriverVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl schemars::JsonSchema for DriverVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DriverVersion".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "description": "an NVIDIA driver version, e.g. 580.159.04" })
    }
}

impl<'de> Deserialize<'de> for DriverVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What `/proc/driver/nvidia/version` says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct DriverInfo {
    pub version: DriverVersion,
    /// "open" (NVIDIA Open Kernel Module) or "proprietary".
    pub flavor: String,
}

/// Parse the first line of `/proc/driver/nvidia/version`, e.g.
/// `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build …`.
pub fn parse_proc_version(text: &str) -> Option<DriverInfo> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let version = line
        .split_whitespace()
        .find_map(|w| w.parse::<DriverVersion>().ok().filter(|v| v.major >= 100))?;
    let flavor = if line.contains("Open Kernel Module") {
        "open"
    } else {
        "proprietary"
    };
    Some(DriverInfo {
        version,
        flavor: flavor.to_owned(),
    })
}

/// How a struct layout was chosen; shown next to every decoded status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutBasis {
    /// The size in the ioctl command word singles out the layout.
    IocSize,
    /// The struct is the same in every driver version the tables cover, and
    /// the running version is one of them.
    Stable,
    /// The running driver version picks among layouts that differ.
    DriverVersion,
    /// The driver version is unknown or outside the tables: the newest
    /// layout is assumed.
    Assumed,
}

/// The driver version the decoder works with, and whether it is trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionCtx {
    pub version: DriverVersion,
    /// False when the version is unknown (no driver) or outside the tables.
    pub known: bool,
}

impl VersionCtx {
    pub fn from_version(v: Option<DriverVersion>) -> Self {
        match v {
            Some(v) if (TABLES_OLDEST..=TABLES_NEWEST_MINOR_LINE).contains(&v) => Self {
                version: v,
                known: true,
            },
            Some(v) => Self {
                version: v,
                known: false,
            },
            None => Self::assumed(),
        }
    }
    pub fn assumed() -> Self {
        Self {
            version: TABLES_NEWEST,
            known: false,
        }
    }
    /// Basis for a layout that is the same in all covered versions.
    pub fn stable(&self) -> LayoutBasis {
        if self.known {
            LayoutBasis::Stable
        } else {
            LayoutBasis::Assumed
        }
    }
    /// Basis for a layout picked by version.
    pub fn by_version(&self) -> LayoutBasis {
        if self.known {
            LayoutBasis::DriverVersion
        } else {
            LayoutBasis::Assumed
        }
    }
}

/// The newest release line the tables cover: later 595.x point releases
/// keep the 595 ABI (struct changes come with new branches).
const TABLES_NEWEST_MINOR_LINE: DriverVersion = DriverVersion::new(595, u32::MAX, u32::MAX);

/// A one-line explanation of why decoding is not trusted, or None.
pub fn version_warning(driver: Option<&DriverInfo>) -> Option<String> {
    match driver {
        None => Some(format!(
            "no NVIDIA driver version found (/proc/driver/nvidia/version is missing): statuses are decoded \
             with the {TABLES_NEWEST} layouts and marked \"assumed\"; pass --driver-version to choose"
        )),
        Some(d) if !VersionCtx::from_version(Some(d.version)).known => Some(format!(
            "driver {} is outside the versions nvprobe's tables cover ({TABLES_OLDEST} to 595.x): statuses \
             are decoded with the {TABLES_NEWEST} layouts and marked \"assumed\"",
            d.version
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        assert_eq!("580.159.04".parse(), Ok(DriverVersion::new(580, 159, 4)));
        assert_eq!("550.54".parse(), Ok(DriverVersion::new(550, 54, 0)));
        assert!("580".parse::<DriverVersion>().is_err());
        assert!("580.x.1".parse::<DriverVersion>().is_err());
        assert!("1.2.3.4".parse::<DriverVersion>().is_err());
        assert!("".parse::<DriverVersion>().is_err());
        assert!(DriverVersion::new(550, 54, 14) > DriverVersion::new(550, 40, 53));
        assert_eq!(DriverVersion::new(580, 159, 4).to_string(), "580.159.04");
    }

    #[test]
    fn parses_proc_file() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Oct 30 2025\nGCC version:  gcc version 13.3.0\n";
        let d = parse_proc_version(open).expect("parses");
        assert_eq!(d.version, DriverVersion::new(580, 159, 4));
        assert_eq!(d.flavor, "open");
        let prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n";
        let d = parse_proc_version(prop).expect("parses");
        assert_eq!(d.version, DriverVersion::new(535, 183, 1));
        assert_eq!(d.flavor, "proprietary");
        assert_eq!(parse_proc_version("garbage\n\0\u{1b}[31m"), None);
        assert_eq!(parse_proc_version(""), None);
    }

    #[test]
    fn range_and_warnings() {
        assert!(VersionCtx::from_version(Some(DriverVersion::new(580, 159, 4))).known);
        assert!(VersionCtx::from_version(Some(DriverVersion::new(595, 58, 2))).known);
        assert!(!VersionCtx::from_version(Some(DriverVersion::new(600, 1, 0))).known);
        assert!(!VersionCtx::from_version(Some(DriverVersion::new(470, 1, 0))).known);
        assert!(!VersionCtx::from_version(None).known);
        assert!(version_warning(None).expect("warns").contains("assumed"));
        let newer = DriverInfo {
            version: DriverVersion::new(610, 1, 2),
            flavor: "open".into(),
        };
        assert!(
            version_warning(Some(&newer))
                .expect("warns")
                .contains("610.1.02")
        );
    }
}
