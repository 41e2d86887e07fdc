//! RM object classes (hClass of NV_ESC_RM_ALLOC / RM_ALLOC_MEMORY).
//! Source: src/common/sdk/nvidia/inc/nvos.h and class/cl*.h (595.45.04),
//! ABI reference §4.1.

/// (class, name), sorted by class.
pub const CLASSES: &[(u32, &str)] = &[
    (0x0000, "NV01_ROOT"),
    (0x0001, "NV01_ROOT_NON_PRIV"),
    (0x0005, "NV01_EVENT"),
    (0x003E, "NV01_MEMORY_SYSTEM"),
    (0x003F, "NV01_MEMORY_LOCAL_PRIVILEGED"),
    (0x0040, "NV01_MEMORY_LOCAL_USER"),
    (0x0041, "NV01_ROOT_CLIENT"),
    (0x0070, "NV01_MEMORY_VIRTUAL"),
    (0x0071, "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR"),
    (0x0078, "NV01_EVENT_KERNEL_CALLBACK"),
    (0x0079, "NV01_EVENT_OS_EVENT"),
    (0x007E, "NV01_EVENT_KERNEL_CALLBACK_EX"),
    (0x0080, "NV01_DEVICE_0"),
    (0x00C2, "NV01_MEMORY_LOCAL_PHYSICAL"),
    (0x00DA, "NV_SEMAPHORE_SURFACE"),
    (0x00DE, "RM_USER_SHARED_DATA"),
    (0x00E0, "NV_MEMORY_EXPORT"),
    (0x00F1, "NV_IMEX_SESSION"),
    (0x00F8, "NV_MEMORY_FABRIC"),
    (0x00FD, "NV_MEMORY_MULTICAST_FABRIC"),
    (0x2080, "NV20_SUBDEVICE_0"),
    (0x2081, "NV2081_BINAPI"),
    (0x503B, "NV50_P2P"),
    (0x503C, "NV50_THIRD_PARTY_P2P"),
    (0x50A0, "NV50_MEMORY_VIRTUAL"),
    (0x83DE, "GT200_DEBUGGER"),
    (0x9067, "FERMI_CONTEXT_SHARE_A"),
    (0x90E6, "GF100_SUBDEVICE_MASTER"),
    (0x90F1, "FERMI_VASPACE_A"),
    (0xA06C, "KEPLER_CHANNEL_GROUP_A"),
    (0xA140, "KEPLER_INLINE_TO_MEMORY_B"),
    (0xB2CC, "MAXWELL_PROFILER_DEVICE"),
    (0xC365, "ACCESS_COUNTER_NOTIFY_BUFFER"),
    (0xC369, "MMU_FAULT_BUFFER"),
    (0xC36F, "VOLTA_CHANNEL_GPFIFO_A"),
    (0xC3C0, "VOLTA_COMPUTE_A"),
    (0xC461, "TURING_USERMODE_A"),
    (0xC46F, "TURING_CHANNEL_GPFIFO_A"),
    (0xC561, "AMPERE_USERMODE_A"),
    (0xC56F, "AMPERE_CHANNEL_GPFIFO_A"),
    (0xC574, "UVM_CHANNEL_RETAINER"),
    (0xC5B5, "TURING_DMA_COPY_A"),
    (0xC5C0, "TURING_COMPUTE_A"),
    (0xC637, "AMPERE_SMC_PARTITION_REF"),
    (0xC638, "AMPERE_SMC_EXEC_PARTITION_REF"),
    (0xC639, "AMPERE_SMC_CONFIG_SESSION"),
    (0xC640, "AMPERE_SMC_MONITOR_SESSION"),
    (0xC661, "HOPPER_USERMODE_A"),
    (0xC697, "AMPERE_A"),
    (0xC6B5, "AMPERE_DMA_COPY_A"),
    (0xC6C0, "AMPERE_COMPUTE_A"),
    (0xC761, "BLACKWELL_USERMODE_A"),
    (0xC7B5, "AMPERE_DMA_COPY_B"),
    (0xC7C0, "AMPERE_COMPUTE_B"),
    (0xC86F, "HOPPER_CHANNEL_GPFIFO_A"),
    (0xC8B5, "HOPPER_DMA_COPY_A"),
    (0xC96F, "BLACKWELL_CHANNEL_GPFIFO_A"),
    (0xC997, "ADA_A"),
    (0xC9B5, "BLACKWELL_DMA_COPY_A"),
    (0xC9C0, "ADA_COMPUTE_A"),
    (0xCA6F, "BLACKWELL_CHANNEL_GPFIFO_B"),
    (0xCAB5, "BLACKWELL_DMA_COPY_B"),
    (0xCB33, "NV_CONFIDENTIAL_COMPUTE"),
    (0xCB97, "HOPPER_A"),
    (0xCBA2, "HOPPER_SEC2_WORK_LAUNCH_A"),
    (0xCBC0, "HOPPER_COMPUTE_A"),
    (0xCDC0, "BLACKWELL_COMPUTE_A"),
    (0xCEC0, "BLACKWELL_COMPUTE_B"),
];

pub fn name(class: u32) -> Option<&'static str> {
    CLASSES
        .binary_search_by_key(&class, |(c, _)| *c)
        .ok()
        .map(|i| CLASSES[i].1)
}

/// Root-client classes: the kernel rewrites 0 and 1 to NV01_ROOT_CLIENT.
pub fn is_root_client(class: u32) -> bool {
    matches!(class, 0x0 | 0x1 | 0x41)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_and_unique() {
        assert!(CLASSES.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn lookups() {
        assert_eq!(name(0x41), Some("NV01_ROOT_CLIENT"));
        assert_eq!(name(0x2080), Some("NV20_SUBDEVICE_0"));
        assert_eq!(name(0xCBC0), Some("HOPPER_COMPUTE_A"));
        assert_eq!(name(0xC86F), Some("HOPPER_CHANNEL_GPFIFO_A"));
        assert_eq!(name(0x1234), None);
        assert!(is_root_client(0) && is_root_client(0x41) && !is_root_client(0x80));
    }
}
