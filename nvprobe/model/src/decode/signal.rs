//! Signal names (SIGTERM, …), for decoded process records and verdicts.

/// "SIGTERM", or "signal N" for a number the platform does not name.
pub fn name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_owned())
}
