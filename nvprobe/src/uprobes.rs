//! libcuda uprobes: find the copies of libcuda that are actually used and
//! attach once per distinct file (by device and inode), whatever path or
//! container it is reached through.
//!
//! Where copies are found: `ldconfig -p`, the standard library directories,
//! the maps of every running process at start, and the maps of each process
//! first seen making NVIDIA calls (containers and conda carry their own
//! copies). A copy first found that late may be attached after that
//! process's cuInit began: its verdict then rests on the driver calls.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
};

use aya::{
    Ebpf,
    programs::{
        UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
use nix::sys::stat::stat;
use nvprobe_common::CUDA_FUNCS;
use serde::Serialize;

const ENTER: &str = "nvprobe_cuda_enter";
const RETURN: &str = "nvprobe_cuda_return";
/// The eBPF programs this module attaches.
pub const PROGRAMS: [&str; 2] = [ENTER, RETURN];

const STD_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/cuda/compat",
    "/usr/lib/wsl/lib",
];

#[derive(Clone, Debug, Serialize)]
pub struct Attached {
    pub path: String,
    /// Functions found and hooked.
    pub functions: Vec<&'static str>,
}

#[derive(Default)]
pub struct Libcuda {
    loaded: bool,
    /// (st_dev, st_ino) -> what was attached there.
    files: HashMap<(u64, u64), Attached>,
}

fn is_libcuda(name: &str) -> bool {
    Path::new(name)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("libcuda.so"))
}

/// `ldconfig -p` and the standard directories.
pub fn static_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(o) = Command::new("ldconfig").arg("-p").output() {
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            if let Some((_, path)) = line.split_once("=> ")
                && is_libcuda(path.trim())
            {
                out.push(PathBuf::from(path.trim()));
            }
        }
    }
    let mut dirs: Vec<PathBuf> = STD_DIRS.iter().map(PathBuf::from).collect();
    dirs.extend(toolkit_stub_dirs());
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                if e.file_name().to_str().is_some_and(is_libcuda) {
                    out.push(e.path());
                }
            }
        }
    }
    out
}

/// The CUDA toolkits' link-time stub folders (/usr/local/cuda*/lib64/stubs,
/// …/targets/*/lib/stubs): a process that loads the stub by mistake calls
/// cuInit there, and its CUDA_ERROR_STUB_LIBRARY is seen only if the stub
/// is hooked too.
fn toolkit_stub_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/usr/local") else {
        return out;
    };
    for e in rd.flatten() {
        if !e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("cuda"))
        {
            continue;
        }
        let root = e.path();
        out.push(root.join("lib64/stubs"));
        if let Ok(targets) = std::fs::read_dir(root.join("targets")) {
            out.extend(targets.flatten().map(|t| t.path().join("lib/stubs")));
        }
    }
    out
}

/// libcuda files mapped by `pid`, reached through its root (containers).
pub fn mapped_by(pid: u32) -> Vec<PathBuf> {
    let Ok(p) = procfs::process::Process::new(pid as i32) else {
        return Vec::new();
    };
    let Ok(maps) = p.maps() else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = maps
        .into_iter()
        .filter_map(|m| match m.pathname {
            procfs::process::MMapPath::Path(p) if p.to_str().is_some_and(is_libcuda) => Some(p),
            _ => None,
        })
        .map(|p| PathBuf::from(format!("/proc/{pid}/root{}", p.display())))
        .collect();
    out.dedup();
    out
}

/// Every running process's libcuda.
pub fn mapped_by_all() -> Vec<PathBuf> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in all.flatten() {
        out.extend(mapped_by(p.pid as u32));
    }
    out
}

impl Libcuda {
    /// The files hooked so far, for the start record.
    pub fn attached(&self) -> Vec<nvprobe_model::records::LibcudaHooked> {
        let mut v: Vec<_> = self
            .files
            .values()
            .map(|a| nvprobe_model::records::LibcudaHooked {
                path: a.path.clone(),
                functions: a.functions.iter().map(|f| (*f).to_owned()).collect(),
            })
            .collect();
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    }

    /// Attach to `path` unless that file is hooked already. Ok(Some) when a
    /// new file was hooked.
    pub fn attach(&mut self, ebpf: &mut Ebpf, path: &Path) -> Result<Option<Attached>, String> {
        let Ok(st) = stat(path) else { return Ok(None) };
        let id = (st.st_dev, st.st_ino);
        if self.files.contains_key(&id) {
            return Ok(None);
        }
        if !self.loaded {
            for prog in [ENTER, RETURN] {
                let p: &mut UProbe = ebpf
                    .program_mut(prog)
                    .ok_or_else(|| format!("program {prog} missing from the object"))?
                    .try_into()
                    .map_err(|e| format!("{prog}: {e}"))?;
                p.load().map_err(|e| format!("loading {prog}: {e:#}"))?;
            }
            self.loaded = true;
        }
        let mut functions = Vec::new();
        let mut last_err = None;
        for &(cookie, name) in CUDA_FUNCS {
            let mut ok = true;
            for prog in [ENTER, RETURN] {
                let p: &mut UProbe = ebpf
                    .program_mut(prog)
                    .ok_or_else(|| format!("program {prog} missing"))?
                    .try_into()
                    .map_err(|e| format!("{prog}: {e}"))?;
                let point = UProbeAttachPoint {
                    location: UProbeAttachLocation::Symbol(name),
                    cookie: Some(u64::from(cookie)),
                };
                if let Err(e) = p.attach(point, path, UProbeScope::AllProcesses) {
                    ok = false;
                    last_err = Some(format!("{name}: {e:#}"));
                    break;
                }
            }
            if ok {
                functions.push(name);
            }
        }
        if !functions.contains(&"cuInit") {
            // Remember it anyway: no point trying this file again.
            self.files.insert(
                id,
                Attached {
                    path: path.display().to_string(),
                    functions: Vec::new(),
                },
            );
            return Err(format!(
                "{}: cuInit could not be hooked ({})",
                path.display(),
                last_err.unwrap_or_else(|| "symbol not found".into())
            ));
        }
        let a = Attached {
            path: path.display().to_string(),
            functions,
        };
        self.files.insert(id, a.clone());
        Ok(Some(a))
    }
}
