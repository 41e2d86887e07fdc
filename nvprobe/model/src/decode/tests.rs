//! Decoder tests on constructed raw records, including malformed ones.

use super::*;
use crate::decode::version::{DriverVersion, LayoutBasis, VersionCtx};
use nvprobe_common::{
    DevKind, EventKind, FileId, Header, IoctlEvent, PathEvent, PathOp, ProcEvent, RmControlEvent,
};
use nvprobe_common::{ioctl_flags, kdev_make};
use proptest::prelude::*;

fn ctx580() -> Context {
    let mut c = Context::new(VersionCtx::from_version(Some(DriverVersion::new(
        580, 159, 4,
    ))));
    c.uvm_major = 238;
    c.nodes.insert(kdev_make(195, 255), "/dev/nvidiactl".into());
    c.nodes.insert(kdev_make(238, 0), "/dev/nvidia-uvm".into());
    c
}

fn bytes_of<T>(v: &T) -> Vec<u8> {
    // SAFETY: plain-old-data records.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()).to_vec() }
}

fn header(kind: EventKind) -> Header {
    let mut comm = [0u8; 16];
    comm[..7].copy_from_slice(b"python3");
    Header {
        kind: kind as u32,
        cpu: 1,
        ktime_ns: 1_000_000,
        tgid: 4242,
        tid: 4243,
        ns_tgid: 4242,
        ns_tid: 4243,
        pidns_level: 0,
        uid: 0,
        comm,
    }
}

fn ioctl(cmd: u32, rdev: u32, kind: DevKind, params: &[u8], ret: i64) -> IoctlEvent {
    // SAFETY: all-zero is a valid IoctlEvent.
    let mut ev: IoctlEvent = unsafe { std::mem::zeroed() };
    ev.hdr = header(EventKind::Ioctl);
    ev.file = FileId {
        rdev,
        sdev: 0,
        ino: 0,
        mode: 0o020660,
        kind: kind as u8,
        valid: 1,
        _pad: 0,
    };
    ev.fd = 5;
    ev.cmd = cmd;
    ev.ret = ret;
    ev.start_ns = 10;
    ev.duration_ns = 1234;
    ev.param_size = params.len() as u32;
    let n = params.len().min(64);
    ev.head[..n].copy_from_slice(&params[..n]);
    ev.head_len = n as u32;
    if params.len() > 64 {
        let off = params.len() - 16;
        ev.tail.copy_from_slice(&params[off..]);
        ev.tail_off = off as u32;
        ev.tail_len = 16;
    }
    ev
}

fn put(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn rm_control_with_failing_status() {
    let mut p = [0u8; 32];
    put(&mut p, 0, 0xc1d0_0001);
    put(&mut p, 4, 0xc1d0_0001);
    put(&mut p, 8, 0x215);
    put(&mut p, 28, 0x26); // NV_ERR_INVALID_DEVICE
    let ev = ioctl(0xc020_462a, kdev_make(195, 255), DevKind::Ctl, &p, 0);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!("not an ioctl")
    };
    assert_eq!(d.name, Some("NV_ESC_RM_CONTROL"));
    assert_eq!(d.family, Family::Escape);
    assert_eq!(d.device.kind, DeviceKind::Ctl);
    assert_eq!(d.device.node.as_deref(), Some("/dev/nvidiactl"));
    assert_eq!(
        d.args.to_json()["control_name"],
        "NV0000_CTRL_CMD_GPU_ATTACH_IDS"
    );
    let st = d.status.expect("status");
    assert_eq!(st.name, Some("NV_ERR_INVALID_DEVICE"));
    assert_eq!(st.offset, 28);
    assert_eq!(st.layout, LayoutBasis::Stable);
    assert!(!d.ok, "a non-benign status is a failure");
    assert_eq!(d.duration_ns, 1234);
    assert_eq!(d.proc.comm, "python3");
}

#[test]
fn an_untimed_call_says_so() {
    let mut p = [0u8; 32];
    put(&mut p, 28, 0x26);
    let mut ev = ioctl(0xc020_462a, kdev_make(195, 255), DevKind::Ctl, &p, 0);
    let timed = decode(&bytes_of(&ev), &ctx580()).expect("decodes");
    ev.flags |= nvprobe_common::ioctl_flags::UNTIMED;
    ev.duration_ns = 0;
    let untimed = decode(&bytes_of(&ev), &ctx580()).expect("decodes");
    let (Event::Ioctl(t), Event::Ioctl(u)) = (&timed, &untimed) else {
        panic!("not ioctls")
    };
    assert!(!t.untimed && u.untimed);
    let json = |e: &Event| serde_json::to_value(e).expect("json");
    assert!(json(&timed).get("untimed").is_none());
    assert_eq!(json(&untimed)["untimed"], true);
    let clock = crate::render::Clock::now();
    let line = |e: &Event| crate::render::text::event_line(&clock, 0, e);
    assert!(line(&untimed).ends_with("<untimed>"), "{}", line(&untimed));
    assert!(line(&timed).ends_with("<1.2µs>"), "{}", line(&timed));
    // Timed in ticks (`--events verdicts`, a process not yet quiet).
    ev.flags = nvprobe_common::ioctl_flags::COARSE;
    ev.duration_ns = 2_504_000_000;
    let coarse = decode(&bytes_of(&ev), &ctx580()).expect("decodes");
    let Event::Ioctl(c) = &coarse else {
        panic!("not an ioctl")
    };
    assert!(c.coarse && !c.untimed);
    assert_eq!(json(&coarse)["coarse"], true);
    assert!(json(&untimed).get("coarse").is_none());
    assert!(line(&coarse).ends_with("<~2.504s>"), "{}", line(&coarse));
}

#[test]
fn benign_not_supported_is_ok() {
    let mut p = [0u8; 32];
    put(&mut p, 28, 0x56);
    let ev = ioctl(0xc020_462a, kdev_make(195, 255), DevKind::Ctl, &p, 0);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.status.expect("status").name, Some("NV_ERR_NOT_SUPPORTED"));
    assert!(d.ok);
}

#[test]
fn errno_only_escape_never_shows_a_status() {
    let p = [0u8; 8];
    let ev = ioctl(0xc008_46d6, kdev_make(195, 255), DevKind::Ctl, &p, -16);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.name, Some("NV_ESC_SYS_PARAMS"));
    assert_eq!(d.errno.as_deref(), Some("EBUSY"));
    assert!(d.status.is_none());
    assert!(!d.ok);
    // ret 0: still no status, with the reason.
    let ev = ioctl(0xc008_46d6, kdev_make(195, 255), DevKind::Ctl, &p, 0);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert!(d.status.is_none());
    assert!(d.status_note.expect("note").contains("errno is the result"));
    assert!(d.ok);
}

#[test]
fn uvm_status_from_the_tail_of_a_large_struct() {
    let mut p = vec![0u8; 9264];
    put(&mut p, 9248, 7); // rmCtrlFd
    put(&mut p, 9252, 0xc1d0_0002);
    put(&mut p, 9256, 0x5c00_0010);
    put(&mut p, 9260, 0x1f); // NV_ERR_INVALID_ARGUMENT
    let ev = ioctl(33, kdev_make(238, 0), DevKind::Uvm, &p, 0);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.name, Some("UVM_MAP_EXTERNAL_ALLOCATION"));
    assert_eq!(d.family, Family::Uvm);
    assert_eq!(d.device.node.as_deref(), Some("/dev/nvidia-uvm"));
    assert_eq!(
        d.status.expect("status").name,
        Some("NV_ERR_INVALID_ARGUMENT")
    );
    assert_eq!(d.args.to_json()["hMemory"], "0x5c000010");
    assert_eq!(d.args.to_json()["rmCtrlFd"], 7);
}

#[test]
fn uvm_initialize_and_mm_initialize() {
    let mut p = [0u8; 16];
    p[0] = 1;
    put(&mut p, 8, 0);
    let ev = ioctl(0x3000_0001, kdev_make(238, 0), DevKind::Uvm, &p, 0);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.name, Some("UVM_INITIALIZE"));
    assert_eq!(d.status.expect("status").name, Some("NV_OK"));
    assert_eq!(d.args.to_json()["flag_names"][0], "DISABLE_HMM");

    let mut p = [0u8; 8];
    put(&mut p, 0, 9);
    put(&mut p, 4, 0x10006);
    let ev = ioctl(75, kdev_make(238, 0), DevKind::Uvm, &p, 0);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(
        d.status.expect("status").name,
        Some("NV_WARN_NOTHING_TO_DO")
    );
    assert!(d.ok, "NOTHING_TO_DO is the normal answer");
    assert_eq!(d.args.to_json()["uvmFd"], 9);
}

#[test]
fn xfer_is_unwrapped() {
    let mut p = [0u8; 32];
    put(&mut p, 8, 0x101);
    put(&mut p, 28, 0x1b);
    let mut ev = ioctl(0xc010_46d3, kdev_make(195, 255), DevKind::Ctl, &p, 0);
    ev.flags = ioctl_flags::XFER;
    ev.xfer_cmd = 0x2a;
    ev.xfer_size = 32;
    ev.xfer_ptr = 0x7fff_0000;
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.name, Some("NV_ESC_IOCTL_XFER_CMD"));
    assert_eq!(
        d.xfer.as_ref().and_then(|x| x.name),
        Some("NV_ESC_RM_CONTROL")
    );
    assert_eq!(
        d.status.expect("status").name,
        Some("NV_ERR_INSUFFICIENT_PERMISSIONS")
    );
}

/// A wrapper claiming more than the driver's 16384-byte limit: the kernel
/// side copies nothing behind its pointer, and the decoder says why.
#[test]
fn an_oversized_xfer_wrapper_is_not_read() {
    let mut ev = ioctl(0xc010_46d3, kdev_make(195, 255), DevKind::Ctl, &[], 0);
    ev.flags = ioctl_flags::XFER;
    ev.xfer_cmd = 0x2a;
    ev.xfer_size = 100_880;
    ev.param_size = 100_880;
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert!(d.status.is_none());
    assert!(d.args.is_empty());
    let note = d.status_note.expect("a note");
    assert!(
        note.contains("100880 bytes") && note.contains("16384"),
        "{note}"
    );
}

#[test]
fn unknown_numbers_stay_raw() {
    let ev = ioctl(0xc008_46ee, kdev_make(195, 255), DevKind::Ctl, &[0u8; 8], 0);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.name, None);
    assert_eq!(d.request, 0xc008_46ee);
    assert!(d.status.is_none());
    let ev = ioctl(1999, kdev_make(238, 0), DevKind::Uvm, &[], 0);
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!((d.family.as_str(), d.name), ("uvm", None));
    assert!(d.status_note.expect("note").contains("unknown UVM command"));
}

#[test]
fn unreadable_parameters_are_reported() {
    let mut ev = ioctl(
        0xc020_462a,
        kdev_make(195, 255),
        DevKind::Ctl,
        &[0u8; 32],
        0,
    );
    ev.head_len = 0;
    ev.flags = ioctl_flags::HEAD_FAULT;
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert!(d.status.is_none());
    assert!(d.status_note.expect("note").contains("not readable"));
}

/// A UVM command the kernel side had no size for (SIZE_UNKNOWN): nothing
/// was copied, and the note says why rather than "not captured".
#[test]
fn a_uvm_call_without_a_known_size_says_nothing_was_copied() {
    let mut ev = ioctl(33, kdev_make(238, 0), DevKind::Uvm, &[], 0);
    ev.head_len = 0;
    ev.tail_len = 0;
    ev.flags = ioctl_flags::SIZE_UNKNOWN;
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert!(d.status.is_none());
    let note = d.status_note.expect("note");
    assert!(note.contains("no parameter size"), "{note}");
}

#[test]
fn malformed_records_are_errors() {
    let ctx = ctx580();
    assert_eq!(decode(&[], &ctx), Err(DecodeError::Short(0)));
    assert_eq!(decode(&[1, 0, 0], &ctx), Err(DecodeError::Short(3)));
    let mut b = vec![0u8; 64];
    b[0] = 99;
    assert_eq!(decode(&b, &ctx), Err(DecodeError::Kind(99)));
    let ev = ioctl(0xc020_462a, 0, DevKind::Ctl, &[0u8; 32], 0);
    let full = bytes_of(&ev);
    assert!(matches!(
        decode(&full[..full.len() - 1], &ctx),
        Err(DecodeError::Size { kind: "ioctl", .. })
    ));
}

#[test]
fn hostile_comm_and_path_are_escaped() {
    let mut ev = ioctl(
        0xc020_462a,
        kdev_make(195, 255),
        DevKind::Ctl,
        &[0u8; 32],
        0,
    );
    ev.hdr.comm = *b"\x1b[31mevil\n\"x\xff\0\0\0";
    let Event::Ioctl(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.proc.comm, "\\x1b[31mevil\\x0a\"x\\xff");
    let json = serde_json::to_string(&Event::Ioctl(d)).expect("serializes");
    let back: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(back["comm"], "\\x1b[31mevil\\x0a\"x\\xff");
}

fn path_event(op: PathOp, path: &str, ret: i64, file: FileId) -> PathEvent {
    // SAFETY: all-zero is valid.
    let mut ev: PathEvent = unsafe { std::mem::zeroed() };
    ev.hdr = header(EventKind::Path);
    ev.op = op as u32;
    ev.ret = ret;
    ev.flags = 0o2000002;
    ev.path[..path.len()].copy_from_slice(path.as_bytes());
    ev.path_len = path.len() as u32;
    ev.file = file;
    ev
}

#[test]
fn failed_open_and_wrong_device() {
    let ev = path_event(PathOp::Openat, "/dev/nvidia-uvm", -1, FileId::default());
    let Event::Open(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.errno.as_deref(), Some("EPERM"));
    assert_eq!(d.flags, "O_RDWR|O_CLOEXEC");
    assert!(!d.ok);

    // /dev/nvidiactl that is really /dev/null (1:3).
    let f = FileId {
        rdev: kdev_make(1, 3),
        mode: 0o020666,
        valid: 1,
        ..Default::default()
    };
    let ev = path_event(PathOp::Openat, "/dev/nvidiactl", 4, f);
    let Event::Open(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.fd, Some(4));
    assert!(d.mismatch.as_deref().expect("flagged").contains("1:3"));
    assert!(!d.ok);

    // The real thing is not flagged.
    let f = FileId {
        rdev: kdev_make(195, 255),
        mode: 0o020666,
        kind: DevKind::Ctl as u8,
        valid: 1,
        ..Default::default()
    };
    let ev = path_event(PathOp::Openat, "/dev/nvidiactl", 4, f);
    let Event::Open(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.mismatch, None);
    assert!(d.ok);
    assert_eq!(d.device.expect("device").kind, DeviceKind::Ctl);
}

#[test]
fn stat_of_missing_node() {
    let ev = path_event(PathOp::Newfstatat, "/dev/nvidia0", -2, FileId::default());
    let Event::Stat(d) = decode(&bytes_of(&ev), &ctx580()).expect("decodes") else {
        panic!()
    };
    assert_eq!(d.syscall, "newfstatat");
    assert_eq!(d.errno.as_deref(), Some("ENOENT"));
}

#[test]
fn hex_roundtrip() {
    let b = [0u8, 1, 0xab, 0xff];
    assert_eq!(hex_decode(&hex_encode(&b)).as_deref(), Some(&b[..]));
    assert_eq!(hex_decode("abc"), None);
    assert_eq!(hex_decode("zz"), None);
    assert_eq!(hex_decode("é1"), None);
}

/// A record kind and that many random bytes.
fn well_sized_record() -> impl Strategy<Value = (EventKind, Vec<u8>)> {
    proptest::sample::select(EventKind::ALL).prop_flat_map(|kind| {
        let (_, size) = super::record_size(kind);
        (Just(kind), proptest::collection::vec(any::<u8>(), size))
    })
}

proptest! {
    /// Whatever the kernel side (or a corrupted replay file) hands over,
    /// decoding never panics and always yields valid JSON.
    #[test]
    fn arbitrary_records_never_panic(kind in 0u32..6, mut body in proptest::collection::vec(any::<u8>(), 0..400)) {
        if body.len() >= 4 {
            body[..4].copy_from_slice(&kind.to_le_bytes());
        }
        let ctx = ctx580();
        if let Ok(ev) = decode(&body, &ctx) {
            let s = serde_json::to_string(&ev).expect("serializes");
            let _: serde_json::Value = serde_json::from_str(&s).expect("valid JSON");
        }
    }

    /// Every record kind, at its exact size, with any bytes after the kind:
    /// the driver, libcuda and RM-parameter records too (random lengths
    /// alone almost never make a record's size).
    #[test]
    fn every_record_kind_of_any_content_decodes_safely((kind, mut body) in well_sized_record()) {
        body[..4].copy_from_slice(&(kind as u32).to_le_bytes());
        // A record of its kind's exact size always decodes (only the shape
        // is ever an error), into valid JSON of a type the schema has.
        let ev = decode(&body, &ctx580());
        prop_assert!(ev.is_ok(), "{kind:?}: {ev:?}");
        let ev = ev.expect("checked");
        let s = serde_json::to_string(&ev).expect("serializes");
        let v: serde_json::Value = serde_json::from_str(&s).expect("valid JSON");
        let t = v["type"].as_str().unwrap_or_default();
        prop_assert!(crate::render::schema::kernel_types().contains(t), "type {t}");
    }

    #[test]
    fn arbitrary_ioctls_decode(cmd in any::<u32>(), kind in 0u8..8, params in proptest::collection::vec(any::<u8>(), 0..200), ret in -600i64..2, flags in 0u32..32) {
        let mut ev = ioctl(cmd, kdev_make(195, 255), DevKind::from_u8(kind), &params, ret);
        ev.flags = flags;
        ev.xfer_cmd = cmd.rotate_left(8);
        ev.xfer_size = cmd >> 20;
        ev.tail_off = ev.tail_off.wrapping_add(cmd & 3);
        let d = decode(&bytes_of(&ev), &ctx580()).expect("well-sized record decodes");
        let s = serde_json::to_string(&d).expect("serializes");
        let _: serde_json::Value = serde_json::from_str(&s).expect("valid JSON");
    }
}

fn rm_control_record(nvos54_cmd: u32, control: u32, status: u32, params: &[u8]) -> Vec<u8> {
    let mut p = [0u8; 32];
    put(&mut p, 0, 0xc1d0_0001);
    put(&mut p, 4, 0xc1d0_0001);
    put(&mut p, 8, nvos54_cmd);
    put(&mut p, 24, params.len() as u32);
    put(&mut p, 28, status);
    // SAFETY: all-zero is a valid RmControlEvent.
    let mut ev: RmControlEvent = unsafe { std::mem::zeroed() };
    ev.ioctl = ioctl(0xc020_462a, kdev_make(195, 255), DevKind::Ctl, &p, 0);
    ev.ioctl.hdr.kind = EventKind::RmControl as u32;
    ev.control = control;
    ev.params[..params.len()].copy_from_slice(params);
    ev.params_len = params.len() as u32;
    bytes_of(&ev)
}

#[test]
fn an_rm_control_record_decodes_as_the_ioctl_with_its_parameters() {
    let mut params = [0u8; 76];
    put(&mut params, 4, 2);
    put(&mut params, 8, 16);
    params[12..28].copy_from_slice(&[0xab; 16]);
    let e = decode(
        &rm_control_record(0x2080_014a, 0x2080_014a, 0, &params),
        &ctx580(),
    )
    .unwrap();
    let Event::Ioctl(io) = e else {
        panic!("not an ioctl: {e:?}")
    };
    assert_eq!(io.name, Some("NV_ESC_RM_CONTROL"));
    let j = io.args.to_json();
    assert_eq!(j["control_name"], "NV2080_CTRL_CMD_GPU_GET_GID_INFO");
    assert_eq!(j["gpu_uuid"], "GPU-abababab-abab-abab-abab-abababababab");
    assert!(io.ok);
}

#[test]
fn rm_parameters_of_another_control_or_a_failed_call_are_not_decoded() {
    let params = [0x11u8; 32];
    // The record's control is not the one NVOS54 names: no fields.
    let e = decode(&rm_control_record(0x205, 0x101, 0, &params), &ctx580()).unwrap();
    let Event::Ioctl(io) = e else { panic!() };
    assert!(io.args.get("gpu_id").is_none() && io.args.get("changelist").is_none());
    // A status other than NV_OK: the parameters mean nothing.
    let e = decode(&rm_control_record(0x205, 0x205, 0x57, &params), &ctx580()).unwrap();
    let Event::Ioctl(io) = e else { panic!() };
    assert!(!io.ok);
    assert!(io.args.get("gpu_id").is_none());
    // A record one byte short is malformed, not a guess.
    let mut b = rm_control_record(0x205, 0x205, 0, &params);
    b.pop();
    assert!(decode(&b, &ctx580()).is_err());
}

proptest! {
    /// Any parameters and any string behind the pointer, for every control
    /// whose parameters are copied: a valid ioctl event, JSON that parses,
    /// no control character in it.
    #[test]
    fn rm_parameters_of_any_bytes_decode_safely(
        which in 0usize..rmparams::SPECS.len(),
        params in prop::collection::vec(any::<u8>(), 0..=256),
        deref in prop::collection::vec(any::<u8>(), 0..=64),
        claimed_len in 0u32..600,
        claimed_deref in 0u32..200,
    ) {
        let control = rmparams::SPECS[which].control;
        let mut b = rm_control_record(control, control, 0, &params);
        let mut ev: RmControlEvent = nvprobe_common::read(&b).unwrap();
        ev.deref[..deref.len()].copy_from_slice(&deref);
        ev.params_len = claimed_len;
        ev.deref_len = claimed_deref;
        b = bytes_of(&ev);
        let e = decode(&b, &ctx580()).unwrap();
        let j = serde_json::to_string(&e).unwrap();
        prop_assert!(serde_json::from_str::<serde_json::Value>(&j).is_ok());
        prop_assert!(!j.chars().any(|c| c.is_control()), "{}", j);
    }
}

/// A proc record of pid 7 with `op`, call number `nr` and `errno`.
fn failed_proc(op: nvprobe_common::ProcOp, nr: i32, errno: i32) -> ProcEvent {
    ProcEvent {
        hdr: header(EventKind::Proc),
        op: op as u32,
        sig: 0,
        code: nr,
        errno,
        result: 0,
        exit_code: 0,
        target_tgid: 7,
        target_tid: 7,
        si_pid: 0,
        unsent: 0,
        sa_handler: 0,
        sa_flags: 0,
    }
}

/// A SIGSYS from a seccomp filter names the call the filter refused, by
/// the table of the architecture the kernel named, whatever machine
/// decodes it; a record made before the call was sent (its si_pid part of
/// an address, no AUDIT_ARCH value) names none, and another signal never
/// does.
#[test]
fn a_seccomp_sigsys_names_the_refused_call_by_its_architecture() {
    let sig = |sig: i32, code: i32, arch: u32, nr: i32| {
        let mut e = failed_proc(nvprobe_common::ProcOp::SignalGenerate, code, 0);
        e.sig = sig;
        e.si_pid = arch;
        e.exit_code = nr;
        let Ok(Event::Proc(p)) = decode(&bytes_of(&e), &ctx580()) else {
            panic!("not a proc record")
        };
        p.call
    };
    // ioctl: 16 on x86_64, 29 in the generic table (arm64).
    assert_eq!(sig(31, 1, 0xC000_003E, 16).as_deref(), Some("ioctl"));
    assert_eq!(sig(31, 1, 0xC000_00B7, 29).as_deref(), Some("ioctl"));
    assert_eq!(
        sig(31, 1, 0x4000_0003, 54).as_deref(),
        Some("syscall 54 (i386)")
    );
    assert_eq!(sig(31, 1, 0x7f3a_1234, 0), None);
    assert_eq!(sig(31, 0, 0xC000_003E, 16), None);
    assert_eq!(sig(11, 1, 0xC000_003E, 16), None);
}

/// The kernel side's record of a failed start-up call decodes to the
/// call's name and errno; an unknown number stays a number.
#[test]
fn a_failed_start_up_call_is_named() {
    let mk = |nr: i32, errno: i32| failed_proc(nvprobe_common::ProcOp::CallFailed, nr, errno);
    let clone3 = 435;
    let Ok(Event::Proc(p)) = decode(&bytes_of(&mk(clone3, 11)), &ctx580()) else {
        panic!("not a proc record")
    };
    assert_eq!(p.op, ProcKind::CallFailed);
    assert_eq!(
        (p.call.as_deref(), p.errno.as_deref()),
        (Some("clone3"), Some("EAGAIN"))
    );
    assert_eq!(p.sig, None);
    let Ok(Event::Proc(p)) = decode(&bytes_of(&mk(99_999, 12)), &ctx580()) else {
        panic!("not a proc record")
    };
    assert_eq!(
        (p.call.as_deref(), p.errno.as_deref()),
        (Some("syscall 99999"), Some("ENOMEM"))
    );
}

/// A failed call sent with its path (a `CallFailedEvent`): the path is
/// escaped and bounded, `seq` is its number; a record of that length that
/// is not a failed call is refused, not read as one.
#[test]
fn a_failed_call_with_its_path_decodes_escaped_and_bounded() {
    let mk = |op: nvprobe_common::ProcOp, path: &[u8], path_len: u32| {
        let mut ev = nvprobe_common::CallFailedEvent {
            // openat (x86_64), newfstatat elsewhere; ENOENT.
            proc: failed_proc(op, 257, 2),
            args: [0, 0],
            path_len,
            seq: 3,
            path: [0; nvprobe_common::PATH_LEN],
            args_more: [0, 0],
            map_count: 0,
            _pad: 0,
            vm_bytes: 0,
            data_bytes: 0,
        };
        ev.path[..path.len()].copy_from_slice(path);
        bytes_of(&ev)
    };
    let ok = mk(
        nvprobe_common::ProcOp::CallFailed,
        b"/etc/gpu\x1b[2J.conf",
        17,
    );
    let Ok(Event::Proc(p)) = decode(&ok, &ctx580()) else {
        panic!("not a proc record")
    };
    assert_eq!(p.errno.as_deref(), Some("ENOENT"));
    assert_eq!(p.seq, Some(3));
    let path = p.path.expect("a path");
    assert!(!path.chars().any(char::is_control), "{path}");
    assert!(
        path.starts_with("/etc/gpu") && path.ends_with(".conf"),
        "{path}"
    );
    // A length past the buffer is the buffer.
    let long = [b'a'; nvprobe_common::PATH_LEN];
    let Ok(Event::Proc(p)) = decode(
        &mk(nvprobe_common::ProcOp::CallFailed, &long, u32::MAX),
        &ctx580(),
    ) else {
        panic!("not a proc record")
    };
    assert_eq!(p.path.map(|s| s.len()), Some(nvprobe_common::PATH_LEN));
    // No path: none shown.
    let Ok(Event::Proc(p)) = decode(&mk(nvprobe_common::ProcOp::CallFailed, b"", 0), &ctx580())
    else {
        panic!("not a proc record")
    };
    assert_eq!(p.path, None);
    assert!(matches!(
        decode(&mk(nvprobe_common::ProcOp::Exit, b"", 0), &ctx580()),
        Err(DecodeError::Size { kind: "proc", .. })
    ));
}

/// A failed mmap carries its four arguments (shown as strace does) and
/// the address space's counts at the failure; a record made before the
/// counts were sent (V2_LEN bytes) decodes without them, one made before
/// the third and fourth arguments (V1_LEN) with two; any other length is
/// refused.
#[test]
fn a_failed_mapping_carries_its_protection_and_flags_and_an_older_record_decodes() {
    let ev = nvprobe_common::CallFailedEvent {
        // mmap (x86_64 9; arm64 222 is another call here: the numbers are
        // the tracing machine's); ENOMEM.
        proc: failed_proc(nvprobe_common::ProcOp::CallFailed, 9, 12),
        args: [0, 64 << 30],
        path_len: 0,
        seq: 1,
        path: [0; nvprobe_common::PATH_LEN],
        // PROT_NONE; MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE.
        args_more: [0, 0x4022],
        map_count: 108,
        _pad: 0,
        vm_bytes: 187 << 20,
        data_bytes: 3 << 20,
    };
    let whole = bytes_of(&ev);
    let Ok(Event::Proc(p)) = decode(&whole, &ctx580()) else {
        panic!("not a proc record")
    };
    assert_eq!(p.args, Some(vec![0, 64 << 30, 0, 0x4022]));
    assert_eq!(
        p.mm,
        Some(crate::decode::MmAt {
            map_count: 108,
            vm_bytes: 187 << 20,
            data_bytes: 3 << 20
        })
    );
    assert_eq!(p.mem_ask().at, p.mm);
    #[cfg(target_arch = "x86_64")]
    {
        let ask = p.mem_ask();
        assert_eq!(
            (ask.len, ask.prot, ask.flags),
            (Some(64 << 30), Some(0), Some(0x4022))
        );
        assert_eq!(
            (ask.private_writable(), ask.committed()),
            (Some(false), Some(false))
        );
        let clock = crate::render::Clock::now();
        let text = crate::render::text::event_line(&clock, 0, &Event::Proc(p.clone()));
        assert!(
            text.contains(
                "mmap(NULL, 68719476736, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE) = -1 ENOMEM"
            ),
            "{text}"
        );
    }
    // A record made before the sizes were sent: four arguments, no sizes.
    let v2 = &whole[..nvprobe_common::call_failed::V2_LEN];
    let Ok(Event::Proc(p)) = decode(v2, &ctx580()) else {
        panic!("a record without the sizes is refused")
    };
    assert_eq!(
        (p.args.clone(), p.mm),
        (Some(vec![0, 64 << 30, 0, 0x4022]), None)
    );
    let old = &whole[..nvprobe_common::call_failed::V1_LEN];
    let Ok(Event::Proc(p)) = decode(old, &ctx580()) else {
        panic!("an older record is refused")
    };
    assert_eq!((p.args.clone(), p.seq), (Some(vec![0, 64 << 30]), Some(1)));
    assert_eq!(p.mem_ask().prot, None);
    assert!(matches!(
        decode(&whole[..whole.len() - 8], &ctx580()),
        Err(DecodeError::Size { kind: "proc", .. })
    ));
}
