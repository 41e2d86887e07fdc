//! Which libcuda functions each `--libcuda-hooks` set hooks, by name (the
//! numbers are `nvprobe_common::CUDA_FUNCS`'): the start-up set, where
//! run-time faults surface, and the kernel launches.

/// The default set: initialisation and version, device enumeration and
/// queries, contexts, the first allocations and module loads, peer access
/// (a child forked after its parent's cuInit makes one of these first;
/// each answers it CUDA_ERROR_NOT_INITIALIZED). Left out: anything a
/// running program calls per kernel launch, copy or synchronisation
/// (cuLaunchKernel, cuMemcpy*, cuStreamSynchronize, cuEventRecord,
/// cuCtxGetDevice and cuDevicePrimaryCtxGetState, which PyTorch calls 6 and
/// 2 times per small op,
/// cuCtxSetCurrent, …), which `--libcuda-hooks all` adds.
pub const STARTUP: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
    "cuGetExportTable",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetUuid",
    "cuDeviceGetUuid_v2",
    "cuDeviceTotalMem",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetAttribute",
    "cuDeviceGetPCIBusId",
    "cuDeviceGetByPCIBusId",
    "cuDeviceComputeCapability",
    "cuDeviceGetProperties",
    "cuDeviceCanAccessPeer",
    "cuDeviceGetP2PAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease",
    "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxSetFlags",
    "cuDevicePrimaryCtxSetFlags_v2",
    "cuDevicePrimaryCtxReset",
    "cuDevicePrimaryCtxReset_v2",
    "cuCtxCreate",
    "cuCtxCreate_v2",
    "cuCtxCreate_v3",
    "cuCtxCreate_v4",
    "cuCtxDestroy",
    "cuCtxDestroy_v2",
    "cuCtxEnablePeerAccess",
    // The CUDA runtime's first driver call in a child forked after its
    // parent's start-up (seen on the H200 with libcudart 13: cudaMalloc in
    // the child calls cuCtxGetCurrent, gets 3, and calls nothing else).
    "cuCtxGetCurrent",
    "cuMemGetInfo",
    "cuMemGetInfo_v2",
    "cuMemAlloc",
    "cuMemAlloc_v2",
    "cuMemAllocManaged",
    "cuMemAllocPitch",
    "cuMemAllocPitch_v2",
    "cuMemAllocHost",
    "cuMemAllocHost_v2",
    "cuMemHostAlloc",
    "cuMemHostRegister",
    "cuMemHostRegister_v2",
    "cuMemCreate",
    "cuMemAddressReserve",
    "cuModuleLoad",
    "cuModuleLoadData",
    "cuModuleLoadDataEx",
    "cuModuleLoadFatBinary",
    "cuLibraryLoadData",
    "cuLibraryLoadFromFile",
    "cuStreamCreate",
    "cuStreamCreateWithPriority",
    "cuIpcOpenMemHandle",
    "cuIpcOpenMemHandle_v2",
];

/// Where a fault at run time surfaces (`--libcuda-hooks faults`, the
/// default): a sticky error (CUDA_ERROR_ILLEGAL_ADDRESS, LAUNCH_FAILED,
/// ECC_UNCORRECTABLE, …) is returned by the next synchronisation, copy,
/// memset or free, and by every later call. Only their failures are sent
/// (`nvprobe_common::CUDA_FAULT_ONLY`). Left out: launches (a hooked
/// cuLaunchKernel costs ~2.4 µs on a 5 µs launch; a fault a launch returns
/// is returned again by the next synchronisation), queries
/// (cuStreamQuery, cuEventQuery: polled in loops) and what is enqueued per
/// step (cuEventRecord, cuStreamWaitEvent, cuGraphLaunch).
pub const FAULTS: &[&str] = &[
    "cuCtxSynchronize",
    "cuCtxSynchronize_v2",
    "cuStreamSynchronize",
    "cuStreamSynchronize_ptsz",
    "cuEventSynchronize",
    "cuMemcpy",
    "cuMemcpy_ptds",
    "cuMemcpyAsync",
    "cuMemcpyAsync_ptsz",
    "cuMemcpyHtoD_v2",
    "cuMemcpyHtoD_v2_ptds",
    "cuMemcpyDtoH_v2",
    "cuMemcpyDtoH_v2_ptds",
    "cuMemcpyDtoD_v2",
    "cuMemcpyDtoD_v2_ptds",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyHtoDAsync_v2_ptsz",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoHAsync_v2_ptsz",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpyDtoDAsync_v2_ptsz",
    "cuMemcpy2D_v2",
    "cuMemcpy2DAsync_v2",
    "cuMemcpy3D_v2",
    "cuMemcpy3DAsync_v2",
    "cuMemcpyPeer",
    "cuMemcpyPeerAsync",
    "cuMemsetD8_v2",
    "cuMemsetD8_v2_ptds",
    "cuMemsetD32_v2",
    "cuMemsetD32_v2_ptds",
    "cuMemsetD8Async",
    "cuMemsetD32Async",
    "cuMemFree_v2",
    "cuMemFreeHost",
    "cuMemFreeAsync",
    "cuModuleUnload",
    "cuLibraryUnload",
    "cuStreamDestroy_v2",
    "cuEventDestroy_v2",
];

/// Kernel launches (`--libcuda-hooks launches`): a launch the driver
/// refuses at once (too many threads per block, more shared memory than a
/// multiprocessor has, a cluster or cooperative grid too large) returns
/// its error from the launch alone, not from the next synchronisation, so
/// the faults set never sees it. Not in the default set: each launch then
/// pays a uprobe round trip.
pub const LAUNCHES: &[&str] = &[
    "cuLaunchKernel",
    "cuLaunchKernel_ptsz",
    "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernel_ptsz",
    "cuLaunchCooperativeKernelMultiDevice",
    "cuGraphLaunch",
    "cuGraphLaunch_ptsz",
];
