//! A descriptor of the start-up's closed or replaced by another part of
//! the program, and a mapping refused by the memory-lock limit: the
//! verdicts say what took the descriptor or why mmap answered EAGAIN, and
//! no other rule (no visible device, a second driver, a seccomp filter)
//! claims the failure. Constructed streams; the real ones are in
//! nvprobe/model/tests/replay_unseen10_cases.rs.

use super::{
    tests::{open, proc_},
    tests_startcalls::{MIB, failed_call, failed_init, only, with_limits},
    *,
};
use crate::attribution::{Limits, ProcessInfo};
use crate::correlate::DiagId;
use crate::decode::{Device, DeviceKind, Event, FdCall};

/// pid 7's open of /dev/nvidiactl at `t` ms, giving fd 8.
fn ctl_open(t: u64) -> Event {
    let Event::Open(mut p) = open(t, "/dev/nvidiactl", "ctl") else {
        unreachable!("open makes an open record")
    };
    p.ret = 8;
    p.fd = Some(8);
    Event::Open(p)
}

/// A close-like record of thread 9 (pid 7) at `t` ms.
fn fd_call(
    t: u64,
    syscall: &'static str,
    fd: i32,
    close: bool,
    f: impl FnOnce(&mut FdCall),
) -> Event {
    let mut c = FdCall {
        proc: crate::decode::Proc {
            tid: 9,
            comm: "closer".into(),
            ..proc_()
        },
        syscall,
        fd,
        device: Device {
            major: 0,
            minor: 0,
            kind: DeviceKind::None,
            node: None,
            extra: false,
        },
        newfd: None,
        last_fd: None,
        range_flags: None,
        replaced: false,
        start_ns: t * 1_000_000,
        duration_ns: 1000,
        ret: 0,
        errno: None,
        ok: true,
        raw: None,
    };
    f(&mut c);
    if close {
        Event::Close(c)
    } else {
        Event::Dup(c)
    }
}

/// The kernel side's record of an RM control on fd 8 that failed with
/// `errno`.
fn ioctl_failed(t: u64, errno: &str) -> Event {
    ioctl_failed_with(t, errno, 0xc020_462a)
}

/// The same for the ioctl `request`.
fn ioctl_failed_with(t: u64, errno: &str, request: u64) -> Event {
    let Event::Proc(p) = failed_call(t, "ioctl", errno) else {
        unreachable!("failed_call makes a proc record")
    };
    Event::Proc(crate::decode::ProcCall {
        args: Some(vec![8, request]),
        ..p
    })
}

/// No verdict says a descriptor was taken.
fn no_descriptor_closed(v: &[CuInit]) {
    assert!(
        v[0].diagnoses
            .iter()
            .all(|d| d.id != DiagId::DescriptorClosed),
        "{:#?}",
        v[0].diagnoses
    );
}

const NO_DEVICE: (i64, &str) = (100, "CUDA_ERROR_NO_DEVICE");

fn closed_by(gone: Event, errno: &str) -> Vec<CuInit> {
    failed_init(
        ProcessInfo::default(),
        &[ctl_open(1), gone, ioctl_failed(2, errno)],
        NO_DEVICE,
    )
}

#[test]
fn a_close_range_of_another_thread_is_what_took_libcudas_descriptor() {
    let range = fd_call(1, "close_range", 3, true, |c| {
        c.last_fd = Some(199);
        c.range_flags = Some("0".into());
    });
    let v = closed_by(range, "EBADF");
    let d = only(&v);
    assert_eq!(d.id, DiagId::DescriptorClosed);
    assert_eq!(
        d.evidence,
        "cuInit returned CUDA_ERROR_NO_DEVICE (100): fd 8 (/dev/nvidiactl, opened at 0.00 ms) was closed \
(close_range(3, 199)) at 0.00 ms by thread 9 (closer), and the start-up's next call on it, NV_ESC_RM_CONTROL at 1.00 ms \
(thread 7), failed with EBADF: the kernel answered it without reaching the driver"
    );
    assert!(
        v[0].text
            .ends_with(&d.evidence[d.evidence.find(": fd").unwrap() + 2..]),
        "{}",
        v[0].text
    );
}

#[test]
fn a_range_only_marked_close_on_exec_took_nothing() {
    let range = fd_call(1, "close_range", 3, true, |c| {
        c.last_fd = Some(199);
        c.range_flags = Some("CLOSE_RANGE_CLOEXEC".into());
    });
    let v = closed_by(range, "EBADF");
    let ids: Vec<DiagId> = v[0].diagnoses.iter().map(|d| d.id).collect();
    // Still open after the call: EBADF without a close seen is said as
    // such, not as the range's doing.
    assert_eq!(ids, [DiagId::DescriptorClosed]);
    assert!(
        v[0].diagnoses[0]
            .evidence
            .contains("nvprobe saw no close of it"),
        "{:?}",
        v[0].diagnoses[0]
    );
}

#[test]
fn a_dup2_onto_libcudas_descriptor_is_named_for_the_error_the_new_file_gives() {
    let dup = fd_call(1, "dup2", 9, false, |c| {
        c.replaced = true;
        c.newfd = Some(8);
        c.ret = 8;
        c.device.kind = DeviceKind::Ctl;
        c.device.major = 195;
        c.device.minor = 255;
    });
    let v = closed_by(dup, "ENOTTY");
    let d = only(&v);
    assert_eq!(d.id, DiagId::DescriptorClosed);
    assert!(
        d.evidence.contains(
            "was replaced (dup2(9, 8), from a file that is not an NVIDIA node) at 0.00 ms by thread 9 (closer), and the \
start-up's next call on it, NV_ESC_RM_CONTROL at 1.00 ms (thread 7), failed with ENOTTY"
        ),
        "{}",
        d.evidence
    );
}

#[test]
fn a_close_then_a_new_open_at_the_same_number_is_not_the_cause() {
    let close = fd_call(1, "close", 8, true, |_| {});
    let v = failed_init(
        ProcessInfo::default(),
        &[ctl_open(0), close, ctl_open(1), ioctl_failed(2, "EINVAL")],
        NO_DEVICE,
    );
    no_descriptor_closed(&v);
}

/// One failed mmap of `len` bytes with `flags` in cuInit, under RLIMIT_MEMLOCK 8 MiB.
fn refused_lock(flags: u64, errno: &str) -> Diagnosis {
    let Event::Proc(p) = failed_call(1, "mmap", errno) else {
        unreachable!("failed_call makes a proc record")
    };
    let ev = Event::Proc(crate::decode::ProcCall {
        args: Some(vec![0, 8 * MIB, 0, flags]),
        ..p
    });
    let l = Limits {
        memlock: Some((Some(8 * MIB), Some(8 * MIB))),
        ..Limits::default()
    };
    only(&failed_init(
        with_limits(l),
        &[ev],
        (304, "CUDA_ERROR_OPERATING_SYSTEM"),
    ))
    .clone()
}

#[test]
fn an_anonymous_mapping_refused_with_eagain_is_the_memory_lock_limit() {
    let d = refused_lock(0x22, "EAGAIN");
    assert_eq!(d.id, DiagId::LockLimit);
    assert!(
        d.evidence.ends_with(
            "mmap() failed with EAGAIN (mapping memory): the memory-lock limit: the kernel's mmap answers EAGAIN only for a \
mapping that is to be locked when the process's locked memory would pass RLIMIT_MEMLOCK, 8 MiB (8388608 bytes) when \
cuInit had failed, and it lacks CAP_IPC_LOCK; it did not ask MAP_LOCKED, so the process locks every new mapping \
(mlockall with MCL_FUTURE); the call asked for 8 MiB (8388608 bytes) (PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS)"
        ),
        "{}",
        d.evidence
    );
    let locked = refused_lock(0x2022, "EAGAIN");
    assert!(
        locked.evidence.contains("; it asked MAP_LOCKED;"),
        "{}",
        locked.evidence
    );
}

#[test]
fn a_files_mapping_refused_with_eagain_is_not_said_to_be_the_lock_limit() {
    // MAP_PRIVATE of a file: its driver may answer EAGAIN itself.
    let d = refused_lock(0x2, "EAGAIN");
    assert_eq!(d.id, DiagId::StartCallRefused, "{d:?}");
}

#[test]
fn a_close_by_the_thread_that_then_used_the_number_is_its_own_clean_up() {
    // libcuda's own clean-up after a refusal: it closes its descriptor,
    // then frees what it held on it (EBADF).
    let own = fd_call(1, "close", 8, true, |c| {
        c.proc.tid = 7;
    });
    let v = closed_by(own, "EBADF");
    no_descriptor_closed(&v);
    // Another thread's close of it is a taking.
    let other = fd_call(1, "close", 8, true, |_| {});
    let v = closed_by(other, "EBADF");
    assert_eq!(only(&v).id, DiagId::DescriptorClosed);
    assert!(
        only(&v)
            .evidence
            .contains("was closed (close(8)) at 0.00 ms by thread 9 (closer)")
    );
}

#[test]
fn a_number_a_driver_file_took_again_is_forgotten() {
    // /proc/driver/nvidia/params opened at the number: no NVIDIA node's
    // descriptor any more, and its EBADF later is none of this rule's.
    let Event::Open(mut params) = open(1, "/proc/driver/nvidia/params", "ctl") else {
        unreachable!("open makes an open record")
    };
    params.device = None;
    params.fd = Some(8);
    let range = fd_call(1, "close_range", 3, true, |c| {
        c.last_fd = Some(199);
    });
    let v = failed_init(
        ProcessInfo::default(),
        &[
            ctl_open(0),
            range,
            Event::Open(params),
            ioctl_failed(2, "EBADF"),
        ],
        NO_DEVICE,
    );
    no_descriptor_closed(&v);
}

#[test]
fn a_programs_own_ioctl_on_a_number_it_redirected_is_not_libcudas() {
    let dup = fd_call(1, "dup2", 9, false, |c| {
        c.replaced = true;
        c.newfd = Some(8);
        c.ret = 8;
    });
    // TCGETS (isatty) on the number, answered ENOTTY: no NVIDIA request.
    let tcgets = ioctl_failed_with(2, "ENOTTY", 0x5401);
    let v = failed_init(
        ProcessInfo::default(),
        &[ctl_open(0), dup, tcgets],
        NO_DEVICE,
    );
    no_descriptor_closed(&v);
}

#[test]
fn no_lock_limit_where_the_limit_cannot_refuse() {
    // Unlimited, or CAP_IPC_LOCK held: the check cannot fail.
    for (memlock, cap) in [(None, None), (Some(8 * MIB), Some("4000"))] {
        let Event::Proc(p) = failed_call(1, "mmap", "EAGAIN") else {
            unreachable!("failed_call makes a proc record")
        };
        let ev = Event::Proc(crate::decode::ProcCall {
            args: Some(vec![0, 8 * MIB, 0, 0x22]),
            ..p
        });
        let mut info = with_limits(Limits {
            memlock: Some((memlock, memlock)),
            ..Limits::default()
        });
        info.access = cap.map(|c| crate::attribution::Access {
            cap_eff: Some(c.into()),
            ..Default::default()
        });
        let d = only(&failed_init(
            info,
            &[ev],
            (304, "CUDA_ERROR_OPERATING_SYSTEM"),
        ))
        .clone();
        assert_eq!(d.id, DiagId::StartCallRefused, "{memlock:?} {cap:?}: {d:?}");
    }
}
