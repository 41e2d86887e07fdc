//! Text: a search is one line. A dynamic loader that looks for
//! `libcuda.so.1` tries it in every directory of its path, one failed
//! `openat` each (45 on a torch host); the JSON keeps every call, text
//! folds a run of one thread's failed calls of one system call for one
//! file name in one directory after another into a line that names the
//! file, how many places, the errors and where it looked first and last.
//! A directory tried twice in a row in a search of several is one place
//! (glibc's legacy hwcaps subdirectories repeat one when the platform and
//! a capability share a name: `tls/x86_64` twice), and the line says how
//! many calls there were; a third try, or one path tried again and again
//! (a retry loop), is a line of its own each time.
//! The verdict's `libcuda_not_found` lists every path.

use std::fmt::Write as _;

use crate::decode::Event;

/// Directories named in the line: the first two and the last.
const DIRS_SHOWN: usize = 2;
/// Distinct errors counted (a search fails with one or two).
const ERRNOS_KEPT: usize = 4;

/// A run of failed lookups not written yet.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    tid: u32,
    syscall: String,
    name: String,
    /// `time comm[pid] ` of the first call.
    prefix: String,
    /// The first call's own line, written as it is when it stays alone.
    first_line: String,
    dirs: Vec<String>,
    last_dir: String,
    /// Places: the calls, less a directory tried again right after itself.
    n: u32,
    /// The calls.
    calls: u32,
    /// The last call tried the directory of the one before it again.
    repeated: bool,
    errnos: Vec<(String, u32)>,
    /// The first call and its time: what the run's line is, to the
    /// writer's filters (its process, its kind).
    first: Box<(u64, Event)>,
    /// The calls' summed time; None once one had none (a failed call of a
    /// start-up reported without its path call).
    dur_ns: Option<u64>,
    /// When the last call was seen (CLOCK_MONOTONIC).
    last_ns: u64,
    /// The loader's look at a directory the run began with, when that was
    /// its batch's first line (the batch before ended in the search):
    /// the directory and the look's own line. The run before it takes it
    /// in when it tried that directory last ([`Run::join`]); else its line
    /// is written before the run's.
    probe: Option<(String, String)>,
}

/// Whether a failed call is of the kind a loader makes to look at a
/// directory it just failed to open a file in (glibc stats it, to skip
/// it next time).
fn is_probe_call(call: &str) -> bool {
    matches!(
        call,
        "newfstatat" | "stat" | "lstat" | "statx" | "fstatat64"
    )
}

/// A failed path call, as the fold needs it.
pub(crate) struct Lookup<'a> {
    pub tid: u32,
    pub syscall: &'a str,
    pub path: &'a str,
    pub errno: &'a str,
    pub dur_ns: Option<u64>,
    /// When it was seen (CLOCK_MONOTONIC).
    pub at: u64,
}

/// (directory, file name) of a path that has both.
fn split(path: &str) -> Option<(&str, &str)> {
    let (dir, name) = path.rsplit_once('/')?;
    (!name.is_empty()).then_some((dir, name))
}

impl Run {
    /// A run that starts with `l`, or None when its path names no file
    /// in a directory.
    pub(crate) fn start(
        l: &Lookup<'_>,
        prefix: String,
        first_line: String,
        first: (u64, &Event),
    ) -> Option<Run> {
        let (dir, name) = split(l.path)?;
        Some(Run {
            tid: l.tid,
            syscall: l.syscall.to_owned(),
            name: name.to_owned(),
            prefix,
            first_line,
            dirs: vec![dir.to_owned()],
            last_dir: dir.to_owned(),
            n: 1,
            calls: 1,
            repeated: false,
            errnos: vec![(l.errno.to_owned(), 1)],
            first: Box::new((first.0, first.1.clone())),
            dur_ns: l.dur_ns,
            last_ns: l.at,
            probe: None,
        })
    }

    /// A run that begins with the loader's look at a directory (`l`, a
    /// failed stat), the first line of its batch: the search it belongs to
    /// may have begun in the batch before. None for another call.
    pub(crate) fn start_probe(
        l: &Lookup<'_>,
        prefix: String,
        line: String,
        first: (u64, &Event),
    ) -> Option<Run> {
        if !is_probe_call(l.syscall) {
            return None;
        }
        let dir = l.path.trim_end_matches('/');
        Some(Run {
            tid: l.tid,
            syscall: String::new(),
            name: String::new(),
            prefix,
            first_line: line.clone(),
            dirs: Vec::new(),
            last_dir: dir.to_owned(),
            n: 0,
            calls: 0,
            repeated: false,
            errnos: Vec::new(),
            first: Box::new((first.0, first.1.clone())),
            dur_ns: Some(0),
            last_ns: l.at,
            probe: Some((dir.to_owned(), line)),
        })
    }

    /// Take `l` into the run: the same thread, system call and file name,
    /// in another directory than the last (or in the last once more, in a
    /// search of several places: the same place). False: it starts
    /// another.
    pub(crate) fn extend(&mut self, l: &Lookup<'_>) -> bool {
        let Some((dir, name)) = split(l.path) else {
            return false;
        };
        if self.calls == 0 {
            // A look alone: its lookup comes through `adopt`.
            return false;
        }
        if l.tid != self.tid
            || l.syscall != self.syscall
            || name != self.name
            || (dir == self.last_dir && !self.may_repeat())
        {
            return false;
        }
        self.calls += 1;
        self.repeated = dir == self.last_dir;
        self.dur_ns = self.dur_ns.zip(l.dur_ns).map(|(a, b)| a + b);
        if dir != self.last_dir {
            self.n += 1;
            if self.dirs.len() < DIRS_SHOWN {
                self.dirs.push(dir.to_owned());
            }
            dir.clone_into(&mut self.last_dir);
        }
        self.count_errno(l.errno, 1);
        self.last_ns = self.last_ns.max(l.at);
        true
    }

    /// Whether the run is a loader's look at a directory alone so far
    /// ([`Run::start_probe`]).
    pub(crate) fn is_probe_only(&self) -> bool {
        self.calls == 0
    }

    /// The first lookup of a run that began with a loader's look at a
    /// directory: the thread's next failed lookup, with its own line and
    /// time. False for another thread's, or a path with no file name.
    pub(crate) fn adopt(&mut self, l: &Lookup<'_>, prefix: String, line: String) -> bool {
        let Some((dir, name)) = split(l.path) else {
            return false;
        };
        if self.calls != 0 || l.tid != self.tid {
            return false;
        }
        self.syscall = l.syscall.to_owned();
        self.name = name.to_owned();
        self.prefix = prefix;
        self.first_line = line;
        self.dirs = vec![dir.to_owned()];
        dir.clone_into(&mut self.last_dir);
        self.n = 1;
        self.calls = 1;
        self.count_errno(l.errno, 1);
        self.dur_ns = l.dur_ns;
        self.last_ns = self.last_ns.max(l.at);
        true
    }

    /// Whether the last directory tried again is still this search: once,
    /// in a search past its first place.
    fn may_repeat(&self) -> bool {
        self.n > 1 && !self.repeated
    }

    fn count_errno(&mut self, errno: &str, n: u32) {
        if let Some((_, k)) = self.errnos.iter_mut().find(|(e, _)| e == errno) {
            *k += n;
        } else if self.errnos.len() < ERRNOS_KEPT {
            self.errnos.push((errno.to_owned(), n));
        }
    }

    /// Take `next` in: the run a later batch began with, when it goes on
    /// with this search (the same thread, system call and file name, in
    /// another directory than the last, or in the last once more as
    /// [`Run::extend`] takes it). Err gives it back.
    pub(crate) fn join(&mut self, mut next: Box<Run>) -> Result<(), Box<Run>> {
        if self.calls == 0 || next.tid != self.tid {
            return Err(next);
        }
        if let Some((dir, _)) = &next.probe {
            // The loader's look at the directory this search tried last:
            // taken in (as one in the same batch is, whatever comes after
            // it); at another, the two stay apart.
            if *dir != self.last_dir {
                return Err(next);
            }
            next.probe = None;
            if next.calls == 0 {
                self.last_ns = self.last_ns.max(next.last_ns);
                return Ok(());
            }
        }
        // The place the batch ended in, tried again first in the next.
        let again = next.dirs.first() == Some(&self.last_dir);
        if next.syscall != self.syscall || next.name != self.name || (again && !self.may_repeat()) {
            return Err(next);
        }
        let mut next = *next;
        next.probe = None;
        self.repeated = next.repeated || (again && next.calls == 1);
        self.n += next.n - u32::from(again);
        self.calls += next.calls;
        self.dur_ns = self.dur_ns.zip(next.dur_ns).map(|(a, b)| a + b);
        for d in next.dirs.into_iter().skip(usize::from(again)) {
            if self.dirs.len() < DIRS_SHOWN {
                self.dirs.push(d);
            }
        }
        self.last_dir = next.last_dir;
        for (e, k) in next.errnos {
            self.count_errno(&e, k);
        }
        self.last_ns = self.last_ns.max(next.last_ns);
        Ok(())
    }

    /// When its last call was seen.
    pub(crate) fn last_ns(&self) -> u64 {
        self.last_ns
    }

    /// The first call's time and event.
    pub(crate) fn into_first(self) -> (u64, Event) {
        *self.first
    }

    /// Whether a failed call of `tid` on `path` is the loader's look at the
    /// directory it just failed in (glibc stats it, to skip it next time):
    /// part of the search, not a line of its own.
    pub(crate) fn probes_last_dir(&self, tid: u32, call: &str, path: &str) -> bool {
        // glibc 2.39 names it with a trailing slash, 2.36 without.
        tid == self.tid
            && self.calls > 0
            && is_probe_call(call)
            && path.trim_end_matches('/') == self.last_dir
    }

    /// The run's text: the first call's own line when it is alone, else
    /// `openat libcuda.so.1 in 41 places = -1 ENOENT: /a, /b, … /z <35.2µs>`.
    pub(crate) fn line(&self, dur: impl Fn(u64) -> String) -> String {
        if self.calls == 0 {
            return self.first_line.clone();
        }
        let mut s = String::new();
        if let Some((_, line)) = &self.probe {
            s.push_str(line);
            s.push('\n');
        }
        if self.calls == 1 {
            s.push_str(&self.first_line);
            return s;
        }
        let _ = write!(
            s,
            "{}{} {} in {} place{}",
            self.prefix,
            self.syscall,
            self.name,
            self.n,
            if self.n == 1 { "" } else { "s" }
        );
        if self.calls > self.n {
            let _ = write!(s, " ({} calls)", self.calls);
        }
        s.push_str(" = -1 ");
        let counted: u32 = self.errnos.iter().map(|(_, k)| k).sum();
        for (i, (e, k)) in self.errnos.iter().enumerate() {
            let sep = if i > 0 { ", " } else { "" };
            if self.errnos.len() == 1 && counted == self.calls {
                let _ = write!(s, "{e}");
            } else {
                let _ = write!(s, "{sep}{e} ×{k}");
            }
        }
        if counted < self.calls {
            let _ = write!(s, ", other ×{}", self.calls - counted);
        }
        s.push_str(": ");
        s.push_str(&self.dirs.join(", "));
        let shown = self.dirs.len() as u32;
        if self.n > shown + 1 {
            s.push_str(", … ");
        } else if self.n > shown {
            s.push_str(", ");
        }
        if self.n > shown {
            s.push_str(&self.last_dir);
        }
        if let Some(ns) = self.dur_ns {
            let _ = write!(s, " <{}>", dur(ns));
        }
        s
    }
}

/// A run of lookups written out (`Renderer::take_flushed`).
#[derive(Clone, Debug)]
pub struct Flushed {
    /// Where its line ends in the buffer.
    pub end: usize,
    /// Its first call's time and event.
    pub mono_ns: u64,
    pub first: Event,
    /// The run itself, when its line is the first of its buffer.
    pub lead: Option<OpenRun>,
}

/// A search (text's fold) that a batch ended in or began with: the
/// pipelines's workers render batches apart, so its writer joins the two.
#[derive(Clone, Debug)]
pub struct OpenRun(pub(crate) Box<Run>);

impl OpenRun {
    /// Take in the run the next batch began with, when it goes on with
    /// this search; Err gives it back.
    pub fn join(&mut self, next: OpenRun) -> Result<(), OpenRun> {
        self.0.join(next.0).map_err(OpenRun)
    }

    /// When its last call was seen (CLOCK_MONOTONIC).
    pub fn last_ns(&self) -> u64 {
        self.0.last_ns()
    }

    /// Its line (with its newline), and its first call's time and event.
    pub fn into_line(self) -> (String, u64, Event) {
        let mut line = self.0.line(dur);
        line.push('\n');
        let (mono_ns, first) = self.0.into_first();
        (line, mono_ns, first)
    }
}

/// A duration as text lines give it.
pub(crate) fn dur(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.3}s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.3}ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1}µs", ns as f64 / 1e3)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev() -> Event {
        serde_json::from_str(r#"{"type":"open","pid":1,"tid":7,"comm":"p","uid":0,"syscall":"openat","path":"/a/x","flags":"O_RDONLY","start_ns":0,"duration_ns":0,"ret":-2,"errno":"ENOENT","ok":false}"#).expect("an event")
    }

    fn l<'a>(path: &'a str, errno: &'a str) -> Lookup<'a> {
        Lookup {
            tid: 7,
            syscall: "openat",
            path,
            errno,
            dur_ns: Some(1000),
            at: 0,
        }
    }

    #[test]
    fn a_search_is_one_line_with_its_count_errors_and_ends() {
        let mut r = Run::start(
            &l("/usr/local/nvidia/lib64/libcuda.so.1", "ENOENT"),
            "t p[7] ".into(),
            "first".into(),
            (0, &ev()),
        )
        .expect("a file in a directory");
        assert_eq!(r.line(|n| format!("{n}ns")), "first");
        for d in ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib"] {
            assert!(r.extend(&l(&format!("{d}/libcuda.so.1"), "ENOENT")));
        }
        assert!(r.extend(&l("/usr/lib/libcuda.so.1", "ENOTDIR")));
        assert_eq!(
            r.line(|n| format!("{n}ns")),
            "t p[7] openat libcuda.so.1 in 5 places = -1 ENOENT ×4, ENOTDIR ×1: /usr/local/nvidia/lib64, /lib/x86_64-linux-gnu, … /usr/lib <5000ns>"
        );
    }

    #[test]
    fn a_run_joins_the_run_that_goes_on_with_its_search() {
        let start = |path: &str| {
            Run::start(&l(path, "ENOENT"), "t ".into(), "x".into(), (0, &ev())).expect("run")
        };
        let mut a = start("/a/libcuda.so.1");
        assert!(a.extend(&l("/b/libcuda.so.1", "ENOENT")));
        let mut b = start("/c/libcuda.so.1");
        assert!(b.extend(&l("/d/libcuda.so.1", "ENOTDIR")));
        assert!(b.extend(&l("/e/libcuda.so.1", "ENOENT")));
        // Another file name: no.
        assert!(a.join(Box::new(start("/c/libcuda.so"))).is_err());
        let mut other = start("/c/libcuda.so.1");
        other.tid = 8;
        assert!(a.join(Box::new(other)).is_err());
        a.join(Box::new(b)).expect("the same search");
        assert_eq!(
            a.line(|n| format!("{n}")),
            "t openat libcuda.so.1 in 5 places = -1 ENOENT ×4, ENOTDIR ×1: /a, /b, … /e <5000>"
        );
    }

    /// A batch that begins with the loader's look at a directory (the
    /// batch before ended in the search): the run before takes the look
    /// in when it tried that directory last, and the search goes on as
    /// one line; at another directory, or with no lookup before it, the
    /// look stays a line of its own, written before its run's.
    #[test]
    fn a_batch_that_begins_with_the_loaders_look_at_the_last_directory_joins_the_search() {
        let start = |path: &str| {
            Run::start(&l(path, "ENOENT"), "t ".into(), "x".into(), (0, &ev())).expect("run")
        };
        let probe = |dir: &str| {
            let mut p = l(dir, "ENOENT");
            p.syscall = "newfstatat";
            p.dur_ns = None;
            Run::start_probe(&p, "t ".into(), format!("stat {dir}"), (0, &ev())).expect("a look")
        };
        let mut a = start("/a/libcuda.so.1");
        assert!(a.extend(&l("/b/libcuda.so.1", "ENOENT")));
        let mut b = probe("/b/");
        // Its lookup comes through `adopt`, with its own line and time.
        assert!(!b.extend(&l("/c/libcuda.so.1", "ENOENT")));
        let mut other = l("/c/libcuda.so.1", "ENOENT");
        other.tid = 8;
        assert!(!b.clone().adopt(&other, "u ".into(), "own".into()));
        assert!(b.adopt(&l("/c/libcuda.so.1", "ENOENT"), "u ".into(), "own".into()));
        let one = b.clone();
        assert!(b.extend(&l("/d/libcuda.so.1", "ENOENT")));
        // The look alone, unjoined, then its search.
        assert_eq!(one.line(|n| format!("{n}")), "stat /b/\nown");
        assert_eq!(
            b.line(|n| format!("{n}")),
            "stat /b/\nu openat libcuda.so.1 in 2 places = -1 ENOENT: /c, /d <2000>"
        );
        // At the last directory but another file: apart, and the look's
        // line kept.
        let mut name = probe("/b");
        assert!(name.adopt(&l("/c/libcuda.so", "ENOENT"), "u ".into(), "own".into()));
        let back = a.clone().join(Box::new(name)).expect_err("another file");
        assert_eq!(back.line(|n| format!("{n}")), "own");
        let mut joined = a.clone();
        joined.join(Box::new(b.clone())).expect("the same search");
        assert_eq!(
            joined.line(|n| format!("{n}")),
            "t openat libcuda.so.1 in 4 places = -1 ENOENT: /a, /b, … /d <4000>"
        );
        // A look at another directory: apart.
        let c = probe("/z");
        assert!(a.clone().join(Box::new(c)).is_err());
        // A look alone, then nothing: its own line; taken in by the run
        // before when it is at its last directory.
        let alone = probe("/b");
        assert_eq!(alone.line(|n| format!("{n}")), "stat /b");
        a.join(Box::new(alone)).expect("the look at /b");
        assert_eq!(
            a.line(|n| format!("{n}")),
            "t openat libcuda.so.1 in 2 places = -1 ENOENT: /a, /b <2000>"
        );
        // A look that joined nothing takes no run after it as a held run.
        let mut held = probe("/b");
        assert!(held.join(Box::new(start("/c/libcuda.so.1"))).is_err());
        // Only a stat is a look.
        assert!(
            Run::start_probe(&l("/b", "ENOENT"), String::new(), String::new(), (0, &ev()))
                .is_none()
        );
    }

    #[test]
    fn two_places_name_both_and_nothing_else_folds() {
        let mut r = Run::start(
            &l("/a/libcuda.so", "ENOENT"),
            "t ".into(),
            "x".into(),
            (0, &ev()),
        )
        .expect("run");
        assert!(r.extend(&l("/b/libcuda.so", "ENOENT")));
        assert_eq!(
            r.line(|n| format!("{n}")),
            "t openat libcuda.so in 2 places = -1 ENOENT: /a, /b <2000>"
        );
        // Another name, another thread, another call.
        let mut three = r.clone();
        assert!(three.extend(&l("/c/libcuda.so", "ENOENT")));
        assert_eq!(
            three.line(|n| format!("{n}")),
            "t openat libcuda.so in 3 places = -1 ENOENT: /a, /b, /c <3000>"
        );
        assert!(!r.extend(&l("/c/libcuda.so.1", "ENOENT")));
        assert!(r.probes_last_dir(7, "newfstatat", "/b"));
        assert!(r.probes_last_dir(7, "newfstatat", "/b/"));
        assert!(!r.probes_last_dir(7, "openat", "/b"));
        assert!(!r.probes_last_dir(7, "newfstatat", "/a"));
        assert!(!r.probes_last_dir(8, "newfstatat", "/b"));
        let mut other = l("/c/libcuda.so", "ENOENT");
        other.tid = 8;
        assert!(!r.extend(&other));
        other.tid = 7;
        other.syscall = "stat";
        assert!(!r.extend(&other));
        // A call without its time: the line gives none.
        let mut untimed = Run::start(
            &l("/a/libx.so", "ENOENT"),
            "t ".into(),
            "x".into(),
            (0, &ev()),
        )
        .expect("run");
        let mut second = l("/b/libx.so", "ENOENT");
        second.dur_ns = None;
        assert!(untimed.extend(&second));
        assert_eq!(
            untimed.line(|n| format!("{n}")),
            "t openat libx.so in 2 places = -1 ENOENT: /a, /b"
        );
        assert!(
            Run::start(
                &l("/dev/", "ENOENT"),
                String::new(),
                String::new(),
                (0, &ev())
            )
            .is_none()
        );
        assert!(
            Run::start(
                &l("libcuda.so", "ENOENT"),
                String::new(),
                String::new(),
                (0, &ev())
            )
            .is_none()
        );
    }

    /// glibc's legacy hwcaps subdirectories (glibc before 2.37, on a CPU
    /// whose platform and a capability are both `x86_64`) try one
    /// directory twice in a row; seen on the no-GPU VM's Debian 12. One
    /// search is still one line, the place counted once, the calls all;
    /// across a batch's end too.
    #[test]
    fn a_directory_tried_twice_in_a_row_is_one_place_of_the_search() {
        let dirs = [
            "/lib/tls/x86_64/x86_64",
            "/lib/tls/x86_64",
            "/lib/tls/x86_64",
            "/lib/tls",
            "/lib/x86_64/x86_64",
            "/lib/x86_64",
            "/lib/x86_64",
            "/lib",
        ];
        let path = |d: &str| format!("{d}/libcuda.so.1");
        let start = |d: &str| {
            Run::start(&l(&path(d), "ENOENT"), "t ".into(), "x".into(), (0, &ev())).expect("run")
        };
        let mut whole = start(dirs[0]);
        for d in &dirs[1..] {
            assert!(whole.extend(&l(&path(d), "ENOENT")), "{d}");
        }
        let line = "t openat libcuda.so.1 in 6 places (8 calls) = -1 ENOENT: /lib/tls/x86_64/x86_64, /lib/tls/x86_64, … /lib <8000>";
        assert_eq!(whole.line(|n| format!("{n}")), line);
        // Split by a batch's end between the two tries of one directory.
        let mut a = start(dirs[0]);
        assert!(a.extend(&l(&path(dirs[1]), "ENOENT")));
        let mut b = start(dirs[2]);
        for d in &dirs[3..] {
            assert!(b.extend(&l(&path(d), "ENOENT")), "{d}");
        }
        a.join(Box::new(b)).expect("the same search");
        assert_eq!(a.line(|n| format!("{n}")), line);
        // Its last folder once more is the same place; a third time is
        // a line of its own, and so is one path tried again and again (a
        // retry loop).
        assert!(whole.extend(&l(&path("/lib"), "ENOENT")));
        assert!(!whole.extend(&l(&path("/lib"), "ENOENT")));
        let mut one = start("/b");
        assert!(!one.extend(&l("/b/libcuda.so.1", "ENOENT")));
    }
}
