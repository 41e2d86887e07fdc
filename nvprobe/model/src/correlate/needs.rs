//! Which successful calls a verdict reads. At `--events failures|verdicts`
//! the kernel side sends a process's successful NVIDIA calls only when they
//! are among these (or the process is new, or its previous call failed, or
//! a signal came: `nvprobe_common::nv_procs::SHIP_NEXT`), and counts the
//! rest (`summary.quieted`, per call and per process). Failed calls are
//! always sent.
//!
//! The list is of what is *not* needed: the calls a busy process repeats
//! (RM controls, frees, mappings, UVM's memory management), none of which
//! completes a milestone (`stages.rs`) or answers anything a rule reads;
//! every other call is sent. RM controls are told apart: those that
//! complete a milestone and those whose parameters the kernel copies
//! (`decode/rmparams.rs`) are sent.

use nvprobe_common::fastpath::{
    CALL_SLOTS, CONTROL_BUCKETS, COPY, NO_SLOT, SHIP, UVM_BASE, call_slot, control_bucket,
};

use super::stages::{
    NV0000_CTRL_CMD_GPU_ASYNC_ATTACH_ID, NV0000_CTRL_CMD_GPU_ATTACH_IDS,
    NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION,
};
use crate::decode::{escape, uvm, version::VersionCtx};

/// Escapes whose successful calls no verdict reads.
pub const UNSENT_ESCAPES: &[u32] = &[
    0x29, // NV_ESC_RM_FREE
    0x34, // NV_ESC_RM_DUP_OBJECT
    0x35, // NV_ESC_RM_SHARE
    0x41, // NV_ESC_RM_IDLE_CHANNELS
    0x4A, // NV_ESC_RM_VID_HEAP_CONTROL
    0x4E, // NV_ESC_RM_MAP_MEMORY
    0x4F, // NV_ESC_RM_UNMAP_MEMORY
    0x52, // NV_ESC_RM_GET_EVENT_DATA
    0x57, // NV_ESC_RM_MAP_MEMORY_DMA
    0x58, // NV_ESC_RM_UNMAP_MEMORY_DMA
    0x59, // NV_ESC_RM_BIND_CONTEXT_DMA
    0x5E, // NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO
    0x5F, // NV_ESC_RM_LOCKLESS_DIAGNOSTIC
    0xCE, // NV_ESC_ALLOC_OS_EVENT
    0xCF, // NV_ESC_FREE_OS_EVENT
];

/// UVM commands whose successful calls no verdict reads (a running
/// program's memory management).
pub const UNSENT_UVM: &[u32] = &[
    23, // UVM_CREATE_RANGE_GROUP
    24, // UVM_DESTROY_RANGE_GROUP
    31, // UVM_SET_RANGE_GROUP
    33, // UVM_MAP_EXTERNAL_ALLOCATION
    34, // UVM_FREE
    40, // UVM_PREVENT_MIGRATION_RANGE_GROUPS
    41, // UVM_ALLOW_MIGRATION_RANGE_GROUPS
    42, // UVM_SET_PREFERRED_LOCATION
    43, // UVM_UNSET_PREFERRED_LOCATION
    44, // UVM_ENABLE_READ_DUPLICATION
    45, // UVM_DISABLE_READ_DUPLICATION
    46, // UVM_SET_ACCESSED_BY
    47, // UVM_UNSET_ACCESSED_BY
    51, // UVM_MIGRATE
    53, // UVM_MIGRATE_RANGE_GROUP
    66, // UVM_UNMAP_EXTERNAL
    68, // UVM_ALLOC_SEMAPHORE_POOL
    71, // UVM_POPULATE_PAGEABLE
    72, // UVM_VALIDATE_VA_RANGE
    73, // UVM_CREATE_EXTERNAL_RANGE
    74, // UVM_MAP_EXTERNAL_SPARSE
    80, // UVM_DISCARD
];

/// RM controls a milestone needs (the rest of NV_ESC_RM_CONTROL is not
/// sent unless `RM_PARAMS` copies it).
pub const SENT_CONTROLS: &[u32] = &[
    NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION,
    NV0000_CTRL_CMD_GPU_ATTACH_IDS,
    NV0000_CTRL_CMD_GPU_ASYNC_ATTACH_ID,
];

/// The kernel side's tables: `SHIP_CALLS` (slot → SHIP) and
/// `SHIP_CONTROLS` (bucket → SHIP | COPY), for the controls `copied` that
/// `RM_PARAMS` lists.
pub struct ShipTables {
    pub calls: Vec<u8>,
    pub controls: Vec<u8>,
}

pub fn ship_tables(copied: &[u32]) -> ShipTables {
    let mut calls = vec![SHIP; CALL_SLOTS as usize];
    for e in escape::ESCAPES {
        if UNSENT_ESCAPES.contains(&e.nr) || e.nr == nvprobe_common::ioctl::NV_ESC_RM_CONTROL {
            calls[e.nr as usize & 0xff] = 0;
        }
    }
    for c in uvm::COMMANDS {
        if UNSENT_UVM.contains(&c.cmd) {
            let slot = call_slot(c.cmd, false, 0);
            if slot != NO_SLOT {
                calls[slot as usize] = 0;
            }
        }
    }
    let mut controls = vec![0u8; CONTROL_BUCKETS as usize];
    for &c in SENT_CONTROLS.iter().chain(copied) {
        controls[control_bucket(c) as usize] |= SHIP;
    }
    for &c in copied {
        controls[control_bucket(c) as usize] |= COPY;
    }
    ShipTables { calls, controls }
}

impl ShipTables {
    /// Whether a successful call is sent: what the kernel side decides
    /// (`maps::shipped`), for replays that reproduce it.
    pub fn sent(&self, cmd: u32, xfer: bool, xfer_cmd: u32, control: Option<u32>) -> bool {
        let slot = call_slot(cmd, xfer, xfer_cmd);
        if slot == NO_SLOT {
            return true;
        }
        if slot == nvprobe_common::ioctl::NV_ESC_RM_CONTROL {
            return control.is_none_or(|c| self.controls[control_bucket(c) as usize] & SHIP != 0);
        }
        self.calls[(slot & (CALL_SLOTS - 1)) as usize] & SHIP != 0
    }

    /// The name of a call slot, for the summary's counts.
    pub fn slot_name(slot: u32, v: &VersionCtx) -> Option<&'static str> {
        if slot < UVM_BASE {
            return escape::name_for(slot, v);
        }
        let cmd = match slot {
            nvprobe_common::fastpath::UVM_INIT_SLOT => nvprobe_common::ioctl::UVM_INITIALIZE,
            nvprobe_common::fastpath::UVM_DEINIT_SLOT => nvprobe_common::ioctl::UVM_DEINITIALIZE,
            s => s - UVM_BASE,
        };
        uvm::lookup(cmd).map(|c| c.name)
    }
}

/// The kernel side's decision at `--events failures|verdicts`, made again
/// over decoded events (a recording made with `--events all`): which
/// events the kernel would have sent, and the counts it would have carried.
/// It mirrors `nvprobe-ebpf` (`ioctl.rs` `ioctl_finish`, `cuda.rs`,
/// `procs.rs`), so that replays can show a level's verdicts are the full
/// trace's.
pub struct KernelLevel {
    tables: ShipTables,
    /// STATUS_AT's keys: calls whose NV_STATUS the kernel can read.
    status_at: std::collections::HashSet<u32>,
    procs: std::collections::HashMap<u32, ProcLevel>,
}

#[derive(Default)]
struct ProcLevel {
    quiet: bool,
    /// `nv_procs::HELD`: it held an NVIDIA descriptor when nvprobe started
    /// (user space's scan), or its first call nvprobe saw was on one it
    /// was not seen opening (`maps::held_first`). Quiet, but the call after
    /// a failure or a signal is sent, as a start-up's is.
    held: bool,
    ship_next: bool,
    /// When the last signal came (`SIGNALLED`).
    signal_ns: Option<u64>,
    unsent: u64,
}

use nvprobe_common::fastpath::SIGNAL_WINDOW_NS;

impl ProcLevel {
    /// Quiet since nvprobe started (`maps::held_first`, user space's
    /// scan at start).
    fn holder() -> Self {
        ProcLevel {
            quiet: true,
            held: true,
            ..ProcLevel::default()
        }
    }

    /// Past its first context: only its failures are sent, never the call
    /// after one (`maps::ship_next`'s `settled`).
    fn settled(&self) -> bool {
        self.quiet && !self.held
    }

    /// It begins a start-up nvprobe sees whole (`maps::held_ends`).
    fn held_ends(&mut self) {
        if self.held {
            self.held = false;
            self.quiet = false;
        }
    }
}

impl KernelLevel {
    pub fn new(v: &VersionCtx, copied: &[u32]) -> Self {
        let mut status_at: std::collections::HashSet<u32> = escape::status_at_entries(v)
            .into_iter()
            .map(|e| e.0)
            .collect();
        status_at.extend(uvm::status_at_entries(v).into_iter().map(|e| e.0));
        Self {
            tables: ship_tables(copied),
            status_at,
            procs: Default::default(),
        }
    }

    /// `pid` held an NVIDIA descriptor when nvprobe started: user space
    /// marks it so before the first event (its process record says
    /// `held_at_start`).
    pub fn held_at_start(&mut self, pid: u32) {
        self.procs.insert(pid, ProcLevel::holder());
    }

    /// Whether the kernel would send `ev`; an exit gets the count of its
    /// process's calls that were not.
    pub fn keep(&mut self, ev: &mut crate::decode::Event) -> bool {
        use crate::decode::{CudaPhase, Event, ProcKind};
        let pid = ev.proc().pid;
        let seen = self.procs.contains_key(&pid);
        match ev {
            Event::Ioctl(i) => self.keep_ioctl(pid, seen, i),
            Event::Cuda(c) => {
                let st = self.procs.entry(pid).or_default();
                let context = crate::decode::cudafn::makes_context(c.func_id);
                let ok = c.result == Some(0);
                if c.phase == CudaPhase::Enter && c.func_id == crate::decode::cudafn::CU_INIT {
                    st.held_ends();
                }
                if st.quiet && (c.phase == CudaPhase::Enter || ok) {
                    return false;
                }
                if c.phase == CudaPhase::Return && ok && context {
                    // The kernel replaces the value: HELD goes too.
                    *st = ProcLevel {
                        quiet: true,
                        unsent: st.unsent,
                        ..ProcLevel::default()
                    };
                }
                true
            }
            Event::Proc(p) => {
                match p.op {
                    ProcKind::Exit => {
                        if let Some(st) = self.procs.remove(&p.target_pid) {
                            p.unsent = (st.unsent > 0).then_some(st.unsent);
                        }
                    }
                    ProcKind::Exec => {
                        let st = self.procs.entry(p.target_pid).or_default();
                        // The old program's count goes with the exec, as
                        // the kernel's does.
                        p.unsent = (st.unsent > 0).then_some(st.unsent);
                        st.unsent = 0;
                        st.quiet = false;
                        st.held = false;
                        st.ship_next = false;
                    }
                    ProcKind::Signal => {
                        if let Some(st) = self.procs.get_mut(&p.target_pid)
                            && !st.settled()
                        {
                            st.ship_next = true;
                            st.signal_ns = Some(p.time_ns);
                        }
                    }
                    ProcKind::Fork => {
                        self.procs.entry(p.target_pid).or_default();
                    }
                    _ => {}
                }
                true
            }
            Event::Open(o) => {
                let st = self.procs.entry(pid).or_default();
                // An open of a node (by its path, or one that reached an
                // NVIDIA device by another) or of a libcuda, failed or not,
                // ends a holder's quiet (`nvprobe-ebpf`'s path program).
                if o.device.is_some()
                    || super::node_path(&o.path)
                    || crate::decode::is_libcuda_path(&o.path)
                {
                    st.held_ends();
                }
                true
            }
            // A path looked at or a node made follows the process
            // (`maps::first_sight`, `caller`).
            Event::Stat(_) | Event::Access(_) | Event::Mknod(_) => {
                self.procs.entry(pid).or_default();
                true
            }
            // A descriptor closed, duplicated or mapped, a driver
            // function's span, a libnccl call: the kernel side follows no
            // process for them (its first ioctl finds it unseen).
            Event::Close(_)
            | Event::Dup(_)
            | Event::Mmap(_)
            | Event::Driver(_)
            | Event::Nccl(_) => true,
        }
    }

    /// An ioctl: sent, or counted as the kernel side would have.
    fn keep_ioctl(&mut self, pid: u32, seen: bool, i: &crate::decode::Ioctl) -> bool {
        if !seen {
            // First sight, on a descriptor it was not seen opening: sent,
            // and followed as a holder from then on (`maps::held_first`).
            self.procs.insert(pid, ProcLevel::holder());
            return true;
        }
        let st = self.procs.entry(pid).or_default();
        let xfer = i.xfer.is_some();
        let key = match &i.xfer {
            Some(x) => nvprobe_common::status_at::xfer_key(x.cmd, x.size),
            None => i.request,
        };
        // What the kernel reads: ret 0 and NV_OK (or no status
        // field); a status it has no place for is "unknown".
        let status = if i.ret != 0 {
            Some(false)
        } else if !self.status_at.contains(&key) {
            None
        } else {
            Some(i.status.as_ref().is_none_or(|s| s.code == 0))
        };
        let control = i.args.known().control.map(|c| c.code);
        match status {
            Some(true) if st.settled() || (st.quiet && !st.ship_next) => {
                st.unsent += 1;
                return false;
            }
            Some(true)
                if !st.ship_next
                    && !self.tables.sent(
                        i.request,
                        xfer,
                        i.xfer.as_ref().map_or(0, |x| x.cmd),
                        control,
                    ) =>
            {
                st.unsent += 1;
                return false;
            }
            Some(true) if st.ship_next => {
                // The call after a failure, or one in flight when a
                // signal came (kept while calls may still be).
                match st.signal_ns {
                    Some(at) if i.start_ns <= at.saturating_add(SIGNAL_WINDOW_NS) => {}
                    _ => {
                        st.signal_ns = None;
                        st.ship_next = false;
                    }
                }
            }
            Some(false) if !st.settled() => st.ship_next = true,
            _ => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_number_is_a_call_the_tables_know() {
        for n in UNSENT_ESCAPES {
            assert!(escape::ESCAPES.iter().any(|e| e.nr == *n), "{n:#x}");
        }
        for n in UNSENT_UVM {
            assert!(uvm::COMMANDS.iter().any(|c| c.cmd == *n), "{n}");
        }
    }

    #[test]
    fn milestone_calls_are_sent_and_repeated_ones_counted() {
        let t = ship_tables(&[0x2080_014a]);
        let esc = |nr: u32| 0xc000_4600 | nr;
        // The RM controls: milestones and copied ones sent, NULL not.
        assert!(t.sent(esc(0x2a), false, 0, Some(0x101)));
        assert!(t.sent(esc(0x2a), false, 0, Some(0x215)));
        assert!(t.sent(esc(0x2a), false, 0, Some(0x2080_014a)));
        assert!(!t.sent(esc(0x2a), false, 0, Some(0)));
        // XFER-wrapped: the inner escape decides.
        assert!(!t.sent(0xc010_46d3, true, 0x2a, Some(0)));
        assert!(t.sent(0xc010_46d3, true, 0x2a, Some(0x101)));
        // Allocations (milestones S2, S6) are sent, frees are not.
        assert!(t.sent(esc(0x2b), false, 0, None));
        assert!(!t.sent(esc(0x29), false, 0, None));
        // UVM: the milestones and the pageable answer sent, frees not.
        for cmd in [0x3000_0001, 37, 25, 39] {
            assert!(t.sent(cmd, false, 0, None), "{cmd:#x}");
        }
        assert!(!t.sent(34, false, 0, None));
        // No slot (a UVM number out of range): sent.
        assert!(t.sent(0x4000_0000, false, 0, None));
    }

    #[test]
    fn slots_are_named() {
        let v = VersionCtx::assumed();
        assert_eq!(ShipTables::slot_name(0x2a, &v), Some("NV_ESC_RM_CONTROL"));
        assert_eq!(
            ShipTables::slot_name(nvprobe_common::fastpath::UVM_INIT_SLOT, &v),
            Some("UVM_INITIALIZE")
        );
        assert_eq!(ShipTables::slot_name(UVM_BASE + 34, &v), Some("UVM_FREE"));
    }
}
