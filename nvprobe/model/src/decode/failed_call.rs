//! A failed system call's arguments (`call_failed` records): what a
//! mapping asked for, and the arguments as strace writes them.

use super::{
    callkind::{MmAt, SysKind},
    event::ProcCall,
    files::{map_flag_names, prot_names},
};

impl ProcCall {
    /// A failed call's arguments as strace shows them, as far as the record
    /// has them: its path, an ioctl's descriptor and request, an mmap's or
    /// mprotect's address, length, protection (and flags).
    pub fn args_text(&self) -> String {
        let p = self;
        if let Some(path) = &p.path {
            return format!("\"{path}\"");
        }
        let a = p.args.as_deref().unwrap_or_default();
        let addr = |x: u64| {
            if x == 0 {
                "NULL".to_owned()
            } else {
                format!("{x:#x}")
            }
        };
        match (p.failed.map(|f| f.0), p.call.as_deref(), a) {
            (Some(SysKind::Ioctl), _, [fd, req, ..]) => format!("{}, {req:#x}", *fd as i32),
            (_, Some("mmap"), [at, len, prot, flags]) => format!(
                "{}, {len}, {}, {}",
                addr(*at),
                prot_names(*prot as u32),
                map_flag_names(*flags as u32)
            ),
            (_, Some("mprotect"), [at, len, prot, _]) => {
                format!("{}, {len}, {}", addr(*at), prot_names(*prot as u32))
            }
            _ => String::new(),
        }
    }

    /// The length a failed call that maps, protects or locks memory asked
    /// for (mmap, mprotect, mlock, mlock2: the second argument), bytes.
    pub fn asked_len(&self) -> Option<u64> {
        match self.call.as_deref()? {
            "mmap" | "mprotect" | "mlock" | "mlock2" => self.arg(1),
            _ => None,
        }
    }

    /// An mremap refused because the mapping could not grow where it is
    /// (no MREMAP_MAYMOVE: the caller asked only to try, and moves on):
    /// a caller's own business, not a limit's.
    pub fn remap_in_place(&self) -> bool {
        const MREMAP_MAYMOVE: u64 = 1;
        self.call.as_deref() == Some("mremap")
            && self.arg(3).is_some_and(|f| f & MREMAP_MAYMOVE == 0)
    }

    /// Argument `i` of a failed call, where the record carries it.
    pub fn arg(&self, i: usize) -> Option<u64> {
        self.args.as_ref()?.get(i).copied()
    }

    /// What a failed mmap or mprotect asked for: its length, protection
    /// and (mmap) flags, as far as the record carries them.
    pub fn mem_ask(&self) -> MemAsk {
        let call = self.call.as_deref();
        MemAsk {
            len: self.asked_len(),
            prot: matches!(call, Some("mmap" | "mprotect"))
                .then(|| self.arg(2))
                .flatten()
                .map(|p| p as u32),
            flags: (call == Some("mmap"))
                .then(|| self.arg(3))
                .flatten()
                .map(|f| f as u32),
            at: self.mm,
        }
    }
}

/// What a failed call that maps or protects memory asked for (each part
/// None where the call has none or the record does not carry it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemAsk {
    /// Bytes (mmap, mprotect, mlock, mlock2: the second argument).
    pub len: Option<u64>,
    /// PROT_* bits (mmap's third argument, mprotect's).
    pub prot: Option<u32>,
    /// MAP_* bits (mmap's fourth argument).
    pub flags: Option<u32>,
    /// The address space when the call failed (None: a recording made
    /// before the kernel side sent it).
    pub at: Option<MmAt>,
}

impl MemAsk {
    /// Whether the mapping counts as private writable memory (the kernel's
    /// is_data_mapping: VM_WRITE, not VM_SHARED nor VM_STACK), what the
    /// data-size limit and strict accounting count: Some(false) when the
    /// protection has no PROT_WRITE or the flags say shared or a stack;
    /// None when not known (an mprotect's mapping may be shared).
    pub fn private_writable(&self) -> Option<bool> {
        const PROT_WRITE: u32 = 2;
        // MAP_SHARED, MAP_SHARED_VALIDATE (the type's low bit); MAP_GROWSDOWN.
        const SHARED: u32 = 0x1;
        const GROWSDOWN: u32 = 0x100;
        match (self.prot?, self.flags) {
            (p, _) if p & PROT_WRITE == 0 => Some(false),
            (_, Some(f)) => Some(f & SHARED == 0 && f & GROWSDOWN == 0),
            (_, None) => None,
        }
    }

    /// Whether the overcommit accounting counts the mapping: private
    /// writable memory, and a new shared anonymous mapping (shmem's own
    /// accounting, whatever its protection; a change of protection counts
    /// only what becomes private writable), never huge pages (their own
    /// pool). Some(false) only where the protection and flags say
    /// neither.
    pub fn committed(&self) -> Option<bool> {
        const SHARED: u32 = 0x1;
        const ANONYMOUS: u32 = 0x20;
        // Huge pages have a pool of their own, not the accounting.
        const HUGETLB: u32 = 0x40000;
        let Some(f) = self.flags else {
            return self.private_writable();
        };
        if f & HUGETLB != 0 {
            return Some(false);
        }
        let shared_anon = f & SHARED != 0 && f & ANONYMOUS != 0;
        Some(shared_anon || self.private_writable()?)
    }
}
