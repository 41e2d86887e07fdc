//! Who a process is and where it runs: its executable, command line, the
//! environment that steers GPU selection, its cgroup and, parsed from the
//! cgroup path, the container runtime, container id and Kubernetes pod.
//! The live collector reads these from /proc while the process lives and
//! writes them as a `process` record, so replays see the same identity.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The environment variables that decide which GPUs and which libraries a
/// CUDA process uses; nothing else of the environment is kept.
pub const STEERING_ENV: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_MPS_PIPE_DIRECTORY",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
];

/// A libcuda file a process has mapped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LibcudaMapped {
    pub path: String,
    /// The driver version the file carries, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The CUDA toolkit's link-time stub (returns CUDA_ERROR_STUB_LIBRARY).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stub: bool,
}

/// A libcuda file the dynamic loader opened (read when the open is seen,
/// whether or not the library then loaded).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LibcudaOpened {
    pub path: String,
    /// The driver version the file carries, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stub: bool,
    /// Why the loader cannot load it (its ELF header: empty, not ELF,
    /// another class or machine, truncated), when it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unloadable: Option<String>,
}

/// Where a process runs, parsed from its cgroup path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Container {
    /// docker, containerd, cri-o, podman, lxc, kubernetes (runtime unknown).
    pub runtime: String,
    /// The container id (64 hex digits for OCI runtimes; the LXC/Proxmox
    /// container's name or number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The Kubernetes pod's uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// guaranteed, burstable or besteffort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    /// The pod's name, namespace and the container's name, where the
    /// container runtime's own record of the container says so (see
    /// [`kube_names`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
}

/// The Kubernetes names a container runtime keeps with a container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeNames {
    pub pod_name: Option<String>,
    pub pod_namespace: Option<String>,
    pub container_name: Option<String>,
}

/// Longest name kept (Kubernetes names are at most 253 characters).
const NAME_MAX: usize = 253;

/// The pod name, namespace and container name in a runtime's record of a
/// container: the OCI bundle's `annotations` (containerd's CRI plugin:
/// `io.kubernetes.cri.sandbox-name`, `…sandbox-namespace`,
/// `…container-name`; CRI-O: `io.kubernetes.pod.name`,
/// `io.kubernetes.pod.namespace`, `io.kubernetes.container.name`) or
/// docker's `Config.Labels` (the same keys as CRI-O, set by cri-dockerd).
/// Values that are not short plain names are left out.
pub fn kube_names(doc: &serde_json::Value) -> KubeNames {
    let maps = [&doc["annotations"], &doc["Config"]["Labels"]];
    let get = |keys: &[&str]| {
        maps.iter().find_map(|m| {
            keys.iter().find_map(|k| {
                m.get(*k)?.as_str().filter(|v| {
                    !v.is_empty()
                        && v.len() <= NAME_MAX
                        && v.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
                })
            })
        })
    };
    KubeNames {
        pod_name: get(&["io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"])
            .map(Into::into),
        pod_namespace: get(&[
            "io.kubernetes.cri.sandbox-namespace",
            "io.kubernetes.pod.namespace",
        ])
        .map(Into::into),
        container_name: get(&[
            "io.kubernetes.cri.container-name",
            "io.kubernetes.container.name",
        ])
        .map(Into::into),
    }
}

/// Where a runtime keeps its record of container `id`, relative to the
/// host's root: containerd's CRI bundle, CRI-O's, docker's. None for an
/// id that is not 64 hex digits (nothing else is ever joined to a path).
pub fn runtime_record(runtime: &str, id: &str) -> Option<String> {
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(match runtime {
        "containerd" => {
            format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json")
        }
        "cri-o" => format!("run/containers/storage/overlay-containers/{id}/userdata/config.json"),
        "docker" => format!("var/lib/docker/containers/{id}/config.v2.json"),
        _ => return None,
    })
}

/// The `process` record: one per process nvprobe follows, when it is
/// first seen (read from /proc while it lives).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ProcessInfo {
    pub pid: u32,
    /// The task name when nvprobe first saw the process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    /// The executable (`/proc/PID/exe`), not the task name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    /// The command line, argument by argument (left out with --no-cmdline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<Vec<String>>,
    /// The steering variables of [`STEERING_ENV`] that are set.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The environment was longer than nvprobe reads of it: a variable
    /// missing from `env` may be set past that point (absent: read whole).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub env_cut: bool,
    /// The cgroup v2 path (or the v1 path of the devices/pids controller).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub libcuda: Vec<LibcudaMapped>,
    /// The NVML library, when the process has it mapped (a driver client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub libnvml: Option<String>,
    /// What the kernel would check the process's calls against, read
    /// with its identity (`/proc/PID/status` and `limits`, its fd table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Who the process is to the kernel's permission checks, and the
    /// NVIDIA nodes as it sees them (in its own mount namespace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// Why the identity is partial ("the process had exited"), if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When it was read: at the process's first NVIDIA event (absent), or
    /// again at a failure ("cuinit_failed", "context_failed"), so that a
    /// limit or filter set up later is in the evidence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_at: Option<String>,
    /// The other processes that had a GPU node open, read at a failed
    /// first context (at most 64).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_holders: Vec<GpuHolder>,
    /// The libcuda files the dynamic loader opened, each checked as the
    /// loader would load it (at most 8).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub libcuda_opened: Vec<LibcudaOpened>,
    /// Libraries the process preloads (`LD_PRELOAD`, /etc/ld.so.preload)
    /// that export cuInit: the program's CUDA calls reach them before
    /// libcuda (at most 8).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cuda_preloads: Vec<String>,
    /// The libraries the process's `/etc/ld.so.preload` lists (read in its
    /// own root; at most 8): the loader preloads them into every program.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_preloads: Vec<String>,
    /// It already held an NVIDIA descriptor when nvprobe started (the
    /// start's scan of /proc found it): its start-up was not seen.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held_at_start: bool,
    /// The process that traces it with ptrace (`TracerPid` of
    /// /proc/PID/status: strace, a debugger, a sandbox's supervisor), which
    /// can skip any of its system calls and answer them itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracer: Option<Tracer>,
}

/// A ptrace tracer of a process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Tracer {
    pub pid: u32,
    /// Its task name (`/proc/PID/comm`), empty where it could not be read.
    pub comm: String,
}

/// A process with GPU nodes (/dev/nvidiaN) open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GpuHolder {
    pub pid: u32,
    pub comm: String,
    /// The minors of the GPU nodes it has open.
    pub minors: Vec<u32>,
}

/// Add the libcuda files of `more` that `info` does not list yet (at most
/// 8 in all).
pub(crate) fn merge_opened(info: Option<&mut ProcessInfo>, more: Vec<LibcudaOpened>) {
    let Some(i) = info else { return };
    for f in more {
        if i.libcuda_opened.len() < 8 && !i.libcuda_opened.iter().any(|x| x.path == f.path) {
            i.libcuda_opened.push(f);
        }
    }
}

impl ProcessInfo {
    /// When the facts were read, in words.
    pub fn read_when(&self) -> &'static str {
        match self.read_at.as_deref() {
            Some("cuinit_failed") => "when cuInit had failed",
            Some("context_failed") => "when the first context had failed",
            _ => "at its first NVIDIA file",
        }
    }
}

/// What the kernel's permission check of an open compares: the process's
/// filesystem ids, groups and effective capabilities (`/proc/PID/status`),
/// and each NVIDIA node's mode and owner, read through `/proc/PID/root`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Access {
    /// The filesystem uid and gid (the fourth field of `Uid:`, `Gid:`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsuid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsgid: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<u32>,
    /// `CapEff`, hex as the kernel writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_eff: Option<String>,
    /// The NVIDIA nodes under the process's /dev (at most 64).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeFact>,
    /// Whether the mount holding the process's /dev is nodev.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev_nodev: Option<bool>,
    /// Whether that mount is read-only (a node cannot be made there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev_readonly: Option<bool>,
    /// The process's user namespace mapping (`/proc/PID/uid_map`), when
    /// it is not the initial namespace's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub userns: Option<String>,
    /// The device programs (cgroup v2 `BPF_CGROUP_DEVICE`, its own and its
    /// ancestors') that decide the process's device opens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_programs: Option<u32>,
    /// cgroup v1's `devices.list` of the process's cgroup (at most 16
    /// lines).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices_list: Vec<String>,
    /// The security modules active on the host (`/sys/kernel/security/lsm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lsm: Option<String>,
    /// The process's security label (`/proc/PID/attr/current`: an AppArmor
    /// profile, an SELinux context).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// One cgroup v1 `devices.list` entry as numbers ("c 195:* rwm": char
/// devices, major 195, any minor, read, write, mknod).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevRule {
    /// `a`: every device.
    pub all: bool,
    /// `c`: character devices (else block devices).
    pub char_dev: bool,
    /// None: `*`.
    pub major: Option<u32>,
    pub minor: Option<u32>,
    /// It allows reading or writing (`r` or `w`, not only `m`).
    pub read_or_write: bool,
}

impl DevRule {
    /// An entry as the kernel writes it; None when it is not one.
    pub fn parse(entry: &str) -> Option<Self> {
        let mut f = entry.split_whitespace();
        let (kind, dev, perm) = (f.next()?, f.next()?, f.next()?);
        let num = |x: &str| {
            if x == "*" {
                Ok(None)
            } else {
                x.parse().map(Some)
            }
        };
        let (maj, min) = dev.split_once(':').unwrap_or((dev, "*"));
        Some(Self {
            all: kind == "a",
            char_dev: kind == "c",
            major: num(maj).ok()?,
            minor: num(min).ok()?,
            read_or_write: perm.contains('r') || perm.contains('w'),
        })
    }
}

impl Access {
    /// `devices_list`'s entries as numbers (those that parse).
    pub fn device_rules(&self) -> Vec<DevRule> {
        self.devices_list
            .iter()
            .filter_map(|l| DevRule::parse(l))
            .collect()
    }
    /// The device number of the node at `path`, as the process saw it.
    pub fn node_devno(&self, path: &str) -> Option<(u32, u32)> {
        let r = self
            .nodes
            .iter()
            .find(|n| n.path == path)?
            .rdev
            .as_deref()?;
        let (a, b) = r.split_once(':')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    }
}

/// One node as the process sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct NodeFact {
    pub path: String,
    /// The permission bits (`st_mode & 07777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// A character device, and its number ("195:255").
    pub chr: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdev: Option<String>,
    /// Whether the mount holding the node (the node itself when it is
    /// bind-mounted, else its folder's) is nodev.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodev: Option<bool>,
}

/// CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH: capabilities that pass the mode.
const CAP_DAC_OVERRIDE: u64 = 1 << 1;

impl Access {
    /// Whether the effective capabilities hold capability `bit` (None:
    /// not read).
    pub fn has_cap(&self, bit: u32) -> Option<bool> {
        let c = u64::from_str_radix(self.cap_eff.as_deref()?, 16).ok()?;
        Some(c & (1u64 << (bit & 63)) != 0)
    }

    /// The effective capabilities as bits (none when unknown).
    fn caps(&self) -> u64 {
        self.cap_eff
            .as_deref()
            .and_then(|c| u64::from_str_radix(c, 16).ok())
            .unwrap_or(0)
    }

    /// Whether the mode and owner of `node` let this process read and
    /// write it (libcuda opens its nodes O_RDWR), as generic_permission
    /// decides: CAP_DAC_OVERRIDE passes; else the owner's, the group's or
    /// the others' bits. None when the ids are unknown.
    pub fn mode_allows_rw(&self, node: &NodeFact) -> Option<bool> {
        let (uid, gid) = (self.fsuid?, self.fsgid?);
        let caps = self.caps();
        if caps & CAP_DAC_OVERRIDE != 0 {
            return Some(true);
        }
        let bits = if uid == node.uid {
            node.mode >> 6
        } else if gid == node.gid || self.groups.contains(&node.gid) {
            node.mode >> 3
        } else {
            node.mode
        } & 0o6;
        Some(bits == 0o6)
    }

    /// Who the process is, in words ("uid 65534 gid 65534, no supplementary
    /// groups, without CAP_DAC_OVERRIDE").
    pub fn who(&self) -> String {
        let caps = self.caps();
        format!(
            "uid {} gid {}, {}, {} CAP_DAC_OVERRIDE",
            self.fsuid.map_or_else(|| "?".into(), |u| u.to_string()),
            self.fsgid.map_or_else(|| "?".into(), |g| g.to_string()),
            if self.groups.is_empty() {
                "no supplementary groups".to_owned()
            } else {
                format!("groups {:?}", self.groups)
            },
            if caps & CAP_DAC_OVERRIDE != 0 {
                "with"
            } else {
                "without"
            }
        )
    }
}

/// The facts beneath a refused call: which mechanisms could have refused
/// it (seccomp, the open-file limit), read while the process lived.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Limits {
    /// `Seccomp` of /proc/PID/status: 0 none, 1 strict, 2 filter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp: Option<u8>,
    /// `Seccomp_filters`: how many filters the process runs under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp_filters: Option<u32>,
    /// The soft and hard RLIMIT_NOFILE ("Max open files" of
    /// /proc/PID/limits; None: unlimited).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nofile: Option<(Option<u64>, Option<u64>)>,
    /// Open descriptors when read (counted up to 4096).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fds: Option<u64>,
    /// RLIMIT_AS, soft and hard ("Max address space"; None: unlimited).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_space: Option<(Option<u64>, Option<u64>)>,
    /// RLIMIT_NPROC, soft and hard ("Max processes").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nproc: Option<(Option<u64>, Option<u64>)>,
    /// RLIMIT_MEMLOCK, soft and hard ("Max locked memory"; None:
    /// unlimited): what a process without CAP_IPC_LOCK may lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memlock: Option<(Option<u64>, Option<u64>)>,
    /// The cgroup's tasks against `pids.max` (cgroup v2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<CgroupCount>,
    /// The cgroup's memory against `memory.max` (bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<CgroupCount>,
    /// The tightest CPU quota of the process's cgroup and those above it
    /// (`cpu.max`, cgroup v2); absent when none has one (or the host has
    /// cgroup v1 only, whose `cpu.cfs_quota_us` is not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<CpuQuota>,
    /// The process's address-space size (`VmSize` of /proc/PID/status),
    /// bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_size: Option<u64>,
    /// Its threads (`Threads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u64>,
    /// The host's `vm.overcommit_memory` (2: strict accounting, where a
    /// large reservation fails with ENOMEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overcommit: Option<u8>,
    /// RLIMIT_DATA, soft and hard ("Max data size"; None: unlimited): it
    /// counts private writable memory (`VmData`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<(Option<u64>, Option<u64>)>,
    /// The process's private writable memory (`VmData`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_data: Option<u64>,
    /// Its mappings (lines of /proc/PID/maps), read again when its
    /// start-up failed (counted up to 1,048,576).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_count: Option<u64>,
    /// The host's `vm.max_map_count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_map_count: Option<u64>,
}

/// A cgroup v2 CPU quota: `quota` microseconds of CPU in each `period`,
/// set on `cgroup` (the process's own or one above it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuQuota {
    pub quota: u64,
    pub period: u64,
    pub cgroup: String,
}

/// A cgroup counter and its limit (None: `max`, no limit).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CgroupCount {
    pub current: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

impl CgroupCount {
    /// At its limit (a new task or page is refused).
    pub fn at_limit(&self) -> bool {
        self.max.is_some_and(|m| self.current >= m)
    }
}

impl ProcessInfo {
    /// The program the process runs: its executable, or, when that is the
    /// dynamic loader run by hand (`ld-linux-x86-64.so.2 [options]
    /// PROGRAM …`, as NVIDIA's container images start nvidia-smi), the
    /// program the loader was given.
    pub fn program(&self) -> Option<&str> {
        let exe = self.exe.as_deref()?;
        let base = exe.rsplit('/').next().unwrap_or(exe);
        if !(base.starts_with("ld-linux") || base.starts_with("ld-musl") || base == "ld.so") {
            return Some(exe);
        }
        let args = self.cmdline.as_deref()?;
        let mut i = 1;
        while let Some(a) = args.get(i) {
            match a.as_str() {
                // Options that take a value.
                "--library-path"
                | "--inhibit-rpath"
                | "--audit"
                | "--preload"
                | "--argv0"
                | "--glibc-hwcaps-prefix"
                | "--glibc-hwcaps-mask" => i += 2,
                o if o.starts_with("--") => i += 1,
                p => return Some(p),
            }
        }
        Some(exe)
    }

    /// The command line as one shell-readable line, shortened to `max`
    /// characters.
    pub fn cmdline_text(&self, max: usize) -> Option<String> {
        let args = self.cmdline.as_ref()?;
        let mut s = String::new();
        for a in args {
            if !s.is_empty() {
                s.push(' ');
            }
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                s.push_str(a);
            } else {
                s.push('\'');
                s.push_str(&a.replace('\'', "'\\''"));
                s.push('\'');
            }
        }
        if s.chars().count() > max {
            s = s.chars().take(max).collect::<String>() + "…";
        }
        Some(s)
    }
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The 64-hex container id in a cgroup path component such as
/// `docker-<id>.scope`, `cri-containerd-<id>.scope`, `crio-<id>.scope`,
/// `libpod-<id>.scope` or a bare `<id>`.
fn container_id(component: &str) -> Option<(&'static str, String)> {
    let c = component.strip_suffix(".scope").unwrap_or(component);
    for (prefix, runtime) in [
        ("docker-", "docker"),
        ("cri-containerd-", "containerd"),
        ("crio-conmon-", "cri-o"),
        ("crio-", "cri-o"),
        ("libpod-conmon-", "podman"),
        ("libpod-", "podman"),
    ] {
        if let Some(id) = c.strip_prefix(prefix)
            && is_hex64(id)
        {
            return Some((runtime, id.to_owned()));
        }
    }
    is_hex64(c).then(|| ("", c.to_owned()))
}

/// The pod uid and QoS class in a kubelet cgroup component:
/// `kubepods-burstable-pod<uid>.slice` (systemd driver, dashes for the
/// uid's underscores) or `pod<uid>` (cgroupfs driver).
fn pod(path: &str) -> Option<(String, Option<String>)> {
    let mut qos = None;
    for comp in path.split('/') {
        let c = comp.strip_suffix(".slice").unwrap_or(comp);
        for q in ["burstable", "besteffort"] {
            if c.contains(&format!("kubepods-{q}")) || c == q {
                qos = Some(q.to_owned());
            }
        }
        let uid = match c.rfind("-pod") {
            Some(i) => Some(&c[i + 4..]),
            None => c.strip_prefix("pod"),
        };
        if let Some(uid) = uid {
            let uid = uid.replace('_', "-");
            if uid.len() == 36 && uid.chars().all(|ch| ch.is_ascii_hexdigit() || ch == '-') {
                let qos = qos.or_else(|| Some("guaranteed".to_owned()));
                return Some((uid, qos));
            }
        }
    }
    None
}

/// The container a cgroup path belongs to, if any: Kubernetes pods (any
/// CRI runtime), docker, podman, CRI-O, containerd, LXC and Proxmox
/// (`/lxc/<id>`, `/lxc.payload.<name>`). None for a host process.
pub fn parse_cgroup(path: &str) -> Option<Container> {
    let kube = pod(path);
    let found = path.split('/').rev().find_map(container_id);
    if let Some((runtime, id)) = found {
        let runtime = match (runtime, &kube) {
            ("", Some(_)) => "kubernetes",
            ("", None) if path.contains("/docker/") => "docker",
            ("", None) => "unknown",
            (r, _) => r,
        };
        return Some(Container {
            runtime: runtime.to_owned(),
            id: Some(id),
            pod_uid: kube.as_ref().map(|k| k.0.clone()),
            qos: kube.and_then(|k| k.1),
            ..Container::default()
        });
    }
    if let Some((uid, qos)) = kube {
        return Some(Container {
            runtime: "kubernetes".to_owned(),
            id: None,
            pod_uid: Some(uid),
            qos,
            ..Container::default()
        });
    }
    // LXC and Proxmox: /lxc/<name>/…, /lxc.payload.<name>/…,
    // /lxc.monitor.<name>.
    for comp in path.split('/') {
        let name = comp
            .strip_prefix("lxc.payload.")
            .or_else(|| comp.strip_prefix("lxc.monitor."));
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            return Some(lxc(n));
        }
    }
    let mut parts = path.split('/').filter(|c| !c.is_empty());
    while let Some(c) = parts.next() {
        if c == "lxc"
            && let Some(n) = parts.next()
        {
            return Some(lxc(n));
        }
    }
    None
}

fn lxc(name: &str) -> Container {
    Container {
        runtime: "lxc".to_owned(),
        id: Some(name.to_owned()),
        ..Container::default()
    }
}

pub use crate::visible::{HostGpu, resolve_visible, visible_repeat};

#[cfg(test)]
#[path = "attribution_tests.rs"]
mod tests;
