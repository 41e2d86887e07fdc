//! The bpf(2) commands aya 0.14 has no API for: loading a program with an
//! expected attach type (a uprobe_multi program), creating a uprobe_multi
//! link, and pinning an object under a path. The attribute layouts are the
//! kernel's (include/uapi/linux/bpf.h, `union bpf_attr`); a test checks
//! each field's offset against aya-obj's generated bindings of that header.

use std::{
    ffi::CString,
    io,
    os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
};

use aya_obj::generated::{bpf_attach_type, bpf_cmd, bpf_insn, bpf_prog_type};

/// `BPF_PROG_LOAD`'s part of `union bpf_attr`, up to
/// `expected_attach_type` (the kernel zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `BPF_LINK_CREATE` with its `uprobe_multi` member.
#[repr(C)]
#[derive(Default)]
struct LinkCreateUprobeMulti {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    path: u64,
    offsets: u64,
    ref_ctr_offsets: u64,
    cookies: u64,
    cnt: u32,
    multi_flags: u32,
    pid: u32,
    /// Written as zero: the kernel refuses (EINVAL) non-zero bytes past the
    /// fields it knows, and implicit padding would be left uninitialised.
    _pad: u32,
}

/// `BPF_OBJ_PIN`.
#[repr(C)]
#[derive(Default)]
struct ObjPin {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
    path_fd: i32,
    /// Zero, for the reason in `LinkCreateUprobeMulti`.
    _pad: u32,
}

/// `BPF_PROG_QUERY`, up to `prog_cnt` (the kernel zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct ProgQuery {
    target_fd: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    prog_cnt: u32,
    /// Zero, for the reason in `LinkCreateUprobeMulti`.
    _pad: u32,
}

/// `BPF_PROG_ATTACH`, up to `replace_bpf_fd`.
#[repr(C)]
#[derive(Default)]
struct ProgAttach {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
    /// Zero, for the reason in `LinkCreateUprobeMulti`.
    _pad: u32,
}

/// `BPF_CGROUP_DEVICE`: the device controller of cgroup v2.
const CGROUP_DEVICE: u32 = bpf_attach_type::BPF_CGROUP_DEVICE as u32;

/// How many device programs (`BPF_CGROUP_DEVICE`) decide the device
/// accesses of the cgroup open at `cgroup` (a directory of the cgroup v2
/// hierarchy): its own and its ancestors' (`BPF_F_QUERY_EFFECTIVE`).
pub fn cgroup_device_programs(cgroup: BorrowedFd<'_>) -> io::Result<u32> {
    let mut attr = ProgQuery {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_type: CGROUP_DEVICE,
        query_flags: aya_obj::generated::BPF_F_QUERY_EFFECTIVE,
        ..ProgQuery::default()
    };
    bpf(bpf_cmd::BPF_PROG_QUERY, &mut attr)?;
    Ok(attr.prog_cnt)
}

/// Load `insns` as a cgroup device program and attach it to the cgroup
/// open at `cgroup`, beside the programs already there
/// (`BPF_F_ALLOW_MULTI`). The attachment holds the program: it stays
/// until the cgroup is removed. (The test tools' device-cgroup case.)
pub fn attach_device_program(cgroup: BorrowedFd<'_>, insns: &[bpf_insn]) -> io::Result<()> {
    let prog = load_raw(bpf_prog_type::BPF_PROG_TYPE_CGROUP_DEVICE, insns)?;
    let mut attr = ProgAttach {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: CGROUP_DEVICE,
        attach_flags: aya_obj::generated::BPF_F_ALLOW_MULTI,
        ..ProgAttach::default()
    };
    bpf(bpf_cmd::BPF_PROG_ATTACH, &mut attr).map(|_| ())
}

/// A tracepoint program of raw instructions (the benchmarks' empty
/// program: the cost of a program on a tracepoint, with nothing in it).
pub fn load_tracepoint_program(insns: &[bpf_insn]) -> io::Result<OwnedFd> {
    load_raw(bpf_prog_type::BPF_PROG_TYPE_TRACEPOINT, insns)
}

/// Load `insns` as a raw tracepoint program (for a benchmark's empty
/// programs: `nvbench empty-tracepoints --all`).
pub fn load_raw_tracepoint_program(insns: &[bpf_insn]) -> io::Result<OwnedFd> {
    load_raw(bpf_prog_type::BPF_PROG_TYPE_RAW_TRACEPOINT, insns)
}

/// `BPF_RAW_TRACEPOINT_OPEN`.
#[repr(C)]
#[derive(Default)]
struct RawTracepointOpen {
    name: u64,
    prog_fd: u32,
    /// Zero, for the reason in `LinkCreateUprobeMulti`.
    _pad: u32,
}

/// Attach a raw tracepoint program to tracepoint `name` (e.g. "sys_exit");
/// the link holds it while open.
pub fn raw_tracepoint_open(prog: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let name = CString::new(name).map_err(io::Error::other)?;
    let mut attr = RawTracepointOpen {
        name: name.as_ptr() as u64,
        prog_fd: prog.as_raw_fd() as u32,
        _pad: 0,
    };
    Ok(owned(bpf(bpf_cmd::BPF_RAW_TRACEPOINT_OPEN, &mut attr)?))
}

/// `BPF_PROG_TEST_RUN`, up to `batch_size` (with its padding written).
#[repr(C)]
#[derive(Default)]
struct ProgTestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    /// Zero, for the reason in `LinkCreateUprobeMulti`.
    _pad: u32,
}

/// This process's id as the kernel's initial pid namespace numbers it
/// (what `bpf_get_current_pid_tgid` gives the programs), which
/// `process::id()` is not where nvprobe runs in a child pid namespace. A
/// raw tracepoint program that returns its tgid, run once by
/// `BPF_PROG_TEST_RUN` on this task (no attach, no other process sees it).
pub fn host_tgid() -> io::Result<u32> {
    let insn = |code: u8, dst: u8, imm: i32| bpf_insn {
        code,
        _bitfield_align_1: [],
        _bitfield_1: bpf_insn::new_bitfield_1(dst, 0),
        off: 0,
        imm,
    };
    // call bpf_get_current_pid_tgid (14); r0 >>= 32; exit
    let prog = load_raw(
        bpf_prog_type::BPF_PROG_TYPE_RAW_TRACEPOINT,
        &[insn(0x85, 0, 14), insn(0x77, 0, 32), insn(0x95, 0, 0)],
    )?;
    let ctx = [0u64; 1];
    let mut attr = ProgTestRun {
        prog_fd: prog.as_raw_fd() as u32,
        ctx_size_in: size_of_val(&ctx) as u32,
        ctx_in: ctx.as_ptr() as u64,
        ..ProgTestRun::default()
    };
    bpf(bpf_cmd::BPF_PROG_TEST_RUN, &mut attr)?;
    if attr.retval == 0 {
        return Err(io::Error::other("the test run returned no tgid"));
    }
    Ok(attr.retval)
}

/// A GPL program of `prog_type` made of raw instructions.
fn load_raw(prog_type: bpf_prog_type, insns: &[bpf_insn]) -> io::Result<OwnedFd> {
    let license = CString::new("GPL").map_err(io::Error::other)?;
    let mut load = ProgLoad {
        prog_type: prog_type as u32,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..ProgLoad::default()
    };
    Ok(owned(bpf(bpf_cmd::BPF_PROG_LOAD, &mut load)?))
}

/// `BPF_F_UPROBE_MULTI_RETURN`: the link's probes are return probes.
const UPROBE_MULTI_RETURN: u32 = aya_obj::generated::BPF_F_UPROBE_MULTI_RETURN;

fn bpf<T>(cmd: bpf_cmd, attr: &mut T) -> io::Result<i64> {
    // SAFETY: `attr` is a live #[repr(C)] prefix of `union bpf_attr` for
    // `cmd`, and its size is passed with it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            (attr as *mut T).cast::<libc::c_void>(),
            size_of::<T>() as libc::c_long,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned(r: i64) -> OwnedFd {
    // SAFETY: the kernel has just returned this new descriptor to us.
    unsafe { OwnedFd::from_raw_fd(r as i32) }
}

/// Load `insns` as a kprobe-type program whose links will be uprobe_multi
/// links (the kernel only lets such a program attach that way). On a
/// verifier refusal the error carries the end of the verifier's log.
pub fn load_uprobe_multi_program(
    name: &str,
    insns: &[bpf_insn],
    license: &CString,
) -> io::Result<OwnedFd> {
    load_program(
        name,
        insns,
        license,
        Some(bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32),
    )
}

fn load_program(
    name: &str,
    insns: &[bpf_insn],
    license: &CString,
    expected: Option<u32>,
) -> io::Result<OwnedFd> {
    let mut prog_name = [0u8; 16];
    for (d, s) in prog_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    let mut attr = ProgLoad {
        prog_type: bpf_prog_type::BPF_PROG_TYPE_KPROBE as u32,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name,
        expected_attach_type: expected.unwrap_or(0),
        ..ProgLoad::default()
    };
    match bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => Ok(owned(fd)),
        Err(first) => {
            // Again with a log, to say why.
            let mut log = vec![0u8; 1 << 20];
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            match bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr) {
                Ok(fd) => Ok(owned(fd)),
                Err(_) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    let text = String::from_utf8_lossy(&log[..end]);
                    let tail: Vec<&str> = text.lines().rev().take(4).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    Err(io::Error::new(
                        first.kind(),
                        if tail.is_empty() {
                            first.to_string()
                        } else {
                            format!("{first}: {}", tail.join(" / "))
                        },
                    ))
                }
            }
        }
    }
}

/// One uprobe_multi link: `prog` on every `(file offset, cookie)` of the
/// file `path` (any process), as return probes when `ret`. One call,
/// whatever the number of functions; its removal waits for one grace
/// period, not one per function.
pub fn uprobe_multi_link(
    prog: BorrowedFd<'_>,
    path: &str,
    points: &[(u64, u64)],
    ret: bool,
) -> io::Result<OwnedFd> {
    let path = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let offsets: Vec<u64> = points.iter().map(|p| p.0).collect();
    let cookies: Vec<u64> = points.iter().map(|p| p.1).collect();
    let mut attr = LinkCreateUprobeMulti {
        prog_fd: prog.as_raw_fd() as u32,
        attach_type: bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32,
        path: path.as_ptr() as u64,
        offsets: offsets.as_ptr() as u64,
        cookies: cookies.as_ptr() as u64,
        cnt: points.len() as u32,
        multi_flags: if ret { UPROBE_MULTI_RETURN } else { 0 },
        ..LinkCreateUprobeMulti::default()
    };
    bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr).map(owned)
}

/// Pin the BPF object `fd` at `path` (which must lie on a bpffs).
pub fn pin(fd: BorrowedFd<'_>, path: &str) -> io::Result<()> {
    let path = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut attr = ObjPin {
        pathname: path.as_ptr() as u64,
        bpf_fd: fd.as_raw_fd() as u32,
        ..ObjPin::default()
    };
    bpf(bpf_cmd::BPF_OBJ_PIN, &mut attr).map(|_| ())
}

/// `BPF_LINK_CREATE` for a perf event, with its cookie.
#[repr(C)]
#[derive(Default)]
struct LinkCreatePerf {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    bpf_cookie: u64,
}

/// The uprobe PMU: its perf type and the config bit of a return probe
/// (/sys/bus/event_source/devices/uprobe, as perf and libbpf read it).
pub fn uprobe_pmu() -> io::Result<(u32, u32)> {
    let dir = std::path::Path::new("/sys/bus/event_source/devices/uprobe");
    let ty = std::fs::read_to_string(dir.join("type"))?
        .trim()
        .parse::<u32>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let bit = std::fs::read_to_string(dir.join("format/retprobe"))?
        .trim()
        .strip_prefix("config:")
        .and_then(|b| b.parse::<u32>().ok())
        .filter(|b| *b < 64)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "format/retprobe"))?;
    Ok((ty, bit))
}

/// perf_event_open of `attr` (struct perf_event_attr as 16 words, its
/// size filled in here) for every process, on CPU 0.
fn perf_event_open(mut attr: [u64; 16]) -> io::Result<OwnedFd> {
    // struct perf_event_attr (include/uapi/linux/perf_event.h): type at 0,
    // size at 4, config at 8, config1 at 56, config2 at 64, wakeup_events
    // (1, as aya sets it) at 48; everything else zero: enabled, and no
    // sampling (a sample_period would make the kernel build a perf sample
    // whenever a program returns non-zero).
    attr[0] |= (size_of_val(&attr) as u64) << 32;
    attr[6] = 1;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: perf_event_open on a live, zero-padded attribute block; any
    // pointer in it outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            -1 as libc::pid_t,
            0 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(owned(r))
}

/// A perf-event uprobe (a return probe when `ret`) at `offset` of `path`,
/// for every process; nothing attached to it yet. This is what any classic
/// tracer (perf, bpftrace without uprobe_multi) asks of the kernel, and it
/// takes the kernel's tracing lock.
pub fn perf_uprobe(pmu: (u32, u32), path: &str, offset: u64, ret: bool) -> io::Result<OwnedFd> {
    let path = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut attr = [0u64; 16];
    attr[0] = u64::from(pmu.0);
    attr[1] = if ret { 1u64 << pmu.1 } else { 0 };
    attr[7] = path.as_ptr() as u64;
    attr[8] = offset;
    perf_event_open(attr)
}

/// The tracepoint whose tracefs id is `id` (events/CAT/NAME/id), as a perf
/// event for a BPF program.
pub fn perf_tracepoint(id: u64) -> io::Result<OwnedFd> {
    const PERF_TYPE_TRACEPOINT: u64 = 2;
    let mut attr = [0u64; 16];
    attr[0] = PERF_TYPE_TRACEPOINT;
    attr[1] = id;
    perf_event_open(attr)
}

/// `prog` attached to the perf event `event` through a BPF link carrying
/// `cookie`; the link holds the event, whose descriptor closes here. On
/// kernels before 5.15 (no perf-event links: EINVAL) the program is set on
/// the event with PERF_EVENT_IOC_SET_BPF instead (no cookie there) and the
/// event's own descriptor is returned: it cannot be pinned, and closing it
/// detaches the program.
pub fn perf_event_link(prog: BorrowedFd<'_>, event: OwnedFd, cookie: u64) -> io::Result<OwnedFd> {
    let mut link = LinkCreatePerf {
        prog_fd: prog.as_raw_fd() as u32,
        target_fd: event.as_raw_fd() as u32,
        attach_type: bpf_attach_type::BPF_PERF_EVENT as u32,
        bpf_cookie: cookie,
        ..LinkCreatePerf::default()
    };
    match bpf(bpf_cmd::BPF_LINK_CREATE, &mut link) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) && cookie == 0 => {
            // include/uapi/linux/perf_event.h: _IOW('$', 8, __u32), _IO('$', 0).
            const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
            const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
            // SAFETY: ioctls on a perf event this function owns.
            unsafe {
                if libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, prog.as_raw_fd()) != 0
                    || libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(event)
        }
        Err(e) => Err(e),
    }
}

/// The older way, one perf event per function: [`perf_uprobe`] with
/// `prog` attached through a BPF link carrying `cookie`. Each one's
/// removal waits for a grace period under the kernel's tracing lock.
pub fn perf_uprobe_link(
    prog: BorrowedFd<'_>,
    pmu: (u32, u32),
    path: &str,
    offset: u64,
    ret: bool,
    cookie: u64,
) -> io::Result<OwnedFd> {
    perf_event_link(prog, perf_uprobe(pmu, path, offset, ret)?, cookie)
}

/// Load `insns` as a kprobe-type program for perf-event uprobes.
pub fn load_uprobe_program(
    name: &str,
    insns: &[bpf_insn],
    license: &CString,
) -> io::Result<OwnedFd> {
    load_program(name, insns, license, None)
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use aya_obj::generated::{
        bpf_attr__bindgen_ty_4 as Load, bpf_attr__bindgen_ty_5 as Pin,
        bpf_attr__bindgen_ty_6 as Attach, bpf_attr__bindgen_ty_7 as TestRun,
        bpf_attr__bindgen_ty_10 as Query, bpf_attr__bindgen_ty_11 as RawTp,
        bpf_attr__bindgen_ty_14 as Link,
        bpf_attr__bindgen_ty_14__bindgen_ty_3__bindgen_ty_7 as Multi,
    };

    use super::*;

    /// No implicit padding (uninitialised bytes the kernel would refuse):
    /// each struct's size is the sum of its fields'.
    #[test]
    fn attributes_have_no_implicit_padding() {
        assert_eq!(
            size_of::<ProgLoad>(),
            4 * 2 + 8 * 2 + 4 * 2 + 8 + 4 * 2 + 16 + 4 * 2
        );
        assert_eq!(size_of::<LinkCreateUprobeMulti>(), 4 * 4 + 8 * 4 + 4 * 4);
        assert_eq!(size_of::<LinkCreatePerf>(), 4 * 4 + 8);
        assert_eq!(size_of::<ObjPin>(), 8 + 4 * 4);
        assert_eq!(size_of::<ProgQuery>(), 4 * 4 + 8 + 4 * 2);
        assert_eq!(size_of::<ProgAttach>(), 4 * 6);
        assert_eq!(size_of::<RawTracepointOpen>(), 8 + 4 * 2);
        assert_eq!(
            size_of::<ProgTestRun>(),
            4 * 4 + 8 * 2 + 4 * 4 + 8 * 2 + 4 * 4
        );
    }

    /// Each field we write sits where the kernel header puts it (aya-obj's
    /// bindings are generated from include/uapi/linux/bpf.h; every member
    /// of `union bpf_attr` starts at 0).
    #[test]
    fn attribute_layouts_are_the_kernels() {
        assert_eq!(offset_of!(RawTracepointOpen, name), offset_of!(RawTp, name));
        assert_eq!(
            offset_of!(RawTracepointOpen, prog_fd),
            offset_of!(RawTp, prog_fd)
        );
        assert_eq!(offset_of!(ProgLoad, insn_cnt), offset_of!(Load, insn_cnt));
        assert_eq!(offset_of!(ProgLoad, insns), offset_of!(Load, insns));
        assert_eq!(offset_of!(ProgLoad, license), offset_of!(Load, license));
        assert_eq!(offset_of!(ProgLoad, log_buf), offset_of!(Load, log_buf));
        assert_eq!(offset_of!(ProgLoad, prog_name), offset_of!(Load, prog_name));
        assert_eq!(
            offset_of!(ProgLoad, expected_attach_type),
            offset_of!(Load, expected_attach_type)
        );
        assert_eq!(
            offset_of!(LinkCreateUprobeMulti, attach_type),
            offset_of!(Link, attach_type)
        );
        let multi = offset_of!(Link, __bindgen_anon_3);
        for (mine, theirs) in [
            (
                offset_of!(LinkCreateUprobeMulti, path),
                offset_of!(Multi, path),
            ),
            (
                offset_of!(LinkCreateUprobeMulti, offsets),
                offset_of!(Multi, offsets),
            ),
            (
                offset_of!(LinkCreateUprobeMulti, cookies),
                offset_of!(Multi, cookies),
            ),
            (
                offset_of!(LinkCreateUprobeMulti, cnt),
                offset_of!(Multi, cnt),
            ),
            (
                offset_of!(LinkCreateUprobeMulti, multi_flags),
                offset_of!(Multi, flags),
            ),
            (
                offset_of!(LinkCreateUprobeMulti, pid),
                offset_of!(Multi, pid),
            ),
        ] {
            assert_eq!(mine, multi + theirs);
        }
        let perf = offset_of!(Link, __bindgen_anon_3);
        assert_eq!(offset_of!(LinkCreatePerf, bpf_cookie), perf);
        assert_eq!(offset_of!(ProgTestRun, retval), offset_of!(TestRun, retval));
        assert_eq!(
            offset_of!(ProgTestRun, ctx_size_in),
            offset_of!(TestRun, ctx_size_in)
        );
        assert_eq!(offset_of!(ProgTestRun, ctx_in), offset_of!(TestRun, ctx_in));
        assert_eq!(offset_of!(ProgTestRun, flags), offset_of!(TestRun, flags));
        assert_eq!(
            offset_of!(ProgTestRun, batch_size),
            offset_of!(TestRun, batch_size)
        );
        assert_eq!(offset_of!(ObjPin, bpf_fd), offset_of!(Pin, bpf_fd));
        assert_eq!(offset_of!(ObjPin, file_flags), offset_of!(Pin, file_flags));
        assert_eq!(offset_of!(ObjPin, path_fd), offset_of!(Pin, path_fd));
        assert_eq!(
            offset_of!(ProgQuery, attach_type),
            offset_of!(Query, attach_type)
        );
        assert_eq!(
            offset_of!(ProgQuery, query_flags),
            offset_of!(Query, query_flags)
        );
        assert_eq!(offset_of!(ProgQuery, prog_ids), offset_of!(Query, prog_ids));
        // prog_cnt is the first member of the union after prog_ids.
        assert_eq!(
            offset_of!(ProgQuery, prog_cnt),
            offset_of!(Query, __bindgen_anon_2)
        );
        assert_eq!(
            offset_of!(ProgAttach, attach_bpf_fd),
            offset_of!(Attach, attach_bpf_fd)
        );
        assert_eq!(
            offset_of!(ProgAttach, attach_type),
            offset_of!(Attach, attach_type)
        );
        assert_eq!(
            offset_of!(ProgAttach, attach_flags),
            offset_of!(Attach, attach_flags)
        );
        assert_eq!(
            offset_of!(ProgAttach, replace_bpf_fd),
            offset_of!(Attach, replace_bpf_fd)
        );
    }
}
