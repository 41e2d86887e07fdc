//! The driver layer's hook table: the functions inside `nvidia`,
//! `nvidia_uvm` and vmlinux that nvprobe hooks where the kernel allows it
//! (fentry/fexit → kprobe/kretprobe → none), with the driver versions each
//! applies to and its assumed prototype (docs/NVIDIA-ABI.md §6, checked
//! against the 580.159.04 module BTF of the H200 machine). A hook's index
//! in [`HOOKS`] is its id in [`crate::DriverEvent::hook`]: never reorder,
//! only append.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Nvidia,
    NvidiaUvm,
    Vmlinux,
}

impl Target {
    pub fn module(self) -> &'static str {
        match self {
            Self::Nvidia => "nvidia",
            Self::NvidiaUvm => "nvidia_uvm",
            Self::Vmlinux => "vmlinux",
        }
    }
}

/// What a hooked function returns, for its result in words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returns {
    /// long/int: 0 or -errno.
    Errno,
    NvStatus,
    /// NvBool.
    Bool,
    Void,
    /// A pointer, or ERR_PTR(-errno).
    Ptr,
}

#[derive(Clone, Copy, Debug)]
pub struct Hook {
    pub returns: Returns,
    pub name: &'static str,
    pub target: Target,
    /// Inclusive driver-version bounds (major numbers); None: any.
    pub since: Option<u32>,
    pub until: Option<u32>,
    pub prototype: &'static str,
    /// Earlier drivers' prototypes for the same function (real BTF or
    /// source); a kernel's BTF matching one of them is as expected.
    pub older: &'static [&'static str],
    /// A required hook's absence means the driver layer cannot cover the
    /// ioctls; optional ones add detail.
    pub required: bool,
    /// Only present when nvidia_uvm is built with HMM.
    pub hmm_only: bool,
    pub why: &'static str,
}

const fn hook(
    name: &'static str,
    target: Target,
    prototype: &'static str,
    required: bool,
    why: &'static str,
) -> Hook {
    let returns = if starts_with(prototype, "NV_STATUS") {
        Returns::NvStatus
    } else if starts_with(prototype, "NvBool") {
        Returns::Bool
    } else if starts_with(prototype, "void *") || starts_with(prototype, "struct resource *") {
        Returns::Ptr
    } else if starts_with(prototype, "void ") {
        Returns::Void
    } else {
        Returns::Errno
    };
    Hook {
        returns,
        name,
        target,
        since: None,
        until: None,
        prototype,
        older: &[],
        required,
        hmm_only: false,
        why,
    }
}

const fn starts_with(s: &str, p: &str) -> bool {
    let (s, p) = (s.as_bytes(), p.as_bytes());
    if s.len() < p.len() {
        return false;
    }
    let mut i = 0;
    while i < p.len() {
        if s[i] != p[i] {
            return false;
        }
        i += 1;
    }
    true
}

pub const HOOKS: &[Hook] = &[
    Hook {
        since: Some(545),
        ..hook(
            "nvidia_unlocked_ioctl",
            Target::Nvidia,
            "long nvidia_unlocked_ioctl(struct file *file, unsigned int cmd, unsigned long i_arg)",
            true,
            "every escape on /dev/nvidiactl and /dev/nvidiaN, entry and return",
        )
    },
    Hook {
        until: Some(535),
        ..hook(
            "nvidia_frontend_unlocked_ioctl",
            Target::Nvidia,
            "long nvidia_frontend_unlocked_ioctl(struct file *file, unsigned int cmd, unsigned long i_arg)",
            true,
            "every escape (drivers up to 535)",
        )
    },
    hook(
        "rm_ioctl",
        Target::Nvidia,
        "NV_STATUS rm_ioctl(nvidia_stack_t *sp, nv_state_t *pNv, nv_file_private_t *nvfp, NvU32 Command, void *pData, NvU32 dataSize)",
        false,
        "the RM status from the kernel's copy of the parameters",
    ),
    hook(
        "nvidia_open",
        Target::Nvidia,
        "int nvidia_open(struct inode *inode, struct file *file)",
        false,
        "opens, with the GPU's cold initialisation",
    ),
    hook(
        "nvidia_close",
        Target::Nvidia,
        "int nvidia_close(struct inode *inode, struct file *file)",
        false,
        "closes and RM client teardown",
    ),
    hook(
        "rm_init_adapter",
        Target::Nvidia,
        "NvBool rm_init_adapter(nvidia_stack_t *sp, nv_state_t *pNv)",
        false,
        "GPU bring-up on first open without persistence",
    ),
    hook(
        "uvm_unlocked_ioctl_entry",
        Target::NvidiaUvm,
        "long uvm_unlocked_ioctl_entry(struct file *filp, unsigned int cmd, unsigned long arg)",
        true,
        "every UVM command, entry and return",
    ),
    Hook {
        since: Some(530),
        ..hook(
            "uvm_va_space_create",
            Target::NvidiaUvm,
            "NV_STATUS uvm_va_space_create(struct address_space *mapping, uvm_va_space_t **va_space_ptr, NvU64 flags)",
            false,
            "UVM_INITIALIZE's real work",
        )
    },
    hook(
        "uvm_api_register_gpu",
        Target::NvidiaUvm,
        "NV_STATUS uvm_api_register_gpu(UVM_REGISTER_GPU_PARAMS *params, struct file *filp)",
        false,
        "GPU registration (the slow UVM step)",
    ),
    // Without uuid_out up to 550.40.07 (the real 535.261.03 module's BTF in
    // the kernel tier's HMM stage; NVIDIA's tags: added in 550.40.85).
    Hook {
        older: &[
            "NV_STATUS uvm_va_space_register_gpu(uvm_va_space_t *va_space, const NvProcessorUuid *gpu_uuid, const uvm_rm_user_object_t *user_rm_device, NvBool *numa_enabled, NvS32 *numa_node_id)",
        ],
        ..hook(
            "uvm_va_space_register_gpu",
            Target::NvidiaUvm,
            "NV_STATUS uvm_va_space_register_gpu(uvm_va_space_t *va_space, const NvProcessorUuid *gpu_uuid, const uvm_rm_user_object_t *user_rm_device, NvBool *numa_enabled, NvS32 *numa_node_id, NvProcessorUuid *uuid_out)",
            false,
            "GPU registration inside the va_space",
        )
    },
    // The real 580.159.04 BTF (tests/fixtures/gpu-host): no `bool
    // enable_hmm`, and parent_gpu_error is const. docs/NVIDIA-ABI.md gives
    // the 595.45.04 prototype, which has both; the real driver wins.
    // Without parent_gpu_error up to 570 (the real 535.261.03 module's BTF;
    // NVIDIA's tags: added in 575.51.02).
    Hook {
        older: &[
            "NV_STATUS uvm_gpu_retain_by_uuid(const NvProcessorUuid *gpu_uuid, const uvm_rm_user_object_t *user_rm_device, uvm_gpu_t **gpu_out)",
        ],
        ..hook(
            "uvm_gpu_retain_by_uuid",
            Target::NvidiaUvm,
            "NV_STATUS uvm_gpu_retain_by_uuid(const NvProcessorUuid *gpu_uuid, const uvm_rm_user_object_t *user_rm_device, const uvm_test_parent_gpu_inject_error_t *parent_gpu_error, uvm_gpu_t **gpu_out)",
            false,
            "first registration of a GPU: channels, page tables, fault buffers",
        )
    },
    // Present on the H200's 580.159.04 build although its HMM is compiled
    // out (docs/NVIDIA-ABI.md lists it under HMM): called only with HMM on.
    hook(
        "uvm_pmm_devmem_init",
        Target::NvidiaUvm,
        "NV_STATUS uvm_pmm_devmem_init(uvm_parent_gpu_t *gpu)",
        false,
        "device-private memory for HMM (first GPU registration)",
    ),
    Hook {
        hmm_only: true,
        ..hook(
            "uvm_hmm_va_space_initialize",
            Target::NvidiaUvm,
            "void uvm_hmm_va_space_initialize(uvm_va_space_t *va_space)",
            false,
            "HMM set-up of a va_space",
        )
    },
    hook(
        "__mmu_notifier_register",
        Target::Vmlinux,
        "int __mmu_notifier_register(struct mmu_notifier *subscription, struct mm_struct *mm)",
        false,
        "mmu notifier registration inside UVM_INITIALIZE/MM_INITIALIZE",
    ),
    hook(
        "memremap_pages",
        Target::Vmlinux,
        "void *memremap_pages(struct dev_pagemap *pgmap, int nid)",
        false,
        "device-private memory on the first GPU registration (HMM)",
    ),
    hook(
        "request_free_mem_region",
        Target::Vmlinux,
        "struct resource *request_free_mem_region(struct resource *base, unsigned long size, const char *name)",
        false,
        "the address range for device-private memory (HMM)",
    ),
    hook(
        "hmm_range_fault",
        Target::Vmlinux,
        "int hmm_range_fault(struct hmm_range *range)",
        false,
        "HMM faults after start-up",
    ),
];

impl Hook {
    /// Whether the hook exists in drivers of this major version.
    pub const fn applies_to_major(&self, major: u32) -> bool {
        let after = match self.since {
            Some(s) => major >= s,
            None => true,
        };
        let before = match self.until {
            Some(u) => major <= u,
            None => true,
        };
        after && before
    }
}

/// The id of the hook named `name`.
pub const fn hook_id(name: &str) -> u32 {
    let mut i = 0;
    while i < HOOKS.len() {
        if starts_with(HOOKS[i].name, name) && HOOKS[i].name.len() == name.len() {
            return i as u32;
        }
        i += 1;
    }
    panic!("not in the hook table")
}

/// Hook ids the kernel side treats specially.
pub const HOOK_NV_IOCTL: u32 = hook_id("nvidia_unlocked_ioctl");
pub const HOOK_NV_FRONTEND_IOCTL: u32 = hook_id("nvidia_frontend_unlocked_ioctl");
pub const HOOK_RM_IOCTL: u32 = hook_id("rm_ioctl");
pub const HOOK_UVM_IOCTL: u32 = hook_id("uvm_unlocked_ioctl_entry");
/// Hooks from this id on are vmlinux functions: reported only for threads
/// inside a UVM ioctl.
pub const HOOK_FIRST_VMLINUX: u32 = hook_id("__mmu_notifier_register");
