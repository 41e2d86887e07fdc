//! One line per call, for people: strace's shape, with NVIDIA names,
//! NV_STATUS and durations.
//!
//! `03:31:13.123456 python3[4242/4243] ioctl(5</dev/nvidiactl>, NV_ESC_RM_CONTROL{control=NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION hClient=0xc1d00004 …}) = 0 NV_OK <12µs>`

use std::fmt::Write as _;

pub use super::wrap::FIRST_LINE_MAX;
use super::{clock::Clock, fold::dur, note::Note, wrap::first_line};
use crate::correlate::{Class, DiagSeverity};
use crate::decode::{
    CudaCall, CudaPhase, Device, DriverCall, Event, FdCall, Ioctl, MmapCall, PathCall, Proc,
    ProcCall, ProcKind, args::Args, version::LayoutBasis,
};

fn time_of(clock: &Clock, mono_ns: u64) -> String {
    let s = clock.rfc3339(mono_ns);
    // 2026-11-30T03:31:13.123456Z -> 03:31:13.123456
    s.get(11..26).map(str::to_owned).unwrap_or(s)
}

fn who(p: &Proc) -> String {
    let mut s = format!("{}[{}", p.comm, p.pid);
    if p.tid != p.pid {
        let _ = write!(s, "/{}", p.tid);
    }
    if let Some(ns) = p.ns_pid {
        let _ = write!(s, " ns:{ns}");
    }
    s.push(']');
    s
}

fn dev(d: &Device) -> String {
    match &d.node {
        Some(n) => n.to_string(),
        None => format!("{} {}:{}", d.kind, d.major, d.minor),
    }
}

fn args_text(args: &Args) -> String {
    let mut out = String::new();
    let mut it = args.iter().peekable();
    while let Some((k, v)) = it.next() {
        // `control` followed by `control_name` shows as one field: the name.
        if it
            .peek()
            .is_some_and(|(n, _)| n.strip_suffix("_name") == Some(k))
        {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        let key = k.strip_suffix("_name").unwrap_or(k);
        let _ = write!(out, "{key}={}", v.text());
    }
    out
}

fn result(ret: i64, errno: &Option<String>) -> String {
    match errno {
        Some(e) => format!("-1 {e}"),
        None => ret.to_string(),
    }
}

pub fn event_line(clock: &Clock, mono_ns: u64, ev: &Event) -> String {
    let mut s = format!("{} {} ", time_of(clock, mono_ns), who(ev.proc()));
    match ev {
        Event::Ioctl(e) => ioctl_text(&mut s, e),
        Event::Open(e) | Event::Stat(e) | Event::Access(e) | Event::Mknod(e) => {
            path_text(&mut s, e)
        }
        Event::Close(e) | Event::Dup(e) => fd_text(&mut s, e),
        Event::Cuda(c) => cuda_text(&mut s, c),
        Event::Driver(d) => driver_text(&mut s, d),
        Event::Proc(p) => proc_text(&mut s, p),
        Event::Mmap(e) => mmap_text(&mut s, e),
        Event::Nccl(n) => nccl_text(&mut s, n),
    }
    s
}

/// "ncclAllReduce(count 1048576, float32, sum, stream 0x…) [comm 3f2a…
/// rank 0 of 2, #12]"; an init with its result; a group call bare.
fn nccl_text(s: &mut String, n: &crate::decode::NcclCall) {
    use crate::decode::NcclCallKind as K;
    let mut args = Vec::new();
    if let Some(c) = n.count {
        args.push(format!("count {c}"));
    }
    if let Some(d) = n.datatype {
        args.push(
            n.datatype_name
                .map_or_else(|| format!("datatype {d}"), str::to_owned),
        );
    }
    if let Some(o) = n.op {
        args.push(n.op_name.map_or_else(|| format!("op {o}"), str::to_owned));
    }
    if let Some(r) = n.root {
        args.push(format!("root {r}"));
    }
    if let Some(p) = n.peer {
        args.push(format!("peer {p}"));
    }
    if let Some(st) = n.stream {
        args.push(format!("stream {st:#x}"));
    }
    let _ = write!(s, "{}({})", n.func, args.join(", "));
    if n.kind == K::Init {
        let _ = write!(
            s,
            " = {} {}",
            n.result.unwrap_or(0),
            n.result_name.unwrap_or("?")
        );
    }
    if matches!(n.kind, K::GroupStart | K::GroupEnd) {
        return;
    }
    let comm = match n.comm_hash {
        Some(h) => format!("comm {h:016x}"),
        None => format!("comm {:#x} (made before nvprobe saw it)", n.communicator),
    };
    let rank = match (n.rank, n.nranks) {
        (Some(r), Some(k)) => format!(" rank {r} of {k}"),
        _ => String::new(),
    };
    let seq = n.seq.map_or(String::new(), |q| format!(", #{q}"));
    let _ = write!(s, " [{comm}{rank}{seq}]");
}

fn ioctl_text(s: &mut String, e: &Ioctl) {
    let name = match (e.name, &e.xfer) {
        (Some(n), Some(x)) => format!(
            "{n}→{}",
            x.name
                .map_or_else(|| format!("{:#x}", x.cmd), str::to_owned)
        ),
        (Some(n), None) => n.to_owned(),
        (None, _) => format!("{} {:#x}", e.family, e.request),
    };
    // fd -1: the driver layer made the record (no fd there).
    let fd = if e.fd < 0 {
        "?".to_owned()
    } else {
        e.fd.to_string()
    };
    let _ = write!(s, "ioctl({fd}<{}>, {name}", dev(&e.device));
    let a = args_text(&e.args);
    if !a.is_empty() {
        let _ = write!(s, "{{{a}}}");
    }
    let _ = write!(s, ") = {}", result(e.ret, &e.errno));
    if let Some(st) = &e.status {
        let assumed = if st.layout == LayoutBasis::Assumed {
            "?"
        } else {
            ""
        };
        match st.name {
            Some(n) => {
                let _ = write!(s, " {n}{assumed}");
            }
            None => {
                let _ = write!(s, " status={:#x}{assumed}", st.code);
            }
        }
    }
    if e.untimed {
        s.push_str(" <untimed>");
    } else if e.coarse {
        let _ = write!(s, " <~{}>", dur(e.duration_ns));
    } else {
        let _ = write!(s, " <{}>", dur(e.duration_ns));
    }
}

fn path_text(s: &mut String, e: &PathCall) {
    let _ = write!(
        s,
        "{}(\"{}\", {}) = {}",
        e.syscall,
        e.path,
        e.flags,
        result(e.ret, &e.errno)
    );
    if let Some(d) = &e.device {
        let _ = write!(s, " [{} {}:{}]", d.kind, d.major, d.minor);
    }
    let _ = write!(s, " <{}>", dur(e.duration_ns));
    if let Some(m) = &e.mismatch {
        let _ = write!(s, " !! {m}");
    }
}

fn fd_text(s: &mut String, e: &FdCall) {
    let (call, r) = (e.syscall, result(e.ret, &e.errno));
    let _ = match (e.last_fd, e.replaced) {
        (Some(last), _) => {
            let flags = e.range_flags.as_deref().unwrap_or("0");
            write!(s, "{call}({}, {last}, {flags}) = {r}", e.fd as u32)
        }
        (None, true) => {
            let held = if e.ok { "replaced" } else { "it held" };
            let (fd, newfd, d) = (e.fd, e.newfd.unwrap_or(-1), dev(&e.device));
            write!(s, "{call}({fd}, {newfd}) = {r} ({held} <{d}>)")
        }
        (None, false) => write!(s, "{call}({}<{}>) = {r}", e.fd, dev(&e.device)),
    };
}

fn cuda_text(s: &mut String, c: &CudaCall) {
    let _ = match c.phase {
        CudaPhase::Enter => write!(
            s,
            "{}{}({}) ...",
            if c.interposer { "[interposer] " } else { "" },
            c.func,
            c.flags.map_or(String::new(), |f| format!("flags={f:#x}"))
        ),
        CudaPhase::Return => write!(
            s,
            "{}{}({}) = {} {}{} <{}>",
            if c.interposer { "[interposer] " } else { "" },
            c.func,
            c.device.map_or(String::new(), |d| format!("device {d}")),
            c.result.unwrap_or(0),
            c.result_name.unwrap_or("?"),
            c.value.map_or(String::new(), |v| format!(" [value {v}]")),
            dur(c.duration_ns.unwrap_or(0))
        ),
        CudaPhase::Unfinished => write!(
            s,
            "{}{}() unfinished: its thread ended while it waited <{}>",
            if c.interposer { "[interposer] " } else { "" },
            c.func,
            dur(c.duration_ns.unwrap_or(0))
        ),
    };
}

fn driver_text(s: &mut String, d: &DriverCall) {
    // In-driver calls are indented under the syscall they belong to.
    let _ = write!(s, "  [{}] {}(", d.module, d.function);
    if let Some(c) = &d.call {
        let _ = write!(s, "{c}");
    }
    let _ = write!(s, ") = {}", d.result);
    if let Some(st) = &d.rm_status {
        let _ = write!(s, " rm_status={}", st.text());
    }
    let _ = write!(s, " <{}>", dur(d.duration_ns));
}

fn proc_text(s: &mut String, p: &ProcCall) {
    let _ = match p.op {
        ProcKind::Signal => write!(
            s,
            "sends {} ({}) to pid {}",
            p.signal.as_deref().unwrap_or("?"),
            crate::decode::signal::si_code_text(p.sig.unwrap_or(0), p.code.unwrap_or(0)),
            p.target_pid
        ),
        ProcKind::SignalDelivered => {
            write!(s, "receives {}", p.signal.as_deref().unwrap_or("?"))
        }
        ProcKind::Exit => write!(s, "{}", p.exit.as_deref().unwrap_or("exited")),
        ProcKind::Fork => write!(s, "forks pid {}", p.target_pid),
        ProcKind::OomVictim => write!(
            s,
            "ran out of memory: the OOM killer chose pid {}",
            p.target_pid
        ),
        ProcKind::CallFailed => write!(
            s,
            "{}({}) = -1 {} (a call of its start-up)",
            p.call.as_deref().unwrap_or("?"),
            p.args_text(),
            p.errno.as_deref().unwrap_or("?")
        ),
        other => write!(s, "{other}"),
    };
}

fn mmap_text(s: &mut String, e: &MmapCall) {
    let _ = write!(
        s,
        "mmap({}, {}, {}, {}, {}<{}>, {}) = {}",
        e.addr,
        e.length,
        e.prot,
        e.flags,
        e.fd,
        dev(&e.device),
        e.offset,
        e.errno
            .as_ref()
            .map_or_else(|| e.ret.clone(), |er| format!("-1 {er}"))
    );
}

pub fn note_text(clock: &Clock, mono_ns: u64, note: &Note<'_>) -> String {
    match note {
        // The start banner goes to stderr in text mode (main.rs).
        // The identity shows in the verdict.
        Note::Start(_) | Note::Process(_) => String::new(),
        Note::Warning { message, .. } => {
            format!("{} !! warning: {message}", time_of(clock, mono_ns))
        }
        Note::Lost {
            cpu,
            kind,
            count,
            total,
        } => format!(
            "{} !! lost {count} {kind} event(s) on CPU {cpu} ({total} in all): the ring buffer was full. \
             Raise --ringbuf-size or narrow with --pid.",
            time_of(clock, mono_ns)
        ),
        Note::Summary(sm) => sm.to_text(),
        Note::Stall(r) => format!(
            "{} !! stall: {}[{}/{}] {}",
            time_of(clock, mono_ns),
            r.comm,
            r.pid,
            r.tid,
            r.text
        ),
        Note::Hang(r) => {
            let mut s = format!(
                "{} !! hang: {}[{}/{}] {}\n   hint: {}",
                time_of(clock, mono_ns),
                crate::decode::terminal_safe(&r.comm),
                r.pid,
                r.tid,
                crate::decode::terminal_safe(&r.text),
                r.hint
            );
            let mut before = Vec::new();
            if let Some(l) = &r.last_launch {
                before.push(format!("last launch {} {:.1} s ago", l.call, l.ago_s));
            } else if !r.launches_hooked {
                before.push("launches not hooked (--libcuda-hooks launches)".to_owned());
            }
            if let Some(c) = &r.last_completed {
                before.push(format!("last completed {} {:.1} s ago", c.call, c.ago_s));
            }
            if !before.is_empty() {
                s.push_str(&format!("\n   before it: {}", before.join("; ")));
            }
            if !r.stack.is_empty() {
                s.push_str(&format!("\n   stack: {}", r.stack.join(" < ")));
            }
            if let Some(n) = &r.nccl {
                let ranks: Vec<String> = n
                    .ranks
                    .iter()
                    .map(|k| {
                        format!(
                            "rank {} {}[{}] at {} ({:.1} s ago)",
                            k.rank,
                            crate::decode::terminal_safe(&k.comm),
                            k.pid,
                            k.seq,
                            k.since_s
                        )
                    })
                    .collect();
                s.push_str(&format!(
                    "\n   communicator {} ({} rank{}): {}",
                    n.comm_hash,
                    n.nranks,
                    if n.nranks == 1 { "" } else { "s" },
                    ranks.join(", ")
                ));
            }
            s
        }
        Note::HangEnd(e) => format!(
            "{} .. hang over: {}[{}/{}] {}",
            time_of(clock, mono_ns),
            crate::decode::terminal_safe(&e.comm),
            e.pid,
            e.tid,
            e.text
        ),
    }
}

/// Stage transitions and verdicts, for people.
fn verdict_text(v: &crate::correlate::CuInit) -> String {
    // Every field below may hold what a traced process wrote (its name,
    // paths, command line, environment), or what a recording says it did:
    // nothing reaches the terminal raw.
    use crate::decode::terminal_safe as safe;
    // The first line says what happened (the evidence it rests on is in
    // the diagnoses below, once); the second how long, and how nvprobe
    // knows.
    let mut s = first_line(&format!(
        "== {}[{}] {} {}: {}",
        safe(&v.comm),
        v.pid,
        if v.cuinit_seen {
            "cuInit"
        } else {
            "CUDA start-up"
        },
        v.result,
        safe(v.headline.as_deref().unwrap_or(&v.text)),
    ));
    let _ = writeln!(
        s,
        "   took {:.1} ms, {} driver calls; seen by {}",
        v.total_ms,
        v.calls,
        safe(v.source)
    );
    for d in &v.detail {
        let _ = writeln!(s, "   {}", safe(d));
    }
    if let Some(p) = &v.process {
        let mut who = Vec::new();
        if let Some(e) = &p.exe {
            who.push(e.clone());
        }
        if let Some(c) = p.cmdline_text(120) {
            who.push(format!("`{c}`"));
        }
        if let Some(c) = &p.container {
            who.push(format!(
                "in {} {}{}",
                c.runtime,
                // (Its first 12 characters: an id read back from a
                // recording may be anything.)
                c.id.as_deref().map_or("", |i| &i
                    [..i.char_indices().nth(12).map_or(i.len(), |(at, _)| at)]),
                match (&c.pod_namespace, &c.pod_name, &c.pod_uid) {
                    (Some(ns), Some(n), _) => format!(
                        " (pod {ns}/{n}{})",
                        c.container_name
                            .as_deref()
                            .map_or(String::new(), |k| format!(", container {k}"))
                    ),
                    (_, _, Some(u)) => format!(" (pod {u})"),
                    _ => String::new(),
                }
            ));
        }
        for (k, val) in &p.env {
            who.push(format!("{k}={val}"));
        }
        if !who.is_empty() {
            let _ = writeln!(s, "   process: {}", safe(&who.join("; ")));
        }
    }
    for g in &v.gpus {
        let name = match (g.minor, &g.uuid) {
            (Some(m), Some(u)) => format!("/dev/nvidia{m} {u}"),
            (Some(m), None) => format!("/dev/nvidia{m}"),
            (None, Some(u)) => u.clone(),
            (None, None) => continue,
        };
        let mut what = Vec::new();
        if let Some(t) = g.opened_ms {
            what.push(format!("opened at {t:.1} ms"));
        }
        match (&g.register_result, g.registered_ms) {
            (_, Some(t)) => what.push(format!("registered with UVM at {t:.1} ms")),
            (Some(r), None) => what.push(format!("UVM registration returned {r}")),
            (None, None) => {}
        }
        let _ = writeln!(s, "   gpu {}: {}", safe(&name), safe(&what.join(", ")));
    }
    diagnosis_lines(&mut s, &v.diagnoses);
    s
}

/// "   ! id: evidence" and its hint, for each diagnosis.
fn diagnosis_lines(s: &mut String, diagnoses: &[crate::correlate::Diagnosis]) {
    use crate::decode::terminal_safe as safe;
    for d in diagnoses {
        let mark = match d.severity {
            DiagSeverity::Recovered | DiagSeverity::Info => "~",
            DiagSeverity::Error | DiagSeverity::Warning => "!",
        };
        let sev = match d.severity {
            DiagSeverity::Error => String::new(),
            other => format!(" ({other})"),
        };
        let _ = writeln!(
            s,
            "   {mark} {}{sev}: {}\n     hint: {}",
            d.id,
            safe(&d.evidence),
            safe(d.hint)
        );
    }
}

pub fn record_text(rec: &crate::correlate::Record) -> String {
    use crate::correlate::Record;
    use crate::decode::terminal_safe as safe;
    match rec {
        Record::Stage { pid, comm, hit } => format!(
            "== {}[{pid}] reached {} at {:.2} ms ({})\n",
            safe(comm),
            safe(hit.name),
            hit.at_ms,
            safe(&hit.via)
        ),
        Record::Signal(r) => format!("== {}[{}] signal {}\n", safe(&r.comm), r.pid, safe(&r.text)),
        Record::KernelLog(k) => {
            let who = match (&k.comm, k.pid) {
                (Some(c), Some(p)) => format!(" ({}[{p}])", safe(c)),
                (None, Some(p)) => format!(" (pid {p})"),
                _ => String::new(),
            };
            let mut s = format!("== kernel log{who}: {}", safe(&k.line.message));
            if let Some(a) = &k.seccomp {
                s.push_str(&format!(
                    " [seccomp: {} at {}()]",
                    a.action.as_str().replace('_', " "),
                    safe(&a.call)
                ));
            }
            if let Some(m) = &k.meaning {
                s.push_str(&format!(" [Xid: {}]", m.meaning));
            }
            if let Some(c) = &k.call {
                s.push_str(&format!(
                    " [{} {}{}]",
                    c.state.replace('_', " "),
                    safe(&c.func),
                    c.result_name.map_or(String::new(), |r| format!(" = {r}"))
                ));
            }
            s.push('\n');
            s
        }
        Record::Fault(f) => {
            let mut s = first_line(&format!(
                "== {}[{}] fault: {}",
                safe(&f.comm),
                f.pid,
                safe(f.headline.as_deref().unwrap_or(&f.text))
            ));
            if let Some(x) = &f.xid
                && let Some(m) = &x.meaning
            {
                let _ = writeln!(s, "   Xid {}: {}", x.number, m.meaning);
            }
            let _ = writeln!(
                s,
                "   {}: {}{}",
                f.class.as_str(),
                safe(&f.hint),
                if f.drain { " [drain the node]" } else { "" }
            );
            s
        }
        Record::Breakdown(b) => format!(
            "== {}[{}/{}] in the driver: {}\n",
            safe(&b.comm),
            b.pid,
            b.tid,
            safe(&b.text)
        ),
        Record::FirstContext(c) => {
            let mut s = first_line(&format!(
                "== {}[{}] first context {}: {}",
                safe(&c.comm),
                c.pid,
                if c.ok { "made" } else { "failed" },
                safe(c.headline.as_deref().unwrap_or(&c.text))
            ));
            diagnosis_lines(&mut s, &c.diagnoses);
            s
        }
        // Text shows the CUDA start-ups; the other classes (driver clients,
        // path lookups, helpers) are in the JSON.
        Record::Cuinit(v) if v.class != Class::Cuda => String::new(),
        Record::Cuinit(v) => verdict_text(v),
    }
}

/// A failed lookup into the run being held (or a new run); false when it
/// is a line of its own (no file name in its path).
fn fold_lookup(
    p: &mut super::encode::Parts,
    buf: &mut bytes::BytesMut,
    (mono_ns, ev, proc): (u64, &Event, &Proc),
    syscall: &str,
    path: &str,
    errno: Option<&str>,
    dur_ns: Option<u64>,
) -> bool {
    use super::fold::{Lookup, Run};
    let l = Lookup {
        tid: proc.tid,
        syscall,
        path,
        errno: errno.unwrap_or("?"),
        dur_ns,
        at: mono_ns,
    };
    if p.run.as_mut().is_some_and(|r| r.extend(&l)) {
        return true;
    }
    let prefix = format!("{} {} ", time_of(&p.clock, mono_ns), who(proc));
    // A look at a directory alone so far: the thread's next lookup is the
    // search it was made in, its own line kept.
    if let Some(r) = p.run.as_mut().filter(|r| r.is_probe_only())
        && r.adopt(&l, prefix.clone(), event_line(&p.clock, mono_ns, ev))
    {
        return true;
    }
    let Some(run) = Run::start(&l, prefix, event_line(&p.clock, mono_ns, ev), (mono_ns, ev)) else {
        return false;
    };
    super::encode::Encoder::flush(&Text, p, buf);
    p.run = Some(run);
    true
}

/// Text, for people: strace-like lines, the records' own lines.
#[derive(Debug)]
pub struct Text;

impl super::encode::Encoder for Text {
    fn event(
        &self,
        p: &mut super::encode::Parts,
        buf: &mut bytes::BytesMut,
        mono_ns: u64,
        ev: &Event,
    ) -> std::io::Result<()> {
        use bytes::BufMut as _;
        // A failed start-up call that is the path call just written (the
        // loader's lookups: every one is both) is one line, not two.
        let last = p.last_failed_path.take();
        let batch_start = std::mem::take(&mut p.batch_start);
        match ev {
            Event::Open(c) | Event::Stat(c) | Event::Access(c) if c.ret < 0 => {
                p.last_failed_path = Some((c.proc.tid, c.syscall, c.path.clone(), c.errno.clone()));
                if c.mismatch.is_none()
                    && c.device.is_none()
                    && fold_lookup(
                        p,
                        buf,
                        (mono_ns, ev, &c.proc),
                        c.syscall,
                        &c.path,
                        c.errno.as_deref(),
                        Some(c.duration_ns),
                    )
                {
                    return Ok(());
                }
            }
            Event::Proc(c) if c.op == ProcKind::CallFailed => {
                if let (Some((tid, call, path, errno)), Some(cp)) = (&last, &c.path)
                    && *tid == c.proc.tid
                    && c.call.as_deref() == Some(*call)
                    && path == cp
                    && *errno == c.errno
                {
                    // Written (or held in a run) with its path call.
                    p.last_failed_path = last;
                    return Ok(());
                }
                if let (Some(run), Some(call), Some(cp)) = (&p.run, &c.call, &c.path)
                    && run.probes_last_dir(c.proc.tid, call, cp)
                {
                    p.last_failed_path = last;
                    return Ok(());
                }
                // The batch's first line, and the loader's kind of look at
                // a directory: the batch before may have ended in its
                // search, which its writer then joins (`OpenRun`).
                if p.run.is_none()
                    && batch_start
                    && c.errno.as_deref() == Some("ENOENT")
                    && let (Some(call), Some(cp)) = (&c.call, &c.path)
                    && let Some(run) = super::fold::Run::start_probe(
                        &super::fold::Lookup {
                            tid: c.proc.tid,
                            syscall: call,
                            path: cp,
                            errno: c.errno.as_deref().unwrap_or("?"),
                            dur_ns: None,
                            at: mono_ns,
                        },
                        format!("{} {} ", time_of(&p.clock, mono_ns), who(&c.proc)),
                        event_line(&p.clock, mono_ns, ev),
                        (mono_ns, ev),
                    )
                {
                    p.run = Some(run);
                    return Ok(());
                }
                // A failed call of a start-up on a path nvprobe does not
                // trace otherwise (a loader's search for another library,
                // an interpreter's for a folder): a lookup too.
                if let (Some(call), Some(cp)) = (&c.call, &c.path)
                    && fold_lookup(
                        p,
                        buf,
                        (mono_ns, ev, &c.proc),
                        call,
                        cp,
                        c.errno.as_deref(),
                        None,
                    )
                {
                    return Ok(());
                }
            }
            _ => {}
        }
        self.flush(p, buf);
        buf.put_slice(event_line(&p.clock, mono_ns, ev).as_bytes());
        buf.put_u8(b'\n');
        Ok(())
    }

    fn flush(&self, p: &mut super::encode::Parts, buf: &mut bytes::BytesMut) {
        use bytes::BufMut as _;
        // Something else of the batch came first (a record, a note, an
        // event the level does not write).
        p.batch_start = false;
        if let Some(run) = p.run.take() {
            // First in its buffer (a batch's): what a run the batch before
            // ended in may go on with (`OpenRun`).
            let lead = buf
                .is_empty()
                .then(|| super::fold::OpenRun(Box::new(run.clone())));
            buf.put_slice(run.line(dur).as_bytes());
            buf.put_u8(b'\n');
            let (mono_ns, first) = run.into_first();
            p.flushed = Some(super::fold::Flushed {
                end: buf.len(),
                mono_ns,
                first,
                lead,
            });
        }
    }

    fn record(
        &self,
        p: &mut super::encode::Parts,
        buf: &mut bytes::BytesMut,
        _: u64,
        rec: &crate::correlate::Record,
    ) -> std::io::Result<()> {
        use bytes::BufMut as _;
        self.flush(p, buf);
        buf.put_slice(record_text(rec).as_bytes());
        Ok(())
    }

    fn note(
        &self,
        p: &mut super::encode::Parts,
        buf: &mut bytes::BytesMut,
        mono_ns: u64,
        note: &Note<'_>,
    ) -> std::io::Result<()> {
        use bytes::BufMut as _;
        self.flush(p, buf);
        let s = note_text(&p.clock, mono_ns, note);
        if !s.is_empty() {
            buf.put_slice(s.as_bytes());
            if !s.ends_with('\n') {
                buf.put_u8(b'\n');
            }
        }
        Ok(())
    }

    fn selective(&self) -> bool {
        true
    }
}
