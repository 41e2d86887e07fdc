//! Which files to hook: the libcuda copies on this host (`ldconfig -p`,
//! the standard folders, the toolkits' stub folders), those running
//! processes have mapped, and the libraries a process preloads that may
//! answer the CUDA driver API in libcuda's place.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

const STD_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/cuda/compat",
    "/usr/lib/wsl/lib",
];

/// A library nvprobe hooks, by its name: a libcuda, or a libnccl (whose
/// collectives it numbers).
pub(super) fn is_libcuda(name: &str) -> bool {
    Path::new(name)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("libcuda.so") || n.starts_with("libnccl.so"))
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

/// The libraries `pid` preloads (its `LD_PRELOAD`, its root's
/// /etc/ld.so.preload) and has mapped, other than libcuda copies: each
/// may export the CUDA driver API in libcuda's place. Through the
/// process's root.
pub fn preloads_of(pid: u32) -> Vec<PathBuf> {
    let base = PathBuf::from(format!("/proc/{pid}"));
    let mut names: Vec<String> = Vec::new();
    let mut env = Vec::new();
    if std::fs::File::open(base.join("environ"))
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 256 << 10), &mut env))
        .is_ok()
    {
        for kv in env.split(|&b| b == 0) {
            if let Some(v) = kv.strip_prefix(b"LD_PRELOAD=") {
                names.extend(
                    String::from_utf8_lossy(v)
                        .split([' ', ':'])
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned),
                );
            }
        }
    }
    if let Ok(b) = crate::safefs::read_capped(&base.join("root"), "etc/ld.so.preload", 64 << 10) {
        names.extend(crate::libcheck::preload_names(&b));
    }
    if names.is_empty() {
        return Vec::new();
    }
    let Ok(maps) = procfs::process::Process::new(pid as i32).and_then(|p| p.maps()) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for m in maps {
        let procfs::process::MMapPath::Path(p) = m.pathname else {
            continue;
        };
        let Some(text) = p.to_str() else { continue };
        let base_name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let named = names
            .iter()
            .any(|n| n == text || (!n.contains('/') && n == base_name));
        let full = PathBuf::from(format!("/proc/{pid}/root{text}"));
        if named && !is_libcuda(text) && !out.contains(&full) {
            out.push(full);
        }
        if out.len() >= 8 {
            break;
        }
    }
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
