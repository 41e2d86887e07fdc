//! Other nvprobe instances on the host: their own reads (each libcuda a
//! process loaded, read through /proc/PID/root; the driver's /proc files)
//! look like a process looking for libcuda or the driver. Traced, they are
//! followed, and two nvprobes chase each other's reads into paths like
//! /proc/947/root/proc/22162/root/proc/947/root/…/libcuda.so.1. A peer is
//! recognised in user space, put into the kernel's `PEERS` map (whose
//! processes the path programs neither report nor follow) and dropped from
//! NV_PROCS; what of it was already in flight is dropped here.
//!
//! A peer is a process named `nvprobe…` (the kernel's comm of its main
//! thread or of a thread of it) that runs this very executable or holds BPF
//! objects (only a process with CAP_BPF can: a CUDA program that names
//! itself nvprobe is still traced).

use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt,
    time::{Duration, Instant},
};

use aya::maps::{HashMap as BpfHashMap, MapData};

/// The kernel map's size.
pub const MAX_PEERS: usize = 64;
/// A process named nvprobe… that is not (yet) a peer is looked at again
/// after this long (a starting nvprobe holds no BPF object yet).
const RECHECK: Duration = Duration::from_millis(200);
/// Descriptors looked at per process.
const MAX_FDS: usize = 4096;

#[derive(Default)]
pub struct Peers {
    map: Option<BpfHashMap<MapData, u32, u8>>,
    /// Each peer's start time (/proc/PID/stat), to tell it from a later
    /// process on the same pid.
    peers: HashMap<u32, u64>,
    refreshed: Option<Instant>,
    /// Named nvprobe…, not a peer when last looked at.
    looked: HashMap<u32, Instant>,
    /// Peers found since the last look, for a note each.
    pub found: Vec<u32>,
}

/// Whether the comm (as the kernel keeps it, NUL-padded) names nvprobe.
pub fn named_nvprobe(comm: &[u8]) -> bool {
    comm.starts_with(b"nvprobe")
}

/// Whether `pid` is another nvprobe: see the module's comment.
pub fn is_peer(pid: u32) -> bool {
    if pid == std::process::id() {
        return false;
    }
    let id = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let exe = id(&format!("/proc/{pid}/exe"));
    if exe.is_some() && exe == id("/proc/self/exe") {
        return true;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().take(MAX_FDS).any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|l| {
            l.as_os_str()
                .as_encoded_bytes()
                .starts_with(b"anon_inode:bpf")
        })
    })
}

impl Peers {
    pub fn new(map: Option<BpfHashMap<MapData, u32, u8>>) -> Self {
        Self {
            map,
            ..Self::default()
        }
    }

    /// The nvprobes already running (before the first record).
    pub fn scan(&mut self, nv_procs: Option<&mut BpfHashMap<MapData, u32, u8>>) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        let mut nv = nv_procs;
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
            if named_nvprobe(&comm) && is_peer(pid) {
                self.add(pid, nv.as_deref_mut());
            }
        }
    }

    /// Whether a record of `tgid` (its thread named `comm`) is another
    /// nvprobe's, to be dropped.
    pub fn skip(
        &mut self,
        tgid: u32,
        comm: &[u8],
        nv_procs: Option<&mut BpfHashMap<MapData, u32, u8>>,
    ) -> bool {
        if !self.peers.is_empty() && self.peers.contains_key(&tgid) {
            return true;
        }
        if !named_nvprobe(comm) {
            return false;
        }
        let now = Instant::now();
        if self
            .looked
            .get(&tgid)
            .is_some_and(|t| now.duration_since(*t) < RECHECK)
        {
            return false;
        }
        if is_peer(tgid) {
            self.looked.remove(&tgid);
            self.add(tgid, nv_procs);
            return self.peers.contains_key(&tgid);
        }
        if self.looked.len() >= 1024 {
            self.looked.clear();
        }
        self.looked.insert(tgid, now);
        false
    }

    fn add(&mut self, pid: u32, nv_procs: Option<&mut BpfHashMap<MapData, u32, u8>>) {
        let Some(start) = start_time(pid) else {
            return;
        };
        if self.peers.len() >= MAX_PEERS || self.peers.insert(pid, start).is_some() {
            return;
        }
        if let Some(m) = self.map.as_mut() {
            let _ = m.insert(pid, 1, 0);
        }
        if let Some(m) = nv_procs {
            let _ = m.remove(&pid);
        }
        self.found.push(pid);
    }

    /// Forget the peers that have ended (their exits are not reported):
    /// once a second at most, so that a later process on the same pid is
    /// traced again.
    pub fn refresh(&mut self) {
        if self.peers.is_empty()
            || self
                .refreshed
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.refreshed = Some(Instant::now());
        let gone: Vec<u32> = self
            .peers
            .iter()
            .filter(|(pid, start)| start_time(**pid) != Some(**start))
            .map(|(pid, _)| *pid)
            .collect();
        for pid in gone {
            self.peers.remove(&pid);
            if let Some(m) = self.map.as_mut() {
                let _ = m.remove(&pid);
            }
        }
    }
}

/// A process's start time (clock ticks since boot, /proc/PID/stat field
/// 22), read after the command name, which may hold spaces and parentheses.
fn start_time(pid: u32) -> Option<u64> {
    super::seen::start_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_not_its_own_peer_and_a_plain_one_is_none() {
        assert!(!is_peer(std::process::id()));
        // A child running another executable, holding no BPF object.
        let mut c = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        assert!(!is_peer(c.id()));
        let _ = c.kill();
        let _ = c.wait();
        assert!(start_time(std::process::id()).is_some());
        assert!(named_nvprobe(b"nvprobe-hooks\0\0\0"));
        assert!(!named_nvprobe(b"python3\0"));
    }
}
