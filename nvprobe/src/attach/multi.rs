//! The libcuda programs, loaded by nvprobe itself rather than by aya: a
//! uprobe_multi link needs a program loaded with that expected attach type,
//! which aya 0.14 cannot ask for, and the hooks are attached from a thread
//! of their own that must not need aya's `Ebpf`. The instructions are the
//! embedded object's own, relocated against the maps aya created (so these
//! programs share every map, the ring buffer included).

use std::{
    collections::{HashMap, HashSet},
    ffi::CString,
    os::fd::{AsFd, AsRawFd, OwnedFd},
};

use aya::{Ebpf, maps::Map};
use aya_obj::generated::bpf_insn;

/// The kernel descriptor of a map aya created, whatever its kind.
pub(super) fn map_fd(m: &Map) -> i32 {
    let (Map::Array(d)
    | Map::ArrayOfMaps(d)
    | Map::BloomFilter(d)
    | Map::CgroupArray(d)
    | Map::CgroupStorage(d)
    | Map::CgrpStorage(d)
    | Map::CpuMap(d)
    | Map::DevMap(d)
    | Map::DevMapHash(d)
    | Map::HashMap(d)
    | Map::HashOfMaps(d)
    | Map::InodeStorage(d)
    | Map::LpmTrie(d)
    | Map::LruHashMap(d)
    | Map::PerCpuArray(d)
    | Map::PerCpuCgroupStorage(d)
    | Map::PerCpuHashMap(d)
    | Map::PerCpuLruHashMap(d)
    | Map::PerfEventArray(d)
    | Map::ProgramArray(d)
    | Map::Queue(d)
    | Map::ReusePortSockArray(d)
    | Map::RingBuf(d)
    | Map::SockHash(d)
    | Map::SockMap(d)
    | Map::SkStorage(d)
    | Map::Stack(d)
    | Map::StackTraceMap(d)
    | Map::Unsupported(d)
    | Map::XskMap(d)) = m;
    d.fd().as_fd().as_raw_fd()
}

/// Relocated programs, ready to load (as often as needed).
pub struct Code {
    progs: HashMap<String, (Vec<bpf_insn>, CString)>,
    /// Copies of the maps' descriptors the instructions name (the
    /// programs may be loaded later, after aya's own map handles have been
    /// taken or dropped: these numbers stay valid). The programs need no
    /// CO-RE relocation and no helper sanitising: nvprobe's BPF is Rust
    /// without CO-RE, and uprobe_multi kernels (6.6+) have every helper.
    _maps: Vec<OwnedFd>,
}

impl Code {
    /// `names` from `object`, relocated against `ebpf`'s maps. Must run
    /// before any map is taken out of `ebpf`.
    pub fn relocate(ebpf: &Ebpf, object: &[u8], names: &[&str]) -> Result<Code, String> {
        let mut obj =
            aya_obj::Object::parse(object).map_err(|e| format!("parsing the object: {e}"))?;
        let defs = std::mem::take(&mut obj.maps);
        let mut maps = Vec::new();
        let mut held = Vec::new();
        for (name, m) in ebpf.maps() {
            let Some(def) = defs.get(name) else { continue };
            // SAFETY: aya's map descriptor, open while `ebpf` is borrowed.
            let dup = unsafe { std::os::fd::BorrowedFd::borrow_raw(map_fd(m)) }
                .try_clone_to_owned()
                .map_err(|e| format!("map {name}: {e}"))?;
            maps.push((name.to_owned(), dup.as_raw_fd(), def));
            held.push(dup);
        }
        let text: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
        obj.relocate_maps(maps.iter().map(|(n, fd, d)| (n.as_str(), *fd, *d)), &text)
            .map_err(|e| format!("relocating maps: {e}"))?;
        obj.relocate_calls(&text)
            .map_err(|e| format!("relocating calls: {e}"))?;
        let mut progs = HashMap::new();
        for name in names {
            let prog = obj
                .programs
                .get(*name)
                .ok_or_else(|| format!("program {name} missing from the object"))?;
            let f = obj
                .functions
                .get(&prog.function_key())
                .ok_or_else(|| format!("program {name} has no code"))?;
            progs.insert(
                (*name).to_owned(),
                (f.instructions.clone(), prog.license.clone()),
            );
        }
        Ok(Code { progs, _maps: held })
    }

    /// Load `name` for uprobe_multi links (`multi`) or for perf events.
    pub fn load(&self, name: &str, multi: bool) -> Result<OwnedFd, String> {
        let (insns, license) = self
            .progs
            .get(name)
            .ok_or_else(|| format!("program {name} was not relocated"))?;
        let r = if multi {
            super::sys::load_uprobe_multi_program(name, insns, license)
        } else {
            super::sys::load_uprobe_program(name, insns, license)
        };
        r.map_err(|e| {
            format!(
                "loading {name}{}: {e}",
                if multi { " for uprobe_multi" } else { "" }
            )
        })
    }
}
