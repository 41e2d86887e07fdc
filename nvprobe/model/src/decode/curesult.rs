//! CUresult names (cuda.h, CUDA 13). Unknown values stay numeric.

pub const CURESULTS: &[(i64, &str)] = &[
    (0, "CUDA_SUCCESS"),
    (1, "CUDA_ERROR_INVALID_VALUE"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    (3, "CUDA_ERROR_NOT_INITIALIZED"),
    (4, "CUDA_ERROR_DEINITIALIZED"),
    (5, "CUDA_ERROR_PROFILER_DISABLED"),
    (6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED"),
    (7, "CUDA_ERROR_PROFILER_ALREADY_STARTED"),
    (8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED"),
    (34, "CUDA_ERROR_STUB_LIBRARY"),
    (35, "CUDA_ERROR_INSUFFICIENT_DRIVER"),
    (36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"),
    (46, "CUDA_ERROR_DEVICE_UNAVAILABLE"),
    (100, "CUDA_ERROR_NO_DEVICE"),
    (101, "CUDA_ERROR_INVALID_DEVICE"),
    (102, "CUDA_ERROR_DEVICE_NOT_LICENSED"),
    (200, "CUDA_ERROR_INVALID_IMAGE"),
    (201, "CUDA_ERROR_INVALID_CONTEXT"),
    (202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT"),
    (205, "CUDA_ERROR_MAP_FAILED"),
    (206, "CUDA_ERROR_UNMAP_FAILED"),
    (207, "CUDA_ERROR_ARRAY_IS_MAPPED"),
    (208, "CUDA_ERROR_ALREADY_MAPPED"),
    (209, "CUDA_ERROR_NO_BINARY_FOR_GPU"),
    (210, "CUDA_ERROR_ALREADY_ACQUIRED"),
    (211, "CUDA_ERROR_NOT_MAPPED"),
    (212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY"),
    (213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER"),
    (214, "CUDA_ERROR_ECC_UNCORRECTABLE"),
    (215, "CUDA_ERROR_UNSUPPORTED_LIMIT"),
    (216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE"),
    (217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"),
    (218, "CUDA_ERROR_INVALID_PTX"),
    (219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT"),
    (220, "CUDA_ERROR_NVLINK_UNCORRECTABLE"),
    (221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
    (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
    (223, "CUDA_ERROR_JIT_COMPILATION_DISABLED"),
    (224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY"),
    (225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC"),
    (300, "CUDA_ERROR_INVALID_SOURCE"),
    (301, "CUDA_ERROR_FILE_NOT_FOUND"),
    (302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND"),
    (303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED"),
    (304, "CUDA_ERROR_OPERATING_SYSTEM"),
    (400, "CUDA_ERROR_INVALID_HANDLE"),
    (401, "CUDA_ERROR_ILLEGAL_STATE"),
    (402, "CUDA_ERROR_LOSSY_QUERY"),
    (500, "CUDA_ERROR_NOT_FOUND"),
    (600, "CUDA_ERROR_NOT_READY"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
    (702, "CUDA_ERROR_LAUNCH_TIMEOUT"),
    (703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING"),
    (704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"),
    (705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"),
    (708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE"),
    (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"),
    (710, "CUDA_ERROR_ASSERT"),
    (711, "CUDA_ERROR_TOO_MANY_PEERS"),
    (712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"),
    (713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"),
    (714, "CUDA_ERROR_HARDWARE_STACK_ERROR"),
    (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    (716, "CUDA_ERROR_MISALIGNED_ADDRESS"),
    (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE"),
    (718, "CUDA_ERROR_INVALID_PC"),
    (719, "CUDA_ERROR_LAUNCH_FAILED"),
    (720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"),
    (800, "CUDA_ERROR_NOT_PERMITTED"),
    (801, "CUDA_ERROR_NOT_SUPPORTED"),
    (802, "CUDA_ERROR_SYSTEM_NOT_READY"),
    (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
    (805, "CUDA_ERROR_MPS_CONNECTION_FAILED"),
    (806, "CUDA_ERROR_MPS_RPC_FAILURE"),
    (807, "CUDA_ERROR_MPS_SERVER_NOT_READY"),
    (808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED"),
    (809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED"),
    (810, "CUDA_ERROR_MPS_CLIENT_TERMINATED"),
    (811, "CUDA_ERROR_CDP_NOT_SUPPORTED"),
    (812, "CUDA_ERROR_CDP_VERSION_MISMATCH"),
    (900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"),
    (901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"),
    (902, "CUDA_ERROR_STREAM_CAPTURE_MERGE"),
    (903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"),
    (904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"),
    (905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"),
    (906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"),
    (907, "CUDA_ERROR_CAPTURED_EVENT"),
    (908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"),
    (909, "CUDA_ERROR_TIMEOUT"),
    (910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"),
    (911, "CUDA_ERROR_EXTERNAL_DEVICE"),
    (912, "CUDA_ERROR_INVALID_CLUSTER_SIZE"),
    (913, "CUDA_ERROR_FUNCTION_NOT_LOADED"),
    (914, "CUDA_ERROR_INVALID_RESOURCE_TYPE"),
    (915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"),
    (916, "CUDA_ERROR_KEY_ROTATION"),
    (999, "CUDA_ERROR_UNKNOWN"),
];

/// A fault in the program's GPU code that leaves the context unusable
/// (cuda.h: "the process must be terminated and relaunched" is said of
/// each): every later call returns it too.
pub fn program_fault(code: i64) -> bool {
    matches!(code, 700 | 702 | 710 | 714 | 715 | 716 | 717 | 718 | 719)
}

/// An uncorrectable hardware error the driver API returns (cuda.h:
/// ECC_UNCORRECTABLE, NVLINK_UNCORRECTABLE).
pub fn hardware(code: i64) -> bool {
    matches!(code, 214 | 220)
}

/// What a launch the driver refused at once means (cuda.h): the kernel did
/// not run and the context is still usable. None for an error that is not
/// a launch's own.
pub fn launch_refusal(code: i64) -> Option<&'static str> {
    Some(match code {
        1 => {
            "an argument of the launch is invalid: a grid or block dimension of 0 or over the device's limits (1024 threads per block), or more dynamic shared memory than the function was allowed (cuFuncSetAttribute)"
        }
        400 => {
            "the function or stream handle is not valid in this context (a module unloaded, another context's handle)"
        }
        701 => {
            "the launch asks for more than a multiprocessor has (registers per thread times threads per block, or shared memory): use smaller blocks or fewer registers (nvcc -Xptxas -v shows them)"
        }
        703 => "the launch uses texturing the kernel's target does not support",
        720 => "a cooperative launch has more blocks than can be resident on the device at once",
        912 => "the cluster size is not valid for the kernel or the device",
        _ => return None,
    })
}

/// A sticky or fatal error at run time: a program fault, a hardware
/// error, an error on an external device (911, sticky per cuda.h), or
/// CUDA_ERROR_UNKNOWN.
pub fn fatal(code: i64) -> bool {
    program_fault(code) || hardware(code) || matches!(code, 911 | 999)
}

pub fn name(code: i64) -> Option<&'static str> {
    CURESULTS
        .binary_search_by_key(&code, |(c, _)| *c)
        .ok()
        .map(|i| CURESULTS[i].1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names() {
        assert!(super::CURESULTS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(super::name(3), Some("CUDA_ERROR_NOT_INITIALIZED"));
        assert_eq!(super::name(999), Some("CUDA_ERROR_UNKNOWN"));
        assert_eq!(super::name(100), Some("CUDA_ERROR_NO_DEVICE"));
        assert_eq!(super::name(12345), None);
        // What the H200 returned for gpufault.py's cases.
        assert_eq!(super::name(716), Some("CUDA_ERROR_MISALIGNED_ADDRESS"));
        assert_eq!(super::name(710), Some("CUDA_ERROR_ASSERT"));
        for c in [700, 710, 716, 719] {
            assert!(super::fatal(c) && super::program_fault(c), "{c}");
        }
        for c in [0, 1, 2, 201, 600, 701] {
            assert!(!super::fatal(c), "{c}");
        }
        assert!(super::hardware(214) && super::fatal(214) && !super::program_fault(214));
    }
}
