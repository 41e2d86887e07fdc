//! User-space driver libraries: every libcuda and libnvidia-ml that the
//! dynamic loader can find, with the driver version read from the file's
//! contents (a NUL-terminated "580.159.04" in its read-only data), not
//! from its name. A snapshot lists them in `libs.manifest` instead
//! (`PATH VERSION SIZE` per line; `-` for no version found).

use std::{collections::BTreeMap, fs, os::fd::AsFd as _, path::Path};

use super::check::{Check, Verdict, check};
use crate::{decode::version::DriverVersion, safefs};

/// Where ld.so looks besides ld.so.conf: the multiarch and classic paths,
/// and the places NVIDIA's installers and container runtimes use.
const STD_DIRS: &[&str] = &[
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/wsl/lib",
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/lib64/stubs",
    "/usr/local/cuda/targets/x86_64-linux/lib/stubs",
];

const NAMES: [(&str, &str); 2] = [
    ("libcuda", "libcuda.so"),
    ("libnvidia-ml", "libnvidia-ml.so"),
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lib {
    /// As seen inside the root: "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04".
    pub path: String,
    /// "libcuda" or "libnvidia-ml".
    pub kind: &'static str,
    pub version: Option<String>,
    pub size: u64,
}

impl Lib {
    fn stub(&self) -> bool {
        self.path.contains("/stubs/")
    }
}

/// The directories of ROOT/etc/ld.so.conf (with its `include` globs of the
/// form DIR/*.conf), in order.
fn ld_conf_dirs(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut files = vec!["etc/ld.so.conf".to_owned()];
    let mut seen = 0;
    while let Some(f) = files.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        let Some(text) = safefs::read_text(root, &f, safefs::CAP) else {
            continue;
        };
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some(pat) = line.strip_prefix("include") {
                let pat = pat.trim();
                let (dir, suffix) = match pat.rsplit_once("/*") {
                    Some((d, s)) => (d.to_owned(), s.to_owned()),
                    None => {
                        files.push(pat.trim_start_matches('/').to_owned());
                        continue;
                    }
                };
                let dir = dir.trim_start_matches('/');
                let Some(rd) = safefs::read_dir_noted(root, dir) else {
                    continue;
                };
                let mut names: Vec<String> = rd
                    .into_iter()
                    .map(|n| format!("{dir}/{n}"))
                    .filter(|p| p.ends_with(&suffix))
                    .collect();
                names.sort();
                names.reverse();
                files.extend(names);
            } else if line.starts_with('/') {
                out.push(line.to_owned());
            }
        }
    }
    out
}

/// The loader's search order for this root: LD_LIBRARY_PATH (live only),
/// ld.so.conf, then the standard paths.
pub fn search_dirs(root: &Path, live: bool) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    if live && let Ok(p) = std::env::var("LD_LIBRARY_PATH") {
        dirs.extend(
            p.split(':')
                .filter(|d| d.starts_with('/'))
                .map(str::to_owned),
        );
    }
    dirs.extend(ld_conf_dirs(root));
    dirs.extend(STD_DIRS.iter().map(|d| (*d).to_owned()));
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// A driver version as a whole NUL-terminated string: "580.159.04",
/// "570.86.16", "535.104.05" (3 digits, then one or two dot-separated
/// numbers).
fn is_version(s: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(s) else {
        return false;
    };
    let parts: Vec<&str> = s.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts[0].len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The driver version a library carries, from its contents. Standalone
/// version strings ("580.159.04\0") are the candidates; libcuda carries
/// several (bundled components have their own), so the names of its
/// companion libraries decide: "libnvidia-gpucomp.so.580.159.04",
/// "nvidia-application-profiles-580.159.04-rc" are always of the driver's
/// own version. Real libcuda 580.159.04 (H200 machine): "580.65.05" is its
/// most frequent standalone version string, "580.159.04" appears once
/// standalone and in every companion name.
pub fn version_of(path: &Path) -> Option<String> {
    version_of_file(fs::File::open(path).ok()?)
}

/// [`version_of`] for a file already open (read from its start, wherever
/// its offset was).
pub(crate) fn version_of_file(mut f: fs::File) -> Option<String> {
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(0)).ok()?;
    let data = safefs::read_to_cap(f, safefs::LIB_CAP).ok()?;
    version_in(&data)
}

/// Whether the file carries `version` as a whole string ("\0580.159.04\0"),
/// read from its end in 4 MiB chunks: libcuda keeps its version near the
/// end (92.5 of 96 MB in 580.159.04), so a match costs one or two chunks,
/// not the whole file. None when the file cannot be read.
pub fn carries(path: &Path, version: &str) -> Option<bool> {
    carries_in(&mut fs::File::open(path).ok()?, version)
}

/// The version a library's file name gives (`libcuda.so.550.163.01`).
pub fn name_version(name: &str) -> Option<&str> {
    let v = name.rsplit_once(".so.")?.1;
    is_version(v.as_bytes()).then_some(v)
}

/// The version of a library that its name gives and its contents mention
/// anywhere: libcuda 550.163.01 (Debian's) has it only in a sentence
/// ("Version 550.163.01."), never as a whole string. None when the name
/// gives none or the file does not mention it; the name alone when the
/// file cannot be read (a process that is already gone).
pub fn named_version(path: &Path, name: &str) -> Option<String> {
    let v = name_version(name)?;
    let seen = fs::File::open(path)
        .ok()
        .and_then(|mut f| find_from_end(&mut f, v.as_bytes()));
    (seen != Some(false)).then(|| v.to_owned())
}

/// [`carries`] of an open file.
pub(crate) fn carries_in(f: &mut fs::File, version: &str) -> Option<bool> {
    find_from_end(f, format!("\0{version}\0").as_bytes())
}

/// Whether the file holds `pat`, read from its end in chunks.
fn find_from_end(f: &mut fs::File, pat: &[u8]) -> Option<bool> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let len = f.metadata().ok()?.len();
    const CHUNK: u64 = 4 << 20;
    let mut end = len;
    let mut buf = Vec::new();
    while end > 0 {
        // Overlap by the pattern's length so a match across chunks counts.
        let start = end.saturating_sub(CHUNK);
        let want = (end - start) as usize + if end < len { pat.len() } else { 0 };
        f.seek(SeekFrom::Start(start)).ok()?;
        buf.resize(want.min((len - start) as usize), 0);
        f.read_exact(&mut buf).ok()?;
        if memchr::memmem::rfind(&buf, pat).is_some() {
            return Some(true);
        }
        end = start;
    }
    Some(false)
}

fn version_in(data: &[u8]) -> Option<String> {
    let mut counts: BTreeMap<&[u8], usize> = BTreeMap::new();
    for s in data.split(|&b| b == 0) {
        if (4..=10).contains(&s.len()) && s[0].is_ascii_digit() && is_version(s) {
            *counts.entry(s).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|(v, n)| {
            let companions: usize = [b".so.".as_slice(), b"-"]
                .iter()
                .map(|pre| {
                    let mut pat = pre.to_vec();
                    pat.extend_from_slice(v);
                    memchr::memmem::find_iter(data, &pat).count()
                })
                .sum();
            (companions, n, v)
        })
        .max()
        .map(|(_, _, v)| String::from_utf8_lossy(v).into_owned())
}

/// Every libcuda / libnvidia-ml file under the search dirs, once per real
/// file (symlinks resolved), in search order.
pub fn find(root: &Path, live: bool) -> Vec<Lib> {
    find_for(root, live, None)
}

/// Like [`find`]; a library that carries `expected` (the kernel module's
/// version) as a whole string is taken to be that version without reading
/// all of it.
pub fn find_for(root: &Path, live: bool, expected: Option<&str>) -> Vec<Lib> {
    if let Some(text) = safefs::read_text(root, "libs.manifest", safefs::CAP) {
        return text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let [path, version, size] = f[..] else {
                    return None;
                };
                let name = Path::new(path).file_name()?.to_str()?;
                let kind = NAMES.iter().find(|(_, n)| name.starts_with(n))?.0;
                Some(Lib {
                    path: path.to_owned(),
                    kind,
                    version: (version != "-").then(|| version.to_owned()),
                    size: size.parse().unwrap_or(0),
                })
            })
            .collect();
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for dir in search_dirs(root, live) {
        let dir = dir.trim_start_matches('/');
        let Some(mut entries) = safefs::read_dir_noted(root, dir) else {
            continue;
        };
        entries.sort();
        for name in entries {
            let Some((kind, _)) = NAMES.iter().find(|(_, n)| name.starts_with(n)) else {
                continue;
            };
            // Resolved inside the root: a link out of a tree is not read.
            let rel = format!("{dir}/{name}");
            let mut f = match safefs::open_regular(root, &rel) {
                Ok(f) => f,
                Err(e) => {
                    safefs::note(root, &rel, &e);
                    continue;
                }
            };
            let Ok(meta) = f.metadata() else {
                continue;
            };
            if !seen.insert((
                std::os::unix::fs::MetadataExt::dev(&meta),
                std::os::unix::fs::MetadataExt::ino(&meta),
            )) {
                continue;
            }
            let shown = safefs::shown_path(root, f.as_fd()).unwrap_or_else(|| format!("/{rel}"));
            let by_name = name_version(&name).map(str::to_owned);
            let version = match expected {
                Some(v) if carries_in(&mut f, v) == Some(true) => Some(v.to_owned()),
                _ if by_name
                    .as_ref()
                    .is_some_and(|v| find_from_end(&mut f, v.as_bytes()) == Some(true)) =>
                {
                    by_name
                }
                _ => {
                    use std::io::Seek as _;
                    let _ = f.rewind();
                    match safefs::read_to_cap(&mut f, safefs::LIB_CAP) {
                        Ok(d) => version_in(&d),
                        Err(e) => {
                            safefs::note(root, &rel, &e);
                            None
                        }
                    }
                }
            };
            out.push(Lib {
                path: shown,
                kind,
                version,
                size: meta.len(),
            });
        }
    }
    out
}

pub fn checks(root: &Path, live: bool, module: Option<&DriverVersion>, out: &mut Vec<Check>) {
    checks_of(find(root, live), module, out);
}

/// The verdicts for libraries already found (doctor finds them on a
/// thread of their own: reading a 96 MB libcuda takes a while).
pub fn checks_of(libs: Vec<Lib>, module: Option<&DriverVersion>, out: &mut Vec<Check>) {
    let module = module.map(ToString::to_string);
    for (kind, _) in NAMES {
        let mine: Vec<&Lib> = libs.iter().filter(|l| l.kind == kind).collect();
        if mine.is_empty() {
            out.push(check(
                "libraries",
                kind,
                if kind == "libcuda" { Verdict::Fail } else { Verdict::Warn },
                format!("no {kind}.so* in the loader's search path (ld.so.conf and the standard directories)"),
                Some(if kind == "libcuda" {
                    "install the driver's user-space part (same version as the kernel module); in a container, the NVIDIA container toolkit mounts it"
                } else {
                    "nvidia-smi and NVML users need it; it comes with the driver's user-space part"
                }),
            ));
            continue;
        }
        // The first real library in search order is the one ld.so loads.
        let first = mine.iter().position(|l| !l.stub());
        for (i, l) in mine.iter().enumerate() {
            let v = l.version.as_deref();
            let ev = format!(
                "{} ({}, {} bytes){}",
                l.path,
                v.map_or_else(
                    || "no version string found".to_owned(),
                    |v| format!("version {v}")
                ),
                l.size,
                if Some(i) == first {
                    ", loaded first"
                } else {
                    ""
                }
            );
            out.push(if l.stub() {
                check(
                    "libraries",
                    kind,
                    if first.is_none() { Verdict::Fail } else { Verdict::Ok },
                    format!("{ev}: the CUDA toolkit's link-time stub"),
                    (first.is_none()).then_some(
                        "only the stub is found: cuInit returns CUDA_ERROR_STUB_LIBRARY (34). Do not put the stubs directory in LD_LIBRARY_PATH or ld.so.conf; install the driver's libcuda",
                    ),
                )
            } else {
                match (v, module.as_deref()) {
                    (Some(v), Some(m)) if v != m => check(
                        "libraries",
                        kind,
                        if kind == "libcuda" && Some(i) == first { Verdict::Fail } else { Verdict::Warn },
                        format!("{ev}, but the kernel module is {m}"),
                        Some(if kind == "libcuda" {
                            "library and kernel module differ: cuInit fails with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803) or NOT_INITIALIZED; install the user-space driver of the module's version (or reboot after a driver upgrade so the new module loads), and remove stale copies"
                        } else {
                            "nvidia-smi and NVML fail with \"Driver/library version mismatch\": install the matching user-space driver, or reboot after an upgrade"
                        }),
                    ),
                    (None, _) => check(
                        "libraries",
                        kind,
                        Verdict::Warn,
                        ev,
                        Some("no driver version string in the file: it may be damaged or not NVIDIA's"),
                    ),
                    _ => check("libraries", kind, Verdict::Ok, ev, None),
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_finds_a_version_across_chunks() {
        let dir = std::env::temp_dir().join(format!("nvprobe-carries-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("mkdir");
        let p = dir.join("libcuda.so.1");
        // The string straddles the 4 MiB chunk boundary from the end.
        let mut d = vec![b'x'; 9 << 20];
        let at = d.len() - (4 << 20) - 5;
        d[at..at + 12].copy_from_slice(b"\x00580.159.04\x00");
        fs::write(&p, &d).expect("write");
        assert_eq!(carries(&p, "580.159.04"), Some(true));
        assert_eq!(carries(&p, "575.57.08"), Some(false));
        assert_eq!(carries(&dir.join("missing"), "580.159.04"), None);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Debian's libcuda 550.163.01 says its version only in a sentence;
    /// older versions' strings are the standalone ones. Its name decides,
    /// when the contents mention it.
    #[test]
    fn a_version_only_named_and_mentioned_is_taken_from_the_name() {
        let dir = std::env::temp_dir().join(format!("nvprobe-named-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("mkdir");
        let p = dir.join("libcuda.so.550.163.01");
        let mut d = b"\x00550.90.06\x00\x00535.54.02\x00".to_vec();
        d.extend_from_slice(b"NVIDIA driver running.\nVersion 550.163.01. Copyright");
        fs::write(&p, &d).expect("write");
        assert_eq!(
            named_version(&p, "libcuda.so.550.163.01").as_deref(),
            Some("550.163.01")
        );
        // A name the contents contradict is not believed.
        let q = dir.join("libcuda.so.570.1.2");
        fs::write(&q, &d).expect("write");
        assert_eq!(named_version(&q, "libcuda.so.570.1.2"), None);
        // Gone: the name is all there is.
        assert_eq!(
            named_version(&dir.join("gone"), "libcuda.so.550.163.01").as_deref(),
            Some("550.163.01")
        );
        assert_eq!(name_version("libcuda.so.1"), None);
        let _ = fs::remove_dir_all(&dir);
    }

    /// The shape of the real libcuda 580.159.04: a bundled component's
    /// version is the most frequent standalone string; the companion
    /// library names carry the driver's.
    #[test]
    fn companion_names_decide_between_version_strings() {
        let mut d = Vec::new();
        for _ in 0..3 {
            d.extend_from_slice(b"\x00580.65.05\x00");
        }
        d.extend_from_slice(b"\0MIG %uc.%ug.%llugb\x00580.159.04\0C_GetFunctionList\0");
        d.extend_from_slice(b"\0libnvidia-gpucomp.so.580.159.04\0");
        d.extend_from_slice(b"/usr/share/nvidia/nvidia-application-profiles-580.159.04-rc\0");
        assert_eq!(version_in(&d).as_deref(), Some("580.159.04"));
        // NVML: "13.580.159.04" is not a driver version; the bare one is.
        assert_eq!(
            version_in(b"\x0013.580.159.04\0x\x00580.159.04\0").as_deref(),
            Some("580.159.04")
        );
        assert_eq!(version_in(b"\0no version here\0"), None);
    }

    #[test]
    fn version_strings_are_whole_strings() {
        for v in ["580.159.04", "570.86.16", "535.104.05", "470.82"] {
            assert!(is_version(v.as_bytes()), "{v}");
        }
        for v in [
            "13.580.159.04",
            "5.80.1",
            "580.",
            "580..1",
            "580.1234.1",
            "abc.de.fg",
            "1.2.3",
        ] {
            assert!(!is_version(v.as_bytes()), "{v}");
        }
    }
}
