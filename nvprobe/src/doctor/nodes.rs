//! The nodes area: the device nodes /proc/devices and the driver's GPUs
//! call for, nvidia-caps, and whether a user may open them.

use std::{collections::BTreeMap, path::Path, time::Duration};

use super::access;
use super::check::{Check, Options, Verdict, check};
use crate::{host::Majors, safefs};

/// A device node as the host tree has it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    major: u32,
    minor: u32,
    mode: u32,
    /// Owner and group, when known (stat, or a manifest that has them).
    owner: Option<(u32, u32)>,
}

/// The nodes under ROOT/dev: from `ROOT/dev.manifest` when present, else
/// from stat().
fn nodes(root: &Path) -> Result<BTreeMap<String, Node>, String> {
    let manifest = root.join("dev.manifest");
    let mut out = BTreeMap::new();
    if let Some(text) = safefs::read_text(root, "dev.manifest", safefs::CAP) {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || {
                format!(
                    "{}:{}: expected `PATH c MAJOR:MINOR MODE [UID GID]`, got {line:?}",
                    manifest.display(),
                    n + 1
                )
            };
            let f: Vec<&str> = line.split_whitespace().collect();
            let (path, mm, mode, owner) = match f[..] {
                [path, "c", mm, mode] => (path, mm, mode, None),
                [path, "c", mm, mode, uid, gid] => (
                    path,
                    mm,
                    mode,
                    Some((
                        uid.parse().map_err(|_| bad())?,
                        gid.parse().map_err(|_| bad())?,
                    )),
                ),
                _ => return Err(bad()),
            };
            let (ma, mi) = mm.split_once(':').ok_or_else(bad)?;
            out.insert(
                path.to_owned(),
                Node {
                    major: ma.parse().map_err(|_| bad())?,
                    minor: mi.parse().map_err(|_| bad())?,
                    mode: u32::from_str_radix(mode, 8).map_err(|_| bad())?,
                    owner,
                },
            );
        }
        return Ok(out);
    }
    for n in crate::host::nvidia_char_nodes(root) {
        out.insert(
            n.path,
            Node {
                major: n.major,
                minor: n.minor,
                mode: n.mode,
                owner: Some((n.uid, n.gid)),
            },
        );
    }
    Ok(out)
}

/// GPU minors the driver knows: /proc/driver/nvidia/gpus/*/information
/// ("Device Minor: N").
fn gpu_minors(root: &Path) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let Some(buses) = safefs::read_dir_noted(root, "proc/driver/nvidia/gpus") else {
        return out;
    };
    for bus in buses {
        let Ok(info) = crate::host::read_driver_file(
            root,
            &format!("proc/driver/nvidia/gpus/{bus}/information"),
        ) else {
            continue;
        };
        if let Some(m) = info.lines().find_map(|l| {
            l.strip_prefix("Device Minor:")
                .and_then(|v| v.trim().parse().ok())
        }) {
            out.push((bus, m));
        }
    }
    out.sort();
    out
}

/// The nodes the driver calls for, nvidia-caps, and (given a user) whether
/// that user may open them: by their modes, and on the live host by a real
/// open.
pub(super) fn node_checks(
    o: &Options,
    user: Option<&access::User>,
    m: &Majors,
    out: &mut Vec<Check>,
) {
    let root = o.root.as_path();
    let have = match nodes(root) {
        Ok(n) => n,
        Err(e) => {
            out.push(check(
                "nodes",
                "manifest",
                Verdict::Fail,
                e,
                Some("fix the manifest line"),
            ));
            return;
        }
    };
    for (path, ma, mi) in wanted(root, m) {
        out.push(node_check(&have, &path, ma, mi));
    }
    out.extend(caps_check(&have, m));
    let Some(u) = user else { return };
    let Some(c) = user_access_check(u, &have) else {
        return;
    };
    out.push(c);
    if o.live {
        open_checks(u, &have, out);
    }
}

/// (path, major, minor) of each node the majors and the driver's GPUs
/// call for.
fn wanted(root: &Path, m: &Majors) -> Vec<(String, u32, u32)> {
    let mut want: Vec<(String, u32, u32)> = Vec::new();
    if let Some(nv) = m.nvidia {
        want.push(("/dev/nvidiactl".into(), nv, 255));
        for (_, minor) in gpu_minors(root) {
            want.push((format!("/dev/nvidia{minor}"), nv, minor));
        }
    }
    if let Some(uvm) = m.uvm {
        want.push(("/dev/nvidia-uvm".into(), uvm, 0));
        want.push(("/dev/nvidia-uvm-tools".into(), uvm, 1));
    }
    want
}

/// One wanted node: present, with the right numbers and an open mode.
fn node_check(have: &BTreeMap<String, Node>, path: &str, ma: u32, mi: u32) -> Check {
    let id = "node";
    match have.get(path) {
        None => check(
            "nodes",
            id,
            Verdict::Fail,
            format!("{path} is missing (expected char {ma}:{mi})"),
            Some(
                "libcuda will try the setuid nvidia-modprobe to create it; create it yourself with nvidia-modprobe -c0 -u, or pass it into the container",
            ),
        ),
        Some(n) if (n.major, n.minor) != (ma, mi) => check(
            "nodes",
            id,
            Verdict::Fail,
            format!(
                "{path} is char {}:{}, not {ma}:{mi} as /proc/devices says",
                n.major, n.minor
            ),
            Some(
                "remove the stale node and recreate it (nvidia-modprobe -c0 -u), or fix the container's bind mount",
            ),
        ),
        Some(n) if n.mode & 0o006 != 0o006 => check(
            "nodes",
            id,
            Verdict::Warn,
            format!(
                "{path} is char {ma}:{mi} with mode {:04o}: other users cannot open it read-write",
                n.mode
            ),
            Some(
                "CUDA needs read-write access: the usual mode is 0666 (or a group the users are in)",
            ),
        ),
        Some(n) => check(
            "nodes",
            id,
            Verdict::Ok,
            format!("{path} is char {ma}:{mi}, mode {:04o}", n.mode),
            None,
        ),
    }
}

/// /dev/nvidia-caps/*: MIG and fabric capabilities, on their own major.
fn caps_check(have: &BTreeMap<String, Node>, m: &Majors) -> Option<Check> {
    let caps: Vec<(&String, &Node)> = have
        .iter()
        .filter(|(p, _)| p.starts_with("/dev/nvidia-caps/"))
        .collect();
    let (Some(cm), false) = (m.caps, caps.is_empty()) else {
        return None;
    };
    let wrong: Vec<String> = caps
        .iter()
        .filter(|(_, n)| n.major != cm)
        .map(|(p, n)| format!("{p} is {}:{}", n.major, n.minor))
        .collect();
    Some(if wrong.is_empty() {
        check(
            "nodes",
            "caps",
            Verdict::Ok,
            format!("{} /dev/nvidia-caps nodes on major {cm}", caps.len()),
            None,
        )
    } else {
        check(
            "nodes",
            "caps",
            Verdict::Fail,
            format!("nvidia-caps is major {cm}, but {}", wrong.join(", ")),
            Some(
                "recreate them: nvidia-modprobe -f /proc/driver/nvidia/capabilities/... (or let the container runtime pass the host's in)",
            ),
        )
    })
}

/// Whether the user may open the nodes CUDA needs by their modes; None
/// when there is none of them to judge.
fn user_access_check(u: &access::User, have: &BTreeMap<String, Node>) -> Option<Check> {
    // CUDA needs nvidiactl, the GPU nodes and nvidia-uvm; uvm-tools only
    // profilers and debuggers.
    let (mut denied, mut denied_tools) = (Vec::new(), Vec::new());
    let mut checked = 0;
    for (path, n) in have
        .iter()
        .filter(|(p, _)| !p.starts_with("/dev/nvidia-caps/"))
    {
        let gpu = path
            .strip_prefix("/dev/nvidia")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        let tools = path == "/dev/nvidia-uvm-tools";
        if !(gpu || tools || path == "/dev/nvidiactl" || path == "/dev/nvidia-uvm") {
            continue;
        }
        checked += 1;
        let (uid, gid) = n.owner.unwrap_or((u32::MAX, u32::MAX));
        if !u.may_rw(n.mode, uid, gid) {
            let what = match n.owner {
                Some((uid, gid)) => format!("{path} ({:04o} {uid}:{gid})", n.mode),
                None => format!("{path} ({:04o}, owner unknown)", n.mode),
            };
            if tools {
                denied_tools.push(what);
            } else {
                denied.push(what);
            }
        }
    }
    if checked == 0 {
        return None;
    }
    let who = format!("user {} (uid {}, groups {:?})", u.name, u.uid, u.groups);
    Some(if !denied.is_empty() {
        check(
            "nodes",
            "user_access",
            Verdict::Fail,
            format!("{who} cannot open read-write: {}", denied.join(", ")),
            Some(
                "cuInit fails for this user (CUDA_ERROR_NO_DEVICE or NOT_INITIALIZED): add the user to the nodes' group (e.g. video), or set the driver's NVreg_DeviceFileMode/GID, or a udev rule",
            ),
        )
    } else if !denied_tools.is_empty() {
        check(
            "nodes",
            "user_access",
            Verdict::Warn,
            format!(
                "{who} may open the CUDA nodes, not {}",
                denied_tools.join(", ")
            ),
            Some(
                "CUDA itself does not need nvidia-uvm-tools; profilers and debuggers (Nsight, cuda-gdb) do",
            ),
        )
    } else {
        check(
            "nodes",
            "user_access",
            Verdict::Ok,
            format!("{who} may open the {checked} NVIDIA nodes read-write by their modes"),
            None,
        )
    })
}

/// A real open, where permissions or a device cgroup may still refuse.
fn open_checks(u: &access::User, have: &BTreeMap<String, Node>, out: &mut Vec<Check>) {
    for path in ["/dev/nvidiactl", "/dev/nvidia-uvm-tools"] {
        if !have.contains_key(path) {
            continue;
        }
        out.push(open_check(u, path));
    }
}

fn open_check(u: &access::User, path: &str) -> Check {
    let r = access::try_open(path, Some(u), Duration::from_secs(2));
    let as_who = format!("open({path}, O_RDWR) as {}", u.name);
    match r {
        access::Opened::Ok => check("nodes", "open", Verdict::Ok, format!("{as_who}: ok"), None),
        access::Opened::Errno(e) => check(
            "nodes",
            "open",
            Verdict::Fail,
            format!("{as_who}: {} ({})", e, e.desc()),
            Some(match e {
                nix::errno::Errno::EPERM => {
                    "EPERM on a node the mode allows: a device cgroup (container) or an LSM refuses it; the host must allow the NVIDIA majors for this container"
                }
                nix::errno::Errno::EACCES => {
                    "the node's permissions refuse this user: see user_access"
                }
                nix::errno::Errno::ENXIO | nix::errno::Errno::ENODEV => {
                    "the driver has no device behind this node: the module is not (fully) loaded, or the node is stale"
                }
                _ => "the open failed: see the kernel log (dmesg | grep -i nvrm)",
            }),
        ),
        access::Opened::TimedOut => check(
            "nodes",
            "open",
            Verdict::Fail,
            format!("{as_who}: still blocked after 2 s"),
            Some(
                "the driver is stuck (another process holds it, or the GPU is hung): see nvprobe watch's stall reports and the kernel log",
            ),
        ),
        access::Opened::NotRun(why) => check(
            "nodes",
            "open",
            Verdict::Warn,
            format!("{as_who}: not tested ({why})"),
            None,
        ),
    }
}
