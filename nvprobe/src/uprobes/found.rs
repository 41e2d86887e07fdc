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
    // Distinct names, at most 64 of each list, looked up by path and by
    // file name: each of the process's mappings costs one lookup, whatever
    // the lists hold.
    let mut names: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut env = Vec::new();
    if std::fs::File::open(base.join("environ"))
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 256 << 10), &mut env))
        .is_ok()
    {
        for kv in env.split(|&b| b == 0) {
            if let Some(v) = kv.strip_prefix(b"LD_PRELOAD=") {
                // (The loader splits LD_PRELOAD on spaces and colons.)
                names.extend(
                    String::from_utf8_lossy(v)
                        .split([' ', ':'])
                        .filter(|n| !n.is_empty())
                        .take(crate::libcheck::PRELOADS_KEPT)
                        .map(str::to_owned),
                );
            }
        }
    }
    if let Ok(b) = crate::safefs::read_seen_in(
        &base.join("root"),
        "etc/ld.so.preload",
        crate::libcheck::PRELOAD_CAP,
    ) {
        names.extend(crate::libcheck::preload_names(&b));
    }
    if names.is_empty() {
        return Vec::new();
    }
    let Ok(f) = std::fs::File::open(base.join("maps")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = Vec::new();
    // /proc/PID/maps, a line at a time (a process may have 65,530
    // mappings with 4 KiB paths: not read whole).
    for line in std::io::BufRead::split(std::io::BufReader::new(f), b'\n')
        .take(MAPS_READ)
        .map_while(Result::ok)
    {
        let Some(text) = map_path(&line) else {
            continue;
        };
        let base_name = text.rsplit('/').next().unwrap_or_default();
        let named = names.contains(text) || names.contains(base_name);
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

/// Mappings of a process read at most for its preloads.
const MAPS_READ: usize = 65_536;

/// The file a /proc/PID/maps line maps ("addr perms offset dev inode
/// /path"): the sixth field, which holds spaces of its own; none for an
/// anonymous or special mapping, a deleted file or a name not UTF-8.
fn map_path(line: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(line).ok()?;
    let mut rest = text;
    for _ in 0..5 {
        rest = rest.trim_start_matches(' ');
        rest = rest.split_once(' ')?.1;
    }
    let path = rest.trim_start_matches(' ');
    (path.starts_with('/') && !path.ends_with(" (deleted)")).then_some(path)
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

#[cfg(test)]
mod tests {
    /// A maps line's file: after the five fields, spaces kept; none for
    /// anonymous, special or deleted mappings.
    #[test]
    fn a_maps_line_names_its_file() {
        fn p(l: &str) -> Option<&str> {
            super::map_path(l.as_bytes())
        }
        assert_eq!(
            p("7f00-7f10 r-xp 00000000 08:01 1234                       /usr/lib/a b.so"),
            Some("/usr/lib/a b.so")
        );
        assert_eq!(p("7f00-7f10 rw-p 00000000 00:00 0 "), None);
        assert_eq!(
            p("7fff-8000 rw-p 00000000 00:00 0                          [stack]"),
            None
        );
        assert_eq!(
            p("7f00-7f10 r-xp 00000000 08:01 1234 /tmp/x.so (deleted)"),
            None
        );
        assert_eq!(p("garbage"), None);
    }
}
