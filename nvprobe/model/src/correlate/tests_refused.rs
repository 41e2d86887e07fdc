//! Who refused a call: the kernel's own order of checks decides the
//! diagnosis (EACCES is the mode, a nodev mount or a security module;
//! EPERM the device cgroup or a seccomp filter; EMFILE a limit; ENXIO a
//! node no driver answers), and no hint offers a remedy the errno rules
//! out. Constructed streams; the real ones are in nvprobe/model/tests.

use super::{
    tests::{exit_of, open, proc_},
    tests_classes::{cuda, verdicts_of},
    *,
};
use crate::attribution::{Limits, ProcessInfo};
use crate::correlate::{DiagId, Outcome};

/// An open of `path` refused with `errno`.
pub(super) fn refused(t: u64, path: &str, errno: &str) -> Event {
    let Event::Open(mut p) = open(t, path, "ctl") else {
        unreachable!()
    };
    p.ret = -1;
    p.errno = Some(errno.into());
    p.ret = super::tests_classes::errno_ret(errno);
    p.fd = None;
    p.device = None;
    p.ok = false;
    Event::Open(p)
}

/// The verdicts of a CUDA start-up: cuInit begins, `events` happen, cuInit
/// returns 999.
fn verdict(info: Option<ProcessInfo>, events: &[Event]) -> Vec<CuInit> {
    let mut all = vec![cuda(0, "cuInit", None)];
    all.extend_from_slice(events);
    all.push(cuda(3, "cuInit", Some((999, "CUDA_ERROR_UNKNOWN"))));
    verdicts_of(info.into_iter().collect(), Vec::new(), &all)
}

fn with_limits(l: Limits) -> ProcessInfo {
    ProcessInfo {
        pid: 7,
        exe: Some("/usr/bin/python3".into()),
        limits: Some(l),
        ..ProcessInfo::default()
    }
}

fn only(v: &[CuInit]) -> &Diagnosis {
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].result, Outcome::Failed, "{}", v[0].text);
    assert_eq!(v[0].diagnoses.len(), 1, "{:#?}", v[0].diagnoses);
    &v[0].diagnoses[0]
}

#[test]
fn eperm_on_a_node_is_the_device_cgroup_or_seccomp_never_the_mode() {
    let v = verdict(
        Some(with_limits(Limits::default())),
        &[refused(1, "/dev/nvidiactl", "EPERM")],
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::NotPermitted);
    assert_eq!(
        d.evidence,
        "/dev/nvidiactl: EPERM: not the file's mode (that refuses with EACCES): the device cgroup or a seccomp filter refused it"
    );
    assert!(!d.hint.contains("chmod") && !d.hint.contains("fix the node's mode"));
    assert!(d.hint.contains("device cgroup") && d.hint.contains("seccomp"));
}

#[test]
fn eperm_on_a_proc_file_is_not_the_device_cgroup_and_names_the_filters() {
    let v = verdict(
        Some(with_limits(Limits {
            seccomp: Some(2),
            seccomp_filters: Some(1),
            ..Limits::default()
        })),
        &[refused(1, "/proc/driver/nvidia/params", "EPERM")],
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::NotPermitted);
    assert!(
        d.evidence
            .contains("not a device, so not the device cgroup: a seccomp filter")
            && d.evidence
                .ends_with("; the process ran under 1 seccomp filter"),
        "{}",
        d.evidence
    );
}

#[test]
fn eacces_is_the_mode_a_nodev_mount_or_a_security_module() {
    let v = verdict(None, &[refused(1, "/dev/nvidia-uvm", "EACCES")]);
    let d = only(&v);
    assert_eq!(d.id, DiagId::NodePermission);
    // The device cgroup answers EPERM: allowing the node there cannot help.
    assert!(!d.hint.contains("allow char 195"), "{}", d.hint);
    assert!(d.hint.contains("ls -l") && d.hint.contains("nodev"));
}

#[test]
fn emfile_is_the_open_file_limit_with_its_numbers() {
    let v = verdict(
        Some(with_limits(Limits {
            nofile: Some((Some(8), Some(1024))),
            fds: Some(7),
            ..Limits::default()
        })),
        &[refused(1, "/proc/driver/nvidia/params", "EMFILE")],
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::FileLimit);
    assert_eq!(
        d.evidence,
        "/proc/driver/nvidia/params: EMFILE: the process's open-file limit (RLIMIT_NOFILE) was reached (soft limit 8, hard 1024; 7 descriptors were open at its first NVIDIA file)"
    );
    assert!(!d.hint.contains("check the node"), "{}", d.hint);
}

#[test]
fn enxio_on_a_node_is_a_node_no_driver_answers() {
    let v = verdict(None, &[refused(1, "/dev/nvidia-uvm", "ENXIO")]);
    let d = only(&v);
    assert_eq!(d.id, DiagId::NodeStale);
    assert!(d.hint.contains("/proc/devices"), "{}", d.hint);
}

#[test]
fn nvprobe_itself_gets_no_verdict() {
    let mut p = proc_();
    p.comm = "nvprobe".into();
    let Event::Open(mut o) = refused(1, "/dev/nvidiactl", "EACCES") else {
        unreachable!()
    };
    o.proc = p;
    let info = ProcessInfo {
        pid: 7,
        exe: Some("/usr/local/bin/nvprobe".into()),
        ..ProcessInfo::default()
    };
    // What `nvprobe doctor` does: it reads the nodes and the driver's files.
    let mut c = Correlator::default();
    let mut out = Vec::new();
    c.observe_obs(Obs::identity(info, 0), &mut out);
    c.observe(&Event::Open(o), &mut out);
    c.observe(&exit_of(2, 7, 0), &mut out);
    c.finish(&mut out);
    assert!(
        !out.iter().any(|r| matches!(r, Record::Cuinit(_))),
        "{out:#?}"
    );
}

#[test]
fn a_304_without_a_failed_nvidia_call_names_what_the_process_ran_under() {
    let info = with_limits(Limits {
        seccomp: Some(0),
        seccomp_filters: Some(0),
        nofile: Some((Some(5), Some(5))),
        fds: Some(3),
        ..Limits::default()
    });
    let v = verdicts_of(
        vec![info],
        Vec::new(),
        &[
            cuda(0, "cuInit", None),
            cuda(1, "cuInit", Some((304, "CUDA_ERROR_OPERATING_SYSTEM"))),
        ],
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::OsCallFailed);
    assert_eq!(
        d.evidence,
        "cuInit returned CUDA_ERROR_OPERATING_SYSTEM (304) and no call on an NVIDIA file failed; when nvprobe read the process (at its first NVIDIA file): open-file limit 5 (hard 5), 3 descriptors open, 0 seccomp filters"
    );
    assert!(d.hint.contains("ulimit -n") && d.hint.contains("strace"));
}

/// Seen on the H200: a seccomp filter that answers EPERM to the escapes
/// hides them from the syscall tracepoints (seccomp runs before the
/// kernel traces a call's entry): libcuda opens /dev/nvidiactl again and
/// again, no ioctl follows, cuInit returns 100. Not "no visible devices".
#[test]
fn opens_of_the_control_node_without_one_ioctl_are_a_seccomp_filter() {
    let v = verdict(
        Some(with_limits(Limits {
            seccomp: Some(0),
            seccomp_filters: Some(0),
            ..Limits::default()
        })),
        &[
            open(1, "/dev/nvidiactl", "ctl"),
            open(2, "/dev/nvidiactl", "ctl"),
        ],
    );
    // verdict() ends the stream with cuInit returning 999; 100 too:
    assert_eq!(v.len(), 1);
    let d = &v[0].diagnoses;
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].id, DiagId::CallsBlocked);
    assert!(
        d[0].evidence
            .starts_with("/dev/nvidiactl: opened 2 times and no ioctl of it reached")
            && d[0].evidence.contains("one installed later"),
        "{}",
        d[0].evidence
    );
    assert!(!d[0].hint.contains("CUDA_VISIBLE_DEVICES"));
}

/// A GPU node refused by the open-file limit explains cuInit's 100: the
/// visibility list did not hide the GPU, so its hint is not given.
#[test]
fn a_refused_gpu_node_is_not_no_visible_devices() {
    let v = verdicts_of(
        Vec::new(),
        Vec::new(),
        &[
            cuda(0, "cuInit", None),
            open(1, "/dev/nvidiactl", "ctl"),
            super::tests::io(2, "NV_ESC_CARD_INFO", None, "ctl"),
            refused(3, "/dev/nvidia0", "EMFILE"),
            cuda(4, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))),
        ],
    );
    let ids: Vec<DiagId> = v[0].diagnoses.iter().map(|d| d.id).collect();
    assert_eq!(ids, [DiagId::FileLimit], "{:#?}", v[0].diagnoses);
}

fn with_node(mode: u32, nodev: bool, fsuid: u32, cap_eff: &str) -> ProcessInfo {
    ProcessInfo {
        pid: 7,
        exe: Some("/usr/bin/python3".into()),
        access: Some(crate::attribution::Access {
            fsuid: Some(fsuid),
            fsgid: Some(fsuid),
            groups: Vec::new(),
            cap_eff: Some(cap_eff.into()),
            nodes: vec![crate::attribution::NodeFact {
                path: "/dev/nvidia-uvm".into(),
                mode,
                uid: 0,
                gid: 0,
                chr: true,
                rdev: Some("238:0".into()),
                nodev: None,
            }],
            dev_nodev: Some(nodev),
            ..crate::attribution::Access::default()
        }),
        ..ProcessInfo::default()
    }
}

/// EACCES walks the kernel's checks (`may_open`): nodev, then the mode
/// against the ids and CAP_DAC_OVERRIDE, then a security module; each
/// gets the remedy that fits it.
#[test]
fn eacces_names_the_mode_a_nodev_mount_or_a_security_module() {
    let refusal = |info| {
        let v = verdict(Some(info), &[refused(1, "/dev/nvidia-uvm", "EACCES")]);
        let d = only(&v).clone();
        (d.id, d.evidence, d.hint)
    };
    let (id, e, _) = refusal(with_node(0o000, false, 65534, "0000000000000000"));
    assert_eq!(id, DiagId::NodePermission);
    assert_eq!(
        e,
        "/dev/nvidia-uvm: EACCES: the mode refuses read and write (the node is 0000 0:0; the process runs as uid 65534 gid 65534, no supplementary groups, without CAP_DAC_OVERRIDE)"
    );
    let (id, e, h) = refusal(with_node(0o666, true, 0, "000001ffffffffff"));
    assert_eq!(id, DiagId::NodeNodev);
    assert!(e.ends_with("but the /dev it is in is mounted nodev"), "{e}");
    assert!(!h.contains("chmod") && !h.contains("group"), "{h}");
    let (id, e, h) = refusal(with_node(0o666, false, 65534, "0000000000000000"));
    assert_eq!(id, DiagId::SecurityModuleDenied);
    assert!(
        e.contains("the mode allows it (the node is 0666 0:0"),
        "{e}"
    );
    assert!(h.contains("apparmor"), "{h}");
    // Root's CAP_DAC_OVERRIDE passes the mode of a 0000 node.
    let (id, _, _) = refusal(with_node(0o000, false, 0, "000001ffffffffff"));
    assert_eq!(id, DiagId::SecurityModuleDenied);
    // nodev is checked before the mode: a node the mode refuses too is
    // still refused by the mount, and a chmod alone would not help.
    let (id, e, h) = refusal(with_node(0o000, true, 65534, "0000000000000000"));
    assert_eq!(id, DiagId::NodeNodev);
    assert!(
        e.contains("the mount holding it is nodev, which the kernel checks before the mode (the mode would refuse it too: the node is 0000 0:0"),
        "{e}"
    );
    assert!(!h.contains("chmod"), "{h}");
    // A node bind-mounted from a mount that is not nodev into a nodev /dev
    // (bubblewrap's --dev-bind): its own mount decides, and the mode is
    // the one that refused.
    let mut bound = with_node(0o000, true, 65534, "0000000000000000");
    if let Some(a) = bound.access.as_mut() {
        a.nodes[0].nodev = Some(false);
    }
    let (id, _, _) = refusal(bound);
    assert_eq!(id, DiagId::NodePermission);
}

/// EPERM on a device node: the device cgroup when the process's cgroup has
/// device programs and no seccomp filter was in place; a seccomp filter
/// when no device rule applies; cgroup v1's list when it allows no NVIDIA
/// device.
#[test]
fn eperm_names_the_device_cgroup_or_seccomp_by_what_was_in_place() {
    let with = |programs: Option<u32>, filters: u32, list: Vec<&str>| {
        let mut i = with_limits(Limits {
            seccomp: Some(if filters > 0 { 2 } else { 0 }),
            seccomp_filters: Some(filters),
            ..Limits::default()
        });
        i.access = Some(crate::attribution::Access {
            device_programs: programs,
            devices_list: list.into_iter().map(Into::into).collect(),
            ..crate::attribution::Access::default()
        });
        i
    };
    let evidence = |info: ProcessInfo| {
        let v = verdict(Some(info), &[refused(1, "/dev/nvidiactl", "EPERM")]);
        let d = v[0]
            .diagnoses
            .iter()
            .find(|d| d.id == DiagId::NotPermitted)
            .expect("not_permitted")
            .clone();
        d.evidence
    };
    assert_eq!(
        evidence(with(Some(1), 0, vec![])),
        "/dev/nvidiactl: EPERM: not the file's mode (that refuses with EACCES): the device cgroup refused it \
(1 device program (cgroup v2 BPF_CGROUP_DEVICE) decides this process's device opens; no seccomp filter was in \
place when nvprobe read the process (at its first NVIDIA file))"
    );
    assert!(
        evidence(with(Some(0), 2, vec![]))
            .contains("a seccomp filter refused it (no device cgroup rule applies)"),
    );
    assert!(
        evidence(with(None, 0, vec!["c 1:3 rwm", "c 136:* rwm"])).contains(
            "the device cgroup refused it (the cgroup's devices.list allows no NVIDIA device"
        ),
    );
    // runc's "c *:* m" lets every device be made, not opened.
    assert!(
        evidence(with(None, 0, vec!["c *:* m", "c 1:3 rwm"])).contains(
            "the device cgroup refused it (the cgroup's devices.list allows no NVIDIA device"
        ),
    );
    // A list that allows the NVIDIA major does not refuse it.
    assert!(
        !evidence(with(None, 0, vec!["c 195:* rwm"]))
            .contains("devices.list allows no NVIDIA device"),
    );
    // Both in place: both are named, neither is claimed.
    assert!(
        evidence(with(Some(1), 1, vec![]))
            .contains("the device cgroup or a seccomp filter refused it"),
    );
}

/// What a start-up can run out of besides descriptors is in the evidence
/// of a CUresult with no failed driver call.
#[test]
fn a_cgroup_at_its_task_limit_is_in_the_evidence() {
    let info = with_limits(Limits {
        seccomp_filters: Some(0),
        pids: Some(crate::attribution::CgroupCount {
            current: 1,
            max: Some(1),
        }),
        ..Limits::default()
    });
    let v = verdicts_of(
        vec![info],
        Vec::new(),
        &[
            cuda(0, "cuInit", None),
            cuda(3, "cuInit", Some((304, "CUDA_ERROR_OPERATING_SYSTEM"))),
        ],
    );
    let d = &v[0].diagnoses[0];
    assert_eq!(d.id, DiagId::OsCallFailed);
    assert!(
        d.evidence.ends_with(
            "0 seccomp filters, the cgroup's tasks (pids.current) 1 of 1 (at the limit)"
        ),
        "{}",
        d.evidence
    );
}

/// A refused mknod in a user namespace says so; EACCES with the mode
/// allowing it names the security modules active and the label.
#[test]
fn a_user_namespace_and_the_security_modules_are_named() {
    let mut info = with_node(0o666, false, 0, "0");
    if let Some(a) = info.access.as_mut() {
        a.userns = Some("0 1000 1".into());
        a.lsm = Some("lockdown,capability,apparmor".into());
        a.label = Some("docker-default (enforce)".into());
    }
    let mut mknod = crate::correlate::tests::open(2, "/dev/nvidia0", "gpu");
    if let Event::Open(p) = &mut mknod {
        p.syscall = "mknodat";
        p.ret = -1;
        p.errno = Some("EPERM".into());
        p.ret = super::tests_classes::errno_ret("EPERM");
        p.ok = false;
    }
    let Event::Open(p) = mknod else {
        unreachable!()
    };
    let v = verdict(
        Some(info),
        &[Event::Mknod(p), refused(3, "/dev/nvidia-uvm", "EACCES")],
    );
    let ev: Vec<(DiagId, &str)> = v[0]
        .diagnoses
        .iter()
        .map(|d| (d.id, d.evidence.as_str()))
        .collect();
    assert!(
        ev.iter().any(|(id, e)| *id == DiagId::NodeCreateFailed
            && e.contains("the process runs in a user namespace (uid_map 0 1000 1)")),
        "{ev:?}"
    );
    assert!(
        ev.iter().any(|(id, e)| *id == DiagId::SecurityModuleDenied
            && e.ends_with("(active on the host: lockdown,capability,apparmor; the process's label: docker-default (enforce))")),
        "{ev:?}"
    );
}

/// A refused mknod says what refused it: a read-only /dev (EROFS), or no
/// CAP_MKNOD outside a user namespace (EPERM).
#[test]
fn a_refused_mknod_names_the_read_only_mount_or_the_missing_capability() {
    let mknod = |errno: &str| {
        let Event::Open(mut p) = crate::correlate::tests::open(2, "/dev/nvidiactl", "ctl") else {
            unreachable!()
        };
        p.syscall = "mknodat";
        p.ret = -1;
        p.errno = Some(errno.into());
        p.ret = super::tests_classes::errno_ret(errno);
        p.ok = false;
        Event::Mknod(p)
    };
    let evidence = |readonly: bool, cap_eff: &str, errno: &str| {
        let mut info = with_node(0o666, false, 0, cap_eff);
        if let Some(a) = info.access.as_mut() {
            a.dev_readonly = Some(readonly);
        }
        let v = verdict(Some(info), &[mknod(errno)]);
        v[0].diagnoses
            .iter()
            .find(|d| d.id == DiagId::NodeCreateFailed)
            .map(|d| d.evidence.clone())
            .expect("node_create_failed")
    };
    assert_eq!(
        evidence(true, "000001ffffffffff", "EROFS"),
        "/dev/nvidiactl: mknod 195:0 failed: EROFS; the /dev it is in is mounted read-only"
    );
    // CapEff without bit 27 (CAP_MKNOD): docker's default set (a80425fb) less MKNOD.
    assert_eq!(
        evidence(false, "00000000a00425fb", "EPERM"),
        "/dev/nvidiactl: mknod 195:0 failed: EPERM; the process has no CAP_MKNOD"
    );
    // With CAP_MKNOD, EPERM is not the capability: nothing is claimed.
    assert_eq!(
        evidence(false, "000001ffffffffff", "EPERM"),
        "/dev/nvidiactl: mknod 195:0 failed: EPERM"
    );
}

// Which paths say a kernel module is not loaded (rules_nodes::module_of_entry).
#[test]
fn only_a_modules_own_entries_say_it_is_not_loaded() {
    assert_eq!(
        super::rules_nodes::module_of_entry("/sys/module/nvidia_uvm/initstate"),
        Some("nvidia_uvm")
    );
    assert_eq!(
        super::rules_nodes::module_of_entry("/sys/module/nvidia"),
        Some("nvidia")
    );
    assert_eq!(
        super::rules_nodes::module_of_entry("/proc/driver/nvidia/version"),
        Some("nvidia")
    );
    // A parameter, another module's files, the GPU list: not the module.
    assert_eq!(
        super::rules_nodes::module_of_entry("/sys/module/nvidia/parameters/NVreg_X"),
        None
    );
    assert_eq!(
        super::rules_nodes::module_of_entry("/sys/module/nvidia_fs/initstate"),
        None
    );
    assert_eq!(
        super::rules_nodes::module_of_entry("/proc/driver/nvidia/gpus/0000:01:00.0/information"),
        None
    );
    assert_eq!(
        super::rules_nodes::module_of_entry("/proc/driver/nvidia/params"),
        None
    );
}

/// An escape refused with EACCES after its entry was traced, on a control
/// node that opened: the driver answers no start-up escape with EACCES,
/// and ioctl(2) asks the security modules first, so a module's ioctl rule
/// refused it; NV_ESC_SET_NUMA_STATUS without root is the driver's own.
#[test]
fn an_escape_refused_with_eacces_after_it_was_traced_is_a_security_modules_rule() {
    use super::tests::{failed, io};
    let info = ProcessInfo {
        access: Some(crate::attribution::Access {
            lsm: Some("lockdown,capability,landlock,selinux".into()),
            label: Some("system_u:system_r:container_t:s0".into()),
            ..Default::default()
        }),
        ..with_limits(Limits::default())
    };
    let v = verdict(
        Some(info),
        &[
            open(1, "/dev/nvidiactl", "ctl"),
            failed(io(2, "NV_ESC_CARD_INFO", None, "ctl"), "EACCES"),
        ],
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::IoctlRefused, "{d:#?}");
    assert!(
        d.evidence.starts_with("NV_ESC_CARD_INFO failed with EACCES on a descriptor that had opened")
            && d.evidence.contains("security_file_ioctl")
            && d.evidence
                .ends_with("(active on the host: lockdown,capability,landlock,selinux; the process's label: system_u:system_r:container_t:s0)"),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("avc: denied { ioctl }"), "{}", d.hint);
    // cuInit's 100 after it is not blamed on the visibility list.
    let mut all = vec![
        cuda(0, "cuInit", None),
        open(1, "/dev/nvidiactl", "ctl"),
        failed(io(2, "NV_ESC_CARD_INFO", None, "ctl"), "EPERM"),
    ];
    // Its twin, the kernel side's failed-call record of the same ioctl:
    // traced, so not a command a filter refused before the tracing.
    let Event::Proc(twin) = super::tests_startcalls::failed_call(2, "ioctl", "EPERM") else {
        unreachable!("failed_call makes a proc record")
    };
    all.push(Event::Proc(crate::decode::ProcCall {
        args: Some(vec![3, (u64::from(b'F') << 8) | 0xC8, 0, 0]),
        ..twin
    }));
    all.push(cuda(3, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))));
    let v = verdicts_of(vec![with_limits(Limits::default())], Vec::new(), &all);
    let ids: Vec<_> = v[0].diagnoses.iter().map(|d| d.id).collect();
    assert_eq!(ids, [DiagId::IoctlRefused], "{:#?}", v[0].diagnoses);

    // The driver's own refusal (NV_ESC_SET_NUMA_STATUS without root), and
    // an errno a security module does not give: no module is blamed.
    for (escape, errno) in [
        ("NV_ESC_SET_NUMA_STATUS", "EACCES"),
        ("NV_ESC_CARD_INFO", "EINVAL"),
    ] {
        let v = verdict(
            Some(with_limits(Limits::default())),
            &[
                open(1, "/dev/nvidiactl", "ctl"),
                failed(io(2, escape, None, "ctl"), errno),
            ],
        );
        assert!(
            v[0].diagnoses.iter().all(|d| d.id != DiagId::IoctlRefused),
            "{escape} {errno}: {:#?}",
            v[0].diagnoses
        );
    }
}

/// One NVIDIA command refused at the system call's exit, never traced,
/// while other ioctls were: a seccomp filter where the process ran under
/// one; a security module where it ran under none; nothing where a record
/// of that command failed so (the driver's or a module's answer, traced).
#[test]
fn one_command_refused_before_the_driver_names_who_could_have() {
    use super::tests::{failed, io};
    let twin = |request: u64| {
        let Event::Proc(p) = super::tests_startcalls::failed_call(3, "ioctl", "EPERM") else {
            unreachable!("failed_call makes a proc record")
        };
        Event::Proc(crate::decode::ProcCall {
            args: Some(vec![5, request, 0, 0]),
            ..p
        })
    };
    let run = |filters: u32, traced: bool| {
        let mut all = vec![
            cuda(0, "cuInit", None),
            open(1, "/dev/nvidiactl", "ctl"),
            io(2, "NV_ESC_CARD_INFO", None, "ctl"),
        ];
        if traced {
            all.push(failed(io(3, "UVM_INITIALIZE", None, "uvm"), "EPERM"));
        }
        all.push(twin(0x3000_0001));
        all.push(cuda(4, "cuInit", Some((999, "CUDA_ERROR_UNKNOWN"))));
        let l = Limits {
            seccomp_filters: Some(filters),
            ..Limits::default()
        };
        let v = verdicts_of(vec![with_limits(l)], Vec::new(), &all);
        v[0].diagnoses.clone()
    };
    let d = run(1, false);
    assert_eq!(d[0].id, DiagId::CallsBlocked, "{d:#?}");
    assert!(
        d[0].evidence.ends_with(
            "UVM_INITIALIZE (ioctl 0x30000001) failed with EPERM at the system call's exit and never reached the \
kernel's syscall tracing, while the process's other NVIDIA ioctls did: a seccomp filter refused that command before \
the kernel traced it; the process ran under 1 seccomp filter"
        ),
        "{}",
        d[0].evidence
    );
    let d = run(0, false);
    assert!(
        d[0].evidence.contains(
            "no seccomp filter was in place, so a security module's ioctl rule refused that command"
        ),
        "{}",
        d[0].evidence
    );
    let d = run(1, true);
    assert!(d.iter().all(|x| x.id != DiagId::CallsBlocked), "{d:#?}");
}
