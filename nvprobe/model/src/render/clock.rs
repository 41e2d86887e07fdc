//! CLOCK_MONOTONIC, the kernel records' clock, as wall-clock time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// CLOCK_MONOTONIC (bpf_ktime_get_ns) to wall clock.
#[derive(Clone, Debug)]
pub struct Clock {
    /// realtime - monotonic, in ns, measured once at start.
    offset_ns: i128,
    /// "YYYY-MM-DDTHH:MM:SS" of the last second formatted (per-event
    /// formatting only appends the microseconds).
    cache: std::cell::RefCell<(u64, String)>,
}

impl Clock {
    pub fn now() -> Self {
        let mono = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128)
            .unwrap_or(0);
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        Self::fixed(real - mono)
    }
    /// A fixed clock, for replays and tests.
    pub fn fixed(offset_ns: i128) -> Self {
        Self {
            offset_ns,
            cache: std::cell::RefCell::new((u64::MAX, String::new())),
        }
    }
    pub fn mono_now() -> u64 {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap_or(0)
    }
    pub fn wall(&self, mono_ns: u64) -> SystemTime {
        let ns = (mono_ns as i128 + self.offset_ns).max(0) as u128;
        UNIX_EPOCH + Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32)
    }
    /// RFC 3339, UTC, microseconds: 2026-11-30T03:31:13.123456Z.
    pub fn rfc3339(&self, mono_ns: u64) -> String {
        let wall = self.wall(mono_ns);
        let d = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs();
        let mut cache = self.cache.borrow_mut();
        if cache.0 != secs {
            let full = humantime::format_rfc3339_seconds(wall).to_string();
            cache.1 = full.trim_end_matches('Z').to_owned();
            cache.0 = secs;
        }
        format!("{}.{:06}Z", cache.1, d.subsec_micros())
    }
}
