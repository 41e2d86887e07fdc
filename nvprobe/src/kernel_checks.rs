//! What the kernel checks a process's calls against, read from /proc (and
//! the process's cgroup) while it lives, in the order the kernel applies
//! them: seccomp, the file's mode against the caller's ids, groups and
//! capabilities, a user namespace, nodev mounts, the device cgroup, the
//! security modules, and the limits (RLIMIT_*, the cgroup's pids and
//! memory). Every read is bounded; what cannot be read is left out.

use std::{fs, io::Read as _, path::Path};

use nvprobe_model::attribution::{Access, CgroupCount, Limits, NodeFact};

const STATUS_CAP: u64 = 16 << 10;
const SMALL_CAP: u64 = 4 << 10;
/// /proc/PID/cgroup: one line per hierarchy, each path up to 4095 bytes.
const CGROUP_CAP: u64 = 64 << 10;

/// The cgroup v2 directory of a cgroup path (as /proc/PID/cgroup writes
/// it for nvprobe's own cgroup namespace, under `root`); none for a path
/// that leaves the hierarchy (`..`: outside nvprobe's namespace).
fn cgroup_dir(root: &str, cg: &str) -> Option<std::path::PathBuf> {
    let rel = Path::new(cg.trim_start_matches('/'));
    rel.components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
        .then(|| Path::new(root).join(rel))
}

/// The cgroup path of task `tid` when the cgroup freezer holds it: v2's
/// `cgroup.events` says `frozen 1` (its `cgroup.freeze`, or an
/// ancestor's, as `docker pause` and a pod's freeze write it), or v1's
/// `freezer.state` says FROZEN (not FREEZING, which a task that cannot
/// freeze, such as one blocked in the driver, holds back).
pub fn frozen_cgroup(tid: u32) -> Option<String> {
    frozen_cgroup_at(Path::new("/proc"), Path::new("/sys/fs/cgroup"), tid)
}

fn frozen_cgroup_at(proc_root: &Path, cg_root: &Path, tid: u32) -> Option<String> {
    // A v2 path may be 4095 bytes, after a hybrid host's v1 lines: 64 KiB,
    // and a last line cut short (no newline) is not read as a shorter,
    // other cgroup's path.
    let cg = read_capped(&proc_root.join(format!("{tid}/cgroup")), CGROUP_CAP)?;
    let cg = String::from_utf8_lossy(&cg);
    let whole = cg.rfind('\n').map_or("", |end| &cg[..end]);
    let root = cg_root.to_str()?;
    whole.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let frozen = if controllers.is_empty() {
            let events = read_text(&cgroup_dir(root, path)?.join("cgroup.events"))?;
            events.lines().any(|l| l.trim() == "frozen 1")
        } else if controllers.split(',').any(|c| c == "freezer") {
            let state =
                read_text(&cgroup_dir(&format!("{root}/freezer"), path)?.join("freezer.state"))?;
            // (FREEZING: a task of it has not frozen yet, such as one in
            // the driver: not this one's answer.)
            state == "FROZEN"
        } else {
            false
        };
        // (The name is the cgroup's creator's: escaped as any text a
        // process controls.)
        frozen.then(|| {
            nvprobe_model::decode::escape_capped(path.as_bytes(), nvprobe_model::decode::PATH_FIELD)
        })
    })
}

fn read_text(p: &Path) -> Option<String> {
    read_capped(p, SMALL_CAP).map(|b| String::from_utf8_lossy(&b).trim().to_owned())
}

/// Descriptors counted at most (a process with more is not near a limit
/// nvprobe could explain, and counting them costs).
const FDS_COUNTED: u64 = 4096;

/// NVIDIA nodes read at most under the process's /dev.
const NODES_READ: usize = 64;
const MOUNTINFO_CAP: u64 = 256 << 10;

/// The per-mount options of the mount holding `path` in a mountinfo
/// text: the one whose point is `path` itself or the longest folder above
/// it.
fn mount_options<'a>(mountinfo: &'a str, path: &str) -> Option<Vec<&'a str>> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (point, opts) = (*f.get(4)?, *f.get(5)?);
            let under = point == "/" || point == path || path.starts_with(&format!("{point}/"));
            under.then_some((point.len(), opts))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, o)| o.split(',').collect())
}

/// The process's filesystem ids, groups and effective capabilities, its
/// NVIDIA nodes (through `/proc/PID/root`: its own mount namespace, no
/// link followed) and whether its /dev is mounted nodev.
pub fn access_of(base: &Path, cgroup: Option<&str>, devices_v1: Option<&str>) -> Access {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut a = Access::default();
    if let Some(st) = read_capped(&base.join("status"), STATUS_CAP) {
        for line in String::from_utf8_lossy(&st).lines() {
            let fourth = |v: &str| v.split_whitespace().nth(3).and_then(|x| x.parse().ok());
            if let Some(v) = line.strip_prefix("Uid:") {
                a.fsuid = fourth(v);
            } else if let Some(v) = line.strip_prefix("Gid:") {
                a.fsgid = fourth(v);
            } else if let Some(v) = line.strip_prefix("Groups:") {
                a.groups = v
                    .split_whitespace()
                    .filter_map(|g| g.parse().ok())
                    .take(64)
                    .collect();
            } else if let Some(v) = line.strip_prefix("CapEff:") {
                a.cap_eff = Some(v.trim().to_owned());
            }
        }
    }
    if let Ok(dir) = fs::read_dir(base.join("root/dev")) {
        let mut names: Vec<String> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("nvidia"))
            .take(NODES_READ)
            .collect();
        names.sort();
        for n in names {
            // symlink_metadata: a link is described, never followed.
            let Ok(m) = fs::symlink_metadata(base.join("root/dev").join(&n)) else {
                continue;
            };
            let chr = m.file_type().is_char_device();
            a.nodes.push(NodeFact {
                path: format!("/dev/{n}"),
                mode: m.mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
                chr,
                rdev: chr.then(|| {
                    let r = m.rdev();
                    format!("{}:{}", nix::sys::stat::major(r), nix::sys::stat::minor(r))
                }),
                nodev: None,
            });
        }
    }
    if let Some(mi) = read_capped(&base.join("mountinfo"), MOUNTINFO_CAP) {
        let text = String::from_utf8_lossy(&mi);
        // The mount holding /dev/nvidiactl: its per-mount options (nodev,
        // ro); and each node's own (a node bind-mounted from another
        // filesystem has that mount's).
        if let Some(o) = mount_options(&text, "/dev/nvidiactl") {
            a.dev_nodev = Some(o.contains(&"nodev"));
            a.dev_readonly = Some(o.contains(&"ro"));
        }
        for n in &mut a.nodes {
            n.nodev = mount_options(&text, &n.path).map(|o| o.contains(&"nodev"));
        }
    }
    // A user namespace: uid_map other than the initial one's identity map.
    if let Some(m) = read_text(&base.join("uid_map")) {
        let first: Vec<&str> = m
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        if first != ["0", "0", "4294967295"] && !first.is_empty() {
            a.userns = Some(
                m.lines()
                    .take(4)
                    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
    }
    if let Some(dir) = cgroup.and_then(|cg| cgroup_dir("/sys/fs/cgroup", cg))
        && let Ok(d) = fs::File::open(&dir)
        && let Ok(n) = crate::attach::sys::cgroup_device_programs(std::os::fd::AsFd::as_fd(&d))
    {
        a.device_programs = Some(n);
    }
    // cgroup v1: the devices controller's own list.
    if let Some(v1) = devices_v1.and_then(|cg| cgroup_dir("/sys/fs/cgroup/devices", cg))
        && let Some(t) = read_text(&v1.join("devices.list"))
    {
        a.devices_list = t.lines().take(16).map(str::to_owned).collect();
    }
    a.lsm = read_text(Path::new("/sys/kernel/security/lsm")).filter(|s| !s.is_empty());
    a.label = read_text(&base.join("attr/current"))
        .map(|l| {
            nvprobe_model::decode::escape_capped(
                l.trim_end_matches('\0').as_bytes(),
                nvprobe_model::decode::VALUE_FIELD,
            )
        })
        .filter(|l| !l.is_empty());
    a
}

/// The seccomp mode and filters (`/proc/PID/status`), the open-file limit
/// (`/proc/PID/limits`) and how many descriptors are open.
pub fn limits_of(base: &Path, cgroup: Option<&str>) -> Limits {
    let mut l = Limits::default();
    if let Some(st) = read_capped(&base.join("status"), STATUS_CAP) {
        for line in String::from_utf8_lossy(&st).lines() {
            if let Some(v) = line.strip_prefix("Seccomp:") {
                l.seccomp = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("Seccomp_filters:") {
                l.seccomp_filters = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("VmSize:") {
                l.vm_size = kib(v);
            } else if let Some(v) = line.strip_prefix("VmData:") {
                l.vm_data = kib(v);
            } else if let Some(v) = line.strip_prefix("Threads:") {
                l.threads = v.trim().parse().ok();
            }
        }
    }
    if let Some(lim) = read_capped(&base.join("limits"), STATUS_CAP) {
        let text = String::from_utf8_lossy(&lim);
        let pair = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name))
                .map(|rest| {
                    let mut w = rest.split_whitespace();
                    let num = |s: Option<&str>| s.and_then(|x| x.parse::<u64>().ok());
                    (num(w.next()), num(w.next()))
                })
        };
        l.nofile = pair("Max open files");
        l.address_space = pair("Max address space");
        l.data = pair("Max data size");
        l.nproc = pair("Max processes");
        l.memlock = pair("Max locked memory");
    }
    if let Ok(d) = fs::read_dir(base.join("fd")) {
        l.fds = Some(d.take(FDS_COUNTED as usize).count() as u64);
    }
    // The host's policy, beside the process's directory (/proc/sys).
    if let Some(proc_dir) = base.parent() {
        l.overcommit =
            read_text(&proc_dir.join("sys/vm/overcommit_memory")).and_then(|v| v.parse().ok());
        l.max_map_count =
            read_text(&proc_dir.join("sys/vm/max_map_count")).and_then(|v| v.parse().ok());
    }
    if let Some(dir) = cgroup.and_then(|cg| cgroup_dir("/sys/fs/cgroup", cg)) {
        let count = |cur: &str, max: &str| {
            let current = read_text(&dir.join(cur))?.parse().ok()?;
            let max = read_text(&dir.join(max)).and_then(|m| m.parse().ok());
            Some(CgroupCount { current, max })
        };
        l.pids = count("pids.current", "pids.max");
        l.memory = count("memory.current", "memory.max");
    }
    if let Some(cg) = cgroup {
        l.cpu_quota = cpu_quota("/sys/fs/cgroup", cg);
    }
    l
}

/// Most cgroup levels walked up for a CPU quota (a deeper path is a
/// hostile one: the kernel's own nesting is far shallower in practice).
const CGROUP_LEVELS: usize = 32;

/// The tightest CPU quota (the smallest share of a CPU) of the cgroup `cg`
/// and those above it under `root` (cgroup v2 `cpu.max`), with the cgroup
/// that sets it.
fn cpu_quota(root: &str, cg: &str) -> Option<nvprobe_model::attribution::CpuQuota> {
    let mut best: Option<nvprobe_model::attribution::CpuQuota> = None;
    let mut at = cg.trim_end_matches('/').to_owned();
    for _ in 0..CGROUP_LEVELS {
        if at.is_empty() {
            break;
        }
        if let Some((Some(quota), period)) = cgroup_dir(root, &at)
            .and_then(|d| read_text(&d.join("cpu.max")))
            .and_then(|t| cpu_max(&t))
            && best.as_ref().is_none_or(|b| {
                u128::from(quota) * u128::from(b.period) < u128::from(b.quota) * u128::from(period)
            })
        {
            best = Some(nvprobe_model::attribution::CpuQuota {
                quota,
                period,
                cgroup: nvprobe_model::decode::escape_capped(
                    at.as_bytes(),
                    nvprobe_model::decode::VALUE_FIELD,
                ),
            });
        }
        at = match at.rfind('/') {
            Some(i) => at[..i].to_owned(),
            None => String::new(),
        };
    }
    best
}

/// A cgroup's `cpu.max` ("5000 100000", "max 100000"): the quota (None
/// for max) and the period, in microseconds.
fn cpu_max(text: &str) -> Option<(Option<u64>, u64)> {
    let mut w = text.split_whitespace();
    let quota = match w.next()? {
        "max" => None,
        q => Some(q.parse().ok()?),
    };
    let period = w.next()?.parse().ok().filter(|&p: &u64| p > 0)?;
    Some((quota, period))
}

/// "  123456 kB" of /proc/PID/status, in bytes.
fn kib(v: &str) -> Option<u64> {
    v.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()
        .map(|k| k.saturating_mul(1024))
}

/// How many mappings the process at `base` (/proc/PID) has, as the
/// kernel's map count (`mm->map_count`) counts them: the lines of its maps
/// file, read a line at a time (never held whole), without the gate area
/// (`[vsyscall]`, not a mapping of the process's), up to `cap` (a few past
/// `vm.max_map_count` say all a verdict needs). None when it could not be
/// read or was empty (a process that exited meanwhile).
pub fn map_count(base: &Path, cap: u64) -> Option<u64> {
    use std::io::BufRead as _;
    let f = fs::File::open(base.join("maps")).ok()?;
    let mut r = std::io::BufReader::with_capacity(64 * 1024, f);
    let mut line = Vec::with_capacity(256);
    let mut n = 0u64;
    while n < cap {
        line.clear();
        // A line is an address range, a few numbers and a path (at most
        // PATH_MAX, escaped): the kernel bounds it.
        match r.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) if line.ends_with(b"[vsyscall]\n") => {}
            Ok(_) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    (n > 0).then_some(n)
}

/// A file's first `cap` bytes (a /proc file of a process that may be
/// hostile: never more).
pub(crate) fn read_capped(p: &Path, cap: u64) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    fs::File::open(p).ok()?.take(cap).read_to_end(&mut v).ok()?;
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_path_never_leaves_the_hierarchy() {
        assert_eq!(
            cgroup_dir("/sys/fs/cgroup", "/system.slice/x.service"),
            Some("/sys/fs/cgroup/system.slice/x.service".into())
        );
        assert_eq!(
            cgroup_dir("/sys/fs/cgroup", "/"),
            Some("/sys/fs/cgroup".into())
        );
        assert_eq!(cgroup_dir("/sys/fs/cgroup", "/../../etc"), None);
        assert_eq!(
            cgroup_dir("/sys/fs/cgroup", "/a/./b"),
            Some("/sys/fs/cgroup/a/b".into())
        );
    }

    /// A node's mount is the node itself when bind-mounted (bubblewrap's
    /// --dev-bind into a nodev /dev), else the longest folder above it;
    /// a point that only shares a prefix of the name is not above it.
    #[test]
    fn each_node_gets_the_options_of_the_mount_holding_it() {
        let mi = "22 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw\n\
                  30 22 0:5 / /dev rw,nosuid,nodev - tmpfs tmpfs rw\n\
                  31 30 0:6 /nvidia0 /dev/nvidia0 rw,nosuid - devtmpfs udev rw\n\
                  32 30 0:7 / /dev/nvidia rw,nosuid - tmpfs x rw\n";
        let nodev = |p: &str| mount_options(mi, p).map(|o| o.contains(&"nodev"));
        assert_eq!(nodev("/dev/nvidia0"), Some(false));
        assert_eq!(nodev("/dev/nvidiactl"), Some(true));
        assert_eq!(nodev("/dev/nvidia-uvm"), Some(true));
        assert_eq!(nodev("/usr/lib/x"), Some(false));
        assert_eq!(mount_options("", "/dev/nvidiactl"), None);
    }

    /// A frozen cgroup, v2 (`cgroup.events`) or v1 (`freezer.state`), is
    /// found from the task's own /proc/TID/cgroup; a thawed one is not.
    #[test]
    fn a_task_the_freezer_holds_is_found_by_its_cgroup() {
        let root = std::path::PathBuf::from(tempfile_dir_for("frozen"));
        let (proc_root, cg) = (root.join("proc"), root.join("cg"));
        let put = |p: &std::path::Path, text: &str| {
            std::fs::create_dir_all(p.parent().expect("dir")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        };
        put(&proc_root.join("7/cgroup"), "0::/pod/a\n");
        put(&cg.join("pod/a/cgroup.events"), "populated 1\nfrozen 1\n");
        put(
            &proc_root.join("8/cgroup"),
            "6:freezer:/job\n4:memory:/job\n0::/\n",
        );
        put(&cg.join("freezer/job/freezer.state"), "FROZEN\n");
        put(&proc_root.join("9/cgroup"), "0::/pod/b\n");
        put(&cg.join("pod/b/cgroup.events"), "populated 1\nfrozen 0\n");
        put(&proc_root.join("10/cgroup"), "0::/../../etc\n");
        // A path cut short by the read (no newline after it) is not the
        // shorter path of a frozen sibling; a name with an escape byte and
        // a right-to-left mark is written escaped.
        put(&proc_root.join("12/cgroup"), "0::/pod/a");
        put(&proc_root.join("13/cgroup"), "0::/pod/\u{1b}\u{202e}x\n");
        put(&cg.join("pod/\u{1b}\u{202e}x/cgroup.events"), "frozen 1\n");
        let f = |tid| frozen_cgroup_at(&proc_root, &cg, tid);
        assert_eq!(f(7).as_deref(), Some("/pod/a"));
        assert_eq!(f(8).as_deref(), Some("/job"));
        assert_eq!(f(9), None);
        assert_eq!(f(10), None);
        assert_eq!(f(11), None);
        assert_eq!(f(12), None);
        let hostile = f(13).expect("frozen");
        assert!(
            hostile.starts_with("/pod/")
                && !hostile.contains('\u{1b}')
                && !hostile.contains('\u{202e}'),
            "{hostile:?}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The tightest quota of the cgroup and those above it, with the one
    /// that sets it; none where no level has one.
    #[test]
    fn the_tightest_cpu_quota_above_a_process_is_found() {
        let root = tempfile_dir_for("cpuq");
        let mk = |rel: &str, max: Option<&str>| {
            let d = std::path::Path::new(&root).join(rel);
            std::fs::create_dir_all(&d).expect("mkdir");
            if let Some(m) = max {
                std::fs::write(d.join("cpu.max"), m).expect("write");
            }
        };
        mk("kubepods", Some("max 100000"));
        mk("kubepods/pod1", Some("50000 100000"));
        mk("kubepods/pod1/ctr", Some("max 100000"));
        mk("kubepods/pod2/ctr", Some("200000 100000"));
        let q = cpu_quota(&root, "/kubepods/pod1/ctr").expect("the pod's quota");
        assert_eq!(
            (q.quota, q.period, q.cgroup.as_str()),
            (50_000, 100_000, "/kubepods/pod1")
        );
        let q = cpu_quota(&root, "/kubepods/pod2/ctr").expect("two CPUs");
        assert_eq!(
            (q.quota, q.cgroup.as_str()),
            (200_000, "/kubepods/pod2/ctr")
        );
        assert_eq!(cpu_quota(&root, "/kubepods"), None);
        assert_eq!(cpu_quota(&root, "/../etc"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A fresh folder for test `name` (tests run at once: one each).
    fn tempfile_dir_for(name: &str) -> String {
        let d = std::env::temp_dir().join(format!("nvprobe-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d.to_string_lossy().into_owned()
    }

    #[test]
    fn a_cgroup_cpu_quota_is_read_as_the_kernel_writes_it() {
        assert_eq!(cpu_max("5000 100000\n"), Some((Some(5000), 100_000)));
        assert_eq!(cpu_max("max 100000"), Some((None, 100_000)));
        assert_eq!(cpu_max("5000 0"), None);
        assert_eq!(cpu_max("junk"), None);
        assert_eq!(cpu_max(""), None);
    }

    /// The limits a refused mapping is judged by, read from this test's
    /// own /proc entry: the data-size limit and VmData beside RLIMIT_AS,
    /// and the map count as the maps file's lines.
    #[test]
    fn a_process_s_memory_limits_and_mappings_are_read() {
        let base = Path::new("/proc/self");
        let l = limits_of(base, None);
        let vm_data = l.vm_data.expect("VmData");
        assert!(vm_data > 0 && vm_data <= l.vm_size.expect("VmSize"));
        let want = |name: &str| {
            let text = std::fs::read_to_string("/proc/self/limits").expect("limits");
            let line = text
                .lines()
                .find(|x| x.starts_with(name))
                .expect(name)
                .to_owned();
            let w: Vec<&str> = line[name.len()..].split_whitespace().collect();
            (w[0].parse::<u64>().ok(), w[1].parse::<u64>().ok())
        };
        assert_eq!(l.data, Some(want("Max data size")));
        assert_eq!(l.address_space, Some(want("Max address space")));
        assert_eq!(l.memlock, Some(want("Max locked memory")));
        let max: u64 = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .expect("max_map_count")
            .trim()
            .parse()
            .expect("a number");
        assert_eq!(l.max_map_count, Some(max));
        // Mappings come and go as the test's threads run: a count near the
        // file's, without the gate area's line.
        let text = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let lines = text.lines().filter(|l| !l.ends_with("[vsyscall]")).count() as u64;
        let n = map_count(base, 1 << 20).expect("maps");
        assert!(
            n > 10 && n.abs_diff(lines) < lines / 2,
            "{n} against {lines}"
        );
        // Counted up to the cap, and nothing for a process not there.
        assert_eq!(map_count(base, 5), Some(5));
        assert_eq!(map_count(Path::new("/proc/nonexistent-pid"), 100), None);
    }
}
