//! NV_STATUS codes (src/common/sdk/nvidia/inc/nvstatuscodes.h, 595.45.04;
//! byte-identical to kernel-open/common/inc/nvstatuscodes.h). 151 codes:
//! NV_OK, 141 NV_ERR_*, 9 NV_WARN_*. UVM uses the same codes.

/// (code, name), sorted by code for binary search.
/// The statuses the rules name (nvstatuscodes.h).
pub const NV_ERR_BUSY_RETRY: u32 = 0x3;
pub const NV_ERR_LIB_RM_VERSION_MISMATCH: u32 = 0x6A;

pub const STATUS: &[(u32, &str)] = &[
    (0x0, "NV_OK"),
    (0x1, "NV_ERR_BROKEN_FB"),
    (0x2, "NV_ERR_BUFFER_TOO_SMALL"),
    (0x3, "NV_ERR_BUSY_RETRY"),
    (0x4, "NV_ERR_CALLBACK_NOT_SCHEDULED"),
    (0x5, "NV_ERR_CARD_NOT_PRESENT"),
    (0x6, "NV_ERR_CYCLE_DETECTED"),
    (0x7, "NV_ERR_DMA_IN_USE"),
    (0x8, "NV_ERR_DMA_MEM_NOT_LOCKED"),
    (0x9, "NV_ERR_DMA_MEM_NOT_UNLOCKED"),
    (0xA, "NV_ERR_DUAL_LINK_INUSE"),
    (0xB, "NV_ERR_ECC_ERROR"),
    (0xC, "NV_ERR_FIFO_BAD_ACCESS"),
    (0xD, "NV_ERR_FREQ_NOT_SUPPORTED"),
    (0xE, "NV_ERR_GPU_DMA_NOT_INITIALIZED"),
    (0xF, "NV_ERR_GPU_IS_LOST"),
    (0x10, "NV_ERR_GPU_IN_FULLCHIP_RESET"),
    (0x11, "NV_ERR_GPU_NOT_FULL_POWER"),
    (0x12, "NV_ERR_GPU_UUID_NOT_FOUND"),
    (0x13, "NV_ERR_HOT_SWITCH"),
    (0x14, "NV_ERR_I2C_ERROR"),
    (0x15, "NV_ERR_I2C_SPEED_TOO_HIGH"),
    (0x16, "NV_ERR_ILLEGAL_ACTION"),
    (0x17, "NV_ERR_IN_USE"),
    (0x18, "NV_ERR_INFLATE_COMPRESSED_DATA_FAILED"),
    (0x19, "NV_ERR_INSERT_DUPLICATE_NAME"),
    (0x1A, "NV_ERR_INSUFFICIENT_RESOURCES"),
    (0x1B, "NV_ERR_INSUFFICIENT_PERMISSIONS"),
    (0x1C, "NV_ERR_INSUFFICIENT_POWER"),
    (0x1D, "NV_ERR_INVALID_ACCESS_TYPE"),
    (0x1E, "NV_ERR_INVALID_ADDRESS"),
    (0x1F, "NV_ERR_INVALID_ARGUMENT"),
    (0x20, "NV_ERR_INVALID_BASE"),
    (0x21, "NV_ERR_INVALID_CHANNEL"),
    (0x22, "NV_ERR_INVALID_CLASS"),
    (0x23, "NV_ERR_INVALID_CLIENT"),
    (0x24, "NV_ERR_INVALID_COMMAND"),
    (0x25, "NV_ERR_INVALID_DATA"),
    (0x26, "NV_ERR_INVALID_DEVICE"),
    (0x27, "NV_ERR_INVALID_DMA_SPECIFIER"),
    (0x28, "NV_ERR_INVALID_EVENT"),
    (0x29, "NV_ERR_INVALID_FLAGS"),
    (0x2A, "NV_ERR_INVALID_FUNCTION"),
    (0x2B, "NV_ERR_INVALID_HEAP"),
    (0x2C, "NV_ERR_INVALID_INDEX"),
    (0x2D, "NV_ERR_INVALID_IRQ_LEVEL"),
    (0x2E, "NV_ERR_INVALID_LIMIT"),
    (0x2F, "NV_ERR_INVALID_LOCK_STATE"),
    (0x30, "NV_ERR_INVALID_METHOD"),
    (0x31, "NV_ERR_INVALID_OBJECT"),
    (0x32, "NV_ERR_INVALID_OBJECT_BUFFER"),
    (0x33, "NV_ERR_INVALID_OBJECT_HANDLE"),
    (0x34, "NV_ERR_INVALID_OBJECT_NEW"),
    (0x35, "NV_ERR_INVALID_OBJECT_OLD"),
    (0x36, "NV_ERR_INVALID_OBJECT_PARENT"),
    (0x37, "NV_ERR_INVALID_OFFSET"),
    (0x38, "NV_ERR_INVALID_OPERATION"),
    (0x39, "NV_ERR_INVALID_OWNER"),
    (0x3A, "NV_ERR_INVALID_PARAM_STRUCT"),
    (0x3B, "NV_ERR_INVALID_PARAMETER"),
    (0x3C, "NV_ERR_INVALID_PATH"),
    (0x3D, "NV_ERR_INVALID_POINTER"),
    (0x3E, "NV_ERR_INVALID_REGISTRY_KEY"),
    (0x3F, "NV_ERR_INVALID_REQUEST"),
    (0x40, "NV_ERR_INVALID_STATE"),
    (0x41, "NV_ERR_INVALID_STRING_LENGTH"),
    (0x42, "NV_ERR_INVALID_READ"),
    (0x43, "NV_ERR_INVALID_WRITE"),
    (0x44, "NV_ERR_INVALID_XLATE"),
    (0x45, "NV_ERR_IRQ_NOT_FIRING"),
    (0x46, "NV_ERR_IRQ_EDGE_TRIGGERED"),
    (0x47, "NV_ERR_MEMORY_TRAINING_FAILED"),
    (0x48, "NV_ERR_MISMATCHED_SLAVE"),
    (0x49, "NV_ERR_MISMATCHED_TARGET"),
    (0x4A, "NV_ERR_MISSING_TABLE_ENTRY"),
    (0x4B, "NV_ERR_MODULE_LOAD_FAILED"),
    (0x4C, "NV_ERR_MORE_DATA_AVAILABLE"),
    (0x4D, "NV_ERR_MORE_PROCESSING_REQUIRED"),
    (0x4E, "NV_ERR_MULTIPLE_MEMORY_TYPES"),
    (0x4F, "NV_ERR_NO_FREE_FIFOS"),
    (0x50, "NV_ERR_NO_INTR_PENDING"),
    (0x51, "NV_ERR_NO_MEMORY"),
    (0x52, "NV_ERR_NO_SUCH_DOMAIN"),
    (0x53, "NV_ERR_NO_VALID_PATH"),
    (0x54, "NV_ERR_NOT_COMPATIBLE"),
    (0x55, "NV_ERR_NOT_READY"),
    (0x56, "NV_ERR_NOT_SUPPORTED"),
    (0x57, "NV_ERR_OBJECT_NOT_FOUND"),
    (0x58, "NV_ERR_OBJECT_TYPE_MISMATCH"),
    (0x59, "NV_ERR_OPERATING_SYSTEM"),
    (0x5A, "NV_ERR_OTHER_DEVICE_FOUND"),
    (0x5B, "NV_ERR_OUT_OF_RANGE"),
    (0x5C, "NV_ERR_OVERLAPPING_UVM_COMMIT"),
    (0x5D, "NV_ERR_PAGE_TABLE_NOT_AVAIL"),
    (0x5E, "NV_ERR_PID_NOT_FOUND"),
    (0x5F, "NV_ERR_PROTECTION_FAULT"),
    (0x60, "NV_ERR_RC_ERROR"),
    (0x61, "NV_ERR_REJECTED_VBIOS"),
    (0x62, "NV_ERR_RESET_REQUIRED"),
    (0x63, "NV_ERR_STATE_IN_USE"),
    (0x64, "NV_ERR_SIGNAL_PENDING"),
    (0x65, "NV_ERR_TIMEOUT"),
    (0x66, "NV_ERR_TIMEOUT_RETRY"),
    (0x67, "NV_ERR_TOO_MANY_PRIMARIES"),
    (0x68, "NV_ERR_UVM_ADDRESS_IN_USE"),
    (0x69, "NV_ERR_MAX_SESSION_LIMIT_REACHED"),
    (0x6A, "NV_ERR_LIB_RM_VERSION_MISMATCH"),
    (0x6B, "NV_ERR_PRIV_SEC_VIOLATION"),
    (0x6C, "NV_ERR_GPU_IN_DEBUG_MODE"),
    (0x6D, "NV_ERR_FEATURE_NOT_ENABLED"),
    (0x6E, "NV_ERR_RESOURCE_LOST"),
    (0x6F, "NV_ERR_PMU_NOT_READY"),
    (0x70, "NV_ERR_FLCN_ERROR"),
    (0x71, "NV_ERR_FATAL_ERROR"),
    (0x72, "NV_ERR_MEMORY_ERROR"),
    (0x73, "NV_ERR_INVALID_LICENSE"),
    (0x74, "NV_ERR_NVLINK_INIT_ERROR"),
    (0x75, "NV_ERR_NVLINK_MINION_ERROR"),
    (0x76, "NV_ERR_NVLINK_CLOCK_ERROR"),
    (0x77, "NV_ERR_NVLINK_TRAINING_ERROR"),
    (0x78, "NV_ERR_NVLINK_CONFIGURATION_ERROR"),
    (0x79, "NV_ERR_RISCV_ERROR"),
    (0x7A, "NV_ERR_FABRIC_MANAGER_NOT_PRESENT"),
    (0x7B, "NV_ERR_ALREADY_SIGNALLED"),
    (0x7C, "NV_ERR_QUEUE_TASK_SLOT_NOT_AVAILABLE"),
    (0x7D, "NV_ERR_KEY_ROTATION_IN_PROGRESS"),
    (0x7E, "NV_ERR_TEST_ONLY_CODE_NOT_ENABLED"),
    (0x7F, "NV_ERR_SECURE_BOOT_FAILED"),
    (0x80, "NV_ERR_INSUFFICIENT_ZBC_ENTRY"),
    (0x81, "NV_ERR_NVLINK_FABRIC_NOT_READY"),
    (0x82, "NV_ERR_NVLINK_FABRIC_FAILURE"),
    (0x83, "NV_ERR_GPU_MEMORY_ONLINING_FAILURE"),
    (0x84, "NV_ERR_REDUCTION_MANAGER_NOT_AVAILABLE"),
    (0x85, "NV_ERR_THRESHOLD_CROSSED"),
    (0x86, "NV_ERR_RESOURCE_RETIREMENT_ERROR"),
    (0x87, "NV_ERR_FABRIC_STATE_OUT_OF_SYNC"),
    (0x88, "NV_ERR_BUFFER_FULL"),
    (0x89, "NV_ERR_BUFFER_EMPTY"),
    (0x8A, "NV_ERR_MC_FLA_OFFSET_TABLE_FULL"),
    (0x8B, "NV_ERR_OPERATION_ABORTED"),
    (0x8C, "NV_ERR_DMA_XFER_FAILED"),
    (0xFFFF, "NV_ERR_GENERIC"),
    (0x10001, "NV_WARN_HOT_SWITCH"),
    (0x10002, "NV_WARN_INCORRECT_PERFMON_DATA"),
    (0x10003, "NV_WARN_MISMATCHED_SLAVE"),
    (0x10004, "NV_WARN_MISMATCHED_TARGET"),
    (0x10005, "NV_WARN_MORE_PROCESSING_REQUIRED"),
    (0x10006, "NV_WARN_NOTHING_TO_DO"),
    (0x10007, "NV_WARN_NULL_OBJECT"),
    (0x10008, "NV_WARN_OUT_OF_RANGE"),
    (0x10009, "NV_WARN_THRESHOLD_CROSSED"),
];

/// Name of an NV_STATUS code, or None for a number the table does not know.
pub fn name(code: u32) -> Option<&'static str> {
    STATUS
        .binary_search_by_key(&code, |(c, _)| *c)
        .ok()
        .map(|i| STATUS[i].1)
}

/// Non-OK results that are normal answers, not failures (docs/NVIDIA-ABI.md §3.1,
/// §7.3): a probing control that the GPU does not support, and UVM's
/// "nothing to do" for UVM_MM_INITIALIZE when the va_space_mm is disabled.
pub fn is_benign(code: u32) -> bool {
    matches!(code, 0 | 0x56 | 0x10006)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_complete_and_sorted() {
        assert_eq!(STATUS.len(), 151);
        assert!(STATUS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(
            STATUS
                .iter()
                .filter(|(_, n)| n.starts_with("NV_WARN_"))
                .count(),
            9
        );
    }

    #[test]
    fn known_codes() {
        assert_eq!(name(0), Some("NV_OK"));
        assert_eq!(name(0x56), Some("NV_ERR_NOT_SUPPORTED"));
        assert_eq!(name(0x1F), Some("NV_ERR_INVALID_ARGUMENT"));
        assert_eq!(name(0x16), Some("NV_ERR_ILLEGAL_ACTION"));
        assert_eq!(name(0xFFFF), Some("NV_ERR_GENERIC"));
        assert_eq!(name(0x10006), Some("NV_WARN_NOTHING_TO_DO"));
        assert_eq!(name(0x8C), Some("NV_ERR_DMA_XFER_FAILED"));
        assert_eq!(name(0x8D), None);
        assert_eq!(name(0xdead_beef), None);
    }
}
