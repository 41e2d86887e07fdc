//! libcuda functions by their numbers (`nvprobe_common::CUDA_API`, the
//! uprobes' cookies): the ones the model names, and which are a
//! start-up's own. Names are for display (`nvprobe_common::cuda_func_name`).

pub const CU_INIT: u32 = 1;
pub const CU_DRIVER_GET_VERSION: u32 = 2;
pub const CU_DEVICE_GET_COUNT: u32 = 3;
pub const CU_DEVICE_GET: u32 = 4;
pub const CU_DEVICE_PRIMARY_CTX_RETAIN: u32 = 5;
pub const CU_CTX_CREATE: u32 = 6;
pub const CU_CTX_CREATE_V2: u32 = 7;
pub const CU_DEVICE_GET_BY_PCI_BUS_ID: u32 = 62;
pub const CU_GET_ERROR_NAME: u32 = 141;
pub const CU_GET_ERROR_STRING: u32 = 142;
pub const CU_GET_EXPORT_TABLE: u32 = 143;
pub const CU_GET_PROC_ADDRESS: u32 = 144;
pub const CU_GET_PROC_ADDRESS_V2: u32 = 145;

/// Kernel launches (`--libcuda-hooks launches`): cuGraphLaunch(_ptsz),
/// cuLaunchCooperativeKernel(MultiDevice, _ptsz), cuLaunchKernel(Ex,
/// _ptsz). A launch the driver refuses returns its error here only.
pub const LAUNCHES: [u32; 9] = [215, 216, 275, 276, 277, 282, 283, 284, 285];

pub fn is_launch(f: u32) -> bool {
    LAUNCHES.contains(&f)
}

/// The function's name, as decoded records show it.
pub fn name(f: u32) -> &'static str {
    nvprobe_common::cuda_func_name(f).unwrap_or("unknown")
}

/// Calls that start nothing: nvidia-smi asks for export tables without a
/// cuInit, and a version query or a symbol lookup is no CUDA start-up
/// either.
pub const NOT_STARTING: [u32; 6] = [
    CU_GET_EXPORT_TABLE,
    CU_DRIVER_GET_VERSION,
    CU_GET_PROC_ADDRESS,
    CU_GET_PROC_ADDRESS_V2,
    CU_GET_ERROR_STRING,
    CU_GET_ERROR_NAME,
];

/// Device lookups before the first context: one that fails ends the
/// start-up (a program has no device to make a context on).
pub const DEVICE_LOOKUPS: [u32; 3] = [
    CU_DEVICE_GET,
    CU_DEVICE_GET_COUNT,
    CU_DEVICE_GET_BY_PCI_BUS_ID,
];

/// Whether `f` makes a first context (the kernel side quiets a process
/// after the first that succeeds).
pub fn makes_context(f: u32) -> bool {
    nvprobe_common::CUDA_CONTEXT_FUNCS.contains(&f)
}

/// A start-up call: cuInit, the driver's version, the device queries
/// (cuDevice*), the lookups (cuGet*) and the context creations; their
/// failures are the start-up verdict's to judge, not a run-time fault's.
pub fn is_startup(f: u32) -> bool {
    nvprobe_common::cuda_func_name(f).is_some_and(|n| {
        ["cuInit", "cuDriver", "cuDevice", "cuGet", "cuCtxCreate"]
            .iter()
            .any(|p| n.starts_with(p))
    })
}

/// A call that waits for work on the GPU to finish before it returns: a
/// synchronisation (context, stream, event), or a copy or memset that is
/// not asynchronous. A hang there is the GPU's work not ending; a free,
/// an unload or a destroy that hangs waits for the driver.
pub fn waits_for_gpu(f: u32) -> bool {
    nvprobe_common::cuda_func_name(f).is_some_and(|n| {
        n.contains("Synchronize")
            || ((n.starts_with("cuMemcpy") || n.starts_with("cuMemset")) && !n.contains("Async"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each number is the function its name says, in the generated table.
    #[test]
    fn the_numbers_are_the_tables() {
        for (n, name) in [
            (CU_INIT, "cuInit"),
            (CU_DRIVER_GET_VERSION, "cuDriverGetVersion"),
            (CU_DEVICE_GET_COUNT, "cuDeviceGetCount"),
            (CU_DEVICE_GET, "cuDeviceGet"),
            (CU_DEVICE_PRIMARY_CTX_RETAIN, "cuDevicePrimaryCtxRetain"),
            (CU_CTX_CREATE, "cuCtxCreate"),
            (CU_CTX_CREATE_V2, "cuCtxCreate_v2"),
            (CU_DEVICE_GET_BY_PCI_BUS_ID, "cuDeviceGetByPCIBusId"),
            (CU_GET_ERROR_NAME, "cuGetErrorName"),
            (CU_GET_ERROR_STRING, "cuGetErrorString"),
            (CU_GET_EXPORT_TABLE, "cuGetExportTable"),
            (CU_GET_PROC_ADDRESS, "cuGetProcAddress"),
            (CU_GET_PROC_ADDRESS_V2, "cuGetProcAddress_v2"),
        ] {
            assert_eq!(nvprobe_common::cuda_func_name(n), Some(name));
        }
        assert!(
            is_startup(CU_CTX_CREATE_V2)
                && !is_startup(
                    nvprobe_common::cuda_func_number("cuCtxSynchronize").expect("in the table")
                )
        );
        assert!(makes_context(CU_CTX_CREATE_V2) && !makes_context(CU_INIT));
    }

    #[test]
    fn waits_are_synchronisations_and_synchronous_copies() {
        let n = |name: &str| nvprobe_common::cuda_func_number(name).expect(name);
        for w in [
            "cuCtxSynchronize",
            "cuStreamSynchronize",
            "cuEventSynchronize",
            "cuMemcpyDtoH_v2",
            "cuMemsetD8_v2",
        ] {
            assert!(waits_for_gpu(n(w)), "{w}");
        }
        for w in ["cuMemcpyAsync", "cuMemFree_v2", "cuLaunchKernel", "cuInit"] {
            assert!(!waits_for_gpu(n(w)), "{w}");
        }
    }
}
