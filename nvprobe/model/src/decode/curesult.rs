//! CUresult names (cuda.h, CUDA 13). Unknown values stay numeric.

pub const CURESULTS: &[(i64, &str)] = &[
    (0, "CUDA_SUCCESS"),
    (1, "CUDA_ERROR_INVALID_VALUE"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    (3, "CUDA_ERROR_NOT_INITIALIZED"),
    (4, "CUDA_ERROR_DEINITIALIZED"),
    (5, "CUDA_ERROR_PROFILER_DISABLED"),
    (34, "CUDA_ERROR_STUB_LIBRARY"),
    (35, "CUDA_ERROR_INSUFFICIENT_DRIVER"),
    (36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"),
    (46, "CUDA_ERROR_DEVICE_UNAVAILABLE"),
    (100, "CUDA_ERROR_NO_DEVICE"),
    (101, "CUDA_ERROR_INVALID_DEVICE"),
    (102, "CUDA_ERROR_DEVICE_NOT_LICENSED"),
    (200, "CUDA_ERROR_INVALID_IMAGE"),
    (201, "CUDA_ERROR_INVALID_CONTEXT"),
    (216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE"),
    (304, "CUDA_ERROR_OPERATING_SYSTEM"),
    (400, "CUDA_ERROR_INVALID_HANDLE"),
    (500, "CUDA_ERROR_NOT_FOUND"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    (719, "CUDA_ERROR_LAUNCH_FAILED"),
    (801, "CUDA_ERROR_NOT_SUPPORTED"),
    (802, "CUDA_ERROR_SYSTEM_NOT_READY"),
    (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
    (999, "CUDA_ERROR_UNKNOWN"),
];

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
    }
}
