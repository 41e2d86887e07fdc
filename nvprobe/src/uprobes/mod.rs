//! libcuda uprobes: find the copies of libcuda that are actually used and
//! attach once per distinct file (by device and inode), whatever path or
//! container it is reached through.
//!
//! Where copies are found: `ldconfig -p`, the standard library directories,
//! the maps of every running process at start, and the maps of each process
//! first seen making NVIDIA calls (containers and conda carry their own
//! copies). A copy first found that late may be attached after that
//! process's cuInit began: its verdict then rests on the driver calls.

use std::{collections::HashMap, path::Path};

use aya::Ebpf;
use nvprobe_common::cuda_func_number;
use serde::Serialize;
use std::{
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
    sync::Arc,
};

use crate::attach::keep::Keep;

pub mod attacher;
mod elf;
mod found;
mod removal;
mod sets;
mod share;
mod split;

pub use elf::exports;
pub use found::{mapped_by, mapped_by_all, preloads_of, static_candidates};
pub use sets::{FAULTS, LAUNCHES, STARTUP};
use split::{Point, Split, multi_supported};

pub use removal::remove_in_background;

/// Files remembered as not hookable (not a library, no cuInit).
const UNHOOKED_KEPT: usize = 4096;

pub use crate::attach::table::CUDA_PROGRAMS as PROGRAMS;

/// Which libcuda functions are hooked (`--libcuda-hooks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Hooks {
    /// The calls a program makes while it starts CUDA ([`STARTUP`]): cheap,
    /// none of them on a kernel launch or copy path.
    // `--help` shows this text, not the doc comment (whose link is rustdoc's).
    #[value(
        help = "The calls a program makes while it starts CUDA (58 functions): cheap, none of them on a kernel launch or copy path"
    )]
    Startup,
    /// The start-up set, and the calls where a fault at run time surfaces
    /// ([`FAULTS`]: synchronisations, copies, memsets, frees), whose
    /// failures alone are sent.
    #[value(
        help = "The start-up set, and where run-time faults surface (synchronisations, copies, memsets, frees: 40 functions), whose failures alone are sent: a program that makes none of these calls pays nothing for them, one that does pays about 0.9 µs per call (a synchronisation on the H200, docs/BENCHMARKS.md)"
    )]
    #[default]
    Faults,
    /// The faults set, and the kernel launches ([`LAUNCHES`]), whose
    /// failures alone are sent: a launch the driver refuses at once.
    #[value(
        help = "The faults set, and the kernel launches (9 functions), whose failures alone are sent: a launch the driver refuses at once (its configuration) is named; each launch then pays a uprobe round trip (docs/BENCHMARKS.md)"
    )]
    Launches,
    /// Every CUDA driver API function the libcuda exports (launches and
    /// copies too): every CUDA call costs a uprobe round trip.
    All,
}

impl Hooks {
    pub fn name(self) -> &'static str {
        match self {
            Hooks::Startup => "startup",
            Hooks::Faults => "faults",
            Hooks::Launches => "launches",
            Hooks::All => "all",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Attached {
    pub path: String,
    /// Not libcuda: a library that exports the CUDA driver API in its
    /// place (an LD_PRELOAD interposer); its cookies carry
    /// `CUDA_INTERPOSER`.
    pub interposer: bool,
    /// Functions found and hooked.
    pub functions: Vec<&'static str>,
    /// Exported `cu*` functions this build has no number for (a newer
    /// libcuda): not hooked (`--libcuda-hooks all` only).
    pub unknown: Vec<String>,
    /// "uprobe_multi", or "perf_event (why not uprobe_multi)".
    pub via: String,
    /// A libnccl: its communicators' calls are numbered (issue 39).
    pub nccl: bool,
    /// The file's owner: its share of the slots (`share`).
    #[serde(skip)]
    pub owner: u32,
}

/// The two programs, loaded for one way of attaching, or why not.
type Progs = Option<Result<[OwnedFd; 2], String>>;

/// The libcuda layer: nvprobe's own copies of the two programs (see
/// `attach::multi`), every hooked file, and the links until they are
/// pinned (or, without a private bpffs, until the end).
pub struct Libcuda {
    hooks: Hooks,
    code: Option<crate::attach::multi::Code>,
    /// Loaded for uprobe_multi on first use; Err once the kernel refused.
    multi: Progs,
    /// Loaded for perf-event uprobes when a file needs them.
    perf: Progs,
    /// Where links go once made; None: they stay in `links`.
    keep: Option<Arc<Keep>>,
    /// Links not pinned, for the removal child.
    links: Vec<OwnedFd>,
    /// Why uprobe_multi cannot be used on this kernel, once it said so.
    multi_refused: Option<String>,
    /// Set at the stop (by the hooking thread's owner): no new attach
    /// system call begins.
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// (st_dev, st_ino) -> what was attached there.
    files: HashMap<(u64, u64), Attached>,
    /// No return probes (the uretprobe system call's window,
    /// `uretprobe_gate`): libcuda is not hooked, a libnccl only at its
    /// collectives' entries.
    entries_only: bool,
}

impl Libcuda {
    /// Before any map is taken out of `ebpf`: the programs' code,
    /// relocated against its maps. Without it no libcuda can be hooked.
    pub fn new(hooks: Hooks, ebpf: &Ebpf, keep: Option<Arc<Keep>>) -> Result<Libcuda, String> {
        let code = crate::attach::multi::Code::relocate(
            ebpf,
            crate::attach::table::EBPF_OBJECT,
            &PROGRAMS,
        )?;
        let mut l = Libcuda {
            hooks,
            code: Some(code),
            multi: None,
            perf: None,
            keep,
            links: Vec::new(),
            multi_refused: None,
            stop: Arc::default(),
            files: HashMap::new(),
            entries_only: false,
        };
        // uprobe_multi's programs now (a refusal is said at once, and their
        // ids are known for --bpf-stats); the perf-event ones only where
        // uprobe_multi is refused (each load costs the verifier's time).
        if let Err(e) = l.progs(true).and_then(|[_, ret]| multi_supported(ret)) {
            l.multi_refused = Some(e);
            l.progs(false)?;
        }
        Ok(l)
    }

    /// (name, kernel program id) of the programs loaded so far, for
    /// --bpf-stats (perf-event programs loaded later for a file that
    /// uprobe_multi refused are not counted there).
    pub fn programs(&self) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        for (slot, how) in [(&self.multi, "uprobe_multi"), (&self.perf, "perf_event")] {
            let Some(Ok(fds)) = slot else { continue };
            for (fd, name) in fds.iter().zip(PROGRAMS) {
                let Ok(info) =
                    std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
                else {
                    continue;
                };
                if let Some(id) = info
                    .lines()
                    .find_map(|l| l.strip_prefix("prog_id:"))
                    .and_then(|v| v.trim().parse().ok())
                {
                    out.push((format!("{name} ({how})"), id));
                }
            }
        }
        out
    }

    /// A layer that hooks nothing (the libcuda layer is off).
    pub fn off(hooks: Hooks) -> Libcuda {
        Libcuda {
            hooks,
            code: None,
            multi: None,
            perf: None,
            keep: None,
            links: Vec::new(),
            multi_refused: None,
            stop: Arc::default(),
            files: HashMap::new(),
            entries_only: false,
        }
    }

    /// From now on no return probe is attached (`entries_only`).
    pub fn entries_only(&mut self) {
        self.entries_only = true;
    }

    /// The flag that stops further attaches (see `attacher`).
    pub fn stop_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.stop.clone()
    }

    /// A file not to try again: hooked with no function. It takes none of
    /// the [`share::MAX_COPIES`] slots (any user can open junk named
    /// `libcuda.so.1`), and at most [`UNHOOKED_KEPT`] are remembered (past
    /// that, such a file is looked at again when seen: its headers only).
    fn remember_unhooked(&mut self, id: (u64, u64), path: &Path) {
        if self.files.len() - self.hooked() >= UNHOOKED_KEPT {
            return;
        }
        self.files.insert(
            id,
            Attached {
                path: path.display().to_string(),
                interposer: false,
                functions: Vec::new(),
                unknown: Vec::new(),
                via: String::new(),
                nccl: false,
                owner: 0,
            },
        );
    }

    pub fn hooks(&self) -> Hooks {
        self.hooks
    }

    /// Files with functions hooked (the ones that take a slot).
    fn hooked(&self) -> usize {
        self.files
            .values()
            .filter(|a| !a.functions.is_empty())
            .count()
    }

    /// How the hooks are attached: "uprobe_multi", or "perf_event (why)";
    /// empty before the first file.
    pub fn via(&self) -> String {
        if let Some(why) = &self.multi_refused {
            return format!("perf_event ({why})");
        }
        let mut vias: Vec<&str> = self
            .files
            .values()
            .map(|a| a.via.as_str())
            .filter(|v| !v.is_empty())
            .collect();
        vias.sort_unstable();
        vias.dedup();
        match vias.as_slice() {
            [] => String::new(),
            [one] => (*one).to_owned(),
            _ => "uprobe_multi; perf_event for some files (see each file's `via`)".to_owned(),
        }
    }

    /// The links not pinned, for [`remove_in_background`].
    pub fn take_links(&mut self) -> Vec<OwnedFd> {
        std::mem::take(&mut self.links)
    }

    /// The files hooked so far, for the start record.
    pub fn attached(&self) -> Vec<nvprobe_model::records::LibcudaHooked> {
        let mut v: Vec<_> = self
            .files
            .values()
            .map(|a| nvprobe_model::records::LibcudaHooked {
                path: a.path.clone(),
                functions: a.functions.iter().map(|f| (*f).to_owned()).collect(),
                unknown: a.unknown.clone(),
                via: a.via.clone(),
            })
            .collect();
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    }

    /// The programs for one way of attaching, loaded on first use.
    fn progs(&mut self, multi: bool) -> Result<[BorrowedFd<'_>; 2], String> {
        let code = self
            .code
            .as_ref()
            .ok_or_else(|| "the libcuda layer is off".to_owned())?;
        let slot = if multi {
            &mut self.multi
        } else {
            &mut self.perf
        };
        let loaded = slot.get_or_insert_with(|| {
            Ok([
                code.load(PROGRAMS[0], multi)?,
                code.load(PROGRAMS[1], multi)?,
            ])
        });
        match &*loaded {
            Ok(fds) => Ok([fds[0].as_fd(), fds[1].as_fd()]),
            Err(e) => Err(e.clone()),
        }
    }

    /// A new link: pinned (the kernel removes it, whenever and however
    /// nvprobe ends) or kept for the removal child.
    fn hold(&mut self, link: OwnedFd) {
        if let Some(k) = &self.keep
            && k.pin(link.as_fd()).is_ok()
        {
            return;
        }
        self.links.push(link);
    }

    /// Attach to `path` unless that file is hooked already. Ok(Some) when a
    /// new file was hooked.
    pub fn attach(&mut self, path: &Path) -> Result<Option<Attached>, String> {
        self.attach_as(path, false)
    }

    /// [`Self::attach`], for libcuda itself or (`interposer`) another
    /// library that exports its API.
    pub fn attach_as(&mut self, path: &Path, interposer: bool) -> Result<Option<Attached>, String> {
        if self.code.is_none() {
            return Ok(None);
        }
        // Opened once and attached through /proc/self/fd: a path through
        // /proc/PID/root is gone when that process exits, which a short
        // process does while its hooks are being attached (seen on the
        // H200: every perf_event_open of a copy loaded by a 0.1 s process
        // failed).
        let Ok(file) = std::fs::File::open(path) else {
            return Ok(None);
        };
        self.attach_file(file, path, interposer)
    }

    /// [`Self::attach_as`] of a file already open (`path` names it in
    /// messages): one held since the process that maps it was read.
    pub fn attach_file(
        &mut self,
        file: std::fs::File,
        path: &Path,
        interposer: bool,
    ) -> Result<Option<Attached>, String> {
        if self.code.is_none() {
            return Ok(None);
        }
        let Ok(st) = nix::sys::stat::fstat(&file) else {
            return Ok(None);
        };
        let id = (st.st_dev, st.st_ino);
        if self.files.contains_key(&id) {
            return Ok(None);
        }
        let holders: Vec<u32> = self
            .files
            .values()
            .filter(|a| !a.functions.is_empty())
            .map(|a| a.owner)
            .collect();
        if let Err(why) = share::admit(st.st_uid, &holders) {
            // Said once per file.
            self.remember_unhooked(id, path);
            return Err(format!("{}: not hooked: {why}", path.display()));
        }
        let fd_path = format!("/proc/self/fd/{}", file.as_raw_fd());
        let exported = match file
            .try_clone()
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|f| exports(path, f))
        {
            Ok(e) => e,
            Err(e) => {
                // Not a library nvprobe can read: no point trying it again.
                self.remember_unhooked(id, path);
                return Err(e);
            }
        };
        let nccl = exported.iter().any(|(n, _)| n == "ncclAllReduce");
        if self.entries_only && !nccl {
            // Said once at the start, for every libcuda.
            self.remember_unhooked(id, path);
            return Ok(None);
        }
        let (points, unknown) = if nccl {
            let mut p = nccl_points(&exported);
            if self.entries_only {
                // An init's return says the communicator made.
                p.retain(|pt| !pt.3);
            }
            (p, Vec::new())
        } else {
            self.cuda_points(&exported, interposer)
        };
        let (mut functions, via, last_err) = match self.attach_multi(&fd_path, &points) {
            Ok((f, e)) => (f, "uprobe_multi".to_owned(), e),
            Err(why) => {
                let (f, e) = self.attach_perf(&fd_path, &points)?;
                (f, format!("perf_event ({why})"), e)
            }
        };
        // In the table's order, whatever the library's symbol order.
        functions.sort_by_key(|f| {
            cuda_func_number(f).or(nvprobe_common::nccl_fn_named(f).map(|f| f.id))
        });
        let key = if nccl { "ncclAllReduce" } else { "cuInit" };
        if !functions.contains(&key) {
            // Remember it anyway: no point trying this file again.
            self.remember_unhooked(id, path);
            return Err(format!(
                "{}: {key} could not be hooked ({})",
                path.display(),
                last_err.unwrap_or_else(|| "symbol not found".into())
            ));
        }
        let a = Attached {
            path: path.display().to_string(),
            interposer,
            functions,
            unknown,
            via,
            nccl,
            owner: st.st_uid,
        };
        self.files.insert(id, a.clone());
        Ok(Some(a))
    }

    /// The libcuda functions of `exported` the hook set takes, and the
    /// exports this build has no number for (`--libcuda-hooks all`).
    fn cuda_points(
        &self,
        exported: &[(String, u64)],
        interposer: bool,
    ) -> (Vec<Point>, Vec<String>) {
        let mut unknown = Vec::new();
        let mut points = Vec::new();
        for (name, off) in exported {
            let Some(cookie) = cuda_func_number(name) else {
                if self.hooks == Hooks::All {
                    unknown.push(name.clone());
                }
                continue;
            };
            // The table's own spelling, with a 'static lifetime.
            let Some(&(_, name)) = nvprobe_common::CUDA_FUNCS.iter().find(|e| e.0 == cookie) else {
                continue;
            };
            let mut flag = if interposer {
                nvprobe_common::CUDA_INTERPOSER
            } else {
                0
            };
            match self.hooks {
                Hooks::All => {}
                _ if STARTUP.contains(&name) => {}
                Hooks::Faults | Hooks::Launches if FAULTS.contains(&name) => {
                    flag |= nvprobe_common::CUDA_FAULT_ONLY;
                }
                Hooks::Launches if LAUNCHES.contains(&name) => {
                    flag |= nvprobe_common::CUDA_FAULT_ONLY | nvprobe_common::CUDA_LAUNCH
                }
                _ => continue,
            }
            points.push((name, *off, u64::from(cookie | flag), true));
        }
        unknown.sort();
        (points, unknown)
    }

    /// Every function of one file in one link per program: one system call
    /// each, and one grace period to remove. A function the kernel cannot
    /// probe (uprobes refuse some first instructions) fails a whole link,
    /// so on such a refusal the set is halved until each part is taken or
    /// is one refused function. Ok: the functions hooked, and the last
    /// refusal. Err: the kernel lacks or refuses uprobe_multi (remembered:
    /// later files go straight to perf events).
    fn attach_multi(
        &mut self,
        path: &str,
        points: &[Point],
    ) -> Result<(Vec<&'static str>, Option<String>), String> {
        if let Some(why) = &self.multi_refused {
            return Err(why.clone());
        }
        if points.is_empty() {
            return Ok((Vec::new(), None));
        }
        let [enter, ret] = match self.progs(true) {
            Ok(p) => p,
            Err(e) => {
                self.multi_refused = Some(e.clone());
                return Err(e);
            }
        };
        let (enter, ret) = (
            enter.try_clone_to_owned().map_err(|e| e.to_string())?,
            ret.try_clone_to_owned().map_err(|e| e.to_string())?,
        );
        // The return links first: an entry without its return would fill
        // CUDA_INFLIGHT. Functions hooked at their entry alone (a
        // libnccl's collectives) go in a split of their own.
        let (with_ret, entry_only): (Vec<Point>, Vec<Point>) = points.iter().partition(|p| p.3);
        let mut split = Split {
            prog: ret.as_fd(),
            path,
            ret: true,
            tries_left: 64,
            links: Vec::new(),
            taken: Vec::new(),
            last_err: None,
        };
        split.take(&with_ret);
        if split.links.is_empty()
            && let Some(e) = &split.last_err
            && matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::EACCES | libc::EOPNOTSUPP | libc::ENOSYS)
            )
        {
            let why = format!("uprobe_multi link: {e}");
            self.multi_refused = Some(why.clone());
            return Err(why);
        }
        let Split {
            links,
            taken,
            last_err,
            ..
        } = split;
        let mut functions = Vec::new();
        let mut last = last_err.map(|e| format!("uprobe_multi link: {e}"));
        for l in links {
            self.hold(l);
        }
        for set in taken {
            let pts: Vec<(u64, u64)> = set.iter().map(|p| (p.1, p.2)).collect();
            match crate::attach::sys::uprobe_multi_link(enter.as_fd(), path, &pts, false) {
                Ok(l) => {
                    self.hold(l);
                    functions.extend(set.iter().map(|p| p.0));
                }
                Err(e) => last = Some(format!("uprobe_multi link (entries): {e}")),
            }
        }
        let mut entries = Split {
            prog: enter.as_fd(),
            path,
            ret: false,
            tries_left: 64,
            links: Vec::new(),
            taken: Vec::new(),
            last_err: None,
        };
        entries.take(&entry_only);
        if let Some(e) = entries.last_err {
            last = Some(format!("uprobe_multi link (entries): {e}"));
        }
        for l in entries.links {
            self.hold(l);
        }
        functions.extend(entries.taken.iter().flatten().map(|p| p.0));
        Ok((functions, last))
    }

    /// One perf event per function and program; a function the kernel
    /// refuses is left out (with the last error).
    fn attach_perf(
        &mut self,
        path: &str,
        points: &[Point],
    ) -> Result<(Vec<&'static str>, Option<String>), String> {
        let pmu =
            crate::attach::sys::uprobe_pmu().map_err(|e| format!("the uprobe perf PMU: {e}"))?;
        let [enter, ret] = self.progs(false)?;
        let (enter, ret) = (enter.try_clone_to_owned(), ret.try_clone_to_owned());
        let (enter, ret) = (
            enter.map_err(|e| e.to_string())?,
            ret.map_err(|e| e.to_string())?,
        );
        let mut functions = Vec::new();
        let mut last_err = None;
        for &(name, off, cookie, with_ret) in points {
            if self.stop.load(std::sync::atomic::Ordering::Relaxed) {
                last_err = Some("nvprobe was stopping".into());
                break;
            }
            let mut made = Vec::new();
            let progs: &[(&OwnedFd, bool)] = if with_ret {
                &[(&ret, true), (&enter, false)]
            } else {
                &[(&enter, false)]
            };
            for &(prog, is_ret) in progs {
                match crate::attach::sys::perf_uprobe_link(
                    prog.as_fd(),
                    pmu,
                    path,
                    off,
                    is_ret,
                    cookie,
                ) {
                    Ok(l) => made.push(l),
                    Err(e) => {
                        last_err = Some(format!("{name}: {e}"));
                        break;
                    }
                }
            }
            let ok = made.len() == progs.len();
            for l in made {
                self.hold(l);
            }
            if ok {
                functions.push(name);
            }
        }
        Ok((functions, last_err))
    }
}

/// A libnccl's functions (`nvprobe_common::NCCL_FUNCS`): entries only,
/// but for the inits, whose return says the communicator made.
fn nccl_points(exported: &[(String, u64)]) -> Vec<Point> {
    exported
        .iter()
        .filter_map(|(name, off)| {
            let f = nvprobe_common::nccl_fn_named(name)?;
            Some((
                f.name,
                *off,
                nvprobe_common::nccl_cookie(f),
                f.kind == nvprobe_common::NcclKind::Init,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fault_set_is_numbered_apart_from_the_startup_set_and_leaves_launches_out() {
        let mut seen = std::collections::HashSet::new();
        for f in FAULTS {
            assert!(cuda_func_number(f).is_some(), "{f} has no number");
            assert!(seen.insert(f), "{f} twice");
            assert!(!STARTUP.contains(f), "{f} is in both sets");
        }
        for f in [
            "cuCtxSynchronize",
            "cuCtxSynchronize_v2",
            "cuMemcpyDtoH_v2",
            "cuMemFree_v2",
        ] {
            assert!(FAULTS.contains(&f), "{f}");
        }
        for hot in [
            "cuLaunchKernel",
            "cuLaunchKernel_ptsz",
            "cuStreamQuery",
            "cuEventQuery",
            "cuEventRecord",
            "cuCtxGetDevice_v2",
        ] {
            assert!(!FAULTS.contains(&hot), "{hot} is on a hot path");
        }
        // The counts --libcuda-hooks' help gives.
        let help = format!("{} functions", FAULTS.len());
        assert_eq!(help, "40 functions");
        assert_eq!(format!("{} functions", LAUNCHES.len()), "9 functions");
        for f in LAUNCHES {
            assert!(cuda_func_number(f).is_some(), "{f} has no number");
            assert!(!FAULTS.contains(f) && !STARTUP.contains(f), "{f} twice");
        }
    }

    #[test]
    fn the_startup_set_is_numbered_and_leaves_the_hot_paths_out() {
        let mut seen = std::collections::HashSet::new();
        for f in STARTUP {
            assert!(cuda_func_number(f).is_some(), "{f} has no number");
            assert!(seen.insert(f), "{f} twice");
        }
        for hot in [
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cuMemcpyHtoD_v2",
            "cuMemcpyAsync",
            "cuStreamSynchronize",
            "cuEventRecord",
            "cuCtxSetCurrent",
            "cuCtxSynchronize",
            // PyTorch calls these on every small op (H200: 6 and 2 per
            // `x = x + 1`, with one cuLaunchKernel).
            "cuCtxGetDevice_v2",
            "cuDevicePrimaryCtxGetState",
        ] {
            assert!(cuda_func_number(hot).is_some(), "{hot} has no number");
            assert!(!STARTUP.contains(&hot), "{hot} is on a hot path");
        }
    }

    #[test]
    fn every_function_the_real_580_libcuda_exports_has_a_number() {
        let list = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/gpu-host/libcuda-580.159.04-exports.txt"
        ))
        .expect("export list");
        let names: Vec<&str> = list
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        assert_eq!(names.len(), 682);
        let missing: Vec<&&str> = names
            .iter()
            .filter(|n| cuda_func_number(n).is_none())
            .collect();
        assert!(missing.is_empty(), "not in cuda_api.rs: {missing:?}");
    }

    #[test]
    fn numbers_are_unique_and_the_first_nine_never_move() {
        let mut n = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        for (k, name) in nvprobe_common::CUDA_FUNCS {
            assert!(n.insert(k) && names.insert(name), "{k} {name} repeated");
            assert_eq!(nvprobe_common::cuda_func_name(*k), Some(*name));
        }
        // Recordings made before the table was generated use these.
        assert_eq!(cuda_func_number("cuInit"), Some(1));
        assert_eq!(cuda_func_number("cuDriverGetVersion"), Some(2));
        assert_eq!(cuda_func_number("cuDeviceGetCount"), Some(3));
        assert_eq!(cuda_func_number("cuDeviceGet"), Some(4));
        assert_eq!(cuda_func_number("cuDevicePrimaryCtxRetain"), Some(5));
        assert_eq!(cuda_func_number("cuCtxCreate_v4"), Some(9));
    }
}
