//! The rule table: every diagnosis a verdict can carry (its id, hint and
//! public reference, declared once by `rule_table!`), the diagnosis a
//! check makes, and its severity. The checks that find them are in
//! `rules.rs`.

use serde::Serialize;

use super::{
    facts::Exit,
    state::{ProcInit, SignalInfo},
};
use crate::{hmm_issues, hmm_reload};

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct Diagnosis {
    pub id: DiagId,
    pub evidence: String,
    #[serde(deserialize_with = "crate::decode::intern::static_str")]
    pub hint: crate::decode::Name,
    /// error (explains the outcome), warning, recovered (a problem the
    /// start-up got past: it never explains a failure) or info.
    #[serde(default)]
    pub severity: DiagSeverity,
    /// What the rule found it about, for the passes after the rules (the
    /// evidence says it to people; nothing reads the evidence back).
    #[serde(skip)]
    pub(crate) about: About,
}

/// The facts a diagnosis rests on that later passes need.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct About {
    /// The NVIDIA path it is about (a node problem): one the start-up later
    /// opened makes it a problem got past.
    pub(crate) path: Option<String>,
    /// What UVM_PAGEABLE_MEM_ACCESS had answered the failed call's
    /// va_space.
    pub(crate) pageable: Option<bool>,
    /// It names the processes that held the GPU.
    pub(crate) holders: bool,
    /// Where the evidence goes on after the outcome it begins with
    /// ("cuInit returned …"): the verdict's line says the outcome once.
    pub(crate) detail_at: Option<usize>,
    /// Its evidence ends with what the stall check found before this time
    /// (`rules_kill::stall_seen`).
    pub(crate) stall_by: Option<u64>,
}

/// One row of the rule table.
pub struct Rule {
    pub id: DiagId,
    pub hint: &'static str,
    /// Where the failure and its remedy are documented.
    pub reference: &'static str,
}

pub(crate) const HMM_HINT: &str = concat!(
    "if this kernel has HMM (CONFIG_HMM_MIRROR and CONFIG_DEVICE_PRIVATE) and nvidia_uvm's \
uvm_disable_hmm is N, UVM's HMM support is a known cause (",
    hmm_issues!(),
    "): reload it with `",
    hmm_reload!(),
    "`"
);

/// Declares the rule table: [`DiagId`] (one variant per row, so a
/// misspelt id does not compile), its string (the JSON `id`), and
/// [`RULES`] in the same order, so `DiagId::rule` is an index.
macro_rules! rule_table {
    ($($v:ident => $id:literal, reference: $r:expr, hint: $h:expr;)+) => {
        /// Every diagnosis a verdict can carry.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum DiagId { $($v),+ }
        impl DiagId {
            pub const ALL: &[DiagId] = &[$(DiagId::$v),+];
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$v => $id),+ }
            }
        }
        #[rustfmt::skip]
        pub const RULES: &[Rule] = &[$(Rule { id: DiagId::$v, hint: $h, reference: $r }),+];
    };
}

#[rustfmt::skip]
rule_table! {
    NodeWrongDevice => "node_wrong_device", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "another file is mounted or created at this path: check the container's device bind mounts and /dev";
    NodePermission => "node_permission", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "EACCES: the node's mode and owner do not let this process's user and groups in (compare ls -l of the node with id; \
add the user to the node's group or pass the node with the container's user in mind), its mount is nodev, or a security module \
(AppArmor, SELinux, Landlock) refused it (its denial is in dmesg or the audit log); the device cgroup answers EPERM, not EACCES";
    NodeNodev => "node_nodev", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the filesystem holding the node is mounted nodev, which refuses every device open whatever the mode: \
mount it without nodev (a container's own /dev tmpfs needs dev), or pass the nodes in through the runtime \
(docker --device or --gpus, the NVIDIA device plugin)";
    SecurityModuleDenied => "security_module_denied", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the mode, the owner and the process's capabilities allow this open and the mount is not nodev, so a \
security module refused it (AppArmor, SELinux, Landlock: /sys/kernel/security/lsm lists those active; or a \
seccomp profile that returns EACCES): find its denial in dmesg or the audit log (apparmor=\"DENIED\", avc: denied) \
and allow the NVIDIA nodes in the profile";
    IoctlRefused => "ioctl_refused", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "a security module refused the NVIDIA ioctl (SELinux's ioctl permissions, Landlock's \
LANDLOCK_ACCESS_FS_IOCTL_DEV, a BPF LSM program; /sys/kernel/security/lsm lists those active): find its denial in the \
audit log or dmesg (avc: denied { ioctl }) and allow the NVIDIA devices' ioctls for the process's label or sandbox";
    NotPermitted => "not_permitted", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "EPERM is never the file's mode (that refuses with EACCES): for a device node it is the device cgroup (allow \
char 195:* and the nvidia-uvm major from /proc/devices, rwm: docker --gpus or --device, the NVIDIA device plugin, \
lxc.cgroup2.devices.allow); for any path it can be a seccomp profile or sandbox that returns EPERM (Seccomp and \
Seccomp_filters in /proc/PID/status; docker --security-opt seccomp=, systemd SystemCallFilter=)";
    FileLimit => "file_limit", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "EMFILE: the process has as many files open as its RLIMIT_NOFILE allows: raise the limit (ulimit -n, systemd \
LimitNOFILE=, docker --ulimit nofile=N:N) or close the descriptors it leaks; ENFILE: the system's file table is full \
(sysctl fs.file-max, fs.file-nr)";
    CallsBlocked => "calls_blocked", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "a seccomp profile refuses the NVIDIA ioctls before they reach the driver (seen by nvprobe as opens of \
/dev/nvidiactl with no ioctl after them): allow ioctl in the profile (docker's default allows it: look for \
--security-opt seccomp=, systemd SystemCallFilter=, a sandbox library or a language runtime's own filter; \
grep Seccomp /proc/PID/status)";
    OsCallFailed => "os_call_failed", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "a system call of libcuda's own failed: where the kernel side saw the start-up's failed system calls \
(the raw sys_exit tracepoint), the evidence lists them, newest first; where it names none, no system call of the start-up \
failed as far as nvprobe saw (a kernel without that tracepoint: find it with strace -f); the common causes are the open-file limit (libcuda opens several \
descriptors at start-up: raise ulimit -n), a seccomp profile that refuses open, mmap or ioctl (a filter the process \
installed after nvprobe read it is not in the evidence), and memory or thread limits (ulimit -v, the cgroup's pids.max)";
    DescriptorClosed => "descriptor_closed", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "a descriptor libcuda had opened was closed or replaced by another part of the program while CUDA started: \
code that closes every descriptor it did not open itself (close_range or closefrom, a daemonising routine, a sandbox's \
or a subprocess helper's clean-up run in the process itself), or a dup2 onto a number it took for its own (a logger \
redirecting a stream). Close or redirect descriptors before CUDA is loaded, or only those the program opened: the \
descriptors CUDA opens must stay open as long as it is in use. Not the driver, and not a limit";
    LockLimit => "lock_limit", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the process locks its new mappings (mlockall(MCL_FUTURE), as real-time and some hardened programs do \
at start, or MAP_LOCKED) and libcuda maps far more than a memory-lock limit allows: lock memory after CUDA has started \
(or lock only what is mapped, MCL_CURRENT alone), lift the limit (ulimit -l unlimited, systemd LimitMEMLOCK=infinity, \
docker --ulimit memlock=-1) or give the process CAP_IPC_LOCK. Not the driver";
    ProcUnavailable => "proc_unavailable", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "libcuda reads its own /proc files at start-up (/proc/self/maps, its threads' names, /proc/cpuinfo): \
mount a procfs of the process's own PID namespace at /proc (container runtimes do; a chroot, `unshare -p` \
without --mount-proc seen from inside, or a sandbox may not: `mount -t proc proc /proc`, bubblewrap --proc /proc)";
    ThreadLimit => "thread_limit", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the process could not start a thread (libcuda starts several while it initialises): raise the limit the \
evidence names: the cgroup's pids.max (docker --pids-limit, Kubernetes podPidsLimit, systemd TasksMax=), the user's \
process limit (ulimit -u, systemd LimitNPROC=; it counts all of the user's tasks on the host), or kernel.threads-max";
    AddressSpaceLimit => "address_space_limit", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "libcuda reserves a large range of virtual addresses while it initialises (far more than the memory it \
uses): lift the address-space limit (ulimit -v unlimited, systemd LimitAS=, a batch scheduler's virtual-memory limit such \
as h_vmem) rather than raise it a little; where the evidence names the data-size limit too, lift that one as well \
(ulimit -d unlimited, systemd LimitDATA=)";
    DataSizeLimit => "data_size_limit", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the data-size limit (RLIMIT_DATA: ulimit -d, systemd LimitDATA=, a batch scheduler's data or heap \
limit) counts the process's private writable memory, which libcuda and the CUDA libraries grow while they initialise: \
lift it (ulimit -d unlimited) rather than raise it a little; it is not the address-space limit (ulimit -v) and not the \
GPU's memory";
    MappingRefused => "mapping_refused", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the kernel refused to map memory with no limit of the process's passed: under vm.overcommit_memory=2 \
the commit limit (CommitLimit against Committed_AS in /proc/meminfo) counts private writable memory, a reservation once \
it is made writable (raise vm.overcommit_ratio, or use mode 0); a process at vm.max_map_count (the lines of \
/proc/PID/maps) needs a larger sysctl vm.max_map_count; otherwise the host is short of memory (free, dmesg)";
    FailedSyscalls => "failed_syscalls", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "no rule of nvprobe's explains this start-up by itself; the evidence lists the system calls that failed in \
it (from its first NVIDIA or CUDA call, or its parent's, to its first context, as the kernel saw them, without ptrace), newest first, with the path each named: \
the newest is most often the cause (a file or socket libcuda needs that is not there, a call a filter, a limit or a \
security module refused); compare with a start-up that works (nvprobe diff) to tell the ones every start-up meets";
    StartCallRefused => "start_call_refused", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "a call the start-up needs besides the NVIDIA ones was refused; the evidence names it and what answered: \
ENOSYS is a seccomp profile that does not know the call (update the container runtime's profile) or an old kernel; EACCES a \
security module (its denial is in the audit log: avc: denied, apparmor=\"DENIED\"); ENOSPC a kernel limit on that kind of \
object";
    NodeStale => "node_stale", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "no driver answers at the node's device number: a node made for another major (compare ls -l of the node \
with the nvidia and nvidia-uvm entries of /proc/devices, whose uvm major changes between boots) or a GPU minor the \
driver does not have now; recreate the nodes (nvidia-modprobe -c0 -u, or the container's device list)";
    NodeMissing => "node_missing", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "create the nodes (nvidia-modprobe -c0 -u, or udev) or pass them into the container";
    NodeCreateFailed => "node_create_failed", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "libcuda tried to create the missing node and was refused (no CAP_MKNOD in a container or user namespace, \
or a read-only /dev): create the nodes on the host and pass them in (docker --device, lxc.mount.entry, the device plugin)";
    ModuleNotLoaded => "module_not_loaded", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the kernel module is not loaded (its /sys/module or /proc/driver entry is missing): modprobe nvidia-uvm \
(or nvidia) on the host, a container cannot; libcuda 535 did not try to load it itself in nvprobe's kernel tier";
    NodeError => "node_error", reference: "",
        hint: "check the node and the driver";
    UvmUnusable => "uvm_unusable", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "CUDA needs /dev/nvidia-uvm: load nvidia-uvm (modprobe nvidia-uvm) and create the node (nvidia-modprobe -u -c0); cuInit returns 999 without it";
    CpuQuota => "cpu_quota", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the process's cgroup may use less than one CPU (cpu.max: a Kubernetes CPU limit, docker --cpus, systemd \
CPUQuota=), and a CUDA start-up is CPU work (loading libcuda, building the driver's state for each GPU), stretched by the \
quota: the driver did not hang; raise the CPU limit, or give a harness's timeout that much more time";
    InheritedNvidiaFds => "inherited_nvidia_fds", reference: "",
        hint: "the fd came from a parent (fork or exec after the parent's cuInit; CUDA does not support using a \
parent's context after fork: start workers with spawn, or initialise CUDA in the child) or was opened before tracing began";
    VersionMismatch => "version_mismatch", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the user-space driver (libcuda, libnvidia-*) and the kernel module are different versions: \
compare /proc/driver/nvidia/version with the libcuda.so.VERSION in use (containers often carry their own), \
and make them match (or use the forward-compatibility package for a newer CUDA only)";
    NvidiaModprobeFailed => "nvidia_modprobe_failed", reference: "",
        hint: "libcuda ran the setuid helper to load a module or create a node, and it failed: run \
`nvidia-modprobe -u -c0` as root to see why, or load nvidia and nvidia-uvm and create the nodes yourself";
    ForkAfterInit => "fork_after_init", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "CUDA state does not survive fork: start workers with spawn \
(multiprocessing.set_start_method('spawn')) or fork before the parent's first CUDA call";
    NoVisibleDevices => "no_visible_devices", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "no GPU is visible to this process: check CUDA_VISIBLE_DEVICES (empty or naming no GPU hides them all) and \
that the container or cgroup passes the /dev/nvidiaN nodes in";
    KilledBySignal => "killed_by_signal", reference: "",
        hint: "the process did not hang in the driver: something killed it (a test harness timeout, an orchestrator). Give cuInit more time or run it without the timeout to see its real result";
    EndedItself => "ended_itself", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the process ended itself while its start-up was in a driver call: another of its threads called exit \
(or exec'd a new program), which kills every other thread, and the call in flight returned because its thread was \
dying. The driver did not fail and more time will not help: find what in the program exits or execs during its \
start-up (a watchdog thread, another library's fatal-error path, os._exit)";
    InterruptedBySignal => "interrupted_by_signal", reference: "",
        hint: "the call was interrupted; the failure is the signal's doing, not the driver's";
    UvmBusyRetry => "uvm_busy_retry", reference: "docs/NVIDIA-ABI.md §6.3",
        hint: "UVM answers NV_ERR_BUSY_RETRY when a signal interrupts GPU registration (seen on the real \
driver when a harness timeout fired) or when a GPU was first registered without HMM device memory and a later \
process asks for HMM (docs/NVIDIA-ABI.md §6.3). Check how the process ended; if no signal came, see the HMM hint: \
modprobe nvidia_uvm uvm_disable_hmm=1";
    UvmStepFailed => "uvm_step_failed", reference: hmm_issues!(),
        hint: HMM_HINT;
    LibcudaUnloadable => "libcuda_unloadable", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the dynamic loader found a file by libcuda's name first on the library path and could not load it \
(an empty placeholder, a copy cut short, another architecture's library, a text file): remove or replace that file, \
or put the driver's own libcuda first (LD_LIBRARY_PATH, /etc/ld.so.conf.d then ldconfig, the container's library \
mounts; `ldconfig -p | grep libcuda` lists what the loader knows)";
    CuinitThreadEnded => "cuinit_thread_ended", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the thread that was in cuInit ended on its own while the rest of the process lived on, so cuInit \
never returned and never will: more time will not help. A thread killed alone by SIGSYS is a seccomp profile's \
kill-thread action (SCMP_ACT_KILL_THREAD) at a call libcuda makes: the kernel log's audit line names the call \
(dmesg | grep type=1326); allow it, or use an action that returns an error. Otherwise find what ends the thread \
(pthread_exit, a signal to that thread alone)";
    AnsweredInProcess => "answered_in_process", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "no call the kernel saw failed in a way that explains the failure, and the process preloads a library \
(LD_PRELOAD): a preloaded library's open, ioctl or other wrapper runs before libc's and can fail a call without a \
system call, which no kernel tracer sees. Run the program once without the preload (unset LD_PRELOAD, or check \
/etc/ld.so.preload) to tell; if it still fails, compare with a start-up that works (nvprobe diff)";
    AnsweredByTracer => "answered_by_tracer", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "no call the kernel saw failed in a way that explains the failure, and the process runs under a \
ptrace tracer (strace, a debugger, a sandbox's supervisor): a tracer can skip a system call and give it a result \
of its own (strace -e inject=CALL:error=ERRNO, -e fault), and the kernel never runs that call. Run the program once \
without the tracer, or without its inject and fault options, to tell; if it still fails, compare with a start-up \
that works (nvprobe diff)";
    CudaInterposer => "cuda_interposer", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "a library the process preloads (LD_PRELOAD, /etc/ld.so.preload) exports the CUDA driver API, so the \
program's calls reach it before libcuda: it answered cuInit (a GPU-sharing or virtual-GPU shim such as HAMi's \
libvgpu.so, a test double, a profiler): check what it is for and its own settings, or run without it";
    StubLibrary => "stub_library", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the process loaded the CUDA toolkit's link-time stub libcuda (lib/stubs), which only lets programs link: \
remove the stubs folder from LD_LIBRARY_PATH / the rpath so the driver's libcuda.so.1 is found";
    LibcudaNotFound => "libcuda_not_found", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the NVIDIA user-space driver (libcuda.so.1) is not in this environment: a container started without \
the NVIDIA runtime, CDI or --gpus, or a host without the driver's libcuda package; the CUDA runtime reports this as \
cudaErrorInsufficientDriver (35), which reads like an old driver but is a missing one";
    SystemDriverMismatch => "system_driver_mismatch", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "the libcuda in use does not match the kernel module (often a cuda-compat libcuda in a container, or a \
driver upgraded without a reboot): use the libcuda of the module's version, or reboot after the upgrade";
    SystemNotReady => "system_not_ready", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "CUDA_ERROR_SYSTEM_NOT_READY: on NVSwitch systems the fabric manager must run (systemctl start \
nvidia-fabricmanager, same version as the driver)";
    InvalidDevice => "invalid_device", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "CUDA numbers the devices this process can see from 0 to the count minus one, after CUDA_VISIBLE_DEVICES \
has chosen and reordered them (a process given GPU 3 by CUDA_VISIBLE_DEVICES=3 calls it device 0): ask for an ordinal \
below the count (a local rank against the GPUs per node, a --device flag), or make that many GPUs visible \
(CUDA_VISIBLE_DEVICES, the container's or the scheduler's GPU list)";
    ContextOutOfMemory => "context_out_of_memory", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "a context needs device memory of its own (hundreds of MiB) and the GPU had none left: the processes that \
hold the GPU are listed (nvidia-smi shows how much each has): stop or wait for them, give each process a GPU of its own \
(CUDA_VISIBLE_DEVICES, the scheduler's GPU request), or cap what each takes on a shared GPU \
(torch.cuda.set_per_process_memory_fraction, MPS or MIG partitions)";
    ContextFailed => "context_failed", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "cuInit succeeded and the first context did not: the driver call named is what refused it (its NV_STATUS); \
without one, read the kernel log (dmesg | grep -i -e nvrm -e xid) and the GPU's state (nvidia-smi -q)";
    DevicesUnavailable => "devices_unavailable", reference: "docs/FAILURE-CATALOGUE.md",
        hint: "every visible GPU is busy or unavailable: check the compute mode (nvidia-smi -q -d COMPUTE: \
EXCLUSIVE_PROCESS allows one process, PROHIBITED none) and who holds the GPU (nvidia-smi)";
}

impl DiagId {
    /// The row of this id (the table is in variant order).
    pub fn rule(self) -> &'static Rule {
        &RULES[self as usize]
    }
}

impl Serialize for DiagId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// An id read back; an id of a newer nvprobe is not one of this one's.
impl<'de> serde::Deserialize<'de> for DiagId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        DiagId::ALL
            .iter()
            .copied()
            .find(|i| i.as_str() == s)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "a diagnosis id this nvprobe does not know: {s:?}"
                ))
            })
    }
}

impl schemars::JsonSchema for DiagId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DiagId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // An open set: a newer nvprobe adds rules (schema v1 is additive).
        schemars::json_schema!({
            "type": "string",
            "description": "a rule's id (`nvprobe` docs/FAILURE-CATALOGUE.md); newer versions add ids"
        })
    }
}

impl std::fmt::Display for DiagId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

crate::decode::named_enum!(
    /// How much a diagnosis weighs in its verdict.
    DiagSeverity {
        /// It explains the outcome.
        Error => "error",
        Warning => "warning",
        /// A problem the start-up got past: it never explains a failure.
        Recovered => "recovered",
        Info => "info",
    }
);

/// Recordings made before diagnoses had a severity: every one explained
/// the outcome.
impl Default for DiagSeverity {
    fn default() -> Self {
        Self::Error
    }
}

pub(crate) fn diag(id: DiagId, evidence: String) -> Diagnosis {
    Diagnosis {
        id,
        evidence,
        hint: id.rule().hint,
        severity: DiagSeverity::Error,
        about: About::default(),
    }
}

/// A diagnosis whose evidence begins with the outcome it explains
/// (`outcome`, "cuInit returned …") and goes on with `sep` (" and ",
/// "; ", ": ", or nothing) and `detail`, where the verdict's text picks
/// it up.
pub(crate) fn diag_after(id: DiagId, outcome: &str, sep: &str, detail: &str) -> Diagnosis {
    let mut d = diag(id, format!("{outcome}{sep}{detail}"));
    d.about.detail_at = Some(outcome.len() + sep.len());
    d
}

/// A diagnosis about the NVIDIA path `path`: its evidence begins with it.
pub(crate) fn diag_at(id: DiagId, path: &str, evidence: String) -> Diagnosis {
    let mut d = diag(id, evidence);
    d.about.path = Some(path.to_owned());
    d
}

/// What the checks look at: the process's state and how it ended.
pub(crate) struct Facts<'a> {
    pub(crate) st: &'a ProcInit,
    /// The fatal signal's number (0: none; the process exited or lives).
    pub(crate) fatal_sig: i32,
    /// The exit, when the process ended: (text, fatal signal).
    pub(crate) exited_ok: bool,
    /// The signal that explains the end, if any.
    pub(crate) signal: Option<&'a SignalInfo>,
    /// The process ended (exited, or exec'd another program).
    pub(crate) exit: Option<Exit>,
}

pub(crate) type Check = fn(&Facts<'_>, &mut Vec<Diagnosis>);

pub(crate) fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What an inferred diagnosis ends with.
pub(crate) const INFERRED: &str = " (inferred: cuInit's return was not seen)";

/// Where a start-up stopped when cuInit's return was not seen (a libcuda
/// copy hooked after its start-up, or driver calls alone) and the process
/// ended on its own before any GPU was registered with UVM: what the
/// inferred diagnoses say instead of "cuInit returned …". None when
/// cuInit's return was seen, the start-up got that far, or a signal ended
/// it (its own rules say who).
pub(crate) fn unseen_stop(f: &Facts<'_>) -> Option<String> {
    let st = f.st;
    if st.curesult.is_some() || st.reached[7] || !f.exited_ok || st.context.is_some() {
        return None;
    }
    Some(match st.last_stage() {
        Some(s) => {
            format!("the start-up stopped after {s}, before any GPU was registered with UVM")
        }
        None if st.calls > 0 => {
            "the start-up stopped before any GPU was registered with UVM".to_owned()
        }
        None => "the start-up made no driver call".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_a_hint_and_ids_are_unique() {
        for (i, r) in RULES.iter().enumerate() {
            assert!(!r.hint.is_empty(), "{}", r.id);
            assert!(
                RULES[..i].iter().all(|o| o.id.as_str() != r.id.as_str()),
                "{} twice",
                r.id
            );
            // The table is in variant order: DiagId::rule is an index.
            assert_eq!(r.id.rule().id, r.id);
        }
        assert!(HMM_HINT.contains("uvm_disable_hmm=1") && HMM_HINT.contains("797"));
    }

    /// Every id a verdict can carry is documented where users look it up.
    #[test]
    fn every_rule_id_is_in_the_schema_doc_and_the_catalogue() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/");
        let schema = std::fs::read_to_string(format!("{root}SCHEMA.md")).expect("SCHEMA.md");
        let catalogue =
            std::fs::read_to_string(format!("{root}FAILURE-CATALOGUE.md")).expect("catalogue");
        // The catalogue's index lists every id.
        let index = catalogue
            .split("**By diagnosis id**")
            .nth(1)
            .and_then(|r| r.split("\n\n").next())
            .expect("the catalogue's index by id");
        for id in DiagId::ALL {
            let quoted = format!("`{id}`");
            assert!(
                index.contains(&quoted),
                "{id} is not in the catalogue's index by id"
            );
            assert!(schema.contains(&quoted), "{id} is not in docs/SCHEMA.md");
            assert!(
                catalogue.contains(&quoted),
                "{id} is not in docs/FAILURE-CATALOGUE.md"
            );
        }
    }
}
