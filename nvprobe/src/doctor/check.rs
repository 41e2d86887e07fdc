//! The types every area shares: a check's verdict, the check itself, and
//! the options of a run.

use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Check {
    pub area: &'static str,
    pub id: &'static str,
    pub verdict: Verdict,
    pub evidence: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

pub(super) fn check(
    area: &'static str,
    id: &'static str,
    verdict: Verdict,
    evidence: impl Into<String>,
    hint: Option<&str>,
) -> Check {
    Check {
        area,
        id,
        verdict,
        evidence: evidence.into(),
        hint: hint.map(str::to_owned),
    }
}

/// What to check and for whom.
#[derive(Clone, Debug)]
pub struct Options {
    pub root: PathBuf,
    /// The host itself (root is `/`): the kernel is asked, opens are tried.
    pub live: bool,
    pub user: Option<String>,
    /// watch's start-up: no kernel tracing checks (watch attaches its own
    /// probes and reports their refusals), no user checks, no opens.
    pub watch_startup: bool,
}

impl Options {
    pub fn tree(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            live: false,
            user: None,
            watch_startup: false,
        }
    }
}
